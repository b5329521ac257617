//! Access-side configuration of one worker: the subscriber gateway addresses (answered by
//! proxy ARP) and the walled garden. Fixed capacity; replaced as a whole by a staged copy so a
//! worker never sees half a configuration (the control thread sends begin, items, commit).

use arrayvec::ArrayVec;

use crate::nodes::walled_garden::WalledGardenRule;

/// The contract's limits, which this table's fixed capacity is.
pub use kbng_api::fields::{MAX_GARDEN_RULES, MAX_GATEWAYS};

/// Gateways and walled garden.
#[derive(Debug, Clone, Default)]
pub struct AccessTable {
    gateways: ArrayVec<u32, MAX_GATEWAYS>,
    rules: ArrayVec<WalledGardenRule, MAX_GARDEN_RULES>,
    redirect_http: bool,
}

impl AccessTable {
    /// Empty the table.
    pub fn clear(&mut self) {
        self.gateways.clear();
        self.rules.clear();
        self.redirect_http = false;
    }
    /// Add a gateway address (host order); ignored when full (control validates the count).
    pub fn add_gateway(&mut self, ip: u32) {
        if let Err(e) = self.gateways.try_push(ip) {
            let _ = e;
        }
        self.gateways.sort_unstable();
    }
    /// Add a walled-garden rule; ignored when full (control validates the count).
    pub fn add_rule(&mut self, r: WalledGardenRule) {
        if let Err(e) = self.rules.try_push(r) {
            let _ = e;
        }
    }
    /// Whether captive HTTP is punted for the portal redirect.
    pub fn set_redirect_http(&mut self, on: bool) {
        self.redirect_http = on;
    }
    /// Is `ip` (host order) a gateway address?
    #[inline]
    pub fn is_gateway(&self, ip: u32) -> bool {
        self.gateways.binary_search(&ip).is_ok()
    }
    /// The gateway of `ip`'s subnet: the one sharing the longest prefix with it, which is the
    /// right one whenever the gateways' subnets are disjoint (a gateway outside `ip`'s subnet
    /// shares fewer bits with it than that subnet's own gateway). Off the fast path (ICMP
    /// errors), so a scan.
    pub fn gateway_for(&self, ip: u32) -> Option<u32> {
        self.gateways
            .iter()
            .copied()
            .max_by_key(|g| (g ^ ip).leading_zeros())
    }
    /// The rules.
    #[inline]
    pub fn rules(&self) -> &[WalledGardenRule] {
        &self.rules
    }
    /// Punt captive HTTP?
    #[inline]
    pub fn redirect_http(&self) -> bool {
        self.redirect_http
    }
}
