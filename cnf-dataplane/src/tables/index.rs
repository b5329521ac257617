//! A fixed-capacity open-addressing index from a 64-bit hash to a session slot.
//!
//! Linear probing over `u64` words `(hash tag << 32) | (slot + 1)`, zero meaning empty;
//! capacity is a power of two at least twice the table size, so probe chains stay short.
//! The words sit in 64-byte aligned buckets of eight, so a probe chain that starts in a bucket
//! mostly ends in it: one prefetched cache line answers most lookups, and the tags in it name
//! the session line to prefetch next without touching any session.
//! Removal is by backward shift (no tombstones), so a long-running table never degrades and
//! nothing is ever reallocated. The full key is compared by the caller against the slot's
//! session (the tag only filters).
//!
//! Chosen over `std::collections::HashMap` because the worker must never allocate and must
//! split the lookup into passes (hash and index word for the whole burst first, then the
//! session records), which needs the probe position exposed.

/// An open-addressing slot index.
#[derive(Debug, Clone)]
pub struct Index {
    buckets: Box<[Bucket]>,
    mask: usize,
}

/// Eight index words in one cache line.
#[derive(Debug, Clone, Copy, Default)]
#[repr(align(64))]
struct Bucket([u64; 8]);

const EMPTY: u64 = 0;

#[inline(always)]
fn tag(hash: u64) -> u32 {
    (hash >> 32) as u32
}

#[inline(always)]
fn word(hash: u64, slot: u32) -> u64 {
    (u64::from(tag(hash)) << 32) | (u64::from(slot) + 1)
}

#[inline(always)]
fn slot_of(w: u64) -> u32 {
    ((w & 0xffff_ffff) as u32).wrapping_sub(1)
}

impl Index {
    /// An index able to hold `capacity` entries at load factor <= 1/2.
    pub fn with_capacity(capacity: usize) -> Self {
        let n = (capacity.max(1) * 2).next_power_of_two().max(8);
        Self {
            buckets: vec![Bucket::default(); n / 8].into_boxed_slice(),
            mask: n - 1,
        }
    }

    /// Back the buckets with transparent huge pages where the kernel allows it.
    pub fn back_with_huge_pages(&self) -> dpdk_sys::HugeBacking {
        dpdk_sys::back_with_huge_pages(&self.buckets)
    }

    /// Bytes of memory used.
    pub fn bytes(&self) -> usize {
        self.buckets.len() * std::mem::size_of::<Bucket>()
    }

    /// Prefetch the bucket where the probe chain of `hash` starts.
    #[inline(always)]
    pub fn prefetch(&self, hash: u64) {
        if let Some(b) = self.buckets.get(self.home(hash) >> 3) {
            dpdk_sys::prefetch(b);
        }
    }

    /// The slot of the first word on the probe chain of `hash` whose tag matches: the
    /// session to prefetch (the key compare happens later, in [`Index::find`]).
    #[inline(always)]
    pub fn candidate(&self, hash: u64) -> Option<u32> {
        // At a load factor of at most 1/2 most chains end at their home word: answer from it
        // before setting up the bucket walk (about 15 instructions per packet, callgrind).
        let w = self.word_at(self.home(hash));
        if w == EMPTY {
            return None;
        }
        if (w >> 32) as u32 == tag(hash) {
            return Some(slot_of(w));
        }
        self.find(hash, |_| true)
    }

    /// Home position of a hash.
    #[inline(always)]
    pub fn home(&self, hash: u64) -> usize {
        ((hash >> 32) as usize) & self.mask
    }

    /// The word at a position.
    #[inline(always)]
    fn word_at(&self, pos: usize) -> u64 {
        let pos = pos & self.mask;
        self.buckets.get(pos >> 3).map_or(EMPTY, |b| b.0[pos & 7])
    }

    /// Find the slot for `hash` whose key `matches`: the probe chain walked bucket by bucket,
    /// each bucket as a slice (no per-word index arithmetic or bounds check).
    #[inline(always)]
    pub fn find(&self, hash: u64, mut matches: impl FnMut(u32) -> bool) -> Option<u32> {
        let t = tag(hash);
        let home = self.home(hash);
        let wrap = self.buckets.len() - 1;
        let mut b = home >> 3;
        let mut lane = home & 7;
        // Bounded: every bucket once, plus the home bucket's lanes before `home`.
        for _ in 0..=self.buckets.len() {
            let words = self.buckets.get(b).map_or(&[][..], |x| &x.0[..]);
            for &w in words.get(lane..).unwrap_or_default() {
                if w == EMPTY {
                    return None;
                }
                if (w >> 32) as u32 == t && matches(slot_of(w)) {
                    return Some(slot_of(w));
                }
            }
            lane = 0;
            b = (b + 1) & wrap;
        }
        None
    }

    /// Find (control and apply paths; the same as [`Index::find`]).
    pub fn get(&self, hash: u64, matches: impl FnMut(u32) -> bool) -> Option<u32> {
        self.find(hash, matches)
    }

    /// Insert `slot` under `hash`. The caller has removed any previous entry of the slot;
    /// returns `false` only if the index is full (cannot happen when sized from the table).
    pub fn insert(&mut self, hash: u64, slot: u32) -> bool {
        let mut pos = self.home(hash);
        for _ in 0..=self.mask {
            if self.word_at(pos) == EMPTY {
                self.set(pos, word(hash, slot));
                return true;
            }
            pos = (pos + 1) & self.mask;
        }
        false
    }

    /// Remove the entry of `slot` under `hash`; `false` if absent.
    pub fn remove(&mut self, hash: u64, slot: u32) -> bool {
        let target = word(hash, slot);
        let mut pos = self.home(hash);
        let mut found = None;
        for _ in 0..=self.mask {
            let w = self.word_at(pos);
            if w == EMPTY {
                break;
            }
            if w == target {
                found = Some(pos);
                break;
            }
            pos = (pos + 1) & self.mask;
        }
        let Some(mut hole) = found else {
            return false;
        };
        // Backward-shift deletion (Knuth 6.4, algorithm R).
        let mut next = (hole + 1) & self.mask;
        for _ in 0..=self.mask {
            let w = self.word_at(next);
            if w == EMPTY {
                break;
            }
            // The word's home position; it may move into the hole if the hole lies cyclically
            // between its home and its current position.
            let home = self.home_of_word(w);
            let dist_next = next.wrapping_sub(home) & self.mask;
            let dist_hole = hole.wrapping_sub(home) & self.mask;
            if dist_hole < dist_next {
                self.set(hole, w);
                hole = next;
            }
            next = (next + 1) & self.mask;
        }
        self.set(hole, EMPTY);
        true
    }

    fn set(&mut self, pos: usize, w: u64) {
        let pos = pos & self.mask;
        if let Some(b) = self.buckets.get_mut(pos >> 3) {
            b.0[pos & 7] = w;
        }
    }
}

impl Index {
    /// A stored word's home position: the home is taken from the tag bits, so the word alone
    /// says where its probe chain starts.
    #[inline(always)]
    fn home_of_word(&self, w: u64) -> usize {
        ((w >> 32) as usize) & self.mask
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::HashMap;

    proptest! {
        #[test]
        fn behaves_like_a_map(ops in proptest::collection::vec((any::<bool>(), 0u32..64, 0u64..8), 1..400)) {
            // Few distinct hash values force long collision chains and wrap-around.
            let mut idx = Index::with_capacity(64);
            let mut model: HashMap<u32, u64> = HashMap::new();
            for (ins, slot, h) in ops {
                let hash = h.wrapping_mul(0x9e37_79b9_7f4a_7c15) | (h << 32);
                if ins {
                    if let Some(old) = model.insert(slot, hash) {
                        prop_assert!(idx.remove(old, slot));
                    }
                    prop_assert!(idx.insert(hash, slot));
                } else {
                    let had = model.remove(&slot);
                    prop_assert_eq!(idx.remove(had.unwrap_or(hash), slot), had.is_some());
                }
                for (&s, &hh) in &model {
                    prop_assert_eq!(idx.get(hh, |x| x == s), Some(s));
                }
            }
        }
    }

    #[test]
    fn full_index_refuses() {
        // The smallest index is one bucket of eight words.
        let mut idx = Index::with_capacity(1);
        for s in 0..8 {
            assert!(idx.insert(1 << 32, s));
        }
        assert!(!idx.insert(1 << 32, 8));
        assert_eq!(idx.get(1 << 32, |s| s == 7), Some(7));
        assert_eq!(idx.get(1 << 32, |s| s == 8), None);
        assert_eq!(idx.candidate(1 << 32), Some(0));
        assert_eq!(idx.candidate(2 << 32), None);
    }
}
