//! The subscriber store read one record or one page at a time, by the key it files a record
//! under: its MAC, or its option 82 identity when it has one. A listing gives the records keyed
//! by MAC in MAC order, then those keyed by option 82 in (circuit-id, remote-id) order, and a
//! cursor naming the last key given, from which the next page resumes: a store of millions is
//! never answered in one response, and records added or removed between pages neither repeat
//! nor shift the others.

use std::collections::BTreeMap;
use std::ops::Bound;

use super::MacAddr;
use super::aaa::{
    Opt82, SubscriberRecord, SubscriberStore, format_mac, mac_number, number_mac, opt82_key,
    parse_mac,
};

/// What a record is filed under.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum RecordKey {
    Mac(MacAddr),
    Opt82(Opt82),
}

/// A page of records and the cursor of the next (`None`: this was the last).
pub type Page = (Vec<SubscriberRecord>, Option<RecordKey>);

impl RecordKey {
    /// The cursor of this key: `m` and the MAC's hex digits, or `o`, then the circuit-id and
    /// the remote-id each as hex digits (`-` when absent), joined by `.`.
    pub fn cursor(&self) -> String {
        match self {
            RecordKey::Mac(m) => format!("m{}", hex(m)),
            RecordKey::Opt82((cid, rid)) => {
                let part = |p: &Option<Vec<u8>>| p.as_deref().map_or("-".into(), hex);
                format!("o{}.{}", part(cid), part(rid))
            }
        }
    }

    /// The key a [`RecordKey::cursor`] names; `None` for anything else.
    pub fn from_cursor(s: &str) -> Option<RecordKey> {
        if let Some(m) = s.strip_prefix('m') {
            return unhex(m)?.try_into().ok().map(RecordKey::Mac);
        }
        let (cid, rid) = s.strip_prefix('o')?.split_once('.')?;
        let part = |p: &str| match p {
            "-" => Some(None),
            p => unhex(p).map(Some),
        };
        Some(RecordKey::Opt82((part(cid)?, part(rid)?)))
    }

    /// What `rec` is filed under: its option 82 identity when it has one, else its MAC;
    /// `None` for a record with neither, or with a MAC that does not parse.
    pub fn of(rec: &SubscriberRecord) -> Option<RecordKey> {
        if rec.circuit_id.is_some() || rec.remote_id.is_some() {
            let k = opt82_key(rec.circuit_id.as_deref(), rec.remote_id.as_deref());
            return Some(RecordKey::Opt82(k));
        }
        RecordKey::mac(rec.mac.as_deref()?)
    }

    /// The key of a MAC written `aa:bb:cc:dd:ee:ff`.
    pub fn mac(s: &str) -> Option<RecordKey> {
        parse_mac(s).map(RecordKey::Mac)
    }

    /// A readable form for messages.
    pub fn describe(&self) -> String {
        match self {
            RecordKey::Mac(m) => format_mac(m),
            RecordKey::Opt82((cid, rid)) => {
                let text = |p: &Option<Vec<u8>>| {
                    p.as_deref()
                        .map_or("-".into(), |b| String::from_utf8_lossy(b).into_owned())
                };
                format!("circuit-id {} remote-id {}", text(cid), text(rid))
            }
        }
    }
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn unhex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) || !s.is_ascii() {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).ok())
        .collect()
}

impl SubscriberStore {
    /// The record filed under `key`.
    pub fn get(&self, key: &RecordKey) -> Option<&SubscriberRecord> {
        match key {
            RecordKey::Mac(m) => self.by_mac(m),
            RecordKey::Opt82(k) => self.by_opt82(k),
        }
    }

    /// Removes the record filed under `key`; whether there was one.
    pub fn remove(&mut self, key: &RecordKey) -> bool {
        match key {
            RecordKey::Mac(m) => self.remove_mac(m),
            RecordKey::Opt82(k) => self.remove_opt82(k),
        }
    }

    /// How many of this store's keys `other` lacks: the records a change from this store to
    /// `other` removes (one walked in order beside the other, O(n)).
    pub fn missing_from(&self, other: &SubscriberStore) -> usize {
        fn missing<K: Ord, V>(mine: &BTreeMap<K, V>, theirs: &BTreeMap<K, V>) -> usize {
            let mut theirs = theirs.keys().peekable();
            let mut n = 0;
            for k in mine.keys() {
                while theirs.next_if(|t| *t < k).is_some() {}
                if theirs.next_if(|t| *t == k).is_none() {
                    n += 1;
                }
            }
            n
        }
        missing(&self.by_mac, &other.by_mac) + missing(&self.by_opt82, &other.by_opt82)
    }

    /// Every record after `after` (from the first without), in listing order.
    fn records_after<'a>(
        &'a self,
        after: Option<&RecordKey>,
    ) -> impl Iterator<Item = (RecordKey, &'a SubscriberRecord)> + 'a {
        let from_mac = match after {
            None => Some(Bound::Unbounded),
            Some(RecordKey::Mac(m)) => Some(Bound::Excluded(mac_number(m))),
            Some(RecordKey::Opt82(_)) => None,
        };
        let from_opt82 = match after {
            Some(RecordKey::Opt82(k)) => Bound::Excluded(k.clone()),
            _ => Bound::Unbounded,
        };
        let macs = from_mac
            .map(|from| self.by_mac.range((from, Bound::Unbounded)))
            .into_iter()
            .flatten()
            .map(|(m, r)| (RecordKey::Mac(number_mac(*m)), r));
        let opt82 = self
            .by_opt82
            .range((from_opt82, Bound::Unbounded))
            .map(|(k, r)| (RecordKey::Opt82(k.clone()), r));
        macs.chain(opt82)
    }

    /// Up to `limit` records after `after` (from the first without), and the cursor of the
    /// next page when more follow.
    pub fn page(&self, after: Option<&RecordKey>, limit: usize) -> Page {
        let mut records = self.records_after(after);
        let out: Vec<_> = records.by_ref().take(limit.max(1)).collect();
        let next = match records.next() {
            Some(_) => out.last().map(|(k, _)| k.clone()),
            None => None,
        };
        (out.into_iter().map(|(_, r)| r.clone()).collect(), next)
    }

    /// Up to `limit` of the records after `after` whose key `keep` keeps, looking at no more
    /// than `scan` records (a filter that keeps few must not hold the caller for the whole
    /// store), and the cursor of the next page while more may follow: a page may come back
    /// short, or empty, with a cursor to go on from.
    pub fn page_where(
        &self,
        after: Option<&RecordKey>,
        limit: usize,
        scan: usize,
        keep: impl Fn(&RecordKey) -> bool,
    ) -> Page {
        let limit = limit.max(1);
        let mut out = Vec::new();
        let mut last: Option<RecordKey> = None;
        for (looked, (k, r)) in self.records_after(after).enumerate() {
            if out.len() == limit || looked == scan {
                return (out, last);
            }
            if keep(&k) {
                out.push(r.clone());
            }
            last = Some(k);
        }
        (out, None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store() -> SubscriberStore {
        let mut s = SubscriberStore::default();
        s.import_csv(
            "02:00:00:00:00:03,,,gold\n02:00:00:00:00:01,,,gold\nff:ff:ff:ff:ff:ff,,,gold\n\
             ,eth0/2,,silver\n,eth0/1,r1,silver\n,,r0,silver\n02:00:00:00:00:02,,,gold\n",
        )
        .unwrap();
        s
    }

    fn name(r: &SubscriberRecord) -> String {
        r.mac
            .clone()
            .or_else(|| r.circuit_id.clone())
            .or_else(|| r.remote_id.clone())
            .unwrap()
    }

    #[test]
    fn pages_give_every_record_once_in_key_order_whatever_the_page_size() {
        let want = [
            "02:00:00:00:00:01",
            "02:00:00:00:00:02",
            "02:00:00:00:00:03",
            "ff:ff:ff:ff:ff:ff",
            "r0",
            "eth0/1",
            "eth0/2",
        ];
        let s = store();
        for size in 1..=8 {
            let (mut got, mut after, mut pages) = (Vec::new(), None, 0);
            loop {
                let (recs, next) = s.page(after.as_ref(), size);
                pages += 1;
                assert!(recs.len() <= size);
                got.extend(recs.iter().map(name));
                // Each page resumes from its cursor as a client would send it back.
                match next {
                    Some(k) => after = Some(RecordKey::from_cursor(&k.cursor()).unwrap()),
                    None => break,
                }
            }
            assert_eq!(got, want, "pages of {size}");
            assert_eq!(pages, want.len().div_ceil(size), "pages of {size}");
        }
    }

    #[test]
    fn missing_from_counts_the_keys_the_other_store_lacks_whatever_their_records() {
        let s = store();
        assert_eq!(s.missing_from(&s), 0);
        assert_eq!(s.missing_from(&SubscriberStore::default()), 7);
        assert_eq!(SubscriberStore::default().missing_from(&s), 0);
        let mut other = SubscriberStore::default();
        // Same keys with other plans, keys the first lacks, and two of its own left out.
        other
            .import_csv(
                "02:00:00:00:00:01,,,silver\n02:00:00:00:00:04,,,gold\n02:00:00:00:00:03,,,gold\n\
                 ,eth0/1,r1,gold\n,eth0/9,,gold\n,,r0,gold\n00:00:00:00:00:01,,,gold\n",
            )
            .unwrap();
        assert_eq!(s.missing_from(&other), 3, "02:..:02, ff:..:ff and eth0/2");
        assert_eq!(other.missing_from(&s), 3, "04, eth0/9 and 00:..:01");
    }

    #[test]
    fn filtered_pages_give_the_kept_records_once_however_short_the_scan() {
        let s = store();
        // Keep every other record in listing order: 01, 03, r0, eth0/2... as keys.
        let keep = |k: &RecordKey| {
            matches!(
                k,
                RecordKey::Mac([.., 1 | 3]) | RecordKey::Opt82((None, Some(_)))
            )
        };
        for (limit, scan) in [(1, 1), (1, 3), (2, 2), (100, 100), (3, 1)] {
            let (mut got, mut after, mut pages) = (Vec::new(), None, 0);
            loop {
                let (recs, next) = s.page_where(after.as_ref(), limit, scan, keep);
                assert!(recs.len() <= limit);
                got.extend(recs.iter().map(name));
                pages += 1;
                assert!(pages < 20, "no end at limit {limit} scan {scan}");
                match next {
                    Some(k) => after = Some(k),
                    None => break,
                }
            }
            assert_eq!(
                got,
                ["02:00:00:00:00:01", "02:00:00:00:00:03", "r0"],
                "limit {limit} scan {scan}"
            );
        }
    }

    #[test]
    fn a_page_resumes_after_its_cursor_even_when_that_record_is_gone() {
        let mut s = store();
        let (first, next) = s.page(None, 2);
        assert_eq!(first.len(), 2);
        let next = next.unwrap();
        assert!(s.remove(&next), "the cursor's own record");
        let (rest, _) = s.page(Some(&next), 100);
        assert_eq!(name(&rest[0]), "02:00:00:00:00:03");
        assert_eq!(rest.len(), 5);
    }

    #[test]
    fn cursors_round_trip_and_garbage_is_refused() {
        for k in [
            RecordKey::Mac([2, 0, 0, 0, 0, 0xab]),
            RecordKey::Opt82(opt82_key(Some("eth0/1"), None)),
            RecordKey::Opt82(opt82_key(None, Some("r.1"))),
            RecordKey::Opt82(opt82_key(Some(""), Some("x"))),
        ] {
            assert_eq!(
                RecordKey::from_cursor(&k.cursor()),
                Some(k.clone()),
                "{k:?}"
            );
        }
        for bad in [
            "",
            "m",
            "m0200",
            "mzz0000000000",
            "o",
            "o-",
            "oab",
            "x-.-",
            "o-.é",
        ] {
            assert_eq!(RecordKey::from_cursor(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn a_record_is_read_and_removed_by_its_key() {
        let mut s = store();
        let k = RecordKey::Opt82(opt82_key(Some("eth0/1"), Some("r1")));
        assert_eq!(
            s.get(&k).and_then(|r| r.plan.clone()).as_deref(),
            Some("silver")
        );
        let partial = RecordKey::Opt82(opt82_key(Some("eth0/1"), None));
        assert!(s.get(&partial).is_none(), "by the exact identity only");
        assert!(s.remove(&k) && !s.remove(&k));
        assert!(s.remove(&RecordKey::mac("02:00:00:00:00:01").unwrap()));
        assert_eq!(s.len(), 5);
    }
}
