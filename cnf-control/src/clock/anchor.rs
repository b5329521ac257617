//! The anchor that lets a restarted control go on with the time it had (see the parent
//! module): the control's time at a reading of the host's boot clock, kept in a file beside
//! the store.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::{LAST, MAX_SLEWED_STEP_NS, now_ns, signed_diff, wall_ns};

/// An offset left at a resume below this is the reading jitter of the two clocks (the boot
/// clock is read in hundredths of a second): the control starts on the wall clock.
const RESUME_JITTER_NS: u64 = 1_000_000_000;

/// The control's time at a reading of the host's boot clock (`CLOCK_BOOTTIME`, which counts
/// from the host's boot and is never stepped).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Anchor {
    /// `/proc/sys/kernel/random/boot_id`: the boot clock means nothing across boots.
    pub boot_id: u128,
    pub boot_clock_ns: u64,
    pub ours_ns: u64,
}

impl Anchor {
    fn encode(&self) -> String {
        format!(
            "{:032x} {} {}\n",
            self.boot_id, self.boot_clock_ns, self.ours_ns
        )
    }

    fn decode(s: &str) -> Option<Anchor> {
        let mut f = s.split_whitespace();
        let a = Anchor {
            boot_id: u128::from_str_radix(f.next()?, 16).ok()?,
            boot_clock_ns: f.next()?.parse().ok()?,
            ours_ns: f.next()?.parse().ok()?,
        };
        f.next().is_none().then_some(a)
    }
}

/// The host's boot id and boot clock now, when this is Linux.
fn boot_clock() -> Option<(u128, u64)> {
    let id = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").ok()?;
    let id = u128::from_str_radix(&id.trim().replace('-', ""), 16).ok()?;
    // The first field of /proc/uptime is CLOCK_BOOTTIME, in seconds to two decimals.
    let up = std::fs::read_to_string("/proc/uptime").ok()?;
    let (secs, frac) = up.split_whitespace().next()?.split_once('.')?;
    let frac: u64 = format!("{frac:0<9}").get(..9)?.parse().ok()?;
    Some((
        id,
        secs.parse::<u64>()
            .ok()?
            .checked_mul(1_000_000_000)?
            .checked_add(frac)?,
    ))
}

/// The anchor file beside the session store `store`.
pub fn anchor_path(store: &Path) -> PathBuf {
    let mut name = store.file_name().unwrap_or_default().to_os_string();
    name.push(".clock");
    store.with_file_name(name)
}

/// How the control's time began.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resumed {
    /// From the anchor: the host's wall clock is `offset_ns` from it (positive: ahead), to
    /// be slewed as a step made while running would be.
    FromAnchor { offset_ns: i64 },
    /// On the wall clock, and why.
    OnWall(WhyWall),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WhyWall {
    /// No readable anchor (a first start, or a host without /proc).
    NoAnchor,
    /// The host rebooted since the anchor.
    OtherBoot,
    /// The wall clock agrees with the anchor.
    Agrees,
    /// It is more than a day from it: taken as it is.
    TooFar { offset_ns: i64 },
}

/// Where the control's time starts, given the anchor found and the boot clock and wall clock
/// now.
fn resume_from(anchor: Option<Anchor>, now: Option<(u128, u64)>, wall: u64) -> (u64, Resumed) {
    let (Some(a), Some((boot_id, boot_clock_ns))) = (anchor, now) else {
        return (wall, Resumed::OnWall(WhyWall::NoAnchor));
    };
    if a.boot_id != boot_id || boot_clock_ns < a.boot_clock_ns {
        return (wall, Resumed::OnWall(WhyWall::OtherBoot));
    }
    let ours = a.ours_ns.saturating_add(boot_clock_ns - a.boot_clock_ns);
    let offset_ns = signed_diff(wall, ours);
    if offset_ns.unsigned_abs() < RESUME_JITTER_NS {
        (wall, Resumed::OnWall(WhyWall::Agrees))
    } else if offset_ns.unsigned_abs() > MAX_SLEWED_STEP_NS {
        (wall, Resumed::OnWall(WhyWall::TooFar { offset_ns }))
    } else {
        (ours, Resumed::FromAnchor { offset_ns })
    }
}

/// Starts the control's time from the anchor file at `path`, when it is of this boot of the
/// host; call before anything reads the time.
pub fn resume(path: &Path) -> Resumed {
    let anchor = std::fs::read_to_string(path)
        .ok()
        .and_then(|s| Anchor::decode(&s));
    let mono = Instant::now();
    let (ours, r) = resume_from(anchor, boot_clock(), wall_ns());
    *LAST
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner) = Some((mono, ours));
    r
}

/// Writes the anchor to `path` every second, for [`resume`] after a restart. Not synced to
/// the disk: it is read only on the same boot of the host, which keeps the page cache. A
/// rename replaces it whole, so a kill mid-write leaves the previous one.
pub async fn keep_anchor(path: PathBuf) {
    let tmp = path.with_extension("clock.tmp");
    let mut every = tokio::time::interval(Duration::from_secs(1));
    let mut warned = false;
    loop {
        every.tick().await;
        let Some((boot_id, boot_clock_ns)) = boot_clock() else {
            return;
        };
        let a = Anchor {
            boot_id,
            boot_clock_ns,
            ours_ns: now_ns(),
        };
        let written = match tokio::fs::write(&tmp, a.encode()).await {
            Ok(()) => tokio::fs::rename(&tmp, &path).await,
            Err(e) => Err(e),
        };
        if let Err(e) = written
            && !std::mem::replace(&mut warned, true)
        {
            tracing::warn!(
                path = %path.display(),
                "cannot write the clock anchor ({e}): a restart will start on the wall clock"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = 1_000_000_000;

    #[test]
    fn anchors_round_trip_and_others_are_refused() {
        let a = Anchor {
            boot_id: 0x1dc3_7f25_20f2_4e64_8bab_1e44_06e2_bfb9,
            boot_clock_ns: 22_730_020_000_000,
            ours_ns: 1_790_000_000_000_000_000,
        };
        assert_eq!(Anchor::decode(&a.encode()), Some(a));
        for bad in ["", "xyz 1 2", "1dc3 1", "1dc3 1 2 3", "1dc3 -1 2"] {
            assert_eq!(Anchor::decode(bad), None, "{bad:?}");
        }
        let (id, clock) = boot_clock().expect("Linux has /proc");
        assert!(id != 0 && clock > 0);
    }

    #[test]
    fn a_restart_on_the_same_boot_goes_on_from_the_anchor() {
        let a = Anchor {
            boot_id: 7,
            boot_clock_ns: 100 * S,
            ours_ns: 5_000 * S,
        };
        // 10 s later the wall clock reads an hour ahead of the anchor's time plus 10 s.
        let wall = 5_010 * S + 3_600 * S;
        assert_eq!(
            resume_from(Some(a), Some((7, 110 * S)), wall),
            (
                5_010 * S,
                Resumed::FromAnchor {
                    offset_ns: 3_600 * S as i64
                }
            )
        );
        let on_wall = |w| (wall, Resumed::OnWall(w));
        assert_eq!(
            resume_from(Some(a), Some((8, 110 * S)), wall),
            on_wall(WhyWall::OtherBoot)
        );
        assert_eq!(
            resume_from(None, Some((7, 110 * S)), wall),
            on_wall(WhyWall::NoAnchor)
        );
        assert_eq!(resume_from(Some(a), None, wall), on_wall(WhyWall::NoAnchor));
        let near = 5_010 * S + S / 2;
        assert_eq!(
            resume_from(Some(a), Some((7, 110 * S)), near),
            (near, Resumed::OnWall(WhyWall::Agrees))
        );
        let far = 5_010 * S + 2 * MAX_SLEWED_STEP_NS;
        assert_eq!(
            resume_from(Some(a), Some((7, 110 * S)), far),
            (
                far,
                Resumed::OnWall(WhyWall::TooFar {
                    offset_ns: 2 * MAX_SLEWED_STEP_NS as i64
                })
            )
        );
    }
}
