//! UDP and TCP views over arbitrary segments.
#![no_main]

use std::net::Ipv4Addr;

use kbng_wire::{TcpPacket, TcpRepr, UdpPacket};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let (s, d) = (Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(100, 64, 0, 1));
    if let Ok(u) = UdpPacket::new_checked(data) {
        let _ = (u.payload().len(), u.verify_checksum(s, d));
    }
    if let Ok(t) = TcpPacket::new_checked(data) {
        let _ = (
            t.payload().len(),
            t.flags(),
            t.verify_checksum(s, d),
            TcpRepr::parse(&t),
        );
    }
});
