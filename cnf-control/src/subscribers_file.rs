//! The local subscribers file, read at start and again whenever its content changes.
//!
//! The operator mounts `aaa.subscribers` (a ConfigMap) as this file, and the kubelet replaces a
//! mounted ConfigMap's files when it is edited; an edit must reach the subscribers without a
//! restart of the control, which would stall onboarding meanwhile. So a task reads the file
//! every `subscribersRecheckSecs`, and a content it has not seen is parsed and imported into a
//! fresh store off the engine task; the engine task then lays the changes kept from the API
//! over it (as a start does) and puts it in force.
//!
//! A changed file that does not import (a bad row, bad JSON, unreadable) changes nothing: the
//! records in force stay, and the rejection is logged with its rows, counted (`subscribers
//! file rejected`), shown in `/v1/status` (and so in the BNG's status) and held in a gauge
//! (alerted) until the file holds a content the control takes. The sessions a change concerns
//! are granted what it says within seconds (`crate::core::engine_reauth`).
//! A content that would remove too many of the records is held (`crate::subscribers_guard`).

use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use tokio::sync::mpsc;

use crate::config::Config;
use crate::core::aaa::{self, SubscriberStore};
use crate::core::engine::EngineConfig;
use crate::service::ApiCmd;

/// A file imported into a store of its own.
#[derive(Debug)]
pub struct Loaded {
    pub store: SubscriberStore,
    /// Records imported.
    pub records: usize,
    /// Rows naming a plan, pool or address the configuration lacks: kept, and logged (a file
    /// may outlive a plan an edit removed; refusing it would strand every subscriber).
    pub unresolved: Vec<String>,
    /// The content read, kept in the session store once in force
    /// (`crate::subscribers_guard::at_start`).
    pub text: Arc<str>,
}

/// One read of the file: its content's digest (`None` when unreadable) and what it imports to.
#[derive(Debug)]
pub struct Reading {
    pub digest: Option<u64>,
    pub loaded: Result<Loaded, String>,
}

/// Reads, parses and imports `path` (CSV, or JSON by its `.json` extension).
pub fn read(path: &Path, cfg: &EngineConfig) -> Reading {
    reading(path, cfg, text_of(path))
}

/// As [`read`], but `None` without parsing when the content's digest is `seen`: the watch
/// reads the file every few seconds and a large one unchanged costs a read and a hash only.
pub fn read_unless(path: &Path, cfg: &EngineConfig, seen: Option<u64>) -> Option<Reading> {
    let text = text_of(path);
    if matches!(&text, Ok((_, digest)) if Some(*digest) == seen) {
        return None;
    }
    Some(reading(path, cfg, text))
}

fn reading(path: &Path, cfg: &EngineConfig, text: Result<(String, u64), String>) -> Reading {
    match text {
        Ok((text, digest)) => Reading {
            digest: Some(digest),
            loaded: import(path, text, cfg),
        },
        Err(e) => Reading {
            digest: None,
            loaded: Err(e),
        },
    }
}

fn text_of(path: &Path) -> Result<(String, u64), String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let d = digest(&text);
    Ok((text, d))
}

fn digest(text: &str) -> u64 {
    let mut h = std::hash::DefaultHasher::new();
    text.hash(&mut h);
    h.finish()
}

pub(crate) fn import(path: &Path, text: String, cfg: &EngineConfig) -> Result<Loaded, String> {
    let json = path.extension().is_some_and(|e| e == "json");
    let (rows, errors) = aaa::parse(&text, json);
    let unresolved = aaa::unresolved(&rows, cfg);
    let mut store = SubscriberStore::default();
    let records = store.import_rows(rows, errors).map_err(|errs| {
        let errs: Vec<String> = errs.iter().map(|e| e.to_string()).collect();
        format!("{}: {}", path.display(), errs.join("; "))
    })?;
    Ok(Loaded {
        store,
        records,
        unresolved,
        text: text.into(),
    })
}

/// What the watch tells the engine task.
#[derive(Debug)]
pub enum FileEvent {
    /// A content not seen before, imported: to put in force.
    Changed(Loaded),
    /// A content that cannot be used (why, naming the rows): the records in force stay.
    Rejected(String),
    /// After a rejection, the file holds the content in force again.
    InForce,
}

/// Reads `path` every `cfg.subscribers_recheck` and tells the engine task of each content
/// not seen before (the start read `seen`, and `rejected` it when the start could not use
/// it), imported or rejected; a read that fails the same way as the last is not told again.
pub async fn watch(
    path: PathBuf,
    cfg: Arc<Config>,
    mut seen: Option<u64>,
    mut rejected: Option<String>,
    tx: mpsc::Sender<ApiCmd>,
) {
    let mut tick = tokio::time::interval(cfg.subscribers_recheck);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tick.tick().await;
    loop {
        tick.tick().await;
        let (p, c) = (path.clone(), Arc::clone(&cfg));
        let read = move || read_unless(&p, &c.engine, seen);
        let Ok(reading) = tokio::task::spawn_blocking(read).await else {
            continue;
        };
        let event = match reading {
            None => rejected.take().map(|_| FileEvent::InForce),
            Some(reading) => match reading.loaded {
                Err(problem) if rejected.as_ref() == Some(&problem) => None,
                Err(problem) => {
                    rejected = Some(problem.clone());
                    Some(FileEvent::Rejected(problem))
                }
                Ok(loaded) => {
                    rejected = None;
                    seen = reading.digest;
                    Some(FileEvent::Changed(loaded))
                }
            },
        };
        if let Some(e) = event
            && tx.send(ApiCmd::SubscribersFile(e)).await.is_err()
        {
            return;
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::core::aaa::{Authorization, Identity};

    /// The configuration the files of these tests (and `crate::subscribers_guard`'s) resolve
    /// against.
    pub(crate) fn cfg() -> EngineConfig {
        crate::core::test_support::engine_config(crate::core::engine::UnknownPolicy::Captive)
    }

    /// A folder of this test's own (tests run in parallel in one process).
    pub(crate) fn dir(test: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("kbng-subs-{test}-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    fn known(s: &SubscriberStore, mac: [u8; 6]) -> bool {
        let id = Identity {
            mac,
            circuit_id: None,
            remote_id: None,
        };
        matches!(s.lookup(&id, false), Authorization::Known { .. })
    }

    #[test]
    fn a_file_reads_to_its_records_and_a_digest_of_its_content() {
        let dir = dir("reads");
        let p = dir.join("subs.csv");
        std::fs::write(
            &p,
            "mac,circuit_id,remote_id,plan\n02:00:00:00:00:01,,,gold\n",
        )
        .unwrap();
        let a = read(&p, &cfg());
        let loaded = a.loaded.as_ref().unwrap();
        assert_eq!(loaded.records, 1);
        assert!(known(&loaded.store, [2, 0, 0, 0, 0, 1]));
        assert_eq!(
            read(&p, &cfg()).digest,
            a.digest,
            "same content, same digest"
        );
        std::fs::write(&p, "02:00:00:00:00:02,,,gold\n").unwrap();
        let b = read(&p, &cfg());
        assert_ne!(b.digest, a.digest);
        assert!(!known(&b.loaded.unwrap().store, [2, 0, 0, 0, 0, 1]));
    }

    #[test]
    fn a_bad_row_rejects_the_whole_file_naming_the_row() {
        let dir = dir("bad");
        let p = dir.join("subs.csv");
        std::fs::write(&p, "02:00:00:00:00:01,,,gold\nnot-a-mac,,,gold\n").unwrap();
        let r = read(&p, &cfg());
        assert!(r.digest.is_some());
        let e = r.loaded.unwrap_err();
        assert!(e.contains("row 2"), "{e}");
    }

    #[test]
    fn an_unreadable_file_has_no_digest() {
        let dir = dir("unreadable");
        let r = read(&dir.join("absent.json"), &cfg());
        assert_eq!(r.digest, None);
        assert!(r.loaded.unwrap_err().contains("absent.json"));
    }

    #[test]
    fn rows_the_configuration_cannot_resolve_are_kept_and_named() {
        let dir = dir("unresolved");
        let p = dir.join("subs.json");
        std::fs::write(&p, r#"[{"mac":"02:00:00:00:00:01","plan":"platinum"}]"#).unwrap();
        let loaded = read(&p, &cfg()).loaded.unwrap();
        assert_eq!(loaded.records, 1);
        assert_eq!(loaded.unresolved, vec![r#"row 1: unknown plan "platinum""#]);
    }
}
