//! The NILFS2 on-disk format: every structure of `nilfs2_ondisk.h`, with
//! encode, decode and the kernel's validity checks.
//!
//! Conventions shared by every submodule:
//! - `decode(&[u8]) -> Result<T>` never panics and never allocates more than
//!   the input (or the geometry passed in) allows; a failed check is
//!   [`Error::Corrupt`](crate::Error::Corrupt) naming the structure. The caller,
//!   which knows the block, adds it with [`Error::at_block`](crate::Error::at_block).
//! - `encode` writes every field verbatim, checksum fields included; a separate
//!   `seal`/`compute_*` step computes checksums, so `decode(encode(x)) == x`
//!   holds for any `x`.
//! - All integers are little-endian; on-disk numbers have newtypes (below).

pub mod bmap;
pub mod btree;
pub mod cpfile;
pub mod crc;
pub mod dat;
pub mod dir;
pub mod geometry;
pub mod inode;
pub mod le;
pub mod palloc;
pub mod segsum;
pub mod sufile;
pub mod super_root;
pub mod superblock;

use std::fmt;

pub use geometry::SegGeometry;

macro_rules! newtype {
    ($(#[$m:meta])* $name:ident) => {
        $(#[$m])*
        #[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub struct $name(pub u64);

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Display::fmt(&self.0, f)
            }
        }

        impl From<u64> for $name {
            fn from(v: u64) -> Self {
                $name(v)
            }
        }
    };
}

newtype!(
    /// A physical (disk) block number, in filesystem blocks from the start of the device.
    BlockNr
);
newtype!(
    /// A virtual block number: an index into the DAT.
    VBlockNr
);
newtype!(
    /// An inode number.
    Ino
);
newtype!(
    /// A checkpoint number. [`Cno::MAX`] means "still alive" in a DAT entry.
    Cno
);
newtype!(
    /// A full-segment number.
    SegNum
);
newtype!(
    /// A segment sequence number (`ss_seq`, `s_last_seq`).
    Seq
);
newtype!(
    /// A block offset within a file (the B-tree key).
    FileBlk
);

impl Cno {
    /// `NILFS_CNO_MIN`.
    pub const MIN: Cno = Cno(1);
    /// `NILFS_CNO_MAX`: a DAT entry whose end is this is live in the current tree.
    pub const MAX: Cno = Cno(u64::MAX);
}

/// `NILFS_SUPER_MAGIC`.
pub const SUPER_MAGIC: u16 = 0x3434;
/// `NILFS_SEGSUM_MAGIC`.
pub const SEGSUM_MAGIC: u32 = 0x1EAF_FA11;
/// `NILFS_CURRENT_REV`; the kernel refuses anything below it.
pub const CURRENT_REV: u32 = 2;
/// `NILFS_MINOR_REV`.
pub const MINOR_REV: u16 = 0;
/// Byte offset of the primary super block.
pub const SB_OFFSET_BYTES: u64 = 1024;
/// Bytes the super block occupies on disk.
pub const SB_SIZE: usize = 1024;
/// `NILFS_MIN_BLOCK_SIZE`.
pub const MIN_BLOCK_SIZE: u32 = 1024;
/// `NILFS_MAX_BLOCK_SIZE`.
pub const MAX_BLOCK_SIZE: u32 = 65536;
/// `NILFS_SEG_MIN_BLOCKS`.
pub const SEG_MIN_BLOCKS: u32 = 16;
/// `NILFS_PSEG_MIN_BLOCKS`: a log is a summary block plus at least one more.
pub const PSEG_MIN_BLOCKS: u32 = 2;
/// `NILFS_MIN_NRSVSEGS`.
pub const MIN_NRSVSEGS: u64 = 8;
/// `NILFS_INODE_BMAP_SIZE`: `__le64` slots in `i_bmap`.
pub const INODE_BMAP_SIZE: usize = 7;
/// `NILFS_MIN_INODE_SIZE`.
pub const MIN_INODE_SIZE: u16 = 128;
/// `NILFS_MIN_DAT_ENTRY_SIZE`.
pub const MIN_DAT_ENTRY_SIZE: u16 = 32;
/// `NILFS_MIN_CHECKPOINT_SIZE`.
pub const MIN_CHECKPOINT_SIZE: u16 = 192;
/// `NILFS_MIN_SEGMENT_USAGE_SIZE`.
pub const MIN_SEGMENT_USAGE_SIZE: u16 = 16;
/// `NILFS_LINK_MAX`.
pub const LINK_MAX: u32 = 32000;
/// `NILFS_NAME_LEN`.
pub const NAME_LEN: usize = 255;
/// `NILFS_DFL_MAX_MNT_COUNT`.
pub const DFL_MAX_MNT_COUNT: u16 = 50;
/// `NILFS_BTREE_LEVEL_DATA`.
pub const BTREE_LEVEL_DATA: u8 = 0;
/// `NILFS_BTREE_LEVEL_NODE_MIN`.
pub const BTREE_LEVEL_NODE_MIN: u8 = 1;
/// `NILFS_BTREE_LEVEL_MAX` (exclusive).
pub const BTREE_LEVEL_MAX: u8 = 14;

/// Reserved inode numbers (§1.2 of the digest).
pub mod ino {
    use super::Ino;
    /// ext2-style bad-blocks inode; mkfs makes it an empty regular file.
    pub const BAD: Ino = Ino(1);
    /// The root directory.
    pub const ROOT: Ino = Ino(2);
    /// The DAT; its inode lives in the super root.
    pub const DAT: Ino = Ino(3);
    /// The checkpoint file; its inode lives in the super root.
    pub const CPFILE: Ino = Ino(4);
    /// The segment usage file; its inode lives in the super root.
    pub const SUFILE: Ino = Ino(5);
    /// The inode file; its inode lives in each checkpoint entry.
    pub const IFILE: Ino = Ino(6);
    /// Reserved for atime.
    pub const ATIME: Ino = Ino(7);
    /// Reserved for xattrs.
    pub const XATTR: Ino = Ino(8);
    /// Reserved for sketch.
    pub const SKETCH: Ino = Ino(10);
    /// `NILFS_USER_INO`: the first inode number for user files.
    pub const USER: Ino = Ino(11);
}

/// Whether `bs` is a NILFS block size: a power of two from
/// [`MIN_BLOCK_SIZE`] to [`MAX_BLOCK_SIZE`].
pub fn is_block_size(bs: u64) -> bool {
    bs.is_power_of_two() && (u64::from(MIN_BLOCK_SIZE)..=u64::from(MAX_BLOCK_SIZE)).contains(&bs)
}

/// [`Error::Invalid`](crate::Error::Invalid) unless `bs` is a NILFS block
/// size (the one check every geometry constructor makes first).
pub fn check_block_size(bs: u32) -> crate::Result<()> {
    if is_block_size(bs.into()) {
        Ok(())
    } else {
        Err(crate::Error::Invalid(format!("invalid block size {bs}")))
    }
}

/// Block size in bytes for `s_log_block_size`.
pub fn block_size_from_log(log: u32) -> Option<u32> {
    if log > 6 {
        None
    } else {
        Some(1024u32 << log)
    }
}
