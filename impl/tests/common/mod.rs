//! Helpers shared by the write-path tests (fs_write.rs, crash.rs, gc.rs):
//! a deterministic byte pattern and a digest. The conformance crate has
//! its own (the model's `Pattern`); this crate's tests cannot depend on the
//! model (model/ and impl/ stay independent).

#![allow(dead_code)] // each test file uses its own subset

/// Deterministic file contents (xorshift bytes).
pub fn pattern(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

/// Lower-case hex sha256, as sha256sum prints it.
pub fn sha256_hex(d: &[u8]) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(d)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}
