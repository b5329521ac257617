//! `kbng-dataplane`: the packet pipeline of the kbng Broadband Network Gateway.
//!
//! Purpose: forward subscriber IPv4 between an access port (untagged, 802.1Q or QinQ) and an
//! uplink, police it per session and direction (RFC 2697 / RFC 2698), keep captive sessions in
//! a walled garden, answer ARP for the gateways, and punt DHCP, other ARP and portal HTTP to
//! the control plane; all programmed over gRPC (`kbng-api`).
//!
//! Invariants:
//! - Each worker core owns a full replica of the session, plan and access tables, its policer
//!   buckets and its counters. Nothing on the packet path takes a lock or allocates; the
//!   tables are sized once from validated configuration.
//! - The control thread (gRPC, tokio, on the main lcore) validates every request against a
//!   shadow copy, updates the shadow and pushes the same `Copy` commands to every worker's
//!   SPSC ring ([`command`]); replies wait until every worker has applied them. Workers apply
//!   exactly the command sequence the shadow applied, so the shadow is what the workers hold
//!   and resync listings are answered from it.
//! - Nodes return verdicts, never `Result`; every drop increments a reason counter.
//! - Packets are behind [`packet::PacketBuf`], implemented for DPDK mbufs (in the binary) and
//!   for heap buffers (tests, allocation test, no-EAL benchmark).
//!
//! Data flow of one worker iteration:
//! ```text
//!   command ring ──drain──► Tables (sessions, plans, access)
//!   rx burst (access + uplink) ─► Pipeline::process:
//!       ethernet-input ─┬─ arp-reply ─────────────────────────────────► tx access
//!                       ├─ uplink-arp ────────────────────────────────► tx uplink
//!                       ├─ punt ─► punt ring ─► control ─► gRPC Punt stream
//!                       └─ session-lookup ─┬─ walled-garden ─┐
//!                                          └──────────────────┴ policer ─ ip4-rewrite ─► tx
//!                                                                   └─ icmp-error ─► tx
//!   main core: next-hop resolver ─► inject ring ─► worker 0 ─► tx uplink
//! ```
//! The next hop's MAC is one atomic word ([`neighbour`]), read once per burst.
#![forbid(unsafe_code)]

pub mod bench;
pub mod command;
pub mod config;
pub mod control;
pub mod counters;
pub mod doorbell;
pub mod grpc;
pub mod grpc_tls;
pub mod io;
pub mod meter;
pub mod neighbour;
pub mod nodes;
pub mod numa;
pub mod observe;
pub mod packet;
pub mod pipeline;
pub mod port_counters;
pub mod punt;
pub mod stopping;
pub mod tables;
pub mod task_bell;
