//! In-rush pacing of new subscribers (DISCOVERs that would create a session).
//!
//! A token bucket (integer nanosecond arithmetic, the RFC 2697 committed bucket without colours)
//! admits new sessions at `rate_per_sec` with `burst`; DISCOVERs beyond it wait in a bounded FIFO
//! that keeps at most one entry per subscriber (a retransmission replaces the older one), and the
//! rest are dropped and counted. A queued DISCOVER older than `max_wait_ns` is stale: its client
//! has retransmitted (RFC 2131 §4.1: first retransmission after about 4 s) or given up, so
//! answering it would spend a token and an address on an exchange nobody waits for; it is dropped
//! when its turn comes (without spending a token) and counted in `stale`. Transactions already under way (REQUEST after an OFFER, renewals)
//! are never paced: finishing a started DORA is what keeps completion at the sustainable maximum
//! under overload, where an unpaced server starts more exchanges than it can finish and
//! completes almost none (the collapse seen with Kea).

use std::collections::VecDeque;
use std::hash::Hash;

use super::FastMap;

/// Pacing settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PacingConfig {
    pub rate_per_sec: u64,
    pub burst: u64,
    pub queue: usize,
    /// Longest a DISCOVER may wait in the queue (a client's retransmission interval).
    pub max_wait_ns: u64,
}

/// The pacer over items `T` keyed by `K`.
#[derive(Debug)]
pub struct Pacer<K, T> {
    cfg: PacingConfig,
    /// Tokens scaled by 1e9 (one token = 1e9 units), so refill is exact in integers.
    tokens_scaled: u128,
    last_ns: u64,
    queue: VecDeque<K>,
    /// Each queued item with the time it (or the retransmission that replaced it) arrived.
    items: FastMap<K, (T, u64)>,
    pub dropped: u64,
    pub replaced: u64,
    /// Dropped after waiting longer than `max_wait_ns`.
    pub stale: u64,
}

const SCALE: u128 = 1_000_000_000;

impl<K: Eq + Hash + Clone, T> Pacer<K, T> {
    pub fn new(cfg: PacingConfig, now_ns: u64) -> Self {
        Pacer {
            cfg,
            tokens_scaled: u128::from(cfg.burst) * SCALE,
            last_ns: now_ns,
            queue: VecDeque::new(),
            items: FastMap::default(),
            dropped: 0,
            replaced: 0,
            stale: 0,
        }
    }

    fn refill(&mut self, now_ns: u64) {
        let dt = u128::from(now_ns.saturating_sub(self.last_ns));
        self.last_ns = self.last_ns.max(now_ns);
        let cap = u128::from(self.cfg.burst) * SCALE;
        // rate tokens/s * dt ns = rate*dt/1e9 tokens = rate*dt scaled units.
        let add = u128::from(self.cfg.rate_per_sec).saturating_mul(dt);
        self.tokens_scaled = self.tokens_scaled.saturating_add(add).min(cap);
    }

    fn take(&mut self) -> bool {
        if self.tokens_scaled >= SCALE {
            self.tokens_scaled -= SCALE;
            true
        } else {
            false
        }
    }

    /// Offer an item: `Some(item)` if it may proceed now; otherwise it is queued (replacing an
    /// older one of the same key) or dropped when the queue is full.
    pub fn offer(&mut self, key: K, item: T, now_ns: u64) -> Option<T> {
        self.refill(now_ns);
        if let Some(slot) = self.items.get_mut(&key) {
            // The retransmission is fresh: it keeps the older one's place in the queue.
            *slot = (item, now_ns);
            self.replaced += 1;
            return None;
        }
        self.drop_stale_front(now_ns);
        if self.queue.is_empty() && self.take() {
            return Some(item);
        }
        if self.queue.len() >= self.cfg.queue {
            self.dropped += 1;
            return None;
        }
        self.queue.push_back(key.clone());
        self.items.insert(key, (item, now_ns));
        None
    }

    fn is_stale(&self, since_ns: u64, now_ns: u64) -> bool {
        now_ns.saturating_sub(since_ns) > self.cfg.max_wait_ns
    }

    /// Drops stale items at the head of the queue (so stale ones neither hold up a new arrival
    /// nor fill the queue). Each item is dropped once: amortised O(1) per offer.
    fn drop_stale_front(&mut self, now_ns: u64) {
        while let Some(k) = self.queue.front() {
            match self.items.get(k) {
                Some(&(_, since)) if !self.is_stale(since, now_ns) => break,
                Some(_) => {
                    self.stale += 1;
                    self.items.remove(k);
                }
                None => {}
            }
            self.queue.pop_front();
        }
    }

    /// Items whose turn has come.
    pub fn due(&mut self, now_ns: u64) -> Vec<T> {
        self.refill(now_ns);
        let mut out = Vec::new();
        loop {
            self.drop_stale_front(now_ns);
            if self.queue.is_empty() || !self.take() {
                break;
            }
            if let Some(k) = self.queue.pop_front()
                && let Some((item, _)) = self.items.remove(&k)
            {
                out.push(item);
            }
        }
        out
    }

    pub fn queued(&self) -> usize {
        self.queue.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const MS: u64 = 1_000_000;

    /// Settings with a 1 s maximum wait.
    fn cfg(rate_per_sec: u64, burst: u64, queue: usize) -> PacingConfig {
        PacingConfig {
            rate_per_sec,
            burst,
            queue,
            max_wait_ns: 1000 * MS,
        }
    }

    #[test]
    fn burst_then_rate_then_queue_then_drop() {
        let mut p: Pacer<u32, u32> = Pacer::new(cfg(1000, 2, 3), 0);
        assert_eq!(p.offer(1, 1, 0), Some(1));
        assert_eq!(p.offer(2, 2, 0), Some(2));
        assert_eq!(p.offer(3, 3, 0), None);
        assert_eq!(p.offer(3, 33, 0), None, "replaces, not queued twice");
        assert_eq!(p.offer(4, 4, 0), None);
        assert_eq!(p.offer(5, 5, 0), None);
        assert_eq!(p.offer(6, 6, 0), None);
        assert_eq!((p.queued(), p.dropped, p.replaced), (3, 1, 1));
        assert_eq!(p.due(MS), vec![33], "one token per ms at 1000/s");
        assert_eq!(p.due(10 * MS), vec![4, 5]);
        assert_eq!(p.offer(7, 7, 12 * MS), Some(7), "bucket refilled");
    }

    /// A DISCOVER that waited longer than the retransmission interval is dropped and counted
    /// when its turn comes, spends no token, and a full queue of stale ones makes room.
    #[test]
    fn stale_discovers_are_dropped_without_spending_tokens() {
        let cfg = cfg(10, 1, 3);
        let mut p: Pacer<u32, u32> = Pacer::new(cfg, 0);
        assert_eq!(p.offer(1, 1, 0), Some(1), "the burst");
        assert_eq!(p.offer(2, 2, 0), None);
        assert_eq!(p.offer(3, 3, 10 * MS), None);
        // 4 retransmits at 900 ms: fresh again, it keeps its place after 3.
        assert_eq!(p.offer(4, 4, 20 * MS), None);
        assert_eq!(p.offer(4, 44, 900 * MS), None);
        assert_eq!(p.queued(), 3);
        // At 1,005 ms: 2 waited 1,005 ms (stale), 3 waited 995 ms (due, one token), 4 waits.
        assert_eq!(p.due(1005 * MS), vec![3]);
        assert_eq!((p.stale, p.queued()), (1, 1));
        // No token for 100 ms after that one; 4 is not stale yet at 1,050 ms.
        assert_eq!(p.due(1050 * MS), Vec::<u32>::new());
        assert_eq!(p.due(1105 * MS), vec![44]);
        // A full queue whose head went stale makes room instead of refusing.
        let mut p: Pacer<u32, u32> = Pacer::new(cfg, 0);
        assert_eq!(p.offer(1, 1, 0), Some(1));
        for k in 2..=4 {
            assert_eq!(p.offer(k, k, 0), None);
        }
        assert_eq!(p.offer(5, 5, 50 * MS), None);
        assert_eq!(p.dropped, 1, "full and nothing stale: refused");
        assert_eq!(
            p.offer(6, 6, 1001 * MS),
            Some(6),
            "the stale spent no token and do not hold 6 up"
        );
        assert_eq!((p.dropped, p.stale, p.queued()), (1, 3, 0));
    }

    proptest! {
        /// Over any arrival pattern, admissions never exceed burst + rate * elapsed.
        #[test]
        fn never_exceeds_the_rate(arrivals in proptest::collection::vec((0u64..5 * MS, 0u32..50), 1..300)) {
            let cfg = PacingConfig { rate_per_sec: 500, burst: 5, queue: 20, max_wait_ns: 100 * MS };
            let mut p: Pacer<u32, u32> = Pacer::new(cfg, 0);
            let mut now = 0;
            let mut admitted = 0u64;
            for (dt, key) in arrivals {
                now += dt;
                admitted += p.offer(key, key, now).is_some() as u64;
                admitted += p.due(now).len() as u64;
                prop_assert!(admitted <= 5 + 500 * now / 1_000_000_000 + 1);
                prop_assert!(p.queued() <= 20);
            }
        }
    }
}
