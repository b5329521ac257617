use super::*;
use proptest::prelude::*;

const HZ: u64 = 2_000_000_000;

/// Offer `pkts` packets of `len` bytes evenly spaced at `offered_bytes_per_sec`; count colours.
fn run_sr(p: &SrTcmProfile, offered_bytes_per_sec: u64, len: u32, pkts: u64) -> [u64; 3] {
    let gap = HZ * u64::from(len) / offered_bytes_per_sec;
    let mut m = SrTcm::new(p, 0);
    let mut c = [0u64; 3];
    for i in 0..pkts {
        c[m.check(p, (i + 1) * gap, len).index()] += 1;
    }
    c
}

fn run_tr(p: &TrTcmProfile, offered_bytes_per_sec: u64, len: u32, pkts: u64) -> [u64; 3] {
    let gap = HZ * u64::from(len) / offered_bytes_per_sec;
    let mut m = TrTcm::new(p, 0);
    let mut c = [0u64; 3];
    for i in 0..pkts {
        c[m.check(p, (i + 1) * gap, len).index()] += 1;
    }
    c
}

#[test]
fn tb_params_match_rte_meter_formula() {
    // period >= 100 cycles: one byte per period.
    assert_eq!(tb_params(HZ, 1_000_000), (2000, 1));
    // 125 MB/s (1 Gbit/s) on 2 GHz: period 16 < 100 -> ceil(100/16)=7 bytes per 112 cycles.
    assert_eq!(tb_params(HZ, 125_000_000), (112, 7));
    assert_eq!(tb_params(HZ, 0), (TB_PERIOD_MIN, 0));
}

#[test]
fn srtcm_long_run_green_rate_within_one_percent_of_cir() {
    for cir in [125_000u64, 1_250_000, 12_500_000, 125_000_000] {
        let p = SrTcmProfile::new(HZ, cir, 3000, 3000).unwrap();
        // Offer 3x CIR of 1000-byte packets for 10 s of virtual time.
        let len = 1000;
        let offered = 3 * cir;
        let pkts = 10 * offered / u64::from(len);
        let c = run_sr(&p, offered, len, pkts);
        let green_rate = c[0] as f64 * f64::from(len) / 10.0;
        let err = (green_rate - cir as f64).abs() / cir as f64;
        assert!(err < 0.01, "cir {cir}: green {green_rate} B/s, error {err}");
    }
}

#[test]
fn trtcm_long_run_green_rate_within_one_percent_of_cir() {
    for cir in [125_000u64, 12_500_000, 125_000_000] {
        let p = TrTcmProfile::new(HZ, cir, 2 * cir, 3000, 3000).unwrap();
        let len = 500;
        let offered = 4 * cir;
        let pkts = 10 * offered / u64::from(len);
        let c = run_tr(&p, offered, len, pkts);
        let green_rate = c[0] as f64 * f64::from(len) / 10.0;
        let err = (green_rate - cir as f64).abs() / cir as f64;
        assert!(err < 0.01, "cir {cir}: green {green_rate} B/s, error {err}");
    }
}

#[test]
fn trtcm_twice_pir_offered_loses_about_half() {
    let cir = 1_250_000;
    let pir = 2_500_000;
    let p = TrTcmProfile::new(HZ, cir, pir, 1500, 1500).unwrap();
    let len = 1000;
    let offered = 2 * pir;
    let pkts = 20 * offered / u64::from(len);
    let c = run_tr(&p, offered, len, pkts);
    let red = c[2] as f64 / pkts as f64;
    assert!(
        (red - 0.5).abs() < 0.01,
        "red fraction {red}, colours {c:?}"
    );
    // Of the half that passes, CIR/PIR is green.
    let green = c[0] as f64 / pkts as f64;
    assert!((green - 0.25).abs() < 0.01, "green fraction {green}");
}

#[test]
fn srtcm_overflow_from_tc_fills_te() {
    let p = SrTcmProfile::new(HZ, 1_000_000, 1000, 1000).unwrap();
    let mut m = SrTcm::new(&p, 0);
    assert_eq!(m.check(&p, 0, 1000), Colour::Green);
    assert_eq!(m.check(&p, 0, 1000), Colour::Yellow);
    assert_eq!(m.check(&p, 0, 1), Colour::Red);
    // After 1 s at 1 MB/s both buckets are full again (Tc overflow spills into Te).
    let _ = m.check(&p, HZ, 0);
    assert_eq!(m.tokens(), (1000, 1000));
}

#[test]
fn clock_going_backwards_adds_nothing() {
    let p = TrTcmProfile::new(HZ, 1000, 2000, 100, 100).unwrap();
    let mut m = TrTcm::new(&p, 1_000_000);
    assert_eq!(m.check(&p, 1_000_000, 100), Colour::Green);
    assert_eq!(m.check(&p, 5, 100), Colour::Red);
    assert_eq!(m.tokens(), (0, 0));
}

#[test]
fn huge_time_gap_saturates_and_caps() {
    let p = SrTcmProfile::new(HZ, 125_000_000, MAX_BURST_BYTES / 2, MAX_BURST_BYTES).unwrap();
    let mut m = SrTcm::new(&p, 0);
    let _ = m.check(&p, 0, u32::MAX);
    let _ = m.check(&p, u64::MAX, 1);
    let (tc, te) = m.tokens();
    assert!(tc <= p.cbs_bytes && te <= p.ebs_bytes);
}

#[test]
fn invalid_profiles_rejected() {
    assert_eq!(SrTcmProfile::new(HZ, 0, 1, 1), Err(MeterError::ZeroCir));
    assert!(SrTcmProfile::new(HZ, 1, 0, 0).is_err());
    assert!(matches!(
        TrTcmProfile::new(HZ, 10, 5, 1, 1),
        Err(MeterError::PirBelowCir { .. })
    ));
    assert!(TrTcmProfile::new(HZ, 10, 10, 0, 1).is_err());
    assert!(TrTcmProfile::new(0, 10, 10, 1, 1).is_err());
    // Token counts are stored in 32 bits in the session line.
    let big = MAX_BURST_BYTES + 1;
    assert_eq!(
        SrTcmProfile::new(HZ, 1, 1, big),
        Err(MeterError::BurstTooLarge("ebs"))
    );
    assert_eq!(
        TrTcmProfile::new(HZ, 1, 1, big, 1),
        Err(MeterError::BurstTooLarge("cbs"))
    );
    assert!(SrTcmProfile::new(HZ, 1, MAX_BURST_BYTES, MAX_BURST_BYTES).is_ok());
}

proptest! {
    #[test]
    fn reciprocal_division_is_exact(x in any::<u64>(), d in 1u64..u64::MAX) {
        prop_assert_eq!(div_by(x, d, reciprocal(d)), x / d);
    }

    #[test]
    fn reciprocal_division_near_max(k in 0u64..1000, d in 1u64..u64::MAX) {
        let x = u64::MAX - k;
        prop_assert_eq!(div_by(x, d, reciprocal(d)), x / d);
    }

    #[test]
    fn reciprocal_division_small_divisors(x in any::<u64>(), d in 1u64..100_000) {
        prop_assert_eq!(div_by(x, d, reciprocal(d)), x / d);
    }

    #[test]
    fn srtcm_buckets_never_exceed_bursts(
        cir in 1u64..10_000_000_000,
        cbs in 0u64..1_000_000,
        ebs in 1u64..1_000_000,
        steps in proptest::collection::vec((0u64..10_000_000, 0u32..10_000), 1..200),
    ) {
        let p = SrTcmProfile::new(HZ, cir, cbs, ebs).unwrap();
        let mut m = SrTcm::new(&p, 0);
        let mut now = 0u64;
        for (dt, len) in steps {
            now += dt;
            let before = m.tokens();
            let c = m.check(&p, now, len);
            let (tc, te) = m.tokens();
            prop_assert!(tc <= p.cbs_bytes && te <= p.ebs_bytes);
            if c == Colour::Red && dt == 0 {
                prop_assert_eq!(before, (tc, te));
            }
        }
    }

    #[test]
    fn trtcm_colour_order_and_bounds(
        cir in 1u64..10_000_000_000,
        extra in 0u64..10_000_000_000,
        cbs in 1u64..1_000_000,
        pbs in 1u64..1_000_000,
        steps in proptest::collection::vec((0u64..10_000_000, 0u32..10_000), 1..200),
    ) {
        let p = TrTcmProfile::new(HZ, cir, cir + extra, cbs, pbs).unwrap();
        let mut m = TrTcm::new(&p, 0);
        let mut now = 0u64;
        for (dt, len) in steps {
            now += dt;
            let c = m.check(&p, now, len);
            let (tc, tp) = m.tokens();
            prop_assert!(tc <= p.cbs_bytes && tp <= p.pbs_bytes);
            // A packet larger than PBS can never pass; one within zero length always does.
            if u64::from(len) > p.pbs_bytes { prop_assert_eq!(c, Colour::Red); }
            if len == 0 { prop_assert_eq!(c, Colour::Green); }
        }
    }

    #[test]
    fn green_bytes_bounded_by_cbs_plus_cir_time(
        cir in 1_000u64..1_000_000_000,
        cbs in 1u64..100_000,
        steps in proptest::collection::vec((0u64..1_000_000, 1u32..2_000), 1..300),
    ) {
        // RFC 2697 §1: over any interval T, green bytes <= CBS + CIR * T.
        let p = SrTcmProfile::new(HZ, cir, cbs, 1).unwrap();
        let mut m = SrTcm::new(&p, 0);
        let (mut now, mut green) = (0u64, 0u64);
        for (dt, len) in steps {
            now += dt;
            if m.check(&p, now, len) == Colour::Green { green += u64::from(len); }
        }
        let bound = u128::from(cbs) + u128::from(now / p.cir_period) * u128::from(p.cir_bytes_per_period);
        prop_assert!((green as u128) <= bound, "green {} bound {}", green, bound);
    }
}
