//! Linux `crc32_le(seed, buf, len)`: the reflected CRC-32 (polynomial
//! 0xEDB88320) with the register initialised to `seed` and no inversion on
//! either side. zlib-style CRCs (crc32fast) invert on entry and exit, hence
//! `crc32_le(seed, d) == !crc32fast(initial = !seed, d)`.

/// Linux `crc32_le`. Chain calls by passing the previous result as the seed.
pub fn crc32_le(seed: u32, buf: &[u8]) -> u32 {
    let mut h = crc32fast::Hasher::new_with_initial(!seed);
    h.update(buf);
    !h.finalize()
}

#[cfg(test)]
mod tests {
    use super::crc32_le;

    /// Vectors from nilfs2-format.md §1.3, computed by the Linux algorithm.
    #[test]
    fn linux_vectors() {
        assert_eq!(crc32_le(0, b"123456789"), 0x2DFD_2D88);
        assert_eq!(crc32_le(0xFFFF_FFFF, b"123456789"), 0x340B_C6D9);
        assert_eq!(crc32_le(0x1234_5678, b"123456789"), 0xE7FD_94D5);
        assert_eq!(crc32_le(0xDEAD_BEEF, b""), 0xDEAD_BEEF);
    }

    #[test]
    fn chaining_equals_one_pass() {
        let d = b"nilfs2 log-structured filesystem";
        let (a, b) = d.split_at(11);
        assert_eq!(crc32_le(crc32_le(7, a), b), crc32_le(7, d));
    }
}
