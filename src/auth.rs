//! Bearer tokens: generated with 256 bits of randomness, stored only as their SHA-256.
//!
//! A token is high-entropy, so a fast hash is enough (no password stretching needed), and the
//! database looks credentials up by hash, so no token is ever compared in Rust.

use rand::RngCore;
use sha2::{Digest, Sha256};

/// Prefix that makes Orbit tokens recognisable (e.g. to secret scanners).
pub const TOKEN_PREFIX: &str = "orbit_";

/// A fresh random token: `orbit_` + 64 hex digits (256 bits).
pub fn generate_token() -> String {
    let mut bytes = [0u8; 32];
    rand::rngs::OsRng.fill_bytes(&mut bytes);
    format!("{TOKEN_PREFIX}{}", hex::encode(bytes))
}

/// The SHA-256 the database stores and procedures receive.
pub fn token_hash(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

/// The first characters, stored to help operators recognise a credential.
pub fn token_hint(token: &str) -> String {
    token.chars().skip(TOKEN_PREFIX.len()).take(8).collect()
}

/// A fresh queue id: 32 lowercase hex digits from the OS random source.
pub fn new_queue_id() -> String {
    let mut bytes = [0u8; 16];
    rand::rngs::OsRng.fill_bytes(&mut bytes);
    hex::encode(bytes)
}
