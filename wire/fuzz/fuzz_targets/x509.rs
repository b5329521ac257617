//! X.509 validity: arbitrary bytes as a certificate.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = kbng_wire::x509::validity(data);
});
