//! The RADIUS task: owns the client transport and the accounting state of every session from
//! Start to Stop; turns engine commands into requests and verified answers into engine events.
//!
//! Ordering it keeps: while an Accounting-On is outstanding, accounting requests wait for it
//! (a server that handled a Start before the On would close the new session); a Stop waits
//! (bounded) for the counters read just before its session's removal (`finals.rs`); an
//! Accounting-Off waits for the Stops still pending, so it is the last thing a server hears.

use std::collections::{BTreeSet, HashMap};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use kbng_wire::RadiusPacket;
use kbng_wire::radius::code;
use tokio::net::UdpSocket;
use tokio::sync::{mpsc, oneshot};

use super::accounting::{self, AcctSession, IdleSeen, Reading, Status};
use super::acct_store::{self, Kept};
use super::client::{Client, Done};
use super::config::RadiusConfig;
use super::idle::{IdleWatch, Verdict};
use super::nas::{self, OffOutcome};
use super::{RadiusCmd, RadiusEvent, Req, Tally, auth, das, finals};
use crate::core::SessionId;
use crate::core::aaa::AuthOutcome;
use crate::core::session::{EndReason, NS_PER_SEC};

/// How long a Stop waits for its final counters before it goes with the last interim's. The
/// dataplane adapter reads them ahead of a removal it sends within milliseconds; only a
/// dataplane that is down (removal confirmed without an RPC) or a long programming queue
/// takes longer.
const FINALS_WAIT: Duration = Duration::from_secs(5);

/// What Access-Accepts set for the accounting (interval, Class), waiting for their session's
/// Start; bounded (an accepted session may never bind).
const ACCEPT_ACCT_MAX: usize = 1 << 16;

/// How often the reads between interims that are due are started.
const READS_EVERY: Duration = Duration::from_secs(1);

/// Accounting requests held while the Accounting-On is outstanding; beyond this they go out
/// unheld rather than pile up.
const HELD_MAX: usize = 1 << 16;

fn next_interim(secs: u32, now: Instant) -> Option<Instant> {
    (secs > 0).then(|| now + Duration::from_secs(u64::from(secs)))
}

/// When a session with interims every `interim_secs` (0: none) is next read between them,
/// with counters read every `read_secs` (0: at interims only): never when its interims come
/// as often, since they read its counters anyway.
fn next_read(read_secs: u32, interim_secs: u32, now: Instant) -> Option<Instant> {
    let between = read_secs > 0 && (interim_secs == 0 || interim_secs > read_secs);
    between.then(|| now + Duration::from_secs(u64::from(read_secs)))
}

/// Takes the entries of `queue` due by `now` whose session is still accounted (ids are never
/// reused, so a stopped session's entries are dropped here rather than searched for at its
/// Stop), puts each back at `next` of its session (`queued` says whether it did), and groups
/// them by dataplane: those it put back, since one whose schedule ended (an interval set to
/// 0 meanwhile) is due for nothing more.
fn take_due(
    queue: &mut BTreeSet<(Instant, SessionId)>,
    sessions: &mut HashMap<SessionId, AcctSession>,
    now: Instant,
    next: impl Fn(&AcctSession) -> Option<Instant>,
    queued: impl Fn(&mut AcctSession) -> &mut bool,
) -> HashMap<u32, Vec<SessionId>> {
    let mut by_dp: HashMap<u32, Vec<SessionId>> = HashMap::new();
    while let Some(&(t, id)) = queue.first() {
        if t > now {
            break;
        }
        queue.pop_first();
        let Some(s) = sessions.get_mut(&id) else {
            continue;
        };
        let Some(again) = next(s) else {
            *queued(s) = false;
            continue;
        };
        queue.insert((again, id));
        by_dp.entry(s.subject.line.dataplane).or_default().push(id);
    }
    by_dp
}

/// Puts session `s` (`id`) in the interim and read schedules, as its intervals ask.
fn schedule(
    due: &mut BTreeSet<(Instant, SessionId)>,
    reads: &mut BTreeSet<(Instant, SessionId)>,
    read_secs: u32,
    id: SessionId,
    s: &mut AcctSession,
    now: Instant,
) {
    if !s.queued.interim
        && let Some(t) = next_interim(s.interim_secs, now)
    {
        due.insert((t, id));
        s.queued.interim = true;
    }
    if !s.queued.read
        && let Some(t) = next_read(read_secs, s.interim_secs, now)
    {
        reads.insert((t, id));
        s.queued.read = true;
    }
}

/// Counters read for the sessions whose interim (or, with `idle`, idle check) is due.
#[derive(Debug)]
struct Fetched {
    ids: Vec<SessionId>,
    counts: HashMap<SessionId, Reading>,
    why: Fetch,
}

/// Why counters were read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fetch {
    /// Interim-Updates are due.
    Interim,
    /// Reads between interims are due (`countersReadSecs`): kept, nothing sent.
    Between,
    /// Idle-Timeout checks are due.
    Idle,
    /// The dataplane is stopping: its counters go with it (`kbng_dataplane::stopping`).
    BeforeStop,
}

/// What changed a running session's accounting.
#[derive(Debug, Clone, Copy)]
enum Changer {
    Coa,
    /// An Access-Accept at its Session-Timeout (Termination-Action RADIUS-Request).
    Reauthorization,
}

/// A session whose Stop waits for its final counters.
#[derive(Debug)]
struct Stopping {
    s: AcctSession,
    reason: EndReason,
    deadline: Instant,
}

/// The Accounting-Off asked for at shutdown.
#[derive(Debug)]
struct Off {
    reply: oneshot::Sender<OffOutcome>,
    sent: bool,
}

pub(super) struct Task {
    cfg: Arc<RadiusConfig>,
    client: Client<Req>,
    socket: Arc<UdpSocket>,
    sessions: HashMap<SessionId, AcctSession>,
    /// When each session's next Interim-Update is due. An entry whose session stopped is
    /// skipped when it comes up (ids are never reused), so a Stop need not search here.
    due: BTreeSet<(Instant, SessionId)>,
    /// When each session's counters are next read between its interims, skipped like `due`.
    /// A dataplane lost without warning (a crash, a node failure) takes what it counted since
    /// the last reading with it: read more often than interims, less is lost.
    reads: BTreeSet<(Instant, SessionId)>,
    /// When `reads` was last looked at: once a second, so that the reads due meanwhile share
    /// one connection to each dataplane (a read a second late changes nothing).
    reads_looked: Instant,
    accept_acct: HashMap<SessionId, auth::AcceptAcct>,
    stopping: HashMap<SessionId, Stopping>,
    /// Accounting-On sent and not yet answered or given up on.
    on_pending: bool,
    held: Vec<Req>,
    off: Option<Off>,
    /// Requests that finished while another was being handled; handled next round.
    backlog: Vec<Done<Req>>,
    events: mpsc::Sender<RadiusEvent>,
    dataplanes: Vec<crate::dataplane::Target>,
    /// Where each session's totals are kept across restarts (`acct_store`), when accounting.
    kept: Option<acct_store::Writer>,
    /// Sessions with an Idle-Timeout, and the ones found idle, for the engine to end.
    idle: IdleWatch,
    went_idle: Vec<SessionId>,
    tally: Tally,
}

impl Task {
    pub(super) fn new(
        cfg: Arc<RadiusConfig>,
        client: Client<Req>,
        socket: Arc<UdpSocket>,
        events: mpsc::Sender<RadiusEvent>,
        dataplanes: Vec<crate::dataplane::Target>,
        restored: Vec<AcctSession>,
        kept: Option<acct_store::Writer>,
    ) -> Task {
        let now = Instant::now();
        let mut due = BTreeSet::new();
        let mut reads = BTreeSet::new();
        let mut sessions = HashMap::new();
        let mut idle = IdleWatch::default();
        let now_ns = crate::service::now_ns();
        for mut s in restored {
            let id = s.subject.id;
            schedule(
                &mut due,
                &mut reads,
                cfg.counters_read_secs,
                id,
                &mut s,
                now,
            );
            // Idle since the kept sighting (time the control was down included); without
            // one (kept by an older build), from now.
            let (packets, since) = match s.idle_seen {
                Some(seen) => (seen.packets, seen_at(seen, now_ns, now)),
                None => (s.totals().in_packets, now),
            };
            idle.watch_since(s.subject.id, s.idle_secs, packets, since, now);
            sessions.insert(s.subject.id, s);
        }
        Task {
            cfg,
            client,
            socket,
            sessions,
            due,
            reads,
            reads_looked: now,
            accept_acct: HashMap::new(),
            stopping: HashMap::new(),
            on_pending: false,
            held: Vec::new(),
            off: None,
            backlog: Vec::new(),
            events,
            dataplanes,
            kept,
            idle,
            went_idle: Vec::new(),
            tally: Tally::default(),
        }
    }

    pub(super) async fn run(
        mut self,
        mut cmds: mpsc::UnboundedReceiver<RadiusCmd>,
        mut datagrams: mpsc::Receiver<(SocketAddr, Vec<u8>)>,
    ) {
        let (fetched_tx, mut fetched) = mpsc::channel(1024);
        let mut tick = tokio::time::interval(Duration::from_millis(50));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
        let mut done = self.accounting_on();
        loop {
            tokio::select! {
                c = cmds.recv() => {
                    let Some(c) = c else { return };
                    if let RadiusCmd::ReadCounters { dataplane } = c {
                        self.read_before_stop(dataplane, &fetched_tx);
                    } else {
                        done.extend(self.command(c));
                    }
                }
                d = datagrams.recv() => {
                    let Some((from, bytes)) = d else { return };
                    done.extend(self.client.on_datagram(from, &bytes));
                }
                f = fetched.recv() => {
                    if let Some(f) = f {
                        done.extend(self.fetched(f));
                    }
                }
                _ = tick.tick() => {
                    let now = Instant::now();
                    done.extend(self.client.on_tick(now));
                    self.interims(&fetched_tx);
                    self.reads_between(&fetched_tx);
                    self.idle_checks(&fetched_tx);
                    done.extend(self.overdue_stops(now));
                }
            }
            done.extend(self.try_off());
            done.append(&mut self.backlog);
            for (dest, bytes) in self.client.take_outgoing() {
                if self.socket.send_to(&bytes, dest).await.is_err() {
                    self.tally.add("RADIUS send errors");
                }
            }
            for d in std::mem::take(&mut done) {
                if !self.done(d).await {
                    return;
                }
            }
            // Answers can release held requests: send them in this round.
            for (dest, bytes) in self.client.take_outgoing() {
                if self.socket.send_to(&bytes, dest).await.is_err() {
                    self.tally.add("RADIUS send errors");
                }
            }
            for (k, n) in self.client.take_counters() {
                self.tally.add_n(k, n);
            }
            for id in std::mem::take(&mut self.went_idle) {
                if self.events.send(RadiusEvent::Idle { id }).await.is_err() {
                    return;
                }
            }
            if let Some(c) = self.tally.due()
                && self.events.send(RadiusEvent::Counts(c)).await.is_err()
            {
                return;
            }
        }
    }

    /// Accounting-On at start-up, unless accounting is off or restored sessions carry on.
    fn accounting_on(&mut self) -> Vec<Done<Req>> {
        if !self.cfg.accounting {
            return vec![];
        }
        if !self.sessions.is_empty() {
            tracing::info!(
                sessions = self.sessions.len(),
                "no RADIUS Accounting-On: restored sessions carry on"
            );
            self.tally
                .add("RADIUS Accounting-On not sent: sessions restored");
            return vec![];
        }
        self.on_pending = true;
        self.tally.add("RADIUS Accounting-On");
        let r = nas::request(&self.cfg, false, crate::service::now_ns());
        self.client.send(r, Instant::now()).into_iter().collect()
    }

    /// Send `r`, or hold it while the Accounting-On is outstanding.
    fn send(&mut self, r: Req) -> Option<Done<Req>> {
        if self.on_pending && matches!(r, Req::Acct { .. }) && self.held.len() < HELD_MAX {
            self.held.push(r);
            return None;
        }
        self.client.send(r, Instant::now())
    }

    fn command(&mut self, c: RadiusCmd) -> Vec<Done<Req>> {
        match c {
            RadiusCmd::Authorize { subject, bound } => {
                self.tally.add("RADIUS Access-Requests");
                let r = auth::access_request(&self.cfg, &subject, bound);
                self.send(r).into_iter().collect()
            }
            RadiusCmd::Start(mut s) => {
                if let Some(a) = self.accept_acct.remove(&s.subject.id) {
                    s.interim_secs = a.interim_secs.unwrap_or(s.interim_secs);
                    s.class = a.class;
                    s.idle_secs = a.idle_secs.unwrap_or(0);
                }
                let r = accounting::request(&self.cfg, &s, Status::Start, crate::service::now_ns());
                let id = s.subject.id;
                if s.idle_secs > 0 {
                    s.idle_seen = Some(sighting(s.totals().in_packets));
                }
                // What the Access-Accept set is this session's alone: kept, so that its
                // interims go on at that interval, with its Class, after a restart. Other
                // sessions write nothing until their first interim.
                if (s.interim_secs != self.cfg.interim_secs
                    || !s.class.is_empty()
                    || s.idle_secs > 0)
                    && let Some(w) = &self.kept
                {
                    w.send(acct_store::Op::Put(id, Kept::of(&s)));
                }
                let now = Instant::now();
                let read_secs = self.cfg.counters_read_secs;
                schedule(&mut self.due, &mut self.reads, read_secs, id, &mut s, now);
                self.idle.watch(id, s.idle_secs, s.totals().in_packets, now);
                self.sessions.insert(id, s);
                self.tally.add("RADIUS Accounting Start");
                self.send(r).into_iter().collect()
            }
            RadiusCmd::Stop { id, reason } => {
                self.idle.forget(id);
                let Some(s) = self.sessions.remove(&id) else {
                    finals::forget(id);
                    self.tally.add("RADIUS Accounting Stop for no Start");
                    return vec![];
                };
                let deadline = Instant::now() + FINALS_WAIT;
                self.stopping.insert(
                    id,
                    Stopping {
                        s,
                        reason,
                        deadline,
                    },
                );
                vec![]
            }
            RadiusCmd::Finals { asked, counts } => {
                let mut done = Vec::new();
                for id in asked {
                    if let Some(st) = self.stopping.remove(&id) {
                        done.extend(self.stop(st, counts.get(&id).copied()));
                    }
                }
                done
            }
            // The run loop reads them, as it holds the channel the readings come back on.
            RadiusCmd::ReadCounters { .. } => vec![],
            RadiusCmd::CoaAccounting(c) => {
                if !self.change_acct(c, Changer::Coa) {
                    self.tally
                        .add("RADIUS CoA accounting change for no accounted session");
                }
                vec![]
            }
            RadiusCmd::Off { reply } => {
                let outcome = if !self.cfg.accounting {
                    Some(OffOutcome::Disabled)
                } else if !self.sessions.is_empty() {
                    Some(OffOutcome::SessionsRemain(self.sessions.len()))
                } else {
                    None
                };
                match outcome {
                    Some(o) => {
                        let _ = reply.send(o);
                    }
                    None => self.off = Some(Off { reply, sent: false }),
                }
                vec![]
            }
        }
    }

    /// The Stop of `st`, with its final counters when they were read.
    fn stop(&mut self, mut st: Stopping, reading: Option<Reading>) -> Option<Done<Req>> {
        match reading {
            Some(r) => st.s.read(r),
            None => self.tally.add("RADIUS Stop without final counters"),
        }
        if let Some(w) = &self.kept {
            w.send(acct_store::Op::Delete(st.s.subject.id));
        }
        let now_ns = crate::service::now_ns();
        let r = accounting::request(&self.cfg, &st.s, Status::Stop(st.reason), now_ns);
        self.tally.add("RADIUS Accounting Stop");
        self.send(r)
    }

    /// Stops whose final counters never came go with the last ones read.
    fn overdue_stops(&mut self, now: Instant) -> Vec<Done<Req>> {
        let late: Vec<(SessionId, Stopping)> = self
            .stopping
            .extract_if(|_, st| st.deadline <= now)
            .collect();
        let mut done = Vec::new();
        for (id, st) in late {
            finals::forget(id);
            done.extend(self.stop(st, None));
        }
        done
    }

    /// The Accounting-Off, once no Stop is still waiting for its counters.
    fn try_off(&mut self) -> Option<Done<Req>> {
        let off = self.off.as_mut()?;
        if off.sent || !self.stopping.is_empty() {
            return None;
        }
        off.sent = true;
        self.tally.add("RADIUS Accounting-Off");
        let r = nas::request(&self.cfg, true, crate::service::now_ns());
        self.client.send(r, Instant::now())
    }

    /// Applies `c` to the accounted session it names: false when there is none.
    fn change_acct(&mut self, c: das::AcctChange, by: Changer) -> bool {
        let Some(s) = self.sessions.get_mut(&c.id) else {
            return false;
        };
        if let Some(secs) = c.idle_secs {
            s.idle_secs = secs;
            // As at Start: a sighting only for a session watched (0: no Idle-Timeout).
            s.idle_seen = (secs > 0).then(|| sighting(s.totals().in_packets));
            // Counted from now: a change does not end a session for idleness before it.
            self.idle.forget(c.id);
            self.idle
                .watch(c.id, secs, s.totals().in_packets, Instant::now());
            self.tally.add(match by {
                Changer::Coa => "RADIUS Idle-Timeout set by CoA",
                Changer::Reauthorization => "RADIUS Idle-Timeout set by re-authorization",
            });
        }
        if let Some(secs) = c.interim_secs {
            // Taken up by the entry a schedule holds already (its next interim or read sets
            // the one after at the new interval), or by a new one where none runs.
            s.interim_secs = secs;
            let read_secs = self.cfg.counters_read_secs;
            schedule(
                &mut self.due,
                &mut self.reads,
                read_secs,
                c.id,
                s,
                Instant::now(),
            );
            self.tally.add(match by {
                Changer::Coa => "RADIUS interim interval set by CoA",
                Changer::Reauthorization => "RADIUS interim interval set by re-authorization",
            });
        }
        if let Some(class) = c.class {
            s.class = class;
            self.tally.add(match by {
                Changer::Coa => "RADIUS Class set by CoA",
                Changer::Reauthorization => "RADIUS Class set by re-authorization",
            });
        }
        if let Some(w) = &self.kept {
            w.send(acct_store::Op::Put(c.id, Kept::of(s)));
        }
        true
    }

    /// Start reading counters for the sessions whose interim is due.
    fn interims(&mut self, fetched_tx: &mpsc::Sender<Fetched>) {
        let now = Instant::now();
        let by_dp = take_due(
            &mut self.due,
            &mut self.sessions,
            now,
            |s| next_interim(s.interim_secs, now),
            |s| &mut s.queued.interim,
        );
        self.fetch(by_dp, Fetch::Interim, fetched_tx);
    }

    /// Start reading counters for the sessions whose read between interims is due.
    fn reads_between(&mut self, fetched_tx: &mpsc::Sender<Fetched>) {
        let now = Instant::now();
        if now < self.reads_looked + READS_EVERY {
            return;
        }
        self.reads_looked = now;
        let read_secs = self.cfg.counters_read_secs;
        let by_dp = take_due(
            &mut self.reads,
            &mut self.sessions,
            now,
            |s| next_read(read_secs, s.interim_secs, now),
            |s| &mut s.queued.read,
        );
        self.fetch(by_dp, Fetch::Between, fetched_tx);
    }

    /// Start reading the counters of every session on `dataplane`, which is stopping.
    fn read_before_stop(&mut self, dataplane: u32, fetched_tx: &mpsc::Sender<Fetched>) {
        let ids: Vec<SessionId> = self
            .sessions
            .iter()
            .filter(|(_, s)| s.subject.line.dataplane == dataplane)
            .map(|(id, _)| *id)
            .collect();
        tracing::info!(
            dataplane,
            sessions = ids.len(),
            "dataplane stopping: reading its counters"
        );
        self.tally.add("RADIUS dataplane stopping: counters read");
        self.fetch(
            HashMap::from([(dataplane, ids)]),
            Fetch::BeforeStop,
            fetched_tx,
        );
    }

    /// Start reading counters for the sessions whose idle check is due.
    fn idle_checks(&mut self, fetched_tx: &mpsc::Sender<Fetched>) {
        let mut by_dp: HashMap<u32, Vec<SessionId>> = HashMap::new();
        for id in self.idle.due(Instant::now()) {
            if let Some(s) = self.sessions.get(&id) {
                by_dp.entry(s.subject.line.dataplane).or_default().push(id);
            }
        }
        self.fetch(by_dp, Fetch::Idle, fetched_tx);
    }

    fn fetch(
        &self,
        by_dp: HashMap<u32, Vec<SessionId>>,
        why: Fetch,
        fetched_tx: &mpsc::Sender<Fetched>,
    ) {
        for (dp, ids) in by_dp {
            let addr = self.dataplanes.get(dp as usize).cloned();
            let tx = fetched_tx.clone();
            tokio::spawn(async move {
                let counts = match (addr, why) {
                    (Some(a), Fetch::BeforeStop) => accounting::read_before_stop(&a, &ids).await,
                    (Some(a), _) => accounting::fetch_counters(&a, &ids).await,
                    (None, _) => HashMap::new(),
                };
                let _ = tx.send(Fetched { ids, counts, why }).await;
            });
        }
    }

    /// Readings taken between interims or before a dataplane stopped: kept as the sessions'
    /// latest (a reading from the dataplane's next boot adds them to what was carried),
    /// nothing sent. Written to the store only when they moved, so that idle sessions cost
    /// no write at each read.
    fn read_kept(&mut self, f: Fetched) {
        let now = Instant::now();
        let mut read = 0;
        for id in f.ids {
            let (Some(s), Some(r)) = (self.sessions.get_mut(&id), f.counts.get(&id)) else {
                continue;
            };
            read += 1;
            if take_reading(&mut self.idle, id, s, *r, now)
                && let Some(w) = &self.kept
            {
                w.send(acct_store::Op::Put(id, Kept::of(s)));
            }
        }
        let what = match f.why {
            Fetch::BeforeStop => "RADIUS sessions read before their dataplane stopped",
            _ => "RADIUS sessions read between interims",
        };
        self.tally.add_n(what, read);
    }

    /// Idle checks read: a session idle for its Idle-Timeout goes to the engine to end.
    fn idle_read(&mut self, f: Fetched) {
        let now = Instant::now();
        for id in f.ids {
            let Some(s) = self.sessions.get_mut(&id) else {
                continue;
            };
            // Kept only when it sighted traffic (below): otherwise it changes no total, only
            // where the next reading starts from.
            let read = f.counts.get(&id).map(|r| {
                s.read(*r);
                s.totals().in_packets
            });
            if read.is_none() {
                self.tally.add("RADIUS idle check without counters");
            }
            let (verdict, sighted) = self.idle.read(id, read, now);
            if verdict == Verdict::Idle {
                self.tally.add("RADIUS sessions ended idle");
                self.went_idle.push(id);
            } else if let (true, Some(packets)) = (sighted, read) {
                // Kept with the reading that saw it, so that after a restart the first
                // reading compares with the same totals.
                s.idle_seen = Some(sighting(packets));
                if let Some(w) = &self.kept {
                    w.send(acct_store::Op::Put(id, Kept::of(s)));
                }
            }
        }
    }

    fn fetched(&mut self, f: Fetched) -> Vec<Done<Req>> {
        match f.why {
            Fetch::Idle => {
                self.idle_read(f);
                return vec![];
            }
            Fetch::BeforeStop | Fetch::Between => {
                self.read_kept(f);
                return vec![];
            }
            Fetch::Interim => {}
        }
        let now_ns = crate::service::now_ns();
        let now = Instant::now();
        let mut done = Vec::new();
        for id in f.ids {
            let Some(s) = self.sessions.get_mut(&id) else {
                continue; // Stopped meanwhile.
            };
            match f.counts.get(&id) {
                Some(r) => {
                    take_reading(&mut self.idle, id, s, *r, now);
                    if let Some(w) = &self.kept {
                        w.send(acct_store::Op::Put(id, Kept::of(s)));
                    }
                }
                None => self.tally.add("RADIUS interim without fresh counters"),
            }
            let r = accounting::request(&self.cfg, s, Status::Interim, now_ns);
            self.tally.add("RADIUS Accounting Interim-Update");
            done.extend(self.send(r));
        }
        done
    }

    /// The Accounting-On or -Off finished: release what waited for it.
    fn nas_finished(&mut self, off: bool, answered: bool) {
        if off {
            if let Some(o) = self.off.take() {
                let _ = o.reply.send(OffOutcome::Sent { answered });
            }
            return;
        }
        self.on_pending = false;
        self.tally.add(if answered {
            "RADIUS Accounting-On answered"
        } else {
            "RADIUS Accounting-On lost"
        });
        let now = Instant::now();
        for r in std::mem::take(&mut self.held) {
            // Sent with this round's outgoing; what finishes at once is handled next round.
            if let Some(d) = self.client.send(r, now) {
                self.backlog.push(d);
            }
        }
    }

    /// A request finished; false when the engine is gone.
    async fn done(&mut self, d: Done<Req>) -> bool {
        let (id, outcome) = match d {
            Done::Answered {
                req: Req::Auth { session, .. },
                code: c,
                packet,
            } => {
                let attrs: Vec<(u8, Vec<u8>)> = RadiusPacket::new_checked(&packet[..])
                    .map(|p| {
                        p.attributes()
                            .map_while(Result::ok)
                            .map(|a| (a.kind, a.value.to_vec()))
                            .collect()
                    })
                    .unwrap_or_default();
                let (outcome, acct) = auth::outcome(&self.cfg, c, &attrs);
                let bad = auth::malformed(&attrs);
                if c == code::ACCESS_ACCEPT && !bad.is_empty() {
                    tracing::warn!(
                        session,
                        attribute_types = ?bad,
                        "Access-Accept attributes of the wrong length ignored"
                    );
                    self.tally
                        .add("RADIUS Access-Accept attribute malformed: ignored");
                }
                self.tally.add(match c {
                    code::ACCESS_ACCEPT => "RADIUS Access-Accept",
                    code::ACCESS_REJECT => "RADIUS Access-Reject",
                    _ => "RADIUS Access-Challenge refused",
                });
                if acct.idle_secs.is_some() && !self.cfg.accounting {
                    // Idleness is seen in the counters the accounting reads.
                    self.tally
                        .add("RADIUS Idle-Timeout not applied: accounting off");
                }
                if !acct.is_empty() {
                    if self.sessions.contains_key(&session) {
                        // An accounted session authorized again (Termination-Action): its
                        // Class, Idle-Timeout and interim interval from now on, where the
                        // Accept sets them.
                        let change = das::AcctChange {
                            id: session,
                            idle_secs: acct.idle_secs,
                            interim_secs: acct.interim_secs,
                            class: (!acct.class.is_empty()).then_some(acct.class),
                        };
                        self.change_acct(change, Changer::Reauthorization);
                    } else {
                        if self.accept_acct.len() >= ACCEPT_ACCT_MAX {
                            self.accept_acct.clear();
                        }
                        self.accept_acct.insert(session, acct);
                    }
                }
                (session, outcome)
            }
            Done::GaveUp {
                req: Req::Auth { session, .. },
            } => {
                tracing::warn!(session, "no RADIUS server answered the Access-Request");
                (session, AuthOutcome::Unreachable)
            }
            Done::Answered {
                req: Req::Nas { off, .. },
                code: c,
                ..
            } => {
                self.nas_finished(off, c == code::ACCOUNTING_RESPONSE);
                return true;
            }
            Done::GaveUp {
                req: Req::Nas { off, .. },
            } => {
                tracing::warn!(off, "no RADIUS server answered the Accounting-On/Off");
                self.nas_finished(off, false);
                return true;
            }
            Done::Answered {
                req: Req::Acct { .. },
                code: c,
                ..
            } => {
                self.tally.add(if c == code::ACCOUNTING_RESPONSE {
                    "RADIUS Accounting-Response"
                } else {
                    "RADIUS unexpected accounting answer"
                });
                return true;
            }
            Done::GaveUp {
                req: Req::Acct { session, .. },
            } => {
                tracing::warn!(session, "no RADIUS server answered an Accounting-Request");
                self.tally.add("RADIUS accounting requests lost");
                return true;
            }
        };
        self.events
            .send(RadiusEvent::Auth { id, outcome })
            .await
            .is_ok()
    }
}

/// Takes reading `r` into session `s`'s (`id`) totals and dates its activity for the idle
/// watch; true when the reading moved (what is kept of the session changed).
fn take_reading(
    idle: &mut IdleWatch,
    id: SessionId,
    s: &mut AcctSession,
    r: Reading,
    now: Instant,
) -> bool {
    let before = s.raw;
    s.read(r);
    let packets = s.totals().in_packets;
    if idle.note(id, Some(packets), now) {
        s.idle_seen = Some(sighting(packets));
    }
    s.raw != before
}

/// A sighting of a session's upstream traffic at `packets`, now. The second is rounded up,
/// so that a restore never counts idleness the session did not have (it would end early).
fn sighting(packets: u64) -> IdleSeen {
    sighting_at(packets, crate::service::now_ns())
}

fn sighting_at(packets: u64, now_ns: u64) -> IdleSeen {
    IdleSeen {
        packets,
        at_unix_secs: now_ns.div_ceil(NS_PER_SEC),
    }
}

/// The instant of a kept sighting, for a restore at `now` (`now_ns` on the wall clock):
/// measured to the nanosecond from its second, so that it is never earlier than the sighting.
fn seen_at(seen: IdleSeen, now_ns: u64, now: Instant) -> Instant {
    let ago = now_ns.saturating_sub(seen.at_unix_secs.saturating_mul(NS_PER_SEC));
    now.checked_sub(Duration::from_nanos(ago)).unwrap_or(now)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::radius::accounting::Counts;
    use crate::radius::auth::tests::cfg;
    use crate::radius::config::Server;
    use kbng_wire::RadiusBuilder;
    use kbng_wire::radius::{attr, value};
    use kbng_wire::radius_auth::verify_accounting_style_request;

    /// A server on loopback that answers every Accounting-Request and reports its
    /// Acct-Status-Type and its Class values.
    async fn server() -> (SocketAddr, mpsc::UnboundedReceiver<(u32, Vec<Vec<u8>>)>) {
        let sock = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let addr = sock.local_addr().unwrap();
        let (tx, rx) = mpsc::unbounded_channel();
        tokio::spawn(async move {
            let mut buf = [0u8; 4096];
            while let Ok((n, from)) = sock.recv_from(&mut buf).await {
                let p = verify_accounting_style_request(&buf[..n], b"s3cret").unwrap();
                let st = p.attr(attr::ACCT_STATUS_TYPE).unwrap();
                let class = p
                    .attributes()
                    .map(Result::unwrap)
                    .filter(|a| a.kind == attr::CLASS)
                    .map(|a| a.value.to_vec())
                    .collect();
                let _ = tx.send((u32::from_be_bytes(st.try_into().unwrap()), class));
                let answer = RadiusBuilder::response(code::ACCOUNTING_RESPONSE, &p)
                    .finish(b"s3cret")
                    .unwrap();
                sock.send_to(&answer, from).await.unwrap();
            }
        });
        (addr, rx)
    }

    /// The RADIUS task, with accounting to [`server`].
    async fn task() -> (
        crate::radius::Link,
        mpsc::UnboundedReceiver<(u32, Vec<Vec<u8>>)>,
    ) {
        let (addr, heard) = server().await;
        let mut c = cfg();
        c.servers = vec![Server {
            auth: addr,
            acct: addr,
            secret: c.servers[0].secret.clone(),
        }];
        let link = crate::radius::start(c.clone(), vec![], vec![], None)
            .await
            .unwrap();
        (link, heard)
    }

    /// Session `1 << 40`, accounted, with the Access-Accept's `class`.
    fn session(class: Vec<Vec<u8>>) -> AcctSession {
        let subject = crate::radius::auth::Subject {
            id: 1 << 40,
            mac: [2, 0, 0, 0, 9, 9],
            circuit_id: None,
            remote_id: None,
            line: crate::core::Line {
                dataplane: 0,
                port: 0,
                outer_vlan: 0,
                inner_vlan: 0,
            },
        };
        AcctSession {
            user_name: "02:00:00:00:09:09".into(),
            subject,
            ip: std::net::Ipv4Addr::new(100, 64, 0, 9),
            bound_at_ns: 0,
            interim_secs: 0,
            carried: Counts::default(),
            raw: None,
            class,
            idle_secs: 0,
            idle_seen: None,
            queued: Default::default(),
        }
    }

    /// The next request the server heard: its status type and Class values.
    async fn heard_next(
        h: &mut mpsc::UnboundedReceiver<(u32, Vec<Vec<u8>>)>,
    ) -> (u32, Vec<Vec<u8>>) {
        tokio::time::timeout(Duration::from_secs(5), h.recv())
            .await
            .unwrap()
            .unwrap()
    }

    /// Session `id`'s Stop, with final counters as the dataplane adapter would hand them.
    fn stop(link: &crate::radius::Link, id: SessionId) {
        link.tx
            .send(RadiusCmd::Stop {
                id,
                reason: EndReason::Drained,
            })
            .unwrap();
        let counts = HashMap::from([(
            id,
            Reading {
                boot_id: 1,
                counts: Counts::default(),
            },
        )]);
        link.tx
            .send(RadiusCmd::Finals {
                asked: vec![id],
                counts,
            })
            .unwrap();
    }

    #[tokio::test]
    async fn accounting_on_goes_first_and_off_last_once_no_session_is_left() {
        let (link, mut heard) = task().await;
        link.tx.send(RadiusCmd::Start(session(vec![]))).unwrap();
        let next =
            async |h: &mut mpsc::UnboundedReceiver<(u32, Vec<Vec<u8>>)>| heard_next(h).await.0;
        assert_eq!(next(&mut heard).await, value::ACCT_ON);
        assert_eq!(next(&mut heard).await, value::ACCT_START);

        // A live session: no Accounting-Off.
        let (reply, rx) = oneshot::channel();
        link.tx.send(RadiusCmd::Off { reply }).unwrap();
        assert_eq!(rx.await.unwrap(), OffOutcome::SessionsRemain(1));

        stop(&link, 1 << 40);
        let (reply, rx) = oneshot::channel();
        link.tx.send(RadiusCmd::Off { reply }).unwrap();
        assert_eq!(next(&mut heard).await, value::ACCT_STOP);
        assert_eq!(next(&mut heard).await, value::ACCT_OFF);
        assert_eq!(rx.await.unwrap(), OffOutcome::Sent { answered: true });
    }

    #[tokio::test]
    async fn a_coas_class_replaces_the_accepts_in_the_accounting_after_it() {
        let (link, mut heard) = task().await;
        let id = 1 << 40;
        link.tx
            .send(RadiusCmd::Start(session(vec![b"plan-a".to_vec()])))
            .unwrap();
        assert_eq!(heard_next(&mut heard).await.0, value::ACCT_ON);
        assert_eq!(
            heard_next(&mut heard).await,
            (value::ACCT_START, vec![b"plan-a".to_vec()])
        );
        let class = vec![b"plan-b".to_vec(), vec![0, 0xff]];
        for c in [
            // An Idle-Timeout alone leaves the Class as it was.
            crate::radius::das::AcctChange {
                id,
                idle_secs: Some(0),
                interim_secs: None,
                class: None,
            },
            crate::radius::das::AcctChange {
                id,
                idle_secs: None,
                interim_secs: None,
                class: Some(class.clone()),
            },
        ] {
            link.tx.send(RadiusCmd::CoaAccounting(c)).unwrap();
        }
        stop(&link, id);
        assert_eq!(heard_next(&mut heard).await, (value::ACCT_STOP, class));
    }

    #[test]
    fn counters_are_read_between_interims_only_when_interims_are_further_apart() {
        let now = Instant::now();
        let at = |s: u64| Some(now + Duration::from_secs(s));
        // No interims: the reads are all that bounds a crash's loss.
        assert_eq!(next_read(30, 0, now), at(30));
        assert_eq!(next_read(30, 300, now), at(30));
        // Interims as often or more: they read the counters anyway.
        assert_eq!(next_read(30, 30, now), None);
        assert_eq!(next_read(30, 3, now), None);
        // Turned off.
        assert_eq!(next_read(0, 0, now), None);
        assert_eq!(next_read(0, 300, now), None);
    }

    #[test]
    fn a_changed_interim_interval_never_runs_two_schedules() {
        let now = Instant::now();
        let (mut due, mut reads) = (BTreeSet::new(), BTreeSet::new());
        let mut s = session(Vec::new());
        let id = s.subject.id;
        // No interims: read every 30 s.
        schedule(&mut due, &mut reads, 30, id, &mut s, now);
        assert_eq!((due.len(), reads.len()), (0, 1));
        // A CoA asks for interims every 60 s: they start; the reads run on.
        s.interim_secs = 60;
        schedule(&mut due, &mut reads, 30, id, &mut s, now);
        assert_eq!((due.len(), reads.len()), (1, 1));
        // Off, then on again before the old entry came up: still one entry each.
        s.interim_secs = 0;
        schedule(&mut due, &mut reads, 30, id, &mut s, now);
        s.interim_secs = 120;
        schedule(&mut due, &mut reads, 30, id, &mut s, now);
        assert_eq!((due.len(), reads.len()), (1, 1));
        // The entry comes up and sets the next at the interval in force.
        let mut sessions = HashMap::from([(id, s)]);
        let later = now + Duration::from_secs(60);
        let by_dp = take_due(
            &mut due,
            &mut sessions,
            later,
            |s| next_interim(s.interim_secs, later),
            |s| &mut s.queued.interim,
        );
        assert_eq!(by_dp.get(&0).map(Vec::len), Some(1));
        assert_eq!(
            due.iter().map(|(t, _)| *t).collect::<Vec<_>>(),
            [later + Duration::from_secs(120)]
        );
        // Turned off: the next entry that comes up ends the schedule, and a later change
        // starts a new one.
        sessions.get_mut(&id).unwrap().interim_secs = 0;
        let end = later + Duration::from_secs(120);
        take_due(
            &mut due,
            &mut sessions,
            end,
            |s| next_interim(s.interim_secs, end),
            |s| &mut s.queued.interim,
        );
        assert!(due.is_empty() && !sessions[&id].queued.interim);
        let s = sessions.get_mut(&id).unwrap();
        s.interim_secs = 60;
        schedule(&mut due, &mut reads, 30, id, s, end);
        assert_eq!(due.len(), 1);
    }

    #[test]
    fn a_kept_sighting_is_never_dated_before_it_happened() {
        let now = Instant::now();
        let sec = |n: u64| n * NS_PER_SEC;
        // Seen at 100.9 s (kept as 101), restored at 108.0 s: idle 7.1 s, counted as 7.
        let seen = sighting_at(5, sec(100) + 900_000_000);
        assert_eq!(seen.at_unix_secs, 101);
        assert_eq!(
            sighting_at(5, sec(100)).at_unix_secs,
            100,
            "a whole second stays"
        );
        assert_eq!(seen_at(seen, sec(108), now), now - Duration::from_secs(7));
        // Restored at 108.6 s: 7.6 s counted, not 8.
        let at = seen_at(seen, sec(108) + 600_000_000, now);
        assert_eq!(now - at, Duration::from_millis(7600));
        // A wall clock stepped back before the sighting: idle from the restore.
        assert_eq!(seen_at(seen, sec(90), now), now);
    }
}
