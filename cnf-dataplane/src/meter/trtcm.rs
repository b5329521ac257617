//! RFC 2698 two-rate three-colour marker, colour-blind mode (RFC 2698 §3.1, §3.2).

use super::{Colour, MAX_BURST_BYTES, MeterError, elapsed_periods, tb_params};

/// A validated trTCM profile: CIR and PIR as (period, bytes per period), CBS, PBS.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TrTcmProfile {
    /// Committed burst size, bytes.
    pub cbs_bytes: u64,
    /// Peak burst size, bytes.
    pub pbs_bytes: u64,
    /// TSC cycles per committed-bucket update.
    pub cir_period: u64,
    /// Committed tokens per update.
    pub cir_bytes_per_period: u64,
    /// TSC cycles per peak-bucket update.
    pub pir_period: u64,
    /// Peak tokens per update.
    pub pir_bytes_per_period: u64,
    /// [`super::reciprocal`] of `cir_period`.
    pub cir_recip: u64,
    /// [`super::reciprocal`] of `pir_period`.
    pub pir_recip: u64,
}

impl TrTcmProfile {
    /// Build a profile (RFC 2698 §2: PIR >= CIR > 0, CBS > 0, PBS > 0).
    pub fn new(
        hz: u64,
        cir_bytes_per_sec: u64,
        pir_bytes_per_sec: u64,
        cbs_bytes: u64,
        pbs_bytes: u64,
    ) -> Result<Self, MeterError> {
        if hz == 0 {
            return Err(MeterError::ZeroHz);
        }
        if cir_bytes_per_sec == 0 {
            return Err(MeterError::ZeroCir);
        }
        if pir_bytes_per_sec < cir_bytes_per_sec {
            return Err(MeterError::PirBelowCir {
                cir_bytes_per_sec,
                pir_bytes_per_sec,
            });
        }
        if cbs_bytes == 0 {
            return Err(MeterError::ZeroBurst("cbs"));
        }
        if pbs_bytes == 0 {
            return Err(MeterError::ZeroBurst("pbs"));
        }
        if cbs_bytes > MAX_BURST_BYTES {
            return Err(MeterError::BurstTooLarge("cbs"));
        }
        if pbs_bytes > MAX_BURST_BYTES {
            return Err(MeterError::BurstTooLarge("pbs"));
        }
        let (cir_period, cir_bytes_per_period) = tb_params(hz, cir_bytes_per_sec);
        let (pir_period, pir_bytes_per_period) = tb_params(hz, pir_bytes_per_sec);
        Ok(Self {
            cbs_bytes,
            pbs_bytes,
            cir_period,
            cir_bytes_per_period,
            pir_period,
            pir_bytes_per_period,
            cir_recip: super::reciprocal(cir_period),
            pir_recip: super::reciprocal(pir_period),
        })
    }
}

/// Per-flow trTCM state: buckets Tc and Tp with their own update times.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TrTcm {
    time_tc: u64,
    time_tp: u64,
    tc: u64,
    tp: u64,
}

impl TrTcm {
    /// Both buckets full at `now` (RFC 2698 §3).
    pub fn new(profile: &TrTcmProfile, now: u64) -> Self {
        Self {
            time_tc: now,
            time_tp: now,
            tc: profile.cbs_bytes,
            tp: profile.pbs_bytes,
        }
    }

    /// Rebuild from (time of Tc, time of Tp, Tc, Tp) as stored by [`TrTcm::parts`].
    #[inline(always)]
    pub fn from_parts(time_tc: u64, time_tp: u64, tc: u64, tp: u64) -> Self {
        Self {
            time_tc,
            time_tp,
            tc,
            tp,
        }
    }

    /// (time of Tc, time of Tp, Tc, Tp); Tc <= CBS and Tp <= PBS fit in `u32`.
    #[inline(always)]
    pub fn parts(&self) -> (u64, u64, u64, u64) {
        (self.time_tc, self.time_tp, self.tc, self.tp)
    }

    /// Tokens currently in (Tc, Tp).
    pub fn tokens(&self) -> (u64, u64) {
        (self.tc, self.tp)
    }

    /// Colour a packet of `len` bytes at time `now` (RFC 2698 §3.2, colour-blind): red if it
    /// exceeds Tp, else yellow if it exceeds Tc, else green; a red packet takes no tokens.
    #[inline]
    pub fn check(&mut self, p: &TrTcmProfile, now: u64, len: u32) -> Colour {
        let (n_tc, time_tc) = elapsed_periods(now, self.time_tc, p.cir_period, p.cir_recip);
        let (n_tp, time_tp) = elapsed_periods(now, self.time_tp, p.pir_period, p.pir_recip);
        self.time_tc = time_tc;
        self.time_tp = time_tp;
        let tc = self
            .tc
            .saturating_add(n_tc.saturating_mul(p.cir_bytes_per_period))
            .min(p.cbs_bytes);
        let tp = self
            .tp
            .saturating_add(n_tp.saturating_mul(p.pir_bytes_per_period))
            .min(p.pbs_bytes);
        let len = u64::from(len);
        if tp < len {
            self.tc = tc;
            self.tp = tp;
            Colour::Red
        } else if tc < len {
            self.tc = tc;
            self.tp = tp - len;
            Colour::Yellow
        } else {
            self.tc = tc - len;
            self.tp = tp - len;
            Colour::Green
        }
    }
}
