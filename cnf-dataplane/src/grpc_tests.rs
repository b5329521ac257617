//! The service's own paths, without workers: the inject ring seen from the Punt stream.

use super::*;

fn service(ring: rtrb::Producer<InjectRecord>) -> DataplaneService {
    let (applied, _bells) = task_bell::pair().expect("socket pair");
    let control = Control {
        shadow: crate::control::shadow::Shadow::new(4, 4),
        workers: Vec::new(),
        tsc_hz: 1,
        resolver: None,
        applied,
        ports: Vec::new(),
    };
    DataplaneService::new(
        Arc::new(Mutex::new(control)),
        pb::Identity::default(),
        Some((ring, Doorbell::default())),
    )
}

fn counter(svc: &DataplaneService, name: &str) -> u64 {
    let mut v = Vec::new();
    svc.paths.snapshot(&mut v);
    v.iter()
        .find(|(_, c, _)| *c == name)
        .map(|(_, _, n)| *n)
        .unwrap_or_else(|| panic!("no counter {name}: {v:?}"))
}

const DELAYED: &str = "inject delayed: no room in ring";
const DROPPED: &str = "inject dropped: bad frame or ring full";

#[tokio::test]
async fn a_full_inject_ring_holds_a_streamed_frame_back_then_drops_it() {
    let (tx, mut rx) = rtrb::RingBuffer::<InjectRecord>::new(1);
    let svc = service(tx);
    let frame = pb::InjectedFrame {
        port: 0,
        frame: vec![0x5a; 60],
    };
    assert!(svc.queue_streamed(&frame).await, "room for one");
    assert_eq!((counter(&svc, DELAYED), counter(&svc, DROPPED)), (0, 0));

    // The worker frees the slot while the second frame waits: it is delayed, not lost.
    let worker = tokio::spawn(async move {
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        let first = rx.pop().expect("the first frame");
        assert_eq!(usize::from(first.len), 60);
        rx
    });
    assert!(
        svc.queue_streamed(&frame).await,
        "queued once room appeared"
    );
    let rx = worker.await.expect("worker task");
    assert_eq!((counter(&svc, DELAYED), counter(&svc, DROPPED)), (1, 0));
    assert_eq!(rx.slots(), 1, "the second frame is in the ring");

    // Nobody drains: the third frame waits its bounded time, then is dropped and counted.
    let t = std::time::Instant::now();
    assert!(!svc.queue_streamed(&frame).await);
    assert!(t.elapsed() >= std::time::Duration::from_millis(u64::from(INJECT_FULL_WAITS)));
    assert_eq!((counter(&svc, DELAYED), counter(&svc, DROPPED)), (2, 1));

    // A frame for a port that does not exist is dropped at once, not held back.
    let bad = pb::InjectedFrame {
        port: 7,
        frame: vec![0x5a; 60],
    };
    assert!(!svc.queue_streamed(&bad).await);
    assert_eq!((counter(&svc, DELAYED), counter(&svc, DROPPED)), (2, 2));
    // Telemetry's view: the drops, not the delays.
    let drops = svc.control_paths().drops();
    assert!(drops.contains(&(DROPPED, 2)), "{drops:?}");
    assert!(drops.iter().all(|(r, _)| *r != DELAYED), "{drops:?}");
}

#[tokio::test(start_paused = true)]
async fn a_stop_is_told_on_the_punt_stream_and_ends_at_the_last_read() {
    use crate::stopping::{Ended, wait_for_last_read};
    let (tx, _rx) = rtrb::RingBuffer::<InjectRecord>::new(1);
    let svc = service(tx);
    let grace = std::time::Duration::from_secs(2);
    let ask = |last_read| pb::GetCountersRequest {
        session_ids: Vec::new(),
        include_nodes: false,
        include_workers: false,
        last_read,
    };
    // A read marked last with no stop announced is stray: it does not cut a later stop short.
    svc.get_counters(Request::new(ask(true)))
        .await
        .expect("read");
    assert!(!svc.announce_stopping(), "no control listens");
    let (stream_tx, mut stream_rx) = mpsc::channel(4);
    *svc.subscriber.lock().expect("lock") = Some(stream_tx);
    assert!(svc.announce_stopping());
    let notice = stream_rx
        .recv()
        .await
        .expect("a notice")
        .expect("not an error");
    assert!(notice.stopping && notice.frame.is_empty(), "{notice:?}");

    // An ordinary read (an interim's, say) is not the last one.
    svc.get_counters(Request::new(ask(false)))
        .await
        .expect("read");
    let ended = wait_for_last_read(svc.last_read_served(), grace).await;
    assert_eq!(ended, Ended::Grace);
    // The last read, answered before the wait began, still ends it at once.
    svc.get_counters(Request::new(ask(true)))
        .await
        .expect("read");
    let t = tokio::time::Instant::now();
    let ended = wait_for_last_read(svc.last_read_served(), grace).await;
    assert_eq!(ended, Ended::Read);
    assert!(t.elapsed().is_zero());
}
