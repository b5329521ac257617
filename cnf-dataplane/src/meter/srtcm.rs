//! RFC 2697 single-rate three-colour marker, colour-blind mode (RFC 2697 §3.1, §4.1).

use super::{Colour, MAX_BURST_BYTES, MeterError, elapsed_periods, tb_params};

/// A validated srTCM profile: CIR as (period, bytes per period) on the TSC clock, CBS, EBS.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SrTcmProfile {
    /// Committed burst size, bytes.
    pub cbs_bytes: u64,
    /// Excess burst size, bytes.
    pub ebs_bytes: u64,
    /// TSC cycles per token-bucket update.
    pub cir_period: u64,
    /// Tokens (bytes) added per update.
    pub cir_bytes_per_period: u64,
    /// [`super::reciprocal`] of `cir_period`.
    pub cir_recip: u64,
}

impl SrTcmProfile {
    /// Build a profile (RFC 2697 §2: CIR > 0, and at least one of CBS and EBS > 0).
    pub fn new(
        hz: u64,
        cir_bytes_per_sec: u64,
        cbs_bytes: u64,
        ebs_bytes: u64,
    ) -> Result<Self, MeterError> {
        if hz == 0 {
            return Err(MeterError::ZeroHz);
        }
        if cir_bytes_per_sec == 0 {
            return Err(MeterError::ZeroCir);
        }
        if cbs_bytes == 0 && ebs_bytes == 0 {
            return Err(MeterError::ZeroBurst("cbs and ebs"));
        }
        if cbs_bytes > MAX_BURST_BYTES {
            return Err(MeterError::BurstTooLarge("cbs"));
        }
        if ebs_bytes > MAX_BURST_BYTES {
            return Err(MeterError::BurstTooLarge("ebs"));
        }
        let (cir_period, cir_bytes_per_period) = tb_params(hz, cir_bytes_per_sec);
        Ok(Self {
            cbs_bytes,
            ebs_bytes,
            cir_period,
            cir_bytes_per_period,
            cir_recip: super::reciprocal(cir_period),
        })
    }
}

/// Per-flow srTCM state: the two buckets Tc and Te and the time of their last update.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SrTcm {
    time: u64,
    tc: u64,
    te: u64,
}

impl SrTcm {
    /// Both buckets full at `now` (RFC 2697 §3: "initially full").
    pub fn new(profile: &SrTcmProfile, now: u64) -> Self {
        Self {
            time: now,
            tc: profile.cbs_bytes,
            te: profile.ebs_bytes,
        }
    }

    /// Rebuild from (time, Tc, Te) as stored by [`SrTcm::parts`].
    #[inline(always)]
    pub fn from_parts(time: u64, tc: u64, te: u64) -> Self {
        Self { time, tc, te }
    }

    /// (time, Tc, Te); Tc <= CBS and Te <= EBS, so both fit in `u32` (profile invariant).
    #[inline(always)]
    pub fn parts(&self) -> (u64, u64, u64) {
        (self.time, self.tc, self.te)
    }

    /// Tokens currently in (Tc, Te), for tests and counters.
    pub fn tokens(&self) -> (u64, u64) {
        (self.tc, self.te)
    }

    /// Colour a packet of `len` bytes at time `now` (RFC 2697 §4.1, colour-blind).
    ///
    /// Token update (RFC 2697 §4): tokens overflowing Tc go to Te, as in `rte_meter`.
    #[inline]
    pub fn check(&mut self, p: &SrTcmProfile, now: u64, len: u32) -> Colour {
        let (n, time) = elapsed_periods(now, self.time, p.cir_period, p.cir_recip);
        self.time = time;
        let mut tc = self
            .tc
            .saturating_add(n.saturating_mul(p.cir_bytes_per_period));
        let mut te = self.te;
        if tc > p.cbs_bytes {
            te = te.saturating_add(tc - p.cbs_bytes).min(p.ebs_bytes);
            tc = p.cbs_bytes;
        }
        let len = u64::from(len);
        if tc >= len {
            self.tc = tc - len;
            self.te = te;
            Colour::Green
        } else if te >= len {
            self.tc = tc;
            self.te = te - len;
            Colour::Yellow
        } else {
            self.tc = tc;
            self.te = te;
            Colour::Red
        }
    }
}
