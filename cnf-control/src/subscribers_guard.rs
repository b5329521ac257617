//! The guard against a subscribers file edit that removes too many records.
//!
//! A reread file is in force within seconds, and the sessions it no longer names are walled
//! in (or, under `unknownSubscribers: reject`, disconnected) as fast: a truncated or wrong
//! ConfigMap would take every subscriber it drops. A content that removes more than
//! `subscribersMaxRemovalPercent` of the records in force (and at least
//! [`HELD_MIN_REMOVALS`]) is held instead: imported, not in force, shown and alerted as a
//! rejected one is, until an operator accepts it (`kbngctl subscribers accept-file`) or the
//! file changes again. The content in force is kept in the session store, so that a restart
//! compares the file with it too ([`at_start`]): a held edit stays held across restarts, and
//! one made while the control was down is held as well. A start on a file it cannot use goes
//! on with that content ([`kept_in_force`]), the file shown as rejected, rather than failing:
//! a bad edit would otherwise turn the next restart into a control that cannot start.

use std::path::Path;
use std::sync::Arc;

use crate::core::aaa::SubscriberStore;
use crate::core::engine::EngineConfig;
use crate::store::subscribers::SubscriberChange;
use crate::subscribers_file::{Loaded, import};

/// Fewer removals than this are never held: a store of a few records loses a large share in
/// a routine edit.
pub const HELD_MIN_REMOVALS: usize = 10;

/// Why a content that removes `removed` of the `in_force` records is held, when it removes
/// more than `max_percent` of them and at least [`HELD_MIN_REMOVALS`].
pub fn mass_removal(removed: usize, in_force: usize, max_percent: u8) -> Option<String> {
    let over = removed.saturating_mul(100) > in_force.saturating_mul(usize::from(max_percent));
    (removed >= HELD_MIN_REMOVALS && over).then(|| {
        format!(
            "held: the file's new content removes {removed} of the {in_force} records in force \
             ({}%, more than subscribersMaxRemovalPercent {max_percent}%); the records in force \
             stay until `kbngctl subscribers accept-file` or another edit",
            removed * 100 / in_force.max(1)
        )
    })
}

/// A content imported but held back by [`mass_removal`].
#[derive(Debug)]
pub struct Held {
    pub loaded: Loaded,
    pub removed: usize,
    pub why: String,
}

/// What the engine task knows of the file beyond the records in force.
#[derive(Debug, Default)]
pub struct FileState {
    /// Why the file's present content cannot be used, while so.
    pub rejected: Option<String>,
    /// The last content read, held back, while so (kept while a later content is rejected:
    /// the file may return to it).
    pub held: Option<Held>,
}

impl FileState {
    /// Why the file's content is not in force (`None`: it is).
    pub fn problem(&self) -> Option<&str> {
        self.rejected
            .as_deref()
            .or(self.held.as_ref().map(|h| h.why.as_str()))
    }

    /// Sets the gauge `KbngSubscribersFileRejected` reads: 1 while the file is not in force.
    pub fn report(&self) {
        crate::health_metrics::subscribers_file_rejected(self.problem().is_some());
    }
}

/// What a start does with the file it read.
#[derive(Debug, Default)]
pub struct AtStart {
    /// The file's content, held: the records last in force are in the engine's store instead.
    pub held: Option<Held>,
    /// A content to keep in the session store as the one in force (`None`: it is there).
    pub keep: Option<Arc<str>>,
}

/// Decides at start between the file's records, which `in_force` holds as read, and the
/// content last in force, `kept` in the session store: a file edited (or held) while the
/// control was down that removes too many of the records is held, as a reread one is, and
/// `in_force` gets the kept content's records back. Both are compared with the API's
/// `changes` laid over them, in place (the start lays them again, which changes nothing
/// more: a large store is not copied for the comparison).
pub fn at_start(
    in_force: &mut SubscriberStore,
    file: Arc<str>,
    kept: Option<String>,
    path: &Path,
    cfg: &EngineConfig,
    changes: &[SubscriberChange],
    max_percent: u8,
) -> AtStart {
    let take = AtStart {
        held: None,
        keep: Some(Arc::clone(&file)),
    };
    let Some(kept) = kept else { return take };
    if *kept == *file {
        return AtStart::default();
    }
    let Some(mut before) = kept_in_force(Some(kept), path, cfg) else {
        return take;
    };
    for s in [&mut before.store, &mut *in_force] {
        let _ = crate::store::subscribers::apply(changes.iter().cloned(), s);
    }
    let removed = before.store.missing_from(in_force);
    let Some(why) = mass_removal(removed, before.store.len(), max_percent) else {
        return take;
    };
    let file_store = std::mem::replace(in_force, before.store);
    AtStart {
        held: Some(Held {
            loaded: Loaded {
                records: file_store.len(),
                store: file_store,
                unresolved: Vec::new(),
                text: file,
            },
            removed,
            why,
        }),
        keep: None,
    }
}

/// The content last in force, `kept` in the session store, imported: what a start whose
/// file cannot be used goes on with (`None`: nothing kept, or it does not import now).
pub fn kept_in_force(kept: Option<String>, path: &Path, cfg: &EngineConfig) -> Option<Loaded> {
    match import(path, kept?, cfg) {
        Ok(l) => Some(l),
        Err(e) => {
            tracing::warn!("subscribers: the content last in force does not import now: {e}");
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::subscribers_file::tests::{cfg, dir};

    #[test]
    fn an_edit_is_held_above_its_share_of_removals_and_never_below_ten() {
        // 10% of 1,000 is 100: 100 removed goes through, 101 is held.
        assert_eq!(mass_removal(100, 1000, 10), None);
        let why = mass_removal(101, 1000, 10).unwrap();
        assert!(
            why.contains("removes 101 of the 1000 records in force (10%"),
            "{why}"
        );
        assert!(why.contains("kbngctl subscribers accept-file"), "{why}");
        // Nine of a store of ten is routine; ten of ten is held.
        assert_eq!(mass_removal(9, 10, 10), None);
        assert!(mass_removal(10, 10, 10).is_some());
        // 100% holds nothing; an emptied store at 99% is held.
        assert_eq!(mass_removal(1000, 1000, 100), None);
        assert!(mass_removal(1000, 1000, 99).is_some());
        assert_eq!(mass_removal(0, 0, 1), None);
    }

    #[test]
    fn a_held_content_is_the_problem_until_a_rejection_says_more() {
        let mut f = FileState::default();
        assert_eq!(f.problem(), None);
        f.held = Some(Held {
            loaded: Loaded {
                store: SubscriberStore::default(),
                records: 0,
                unresolved: Vec::new(),
                text: "".into(),
            },
            removed: 40,
            why: "held: 40".into(),
        });
        assert_eq!(f.problem(), Some("held: 40"));
        f.rejected = Some("row 2: bad MAC".into());
        assert_eq!(f.problem(), Some("row 2: bad MAC"));
        f.rejected = None;
        assert_eq!(
            f.problem(),
            Some("held: 40"),
            "the file back to the held content"
        );
    }

    /// `n` MAC rows from `from`, on gold.
    fn rows(from: u8, n: u8) -> String {
        (from..from + n)
            .map(|i| format!("02:00:00:00:01:{i:02x},,,gold\n"))
            .collect()
    }

    /// A start with `file` read and `kept` in the store: what it holds, what it keeps, and
    /// the records it puts in force.
    fn start(
        test: &str,
        file: &str,
        kept: Option<&str>,
        changes: &[SubscriberChange],
    ) -> (AtStart, SubscriberStore) {
        let dir = dir(test);
        let p = dir.join("subs.csv");
        std::fs::write(&p, file).unwrap();
        let loaded = crate::subscribers_file::read(&p, &cfg()).loaded.unwrap();
        let mut in_force = loaded.store;
        let r = at_start(
            &mut in_force,
            loaded.text,
            kept.map(str::to_string),
            &p,
            &cfg(),
            changes,
            10,
        );
        (r, in_force)
    }

    #[test]
    fn a_start_takes_the_file_unless_it_removes_too_many_of_the_records_last_in_force() {
        // No content kept yet (a first start): the file's, kept.
        let (r, subs) = start("start-first", &rows(0, 40), None, &[]);
        assert!(r.held.is_none());
        assert_eq!(r.keep.as_deref(), Some(rows(0, 40).as_str()));
        assert_eq!(subs.len(), 40);
        // The same content kept: nothing to write.
        let (r, _) = start("start-same", &rows(0, 40), Some(&rows(0, 40)), &[]);
        assert!(r.held.is_none() && r.keep.is_none());
        // Four of forty removed while down: taken.
        let (r, subs) = start("start-few", &rows(0, 36), Some(&rows(0, 40)), &[]);
        assert!(r.held.is_none());
        assert_eq!((subs.len(), r.keep.is_some()), (36, true));
        // Thirty-five of forty removed: held, the forty back in force, nothing kept anew.
        let (r, subs) = start("start-many", &rows(0, 5), Some(&rows(0, 40)), &[]);
        let held = r.held.expect("held");
        assert_eq!((held.removed, held.loaded.store.len()), (35, 5));
        assert_eq!(&*held.loaded.text, rows(0, 5).as_str());
        assert!(held.why.contains("removes 35 of the 40"), "{}", held.why);
        assert!(r.keep.is_none());
        assert_eq!(subs.len(), 40);
    }

    #[test]
    fn a_start_compares_with_the_apis_changes_over_both_contents() {
        use crate::core::subscriber_page::RecordKey;
        // Thirty removed through the API before the file dropped them too: the file removes
        // only what the API had left, five of fifteen, more than 10% but fewer than ten.
        let removed: Vec<SubscriberChange> = (10..40)
            .map(|i| {
                SubscriberChange::Removed(
                    RecordKey::mac(&format!("02:00:00:00:01:{i:02x}")).unwrap(),
                )
            })
            .collect();
        let (r, subs) = start("start-api", &rows(0, 5), Some(&rows(0, 40)), &removed);
        assert!(r.held.is_none(), "{:?}", r.held.map(|h| h.why));
        assert_eq!(subs.len(), 5, "the file's");
    }

    #[test]
    fn a_kept_content_that_no_longer_imports_gives_way_to_the_file() {
        let (r, subs) = start("start-bad", &rows(0, 2), Some("not-a-mac,,,gold\n"), &[]);
        assert!(r.held.is_none());
        assert_eq!((subs.len(), r.keep.is_some()), (2, true));
    }

    #[test]
    fn a_start_on_a_bad_file_goes_on_with_the_kept_content_when_it_imports() {
        let p = dir("kept").join("subs.csv");
        assert!(kept_in_force(None, &p, &cfg()).is_none(), "nothing kept");
        assert!(kept_in_force(Some("bad,,,gold\n".into()), &p, &cfg()).is_none());
        let kept = kept_in_force(Some(rows(0, 3)), &p, &cfg()).expect("imports");
        assert_eq!((kept.records, &*kept.text), (3, rows(0, 3).as_str()));
    }
}
