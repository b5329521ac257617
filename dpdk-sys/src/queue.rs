//! Per-queue handles of a started port: the only way packets are received and sent.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use crate::ffi;
use crate::mbuf::{Burst, MAX_BURST, Mbuf, free_slots};
use crate::port::PortShared;

/// Receive side of one queue of a started port. `Send`: move it to the worker that polls it.
#[derive(Debug)]
pub struct RxQueue {
    shared: Arc<PortShared>,
    queue: u16,
}

impl RxQueue {
    /// The caller has marked `queue` as taken in `shared.rx_taken`.
    pub(crate) fn new(shared: Arc<PortShared>, queue: u16) -> Self {
        RxQueue { shared, queue }
    }

    /// Receives into the free slots of `burst` (`rte_eth_rx_burst`); returns how many mbufs
    /// were added.
    #[inline]
    pub fn rx<const N: usize>(&mut self, burst: &mut Burst<N>) -> usize {
        let (slots, free) = burst.free_slots();
        let free = u16::try_from(free).expect("Burst capacity is at most MAX_BURST");
        // SAFETY: the port is started and stays so while this handle exists (stop and
        // configure need all handles dropped); this handle is the only one for (port, queue)
        // and &mut self keeps its use on one thread; slots points at `free` writable slots.
        let n = unsafe { ffi::kbng_eth_rx_burst(self.shared.id, self.queue, slots, free) };
        // SAFETY: the driver wrote n <= free owned, direct mbufs (refcnt 1) into the slots.
        unsafe { burst.assume_filled(usize::from(n)) };
        usize::from(n)
    }

    /// Port id.
    pub fn port(&self) -> u16 {
        self.shared.id
    }

    /// Queue id.
    pub fn queue(&self) -> u16 {
        self.queue
    }
}

impl Drop for RxQueue {
    fn drop(&mut self) {
        self.shared
            .rx_taken
            .fetch_and(!(1u64 << self.queue), Ordering::AcqRel);
    }
}

/// What [`TxQueue::tx`] did with a burst.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TxCount {
    /// Mbufs handed to the driver.
    pub sent: usize,
    /// Mbufs the driver did not take (queue full); they were freed.
    pub dropped: usize,
}

/// Transmit side of one queue of a started port. `Send`: move it to the worker that uses it.
#[derive(Debug)]
pub struct TxQueue {
    shared: Arc<PortShared>,
    queue: u16,
}

impl TxQueue {
    /// The caller has marked `queue` as taken in `shared.tx_taken`.
    pub(crate) fn new(shared: Arc<PortShared>, queue: u16) -> Self {
        TxQueue { shared, queue }
    }

    /// Sends the whole burst (`rte_eth_tx_burst`). The burst is empty afterwards: mbufs the
    /// driver did not take are freed (one bulk free) and counted in [`TxCount::dropped`], like
    /// testpmd's io mode without retry. Retrying is the caller's choice: call `tx` on a smaller
    /// burst.
    #[inline]
    pub fn tx<const N: usize>(&mut self, burst: &mut Burst<N>) -> TxCount {
        let (slots, len) = burst.filled_slots();
        if len == 0 {
            return TxCount::default();
        }
        let len16 = u16::try_from(len).expect("Burst capacity is at most MAX_BURST");
        // SAFETY: the port is started while this handle exists and this handle is the only one
        // for (port, queue), used from one thread (&mut self); slots holds len owned mbufs.
        let sent = unsafe { ffi::kbng_eth_tx_burst(self.shared.id, self.queue, slots, len16) };
        let sent = usize::from(sent);
        // SAFETY: the driver now owns the first `sent` mbufs; the burst still owns the rest.
        let dropped = unsafe { burst.consume_sent(sent) };
        TxCount { sent, dropped }
    }

    /// [`Self::tx`] for mbufs gathered in an `ArrayVec`, sent from where they lie: a graph
    /// that collects its output per port in such a vector hands it to the driver without first
    /// moving every mbuf into a [`Burst`]. The vector is empty afterwards; mbufs the driver did
    /// not take are freed and counted in [`TxCount::dropped`].
    #[inline]
    pub fn tx_vec<const N: usize>(&mut self, v: &mut arrayvec::ArrayVec<Mbuf, N>) -> TxCount {
        let len = v.len();
        if len == 0 {
            return TxCount::default();
        }
        const {
            assert!(
                N <= MAX_BURST,
                "ArrayVec capacity must be at most MAX_BURST"
            )
        };
        let len16 = u16::try_from(len).expect("len <= N <= MAX_BURST");
        // Mbuf is repr(transparent) over the rte_mbuf pointer, so the vector's storage is the
        // pointer array rte_eth_tx_burst wants.
        let slots = v.as_mut_ptr().cast::<*mut ffi::rte_mbuf>();
        // SAFETY: as in `tx`: this handle is the only one for (port, queue), used from one
        // thread; slots holds len owned mbufs.
        let sent = usize::from(unsafe {
            ffi::kbng_eth_tx_burst(self.shared.id, self.queue, slots, len16)
        });
        // SAFETY: the driver owns the first `sent` mbufs now; setting the length to 0 first
        // means the vector never drops them. The rest (sent..len) are still initialised and
        // owned (MaybeUninit<Mbuf> has Mbuf's layout), and are freed here exactly once.
        unsafe {
            v.set_len(0);
            free_slots(slots.add(sent).cast(), len - sent);
        }
        TxCount {
            sent,
            dropped: len - sent,
        }
    }

    /// Port id.
    pub fn port(&self) -> u16 {
        self.shared.id
    }

    /// Queue id.
    pub fn queue(&self) -> u16 {
        self.queue
    }
}

impl Drop for TxQueue {
    fn drop(&mut self) {
        self.shared
            .tx_taken
            .fetch_and(!(1u64 << self.queue), Ordering::AcqRel);
    }
}
