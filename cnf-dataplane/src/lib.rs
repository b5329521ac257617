//! placeholder
#![forbid(unsafe_code)]

pub mod meter;
