//! Adapters at the edge: protobuf messages of `kbng.dataplane.v1` to validated domain values
//! (and back), each failure naming the field it read (`sessions[3].outer_vlan`).

use kbng_api::ApiError;
use kbng_api::fields;
use kbng_api::v1 as pb;

use crate::meter::{SrTcmProfile, TrTcmProfile};
use crate::nodes::walled_garden::WalledGardenRule;
use crate::tables::{ColourAction, DirPolicy, MeterProfile, SessionKey};

/// A session as the control plane describes it, validated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SessionSpec {
    /// Non-zero id.
    pub id: u64,
    /// Upstream key.
    pub key: SessionKey,
    /// Address (host order).
    pub ipv4: u32,
    /// Plan id (0 = no plan: unmetered).
    pub plan_id: u32,
    /// Captive.
    pub captive: bool,
}

/// Validate one session of a batch. Errors name the field alone (`outer_vlan`); the caller
/// places it in the batch with [`in_item`] (`sessions[3].outer_vlan`), so that a valid session,
/// the common case, formats no field path.
pub fn session(s: &pb::Session, access_ports: u32) -> Result<SessionSpec, ApiError> {
    if s.session_id == 0 {
        return Err(ApiError::invalid("session_id", "must be non-zero"));
    }
    if s.access_port >= access_ports {
        return Err(ApiError::invalid(
            "access_port",
            format!(
                "no access port {} (this dataplane has {access_ports})",
                s.access_port
            ),
        ));
    }
    let outer_vid = fields::vlan("outer_vlan", s.outer_vlan)?;
    let inner_vid = fields::vlan("inner_vlan", s.inner_vlan)?;
    if outer_vid == 0 && inner_vid != 0 {
        return Err(ApiError::invalid(
            "inner_vlan",
            "an inner VLAN needs an outer VLAN",
        ));
    }
    let mac = fields::mac("mac", &s.mac)?;
    if mac[0] & 1 != 0 || mac == [0; 6] {
        return Err(ApiError::invalid("mac", "must be a unicast MAC"));
    }
    let ip = fields::host_ipv4("ipv4", s.ipv4)?;
    Ok(SessionSpec {
        id: s.session_id,
        key: SessionKey {
            port: s.access_port as u8,
            outer_vid,
            inner_vid,
            mac,
        },
        ipv4: u32::from(ip),
        plan_id: s.plan_id,
        captive: s.captive,
    })
}

/// `e` with its field placed under `item` (`mac` under `sessions[3]`: `sessions[3].mac`).
pub fn in_item(item: &str, e: ApiError) -> ApiError {
    match e {
        ApiError::InvalidArgument { field, reason } => ApiError::InvalidArgument {
            field: format!("{item}.{field}"),
            reason,
        },
        other => other,
    }
}

/// Back to the wire form.
pub fn session_to_proto(s: &SessionSpec) -> pb::Session {
    pb::Session {
        session_id: s.id,
        access_port: u32::from(s.key.port),
        outer_vlan: u32::from(s.key.outer_vid),
        inner_vlan: u32::from(s.key.inner_vid),
        mac: s.key.mac.to_vec(),
        ipv4: s.ipv4,
        plan_id: s.plan_id,
        captive: s.captive,
    }
}

fn colour(
    at: &str,
    c: Option<&pb::ColourPolicy>,
    default: ColourAction,
) -> Result<ColourAction, ApiError> {
    let Some(c) = c else {
        return Ok(default);
    };
    match pb::ColourAction::try_from(c.action) {
        Ok(pb::ColourAction::Unspecified) => Ok(default),
        Ok(pb::ColourAction::Transmit) => Ok(ColourAction::Transmit),
        Ok(pb::ColourAction::Drop) => Ok(ColourAction::Drop),
        Ok(pb::ColourAction::RemarkDscp) => {
            if c.dscp > 63 {
                Err(ApiError::invalid(
                    format!("{at}.dscp"),
                    format!("{} > 63", c.dscp),
                ))
            } else {
                Ok(ColourAction::Remark(c.dscp as u8))
            }
        }
        Err(_) => Err(ApiError::invalid(
            format!("{at}.action"),
            format!("unknown action {}", c.action),
        )),
    }
}

/// Validate one direction's meter on a `hz` TSC clock. No meter: everything green, transmit.
/// Unspecified colour actions default to transmit (green, yellow) and drop (red).
pub fn meter(at: &str, m: Option<&pb::Meter>, hz: u64) -> Result<DirPolicy, ApiError> {
    let Some(m) = m else {
        return Ok(DirPolicy::default());
    };
    let actions = [
        colour(
            &format!("{at}.green"),
            m.green.as_ref(),
            ColourAction::Transmit,
        )?,
        colour(
            &format!("{at}.yellow"),
            m.yellow.as_ref(),
            ColourAction::Transmit,
        )?,
        colour(&format!("{at}.red"), m.red.as_ref(), ColourAction::Drop)?,
    ];
    // Rates are in bits per second on the wire and bytes per second in the meter.
    let cir = m.cir_bps / 8;
    let pir = m.pir_bps / 8;
    let bad = |field: &str, e: crate::meter::MeterError| {
        ApiError::invalid(format!("{at}.{field}"), e.to_string())
    };
    let profile = match pb::MeterMode::try_from(m.mode) {
        Ok(pb::MeterMode::Srtcm) => MeterProfile::Sr(
            SrTcmProfile::new(hz, cir, m.cbs_bytes, m.pbs_bytes).map_err(|e| match e {
                crate::meter::MeterError::ZeroCir => bad("cir_bps", e),
                crate::meter::MeterError::BurstTooLarge("ebs") => bad("pbs_bytes", e),
                _ => bad("cbs_bytes", e),
            })?,
        ),
        Ok(pb::MeterMode::Trtcm) => MeterProfile::Tr(
            TrTcmProfile::new(hz, cir, pir, m.cbs_bytes, m.pbs_bytes).map_err(|e| match e {
                crate::meter::MeterError::ZeroCir => bad("cir_bps", e),
                crate::meter::MeterError::PirBelowCir { .. } => bad("pir_bps", e),
                crate::meter::MeterError::ZeroBurst("pbs")
                | crate::meter::MeterError::BurstTooLarge("pbs") => bad("pbs_bytes", e),
                _ => bad("cbs_bytes", e),
            })?,
        ),
        _ => {
            return Err(ApiError::invalid(
                format!("{at}.mode"),
                format!("meter mode {} is not SRTCM or TRTCM", m.mode),
            ));
        }
    };
    Ok(DirPolicy {
        meter: profile,
        actions,
    })
}

/// Validate the access configuration into gateway addresses, rules and the redirect flag.
pub fn access(
    c: &pb::AccessConfig,
    max_gateways: usize,
    max_rules: usize,
) -> Result<(Vec<u32>, Vec<WalledGardenRule>, bool), ApiError> {
    if c.gateways.len() > max_gateways {
        return Err(ApiError::invalid(
            "gateways",
            format!("{} gateways, at most {max_gateways}", c.gateways.len()),
        ));
    }
    let mut gws = Vec::with_capacity(c.gateways.len());
    for (i, g) in c.gateways.iter().enumerate() {
        let ip = fields::host_ipv4(&format!("gateways[{i}].address"), g.address)?;
        fields::prefix_len(&format!("gateways[{i}].prefix_len"), g.prefix_len)?;
        gws.push(u32::from(ip));
    }
    let wg = c.walled_garden.clone().unwrap_or_default();
    if wg.allow.len() > max_rules {
        return Err(ApiError::invalid(
            "walled_garden.allow",
            format!("{} rules, at most {max_rules}", wg.allow.len()),
        ));
    }
    let mut rules = Vec::with_capacity(wg.allow.len());
    for (i, r) in wg.allow.iter().enumerate() {
        let at = format!("walled_garden.allow[{i}]");
        let p = r
            .prefix
            .as_ref()
            .ok_or_else(|| ApiError::invalid(format!("{at}.prefix"), "missing"))?;
        let (net, len) = fields::ipv4_prefix(&format!("{at}.prefix"), p.address, p.prefix_len)?;
        let proto = u8::try_from(r.protocol).map_err(|_| {
            ApiError::invalid(format!("{at}.protocol"), format!("{} > 255", r.protocol))
        })?;
        let port = u16::try_from(r.port)
            .map_err(|_| ApiError::invalid(format!("{at}.port"), format!("{} > 65535", r.port)))?;
        rules.push(WalledGardenRule::new(u32::from(net), len, proto, port));
    }
    Ok((gws, rules, wg.redirect_http))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn good() -> pb::Session {
        pb::Session {
            session_id: 7,
            access_port: 0,
            outer_vlan: 100,
            inner_vlan: 200,
            mac: vec![2, 0, 0, 0, 0, 1],
            ipv4: 0x6440_000a,
            plan_id: 1,
            captive: false,
        }
    }

    #[test]
    fn session_fields_are_named() {
        assert!(session(&good(), 1).is_ok());
        type Mutation = fn(&mut pb::Session);
        let cases: [(Mutation, &str); 6] = [
            (|s| s.outer_vlan = 4095, "s.outer_vlan"),
            (|s| s.inner_vlan = 5000, "s.inner_vlan"),
            (|s| s.mac = vec![1, 2], "s.mac"),
            (|s| s.ipv4 = 0, "s.ipv4"),
            (|s| s.session_id = 0, "s.session_id"),
            (|s| s.access_port = 3, "s.access_port"),
        ];
        for (f, field) in cases {
            let mut s = good();
            f(&mut s);
            let e = in_item("s", session(&s, 1).unwrap_err());
            assert!(e.to_string().contains(field), "{e} should name {field}");
            assert_eq!(e.code(), tonic::Code::InvalidArgument);
        }
        let round = session_to_proto(&session(&good(), 1).unwrap());
        assert_eq!(round, good());
    }

    #[test]
    fn meters_validate() {
        let m = pb::Meter {
            mode: pb::MeterMode::Trtcm as i32,
            cir_bps: 8_000_000,
            pir_bps: 4_000_000,
            cbs_bytes: 1000,
            pbs_bytes: 1000,
            ..Default::default()
        };
        let e = meter("plans[0].upstream", Some(&m), 1_000_000_000).unwrap_err();
        assert!(e.to_string().contains("plans[0].upstream.pir_bps"));
        let ok = pb::Meter {
            pir_bps: 16_000_000,
            ..m
        };
        let p = meter("u", Some(&ok), 1_000_000_000).unwrap();
        assert_eq!(
            p.actions,
            [
                ColourAction::Transmit,
                ColourAction::Transmit,
                ColourAction::Drop
            ]
        );
        let bad_mode = pb::Meter { mode: 0, ..ok };
        assert!(
            meter("u", Some(&bad_mode), 1)
                .unwrap_err()
                .to_string()
                .contains("u.mode")
        );
    }

    #[test]
    fn bad_prefix_is_named() {
        let c = pb::AccessConfig {
            gateways: vec![],
            walled_garden: Some(pb::WalledGarden {
                allow: vec![pb::GardenRule {
                    prefix: Some(pb::Ipv4Prefix {
                        address: 0xc000_0201,
                        prefix_len: 24,
                    }),
                    protocol: 6,
                    port: 80,
                }],
                redirect_http: true,
            }),
        };
        let e = access(&c, 4, 4).unwrap_err();
        assert!(
            e.to_string()
                .contains("walled_garden.allow[0].prefix.address"),
            "{e}"
        );
    }
}
