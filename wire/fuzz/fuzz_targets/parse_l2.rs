//! Ethernet/VLAN header parsing: no panic, and the L3 offset lies within
//! the frame; whatever parses re-emits to the same bytes.
#![no_main]

use kbng_wire::parse_l2;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(l2) = parse_l2(data) {
        let n = l2.l3_offset();
        assert!(n <= data.len());
        let mut out = [0u8; 22];
        if l2.emit(&mut out) == Ok(n) {
            assert_eq!(&out[..n], &data[..n]);
        }
    }
});
