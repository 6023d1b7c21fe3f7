//! Compact, seedable descriptions of file data.
//!
//! A trace never carries megabytes of file contents: a write names a
//! [`Pattern`], and both the model and the implementation under test expand it
//! to the same bytes. The patterns can express exactly what
//! `tests/guest/scenario-gc.sh` writes: its awk `blk TAG FIRST
//! COUNT` blocks (optionally cut by `head -c`), `echo`/`printf` text, and the
//! LCG-placed random writes (each is one `blk` block at a computed offset).

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// Size of one `blk` block: every block is 4 KiB whatever the file system's
/// block size is (the script's awk prints 4096-byte records).
pub const BLK_SIZE: u64 = 4096;

/// A byte sequence named by a few parameters.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Pattern {
    /// The UTF-8 bytes of a string (`echo`, `printf`).
    Text(String),
    /// `len` zero bytes.
    Zeros(u64),
    /// scenario-gc.sh's `blk TAG FIRST COUNT`: `count` blocks of 4096 bytes;
    /// block `i` (from `first`) starts with `format!("{tag}:{i:08}\n")` and is
    /// filled up with `~`. `len`, when present, keeps only the first `len`
    /// bytes (`| head -c len`).
    Blk {
        tag: String,
        first: u64,
        count: u64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        len: Option<u64>,
    },
    /// `len` pseudo-random bytes from `seed` (splitmix64 in counter mode, so
    /// any range can be produced without the bytes before it).
    Seeded { seed: u64, len: u64 },
}

impl Pattern {
    /// Number of bytes the pattern stands for.
    pub fn len(&self) -> u64 {
        match self {
            Pattern::Text(s) => s.len() as u64,
            Pattern::Zeros(n) => *n,
            Pattern::Blk { count, len, .. } => {
                let full = count.saturating_mul(BLK_SIZE);
                len.map_or(full, |l| l.min(full))
            }
            Pattern::Seeded { len, .. } => *len,
        }
    }

    /// True if the pattern stands for no bytes.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Fills `out` with the pattern's bytes starting at byte `start`.
    /// Bytes past the end of the pattern are zero.
    pub fn fill(&self, start: u64, out: &mut [u8]) {
        out.fill(0);
        let end = self.len();
        if start >= end {
            return;
        }
        let n = ((end - start) as usize).min(out.len());
        let out = &mut out[..n];
        match self {
            Pattern::Text(s) => {
                let s = s.as_bytes();
                out.copy_from_slice(&s[start as usize..start as usize + n]);
            }
            Pattern::Zeros(_) => {}
            Pattern::Blk { tag, first, .. } => {
                // Each block: its header, then `~` to the block's end.
                out.fill(b'~');
                let mut pos = start;
                let mut done = 0;
                while done < n {
                    let block = first + pos / BLK_SIZE;
                    let within = (pos % BLK_SIZE) as usize;
                    let header = format!("{tag}:{block:08}\n");
                    let take = (BLK_SIZE as usize - within).min(n - done);
                    if within < header.len() {
                        let h = &header.as_bytes()[within..header.len().min(within + take)];
                        out[done..done + h.len()].copy_from_slice(h);
                    }
                    done += take;
                    pos += take as u64;
                }
            }
            Pattern::Seeded { seed, .. } => {
                // Byte p is byte p % 8 (little-endian) of word p / 8, one
                // splitmix64 per word: the cut first word, the whole words
                // eight bytes at a time, then the cut last one.
                let word = |w: u64| splitmix64(seed ^ w.wrapping_mul(0x9E37_79B9_7F4A_7C15));
                let from = (start % 8) as usize;
                let head = ((8 - from) % 8).min(n);
                let (first, body) = out.split_at_mut(head);
                if head > 0 {
                    first.copy_from_slice(&word(start / 8).to_le_bytes()[from..from + head]);
                }
                let mut w = (start + head as u64) / 8;
                let mut words = body.chunks_exact_mut(8);
                for chunk in &mut words {
                    chunk.copy_from_slice(&word(w).to_le_bytes());
                    w += 1;
                }
                let last = words.into_remainder();
                let k = last.len();
                last.copy_from_slice(&word(w).to_le_bytes()[..k]);
            }
        }
    }

    /// All the bytes (use only for small patterns).
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut v = vec![0; self.len() as usize];
        self.fill(0, &mut v);
        v
    }
}

/// splitmix64 finaliser: a bijective mixer, used as a counter-mode generator.
pub fn splitmix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Lower-case hex SHA-256 of `data`.
pub fn sha256_hex(data: &[u8]) -> String {
    hex(&Sha256::digest(data))
}

pub(crate) fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(2 * bytes.len());
    for b in bytes {
        s.push(char::from(DIGITS[usize::from(b >> 4)]));
        s.push(char::from(DIGITS[usize::from(b & 15)]));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blk_matches_the_awk_definition() {
        let p = Pattern::Blk {
            tag: "s4095".into(),
            first: 0,
            count: 1,
            len: Some(4095),
        };
        let b = p.to_bytes();
        assert_eq!(b.len(), 4095);
        assert!(b.starts_with(b"s4095:00000000\n~~~"));
        assert!(b[15..].iter().all(|&c| c == b'~'));
        // The fixture's manifest records sha256 of `blk s4095 0 1 | head -c 4095`.
        assert_eq!(
            sha256_hex(&b),
            "d3210435ab34f1ad7b752f5fc38d4cb6ca23ac84726287368a03d7f4210f0fb6"
        );
    }

    #[test]
    fn fill_at_any_offset_agrees_with_whole() {
        for p in [
            Pattern::Blk {
                tag: "x".into(),
                first: 7,
                count: 3,
                len: None,
            },
            Pattern::Seeded {
                seed: 9,
                len: 10_000,
            },
            Pattern::Text("hello world".into()),
        ] {
            let whole = p.to_bytes();
            for start in [0u64, 1, 4095, 4096, 5000] {
                let mut part = vec![0; 100];
                p.fill(start, &mut part);
                for (k, b) in part.iter().enumerate() {
                    let i = start as usize + k;
                    assert_eq!(*b, whole.get(i).copied().unwrap_or(0));
                }
            }
        }
    }

    /// The word-at-a-time fills equal their byte-by-byte definitions.
    #[test]
    fn fills_equal_their_definitions() {
        let seeded = |seed: u64, p: u64| {
            let word = splitmix64(seed ^ (p / 8).wrapping_mul(0x9E37_79B9_7F4A_7C15));
            (word >> (8 * (p % 8))) as u8
        };
        let blk = |tag: &str, first: u64, p: u64| {
            let header = format!("{tag}:{:08}\n", first + p / BLK_SIZE);
            let at = (p % BLK_SIZE) as usize;
            header.as_bytes().get(at).copied().unwrap_or(b'~')
        };
        for start in [0u64, 1, 7, 8, 9, 13, 4090, 4095, 4096, 8200] {
            for len in [0usize, 1, 5, 8, 17, 4096, 9000] {
                let mut out = vec![0xA5; len];
                let p = Pattern::Seeded {
                    seed: 42,
                    len: 20_000,
                };
                p.fill(start, &mut out);
                for (k, b) in out.iter().enumerate() {
                    let at = start + k as u64;
                    let want = if at < 20_000 { seeded(42, at) } else { 0 };
                    assert_eq!(*b, want, "seeded byte {at}");
                }
                let p = Pattern::Blk {
                    tag: "tag".into(),
                    first: 3,
                    count: 4,
                    len: None,
                };
                p.fill(start, &mut out);
                for (k, b) in out.iter().enumerate() {
                    let at = start + k as u64;
                    let want = if at < 4 * BLK_SIZE {
                        blk("tag", 3, at)
                    } else {
                        0
                    };
                    assert_eq!(*b, want, "blk byte {at}");
                }
            }
        }
    }
}
