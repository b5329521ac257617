//! RADIUS: view, attribute and vendor iterators, authenticator checks and
//! CoA parsing on arbitrary packets.
#![no_main]

use kbng_wire::radius_auth::{unhide_user_password, verify_response};
use kbng_wire::{CoaRequest, RadiusPacket};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    const SECRET: &[u8] = b"fuzz";
    if let Ok(p) = RadiusPacket::new_checked(data) {
        for a in p.attributes().flatten() {
            let _ = (a.as_u32(), a.as_ipv4());
            if let Ok((_, subs)) = a.as_vendor() {
                let _ = subs.count();
            }
            if a.kind == 2 {
                let _ = unhide_user_password(a.value, SECRET, &p.authenticator());
            }
        }
        let _ = verify_response(data, &[0; 16], SECRET);
    }
    let _ = CoaRequest::parse(data, SECRET);
});
