//! The control's time: Unix nanoseconds that follow the wall clock, but never faster or
//! slower than [`MAX_SLEW`] off the monotonic clock's rate.
//!
//! Leases, session timestamps and RADIUS times are Unix times, because they are persisted and
//! shown. But a wall-clock step while the control runs (chrony or ntpd correcting a large
//! offset, a VM resumed from a snapshot) would move every lease at once: a step forward past
//! the lease time expires every subscriber in one tick, a step back stretches them all. So the
//! control slews instead: after a step its time runs up to 10% fast (or slow) until it meets
//! the wall clock again, as ntpd slews. A lease then ends at most 10% early, well after the
//! client's renewal at half its time. [`StepWatch`] reports each step; the offset still to
//! absorb is exported.
//!
//! A restart must not apply at once what is left of a step, nor a step made while the control
//! was down: the control's time is anchored every second to the host's boot clock (which
//! steps never move) in a file beside the store ([`keep_anchor`]), and a control started on
//! the same boot of the host goes on from the anchor ([`resume`]). After a reboot of the host
//! there is nothing to go on from, and the control starts on the wall clock.
//!
//! A step of more than [`MAX_SLEWED_STEP`] is taken at once: slewed, it would leave the
//! control's time that far wrong for ten times as long, and a clock that far off (a node that
//! booted without its real-time clock, then synced) never was one to keep leases by.

use std::sync::Mutex;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

mod anchor;

pub use anchor::{Resumed, WhyWall, anchor_path, keep_anchor, resume};

/// How much faster or slower than the monotonic clock the control's time may run while it
/// catches up with a stepped wall clock: a tenth.
pub const MAX_SLEW: u64 = 10;

/// The largest step slewed (a day); a larger one is taken at once.
pub const MAX_SLEWED_STEP_NS: u64 = 86_400 * 1_000_000_000;

/// The monotonic instant and the control's time at the last reading.
static LAST: Mutex<Option<(Instant, u64)>> = Mutex::new(None);

fn wall_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

/// Now, in Unix nanoseconds, as the control counts time. Never goes backwards.
pub fn now_ns() -> u64 {
    let mono = Instant::now();
    let wall = wall_ns();
    let mut last = LAST
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let (ours, taken) = match *last {
        None => (wall, None),
        Some((at, ours)) => advance(ours, mono.duration_since(at).as_nanos() as u64, wall),
    };
    *last = Some((mono, ours));
    drop(last);
    if let Some(step) = taken {
        tracing::warn!(
            step_s = step as f64 / 1e9,
            "the host's wall clock stepped by more than a day; the control takes the step at once"
        );
    }
    ours
}

/// The control's time `elapsed_ns` of monotonic time after it was `ours`, when the wall
/// clock reads `wall`: the wall clock, as far as a slew of a tenth of `elapsed_ns` reaches;
/// and the step, when it was too large to slew and was taken at once.
fn advance(ours: u64, elapsed_ns: u64, wall: u64) -> (u64, Option<i64>) {
    let plain = ours.saturating_add(elapsed_ns);
    if wall.abs_diff(plain) > MAX_SLEWED_STEP_NS {
        return (wall, Some(signed_diff(wall, plain)));
    }
    let slew = elapsed_ns / MAX_SLEW;
    let ours = wall.clamp(plain.saturating_sub(slew), plain.saturating_add(slew));
    (ours, None)
}

fn signed_diff(a: u64, b: u64) -> i64 {
    (i128::from(a) - i128::from(b)).clamp(i64::MIN.into(), i64::MAX.into()) as i64
}

/// How far the host's wall clock is from the control's time (positive: the host is ahead),
/// in nanoseconds: what the slew has still to absorb.
pub fn wall_offset_ns() -> i64 {
    let ours = now_ns();
    signed_diff(wall_ns(), ours)
}

/// Reports a wall-clock step once: an offset that grew by more than [`STEP_REPORTED_NS`]
/// since the last report (a slew that shrinks it is not news).
#[derive(Debug, Default)]
pub struct StepWatch {
    reported_ns: i64,
}

/// Offsets below this are the two clocks' reading jitter, not a step.
pub const STEP_REPORTED_NS: i64 = 1_000_000_000;

impl StepWatch {
    /// `Some(offset)` when `offset_ns` is a new step to report.
    pub fn check(&mut self, offset_ns: i64) -> Option<i64> {
        let grew = offset_ns.abs() >= self.reported_ns.abs().saturating_add(STEP_REPORTED_NS)
            || (offset_ns.signum() != self.reported_ns.signum()
                && offset_ns.abs() >= STEP_REPORTED_NS);
        if offset_ns.abs() < self.reported_ns.abs() {
            // Being slewed away: a later step is measured from here.
            self.reported_ns = offset_ns;
        }
        if !grew {
            return None;
        }
        self.reported_ns = offset_ns;
        Some(offset_ns)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = 1_000_000_000;

    #[test]
    fn a_steady_wall_clock_is_followed_exactly() {
        assert_eq!(advance(100 * S, S, 101 * S), (101 * S, None));
        // NTP's own slewing (up to 500 ppm) is well inside the tenth.
        assert_eq!(
            advance(100 * S, S, 101 * S + 500_000),
            (101 * S + 500_000, None)
        );
        let a = now_ns();
        std::thread::sleep(std::time::Duration::from_millis(20));
        let b = now_ns();
        assert!(b >= a + 20_000_000, "{a} -> {b}");
        assert!(wall_offset_ns().abs() < STEP_REPORTED_NS);
    }

    #[test]
    fn a_step_is_slewed_at_a_tenth_never_backwards() {
        // The wall clock steps an hour ahead: the control runs 10% fast until it meets it,
        // after 10 hours; a 10-minute lease granted meanwhile ends at most a minute early.
        let (mut ours, mut wall) = (1_000 * S, 1_000 * S + 3_600 * S);
        for _ in 0..36_000 {
            let before = ours;
            wall += S;
            ours = advance(ours, S, wall).0;
            assert!(ours - before <= S + S / 10 && ours > before);
        }
        assert_eq!(ours, wall, "caught up after 36,000 s");
        // An hour back: 10% slow, never backwards.
        wall -= 3_600 * S;
        let before = ours;
        ours = advance(ours, S, wall + S).0;
        assert_eq!(ours, before + S - S / 10);
    }

    #[test]
    fn a_step_of_more_than_a_day_is_taken_at_once() {
        let day = MAX_SLEWED_STEP_NS;
        let (ours, wall) = (1_000 * day, 1_000 * day + S);
        assert_eq!(advance(ours, S, wall + day), (ours + S + S / 10, None));
        assert_eq!(
            advance(ours, S, wall + day + 1),
            (wall + day + 1, Some(day as i64 + 1))
        );
        assert_eq!(
            advance(ours, S, wall - 2 * day),
            (wall - 2 * day, Some(-2 * day as i64))
        );
    }

    #[test]
    fn each_step_is_reported_once() {
        let mut w = StepWatch::default();
        assert_eq!(w.check(300_000_000), None, "jitter");
        assert_eq!(w.check(3_600 * S as i64), Some(3_600 * S as i64));
        assert_eq!(w.check(3_599 * S as i64), None, "slewed away");
        assert_eq!(w.check(3_000 * S as i64), None);
        assert_eq!(
            w.check(3_002 * S as i64),
            Some(3_002 * S as i64),
            "a second step"
        );
        assert_eq!(w.check(-5 * S as i64), Some(-5 * S as i64), "a step back");
        assert_eq!(w.check(-5 * S as i64), None);
    }
}
