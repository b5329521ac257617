//! Packets behind a small trait, so the pipeline runs on DPDK mbufs in production and on heap
//! buffers in unit tests, the allocation test and the no-EAL benchmark.

use arrayvec::ArrayVec;

/// The most packets one frame (vector) carries through the graph, as in VPP.
pub const FRAME_SIZE: usize = 256;

/// A packet buffer with headroom: the operations the graph needs, nothing else.
pub trait PacketBuf {
    /// The packet bytes.
    fn data(&self) -> &[u8];
    /// The packet bytes, writable.
    fn data_mut(&mut self) -> &mut [u8];
    /// Grow the packet by `n` bytes at the front; `false` (packet unchanged) without headroom.
    fn prepend(&mut self, n: usize) -> bool;
    /// Remove `n` bytes from the front; `false` (packet unchanged) if it is shorter.
    fn adj(&mut self, n: usize) -> bool;
    /// Remove `n` bytes from the end; `false` (packet unchanged) if it is shorter.
    fn trim(&mut self, n: usize) -> bool;
}

/// Which port a packet came from or goes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
#[repr(u8)]
pub enum PortId {
    /// Subscriber-facing.
    #[default]
    Access = 0,
    /// Core-facing.
    Uplink = 1,
}

/// Direction of subscriber traffic.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
#[repr(u8)]
pub enum Direction {
    /// Subscriber to core.
    #[default]
    Up = 0,
    /// Core to subscriber.
    Down = 1,
}

/// Per-packet metadata written by one node and read by the next (VPP's buffer opaque).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Meta {
    /// Receive port.
    pub rx_port: PortId,
    /// Direction, set by ethernet-input for IPv4.
    pub dir: Direction,
    /// Offset of the L3 header.
    pub l3: u16,
    /// Outer VLAN id (0 if untagged).
    pub outer_vid: u16,
    /// Inner VLAN id (0 if single-tagged or untagged).
    pub inner_vid: u16,
    /// Session slot, set by session-lookup.
    pub slot: u32,
    /// Source MAC, set by ethernet-input (the upstream key needs it).
    pub src_mac: [u8; 6],
    /// IPv4 source (host order), set by ethernet-input for IPv4.
    pub src_ip: u32,
    /// IPv4 destination (host order), set by ethernet-input for IPv4.
    pub dst_ip: u32,
    /// IPv4 total length, set by ethernet-input for IPv4 (the metered length).
    pub ip_len: u16,
    /// Punt reason code, set by the node that punts.
    pub punt_reason: u8,
}

/// A packet and its metadata.
#[derive(Debug)]
pub struct Pkt<P> {
    /// The buffer.
    pub buf: P,
    /// Metadata.
    pub meta: Meta,
}

impl<P: PacketBuf> Pkt<P> {
    /// A freshly received packet.
    pub fn new(buf: P, rx_port: PortId) -> Self {
        Self {
            buf,
            meta: Meta {
                rx_port,
                ..Meta::default()
            },
        }
    }
}

/// A fixed-capacity vector of packets (no allocation, ever).
pub type Frame<P> = ArrayVec<Pkt<P>, FRAME_SIZE>;

/// The packets leaving by one port: buffers without their metadata, which no node reads after
/// the last one. Handing a packet to transmit then moves one pointer, not a 40-byte [`Pkt`].
pub type TxFrame<P> = ArrayVec<P, FRAME_SIZE>;

/// Bytes of headroom in a [`HeapBuf`] (DPDK's `RTE_PKTMBUF_HEADROOM`).
pub const HEAP_HEADROOM: usize = 128;
/// Data room of a [`HeapBuf`].
pub const HEAP_ROOM: usize = 2048;

/// A heap packet buffer with mbuf-like headroom, for tests and the no-EAL benchmark.
///
/// Its storage is allocated once; `reset` refills it without allocating.
#[derive(Debug, Clone)]
pub struct HeapBuf {
    room: Box<[u8; HEAP_ROOM]>,
    start: usize,
    len: usize,
}

impl HeapBuf {
    /// A buffer holding `bytes` after the standard headroom (truncated to the room).
    pub fn from_bytes(bytes: &[u8]) -> Self {
        let mut b = Self {
            room: Box::new([0; HEAP_ROOM]),
            start: HEAP_HEADROOM,
            len: 0,
        };
        b.reset(bytes);
        b
    }

    /// Replace the contents with `bytes`, restoring the headroom; no allocation.
    pub fn reset(&mut self, bytes: &[u8]) {
        let n = bytes.len().min(HEAP_ROOM - HEAP_HEADROOM);
        self.start = HEAP_HEADROOM;
        self.len = n;
        self.room[HEAP_HEADROOM..HEAP_HEADROOM + n].copy_from_slice(&bytes[..n]);
    }
}

impl PacketBuf for HeapBuf {
    fn data(&self) -> &[u8] {
        &self.room[self.start..self.start + self.len]
    }
    fn data_mut(&mut self) -> &mut [u8] {
        &mut self.room[self.start..self.start + self.len]
    }
    fn prepend(&mut self, n: usize) -> bool {
        if n > self.start {
            return false;
        }
        self.start -= n;
        self.len += n;
        true
    }
    fn adj(&mut self, n: usize) -> bool {
        if n > self.len {
            return false;
        }
        self.start += n;
        self.len -= n;
        true
    }
    fn trim(&mut self, n: usize) -> bool {
        if n > self.len {
            return false;
        }
        self.len -= n;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heapbuf_prepend_adj() {
        let mut b = HeapBuf::from_bytes(&[1, 2, 3]);
        assert!(b.prepend(2));
        b.data_mut()[..2].copy_from_slice(&[8, 9]);
        assert_eq!(b.data(), &[8, 9, 1, 2, 3]);
        assert!(b.adj(3));
        assert_eq!(b.data(), &[2, 3]);
        assert!(!b.adj(3));
        assert!(!b.prepend(HEAP_ROOM));
        assert_eq!(b.data(), &[2, 3]);
    }
}
