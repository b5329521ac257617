//! The error type of EAL, mempool and port set-up. The packet path (rx, tx, mbuf edits) never
//! returns `Result`: it returns counts and `Option`/`bool` verdicts.

use std::ffi::CStr;

use crate::ffi;

/// Why an EAL, mempool or port call failed.
#[derive(Debug, thiserror::Error)]
pub enum DpdkError {
    /// `Eal::init` was called while an `Eal` exists or after one was dropped: DPDK's EAL can be
    /// initialised once per process.
    #[error("the DPDK EAL is already initialised in this process (it can be initialised once)")]
    EalAlreadyInitialized,
    /// An EAL argument contains a NUL byte and cannot be passed to C.
    #[error("EAL argument {0:?} contains a NUL byte")]
    ArgContainsNul(String),
    /// `rte_eal_init` returned an error. `errno` is DPDK's `rte_errno`.
    #[error("rte_eal_init({args:?}) failed: {reason} (rte_errno {errno})")]
    EalInit {
        /// The arguments as given to `Eal::init`.
        args: Vec<String>,
        /// `rte_errno` after the call.
        errno: i32,
        /// `rte_strerror(errno)`.
        reason: String,
    },
    /// A DPDK call returned a negative errno (or set `rte_errno`).
    #[error("{call} failed: {reason} (errno {errno})")]
    Call {
        /// The DPDK function, e.g. `"rte_eth_dev_configure"`.
        call: &'static str,
        /// The positive errno value.
        errno: i32,
        /// `rte_strerror(errno)`.
        reason: String,
    },
    /// No ethdev port has this device name (vdev name such as `net_null0` or PCI address such as
    /// `0000:00:04.0`).
    #[error("no DPDK ethernet port named {0:?}")]
    PortNotFound(String),
    /// The port is already owned by a `Port` value in this process.
    #[error("DPDK port {0} is already opened by this process")]
    PortInUse(u16),
    /// A port operation that needs a stopped port with no queue handles out (configure, start,
    /// stop) was called while an `RxQueue` or `TxQueue` of the port is alive.
    #[error("port {0} has RxQueue/TxQueue handles alive; drop them first")]
    QueuesInUse(u16),
    /// A port operation was called in the wrong state (e.g. `start` before `configure`).
    #[error("port {port}: {what}")]
    PortState {
        /// Port id.
        port: u16,
        /// What was wrong.
        what: &'static str,
    },
    /// A queue id is out of range or its handle is already taken.
    #[error("port {port} {dir} queue {queue}: {what}")]
    Queue {
        /// Port id.
        port: u16,
        /// `"rx"` or `"tx"`.
        dir: &'static str,
        /// Queue id.
        queue: u16,
        /// What was wrong.
        what: &'static str,
    },
    /// A configuration value was rejected before calling DPDK.
    #[error("invalid configuration: {0}")]
    InvalidConfig(String),
}

impl DpdkError {
    /// Builds `Call` from a DPDK return value that is a negative errno.
    pub(crate) fn from_ret(call: &'static str, ret: i32) -> Self {
        let errno = ret.saturating_abs();
        DpdkError::Call {
            call,
            errno,
            reason: strerror(errno),
        }
    }

    /// Builds `Call` from the calling thread's `rte_errno`, for calls that return NULL or -1.
    pub(crate) fn from_rte_errno(call: &'static str) -> Self {
        let errno = rte_errno();
        DpdkError::Call {
            call,
            errno,
            reason: strerror(errno),
        }
    }
}

/// The calling thread's `rte_errno`.
pub(crate) fn rte_errno() -> i32 {
    // SAFETY: kbng_errno reads the calling thread's thread-local rte_errno; it has no
    // preconditions and works before EAL init.
    unsafe { ffi::kbng_errno() }
}

/// `rte_strerror(errno)` as an owned string.
pub(crate) fn strerror(errno: i32) -> String {
    // SAFETY: rte_strerror accepts any int and returns a pointer to a NUL-terminated string,
    // either static or in a thread-local buffer that stays valid until this thread's next call;
    // it is copied out before returning.
    let text = unsafe { ffi::rte_strerror(errno) };
    if text.is_null() {
        return format!("errno {errno}");
    }
    // SAFETY: non-null, NUL-terminated and valid for the duration of this call (see above).
    unsafe { CStr::from_ptr(text) }
        .to_string_lossy()
        .into_owned()
}
