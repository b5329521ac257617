//! Pipeline tests of the uplink neighbour, ICMP Time Exceeded and 802.1ad QinQ: whole bursts
//! through every node, asserting on the frames out and on node counters.

use super::*;
use crate::command::{Command, apply};
use crate::meter::SrTcmProfile;
use crate::nodes::testpkt::*;
use crate::packet::{HeapBuf, Pkt, PortId, TxFrame};
use crate::punt::PuntRecord;
use crate::tables::{Session, SessionKey};

const HZ: u64 = 2_000_000_000;
const MOVED_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0xdd];

struct Sink(usize);
impl PuntSink for Sink {
    fn deliver(&mut self, _rec: &PuntRecord) -> bool {
        self.0 += 1;
        true
    }
}

struct Rig {
    p: Pipeline<HeapBuf>,
    t: Tables,
    tx_a: TxFrame<HeapBuf>,
    tx_u: TxFrame<HeapBuf>,
    punted: usize,
}

impl Rig {
    fn new(env: NodeEnv) -> Self {
        let mut t = Tables::new(64, 8, 7);
        for c in [
            Command::AccessBegin,
            Command::AccessGateway(u32::from_be_bytes(GW_IP)),
            Command::AccessCommit {
                redirect_http: false,
            },
        ] {
            apply(&mut t, &c, 0);
        }
        let session = Session {
            key: SessionKey {
                port: 0,
                outer_vid: 200,
                inner_vid: 300,
                mac: SUB_MAC,
            },
            ipv4: u32::from_be_bytes(SUB_IP),
            plan: 0,
            captive: false,
            active: true,
        };
        apply(&mut t, &Command::UpsertSession { slot: 1, session }, 0);
        let limit = SrTcmProfile::new(HZ, 1000, 64, 0).unwrap();
        Self {
            p: Pipeline::new(env, 0, limit, 0),
            t,
            tx_a: TxFrame::new(),
            tx_u: TxFrame::new(),
            punted: 0,
        }
    }

    fn run(&mut self, frames: &[(Vec<u8>, PortId)]) {
        let mut rx = Frame::new();
        for (f, port) in frames {
            rx.push(Pkt::new(HeapBuf::from_bytes(f), *port));
        }
        self.tx_a.clear();
        self.tx_u.clear();
        let mut sink = Sink(0);
        self.p.process(
            &mut self.t,
            1,
            &mut rx,
            &mut self.tx_a,
            &mut self.tx_u,
            &mut sink,
        );
        self.punted += sink.0;
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

/// Upstream QinQ with an 802.1ad S-tag, as an 802.1ad access network sends it.
fn up_ad() -> (Vec<u8>, PortId) {
    let f = ipv4_udp(
        SUB_MAC,
        ACCESS_MAC,
        &[200, 300],
        SUB_IP,
        CORE_IP,
        4000,
        53,
        80,
    );
    (with_outer_tpid(f, 0x88a8), PortId::Access)
}

fn down() -> (Vec<u8>, PortId) {
    let f = ipv4_udp(CORE_MAC, UPLINK_MAC, &[], CORE_IP, SUB_IP, 53, 4000, 80);
    (f, PortId::Uplink)
}

#[test]
fn qinq_with_an_802_1ad_s_tag_both_ways() {
    let mut env = env();
    env.outer_tpid = 0x88a8;
    let mut r = Rig::new(env);
    r.run(&[up_ad(), down()]);
    assert_eq!((r.tx_u.len(), r.tx_a.len()), (1, 1));
    let u = r.tx_u[0].data();
    assert_eq!(&u[12..14], &[0x08, 0x00], "tags popped upstream");
    let d = r.tx_a[0].data();
    assert_eq!(&d[12..14], &[0x88, 0xa8], "S-tag pushed downstream");
    assert_eq!(&d[16..18], &[0x81, 0x00], "C-tag inside");
    let l2 = kbng_wire::parse_l2(d).unwrap();
    assert_eq!((l2.outer_vid(), l2.inner_vid()), (Some(200), Some(300)));
    assert_eq!(r.counter("session-lookup", "upstream hit"), 1);
}

#[test]
fn ttl_1_gets_time_exceeded_from_the_gateway_and_the_uplink_address() {
    let env = uplink_env();
    env.next_hop.learn(CORE_MAC, 0);
    let mut r = Rig::new(env);
    let (f, port) = up_ad();
    let expired_up = with_ttl(f.clone(), 1);
    let (d, dport) = down();
    let expired_down = with_ttl(d, 1);
    r.run(&[
        (expired_up, port),
        (expired_down, dport),
        (f, port), // TTL 64 still forwarded
    ]);
    assert_eq!(r.counter("ip4-rewrite", "TTL expired"), 2);
    assert_eq!(r.counter("icmp-error", "time exceeded sent"), 2);
    assert_eq!((r.tx_a.len(), r.tx_u.len()), (1, 2));
    // To the subscriber: its S- and C-tag, from its gateway.
    let a = r.tx_a[0].data();
    assert_eq!(&a[..6], &SUB_MAC);
    assert_eq!(&a[12..14], &[0x88, 0xa8]);
    let ip = &a[22..];
    assert_eq!((ip[9], ip[20]), (1, 11));
    assert_eq!((&ip[12..16], &ip[16..20]), (&GW_IP[..], &SUB_IP[..]));
    // To the core: untagged, from our uplink address, to the next hop's MAC.
    let u = r.tx_u.iter().find(|p| p.data()[14 + 9] == 1).expect("ICMP");
    let u = u.data();
    assert_eq!(&u[..6], &CORE_MAC);
    assert_eq!((&u[26..30], &u[30..34]), (&UPLINK_IP[..], &CORE_IP[..]));
}

#[test]
fn the_next_hop_is_learned_answered_and_followed_when_it_moves() {
    let mut r = Rig::new(uplink_env());
    // Unresolved: upstream is dropped and counted; downstream needs no next hop.
    r.run(&[up_ad(), down()]);
    assert!(r.tx_u.is_empty());
    assert_eq!(r.tx_a.len(), 1);
    assert_eq!(r.counter("ip4-rewrite", "next hop unresolved"), 1);
    // The core asks for our uplink address: answered, and its MAC learned from the request.
    r.run(&[(
        arp_request(CORE_MAC, &[], NEXT_HOP_IP, UPLINK_IP),
        PortId::Uplink,
    )]);
    assert_eq!(r.tx_u.len(), 1);
    let reply = kbng_wire::ArpRepr::parse(&r.tx_u[0].data()[14..]).unwrap();
    assert_eq!(reply.sender_ip.octets(), UPLINK_IP);
    assert_eq!(reply.sender_mac.0, UPLINK_MAC);
    assert_eq!(r.counter("uplink-arp", "uplink ARP replies"), 1);
    assert_eq!(r.punted, 0, "uplink ARP is not punted");
    // The next burst forwards upstream to it.
    r.run(&[up_ad()]);
    assert_eq!(r.tx_u.len(), 1);
    assert_eq!(&r.tx_u[0].data()[..6], &CORE_MAC);
    // It moves to another MAC and says so with a gratuitous ARP: followed at the next burst.
    r.run(&[
        (
            arp_request(MOVED_MAC, &[], NEXT_HOP_IP, NEXT_HOP_IP),
            PortId::Uplink,
        ),
        up_ad(),
    ]);
    assert_eq!(r.counter("uplink-arp", "next hop MAC changed"), 2);
    r.run(&[up_ad()]);
    assert_eq!(&r.tx_u[0].data()[..6], &MOVED_MAC);
    // ARP from anyone else for anything else is dropped and counted.
    r.run(&[(
        arp_reply([2, 0, 0, 0, 0, 0x55], [192, 0, 2, 7], [192, 0, 2, 8]),
        PortId::Uplink,
    )]);
    assert_eq!(r.counter("uplink-arp", "uplink ARP not for us"), 1);
    assert_eq!(r.counter("ethernet-input", "uplink ARP"), 3);
}

#[test]
fn without_an_uplink_address_uplink_arp_is_still_punted() {
    let mut r = Rig::new(env());
    r.run(&[(
        arp_request(CORE_MAC, &[], NEXT_HOP_IP, UPLINK_IP),
        PortId::Uplink,
    )]);
    assert_eq!(r.punted, 1);
    assert_eq!(r.counter("ethernet-input", "ARP punted"), 1);
}
