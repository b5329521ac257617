//! Typed metric handles: one call per measurement, attributes fixed by the API.
//!
//! The label sets are closed on purpose. A session id, an address or a MAC can never become an
//! attribute: no method takes one. Every string attribute is either `&'static str` (node and
//! drop-reason names, event names, resource kinds; compile-time constants in the callers), a
//! dataplane's index in the control's configuration, or a plan or pool name, which goes
//! through [`PlanLabels`], a set capped at [`MAX_PLANS`] names beyond which names are counted
//! as `other`, or a BNG resource's `namespace/name` from the operator's map of the BNGs that
//! exist. So a series per subscriber cannot be created, even by mistake.
//!
//! | instrument (OTel) | Prometheus name | attributes |
//! |---|---|---|
//! | `kbng.sessions` | `kbng_sessions` | `state`, `plan` |
//! | `kbng.dhcp.dora.duration` (s) | `kbng_dhcp_dora_duration_seconds` | - |
//! | `kbng.aaa.duration` (s) | `kbng_aaa_duration_seconds` | `backend`, `result` |
//! | `kbng.programming.batch.size` | `kbng_programming_batch_size` | - |
//! | `kbng.programming.duration` (s) | `kbng_programming_duration_seconds` | `result` |
//! | `kbng.licence.sessions.limit` | `kbng_licence_sessions_limit` | - |
//! | `kbng.licence.sessions.usage` | `kbng_licence_sessions_usage` | - |
//! | `kbng.pool.addresses.limit` | `kbng_pool_addresses_limit` | `pool` |
//! | `kbng.pool.addresses.usage` | `kbng_pool_addresses_usage` | `pool` |
//! | `kbng.pool.addresses.fixed` | `kbng_pool_addresses_fixed` | `pool` |
//! | `kbng.control.events` | `kbng_control_events_total` | `event` |
//! | `kbng.store.commit.errors` | `kbng_store_commit_errors_total` | - |
//! | `kbng.control.api.unauthorized` | `kbng_control_api_unauthorized_total` | - |
//! | `kbng.control.dataplane.connected` | `kbng_control_dataplane_connected` | `dataplane` |
//! | `kbng.control.reconcile.sessions` | `kbng_control_reconcile_sessions_total` | `dataplane`, `kind` |
//! | `kbng.control.dataplane.tls.expiry_timestamp` (s) | `kbng_control_dataplane_tls_expiry_timestamp_seconds` | `file` |
//! | `kbng.control.clock.offset` (s) | `kbng_control_clock_offset_seconds` | - |
//! | `kbng.control.subscribers` | `kbng_control_subscribers` | - |
//! | `kbng.control.subscribers.file.rejected` | `kbng_control_subscribers_file_rejected` | - |
//! | `kbng.dataplane.packets` | `kbng_dataplane_packets_total` | `worker`, `direction` |
//! | `kbng.dataplane.io` (By) | `kbng_dataplane_io_bytes_total` | `worker`, `direction` |
//! | `kbng.dataplane.drops` | `kbng_dataplane_drops_total` | `worker`, `node`, `reason` |
//! | `kbng.dataplane.node.calls` | `kbng_dataplane_node_calls_total` | `worker`, `node` |
//! | `kbng.dataplane.node.vectors` | `kbng_dataplane_node_vectors_total` | `worker`, `node` |
//! | `kbng.dataplane.node.cycles` | `kbng_dataplane_node_cycles_total` | `worker`, `node` |
//! | `kbng.dataplane.port.packets` | `kbng_dataplane_port_packets_total` | `port`, `counter` |
//! | `kbng.dataplane.control_path.drops` | `kbng_dataplane_control_path_drops_total` | `reason` |
//! | `kbng.dataplane.grpc.tls.refused` | `kbng_dataplane_grpc_tls_refused_total` | `reason` |
//! | `kbng.dataplane.grpc.tls.reload_errors` | `kbng_dataplane_grpc_tls_reload_errors_total` | - |
//! | `kbng.dataplane.port.link_up` | `kbng_dataplane_port_link_up` | `port` |
//! | `kbng.dataplane.grpc.tls.expiry_timestamp` (s) | `kbng_dataplane_grpc_tls_expiry_timestamp_seconds` | `file` |
//! | `kbng.policer.packets` | `kbng_policer_packets_total` | `plan`, `direction`, `colour` |
//! | `kbng.operator.reconcile.duration` (s) | `kbng_operator_reconcile_duration_seconds` | `kind`, `result` |
//! | `kbng.licence.expiry_timestamp` (s) | `kbng_licence_expiry_timestamp_seconds` | `bng` |
//! | `kbng.licence.valid` | `kbng_licence_valid` | `bng` |
//!
//! Vectors per call and cycles per packet are ratios of counters (VPP's `show runtime`):
//! `rate(..._node_vectors_total) / rate(..._node_calls_total)` and
//! `rate(..._node_cycles_total) / rate(..._node_vectors_total)`. We export the counters rather
//! than ratio gauges because a ratio gauge cannot be summed across workers or over time.

mod control;
mod dataplane;
mod labels;
mod operator;

pub use control::ControlMetrics;
pub use dataplane::{
    ControlPathDrop, DataplaneMetrics, DataplaneSnapshot, DropCount, GrpcTlsCounts, NodeRuntime,
    PolicerCount, PortCount, PortLink, WorkerStats,
};
pub use labels::{
    AaaBackend, AaaResult, Colour, Direction, MAX_PLANS, Outcome, PlanLabels, SessionState,
};
pub use operator::{BngLicence, OperatorMetrics};
