//! CPU hints for the packet path that need no EAL: software prefetch.
//!
//! The pipeline resolves a burst in stages (hash and prefetch every packet's index bucket,
//! then compare tags and prefetch every packet's session line, then process), so the cache
//! misses of a whole burst overlap. A prefetch instruction retires at once, unlike a plain
//! load of the same line, so it does not hold a load-queue entry while the miss is served.

/// Asks the CPU to bring the cache line holding `*r` into all cache levels (`rte_prefetch0`,
/// `PREFETCHT0` on x86-64). A hint: it has no effect on program state.
#[inline(always)]
pub fn prefetch<T: ?Sized>(r: &T) {
    #[cfg(target_arch = "x86_64")]
    {
        use core::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
        let p: *const i8 = (r as *const T).cast();
        // SAFETY: PREFETCHT0 never faults and writes nothing, whatever the address; here the
        // address comes from a live reference anyway. SSE is part of the x86-64 baseline, so
        // the instruction exists on every CPU this code can run on.
        unsafe { _mm_prefetch::<_MM_HINT_T0>(p) };
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = r;
    }
}

#[cfg(test)]
mod tests {
    use super::prefetch;

    #[test]
    fn prefetch_is_only_a_hint() {
        let v = vec![7u64; 1024];
        for x in v.iter().step_by(8) {
            prefetch(x);
        }
        prefetch(&v[..]);
        assert!(v.iter().all(|&x| x == 7));
    }
}
