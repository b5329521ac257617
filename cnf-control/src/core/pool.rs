//! IPv4 address pools: O(1) allocation, exclusions, no address handed out twice, and a
//! preference for the address a subscriber held before.
//!
//! Each pool keeps a bitmap of allocated offsets and a FIFO of free offsets. Allocation pops the
//! FIFO (skipping entries taken meanwhile by a specific allocation: lazy deletion, amortised O(1));
//! a release pushes to the back, so a just-freed address is the last to be reused and a returning
//! subscriber usually finds its previous address still free. A second bitmap (`queued`) keeps an
//! offset in the FIFO at most once, so the FIFO never outgrows the pool. A scan of the bitmap with a
//! cursor was the alternative: also O(1) amortised, but it hands out just-freed addresses early.
//!
//! Exclusions are never handed out by allocation, but a RADIUS Framed-IP-Address may name one:
//! that is where an operator keeps subscribers' fixed addresses. Such an address is held in a
//! set of its own, so it never enters the FIFO and never counts as leasable or in use.

use std::collections::{HashSet, VecDeque};
use std::net::Ipv4Addr;

/// Why a pool could not be built or an address not taken.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PoolError {
    #[error("pool {pool}: prefix length {len} leaves no host addresses (need /8../30)")]
    BadPrefix { pool: String, len: u8 },
    #[error("pool {pool}: gateway {gateway} is not inside {network}/{len}")]
    GatewayOutside {
        pool: String,
        gateway: Ipv4Addr,
        network: Ipv4Addr,
        len: u8,
    },
    #[error("pool {pool}: exclusion {ip}/{len} is not inside the pool")]
    ExclusionOutside { pool: String, ip: Ipv4Addr, len: u8 },
}

/// The validated description of one pool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PoolConfig {
    pub name: String,
    pub network: Ipv4Addr,
    pub prefix_len: u8,
    pub gateway: Ipv4Addr,
    pub lease_secs: u32,
    pub dns: Vec<Ipv4Addr>,
    /// Prefixes never handed out, `(address, prefix length)`.
    pub exclusions: Vec<(Ipv4Addr, u8)>,
}

impl PoolConfig {
    /// Whether `ip` belongs to this pool's prefix.
    pub fn contains(&self, ip: Ipv4Addr) -> bool {
        u32::from(ip) & mask(self.prefix_len) == u32::from(self.network) & mask(self.prefix_len)
    }
}

fn mask(len: u8) -> u32 {
    if len == 0 { 0 } else { u32::MAX << (32 - len) }
}

/// One pool's allocation state.
#[derive(Debug, Clone)]
pub struct Pool {
    pub config: PoolConfig,
    base: u32,
    size: u32,
    allocated: Vec<bool>,
    queued: Vec<bool>,
    free: VecDeque<u32>,
    usable: u32,
    in_use: u32,
    /// Excluded offsets held by a session (a fixed address from RADIUS, or one excluded after
    /// its session took it).
    held_excluded: HashSet<u32>,
}

impl Pool {
    /// Build a pool; the network and broadcast addresses, the gateway and every exclusion are
    /// never allocatable.
    pub fn new(config: PoolConfig) -> Result<Pool, PoolError> {
        let len = config.prefix_len;
        if !(8..=30).contains(&len) {
            return Err(PoolError::BadPrefix {
                pool: config.name.clone(),
                len,
            });
        }
        let base = u32::from(config.network) & mask(len);
        let size = 1u32 << (32 - len);
        if !config.contains(config.gateway) {
            return Err(PoolError::GatewayOutside {
                pool: config.name.clone(),
                gateway: config.gateway,
                network: Ipv4Addr::from(base),
                len,
            });
        }
        let mut blocked = vec![false; size as usize];
        blocked[0] = true;
        blocked[size as usize - 1] = true;
        blocked[(u32::from(config.gateway) - base) as usize] = true;
        for (ip, elen) in &config.exclusions {
            let start = u32::from(*ip) & mask(*elen);
            if *elen < len || !config.contains(Ipv4Addr::from(start)) {
                return Err(PoolError::ExclusionOutside {
                    pool: config.name.clone(),
                    ip: *ip,
                    len: *elen,
                });
            }
            let n = 1u64 << (32 - u32::from(*elen));
            for off in 0..n {
                blocked[(start - base) as usize + off as usize] = true;
            }
        }
        let free: VecDeque<u32> = (0..size).filter(|o| !blocked[*o as usize]).collect();
        let usable = free.len() as u32;
        Ok(Pool {
            config,
            base,
            size,
            queued: blocked.iter().map(|b| !b).collect(),
            allocated: blocked,
            free,
            usable,
            in_use: 0,
            held_excluded: HashSet::new(),
        })
    }

    fn offset(&self, ip: Ipv4Addr) -> Option<usize> {
        self.contains(ip)
            .then(|| (u32::from(ip) - self.base) as usize)
    }

    /// Whether `ip` belongs to this pool's prefix.
    pub fn contains(&self, ip: Ipv4Addr) -> bool {
        self.config.contains(ip)
    }

    /// Take the oldest free address.
    pub fn allocate(&mut self) -> Option<Ipv4Addr> {
        while let Some(off) = self.free.pop_front() {
            self.queued[off as usize] = false;
            if !self.allocated[off as usize] {
                self.allocated[off as usize] = true;
                self.in_use += 1;
                return Some(Ipv4Addr::from(self.base + off));
            }
        }
        None
    }

    /// Take `ip` if it is in this pool, allocatable and free.
    pub fn allocate_specific(&mut self, ip: Ipv4Addr) -> bool {
        match self.offset(ip) {
            Some(off) if !self.allocated[off] && self.is_usable(off) => {
                // Its FIFO entry, if any, is skipped when popped.
                self.allocated[off] = true;
                self.in_use += 1;
                true
            }
            _ => false,
        }
    }

    /// Take `ip` whether excluded or not: the address a session already held (restore), or a
    /// fixed address from RADIUS. Never the network, broadcast or gateway address.
    pub fn allocate_held(&mut self, ip: Ipv4Addr) -> bool {
        match self.offset(ip) {
            Some(off) if self.is_host(off) && !self.is_usable(off) => {
                self.held_excluded.insert(off as u32)
            }
            Some(_) => self.allocate_specific(ip),
            None => false,
        }
    }

    fn is_host(&self, off: usize) -> bool {
        off != 0
            && off != self.size as usize - 1
            && self.base + off as u32 != u32::from(self.config.gateway)
    }

    fn is_usable(&self, off: usize) -> bool {
        let ip = self.base + off as u32;
        self.is_host(off)
            && !self.config.exclusions.iter().any(|(e, l)| {
                let m = mask(*l);
                ip & m == u32::from(*e) & m
            })
    }

    /// Return `ip` to the back of the free FIFO (an excluded one only stops being held).
    /// Releasing a free or foreign address does nothing.
    pub fn release(&mut self, ip: Ipv4Addr) -> bool {
        match self.offset(ip) {
            Some(off) if self.held_excluded.remove(&(off as u32)) => true,
            Some(off) if self.allocated[off] && self.is_usable(off) => {
                self.allocated[off] = false;
                self.in_use -= 1;
                if !self.queued[off] {
                    self.queued[off] = true;
                    self.free.push_back(off as u32);
                }
                true
            }
            _ => false,
        }
    }

    /// Whether no session may take `ip` now: held, or never leasable (excluded, network,
    /// broadcast, gateway).
    pub fn is_allocated(&self, ip: Ipv4Addr) -> bool {
        self.offset(ip).is_some_and(|o| self.allocated[o])
    }

    /// Excluded addresses held by sessions (fixed addresses), outside `usable` and `in_use`.
    pub fn held_excluded(&self) -> usize {
        self.held_excluded.len()
    }

    pub fn in_use(&self) -> u32 {
        self.in_use
    }

    pub fn usable(&self) -> u32 {
        self.usable
    }
}

/// Several pools tried in order.
#[derive(Debug, Clone, Default)]
pub struct Pools {
    pools: Vec<Pool>,
}

impl Pools {
    pub fn new(configs: Vec<PoolConfig>) -> Result<Pools, Vec<PoolError>> {
        let mut pools = Vec::new();
        let mut errors = Vec::new();
        for c in configs {
            match Pool::new(c) {
                Ok(p) => pools.push(p),
                Err(e) => errors.push(e),
            }
        }
        if errors.is_empty() {
            Ok(Pools { pools })
        } else {
            Err(errors)
        }
    }

    /// The previous address if still free, else the oldest free address of the first pool
    /// with one. Returns the pool index with the address.
    pub fn allocate(&mut self, prefer: Option<Ipv4Addr>) -> Option<(usize, Ipv4Addr)> {
        if let Some(ip) = prefer
            && let Some(i) = self.pool_of(ip)
            && self.pools[i].allocate_specific(ip)
        {
            return Some((i, ip));
        }
        self.pools
            .iter_mut()
            .enumerate()
            .find_map(|(i, p)| p.allocate().map(|ip| (i, ip)))
    }

    /// Take exactly `ip` (INIT-REBOOT, a relayed ACK).
    pub fn allocate_specific(&mut self, ip: Ipv4Addr) -> Option<usize> {
        let i = self.pool_of(ip)?;
        self.pools[i].allocate_specific(ip).then_some(i)
    }

    /// Take exactly `ip`, excluded or not ([`Pool::allocate_held`]).
    pub fn allocate_held(&mut self, ip: Ipv4Addr) -> Option<usize> {
        let i = self.pool_of(ip)?;
        self.pools[i].allocate_held(ip).then_some(i)
    }

    /// The previous address if it is of pool `i` and free, else the oldest free one of `i`.
    pub fn allocate_in(&mut self, i: usize, prefer: Option<Ipv4Addr>) -> Option<Ipv4Addr> {
        let pool = self.pools.get_mut(i)?;
        if let Some(ip) = prefer
            && pool.allocate_specific(ip)
        {
            return Some(ip);
        }
        pool.allocate()
    }

    /// The index of the pool named `name`.
    pub fn by_name(&self, name: &str) -> Option<usize> {
        self.pools.iter().position(|p| p.config.name == name)
    }

    pub fn release(&mut self, ip: Ipv4Addr) -> bool {
        self.pool_of(ip).is_some_and(|i| self.pools[i].release(ip))
    }

    pub fn pool_of(&self, ip: Ipv4Addr) -> Option<usize> {
        self.pools.iter().position(|p| p.contains(ip))
    }

    pub fn get(&self, i: usize) -> Option<&Pool> {
        self.pools.get(i)
    }

    pub fn iter(&self) -> impl Iterator<Item = &Pool> {
        self.pools.iter()
    }

    pub fn is_allocated(&self, ip: Ipv4Addr) -> bool {
        self.pool_of(ip)
            .is_some_and(|i| self.pools[i].is_allocated(ip))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::HashSet;

    fn cfg(net: [u8; 4], len: u8) -> PoolConfig {
        let network = Ipv4Addr::from(net);
        PoolConfig {
            name: "p".into(),
            network,
            prefix_len: len,
            gateway: Ipv4Addr::from(u32::from(network) + 1),
            lease_secs: 3600,
            dns: vec![],
            exclusions: vec![],
        }
    }

    #[test]
    fn skips_network_broadcast_gateway_and_exclusions() {
        let mut c = cfg([10, 0, 0, 0], 29);
        c.exclusions = vec![(Ipv4Addr::new(10, 0, 0, 4), 31)];
        let mut p = Pool::new(c).unwrap();
        let got: Vec<_> = std::iter::from_fn(|| p.allocate()).collect();
        assert_eq!(
            got,
            vec![
                Ipv4Addr::new(10, 0, 0, 2),
                Ipv4Addr::new(10, 0, 0, 3),
                Ipv4Addr::new(10, 0, 0, 6)
            ]
        );
        assert_eq!(p.usable(), 3);
        assert!(
            !p.release(Ipv4Addr::new(10, 0, 0, 4)),
            "excluded is never released"
        );
        assert!(!p.allocate_specific(Ipv4Addr::new(10, 0, 0, 1)), "gateway");
    }

    #[test]
    fn released_address_is_reused_last_and_can_be_taken_back() {
        let mut p = Pool::new(cfg([10, 0, 0, 0], 28)).unwrap();
        let a = p.allocate().unwrap();
        let b = p.allocate().unwrap();
        assert!(p.release(a));
        assert_ne!(p.allocate(), Some(a), "a freed address goes to the back");
        assert!(p.allocate_specific(a));
        assert!(!p.allocate_specific(b), "b is taken");
    }

    #[test]
    fn bad_configs_are_all_reported() {
        let mut bad_gw = cfg([10, 0, 0, 0], 24);
        bad_gw.gateway = Ipv4Addr::new(10, 0, 1, 1);
        let mut bad_ex = cfg([10, 0, 0, 0], 24);
        bad_ex.exclusions = vec![(Ipv4Addr::new(10, 9, 0, 0), 24)];
        let errs = Pools::new(vec![bad_gw, bad_ex, cfg([10, 0, 0, 0], 31)]).unwrap_err();
        let said: Vec<String> = errs.iter().map(|e| e.to_string()).collect();
        assert_eq!(
            said,
            [
                "pool p: gateway 10.0.1.1 is not inside 10.0.0.0/24",
                "pool p: exclusion 10.9.0.0/24 is not inside the pool",
                "pool p: prefix length 31 leaves no host addresses (need /8../30)",
            ]
        );
    }

    #[test]
    fn an_excluded_address_is_held_only_when_asked_for_by_name() {
        let mut c = cfg([10, 0, 0, 0], 29);
        c.exclusions = vec![(Ipv4Addr::new(10, 0, 0, 4), 31)];
        let mut p = Pool::new(c).unwrap();
        let fixed = Ipv4Addr::new(10, 0, 0, 5);
        assert!(!p.allocate_specific(fixed), "not by a plain allocation");
        assert!(p.allocate_held(fixed));
        assert!(!p.allocate_held(fixed), "once");
        assert_eq!((p.in_use(), p.held_excluded()), (0, 1));
        assert!(p.release(fixed));
        assert!(!p.release(fixed));
        let got: Vec<_> = std::iter::from_fn(|| p.allocate()).collect();
        assert!(
            !got.contains(&fixed),
            "a released fixed address is not leased: {got:?}"
        );
        assert!(!p.allocate_held(Ipv4Addr::new(10, 0, 0, 1)), "gateway");
        assert!(!p.allocate_held(Ipv4Addr::new(10, 0, 0, 7)), "broadcast");
        assert!(
            !p.allocate_held(Ipv4Addr::new(10, 0, 0, 2)),
            "a leased address"
        );
    }

    #[test]
    fn a_named_pool_prefers_the_previous_address_of_its_own() {
        let mut second = cfg([10, 0, 1, 0], 29);
        second.name = "q".into();
        let mut pools = Pools::new(vec![cfg([10, 0, 0, 0], 29), second]).unwrap();
        assert_eq!(pools.by_name("q"), Some(1));
        assert_eq!(pools.by_name("nope"), None);
        let elsewhere = Ipv4Addr::new(10, 0, 0, 3);
        assert_eq!(
            pools.allocate_in(1, Some(elsewhere)),
            Some(Ipv4Addr::new(10, 0, 1, 2))
        );
        let before = Ipv4Addr::new(10, 0, 1, 5);
        assert_eq!(pools.allocate_in(1, Some(before)), Some(before));
        assert_eq!(pools.allocate_in(7, None), None);
    }

    proptest! {
        /// Any sequence of allocations, specific and held allocations and releases never hands
        /// out an address twice, never a blocked one, and keeps `in_use` and `held_excluded`
        /// equal to the held addresses of each kind, told apart by the model below.
        #[test]
        fn never_twice(ops in proptest::collection::vec((0u8..4, 0u32..64), 0..400)) {
            let mut c = cfg([10, 1, 0, 0], 26);
            c.exclusions = vec![(Ipv4Addr::new(10, 1, 0, 32), 29)];
            let mut p = Pool::new(c).unwrap();
            let at = |n: u32| Ipv4Addr::from(u32::from(Ipv4Addr::new(10, 1, 0, 0)) + n);
            // The model: network .0, gateway .1, broadcast .63 are never taken; .32-.39 are
            // taken only as held addresses.
            let leasable: HashSet<Ipv4Addr> =
                (0..64).filter(|n| ![0, 1, 63].contains(n) && !(32..40).contains(n)).map(at).collect();
            let excluded: HashSet<Ipv4Addr> = (32..40).map(at).collect();
            let mut leased: HashSet<Ipv4Addr> = HashSet::new();
            let mut held_ex: HashSet<Ipv4Addr> = HashSet::new();
            for (op, n) in ops {
                let ip = at(n);
                match op {
                    0 => if let Some(a) = p.allocate() {
                        prop_assert!(leasable.contains(&a), "{} is not leasable", a);
                        prop_assert!(leased.insert(a));
                    },
                    1 => prop_assert_eq!(
                        p.allocate_specific(ip),
                        leasable.contains(&ip) && leased.insert(ip)
                    ),
                    2 => {
                        let model = if excluded.contains(&ip) {
                            held_ex.insert(ip)
                        } else {
                            leasable.contains(&ip) && leased.insert(ip)
                        };
                        prop_assert_eq!(p.allocate_held(ip), model);
                    }
                    _ => prop_assert_eq!(p.release(ip), leased.remove(&ip) || held_ex.remove(&ip)),
                }
                prop_assert_eq!(p.in_use() as usize, leased.len());
                prop_assert_eq!(p.held_excluded(), held_ex.len());
                prop_assert!(p.free.len() <= 64);
            }
            // Exhaust: exactly the rest of the leasable range comes out, each once.
            while let Some(a) = p.allocate() {
                prop_assert!(leasable.contains(&a), "{} is not leasable", a);
                prop_assert!(leased.insert(a));
            }
            prop_assert_eq!(&leased, &leasable);
            prop_assert_eq!(p.usable() as usize, leasable.len());
        }
    }
}
