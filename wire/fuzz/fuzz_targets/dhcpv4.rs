//! DHCPv4: view, option iterator, repr; what parses re-emits and parses to
//! the same value.
#![no_main]

use kbng_wire::{DhcpPacket, DhcpRepr, RelayAgentInfo};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(p) = DhcpPacket::new_checked(data) {
        let _ = (p.chaddr(), p.client_mac(), p.message_type());
        for o in p.options().flatten() {
            if o.code == 82 {
                let _ = RelayAgentInfo::parse(o.data);
            }
        }
    }
    if let Ok(r) = DhcpRepr::parse(data) {
        if let Ok(len) = r.buffer_len() {
            let mut out = vec![0u8; len];
            if r.emit(&mut out).is_ok() {
                assert_eq!(DhcpRepr::parse(&out).as_ref(), Ok(&r));
            }
        }
    }
});
