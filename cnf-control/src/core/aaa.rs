//! Local AAA: a subscriber store keyed by MAC and/or option 82 (circuit-id, remote-id), mapping
//! to a plan name, with bulk import from CSV or JSON.
//!
//! Lookup order: an exact (circuit-id, remote-id) record, then circuit-id alone, then remote-id
//! alone, then the MAC. Each is one hash lookup, so a store of millions answers in O(1).

use std::net::Ipv4Addr;

use serde::{Deserialize, Serialize};

use super::{FastMap, MacAddr};

/// Errors of one import; every bad row is reported, not only the first.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AaaError {
    #[error("row {row}: {reason}")]
    Row { row: usize, reason: String },
    #[error("JSON: {0}")]
    Json(String),
}

/// One subscriber record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SubscriberRecord {
    /// `aa:bb:cc:dd:ee:ff`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mac: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub circuit_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remote_id: Option<String>,
    /// Plan name; `None` takes the default plan.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan: Option<String>,
}

/// How a subscriber presents itself on a line.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Identity {
    pub mac: MacAddr,
    pub circuit_id: Option<Vec<u8>>,
    pub remote_id: Option<Vec<u8>>,
}

/// Outcome of a local lookup.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Authorization {
    /// Known; plan name (`None` = default plan).
    Known(Option<String>),
    Unknown,
}

/// Which address an external AAA asks a subscriber to have.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum AddressChoice {
    /// Any address of the pools.
    #[default]
    Any,
    /// Exactly this one (RADIUS Framed-IP-Address): inside a pool, possibly in an exclusion.
    Fixed(Ipv4Addr),
    /// One of the pool with this name (RADIUS Framed-Pool).
    Pool(String),
}

/// The answer of an external AAA (RADIUS) for one session's authorization.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AuthOutcome {
    /// Accepted with the plan named by the reply (`None` = the default plan), at most
    /// `session_timeout_secs` of service (RADIUS Session-Timeout) when the reply limits it,
    /// and the address it asks for.
    Accept {
        plan: Option<String>,
        session_timeout_secs: Option<u32>,
        address: AddressChoice,
    },
    /// Rejected: treated as an unknown subscriber (captive or dropped per policy).
    Reject,
    /// No server answered within the retries: also per the unknown-subscriber policy (a BNG
    /// that drops everyone while RADIUS is down strands its subscribers), counted apart.
    Unreachable,
}

pub fn parse_mac(s: &str) -> Option<MacAddr> {
    let parts: Vec<&str> = s.trim().split([':', '-']).collect();
    if parts.len() != 6 {
        return None;
    }
    let mut mac = [0u8; 6];
    for (m, p) in mac.iter_mut().zip(parts) {
        if p.len() != 2 {
            return None;
        }
        *m = u8::from_str_radix(p, 16).ok()?;
    }
    Some(mac)
}

pub fn format_mac(mac: &MacAddr) -> String {
    mac.iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(":")
}

type Opt82 = (Option<Vec<u8>>, Option<Vec<u8>>);

/// The store.
#[derive(Debug, Clone, Default)]
pub struct SubscriberStore {
    by_mac: FastMap<MacAddr, SubscriberRecord>,
    by_opt82: FastMap<Opt82, SubscriberRecord>,
}

impl SubscriberStore {
    pub fn len(&self) -> usize {
        self.by_mac.len() + self.by_opt82.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Add or replace one record.
    pub fn add(&mut self, rec: SubscriberRecord) -> Result<(), String> {
        let cid = rec.circuit_id.as_ref().map(|s| s.as_bytes().to_vec());
        let rid = rec.remote_id.as_ref().map(|s| s.as_bytes().to_vec());
        match (&rec.mac, cid.is_some() || rid.is_some()) {
            (_, true) => {
                self.by_opt82.insert((cid, rid), rec);
            }
            (Some(m), false) => {
                let mac = parse_mac(m).ok_or_else(|| format!("bad MAC {m:?}"))?;
                self.by_mac.insert(mac, rec);
            }
            (None, false) => return Err("a record needs a MAC, a circuit-id or a remote-id".into()),
        }
        Ok(())
    }

    /// Remove by MAC; returns whether one was there.
    pub fn remove_mac(&mut self, mac: &MacAddr) -> bool {
        self.by_mac.remove(mac).is_some()
    }

    pub fn lookup(&self, id: &Identity, use_opt82: bool) -> Authorization {
        if use_opt82 && (id.circuit_id.is_some() || id.remote_id.is_some()) {
            let keys = [
                (id.circuit_id.clone(), id.remote_id.clone()),
                (id.circuit_id.clone(), None),
                (None, id.remote_id.clone()),
            ];
            for k in keys {
                if let Some(r) = self.by_opt82.get(&k) {
                    return Authorization::Known(r.plan.clone());
                }
            }
        }
        match self.by_mac.get(&id.mac) {
            Some(r) => Authorization::Known(r.plan.clone()),
            None => Authorization::Unknown,
        }
    }

    /// Import `mac,circuit_id,remote_id,plan` rows (a header row starting with `mac` is skipped;
    /// empty fields are absent). Returns the rows added, or every row's error (nothing added).
    pub fn import_csv(&mut self, text: &str) -> Result<usize, Vec<AaaError>> {
        let mut recs = Vec::new();
        let mut errors = Vec::new();
        for (i, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') || (i == 0 && line.starts_with("mac")) {
                continue;
            }
            let f: Vec<&str> = line.split(',').map(str::trim).collect();
            if f.len() != 4 {
                errors.push(AaaError::Row {
                    row: i + 1,
                    reason: format!("want 4 fields, got {}", f.len()),
                });
                continue;
            }
            let opt = |s: &str| (!s.is_empty()).then(|| s.to_string());
            recs.push((
                i + 1,
                SubscriberRecord {
                    mac: opt(f[0]),
                    circuit_id: opt(f[1]),
                    remote_id: opt(f[2]),
                    plan: opt(f[3]),
                },
            ));
        }
        self.add_all(recs, errors)
    }

    /// Import a JSON array of records.
    pub fn import_json(&mut self, text: &str) -> Result<usize, Vec<AaaError>> {
        let recs: Vec<SubscriberRecord> =
            serde_json::from_str(text).map_err(|e| vec![AaaError::Json(e.to_string())])?;
        let recs = recs
            .into_iter()
            .enumerate()
            .map(|(i, r)| (i + 1, r))
            .collect();
        self.add_all(recs, Vec::new())
    }

    fn add_all(
        &mut self,
        recs: Vec<(usize, SubscriberRecord)>,
        mut errors: Vec<AaaError>,
    ) -> Result<usize, Vec<AaaError>> {
        // Validate everything first so a bad file adds nothing.
        for (row, r) in &recs {
            let reason = match (&r.mac, &r.circuit_id, &r.remote_id) {
                (None, None, None) => Some("a record needs a MAC, a circuit-id or a remote-id"),
                (Some(m), _, _) if parse_mac(m).is_none() => Some("bad MAC"),
                _ => None,
            };
            if let Some(reason) = reason {
                errors.push(AaaError::Row {
                    row: *row,
                    reason: reason.into(),
                });
            }
        }
        if !errors.is_empty() {
            errors.sort_by_key(|e| match e {
                AaaError::Row { row, .. } => *row,
                AaaError::Json(_) => 0,
            });
            return Err(errors);
        }
        let n = recs.len();
        for (_, r) in recs {
            // Validated above.
            let _ = self.add(r);
        }
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(mac: MacAddr, cid: Option<&str>) -> Identity {
        Identity {
            mac,
            circuit_id: cid.map(|c| c.as_bytes().to_vec()),
            remote_id: None,
        }
    }

    #[test]
    fn csv_import_and_lookup() {
        let mut s = SubscriberStore::default();
        let n = s
            .import_csv("mac,circuit_id,remote_id,plan\n02:00:00:00:00:01,,,gold\n,eth0/1:100,,silver\n02:00:00:00:00:02,,,\n")
            .unwrap();
        assert_eq!(n, 3);
        let m1 = [2, 0, 0, 0, 0, 1];
        assert_eq!(
            s.lookup(&id(m1, None), false),
            Authorization::Known(Some("gold".into()))
        );
        assert_eq!(
            s.lookup(&id([9; 6], Some("eth0/1:100")), true),
            Authorization::Known(Some("silver".into()))
        );
        assert_eq!(
            s.lookup(&id([9; 6], Some("eth0/1:100")), false),
            Authorization::Unknown
        );
        assert_eq!(
            s.lookup(&id([2, 0, 0, 0, 0, 2], None), false),
            Authorization::Known(None)
        );
        assert!(s.remove_mac(&m1));
        assert_eq!(s.lookup(&id(m1, None), false), Authorization::Unknown);
    }

    #[test]
    fn every_bad_row_is_reported_and_nothing_added() {
        let mut s = SubscriberStore::default();
        let errs = s
            .import_csv("zz:00:00:00:00:01,,,gold\n02:00:00:00:00:01,,,\n,,,\nonly,two\n")
            .unwrap_err();
        assert_eq!(errs.len(), 3, "{errs:?}");
        assert!(s.is_empty());
    }

    #[test]
    fn json_import() {
        let mut s = SubscriberStore::default();
        assert_eq!(
            s.import_json(r#"[{"mac":"02:00:00:00:00:05","plan":"gold"},{"remoteId":"x"}]"#)
                .map_err(|e| e.len()),
            Err(1),
            "unknown field remoteId is rejected"
        );
        assert_eq!(
            s.import_json(r#"[{"mac":"02:00:00:00:00:05","plan":"gold"},{"remote_id":"x"}]"#),
            Ok(2)
        );
    }

    #[test]
    fn hundred_thousand_rows_import_quickly() {
        let mut text = String::from("mac,circuit_id,remote_id,plan\n");
        for i in 0..100_000u32 {
            let b = i.to_be_bytes();
            text.push_str(&format!(
                "02:00:{:02x}:{:02x}:{:02x}:{:02x},,,gold\n",
                b[0], b[1], b[2], b[3]
            ));
        }
        let t = std::time::Instant::now();
        let mut s = SubscriberStore::default();
        assert_eq!(s.import_csv(&text), Ok(100_000));
        assert!(t.elapsed().as_secs() < 10, "{:?}", t.elapsed());
    }
}
