//! The graph nodes, one per file, VPP style: each node takes a frame (vector) of packets,
//! decides a next node for each with a plain `match` (no per-packet dynamic dispatch) and
//! pushes it into that next node's frame. Drops are counted with a reason and freed on the spot.
//!
//! ```text
//!  rx access ─┐                 ┌─► arp-reply ──────────────────────────────► tx access
//!             │                 ├─► uplink-arp (learns the next hop) ─────────► tx uplink
//!             ├─► ethernet-input├─► punt (DHCP, ARP, portal HTTP) ──► punt ring
//!  rx uplink ─┘                 └─► session-lookup ─┬─► walled-garden ─┐
//!                                                   └───────────────────┴─► policer ─► ip4-rewrite ─► tx
//!                                                           TTL expired: icmp-error ◄──┘  ─► tx
//! ```

pub mod arp_reply;
pub mod ethernet_input;
pub mod icmp_error;
pub mod ip4_rewrite;
pub mod policer;
pub mod punt;
pub mod session_lookup;
pub mod uplink_arp;
pub mod walled_garden;

use std::sync::Arc;

use crate::neighbour::NextHopCell;
use crate::packet::{Frame, Pkt, TxFrame};

/// Static per-worker environment of the nodes (from validated start-up config).
#[derive(Debug, Clone)]
pub struct NodeEnv {
    /// MAC of the access port (source of downstream frames, the subscribers' gateway MAC).
    pub access_mac: [u8; 6],
    /// MAC of the uplink port.
    pub uplink_mac: [u8; 6],
    /// MAC of the uplink next hop, as read from `next_hop` at the start of the burst.
    pub next_hop_mac: [u8; 6],
    /// Whether `next_hop_mac` is resolved (read with it).
    pub next_hop_resolved: bool,
    /// TPID of the outer tag pushed on double-tagged downstream frames (0x8100 or 0x88a8).
    pub outer_tpid: u16,
    /// Our uplink IPv4 address (host order; 0: none configured, uplink ARP is punted).
    pub uplink_ip: u32,
    /// The next hop's IPv4 address (host order; 0: its MAC is configured, not learned).
    pub next_hop_ip: u32,
    /// The next hop's MAC, shared by every worker and the resolver.
    pub next_hop: Arc<NextHopCell>,
}

impl NodeEnv {
    /// Read the next hop's MAC once for the burst (one atomic load).
    #[inline(always)]
    pub fn refresh_next_hop(&mut self) {
        match self.next_hop.mac() {
            Some(m) => {
                self.next_hop_mac = m;
                self.next_hop_resolved = true;
            }
            None => self.next_hop_resolved = false,
        }
    }
}

impl Default for NodeEnv {
    fn default() -> Self {
        Self {
            access_mac: [0x02, 0, 0, 0, 0, 0xaa],
            uplink_mac: [0x02, 0, 0, 0, 0, 0xbb],
            next_hop_mac: [0x02, 0, 0, 0, 0, 0xcc],
            next_hop_resolved: true,
            outer_tpid: 0x8100,
            uplink_ip: 0,
            next_hop_ip: 0,
            next_hop: Arc::new(NextHopCell::fixed([0x02, 0, 0, 0, 0, 0xcc])),
        }
    }
}

/// Push into a next node's frame. Frames are drained before their producer runs again and
/// no node emits more packets than it received, so this cannot overflow; if it ever did, the
/// packet is handed back for the caller to drop and count.
#[inline(always)]
pub(crate) fn enqueue<P>(frame: &mut Frame<P>, pkt: Pkt<P>) -> Option<Pkt<P>> {
    frame.try_push(pkt).err().map(|e| e.element())
}

/// Push a packet's buffer into a transmit frame; `true` if it overflowed (the buffer is then
/// dropped here, which frees it, and the caller counts it).
#[inline(always)]
pub(crate) fn enqueue_tx<P>(frame: &mut TxFrame<P>, pkt: Pkt<P>) -> bool {
    frame.try_push(pkt.buf).is_err()
}

/// Read a big-endian u16 at `at` (0 if out of range: callers have checked lengths).
#[inline(always)]
pub(crate) fn be16(b: &[u8], at: usize) -> u16 {
    match b.get(at..at + 2) {
        Some(&[x, y]) => u16::from_be_bytes([x, y]),
        _ => 0,
    }
}

/// Read a big-endian u32 at `at` (0 if out of range).
#[inline(always)]
pub(crate) fn be32(b: &[u8], at: usize) -> u32 {
    match b.get(at..at + 4) {
        Some(&[a, x, y, z]) => u32::from_be_bytes([a, x, y, z]),
        _ => 0,
    }
}

#[cfg(test)]
pub(crate) mod testpkt;
