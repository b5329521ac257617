//! Frame builders for the node unit tests.

use super::NodeEnv;
use super::walled_garden::WalledGardenRule;
use crate::tables::AccessTable;

pub const ACCESS_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0xaa];
pub const UPLINK_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0xbb];
pub const CORE_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0xcc];
pub const SUB_MAC: [u8; 6] = [0x02, 0x11, 0x22, 0x33, 0x44, 0x55];
pub const SUB_IP: [u8; 4] = [100, 64, 0, 10];
pub const GW_IP: [u8; 4] = [100, 64, 0, 1];
pub const CORE_IP: [u8; 4] = [192, 0, 2, 1];
pub const PORTAL_IP: [u8; 4] = [192, 0, 2, 80];
pub const DNS_IP: [u8; 4] = [192, 0, 2, 53];
pub const UPLINK_IP: [u8; 4] = [192, 0, 2, 254];
pub const NEXT_HOP_IP: [u8; 4] = [192, 0, 2, 1];

pub fn access() -> AccessTable {
    let mut a = AccessTable::default();
    a.add_gateway(u32::from_be_bytes(GW_IP));
    a.add_rule(WalledGardenRule::new(
        u32::from_be_bytes(PORTAL_IP),
        32,
        6,
        80,
    ));
    a.add_rule(WalledGardenRule::new(
        u32::from_be_bytes(PORTAL_IP),
        32,
        6,
        443,
    ));
    a.add_rule(WalledGardenRule::new(u32::from_be_bytes(DNS_IP), 32, 0, 0));
    a.set_redirect_http(true);
    a
}

pub fn env() -> NodeEnv {
    NodeEnv {
        access_mac: ACCESS_MAC,
        uplink_mac: UPLINK_MAC,
        next_hop_mac: CORE_MAC,
        outer_tpid: 0x8100,
        ..NodeEnv::default()
    }
}

/// An environment with uplink addressing and a next hop not yet resolved.
pub fn uplink_env() -> NodeEnv {
    let mut e = env();
    e.uplink_ip = u32::from_be_bytes(UPLINK_IP);
    e.next_hop_ip = u32::from_be_bytes(NEXT_HOP_IP);
    e.next_hop = std::sync::Arc::new(crate::neighbour::NextHopCell::default());
    e.refresh_next_hop();
    e
}

/// `frame` with its outer tag's TPID replaced (802.1ad S-tag: 0x88a8).
pub fn with_outer_tpid(mut frame: Vec<u8>, tpid: u16) -> Vec<u8> {
    frame[12..14].copy_from_slice(&tpid.to_be_bytes());
    frame
}

fn l2(src: [u8; 6], dst: [u8; 6], vids: &[u16], ethertype: u16) -> Vec<u8> {
    let mut f = Vec::new();
    f.extend_from_slice(&dst);
    f.extend_from_slice(&src);
    for v in vids {
        f.extend_from_slice(&0x8100u16.to_be_bytes());
        f.extend_from_slice(&v.to_be_bytes());
    }
    f.extend_from_slice(&ethertype.to_be_bytes());
    f
}

/// Ethernet (+tags) + IPv4 + L4 header of `proto` with ports, padded to `len` frame bytes.
#[allow(clippy::too_many_arguments)]
pub fn ipv4_l4(
    src_mac: [u8; 6],
    dst_mac: [u8; 6],
    vids: &[u16],
    src: [u8; 4],
    dst: [u8; 4],
    proto: u8,
    sport: u16,
    dport: u16,
    len: usize,
) -> Vec<u8> {
    let mut f = l2(src_mac, dst_mac, vids, 0x0800);
    let l3 = f.len();
    let total = len.saturating_sub(l3).max(28);
    let mut ip = vec![0u8; total];
    ip[0] = 0x45;
    ip[2..4].copy_from_slice(&(total as u16).to_be_bytes());
    ip[8] = 64;
    ip[9] = proto;
    ip[12..16].copy_from_slice(&src);
    ip[16..20].copy_from_slice(&dst);
    let c = kbng_wire::checksum::checksum(&ip[..20]);
    ip[10..12].copy_from_slice(&c.to_be_bytes());
    ip[20..22].copy_from_slice(&sport.to_be_bytes());
    ip[22..24].copy_from_slice(&dport.to_be_bytes());
    if proto == 17 {
        ip[24..26].copy_from_slice(&((total - 20) as u16).to_be_bytes());
    }
    if proto == 6 && total >= 40 {
        ip[32] = 0x50;
    }
    f.extend_from_slice(&ip);
    f
}

#[allow(clippy::too_many_arguments)]
pub fn ipv4_udp(
    src_mac: [u8; 6],
    dst_mac: [u8; 6],
    vids: &[u16],
    src: [u8; 4],
    dst: [u8; 4],
    sport: u16,
    dport: u16,
    len: usize,
) -> Vec<u8> {
    ipv4_l4(src_mac, dst_mac, vids, src, dst, 17, sport, dport, len)
}

pub fn arp_request(src_mac: [u8; 6], vids: &[u16], spa: [u8; 4], tpa: [u8; 4]) -> Vec<u8> {
    let mut f = l2(src_mac, [0xff; 6], vids, 0x0806);
    f.extend_from_slice(&[0, 1, 8, 0, 6, 4, 0, 1]);
    f.extend_from_slice(&src_mac);
    f.extend_from_slice(&spa);
    f.extend_from_slice(&[0; 6]);
    f.extend_from_slice(&tpa);
    f
}

/// An untagged ARP reply from `sha`/`spa` to us for `tpa`.
pub fn arp_reply(sha: [u8; 6], spa: [u8; 4], tpa: [u8; 4]) -> Vec<u8> {
    let mut f = l2(sha, UPLINK_MAC, &[], 0x0806);
    f.extend_from_slice(&[0, 1, 8, 0, 6, 4, 0, 2]);
    f.extend_from_slice(&sha);
    f.extend_from_slice(&spa);
    f.extend_from_slice(&UPLINK_MAC);
    f.extend_from_slice(&tpa);
    f
}

/// `frame` (Ethernet, tags, IPv4) with its TTL set and the header checksum recomputed.
pub fn with_ttl(mut frame: Vec<u8>, ttl: u8) -> Vec<u8> {
    let l3 = kbng_wire::parse_l2(&frame).expect("test frame").l3_offset();
    frame[l3 + 8] = ttl;
    frame[l3 + 10..l3 + 12].copy_from_slice(&[0, 0]);
    let c = kbng_wire::checksum::checksum(&frame[l3..l3 + 20]);
    frame[l3 + 10..l3 + 12].copy_from_slice(&c.to_be_bytes());
    frame
}
