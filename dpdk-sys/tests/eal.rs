//! Everything that needs a running EAL, as one test: DPDK's EAL initialises once per process,
//! and cargo runs each integration-test file as its own process.
//!
//! Runs without hugepages, PCI or a NIC: `net_null` ports generate and swallow packets,
//! `net_ring0` loops its tx queue back to its rx queue.

use std::sync::Arc;

use dpdk_sys::meter::{Color, Srtcm, SrtcmProfile, Trtcm, TrtcmProfile};
use dpdk_sys::{
    Burst, DpdkError, Eal, Mempool, MempoolConfig, Port, PortConfig, RssHash, RssOutcome, tsc,
};

fn eal_args() -> Vec<String> {
    let prefix = format!("--file-prefix=kbng-dpdk-sys-test-{}", std::process::id());
    [
        "-l",
        "0",
        "--no-huge",
        "-m",
        "512",
        "--no-pci",
        "--no-shconf",
        "--no-telemetry",
        &prefix,
        "--vdev=net_null0",
        "--vdev=net_null1",
        "--vdev=net_ring0",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

#[test]
fn eal_ports_mbufs_meters_in_sequence() {
    bad_argument_is_an_error();
    let eal = Eal::init(&eal_args()).expect("EAL init with --no-huge and vdevs");
    second_init_is_refused();
    lcore_and_clock_queries(&eal);
    let pool = Arc::new(
        Mempool::new(&eal, &MempoolConfig::new("test_pool", 8191)).expect("mempool of 8191 mbufs"),
    );
    registered_worker_thread(&eal, &pool);
    mbuf_prepend_adj_round_trip(&pool);
    burst_moves_and_bulk_free(&pool);
    rx_null_tx_ring_loopback(&eal, &pool);
    rss_on_null_port_degrades_or_applies(&eal, &pool);
    meters_green_then_red();
    assert_eq!(pool.in_use(), 0, "every mbuf is back in the pool");
    drop(pool);
    drop(eal);
}

fn bad_argument_is_an_error() {
    let args = vec![
        "--no-huge".to_owned(),
        "--this-is-not-an-eal-option".to_owned(),
    ];
    match Eal::init(&args) {
        Err(DpdkError::EalInit { errno, reason, .. }) => {
            assert_eq!(errno, 22, "EINVAL, got {errno} ({reason})");
        }
        other => panic!("expected EalInit error, got {other:?}"),
    }
}

fn second_init_is_refused() {
    assert!(matches!(
        Eal::init(&eal_args()),
        Err(DpdkError::EalAlreadyInitialized)
    ));
}

fn lcore_and_clock_queries(eal: &Eal) {
    assert_eq!(eal.lcore_count(), 1);
    assert_eq!(eal.lcores(), vec![0]);
    assert_eq!(eal.main_lcore(), 0);
    assert!(eal.lcore_socket(0).is_some());
    assert!(eal.lcore_socket(100_000).is_none());
    // The test harness thread called rte_eal_init, so it is the main lcore.
    assert_eq!(dpdk_sys::lcore_id(), Some(0));
    assert!(eal.tsc_hz() > 1_000_000, "tsc_hz {}", eal.tsc_hz());
    let (a, b) = (tsc(), tsc());
    assert!(b >= a);
    // A std thread has no lcore until it registers.
    std::thread::scope(|s| {
        s.spawn(|| assert_eq!(dpdk_sys::lcore_id(), None));
    });
    assert!(
        dpdk_sys::register_thread().is_err(),
        "the main lcore cannot register again"
    );
}

fn registered_worker_thread(eal: &Eal, pool: &Mempool) {
    std::thread::scope(|s| {
        s.spawn(|| {
            assert_eq!(
                eal.lcore_count(),
                1,
                "Eal is Sync: queries from a scoped thread"
            );
            let reg = dpdk_sys::register_thread().expect("a free lcore slot");
            assert_eq!(dpdk_sys::lcore_id(), Some(reg.lcore()));
            assert_ne!(reg.lcore(), 0, "lcore 0 is the main lcore");
            assert!(dpdk_sys::register_thread().is_err(), "registered once");
            let m = pool.alloc().expect("alloc through the per-lcore cache");
            drop(m);
            drop(reg);
            assert_eq!(dpdk_sys::lcore_id(), None);
        });
    });
}

fn mbuf_prepend_adj_round_trip(pool: &Mempool) {
    let before = pool.in_use();
    let mut m = pool.alloc().expect("a free mbuf");
    assert_eq!(m.len(), 0);
    assert_eq!(m.headroom(), 128);
    let payload: Vec<u8> = (0..64u8).collect();
    m.append(64)
        .expect("tailroom for 64 bytes")
        .copy_from_slice(&payload);
    assert_eq!(m.data(), &payload[..]);

    let tag = m.prepend(4).expect("headroom for a VLAN tag");
    tag.copy_from_slice(&[0x81, 0x00, 0x00, 0x0a]);
    assert_eq!(m.len(), 68);
    assert_eq!(m.pkt_len(), 68);
    assert_eq!(&m.data()[..4], &[0x81, 0x00, 0x00, 0x0a]);
    assert_eq!(m.headroom(), 124);

    assert!(m.adj(4));
    assert_eq!(m.data(), &payload[..]);
    assert_eq!((m.headroom(), m.pkt_len()), (128, 64));
    // The whole headroom, and back: the bounds are inclusive, as in rte_mbuf.h.
    let tag = m.prepend(128).expect("exactly the headroom");
    assert_eq!(tag.len(), 128);
    assert_eq!((m.headroom(), m.len(), m.pkt_len()), (0, 192, 192));
    assert!(m.adj(128));
    assert_eq!(m.data(), &payload[..]);
    assert!(m.trim(14));
    assert_eq!(m.data(), &payload[..50]);

    // Out of range: refused without change.
    assert!(m.prepend(200).is_none());
    assert!(!m.adj(51));
    assert!(!m.trim(51));
    assert_eq!(m.len(), 50);
    m.data_mut()[0] = 0xff;
    assert_eq!(m.data()[0], 0xff);

    assert_eq!(pool.in_use(), before + 1);
    drop(m);
    assert_eq!(pool.in_use(), before);
}

fn burst_moves_and_bulk_free(pool: &Mempool) {
    let before = pool.in_use();
    let mut input: Burst<32> = Burst::new();
    assert!(pool.alloc_bulk(&mut input, 32));
    assert!(input.is_full());
    assert!(!pool.alloc_bulk(&mut input, 1), "no free slot left");
    for (i, m) in input.iter_mut().enumerate() {
        let len = u16::try_from(10 + i).expect("small");
        assert!(m.append(len).is_some());
    }
    // Sort into two next-node bursts by moving mbufs.
    let (mut even, mut odd): (Burst<32>, Burst<32>) = (Burst::new(), Burst::new());
    for m in input.drain() {
        let next = if m.len() % 2 == 0 {
            &mut even
        } else {
            &mut odd
        };
        assert!(next.push(m).is_ok());
    }
    assert!(input.is_empty());
    assert_eq!((even.len(), odd.len()), (16, 16));
    assert!(even.iter().all(|m| m.len() % 2 == 0));
    assert_eq!(pool.in_use(), before + 32);

    let last = odd.pop().expect("odd is not empty");
    assert_eq!(last.len(), 41);
    let first = odd.swap_remove(0).expect("index 0 exists");
    assert_eq!(first.len(), 11);
    assert_eq!(odd.len(), 14);
    drop((last, first));

    // A partly consumed drain frees the rest.
    let mut it = even.drain();
    let kept = it.next().expect("even is not empty");
    drop(it);
    assert!(even.is_empty());
    assert_eq!(pool.in_use(), before + 1 + 14);
    drop(kept);
    odd.clear();
    assert_eq!(pool.in_use(), before);

    // A full burst hands the mbuf back.
    let mut tiny: Burst<1> = Burst::new();
    assert!(tiny.push(pool.alloc().expect("free mbuf")).is_ok());
    let back = tiny.push(pool.alloc().expect("free mbuf"));
    assert!(back.is_err());
    drop(back);
    drop(tiny);
    assert_eq!(pool.in_use(), before);
}

fn rx_null_tx_ring_loopback(eal: &Eal, pool: &Arc<Mempool>) {
    assert_eq!(Port::count(eal), 3);
    assert!(matches!(
        Port::open(eal, "net_nope9"),
        Err(DpdkError::PortNotFound(_))
    ));

    let mut null0 = Port::open(eal, "net_null0").expect("net_null0 was created by --vdev");
    assert!(matches!(
        Port::open(eal, "net_null0"),
        Err(DpdkError::PortInUse(_))
    ));
    let mut ring = Port::open(eal, "net_ring0").expect("net_ring0 was created by --vdev");

    let info = null0.device_info().expect("device info");
    assert_eq!(info.port_name, "net_null0");
    assert_eq!(info.device_name, "net_null0");
    assert_eq!(info.bus, "vdev");
    assert_eq!(info.driver, "net_null");
    assert_eq!(ring.device_info().expect("device info").driver, "net_ring");
    assert_eq!(null0.mac().expect("mac").len(), 6);
    let _ = null0.socket_id();

    // Queue handles only on a started port.
    assert!(null0.rx_queue(0).is_err());
    assert!(null0.start().is_err(), "start before configure");

    let config = PortConfig {
        rx_desc: 512,
        tx_desc: 512,
        ..PortConfig::default()
    };
    let setup = null0.configure(&config, pool).expect("configure net_null0");
    assert_eq!(setup.rss, RssOutcome::SingleQueue);
    ring.configure(&config, pool).expect("configure net_ring0");
    null0.start().expect("start net_null0");
    ring.start().expect("start net_ring0");
    assert!(null0.link().expect("link").up);
    null0.reset_stats().expect("reset");
    ring.reset_stats().expect("reset");

    let mut null_rx = null0.rx_queue(0).expect("rx queue 0");
    assert!(null0.rx_queue(0).is_err(), "one handle per queue");
    assert!(null0.rx_queue(1).is_err(), "only one rx queue");
    let mut ring_tx = ring.tx_queue(0).expect("tx queue 0");
    let mut ring_rx = ring.rx_queue(0).expect("rx queue 0");
    assert!(matches!(null0.stop(), Err(DpdkError::QueuesInUse(_))));

    let mut burst: Burst<32> = Burst::new();
    let n = null_rx.rx(&mut burst);
    assert_eq!(n, 32, "net_null fills a whole burst");
    assert!(burst.iter().all(|m| m.port() == null0.id()));
    for (i, m) in burst.iter_mut().enumerate() {
        m.data_mut()[0] = u8::try_from(i).expect("i < 32");
    }
    let sent = ring_tx.tx(&mut burst);
    assert_eq!((sent.sent, sent.dropped), (32, 0));
    assert!(burst.is_empty());

    let back = ring_rx.rx(&mut burst);
    assert_eq!(back, 32, "net_ring0 loops tx back to rx");
    for (i, m) in burst.iter().enumerate() {
        assert_eq!(usize::from(m.data()[0]), i, "same packets, same order");
    }

    // tx_vec sends from an ArrayVec in place: the same packets come back, in order, and the
    // vector is left empty.
    let mut v: arrayvec::ArrayVec<dpdk_sys::Mbuf, 64> = arrayvec::ArrayVec::new();
    for (i, mut m) in burst.drain().enumerate() {
        m.data_mut()[1] = u8::try_from(100 + i).expect("i < 32");
        v.push(m);
    }
    let sent = ring_tx.tx_vec(&mut v);
    assert_eq!((sent.sent, sent.dropped), (32, 0));
    assert!(v.is_empty());
    assert_eq!(
        ring_tx.tx_vec(&mut v).sent,
        0,
        "an empty vector sends nothing"
    );
    assert_eq!(ring_rx.rx(&mut burst), 32);
    for (i, m) in burst.iter().enumerate() {
        assert_eq!(usize::from(m.data()[1]), 100 + i, "tx_vec kept the order");
    }
    drop(burst);

    let null_stats = null0.stats().expect("stats");
    let ring_stats = ring.stats().expect("stats");
    assert_eq!(null_stats.ipackets, 32);
    assert_eq!(ring_stats.opackets, 64);
    assert_eq!(ring_stats.ipackets, 64);
    assert_eq!(null_stats.rx_nombuf, 0);

    // Handles move to another thread and come back.
    let null_rx = std::thread::spawn(move || {
        let mut b: Burst<64> = Burst::new();
        assert_eq!(null_rx.rx(&mut b), 64);
        null_rx
    })
    .join()
    .expect("worker thread");
    drop((null_rx, ring_tx, ring_rx));
    null0.stop().expect("stop with no handles out");
    assert!(!null0.is_started());
    drop(null0);
    drop(ring);
}

fn rss_on_null_port_degrades_or_applies(eal: &Eal, pool: &Arc<Mempool>) {
    let mut null1 = Port::open(eal, "net_null1").expect("net_null1");
    let config = PortConfig {
        rx_queues: 2,
        tx_queues: 2,
        rx_desc: 256,
        tx_desc: 256,
        rss: RssHash::IpSourceOnly,
        promiscuous: true,
    };
    let setup = null1.configure(&config, pool).expect("configure with RSS");
    // net_null advertises IP RSS but not the L3-only modifiers: RSS degrades to both addresses.
    assert_eq!(setup.rss, RssOutcome::L3OnlyUnsupported, "{setup:?}");
    assert_ne!(setup.rss_hash_fields, 0);
    null1.start().expect("start");
    let q1 = null1.rx_queue(1).expect("rx queue 1");
    drop(q1);
    let too_many = PortConfig {
        rx_queues: 100,
        ..config
    };
    assert!(null1.stop().is_ok());
    assert!(matches!(
        null1.configure(&too_many, pool),
        Err(DpdkError::InvalidConfig(_))
    ));
}

fn meters_green_then_red() {
    let hz = dpdk_sys::tsc_hz();
    // 1 MB/s committed, 3000-byte buckets.
    let profile = SrtcmProfile::new(1_000_000, 3000, 3000).expect("valid srTCM profile");
    let mut meter = Srtcm::new(&profile);
    let t = tsc();
    assert_eq!(meter.check(&profile, t, 100), Color::Green);
    // Without time passing, drain committed then excess bucket.
    let colors: Vec<Color> = (0..6).map(|_| meter.check(&profile, t, 1000)).collect();
    assert_eq!(
        colors,
        [
            Color::Green,
            Color::Green,
            Color::Yellow,
            Color::Yellow,
            Color::Yellow,
            Color::Red
        ]
    );
    // One second later the committed bucket is full again.
    assert_eq!(meter.check(&profile, t + hz, 1000), Color::Green);

    let profile = TrtcmProfile::new(1_000_000, 2_000_000, 3000, 6000).expect("valid trTCM");
    let mut meter = Trtcm::new(&profile);
    let t = tsc();
    assert_eq!(meter.check(&profile, t, 100), Color::Green);
    let colors: Vec<Color> = (0..7).map(|_| meter.check(&profile, t, 1000)).collect();
    assert_eq!(colors.first(), Some(&Color::Green));
    assert_eq!(colors.last(), Some(&Color::Red));
    assert!(colors.contains(&Color::Yellow));

    assert!(SrtcmProfile::new(0, 3000, 3000).is_err(), "zero rate");
    assert!(
        TrtcmProfile::new(2_000_000, 1_000_000, 3000, 3000).is_err(),
        "pir < cir"
    );
}
