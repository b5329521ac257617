//! `kbngctl licence` end to end: a licence issued with one key verifies with its public key,
//! is refused under another key, and is refused once expired.

#![allow(clippy::unwrap_used)] // tests fail loudly by design

use std::path::Path;
use std::process::{Command, Output};

fn kbngctl(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_kbngctl"))
        .args(args)
        .output()
        .unwrap()
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// A new signing key written to `path`; prints (returns) its public key.
fn keygen(path: &Path) -> String {
    let out = kbngctl(&[
        "licence",
        "keygen",
        "--signing-key-out",
        path.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{out:?}");
    stdout(&out).trim().to_string()
}

/// `licence issue` signed with `key`: 500 sessions for `days` from 2026-01-01.
fn issue(key: &Path, days: &str) -> Output {
    kbngctl(&[
        "licence",
        "issue",
        "--signing-key",
        key.to_str().unwrap(),
        "--name",
        "lab",
        "--customer",
        "Lab",
        "--licence-id",
        "L-1",
        "--max-sessions",
        "500",
        "--not-before",
        "2026-01-01T00:00:00Z",
        "--days",
        days,
    ])
}

#[test]
fn issue_then_verify_valid_forged_and_expired() {
    let dir = tempfile::tempdir().unwrap();
    let seed = dir.path().join("vendor.key");
    let other_seed = dir.path().join("forger.key");
    let public = keygen(&seed);
    keygen(&other_seed);
    let issued = |key: &Path| {
        let out = issue(key, "30");
        assert!(out.status.success(), "{out:?}");
        stdout(&out)
    };
    let genuine = dir.path().join("genuine.yaml");
    std::fs::write(&genuine, issued(&seed)).unwrap();
    let forged = dir.path().join("forged.yaml");
    std::fs::write(&forged, issued(&other_seed)).unwrap();

    let ok = kbngctl(&[
        "licence",
        "verify",
        "--public-key",
        &public,
        "--at",
        "2026-01-10T00:00:00Z",
        genuine.to_str().unwrap(),
    ]);
    assert!(ok.status.success(), "{ok:?}");
    assert!(stdout(&ok).contains("maxSessions: 500"));
    assert!(stdout(&ok).contains("source: licence"));
    assert!(stdout(&ok).contains("daysRemaining: 21"));

    let bad = kbngctl(&[
        "licence",
        "verify",
        "--public-key",
        &public,
        "--at",
        "2026-01-10T00:00:00Z",
        forged.to_str().unwrap(),
    ]);
    assert_eq!(bad.status.code(), Some(1));
    assert!(stdout(&bad).contains("reason: BadSignature"));
    assert!(stdout(&bad).contains("source: free-baseline"));

    let expired = kbngctl(&[
        "licence",
        "verify",
        "--public-key",
        &public,
        "--at",
        "2026-03-01T00:00:00Z",
        genuine.to_str().unwrap(),
    ]);
    assert_eq!(expired.status.code(), Some(1));
    assert!(stdout(&expired).contains("reason: Expired"));
}

#[test]
fn bad_flag_stops_with_a_message_naming_it() {
    let out = kbngctl(&["licence", "verify", "--public-key", "AAAA", "--bogus", "x"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--bogus"));
    let out = kbngctl(&[
        "licence",
        "verify",
        "--public-key",
        "AAAA",
        "/nonexistent.yaml",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--public-key"));
}

#[test]
fn days_past_the_calendar_are_an_error_naming_the_flag() {
    let dir = tempfile::tempdir().unwrap();
    let seed = dir.path().join("vendor.key");
    keygen(&seed);
    for days in ["9223372036854775807", "400000000"] {
        let out = issue(&seed, days);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{days}: {out:?}");
        assert!(
            err.contains(&format!("--days {days} overflows")),
            "{days}: {err}"
        );
    }
}
