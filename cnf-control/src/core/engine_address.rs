//! The address the AAA asks for (RADIUS Framed-IP-Address and Framed-Pool, or a local
//! record's `ipv4` and `pool`), given in place of the one reserved at DISCOVER. Authorization
//! comes after the reservation because a DISCOVER is answered from the pools at once when AAA
//! is local; swapping at the answer keeps one path for both.

use std::net::Ipv4Addr;

use super::super::SessionId;
use super::super::aaa::AddressChoice;
use super::super::session::State;
use super::Engine;

/// Who asks for the address; the counters name its attribute or field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Asker {
    Radius,
    /// A local subscriber record.
    Record,
}

/// Why the asked address cannot be given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum AddressRefusal {
    /// The subscriber's REQUEST names another address: NAK it, so it starts over.
    Nak,
    /// The address is held by another session, or in no pool.
    AddressUnavailable,
    PoolUnknown,
    PoolExhausted,
}

impl AddressRefusal {
    /// The counter a refusal is counted under.
    pub(super) fn counter(self, asker: Asker) -> &'static str {
        use AddressRefusal::*;
        match (asker, self) {
            (Asker::Radius, Nak) => "NAK: not the address RADIUS assigns",
            (Asker::Radius, AddressUnavailable) => "Framed-IP-Address unavailable",
            (Asker::Radius, PoolUnknown) => "Framed-Pool unknown",
            (Asker::Radius, PoolExhausted) => "Framed-Pool exhausted",
            (Asker::Record, Nak) => "NAK: not the subscriber's ipv4",
            (Asker::Record, AddressUnavailable) => "subscriber ipv4 unavailable",
            (Asker::Record, PoolUnknown) => "subscriber pool unknown",
            (Asker::Record, PoolExhausted) => "subscriber pool exhausted",
        }
    }
}

impl Engine {
    /// Give session `id` the address its Access-Accept or record asks for, in place of the
    /// one reserved at DISCOVER. A subscriber whose REQUEST names another address
    /// (INIT-REBOOT) is NAKed, so that it starts over and is offered the right one. In relay
    /// mode the DHCP server assigns addresses, so the ask is counted and not applied.
    pub(super) fn take_asked_address(
        &mut self,
        id: SessionId,
        want: &AddressChoice,
        asker: Asker,
    ) -> Result<(), AddressRefusal> {
        if *want == AddressChoice::Any {
            return Ok(());
        }
        if self.relay.is_some() {
            self.count(match asker {
                Asker::Radius => "relay: RADIUS address not applied",
                Asker::Record => "relay: subscriber address not applied",
            });
            return Ok(());
        }
        let Some(s) = self.sessions.get(&id) else {
            return Ok(());
        };
        let (reserved, discovering) = match s.state {
            State::Discovering { ip, .. } => (ip, true),
            State::Authenticating { ip, .. } => (ip, false),
            _ => return Ok(()),
        };
        // An address the reserved one satisfies stays; another is taken at DISCOVER only.
        if self.satisfies(reserved, want) {
            return Ok(());
        }
        let taken = match want {
            AddressChoice::Any => return Ok(()),
            AddressChoice::Fixed(ip) => {
                if !discovering {
                    return Err(AddressRefusal::Nak);
                }
                self.pools
                    .allocate_held(*ip)
                    .map(|_| *ip)
                    .ok_or(AddressRefusal::AddressUnavailable)
            }
            AddressChoice::Pool(name) => {
                let i = self
                    .pools
                    .by_name(name)
                    .ok_or(AddressRefusal::PoolUnknown)?;
                if !discovering {
                    return Err(AddressRefusal::Nak);
                }
                let prefer = self.sticky.get(&s.key).copied();
                self.pools
                    .allocate_in(i, prefer)
                    .ok_or(AddressRefusal::PoolExhausted)
            }
        };
        let ip = taken?;
        self.pools.release(reserved);
        if let Some(s) = self.sessions.get_mut(&id)
            && let State::Discovering { ip: held, .. } = &mut s.state
        {
            *held = ip;
        }
        self.index_ip(id, Some(reserved), Some(ip));
        Ok(())
    }

    /// Whether address `ip` is one the AAA's `want` allows: any, exactly it, or one of the
    /// pool named (a pool the control lacks allows none).
    pub(super) fn satisfies(&self, ip: Ipv4Addr, want: &AddressChoice) -> bool {
        match want {
            AddressChoice::Any => true,
            AddressChoice::Fixed(a) => *a == ip,
            AddressChoice::Pool(name) => self
                .pools
                .by_name(name)
                .is_some_and(|i| self.pools.pool_of(ip) == Some(i)),
        }
    }
}
