//! RADIUS Termination-Action RADIUS-Request (RFC 2865 §5.29): at its Session-Timeout a
//! session is authorized again instead of ended, the way operators bound how long an
//! authorization lasts (a prepaid balance, a plan changed on the RADIUS side) without cutting
//! service. The answer decides: an Access-Accept goes on with its plan, Session-Timeout and
//! Termination-Action; an Access-Reject ends the session (Acct-Terminate-Cause
//! Session-Timeout); no answer keeps it and asks again later, since a RADIUS outage should
//! not disconnect every subscriber whose timeout falls in it.

use super::super::SessionId;
use super::super::aaa::{AddressChoice, AuthOutcome};
use super::super::session::Event;
use super::{Engine, Output, Session};

/// When no server answered a re-authorization, the next one is this far away.
pub(super) const RETRY_UNANSWERED_SECS: u32 = 60;

impl Engine {
    /// Bound session `id` reached the end its Access-Accept set, with Termination-Action
    /// RADIUS-Request: asks the AAA again, once. Its end stays as it was until the answer sets
    /// the next, so that a restart meanwhile asks again.
    pub(super) fn reauthorize_at_timeout(&mut self, id: SessionId, out: &mut Vec<Output>) {
        let Some(identity) = self.sessions.get(&id).map(Session::identity) else {
            return;
        };
        if !self.reauthorizing.insert(id) {
            return;
        }
        self.count("re-authorization at Session-Timeout");
        out.push(Output::Authorize { id, identity });
    }

    /// The answer to the re-authorization of session `id`.
    pub(super) fn reauthorized(
        &mut self,
        id: SessionId,
        result: AuthOutcome,
        now_ns: u64,
    ) -> Vec<Output> {
        let mut out = Vec::new();
        let Some((lease, grant)) = self.sessions.get(&id).and_then(|s| s.state.bound()) else {
            self.count("re-authorization answered for an ended session");
            return out;
        };
        let (secs, again) = match result {
            AuthOutcome::Accept {
                plan,
                session_timeout_secs,
                reauthorize,
                address,
            } => {
                self.count("re-authorization accepted");
                // The address stays the lease's: another would need the client to rebind,
                // which DHCP cannot ask of it. Counted, so that a server that moves
                // subscribers this way is seen.
                if matches!(address, AddressChoice::Fixed(a) if a != lease.ip) {
                    self.count("re-authorization named another address: lease's kept");
                }
                let plan_id = self.plan_id(plan.as_deref());
                if plan_id != grant.plan_id() {
                    self.count("re-authorization changed the plan");
                    self.event(id, Event::PlanChanged { plan_id }, now_ns, &mut out);
                }
                let secs = session_timeout_secs.unwrap_or(0);
                (secs, reauthorize)
            }
            AuthOutcome::Reject => {
                self.count("re-authorization rejected: session ended");
                self.event(id, Event::SessionTimeout, now_ns, &mut out);
                return out;
            }
            AuthOutcome::Unreachable => {
                self.count("re-authorization unanswered: session kept, asked again later");
                (RETRY_UNANSWERED_SECS, true)
            }
        };
        self.end_after(id, secs, now_ns);
        if let Some(s) = self.sessions.get_mut(&id) {
            s.reauthorize_at_end = again && secs > 0;
            out.push(Output::Persist(Box::new(s.clone())));
        }
        out
    }
}
