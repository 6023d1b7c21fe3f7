//! `struct nilfs_super_block`: the 1024-byte super block, its CRC, and the
//! checks the kernel applies before it trusts one (digest §2).
//!
//! Decoding is structural only ([`SuperBlock::decode`]); the validity policy
//! lives in [`SuperBlock::check_valid`] (is this copy usable at all?) and
//! [`SuperBlock::check_geometry`] (may this file system be mounted on a device
//! of this size?), mirroring how the kernel splits the two in
//! `nilfs_load_super_block` and `init_nilfs`.

use super::crc::crc32_le;
use super::le::{layout, need, put_bytes, put_u32};
use super::{
    block_size_from_log, BlockNr, Cno, Seq, CURRENT_REV, MIN_BLOCK_SIZE, MIN_CHECKPOINT_SIZE,
    MIN_DAT_ENTRY_SIZE, MIN_INODE_SIZE, MIN_SEGMENT_USAGE_SIZE, SEG_MIN_BLOCKS, SUPER_MAGIC,
};
use crate::{Error, Result};

const WHAT: &str = "super block";

/// `NILFS_VALID_FS`: the file system was unmounted cleanly.
pub const STATE_VALID_FS: u16 = 0x0001;
/// `NILFS_ERROR_FS`: errors were detected.
pub const STATE_ERROR_FS: u16 = 0x0002;
/// `NILFS_RESIZE_FS`: a resize is required.
pub const STATE_RESIZE_FS: u16 = 0x0004;

/// `NILFS_FEATURE_COMPAT_RO_BLOCK_COUNT`: `cp_blocks_count` is maintained.
pub const FEATURE_COMPAT_RO_BLOCK_COUNT: u64 = 0x1;
/// `NILFS_FEATURE_COMPAT_SUPP`: no compat features are defined.
pub const FEATURE_COMPAT_SUPP: u64 = 0;
/// `NILFS_FEATURE_COMPAT_RO_SUPP`: other bits force a read-only mount.
pub const FEATURE_COMPAT_RO_SUPP: u64 = FEATURE_COMPAT_RO_BLOCK_COUNT;
/// `NILFS_FEATURE_INCOMPAT_SUPP`: any incompat bit refuses the mount.
pub const FEATURE_INCOMPAT_SUPP: u64 = 0;

/// The smallest device the kernel looks at:
/// `NILFS_SEG_MIN_BLOCKS * NILFS_MIN_BLOCK_SIZE + 4096` (`nilfs_load_super_block`).
pub const MIN_DEVICE_BYTES: u64 = SEG_MIN_BLOCKS as u64 * MIN_BLOCK_SIZE as u64 + 4096;

/// Byte offset of `s_sum`; the CRC treats these four bytes as zero.
const SUM_OFFSET: usize = SuperBlock::s_sum.offset;
/// The smallest `s_bytes` the kernel accepts (`nilfs_valid_sb`): the fields
/// up to and including `s_sum`.
pub const MIN_BYTES: u16 = SUM_OFFSET as u16 + 4;
/// The end of the log cursor (`s_last_cno`, `s_last_pseg`, `s_last_seq`):
/// the fields every commit rewrites, which one copy carries to the other
/// only as far as `s_bytes` reaches (`memcpy(.., ns_sbsize)` in
/// `nilfs_setup_super`). A copy whose `s_bytes` ends before it can be left
/// with a torn cursor: finding K22 (docs/findings.md).
pub const CURSOR_END: usize = SuperBlock::s_last_seq.offset + 8;
/// Byte offset of `s_reserved`, which equals the CRC-covered size mkfs writes.
const RESERVED_OFFSET: usize = 0x118;
/// Length of `s_reserved[186]` (186 × 4 bytes).
pub const RESERVED_LEN: usize = SuperBlock::SIZE - RESERVED_OFFSET;

/// An on-disk super block, every field as read (no `s_` prefix on names).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SuperBlock {
    /// `s_rev_level`; the kernel refuses anything below [`CURRENT_REV`].
    pub rev_level: u32,
    /// `s_minor_rev_level`.
    pub minor_rev_level: u16,
    /// `s_magic`, [`SUPER_MAGIC`] when valid.
    pub magic: u16,
    /// `s_bytes`: how many leading bytes the CRC covers (280 as written).
    pub bytes: u16,
    /// `s_flags` (reserved).
    pub flags: u16,
    /// `s_crc_seed`: the seed of every checksum on this file system.
    pub crc_seed: u32,
    /// `s_sum`: CRC of the first `bytes` bytes with this field zeroed.
    pub sum: u32,
    /// `s_log_block_size`: block size is `1024 << log_block_size`.
    pub log_block_size: u32,
    /// `s_nsegments`: number of full segments.
    pub nsegments: u64,
    /// `s_dev_size`: device size in bytes when last written.
    pub dev_size: u64,
    /// `s_first_data_block`: first block of segment 0.
    pub first_data_block: u64,
    /// `s_blocks_per_segment`.
    pub blocks_per_segment: u32,
    /// `s_r_segments_percentage`: reserved segments, percent.
    pub r_segments_percentage: u32,
    /// `s_last_cno`: checkpoint of the log at `last_pseg`.
    pub last_cno: Cno,
    /// `s_last_pseg`: first block of the latest log known to carry a super root.
    pub last_pseg: BlockNr,
    /// `s_last_seq`: `ss_seq` of that log.
    pub last_seq: Seq,
    /// `s_free_blocks_count`.
    pub free_blocks_count: u64,
    /// `s_ctime`: creation time (seconds).
    pub ctime: u64,
    /// `s_mtime`: last mount time.
    pub mtime: u64,
    /// `s_wtime`: last super block write time.
    pub wtime: u64,
    /// `s_mnt_count`.
    pub mnt_count: u16,
    /// `s_max_mnt_count`.
    pub max_mnt_count: u16,
    /// `s_state`: `STATE_*` bits.
    pub state: u16,
    /// `s_errors` (the kernel ignores it).
    pub errors: u16,
    /// `s_lastcheck`.
    pub lastcheck: u64,
    /// `s_checkinterval`.
    pub checkinterval: u32,
    /// `s_creator_os` (0 = Linux).
    pub creator_os: u32,
    /// `s_def_resuid`.
    pub def_resuid: u16,
    /// `s_def_resgid`.
    pub def_resgid: u16,
    /// `s_first_ino`: first non-reserved inode number.
    pub first_ino: u32,
    /// `s_inode_size`: on-disk inode stride.
    pub inode_size: u16,
    /// `s_dat_entry_size`.
    pub dat_entry_size: u16,
    /// `s_checkpoint_size`.
    pub checkpoint_size: u16,
    /// `s_segment_usage_size`.
    pub segment_usage_size: u16,
    /// `s_uuid`.
    pub uuid: [u8; 16],
    /// `s_volume_name`: the label, not necessarily NUL-terminated.
    pub volume_name: [u8; 80],
    /// `s_c_interval`: commit interval in seconds (0 = kernel default).
    pub c_interval: u32,
    /// `s_c_block_max`: dirty-block threshold (0 = kernel default).
    pub c_block_max: u32,
    /// `s_feature_compat`.
    pub feature_compat: u64,
    /// `s_feature_compat_ro`.
    pub feature_compat_ro: u64,
    /// `s_feature_incompat`.
    pub feature_incompat: u64,
    /// `s_reserved`: the trailing [`RESERVED_LEN`] bytes, kept so that an
    /// encode reproduces what was read. [`encode`](Self::encode) writes at most
    /// `RESERVED_LEN` bytes of it and zero-fills the rest.
    pub reserved: Vec<u8>,
}

impl Default for SuperBlock {
    /// All fields zero, with `reserved` at its full length so that the value
    /// round-trips through encode/decode.
    fn default() -> Self {
        SuperBlock {
            rev_level: 0,
            minor_rev_level: 0,
            magic: 0,
            bytes: 0,
            flags: 0,
            crc_seed: 0,
            sum: 0,
            log_block_size: 0,
            nsegments: 0,
            dev_size: 0,
            first_data_block: 0,
            blocks_per_segment: 0,
            r_segments_percentage: 0,
            last_cno: Cno(0),
            last_pseg: BlockNr(0),
            last_seq: Seq(0),
            free_blocks_count: 0,
            ctime: 0,
            mtime: 0,
            wtime: 0,
            mnt_count: 0,
            max_mnt_count: 0,
            state: 0,
            errors: 0,
            lastcheck: 0,
            checkinterval: 0,
            creator_os: 0,
            def_resuid: 0,
            def_resgid: 0,
            first_ino: 0,
            inode_size: 0,
            dat_entry_size: 0,
            checkpoint_size: 0,
            segment_usage_size: 0,
            uuid: [0; 16],
            volume_name: [0; 80],
            c_interval: 0,
            c_block_max: 0,
            feature_compat: 0,
            feature_compat_ro: 0,
            feature_incompat: 0,
            reserved: vec![0; RESERVED_LEN],
        }
    }
}

/// The device size an image declares: `s_dev_size` of the primary super
/// block in the image's first bytes (mkfs.nilfs2 records the device size
/// there and the kernel updates it), for bounding what an import may
/// inflate to. Only the magic is checked, as libnilfs reads a super block;
/// without one there is no declared size and the image is refused.
pub fn declared_dev_size(prefix: &[u8]) -> Result<u64> {
    let start = super::SB_OFFSET_BYTES as usize;
    let sb = prefix
        .get(start..start + SuperBlock::SIZE)
        .map(SuperBlock::decode)
        .transpose()?;
    match sb {
        Some(sb) if sb.magic == SUPER_MAGIC => Ok(sb.dev_size),
        _ => Err(Error::corrupt(
            WHAT,
            "no NILFS2 super block magic at byte 1024, so no declared device size to inflate to",
        )),
    }
}

impl SuperBlock {
    /// Bytes the structure occupies on disk.
    pub const SIZE: usize = 1024;
    /// `s_bytes` as every writer sets it: the offset of `s_reserved`.
    pub const DEFAULT_BYTES: u16 = RESERVED_OFFSET as u16;

    /// Decode the first 1024 bytes of `buf`. Structural only: any field
    /// values are accepted; see [`check_valid`](Self::check_valid).
    pub fn decode(buf: &[u8]) -> Result<Self> {
        need(buf, Self::SIZE, WHAT)?;
        Ok(SuperBlock {
            rev_level: Self::s_rev_level.u32(buf),
            minor_rev_level: Self::s_minor_rev_level.u16(buf),
            magic: Self::s_magic.u16(buf),
            bytes: Self::s_bytes.u16(buf),
            flags: Self::s_flags.u16(buf),
            crc_seed: Self::s_crc_seed.u32(buf),
            sum: Self::s_sum.u32(buf),
            log_block_size: Self::s_log_block_size.u32(buf),
            nsegments: Self::s_nsegments.u64(buf),
            dev_size: Self::s_dev_size.u64(buf),
            first_data_block: Self::s_first_data_block.u64(buf),
            blocks_per_segment: Self::s_blocks_per_segment.u32(buf),
            r_segments_percentage: Self::s_r_segments_percentage.u32(buf),
            last_cno: Cno(Self::s_last_cno.u64(buf)),
            last_pseg: BlockNr(Self::s_last_pseg.u64(buf)),
            last_seq: Seq(Self::s_last_seq.u64(buf)),
            free_blocks_count: Self::s_free_blocks_count.u64(buf),
            ctime: Self::s_ctime.u64(buf),
            mtime: Self::s_mtime.u64(buf),
            wtime: Self::s_wtime.u64(buf),
            mnt_count: Self::s_mnt_count.u16(buf),
            max_mnt_count: Self::s_max_mnt_count.u16(buf),
            state: Self::s_state.u16(buf),
            errors: Self::s_errors.u16(buf),
            lastcheck: Self::s_lastcheck.u64(buf),
            checkinterval: Self::s_checkinterval.u32(buf),
            creator_os: Self::s_creator_os.u32(buf),
            def_resuid: Self::s_def_resuid.u16(buf),
            def_resgid: Self::s_def_resgid.u16(buf),
            first_ino: Self::s_first_ino.u32(buf),
            inode_size: Self::s_inode_size.u16(buf),
            dat_entry_size: Self::s_dat_entry_size.u16(buf),
            checkpoint_size: Self::s_checkpoint_size.u16(buf),
            segment_usage_size: Self::s_segment_usage_size.u16(buf),
            uuid: Self::s_uuid.bytes(buf),
            volume_name: Self::s_volume_name.bytes(buf),
            c_interval: Self::s_c_interval.u32(buf),
            c_block_max: Self::s_c_block_max.u32(buf),
            feature_compat: Self::s_feature_compat.u64(buf),
            feature_compat_ro: Self::s_feature_compat_ro.u64(buf),
            feature_incompat: Self::s_feature_incompat.u64(buf),
            reserved: buf[RESERVED_OFFSET..Self::SIZE].to_vec(),
        })
    }

    /// Decode and apply [`check_valid`](Self::check_valid): what the kernel
    /// means by "a valid super block copy".
    pub fn decode_valid(buf: &[u8]) -> Result<Self> {
        let sb = Self::decode(buf)?;
        sb.check_valid()?;
        Ok(sb)
    }

    /// The 1024 on-disk bytes, every field verbatim (including `sum`).
    pub fn encode(&self) -> Vec<u8> {
        let mut b = vec![0u8; Self::SIZE];
        Self::s_rev_level.put_u32(&mut b, self.rev_level);
        Self::s_minor_rev_level.put_u16(&mut b, self.minor_rev_level);
        Self::s_magic.put_u16(&mut b, self.magic);
        Self::s_bytes.put_u16(&mut b, self.bytes);
        Self::s_flags.put_u16(&mut b, self.flags);
        Self::s_crc_seed.put_u32(&mut b, self.crc_seed);
        Self::s_sum.put_u32(&mut b, self.sum);
        Self::s_log_block_size.put_u32(&mut b, self.log_block_size);
        Self::s_nsegments.put_u64(&mut b, self.nsegments);
        Self::s_dev_size.put_u64(&mut b, self.dev_size);
        Self::s_first_data_block.put_u64(&mut b, self.first_data_block);
        Self::s_blocks_per_segment.put_u32(&mut b, self.blocks_per_segment);
        Self::s_r_segments_percentage.put_u32(&mut b, self.r_segments_percentage);
        Self::s_last_cno.put_u64(&mut b, self.last_cno.0);
        Self::s_last_pseg.put_u64(&mut b, self.last_pseg.0);
        Self::s_last_seq.put_u64(&mut b, self.last_seq.0);
        Self::s_free_blocks_count.put_u64(&mut b, self.free_blocks_count);
        Self::s_ctime.put_u64(&mut b, self.ctime);
        Self::s_mtime.put_u64(&mut b, self.mtime);
        Self::s_wtime.put_u64(&mut b, self.wtime);
        Self::s_mnt_count.put_u16(&mut b, self.mnt_count);
        Self::s_max_mnt_count.put_u16(&mut b, self.max_mnt_count);
        Self::s_state.put_u16(&mut b, self.state);
        Self::s_errors.put_u16(&mut b, self.errors);
        Self::s_lastcheck.put_u64(&mut b, self.lastcheck);
        Self::s_checkinterval.put_u32(&mut b, self.checkinterval);
        Self::s_creator_os.put_u32(&mut b, self.creator_os);
        Self::s_def_resuid.put_u16(&mut b, self.def_resuid);
        Self::s_def_resgid.put_u16(&mut b, self.def_resgid);
        Self::s_first_ino.put_u32(&mut b, self.first_ino);
        Self::s_inode_size.put_u16(&mut b, self.inode_size);
        Self::s_dat_entry_size.put_u16(&mut b, self.dat_entry_size);
        Self::s_checkpoint_size.put_u16(&mut b, self.checkpoint_size);
        Self::s_segment_usage_size.put_u16(&mut b, self.segment_usage_size);
        Self::s_uuid.put_bytes(&mut b, &self.uuid);
        Self::s_volume_name.put_bytes(&mut b, &self.volume_name);
        Self::s_c_interval.put_u32(&mut b, self.c_interval);
        Self::s_c_block_max.put_u32(&mut b, self.c_block_max);
        Self::s_feature_compat.put_u64(&mut b, self.feature_compat);
        Self::s_feature_compat_ro.put_u64(&mut b, self.feature_compat_ro);
        Self::s_feature_incompat.put_u64(&mut b, self.feature_incompat);
        let n = self.reserved.len().min(RESERVED_LEN);
        put_bytes(&mut b, RESERVED_OFFSET, &self.reserved[..n]);
        b
    }

    /// The CRC this super block should carry: `crc32_le(crc_seed)` over the
    /// first `bytes` bytes of the encoding with `s_sum` read as zero, as
    /// `nilfs_valid_sb` computes it. `bytes` is clamped to 1024 so a hostile
    /// value cannot index out of range.
    pub fn compute_sum(&self) -> u32 {
        let mut b = self.encode();
        put_u32(&mut b, SUM_OFFSET, 0);
        let n = usize::from(self.bytes).min(Self::SIZE);
        crc32_le(self.crc_seed, &b[..n])
    }

    /// Store [`compute_sum`](Self::compute_sum) in `sum`. Call after the last
    /// field change and before [`encode`](Self::encode).
    pub fn seal(&mut self) {
        self.sum = self.compute_sum();
    }

    /// Is this copy usable at all? The kernel's `nilfs_valid_sb`: the magic
    /// matches, `s_bytes` covers at least the fields up to and including
    /// `s_sum` (0x14) and at most 1024 bytes, and the CRC matches.
    pub fn check_valid(&self) -> Result<()> {
        if self.magic != SUPER_MAGIC {
            return Err(Error::corrupt(
                WHAT,
                format!("bad magic {:#06x}", self.magic),
            ));
        }
        let min = MIN_BYTES;
        if self.bytes < min || usize::from(self.bytes) > Self::SIZE {
            return Err(Error::corrupt(
                WHAT,
                format!("s_bytes {} outside [{min}, {}]", self.bytes, Self::SIZE),
            ));
        }
        let crc = self.compute_sum();
        if crc != self.sum {
            return Err(Error::corrupt(
                WHAT,
                format!(
                    "checksum mismatch: stored {:#010x}, computed {crc:#010x}",
                    self.sum
                ),
            ));
        }
        Ok(())
    }

    /// Block size in bytes. Like the kernel's `nilfs_get_blocksize`, a
    /// `s_log_block_size` above 6 (blocks larger than 64 KiB) is refused.
    pub fn block_size(&self) -> Result<u32> {
        block_size_from_log(self.log_block_size).ok_or_else(|| {
            Error::corrupt(
                WHAT,
                format!("block size 2^{} KiB too large", self.log_block_size),
            )
        })
    }

    /// The checks the kernel makes on the chosen copy before mounting on a
    /// device of `dev_size_bytes` bytes, in the order of `init_nilfs`:
    /// - the device is at least [`MIN_DEVICE_BYTES`] (`nilfs_load_super_block`);
    /// - no unsupported incompat feature (`nilfs_check_feature_compatibility`;
    ///   unsupported compat_ro bits only force read-only, see
    ///   [`requires_read_only`](Self::requires_read_only));
    /// - the block size (`nilfs_get_blocksize`);
    /// - `nilfs_store_disk_layout`: revision ≥ 2, `s_bytes` ≤ 1024, inode
    ///   size in [128, bs], `s_first_ino` ≥ 11, blocks per segment ≥ 16,
    ///   reserved percentage in 1..=99, `nsegments` ≤ `u64::MAX / bps`, and
    ///   `nsegments * bps` no more than the device's blocks (the kernel skips
    ///   this last test when the device has zero whole blocks);
    /// - `nilfs_store_log_cursor`: `s_last_pseg` lies in a segment that exists;
    /// - entry sizes, which the kernel checks when it loads the super root
    ///   (`nilfs_dat_read`, `nilfs_cpfile_read`, `nilfs_sufile_read`): DAT
    ///   entry in [32, bs], checkpoint in [192, bs], segment usage in [16, bs].
    pub fn check_geometry(&self, dev_size_bytes: u64) -> Result<()> {
        let bad = |detail: String| Err(Error::corrupt(WHAT, detail));
        if dev_size_bytes < MIN_DEVICE_BYTES {
            return bad(format!("device of {dev_size_bytes} bytes is too small"));
        }
        let unknown = self.feature_incompat & !FEATURE_INCOMPAT_SUPP;
        if unknown != 0 {
            return bad(format!("unsupported incompat features {unknown:#x}"));
        }
        let bs = self.block_size()?;
        if self.rev_level < CURRENT_REV {
            return bad(format!(
                "unsupported revision {}.{}",
                self.rev_level, self.minor_rev_level
            ));
        }
        if usize::from(self.bytes) > Self::SIZE {
            return bad(format!("s_bytes {} too large", self.bytes));
        }
        if self.inode_size < MIN_INODE_SIZE || u32::from(self.inode_size) > bs {
            return bad(format!(
                "inode size {} outside [{MIN_INODE_SIZE}, {bs}]",
                self.inode_size
            ));
        }
        if self.first_ino < super::ino::USER.0 as u32 {
            return bad(format!("first inode number {} below 11", self.first_ino));
        }
        let bps = self.blocks_per_segment;
        if bps < SEG_MIN_BLOCKS {
            return bad(format!(
                "{bps} blocks per segment, need at least {SEG_MIN_BLOCKS}"
            ));
        }
        if !(1..=99).contains(&self.r_segments_percentage) {
            return bad(format!(
                "reserved segment percentage {}",
                self.r_segments_percentage
            ));
        }
        let Some(seg_blocks) = self.nsegments.checked_mul(u64::from(bps)) else {
            return bad(format!(
                "{} segments of {bps} blocks overflow",
                self.nsegments
            ));
        };
        let dev_blocks = dev_size_bytes / u64::from(bs);
        if dev_blocks != 0 && dev_blocks < seg_blocks {
            return bad(format!(
                "{seg_blocks} segment blocks exceed the device's {dev_blocks}"
            ));
        }
        self.check_log_cursor()?;
        self.check_entry_sizes(bs)
    }

    /// `nilfs_store_log_cursor`: `s_last_pseg` lies in a segment that
    /// exists (of this super block's `nsegments`).
    pub fn check_log_cursor(&self) -> Result<()> {
        let segnum = self.last_pseg.0 / u64::from(self.blocks_per_segment.max(1));
        if segnum >= self.nsegments {
            return Err(Error::corrupt(
                WHAT,
                format!(
                    "last log at block {} is in segment {segnum} of {}",
                    self.last_pseg, self.nsegments
                ),
            ));
        }
        Ok(())
    }

    /// The entry sizes the kernel checks as it loads the super root's
    /// files (`nilfs_dat_read`, `nilfs_cpfile_read`, `nilfs_sufile_read`),
    /// for blocks of `bs` bytes.
    pub fn check_entry_sizes(&self, bs: u32) -> Result<()> {
        let sizes = [
            ("DAT entry", self.dat_entry_size, MIN_DAT_ENTRY_SIZE),
            ("checkpoint", self.checkpoint_size, MIN_CHECKPOINT_SIZE),
            (
                "segment usage",
                self.segment_usage_size,
                MIN_SEGMENT_USAGE_SIZE,
            ),
        ];
        for (name, size, min) in sizes {
            if size < min || u32::from(size) > bs {
                return Err(Error::corrupt(
                    WHAT,
                    format!("{name} size {size} outside [{min}, {bs}]"),
                ));
            }
        }
        Ok(())
    }

    /// This copy as the kernel holds it after falling back to it from
    /// `first` (`load_nilfs`: "trying rollback from an earlier position"):
    /// the spare is copied over the super block in use and its CRC seed,
    /// write time and log cursor are taken, but `nilfs_store_disk_layout`
    /// does not run again, so the disk layout stays `first`'s (segments,
    /// their size, the first data block, the reserved percentage, the
    /// inode size and first inode number). Checked as the kernel checks
    /// it then: the cursor against that layout (`nilfs_store_log_cursor`)
    /// and the entry sizes (the super root's loaders).
    pub fn fallen_back_from(mut self, first: &SuperBlock) -> Result<Self> {
        self.blocks_per_segment = first.blocks_per_segment;
        self.nsegments = first.nsegments;
        self.first_data_block = first.first_data_block;
        self.r_segments_percentage = first.r_segments_percentage;
        self.inode_size = first.inode_size;
        self.first_ino = first.first_ino;
        self.check_log_cursor()?;
        self.check_entry_sizes(self.block_size()?)?;
        Ok(self)
    }

    /// Whether compat_ro bits this implementation does not know are set: the
    /// kernel then refuses a read-write mount (`nilfs_check_feature_compatibility`).
    pub fn requires_read_only(&self) -> bool {
        self.feature_compat_ro & !FEATURE_COMPAT_RO_SUPP != 0
    }

    /// The volume label: `s_volume_name` up to its first NUL, lossily decoded.
    pub fn volume_label(&self) -> String {
        let end = self.volume_name.iter().position(|&c| c == 0).unwrap_or(80);
        String::from_utf8_lossy(&self.volume_name[..end]).into_owned()
    }

    /// `s_uuid` in the usual 8-4-4-4-12 lowercase hex form.
    pub fn uuid_string(&self) -> String {
        let hex = |r: std::ops::Range<usize>| -> String {
            self.uuid[r].iter().map(|b| format!("{b:02x}")).collect()
        };
        format!(
            "{}-{}-{}-{}-{}",
            hex(0..4),
            hex(4..6),
            hex(6..8),
            hex(8..10),
            hex(10..16)
        )
    }
}

layout!(SuperBlock {
    s_rev_level: 0x0, 4;
    s_minor_rev_level: 0x4, 2;
    s_magic: 0x6, 2;
    s_bytes: 0x8, 2;
    s_flags: 0xA, 2;
    s_crc_seed: 0xC, 4;
    s_sum: 0x10, 4;
    s_log_block_size: 0x14, 4;
    s_nsegments: 0x18, 8;
    s_dev_size: 0x20, 8;
    s_first_data_block: 0x28, 8;
    s_blocks_per_segment: 0x30, 4;
    s_r_segments_percentage: 0x34, 4;
    s_last_cno: 0x38, 8;
    s_last_pseg: 0x40, 8;
    s_last_seq: 0x48, 8;
    s_free_blocks_count: 0x50, 8;
    s_ctime: 0x58, 8;
    s_mtime: 0x60, 8;
    s_wtime: 0x68, 8;
    s_mnt_count: 0x70, 2;
    s_max_mnt_count: 0x72, 2;
    s_state: 0x74, 2;
    s_errors: 0x76, 2;
    s_lastcheck: 0x78, 8;
    s_checkinterval: 0x80, 4;
    s_creator_os: 0x84, 4;
    s_def_resuid: 0x88, 2;
    s_def_resgid: 0x8A, 2;
    s_first_ino: 0x8C, 4;
    s_inode_size: 0x90, 2;
    s_dat_entry_size: 0x92, 2;
    s_checkpoint_size: 0x94, 2;
    s_segment_usage_size: 0x96, 2;
    s_uuid: 0x98, 16;
    s_volume_name: 0xA8, 80;
    s_c_interval: 0xF8, 4;
    s_c_block_max: 0xFC, 4;
    s_feature_compat: 0x100, 8;
    s_feature_compat_ro: 0x108, 8;
    s_feature_incompat: 0x110, 8;
});

/// `NILFS_SB2_OFFSET_BYTES`: byte offset of the secondary super block, the
/// start of the last whole 4 KiB unit of the device. `None` when the device is
/// smaller than [`MIN_DEVICE_BYTES`], which the kernel refuses before it
/// looks for either copy (`nilfs_load_super_block`).
pub fn sb2_offset_bytes(dev_size: u64) -> Option<u64> {
    if dev_size < MIN_DEVICE_BYTES {
        None
    } else {
        Some(((dev_size >> 12) - 1) << 12)
    }
}

/// Whether the kernel would drop the secondary copy because `sb` (the copy it
/// chose) places the secondary location inside the segment area, following
/// `nilfs_sb2_bad_offset`: the offset is computed from the current device
/// size, not `s_dev_size`, and nonsensical parameters (fewer than 16 blocks
/// per segment, blocks over 64 KiB) or a device too small to hold a secondary
/// copy count as "inside" too.
pub fn secondary_is_inside_segments(sb: &SuperBlock, dev_size: u64) -> bool {
    let Some(off) = sb2_offset_bytes(dev_size) else {
        return true;
    };
    if sb.blocks_per_segment < SEG_MIN_BLOCKS || sb.log_block_size > 6 {
        return true;
    }
    let block = off >> (sb.log_block_size + 10);
    block / u64::from(sb.blocks_per_segment) < sb.nsegments
}
