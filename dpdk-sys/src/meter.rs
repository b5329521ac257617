//! DPDK's token-bucket meters, colour-blind mode: srTCM (RFC 2697) and trTCM (RFC 2698).
//!
//! These are the reference the project's own policers are compared against. A profile holds
//! the configured rates in TSC periods (computed by DPDK from `rte_get_tsc_hz`, so EAL must be
//! initialised); a meter holds the run-time bucket state of one flow. `check` takes the time as
//! a TSC value: read [`tsc`](crate::tsc) once per burst.

use crate::ffi;

/// Why a meter profile was rejected.
#[derive(Debug, thiserror::Error)]
pub enum MeterError {
    /// The TSC frequency is unknown because `Eal::init` has not run.
    #[error("TSC frequency unknown: initialise the EAL before creating meter profiles")]
    TscUnknown,
    /// DPDK rejected the parameters (a rate or burst of 0, or PIR < CIR for trTCM).
    #[error("{call} rejected the parameters: {params} (errno {errno})")]
    Invalid {
        /// The DPDK function.
        call: &'static str,
        /// The parameters, for the message.
        params: String,
        /// Positive errno.
        errno: i32,
    },
}

/// Packet colour (RFC 2697 §3, RFC 2698 §3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Color {
    /// Within the committed rate/burst.
    Green,
    /// Above committed but within excess (srTCM) or peak (trTCM).
    Yellow,
    /// Above the excess burst (srTCM) or the peak rate (trTCM).
    Red,
}

impl Color {
    fn from_rte(c: i32) -> Color {
        match u32::try_from(c) {
            Ok(ffi::RTE_COLOR_GREEN) => Color::Green,
            Ok(ffi::RTE_COLOR_YELLOW) => Color::Yellow,
            // rte_meter returns only the three colours; anything else is treated as red.
            _ => Color::Red,
        }
    }
}

fn require_tsc() -> Result<(), MeterError> {
    if crate::tsc_hz() == 0 {
        return Err(MeterError::TscUnknown);
    }
    Ok(())
}

/// srTCM parameters (RFC 2697 §2) converted to TSC periods.
#[derive(Debug, Clone, Copy)]
pub struct SrtcmProfile {
    raw: ffi::rte_meter_srtcm_profile,
}

impl SrtcmProfile {
    /// Committed Information Rate in bytes/s, Committed and Excess Burst Size in bytes.
    pub fn new(cir_bytes_per_sec: u64, cbs_bytes: u64, ebs_bytes: u64) -> Result<Self, MeterError> {
        require_tsc()?;
        let mut params = ffi::rte_meter_srtcm_params {
            cir: cir_bytes_per_sec,
            cbs: cbs_bytes,
            ebs: ebs_bytes,
        };
        let mut raw = ffi::rte_meter_srtcm_profile::default();
        // SAFETY: both pointers are valid for the call; the callee validates params (returns
        // -EINVAL) and needs the TSC frequency, which is known (checked above).
        let ret = unsafe { ffi::rte_meter_srtcm_profile_config(&mut raw, &mut params) };
        if ret != 0 {
            return Err(MeterError::Invalid {
                call: "rte_meter_srtcm_profile_config",
                params: format!(
                    "cir {cir_bytes_per_sec} B/s, cbs {cbs_bytes} B, ebs {ebs_bytes} B"
                ),
                errno: ret.saturating_abs(),
            });
        }
        Ok(SrtcmProfile { raw })
    }
}

/// Run-time state of one srTCM meter: both buckets start full.
#[derive(Debug, Clone, Copy)]
pub struct Srtcm {
    raw: ffi::rte_meter_srtcm,
}

impl Srtcm {
    /// A meter with full buckets, its clock starting now.
    pub fn new(profile: &SrtcmProfile) -> Self {
        let mut raw = ffi::rte_meter_srtcm::default();
        let mut p = profile.raw;
        // SAFETY: both pointers are valid for the call; the callee copies the bucket sizes from
        // the profile and reads the TSC. It fails only for NULL pointers.
        let _ = unsafe { ffi::rte_meter_srtcm_config(&mut raw, &mut p) };
        Srtcm { raw }
    }

    /// Colours a packet of `pkt_len` bytes arriving at TSC time `now_tsc` (colour-blind,
    /// RFC 2697 §3). Times should not go backwards.
    #[inline]
    pub fn check(&mut self, profile: &SrtcmProfile, now_tsc: u64, pkt_len: u32) -> Color {
        let p = std::ptr::from_ref(&profile.raw).cast_mut();
        // SAFETY: self.raw is a configured meter we own exclusively (&mut self); the profile
        // pointer is valid, and the callee only reads the profile despite its non-const type.
        let c =
            unsafe { ffi::kbng_meter_srtcm_color_blind_check(&mut self.raw, p, now_tsc, pkt_len) };
        Color::from_rte(c)
    }
}

/// trTCM parameters (RFC 2698 §2) converted to TSC periods.
#[derive(Debug, Clone, Copy)]
pub struct TrtcmProfile {
    raw: ffi::rte_meter_trtcm_profile,
}

impl TrtcmProfile {
    /// Committed and Peak Information Rate in bytes/s (`pir >= cir`), Committed and Peak Burst
    /// Size in bytes.
    pub fn new(
        cir_bytes_per_sec: u64,
        pir_bytes_per_sec: u64,
        cbs_bytes: u64,
        pbs_bytes: u64,
    ) -> Result<Self, MeterError> {
        require_tsc()?;
        let mut params = ffi::rte_meter_trtcm_params {
            cir: cir_bytes_per_sec,
            pir: pir_bytes_per_sec,
            cbs: cbs_bytes,
            pbs: pbs_bytes,
        };
        let mut raw = ffi::rte_meter_trtcm_profile::default();
        // SAFETY: as for the srTCM profile.
        let ret = unsafe { ffi::rte_meter_trtcm_profile_config(&mut raw, &mut params) };
        if ret != 0 {
            return Err(MeterError::Invalid {
                call: "rte_meter_trtcm_profile_config",
                params: format!(
                    "cir {cir_bytes_per_sec} B/s, pir {pir_bytes_per_sec} B/s, cbs {cbs_bytes} B, pbs {pbs_bytes} B"
                ),
                errno: ret.saturating_abs(),
            });
        }
        Ok(TrtcmProfile { raw })
    }
}

/// Run-time state of one trTCM meter: both buckets start full.
#[derive(Debug, Clone, Copy)]
pub struct Trtcm {
    raw: ffi::rte_meter_trtcm,
}

impl Trtcm {
    /// A meter with full buckets, its clock starting now.
    pub fn new(profile: &TrtcmProfile) -> Self {
        let mut raw = ffi::rte_meter_trtcm::default();
        let mut p = profile.raw;
        // SAFETY: as for Srtcm::new.
        let _ = unsafe { ffi::rte_meter_trtcm_config(&mut raw, &mut p) };
        Trtcm { raw }
    }

    /// Colours a packet of `pkt_len` bytes arriving at TSC time `now_tsc` (colour-blind,
    /// RFC 2698 §3). Times should not go backwards.
    #[inline]
    pub fn check(&mut self, profile: &TrtcmProfile, now_tsc: u64, pkt_len: u32) -> Color {
        let p = std::ptr::from_ref(&profile.raw).cast_mut();
        // SAFETY: as for Srtcm::check.
        let c =
            unsafe { ffi::kbng_meter_trtcm_color_blind_check(&mut self.raw, p, now_tsc, pkt_len) };
        Color::from_rte(c)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn profiles_need_the_eal_for_the_tsc_frequency() {
        // This unit-test binary never initialises the EAL.
        assert!(matches!(
            SrtcmProfile::new(1_000_000, 2000, 2000),
            Err(MeterError::TscUnknown)
        ));
        assert!(matches!(
            TrtcmProfile::new(1_000_000, 2_000_000, 2000, 2000),
            Err(MeterError::TscUnknown)
        ));
    }
}
