//! The portal redirect: a captive subscriber's TCP/80 segments, punted by the dataplane, are
//! answered with an HTTP 302 to the portal URL by a stateless TCP responder.
//!
//! No connection table: the initial sequence number is a hash of the 4-tuple, so every answer
//! can be computed from the segment alone (SYN cookies' idea without the MSS encoding).
//! - SYN → SYN|ACK (seq = ISN, ack = client seq + 1).
//! - a segment with payload (the request) → the 302 with PSH|ACK|FIN (seq = ISN + 1, ack =
//!   client seq + payload length).
//! - a FIN without payload → ACK of the FIN (seq = ISN + 2 + response length).
//! - anything else (pure ACKs, RSTs) → nothing.
//!
//! A full TCP stack (smoltcp) was the alternative; the exchange a browser or curl makes with a
//! redirecting server is short enough that this covers it, and nothing here allocates per flow.

use std::net::Ipv4Addr;

use kbng_wire::ethernet::ethertype;
use kbng_wire::ipv4::{IPV4_HEADER_LEN, protocol};
use kbng_wire::tcp::TCP_HEADER_LEN;
use kbng_wire::{Ipv4Packet, Ipv4Repr, L2, TcpFlags, TcpPacket, TcpRepr, parse_l2};

/// The response body for `url`.
pub fn response(url: &str) -> Vec<u8> {
    format!(
        "HTTP/1.1 302 Found\r\nLocation: {url}\r\nCache-Control: no-store\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    )
    .into_bytes()
}

fn isn(src: Ipv4Addr, dst: Ipv4Addr, sport: u16, dport: u16) -> u32 {
    // FNV-1a over the 4-tuple: cheap and deterministic; predictability only lets a subscriber
    // spoof redirects to itself.
    let mut h: u32 = 0x811c_9dc5;
    for b in src
        .octets()
        .into_iter()
        .chain(dst.octets())
        .chain(sport.to_be_bytes())
        .chain(dport.to_be_bytes())
    {
        h ^= u32::from(b);
        h = h.wrapping_mul(0x0100_0193);
    }
    h
}

/// Why a punted frame got no answer: it was no TCP segment over IPv4, which is all the
/// dataplane punts for the portal (so a malformed or foreign frame). Counted by the caller.
pub const MALFORMED: &str = "portal punt malformed: dropped";

/// The frames answering one punted segment (none when none is due: a bare ACK, a RST), or
/// [`MALFORMED`].
pub fn answer(frame: &[u8], url: &str) -> Result<Vec<Vec<u8>>, &'static str> {
    let Ok(l2) = parse_l2(frame) else {
        return Err(MALFORMED);
    };
    if l2.ethertype != ethertype::IPV4 {
        return Err(MALFORMED);
    }
    let Ok(ip) = Ipv4Packet::new_checked(&frame[l2.l3_offset()..]) else {
        return Err(MALFORMED);
    };
    if ip.protocol() != protocol::TCP {
        return Err(MALFORMED);
    }
    let Ok(tcp) = TcpPacket::new_checked(ip.payload()) else {
        return Err(MALFORMED);
    };
    let f = tcp.flags();
    if f.contains(TcpFlags::RST) {
        return Ok(vec![]);
    }
    let s = isn(ip.src(), ip.dst(), tcp.src_port(), tcp.dst_port());
    let body = response(url);
    let plen = tcp.payload().len() as u32;
    let reply = |seq: u32, ack: u32, flags: TcpFlags, payload: &[u8]| {
        emit(
            &l2,
            ip.dst(),
            ip.src(),
            tcp.dst_port(),
            tcp.src_port(),
            seq,
            ack,
            flags,
            payload,
        )
    };
    if f.contains(TcpFlags::SYN) {
        return Ok(reply(
            s,
            tcp.seq().wrapping_add(1),
            TcpFlags::SYN | TcpFlags::ACK,
            &[],
        )
        .into_iter()
        .collect());
    }
    if plen > 0 {
        let ack = tcp
            .seq()
            .wrapping_add(plen)
            .wrapping_add(u32::from(f.contains(TcpFlags::FIN)));
        return Ok(reply(
            s.wrapping_add(1),
            ack,
            TcpFlags::PSH | TcpFlags::ACK | TcpFlags::FIN,
            &body,
        )
        .into_iter()
        .collect());
    }
    if f.contains(TcpFlags::FIN) {
        let seq = s.wrapping_add(2).wrapping_add(body.len() as u32);
        return Ok(reply(seq, tcp.seq().wrapping_add(1), TcpFlags::ACK, &[])
            .into_iter()
            .collect());
    }
    Ok(vec![])
}

#[allow(clippy::too_many_arguments)]
fn emit(
    req_l2: &L2,
    src: Ipv4Addr,
    dst: Ipv4Addr,
    sport: u16,
    dport: u16,
    seq: u32,
    ack: u32,
    flags: TcpFlags,
    payload: &[u8],
) -> Option<Vec<u8>> {
    let l2 = L2 {
        dst: req_l2.src,
        src: req_l2.dst,
        ethertype: ethertype::IPV4,
        ..*req_l2
    };
    let l3 = l2.l3_offset();
    let mut buf = vec![0u8; l3 + IPV4_HEADER_LEN + TCP_HEADER_LEN + payload.len()];
    l2.emit(&mut buf).ok()?;
    let ip = Ipv4Repr {
        src,
        dst,
        protocol: protocol::TCP,
        payload_len: u16::try_from(TCP_HEADER_LEN + payload.len()).ok()?,
        ttl: 64,
        dscp: 0,
        ident: 0,
        dont_frag: true,
    };
    ip.emit(&mut buf[l3..]).ok()?;
    let t = l3 + IPV4_HEADER_LEN;
    buf[t + TCP_HEADER_LEN..].copy_from_slice(payload);
    TcpRepr {
        src_port: sport,
        dst_port: dport,
        seq,
        ack,
        flags,
        window: 65535,
    }
    .emit(&mut buf[t..], payload.len(), src, dst)
    .ok()?;
    Some(buf)
}

#[cfg(test)]
mod tests {
    use super::*;
    use kbng_wire::{MacAddr, VlanTag};

    const URL: &str = "http://portal.example/login";

    fn segment(flags: TcpFlags, seq: u32, payload: &[u8]) -> Vec<u8> {
        // `emit` swaps the addresses, so this is the reverse of the client's frame.
        let l2 = L2 {
            dst: MacAddr([2, 0, 0, 0, 0, 9]),
            src: MacAddr([2, 0xbb, 0, 0, 0, 1]),
            outer: Some(VlanTag::dot1q(100)),
            inner: None,
            ethertype: 0,
        };
        emit(
            &l2,
            Ipv4Addr::new(100, 64, 0, 9),
            Ipv4Addr::new(198, 51, 100, 7),
            40000,
            80,
            seq,
            0,
            flags,
            payload,
        )
        .unwrap()
    }

    fn parse(frame: &[u8]) -> (L2, Ipv4Addr, TcpRepr, Vec<u8>) {
        let l2 = parse_l2(frame).unwrap();
        let ip = Ipv4Packet::new_checked(&frame[l2.l3_offset()..]).unwrap();
        assert!(ip.verify_checksum());
        let tcp = TcpPacket::new_checked(ip.payload()).unwrap();
        assert!(tcp.verify_checksum(ip.src(), ip.dst()));
        (l2, ip.src(), TcpRepr::parse(&tcp), tcp.payload().to_vec())
    }

    #[test]
    fn syn_request_fin_exchange() {
        let syn = answer(&segment(TcpFlags::SYN, 1000, &[]), URL).unwrap();
        let (l2, src, t, _) = parse(&syn[0]);
        assert_eq!(l2.dst, MacAddr([2, 0, 0, 0, 0, 9]));
        assert_eq!(l2.outer_vid(), Some(100), "tags kept");
        assert_eq!(
            src,
            Ipv4Addr::new(198, 51, 100, 7),
            "answers as the web server"
        );
        assert_eq!(t.flags, TcpFlags::SYN | TcpFlags::ACK);
        assert_eq!(t.ack, 1001);
        let isn = t.seq;

        let get = b"GET / HTTP/1.1\r\nHost: x\r\n\r\n";
        let r = answer(&segment(TcpFlags::ACK | TcpFlags::PSH, 1001, get), URL).unwrap();
        let (_, _, t, body) = parse(&r[0]);
        assert_eq!(
            (t.seq, t.ack),
            (isn.wrapping_add(1), 1001 + get.len() as u32)
        );
        let text = String::from_utf8(body).unwrap();
        assert!(text.starts_with("HTTP/1.1 302 Found\r\n"));
        assert!(text.contains(&format!("Location: {URL}\r\n")));

        let fin = answer(
            &segment(TcpFlags::ACK | TcpFlags::FIN, 1001 + get.len() as u32, &[]),
            URL,
        )
        .unwrap();
        let (_, _, t, _) = parse(&fin[0]);
        assert_eq!(t.flags, TcpFlags::ACK);
        assert_eq!(answer(&segment(TcpFlags::ACK, 5, &[]), URL), Ok(vec![]));
        assert_eq!(answer(&segment(TcpFlags::RST, 5, &[]), URL), Ok(vec![]));
    }

    #[test]
    fn garbage_is_refused_as_malformed() {
        assert_eq!(answer(&[], URL), Err(MALFORMED));
        assert_eq!(answer(&[0u8; 60], URL), Err(MALFORMED));
        let mut not_tcp = segment(TcpFlags::SYN, 1, &[]);
        let l3 = parse_l2(&not_tcp).unwrap().l3_offset();
        not_tcp[l3 + 9] = 17; // UDP
        assert_eq!(answer(&not_tcp, URL), Err(MALFORMED));
    }
}
