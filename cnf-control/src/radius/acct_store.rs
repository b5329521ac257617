//! The accounting's counters on disk, so that the totals an interim reports survive a restart of
//! the control as well as of a dataplane.
//!
//! A session's totals are what earlier dataplane boots counted (`carried`) plus the last
//! reading. Kept in memory only, a control restart lost `carried`: if a dataplane had restarted
//! during the session, its next interim fell back to the new boot's counters, and a billing
//! server that keeps the last interim lost the traffic before. The last reading is kept too, so
//! that a dataplane that restarts while the control is down is seen as a new boot. So is an
//! interim interval set by the Access-Accept: restored on the configured one (often none),
//! such a session had no more interims after a restart.
//!
//! A file of its own beside the session store, written by a thread of its own: the session
//! store's commits hold back DHCP ACKs (`crate::commit`), and a round of interims must not
//! queue behind them or delay them. Each row names its session's bind time, so a row left
//! from an earlier store (ids restart from 1 when the session store is replaced) is dropped.

use std::path::{Path, PathBuf};
use std::sync::mpsc as std_mpsc;

use redb::{Database, ReadableDatabase, ReadableTable, TableDefinition};
use tokio::sync::mpsc;

use super::RadiusEvent;
use super::accounting::{AcctSession, Counts, IdleSeen, Reading};
use crate::core::SessionId;

const ROWS: TableDefinition<u64, &[u8]> = TableDefinition::new("accounting");

/// Rows are written in groups and read once, in order, at start: a small cache will do.
const CACHE_BYTES: usize = 4 << 20;

/// Most changes in one transaction; more wait for the next.
const GROUP_MAX: usize = 50_000;

/// A group smaller than this waits [`GATHER_WINDOW`] for more before it commits: a commit
/// costs much the same whatever its size. Measured in release with rows arriving 20 at a time
/// every 0.8 ms (Starts with a Class at about 22,000 a second): 12.1 µs of CPU a row
/// committed as they came, 3.2-3.5 µs with the window. Nothing waits on these rows, and a few
/// milliseconds more before they are on the disk change nothing.
const GATHER_OPS: usize = 256;
const GATHER_WINDOW: std::time::Duration = std::time::Duration::from_millis(5);

const FORMAT: u8 = 1;
/// The fixed part of a row; the Class values follow it (a count, then each with its length),
/// then the Idle-Timeout (4 bytes) when the session has one.
const FIXED_LEN: usize = 1 + 8 + 4 + 32 + 1 + 8 + 32;

/// The accounting file beside the session store `store`.
pub fn path_beside(store: &Path) -> PathBuf {
    let mut name = store.file_name().unwrap_or_default().to_os_string();
    name.push(".accounting");
    store.with_file_name(name)
}

/// What is kept of one session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Kept {
    /// The session's bind time: with its id, which session the row belongs to.
    pub bound_at_ns: u64,
    /// The interim interval, which an Access-Accept may have set for this session alone.
    pub interim_secs: u32,
    pub carried: Counts,
    pub raw: Option<Reading>,
    /// The Access-Accept's Class attributes.
    pub class: Vec<Vec<u8>>,
    /// The Access-Accept's Idle-Timeout; 0 = none.
    pub idle_secs: u32,
    /// The last sighting of upstream traffic, with an Idle-Timeout only.
    pub idle_seen: Option<IdleSeen>,
}

impl Kept {
    pub fn of(s: &AcctSession) -> Kept {
        Kept {
            bound_at_ns: s.bound_at_ns,
            interim_secs: s.interim_secs,
            carried: s.carried,
            raw: s.raw,
            class: s.class.clone(),
            idle_secs: s.idle_secs,
            idle_seen: s.idle_seen.filter(|_| s.idle_secs > 0),
        }
    }
}

fn put_counts(out: &mut Vec<u8>, c: &Counts) {
    for v in [c.in_octets, c.in_packets, c.out_octets, c.out_packets] {
        out.extend_from_slice(&v.to_le_bytes());
    }
}

fn encode(k: &Kept, out: &mut Vec<u8>) {
    out.push(FORMAT);
    out.extend_from_slice(&k.bound_at_ns.to_le_bytes());
    out.extend_from_slice(&k.interim_secs.to_le_bytes());
    put_counts(out, &k.carried);
    let r = k.raw.unwrap_or(Reading {
        boot_id: 0,
        counts: Counts::default(),
    });
    out.push(u8::from(k.raw.is_some()));
    out.extend_from_slice(&r.boot_id.to_le_bytes());
    put_counts(out, &r.counts);
    // An attribute's value is at most 253 bytes, and a packet of 4,096 holds fewer than
    // 65,536 of them, so neither length is cut.
    out.extend_from_slice(&(k.class.len() as u16).to_le_bytes());
    for c in &k.class {
        out.push(c.len() as u8);
        out.extend_from_slice(c);
    }
    if k.idle_secs > 0 {
        out.extend_from_slice(&k.idle_secs.to_le_bytes());
        if let Some(seen) = k.idle_seen {
            out.extend_from_slice(&seen.packets.to_le_bytes());
            out.extend_from_slice(&seen.at_unix_secs.to_le_bytes());
        }
    }
}

fn decode(b: &[u8]) -> Option<Kept> {
    if b.len() < FIXED_LEN + 2 || b[0] != FORMAT {
        return None;
    }
    let u = |at: usize| u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"));
    let counts = |at: usize| Counts {
        in_octets: u(at),
        in_packets: u(at + 8),
        out_octets: u(at + 16),
        out_packets: u(at + 24),
    };
    let raw = match b[45] {
        0 => None,
        1 => Some(Reading {
            boot_id: u(46),
            counts: counts(54),
        }),
        _ => return None,
    };
    let n = u16::from_le_bytes([b[FIXED_LEN], b[FIXED_LEN + 1]]);
    let mut rest = &b[FIXED_LEN + 2..];
    let mut class = Vec::with_capacity(usize::from(n).min(rest.len()));
    for _ in 0..n {
        let (&len, tail) = rest.split_first()?;
        let (c, tail) = tail.split_at_checked(usize::from(len))?;
        class.push(c.to_vec());
        rest = tail;
    }
    // The tail: nothing, an Idle-Timeout, or one and its last sighting. Zero is never
    // written: a session without an Idle-Timeout has no tail.
    let (idle, seen) = match rest.len() {
        0 => (None, None),
        4 => (Some(rest), None),
        20 => (Some(&rest[..4]), Some(&rest[4..])),
        _ => return None,
    };
    let idle_secs = match idle {
        None => 0,
        Some(b) => std::num::NonZeroU32::new(u32::from_le_bytes(b.try_into().ok()?))?.get(),
    };
    let idle_seen = seen.map(|b| IdleSeen {
        packets: u64::from_le_bytes(b[..8].try_into().expect("8 bytes")),
        at_unix_secs: u64::from_le_bytes(b[8..].try_into().expect("8 bytes")),
    });
    Some(Kept {
        bound_at_ns: u(1),
        interim_secs: u32::from_le_bytes(b[9..13].try_into().expect("4 bytes")),
        carried: counts(13),
        raw,
        class,
        idle_secs,
        idle_seen,
    })
}

#[derive(Debug, thiserror::Error)]
pub enum AcctStoreError {
    #[error("accounting store {path}: {source}")]
    Db {
        path: PathBuf,
        #[source]
        source: redb::Error,
    },
}

/// The accounting file.
#[derive(Debug)]
pub struct AcctStore {
    db: Database,
    path: PathBuf,
}

impl AcctStore {
    pub fn open(path: &Path) -> Result<AcctStore, AcctStoreError> {
        let err = |e: redb::Error| AcctStoreError::Db {
            path: path.to_path_buf(),
            source: e,
        };
        let db = Database::builder()
            .set_cache_size(CACHE_BYTES)
            .create(path)
            .map_err(|e| err(e.into()))?;
        let s = AcctStore {
            db,
            path: path.to_path_buf(),
        };
        s.write(&[], &[])?;
        Ok(s)
    }

    fn err(&self, e: impl Into<redb::Error>) -> AcctStoreError {
        AcctStoreError::Db {
            path: self.path.clone(),
            source: e.into(),
        }
    }

    /// Puts and deletes in one transaction.
    pub fn write(
        &self,
        puts: &[(SessionId, Kept)],
        deletes: &[SessionId],
    ) -> Result<(), AcctStoreError> {
        let tx = self.db.begin_write().map_err(|e| self.err(e))?;
        {
            let mut t = tx.open_table(ROWS).map_err(|e| self.err(e))?;
            let mut v = Vec::with_capacity(FIXED_LEN + 2);
            for (id, k) in puts {
                v.clear();
                encode(k, &mut v);
                t.insert(*id, v.as_slice()).map_err(|e| self.err(e))?;
            }
            for id in deletes {
                t.remove(*id).map_err(|e| self.err(e))?;
            }
        }
        tx.commit().map_err(|e| self.err(e))
    }

    /// Gives each of `sessions` (restored from the session store) what was kept of it, and
    /// deletes the rows of sessions that are gone. Returns how many had a row.
    pub fn restore(&self, sessions: &mut [AcctSession]) -> Result<usize, AcctStoreError> {
        // Rows are matched by a search of the sessions sorted by id, not through a map of
        // every row, which at a million sessions would hold about 130 MB through the start.
        sessions.sort_unstable_by_key(|s| s.subject.id);
        let mut given = 0;
        let mut bad = 0;
        let mut stale = Vec::new();
        {
            let tx = self.db.begin_read().map_err(|e| self.err(e))?;
            let t = tx.open_table(ROWS).map_err(|e| self.err(e))?;
            for row in t.iter().map_err(|e| self.err(e))? {
                let (k, v) = row.map_err(|e| self.err(e))?;
                let id = k.value();
                let at = sessions.binary_search_by_key(&id, |s| s.subject.id);
                match (decode(v.value()), at) {
                    (Some(k), Ok(at)) if k.bound_at_ns == sessions[at].bound_at_ns => {
                        let s = &mut sessions[at];
                        s.interim_secs = k.interim_secs;
                        s.carried = k.carried;
                        s.raw = k.raw;
                        s.class = k.class;
                        s.idle_secs = k.idle_secs;
                        s.idle_seen = k.idle_seen;
                        given += 1;
                    }
                    (None, _) => {
                        bad += 1;
                        stale.push(id);
                    }
                    _ => stale.push(id),
                }
            }
        }
        if bad > 0 {
            tracing::warn!(rows = bad, path = %self.path.display(), "accounting rows that do not decode are deleted");
        }
        if !stale.is_empty() {
            self.write(&[], &stale)?;
        }
        Ok(given)
    }
}

/// One change for the writer.
#[derive(Debug)]
pub enum Op {
    Put(SessionId, Kept),
    Delete(SessionId),
}

/// The writer thread: each wake-up commits every change queued meanwhile in one transaction,
/// so a round of interims costs one commit, however many sessions it read.
#[derive(Debug, Clone)]
pub struct Writer {
    tx: std_mpsc::Sender<Op>,
}

impl Writer {
    /// The thread ends once every `Writer` is dropped and what they sent is written.
    pub fn spawn(
        store: AcctStore,
        events: mpsc::Sender<RadiusEvent>,
    ) -> std::io::Result<(Writer, std::thread::JoinHandle<()>)> {
        let (tx, rx) = std_mpsc::channel::<Op>();
        let thread = std::thread::Builder::new()
            .name("kbng-acct-store".into())
            .spawn(move || {
                while let Ok(first) = rx.recv() {
                    let mut ops = vec![first];
                    let take = |ops: &mut Vec<Op>| {
                        while ops.len() < GROUP_MAX {
                            match rx.try_recv() {
                                Ok(op) => ops.push(op),
                                Err(_) => break,
                            }
                        }
                    };
                    take(&mut ops);
                    if ops.len() < GATHER_OPS {
                        std::thread::sleep(GATHER_WINDOW);
                        take(&mut ops);
                    }
                    let mut puts = Vec::with_capacity(ops.len());
                    let mut deletes = Vec::new();
                    for op in ops {
                        match op {
                            Op::Put(id, k) => puts.push((id, k)),
                            Op::Delete(id) => deletes.push(id),
                        }
                    }
                    // A put queued after its session's delete would bring the row back; a
                    // stopped session gets no more reads, so deletes apply last.
                    if let Err(e) = store.write(&puts, &deletes) {
                        tracing::error!("{e}");
                        let n = (puts.len() + deletes.len()) as u64;
                        let c = vec![("RADIUS accounting counters not stored", n)];
                        if events.blocking_send(RadiusEvent::Counts(c)).is_err() {
                            return;
                        }
                    }
                }
            })?;
        Ok((Writer { tx }, thread))
    }

    pub fn send(&self, op: Op) {
        // The thread ends only when the channel closes, so this cannot fail while we hold it.
        let _ = self.tx.send(op);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    /// Every row that decodes; `bad` counts the others.
    fn load(st: &AcctStore) -> Result<(HashMap<SessionId, Kept>, usize), AcctStoreError> {
        let tx = st.db.begin_read().map_err(|e| st.err(e))?;
        let t = tx.open_table(ROWS).map_err(|e| st.err(e))?;
        let mut out = HashMap::new();
        let mut bad = 0;
        for row in t.iter().map_err(|e| st.err(e))? {
            let (k, v) = row.map_err(|e| st.err(e))?;
            match decode(v.value()) {
                Some(kept) => {
                    out.insert(k.value(), kept);
                }
                None => bad += 1,
            }
        }
        Ok((out, bad))
    }

    fn fresh(name: &str) -> PathBuf {
        let p = std::env::temp_dir().join(format!("kbng-acct-{name}-{}", std::process::id()));
        let _ = std::fs::remove_file(&p);
        p
    }

    fn counts(n: u64) -> Counts {
        Counts {
            in_octets: n,
            in_packets: n + 1,
            out_octets: n + 2,
            out_packets: n + 3,
        }
    }

    /// With `raw`, a reading and two Class values (one of the longest an attribute holds).
    fn kept(bound: u64, raw: bool) -> Kept {
        Kept {
            bound_at_ns: bound,
            interim_secs: 300,
            carried: counts(100),
            raw: raw.then_some(Reading {
                boot_id: 7,
                counts: counts(u64::MAX - 3),
            }),
            class: if raw {
                vec![b"billing-7".to_vec(), vec![0xa5; 253]]
            } else {
                vec![]
            },
            idle_secs: if raw { 600 } else { 0 },
            idle_seen: raw.then_some(IdleSeen {
                packets: u64::MAX - 2,
                at_unix_secs: 1_780_000_000,
            }),
        }
    }

    #[test]
    fn rows_round_trip_and_others_are_refused() {
        for (k, len) in [
            (kept(1, true), FIXED_LEN + 2 + 10 + 254 + 4 + 16),
            (kept(u64::MAX, false), FIXED_LEN + 2),
        ] {
            let mut v = Vec::new();
            encode(&k, &mut v);
            assert_eq!(v.len(), len);
            assert_eq!(decode(&v), Some(k.clone()));
            let mut other = v.clone();
            other[0] = 2;
            assert_eq!(decode(&other), None, "another format");
            other = v.clone();
            other[45] = 9;
            assert_eq!(decode(&other), None, "a raw flag that is neither");
            assert_eq!(decode(&v[..len - 1]), None, "short");
            other = v.clone();
            other.push(0);
            assert_eq!(decode(&other), None, "a byte past the Class values");
            if k.idle_secs == 0 {
                other = v.clone();
                other.extend([0; 4]);
                assert_eq!(
                    decode(&other),
                    None,
                    "an Idle-Timeout of zero is never written"
                );
            }
            if k.idle_seen.is_some() {
                let older = decode(&v[..len - 16]).expect("a row without a sighting decodes");
                assert_eq!(older.idle_seen, None, "as an older build wrote it");
                assert_eq!(older.idle_secs, k.idle_secs);
                other = v.clone();
                other[len - 20..len - 16].copy_from_slice(&[0; 4]);
                assert_eq!(decode(&other), None, "a sighting without an Idle-Timeout");
            }
            other = v.clone();
            other[FIXED_LEN] += 1;
            assert_eq!(decode(&other), None, "one Class value more than there is");
        }
    }

    #[test]
    fn arbitrary_bytes_never_panic() {
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        for n in 0..20_000 {
            let len = n % (FIXED_LEN + 40);
            let b: Vec<u8> = (0..len)
                .map(|_| {
                    seed ^= seed << 13;
                    seed ^= seed >> 7;
                    seed ^= seed << 17;
                    seed as u8
                })
                .collect();
            let mut with_format = b.clone();
            if let Some(f) = with_format.first_mut() {
                *f = FORMAT;
            }
            let _ = (decode(&b), decode(&with_format));
        }
    }

    #[test]
    fn the_file_sits_beside_the_store() {
        assert_eq!(
            path_beside(Path::new("/var/lib/kbng/sessions.redb")),
            PathBuf::from("/var/lib/kbng/sessions.redb.accounting")
        );
    }

    #[test]
    fn restore_gives_each_session_its_own_row_and_drops_the_rest() {
        use crate::radius::accounting::tests::session;
        let path = fresh("restore");
        {
            let st = AcctStore::open(&path).unwrap();
            // 1: kept; 2: the same id but another bind time (an earlier store's session);
            // 3: a session that ended while the control was down; 4: a row that does not
            // decode (a later format).
            st.write(
                &[
                    (1, kept(10, true)),
                    (2, kept(99, true)),
                    (3, kept(30, false)),
                ],
                &[],
            )
            .unwrap();
            let tx = st.db.begin_write().unwrap();
            tx.open_table(ROWS)
                .unwrap()
                .insert(4, [9u8; 3].as_slice())
                .unwrap();
            tx.commit().unwrap();
        }
        let st = AcctStore::open(&path).unwrap();
        let mut s1 = session();
        s1.subject.id = 1;
        s1.bound_at_ns = 10;
        (s1.carried, s1.raw) = (Counts::default(), None);
        let mut s2 = s1.clone();
        s2.subject.id = 2;
        s2.bound_at_ns = 20;
        let mut s4 = s1.clone();
        s4.subject.id = 4;
        // In reverse order: the restore sorts them.
        let mut v = vec![s4, s2, s1];
        assert_eq!(st.restore(&mut v).unwrap(), 1);
        assert_eq!(
            v.iter().map(|s| s.subject.id).collect::<Vec<_>>(),
            [1, 2, 4]
        );
        assert_eq!(Kept::of(&v[0]), kept(10, true));
        for s in &v[1..] {
            assert_eq!((s.carried, s.raw), (Counts::default(), None));
        }
        let (rows, bad) = load(&st).unwrap();
        assert_eq!(bad, 0, "the row that does not decode is gone");
        assert_eq!(
            rows.keys().collect::<Vec<_>>(),
            vec![&1],
            "only the restored session's row is left"
        );
        drop(st);
        let _ = std::fs::remove_file(&path);
    }

    #[test]
    fn the_writer_commits_puts_and_deletes() {
        let path = fresh("writer");
        let (etx, _erx) = mpsc::channel(4);
        let (w, thread) = Writer::spawn(AcctStore::open(&path).unwrap(), etx).unwrap();
        w.send(Op::Put(1, kept(1, true)));
        w.send(Op::Put(2, kept(2, false)));
        w.send(Op::Delete(1));
        drop(w);
        thread.join().unwrap();
        let (rows, bad) = load(&AcctStore::open(&path).unwrap()).unwrap();
        assert_eq!(bad, 0);
        assert_eq!(rows, HashMap::from([(2, kept(2, false))]));
        let _ = std::fs::remove_file(&path);
    }
}
