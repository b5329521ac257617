//! Our RFC 2697/2698 meters against DPDK's own `rte_meter` (through `dpdk-sys`'s wrappers) on
//! the same scripted packet schedules: the colour of every packet must be identical.
//!
//! `dpdk-sys` starts a DPDK meter at the TSC value read inside `rte_meter_*_config`, which this
//! test cannot set. It reads the TSC just before and just after, starts ours at "before", and
//! places every scripted packet where the two start points are indistinguishable: a packet at
//! offset `u` from "before" sees the same number of whole token periods from either start when
//! `u mod period >= after - before`. Periods here are long (>= 100,000 cycles, one byte per
//! period) so that this excludes little of the schedule; the short-period arithmetic (several
//! bytes per period) is the same code and is covered by the unit tests of `tb_params`.
//!
//! Needs the EAL (root); skipped with a message otherwise unless `KBNG_E2E_REQUIRED=1`.

use dpdk_sys::meter::{Color, Srtcm, SrtcmProfile, Trtcm, TrtcmProfile};
use kbng_dataplane::meter::{Colour, SrTcm, SrTcmProfile, TrTcm, TrTcmProfile};

fn eal() -> Option<dpdk_sys::Eal> {
    let args: Vec<String> = [
        "-l",
        "0",
        "--no-huge",
        "-m",
        "64",
        "--no-pci",
        "--no-shconf",
        "--no-telemetry",
    ]
    .iter()
    .map(|s| s.to_string())
    .chain(std::iter::once(format!(
        "--file-prefix=kbng-meter-test-{}",
        std::process::id()
    )))
    .collect();
    match dpdk_sys::Eal::init(&args) {
        Ok(e) => Some(e),
        Err(e) => {
            assert!(
                std::env::var("KBNG_E2E_REQUIRED").is_err(),
                "EAL needed for the rte_meter comparison: {e}"
            );
            eprintln!("SKIPPED meter comparison: EAL init failed: {e}");
            None
        }
    }
}

fn ours(c: Colour) -> Color {
    match c {
        Colour::Green => Color::Green,
        Colour::Yellow => Color::Yellow,
        Colour::Red => Color::Red,
    }
}

/// A deterministic pseudo-random schedule: (offset from start, packet length).
struct Schedule {
    state: u64,
}

impl Schedule {
    fn next(&mut self) -> u64 {
        self.state = self
            .state
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        self.state >> 33
    }
}

/// Time to the next packet: back-to-back bursts, long idle gaps, and in between a gap that
/// offers about the committed rate, so that every colour occurs.
fn gap(s: &mut Schedule, len: u32, period: u64) -> u64 {
    match s.next() % 8 {
        0..=2 => 0,
        3 => s.next() % (5_000 * period),
        _ => s.next() % (2 * u64::from(len) * period),
    }
}

/// Move `u` forward until, for every period, `u mod period` is clear of the start window.
fn clear_of_window(mut u: u64, periods: &[u64], window: u64) -> u64 {
    for _ in 0..10_000 {
        match periods.iter().find(|p| u % **p < window) {
            None => return u,
            Some(p) => u += window - u % p,
        }
    }
    panic!("no time clear of the start window near {u}");
}

#[test]
fn colours_equal_rte_meter_on_scripted_schedules() {
    let Some(_eal) = eal() else {
        return;
    };
    let hz = dpdk_sys::tsc_hz();
    assert!(hz > 0);
    let mut totals = [[0u64; 3]; 2];
    // srTCM: (cir B/s, cbs, ebs), periods hz/cir >= 100,000 cycles.
    for (k, (cir, cbs, ebs)) in [
        (hz / 100_000, 3000, 3000),
        (hz / 250_000, 1500, 9000),
        (hz / 400_000, 9000, 0),
    ]
    .into_iter()
    .enumerate()
    {
        let dp = SrtcmProfile::new(cir, cbs, ebs).expect("rte_meter profile");
        let mp = SrTcmProfile::new(hz, cir, cbs, ebs).expect("our profile");
        let before = dpdk_sys::tsc();
        let mut dm = Srtcm::new(&dp);
        let after = dpdk_sys::tsc();
        let window = after - before + 64;
        assert!(window < mp.cir_period / 4, "start window {window} too wide");
        let mut mm = SrTcm::new(&mp, before);
        let mut s = Schedule {
            state: 7 + k as u64,
        };
        let mut u = 0u64;
        let mut counts = [0u64; 3];
        for i in 0..20_000 {
            let len = 40 + (s.next() % 1461) as u32;
            let gap = gap(&mut s, len, mp.cir_period);
            u = clear_of_window(u + gap, &[mp.cir_period], window);
            let a = dm.check(&dp, before + u, len);
            let b = ours(mm.check(&mp, before + u, len));
            assert_eq!(
                a, b,
                "srTCM profile {k}, packet {i} at +{u} cycles, {len} B"
            );
            counts[b as usize] += 1;
        }
        assert!(
            counts.iter().all(|c| *c > 0) || ebs == 0,
            "schedule exercises every colour: {counts:?}"
        );
        for c in 0..3 {
            totals[0][c] += counts[c];
        }
    }
    // trTCM: (cir, pir, cbs, pbs).
    for (k, (cir, pir, cbs, pbs)) in [
        (hz / 400_000, hz / 150_000, 3000, 6000),
        (hz / 300_000, hz / 100_000, 1500, 1500),
        (hz / 200_000, hz / 200_000, 2000, 8000),
    ]
    .into_iter()
    .enumerate()
    {
        let dp = TrtcmProfile::new(cir, pir, cbs, pbs).expect("rte_meter profile");
        let mp = TrTcmProfile::new(hz, cir, pir, cbs, pbs).expect("our profile");
        let before = dpdk_sys::tsc();
        let mut dm = Trtcm::new(&dp);
        let after = dpdk_sys::tsc();
        let window = after - before + 64;
        let mut mm = TrTcm::new(&mp, before);
        let mut s = Schedule {
            state: 99 + k as u64,
        };
        let mut u = 0u64;
        let mut counts = [0u64; 3];
        for i in 0..20_000 {
            let len = 40 + (s.next() % 1461) as u32;
            let gap = gap(&mut s, len, mp.cir_period);
            u = clear_of_window(u + gap, &[mp.cir_period, mp.pir_period], window);
            let a = dm.check(&dp, before + u, len);
            let b = ours(mm.check(&mp, before + u, len));
            assert_eq!(
                a, b,
                "trTCM profile {k}, packet {i} at +{u} cycles, {len} B"
            );
            counts[b as usize] += 1;
        }
        assert!(
            counts.iter().all(|c| *c > 0),
            "schedule exercises every colour: {counts:?}"
        );
        for c in 0..3 {
            totals[1][c] += counts[c];
        }
    }
    eprintln!(
        "identical colours: srTCM g/y/r {:?}, trTCM g/y/r {:?}",
        totals[0], totals[1]
    );
}
