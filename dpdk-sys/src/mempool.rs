//! Packet-buffer pools (`rte_pktmbuf_pool_create`), one per NUMA socket, sized by the caller.

use std::ffi::{CStr, CString};
use std::ptr::NonNull;

use crate::eal::{Eal, live_object_created, live_object_released};
use crate::error::DpdkError;
use crate::ffi;
use crate::mbuf::{Burst, Mbuf};

/// Sizing of a [`Mempool`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MempoolConfig {
    /// Unique name within the process (DPDK limit: 25 bytes).
    pub name: String,
    /// Number of mbufs. Size it for every rx descriptor of every queue using the pool, plus
    /// the bursts in flight, plus `cache_size` per lcore. `2^k - 1` uses memory best.
    pub mbufs: u32,
    /// Per-lcore cache, 0 to disable; at most 512 and at most `mbufs / 1.5`.
    pub cache_size: u32,
    /// Bytes of data room per mbuf, including the headroom (`RTE_PKTMBUF_HEADROOM`, 128).
    pub data_room: u16,
    /// NUMA socket to allocate on; `None` for any.
    pub socket: Option<u32>,
}

impl MempoolConfig {
    /// `mbufs` buffers of the default size (2048 bytes + headroom), cache 256, any socket.
    pub fn new(name: &str, mbufs: u32) -> Self {
        MempoolConfig {
            name: name.to_owned(),
            mbufs,
            cache_size: 256.min(mbufs * 2 / 3),
            data_room: DEFAULT_DATA_ROOM,
            socket: None,
        }
    }
}

/// Default mbuf data room: `RTE_MBUF_DEFAULT_BUF_SIZE` (2048 + 128 headroom).
pub const DEFAULT_DATA_ROOM: u16 =
    (ffi::RTE_MBUF_DEFAULT_DATAROOM + ffi::RTE_PKTMBUF_HEADROOM) as u16;

/// An mbuf pool. `Send + Sync`: allocation and free are thread-safe (ring-based pool), with a
/// lock-free per-lcore cache on EAL lcores and registered threads.
///
/// Share it with `Arc` (ports keep one so their rx queues can refill). Dropping the last
/// reference frees the pool only when every mbuf is back in it; otherwise the pool is left
/// allocated on purpose, since an `Mbuf` that is still alive points into it.
#[derive(Debug)]
pub struct Mempool {
    ptr: NonNull<ffi::rte_mempool>,
}

// SAFETY: an rte_mempool with the default ring_mp_mc ops supports get/put from any thread
// concurrently; the per-lcore caches are indexed by the calling thread's lcore id, which is
// unique per thread; the pointer itself is immutable after creation.
unsafe impl Send for Mempool {}
// SAFETY: as above: every method takes &self and calls thread-safe mempool functions.
unsafe impl Sync for Mempool {}

impl Mempool {
    /// Creates a packet-mbuf pool.
    pub fn new(_eal: &Eal, config: &MempoolConfig) -> Result<Mempool, DpdkError> {
        let name = CString::new(config.name.as_str())
            .map_err(|_| DpdkError::ArgContainsNul(config.name.clone()))?;
        if config.mbufs == 0 {
            return Err(DpdkError::InvalidConfig("mempool of 0 mbufs".to_owned()));
        }
        let socket = match config.socket {
            Some(s) => {
                i32::try_from(s).map_err(|_| DpdkError::InvalidConfig(format!("socket id {s}")))?
            }
            None => ffi::SOCKET_ID_ANY,
        };
        // SAFETY: EAL is initialised (an Eal reference exists); name is a valid C string that
        // DPDK copies; the numeric arguments are range-checked by the callee, which returns
        // NULL and sets rte_errno on any error.
        let ptr = unsafe {
            ffi::rte_pktmbuf_pool_create(
                name.as_ptr(),
                config.mbufs,
                config.cache_size,
                0,
                config.data_room,
                socket,
            )
        };
        let ptr = NonNull::new(ptr)
            .ok_or_else(|| DpdkError::from_rte_errno("rte_pktmbuf_pool_create"))?;
        live_object_created();
        Ok(Mempool { ptr })
    }

    /// The pool's name.
    pub fn name(&self) -> String {
        // SAFETY: ptr is a live mempool; `name` is a NUL-terminated array inside it.
        let name = unsafe { CStr::from_ptr((*self.ptr.as_ptr()).name.as_ptr()) };
        name.to_string_lossy().into_owned()
    }

    /// Mbufs available (in the pool and the lcore caches).
    pub fn available(&self) -> u32 {
        // SAFETY: ptr is a live mempool; the count only reads it.
        unsafe { ffi::rte_mempool_avail_count(self.ptr.as_ptr()) }
    }

    /// Mbufs taken out of the pool (owned by `Mbuf`s, bursts, or a port's rx ring).
    pub fn in_use(&self) -> u32 {
        // SAFETY: ptr is a live mempool; the count only reads it.
        unsafe { ffi::rte_mempool_in_use_count(self.ptr.as_ptr()) }
    }

    /// Allocates one mbuf, reset, with empty data and default headroom. `None` when empty.
    #[inline]
    pub fn alloc(&self) -> Option<Mbuf> {
        // SAFETY: ptr is a live packet-mbuf pool (created by rte_pktmbuf_pool_create); the
        // callee returns a fresh, reset, directly owned mbuf or NULL.
        let m = unsafe { ffi::kbng_pktmbuf_alloc(self.ptr.as_ptr()) };
        // SAFETY: a non-null result is an mbuf with refcnt 1 that nobody else references.
        NonNull::new(m).map(|m| unsafe { Mbuf::from_owned(m) })
    }

    /// Appends `n` fresh mbufs to `burst`, all or nothing: returns `false` (burst unchanged)
    /// when the pool has fewer than `n` or the burst has less than `n` free slots.
    pub fn alloc_bulk<const N: usize>(&self, burst: &mut Burst<N>, n: usize) -> bool {
        let (slots, free) = burst.free_slots();
        if n > free {
            return false;
        }
        let count = u32::try_from(n).expect("n <= N, and N is bounded by Burst");
        // SAFETY: ptr is a live pktmbuf pool; `slots` points at `free >= n` writable mbuf
        // pointer slots of the burst. On success the callee writes n owned, reset mbufs;
        // on failure it writes nothing.
        let ret = unsafe { ffi::kbng_pktmbuf_alloc_bulk(self.ptr.as_ptr(), slots, count) };
        if ret != 0 {
            return false;
        }
        // SAFETY: the callee initialised n slots after the current length with owned mbufs.
        unsafe { burst.assume_filled(n) };
        true
    }

    /// The raw pool, for the ffi-level port setup.
    pub(crate) fn as_ptr(&self) -> *mut ffi::rte_mempool {
        self.ptr.as_ptr()
    }
}

impl Drop for Mempool {
    fn drop(&mut self) {
        if self.in_use() != 0 {
            // Mbufs of this pool are still alive: leak the pool (and keep counting it as live so
            // that Eal::drop does not clean up under them).
            return;
        }
        // SAFETY: ptr is a live mempool that this value owns; no mbuf is out (in_use is 0),
        // no port refers to it (ports hold an Arc<Mempool>, and this is the last reference),
        // and no other thread can allocate from it (we own it).
        unsafe { ffi::rte_mempool_free(self.ptr.as_ptr()) };
        live_object_released();
    }
}
