//! The persistent object allocator layout ("palloc") shared by the ifile and
//! the DAT (digest §5), following the `nilfs_palloc_*` helpers of alloc.c.
//!
//! Entry `nr` belongs to group `nr / entries_per_group`. A group is one bitmap
//! block (one bit per entry) followed by its entry blocks. Groups are
//! gathered under descriptor blocks, each an array of `__le32 pg_nfrees`, one
//! per group, placed before the groups it describes:
//!
//! `[desc][bitmap g0][entries g0...][bitmap g1][entries g1...]...[desc]...`
//!
//! Block offsets are file block numbers (`u64`; wrap them in
//! [`FileBlk`](super::FileBlk) to address the file). The kernel does this
//! arithmetic in `unsigned long` and trusts its inputs; here every offset
//! that can overflow `u64` is checked and reported as `None`.

use super::le::{need, put_u32, u32_at};
use crate::{Error, Result};

/// Size of `struct nilfs_palloc_group_desc`.
const GROUP_DESC_SIZE: u32 = 4;

/// The layout of one palloc file: its block size and entry stride.
///
/// The fields are public for convenience; [`PallocGeometry::new`] checks
/// them. No method panics whatever they hold: a zero divisor is taken as 1,
/// so an unchecked, meaningless geometry gives meaningless answers, not a crash.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PallocGeometry {
    /// The filesystem block size.
    pub block_size: u32,
    /// The entry stride (`s_inode_size` or `s_dat_entry_size`).
    pub entry_size: u32,
}

impl PallocGeometry {
    /// A checked geometry. The block size must be a NILFS block size and
    /// the entry must fit in a block (as `nilfs_dat_read` and
    /// `nilfs_store_disk_layout` require); each file's own minimum entry size
    /// is the super block's check, not this one's.
    pub fn new(block_size: u32, entry_size: u32) -> Result<Self> {
        crate::format::check_block_size(block_size)?;
        if entry_size == 0 || entry_size > block_size {
            return Err(Error::Invalid(format!(
                "invalid palloc entry size {entry_size}"
            )));
        }
        Ok(PallocGeometry {
            block_size,
            entry_size,
        })
    }

    /// `nilfs_palloc_entries_per_group`: one bit per entry in a bitmap block.
    pub fn entries_per_group(&self) -> u64 {
        (u64::from(self.block_size) * 8).max(1)
    }

    /// `mi_entries_per_block`: whole entries in a block.
    pub fn entries_per_block(&self) -> u64 {
        u64::from(self.block_size / self.entry_size.max(1)).max(1)
    }

    /// `mi_blocks_per_group`: the bitmap block plus enough entry blocks for
    /// a group (the last may be partly unused).
    pub fn blocks_per_group(&self) -> u64 {
        self.entries_per_group().div_ceil(self.entries_per_block()) + 1
    }

    /// `nilfs_palloc_groups_per_desc_block`: descriptors in a block.
    pub fn groups_per_desc_block(&self) -> u64 {
        u64::from(self.block_size / GROUP_DESC_SIZE).max(1)
    }

    /// `mi_blocks_per_desc_block`: a descriptor block and all its groups.
    /// At most about 2^33 for a checked geometry (64 KiB blocks, one entry
    /// per block); saturates rather than overflow for unchecked ones.
    pub fn blocks_per_desc_block(&self) -> u64 {
        self.groups_per_desc_block()
            .saturating_mul(self.blocks_per_group())
            .saturating_add(1)
    }

    /// `nilfs_palloc_group`: the group of entry `nr` and `nr`'s offset in it.
    pub fn group(&self, nr: u64) -> (u64, u64) {
        let epg = self.entries_per_group();
        (nr / epg, nr % epg)
    }

    /// `nilfs_palloc_desc_blkoff`: the file block of the descriptor block
    /// covering `group`; `None` on overflow.
    pub fn desc_blkoff(&self, group: u64) -> Option<u64> {
        (group / self.groups_per_desc_block()).checked_mul(self.blocks_per_desc_block())
    }

    /// `nilfs_palloc_bitmap_blkoff`: the file block of `group`'s bitmap;
    /// `None` on overflow.
    pub fn bitmap_blkoff(&self, group: u64) -> Option<u64> {
        let in_desc =
            (group % self.groups_per_desc_block()).checked_mul(self.blocks_per_group())?;
        self.desc_blkoff(group)?
            .checked_add(in_desc)?
            .checked_add(1)
    }

    /// `nilfs_palloc_entry_blkoff`: the file block holding entry `nr`;
    /// `None` on overflow.
    pub fn entry_blkoff(&self, nr: u64) -> Option<u64> {
        let (group, offset) = self.group(nr);
        self.bitmap_blkoff(group)?
            .checked_add(1 + offset / self.entries_per_block())
    }

    /// Byte offset of entry `nr` in its block (`nilfs_palloc_entry_offset`
    /// without the folio part); below the block size for a checked geometry.
    pub fn entry_offset_in_block(&self, nr: u64) -> usize {
        let (_, offset) = self.group(nr);
        (offset % self.entries_per_block()) as usize * self.entry_size as usize
    }
}

/// Decode a group descriptor block: `block_size / 4` free-entry counts.
pub fn decode_group_descs(buf: &[u8], block_size: u32) -> Result<Vec<u32>> {
    let n = (block_size / GROUP_DESC_SIZE) as usize;
    need(buf, n * GROUP_DESC_SIZE as usize, "group descriptor block")?;
    Ok((0..n)
        .map(|i| u32_at(buf, i * GROUP_DESC_SIZE as usize))
        .collect())
}

/// Encode a group descriptor block of `block_size` bytes. Counts beyond the
/// block's `block_size / 4` slots are dropped and missing ones written as 0;
/// a full-length slice round-trips through [`decode_group_descs`].
pub fn encode_group_descs(descs: &[u32], block_size: u32) -> Vec<u8> {
    let mut out = vec![0u8; block_size as usize];
    let n = (block_size / GROUP_DESC_SIZE) as usize;
    for (i, d) in descs.iter().take(n).enumerate() {
        put_u32(&mut out, i * GROUP_DESC_SIZE as usize, *d);
    }
    out
}

/// The byte holding bit `bit` and the bit's mask, if the byte exists.
fn locate_bit(len: usize, bit: u64) -> Option<(usize, u8)> {
    let byte = usize::try_from(bit / 8).ok().filter(|&b| b < len)?;
    Some((byte, 1 << (bit % 8)))
}

/// Whether bit `bit` of a bitmap block is set: little-endian bit order, byte
/// `bit / 8`, bit `bit % 8` (the kernel's `*_bit_le` helpers). A bit beyond
/// the buffer reads as clear.
pub fn bit_is_set(buf: &[u8], bit: u64) -> bool {
    locate_bit(buf.len(), bit).is_some_and(|(byte, mask)| buf[byte] & mask != 0)
}

/// Set bit `bit`, returning its previous value as `nilfs_set_bit_atomic`
/// does (so a caller can detect a double allocation); `None`, with the
/// buffer untouched, if the bit is beyond it.
pub fn set_bit(buf: &mut [u8], bit: u64) -> Option<bool> {
    let (byte, mask) = locate_bit(buf.len(), bit)?;
    let was = buf[byte] & mask != 0;
    buf[byte] |= mask;
    Some(was)
}

/// Clear bit `bit`, returning its previous value as `nilfs_clear_bit_atomic`
/// does (so a caller can detect a double free); `None`, with the buffer
/// untouched, if the bit is beyond it.
pub fn clear_bit(buf: &mut [u8], bit: u64) -> Option<bool> {
    let (byte, mask) = locate_bit(buf.len(), bit)?;
    let was = buf[byte] & mask != 0;
    buf[byte] &= !mask;
    Some(was)
}

/// Number of set bits among the first `nbits` bits (bits beyond the buffer
/// count as clear).
pub fn count_set_bits(buf: &[u8], nbits: u64) -> u64 {
    let nbits = usize::try_from(nbits)
        .unwrap_or(usize::MAX)
        .min(buf.len().saturating_mul(8));
    let whole = nbits / 8;
    let words = buf[..whole].chunks_exact(8);
    let rest: u64 = words
        .remainder()
        .iter()
        .map(|b| u64::from(b.count_ones()))
        .sum();
    let full: u64 = words
        .map(|w| u64::from(u64::from_le_bytes(w.try_into().expect("8 bytes")).count_ones()))
        .sum::<u64>()
        + rest;
    let tail = match nbits % 8 {
        0 => 0,
        r => u64::from((buf[whole] & ((1u8 << r) - 1)).count_ones()),
    };
    full + tail
}
