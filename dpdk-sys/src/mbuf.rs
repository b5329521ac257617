//! Owned packet buffers ([`Mbuf`]) and fixed-capacity, allocation-free bursts of them
//! ([`Burst`]).

use std::mem::MaybeUninit;
use std::ptr::NonNull;

use crate::ffi;

/// One packet buffer, owned: it goes back to its pool when dropped.
///
/// Only the first segment's data is exposed ([`data`](Mbuf::data)); pools made with the
/// default data room hold a standard 1518-byte frame in one segment. Every `Mbuf` this crate
/// hands out is direct (not a clone of another) with reference count 1, so `&mut self` is
/// exclusive access to the bytes.
#[repr(transparent)]
#[derive(Debug)]
pub struct Mbuf {
    ptr: NonNull<ffi::rte_mbuf>,
}

// SAFETY: an Mbuf is the sole owner of its rte_mbuf (refcnt 1, not shared), and freeing it from
// any thread is allowed (the mempool put is thread-safe; without an lcore id it bypasses the
// per-lcore cache).
unsafe impl Send for Mbuf {}
// SAFETY: &Mbuf only reads the mbuf.
unsafe impl Sync for Mbuf {}

impl Mbuf {
    /// Wraps an mbuf the caller owns.
    ///
    /// # Safety
    /// `m` must be a valid, direct pktmbuf with reference count 1 that nothing else references
    /// or frees.
    #[inline]
    pub(crate) unsafe fn from_owned(m: NonNull<ffi::rte_mbuf>) -> Mbuf {
        Mbuf { ptr: m }
    }

    #[inline]
    fn raw_mut(&mut self) -> &mut ffi::rte_mbuf {
        // SAFETY: ptr is a valid mbuf owned exclusively by self (type invariant: refcnt 1,
        // direct, referenced by nothing else); &mut self makes this the only borrow.
        unsafe { self.ptr.as_mut() }
    }

    #[inline]
    fn raw(&self) -> &ffi::rte_mbuf {
        // SAFETY: ptr is a valid mbuf owned by self (type invariant); the shared borrow of self
        // prevents mutation through this Mbuf for the returned lifetime.
        unsafe { self.ptr.as_ref() }
    }

    /// The bytes of the first segment (`rte_pktmbuf_mtod`, `data_len` long).
    #[inline]
    pub fn data(&self) -> &[u8] {
        let m = self.raw();
        // SAFETY: buf_addr + data_off is the start of data_len initialised bytes inside the
        // mbuf's buffer (rte_mbuf invariant: data_off + data_len <= buf_len); self owns them.
        unsafe {
            std::slice::from_raw_parts(
                m.buf_addr.cast::<u8>().add(usize::from(m.data_off)),
                usize::from(m.data_len),
            )
        }
    }

    /// The bytes of the first segment, writable.
    #[inline]
    pub fn data_mut(&mut self) -> &mut [u8] {
        let (addr, off, len) = {
            let m = self.raw();
            (m.buf_addr.cast::<u8>(), m.data_off, m.data_len)
        };
        // SAFETY: as in `data`; the buffer is exclusively owned (refcnt 1, direct) and
        // &mut self makes this the only borrow.
        unsafe { std::slice::from_raw_parts_mut(addr.add(usize::from(off)), usize::from(len)) }
    }

    /// Length of the first segment's data (= `data().len()`).
    #[inline]
    pub fn len(&self) -> usize {
        usize::from(self.raw().data_len)
    }

    /// Whether the first segment holds no data.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.raw().data_len == 0
    }

    /// Length of the whole packet, all segments.
    #[inline]
    pub fn pkt_len(&self) -> u32 {
        self.raw().pkt_len
    }

    /// The port the packet was received on (as set by the driver).
    #[inline]
    pub fn port(&self) -> u16 {
        self.raw().port
    }

    /// Free bytes before the data, available to [`prepend`](Mbuf::prepend).
    #[inline]
    pub fn headroom(&self) -> usize {
        usize::from(self.raw().data_off)
    }

    /// Free bytes after the data of the last segment, available to [`append`](Mbuf::append).
    #[inline]
    pub fn tailroom(&self) -> usize {
        // SAFETY: ptr is a valid mbuf (type invariant); the callee only reads it.
        usize::from(unsafe { ffi::kbng_pktmbuf_tailroom(self.ptr.as_ptr()) })
    }

    /// Grows the data by `n` bytes at the front (`rte_pktmbuf_prepend`) and returns them; they
    /// hold whatever the buffer held before, so write all of them. `None`, and no change, when
    /// the headroom is smaller than `n`.
    ///
    /// Written here on the bindgen fields rather than called through the C shim: it runs for
    /// every downstream packet, and the call cost more than the three field updates.
    #[inline]
    pub fn prepend(&mut self, n: u16) -> Option<&mut [u8]> {
        let m = self.raw_mut();
        if n > m.data_off {
            return None;
        }
        m.data_off -= n;
        m.data_len = m.data_len.wrapping_add(n);
        m.pkt_len = m.pkt_len.wrapping_add(u32::from(n));
        let start = m.buf_addr.cast::<u8>();
        let off = usize::from(m.data_off);
        // SAFETY: the n bytes now at the front of the data lie inside the buffer (they were
        // headroom: buf_addr + data_off .. + n), which self owns exclusively (&mut self). Their
        // contents are old buffer bytes: plain u8 values, never uninitialised memory (mempool
        // buffers are zeroed at creation).
        Some(unsafe { std::slice::from_raw_parts_mut(start.add(off), usize::from(n)) })
    }

    /// Removes `n` bytes from the front of the data (`rte_pktmbuf_adj`). Returns `false`, and
    /// changes nothing, when the first segment holds fewer than `n` bytes. In Rust for the
    /// reason given at [`prepend`](Mbuf::prepend) (every upstream tagged packet).
    #[inline]
    #[must_use = "false means nothing was removed"]
    pub fn adj(&mut self, n: u16) -> bool {
        let m = self.raw_mut();
        if n > m.data_len {
            return false;
        }
        m.data_len -= n;
        m.data_off = m.data_off.wrapping_add(n);
        m.pkt_len = m.pkt_len.wrapping_sub(u32::from(n));
        true
    }

    /// Grows the data by `n` bytes at the end of the last segment (`rte_pktmbuf_append`) and
    /// returns them (old buffer contents: write all of them). `None`, and no change, when the
    /// tailroom is smaller than `n`.
    #[inline]
    pub fn append(&mut self, n: u16) -> Option<&mut [u8]> {
        // SAFETY: ptr is a valid, exclusively owned mbuf; the callee checks n against the
        // tailroom of the last segment and returns NULL without change when it does not fit.
        let p = unsafe { ffi::kbng_pktmbuf_append(self.ptr.as_ptr(), n) };
        let p = NonNull::new(p)?;
        // SAFETY: on success p points at the n appended bytes inside a buffer self owns
        // exclusively; the bytes are old buffer contents (see prepend).
        Some(unsafe { std::slice::from_raw_parts_mut(p.as_ptr(), usize::from(n)) })
    }

    /// Removes `n` bytes from the end of the last segment (`rte_pktmbuf_trim`). Returns
    /// `false`, and changes nothing, when the last segment holds fewer than `n` bytes.
    #[inline]
    #[must_use = "false means nothing was removed"]
    pub fn trim(&mut self, n: u16) -> bool {
        // SAFETY: ptr is a valid, exclusively owned mbuf; the callee checks n against the last
        // segment's data_len and returns -1 without change when it is too large.
        unsafe { ffi::kbng_pktmbuf_trim(self.ptr.as_ptr(), n) == 0 }
    }

    /// Prefetches the first cache line of the packet data into all cache levels.
    #[inline]
    pub fn prefetch_data(&self) {
        let p = self.data().as_ptr();
        // SAFETY: a prefetch is a hint that never faults; p points into the owned buffer.
        unsafe { ffi::kbng_prefetch0(p.cast()) }
    }
}

impl Drop for Mbuf {
    #[inline]
    fn drop(&mut self) {
        // SAFETY: self owns the mbuf (refcnt 1, nobody else frees it) and is never used again.
        unsafe { ffi::kbng_pktmbuf_free(self.ptr.as_ptr()) }
    }
}

/// Largest burst capacity (the rx/tx burst calls take a `u16` count).
pub const MAX_BURST: usize = 1024;

/// Up to `N` owned mbufs in a fixed array: no heap allocation. Dropping or clearing it frees
/// the mbufs it holds with one `rte_pktmbuf_free_bulk`.
///
/// A pipeline stage sorts one burst into per-next-node bursts by moving pointers:
/// ```no_run
/// # use dpdk_sys::{Burst, Mbuf};
/// # fn classify(m: &Mbuf) -> bool { m.len() > 60 }
/// # fn stage(input: &mut Burst<32>, ip: &mut Burst<32>, other: &mut Burst<32>) {
/// for m in input.drain() {
///     let next = if classify(&m) { &mut *ip } else { &mut *other };
///     // Bursts of the same capacity cannot overflow here; a full one hands the mbuf back.
///     if let Err(m) = next.push(m) {
///         drop(m); // counted as a drop by the caller
///     }
/// }
/// # }
/// ```
pub struct Burst<const N: usize = 32> {
    len: usize,
    mbufs: [MaybeUninit<Mbuf>; N],
}

impl<const N: usize> std::fmt::Debug for Burst<N> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Burst")
            .field("len", &self.len)
            .field("capacity", &N)
            .finish()
    }
}

impl<const N: usize> Default for Burst<N> {
    fn default() -> Self {
        Self::new()
    }
}

impl<const N: usize> Burst<N> {
    /// An empty burst. `N` must be in `1..=MAX_BURST` (checked at compile time).
    pub const fn new() -> Self {
        const {
            assert!(
                N > 0 && N <= MAX_BURST,
                "Burst capacity must be in 1..=MAX_BURST"
            )
        };
        Burst {
            len: 0,
            mbufs: [const { MaybeUninit::uninit() }; N],
        }
    }

    /// Number of mbufs held.
    #[inline]
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the burst holds no mbuf.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Whether the burst holds `N` mbufs.
    #[inline]
    pub fn is_full(&self) -> bool {
        self.len == N
    }

    /// `N`.
    #[inline]
    pub const fn capacity(&self) -> usize {
        N
    }

    /// The mbufs, in order.
    #[inline]
    pub fn as_slice(&self) -> &[Mbuf] {
        // SAFETY: the first len slots are initialised (type invariant) and MaybeUninit<Mbuf>
        // has the layout of Mbuf.
        unsafe { std::slice::from_raw_parts(self.mbufs.as_ptr().cast::<Mbuf>(), self.len) }
    }

    /// The mbufs, in order, mutably.
    #[inline]
    pub fn as_mut_slice(&mut self) -> &mut [Mbuf] {
        // SAFETY: as in as_slice, with exclusive access through &mut self.
        unsafe { std::slice::from_raw_parts_mut(self.mbufs.as_mut_ptr().cast::<Mbuf>(), self.len) }
    }

    /// Iterates the mbufs.
    #[inline]
    pub fn iter(&self) -> std::slice::Iter<'_, Mbuf> {
        self.as_slice().iter()
    }

    /// Iterates the mbufs mutably.
    #[inline]
    pub fn iter_mut(&mut self) -> std::slice::IterMut<'_, Mbuf> {
        self.as_mut_slice().iter_mut()
    }

    /// Appends an mbuf; hands it back when the burst is full.
    #[inline]
    pub fn push(&mut self, m: Mbuf) -> Result<(), Mbuf> {
        if self.len == N {
            return Err(m);
        }
        self.mbufs[self.len].write(m);
        self.len += 1;
        Ok(())
    }

    /// Removes and returns the last mbuf.
    #[inline]
    pub fn pop(&mut self) -> Option<Mbuf> {
        if self.len == 0 {
            return None;
        }
        self.len -= 1;
        // SAFETY: slot len was initialised and, with len decremented, is no longer counted,
        // so it is read (moved out) exactly once.
        Some(unsafe { self.mbufs[self.len].assume_init_read() })
    }

    /// Removes and returns the mbuf at `index`, moving the last one into its place (order is
    /// not kept). `None` when `index >= len`.
    #[inline]
    pub fn swap_remove(&mut self, index: usize) -> Option<Mbuf> {
        if index >= self.len {
            return None;
        }
        self.mbufs.swap(index, self.len - 1);
        self.pop()
    }

    /// Moves every mbuf out, in order. Mbufs the iterator does not yield (it was dropped
    /// early) are freed in bulk. The burst is empty afterwards.
    #[inline]
    pub fn drain(&mut self) -> Drain<'_, N> {
        let end = self.len;
        // Leak-safe: if the Drain is forgotten the mbufs leak, they are never freed twice.
        self.len = 0;
        Drain {
            burst: self,
            next: 0,
            end,
        }
    }

    /// Frees every mbuf (one bulk free).
    #[inline]
    pub fn clear(&mut self) {
        let n = self.len;
        self.len = 0;
        // SAFETY: slots 0..n are initialised owned mbufs, no longer counted by len.
        unsafe { free_slots(self.mbufs.as_mut_ptr(), n) };
    }

    /// Pointer to the first unused slot and the number of unused slots, for calls that fill
    /// the burst (rx burst, bulk alloc).
    #[inline]
    pub(crate) fn free_slots(&mut self) -> (*mut *mut ffi::rte_mbuf, usize) {
        // SAFETY: len <= N, so the offset stays within (or one past) the array.
        let p = unsafe { self.mbufs.as_mut_ptr().add(self.len) };
        (p.cast::<*mut ffi::rte_mbuf>(), N - self.len)
    }

    /// Pointer to the first mbuf and the count, for calls that consume the burst (tx burst).
    #[inline]
    pub(crate) fn filled_slots(&mut self) -> (*mut *mut ffi::rte_mbuf, usize) {
        (
            self.mbufs.as_mut_ptr().cast::<*mut ffi::rte_mbuf>(),
            self.len,
        )
    }

    /// Counts `n` more slots after the current length as filled.
    ///
    /// # Safety
    /// The `n` slots after the current length must hold valid, owned, direct mbufs with
    /// reference count 1, and `len + n <= N`.
    #[inline]
    pub(crate) unsafe fn assume_filled(&mut self, n: usize) {
        debug_assert!(self.len + n <= N);
        self.len += n;
    }

    /// Forgets the first `sent` mbufs (ownership passed to DPDK) and frees the rest.
    ///
    /// # Safety
    /// The first `sent <= len` mbufs must no longer be owned by this burst.
    #[inline]
    pub(crate) unsafe fn consume_sent(&mut self, sent: usize) -> usize {
        let n = self.len;
        debug_assert!(sent <= n);
        self.len = 0;
        // SAFETY: slots sent..n are still owned by the burst (caller contract) and initialised.
        unsafe { free_slots(self.mbufs.as_mut_ptr().add(sent), n - sent) };
        n - sent
    }
}

impl<const N: usize> Drop for Burst<N> {
    fn drop(&mut self) {
        self.clear();
    }
}

/// Frees `n` owned mbufs at `slots` with one bulk call.
///
/// # Safety
/// `slots` must point at `n` initialised, owned mbufs that nobody uses afterwards.
#[inline]
pub(crate) unsafe fn free_slots(slots: *mut MaybeUninit<Mbuf>, n: usize) {
    if n == 0 {
        return;
    }
    let count = u32::try_from(n).expect("n <= MAX_BURST");
    // SAFETY: per the caller, slots holds n owned mbufs (MaybeUninit<Mbuf> has the layout of a
    // non-null rte_mbuf pointer); rte_pktmbuf_free_bulk frees each (and its segments) once.
    unsafe { ffi::kbng_pktmbuf_free_bulk(slots.cast::<*mut ffi::rte_mbuf>(), count) }
}

/// Iterator returned by [`Burst::drain`].
#[derive(Debug)]
pub struct Drain<'a, const N: usize> {
    burst: &'a mut Burst<N>,
    next: usize,
    end: usize,
}

impl<const N: usize> Iterator for Drain<'_, N> {
    type Item = Mbuf;

    #[inline]
    fn next(&mut self) -> Option<Mbuf> {
        if self.next == self.end {
            return None;
        }
        let i = self.next;
        self.next += 1;
        // SAFETY: slots next..end are initialised and owned by the Drain (the burst's len was
        // set to 0); advancing next before reading means each slot is moved out once.
        Some(unsafe { self.burst.mbufs[i].assume_init_read() })
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = self.end - self.next;
        (n, Some(n))
    }
}

impl<const N: usize> ExactSizeIterator for Drain<'_, N> {}

impl<const N: usize> Drop for Drain<'_, N> {
    fn drop(&mut self) {
        let (next, end) = (self.next, self.end);
        self.next = end;
        // SAFETY: slots next..end were not yielded, so they are initialised and still owned.
        unsafe { free_slots(self.burst.mbufs.as_mut_ptr().add(next), end - next) };
    }
}
