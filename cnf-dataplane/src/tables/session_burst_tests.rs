//! The burst lookup's stage two and three ([`SessionTable::prefetch_line`] and the
//! `*_find_at` pair) against the plain lookups, including a hash-tag collision, where the
//! stage-two candidate is another session's slot and stage three must walk the chain.

use std::collections::HashMap;

use super::*;

const SEED: u64 = 7;

fn session(key: SessionKey, ipv4: u32) -> Session {
    Session {
        key,
        ipv4,
        plan: 0,
        captive: false,
        active: true,
    }
}

fn key(i: u32) -> SessionKey {
    SessionKey {
        port: 0,
        outer_vid: 10,
        inner_vid: 20,
        mac: [
            2,
            0,
            (i >> 24) as u8,
            (i >> 16) as u8,
            (i >> 8) as u8,
            i as u8,
        ],
    }
}

/// The first two values of `0..` whose hashes share the 32-bit tag (and so the home).
fn tag_collision(hash: impl Fn(u32) -> u64) -> (u32, u32) {
    let mut seen = HashMap::new();
    for i in 0..4_000_000u32 {
        if let Some(&j) = seen.get(&(hash(i) >> 32)) {
            return (j, i);
        }
        seen.insert(hash(i) >> 32, i);
    }
    panic!("no 32-bit tag collision among 4M hashes");
}

#[test]
fn downstream_tag_collision_is_resolved_by_the_chain() {
    let (a, b) = tag_collision(|ip| ip_hash(ip, SEED));
    let plans = PlanTable::new(1);
    let mut t = SessionTable::new(16, SEED);
    assert!(t.upsert(0, session(key(1), a), &plans, 0));
    assert!(t.upsert(1, session(key(2), b), &plans, 0));
    let h = t.down_hash(b);
    assert_eq!(h >> 32, t.down_hash(a) >> 32);
    // Stage two names the first tag match on the chain: the other session.
    let cand = t.prefetch_line(Direction::Down, h);
    assert_eq!(cand, 0);
    assert_eq!(t.down_find_at(b, h, cand).map(|(s, _)| s), Some(1));
    let ha = t.down_hash(a);
    let ca = t.prefetch_line(Direction::Down, ha);
    assert_eq!(t.down_find_at(a, ha, ca).map(|(s, _)| s), Some(0));
    // The line handed back is the slot's own.
    let line = t.down_find_at(b, h, cand).map(|(_, l)| l.ipv4());
    assert_eq!(line, Some(b));
}

#[test]
fn upstream_tag_collision_is_resolved_by_the_chain() {
    let (a, b) = tag_collision(|i| key_hash(&key(i), SEED));
    let plans = PlanTable::new(1);
    let mut t = SessionTable::new(16, SEED);
    assert!(t.upsert(3, session(key(a), 0x6440_0001), &plans, 0));
    assert!(t.upsert(4, session(key(b), 0x6440_0002), &plans, 0));
    let h = t.up_hash(&key(b));
    let cand = t.prefetch_line(Direction::Up, h);
    assert_eq!(cand, 3);
    let found = t.up_find_at(&key(b), h, cand);
    assert_eq!(found.map(|(s, l)| (s, l.ipv4())), Some((4, 0x6440_0002)));
    // A key that is absent but shares the tag is not found through the candidate.
    assert!(t.remove(4));
    assert_eq!(t.up_find_at(&key(b), h, cand).map(|(s, _)| s), None);
}

#[test]
fn absent_keys_have_no_candidate_or_miss() {
    let plans = PlanTable::new(1);
    let mut t = SessionTable::new(64, SEED);
    for i in 0..32 {
        assert!(t.upsert(i, session(key(i), 0x6440_0000 + i), &plans, 0));
    }
    for i in 32..2000 {
        let h = t.up_hash(&key(i));
        let cand = t.prefetch_line(Direction::Up, h);
        assert_eq!(t.up_find_at(&key(i), h, cand).map(|(s, _)| s), None);
        let h = t.down_hash(0x6440_0000 + i);
        let cand = t.prefetch_line(Direction::Down, h);
        assert_eq!(
            t.down_find_at(0x6440_0000 + i, h, cand).map(|(s, _)| s),
            None
        );
    }
    for i in 0..32 {
        let h = t.up_hash(&key(i));
        let cand = t.prefetch_line(Direction::Up, h);
        assert_eq!(t.up_find_at(&key(i), h, cand).map(|(s, _)| s), Some(i));
        assert_eq!(t.lookup_up(&key(i)), Some(i));
    }
}
