//! Pipeline tests: whole bursts through every node, asserting on node counters.

use super::*;
use crate::command::{Command, apply};
use crate::meter::{SrTcmProfile, TrTcmProfile};
use crate::nodes::testpkt::*;
use crate::packet::{HeapBuf, Pkt, PortId, TxFrame};
use crate::punt::{PuntReason, PuntRecord};
use crate::tables::{ColourAction, DirPolicy, MeterProfile, Plan, Session, SessionKey};

const HZ: u64 = 2_000_000_000;

struct Rig {
    p: Pipeline<HeapBuf>,
    t: Tables,
    punts: Vec<PuntRecord>,
    tx_a: TxFrame<HeapBuf>,
    tx_u: TxFrame<HeapBuf>,
}

struct VecSink<'a>(&'a mut Vec<PuntRecord>);
impl PuntSink for VecSink<'_> {
    fn deliver(&mut self, rec: &PuntRecord) -> bool {
        self.0.push(*rec);
        true
    }
}

fn session(vids: (u16, u16), mac: [u8; 6], ip: [u8; 4], plan: u16, captive: bool) -> Session {
    Session {
        key: SessionKey {
            port: 0,
            outer_vid: vids.0,
            inner_vid: vids.1,
            mac,
        },
        ipv4: u32::from_be_bytes(ip),
        plan,
        captive,
        active: true,
    }
}

impl Rig {
    fn new() -> Self {
        let mut t = Tables::new(64, 8, 42);
        apply(&mut t, &Command::AccessBegin, 0);
        let a = access();
        apply(
            &mut t,
            &Command::AccessGateway(u32::from_be_bytes(GW_IP)),
            0,
        );
        for r in a.rules() {
            apply(&mut t, &Command::AccessRule(*r), 0);
        }
        apply(
            &mut t,
            &Command::AccessCommit {
                redirect_http: true,
            },
            0,
        );
        let limit = SrTcmProfile::new(HZ, 1000, 64, 0).unwrap();
        Self {
            p: Pipeline::new(env(), 0, limit, 0),
            t,
            punts: Vec::new(),
            tx_a: TxFrame::new(),
            tx_u: TxFrame::new(),
        }
    }

    fn install(&mut self, slot: u32, s: Session) {
        apply(&mut self.t, &Command::UpsertSession { slot, session: s }, 0);
    }

    fn run(&mut self, now: u64, frames: Vec<(Vec<u8>, PortId)>) {
        let mut rx = Frame::new();
        for (f, port) in frames {
            rx.push(Pkt::new(HeapBuf::from_bytes(&f), port));
        }
        self.tx_a.clear();
        self.tx_u.clear();
        self.p.process(
            &mut self.t,
            now,
            &mut rx,
            &mut self.tx_a,
            &mut self.tx_u,
            &mut VecSink(&mut self.punts),
        );
        assert!(rx.is_empty());
    }

    fn counter(&self, node: &str, name: &str) -> u64 {
        self.p
            .counters()
            .snapshot()
            .into_iter()
            .find(|(n, c, _)| *n == node && *c == name)
            .map(|x| x.2)
            .unwrap_or_else(|| panic!("no counter {node}/{name}"))
    }
}

fn up(vids: &[u16], src: [u8; 4], dport: u16) -> (Vec<u8>, PortId) {
    (
        ipv4_udp(SUB_MAC, ACCESS_MAC, vids, src, CORE_IP, 4000, dport, 64),
        PortId::Access,
    )
}

fn down(dst: [u8; 4]) -> (Vec<u8>, PortId) {
    (
        ipv4_udp(CORE_MAC, UPLINK_MAC, &[], CORE_IP, dst, 5000, 4000, 64),
        PortId::Uplink,
    )
}

#[test]
fn forwards_both_ways_with_tag_pop_and_push() {
    for vids in [vec![], vec![100], vec![100, 200]] {
        let mut r = Rig::new();
        let v = (
            vids.first().copied().unwrap_or(0),
            vids.get(1).copied().unwrap_or(0),
        );
        r.install(3, session(v, SUB_MAC, SUB_IP, 0, false));
        r.run(1, vec![up(&vids, SUB_IP, 9), down(SUB_IP)]);
        assert_eq!(r.tx_u.len(), 1, "vids {vids:?}");
        assert_eq!(r.tx_a.len(), 1);
        // Upstream: untagged, next-hop MAC, TTL 63, checksum still valid.
        let u = r.tx_u[0].data();
        assert_eq!(&u[0..6], &CORE_MAC);
        assert_eq!(&u[6..12], &UPLINK_MAC);
        assert_eq!(&u[12..14], &[0x08, 0x00]);
        assert_eq!(u[14 + 8], 63);
        assert_eq!(kbng_wire::checksum::checksum(&u[14..34]), 0);
        // Downstream: the session's tags pushed, session MAC.
        let d = r.tx_a[0].data();
        let l2 = kbng_wire::parse_l2(d).unwrap();
        assert_eq!(l2.dst.0, SUB_MAC);
        assert_eq!(l2.src.0, ACCESS_MAC);
        assert_eq!(l2.outer_vid().unwrap_or(0), v.0);
        assert_eq!(l2.inner_vid().unwrap_or(0), v.1);
        let l3 = l2.l3_offset();
        assert_eq!(d[l3 + 8], 63);
        assert_eq!(kbng_wire::checksum::checksum(&d[l3..l3 + 20]), 0);
        assert_eq!(r.counter("session-lookup", "upstream hit"), 1);
        assert_eq!(r.counter("session-lookup", "downstream hit"), 1);
        assert_eq!(r.counter("ip4-rewrite", "to uplink"), 1);
        assert_eq!(r.counter("ip4-rewrite", "to access"), 1);
        let c = r.t.sessions.counters().get(3).expect("slot 3").read();
        assert_eq!(c.packets, [[1, 0, 0], [1, 0, 0]]);
    }
}

#[test]
fn no_session_wrong_vlan_and_spoofed_source_are_dropped_and_counted() {
    let mut r = Rig::new();
    r.install(0, session((100, 0), SUB_MAC, SUB_IP, 0, false));
    r.run(
        1,
        vec![
            up(&[101], SUB_IP, 9),           // wrong VLAN: no session
            up(&[100], [100, 64, 0, 99], 9), // spoofed source
            down([100, 64, 0, 77]),          // unknown subscriber
            up(&[100], SUB_IP, 9),           // good
        ],
    );
    assert_eq!(r.tx_u.len(), 1);
    assert!(r.tx_a.is_empty());
    assert_eq!(r.counter("session-lookup", "no session"), 1);
    assert_eq!(r.counter("session-lookup", "spoofed source"), 1);
    assert_eq!(r.counter("session-lookup", "no session downstream"), 1);
}

#[test]
fn dhcp_and_arp_punted_gateway_arp_answered() {
    let mut r = Rig::new();
    let dhcp = ipv4_udp(
        SUB_MAC,
        [0xff; 6],
        &[100, 200],
        [0; 4],
        [255; 4],
        68,
        67,
        342,
    );
    let arp_gw = arp_request(SUB_MAC, &[100], SUB_IP, GW_IP);
    let arp_other = arp_request(SUB_MAC, &[100], SUB_IP, [100, 64, 0, 50]);
    r.run(
        1,
        vec![
            (dhcp.clone(), PortId::Access),
            (arp_gw, PortId::Access),
            (arp_other, PortId::Access),
        ],
    );
    assert_eq!(r.punts.len(), 2);
    assert_eq!(r.punts[0].reason, PuntReason::Dhcp);
    assert_eq!(r.punts[0].bytes(), &dhcp[..]);
    assert_eq!(r.punts[1].reason, PuntReason::Arp);
    assert_eq!(r.counter("ethernet-input", "DHCP punted"), 1);
    assert_eq!(r.counter("punt", "punted"), 2);
    // Proxy ARP reply: same tag, op 2, sender = gateway.
    assert_eq!(r.tx_a.len(), 1);
    let rep = r.tx_a[0].data();
    let l2 = kbng_wire::parse_l2(rep).unwrap();
    assert_eq!(l2.dst.0, SUB_MAC);
    assert_eq!(l2.outer_vid(), Some(100));
    let arp = kbng_wire::ArpRepr::parse(&rep[18..]).unwrap();
    assert_eq!(arp.op, kbng_wire::ArpOp::Reply);
    assert_eq!(arp.sender_ip.octets(), GW_IP);
    assert_eq!(arp.sender_mac.0, ACCESS_MAC);
    assert_eq!(arp.target_ip.octets(), SUB_IP);
    assert_eq!(r.counter("arp-reply", "proxy ARP replies"), 1);
}

#[test]
fn punts_are_rate_limited() {
    let mut r = Rig::new();
    let dhcp = ipv4_udp(SUB_MAC, [0xff; 6], &[], [0; 4], [255; 4], 68, 67, 342);
    r.run(
        1,
        (0..200).map(|_| (dhcp.clone(), PortId::Access)).collect(),
    );
    // CBS of 64 packets at t=1, no refill yet.
    assert_eq!(r.counter("punt", "punted"), 64);
    assert_eq!(r.counter("punt", "punt rate limited"), 136);
}

#[test]
fn captive_session_reaches_only_the_walled_garden() {
    let mut r = Rig::new();
    r.install(1, session((0, 0), SUB_MAC, SUB_IP, 0, true));
    let tcp = |dst, dport| {
        (
            ipv4_l4(SUB_MAC, ACCESS_MAC, &[], SUB_IP, dst, 6, 40000, dport, 64),
            PortId::Access,
        )
    };
    r.run(
        1,
        vec![
            tcp(PORTAL_IP, 443),
            tcp(CORE_IP, 80),
            tcp(CORE_IP, 443),
            down(SUB_IP),
        ],
    );
    assert_eq!(r.tx_u.len(), 1);
    assert_eq!(&r.tx_u[0].data()[30..34], &PORTAL_IP);
    assert!(r.tx_a.is_empty());
    assert_eq!(r.counter("walled-garden", "walled garden allowed"), 1);
    assert_eq!(r.counter("walled-garden", "HTTP redirect punted"), 1);
    assert_eq!(r.counter("walled-garden", "walled garden blocked"), 2);
    assert_eq!(r.punts.len(), 1);
    assert_eq!(r.punts[0].reason, PuntReason::HttpRedirect);
    assert_eq!(r.punts[0].slot, 1);
}

#[test]
fn policer_colours_remark_and_drop_per_plan() {
    let mut r = Rig::new();
    // Upstream trTCM: CBS 100 B, PBS 200 B, tiny rates; green transmit, yellow re-mark
    // to DSCP 10, red drop. Packets are 50-byte IPv4 (64-byte frames).
    let tr = TrTcmProfile::new(HZ, 1, 1, 100, 200).unwrap();
    let plan = Plan {
        up: DirPolicy {
            meter: MeterProfile::Tr(tr),
            actions: [
                ColourAction::Transmit,
                ColourAction::Remark(10),
                ColourAction::Drop,
            ],
        },
        down: DirPolicy::default(),
    };
    apply(&mut r.t, &Command::SetPlan { slot: 2, plan }, 0);
    r.install(0, session((0, 0), SUB_MAC, SUB_IP, 2, false));
    r.run(1, (0..6).map(|_| up(&[], SUB_IP, 9)).collect());
    // 200 B peak: 4 packets pass; 100 B committed: 2 green, 2 yellow; 2 red dropped.
    assert_eq!(r.tx_u.len(), 4);
    assert_eq!(r.counter("policer", "green"), 2);
    assert_eq!(r.counter("policer", "yellow"), 2);
    assert_eq!(r.counter("policer", "red"), 2);
    assert_eq!(r.counter("policer", "re-marked"), 2);
    assert_eq!(r.counter("policer", "policer dropped"), 2);
    let dscp = |i: usize| r.tx_u[i].data()[15] >> 2;
    assert_eq!((dscp(0), dscp(1), dscp(2), dscp(3)), (0, 0, 10, 10));
    assert_eq!(kbng_wire::checksum::checksum(&r.tx_u[3].data()[14..34]), 0);
    let c = r.t.sessions.counters().get(0).expect("slot 0").read();
    assert_eq!(c.packets[0], [2, 2, 2]);
    assert_eq!(c.bytes[0], [100, 100, 100]);
    assert_eq!(c.dropped[0], 2);
    assert_eq!(c.dropped_bytes[0], 100);
}

#[test]
fn ttl_expiry_and_garbage_are_counted_not_forwarded() {
    let mut r = Rig::new();
    r.install(0, session((0, 0), SUB_MAC, SUB_IP, 0, false));
    let (mut f, port) = up(&[], SUB_IP, 9);
    f[14 + 8] = 1;
    let c = kbng_wire::checksum::checksum(&{
        let mut h = f[14..34].to_vec();
        h[10] = 0;
        h[11] = 0;
        h
    });
    f[24..26].copy_from_slice(&c.to_be_bytes());
    r.run(1, vec![(f, port), (vec![1, 2, 3], PortId::Access)]);
    assert!(r.tx_u.is_empty());
    assert_eq!(r.counter("ip4-rewrite", "TTL expired"), 1);
    assert_eq!(r.counter("ethernet-input", "bad L2 header"), 1);
}

#[test]
fn runtime_counts_vectors_and_cycles_per_node() {
    let mut r = Rig::new();
    r.install(3, session((100, 0), SUB_MAC, SUB_IP, 0, false));
    let garbage = (vec![1, 2, 3], PortId::Access);
    let dhcp = up(&[100], SUB_IP, 67);
    r.run(1, vec![up(&[100], SUB_IP, 9), down(SUB_IP), dhcp, garbage]);
    r.run(2, vec![down(SUB_IP)]);
    assert_eq!((r.tx_u.len(), r.tx_a.len()), (0, 1));
    let rows = r.p.counters().runtime_rows();
    let row = |node: &str| {
        *rows
            .iter()
            .find(|x| x.0 == node)
            .unwrap_or_else(|| panic!("no runtime row {node}"))
    };
    // (node, calls, vectors): only nodes that had packets are called.
    let (_, calls, vectors, cycles) = row("ethernet-input");
    assert_eq!((calls, vectors), (2, 5));
    assert!(cycles > 0);
    let (_, calls, vectors, cycles) = row(FUSED_FORWARD);
    assert_eq!((calls, vectors), (2, 3));
    assert!(cycles > 0);
    let (_, calls, vectors, _) = row("punt");
    assert_eq!((calls, vectors), (1, 1));
    for idle in [
        "arp-reply",
        "uplink-arp",
        "walled-garden",
        "policer",
        "ip4-rewrite",
    ] {
        assert_eq!(row(idle), (idle, 0, 0, 0), "{idle}");
    }
    // The fused stage counts on the nodes it runs for.
    assert_eq!(r.counter("policer", "green"), 3);
    assert_eq!(r.counter("ip4-rewrite", "to access"), 2);
    // gRPC's rows: the counters, then calls, vectors and cycles per runtime row.
    let all = r.p.counters().snapshot_with_runtime();
    let get = |n: &str, c: &str| all.iter().find(|x| x.0 == n && x.1 == c).map(|x| x.2);
    assert_eq!(get("punt", "runtime vectors"), Some(1));
    assert_eq!(get(FUSED_FORWARD, "runtime calls"), Some(2));
    assert_eq!(
        all.len(),
        r.p.counters().snapshot().len() + 3 * RUNTIME_NODES.len()
    );
}
