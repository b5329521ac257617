//! The session table of one worker: two cache lines per slot (one per direction), two
//! indexes (upstream key and downstream IPv4) and cold counters.
//!
//! Slots are allocated by the control thread (its shadow table), which sends each worker the
//! same commands in the same order, so a slot number means the same session everywhere and
//! counters can be summed across workers by slot.
//!
//! Hot/cold split: a packet of one direction touches one index bucket and one
//! [`SessionLine`], which holds everything the fast path needs for that direction: the key
//! (compared on lookup, and the tags and MAC pushed on rewrite), the address (anti-spoofing),
//! plan, flags, the meter state and the green packet and byte counters. Yellow, red and
//! action-dropped counts live in a separate array touched only by out-of-profile packets.
//! Chosen over one record per session with separate meter and counter arrays (the previous
//! layout): that cost four to five cache lines per packet, this costs two. The price is the
//! key stored twice and token counts limited to `u32` (bursts <= 4 GiB, checked by the meter
//! profiles).
//!
//! Every field is an atomic written only by the owning worker (relaxed load and store, plain
//! `mov`s on x86-64), so the control thread can read the counters of a line the worker is
//! updating, without locks and without `unsafe`.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use super::index::Index;
use super::plan::{MeterProfile, PlanTable};
use crate::counters::{Counter, SessionCounts};
use crate::meter::{Colour, SrTcm, TrTcm};
use crate::packet::Direction;

/// Upstream session key: (access port, outer VLAN, inner VLAN, MAC). A VLAN id of 0 means
/// "no tag" (an 802.1p priority tag is treated as untagged).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct SessionKey {
    /// Access port index.
    pub port: u8,
    /// Outer VLAN id, 0..=4094.
    pub outer_vid: u16,
    /// Inner VLAN id, 0..=4094.
    pub inner_vid: u16,
    /// Subscriber MAC.
    pub mac: [u8; 6],
}

impl SessionKey {
    /// Pack into 64 + 32 bits for hashing.
    #[inline(always)]
    fn words(&self) -> (u64, u64) {
        let m = &self.mac;
        let a = u64::from_be_bytes([self.port, 0, m[0], m[1], m[2], m[3], m[4], m[5]]);
        let b = (u64::from(self.outer_vid) << 16) | u64::from(self.inner_vid);
        (a, b)
    }
}

/// A session as the worker sees it (16 bytes + key).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Session {
    /// Upstream key.
    pub key: SessionKey,
    /// Subscriber IPv4 address (host order).
    pub ipv4: u32,
    /// Plan slot.
    pub plan: u16,
    /// Captive (walled garden) session.
    pub captive: bool,
    /// Slot in use.
    pub active: bool,
}

/// Mix 64 bits (murmur3's finaliser) with a per-process seed, so subscriber-chosen MACs and
/// addresses cannot be picked to collide.
#[inline(always)]
pub fn mix(mut x: u64, seed: u64) -> u64 {
    x ^= seed;
    x ^= x >> 33;
    x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
    x ^= x >> 33;
    x = x.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    x ^= x >> 33;
    x
}

/// Hash of an upstream key: the VLAN word spread by an odd multiplier (a bijection) into
/// the MAC word, then one seeded mix. On one access line (one VLAN word) distinct MACs never
/// collide before the mix, and the mix is a bijection too, so a subscriber choosing MACs
/// cannot build colliding keys on its line; one mix instead of two saves about 12
/// instructions per upstream packet (callgrind).
#[inline(always)]
pub fn key_hash(k: &SessionKey, seed: u64) -> u64 {
    let (a, b) = k.words();
    mix(a ^ b.wrapping_mul(0x9e37_79b9_7f4a_7c15), seed)
}

/// Hash of a subscriber address.
#[inline(always)]
pub fn ip_hash(ip: u32, seed: u64) -> u64 {
    mix(u64::from(ip) | (1 << 40), seed)
}

/// Stage two's answer when no word on the probe chain has the hash's tag.
pub const NO_CANDIDATE: u32 = u32::MAX;

/// Meter kind stored in a line (bits 16..24 of `info`).
const KIND_OFF: u64 = 0;
const KIND_SR: u64 = 1;
const KIND_TR: u64 = 2;
const KIND_SHIFT: u32 = 16;
const FLAG_ACTIVE: u64 = 1 << 24;
const FLAG_CAPTIVE: u64 = 1 << 25;

/// One session direction: exactly one 64-byte cache line (see the module docs).
#[derive(Debug, Default)]
#[repr(C, align(64))]
pub struct SessionLine {
    /// `SessionKey::words().0`: port and MAC.
    key: AtomicU64,
    /// Outer VLAN << 48 | inner VLAN << 32 | IPv4 address.
    vids_ip: AtomicU64,
    /// Plan slot (bits 0..16), meter kind (16..24), flags (24..).
    info: AtomicU64,
    /// Meter: srTCM time, or trTCM time of Tc.
    t0: AtomicU64,
    /// Meter: trTCM time of Tp.
    t1: AtomicU64,
    /// Meter: first bucket (low 32 bits) and second bucket (high 32 bits).
    tokens: AtomicU64,
    green_packets: Counter,
    green_bytes: Counter,
}

const _: () = assert!(std::mem::size_of::<SessionLine>() == 64);

#[inline(always)]
fn vids(outer: u16, inner: u16) -> u64 {
    (u64::from(outer) << 16) | u64::from(inner)
}

impl SessionLine {
    /// Does this line hold an active session with upstream key words `(key, vids)`?
    #[inline(always)]
    fn is_up(&self, key: u64, vids: u64) -> bool {
        self.key.load(Relaxed) == key
            && self.vids_ip.load(Relaxed) >> 32 == vids
            && self.info.load(Relaxed) & FLAG_ACTIVE != 0
    }

    /// Does this line hold an active session with address `ip`?
    #[inline(always)]
    fn is_down(&self, ip: u32) -> bool {
        self.vids_ip.load(Relaxed) as u32 == ip && self.info.load(Relaxed) & FLAG_ACTIVE != 0
    }

    /// The session's IPv4 address (host order).
    #[inline(always)]
    pub fn ipv4(&self) -> u32 {
        self.vids_ip.load(Relaxed) as u32
    }

    /// Plan slot.
    #[inline(always)]
    pub fn plan(&self) -> u16 {
        self.info.load(Relaxed) as u16
    }

    /// Captive (walled garden) session.
    #[inline(always)]
    pub fn captive(&self) -> bool {
        self.info.load(Relaxed) & FLAG_CAPTIVE != 0
    }

    /// The subscriber's MAC, outer and inner VLAN ids (what rewrite pushes downstream).
    #[inline(always)]
    pub fn l2(&self) -> ([u8; 6], u16, u16) {
        let k = self.key.load(Relaxed).to_be_bytes();
        let v = self.vids_ip.load(Relaxed);
        (
            [k[2], k[3], k[4], k[5], k[6], k[7]],
            (v >> 48) as u16,
            (v >> 32) as u16,
        )
    }

    fn session(&self) -> Session {
        let (mac, outer_vid, inner_vid) = self.l2();
        let info = self.info.load(Relaxed);
        Session {
            key: SessionKey {
                port: (self.key.load(Relaxed) >> 56) as u8,
                outer_vid,
                inner_vid,
                mac,
            },
            ipv4: self.ipv4(),
            plan: info as u16,
            captive: info & FLAG_CAPTIVE != 0,
            active: info & FLAG_ACTIVE != 0,
        }
    }

    /// Store a session's identity, keeping the meter kind.
    fn store(&self, s: &Session) {
        let (key, _) = s.key.words();
        self.key.store(key, Relaxed);
        self.vids_ip.store(
            (vids(s.key.outer_vid, s.key.inner_vid) << 32) | u64::from(s.ipv4),
            Relaxed,
        );
        let kind = self.info.load(Relaxed) & (0xff << KIND_SHIFT);
        let mut info = u64::from(s.plan) | kind;
        if s.active {
            info |= FLAG_ACTIVE;
        }
        if s.captive {
            info |= FLAG_CAPTIVE;
        }
        self.info.store(info, Relaxed);
    }

    fn set_active(&self, on: bool) {
        let i = self.info.load(Relaxed);
        let i = if on {
            i | FLAG_ACTIVE
        } else {
            i & !FLAG_ACTIVE
        };
        self.info.store(i, Relaxed);
    }

    fn set_kind(&self, kind: u64) {
        let i = self.info.load(Relaxed) & !(0xff << KIND_SHIFT);
        self.info.store(i | (kind << KIND_SHIFT), Relaxed);
    }

    #[inline(always)]
    fn kind(&self) -> u64 {
        (self.info.load(Relaxed) >> KIND_SHIFT) & 0xff
    }

    #[inline(always)]
    fn store_tokens(&self, a: u64, b: u64) {
        // Tokens never exceed the profile's burst sizes, which are <= u32::MAX.
        self.tokens.store((a & 0xffff_ffff) | (b << 32), Relaxed);
    }

    /// Buckets full at `now` for profile `p` (plan installed or changed).
    fn reset_meter(&self, p: &MeterProfile, now: u64) {
        match p {
            MeterProfile::Off => self.set_kind(KIND_OFF),
            MeterProfile::Sr(p) => {
                let (t, tc, te) = SrTcm::new(p, now).parts();
                self.t0.store(t, Relaxed);
                self.store_tokens(tc, te);
                self.set_kind(KIND_SR);
            }
            MeterProfile::Tr(p) => {
                let (t0, t1, tc, tp) = TrTcm::new(p, now).parts();
                self.t0.store(t0, Relaxed);
                self.t1.store(t1, Relaxed);
                self.store_tokens(tc, tp);
                self.set_kind(KIND_TR);
            }
        }
    }

    /// Colour a packet of `len` bytes at `now` with the plan's profile `p`; if the plan's meter
    /// kind changed since the state was made, start over with full buckets.
    #[inline(always)]
    pub fn police(&self, p: &MeterProfile, now: u64, len: u32) -> Colour {
        let kind = self.kind();
        match p {
            MeterProfile::Off => Colour::Green,
            MeterProfile::Sr(p) if kind == KIND_SR => {
                let tok = self.tokens.load(Relaxed);
                let mut m = SrTcm::from_parts(self.t0.load(Relaxed), tok & 0xffff_ffff, tok >> 32);
                let c = m.check(p, now, len);
                let (t, tc, te) = m.parts();
                self.t0.store(t, Relaxed);
                self.store_tokens(tc, te);
                c
            }
            MeterProfile::Tr(p) if kind == KIND_TR => {
                let tok = self.tokens.load(Relaxed);
                let mut m = TrTcm::from_parts(
                    self.t0.load(Relaxed),
                    self.t1.load(Relaxed),
                    tok & 0xffff_ffff,
                    tok >> 32,
                );
                let c = m.check(p, now, len);
                let (t0, t1, tc, tp) = m.parts();
                self.t0.store(t0, Relaxed);
                self.t1.store(t1, Relaxed);
                self.store_tokens(tc, tp);
                c
            }
            _ => {
                self.reset_meter(p, now);
                self.police(p, now, len)
            }
        }
    }
}

/// Per session and direction: yellow and red packets and bytes, and action drops (packets and
/// bytes); touched only by packets that are not green.
#[derive(Debug, Default)]
pub struct ColdCounters {
    cells: [[Counter; 6]; 2],
}

const DROPPED: usize = 4;
const DROPPED_BYTES: usize = 5;

/// A worker's per-session counters, shared with the control thread (read side).
pub type SessionCounterArray = Arc<SessionCounters>;

/// The read side of a worker's per-session counters: its session lines and cold counters.
#[derive(Debug)]
pub struct SessionCounters {
    lines: Arc<[SessionLine]>,
    cold: Arc<[ColdCounters]>,
}

/// The counters of one slot.
#[derive(Debug, Clone, Copy)]
pub struct SlotCounters<'a> {
    lines: [&'a SessionLine; 2],
    cold: &'a ColdCounters,
}

/// Count a yellow or red packet of `len` bytes in slot `slot` (single writer).
#[inline(always)]
fn count_cold(cold: &[ColdCounters], slot: u32, dir: Direction, colour: Colour, len: u32) {
    let at = if colour == Colour::Yellow { 0 } else { 2 };
    if let Some(c) = cold.get(slot as usize) {
        let d = &c.cells[dir as usize];
        d[at].add(1);
        d[at + 1].add(u64::from(len));
    }
}

/// Count a packet of `len` bytes coloured `colour` in slot `slot` (single writer).
#[inline(always)]
fn count(
    lines: &[SessionLine],
    cold: &[ColdCounters],
    slot: u32,
    dir: Direction,
    colour: Colour,
    len: u32,
) {
    match colour {
        Colour::Green => {
            if let Some(l) = lines.get(slot as usize * 2 + dir as usize) {
                l.green_packets.add(1);
                l.green_bytes.add(u64::from(len));
            }
        }
        Colour::Yellow | Colour::Red => count_cold(cold, slot, dir, colour, len),
    }
}

impl SessionCounters {
    /// Zeroed counters for `slots` slots, not attached to a table (for tests of readers; a
    /// worker's come from [`SessionTable::counters`]).
    pub fn new(slots: usize) -> SessionCounterArray {
        Arc::new(Self {
            lines: (0..slots * 2).map(|_| SessionLine::default()).collect(),
            cold: (0..slots).map(|_| ColdCounters::default()).collect(),
        })
    }

    /// Count a packet as the owning worker does (only the single writer may call this).
    pub fn count(&self, slot: u32, dir: Direction, colour: Colour, len: u32) {
        count(&self.lines, &self.cold, slot, dir, colour, len);
    }

    /// The counters of a slot (`None` out of range).
    pub fn get(&self, slot: usize) -> Option<SlotCounters<'_>> {
        Some(SlotCounters {
            lines: [self.lines.get(slot * 2)?, self.lines.get(slot * 2 + 1)?],
            cold: self.cold.get(slot)?,
        })
    }

    /// Number of slots.
    pub fn len(&self) -> usize {
        self.cold.len()
    }

    /// No slots (never: tables have at least one).
    pub fn is_empty(&self) -> bool {
        self.cold.is_empty()
    }
}

impl SlotCounters<'_> {
    /// Read all counts of the slot.
    pub fn read(&self) -> SessionCounts {
        let mut out = SessionCounts::default();
        for (d, line) in self.lines.iter().enumerate() {
            let c = &self.cold.cells[d];
            out.packets[d] = [line.green_packets.get(), c[0].get(), c[2].get()];
            out.bytes[d] = [line.green_bytes.get(), c[1].get(), c[3].get()];
            out.dropped[d] = c[DROPPED].get();
            out.dropped_bytes[d] = c[DROPPED_BYTES].get();
        }
        out
    }
}

/// What [`SessionTable::back_with_huge_pages`] achieved, in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct HugeTableBacking {
    /// The whole table.
    pub bytes: usize,
    /// The 2 MiB-aligned interiors of its arrays (what huge pages can cover).
    pub eligible: usize,
    /// On huge pages now (collapsed).
    pub collapsed: usize,
    /// Marked for huge pages, left to the kernel's background collapse.
    pub advised_only: usize,
}

/// The session table of one worker.
#[derive(Debug)]
pub struct SessionTable {
    /// `[slot * 2 + direction]`.
    lines: Arc<[SessionLine]>,
    cold: Arc<[ColdCounters]>,
    view: SessionCounterArray,
    up: Index,
    down: Index,
    seed: u64,
    active: usize,
}

impl SessionTable {
    /// A table of `capacity` slots with hash `seed`.
    pub fn new(capacity: usize, seed: u64) -> Self {
        let capacity = capacity.max(1);
        let lines: Arc<[SessionLine]> = (0..capacity * 2).map(|_| SessionLine::default()).collect();
        let cold: Arc<[ColdCounters]> = (0..capacity).map(|_| ColdCounters::default()).collect();
        Self {
            view: Arc::new(SessionCounters {
                lines: Arc::clone(&lines),
                cold: Arc::clone(&cold),
            }),
            lines,
            cold,
            up: Index::with_capacity(capacity),
            down: Index::with_capacity(capacity),
            seed,
            active: 0,
        }
    }

    /// Back the table's arrays with transparent huge pages where the kernel allows it (at a
    /// million sessions, random lookups on 4 KiB pages miss the TLB nearly every time); what
    /// was achieved, summed over the arrays.
    pub fn back_with_huge_pages(&self) -> HugeTableBacking {
        let mut t = HugeTableBacking {
            bytes: self.bytes(),
            ..HugeTableBacking::default()
        };
        for b in [
            dpdk_sys::back_with_huge_pages(&self.lines),
            dpdk_sys::back_with_huge_pages(&self.cold),
            self.up.back_with_huge_pages(),
            self.down.back_with_huge_pages(),
        ] {
            t.eligible += b.eligible;
            if b.collapsed {
                t.collapsed += b.eligible;
            } else if b.advised {
                t.advised_only += b.eligible;
            }
        }
        t
    }

    /// Number of slots.
    pub fn capacity(&self) -> usize {
        self.cold.len()
    }
    /// Sessions installed.
    pub fn len(&self) -> usize {
        self.active
    }
    /// No sessions installed.
    pub fn is_empty(&self) -> bool {
        self.active == 0
    }
    /// Hash seed.
    pub fn seed(&self) -> u64 {
        self.seed
    }
    /// Counters, shared with the control thread.
    pub fn counters(&self) -> SessionCounterArray {
        Arc::clone(&self.view)
    }

    /// Memory in bytes of the whole table (all arrays), for the bytes-per-session figure.
    pub fn bytes(&self) -> usize {
        self.lines.len() * std::mem::size_of::<SessionLine>()
            + self.cold.len() * std::mem::size_of::<ColdCounters>()
            + self.up.bytes()
            + self.down.bytes()
    }

    /// The session in a slot, decoded (control path and tests).
    pub fn get(&self, slot: u32) -> Option<Session> {
        self.line(slot, Direction::Up)
            .map(SessionLine::session)
            .filter(|s| s.active)
    }

    /// The line of `slot` for direction `dir` (the fast path's view of a session).
    #[inline(always)]
    pub fn line(&self, slot: u32, dir: Direction) -> Option<&SessionLine> {
        self.lines.get(slot as usize * 2 + dir as usize)
    }

    /// Count a packet of `len` bytes coloured `colour` on `line`, the line of `slot` and
    /// `dir` that the caller already holds (green in the line, others cold).
    #[inline(always)]
    pub fn count_on(
        &self,
        line: &SessionLine,
        slot: u32,
        dir: Direction,
        colour: Colour,
        len: u32,
    ) {
        if colour == Colour::Green {
            line.green_packets.add(1);
            line.green_bytes.add(u64::from(len));
        } else {
            count_cold(&self.cold, slot, dir, colour, len);
        }
    }

    /// Count a packet of `len` bytes dropped by its colour's action.
    #[inline(always)]
    pub fn count_drop(&self, slot: u32, dir: Direction, len: u32) {
        if let Some(c) = self.cold.get(slot as usize) {
            let d = &c.cells[dir as usize];
            d[DROPPED].add(1);
            d[DROPPED_BYTES].add(u64::from(len));
        }
    }

    /// Hash of a packet's lookup key: upstream key or downstream address.
    #[inline(always)]
    pub fn up_hash(&self, k: &SessionKey) -> u64 {
        key_hash(k, self.seed)
    }

    /// Hash of a downstream address.
    #[inline(always)]
    pub fn down_hash(&self, ip: u32) -> u64 {
        ip_hash(ip, self.seed)
    }

    fn index(&self, dir: Direction) -> &Index {
        match dir {
            Direction::Up => &self.up,
            Direction::Down => &self.down,
        }
    }

    /// Stage one of a burst lookup: prefetch the index bucket of `hash`.
    #[inline(always)]
    pub fn prefetch_bucket(&self, dir: Direction, hash: u64) {
        self.index(dir).prefetch(hash);
    }

    /// Stage two: prefetch the line of the first slot whose tag matches `hash`, and return
    /// that slot ([`NO_CANDIDATE`] if none) for stage three to check first.
    #[inline(always)]
    pub fn prefetch_line(&self, dir: Direction, hash: u64) -> u32 {
        match self.index(dir).candidate(hash) {
            Some(slot) => {
                if let Some(l) = self.line(slot, dir) {
                    dpdk_sys::prefetch(l);
                }
                slot
            }
            None => NO_CANDIDATE,
        }
    }

    /// Stage three, upstream: the slot and line of key `k` with hash `hash`, given stage
    /// two's `candidate` (see [`Self::find_at`]).
    #[inline(always)]
    pub fn up_find_at(
        &self,
        k: &SessionKey,
        hash: u64,
        candidate: u32,
    ) -> Option<(u32, &SessionLine)> {
        let (key, _) = k.words();
        let v = vids(k.outer_vid, k.inner_vid);
        self.find_at(Direction::Up, hash, candidate, |l| l.is_up(key, v))
    }

    /// Stage three, downstream: as [`Self::up_find_at`], for address `ip`.
    #[inline(always)]
    pub fn down_find_at(&self, ip: u32, hash: u64, candidate: u32) -> Option<(u32, &SessionLine)> {
        self.find_at(Direction::Down, hash, candidate, |l| l.is_down(ip))
    }

    /// The slot and line whose key `is` accepts. The candidate is the first tag match on the
    /// probe chain, so when its line holds the key (keys are unique) the chain need not be
    /// walked again; only a tag collision walks it.
    #[inline(always)]
    fn find_at(
        &self,
        dir: Direction,
        hash: u64,
        candidate: u32,
        is: impl Fn(&SessionLine) -> bool,
    ) -> Option<(u32, &SessionLine)> {
        if candidate == NO_CANDIDATE {
            return None;
        }
        let holding = |s: u32| self.line(s, dir).filter(|l| is(l));
        if let Some(l) = holding(candidate) {
            return Some((candidate, l));
        }
        let slot = self.find_slot(dir, hash, &is)?;
        Some((slot, holding(slot)?))
    }

    /// The slot on the probe chain of `hash` whose line `is` accepts (the whole chain walked).
    #[inline(always)]
    fn find_slot(
        &self,
        dir: Direction,
        hash: u64,
        is: impl Fn(&SessionLine) -> bool,
    ) -> Option<u32> {
        self.index(dir)
            .find(hash, |s| self.line(s, dir).is_some_and(&is))
    }

    /// The slot of key `k` with hash `hash` (control path and tests).
    pub fn up_find(&self, k: &SessionKey, hash: u64) -> Option<u32> {
        let (key, _) = k.words();
        let v = vids(k.outer_vid, k.inner_vid);
        self.find_slot(Direction::Up, hash, |l| l.is_up(key, v))
    }

    /// The slot of address `ip` with hash `hash` (control path and tests).
    pub fn down_find(&self, ip: u32, hash: u64) -> Option<u32> {
        self.find_slot(Direction::Down, hash, |l| l.is_down(ip))
    }

    /// Look up by upstream key (control path and tests).
    pub fn lookup_up(&self, k: &SessionKey) -> Option<u32> {
        self.up_find(k, self.up_hash(k))
    }

    /// Look up by address (control path and tests).
    pub fn lookup_down(&self, ip: u32) -> Option<u32> {
        self.down_find(ip, self.down_hash(ip))
    }

    /// Install or replace the session in `slot` (applied from a control command; the control
    /// thread has checked that the key and address are unique and the slot in range).
    /// Meter state restarts when the plan changes; counters restart when the slot was free.
    pub fn upsert(&mut self, slot: u32, s: Session, plans: &PlanTable, now: u64) -> bool {
        let (Some(up), Some(down), Some(cold)) = (
            self.line(slot, Direction::Up),
            self.line(slot, Direction::Down),
            self.cold.get(slot as usize),
        ) else {
            return false;
        };
        let old = up.session();
        let s = Session { active: true, ..s };
        up.store(&s);
        down.store(&s);
        if !old.active {
            for l in [up, down] {
                l.green_packets.clear();
                l.green_bytes.clear();
            }
            cold.cells.iter().flatten().for_each(Counter::clear);
        }
        if !old.active || old.plan != s.plan {
            let p = plans.get(s.plan);
            up.reset_meter(&p.up.meter, now);
            down.reset_meter(&p.down.meter, now);
        }
        if old.active {
            self.unindex(slot, &old);
        } else {
            self.active += 1;
        }
        let up_ok = self.up.insert(key_hash(&s.key, self.seed), slot);
        let down_ok = self.down.insert(ip_hash(s.ipv4, self.seed), slot);
        up_ok && down_ok
    }

    /// Remove the session in `slot`; `false` if the slot was free.
    pub fn remove(&mut self, slot: u32) -> bool {
        let Some(old) = self.get(slot) else {
            return false;
        };
        self.unindex(slot, &old);
        for dir in [Direction::Up, Direction::Down] {
            if let Some(l) = self.line(slot, dir) {
                l.set_active(false);
            }
        }
        self.active -= 1;
        true
    }

    fn unindex(&mut self, slot: u32, old: &Session) {
        self.up.remove(key_hash(&old.key, self.seed), slot);
        self.down.remove(ip_hash(old.ipv4, self.seed), slot);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sess(i: u32) -> Session {
        Session {
            key: SessionKey {
                port: 0,
                outer_vid: (i % 4000) as u16 + 1,
                inner_vid: (i / 4000) as u16,
                mac: [2, 0, 0, (i >> 16) as u8, (i >> 8) as u8, i as u8],
            },
            ipv4: 0x6440_0000 + i,
            plan: 0,
            captive: false,
            active: true,
        }
    }

    #[test]
    fn install_lookup_modify_remove() {
        let plans = PlanTable::new(4);
        let mut t = SessionTable::new(1000, 7);
        for i in 0..1000 {
            assert!(t.upsert(i, sess(i), &plans, 0));
        }
        assert_eq!(t.len(), 1000);
        for i in 0..1000 {
            assert_eq!(t.lookup_up(&sess(i).key), Some(i));
            assert_eq!(t.lookup_down(sess(i).ipv4), Some(i));
        }
        // Modify: new address for slot 5; old address no longer resolves.
        let mut s = sess(5);
        s.ipv4 = 0x0a00_0001;
        assert!(t.upsert(5, s, &plans, 0));
        assert_eq!(t.lookup_down(sess(5).ipv4), None);
        assert_eq!(t.lookup_down(0x0a00_0001), Some(5));
        assert_eq!(t.len(), 1000);
        for i in (0..1000).step_by(2) {
            assert!(t.remove(i));
        }
        assert!(!t.remove(0));
        for i in 0..1000 {
            let want = (i % 2 == 1).then_some(i);
            assert_eq!(t.lookup_up(&sess(i).key), want);
        }
        assert_eq!(t.len(), 500);
    }

    #[test]
    fn bytes_per_session_is_bounded() {
        // 2 lines (128) + cold counters (96) + 2 indexes at load <= 1/2 (32).
        let t = SessionTable::new(1 << 16, 1);
        let per = t.bytes() / t.capacity();
        assert!(per <= 256, "{per} bytes per session");
    }

    #[test]
    fn line_round_trips_the_session_and_counts() {
        let plans = PlanTable::new(2);
        let mut t = SessionTable::new(8, 3);
        let mut s = sess(4001 * 7);
        s.key.port = 3;
        s.captive = true;
        assert!(t.upsert(2, s, &plans, 0));
        assert_eq!(t.get(2), Some(s));
        let l = t.line(2, Direction::Down).expect("slot 2");
        assert_eq!(l.l2(), (s.key.mac, s.key.outer_vid, s.key.inner_vid));
        assert!(l.captive());
        let line = |d| t.line(2, d).expect("slot 2");
        t.count_on(line(Direction::Up), 2, Direction::Up, Colour::Green, 100);
        t.count_on(line(Direction::Down), 2, Direction::Down, Colour::Red, 60);
        t.count_drop(2, Direction::Down, 60);
        let c = t.counters().get(2).expect("slot 2").read();
        assert_eq!(c.packets, [[1, 0, 0], [0, 0, 1]]);
        assert_eq!(c.bytes, [[100, 0, 0], [0, 0, 60]]);
        assert_eq!(c.dropped, [0, 1]);
        assert_eq!(c.dropped_bytes, [0, 60]);
        // Reinstalling a removed slot starts its counters over.
        assert!(t.remove(2));
        assert_eq!(t.get(2), None);
        assert!(t.upsert(2, s, &plans, 0));
        assert_eq!(
            t.counters().get(2).map(|c| c.read().packets),
            Some([[0; 3]; 2])
        );
    }
}

#[cfg(test)]
#[path = "session_burst_tests.rs"]
mod burst_tests;
