//! placeholder
#![allow(missing_docs)]
pub mod ffi {
    #![allow(non_upper_case_globals, non_camel_case_types, non_snake_case, dead_code)]
    #![allow(unsafe_op_in_unsafe_fn, clippy::all, missing_docs, missing_debug_implementations)]
    include!(concat!(env!("OUT_DIR"), "/bindings.rs"));
}
