//! The segment usage file (ino 5): its header, its entries and where the
//! entry of segment `s` lives (digest §9).
//!
//! Block 0 starts with `struct nilfs_sufile_header`, which occupies the first
//! `ceil(24 / entry_size)` slots (2 with 16-byte entries). Segment `s` sits in
//! slot `s + first_entry_offset` counted across blocks: segment numbers start
//! at 0, so unlike the cpfile there is no `- 1` (`nilfs_sufile_get_blkoff`).

use super::le::{encoded, layout, need};
use super::{FileBlk, SegNum, MIN_SEGMENT_USAGE_SIZE};
use crate::{Error, Result};

/// `su_flags` bit: active. Only mkfs writes it to disk; the kernel ignores
/// the stored bit and computes "active" for the current and next segments.
pub const SU_ACTIVE: u32 = 1 << 0;
/// `su_flags` bit: the segment holds logs.
pub const SU_DIRTY: u32 = 1 << 1;
/// `su_flags` bit: the segment had a write error and is never allocated.
pub const SU_ERROR: u32 = 1 << 2;

/// `struct nilfs_sufile_header`, at offset 0 of block 0.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct SufileHeader {
    /// `sh_ncleansegs`.
    pub ncleansegs: u64,
    /// `sh_ndirtysegs`.
    pub ndirtysegs: u64,
    /// `sh_last_alloc`: the last segment handed out; the search resumes after it.
    pub last_alloc: SegNum,
}

impl SufileHeader {
    /// Size of the structure.
    pub const SIZE: usize = 24;

    /// Decode the first 24 bytes of `buf`.
    pub fn decode(buf: &[u8]) -> Result<Self> {
        need(buf, Self::SIZE, "sufile header")?;
        Ok(SufileHeader {
            ncleansegs: Self::sh_ncleansegs.u64(buf),
            ndirtysegs: Self::sh_ndirtysegs.u64(buf),
            last_alloc: SegNum(Self::sh_last_alloc.u64(buf)),
        })
    }

    /// Encode into the first 24 bytes of `out` (which must hold them).
    pub fn encode(&self, out: &mut [u8]) {
        Self::sh_ncleansegs.put_u64(out, self.ncleansegs);
        Self::sh_ndirtysegs.put_u64(out, self.ndirtysegs);
        Self::sh_last_alloc.put_u64(out, self.last_alloc.0);
    }

    /// The encoded 24 bytes.
    pub fn to_bytes(&self) -> [u8; Self::SIZE] {
        encoded(|b| self.encode(b))
    }
}

layout!(SufileHeader {
    sh_ncleansegs: 0, 8;
    sh_ndirtysegs: 8, 8;
    sh_last_alloc: 16, 8;
});

/// `struct nilfs_segment_usage` (16 bytes; the stride is `s_segment_usage_size`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct SegmentUsage {
    /// `su_lastmod`: time of the last log written, seconds.
    pub lastmod: u64,
    /// `su_nblocks`: blocks used from the segment start.
    pub nblocks: u32,
    /// `su_flags`: `SU_*` bits.
    pub flags: u32,
}

impl SegmentUsage {
    /// Size of the structure; the stride may be larger.
    pub const SIZE: usize = 16;

    /// Decode the first 16 bytes of `buf`.
    pub fn decode(buf: &[u8]) -> Result<Self> {
        need(buf, Self::SIZE, "segment usage")?;
        Ok(SegmentUsage {
            lastmod: Self::su_lastmod.u64(buf),
            nblocks: Self::su_nblocks.u32(buf),
            flags: Self::su_flags.u32(buf),
        })
    }

    /// Encode into the first 16 bytes of `out` (which must hold them);
    /// the rest of a larger stride is left alone.
    pub fn encode(&self, out: &mut [u8]) {
        Self::su_lastmod.put_u64(out, self.lastmod);
        Self::su_nblocks.put_u32(out, self.nblocks);
        Self::su_flags.put_u32(out, self.flags);
    }

    /// The encoded 16 bytes.
    pub fn to_bytes(&self) -> [u8; Self::SIZE] {
        encoded(|b| self.encode(b))
    }

    /// `nilfs_segment_usage_clean`: no flag at all, ACTIVE included.
    pub fn is_clean(&self) -> bool {
        self.flags == 0
    }

    /// `nilfs_segment_usage_active` (the on-disk bit, which only mkfs sets).
    pub fn is_active(&self) -> bool {
        self.flags & SU_ACTIVE != 0
    }

    /// `nilfs_segment_usage_dirty`.
    pub fn is_dirty(&self) -> bool {
        self.flags & SU_DIRTY != 0
    }

    /// `nilfs_segment_usage_error`.
    pub fn is_error(&self) -> bool {
        self.flags & SU_ERROR != 0
    }

    /// The entry as `NILFS_IOCTL_GET_SUINFO` reports it for segment
    /// `segnum` (`nilfs_sufile_get_suinfo`): the stored ACTIVE bit is
    /// dropped and set again exactly when `nilfs_segment_is_active` holds,
    /// that is for the log writer's current and next segments (`writer`:
    /// `ns_segnum`, `ns_nextnum`). The one place this rule lives.
    pub fn as_reported(mut self, segnum: SegNum, writer: [SegNum; 2]) -> Self {
        self.flags &= !SU_ACTIVE;
        if segment_is_active(segnum, writer) {
            self.flags |= SU_ACTIVE;
        }
        self
    }
}

layout!(SegmentUsage {
    su_lastmod: 0, 8;
    su_nblocks: 8, 4;
    su_flags: 12, 4;
});

/// `nilfs_segment_is_active`: `segnum` is the log writer's current or next
/// segment (`writer`: `ns_segnum`, `ns_nextnum`).
pub fn segment_is_active(segnum: SegNum, writer: [SegNum; 2]) -> bool {
    writer.contains(&segnum)
}

/// Where segment usage entries live in the sufile.
///
/// The fields are public for convenience; [`SufileGeometry::new`] checks
/// them. No method panics whatever they hold (a zero divisor is taken as 1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SufileGeometry {
    /// The filesystem block size.
    pub block_size: u32,
    /// The entry stride, `s_segment_usage_size`.
    pub entry_size: u16,
}

impl SufileGeometry {
    /// A checked geometry. Like `nilfs_sufile_read`, refuse entries below
    /// `NILFS_MIN_SEGMENT_USAGE_SIZE` or larger than a block.
    pub fn new(block_size: u32, entry_size: u16) -> Result<Self> {
        crate::format::check_block_size(block_size)?;
        if entry_size < MIN_SEGMENT_USAGE_SIZE || u32::from(entry_size) > block_size {
            return Err(Error::Invalid(format!(
                "invalid segment usage size {entry_size}"
            )));
        }
        Ok(SufileGeometry {
            block_size,
            entry_size,
        })
    }

    /// `nilfs_sufile_segment_usages_per_block`.
    pub fn segment_usages_per_block(&self) -> u64 {
        u64::from(self.block_size / u32::from(self.entry_size.max(1))).max(1)
    }

    /// `mi_first_entry_offset`: slots taken by the header, `ceil(24 / entry_size)`.
    pub fn first_entry_offset(&self) -> u64 {
        (SufileHeader::SIZE as u64).div_ceil(u64::from(self.entry_size.max(1)))
    }

    /// The file block and the byte offset in it of segment `segnum`'s entry
    /// (`nilfs_sufile_get_blkoff`, `nilfs_sufile_get_offset`: slot
    /// `segnum + first_entry_offset`). The block number saturates at
    /// `u64::MAX` instead of overflowing, which needs a segment number no
    /// device can have.
    pub fn locate(&self, segnum: impl Into<SegNum>) -> (FileBlk, usize) {
        let segnum = segnum.into().0;
        let per = self.segment_usages_per_block();
        let within = segnum % per + self.first_entry_offset();
        let blk = (segnum / per).saturating_add(within / per);
        (
            FileBlk(blk),
            (within % per) as usize * usize::from(self.entry_size),
        )
    }
}
