//! IPv4 prefixes (`10.0.0.0/8`) for address pools and walled-garden rules.

use std::fmt;
use std::net::Ipv4Addr;
use std::str::FromStr;

use crate::error::WireError;

/// An IPv4 network prefix. The address is stored with host bits cleared,
/// so two prefixes covering the same range compare equal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Ipv4Cidr {
    network: Ipv4Addr,
    len: u8,
}

impl Ipv4Cidr {
    /// The prefix of length `len` (0..=32) containing `addr`.
    pub fn new(addr: Ipv4Addr, len: u8) -> Result<Ipv4Cidr, WireError> {
        if len > 32 {
            return Err(WireError::BadText("IPv4 prefix length"));
        }
        let network = Ipv4Addr::from(u32::from(addr) & mask(len));
        Ok(Ipv4Cidr { network, len })
    }

    /// The network address (host bits zero).
    #[inline]
    pub const fn network(&self) -> Ipv4Addr {
        self.network
    }

    /// The prefix length.
    #[inline]
    pub const fn prefix_len(&self) -> u8 {
        self.len
    }

    /// The netmask, e.g. 255.255.255.0 for /24.
    #[inline]
    pub fn netmask(&self) -> Ipv4Addr {
        Ipv4Addr::from(mask(self.len))
    }

    /// The directed broadcast address (all host bits set).
    #[inline]
    pub fn broadcast(&self) -> Ipv4Addr {
        Ipv4Addr::from(u32::from(self.network) | !mask(self.len))
    }

    /// True when `addr` lies in this prefix.
    #[inline]
    pub fn contains(&self, addr: Ipv4Addr) -> bool {
        u32::from(addr) & mask(self.len) == u32::from(self.network)
    }

    /// True when `other` lies wholly within this prefix.
    #[inline]
    pub fn contains_cidr(&self, other: &Ipv4Cidr) -> bool {
        other.len >= self.len && self.contains(other.network)
    }
}

#[inline]
fn mask(len: u8) -> u32 {
    // len <= 32 is an invariant of Ipv4Cidr; checked_shl covers len == 0.
    u32::MAX
        .checked_shl(32 - u32::from(len.min(32)))
        .unwrap_or(0)
}

impl fmt::Display for Ipv4Cidr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.network, self.len)
    }
}

impl FromStr for Ipv4Cidr {
    type Err = WireError;

    /// `a.b.c.d/len`; a bare address means /32. Host bits are cleared.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (a, l) = s.split_once('/').unwrap_or((s, "32"));
        let addr = a.parse().map_err(|_| WireError::BadText("IPv4 prefix"))?;
        let len = l
            .parse()
            .map_err(|_| WireError::BadText("IPv4 prefix length"))?;
        Ipv4Cidr::new(addr, len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn contains_and_edges() {
        let c: Ipv4Cidr = "100.64.3.7/22".parse().unwrap();
        assert_eq!(c.to_string(), "100.64.0.0/22");
        assert_eq!(c.netmask(), Ipv4Addr::new(255, 255, 252, 0));
        assert_eq!(c.broadcast(), Ipv4Addr::new(100, 64, 3, 255));
        assert!(c.contains(Ipv4Addr::new(100, 64, 3, 255)));
        assert!(!c.contains(Ipv4Addr::new(100, 64, 4, 0)));
        let all: Ipv4Cidr = "0.0.0.0/0".parse().unwrap();
        assert!(all.contains(Ipv4Addr::new(255, 1, 2, 3)));
        assert!(all.contains_cidr(&c) && !c.contains_cidr(&all));
        let host: Ipv4Cidr = "10.1.1.1".parse().unwrap();
        assert_eq!(host.prefix_len(), 32);
        assert!(host.contains(Ipv4Addr::new(10, 1, 1, 1)));
        assert!(!host.contains(Ipv4Addr::new(10, 1, 1, 2)));
        for bad in ["10.0.0.0/33", "10.0.0/8", "x/8", "10.0.0.0/"] {
            assert!(bad.parse::<Ipv4Cidr>().is_err(), "{bad}");
        }
    }

    proptest! {
        #[test]
        fn text_roundtrip_and_self_containment(a in any::<[u8; 4]>(), len in 0u8..=32) {
            let c = Ipv4Cidr::new(a.into(), len).unwrap();
            prop_assert!(c.contains(a.into()));
            prop_assert!(c.contains(c.broadcast()));
            prop_assert_eq!(c.to_string().parse::<Ipv4Cidr>().unwrap(), c);
        }
    }
}
