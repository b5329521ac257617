//! Backing large in-memory tables with transparent huge pages (Linux `madvise`).
//!
//! A worker's session tables at 1,000,000 sessions are about 240 MB, read at random: on 4 KiB
//! pages nearly every lookup also misses the TLB. DPDK's hugepages hold the mbufs; the
//! tables live on the process heap, so they ask the kernel for 2 MiB pages instead:
//! `MADV_HUGEPAGE` marks the range, and `MADV_COLLAPSE` (Linux 6.1) rebuilds the pages
//! already touched as huge pages now, not whenever khugepaged gets to them. Both are hints
//! that keep the contents; failure (an older kernel, THP set to `never`, no free huge pages)
//! leaves the table on small pages and is reported, not fatal.

use core::ffi::{c_int, c_void};

const HUGE: usize = 2 << 20;
const MADV_HUGEPAGE: c_int = 14;
const MADV_COLLAPSE: c_int = 25;

// SAFETY: this is madvise(2)'s C signature (glibc, <sys/mman.h>); calls pass ranges this
// crate owns (see each call's own SAFETY comment).
unsafe extern "C" {
    fn madvise(addr: *mut c_void, len: usize, advice: c_int) -> c_int;
}

/// What [`back_with_huge_pages`] achieved for one range.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct HugeBacking {
    /// Bytes of the 2 MiB-aligned interior of the range (the part huge pages can cover).
    pub eligible: usize,
    /// `MADV_HUGEPAGE` was accepted for that interior.
    pub advised: bool,
    /// `MADV_COLLAPSE` was accepted: the interior is on huge pages now.
    pub collapsed: bool,
}

/// Ask the kernel to back the 2 MiB-aligned interior of `mem` with transparent huge pages,
/// and to collapse it onto them at once. Ranges shorter than two huge pages are left alone.
pub fn back_with_huge_pages<T>(mem: &[T]) -> HugeBacking {
    let start = mem.as_ptr() as usize;
    let end = start + core::mem::size_of_val(mem);
    let lo = start.next_multiple_of(HUGE);
    let hi = end - end % HUGE;
    if hi <= lo || hi - lo < 2 * HUGE {
        return HugeBacking::default();
    }
    let addr = lo as *mut c_void;
    let len = hi - lo;
    // SAFETY: [lo, hi) lies inside `mem`, a live allocation of this process, and is
    // page-aligned as madvise requires. MADV_HUGEPAGE only sets a flag on the mapping, and
    // MADV_COLLAPSE copies the pages into huge pages under the kernel's own locks, keeping
    // every byte: neither changes what any reference into `mem` observes.
    let advised = unsafe { madvise(addr, len, MADV_HUGEPAGE) } == 0;
    // SAFETY: as above.
    let collapsed = advised && unsafe { madvise(addr, len, MADV_COLLAPSE) } == 0;
    HugeBacking {
        eligible: len,
        advised,
        collapsed,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_ranges_are_left_alone_and_contents_survive() {
        let small = vec![7u8; 1 << 20];
        assert_eq!(back_with_huge_pages(&small), HugeBacking::default());
        let big: Vec<u64> = (0..(8 << 20) / 8).collect();
        let b = back_with_huge_pages(&big);
        assert!(b.eligible >= 4 << 20, "{b:?}");
        assert!(b.eligible <= 8 << 20);
        // Whatever the kernel allowed, the data is unchanged.
        assert!(big.iter().enumerate().all(|(i, &v)| v == i as u64));
    }
}
