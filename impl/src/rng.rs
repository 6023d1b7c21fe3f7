//! The one seeded generator of the crate: SplitMix64 (Steele, Lea & Flood
//! 2014). mkfs derives CRC seeds and UUIDs from it, the simulated device
//! draws its faults from it, the experiments and the benchmark draw their
//! workloads from it. Small, well known and dependency-free; its output is
//! part of what the tests pin (mkfs images from a seed), so it must not
//! change.

/// A SplitMix64 generator.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    /// A generator started at `seed`.
    pub fn new(seed: u64) -> Self {
        SplitMix64(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Fill `buf` with random bytes, eight at a time (little-endian words).
    pub fn fill(&mut self, buf: &mut [u8]) {
        let mut words = buf.chunks_exact_mut(8);
        for c in &mut words {
            c.copy_from_slice(&self.next_u64().to_le_bytes());
        }
        let rest = words.into_remainder();
        if !rest.is_empty() {
            let v = self.next_u64().to_le_bytes();
            let k = rest.len();
            rest.copy_from_slice(&v[..k]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::SplitMix64;

    /// `fill` is the words of `next_u64`, little-endian, the last one cut:
    /// the output the mkfs images pin, at every length of a short last word.
    #[test]
    fn fill_is_the_words_in_order() {
        for len in 0..41 {
            let mut want = Vec::new();
            let mut g = SplitMix64::new(7);
            while want.len() < len {
                want.extend_from_slice(&g.next_u64().to_le_bytes());
            }
            want.truncate(len);
            let mut got = vec![0u8; len];
            let mut f = SplitMix64::new(7);
            f.fill(&mut got);
            assert_eq!(got, want, "length {len}");
            // The generator moved on by the words it used.
            assert_eq!(f, g, "length {len}");
        }
    }
}
