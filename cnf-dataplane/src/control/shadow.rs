//! The control thread's shadow of what every worker holds.
//!
//! Every change is validated completely before anything is mutated (a rejected batch changes
//! nothing), then applied to the shadow and turned into the worker commands that make each
//! worker's tables equal to it. Workers apply exactly those commands in order, so once they
//! have acknowledged, listing the shadow is listing the dataplane (the resync test enumerates
//! sessions through gRPC and checks them against traffic).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use kbng_api::ApiError;
use kbng_api::v1 as pb;

use super::convert::SessionSpec;
use crate::command::Command;
use crate::nodes::walled_garden::WalledGardenRule;
use crate::tables::{Plan, Session, SessionKey};

/// The session indexes' hash: every install and remove looks each session up several
/// times, and SipHash (std's default) was a visible share of the control thread's install
/// path. ahash keeps per-process random keys, so the maps stay unpredictable.
type FastMap<K, V> = HashMap<K, V, ahash::RandomState>;
type FastSet<T> = HashSet<T, ahash::RandomState>;

/// A plan as held by the shadow.
#[derive(Debug, Clone)]
pub struct ShadowPlan {
    /// Worker plan slot (0 is reserved for "no plan").
    pub slot: u16,
    /// As installed, for listing.
    pub proto: pb::Plan,
    /// As applied.
    pub plan: Plan,
}

/// Outcome of an install batch.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct InstallOutcome {
    /// New sessions.
    pub created: u32,
    /// Identical re-installs.
    pub unchanged: u32,
}

/// The session id in each slot, readable without the control lock: the punt pump attributes
/// punted frames with it while a programming call may hold the lock, waiting for the workers
/// to acknowledge (before, every punted frame of a session waited behind that call, and
/// every frame after it in the rings). One writer, the shadow, under the lock.
#[derive(Debug, Clone)]
pub struct SlotIds(Arc<[AtomicU64]>);

impl SlotIds {
    fn new(slots: u32) -> Self {
        Self((0..slots).map(|_| AtomicU64::new(0)).collect())
    }

    /// The session in `slot`, `None` when the slot is free or out of range.
    pub fn get(&self, slot: u32) -> Option<u64> {
        self.0
            .get(slot as usize)
            .map(|id| id.load(Ordering::Relaxed))
            .filter(|&id| id != 0)
    }

    fn set(&self, slot: u32, id: u64) {
        if let Some(x) = self.0.get(slot as usize) {
            x.store(id, Ordering::Relaxed);
        }
    }
}

/// The shadow tables.
#[derive(Debug)]
pub struct Shadow {
    capacity: u32,
    sessions: BTreeMap<u64, (SessionSpec, u32)>,
    by_key: FastMap<SessionKey, u64>,
    by_ip: FastMap<u32, u64>,
    free: Vec<u32>,
    next_slot: u32,
    slot_ids: SlotIds,
    plan_capacity: u16,
    plans: BTreeMap<u32, ShadowPlan>,
    plan_users: HashMap<u32, u32>,
    free_plan_slots: Vec<u16>,
    next_plan_slot: u16,
    access: pb::AccessConfig,
}

impl Shadow {
    /// A shadow for `capacity` sessions and `plan_capacity` plan slots (slot 0 reserved).
    /// The key and address indexes are sized for `capacity` at start, like the workers'
    /// tables: growing them by rehash held the control thread for milliseconds at a few
    /// hundred thousand sessions, with an install call's lock held.
    pub fn new(capacity: u32, plan_capacity: u16) -> Self {
        let room = capacity as usize;
        Self {
            capacity,
            sessions: BTreeMap::new(),
            by_key: FastMap::with_capacity_and_hasher(room, Default::default()),
            by_ip: FastMap::with_capacity_and_hasher(room, Default::default()),
            free: Vec::new(),
            next_slot: 0,
            slot_ids: SlotIds::new(capacity),
            plan_capacity,
            plans: BTreeMap::new(),
            plan_users: HashMap::new(),
            free_plan_slots: Vec::new(),
            next_plan_slot: 1,
            access: pb::AccessConfig::default(),
        }
    }

    /// Sessions held.
    pub fn len(&self) -> usize {
        self.sessions.len()
    }
    /// No sessions held.
    pub fn is_empty(&self) -> bool {
        self.sessions.is_empty()
    }
    /// Plans held.
    pub fn plan_count(&self) -> usize {
        self.plans.len()
    }
    /// Slot of a session.
    pub fn slot(&self, id: u64) -> Option<u32> {
        self.sessions.get(&id).map(|x| x.1)
    }
    /// A handle on the slot → session id map (punt attribution) that reads without the
    /// control lock.
    pub fn slot_ids(&self) -> SlotIds {
        self.slot_ids.clone()
    }
    /// Session id by upstream key.
    pub fn id_by_key(&self, key: &SessionKey) -> Option<u64> {
        self.by_key.get(key).copied()
    }
    /// Sessions with id > `after`, at most `n`, in id order.
    pub fn page(&self, after: u64, n: usize) -> Vec<SessionSpec> {
        self.sessions
            .range(after.saturating_add(1)..)
            .take(n)
            .map(|(_, v)| v.0)
            .collect()
    }
    /// Appends (slot, session id, plan id) of up to `n` sessions with ids above `after`, in id
    /// order, to `out`; returns the last id appended, `None` when there was none. A cursor for
    /// readers that must not hold the control lock over every session at once.
    pub fn slots_after(&self, after: u64, n: usize, out: &mut Vec<(u32, u64, u32)>) -> Option<u64> {
        let mut last = None;
        for (&id, (spec, slot)) in self.sessions.range(after.saturating_add(1)..).take(n) {
            out.push((*slot, id, spec.plan_id));
            last = Some(id);
        }
        last
    }
    /// All plans, in id order.
    pub fn plans(&self) -> impl Iterator<Item = &ShadowPlan> {
        self.plans.values()
    }

    fn plan_slot(&self, plan_id: u32) -> Option<u16> {
        if plan_id == 0 {
            return Some(0);
        }
        self.plans.get(&plan_id).map(|p| p.slot)
    }

    fn worker_session(&self, s: &SessionSpec) -> Session {
        Session {
            key: s.key,
            ipv4: s.ipv4,
            plan: self.plan_slot(s.plan_id).unwrap_or(0),
            captive: s.captive,
            active: true,
        }
    }

    /// Install a batch (idempotent per id). All-or-nothing.
    pub fn install_sessions(
        &mut self,
        specs: &[SessionSpec],
        out: &mut Vec<Command>,
    ) -> Result<InstallOutcome, ApiError> {
        // Validate everything first.
        let mut new_keys: FastMap<SessionKey, u64> = FastMap::default();
        let mut new_ips: FastMap<u32, u64> = FastMap::default();
        let mut new_ids: FastMap<u64, SessionSpec> = FastMap::default();
        let mut outcome = InstallOutcome::default();
        for (i, s) in specs.iter().enumerate() {
            // Named only in an error: formatting it for every session cost an allocation each.
            let at = |field: &str| format!("sessions[{i}].{field}");
            if let Some((old, _)) = self.sessions.get(&s.id) {
                if old == s {
                    outcome.unchanged += 1;
                    continue;
                }
                return Err(ApiError::AlreadyExists {
                    kind: "session",
                    id: s.id.to_string(),
                });
            }
            if let Some(prev) = new_ids.get(&s.id) {
                if prev == s {
                    outcome.unchanged += 1;
                    continue;
                }
                return Err(ApiError::invalid(
                    at("session_id"),
                    format!("session {} appears twice with different contents", s.id),
                ));
            }
            if self.plan_slot(s.plan_id).is_none() {
                return Err(ApiError::invalid(
                    at("plan_id"),
                    format!("unknown plan {}", s.plan_id),
                ));
            }
            if let Some(other) = self.by_key.get(&s.key).or(new_keys.get(&s.key)) {
                return Err(ApiError::invalid(
                    at("mac"),
                    format!("(port, VLANs, MAC) already used by session {other}"),
                ));
            }
            if let Some(other) = self.by_ip.get(&s.ipv4).or(new_ips.get(&s.ipv4)) {
                return Err(ApiError::invalid(
                    at("ipv4"),
                    format!("address already used by session {other}"),
                ));
            }
            new_keys.insert(s.key, s.id);
            new_ips.insert(s.ipv4, s.id);
            new_ids.insert(s.id, *s);
            outcome.created += 1;
        }
        let free = (self.capacity - self.next_slot) as usize + self.free.len();
        if new_ids.len() > free {
            return Err(ApiError::ResourceExhausted(format!(
                "{} new sessions, room for {free} (capacity {})",
                new_ids.len(),
                self.capacity
            )));
        }
        // Apply.
        let mut seen = FastSet::default();
        for s in specs {
            if !new_ids.contains_key(&s.id) || !seen.insert(s.id) {
                continue;
            }
            let slot = match self.free.pop() {
                Some(x) => x,
                None => {
                    self.next_slot += 1;
                    self.next_slot - 1
                }
            };
            self.sessions.insert(s.id, (*s, slot));
            self.slot_ids.set(slot, s.id);
            self.by_key.insert(s.key, s.id);
            self.by_ip.insert(s.ipv4, s.id);
            if s.plan_id != 0 {
                *self.plan_users.entry(s.plan_id).or_default() += 1;
            }
            out.push(Command::UpsertSession {
                slot,
                session: self.worker_session(s),
            });
        }
        Ok(outcome)
    }

    /// Change plan and captive flag. All-or-nothing; unknown ids are NotFound.
    pub fn modify_sessions(
        &mut self,
        changes: &[pb::SessionChange],
        out: &mut Vec<Command>,
    ) -> Result<u32, ApiError> {
        for (i, c) in changes.iter().enumerate() {
            if !self.sessions.contains_key(&c.session_id) {
                return Err(ApiError::not_found("session", c.session_id));
            }
            if self.plan_slot(c.plan_id).is_none() {
                return Err(ApiError::invalid(
                    format!("changes[{i}].plan_id"),
                    format!("unknown plan {}", c.plan_id),
                ));
            }
        }
        for c in changes {
            let Some((spec, slot)) = self.sessions.get(&c.session_id).copied() else {
                continue;
            };
            let new = SessionSpec {
                plan_id: c.plan_id,
                captive: c.captive,
                ..spec
            };
            if spec.plan_id != 0
                && let Some(n) = self.plan_users.get_mut(&spec.plan_id)
            {
                *n = n.saturating_sub(1);
            }
            if new.plan_id != 0 {
                *self.plan_users.entry(new.plan_id).or_default() += 1;
            }
            self.sessions.insert(c.session_id, (new, slot));
            out.push(Command::UpsertSession {
                slot,
                session: self.worker_session(&new),
            });
        }
        Ok(changes.len() as u32)
    }

    /// Remove sessions. All-or-nothing; an unknown id is NotFound.
    pub fn remove_sessions(
        &mut self,
        ids: &[u64],
        out: &mut Vec<Command>,
    ) -> Result<u32, ApiError> {
        if let Some(id) = ids.iter().find(|id| !self.sessions.contains_key(id)) {
            return Err(ApiError::not_found("session", id));
        }
        let mut n = 0;
        for id in ids {
            let Some((spec, slot)) = self.sessions.remove(id) else {
                continue; // a duplicate id in the batch
            };
            self.by_key.remove(&spec.key);
            self.by_ip.remove(&spec.ipv4);
            if spec.plan_id != 0
                && let Some(u) = self.plan_users.get_mut(&spec.plan_id)
            {
                *u = u.saturating_sub(1);
            }
            self.free.push(slot);
            self.slot_ids.set(slot, 0);
            out.push(Command::RemoveSession { slot });
            n += 1;
        }
        Ok(n)
    }

    /// Install or replace plans (already validated into `plans`). All-or-nothing.
    pub fn install_plans(
        &mut self,
        plans: Vec<(pb::Plan, Plan)>,
        out: &mut Vec<Command>,
    ) -> Result<u32, ApiError> {
        let mut ids = std::collections::HashSet::new();
        let new = plans
            .iter()
            .filter(|(p, _)| !self.plans.contains_key(&p.plan_id) && ids.insert(p.plan_id))
            .count();
        let room = usize::from(self.plan_capacity.saturating_sub(self.next_plan_slot))
            + self.free_plan_slots.len();
        if new > room {
            return Err(ApiError::ResourceExhausted(format!(
                "{new} new plans, room for {room}"
            )));
        }
        let n = plans.len() as u32;
        for (proto, plan) in plans {
            let slot = match self.plans.get(&proto.plan_id) {
                Some(p) => p.slot,
                None => match self.free_plan_slots.pop() {
                    Some(s) => s,
                    None => {
                        self.next_plan_slot += 1;
                        self.next_plan_slot - 1
                    }
                },
            };
            out.push(Command::SetPlan { slot, plan });
            self.plans
                .insert(proto.plan_id, ShadowPlan { slot, proto, plan });
        }
        Ok(n)
    }

    /// Remove plans: unknown is NotFound, in use is FailedPrecondition. All-or-nothing.
    pub fn remove_plans(&mut self, ids: &[u32], out: &mut Vec<Command>) -> Result<u32, ApiError> {
        for id in ids {
            if !self.plans.contains_key(id) {
                return Err(ApiError::not_found("plan", id));
            }
            let users = self.plan_users.get(id).copied().unwrap_or(0);
            if users > 0 {
                return Err(ApiError::FailedPrecondition(format!(
                    "plan {id} is used by {users} sessions"
                )));
            }
        }
        let mut n = 0;
        for id in ids {
            if let Some(p) = self.plans.remove(id) {
                out.push(Command::SetPlan {
                    slot: p.slot,
                    plan: Plan::default(),
                });
                self.free_plan_slots.push(p.slot);
                n += 1;
            }
        }
        Ok(n)
    }

    /// Replace the access configuration (already validated).
    pub fn set_access(
        &mut self,
        proto: pb::AccessConfig,
        gateways: &[u32],
        rules: &[WalledGardenRule],
        redirect_http: bool,
        out: &mut Vec<Command>,
    ) {
        out.push(Command::AccessBegin);
        out.extend(gateways.iter().map(|g| Command::AccessGateway(*g)));
        out.extend(rules.iter().map(|r| Command::AccessRule(*r)));
        out.push(Command::AccessCommit { redirect_http });
        self.access = proto;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(id: u64) -> SessionSpec {
        SessionSpec {
            id,
            key: SessionKey {
                port: 0,
                outer_vid: 10,
                inner_vid: 0,
                mac: [2, 0, 0, 0, 0, id as u8],
            },
            ipv4: 0x6440_0000 + id as u32,
            plan_id: 0,
            captive: false,
        }
    }

    #[test]
    fn install_is_idempotent_and_atomic() {
        let mut sh = Shadow::new(4, 8);
        let mut cmds = Vec::new();
        let o = sh.install_sessions(&[spec(1), spec(2)], &mut cmds).unwrap();
        assert_eq!(
            o,
            InstallOutcome {
                created: 2,
                unchanged: 0
            }
        );
        assert_eq!(cmds.len(), 2);
        cmds.clear();
        let o = sh.install_sessions(&[spec(1)], &mut cmds).unwrap();
        assert_eq!(
            o,
            InstallOutcome {
                created: 0,
                unchanged: 1
            }
        );
        assert!(cmds.is_empty());
        // A batch whose third item collides is rejected whole.
        let mut clash = spec(9);
        clash.ipv4 = spec(1).ipv4;
        let e = sh
            .install_sessions(&[spec(3), spec(4), clash], &mut cmds)
            .unwrap_err();
        assert!(e.to_string().contains("sessions[2].ipv4"));
        assert!(cmds.is_empty());
        assert_eq!(sh.len(), 2);
        // Unknown plan.
        let mut p = spec(5);
        p.plan_id = 77;
        let e = sh.install_sessions(&[p], &mut cmds).unwrap_err();
        assert!(e.to_string().contains("sessions[0].plan_id"));
        // Capacity.
        let e = sh
            .install_sessions(&[spec(3), spec(4), spec(5)], &mut cmds)
            .unwrap_err();
        assert_eq!(e.code(), tonic::Code::ResourceExhausted);
        assert_eq!(sh.len(), 2);
    }

    #[test]
    fn filling_to_capacity_never_regrows_the_indexes() {
        let mut sh = Shadow::new(3000, 8);
        let room = (sh.by_key.capacity(), sh.by_ip.capacity());
        assert!(room.0 >= 3000 && room.1 >= 3000, "{room:?}");
        let specs: Vec<_> = (1..=3000u64)
            .map(|id| {
                let mut s = spec(id);
                s.key.mac[4] = (id >> 8) as u8;
                s
            })
            .collect();
        let mut cmds = Vec::new();
        sh.install_sessions(&specs, &mut cmds).unwrap();
        assert_eq!(sh.len(), 3000);
        assert_eq!((sh.by_key.capacity(), sh.by_ip.capacity()), room);
    }

    #[test]
    fn remove_unknown_is_not_found_and_changes_nothing() {
        let mut sh = Shadow::new(4, 8);
        let mut cmds = Vec::new();
        sh.install_sessions(&[spec(1)], &mut cmds).unwrap();
        cmds.clear();
        let e = sh.remove_sessions(&[1, 42], &mut cmds).unwrap_err();
        assert_eq!(e.code(), tonic::Code::NotFound);
        assert_eq!(sh.len(), 1);
        assert_eq!(sh.remove_sessions(&[1], &mut cmds).unwrap(), 1);
        assert!(sh.is_empty());
        // The slot is reused.
        sh.install_sessions(&[spec(2)], &mut cmds).unwrap();
        assert_eq!(sh.slot(2), Some(0));
    }

    #[test]
    fn plan_in_use_cannot_be_removed() {
        let mut sh = Shadow::new(4, 8);
        let mut cmds = Vec::new();
        let p = pb::Plan {
            plan_id: 5,
            ..Default::default()
        };
        sh.install_plans(vec![(p, Plan::default())], &mut cmds)
            .unwrap();
        let mut s = spec(1);
        s.plan_id = 5;
        sh.install_sessions(&[s], &mut cmds).unwrap();
        let e = sh.remove_plans(&[5], &mut cmds).unwrap_err();
        assert_eq!(e.code(), tonic::Code::FailedPrecondition);
        sh.remove_sessions(&[1], &mut cmds).unwrap();
        assert_eq!(sh.remove_plans(&[5], &mut cmds).unwrap(), 1);
        assert_eq!(
            sh.remove_plans(&[5], &mut cmds).unwrap_err().code(),
            tonic::Code::NotFound
        );
    }

    #[test]
    fn pages_in_id_order() {
        let mut sh = Shadow::new(100, 8);
        let mut cmds = Vec::new();
        let specs: Vec<_> = (1..=50).rev().map(spec).collect();
        sh.install_sessions(&specs, &mut cmds).unwrap();
        let p1 = sh.page(0, 20);
        assert_eq!(p1.first().map(|s| s.id), Some(1));
        assert_eq!(p1.last().map(|s| s.id), Some(20));
        let p3 = sh.page(40, 20);
        assert_eq!(p3.len(), 10);
    }

    #[test]
    fn a_slot_ids_handle_sees_installs_and_removals_made_after_it_was_taken() {
        let mut sh = Shadow::new(4, 8);
        let ids = sh.slot_ids();
        let mut cmds = Vec::new();
        sh.install_sessions(&[spec(7), spec(8)], &mut cmds).unwrap();
        let (s7, s8) = (sh.slot(7).unwrap(), sh.slot(8).unwrap());
        assert_eq!((ids.get(s7), ids.get(s8)), (Some(7), Some(8)));
        sh.remove_sessions(&[7], &mut cmds).unwrap();
        assert_eq!(ids.get(s7), None);
        assert_eq!(ids.get(4), None, "out of range");
        sh.install_sessions(&[spec(9)], &mut cmds).unwrap();
        assert_eq!(ids.get(sh.slot(9).unwrap()), Some(9));
    }

    #[test]
    fn the_slot_cursor_visits_every_session_once_across_changes() {
        let mut sh = Shadow::new(100, 8);
        let mut cmds = Vec::new();
        sh.install_sessions(&(1..=50).map(spec).collect::<Vec<_>>(), &mut cmds)
            .unwrap();
        let mut seen = Vec::new();
        let mut after = 0;
        let mut chunk = Vec::new();
        while let Some(last) = sh.slots_after(after, 16, &mut chunk) {
            after = last;
            // Between chunks the table changes: one behind the cursor goes, one ahead comes.
            if seen.is_empty() {
                sh.remove_sessions(&[3], &mut cmds).unwrap();
                sh.install_sessions(&[spec(60)], &mut cmds).unwrap();
            }
            seen.append(&mut chunk);
        }
        let ids: Vec<u64> = seen.iter().map(|&(_, id, _)| id).collect();
        let want: Vec<u64> = (1..=50).chain([60]).collect();
        assert_eq!(ids, want);
        for &(slot, id, _) in &seen {
            if id != 3 {
                assert_eq!(sh.slot(id), Some(slot), "session {id}");
            }
        }
    }
}
