//! The adapter that reads a signed Licence grant (the YAML `kbngctl licence issue` writes, or
//! the operator mounts) and its public key from files, and asks the pure
//! [`crate::core::licence::grant_cap`] for the cap in force.
//!
//! Both files are read afresh at every evaluation (once a second, from the engine task): they
//! are a few hundred bytes, so a replaced licence or key takes effect within a second, and an
//! expiry or a start of validity is seen by the same periodic evaluation without a timer of
//! its own. Watching with inotify was the alternative; it misses atomic renames of ConfigMap
//! mounts unless handled with care, and buys nothing at this size.

use std::path::{Path, PathBuf};

use ed25519_dalek::VerifyingKey;
use kbng_crds::{Licence, LicenceSpec, grant};

use crate::core::licence::{Cap, grant_cap};

/// Where the public key is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeySource {
    /// The base64 of the 32-byte Ed25519 key, inline in the config.
    Inline(String),
    /// A file holding that base64.
    File(PathBuf),
}

/// A configured licence grant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GrantConfig {
    pub file: PathBuf,
    pub key: KeySource,
}

fn read_spec(path: &Path) -> Result<LicenceSpec, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    // A whole Licence resource, as issued; a bare spec is accepted too.
    match serde_yaml_ng::from_str::<Licence>(&text) {
        Ok(l) => Ok(l.spec),
        Err(e) => serde_yaml_ng::from_str::<LicenceSpec>(&text)
            .map_err(|_| format!("{}: not a Licence: {e}", path.display())),
    }
}

fn read_key(src: &KeySource) -> Result<VerifyingKey, String> {
    match src {
        KeySource::Inline(text) => {
            grant::public_key_from_base64(text).map_err(|e| format!("publicKey: {e}"))
        }
        KeySource::File(p) => {
            let text = std::fs::read_to_string(p).map_err(|e| format!("{}: {e}", p.display()))?;
            grant::public_key_from_base64(&text).map_err(|e| format!("{}: {e}", p.display()))
        }
    }
}

impl GrantConfig {
    /// The cap in force at `now_ns`.
    /// Whether both files read and parse (a licence out of its window still does).
    pub fn readable(&self) -> Result<(), String> {
        read_spec(&self.file)?;
        read_key(&self.key)?;
        Ok(())
    }

    pub fn cap(&self, now_ns: u64) -> Cap {
        let spec = read_spec(&self.file);
        let key = read_key(&self.key);
        grant_cap(
            spec.as_ref().map_err(String::as_str),
            key.as_ref().map_err(String::as_str),
            now_ns,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::licence::CapSource;

    fn samples() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/samples")
    }

    /// 2027-01-01, inside the lab licence's window.
    const IN_WINDOW_NS: u64 = 1_798_761_600 * 1_000_000_000;

    #[test]
    fn the_lab_licence_verifies_with_the_lab_key_file() {
        let g = GrantConfig {
            file: samples().join("licence.yaml"),
            key: KeySource::File(samples().join("lab-licence-public.key")),
        };
        assert_eq!(g.readable(), Ok(()));
        let cap = g.cap(IN_WINDOW_NS);
        assert_eq!(cap.max_sessions, 1000, "{cap:?}");
        assert!(
            matches!(cap.source, CapSource::Licence { ref licence_id, .. } if licence_id == "LAB-0001")
        );
    }

    #[test]
    fn a_missing_file_or_a_bad_key_is_the_free_baseline_naming_it() {
        let g = GrantConfig {
            file: samples().join("no-such-licence.yaml"),
            key: KeySource::File(samples().join("lab-licence-public.key")),
        };
        let r = g.cap(IN_WINDOW_NS).report(IN_WINDOW_NS);
        assert_eq!(r.source, "free-baseline");
        assert!(r.message.contains("no-such-licence.yaml"), "{}", r.message);
        let unreadable = g.readable().unwrap_err();
        assert!(unreadable.contains("no-such-licence.yaml"), "{unreadable}");
        let g = GrantConfig {
            file: samples().join("licence.yaml"),
            key: KeySource::Inline("AAAA".into()),
        };
        let r = g.cap(IN_WINDOW_NS).report(IN_WINDOW_NS);
        assert_eq!(r.cap, grant::FREE_BASELINE_SESSIONS);
        assert!(r.message.contains("publicKey"), "{}", r.message);
        assert!(g.readable().unwrap_err().contains("publicKey"));
    }

    #[test]
    fn a_file_that_is_not_a_licence_is_named() {
        let dir = std::env::temp_dir().join(format!("kbng-licence-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("l.yaml");
        std::fs::write(&f, "kind: Something\n").unwrap();
        let g = GrantConfig {
            file: f,
            key: KeySource::File(samples().join("lab-licence-public.key")),
        };
        let r = g.cap(IN_WINDOW_NS).report(IN_WINDOW_NS);
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(r.source, "free-baseline");
        assert!(r.message.contains("not a Licence"), "{}", r.message);
    }
}
