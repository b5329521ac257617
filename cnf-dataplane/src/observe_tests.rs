use super::*;
use crate::meter::{Colour as MeterColour, SrTcmProfile};
use crate::nodes::NodeEnv;
use crate::packet::{Direction as PktDirection, HeapBuf};
use crate::pipeline::Pipeline;
use crate::tables::session::SessionCounters;

fn pipeline_counters() -> PipelineCounters {
    let limit = SrTcmProfile::new(1_000_000_000, 1000, 64, 0).expect("valid profile");
    Pipeline::<HeapBuf>::new(NodeEnv::default(), 0, limit, 0).counters()
}

#[test]
fn every_node_counter_is_classified_once() {
    let all = pipeline_counters().snapshot();
    assert!(!all.is_empty());
    let mut unclassified = Vec::new();
    for (node, reason, _) in &all {
        let drop = DROPS.contains(&(*node, *reason));
        let kept = NOT_DROPS.contains(&(*node, *reason));
        if drop == kept {
            unclassified.push(format!("{node}/{reason} (drop: {drop}, not drop: {kept})"));
        }
    }
    assert!(
        unclassified.is_empty(),
        "classify these counters in observe.rs (DROPS or NOT_DROPS): {unclassified:?}"
    );
}

struct Fixture {
    poller: Poller,
    cells: SessionCounterArray,
    stats: Arc<WorkerStats>,
}

fn fixture() -> Fixture {
    let cells = SessionCounters::new(4);
    let stats = Arc::new(WorkerStats::default());
    let poller = Poller {
        workers: vec![WorkerHandles {
            sessions: Arc::clone(&cells),
            nodes: pipeline_counters(),
            stats: Arc::clone(&stats),
        }],
        ..Poller::default()
    };
    Fixture {
        poller,
        cells,
        stats,
    }
}

fn policer(s: &DataplaneSnapshot, plan: &str, dir: Direction, colour: Colour) -> u64 {
    s.policer
        .iter()
        .find(|p| p.plan == plan && p.direction == dir && p.colour == colour)
        .map_or(0, |p| p.packets)
}

#[test]
fn per_plan_totals_grow_only_across_slot_reuse() {
    let mut f = fixture();
    let plans: HashMap<u32, String> = [(1, "gold".to_owned()), (2, "silver".to_owned())].into();
    f.cells.count(2, PktDirection::Up, MeterColour::Green, 100);
    f.cells.count(2, PktDirection::Up, MeterColour::Green, 100);
    f.cells.count(2, PktDirection::Down, MeterColour::Red, 1500);
    f.poller.scratch = vec![(2, 7, 1)];
    f.poller.accumulate(&plans);
    let s = f.poller.snapshot();
    assert_eq!(s.workers[0].packets_up, 2);
    assert_eq!(s.workers[0].bytes_up, 200);
    assert_eq!(s.workers[0].packets_down, 1);
    assert_eq!(policer(&s, "gold", Direction::Up, Colour::Green), 2);
    assert_eq!(policer(&s, "gold", Direction::Down, Colour::Red), 1);

    // Polled again with nothing new: nothing is added twice.
    f.poller.accumulate(&plans);
    assert_eq!(
        policer(&f.poller.snapshot(), "gold", Direction::Up, Colour::Green),
        2
    );

    // Session 7 goes, session 8 (silver) takes the slot, which restarts from zero (as a
    // worker clears a slot it installs into).
    let fresh = SessionCounters::new(4);
    f.poller.workers[0].sessions = Arc::clone(&fresh);
    fresh.count(2, PktDirection::Up, MeterColour::Yellow, 60);
    f.poller.scratch = vec![(2, 8, 2)];
    f.poller.accumulate(&plans);
    let s = f.poller.snapshot();
    assert_eq!(
        s.workers[0].packets_up, 3,
        "2 of session 7, then 1 of session 8"
    );
    assert_eq!(s.workers[0].bytes_up, 260);
    assert_eq!(policer(&s, "gold", Direction::Up, Colour::Green), 2);
    assert_eq!(policer(&s, "silver", Direction::Up, Colour::Yellow), 1);
}

#[test]
fn graph_and_node_runtime_and_drops_come_from_the_worker_counters() {
    let mut f = fixture();
    f.stats.rx_bursts.add(3);
    f.stats.rx_packets.add(96);
    f.stats.busy_cycles.add(48_000);
    f.stats.tx_dropped.add(5);
    let clocks = &f.poller.workers[0].nodes.runtime;
    clocks[3].add(90, 9_000);
    clocks[3].add(6, 700);
    f.poller.accumulate(&HashMap::new());
    let s = f.poller.snapshot();
    let w = &s.workers[0];
    assert_eq!(
        w.nodes[0],
        NodeRuntime {
            node: GRAPH_NODE,
            calls: 3,
            vectors: 96,
            cycles: 48_000
        }
    );
    // Then one row per node as the worker runs them, the fused stage as one.
    let names: Vec<&str> = w.nodes[1..].iter().map(|n| n.node).collect();
    assert_eq!(names, crate::pipeline::RUNTIME_NODES);
    assert_eq!(
        w.nodes[4],
        NodeRuntime {
            node: crate::pipeline::FUSED_FORWARD,
            calls: 2,
            vectors: 96,
            cycles: 9_700
        }
    );
    let tx = w
        .drops
        .iter()
        .find(|d| d.node == "port-tx")
        .expect("tx drops reported");
    assert_eq!(tx.packets, 5);
    // Only drop counters are reported as drops.
    assert!(
        w.drops
            .iter()
            .all(|d| d.node == "port-tx" || is_drop(d.node, d.reason))
    );
    assert!(w.drops.iter().any(|d| d.reason == "no session"));
    assert!(!w.drops.iter().any(|d| d.reason == "upstream hit"));
}

#[test]
fn a_counter_below_its_last_value_was_reset() {
    assert_eq!(grown(10, 4), 6);
    assert_eq!(grown(3, 9), 3);
    assert_eq!(grown(0, 0), 0);
}

#[test]
fn the_control_paths_drops_are_in_the_snapshot_and_only_its_drops() {
    let poller = Poller {
        paths: Some(Arc::new(crate::grpc::ControlPathCounters::holding([
            3, 5, 7, 11,
        ]))),
        ..Poller::default()
    };
    let got: Vec<(&str, u64)> = poller
        .snapshot()
        .control_path
        .iter()
        .map(|d| (d.reason, d.frames))
        .collect();
    assert_eq!(
        got,
        vec![
            ("punt dropped: no Punt stream", 3),
            ("punt dropped: Punt stream full", 5),
            ("inject dropped: bad frame or ring full", 7),
        ],
        "every drop with its frames, and not the delays (11)"
    );
    assert!(Poller::default().snapshot().control_path.is_empty());
}
