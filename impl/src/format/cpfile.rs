//! The checkpoint file (ino 4): its header, its entries and where entry
//! `cno` lives (digest §8).
//!
//! Block 0 starts with `struct nilfs_cpfile_header`, which occupies the first
//! `ceil(32 / entry_size)` entry slots; checkpoint `cno` then sits in slot
//! `cno + first_entry_offset - 1` counted across blocks. Checkpoint 0 does not
//! exist: its slot would be the header's.

use super::inode::Inode;
use super::le::{encoded, layout, need};
use super::{Cno, FileBlk, MIN_CHECKPOINT_SIZE};
use crate::{Error, Result};

/// `cp_flags` bit: the checkpoint is a snapshot.
pub const CP_SNAPSHOT: u32 = 1 << 0;
/// `cp_flags` bit: the slot holds no checkpoint (fresh or deleted).
pub const CP_INVALID: u32 = 1 << 1;
/// `cp_flags` bit: reserved ("sketch"), unused.
pub const CP_SKETCH: u32 = 1 << 2;
/// `cp_flags` bit: no user-file or ifile block was written for it.
pub const CP_MINOR: u32 = 1 << 3;

/// `struct nilfs_cpfile_header`, at offset 0 of block 0.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct CpfileHeader {
    /// `ch_ncheckpoints`: valid checkpoints.
    pub ncheckpoints: u64,
    /// `ch_nsnapshots`.
    pub nsnapshots: u64,
    /// `ch_snapshot_list.ssl_next`: smallest snapshot, 0 if none.
    pub snapshot_next: Cno,
    /// `ch_snapshot_list.ssl_prev`: largest snapshot, 0 if none.
    pub snapshot_prev: Cno,
}

impl CpfileHeader {
    /// Size of the structure.
    pub const SIZE: usize = 32;

    /// Decode the first 32 bytes of `buf`.
    pub fn decode(buf: &[u8]) -> Result<Self> {
        need(buf, Self::SIZE, "cpfile header")?;
        Ok(CpfileHeader {
            ncheckpoints: Self::ch_ncheckpoints.u64(buf),
            nsnapshots: Self::ch_nsnapshots.u64(buf),
            snapshot_next: Cno(Self::ssl_next.u64(buf)),
            snapshot_prev: Cno(Self::ssl_prev.u64(buf)),
        })
    }

    /// Encode into the first 32 bytes of `out` (which must hold them).
    pub fn encode(&self, out: &mut [u8]) {
        Self::ch_ncheckpoints.put_u64(out, self.ncheckpoints);
        Self::ch_nsnapshots.put_u64(out, self.nsnapshots);
        Self::ssl_next.put_u64(out, self.snapshot_next.0);
        Self::ssl_prev.put_u64(out, self.snapshot_prev.0);
    }

    /// The encoded 32 bytes.
    pub fn to_bytes(&self) -> [u8; Self::SIZE] {
        encoded(|b| self.encode(b))
    }
}

layout!(CpfileHeader {
    ch_ncheckpoints: 0, 8;
    ch_nsnapshots: 8, 8;
    ssl_next: 16, 8;
    ssl_prev: 24, 8;
});

/// `struct nilfs_checkpoint` (192 bytes; the stride is `s_checkpoint_size`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Checkpoint {
    /// `cp_flags`: `CP_*` bits.
    pub flags: u32,
    /// `cp_checkpoints_count`: meaningful only in slot 0 of blocks >= 1,
    /// where it counts the block's valid checkpoints.
    pub checkpoints_count: u32,
    /// `cp_snapshot_list.ssl_next`: next snapshot up, 0 = the header.
    pub snapshot_next: Cno,
    /// `cp_snapshot_list.ssl_prev`: next snapshot down, 0 = the header.
    pub snapshot_prev: Cno,
    /// `cp_cno`.
    pub cno: Cno,
    /// `cp_create`: creation time, seconds.
    pub create: u64,
    /// `cp_nblk_inc`: blocks written by the logical segment that made it.
    pub nblk_inc: u64,
    /// `cp_inodes_count`.
    pub inodes_count: u64,
    /// `cp_blocks_count`.
    pub blocks_count: u64,
    /// `cp_ifile_inode`: this checkpoint's ifile, at offset 64.
    pub ifile_inode: Inode,
}

impl Checkpoint {
    /// Size of the structure; the stride may be larger.
    pub const SIZE: usize = 192;

    /// Decode the first 192 bytes of `buf`.
    pub fn decode(buf: &[u8]) -> Result<Self> {
        need(buf, Self::SIZE, "checkpoint")?;
        Ok(Checkpoint {
            flags: Self::cp_flags.u32(buf),
            checkpoints_count: Self::cp_checkpoints_count.u32(buf),
            snapshot_next: Cno(Self::ssl_next.u64(buf)),
            snapshot_prev: Cno(Self::ssl_prev.u64(buf)),
            cno: Cno(Self::cp_cno.u64(buf)),
            create: Self::cp_create.u64(buf),
            nblk_inc: Self::cp_nblk_inc.u64(buf),
            inodes_count: Self::cp_inodes_count.u64(buf),
            blocks_count: Self::cp_blocks_count.u64(buf),
            ifile_inode: Inode::decode(&buf[Self::cp_ifile_inode.offset..])?,
        })
    }

    /// Encode into the first 192 bytes of `out` (which must hold them);
    /// the rest of a larger stride is left alone.
    pub fn encode(&self, out: &mut [u8]) {
        Self::cp_flags.put_u32(out, self.flags);
        Self::cp_checkpoints_count.put_u32(out, self.checkpoints_count);
        Self::ssl_next.put_u64(out, self.snapshot_next.0);
        Self::ssl_prev.put_u64(out, self.snapshot_prev.0);
        Self::cp_cno.put_u64(out, self.cno.0);
        Self::cp_create.put_u64(out, self.create);
        Self::cp_nblk_inc.put_u64(out, self.nblk_inc);
        Self::cp_inodes_count.put_u64(out, self.inodes_count);
        Self::cp_blocks_count.put_u64(out, self.blocks_count);
        self.ifile_inode
            .encode(&mut out[Self::cp_ifile_inode.offset..]);
    }

    /// The encoded 192 bytes.
    pub fn to_bytes(&self) -> [u8; Self::SIZE] {
        encoded(|b| self.encode(b))
    }

    /// Whether every bit of `flag` is set.
    pub fn has_flag(&self, flag: u32) -> bool {
        self.flags & flag == flag
    }

    /// Set or clear the bits of `flag`.
    pub fn set_flag(&mut self, flag: u32, on: bool) {
        if on {
            self.flags |= flag;
        } else {
            self.flags &= !flag;
        }
    }

    /// `nilfs_checkpoint_snapshot`.
    pub fn is_snapshot(&self) -> bool {
        self.has_flag(CP_SNAPSHOT)
    }

    /// `nilfs_checkpoint_invalid`: the slot holds no checkpoint.
    pub fn is_invalid(&self) -> bool {
        self.has_flag(CP_INVALID)
    }

    /// The reserved SKETCH bit.
    pub fn is_sketch(&self) -> bool {
        self.has_flag(CP_SKETCH)
    }

    /// `nilfs_checkpoint_minor`.
    pub fn is_minor(&self) -> bool {
        self.has_flag(CP_MINOR)
    }
}

layout!(Checkpoint {
    cp_flags: 0, 4;
    cp_checkpoints_count: 4, 4;
    ssl_next: 8, 8;
    ssl_prev: 16, 8;
    cp_cno: 24, 8;
    cp_create: 32, 8;
    cp_nblk_inc: 40, 8;
    cp_inodes_count: 48, 8;
    cp_blocks_count: 56, 8;
    cp_ifile_inode: 64, 128;
});

/// Where checkpoints live in the cpfile, for one block size and entry size.
///
/// The fields are public for convenience; [`CpfileGeometry::new`] checks
/// them. No method panics whatever they hold (a zero divisor is taken as 1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CpfileGeometry {
    /// The filesystem block size.
    pub block_size: u32,
    /// The entry stride, `s_checkpoint_size`.
    pub entry_size: u16,
}

impl CpfileGeometry {
    /// A checked geometry. Like `nilfs_cpfile_read`, refuse entries below
    /// `NILFS_MIN_CHECKPOINT_SIZE` or larger than a block.
    pub fn new(block_size: u32, entry_size: u16) -> Result<Self> {
        crate::format::check_block_size(block_size)?;
        if entry_size < MIN_CHECKPOINT_SIZE || u32::from(entry_size) > block_size {
            return Err(Error::Invalid(format!(
                "invalid checkpoint size {entry_size}"
            )));
        }
        Ok(CpfileGeometry {
            block_size,
            entry_size,
        })
    }

    /// `nilfs_cpfile_checkpoints_per_block`: whole slots per block.
    pub fn checkpoints_per_block(&self) -> u64 {
        u64::from(self.block_size / u32::from(self.entry_size.max(1))).max(1)
    }

    /// `mi_first_entry_offset`: slots taken by the header,
    /// `ceil(32 / entry_size)` (1 for any legal entry size).
    pub fn first_entry_offset(&self) -> u64 {
        (CpfileHeader::SIZE as u64).div_ceil(u64::from(self.entry_size.max(1)))
    }

    /// The file block and the byte offset in it of checkpoint `cno`
    /// (`nilfs_cpfile_get_blkoff` and `nilfs_cpfile_get_offset`: slot
    /// `cno + first_entry_offset - 1`). `None` for cno 0, which the kernel
    /// treats as invalid, and on overflow (impossible with a legal entry size).
    pub fn locate(&self, cno: impl Into<Cno>) -> Option<(FileBlk, usize)> {
        let before = cno.into().0.checked_sub(1)?;
        let per = self.checkpoints_per_block();
        let within = before % per + self.first_entry_offset();
        let blk = (before / per).checked_add(within / per)?;
        Some((
            FileBlk(blk),
            (within % per) as usize * usize::from(self.entry_size),
        ))
    }
}

/// The snapshot list is kept sorted by checkpoint number
/// (`nilfs_cpfile_set_snapshot` links each snapshot between the largest
/// below it and the smallest above it), so every forward step `from ->
/// next` must go up and every backward step `from -> prev` down, the
/// header (0) ending both ways. A step that does not is corruption — a
/// cycle, or a list a mode change would make worse — and every walk of the
/// list, ours and the tools', refuses it here, which also bounds each walk
/// by the number of checkpoints. The kernel checks none of this: its
/// `GET_CPINFO` walk of a cycle returns the same snapshot until the
/// caller's count runs out.
pub fn check_snapshot_step(from: u64, next: u64, forward: bool) -> Result<()> {
    let ok = if forward {
        next == 0 || next > from
    } else {
        next < from || from == 0
    };
    if ok {
        return Ok(());
    }
    let (field, rule) = if forward {
        ("ssl_next", "above")
    } else {
        ("ssl_prev", "below")
    };
    let at = if from == 0 {
        "the cpfile header".to_string()
    } else {
        format!("checkpoint {from}")
    };
    Err(Error::corrupt(
        "snapshot list",
        format!("at {at}: {field} {next}; expected 0 or a snapshot {rule} {from}"),
    ))
}
