//! The forwarding fast path's view of a frame: Ethernet with 0, 1 or 2 tags carrying IPv4,
//! read in one pass from a fixed-size prefix, and the TTL decrement of a header already
//! validated.
//!
//! Why a second parser: [`crate::parse_l2`] and [`crate::Ipv4Packet::new_checked`] build rich
//! values and errors, and a dataplane calling them per packet spent about a sixth of its
//! instructions there (callgrind). [`l2_ipv4`] answers only "is this a well-formed IPv4 frame,
//! and what does forwarding need from it"; anything else (ARP, a malformed header, a short
//! frame, a third tag) returns `None`, and the caller takes the generic parsers for the
//! exact error. The property tests hold the two paths to the same answer.

use crate::ethernet::ethertype;
use crate::ipv4::IPV4_HEADER_LEN;
use crate::{Ipv4Packet, L2};

/// The prefix [`l2_ipv4`] reads: a QinQ header (22 bytes) and a minimal IPv4 header.
pub const FAST_PREFIX: usize = 22 + IPV4_HEADER_LEN;

/// What forwarding needs from an IPv4 frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct L2Ipv4 {
    /// Destination MAC.
    pub dst: [u8; 6],
    /// Source MAC.
    pub src: [u8; 6],
    /// Outer VLAN id (0 if untagged).
    pub outer_vid: u16,
    /// Inner VLAN id (0 if fewer than two tags).
    pub inner_vid: u16,
    /// Offset of the IPv4 header.
    pub l3: usize,
    /// IPv4 header length in bytes.
    pub header_len: usize,
    /// IPv4 total length.
    pub total_len: u16,
    /// IP protocol.
    pub protocol: u8,
    /// More-fragments set or a non-zero offset.
    pub fragment: bool,
    /// Source address (host order).
    pub src_ip: u32,
    /// Destination address (host order).
    pub dst_ip: u32,
}

impl L2Ipv4 {
    /// The same fields from the generic parsers' results (the path for frames
    /// [`l2_ipv4`] leaves alone).
    pub fn from_parsed<T: AsRef<[u8]>>(l2: &L2, ip: &Ipv4Packet<T>) -> Self {
        Self {
            dst: l2.dst.0,
            src: l2.src.0,
            outer_vid: l2.outer_vid().unwrap_or(0),
            inner_vid: l2.inner_vid().unwrap_or(0),
            l3: l2.l3_offset(),
            header_len: ip.header_len(),
            total_len: ip.total_len(),
            protocol: ip.protocol(),
            fragment: ip.is_fragment(),
            src_ip: u32::from(ip.src()),
            dst_ip: u32::from(ip.dst()),
        }
    }
}

#[inline(always)]
fn be16(h: &[u8; FAST_PREFIX], at: usize) -> u16 {
    match h.get(at..at + 2) {
        Some(&[a, b]) => u16::from_be_bytes([a, b]),
        _ => 0,
    }
}

#[inline(always)]
fn be32(h: &[u8; FAST_PREFIX], at: usize) -> u32 {
    match h.get(at..at + 4) {
        Some(&[a, b, c, d]) => u32::from_be_bytes([a, b, c, d]),
        _ => 0,
    }
}

/// The L2 and IPv4 fields of a well-formed IPv4 frame of at least [`FAST_PREFIX`] bytes; `None`
/// for every other frame (it may still be valid: ask the generic parsers).
///
/// Accepts what [`crate::parse_l2`] accepts (outer 0x8100 or 0x88a8, inner 0x8100) and what
/// [`crate::Ipv4Packet::new_checked`] accepts (version 4, IHL >= 5, IHL <= total length <=
/// the bytes after the L2 header).
#[inline(always)]
pub fn l2_ipv4(frame: &[u8]) -> Option<L2Ipv4> {
    let h: &[u8; FAST_PREFIX] = frame.first_chunk()?;
    // One instance per tag count: with the L3 offset a constant, every field read below is at
    // a fixed offset into the 42-byte prefix and needs no bounds check.
    match be16(h, 12) {
        ethertype::IPV4 => ipv4_at::<14>(frame, h, 0, 0),
        ethertype::VLAN | ethertype::QINQ => match be16(h, 16) {
            ethertype::IPV4 => ipv4_at::<18>(frame, h, be16(h, 14) & 0x0fff, 0),
            ethertype::VLAN if be16(h, 20) == ethertype::IPV4 => {
                ipv4_at::<22>(frame, h, be16(h, 14) & 0x0fff, be16(h, 18) & 0x0fff)
            }
            _ => None,
        },
        _ => None,
    }
}

#[inline(always)]
fn ipv4_at<const L3: usize>(
    frame: &[u8],
    h: &[u8; FAST_PREFIX],
    outer_vid: u16,
    inner_vid: u16,
) -> Option<L2Ipv4> {
    let ver_ihl = *h.get(L3)?;
    let header_len = usize::from(ver_ihl & 0x0f) * 4;
    let total_len = be16(h, L3 + 2);
    let total = usize::from(total_len);
    if ver_ihl >> 4 != 4
        || header_len < IPV4_HEADER_LEN
        || total < header_len
        || total > frame.len() - L3
    {
        return None;
    }
    let (dst, src) = match h.first_chunk::<12>() {
        Some(m) => (
            [m[0], m[1], m[2], m[3], m[4], m[5]],
            [m[6], m[7], m[8], m[9], m[10], m[11]],
        ),
        None => return None,
    };
    Some(L2Ipv4 {
        dst,
        src,
        outer_vid,
        inner_vid,
        l3: L3,
        header_len,
        total_len,
        protocol: *h.get(L3 + 9)?,
        fragment: be16(h, L3 + 6) & 0x3fff != 0,
        src_ip: be32(h, L3 + 12),
        dst_ip: be32(h, L3 + 16),
    })
}

/// Decrement the TTL of the IPv4 header at the start of `header`, updating its checksum
/// incrementally (RFC 1624 eqn. 3: the TTL/protocol word drops by 0x0100, so
/// `HC' = ~(~HC + 0xfeff)`); `false`, header unchanged, when the TTL is 0 or 1 or fewer than
/// 12 bytes are given. The header must have been validated (this reads no length).
#[inline(always)]
pub fn decrement_ttl(header: &mut [u8]) -> bool {
    let Some(h) = header.first_chunk_mut::<12>() else {
        return false;
    };
    let ttl = h[8];
    if ttl <= 1 {
        return false;
    }
    h[8] = ttl - 1;
    let hc = u16::from_be_bytes([h[10], h[11]]);
    let mut acc = u32::from(!hc) + 0xfeff;
    acc = (acc & 0xffff) + (acc >> 16);
    let hc = !(acc as u16);
    h[10..12].copy_from_slice(&hc.to_be_bytes());
    true
}

#[cfg(test)]
#[path = "fastpath_tests.rs"]
mod tests;
