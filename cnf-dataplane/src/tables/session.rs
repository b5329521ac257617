//! The session table of one worker: a slot array with two indexes (upstream key and
//! downstream IPv4), meter state and counters per slot.
//!
//! Slots are allocated by the control thread (its shadow table), which sends each worker the
//! same commands in the same order, so a slot number means the same session everywhere and
//! counters can be summed across workers by slot. Layout is structure-of-arrays: lookup touches
//! the index word and the 16-byte session record; the policer touches the meter line and the
//! counters of that direction.

use std::sync::Arc;

use super::index::Index;
use super::plan::{MeterState, PlanTable};
use crate::counters::{CacheLine, SessionCounters};

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

/// Hash of an upstream key.
#[inline(always)]
pub fn key_hash(k: &SessionKey, seed: u64) -> u64 {
    let (a, b) = k.words();
    mix(a ^ mix(b, seed.rotate_left(17)), seed)
}

/// Hash of a subscriber address.
#[inline(always)]
pub fn ip_hash(ip: u32, seed: u64) -> u64 {
    mix(u64::from(ip) | (1 << 40), seed)
}

/// The session table of one worker.
#[derive(Debug)]
pub struct SessionTable {
    sessions: Box<[Session]>,
    meters: Box<[[CacheLine<MeterState>; 2]]>,
    up: Index,
    down: Index,
    counters: Arc<[SessionCounters]>,
    seed: u64,
    active: usize,
}

/// Shared view of a worker's per-session counters (read by the control thread).
pub type SessionCounterArray = Arc<[SessionCounters]>;

impl SessionTable {
    /// A table of `capacity` slots with hash `seed`.
    pub fn new(capacity: usize, seed: u64) -> Self {
        let capacity = capacity.max(1);
        Self {
            sessions: vec![Session::default(); capacity].into_boxed_slice(),
            meters: vec![[CacheLine(MeterState::Off); 2]; capacity].into_boxed_slice(),
            up: Index::with_capacity(capacity),
            down: Index::with_capacity(capacity),
            counters: (0..capacity).map(|_| SessionCounters::default()).collect(),
            seed,
            active: 0,
        }
    }

    /// Number of slots.
    pub fn capacity(&self) -> usize {
        self.sessions.len()
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
        Arc::clone(&self.counters)
    }

    /// Memory in bytes of the whole table (all arrays), for the bytes-per-session figure.
    pub fn bytes(&self) -> usize {
        self.capacity()
            * (std::mem::size_of::<Session>()
                + std::mem::size_of::<[CacheLine<MeterState>; 2]>()
                + std::mem::size_of::<SessionCounters>())
            + self.up.bytes()
            + self.down.bytes()
    }

    /// The session in a slot.
    #[inline(always)]
    pub fn get(&self, slot: u32) -> Option<&Session> {
        self.sessions.get(slot as usize).filter(|s| s.active)
    }

    /// Meter state and counters of a slot, for the policer.
    #[inline(always)]
    pub fn meter_mut(
        &mut self,
        slot: u32,
    ) -> Option<(&mut [CacheLine<MeterState>; 2], &SessionCounters)> {
        let m = self.meters.get_mut(slot as usize)?;
        let c = self.counters.get(slot as usize)?;
        Some((m, c))
    }

    /// Upstream index: hash and home word (pass one).
    #[inline(always)]
    pub fn up_probe(&self, k: &SessionKey) -> (u64, u64) {
        let h = key_hash(k, self.seed);
        (h, self.up.word_at(self.up.home(h)))
    }

    /// Software prefetch without `unsafe`: read the session record a home index word points
    /// at. Called for a whole burst before resolving it, these loads are independent of each
    /// other, so their cache misses overlap instead of stalling one packet at a time.
    #[inline(always)]
    pub fn touch_record(&self, first: u64) -> u32 {
        Index::candidate(first)
            .and_then(|s| self.sessions.get(s as usize))
            .map_or(0, |s| s.ipv4)
    }

    /// Software prefetch of what the policer touches for `slot` in direction `dir`: the meter
    /// state and the first counter of that direction.
    #[inline(always)]
    pub fn touch_policer(&self, slot: u32, dir: usize) -> u64 {
        let m = self
            .meters
            .get(slot as usize)
            .and_then(|m| m.get(dir))
            .map_or(0, |m| u64::from(matches!(**m, MeterState::Off)));
        let c = self.counters.get(slot as usize).map_or(0, |c| c.first(dir));
        m ^ c
    }

    /// Upstream index: resolve (pass two).
    #[inline(always)]
    pub fn up_find(&self, k: &SessionKey, hash: u64, first: u64) -> Option<u32> {
        self.up.find(hash, first, |s| {
            self.sessions
                .get(s as usize)
                .is_some_and(|x| x.active && x.key == *k)
        })
    }

    /// Downstream index: hash and home word.
    #[inline(always)]
    pub fn down_probe(&self, ip: u32) -> (u64, u64) {
        let h = ip_hash(ip, self.seed);
        (h, self.down.word_at(self.down.home(h)))
    }

    /// Downstream index: resolve.
    #[inline(always)]
    pub fn down_find(&self, ip: u32, hash: u64, first: u64) -> Option<u32> {
        self.down.find(hash, first, |s| {
            self.sessions
                .get(s as usize)
                .is_some_and(|x| x.active && x.ipv4 == ip)
        })
    }

    /// Look up by upstream key (control path and tests).
    pub fn lookup_up(&self, k: &SessionKey) -> Option<u32> {
        let (h, w) = self.up_probe(k);
        self.up_find(k, h, w)
    }

    /// Look up by address (control path and tests).
    pub fn lookup_down(&self, ip: u32) -> Option<u32> {
        let (h, w) = self.down_probe(ip);
        self.down_find(ip, h, w)
    }

    /// Install or replace the session in `slot` (applied from a control command; the control
    /// thread has checked that the key and address are unique and the slot in range).
    /// Meter state restarts when the plan changes; counters restart when the slot was free.
    pub fn upsert(&mut self, slot: u32, s: Session, plans: &PlanTable, now: u64) -> bool {
        let Some(old) = self.sessions.get(slot as usize).copied() else {
            return false;
        };
        if old.active {
            self.unindex(slot, &old);
        } else {
            self.active += 1;
            if let Some(c) = self.counters.get(slot as usize) {
                c.clear();
            }
        }
        let s = Session { active: true, ..s };
        if let Some(x) = self.sessions.get_mut(slot as usize) {
            *x = s;
        }
        if !old.active || old.plan != s.plan {
            let p = plans.get(s.plan);
            if let Some(m) = self.meters.get_mut(slot as usize) {
                *m = [
                    CacheLine(MeterState::new(&p.up.meter, now)),
                    CacheLine(MeterState::new(&p.down.meter, now)),
                ];
            }
        }
        let up_ok = self.up.insert(key_hash(&s.key, self.seed), slot);
        let down_ok = self.down.insert(ip_hash(s.ipv4, self.seed), slot);
        up_ok && down_ok
    }

    /// Remove the session in `slot`; `false` if the slot was free.
    pub fn remove(&mut self, slot: u32) -> bool {
        let Some(old) = self.sessions.get(slot as usize).copied() else {
            return false;
        };
        if !old.active {
            return false;
        }
        self.unindex(slot, &old);
        if let Some(x) = self.sessions.get_mut(slot as usize) {
            x.active = false;
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
        let t = SessionTable::new(1 << 16, 1);
        let per = t.bytes() / t.capacity();
        assert!(per <= 400, "{per} bytes per session");
    }
}
