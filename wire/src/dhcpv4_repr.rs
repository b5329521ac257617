//! DHCPv4 messages as values: parse, emit, and whole-frame emission.
//!
//! Control-plane code: [`DhcpRepr`] owns its variable-length options. Only
//! the options a BNG's DHCP server and relay act on are represented; others
//! are skipped on parse. A repeated option keeps its first occurrence
//! (RFC 3396 concatenation is not implemented: the represented options are
//! all short enough never to be split by real clients or access nodes).

use std::net::Ipv4Addr;

use crate::dhcpv4::{
    BOOTP_HEADER_LEN, DhcpMessageType, DhcpOp, DhcpPacket, MAGIC_COOKIE, MIN_MESSAGE_LEN,
    OPTIONS_OFFSET, option,
};
use crate::dhcpv4_relay::RelayAgentInfo;
use crate::error::{WireError, check_room};
use crate::ethernet::MacAddr;
use crate::frame::UdpFrame;

/// A DHCP message between an Ethernet client and the BNG.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DhcpRepr {
    /// BOOTP op.
    pub op: DhcpOp,
    /// Option 53.
    pub message_type: DhcpMessageType,
    /// Transaction id.
    pub xid: u32,
    /// Seconds elapsed.
    pub secs: u16,
    /// The BROADCAST flag.
    pub broadcast: bool,
    /// Relay hops.
    pub hops: u8,
    /// Client address (RENEW/REBIND, INFORM).
    pub ciaddr: Ipv4Addr,
    /// Offered/assigned address.
    pub yiaddr: Ipv4Addr,
    /// Next server.
    pub siaddr: Ipv4Addr,
    /// Relay agent address.
    pub giaddr: Ipv4Addr,
    /// Client hardware address (htype 1, hlen 6).
    pub chaddr: MacAddr,
    /// Option 50.
    pub requested_ip: Option<Ipv4Addr>,
    /// Option 54.
    pub server_id: Option<Ipv4Addr>,
    /// Option 51, seconds.
    pub lease_secs: Option<u32>,
    /// Option 58 (T1), seconds.
    pub renewal_secs: Option<u32>,
    /// Option 59 (T2), seconds.
    pub rebinding_secs: Option<u32>,
    /// Option 1.
    pub subnet_mask: Option<Ipv4Addr>,
    /// Option 3, in preference order.
    pub routers: Vec<Ipv4Addr>,
    /// Option 6, in preference order.
    pub dns_servers: Vec<Ipv4Addr>,
    /// Option 61, type byte included.
    pub client_id: Option<Vec<u8>>,
    /// Option 12, raw bytes (clients do not all send ASCII).
    pub hostname: Option<Vec<u8>>,
    /// Option 55.
    pub parameter_request_list: Vec<u8>,
    /// Option 82 (RFC 3046).
    pub relay_agent_info: Option<RelayAgentInfo>,
}

fn ip4(code: u8, d: &[u8]) -> Result<Ipv4Addr, WireError> {
    match d {
        [a, b, c, e] => Ok(Ipv4Addr::new(*a, *b, *c, *e)),
        _ => Err(WireError::BadOption { code }),
    }
}

fn u32v(code: u8, d: &[u8]) -> Result<u32, WireError> {
    ip4(code, d).map(u32::from)
}

fn ip_list(code: u8, d: &[u8]) -> Result<Vec<Ipv4Addr>, WireError> {
    if d.is_empty() || !d.len().is_multiple_of(4) {
        return Err(WireError::BadOption { code });
    }
    Ok(d.chunks_exact(4)
        .map(|c| Ipv4Addr::new(c[0], c[1], c[2], c[3]))
        .collect())
}

fn non_empty(code: u8, d: &[u8]) -> Result<Vec<u8>, WireError> {
    if d.is_empty() {
        Err(WireError::BadOption { code })
    } else {
        Ok(d.to_vec())
    }
}

impl DhcpRepr {
    /// A message with no optional fields, for filling in.
    pub fn new(op: DhcpOp, message_type: DhcpMessageType, xid: u32, chaddr: MacAddr) -> Self {
        DhcpRepr {
            op,
            message_type,
            xid,
            secs: 0,
            broadcast: false,
            hops: 0,
            ciaddr: Ipv4Addr::UNSPECIFIED,
            yiaddr: Ipv4Addr::UNSPECIFIED,
            siaddr: Ipv4Addr::UNSPECIFIED,
            giaddr: Ipv4Addr::UNSPECIFIED,
            chaddr,
            requested_ip: None,
            server_id: None,
            lease_secs: None,
            renewal_secs: None,
            rebinding_secs: None,
            subnet_mask: None,
            routers: Vec::new(),
            dns_servers: Vec::new(),
            client_id: None,
            hostname: None,
            parameter_request_list: Vec::new(),
            relay_agent_info: None,
        }
    }

    /// The skeleton of a server reply to this request: BOOTREPLY with the
    /// request's xid, flags, giaddr and chaddr (RFC 2131 §4.3, table 3), and
    /// its option 82 echoed (RFC 3046 §2.2). The caller sets yiaddr and the
    /// lease options.
    pub fn reply(&self, message_type: DhcpMessageType, server_id: Ipv4Addr) -> DhcpRepr {
        DhcpRepr {
            broadcast: self.broadcast,
            giaddr: self.giaddr,
            server_id: Some(server_id),
            relay_agent_info: self.relay_agent_info.clone(),
            ..DhcpRepr::new(DhcpOp::BootReply, message_type, self.xid, self.chaddr)
        }
    }

    /// Parse a DHCP message (the UDP payload). Fails on a non-Ethernet
    /// chaddr, a missing or unknown message type, and on malformed values
    /// of the represented options.
    pub fn parse(payload: &[u8]) -> Result<DhcpRepr, WireError> {
        let p = DhcpPacket::new_checked(payload)?;
        let op = p.op().ok_or(WireError::Unsupported("BOOTP op"))?;
        let chaddr = p
            .client_mac()
            .ok_or(WireError::Unsupported("DHCP hardware type"))?;
        let mut r = DhcpRepr::new(op, DhcpMessageType::Discover, p.xid(), chaddr);
        r.secs = p.secs();
        r.broadcast = p.broadcast();
        r.hops = p.hops();
        r.ciaddr = p.ciaddr();
        r.yiaddr = p.yiaddr();
        r.siaddr = p.siaddr();
        r.giaddr = p.giaddr();
        let mut message_type = None;
        let mut seen = [false; 256];
        for o in p.options() {
            let o = o?;
            let code = o.code;
            if std::mem::replace(&mut seen[usize::from(code)], true) {
                continue;
            }
            let d = o.data;
            match code {
                option::MESSAGE_TYPE => {
                    let [v] = d else {
                        return Err(WireError::BadOption { code });
                    };
                    message_type =
                        Some(DhcpMessageType::from_u8(*v).ok_or(WireError::BadOption { code })?);
                }
                option::REQUESTED_IP => r.requested_ip = Some(ip4(code, d)?),
                option::SERVER_ID => r.server_id = Some(ip4(code, d)?),
                option::LEASE_TIME => r.lease_secs = Some(u32v(code, d)?),
                option::RENEWAL_TIME => r.renewal_secs = Some(u32v(code, d)?),
                option::REBINDING_TIME => r.rebinding_secs = Some(u32v(code, d)?),
                option::SUBNET_MASK => r.subnet_mask = Some(ip4(code, d)?),
                option::ROUTER => r.routers = ip_list(code, d)?,
                option::DNS_SERVER => r.dns_servers = ip_list(code, d)?,
                option::CLIENT_ID => r.client_id = Some(non_empty(code, d)?),
                option::HOST_NAME => r.hostname = Some(non_empty(code, d)?),
                option::PARAMETER_REQUEST_LIST => r.parameter_request_list = non_empty(code, d)?,
                option::RELAY_AGENT_INFO => r.relay_agent_info = Some(RelayAgentInfo::parse(d)?),
                _ => {}
            }
        }
        r.message_type = message_type.ok_or(WireError::MissingOption {
            code: option::MESSAGE_TYPE,
        })?;
        Ok(r)
    }

    /// Call `f` with every option as `(code, value)`, in emission order, option 82 last
    /// (RFC 3046 §2.1); stops at the first value that cannot be emitted. Values are borrowed
    /// or built on the stack: a reply is built for every DISCOVER and REQUEST, and a vector
    /// per option was a third of the control engine's instructions per DORA (callgrind,
    /// `cnf-control/benches/engine_dora.rs`).
    fn each_option(&self, mut f: impl FnMut(u8, &[u8])) -> Result<(), WireError> {
        let mut put = |code: u8, d: &[u8]| {
            // Empty values would not parse back (RFC 2132 minimum lengths).
            if d.is_empty() && code != option::RELAY_AGENT_INFO {
                return Err(WireError::BadOption { code });
            }
            if d.len() > 255 {
                return Err(option_too_long(d.len()));
            }
            f(code, d);
            Ok(())
        };
        put(option::MESSAGE_TYPE, &[self.message_type.to_u8()])?;
        if let Some(a) = self.server_id {
            put(option::SERVER_ID, &a.octets())?;
        }
        let secs = [
            (option::LEASE_TIME, self.lease_secs),
            (option::RENEWAL_TIME, self.renewal_secs),
            (option::REBINDING_TIME, self.rebinding_secs),
        ];
        for (code, s) in secs {
            if let Some(s) = s {
                put(code, &s.to_be_bytes())?;
            }
        }
        if let Some(m) = self.subnet_mask {
            put(option::SUBNET_MASK, &m.octets())?;
        }
        let mut packed = [0u8; 256];
        for (code, l) in [
            (option::ROUTER, &self.routers),
            (option::DNS_SERVER, &self.dns_servers),
        ] {
            if !l.is_empty() {
                put(code, pack_ips(l, &mut packed)?)?;
            }
        }
        if let Some(a) = self.requested_ip {
            put(option::REQUESTED_IP, &a.octets())?;
        }
        if let Some(c) = &self.client_id {
            put(option::CLIENT_ID, c)?;
        }
        if let Some(h) = &self.hostname {
            put(option::HOST_NAME, h)?;
        }
        if !self.parameter_request_list.is_empty() {
            put(option::PARAMETER_REQUEST_LIST, &self.parameter_request_list)?;
        }
        if let Some(info) = &self.relay_agent_info {
            put(option::RELAY_AGENT_INFO, &info.to_bytes()?)?;
        }
        Ok(())
    }

    /// Bytes the options take, each with its code and length octets.
    fn options_len(&self) -> Result<usize, WireError> {
        let mut n = 0;
        self.each_option(|_, d| n += 2 + d.len())?;
        Ok(n)
    }

    /// Length [`Self::emit`] will write: header, cookie, options, end,
    /// padded to 300 bytes.
    pub fn buffer_len(&self) -> Result<usize, WireError> {
        Ok((OPTIONS_OFFSET + self.options_len()? + 1).max(MIN_MESSAGE_LEN))
    }

    /// Write the whole BOOTP/DHCP message to the start of `buf` (sname and
    /// file zeroed, end option, zero padding to 300 bytes). Returns its
    /// length.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize, WireError> {
        let used = OPTIONS_OFFSET + self.options_len()? + 1;
        let len = used.max(MIN_MESSAGE_LEN);
        check_room(len, buf.len())?;
        let out = &mut buf[..len];
        out.fill(0);
        out[0] = match self.op {
            DhcpOp::BootRequest => 1,
            DhcpOp::BootReply => 2,
        };
        out[1] = 1; // Ethernet
        out[2] = 6;
        out[3] = self.hops;
        out[4..8].copy_from_slice(&self.xid.to_be_bytes());
        out[8..10].copy_from_slice(&self.secs.to_be_bytes());
        out[10] = if self.broadcast { 0x80 } else { 0 };
        out[12..16].copy_from_slice(&self.ciaddr.octets());
        out[16..20].copy_from_slice(&self.yiaddr.octets());
        out[20..24].copy_from_slice(&self.siaddr.octets());
        out[24..28].copy_from_slice(&self.giaddr.octets());
        out[28..34].copy_from_slice(&self.chaddr.0);
        out[BOOTP_HEADER_LEN..OPTIONS_OFFSET].copy_from_slice(&MAGIC_COOKIE);
        let mut at = OPTIONS_OFFSET;
        // The same options as options_len() measured, so each fits; lengths are <= 255.
        self.each_option(|code, d| {
            out[at] = code;
            out[at + 1] = d.len() as u8;
            out[at + 2..at + 2 + d.len()].copy_from_slice(d);
            at += 2 + d.len();
        })?;
        out[at] = option::END;
        Ok(len)
    }
}

/// A DHCP option value of `len` bytes: more than its one length octet can say.
fn option_too_long(len: usize) -> WireError {
    WireError::TooLong {
        what: "dhcp option",
        len,
        max: 255,
    }
}

/// The addresses of `l` back to back at the start of `buf`; a list longer than one option
/// can hold is refused as [`DhcpRepr::emit`] refuses any long option.
fn pack_ips<'a>(l: &[Ipv4Addr], buf: &'a mut [u8; 256]) -> Result<&'a [u8], WireError> {
    let n = 4 * l.len();
    if n > 255 {
        return Err(option_too_long(n));
    }
    for (chunk, a) in buf.chunks_exact_mut(4).zip(l) {
        chunk.copy_from_slice(&a.octets());
    }
    Ok(&buf[..n])
}

/// Build a whole DHCP frame (Ethernet with its tags, IPv4, UDP, DHCP) with
/// valid IPv4 and UDP checksums, for injection through the dataplane.
/// Choosing the addresses (unicast to giaddr, broadcast, or unicast to
/// yiaddr, RFC 2131 §4.1) is the caller's job.
pub fn emit_dhcp_frame(
    buf: &mut [u8],
    frame: &UdpFrame,
    dhcp: &DhcpRepr,
) -> Result<usize, WireError> {
    frame.emit_with(buf, |payload| dhcp.emit(payload))
}

#[cfg(test)]
#[path = "dhcpv4_repr_tests.rs"]
mod tests;
