//! The gRPC server of `kbng.dataplane.v1` (`kbng-api`). Runs on the control thread's tokio
//! runtime: validates, updates the shadow, hands commands to the workers and waits for them.
//! Every error leaves through `ApiError` (the contract's one mapping to `tonic::Status`).

use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex as StdMutex};

use kbng_api::ApiError;
use kbng_api::v1 as pb;
use kbng_api::v1::dataplane_server::Dataplane;
use tokio::sync::{Mutex, mpsc};
use tokio_stream::Stream;
use tonic::{Request, Response, Status, Streaming};

use crate::control::Control;
use crate::control::convert;
use crate::control::shadow::SlotIds;
use crate::doorbell::Doorbell;
use crate::io::InjectRecord;
use crate::packet::PortId;
use crate::punt::{NO_SLOT, PUNT_SNAPLEN, PuntReason, PuntRecord};
use crate::tables::{MAX_GARDEN_RULES, MAX_GATEWAYS, Plan};
use crate::task_bell::{self, TaskWait};
use futures::FutureExt as _;

type PuntSender = mpsc::Sender<Result<pb::PuntedFrame, Status>>;

/// Default and maximum page of `ListSessions`.
pub const PAGE_DEFAULT: usize = 1000;
/// Maximum page of `ListSessions`.
pub const PAGE_MAX: usize = 10_000;

const PUNT_NO_STREAM: &str = "punt dropped: no Punt stream";
const PUNT_STREAM_FULL: &str = "punt dropped: Punt stream full";
const INJECT_DROPPED: &str = "inject dropped: bad frame or ring full";

/// Drops on the control thread's own paths (the workers count theirs per node): exported with
/// the node counters as node "control-path". Atomic adds: several tasks may write.
#[derive(Debug, Default)]
pub struct ControlPathCounters {
    punt_no_stream: std::sync::atomic::AtomicU64,
    punt_stream_full: std::sync::atomic::AtomicU64,
    inject_dropped: std::sync::atomic::AtomicU64,
    inject_delayed: std::sync::atomic::AtomicU64,
}

impl ControlPathCounters {
    fn inc(c: &std::sync::atomic::AtomicU64) {
        c.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }
    /// (reason, frames) of every drop among them (not the delays), for telemetry.
    pub fn drops(&self) -> [(&'static str, u64); 3] {
        let get = |c: &std::sync::atomic::AtomicU64| c.load(std::sync::atomic::Ordering::Relaxed);
        [
            (PUNT_NO_STREAM, get(&self.punt_no_stream)),
            (PUNT_STREAM_FULL, get(&self.punt_stream_full)),
            (INJECT_DROPPED, get(&self.inject_dropped)),
        ]
    }

    /// Counters holding these values (punt no stream, punt stream full, inject dropped,
    /// inject delayed), for the tests of what reads them.
    #[cfg(test)]
    pub(crate) fn holding(values: [u64; 4]) -> Self {
        use std::sync::atomic::AtomicU64;
        let [no_stream, full, dropped, delayed] = values;
        Self {
            punt_no_stream: AtomicU64::new(no_stream),
            punt_stream_full: AtomicU64::new(full),
            inject_dropped: AtomicU64::new(dropped),
            inject_delayed: AtomicU64::new(delayed),
        }
    }

    /// (node, counter, value) for every counter: the drops, then the delays.
    pub fn snapshot(&self, out: &mut Vec<(&'static str, &'static str, u64)>) {
        out.extend(self.drops().map(|(reason, n)| ("control-path", reason, n)));
        out.push((
            "control-path",
            "inject delayed: no room in ring",
            self.inject_delayed
                .load(std::sync::atomic::Ordering::Relaxed),
        ));
    }
}

/// The service.
#[derive(Debug, Clone)]
pub struct DataplaneService {
    control: Arc<Mutex<Control>>,
    identity: Arc<pb::Identity>,
    access_ports: u32,
    subscriber: Arc<StdMutex<Option<PuntSender>>>,
    inject: Arc<StdMutex<Option<rtrb::Producer<InjectRecord>>>>,
    /// Wakes worker 0, which transmits injected frames, from an idle back-off.
    inject_bell: Doorbell,
    paths: Arc<ControlPathCounters>,
    /// Told when the control's last read before a stop is answered (`crate::stopping`).
    last_read: Arc<tokio::sync::Notify>,
    /// A stop was announced: only then does a read marked last end the wait (a stray one
    /// earlier would leave a permit that cut the next stop short).
    stopping: Arc<AtomicBool>,
}

impl DataplaneService {
    /// A service over `control`, reporting `identity`; injected frames go to `inject`'s ring,
    /// and its doorbell is rung after each.
    pub fn new(
        control: Arc<Mutex<Control>>,
        identity: pb::Identity,
        inject: Option<(rtrb::Producer<InjectRecord>, Doorbell)>,
    ) -> Self {
        let (inject, inject_bell) = match inject {
            Some((ring, bell)) => (Some(ring), bell),
            None => (None, Doorbell::default()),
        };
        Self {
            control,
            identity: Arc::new(identity),
            access_ports: 1,
            subscriber: Arc::new(StdMutex::new(None)),
            inject: Arc::new(StdMutex::new(inject)),
            inject_bell,
            paths: Arc::default(),
            last_read: Arc::default(),
            stopping: Arc::default(),
        }
    }

    /// Woken once the control's last read before a stop (`GetCountersRequest.last_read`) has
    /// been answered; a read that came before the wait began is not lost.
    pub async fn last_read_served(&self) {
        self.last_read.notified().await;
    }

    /// Tells the control on the Punt stream that this dataplane is stopping; false when no
    /// control listens (or its stream is full: it would not read the notice in time).
    pub fn announce_stopping(&self) -> bool {
        let tx = self.subscriber.lock().ok().and_then(|s| s.clone());
        self.stopping.store(true, Ordering::Release);
        let notice = pb::PuntedFrame {
            stopping: true,
            ..Default::default()
        };
        tx.is_some_and(|tx| tx.try_send(Ok(notice)).is_ok())
    }

    /// The control path's counters (shared: telemetry reads them).
    pub fn control_paths(&self) -> Arc<ControlPathCounters> {
        Arc::clone(&self.paths)
    }

    /// Queue a frame for transmission on `port` (by worker 0) and wake the worker; `false` if
    /// it was not queued (too long or short, no inject ring, or the ring is full).
    pub fn inject(&self, port: PortId, frame: &[u8]) -> bool {
        let queued = self.queue_inject(port, frame).is_ok();
        if queued {
            self.inject_bell.ring();
        }
        queued
    }

    /// [`Self::inject`] without the wake-up, for callers that queue several frames and then
    /// ring once: waking a parked worker is a system call on this thread.
    fn queue_inject(&self, port: PortId, frame: &[u8]) -> Result<(), InjectRefused> {
        if frame.len() > PUNT_SNAPLEN || frame.len() < 14 {
            return Err(InjectRefused::Invalid);
        }
        let Ok(mut guard) = self.inject.lock() else {
            return Err(InjectRefused::Invalid);
        };
        let Some(producer) = guard.as_mut() else {
            return Err(InjectRefused::Invalid);
        };
        // Written in the ring's own slot: a push would build the record and then copy it in.
        let Ok(mut chunk) = producer.write_chunk(1) else {
            return Err(InjectRefused::Full);
        };
        let (slot, _) = chunk.as_mut_slices();
        if let Some(rec) = slot.first_mut() {
            rec.port = port;
            rec.len = frame.len() as u16;
            rec.data[..frame.len()].copy_from_slice(frame);
        }
        chunk.commit_all();
        Ok(())
    }

    /// Queue one frame of the Punt stream. A full inject ring is waited out (worker 0 rung,
    /// then 1 ms at a time, up to [`INJECT_FULL_WAITS`] times) instead of dropping the reply
    /// at once: the stream is not read meanwhile, so HTTP/2 flow control holds the control's
    /// frames back. With the bench host's two vCPUs saturated, worker 0 fell behind and the
    /// 1,024-deep ring dropped 64-1,105 replies at 21,000-25,000 DORA/s. Counted: each frame
    /// that waited ("inject delayed: no room in ring"). A bad port or frame, or a ring still
    /// full after the waits, is dropped and counted as before.
    async fn queue_streamed(&self, f: &pb::InjectedFrame) -> bool {
        let port = match f.port {
            0 => Some(PortId::Access),
            1 => Some(PortId::Uplink),
            _ => None,
        };
        if let Some(port) = port {
            for wait in 0..=INJECT_FULL_WAITS {
                match self.queue_inject(port, &f.frame) {
                    Ok(()) => return true,
                    Err(InjectRefused::Invalid) => break,
                    Err(InjectRefused::Full) if wait < INJECT_FULL_WAITS => {
                        if wait == 0 {
                            ControlPathCounters::inc(&self.paths.inject_delayed);
                        }
                        self.inject_bell.ring();
                        tokio::time::sleep(std::time::Duration::from_millis(1)).await;
                    }
                    Err(InjectRefused::Full) => break,
                }
            }
        }
        ControlPathCounters::inc(&self.paths.inject_dropped);
        false
    }

    /// Forward punted records from the workers' rings to the current Punt stream, forever.
    /// Records with no subscriber are dropped and counted.
    ///
    /// A task on the control thread's runtime, woken by `wait`, which a worker rings after a
    /// burst that punted. It was a thread of its own (a tokio task could only poll the rings
    /// every timer tick, 1-2 ms per DHCP message), which cost a thread wake-up per punted
    /// burst plus a second one to hand the frames to the stream's task: 10-13 µs of the
    /// dataplane's CPU per DORA in the DHCP bench.
    pub async fn punt_pump(self, mut rings: Vec<rtrb::Consumer<PuntRecord>>, mut wait: TaskWait) {
        let ids = self.control.lock().await.shadow.slot_ids();
        loop {
            match self.drain(&mut rings, &ids) {
                0 => {
                    wait.wait(tokio::time::Instant::now() + task_bell::RECHECK)
                        .await
                }
                // The stream's own task runs on this thread too: let it send.
                PUMP_BATCH => tokio::task::yield_now().await,
                _ => {}
            }
        }
    }

    /// Move up to [`PUMP_BATCH`] records from the rings to the Punt stream; returns how many
    /// were taken. Takes no lock but the stream's (a programming call may hold the control
    /// lock for as long as the workers take to acknowledge).
    fn drain(&self, rings: &mut [rtrb::Consumer<PuntRecord>], ids: &SlotIds) -> usize {
        let mut moved = 0;
        let tx = self.subscriber.lock().ok().and_then(|s| s.clone());
        for ring in rings.iter_mut() {
            // Read in place and released after: a pop would copy the whole record (1.5 KiB)
            // out of the ring first, for a frame that is mostly a few hundred bytes.
            while moved < PUMP_BATCH
                && let Ok(rec) = ring.peek()
            {
                moved += 1;
                let session_id = if rec.slot == NO_SLOT {
                    0
                } else {
                    ids.get(rec.slot).unwrap_or(0)
                };
                let frame = pb::PuntedFrame {
                    port: rec.port as u32,
                    reason: match rec.reason {
                        PuntReason::Dhcp => pb::PuntReason::Dhcp,
                        PuntReason::Arp => pb::PuntReason::Arp,
                        PuntReason::HttpRedirect => pb::PuntReason::PortalHttp,
                    } as i32,
                    frame: rec.bytes().to_vec(),
                    session_id,
                    worker: u32::from(rec.worker),
                    stopping: false,
                };
                match &tx {
                    None => ControlPathCounters::inc(&self.paths.punt_no_stream),
                    Some(tx) if tx.try_send(Ok(frame)).is_err() => {
                        ControlPathCounters::inc(&self.paths.punt_stream_full);
                    }
                    Some(_) => {}
                }
                release_one(ring);
            }
        }
        moved
    }

    /// The counters `req` asks for, summed over the workers.
    async fn counters(
        &self,
        req: &pb::GetCountersRequest,
    ) -> Result<pb::GetCountersResponse, Status> {
        let c = self.control.lock().await;
        let mut sessions = Vec::with_capacity(req.session_ids.len());
        for id in &req.session_ids {
            let slot = c
                .shadow
                .slot(*id)
                .ok_or_else(|| status(ApiError::not_found("session", id)))?;
            let s = c.session_counts(slot);
            let dir = |d: usize| pb::ColourCounters {
                green_packets: s.packets[d][0],
                green_bytes: s.bytes[d][0],
                yellow_packets: s.packets[d][1],
                yellow_bytes: s.bytes[d][1],
                red_packets: s.packets[d][2],
                red_bytes: s.bytes[d][2],
                dropped_packets: s.dropped[d],
                dropped_bytes: s.dropped_bytes[d],
            };
            sessions.push(pb::SessionCounters {
                session_id: *id,
                upstream: Some(dir(0)),
                downstream: Some(dir(1)),
            });
        }
        let nodes = if req.include_nodes {
            let mut v = c.node_counts();
            self.paths.snapshot(&mut v);
            v.into_iter()
                .map(|(node, reason, value)| pb::NodeCounter {
                    node: node.to_owned(),
                    reason: reason.to_owned(),
                    value,
                })
                .collect()
        } else {
            Vec::new()
        };
        let workers = if req.include_workers {
            c.workers
                .iter()
                .enumerate()
                .map(|(i, w)| pb::WorkerCounters {
                    worker: i as u32,
                    core: w.core,
                    rx_packets: w.stats.rx_packets.get(),
                    tx_packets: w.stats.tx_packets.get(),
                    rx_bursts: w.stats.rx_bursts.get(),
                    busy_cycles: w.stats.busy_cycles.get(),
                    tx_dropped: w.stats.tx_dropped.get(),
                    injected: w.stats.injected.get(),
                })
                .collect()
        } else {
            Vec::new()
        };
        Ok(pb::GetCountersResponse {
            sessions,
            nodes,
            workers,
            boot_id: self.identity.boot_id,
        })
    }
}

/// Drops the oldest record of `ring` without copying it out.
fn release_one<T>(ring: &mut rtrb::Consumer<T>) {
    if let Ok(chunk) = ring.read_chunk(1) {
        chunk.commit_all();
    }
}

/// Most punted records the pump moves before it lets other tasks run (a quarter of the
/// stream's queue).
const PUMP_BATCH: usize = 256;

/// Most injected frames queued per wake-up of worker 0.
const INJECT_WAKE_BATCH: usize = 64;

/// How many 1 ms waits a frame of the Punt stream gets for room in a full inject ring.
const INJECT_FULL_WAITS: u32 = 50;

/// Why an injected frame was not queued.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum InjectRefused {
    /// Too long or too short, or no inject ring.
    Invalid,
    /// The ring is full (worker 0 behind).
    Full,
}

fn status(e: ApiError) -> Status {
    Status::from(e)
}

#[tonic::async_trait]
impl Dataplane for DataplaneService {
    async fn get_identity(
        &self,
        _r: Request<pb::GetIdentityRequest>,
    ) -> Result<Response<pb::Identity>, Status> {
        let c = self.control.lock().await;
        let mut id = (*self.identity).clone();
        id.sessions = c.shadow.len() as u64;
        id.plans = c.shadow.plan_count() as u32;
        // The link as it is now, not as it was at start: `kbngctl status` reads it from here.
        // Both lists are (access, uplink); a port that cannot say keeps its start-up state.
        for (p, counters) in id.ports.iter_mut().zip(&c.ports) {
            if let Some(l) = counters.link() {
                p.link_up = l.up;
                p.speed_mbps = l.speed_mbps;
            }
        }
        Ok(Response::new(id))
    }

    async fn install_plans(
        &self,
        r: Request<pb::InstallPlansRequest>,
    ) -> Result<Response<pb::InstallPlansResponse>, Status> {
        let req = r.into_inner();
        let mut c = self.control.lock().await;
        let hz = c.tsc_hz;
        let mut plans = Vec::with_capacity(req.plans.len());
        for (i, p) in req.plans.iter().enumerate() {
            if p.plan_id == 0 {
                return Err(status(ApiError::invalid(
                    format!("plans[{i}].plan_id"),
                    "must be non-zero",
                )));
            }
            let up = convert::meter(&format!("plans[{i}].upstream"), p.upstream.as_ref(), hz)
                .map_err(status)?;
            let down = convert::meter(&format!("plans[{i}].downstream"), p.downstream.as_ref(), hz)
                .map_err(status)?;
            plans.push((p.clone(), Plan { up, down }));
        }
        c.reserve(plans.len()).await.map_err(status)?;
        let mut cmds = Vec::new();
        let n = c.shadow.install_plans(plans, &mut cmds).map_err(status)?;
        c.commit(&cmds).await.map_err(status)?;
        Ok(Response::new(pb::InstallPlansResponse { installed: n }))
    }

    async fn remove_plans(
        &self,
        r: Request<pb::RemovePlansRequest>,
    ) -> Result<Response<pb::RemovePlansResponse>, Status> {
        let req = r.into_inner();
        let mut c = self.control.lock().await;
        c.reserve(req.plan_ids.len()).await.map_err(status)?;
        let mut cmds = Vec::new();
        let n = c
            .shadow
            .remove_plans(&req.plan_ids, &mut cmds)
            .map_err(status)?;
        c.commit(&cmds).await.map_err(status)?;
        Ok(Response::new(pb::RemovePlansResponse { removed: n }))
    }

    async fn list_plans(
        &self,
        _r: Request<pb::ListPlansRequest>,
    ) -> Result<Response<pb::ListPlansResponse>, Status> {
        let c = self.control.lock().await;
        let plans = c.shadow.plans().map(|p| p.proto.clone()).collect();
        Ok(Response::new(pb::ListPlansResponse { plans }))
    }

    async fn configure_access(
        &self,
        r: Request<pb::AccessConfig>,
    ) -> Result<Response<pb::ConfigureAccessResponse>, Status> {
        let req = r.into_inner();
        let (gws, rules, redirect) =
            convert::access(&req, MAX_GATEWAYS, MAX_GARDEN_RULES).map_err(status)?;
        let mut c = self.control.lock().await;
        c.reserve(gws.len() + rules.len() + 2)
            .await
            .map_err(status)?;
        let mut cmds = Vec::new();
        c.shadow.set_access(req, &gws, &rules, redirect, &mut cmds);
        c.commit(&cmds).await.map_err(status)?;
        Ok(Response::new(pb::ConfigureAccessResponse {}))
    }

    async fn install_sessions(
        &self,
        r: Request<pb::InstallSessionsRequest>,
    ) -> Result<Response<pb::InstallSessionsResponse>, Status> {
        let req = r.into_inner();
        let specs = req
            .sessions
            .iter()
            .enumerate()
            .map(|(i, s)| {
                convert::session(s, self.access_ports)
                    .map_err(|e| convert::in_item(&format!("sessions[{i}]"), e))
            })
            .collect::<Result<Vec<_>, _>>()
            .map_err(status)?;
        let mut c = self.control.lock().await;
        c.reserve(specs.len()).await.map_err(status)?;
        let mut cmds = Vec::new();
        let o = c
            .shadow
            .install_sessions(&specs, &mut cmds)
            .map_err(status)?;
        c.commit(&cmds).await.map_err(status)?;
        Ok(Response::new(pb::InstallSessionsResponse {
            created: o.created,
            unchanged: o.unchanged,
        }))
    }

    async fn modify_sessions(
        &self,
        r: Request<pb::ModifySessionsRequest>,
    ) -> Result<Response<pb::ModifySessionsResponse>, Status> {
        let req = r.into_inner();
        let mut c = self.control.lock().await;
        c.reserve(req.changes.len()).await.map_err(status)?;
        let mut cmds = Vec::new();
        let n = c
            .shadow
            .modify_sessions(&req.changes, &mut cmds)
            .map_err(status)?;
        c.commit(&cmds).await.map_err(status)?;
        Ok(Response::new(pb::ModifySessionsResponse { modified: n }))
    }

    async fn remove_sessions(
        &self,
        r: Request<pb::RemoveSessionsRequest>,
    ) -> Result<Response<pb::RemoveSessionsResponse>, Status> {
        let req = r.into_inner();
        let mut c = self.control.lock().await;
        c.reserve(req.session_ids.len()).await.map_err(status)?;
        let mut cmds = Vec::new();
        let n = c
            .shadow
            .remove_sessions(&req.session_ids, &mut cmds)
            .map_err(status)?;
        c.commit(&cmds).await.map_err(status)?;
        Ok(Response::new(pb::RemoveSessionsResponse { removed: n }))
    }

    async fn list_sessions(
        &self,
        r: Request<pb::ListSessionsRequest>,
    ) -> Result<Response<pb::ListSessionsResponse>, Status> {
        let req = r.into_inner();
        let n = match req.page_size as usize {
            0 => PAGE_DEFAULT,
            n if n > PAGE_MAX => {
                return Err(status(ApiError::invalid(
                    "page_size",
                    format!("{n} > {PAGE_MAX}"),
                )));
            }
            n => n,
        };
        let c = self.control.lock().await;
        // One more than the page tells whether another page follows.
        let mut page = c.shadow.page(req.after_session_id, n + 1);
        let more = page.len() > n;
        page.truncate(n);
        let next = if more {
            page.last().map_or(0, |s| s.id)
        } else {
            0
        };
        Ok(Response::new(pb::ListSessionsResponse {
            sessions: page.iter().map(convert::session_to_proto).collect(),
            next_after_session_id: next,
        }))
    }

    async fn get_counters(
        &self,
        r: Request<pb::GetCountersRequest>,
    ) -> Result<Response<pb::GetCountersResponse>, Status> {
        let req = r.into_inner();
        let out = self.counters(&req).await;
        if req.last_read && self.stopping.load(Ordering::Acquire) {
            self.last_read.notify_one();
        }
        out.map(Response::new)
    }

    type PuntStream = Pin<Box<dyn Stream<Item = Result<pb::PuntedFrame, Status>> + Send>>;

    async fn punt(
        &self,
        r: Request<Streaming<pb::InjectedFrame>>,
    ) -> Result<Response<Self::PuntStream>, Status> {
        let mut inbound = r.into_inner();
        let (tx, rx) = mpsc::channel(1024);
        if let Ok(mut s) = self.subscriber.lock() {
            // A newer stream replaces an older one.
            *s = Some(tx);
        }
        let svc = self.clone();
        tokio::spawn(async move {
            while let Ok(Some(f)) = inbound.message().await {
                let mut queued = svc.queue_streamed(&f).await;
                // Frames that arrived together wake the worker once (bounded, so that the
                // worker starts on a long train before the ring fills).
                for _ in 0..INJECT_WAKE_BATCH {
                    match inbound.message().now_or_never() {
                        // Not `queued |= ...`: see `PuntRing::deliver` (a rustc miscompile).
                        Some(Ok(Some(f))) => {
                            if svc.queue_streamed(&f).await {
                                queued = true;
                            }
                        }
                        _ => break,
                    }
                }
                if queued {
                    svc.inject_bell.ring();
                }
            }
        });
        Ok(Response::new(Box::pin(
            tokio_stream::wrappers::ReceiverStream::new(rx),
        )))
    }
}

#[cfg(test)]
#[path = "grpc_tests.rs"]
mod tests;
