//! The Environment Abstraction Layer: initialised once per process, cleaned up on drop.

use std::ffi::CString;
use std::marker::PhantomData;
use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};

use crate::error::{DpdkError, rte_errno, strerror};
use crate::ffi;

const EAL_NEVER: u8 = 0;
const EAL_STARTING: u8 = 1;
const EAL_RUNNING: u8 = 2;
const EAL_DONE: u8 = 3;

/// Where the process is in the EAL life cycle.
static EAL_STATE: AtomicU8 = AtomicU8::new(EAL_NEVER);

/// Mempools and ports that are alive (or were leaked on purpose because mbufs were still out).
/// `Eal::drop` runs `rte_eal_cleanup` only when this is zero.
static LIVE_OBJECTS: AtomicUsize = AtomicUsize::new(0);

pub(crate) fn live_object_created() {
    LIVE_OBJECTS.fetch_add(1, Ordering::AcqRel);
}

pub(crate) fn live_object_released() {
    LIVE_OBJECTS.fetch_sub(1, Ordering::AcqRel);
}

/// Proof that the EAL is initialised; owns the EAL and cleans it up on drop.
///
/// `!Send`: `rte_eal_cleanup` must run on the thread that called `rte_eal_init`, so the value
/// stays on that thread. `Sync`: its queries may be made from scoped threads.
#[derive(Debug)]
pub struct Eal {
    // A MutexGuard is !Send and Sync, which is exactly the auto-trait shape wanted here.
    _main_thread_only: PhantomData<std::sync::MutexGuard<'static, ()>>,
}

impl Eal {
    /// Runs `rte_eal_init` with `args` (EAL arguments without the program name, e.g.
    /// `["-l", "0", "--no-huge", "-m", "512", "--no-pci", "--vdev=net_null0"]`).
    ///
    /// Succeeds once per process. A call while an `Eal` is alive, or after one was dropped,
    /// returns [`DpdkError::EalAlreadyInitialized`]. When DPDK rejects the arguments the error
    /// carries `rte_errno`, and a later call may try again with other arguments.
    ///
    /// DPDK terminates the process itself for a few arguments (`--help`/`-h`, `--version`).
    pub fn init(args: &[String]) -> Result<Eal, DpdkError> {
        if EAL_STATE
            .compare_exchange(EAL_NEVER, EAL_STARTING, Ordering::AcqRel, Ordering::Acquire)
            .is_err()
        {
            return Err(DpdkError::EalAlreadyInitialized);
        }
        match Self::init_inner(args) {
            Ok(eal) => {
                EAL_STATE.store(EAL_RUNNING, Ordering::Release);
                Ok(eal)
            }
            Err(e) => {
                EAL_STATE.store(EAL_NEVER, Ordering::Release);
                Err(e)
            }
        }
    }

    fn init_inner(args: &[String]) -> Result<Eal, DpdkError> {
        let mut c_args = Vec::with_capacity(args.len() + 1);
        c_args.push(CString::new("kbng").expect("literal has no NUL"));
        for arg in args {
            c_args.push(
                CString::new(arg.as_str()).map_err(|_| DpdkError::ArgContainsNul(arg.clone()))?,
            );
        }
        // EAL keeps pointers into argv for some options (e.g. it may keep option values it does
        // not copy), and getopt permutes argv. Leaking the strings and the array keeps every
        // pointer valid for the process lifetime; init runs at most a few times per process.
        let argv: &'static mut [*mut std::ffi::c_char] = Vec::leak(
            c_args
                .into_iter()
                .map(CString::into_raw)
                .chain(std::iter::once(std::ptr::null_mut()))
                .collect(),
        );
        let argc = i32::try_from(argv.len() - 1)
            .map_err(|_| DpdkError::InvalidConfig("too many EAL arguments".to_owned()))?;
        // SAFETY: argv holds argc valid NUL-terminated strings followed by a NULL entry, all
        // leaked so they outlive EAL; EAL_STATE guarantees no other rte_eal_init runs
        // concurrently in this process.
        let ret = unsafe { ffi::rte_eal_init(argc, argv.as_mut_ptr()) };
        if ret < 0 {
            let errno = rte_errno();
            return Err(DpdkError::EalInit {
                args: args.to_vec(),
                errno,
                reason: strerror(errno),
            });
        }
        Ok(Eal {
            _main_thread_only: PhantomData,
        })
    }

    /// Number of lcores EAL runs (`-l`/`-c`).
    pub fn lcore_count(&self) -> u32 {
        // SAFETY: EAL is initialised (self exists); rte_lcore_count reads EAL's config.
        unsafe { ffi::rte_lcore_count() }
    }

    /// The main lcore: the one that called `Eal::init`.
    pub fn main_lcore(&self) -> u32 {
        // SAFETY: EAL is initialised; reads EAL's config.
        unsafe { ffi::rte_get_main_lcore() }
    }

    /// The enabled lcore ids, in increasing order (main lcore included).
    pub fn lcores(&self) -> Vec<u32> {
        (0..ffi::RTE_MAX_LCORE)
            // SAFETY: EAL is initialised; rte_lcore_is_enabled accepts any id and returns 0
            // for ids at or above RTE_MAX_LCORE.
            .filter(|&id| unsafe { ffi::rte_lcore_is_enabled(id) } != 0)
            .collect()
    }

    /// The NUMA socket of an lcore, `None` for an lcore id EAL does not know.
    pub fn lcore_socket(&self, lcore: u32) -> Option<u32> {
        if lcore >= ffi::RTE_MAX_LCORE {
            return None;
        }
        // SAFETY: EAL is initialised and lcore < RTE_MAX_LCORE, the bound the callee indexes.
        Some(unsafe { ffi::rte_lcore_to_socket_id(lcore) })
    }

    /// TSC ticks per second, as EAL measured at init.
    pub fn tsc_hz(&self) -> u64 {
        tsc_hz()
    }
}

impl Drop for Eal {
    /// Runs `rte_eal_cleanup` unless mempools or ports are still alive (then the memory is left
    /// to process exit: freeing it under them would be unsound).
    fn drop(&mut self) {
        EAL_STATE.store(EAL_DONE, Ordering::Release);
        if LIVE_OBJECTS.load(Ordering::Acquire) != 0 {
            return;
        }
        // SAFETY: we are on the thread that ran rte_eal_init (Eal is !Send), no DPDK object
        // made by this crate is alive (LIVE_OBJECTS is 0) and EAL_STATE forbids a new init.
        let _ = unsafe { ffi::rte_eal_cleanup() };
    }
}

/// Reads the time stamp counter (`rte_rdtsc`). Cheap; read it once per burst.
#[inline]
pub fn tsc() -> u64 {
    // SAFETY: rte_rdtsc executes RDTSC; no memory is touched and it works on any thread.
    unsafe { ffi::kbng_rdtsc() }
}

/// TSC ticks per second; 0 before `Eal::init`.
pub fn tsc_hz() -> u64 {
    // SAFETY: rte_get_tsc_hz reads a static variable that EAL sets once during init.
    unsafe { ffi::rte_get_tsc_hz() }
}

/// The calling thread's lcore id; `None` on a thread that is not an EAL lcore and did not
/// call [`register_thread`].
pub fn lcore_id() -> Option<u32> {
    // SAFETY: rte_lcore_id reads a thread-local variable, valid on any thread.
    let id = unsafe { ffi::kbng_lcore_id() };
    (id < ffi::RTE_MAX_LCORE).then_some(id)
}

/// The calling thread's NUMA socket; `None` when unknown (a non-EAL thread).
pub fn socket_id() -> Option<u32> {
    // SAFETY: rte_socket_id reads a thread-local variable, valid on any thread.
    let id = unsafe { ffi::rte_socket_id() };
    // SOCKET_ID_ANY (-1) comes back as u32::MAX.
    (id != u32::MAX).then_some(id)
}

/// Registers the calling (non-EAL) thread with EAL so that it gets an lcore id, and with it the
/// per-lcore mempool caches that make mbuf alloc/free cheap.
///
/// For worker threads started with `std::thread`. The registration ends when the returned guard
/// is dropped (it is `!Send`, so on the same thread). Fails when the EAL is not running, on a
/// thread that already has an lcore id (an EAL lcore or a registered thread), and when EAL has
/// no free lcore slot.
pub fn register_thread() -> Result<ThreadRegistration, DpdkError> {
    if EAL_STATE.load(Ordering::Acquire) != EAL_RUNNING {
        return Err(DpdkError::InvalidConfig(
            "register_thread needs a running EAL (Eal::init first)".to_owned(),
        ));
    }
    if let Some(lcore) = lcore_id() {
        return Err(DpdkError::InvalidConfig(format!(
            "this thread already is lcore {lcore}; register_thread is for non-EAL threads"
        )));
    }
    // SAFETY: EAL init has completed (EAL_STATE is RUNNING; the callee also checks) and the
    // calling thread has no lcore id (checked above), so rte_thread_register overwrites no EAL
    // lcore's identity; it only touches EAL's static lcore table (under its lock) and the
    // calling thread's thread-locals, which stay valid even if cleanup runs meanwhile.
    let ret = unsafe { ffi::rte_thread_register() };
    if ret < 0 {
        return Err(DpdkError::from_rte_errno("rte_thread_register"));
    }
    let lcore = lcore_id().ok_or_else(|| DpdkError::Call {
        call: "rte_thread_register",
        errno: 0,
        reason: "no lcore id was assigned".to_owned(),
    })?;
    Ok(ThreadRegistration {
        lcore,
        _same_thread: PhantomData,
    })
}

/// A non-EAL thread's lcore registration; see [`register_thread`].
#[derive(Debug)]
pub struct ThreadRegistration {
    lcore: u32,
    _same_thread: PhantomData<*const ()>,
}

impl ThreadRegistration {
    /// The lcore id EAL assigned to this thread.
    pub fn lcore(&self) -> u32 {
        self.lcore
    }
}

impl Drop for ThreadRegistration {
    fn drop(&mut self) {
        // SAFETY: this guard is !Send, so we are on the thread that registered; it releases
        // that thread's slot in EAL's static lcore table (under its lock) and resets the
        // thread's thread-locals. The lcore table is static, so this is sound after cleanup too.
        unsafe { ffi::rte_thread_unregister() }
    }
}
