//! What the workers hand to the control plane: punted packets, copied into fixed-size records
//! on a lock-free single-producer ring per worker (no allocation on the worker; the record is
//! `Copy`, so the ring's slots are allocated once when it is made).

use crate::packet::PortId;

/// Bytes of a punted packet kept (a full untagged 1500-byte frame with two tags fits).
pub const PUNT_SNAPLEN: usize = 1536;

/// "No session" in [`PuntRecord::slot`].
pub const NO_SLOT: u32 = u32::MAX;

/// Why a packet was punted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[repr(u8)]
pub enum PuntReason {
    /// DHCPv4 (UDP 67/68) from a subscriber.
    #[default]
    Dhcp = 0,
    /// ARP not answered by proxy ARP.
    Arp = 1,
    /// HTTP from a captive session, for the portal redirect.
    HttpRedirect = 2,
}

impl PuntReason {
    /// From the metadata byte.
    pub fn from_u8(v: u8) -> Self {
        match v {
            1 => PuntReason::Arp,
            2 => PuntReason::HttpRedirect,
            _ => PuntReason::Dhcp,
        }
    }
}

/// A punted packet.
#[derive(Debug, Clone, Copy)]
pub struct PuntRecord {
    /// Why.
    pub reason: PuntReason,
    /// Receive port.
    pub port: PortId,
    /// Worker index.
    pub worker: u16,
    /// Session slot, or [`NO_SLOT`] when the packet has no session yet (DHCP, ARP).
    pub slot: u32,
    /// Bytes kept in `data`.
    pub len: u16,
    /// Length of the packet on the wire.
    pub orig_len: u32,
    /// The packet, from its Ethernet header.
    pub data: [u8; PUNT_SNAPLEN],
}

impl Default for PuntRecord {
    fn default() -> Self {
        Self {
            reason: PuntReason::Dhcp,
            port: PortId::Access,
            worker: 0,
            slot: NO_SLOT,
            len: 0,
            orig_len: 0,
            data: [0; PUNT_SNAPLEN],
        }
    }
}

impl PuntRecord {
    /// The kept bytes.
    pub fn bytes(&self) -> &[u8] {
        &self.data[..usize::from(self.len).min(PUNT_SNAPLEN)]
    }
}

/// Where the punt node delivers records.
pub trait PuntSink {
    /// Deliver one record; `false` if the queue is full (the packet is dropped and counted).
    fn deliver(&mut self, rec: &PuntRecord) -> bool;
}

/// A worker's end of its punt ring. It remembers that something was pushed, so the worker
/// rings the punt pump once per burst that punted rather than once per packet.
#[derive(Debug)]
pub struct PuntRing {
    ring: rtrb::Producer<PuntRecord>,
    pushed: bool,
}

impl PuntRing {
    /// The producer end of a ring whose consumer is the punt pump.
    pub fn new(ring: rtrb::Producer<PuntRecord>) -> Self {
        Self {
            ring,
            pushed: false,
        }
    }

    /// Whether anything was pushed since the last call.
    #[inline]
    pub fn take_pushed(&mut self) -> bool {
        std::mem::take(&mut self.pushed)
    }
}

impl PuntSink for PuntRing {
    #[inline]
    fn deliver(&mut self, rec: &PuntRecord) -> bool {
        let ok = self.ring.push(*rec).is_ok();
        // Not `self.pushed |= ok`: rustc 1.95 at opt-level 2 and 3 miscompiles that form here
        // (a refused push after a reported one read back as pushed; the test below fails in
        // release builds with it), a bool compound assignment like rust-lang/rust#150904.
        if ok {
            self.pushed = true;
        }
        ok
    }
}

/// A sink that accepts nothing (benchmarks without a control plane count "punt queue full").
#[derive(Debug, Default)]
pub struct NullPuntSink;

impl PuntSink for NullPuntSink {
    fn deliver(&mut self, _rec: &PuntRecord) -> bool {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_punt_ring_reports_pushes_once_and_not_refusals() {
        let (tx, mut rx) = rtrb::RingBuffer::<PuntRecord>::new(1);
        let mut ring = PuntRing::new(tx);
        assert!(!ring.take_pushed());
        assert!(ring.deliver(&PuntRecord::default()));
        assert!(!ring.deliver(&PuntRecord::default()), "the ring holds one");
        assert!(ring.take_pushed());
        assert!(!ring.take_pushed(), "reported once");
        assert!(!ring.deliver(&PuntRecord::default()));
        assert!(!ring.take_pushed(), "a refused record is no push");
        assert!(rx.pop().is_ok());
    }
}
