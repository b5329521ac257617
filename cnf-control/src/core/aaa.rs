//! Local AAA: a subscriber store keyed by MAC and/or option 82 (circuit-id, remote-id), mapping
//! to a plan name and, where a subscriber needs one, a fixed address or a pool (as RADIUS
//! Framed-IP-Address and Framed-Pool do), with bulk import from CSV or JSON.
//!
//! Lookup order: an exact (circuit-id, remote-id) record, then circuit-id alone, then remote-id
//! alone, then the MAC. Each is one B-tree lookup (a store of millions answers in a few dozen
//! key comparisons); ordered maps rather than hash maps so that the store can be listed in
//! pages that resume after a key (`super::subscriber_page`).

use std::collections::BTreeMap;
use std::net::Ipv4Addr;

use serde::{Deserialize, Serialize};

use super::MacAddr;
use super::subscriber_page::RecordKey;

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
    /// Its fixed address: inside a pool, usually in its `exclusions` (never leased otherwise).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ipv4: Option<Ipv4Addr>,
    /// The pool, by name, its address comes from (when not `ipv4`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pool: Option<String>,
}

impl SubscriberRecord {
    /// What is wrong with the record, if anything.
    fn problem(&self) -> Option<&'static str> {
        match (&self.mac, &self.circuit_id, &self.remote_id) {
            (None, None, None) => Some("a record needs a MAC, a circuit-id or a remote-id"),
            (Some(m), _, _) if parse_mac(m).is_none() => Some("bad MAC"),
            _ if self.ipv4.is_some() && self.pool.is_some() => {
                Some("an ipv4 and a pool: give one (the address decides the pool)")
            }
            _ => None,
        }
    }

    fn address(&self) -> AddressChoice {
        match (self.ipv4, &self.pool) {
            (Some(ip), _) => AddressChoice::Fixed(ip),
            (None, Some(pool)) => AddressChoice::Pool(pool.clone()),
            (None, None) => AddressChoice::Any,
        }
    }
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
    /// Known: its plan name (`None` = the default plan) and the address its record asks for.
    Known {
        plan: Option<String>,
        address: AddressChoice,
    },
    Unknown,
}

impl Authorization {
    fn of(r: &SubscriberRecord) -> Authorization {
        Authorization::Known {
            plan: r.plan.clone(),
            address: r.address(),
        }
    }
}

/// Which address the AAA (a RADIUS reply, or a local record) asks a subscriber to have.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum AddressChoice {
    /// Any address of the pools.
    #[default]
    Any,
    /// Exactly this one (RADIUS Framed-IP-Address, a record's `ipv4`): inside a pool,
    /// possibly in an exclusion.
    Fixed(Ipv4Addr),
    /// One of the pool with this name (RADIUS Framed-Pool, a record's `pool`).
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
        /// Termination-Action RADIUS-Request: at the Session-Timeout the session is
        /// authorized again (and goes on if accepted) rather than ended.
        reauthorize: bool,
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

/// A MAC as a number that sorts as its bytes do.
pub fn mac_number(mac: &MacAddr) -> u64 {
    let mut b = [0u8; 8];
    b[2..].copy_from_slice(mac);
    u64::from_be_bytes(b)
}

/// The MAC of a [`mac_number`].
pub fn number_mac(n: u64) -> MacAddr {
    let b = n.to_be_bytes();
    [b[2], b[3], b[4], b[5], b[6], b[7]]
}

/// An option 82 identity as the store keys it: (circuit-id, remote-id).
pub type Opt82 = (Option<Vec<u8>>, Option<Vec<u8>>);

/// The option 82 key of a record's or a request's circuit-id and remote-id.
pub fn opt82_key(circuit_id: Option<&str>, remote_id: Option<&str>) -> Opt82 {
    (
        circuit_id.map(|s| s.as_bytes().to_vec()),
        remote_id.map(|s| s.as_bytes().to_vec()),
    )
}

/// The store.
#[derive(Debug, Clone, Default)]
pub struct SubscriberStore {
    /// Keyed by [`mac_number`]: a B-tree of integers compares keys in one instruction where
    /// byte arrays call a slice comparison (a fifth of the lookup's instructions).
    pub(super) by_mac: BTreeMap<u64, SubscriberRecord>,
    pub(super) by_opt82: BTreeMap<Opt82, SubscriberRecord>,
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
        if let Some(p) = rec.problem() {
            return Err(p.into());
        }
        match RecordKey::of(&rec) {
            Some(RecordKey::Opt82(k)) => {
                self.by_opt82.insert(k, rec);
            }
            Some(RecordKey::Mac(m)) => {
                self.by_mac.insert(mac_number(&m), rec);
            }
            // `problem` refuses a record with neither, or with a bad MAC.
            None => return Err("a record needs a MAC, a circuit-id or a remote-id".into()),
        }
        Ok(())
    }

    /// The record of a MAC (not one keyed by option 82).
    pub fn by_mac(&self, mac: &MacAddr) -> Option<&SubscriberRecord> {
        self.by_mac.get(&mac_number(mac))
    }

    /// Remove by MAC; returns whether one was there.
    pub fn remove_mac(&mut self, mac: &MacAddr) -> bool {
        self.by_mac.remove(&mac_number(mac)).is_some()
    }

    /// The record keyed by exactly this option 82 identity.
    pub fn by_opt82(&self, key: &Opt82) -> Option<&SubscriberRecord> {
        self.by_opt82.get(key)
    }

    /// Remove the record keyed by exactly this option 82 identity; whether one was there.
    pub fn remove_opt82(&mut self, key: &Opt82) -> bool {
        self.by_opt82.remove(key).is_some()
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
                    return Authorization::of(r);
                }
            }
        }
        match self.by_mac.get(&mac_number(&id.mac)) {
            Some(r) => Authorization::of(r),
            None => Authorization::Unknown,
        }
    }

    /// Import `mac,circuit_id,remote_id,plan[,ipv4,pool]` rows (a header row starting with
    /// `mac` is skipped; empty fields are absent). Returns the rows added, or every row's error
    /// (nothing added).
    pub fn import_csv(&mut self, text: &str) -> Result<usize, Vec<AaaError>> {
        let (recs, errors) = parse_csv(text);
        self.import_rows(recs, errors)
    }

    /// Import a JSON array of records.
    pub fn import_json(&mut self, text: &str) -> Result<usize, Vec<AaaError>> {
        self.import_rows(parse_json(text)?, Vec::new())
    }

    /// Import parsed rows, given the errors of the rows that did not parse: every row's error,
    /// and nothing added, or the rows added.
    pub fn import_rows(
        &mut self,
        recs: Vec<(usize, SubscriberRecord)>,
        mut errors: Vec<AaaError>,
    ) -> Result<usize, Vec<AaaError>> {
        // Validate everything first so a bad file adds nothing.
        for (row, r) in &recs {
            if let Some(reason) = r.problem() {
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

/// The records of `mac,circuit_id,remote_id,plan[,ipv4,pool]` rows with their row numbers,
/// and the errors of rows that do not parse (see [`SubscriberStore::import_csv`]).
pub fn parse_csv(text: &str) -> (Vec<(usize, SubscriberRecord)>, Vec<AaaError>) {
    let mut recs = Vec::new();
    let mut errors = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') || (i == 0 && line.starts_with("mac")) {
            continue;
        }
        let f: Vec<&str> = line.split(',').map(str::trim).collect();
        if f.len() != 4 && f.len() != 6 {
            errors.push(AaaError::Row {
                row: i + 1,
                reason: format!("want 4 or 6 fields, got {}", f.len()),
            });
            continue;
        }
        let opt = |s: &str| (!s.is_empty()).then(|| s.to_string());
        let field = |n: usize| f.get(n).copied().and_then(opt);
        let ipv4 = match field(4).map(|a| a.parse::<Ipv4Addr>()) {
            Some(Err(_)) => {
                errors.push(AaaError::Row {
                    row: i + 1,
                    reason: format!("bad ipv4 {:?}", f[4]),
                });
                continue;
            }
            ip => ip.and_then(Result::ok),
        };
        recs.push((
            i + 1,
            SubscriberRecord {
                mac: field(0),
                circuit_id: field(1),
                remote_id: field(2),
                plan: field(3),
                ipv4,
                pool: field(5),
            },
        ));
    }
    (recs, errors)
}

/// The rows of `recs` naming a plan or a pool `cfg` does not have, or asking for an address in
/// none of its pools, each named.
pub fn unresolved(
    recs: &[(usize, SubscriberRecord)],
    cfg: &super::engine::EngineConfig,
) -> Vec<String> {
    let mut out = Vec::new();
    for (row, r) in recs {
        if let Some(p) = r.plan.as_ref().filter(|p| !cfg.plans.contains_key(*p)) {
            out.push(format!("row {row}: unknown plan {p:?}"));
        }
        if let Some(p) = r
            .pool
            .as_ref()
            .filter(|p| !cfg.pools.iter().any(|k| k.name == **p))
        {
            out.push(format!("row {row}: unknown pool {p:?}"));
        }
        if let Some(ip) = r
            .ipv4
            .filter(|ip| !cfg.pools.iter().any(|k| k.contains(*ip)))
        {
            out.push(format!("row {row}: ipv4 {ip} is in no pool"));
        }
    }
    out
}

/// The records of `text`, CSV or (`json`) a JSON array, with their row numbers, and the
/// errors of what did not parse: what [`SubscriberStore::import_rows`] takes.
pub fn parse(text: &str, json: bool) -> (Vec<(usize, SubscriberRecord)>, Vec<AaaError>) {
    if json {
        parse_json(text).map_or_else(|e| (Vec::new(), e), |r| (r, Vec::new()))
    } else {
        parse_csv(text)
    }
}

/// The records of a JSON array with their row numbers (from 1).
pub fn parse_json(text: &str) -> Result<Vec<(usize, SubscriberRecord)>, Vec<AaaError>> {
    let recs: Vec<SubscriberRecord> =
        serde_json::from_str(text).map_err(|e| vec![AaaError::Json(e.to_string())])?;
    Ok(recs
        .into_iter()
        .enumerate()
        .map(|(i, r)| (i + 1, r))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn known(plan: Option<&str>, address: AddressChoice) -> Authorization {
        Authorization::Known {
            plan: plan.map(String::from),
            address,
        }
    }

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
            known(Some("gold"), AddressChoice::Any)
        );
        assert_eq!(
            s.lookup(&id([9; 6], Some("eth0/1:100")), true),
            known(Some("silver"), AddressChoice::Any)
        );
        assert_eq!(
            s.lookup(&id([9; 6], Some("eth0/1:100")), false),
            Authorization::Unknown
        );
        assert_eq!(
            s.lookup(&id([2, 0, 0, 0, 0, 2], None), false),
            known(None, AddressChoice::Any)
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
        let rows: Vec<usize> = errs
            .iter()
            .map(|e| match e {
                AaaError::Row { row, .. } => *row,
                AaaError::Json(_) => 0,
            })
            .collect();
        assert_eq!(
            rows,
            [1, 3, 4],
            "the bad MAC, no identity, two columns: {errs:?}"
        );
        assert!(s.is_empty());
    }

    #[test]
    fn a_record_may_ask_for_an_address_or_a_pool() {
        let mut s = SubscriberStore::default();
        let csv = "mac,circuit_id,remote_id,plan,ipv4,pool\n\
                   02:00:00:00:00:01,,,gold,100.64.0.3,\n\
                   ,eth0/2:7,,,,business\n\
                   02:00:00:00:00:02,,,gold\n";
        assert_eq!(s.import_csv(csv), Ok(3));
        let fixed = AddressChoice::Fixed(Ipv4Addr::new(100, 64, 0, 3));
        assert_eq!(
            s.lookup(&id([2, 0, 0, 0, 0, 1], None), false),
            known(Some("gold"), fixed)
        );
        assert_eq!(
            s.lookup(&id([9; 6], Some("eth0/2:7")), true),
            known(None, AddressChoice::Pool("business".into()))
        );
        assert_eq!(
            s.lookup(&id([2, 0, 0, 0, 0, 2], None), false),
            known(Some("gold"), AddressChoice::Any),
            "4-field rows still import"
        );
        assert_eq!(
            s.import_json(r#"[{"mac":"02:00:00:00:00:09","ipv4":"100.64.0.9"}]"#),
            Ok(1)
        );
        assert_eq!(
            s.lookup(&id([2, 0, 0, 0, 0, 9], None), false),
            known(None, AddressChoice::Fixed(Ipv4Addr::new(100, 64, 0, 9)))
        );
    }

    #[test]
    fn a_bad_address_or_both_an_address_and_a_pool_are_refused_by_row() {
        let mut s = SubscriberStore::default();
        let errs = s
            .import_csv(
                "02:00:00:00:00:01,,,gold,100.64.0.300,\n\
                 02:00:00:00:00:02,,,gold,100.64.0.2,p1\n\
                 02:00:00:00:00:03,,,gold,100.64.0.4\n\
                 02:00:00:00:00:04,,,gold,,p1\n",
            )
            .unwrap_err();
        let rows: Vec<String> = errs.iter().map(|e| e.to_string()).collect();
        assert_eq!(
            rows,
            [
                "row 1: bad ipv4 \"100.64.0.300\"",
                "row 2: an ipv4 and a pool: give one (the address decides the pool)",
                "row 3: want 4 or 6 fields, got 5",
            ]
        );
        assert!(s.is_empty(), "a file with a bad row adds nothing");
        assert!(
            s.import_json(r#"[{"mac":"02:00:00:00:00:09","ipv4":"nope"}]"#)
                .is_err()
        );
        let both = SubscriberRecord {
            mac: Some("02:00:00:00:00:09".into()),
            circuit_id: None,
            remote_id: None,
            plan: None,
            ipv4: Some(Ipv4Addr::new(100, 64, 0, 9)),
            pool: Some("p1".into()),
        };
        assert!(s.add(both).is_err());
        assert!(s.is_empty());
    }

    #[test]
    fn rows_naming_what_the_control_lacks_are_named() {
        let cfg =
            crate::core::test_support::engine_config(super::super::engine::UnknownPolicy::Captive);
        let (recs, errs) = parse_csv(
            "02:00:00:00:00:01,,,gold,100.64.0.9,\n\
             02:00:00:00:00:02,,,platinum,,\n\
             02:00:00:00:00:03,,,,,nope\n\
             02:00:00:00:00:04,,,,10.0.0.9,\n\
             02:00:00:00:00:05,,,,,p\n",
        );
        assert!(errs.is_empty(), "{errs:?}");
        assert_eq!(
            unresolved(&recs, &cfg),
            [
                "row 2: unknown plan \"platinum\"",
                "row 3: unknown pool \"nope\"",
                "row 4: ipv4 10.0.0.9 is in no pool",
            ]
        );
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
