//! Changes made to the local subscriber store through the API, kept in the session store so
//! that a restart does not forget them. The subscribers file is imported at every start; the
//! kept changes are applied over it, each key holding its latest change: an added or replaced
//! record, or the removal of a MAC's record (kept as such, so that a row of the file removed
//! through the API stays removed). While the control runs, the same changes are laid over the
//! file again whenever it changes ([`Overlay`], `crate::subscribers_file`).

use std::collections::BTreeMap;

use crate::core::MacAddr;
use crate::core::aaa::{Opt82, SubscriberRecord, SubscriberStore};
use crate::core::subscriber_page::RecordKey;

/// Apply kept `changes` over `subs` (loaded from the file); returns what could not be applied.
pub fn apply(
    changes: impl IntoIterator<Item = SubscriberChange>,
    subs: &mut SubscriberStore,
) -> Vec<String> {
    let mut problems = Vec::new();
    for change in changes {
        match change {
            SubscriberChange::Added(r) => {
                if let Err(e) = subs.add(r) {
                    problems.push(format!("a kept record: {e}"));
                }
            }
            SubscriberChange::Removed(k) => {
                subs.remove(&k);
            }
        }
    }
    problems
}

/// The API's changes in force, one per key: what a reread file must not undo. Only the keys
/// are held, each with whether its latest change added a record: that record is the one the
/// store in force holds under the key, and is read from there when a reread file is laid
/// under the changes, so that an import of many records through the API is not held twice.
#[derive(Debug, Default)]
pub struct Overlay(BTreeMap<RecordKey, bool>);

impl Overlay {
    pub fn new(changes: impl IntoIterator<Item = SubscriberChange>) -> Overlay {
        let mut o = Overlay::default();
        for c in changes {
            o.note(c);
        }
        o
    }

    /// A change made through the API (one the store would refuse is not kept there either).
    pub fn note(&mut self, change: SubscriberChange) {
        let (key, added) = match change {
            SubscriberChange::Added(r) => match RecordKey::of(&r) {
                Some(k) => (k, true),
                None => return,
            },
            SubscriberChange::Removed(k) => (k, false),
        };
        self.0.insert(key, added);
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Lays the changes over `subs` (a file just read), the records added taken from
    /// `in_force` (the store until now); what could not be applied.
    pub fn apply_to(&self, in_force: &SubscriberStore, subs: &mut SubscriberStore) -> Vec<String> {
        let mut problems = Vec::new();
        for (key, &added) in &self.0 {
            if !added {
                subs.remove(key);
                continue;
            }
            match in_force.get(key) {
                Some(r) => {
                    if let Err(e) = subs.add(r.clone()) {
                        problems.push(format!("a kept record: {e}"));
                    }
                }
                None => problems.push(format!(
                    "a record added through the API ({}) is not in the store in force",
                    key.cursor()
                )),
            }
        }
        problems
    }
}

/// One change to the subscriber store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SubscriberChange {
    Added(SubscriberRecord),
    /// The record filed under this key removed.
    Removed(RecordKey),
}

const ADDED: u8 = b'+';
/// A MAC's record removed (6 bytes follow).
const REMOVED: u8 = b'-';
/// An option 82 record removed (its key's cursor follows).
const REMOVED_OPT82: u8 = b'/';

impl SubscriberChange {
    /// What the record is looked up by: its option 82 identity when it has one, else its MAC
    /// (as the store keys it). `None` for a record the store would refuse.
    pub fn key(&self) -> Option<Vec<u8>> {
        let of_record;
        let k = match self {
            SubscriberChange::Removed(k) => k,
            SubscriberChange::Added(r) => {
                of_record = RecordKey::of(r)?;
                &of_record
            }
        };
        match k {
            RecordKey::Mac(mac) => Some(mac_key(mac)),
            RecordKey::Opt82(k) => opt82_store_key(k),
        }
    }

    pub fn encode(&self) -> Vec<u8> {
        match self {
            SubscriberChange::Added(r) => {
                let mut v = vec![ADDED];
                // A record of strings and an address always serialises.
                v.extend(serde_json::to_vec(r).unwrap_or_default());
                v
            }
            SubscriberChange::Removed(RecordKey::Mac(mac)) => {
                let mut v = vec![REMOVED];
                v.extend_from_slice(mac);
                v
            }
            SubscriberChange::Removed(k @ RecordKey::Opt82(_)) => {
                let mut v = vec![REMOVED_OPT82];
                v.extend_from_slice(k.cursor().as_bytes());
                v
            }
        }
    }

    pub fn decode(v: &[u8]) -> Result<SubscriberChange, String> {
        match v.split_first() {
            Some((&ADDED, json)) => serde_json::from_slice(json)
                .map(SubscriberChange::Added)
                .map_err(|e| format!("record: {e}")),
            Some((&REMOVED, mac)) => <[u8; 6]>::try_from(mac)
                .map(|m| SubscriberChange::Removed(RecordKey::Mac(m)))
                .map_err(|_| format!("removal of a {}-byte MAC", mac.len())),
            Some((&REMOVED_OPT82, cursor)) => std::str::from_utf8(cursor)
                .ok()
                .and_then(RecordKey::from_cursor)
                .filter(|k| matches!(k, RecordKey::Opt82(_)))
                .map(SubscriberChange::Removed)
                .ok_or_else(|| "removal of a damaged option 82 key".to_string()),
            _ => Err("neither an addition nor a removal".into()),
        }
    }
}

fn opt82_store_key((cid, rid): &Opt82) -> Option<Vec<u8>> {
    let mut k = vec![b'o'];
    for part in [cid, rid] {
        k.push(u8::from(part.is_some()));
        let bytes = part.as_deref().unwrap_or_default();
        k.extend_from_slice(&u32::try_from(bytes.len()).ok()?.to_le_bytes());
        k.extend_from_slice(bytes);
    }
    Some(k)
}

fn mac_key(mac: &MacAddr) -> Vec<u8> {
    let mut k = vec![b'm'];
    k.extend_from_slice(mac);
    k
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::aaa::opt82_key;

    fn record(mac: Option<&str>, cid: Option<&str>) -> SubscriberRecord {
        SubscriberRecord {
            mac: mac.map(String::from),
            circuit_id: cid.map(String::from),
            remote_id: None,
            plan: Some("gold".into()),
            ipv4: Some("100.64.0.9".parse().unwrap()),
            pool: None,
        }
    }

    #[test]
    fn changes_round_trip_and_a_removal_shares_its_records_key() {
        let added = SubscriberChange::Added(record(Some("02:00:00:00:00:0A"), None));
        let removed = SubscriberChange::Removed(RecordKey::Mac([2, 0, 0, 0, 0, 0x0a]));
        assert_eq!(added.key(), removed.key(), "written either way, one MAC");
        for c in [&added, &removed] {
            assert_eq!(SubscriberChange::decode(&c.encode()).as_ref(), Ok(c));
        }
        let by_cid = SubscriberChange::Added(record(Some("02:00:00:00:00:0a"), Some("eth0/1")));
        assert_ne!(by_cid.key(), added.key(), "keyed by its option 82 identity");
        let other = SubscriberChange::Added(record(None, Some("eth0/2")));
        assert_ne!(by_cid.key(), other.key());
        let by_cid_gone =
            SubscriberChange::Removed(RecordKey::Opt82(opt82_key(Some("eth0/1"), None)));
        assert_eq!(
            by_cid_gone.key(),
            by_cid.key(),
            "an option 82 removal, its record's key"
        );
        assert_eq!(
            SubscriberChange::decode(&by_cid_gone.encode()).as_ref(),
            Ok(&by_cid_gone)
        );
        assert_eq!(
            SubscriberChange::Added(record(Some("zz"), None)).key(),
            None
        );
    }

    #[test]
    fn kept_changes_apply_over_the_file() {
        let mut subs = SubscriberStore::default();
        subs.import_csv("02:00:00:00:00:01,,,gold\n02:00:00:00:00:02,,,gold\n")
            .unwrap();
        let changes = vec![
            SubscriberChange::Removed(RecordKey::Mac([2, 0, 0, 0, 0, 1])),
            SubscriberChange::Added(record(Some("02:00:00:00:00:03"), None)),
        ];
        assert!(apply(changes, &mut subs).is_empty());
        assert!(
            !subs.remove_mac(&[2, 0, 0, 0, 0, 1]),
            "removed through the API"
        );
        assert!(subs.remove_mac(&[2, 0, 0, 0, 0, 2]), "the file's");
        assert!(
            subs.remove_mac(&[2, 0, 0, 0, 0, 3]),
            "added through the API"
        );
    }

    #[test]
    fn the_overlay_keeps_each_keys_latest_change_for_every_reread_of_the_file() {
        let mut o = Overlay::new(vec![SubscriberChange::Removed(RecordKey::Mac([
            2, 0, 0, 0, 0, 1,
        ]))]);
        o.note(SubscriberChange::Added(record(
            Some("02:00:00:00:00:01"),
            None,
        )));
        o.note(SubscriberChange::Removed(RecordKey::Mac([
            2, 0, 0, 0, 0, 2,
        ])));
        o.note(SubscriberChange::Added(record(Some("zz"), None)));
        assert_eq!(o.len(), 2, "one per key, the refused one not kept");
        // The store in force holds the record the API added (the engine applied it there).
        let mut in_force = SubscriberStore::default();
        in_force
            .add(record(Some("02:00:00:00:00:01"), None))
            .unwrap();
        for _ in 0..2 {
            let mut subs = SubscriberStore::default();
            subs.import_csv("02:00:00:00:00:02,,,gold\n02:00:00:00:00:03,,,gold\n")
                .unwrap();
            assert!(o.apply_to(&in_force, &mut subs).is_empty());
            let rec = subs.by_mac(&[2, 0, 0, 0, 0, 1]).cloned();
            assert_eq!(
                rec.and_then(|r| r.ipv4),
                Some("100.64.0.9".parse().unwrap())
            );
            assert!(
                subs.by_mac(&[2, 0, 0, 0, 0, 2]).is_none(),
                "removed through the API"
            );
            assert!(subs.by_mac(&[2, 0, 0, 0, 0, 3]).is_some(), "the file's");
        }
    }

    #[test]
    fn an_added_record_the_store_in_force_lacks_is_named() {
        let o = Overlay::new(vec![SubscriberChange::Added(record(
            Some("02:00:00:00:00:07"),
            None,
        ))]);
        let mut subs = SubscriberStore::default();
        assert_eq!(
            o.apply_to(&SubscriberStore::default(), &mut subs),
            ["a record added through the API (m020000000007) is not in the store in force"]
        );
        assert!(subs.is_empty());
    }

    #[test]
    fn a_damaged_value_is_an_error() {
        for v in [
            &b""[..],
            b"?",
            b"-\x02\x00",
            b"+{",
            b"/",
            b"/m020000000001",
            b"/o-",
        ] {
            assert!(SubscriberChange::decode(v).is_err(), "{v:?}");
        }
    }
}
