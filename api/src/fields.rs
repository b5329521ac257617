//! Conversions of the contract's scalar encodings, each failing with the field it read.

use std::net::Ipv4Addr;

use crate::ApiError;

/// Highest VLAN id a tag may carry (IEEE 802.1Q reserves 4095).
pub const MAX_VLAN_ID: u32 = 4094;

/// Most subscriber gateway addresses one access configuration carries: a dataplane's access
/// table holds this many and refuses a larger configuration whole.
pub const MAX_GATEWAYS: usize = 256;

/// Most walled-garden rules one access configuration carries (as [`MAX_GATEWAYS`]).
pub const MAX_GARDEN_RULES: usize = 256;

/// A MAC address from its 6-byte encoding.
pub fn mac(field: &str, bytes: &[u8]) -> Result<[u8; 6], ApiError> {
    <[u8; 6]>::try_from(bytes)
        .map_err(|_| ApiError::invalid(field, format!("MAC must be 6 bytes, got {}", bytes.len())))
}

/// A VLAN id: 0 (untagged) or 1..=4094.
pub fn vlan(field: &str, id: u32) -> Result<u16, ApiError> {
    if id > MAX_VLAN_ID {
        return Err(ApiError::invalid(
            field,
            format!("VLAN id {id} out of range 0..={MAX_VLAN_ID}"),
        ));
    }
    u16::try_from(id).map_err(|_| ApiError::invalid(field, "VLAN id does not fit 12 bits"))
}

/// A unicast host address a subscriber may hold.
pub fn host_ipv4(field: &str, raw: u32) -> Result<Ipv4Addr, ApiError> {
    let ip = Ipv4Addr::from(raw);
    if ip.is_unspecified() || ip.is_broadcast() || ip.is_multicast() || ip.is_loopback() {
        return Err(ApiError::invalid(
            field,
            format!("{ip} is not a unicast host address"),
        ));
    }
    Ok(ip)
}

/// A prefix length of an IPv4 prefix.
pub fn prefix_len(field: &str, len: u32) -> Result<u8, ApiError> {
    u8::try_from(len)
        .ok()
        .filter(|l| *l <= 32)
        .ok_or_else(|| ApiError::invalid(field, format!("prefix length {len} > 32")))
}

/// An IPv4 prefix whose host bits are zero.
pub fn ipv4_prefix(field: &str, raw: u32, len: u32) -> Result<(Ipv4Addr, u8), ApiError> {
    let len = prefix_len(&format!("{field}.prefix_len"), len)?;
    let mask = if len == 0 { 0 } else { u32::MAX << (32 - len) };
    if raw & !mask != 0 {
        return Err(ApiError::invalid(
            format!("{field}.address"),
            format!("{}/{len} has host bits set", Ipv4Addr::from(raw)),
        ));
    }
    Ok((Ipv4Addr::from(raw), len))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vlan_bounds() {
        assert_eq!(vlan("v", 0), Ok(0));
        assert_eq!(vlan("v", 4094), Ok(4094));
        let err = vlan("sessions[0].outer_vlan", 4096).unwrap_err();
        assert!(err.to_string().contains("sessions[0].outer_vlan"));
        assert!(vlan("v", 4095).is_err());
    }

    #[test]
    fn mac_length() {
        assert_eq!(mac("m", &[1, 2, 3, 4, 5, 6]), Ok([1, 2, 3, 4, 5, 6]));
        assert!(mac("m", &[1, 2, 3]).is_err());
    }

    #[test]
    fn host_addresses() {
        assert!(host_ipv4("ip", u32::from(Ipv4Addr::new(100, 64, 0, 10))).is_ok());
        assert!(host_ipv4("ip", 0).is_err());
        assert!(host_ipv4("ip", u32::MAX).is_err());
        assert!(host_ipv4("ip", u32::from(Ipv4Addr::new(224, 0, 0, 1))).is_err());
    }

    #[test]
    fn prefixes() {
        let p = u32::from(Ipv4Addr::new(10, 1, 0, 0));
        assert!(ipv4_prefix("a", p, 16).is_ok());
        assert!(ipv4_prefix("a", p, 8).is_err());
        assert!(ipv4_prefix("a", p, 33).is_err());
        assert!(ipv4_prefix("a", 0, 0).is_ok());
    }
}
