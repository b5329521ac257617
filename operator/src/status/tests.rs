use super::*;
use crate::build::tests::{sample_bng, sample_plans};
use kbng_crds::grant::VerdictReason;

fn verdict(valid: bool) -> Verdict {
    Verdict {
        valid,
        reason: if valid {
            VerdictReason::Verified
        } else {
            VerdictReason::BadSignature
        },
        message: if valid { "ok".into() } else { "forged".into() },
        max_sessions: if valid { 1000 } else { FREE_BASELINE_SESSIONS },
        source: if valid {
            LicenceSource::Licence
        } else {
            LicenceSource::FreeBaseline
        },
        expires_at: Timestamp::from_second(2_000_000_000).unwrap(),
        days_remaining: valid.then_some(100),
        review_at: None,
    }
}

fn placed(pod: &str, node: &str) -> DataplaneStatus {
    DataplaneStatus {
        pod: pod.into(),
        node: Some(node.into()),
        placement: format!("scheduled on {node} (Running)"),
        ..DataplaneStatus::default()
    }
}

struct World {
    licence: LicenceState,
    plans: Vec<PlanState>,
    bng: kbng_crds::Bng,
    control: ControlView,
    store: StoreView,
}

fn world() -> World {
    World {
        licence: LicenceState::Evaluated {
            name: "lab-licence".into(),
            verdict: verdict(true),
        },
        plans: sample_plans().into_iter().map(PlanState::Valid).collect(),
        bng: sample_bng(),
        control: ControlView::Unreachable("connect: refused".into()),
        store: StoreView::EmptyDir,
    }
}

fn observed(w: &World, secs: i64) -> Observed<'_> {
    Observed {
        generation: Some(3),
        licence: &w.licence,
        plans: &w.plans,
        unsatisfiable: None,
        dataplanes: vec![placed("lab-dataplane-a", "kbng-sriov-a")],
        dataplanes_desired: 1,
        dataplanes_ready: 1,
        control_ready: true,
        aaa_mode: w.bng.spec.aaa.mode,
        subscribers_configured: w.bng.spec.aaa.subscribers.is_some(),
        pools: &w.bng.spec.pools,
        portal_url: &w.bng.spec.walled_garden.portal_url,
        control: &w.control,
        store: &w.store,
        session_capacity: w.bng.spec.dataplane.session_capacity,
        now: Timestamp::from_second(secs).unwrap(),
    }
}

fn get<'a>(s: &'a BngStatus, t: &str) -> &'a Condition {
    condition(&s.conditions, t).unwrap_or_else(|| panic!("no {t}"))
}

#[test]
fn every_gate_and_summary_condition_is_reported_once() {
    let w = world();
    let s = compute(&observed(&w, 100), None);
    assert_eq!(s.conditions.len(), 3 + gates::ALL.len() + 2);
    assert_eq!(s.conditions[0].type_, gates::READY);
    for c in &s.conditions {
        assert_eq!(c.observed_generation, Some(3), "{}", c.type_);
        assert!(!c.reason.is_empty(), "{}", c.type_);
    }
    assert_eq!(s.observed_generation, Some(3));
    assert_eq!(s.sessions.cap, 1000);
    assert_eq!(s.licence_source, Some(LicenceSource::Licence));
}

#[test]
fn unreported_dataplanes_keep_the_bng_unready_and_say_why() {
    let w = world();
    let s = compute(&observed(&w, 100), None);
    assert_eq!(get(&s, gates::LICENCE_VALID).status, TRUE);
    assert_eq!(get(&s, gates::PLANS_PROGRAMMED).status, TRUE);
    assert_eq!(
        get(&s, gates::DATAPLANES_CONNECTED).reason,
        "AwaitingReport"
    );
    let ready = get(&s, gates::READY);
    assert_eq!(ready.status, FALSE);
    assert_eq!(ready.reason, gates::DATAPLANES_CONNECTED);
    assert_eq!(get(&s, gates::STALLED).status, FALSE);
    assert_eq!(get(&s, gates::RECONCILING).status, FALSE);
}

#[test]
fn all_gates_true_makes_ready() {
    let mut w = world();
    let mut o = observed(&w, 100);
    o.dataplanes[0].connected = true;
    let s = compute(&o, None);
    assert_eq!(get(&s, gates::DATAPLANES_CONNECTED).status, TRUE);
    // Without a link report, interfaces are never claimed up.
    assert_eq!(get(&s, gates::INTERFACES_UP).status, FALSE);
    assert_eq!(get(&s, gates::READY).reason, gates::INTERFACES_UP);
    assert_eq!(get(&s, CONTROL_REPORTING).reason, "ControlUnreachable");

    w.control = ControlView::Reported {
        sessions: Some(SessionTally {
            active: 7,
            captive: 2,
            total: 10,
        }),
        links: vec![("lab-dataplane-a".into(), Some(true))],
        pools: vec![PoolUsage {
            name: "p0".into(),
            leasable: 251,
            in_use: 10,
            fixed: 3,
        }],
        subscribers: None,
    };
    let mut o = observed(&w, 100);
    o.dataplanes[0].connected = true;
    let s = compute(&o, Some(&s));
    assert_eq!(get(&s, gates::INTERFACES_UP).status, TRUE);
    assert_eq!(get(&s, gates::READY).status, TRUE);
    assert_eq!(get(&s, CONTROL_REPORTING).status, TRUE);
    assert_eq!(
        (
            s.sessions.active,
            s.sessions.captive,
            s.sessions.total,
            s.sessions.cap
        ),
        (7, 2, 10, 1000)
    );
    assert_eq!(
        s.pools
            .iter()
            .map(|p| (p.name.as_str(), p.leasable, p.in_use, p.fixed))
            .collect::<Vec<_>>(),
        [("p0", 251, 10, 3)]
    );

    // A port down is named; the control going away keeps the last counts.
    w.control = ControlView::Reported {
        sessions: None,
        links: vec![("lab-dataplane-a".into(), Some(false))],
        pools: Vec::new(),
        subscribers: None,
    };
    let down = compute(&observed(&w, 110), Some(&s));
    let c = get(&down, gates::INTERFACES_UP);
    assert_eq!(
        (c.reason.as_str(), c.message.contains("lab-dataplane-a")),
        ("LinkDown", true)
    );
    w.control = ControlView::Unreachable("timeout".into());
    let gone = compute(&observed(&w, 120), Some(&s));
    assert_eq!((gone.sessions.active, gone.sessions.total), (7, 10));
    assert_eq!(gone.pools, s.pools, "the last pools seen are kept");
    assert_eq!(get(&gone, CONTROL_REPORTING).message, "timeout");
}

#[test]
fn invalid_or_missing_licence_falls_back_to_the_free_baseline() {
    let mut w = world();
    w.licence = LicenceState::Evaluated {
        name: "lab-licence".into(),
        verdict: verdict(false),
    };
    let s = compute(&observed(&w, 100), None);
    assert_eq!(s.sessions.cap, FREE_BASELINE_SESSIONS);
    assert_eq!(s.licence_source, Some(LicenceSource::FreeBaseline));
    let lic = get(&s, gates::LICENCE_VALID);
    assert_eq!(
        (lic.status.as_str(), lic.reason.as_str()),
        (FALSE, "BadSignature")
    );
    assert!(
        lic.message.contains("free baseline of 64 sessions"),
        "{}",
        lic.message
    );
    assert_eq!(get(&s, gates::SESSION_CAP_KNOWN).reason, "FreeBaseline");
    assert_eq!(
        get(&s, gates::STALLED).status,
        FALSE,
        "an invalid licence is no stall"
    );

    w.licence = LicenceState::NotFound("gone".into());
    let s = compute(&observed(&w, 100), None);
    assert_eq!(get(&s, gates::LICENCE_VALID).reason, "LicenceNotFound");
    assert_eq!(s.sessions.cap, FREE_BASELINE_SESSIONS);
}

#[test]
fn missing_plan_stalls_with_its_name() {
    let mut w = world();
    w.plans.push(PlanState::NotFound("gold".into()));
    let s = compute(&observed(&w, 100), None);
    let stalled = get(&s, gates::STALLED);
    assert_eq!(
        (stalled.status.as_str(), stalled.reason.as_str()),
        (TRUE, "PlanNotFound")
    );
    assert!(stalled.message.contains("gold"));
    assert_eq!(get(&s, gates::READY).reason, "PlanNotFound");
    assert_eq!(get(&s, gates::PLANS_PROGRAMMED).status, FALSE);
}

#[test]
fn unsatisfiable_placement_stalls_and_pending_pods_show_the_scheduler() {
    let w = world();
    let mut o = observed(&w, 100);
    o.unsatisfiable = Some("41 CPUs requested".into());
    o.dataplanes = vec![DataplaneStatus {
        pod: "lab-dataplane-x".into(),
        placement: "Unschedulable: 0/3 nodes are available".into(),
        ..DataplaneStatus::default()
    }];
    o.dataplanes_ready = 0;
    let s = compute(&o, None);
    assert_eq!(get(&s, gates::STALLED).reason, "Unschedulable");
    let dp = get(&s, gates::DATAPLANES_CONNECTED);
    assert_eq!(dp.reason, "NotScheduled");
    assert!(
        dp.message.contains("0/3 nodes are available"),
        "{}",
        dp.message
    );
    assert_eq!(get(&s, gates::RECONCILING).status, TRUE);
}

#[test]
fn transition_times_are_kept_and_events_only_on_change() {
    let w = world();
    let first = compute(&observed(&w, 100), None);
    let events = transitions(None, &first);
    assert!(events.iter().any(|e| e.note.starts_with("Ready is False")));
    assert!(events.iter().all(|e| !e.note.starts_with("LicenceValid")));
    let second = compute(&observed(&w, 200), Some(&first));
    assert_eq!(
        get(&second, gates::READY).last_transition_time,
        get(&first, gates::READY).last_transition_time
    );
    assert!(transitions(Some(&first), &second).is_empty());

    let mut w2 = world();
    w2.plans.push(PlanState::NotFound("gold".into()));
    let third = compute(&observed(&w2, 300), Some(&second));
    let events = transitions(Some(&second), &third);
    let stalled = events.iter().find(|e| e.reason == "PlanNotFound").unwrap();
    assert!(stalled.warning);
    assert_eq!(
        get(&third, gates::STALLED).last_transition_time,
        Time(Timestamp::from_second(300).unwrap())
    );
}

#[test]
fn pool_arithmetic() {
    let mut pool = sample_bng().spec.pools[0].clone();
    // 100.64.0.0/16 less network, broadcast, gateway 100.64.0.1 and 100.64.0.0/29 (which
    // already holds network and gateway).
    assert_eq!(usable_addresses(&pool), 65536 - 8 - 1);
    pool.cidr = "10.0.0.0/30".into();
    pool.gateway = "10.0.0.1".into();
    pool.exclusions = vec![];
    assert_eq!(usable_addresses(&pool), 1);
    pool.exclusions = vec!["10.0.0.0/30".into()];
    assert_eq!(usable_addresses(&pool), 0);
    pool.cidr = "10.0.0.7/32".into();
    pool.gateway = "10.0.0.1".into();
    pool.exclusions = vec![];
    assert_eq!(usable_addresses(&pool), 1);
}

fn claim(requested: &str, capacity: Option<&str>, refused: Option<&str>) -> ClaimView {
    ClaimView {
        name: "session-store-lab-control-0".into(),
        requested: requested.into(),
        capacity: capacity.map(Into::into),
        refused: refused.map(Into::into),
    }
}

#[test]
fn the_session_store_condition_says_what_was_found() {
    let store = |claims: Vec<ClaimView>| {
        let mut w = world();
        w.bng.spec.dataplane.session_capacity = 2_000_000;
        w.store = StoreView::Claims {
            needed: "3Gi".into(),
            claims,
        };
        let c = get(&compute(&observed(&w, 100), None), SESSION_STORE_SIZED).clone();
        (c.status, c.reason, c.message)
    };
    let (status, reason, message) = store(vec![]);
    assert_eq!((status.as_str(), reason.as_str()), (UNKNOWN, "NoClaim"));
    assert!(
        message.contains("3Gi needed for sessionCapacity 2000000"),
        "{message}"
    );

    let (status, reason, message) = store(vec![claim("1Gi", None, Some("spec is immutable"))]);
    assert_eq!(
        (status.as_str(), reason.as_str()),
        (FALSE, "ExpansionRefused")
    );
    assert!(
        message.contains("requests 1Gi") && message.contains("spec is immutable"),
        "{message}"
    );

    let (status, reason, _) = store(vec![claim("2Gi", Some("2Gi"), None)]);
    assert_eq!((status.as_str(), reason.as_str()), (FALSE, "TooSmall"));

    let (status, reason, message) = store(vec![claim("3Gi", Some("1Gi"), None)]);
    assert_eq!((status.as_str(), reason.as_str()), (FALSE, "Resizing"));
    assert!(message.contains("has 1Gi so far"), "{message}");

    // Unbound (no capacity yet) but asking for enough; or bound with more than enough.
    for c in [
        claim("3Gi", None, None),
        claim("3221225472", Some("4Gi"), None),
    ] {
        let (status, reason, _) = store(vec![c]);
        assert_eq!((status.as_str(), reason.as_str()), (TRUE, "Sized"));
    }

    let w = world();
    let s = compute(&observed(&w, 100), None);
    assert_eq!(get(&s, SESSION_STORE_SIZED).reason, "EmptyDir");
}

#[test]
fn subscribers_in_force_follows_the_controls_report_of_the_file() {
    use crate::control_api::SubscribersReport;
    use kbng_crds::bng::SubscribersSource;
    let mut w = world();
    let reported_held = |file: Option<Option<String>>, held_removes| ControlView::Reported {
        sessions: None,
        links: Vec::new(),
        pools: Vec::new(),
        subscribers: Some(SubscribersReport {
            records: 40,
            file,
            held_removes,
        }),
    };
    let reported = |file| reported_held(file, None);
    w.control = reported(Some(None));
    let none = compute(&observed(&w, 100), None);
    assert!(
        condition(&none.conditions, SUBSCRIBERS_IN_FORCE).is_none(),
        "no ConfigMap named, no condition"
    );

    w.bng.spec.aaa.subscribers = Some(SubscribersSource {
        config_map: "subs".into(),
        key: "subs.csv".into(),
        max_removal_percent: None,
    });
    let ok = compute(&observed(&w, 100), None);
    let c = get(&ok, SUBSCRIBERS_IN_FORCE);
    assert_eq!(
        (c.status.as_str(), c.reason.as_str(), c.message.as_str()),
        (TRUE, "FileInForce", "40 subscriber record(s) in force")
    );
    assert!(
        transitions(None, &ok)
            .iter()
            .all(|t| t.reason != "FileInForce")
    );

    w.control = reported(Some(Some("row 7: bad MAC".into())));
    let bad = compute(&observed(&w, 110), Some(&ok));
    let c = get(&bad, SUBSCRIBERS_IN_FORCE);
    assert_eq!(
        (c.status.as_str(), c.reason.as_str()),
        (FALSE, "FileRejected")
    );
    assert!(
        c.message
            .ends_with("the 40 record(s) read before it stay in force: row 7: bad MAC")
    );
    let t = transitions(Some(&ok), &bad);
    assert!(
        t.iter().any(|t| t.warning && t.reason == "FileRejected"),
        "a warning event: {t:?}"
    );

    w.control = reported_held(Some(Some("held: removes 35 of the 40".into())), Some(35));
    let held = compute(&observed(&w, 115), Some(&ok));
    let c = get(&held, SUBSCRIBERS_IN_FORCE);
    assert_eq!((c.status.as_str(), c.reason.as_str()), (FALSE, "FileHeld"));
    assert!(
        c.message
            .ends_with("the 40 record(s) read before it stay in force: held: removes 35 of the 40"),
        "{}",
        c.message
    );

    w.control = reported(None);
    assert_eq!(
        get(&compute(&observed(&w, 120), None), SUBSCRIBERS_IN_FORCE).reason,
        "NoFileYet"
    );
    w.control = ControlView::Unreachable("timeout".into());
    let c = compute(&observed(&w, 130), Some(&bad));
    assert_eq!(get(&c, SUBSCRIBERS_IN_FORCE).status, UNKNOWN);

    w.bng.spec.aaa.subscribers = None;
    w.control = reported(Some(None));
    let removed = compute(&observed(&w, 140), Some(&bad));
    assert!(
        condition(&removed.conditions, SUBSCRIBERS_IN_FORCE).is_none(),
        "gone with the ConfigMap's reference"
    );
}
