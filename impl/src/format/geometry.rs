//! Segment geometry: where full segments lie on the device, as the kernel
//! computes it from the super block (`nilfs_get_segnum_of_block`,
//! `nilfs_get_segment_range`). The reader, the scan, the writer and the
//! cleaner all place segments with this one value.

use super::superblock::SuperBlock;
use super::{BlockNr, SegNum};
use crate::Result;

/// Segment geometry as the kernel computes it from the super block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SegGeometry {
    /// Block size in bytes.
    pub block_size: u32,
    /// Blocks per full segment.
    pub blocks_per_segment: u64,
    /// First block of segment 0.
    pub first_data_block: u64,
    /// Number of full segments.
    pub nsegments: u64,
}

impl SegGeometry {
    /// From a super block that passed `check_geometry`; one with fewer
    /// than `NILFS_SEG_MIN_BLOCKS` blocks a segment (which that check
    /// refuses) is refused here too, so no caller divides by zero.
    pub fn new(sb: &SuperBlock) -> Result<Self> {
        if sb.blocks_per_segment < super::SEG_MIN_BLOCKS {
            return Err(crate::Error::corrupt(
                "super block",
                format!("{} blocks per segment", sb.blocks_per_segment),
            ));
        }
        Ok(SegGeometry {
            block_size: sb.block_size()?,
            blocks_per_segment: u64::from(sb.blocks_per_segment),
            first_data_block: sb.first_data_block,
            nsegments: sb.nsegments,
        })
    }

    /// `nilfs_get_segnum_of_block`.
    pub fn segnum_of(&self, b: BlockNr) -> SegNum {
        SegNum(b.0 / self.blocks_per_segment)
    }

    /// Whether block `b` lies in the segment area: from `s_first_data_block`
    /// to the end of the last full segment. A DAT entry or a physical B-tree
    /// pointer outside it names no log block (block 1, for one, is the super
    /// block); the kernel reads whatever is there, we refuse it.
    pub fn holds(&self, b: BlockNr) -> bool {
        b.0 >= self.first_data_block && b.0 / self.blocks_per_segment < self.nsegments
    }

    /// The segment area as a half-open range of blocks, for messages.
    pub fn area(&self) -> (u64, u64) {
        (
            self.first_data_block,
            self.nsegments.saturating_mul(self.blocks_per_segment),
        )
    }

    /// The disk block of virtual block `v` from its DAT entry's
    /// `de_blocknr`: 0 (no block) and blocks outside the segment area are
    /// corruption naming `v`.
    pub fn dat_block(&self, v: u64, blocknr: BlockNr) -> Result<BlockNr> {
        if blocknr.0 == 0 {
            return Err(crate::Error::corrupt(
                "DAT entry",
                format!("virtual block {v} has no disk block (de_blocknr 0)"),
            ));
        }
        if !self.holds(blocknr) {
            let (lo, hi) = self.area();
            return Err(crate::Error::corrupt(
                "DAT entry",
                format!(
                    "virtual block {v}: de_blocknr {blocknr} is outside the segment area [{lo}, {hi})"
                ),
            ));
        }
        Ok(blocknr)
    }

    /// `nilfs_get_segment_range`: first and last block of segment `s`.
    pub fn range(&self, s: SegNum) -> (BlockNr, BlockNr) {
        let start = s.0.saturating_mul(self.blocks_per_segment);
        let end = start.saturating_add(self.blocks_per_segment - 1);
        (
            BlockNr(if s.0 == 0 {
                self.first_data_block
            } else {
                start
            }),
            BlockNr(end),
        )
    }
}
