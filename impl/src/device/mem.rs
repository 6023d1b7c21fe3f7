//! A sparse in-memory block device: chunks that were never written read as
//! zeros and take no memory.

use std::collections::BTreeMap;

use super::{check_range, is_zero, BlockDevice};
use crate::sync::{lock, Mutex};
use crate::Result;

const CHUNK: u64 = 4096;

/// Sparse in-memory device of a fixed size.
pub struct MemDevice {
    size: u64,
    chunks: Mutex<Chunks>,
}

/// The contents, and how many write requests have reached them.
#[derive(Clone, Default)]
struct Chunks {
    map: BTreeMap<u64, Chunk>,
    writes: u64,
}

/// A chunk's bytes, and the write request that last stored into it (its
/// number in [`Chunks::writes`]).
#[derive(Clone)]
struct Chunk {
    data: Box<[u8]>,
    written: u64,
}

impl MemDevice {
    /// A zero-filled device of `size` bytes.
    pub fn new(size: u64) -> Self {
        MemDevice {
            size,
            chunks: Mutex::new(Chunks::default()),
        }
    }

    /// Bytes of memory holding data (for memory-bound tests and reports).
    pub fn resident_bytes(&self) -> u64 {
        lock(&self.chunks).map.len() as u64 * CHUNK
    }

    /// Call `f(offset, chunk)` for every chunk that holds a non-zero byte, in
    /// ascending order. Chunks are [`Self::chunk_size`] bytes.
    pub fn for_each_nonzero_chunk(
        &self,
        mut f: impl FnMut(u64, &[u8]) -> Result<()>,
    ) -> Result<()> {
        let chunks = lock(&self.chunks);
        for (idx, c) in chunks.map.iter() {
            if !is_zero(&c.data) {
                f(idx * CHUNK, &c.data)?;
            }
        }
        Ok(())
    }

    /// An independent copy of the device's contents (crash tests start
    /// every cut from the same image).
    pub fn duplicate(&self) -> MemDevice {
        MemDevice {
            size: self.size,
            chunks: Mutex::new(lock(&self.chunks).clone()),
        }
    }

    /// Granularity of [`Self::for_each_nonzero_chunk`].
    pub const fn chunk_size() -> u64 {
        CHUNK
    }
}

/// The chunk pieces of the byte range at `off` of `len` bytes: (chunk
/// index, offset within the chunk, offset within the range, length).
fn pieces(off: u64, len: usize) -> impl Iterator<Item = (u64, usize, usize, usize)> {
    let mut done = 0usize;
    std::iter::from_fn(move || {
        (done < len).then(|| {
            let pos = off + done as u64;
            let (idx, within) = (pos / CHUNK, (pos % CHUNK) as usize);
            let n = (CHUNK as usize - within).min(len - done);
            let piece = (idx, within, done, n);
            done += n;
            piece
        })
    })
}

/// Copy `buf` into the chunks from byte `off` (range already checked), as
/// write request number `written`. Zeros written over a hole change
/// nothing and are not stored.
fn store(chunks: &mut BTreeMap<u64, Chunk>, off: u64, buf: &[u8], written: u64) {
    for (idx, within, done, n) in pieces(off, buf.len()) {
        let src = &buf[done..done + n];
        match chunks.get_mut(&idx) {
            Some(c) => {
                c.data[within..within + n].copy_from_slice(src);
                c.written = written;
            }
            None if is_zero(src) => {}
            // A whole chunk is copied as it is, without zeroing first.
            None if n == CHUNK as usize => {
                let data = Box::from(src);
                chunks.insert(idx, Chunk { data, written });
            }
            None => {
                let mut data = vec![0u8; CHUNK as usize].into_boxed_slice();
                data[within..within + n].copy_from_slice(src);
                chunks.insert(idx, Chunk { data, written });
            }
        }
    }
}

impl BlockDevice for MemDevice {
    fn size_bytes(&self) -> u64 {
        self.size
    }

    fn read_at(&self, off: u64, buf: &mut [u8]) -> Result<()> {
        check_range(self.size, off, buf.len())?;
        let chunks = lock(&self.chunks);
        for (idx, within, done, n) in pieces(off, buf.len()) {
            match chunks.map.get(&idx) {
                Some(c) => buf[done..done + n].copy_from_slice(&c.data[within..within + n]),
                None => buf[done..done + n].fill(0),
            }
        }
        Ok(())
    }

    fn write_at(&self, off: u64, buf: &[u8]) -> Result<()> {
        self.write_vectored_at(off, &[buf])
    }

    fn write_vectored_at(&self, off: u64, bufs: &[&[u8]]) -> Result<()> {
        let len = bufs.iter().map(|b| b.len()).sum();
        check_range(self.size, off, len)?;
        let mut chunks = lock(&self.chunks);
        chunks.writes += 1;
        let written = chunks.writes;
        let mut at = off;
        for buf in bufs {
            store(&mut chunks.map, at, buf, written);
            at += buf.len() as u64;
        }
        Ok(())
    }

    fn flush(&self) -> Result<()> {
        Ok(())
    }

    fn write_generation(&self) -> Option<u64> {
        Some(lock(&self.chunks).writes)
    }

    fn last_change(&self, off: u64, len: u64) -> Option<u64> {
        let chunks = lock(&self.chunks);
        let (first, end) = (off / CHUNK, off.saturating_add(len).div_ceil(CHUNK));
        if end <= first + 1 {
            // One chunk (a block): a lookup, not a range walk.
            return Some(chunks.map.get(&first).map_or(0, |c| c.written));
        }
        Some(
            chunks
                .map
                .range(first..end)
                .map(|(_, c)| c.written)
                .max()
                .unwrap_or(0),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn is_zero_sees_one_set_byte_anywhere() {
        // Lengths on both sides of the page it compares against.
        for len in [0usize, 1, 15, 4095, 4096, 4097, 10_000] {
            let mut b = vec![0u8; len];
            assert!(is_zero(&b), "{len} zeros");
            for at in [0, len / 2, len.saturating_sub(1)] {
                if at < len {
                    b[at] = 1;
                    assert!(!is_zero(&b), "length {len}, byte {at} set");
                    b[at] = 0;
                }
            }
        }
    }

    #[test]
    fn unwritten_reads_zero_and_writes_read_back() {
        let d = MemDevice::new(1 << 20);
        let mut b = vec![0xAAu8; 1024];
        d.read_at(4096, &mut b).unwrap();
        assert!(b.iter().all(|&x| x == 0));
        let w: Vec<u8> = (0..8192u32).map(|i| (i % 251) as u8).collect();
        d.write_at(3584, &w).unwrap();
        let mut r = vec![0u8; 8192];
        d.read_at(3584, &mut r).unwrap();
        assert_eq!(r, w);
        assert_eq!(d.resident_bytes(), 3 * 4096);
    }

    #[test]
    fn a_vectored_write_stores_what_the_concatenation_would() {
        // Pieces that start and end inside chunks, a zero piece over a
        // hole and over data, across five chunks.
        let pieces: Vec<Vec<u8>> = vec![
            (0..1536u32).map(|i| (i % 253) as u8 | 1).collect(),
            vec![0u8; 4096],
            (0..7168u32).map(|i| (i % 241) as u8).collect(),
            vec![0u8; 512],
            vec![0xEE; 2560],
        ];
        let slices: Vec<&[u8]> = pieces.iter().map(|p| &p[..]).collect();
        let (a, b) = (MemDevice::new(1 << 20), MemDevice::new(1 << 20));
        for d in [&a, &b] {
            d.write_at(8192, &[0x55u8; 8192]).unwrap();
        }
        a.write_vectored_at(3584, &slices).unwrap();
        b.write_at(3584, &slices.concat()).unwrap();
        let (mut ra, mut rb) = (vec![0u8; 32768], vec![0u8; 32768]);
        a.read_at(0, &mut ra).unwrap();
        b.read_at(0, &mut rb).unwrap();
        assert!(ra == rb);
        assert_eq!(a.resident_bytes(), b.resident_bytes());
        assert!(a.write_vectored_at((1 << 20) - 4096, &slices).is_err());
    }

    #[test]
    fn last_change_names_the_last_write_that_stored_there() {
        let d = MemDevice::new(1 << 20);
        assert_eq!(d.last_change(0, 1 << 20), Some(0));
        d.write_at(4096, &[1u8; 1024]).unwrap(); // write 1
        d.write_at(16384, &[0u8; 4096]).unwrap(); // 2: zeros on a hole, nothing stored
        d.write_at(8192, &[2u8; 8192]).unwrap(); // 3
        d.write_at(5120, &[0u8; 512]).unwrap(); // 4: zeros over data
        assert_eq!(d.write_generation(), Some(4));
        assert_eq!(d.last_change(4096, 1024), Some(4));
        assert_eq!(d.last_change(0, 4096), Some(0));
        assert_eq!(d.last_change(8192, 1024), Some(3));
        assert_eq!(d.last_change(12288, 1024), Some(3));
        assert_eq!(d.last_change(16384, 4096), Some(0));
        assert_eq!(d.last_change(0, 1 << 20), Some(4));
        assert_eq!(d.last_change(8192, 8192), Some(3));
    }

    #[test]
    fn out_of_range_and_unaligned_are_errors() {
        let d = MemDevice::new(4096);
        let mut b = vec![0u8; 1024];
        assert!(d.read_at(4096, &mut b).is_err());
        assert!(d.read_at(100, &mut b).is_err());
        assert!(d.write_at(u64::MAX - 511, &b[..512]).is_err());
    }
}
