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
    /// From a super block that passed `check_geometry`.
    pub fn new(sb: &SuperBlock) -> Result<Self> {
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
