//! Ethernet ports: find, configure (queues, descriptors, RSS), start/stop, query. Packets move
//! through the per-queue handles of `queue.rs`.

use std::collections::BTreeSet;
use std::ffi::{CStr, CString, c_char};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use crate::eal::{Eal, live_object_created, live_object_released};
use crate::error::DpdkError;
use crate::ffi;
use crate::mempool::Mempool;
use crate::queue::{RxQueue, TxQueue};

/// Ports opened by a `Port` value in this process (one owner per port id).
static OPEN_PORTS: Mutex<BTreeSet<u16>> = Mutex::new(BTreeSet::new());

/// Most queues per direction a `Port` configures (a bitmap tracks the handed-out handles).
pub const MAX_QUEUES: u16 = 64;

/// Which header fields the NIC hashes to spread packets over rx queues (RSS).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RssHash {
    /// IPv4/IPv6 source and destination address (`RTE_ETH_RSS_IP`).
    Ip,
    /// IP source address only (`RTE_ETH_RSS_IP | RTE_ETH_RSS_L3_SRC_ONLY`): on the access port,
    /// so one subscriber's upstream packets go to one queue.
    IpSourceOnly,
    /// IP destination address only (`RTE_ETH_RSS_IP | RTE_ETH_RSS_L3_DST_ONLY`): on the uplink,
    /// so one subscriber's downstream packets go to the same queue index as its upstream ones.
    IpDestinationOnly,
}

impl RssHash {
    fn hash_fields(self) -> u64 {
        let which = match self {
            RssHash::Ip => ffi::KBNG_RSS_IP,
            RssHash::IpSourceOnly => ffi::KBNG_RSS_IP_L3_SRC,
            RssHash::IpDestinationOnly => ffi::KBNG_RSS_IP_L3_DST,
        };
        // SAFETY: pure function of its enum argument.
        unsafe { ffi::kbng_rss_hf(which) }
    }
}

/// How a port is set up by [`Port::configure`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortConfig {
    /// Rx queues, `1..=MAX_QUEUES` and at most what the device supports.
    pub rx_queues: u16,
    /// Tx queues, `1..=MAX_QUEUES` and at most what the device supports.
    pub tx_queues: u16,
    /// Descriptors per rx queue (the driver may round it; see [`PortSetup`]).
    pub rx_desc: u16,
    /// Descriptors per tx queue (the driver may round it).
    pub tx_desc: u16,
    /// RSS hash choice; used only when `rx_queues > 1`.
    pub rss: RssHash,
    /// Enable promiscuous mode (a BNG port receives for many MACs).
    pub promiscuous: bool,
}

impl Default for PortConfig {
    /// One rx and one tx queue of 1024 descriptors, IP RSS, promiscuous.
    fn default() -> Self {
        PortConfig {
            rx_queues: 1,
            tx_queues: 1,
            rx_desc: 1024,
            tx_desc: 1024,
            rss: RssHash::Ip,
            promiscuous: true,
        }
    }
}

/// What RSS set-up the port got.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RssOutcome {
    /// One rx queue: no RSS needed.
    SingleQueue,
    /// RSS enabled on the requested addresses (source only, destination only, or both), for the
    /// IP protocols the device can hash; [`PortSetup::rss_hash_fields`] lists them.
    Applied,
    /// The device hashes IP but not on one address only: RSS uses source and destination, so
    /// the two directions of one subscriber may land on different queue indexes.
    L3OnlyUnsupported,
    /// The device has no IP RSS (many vdevs): RSS is off and the driver decides which queue
    /// gets a packet (often queue 0 only).
    Unsupported,
}

/// The result of [`Port::configure`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PortSetup {
    /// Rx descriptors per queue after the driver's adjustment.
    pub rx_desc: u16,
    /// Tx descriptors per queue after the driver's adjustment.
    pub tx_desc: u16,
    /// Whether RSS is as requested.
    pub rss: RssOutcome,
    /// The RSS hash-field bits programmed (`RTE_ETH_RSS_*`), 0 when RSS is off.
    pub rss_hash_fields: u64,
    /// Whether promiscuous mode was requested and the driver accepted it.
    pub promiscuous: bool,
}

/// Link state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Link {
    /// Link is up.
    pub up: bool,
    /// Speed in Mbit/s, 0 when unknown.
    pub speed_mbps: u32,
    /// Full duplex.
    pub full_duplex: bool,
}

/// Basic port counters (`rte_eth_stats`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PortStats {
    /// Packets received.
    pub ipackets: u64,
    /// Packets sent.
    pub opackets: u64,
    /// Bytes received.
    pub ibytes: u64,
    /// Bytes sent.
    pub obytes: u64,
    /// Packets the device dropped because the rx queues were full.
    pub imissed: u64,
    /// Erroneous packets received.
    pub ierrors: u64,
    /// Packets the device failed to send.
    pub oerrors: u64,
    /// Rx mbuf allocation failures.
    pub rx_nombuf: u64,
}

/// Reads one port's basic counters; see [`Port::stats_reader`].
#[derive(Debug, Clone)]
pub struct PortStatsReader {
    shared: Arc<PortShared>,
}

impl PortStatsReader {
    /// The port id.
    pub fn id(&self) -> u16 {
        self.shared.id
    }

    /// Basic counters, as [`Port::stats`].
    pub fn stats(&self) -> Result<PortStats, DpdkError> {
        read_stats(self.shared.id)
    }

    /// Link state, as [`Port::link`].
    pub fn link(&self) -> Result<Link, DpdkError> {
        read_link(self.shared.id)
    }
}

/// Identity of the device behind a port, for reporting what the dataplane drives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceInfo {
    /// Ethdev name (`net_null0`, `0000:00:04.0`).
    pub port_name: String,
    /// Device name on its bus (the PCI address for a PCI device).
    pub device_name: String,
    /// Bus name (`pci`, `vdev`).
    pub bus: String,
    /// Driver name (`net_null`, `net_virtio`).
    pub driver: String,
    /// Most rx queues the device supports.
    pub max_rx_queues: u16,
    /// Most tx queues the device supports.
    pub max_tx_queues: u16,
    /// RSS hash fields the device supports (`RTE_ETH_RSS_*` bits).
    pub rss_hash_capa: u64,
}

/// Port state shared with the queue handles.
#[derive(Debug)]
pub(crate) struct PortShared {
    pub(crate) id: u16,
    rx_queues: u16,
    tx_queues: u16,
    configured: bool,
    started: bool,
    /// Rx queues refill from this pool: keep it alive as long as the port may use it.
    pool: Option<Arc<Mempool>>,
    pub(crate) rx_taken: AtomicU64,
    pub(crate) tx_taken: AtomicU64,
}

impl Drop for PortShared {
    fn drop(&mut self) {
        if self.started {
            // SAFETY: the port is a valid started port owned by us; no queue handle exists
            // (they hold an Arc to this value, which is being dropped).
            let _ = unsafe { ffi::rte_eth_dev_stop(self.id) };
        }
        // SAFETY: as above; close releases the queues and their mbufs back to `pool`, which
        // is still alive (dropped after this function).
        let _ = unsafe { ffi::rte_eth_dev_close(self.id) };
        if let Ok(mut open) = OPEN_PORTS.lock() {
            open.remove(&self.id);
        }
        live_object_released();
    }
}

/// An ethdev port, owned: one `Port` value per port id in the process. Dropping it (and its
/// queue handles) stops and closes the device; DPDK then releases it, so it cannot be opened
/// again in this process.
///
/// Set-up methods take `&mut self` and fail with [`DpdkError::QueuesInUse`] while an
/// [`RxQueue`] or [`TxQueue`] handle is alive, since DPDK forbids reconfiguring or stopping a
/// port while its queues are polled. Queries (`stats`, `link`, ...) take `&self` and may run on
/// any thread.
#[derive(Debug)]
pub struct Port {
    shared: Arc<PortShared>,
}

impl Port {
    /// Number of ports DPDK probed (`rte_eth_dev_count_avail`).
    pub fn count(_eal: &Eal) -> u16 {
        // SAFETY: EAL is initialised; reads the ethdev table.
        unsafe { ffi::rte_eth_dev_count_avail() }
    }

    /// Opens the port of a device name: a vdev name (`net_null0`) or a PCI address in full
    /// form (`0000:00:04.0`).
    pub fn open(eal: &Eal, name: &str) -> Result<Port, DpdkError> {
        let c_name = CString::new(name).map_err(|_| DpdkError::ArgContainsNul(name.to_owned()))?;
        let mut id = 0u16;
        // SAFETY: EAL is initialised; c_name is a valid C string; id is a valid out pointer.
        let ret = unsafe { ffi::rte_eth_dev_get_port_by_name(c_name.as_ptr(), &mut id) };
        if ret != 0 {
            return Err(DpdkError::PortNotFound(name.to_owned()));
        }
        Self::open_id(eal, id)
    }

    /// Opens a port by id.
    pub fn open_id(_eal: &Eal, id: u16) -> Result<Port, DpdkError> {
        // SAFETY: EAL is initialised; accepts any id.
        if unsafe { ffi::rte_eth_dev_is_valid_port(id) } == 0 {
            return Err(DpdkError::PortNotFound(format!("port id {id}")));
        }
        let mut open = OPEN_PORTS.lock().map_err(|_| DpdkError::PortInUse(id))?;
        if !open.insert(id) {
            return Err(DpdkError::PortInUse(id));
        }
        live_object_created();
        Ok(Port {
            shared: Arc::new(PortShared {
                id,
                rx_queues: 0,
                tx_queues: 0,
                configured: false,
                started: false,
                pool: None,
                rx_taken: AtomicU64::new(0),
                tx_taken: AtomicU64::new(0),
            }),
        })
    }

    /// The port id.
    pub fn id(&self) -> u16 {
        self.shared.id
    }

    fn exclusive(&mut self) -> Result<&mut PortShared, DpdkError> {
        let id = self.shared.id;
        Arc::get_mut(&mut self.shared).ok_or(DpdkError::QueuesInUse(id))
    }

    fn dev_info(&self) -> Result<ffi::rte_eth_dev_info, DpdkError> {
        let mut info = ffi::rte_eth_dev_info::default();
        // SAFETY: the port id is valid (checked at open, and the port is not closed while self
        // lives); info is a valid out pointer the callee fills.
        let ret = unsafe { ffi::rte_eth_dev_info_get(self.id(), &mut info) };
        if ret != 0 {
            return Err(DpdkError::from_ret("rte_eth_dev_info_get", ret));
        }
        Ok(info)
    }

    /// Names and capabilities of the device behind the port.
    pub fn device_info(&self) -> Result<DeviceInfo, DpdkError> {
        let info = self.dev_info()?;
        let mut name_buf = [0 as c_char; ffi::RTE_ETH_NAME_MAX_LEN as usize];
        // SAFETY: the port id is valid; the buffer has RTE_ETH_NAME_MAX_LEN bytes as required.
        let ret = unsafe { ffi::rte_eth_dev_get_name_by_port(self.id(), name_buf.as_mut_ptr()) };
        if ret != 0 {
            return Err(DpdkError::from_ret("rte_eth_dev_get_name_by_port", ret));
        }
        // SAFETY: on success the callee wrote a NUL-terminated name into the buffer.
        let port_name = unsafe { cstr_to_string(name_buf.as_ptr()) };
        let (device_name, bus) = if info.device.is_null() {
            (String::new(), String::new())
        } else {
            // SAFETY: info.device points at the port's rte_device, which lives as long as the
            // port is not closed (self is alive); the accessors return NUL-terminated names
            // owned by the device and its bus, or NULL.
            unsafe {
                let bus = ffi::rte_dev_bus(info.device);
                let bus_name = if bus.is_null() {
                    std::ptr::null()
                } else {
                    ffi::rte_bus_name(bus)
                };
                (
                    cstr_to_string(ffi::rte_dev_name(info.device)),
                    cstr_to_string(bus_name),
                )
            }
        };
        // SAFETY: driver_name is NULL or a NUL-terminated static string of the driver.
        let driver = unsafe { cstr_to_string(info.driver_name) };
        Ok(DeviceInfo {
            port_name,
            device_name,
            bus,
            driver,
            max_rx_queues: info.max_rx_queues,
            max_tx_queues: info.max_tx_queues,
            rss_hash_capa: info.flow_type_rss_offloads,
        })
    }

    /// The NUMA socket of the device; `None` when unknown (vdevs, single-socket hosts).
    pub fn socket_id(&self) -> Option<u32> {
        // SAFETY: accepts any port id; returns -1 (SOCKET_ID_ANY) when unknown.
        let s = unsafe { ffi::rte_eth_dev_socket_id(self.id()) };
        u32::try_from(s).ok()
    }

    /// The port's MAC address.
    pub fn mac(&self) -> Result<[u8; 6], DpdkError> {
        let mut addr = ffi::rte_ether_addr::default();
        // SAFETY: valid port id; addr is a valid out pointer.
        let ret = unsafe { ffi::rte_eth_macaddr_get(self.id(), &mut addr) };
        if ret != 0 {
            return Err(DpdkError::from_ret("rte_eth_macaddr_get", ret));
        }
        Ok(addr.addr_bytes)
    }

    /// Link state, without waiting for auto-negotiation.
    pub fn link(&self) -> Result<Link, DpdkError> {
        read_link(self.id())
    }

    /// Basic counters.
    pub fn stats(&self) -> Result<PortStats, DpdkError> {
        read_stats(self.id())
    }

    /// A handle that reads this port's counters from another thread (a telemetry poller, a
    /// gRPC server) without owning the port. Like a queue handle it keeps the device open, so
    /// [`stop`](Port::stop) fails with [`DpdkError::QueuesInUse`] while one is alive.
    pub fn stats_reader(&self) -> PortStatsReader {
        PortStatsReader {
            shared: Arc::clone(&self.shared),
        }
    }

    /// Resets the basic counters to zero.
    pub fn reset_stats(&self) -> Result<(), DpdkError> {
        // SAFETY: valid port id.
        let ret = unsafe { ffi::rte_eth_stats_reset(self.id()) };
        if ret != 0 {
            return Err(DpdkError::from_ret("rte_eth_stats_reset", ret));
        }
        Ok(())
    }

    /// Configures queues, descriptors and RSS; the rx queues take mbufs from `pool`.
    ///
    /// The port must be stopped. RSS degrades instead of failing when the device cannot hash
    /// as asked; [`PortSetup::rss`] says what was applied.
    pub fn configure(
        &mut self,
        config: &PortConfig,
        pool: &Arc<Mempool>,
    ) -> Result<PortSetup, DpdkError> {
        let info = self.dev_info()?;
        let shared = self.exclusive()?;
        let id = shared.id;
        if shared.started {
            return Err(DpdkError::PortState {
                port: id,
                what: "configure needs a stopped port",
            });
        }
        for (what, n, max) in [
            ("rx_queues", config.rx_queues, info.max_rx_queues),
            ("tx_queues", config.tx_queues, info.max_tx_queues),
        ] {
            if n == 0 || n > MAX_QUEUES || n > max {
                return Err(DpdkError::InvalidConfig(format!(
                    "port {id}: {what} = {n}, the device supports 1..={}",
                    max.min(MAX_QUEUES)
                )));
            }
        }

        let mut conf = ffi::rte_eth_conf::default();
        conf.txmode.mq_mode = ffi::RTE_ETH_MQ_TX_NONE;
        let (rss, rss_hash_fields) = if config.rx_queues == 1 {
            (RssOutcome::SingleQueue, 0)
        } else {
            let wanted = config.rss.hash_fields();
            let capa = info.flow_type_rss_offloads;
            // SAFETY: pure function.
            let l3_only = unsafe { ffi::kbng_rss_l3_only_bits() };
            // Protocols the device can hash, of those asked for (e.g. IPv4 but not IPv6).
            let protocols = wanted & !l3_only & capa;
            let modifier = wanted & l3_only;
            if protocols == 0 {
                (RssOutcome::Unsupported, 0)
            } else if capa & modifier != modifier {
                (RssOutcome::L3OnlyUnsupported, protocols)
            } else {
                (RssOutcome::Applied, protocols | modifier)
            }
        };
        if rss_hash_fields != 0 {
            conf.rxmode.mq_mode = ffi::RTE_ETH_MQ_RX_RSS;
            conf.rx_adv_conf.rss_conf.rss_hf = rss_hash_fields;
            // rss_key stays NULL: the driver's default key.
        } else {
            conf.rxmode.mq_mode = ffi::RTE_ETH_MQ_RX_NONE;
        }

        // SAFETY: valid port id of a stopped port with no queue handles out (exclusive()
        // succeeded); conf is a valid, fully initialised rte_eth_conf the callee copies.
        let ret =
            unsafe { ffi::rte_eth_dev_configure(id, config.rx_queues, config.tx_queues, &conf) };
        if ret != 0 {
            return Err(DpdkError::from_ret("rte_eth_dev_configure", ret));
        }
        let (mut rx_desc, mut tx_desc) = (config.rx_desc, config.tx_desc);
        // SAFETY: valid, configured port; the two pointers are valid in/out u16s.
        let ret = unsafe { ffi::rte_eth_dev_adjust_nb_rx_tx_desc(id, &mut rx_desc, &mut tx_desc) };
        if ret != 0 {
            return Err(DpdkError::from_ret("rte_eth_dev_adjust_nb_rx_tx_desc", ret));
        }
        // SAFETY: accepts any port id.
        let socket = unsafe { ffi::rte_eth_dev_socket_id(id) };
        let socket = u32::try_from(socket).unwrap_or(u32::MAX); // SOCKET_ID_ANY as unsigned
        for q in 0..config.rx_queues {
            // SAFETY: configured, stopped port; q < the configured rx queue count; NULL rx_conf
            // selects the driver defaults; pool is a live pktmbuf pool that this port keeps
            // alive (stored below) until the port is closed.
            let ret = unsafe {
                ffi::rte_eth_rx_queue_setup(id, q, rx_desc, socket, std::ptr::null(), pool.as_ptr())
            };
            if ret != 0 {
                return Err(DpdkError::from_ret("rte_eth_rx_queue_setup", ret));
            }
        }
        for q in 0..config.tx_queues {
            // SAFETY: configured, stopped port; q < the configured tx queue count; NULL tx_conf
            // selects the driver defaults.
            let ret =
                unsafe { ffi::rte_eth_tx_queue_setup(id, q, tx_desc, socket, std::ptr::null()) };
            if ret != 0 {
                return Err(DpdkError::from_ret("rte_eth_tx_queue_setup", ret));
            }
        }
        let promiscuous = config.promiscuous && {
            // SAFETY: valid, configured port.
            unsafe { ffi::rte_eth_promiscuous_enable(id) == 0 }
        };
        shared.rx_queues = config.rx_queues;
        shared.tx_queues = config.tx_queues;
        shared.configured = true;
        shared.pool = Some(Arc::clone(pool));
        Ok(PortSetup {
            rx_desc,
            tx_desc,
            rss,
            rss_hash_fields,
            promiscuous,
        })
    }

    /// Starts the port (`rte_eth_dev_start`). Idempotent.
    pub fn start(&mut self) -> Result<(), DpdkError> {
        let shared = self.exclusive()?;
        if shared.started {
            return Ok(());
        }
        if !shared.configured {
            return Err(DpdkError::PortState {
                port: shared.id,
                what: "start needs configure first",
            });
        }
        // SAFETY: valid, configured port with every queue set up.
        let ret = unsafe { ffi::rte_eth_dev_start(shared.id) };
        if ret != 0 {
            return Err(DpdkError::from_ret("rte_eth_dev_start", ret));
        }
        shared.started = true;
        Ok(())
    }

    /// Stops the port. Fails with [`DpdkError::QueuesInUse`] while queue handles are alive.
    pub fn stop(&mut self) -> Result<(), DpdkError> {
        let shared = self.exclusive()?;
        if !shared.started {
            return Ok(());
        }
        // SAFETY: valid, started port; no queue handle exists (exclusive()), so no thread
        // polls its queues.
        let ret = unsafe { ffi::rte_eth_dev_stop(shared.id) };
        if ret != 0 {
            return Err(DpdkError::from_ret("rte_eth_dev_stop", ret));
        }
        shared.started = false;
        Ok(())
    }

    /// Whether the port is started.
    pub fn is_started(&self) -> bool {
        self.shared.started
    }

    /// Takes the handle of rx queue `queue`: the only way to receive on it. One handle per
    /// queue at a time; it returns to the port when dropped. The port must be started.
    pub fn rx_queue(&self, queue: u16) -> Result<RxQueue, DpdkError> {
        self.take_queue("rx", queue, self.shared.rx_queues, &self.shared.rx_taken)?;
        Ok(RxQueue::new(Arc::clone(&self.shared), queue))
    }

    /// Takes the handle of tx queue `queue`: the only way to send on it (see
    /// [`rx_queue`](Port::rx_queue)).
    pub fn tx_queue(&self, queue: u16) -> Result<TxQueue, DpdkError> {
        self.take_queue("tx", queue, self.shared.tx_queues, &self.shared.tx_taken)?;
        Ok(TxQueue::new(Arc::clone(&self.shared), queue))
    }

    fn take_queue(
        &self,
        dir: &'static str,
        queue: u16,
        count: u16,
        taken: &AtomicU64,
    ) -> Result<(), DpdkError> {
        let err = |what| DpdkError::Queue {
            port: self.id(),
            dir,
            queue,
            what,
        };
        if !self.shared.started {
            return Err(err("the port is not started"));
        }
        if queue >= count {
            return Err(err("no such queue"));
        }
        let bit = 1u64 << queue;
        if taken.fetch_or(bit, Ordering::AcqRel) & bit != 0 {
            return Err(err("its handle is already taken"));
        }
        Ok(())
    }
}

/// Copies a C string, `""` for NULL.
///
/// # Safety
/// `p` must be NULL or point at a NUL-terminated string valid for the call.
unsafe fn cstr_to_string(p: *const c_char) -> String {
    if p.is_null() {
        return String::new();
    }
    // SAFETY: non-null and NUL-terminated per the caller.
    unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
}

/// `rte_eth_link_get_nowait` of port `id`, which the caller keeps open.
fn read_link(id: u16) -> Result<Link, DpdkError> {
    let mut link = ffi::rte_eth_link::default();
    // SAFETY: `id` is a valid port that stays open for the call (the caller holds the `Port` or
    // its `PortShared`); link is a valid out pointer. The nowait form only reads the state the
    // PMD keeps (stored atomically by the driver), so another thread may poll the queues.
    let ret = unsafe { ffi::rte_eth_link_get_nowait(id, &mut link) };
    if ret != 0 {
        return Err(DpdkError::from_ret("rte_eth_link_get_nowait", ret));
    }
    Ok(Link {
        up: u32::from(link.link_status()) == ffi::RTE_ETH_LINK_UP,
        speed_mbps: link.link_speed,
        full_duplex: u32::from(link.link_duplex()) == ffi::RTE_ETH_LINK_FULL_DUPLEX,
    })
}

/// `rte_eth_stats_get` of port `id`, which the caller keeps open (a `PortShared` is alive).
fn read_stats(id: u16) -> Result<PortStats, DpdkError> {
    let mut s = ffi::rte_eth_stats::default();
    // SAFETY: `id` is a valid port that stays open for the call (the caller holds its
    // `PortShared`, whose drop is what closes it); s is a valid out pointer. DPDK allows reading
    // the counters while other threads poll the queues (the PMD sums per-queue counters).
    let ret = unsafe { ffi::rte_eth_stats_get(id, &mut s) };
    if ret != 0 {
        return Err(DpdkError::from_ret("rte_eth_stats_get", ret));
    }
    Ok(PortStats {
        ipackets: s.ipackets,
        opackets: s.opackets,
        ibytes: s.ibytes,
        obytes: s.obytes,
        imissed: s.imissed,
        ierrors: s.ierrors,
        oerrors: s.oerrors,
        rx_nombuf: s.rx_nombuf,
    })
}
