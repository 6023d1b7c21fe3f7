//! The space rule (docs/model.md, "Space"): when ENOSPC is allowed.
//!
//! ENOSPC comes from `nilfs_transaction_begin(sb, ti, vacancy_check = 1)`
//! when `nilfs_near_disk_full` says so, and from a construction that finds
//! no segment. The model does not know how full the disk is; it keeps an
//! upper estimate of the blocks written since mkfs, and allows ENOSPC only
//! once that estimate could exceed what the disk holds.

use serde::{Deserialize, Serialize};

/// Size and layout parameters that are visible to users (mkfs options).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Geometry {
    pub block_size: u32,
    pub blocks_per_segment: u32,
    pub nsegments: u64,
    /// `s_r_segments_percentage` (mkfs default 5).
    pub r_segments_percentage: u32,
}

impl Geometry {
    /// `nilfs_nrsvsegs`: max(NILFS_MIN_NRSVSEGS = 8, ceil(nsegs * pct / 100)).
    pub fn reserved_segments(&self) -> u64 {
        (self.nsegments * self.r_segments_percentage as u64)
            .div_ceil(100)
            .max(8)
    }
    /// Blocks that user data and metadata may use before
    /// `nilfs_near_disk_full` can report the disk full. That test is
    /// `clean segments <= nrsvsegs + dirty blocks / blocks per segment + 1`
    /// (the_nilfs.c). A segment is not clean once any log is in it, and
    /// the log writer holds the next one ahead (`nilfs_sufile_alloc`), so
    /// with `w` blocks written and `d` dirty ones the test passes once
    /// `ceil((w + x) / bps) + 1 >= nsegments - nrsvsegs - 1 - d / bps`,
    /// that is once `w + d + x > (nsegments - nrsvsegs - 3) * bps`, where
    /// `x` is space no block uses: the blocks before the first data block
    /// (`ns_first_data_block`, mkfs's 4096 bytes) and, per segment, the
    /// tail a construction skips (`nilfs_segctor_begin_construction` moves
    /// on when fewer than `NILFS_PSEG_MIN_BLOCKS` = 2 are left) and the
    /// summary a log that crosses into it starts with. The model's estimate
    /// counts `w + d` (a change is charged when it is made), so the bound
    /// takes the most `x` can be: finding M4, where the old bound (two
    /// segments held, no `+ 1`, no `x`) let the kernel refuse 7 blocks
    /// before the model allowed it.
    pub fn usable_blocks(&self) -> u64 {
        let bps = self.blocks_per_segment as u64;
        let first_data_block = 4096u64.div_ceil(self.block_size.max(1) as u64);
        let unusable = first_data_block + 2 * self.nsegments;
        (self.nsegments.saturating_sub(self.reserved_segments() + 3) * bps).saturating_sub(unusable)
    }
}

/// Metadata blocks charged to one namespace operation (a directory block,
/// the inode's ifile block) and to one checkpoint (summary, super root,
/// ifile/cpfile/sufile/DAT blocks and B-tree nodes).
pub(crate) const META_OP_BLOCKS: u64 = 2;
pub(crate) const CHECKPOINT_BLOCKS: u64 = 32;

impl Geometry {
    /// Blocks charged to a write of `bytes`: its data blocks, a 32nd more
    /// for the DAT, the B-tree and the summary, and one.
    pub fn blocks_for(&self, bytes: u64) -> u64 {
        let data = bytes.div_ceil(self.block_size as u64);
        data + data.div_ceil(32) + 1
    }

    /// The space rule: ENOSPC is allowed only when the upper estimate of
    /// blocks written so far (`consumed`), plus this operation's
    /// (`blocks`), exceeds the usable blocks.
    pub fn may_enospc(&self, consumed: u64, blocks: u64) -> bool {
        consumed + blocks > self.usable_blocks()
    }
}

#[cfg(test)]
mod tests {
    use super::Geometry;

    /// A write is charged its data blocks, a 32nd of them more (rounded
    /// up), and one: a write of nothing still one.
    #[test]
    fn a_write_is_charged_its_blocks_a_32nd_more_and_one() {
        let g = Geometry {
            block_size: 1024,
            blocks_per_segment: 256,
            nsegments: 64,
            r_segments_percentage: 5,
        };
        assert_eq!(g.blocks_for(0), 1);
        assert_eq!(g.blocks_for(1), 3);
        assert_eq!(g.blocks_for(33 * 1024), 33 + 2 + 1);
    }
}
