//! Seeded test data: Marsaglia's xorshift64 (shifts 13, 7, 17), the one
//! generator the tests use for file contents, shuffles and damage sites.
//! Not the project's `rng::SplitMix64` (mkfs seeds, device faults): these
//! streams are fixed by the tests' expectations and must not change.

/// An xorshift64 stream.
#[derive(Clone, Debug)]
pub struct Xorshift(u64);

impl Xorshift {
    /// The stream from `seed` as is (forced odd, so never all zero).
    pub fn new(seed: u64) -> Xorshift {
        Xorshift(seed | 1)
    }

    /// The stream from `seed` spread by the golden ratio first, so that
    /// neighbouring seeds start far apart.
    pub fn spread(seed: u64) -> Xorshift {
        Xorshift::new(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15))
    }

    /// The next word.
    #[allow(clippy::should_implement_trait)] // an infinite stream, no Option
    pub fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    /// `len` bytes: the low byte of each next word.
    pub fn bytes(&mut self, len: usize) -> Vec<u8> {
        (0..len).map(|_| self.next() as u8).collect()
    }
}

/// Deterministic file contents: `len` bytes of [`Xorshift::new`]`(seed)`.
pub fn pattern(seed: u64, len: usize) -> Vec<u8> {
    Xorshift::new(seed).bytes(len)
}

/// Lower-case hex sha256, as sha256sum prints it.
pub fn sha256_hex(d: &[u8]) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(d)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The first words of seed 1, as the copies this replaced computed
    /// them: a changed stream would change every test's data silently.
    #[test]
    fn the_stream_is_xorshift64_13_7_17() {
        let mut x = 1u64;
        let mut want = Vec::new();
        for _ in 0..4 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            want.push(x);
        }
        let mut g = Xorshift::new(0);
        let got: Vec<u64> = (0..4).map(|_| g.next()).collect();
        assert_eq!(got, want);
        assert_eq!(got[0], 0x4082_2041);
        assert_eq!(pattern(0, 2), vec![0x41, want[1] as u8]);
        assert_ne!(Xorshift::spread(1).next(), Xorshift::new(1).next());
    }
}
