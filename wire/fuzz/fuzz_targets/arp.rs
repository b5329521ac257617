//! ARP: parse, and a parsed packet re-emits to the same 28 bytes.
#![no_main]

use kbng_wire::ArpRepr;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(r) = ArpRepr::parse(data) {
        let mut out = [0u8; 28];
        assert_eq!(r.emit(&mut out), Ok(28));
        assert_eq!(&out[..], &data[..28]);
    }
});
