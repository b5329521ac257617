//! Zero-copy packet views and emitters for kbng, shared by the DPDK
//! dataplane hot path and the control plane.
//!
//! # Invariants
//!
//! - No `unsafe`; no panics on any input. Every view (`*Packet<T>`) checks
//!   its length once in `new_checked`, after which its accessors index at
//!   constant offsets that are known to be in bounds (smoltcp's model).
//! - Hot-path modules ([`ethernet`], [`ipv4`], [`udp`], [`tcp`], [`arp`],
//!   [`checksum`]) never allocate. Control-plane modules ([`dhcpv4`],
//!   [`radius`]) may allocate in their `Repr` types and builders.
//! - [`x509`] reads a certificate's validity period, for the processes'
//!   certificate-expiry metrics; it allocates nothing either.
//! - Emitters write into caller-provided buffers and return the length
//!   written, or [`WireError::BufferTooSmall`]; they never grow a buffer.
//! - One error type, [`WireError`], for every parser and emitter.
//!
//! # Data flow
//!
//! ```text
//!  rx frame ─► parse_l2 ─► L2 { vlans, ethertype, l3_offset() }
//!                 │ 0x0806 ─► ArpPacket / ArpRepr ─► reply_to ─► emit
//!                 │ 0x0800 ─► Ipv4Packet ─► decrement_ttl / set_dscp (in place)
//!                 │               ├─ UDP 67/68 ─► UdpPacket ─► DhcpPacket ─► DhcpRepr (control plane)
//!                 │               └─ TCP ─► TcpPacket (ports, flags: walled garden)
//!  control plane: DhcpRepr + UdpFrame ─► emit_dhcp_frame ─► whole frame ─► dataplane tx
//!                 RadiusBuilder ─► Vec<u8> ─► UDP socket;  reply ─► verify_response
//! ```

#![forbid(unsafe_code)]

pub mod arp;
pub mod checksum;
pub mod cidr;
pub mod dhcpv4;
pub mod dhcpv4_relay;
pub mod dhcpv4_repr;
pub mod error;
pub mod ethernet;
pub mod fastpath;
pub mod frame;
pub mod ipv4;
pub mod radius;
pub mod radius_auth;
pub mod radius_builder;
pub mod radius_coa;
pub mod tcp;
pub mod udp;
pub mod x509;

pub use arp::{ArpOp, ArpPacket, ArpRepr};
pub use cidr::Ipv4Cidr;
pub use dhcpv4::{DhcpMessageType, DhcpOp, DhcpOption, DhcpOptionIter, DhcpPacket};
pub use dhcpv4_relay::RelayAgentInfo;
pub use dhcpv4_repr::{DhcpRepr, emit_dhcp_frame};
pub use error::WireError;
pub use ethernet::{L2, MacAddr, VlanTag, parse_l2};
pub use frame::UdpFrame;
pub use ipv4::{Ipv4Packet, Ipv4Repr};
pub use radius::{RadiusAttr, RadiusAttrIter, RadiusPacket};
pub use radius_builder::RadiusBuilder;
pub use radius_coa::{CoaKind, CoaRequest};
pub use tcp::{TcpFlags, TcpPacket, TcpRepr};
pub use udp::{UdpPacket, UdpRepr};
