//! IPv4: every accessor and the in-place rewrites on arbitrary headers.
#![no_main]

use kbng_wire::{Ipv4Packet, Ipv4Repr};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut buf = data.to_vec();
    if let Ok(mut p) = Ipv4Packet::new_checked(&mut buf[..]) {
        let valid = p.verify_checksum();
        let _ = (p.payload().len(), p.frag_offset(), p.is_fragment(), p.ecn());
        let _ = Ipv4Repr::parse(&p);
        p.decrement_ttl();
        p.set_dscp(46);
        // Incremental updates keep a valid checksum valid.
        if valid {
            assert!(p.verify_checksum());
        }
    }
});
