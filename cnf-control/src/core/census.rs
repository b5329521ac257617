//! How many sessions are in each state, per plan, kept as the engine changes them.
//!
//! The session gauges were counted by walking every session on the engine's thread, which
//! holds off punted DHCP for as long as the walk takes (O(sessions), every few seconds). The
//! engine now adjusts these counts at each of its four changes to its session map (create,
//! restore, step, drop), so a gauge update reads a handful of entries.

use super::FastMap;
use super::session::State;

/// (state name, plan id) of a session: the plan being offered or granted, 0 when none yet.
pub fn key(s: &State) -> (&'static str, u32) {
    let plan_id = match s {
        State::Offered { grant, .. } => grant.plan_id(),
        st => st.bound().map_or(0, |(_, g)| g.plan_id()),
    };
    (s.name(), plan_id)
}

/// Sessions per (state name, plan id); pairs that drop to zero are removed.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Census {
    counts: FastMap<(&'static str, u32), u64>,
}

impl Census {
    /// A session entered `s`.
    pub fn add(&mut self, s: &State) {
        self.up(key(s));
    }

    /// A session left `s`.
    pub fn remove(&mut self, s: &State) {
        self.down(key(s));
    }

    /// A session went from `before` to `after`.
    pub fn moved(&mut self, before: &State, after: &State) {
        let (from, to) = (key(before), key(after));
        if from != to {
            self.down(from);
            self.up(to);
        }
    }

    fn up(&mut self, k: (&'static str, u32)) {
        *self.counts.entry(k).or_default() += 1;
    }

    fn down(&mut self, k: (&'static str, u32)) {
        if let Some(n) = self.counts.get_mut(&k) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                self.counts.remove(&k);
            }
        }
    }

    /// Every non-empty (state name, plan id) pair and its sessions.
    pub fn iter(&self) -> impl Iterator<Item = ((&'static str, u32), u64)> + '_ {
        self.counts.iter().map(|(&k, &n)| (k, n))
    }

    /// The same census, counted afresh from `states` (for checks).
    #[cfg(test)]
    pub fn of<'a>(states: impl IntoIterator<Item = &'a State>) -> Self {
        let mut c = Self::default();
        for s in states {
            c.add(s);
        }
        c
    }
}
