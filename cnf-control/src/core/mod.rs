//! The pure core: no tokio, tonic or kube. Time is injected as Unix nanoseconds.

pub mod aaa;
pub mod census;
pub mod dhcp;
pub mod engine;
pub mod licence;
pub mod mac_index;
pub mod pacing;
pub mod pool;
pub mod relay;
pub mod session;
pub mod session_table;
pub mod subscriber_page;
#[cfg(test)]
pub(crate) mod test_support;

use serde::{Deserialize, Serialize};

/// A hash map for keys that subscribers choose (MACs, VLANs, option 82, session ids).
/// ahash with keys drawn at random per process resists the same collision floods as std's
/// SipHash (a sender cannot predict the hash) at a fraction of the cost: SipHash was a fifth
/// of the engine's instructions per DORA (`benches/engine_dora.rs`).
pub type FastMap<K, V> = std::collections::HashMap<K, V, ahash::RandomState>;
/// A hash set with [`FastMap`]'s hasher.
pub type FastSet<K> = std::collections::HashSet<K, ahash::RandomState>;

/// A session id, chosen by the control plane, stable for the session's life, never reused.
pub type SessionId = u64;

/// A MAC address as bytes (serialisable; `kbng_wire::MacAddr` at the wire edge).
pub type MacAddr = [u8; 6];

/// Where a subscriber sits: dataplane, access port and VLAN tags (0 = none).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Line {
    pub dataplane: u32,
    pub port: u32,
    pub outer_vlan: u16,
    pub inner_vlan: u16,
}
