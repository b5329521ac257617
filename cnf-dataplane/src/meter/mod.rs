//! Colour-blind token-bucket meters: RFC 2697 srTCM and RFC 2698 trTCM.
//!
//! Integer token arithmetic on the TSC clock, with the same period / bytes-per-period
//! discretisation as DPDK's `rte_meter` (22.11, `lib/meter/rte_meter.c`) so that a scripted
//! schedule gives exactly the colours `rte_meter` gives. The floating-point step happens once,
//! when a profile is built on the control side; the per-packet check is integer-only.
//!
//! Overflow: token sums saturate and are then capped at the bucket size, and a clock that goes
//! backwards adds no tokens (`rte_meter` would wrap its unsigned time difference and fill the
//! buckets; we treat it as "no time has passed", which differs from DPDK only in that case).

mod srtcm;
mod trtcm;

pub use srtcm::{SrTcm, SrTcmProfile};
pub use trtcm::{TrTcm, TrTcmProfile};

/// Smallest bucket-update period in TSC cycles (`RTE_METER_TB_PERIOD_MIN`).
pub const TB_PERIOD_MIN: u64 = 100;

/// The colour a meter gives a packet (RFC 2697 §3, RFC 2698 §3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Colour {
    /// Within the committed rate.
    Green = 0,
    /// Above the committed, within the excess (srTCM) or peak (trTCM) rate.
    Yellow = 1,
    /// Above both.
    Red = 2,
}

impl Colour {
    /// All colours, in counter order.
    pub const ALL: [Colour; 3] = [Colour::Green, Colour::Yellow, Colour::Red];

    /// Index into per-colour arrays.
    pub const fn index(self) -> usize {
        self as usize
    }
}

/// Errors building a meter profile.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MeterError {
    /// The committed rate is zero.
    #[error("committed rate must be greater than zero")]
    ZeroCir,
    /// The peak rate is zero or below the committed rate (RFC 2698 §1: PIR >= CIR).
    #[error("peak rate {pir_bytes_per_sec} B/s must be >= committed rate {cir_bytes_per_sec} B/s")]
    PirBelowCir {
        /// committed rate
        cir_bytes_per_sec: u64,
        /// peak rate
        pir_bytes_per_sec: u64,
    },
    /// A burst size is zero where the RFC requires it to be positive.
    #[error("burst size {0} must be greater than zero")]
    ZeroBurst(&'static str),
    /// The TSC frequency is zero.
    #[error("TSC frequency must be greater than zero")]
    ZeroHz,
    /// A burst size does not fit the 32-bit token counts of the session line.
    #[error("burst size {0} must be at most {MAX_BURST_BYTES} bytes")]
    BurstTooLarge(&'static str),
}

/// Largest burst size (bytes) of any bucket: token counts are stored as `u32` so that a
/// session direction's meter state and its green counters share one cache line.
pub const MAX_BURST_BYTES: u64 = u32::MAX as u64;

/// Token-bucket period and tokens per period for `rate_bytes_per_sec` on a `hz` clock; the same
/// computation as `rte_meter_get_tb_params` (so results match DPDK bit for bit).
pub fn tb_params(hz: u64, rate_bytes_per_sec: u64) -> (u64, u64) {
    if rate_bytes_per_sec == 0 {
        return (TB_PERIOD_MIN, 0);
    }
    let period = hz as f64 / rate_bytes_per_sec as f64;
    if period >= TB_PERIOD_MIN as f64 {
        (period as u64, 1)
    } else {
        let bytes_per_period = (TB_PERIOD_MIN as f64 / period).ceil() as u64;
        // u128: hz * bytes_per_period cannot overflow; the quotient fits because
        // bytes_per_period <= 100 * rate / hz + 1.
        let tb_period =
            (u128::from(hz) * u128::from(bytes_per_period) / u128::from(rate_bytes_per_sec)) as u64;
        (tb_period.max(1), bytes_per_period)
    }
}

/// `floor((2^64 - 1) / period)`, for [`div_by`]; computed once per profile.
pub const fn reciprocal(period: u64) -> u64 {
    match u64::MAX.checked_div(period) {
        Some(r) => r,
        None => 0,
    }
}

/// `x / d` exactly, with the precomputed `recip = reciprocal(d)`: one multiplication instead of
/// a 64-bit division (tens of cycles, the largest single cost of a meter check). The estimate
/// `floor(x * recip / 2^64)` is never above `x / d` and at most one below it, so one
/// correction makes it exact.
#[inline(always)]
pub fn div_by(x: u64, d: u64, recip: u64) -> u64 {
    let q = ((u128::from(x) * u128::from(recip)) >> 64) as u64;
    // q <= x / d, so q * d <= x cannot overflow, and the remainder is below 2d.
    let r = x.wrapping_sub(q.wrapping_mul(d));
    q + u64::from(r >= d)
}

/// Whole periods elapsed since `last` and the new bucket timestamp (`rte_meter` advances its
/// timestamp by whole periods only, keeping the remainder for the next packet).
#[inline(always)]
fn elapsed_periods(now: u64, last: u64, period: u64, recip: u64) -> (u64, u64) {
    // A clock that went backwards adds nothing (see the module docs).
    let diff = now.saturating_sub(last);
    let n = div_by(diff, period, recip);
    (n, last + n * period)
}

#[cfg(test)]
mod tests;
