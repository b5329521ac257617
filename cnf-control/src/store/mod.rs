//! Persistence of bound sessions in an embedded transactional store, of the changes made to
//! the local subscribers through the API ([`subscribers`]), and of the subscribers file's
//! content in force (a restart compares the file with it, `crate::subscribers_guard`).
//!
//! redb rather than SQLite through rusqlite: the data is one key-value map (session id → the
//! session's row, see [`row`]) plus a counter, which needs no SQL; redb is pure Rust (no C toolchain or
//! bundled libsqlite3 in the image), its copy-on-write B-tree commits are atomic and survive
//! `kill -9` at any point (a commit is either entirely there or not at all), and a batch of
//! thousands of puts is one transaction and one fsync.
//!
//! The commit stage (`crate::commit`) commits each batch of changes, grouped with whatever else
//! queued meanwhile, before the DHCP ACKs of that batch leave, so a client never holds a lease
//! that a restart would forget. Commits keep redb's default `Durability::Immediate`; when the
//! file is forced to the disk is the sync policy's choice ([`sync`]).

use std::path::Path;

use redb::{Database, ReadableDatabase, ReadableTable, TableDefinition};

pub mod row;
pub mod subscribers;
pub mod sync;

use subscribers::SubscriberChange;

use sync::{PolicyBackend, SyncHandle, SyncPolicy};

use crate::core::SessionId;
use crate::core::engine::{Engine, Session};

const SESSIONS: TableDefinition<u64, &[u8]> = TableDefinition::new("sessions");
const META: TableDefinition<&str, u64> = TableDefinition::new("meta");
/// [`SubscriberChange::key`] -> [`SubscriberChange::encode`].
const SUBSCRIBERS: TableDefinition<&[u8], &[u8]> = TableDefinition::new("subscribers");
const NEXT_ID: &str = "next_session_id";
/// The subscribers file's content last put in force, under [`IN_FORCE`].
const SUBSCRIBERS_FILE: TableDefinition<&str, &[u8]> = TableDefinition::new("subscribers_file");
const IN_FORCE: &str = "in_force";

/// redb's page cache. Its default, 1 GiB, filled with every page the start-up load reads (the
/// whole store: about 570 MB for 1,000,000 sessions) and kept it for the life of the process,
/// although the control never reads the store again: about 420 of the 1,108 resident bytes
/// per restored session (restore bench). Commits touch a few dozen pages of the tree, so
/// 64 MiB holds their working set and bounds the store's share of the pod's memory limit.
const CACHE_BYTES: usize = 64 << 20;

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("store: {0}")]
    Db(#[from] redb::Error),
    #[error("store: session {id} does not decode: {source}")]
    Decode {
        id: u64,
        #[source]
        source: row::RowError,
    },
}

fn db<E: Into<redb::Error>>(e: E) -> StoreError {
    StoreError::Db(e.into())
}

/// Sessions decoded at a time during a restore: small against a million, large enough that
/// the decode temporaries of a chunk are freed together rather than between the engine's map
/// nodes (restoring row by row left the heap fragmented: more resident memory after the
/// restore, not less).
pub const RESTORE_CHUNK: usize = 16_384;

/// What [`Store::restore_into`] did.
#[derive(Debug, Default)]
pub struct Restored {
    /// Rows read.
    pub loaded: usize,
    /// Rows the engine refused, and why.
    pub problems: Vec<String>,
}

/// One change.
#[derive(Debug, Clone)]
pub enum StoreOp {
    Put(Box<Session>),
    Delete(SessionId),
    /// Kept under its key, replacing the key's earlier change.
    Subscriber(SubscriberChange),
    /// The subscribers file's content now in force.
    SubscribersFile(std::sync::Arc<str>),
}

/// The store.
#[derive(Debug)]
pub struct Store {
    db: Database,
    sync: SyncHandle,
}

impl Store {
    pub fn open(path: &Path) -> Result<Store, StoreError> {
        Self::open_with(path, SyncPolicy::EveryCommit)
    }

    /// [`Self::open`] with a sync policy (see [`sync`]).
    pub fn open_with(path: &Path, policy: SyncPolicy) -> Result<Store, StoreError> {
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .map_err(|e| db(redb::DatabaseError::Storage(e.into())))?;
        let (backend, sync) = PolicyBackend::new(file, policy).map_err(db)?;
        let database = Database::builder()
            .set_cache_size(CACHE_BYTES)
            .create_with_backend(backend)
            .map_err(db)?;
        let tx = database.begin_write().map_err(db)?;
        tx.open_table(SESSIONS).map_err(db)?;
        tx.open_table(META).map_err(db)?;
        tx.open_table(SUBSCRIBERS).map_err(db)?;
        tx.open_table(SUBSCRIBERS_FILE).map_err(db)?;
        tx.commit().map_err(db)?;
        Ok(Store { db: database, sync })
    }

    /// The store's sync policy and its syncs, for the commit thread.
    pub fn sync(&self) -> &SyncHandle {
        &self.sync
    }

    /// Every stored session and the next session id.
    pub fn load(&self) -> Result<(Vec<Session>, SessionId), StoreError> {
        let mut out = Vec::new();
        let next = self.load_chunked(usize::MAX, |chunk| out.extend(chunk))?;
        Ok((out, next))
    }

    /// Every stored session, handed to `f` in chunks of at most `chunk` in id order; returns
    /// the next session id. What a restart holds at its peak is the engine's maps plus one
    /// chunk, rather than plus every decoded session.
    pub fn load_chunked(
        &self,
        chunk: usize,
        mut f: impl FnMut(Vec<Session>),
    ) -> Result<SessionId, StoreError> {
        let tx = self.db.begin_read().map_err(db)?;
        let t = tx.open_table(SESSIONS).map_err(db)?;
        let cap = chunk.min(RESTORE_CHUNK);
        let mut out = Vec::with_capacity(cap);
        for row in t.iter().map_err(db)? {
            let (k, v) = row.map_err(db)?;
            let id = k.value();
            let s = row::decode(v.value()).map_err(|source| StoreError::Decode { id, source })?;
            out.push(s);
            if out.len() >= chunk {
                f(std::mem::replace(&mut out, Vec::with_capacity(cap)));
            }
        }
        if !out.is_empty() {
            f(out);
        }
        let meta = tx.open_table(META).map_err(db)?;
        Ok(meta
            .get(NEXT_ID)
            .map_err(db)?
            .map(|g| g.value())
            .unwrap_or(1))
    }

    /// The kept subscriber changes, one per key; a value that does not decode is named in the
    /// second list and skipped.
    pub fn subscriber_changes(&self) -> Result<(Vec<SubscriberChange>, Vec<String>), StoreError> {
        let tx = self.db.begin_read().map_err(db)?;
        let t = tx.open_table(SUBSCRIBERS).map_err(db)?;
        let (mut changes, mut bad) = (Vec::new(), Vec::new());
        for row in t.iter().map_err(db)? {
            let (k, v) = row.map_err(db)?;
            match SubscriberChange::decode(v.value()) {
                Ok(c) => changes.push(c),
                Err(e) => bad.push(format!("subscriber change {:02x?}: {e}", k.value())),
            }
        }
        Ok((changes, bad))
    }

    /// The subscribers file's content last put in force, when one was (`None` as well for
    /// one that is not UTF-8, which no file the control took can be).
    pub fn subscribers_file(&self) -> Result<Option<String>, StoreError> {
        let tx = self.db.begin_read().map_err(db)?;
        let t = tx.open_table(SUBSCRIBERS_FILE).map_err(db)?;
        let text = t.get(IN_FORCE).map_err(db)?;
        Ok(text.and_then(|v| String::from_utf8(v.value().to_vec()).ok()))
    }

    /// Keeps `text` as the subscribers file's content in force (at start, before the commit
    /// stage runs; later through [`StoreOp::SubscribersFile`]).
    pub fn keep_subscribers_file(&self, text: &str) -> Result<(), StoreError> {
        let tx = self.db.begin_write().map_err(db)?;
        {
            let mut t = tx.open_table(SUBSCRIBERS_FILE).map_err(db)?;
            t.insert(IN_FORCE, text.as_bytes()).map_err(db)?;
        }
        tx.commit().map_err(db)
    }

    /// Restores every stored session into `engine`, as `kbng-control` does at start.
    pub fn restore_into(&self, engine: &mut Engine) -> Result<Restored, StoreError> {
        let mut r = Restored::default();
        // The stored next id is read after the rows; the engine keeps the largest it is given.
        let next = self.load_chunked(RESTORE_CHUNK, |chunk| {
            r.loaded += chunk.len();
            r.problems.extend(engine.restore(chunk, 0));
        })?;
        r.problems.extend(engine.restore(Vec::new(), next));
        Ok(r)
    }

    /// Apply a batch in one transaction.
    pub fn apply(&self, ops: &[StoreOp], next_id: SessionId) -> Result<(), StoreError> {
        self.apply_all(&[ops], next_id)
    }

    /// Apply several batches, in order, in one transaction: one commit and one sync for all of
    /// them (the commit stage's group commit, `crate::commit`).
    pub fn apply_all(&self, batches: &[&[StoreOp]], next_id: SessionId) -> Result<(), StoreError> {
        let tx = self.db.begin_write().map_err(db)?;
        {
            let mut t = tx.open_table(SESSIONS).map_err(db)?;
            let mut subs = tx.open_table(SUBSCRIBERS).map_err(db)?;
            let mut file = tx.open_table(SUBSCRIBERS_FILE).map_err(db)?;
            let mut v = Vec::new();
            for op in batches.iter().flat_map(|b| b.iter()) {
                match op {
                    StoreOp::Put(s) => {
                        v.clear();
                        row::encode(s, &mut v);
                        t.insert(s.id, v.as_slice()).map_err(db)?;
                    }
                    StoreOp::Delete(id) => {
                        t.remove(*id).map_err(db)?;
                    }
                    StoreOp::Subscriber(c) => {
                        // Keyless changes are refused before they get here (the store
                        // refuses such records).
                        if let Some(k) = c.key() {
                            subs.insert(k.as_slice(), c.encode().as_slice())
                                .map_err(db)?;
                        }
                    }
                    StoreOp::SubscribersFile(text) => {
                        file.insert(IN_FORCE, text.as_bytes()).map_err(db)?;
                    }
                }
            }
            let mut m = tx.open_table(META).map_err(db)?;
            m.insert(NEXT_ID, next_id).map_err(db)?;
        }
        tx.commit().map_err(db)?;
        Ok(())
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::core::Line;
    use crate::core::engine::SubscriberKey;
    use crate::core::session::{Lease, State};
    use std::net::Ipv4Addr;

    /// A bound session with every field set (also used by `crate::commit`'s tests).
    pub(crate) fn session(id: u64) -> Session {
        let line = Line {
            dataplane: 0,
            port: 0,
            outer_vlan: 10,
            inner_vlan: 20,
        };
        let mac = [2, 0, 0, 0, 0, id as u8];
        Session {
            id,
            key: SubscriberKey::Mac { line, mac },
            line,
            mac,
            circuit_id: Some(b"eth0/1".to_vec()),
            remote_id: None,
            created_ns: 1_700_000_000_000_000_000 + id,
            ends_at_ns: None,
            state: State::Active {
                lease: Lease {
                    ip: Ipv4Addr::new(100, 64, 0, id as u8),
                    lease_secs: 3600,
                    bound_at_ns: 1_700_000_000_000_000_000 + id,
                    renewed_at_ns: 1_700_000_000_500_000_000,
                },
                plan_id: 3,
            },
            reauthorize_at_end: false,
            pending: None,
            last_offer_ns: 0,
        }
    }

    /// A fresh path for a store of this test process.
    fn fresh(name: &str) -> std::path::PathBuf {
        let path = std::env::temp_dir().join(format!("kbng-store-{name}-{}", std::process::id()));
        let _ = std::fs::remove_file(&path);
        path
    }

    fn puts(ids: std::ops::RangeInclusive<u64>) -> Vec<StoreOp> {
        ids.map(|i| StoreOp::Put(Box::new(session(i)))).collect()
    }

    #[test]
    fn put_delete_reopen() {
        let dir = fresh("reopen");
        {
            let s = Store::open(&dir).unwrap();
            s.apply(&puts(1..=5), 6).unwrap();
            s.apply(&[StoreOp::Delete(2)], 7).unwrap();
        }
        let s = Store::open(&dir).unwrap();
        let (sessions, next) = s.load().unwrap();
        assert_eq!(next, 7);
        assert_eq!(
            sessions.iter().map(|s| s.id).collect::<Vec<_>>(),
            vec![1, 3, 4, 5]
        );
        assert_eq!(sessions[0], session(1), "timestamps and lease kept exactly");
        let _ = std::fs::remove_file(&dir);
    }

    #[test]
    fn subscriber_changes_are_kept_one_per_key() {
        use crate::core::aaa::SubscriberRecord;
        use crate::core::subscriber_page::RecordKey;
        let path = fresh("subscribers");
        let rec = |mac: &str, plan: &str| {
            SubscriberChange::Added(SubscriberRecord {
                mac: Some(mac.into()),
                circuit_id: None,
                remote_id: None,
                plan: Some(plan.into()),
                ipv4: None,
                pool: None,
            })
        };
        {
            let s = Store::open(&path).unwrap();
            s.apply(
                &[
                    StoreOp::Subscriber(rec("02:00:00:00:00:01", "gold")),
                    StoreOp::Subscriber(rec("02:00:00:00:00:02", "gold")),
                    StoreOp::Put(Box::new(session(1))),
                ],
                2,
            )
            .unwrap();
            s.apply(
                &[
                    StoreOp::Subscriber(rec("02:00:00:00:00:01", "silver")),
                    StoreOp::Subscriber(SubscriberChange::Removed(RecordKey::Mac([
                        2, 0, 0, 0, 0, 2,
                    ]))),
                    StoreOp::Subscriber(SubscriberChange::Removed(RecordKey::Mac([
                        2, 0, 0, 0, 0, 3,
                    ]))),
                ],
                2,
            )
            .unwrap();
        }
        let s = Store::open(&path).unwrap();
        let (changes, bad) = s.subscriber_changes().unwrap();
        assert!(bad.is_empty(), "{bad:?}");
        assert_eq!(
            changes,
            [
                rec("02:00:00:00:00:01", "silver"),
                SubscriberChange::Removed(RecordKey::Mac([2, 0, 0, 0, 0, 2])),
                SubscriberChange::Removed(RecordKey::Mac([2, 0, 0, 0, 0, 3])),
            ]
        );
        assert_eq!(s.load().unwrap().0, [session(1)], "sessions untouched");
        drop(s);
        let _ = std::fs::remove_file(&path);
    }

    #[test]
    fn the_subscribers_files_content_in_force_is_kept_and_replaced() {
        let path = fresh("subscribers-file");
        {
            let s = Store::open(&path).unwrap();
            assert_eq!(s.subscribers_file().unwrap(), None, "a fresh store");
            s.keep_subscribers_file("02:00:00:00:00:01,,,gold\n")
                .unwrap();
            s.apply(
                &[
                    StoreOp::Put(Box::new(session(1))),
                    StoreOp::SubscribersFile("02:00:00:00:00:02,,,gold\n".into()),
                ],
                2,
            )
            .unwrap();
        }
        let s = Store::open(&path).unwrap();
        assert_eq!(
            s.subscribers_file().unwrap().as_deref(),
            Some("02:00:00:00:00:02,,,gold\n")
        );
        assert_eq!(s.load().unwrap().0, [session(1)]);
        drop(s);
        let _ = std::fs::remove_file(&path);
    }

    #[test]
    fn rows_come_in_chunks_in_id_order() {
        let path = fresh("chunks");
        let s = Store::open(&path).unwrap();
        s.apply(&puts(1..=5), 9).unwrap();
        let mut chunks = Vec::new();
        let next = s
            .load_chunked(2, |c| {
                chunks.push(c.iter().map(|s| s.id).collect::<Vec<_>>())
            })
            .unwrap();
        assert_eq!(chunks, vec![vec![1, 2], vec![3, 4], vec![5]]);
        assert_eq!(next, 9);
        drop(s);
        let _ = std::fs::remove_file(&path);
    }

    #[test]
    fn a_store_of_json_rows_loads_and_is_rewritten_as_it_changes() {
        let path = fresh("json");
        {
            // As the first format wrote them.
            let db = Database::create(&path).unwrap();
            let tx = db.begin_write().unwrap();
            {
                let mut t = tx.open_table(SESSIONS).unwrap();
                for i in 1..=3 {
                    let json = serde_json::to_vec(&session(i)).unwrap();
                    t.insert(i, json.as_slice()).unwrap();
                }
                tx.open_table(META).unwrap().insert(NEXT_ID, 4).unwrap();
            }
            tx.commit().unwrap();
        }
        let s = Store::open(&path).unwrap();
        let (loaded, next) = s.load().unwrap();
        assert_eq!(loaded, (1..=3).map(session).collect::<Vec<_>>());
        assert_eq!(next, 4);
        s.apply(&[StoreOp::Put(Box::new(session(2)))], 4).unwrap();
        let first_byte = |id: u64| {
            let tx = s.db.begin_read().unwrap();
            let t = tx.open_table(SESSIONS).unwrap();
            t.get(id).unwrap().unwrap().value()[0]
        };
        assert_eq!((first_byte(1), first_byte(2)), (b'{', 1));
        assert_eq!(
            s.load().unwrap().0,
            (1..=3).map(session).collect::<Vec<_>>()
        );
        drop(s);
        let _ = std::fs::remove_file(&path);
    }
}
