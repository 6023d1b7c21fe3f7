//! mkfs: write a fresh NILFS2 filesystem exactly as Debian's `mkfs.nilfs2`
//! (nilfs-utils 2.2.9, `sbin/mkfs/mkfs.c`) does.
//!
//! A fresh filesystem is one log in segment 0 (flags `LOGBGN|LOGEND|SR`,
//! checkpoint 1, sequence 0) holding, in this order: the root directory, the
//! ifile, the cpfile, the sufile and the DAT, then the super root; and two
//! identical super blocks. Everything is determined by the geometry and three
//! inputs that mkfs.nilfs2 draws at random — the CRC seed, the UUID and the
//! creation time — which are parameters here, so the output is deterministic
//! and, given the same three values, byte-identical to mkfs.nilfs2's.
//!
//! nilfs-utils up to 2.2.9 also creates the `.nilfs` file (inode 11) with a
//! root directory entry; 2.2.10 dropped it (Debian 13's 2.2.11 makes none).
//! We follow 2.2.9 by default, Debian 12's; [`MkfsOptions::dot_nilfs`] off
//! gives the 2.2.10-and-later layout, byte for byte.
//!
//! Quirks of mkfs that the kernel tolerates and we reproduce on purpose
//! (digest §12.3): `fi_cno` = 1 for metadata files, `i_blocks` counted in
//! filesystem blocks, the ACTIVE bit on segments 0 and 1, and
//! `s_free_blocks_count` counting segment 1 as free.

use std::collections::BTreeMap;
use std::fmt;

use crate::device::{BlockDevice, SECTOR_SIZE};
use crate::format::bmap::{BmapRoot, DirectMap};
use crate::format::cpfile::{Checkpoint, CpfileHeader, CP_INVALID};
use crate::format::dat::DatEntry;
use crate::format::dir::{self, DirEntry};
use crate::format::inode::{Inode, S_IFDIR, S_IFREG};
use crate::format::palloc;
use crate::format::segsum::{
    seal_log, summary_bytes, Binfo, FileRecord, Finfo, SegmentSummary, Summary, SS_LOGBGN,
    SS_LOGEND, SS_SR,
};
use crate::format::sufile::{SegmentUsage, SufileHeader, SU_ACTIVE, SU_DIRTY};
use crate::format::super_root::{self, SuperRoot};
use crate::format::superblock::{self, SuperBlock};
use crate::format::{
    ino, BlockNr, Cno, FileBlk, Ino, Seq, VBlockNr, CURRENT_REV, DFL_MAX_MNT_COUNT, MINOR_REV,
    MIN_BLOCK_SIZE, MIN_NRSVSEGS, SB_OFFSET_BYTES, SEGSUM_MAGIC, SEG_MIN_BLOCKS, SUPER_MAGIC,
};
use crate::rng::SplitMix64;
use crate::{Error, Result};

/// `NILFS_DISKHDR_SIZE`: room kept for a boot sector and the primary super block.
const DISKHDR_SIZE: u64 = 4096;
/// `NILFS_DISK_ERASE_SIZE`: mkfs zeroes this much at both ends of the device.
const DISK_ERASE_SIZE: u64 = 1 << 20;
/// `NILFS_MIN_NUSERSEGS`.
const MIN_NUSERSEGS: u64 = 8;
/// The log and its "next" segment (`nr_initial_segments`).
const NR_INITIAL_SEGMENTS: u64 = 2;

/// How many blocks mkfs.nilfs2 gives file `ino` on a file system of
/// `block_size`-byte blocks, exactly as the `count_*_blocks` functions of
/// mkfs.c: the root directory one; the palloc files (ifile, DAT) a
/// descriptor block, a bitmap block and enough entry blocks for their
/// initial entries (12 inode slots, 0..=11, whether or not `.nilfs`
/// exists); the cpfile and sufile their header and first entries. These
/// depend on the block size alone, and mkfs writes them as the files'
/// `i_blocks` (a block count, where the kernel keeps 512-byte sectors), so
/// the checker can tell what a metadata file's `i_blocks` must be.
/// `None` for a file mkfs does not make.
pub fn initial_blocks(block_size: u64, ino: Ino) -> Option<u64> {
    let bs = block_size;
    let inode_size = 128u64;
    let nr_initial_ino = 12u64;
    let ifile_blocks = 2 + nr_initial_ino.div_ceil(bs / inode_size);
    let cpfile_blocks = 1u64.div_ceil(bs / 192);
    let sufile_blocks = (NR_INITIAL_SEGMENTS + 2).div_ceil(bs / 16);
    let nvblocknrs = 1 + ifile_blocks + cpfile_blocks + sufile_blocks;
    let dat_blocks = 2 + nvblocknrs.div_ceil(bs / 32);
    Some(match ino {
        ino::ROOT => 1,
        ino::IFILE => ifile_blocks,
        ino::CPFILE => cpfile_blocks,
        ino::SUFILE => sufile_blocks,
        ino::DAT => dat_blocks,
        _ => return None,
    })
}
/// `NILFS_DEF_CHECK_INTERVAL`: 180 days.
const DEF_CHECK_INTERVAL: u32 = 180 * 24 * 60 * 60;
/// mkfs caps the block size at the CPU page size; x86-64 and arm64 Debian use 4 KiB.
pub const PAGE_SIZE: u64 = 4096;
/// `NILFS_FEATURE_COMPAT_RO_BLOCK_COUNT`: `cp_blocks_count` is maintained.
/// nilfs-utils 2.2.9 leaves it off unless `-O block_count` asks for it.
pub const FEATURE_COMPAT_RO_BLOCK_COUNT: u64 = 1;
/// The time mkfs stamps when the caller gives none: 2023-11-14 22:13:20 UTC.
pub const DEFAULT_CTIME: u64 = 1_700_000_000;

/// The parameters of a new filesystem. Defaults are mkfs.nilfs2's, with the
/// three random inputs replaced by values derived from a seed ([`MkfsOptions::from_seed`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MkfsOptions {
    /// `-b`: block size in bytes (a power of two, 1024..=page size).
    pub block_size: u64,
    /// `-B`: blocks per segment (a power of two, at least 16).
    pub blocks_per_segment: u64,
    /// `-m`: reserved segments percentage (1..=99).
    pub reserved_percentage: u64,
    /// `-L`: volume label; truncated to 80 bytes without a terminating NUL, as `strncpy` does.
    pub label: Vec<u8>,
    /// Creation time in seconds (`-P` in mkfs.nilfs2).
    pub ctime: u64,
    /// `s_crc_seed`.
    pub crc_seed: u32,
    /// `s_uuid`.
    pub uuid: [u8; 16],
    /// Create the `.nilfs` file as nilfs-utils 2.2.x does (default true).
    pub dot_nilfs: bool,
    /// `s_feature_compat_ro` (`-O block_count` sets
    /// [`FEATURE_COMPAT_RO_BLOCK_COUNT`]); 0 by default, as in 2.2.9.
    pub feature_compat_ro: u64,
}

impl Default for MkfsOptions {
    fn default() -> Self {
        MkfsOptions::from_seed(0)
    }
}

impl MkfsOptions {
    /// The defaults (seed 0) with `block_size` (`-b`) and
    /// `blocks_per_segment` (`-B`).
    pub fn with_geometry(block_size: u64, blocks_per_segment: u64) -> Self {
        MkfsOptions::default().geometry(block_size, blocks_per_segment)
    }

    /// These options with `block_size` (`-b`) and `blocks_per_segment` (`-B`).
    pub fn geometry(self, block_size: u64, blocks_per_segment: u64) -> Self {
        MkfsOptions {
            block_size,
            blocks_per_segment,
            ..self
        }
    }

    /// Defaults, with the CRC seed and UUID drawn deterministically from `seed`
    /// and the creation time fixed at [`DEFAULT_CTIME`].
    pub fn from_seed(seed: u64) -> Self {
        let mut rng = SplitMix64::new(seed);
        let crc_seed = rng.next_u64() as u32;
        let mut uuid = [0u8; 16];
        uuid[..8].copy_from_slice(&rng.next_u64().to_le_bytes());
        uuid[8..].copy_from_slice(&rng.next_u64().to_le_bytes());
        // A version-4, RFC 4122 variant UUID, like libuuid's uuid_generate.
        uuid[6] = (uuid[6] & 0x0F) | 0x40;
        uuid[8] = (uuid[8] & 0x3F) | 0x80;
        MkfsOptions {
            block_size: 4096,
            blocks_per_segment: 2048,
            reserved_percentage: 5,
            label: Vec::new(),
            ctime: DEFAULT_CTIME,
            crc_seed,
            uuid,
            dot_nilfs: true,
            feature_compat_ro: 0,
        }
    }
}

/// Why mkfs refused a geometry. `Display` gives mkfs.nilfs2's own message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MkfsError {
    /// `-b` is not a power of two in 1024..=page size.
    InvalidBlockSize(u64),
    /// `-B` below 16.
    TooFewBlocksPerSegment(u64),
    /// `-B` not a power of two.
    InvalidBlocksPerSegment(u64),
    /// `-m` below 1.
    TooSmallReservedPercentage(u64),
    /// `-m` above 99.
    TooLargeReservedPercentage(u64),
    /// `-O` named a feature mkfs does not support.
    InvalidFeature(String),
    /// The first log does not fit in segment 0.
    TooSmallSegment {
        /// `-B`.
        blocks_per_segment: u64,
        /// Blocks segment 0 would need.
        required: u64,
    },
    /// Fewer segments than reserved plus the minimum of user segments.
    TooSmallDevice {
        /// The device size in bytes.
        dev_size: u64,
        /// The smallest size that would do.
        required: u64,
    },
}

impl fmt::Display for MkfsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MkfsError::InvalidBlockSize(b) => write!(f, "Error: invalid blocksize: {b}"),
            MkfsError::TooFewBlocksPerSegment(b) => {
                write!(f, "Error: too few blocks per segment: {b}")
            }
            MkfsError::InvalidBlocksPerSegment(b) => {
                write!(f, "Error: invalid number of blocks per segment: {b}")
            }
            MkfsError::TooSmallReservedPercentage(p) => {
                write!(f, "Error: too small reserved segments percentage: {p}")
            }
            MkfsError::TooLargeReservedPercentage(p) => {
                write!(f, "Error: too large reserved segments percentage: {p}")
            }
            MkfsError::InvalidFeature(s) => write!(f, "Error: invalid feature set option: {s}"),
            MkfsError::TooSmallSegment {
                blocks_per_segment,
                required,
            } => write!(
                f,
                "Error: too small segment.\n       segment size={blocks_per_segment} blocks, \
                 required segment size={required} blocks.\n       \
                 Please enlarge segment with -B option."
            ),
            MkfsError::TooSmallDevice { dev_size, required } => write!(
                f,
                "Error: too small device.\n       device size={dev_size} bytes, required \
                 size={required} bytes.\n       \
                 Please enlarge the device, or shorten segments with -B option."
            ),
        }
    }
}

impl std::error::Error for MkfsError {}

impl From<MkfsError> for Error {
    fn from(e: MkfsError) -> Self {
        Error::Invalid(e.to_string())
    }
}

/// The geometry mkfs derived, returned so callers can report it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Layout {
    /// Block size in bytes.
    pub block_size: u64,
    /// Blocks per segment.
    pub blocks_per_segment: u64,
    /// Number of full segments.
    pub nsegments: u64,
    /// First block of segment 0.
    pub first_data_block: u64,
    /// Blocks of the one log written (summary, payload, super root).
    pub log_blocks: u64,
    /// Byte offset of the secondary super block.
    pub sb2_offset: u64,
}

/// Check the options the way mkfs.nilfs2's option parser does, in its order.
pub fn check_options(o: &MkfsOptions) -> std::result::Result<(), MkfsError> {
    let bs = o.block_size;
    if bs > PAGE_SIZE || bs < u64::from(MIN_BLOCK_SIZE) || !bs.is_power_of_two() {
        return Err(MkfsError::InvalidBlockSize(bs));
    }
    let bps = o.blocks_per_segment;
    if bps < u64::from(SEG_MIN_BLOCKS) {
        return Err(MkfsError::TooFewBlocksPerSegment(bps));
    }
    if !bps.is_power_of_two() {
        return Err(MkfsError::InvalidBlocksPerSegment(bps));
    }
    if o.reserved_percentage < 1 {
        return Err(MkfsError::TooSmallReservedPercentage(o.reserved_percentage));
    }
    if o.reserved_percentage > 99 {
        return Err(MkfsError::TooLargeReservedPercentage(o.reserved_percentage));
    }
    if o.feature_compat_ro & !FEATURE_COMPAT_RO_BLOCK_COUNT != 0 {
        return Err(MkfsError::InvalidFeature(format!(
            "compat_ro {:#x}",
            o.feature_compat_ro
        )));
    }
    Ok(())
}

/// One file of the initial log: its inode number and block count.
struct InitialFile {
    ino: Ino,
    nblocks: u64,
}

/// Make a filesystem on `dev`. Returns the geometry used.
pub fn mkfs(dev: &dyn BlockDevice, o: &MkfsOptions) -> Result<Layout> {
    check_options(o)?;
    let image = build(dev.size_bytes(), o)?;
    let bs = o.block_size;

    // Erase as mkfs.nilfs2 does without discard: the last MiB, then the head
    // from byte 0 (or 1024, keeping an MBR boot sector) to 1 MiB. A device
    // smaller than 1 MiB cannot pass the size check above, so the ranges are
    // always inside the device.
    let mut head = vec![0u8; 1024];
    dev.read_at(0, &mut head)?;
    let start =
        if u32::from_le_bytes([head[0x1FE], head[0x1FF], head[0x200], head[0x201]]) == 0xAA55 {
            SB_OFFSET_BYTES
        } else {
            0
        };
    let end = dev.size_bytes() & !(SECTOR_SIZE - 1);
    zero_range(dev, end.saturating_sub(DISK_ERASE_SIZE), end)?;
    zero_range(dev, start, DISK_ERASE_SIZE.min(end))?;

    for (blocknr, data) in &image.blocks {
        dev.write_at(blocknr * bs, data)?;
    }
    dev.flush()?;
    dev.write_at(SB_OFFSET_BYTES, &image.super_block)?;
    dev.write_at(image.layout.sb2_offset, &image.super_block)?;
    dev.flush()?;
    Ok(image.layout)
}

fn zero_range(dev: &dyn BlockDevice, from: u64, to: u64) -> Result<()> {
    const STEP: u64 = 64 * 1024;
    let zeros = vec![0u8; STEP as usize];
    let mut at = from;
    while at < to {
        let n = STEP.min(to - at);
        dev.write_at(at, &zeros[..n as usize])?;
        at += n;
    }
    Ok(())
}

/// The blocks of a fresh filesystem, before they are written.
pub struct Image {
    /// Geometry.
    pub layout: Layout,
    /// The log's blocks by physical block number.
    pub blocks: BTreeMap<u64, Vec<u8>>,
    /// The 1024-byte super block, identical for both copies.
    pub super_block: Vec<u8>,
}

/// Compute everything mkfs writes for a device of `dev_size` bytes.
pub fn build(dev_size: u64, o: &MkfsOptions) -> Result<Image> {
    check_options(o)?;
    let bs = o.block_size;
    let bps = o.blocks_per_segment;
    let first_data_block = DISKHDR_SIZE.div_ceil(bs);
    if first_data_block + 2 > bps {
        return Err(MkfsError::TooSmallSegment {
            blocks_per_segment: bps,
            required: first_data_block + 2,
        }
        .into());
    }
    let sb2_offset = superblock::sb2_offset_bytes(dev_size).unwrap_or(0);
    let nsegments = (sb2_offset / bs) / bps;
    let min_nsegments = (o.reserved_percentage * nsegments)
        .div_ceil(100)
        .max(MIN_NRSVSEGS)
        + NR_INITIAL_SEGMENTS.max(MIN_NUSERSEGS);
    if nsegments < min_nsegments {
        return Err(MkfsError::TooSmallDevice {
            dev_size,
            required: bps * bs * min_nsegments + bs,
        }
        .into());
    }

    let inode_size = 128u64;
    let blocks_of = |ino| initial_blocks(bs, ino).expect("one of mkfs's files");
    let [ifile_blocks, cpfile_blocks, sufile_blocks, dat_blocks] =
        [ino::IFILE, ino::CPFILE, ino::SUFILE, ino::DAT].map(blocks_of);
    let files =
        [ino::ROOT, ino::IFILE, ino::CPFILE, ino::SUFILE, ino::DAT].map(|ino| InitialFile {
            ino,
            nblocks: blocks_of(ino),
        });

    // Summary records, in file order; block addresses follow from their sizes.
    let log_start = first_data_block;
    let mut records = Vec::new();
    let mut next_vblocknr = 1u64;
    for f in &files {
        let binfos = (0..f.nblocks)
            .map(|i| {
                if f.ino == ino::DAT {
                    Binfo::DataDat { blkoff: FileBlk(i) }
                } else {
                    let v = VBlockNr(next_vblocknr);
                    next_vblocknr += 1;
                    Binfo::DataV {
                        vblocknr: v,
                        blkoff: FileBlk(i),
                    }
                }
            })
            .collect();
        let n = f.nblocks as u32;
        records.push(FileRecord {
            finfo: Finfo {
                ino: f.ino,
                cno: Cno(1),
                nblocks: n,
                ndatablk: n,
            },
            binfos,
        });
    }
    let sumbytes = summary_bytes(&records, bs as u32);
    let nsumblk = u64::from(sumbytes).div_ceil(bs);
    let payload: u64 = files.iter().map(|f| f.nblocks).sum();
    let log_blocks = nsumblk + payload + 1;
    if log_start + log_blocks > bps {
        return Err(MkfsError::TooSmallSegment {
            blocks_per_segment: bps,
            required: log_blocks,
        }
        .into());
    }
    let mut start_of = BTreeMap::new();
    let mut at = log_start + nsumblk;
    for f in &files {
        start_of.insert(f.ino, at);
        at += f.nblocks;
    }
    let sr_block = at;
    let file_start = |i: Ino| start_of[&i];

    let ctime = o.ctime;
    let mut blocks: BTreeMap<u64, Vec<u8>> = BTreeMap::new();
    let block = || vec![0u8; bs as usize];
    let reg_inode = |nblocks: u64, bmap: [u64; 7]| Inode {
        blocks: nblocks,
        ctime,
        mtime: ctime,
        mode: S_IFREG,
        links_count: 1,
        bmap,
        ..Inode::default()
    };
    // Direct map of consecutive pointers starting at `first`.
    let direct = |first: u64, n: u64| {
        let mut ptrs = [0u64; 6];
        for (k, p) in ptrs.iter_mut().enumerate().take(n as usize) {
            *p = first + k as u64;
        }
        BmapRoot::Direct(DirectMap { header: 0, ptrs }).encode()
    };

    // Root directory.
    let mut root_entries = vec![
        DirEntry {
            ino: ino::ROOT,
            rec_len: 16,
            name_len: 1,
            file_type: dir::FT_DIR,
            name: b".".to_vec(),
        },
        DirEntry {
            ino: ino::ROOT,
            rec_len: 16,
            name_len: 2,
            file_type: dir::FT_DIR,
            name: b"..".to_vec(),
        },
    ];
    if o.dot_nilfs {
        root_entries.push(DirEntry {
            ino: ino::USER,
            rec_len: (bs - 32) as u32,
            name_len: 6,
            file_type: dir::FT_REG_FILE,
            name: b".nilfs".to_vec(),
        });
    } else {
        root_entries[1].rec_len = (bs - 16) as u32;
    }
    blocks.insert(
        file_start(ino::ROOT),
        dir::encode_block(&root_entries, bs as u32)?,
    );

    // DAT entries: vblocknr v maps the v-th non-DAT block, in file order.
    let dat_geo = palloc::PallocGeometry {
        block_size: bs as u32,
        entry_size: 32,
    };
    let mut dat_entries = vec![DatEntry::default(); next_vblocknr as usize];
    {
        let mut v = 1usize;
        for f in files.iter().filter(|f| f.ino != ino::DAT) {
            for i in 0..f.nblocks {
                dat_entries[v] = DatEntry {
                    blocknr: BlockNr(file_start(f.ino) + i),
                    start: Cno(1),
                    end: Cno::MAX,
                    rsv: 0,
                };
                v += 1;
            }
        }
    }
    let dat_start = file_start(ino::DAT);
    write_palloc(
        &mut blocks,
        dat_start,
        &dat_geo,
        next_vblocknr,
        dat_blocks,
        bs,
    )?;
    for (v, e) in dat_entries.iter().enumerate().skip(1) {
        let blk = dat_start + 2 + v as u64 / (bs / 32);
        let off = (v as u64 % (bs / 32)) as usize * 32;
        e.encode(&mut blocks.get_mut(&blk).expect("DAT entry block")[off..off + 32]);
    }

    // vblocknrs in file order, for the virtual-pointer direct maps.
    let vbase = |i: Ino| -> u64 {
        let mut v = 1;
        for f in files.iter().filter(|f| f.ino != ino::DAT) {
            if f.ino == i {
                return v;
            }
            v += f.nblocks;
        }
        unreachable!("file {i} is not in the initial log")
    };

    // ifile: inodes 0..=10 are reserved; 11 is .nilfs when present.
    let ifile_geo = palloc::PallocGeometry {
        block_size: bs as u32,
        entry_size: inode_size as u32,
    };
    let nr_inodes = if o.dot_nilfs { 12 } else { 11 };
    let ifile_start = file_start(ino::IFILE);
    write_palloc(
        &mut blocks,
        ifile_start,
        &ifile_geo,
        nr_inodes,
        ifile_blocks,
        bs,
    )?;
    let put_inode = |blocks: &mut BTreeMap<u64, Vec<u8>>, i: Ino, inode: &Inode| {
        let blk = ifile_start + 2 + i.0 / (bs / inode_size);
        let off = ((i.0 % (bs / inode_size)) * inode_size) as usize;
        inode.encode(&mut blocks.get_mut(&blk).expect("ifile entry block")[off..]);
    };
    let root = Inode {
        size: bs,
        mode: S_IFDIR | 0o755,
        links_count: 2,
        ..reg_inode(1, direct(vbase(ino::ROOT), 1))
    };
    put_inode(&mut blocks, ino::ROOT, &root);
    for i in [ino::BAD, ino::ATIME, ino::XATTR, Ino(9), ino::SKETCH] {
        put_inode(&mut blocks, i, &reg_inode(0, [0; 7]));
    }
    if o.dot_nilfs {
        put_inode(
            &mut blocks,
            ino::USER,
            &Inode {
                mode: S_IFREG | 0o644,
                ..reg_inode(0, [0; 7])
            },
        );
    }
    let ifile_inode = reg_inode(ifile_blocks, direct(vbase(ino::IFILE), ifile_blocks));

    // cpfile: checkpoint 1 valid, every other slot of its blocks invalid.
    let cpb = bs / 192;
    let cp_start = file_start(ino::CPFILE);
    for b in 0..cpfile_blocks {
        let mut data = block();
        let first_slot = if b == 0 { 1 } else { 0 };
        for slot in first_slot..cpb {
            let cno = b * cpb + slot;
            let cp = if cno == 1 {
                Checkpoint {
                    cno: Cno(1),
                    create: ctime,
                    nblk_inc: log_blocks,
                    inodes_count: if o.dot_nilfs { 2 } else { 1 },
                    blocks_count: 1 + ifile_blocks,
                    ifile_inode: ifile_inode.clone(),
                    ..Checkpoint::default()
                }
            } else {
                Checkpoint {
                    flags: CP_INVALID,
                    cno: Cno(cno),
                    ..Checkpoint::default()
                }
            };
            let off = (slot * 192) as usize;
            cp.encode(&mut data[off..off + 192]);
        }
        if b == 0 {
            CpfileHeader {
                ncheckpoints: 1,
                ..CpfileHeader::default()
            }
            .encode(&mut data[..32]);
        }
        blocks.insert(cp_start + b, data);
    }

    // sufile: segments 0 and 1 active and dirty; segment 0 holds the log.
    let spb = bs / 16;
    let su_start = file_start(ino::SUFILE);
    for b in 0..sufile_blocks {
        let mut data = block();
        if b == 0 {
            SufileHeader {
                ncleansegs: nsegments - NR_INITIAL_SEGMENTS,
                ndirtysegs: NR_INITIAL_SEGMENTS,
                last_alloc: (nsegments - 1).into(),
            }
            .encode(&mut data[..24]);
        }
        for segnum in 0..NR_INITIAL_SEGMENTS {
            let t = segnum + 2;
            if t / spb == b {
                let su = SegmentUsage {
                    lastmod: if segnum == 0 { ctime } else { 0 },
                    nblocks: if segnum == 0 { log_blocks as u32 } else { 0 },
                    flags: SU_ACTIVE | SU_DIRTY,
                };
                let off = ((t % spb) * 16) as usize;
                su.encode(&mut data[off..off + 16]);
            }
        }
        blocks.insert(su_start + b, data);
    }

    // Super root.
    let sr = SuperRoot {
        sum: 0,
        bytes: super_root::super_root_bytes(inode_size as u16),
        flags: 0,
        nongc_ctime: ctime,
        dat: reg_inode(dat_blocks, direct(dat_start, dat_blocks)),
        cpfile: reg_inode(cpfile_blocks, direct(vbase(ino::CPFILE), cpfile_blocks)),
        sufile: reg_inode(sufile_blocks, direct(vbase(ino::SUFILE), sufile_blocks)),
    };
    let mut sr_data = sr.encode(bs as u32, inode_size as u16);
    super_root::seal_block(&mut sr_data, o.crc_seed);
    blocks.insert(sr_block, sr_data);

    // Summary, then the log checksums over the assembled log.
    let summary = Summary {
        header: SegmentSummary {
            datasum: 0,
            sumsum: 0,
            magic: SEGSUM_MAGIC,
            bytes: SegmentSummary::SIZE as u16,
            flags: SS_LOGBGN | SS_LOGEND | SS_SR,
            seq: Seq(0),
            create: ctime,
            next: BlockNr(bps),
            nblocks: log_blocks as u32,
            nfinfo: records.len() as u32,
            sumbytes,
            pad: 0,
            cno: Cno(1),
        },
        files: records,
    };
    let sum_data = summary.encode(bs as u32);
    for (i, chunk) in sum_data.chunks(bs as usize).enumerate() {
        blocks.insert(log_start + i as u64, chunk.to_vec());
    }
    let mut log = Vec::with_capacity((log_blocks * bs) as usize);
    for b in log_start..log_start + log_blocks {
        log.extend_from_slice(&blocks[&b]);
    }
    seal_log(&mut log, o.crc_seed);
    for (i, chunk) in log.chunks(bs as usize).enumerate() {
        blocks.insert(log_start + i as u64, chunk.to_vec());
    }

    let mut volume_name = [0u8; 80];
    let n = o.label.len().min(80);
    volume_name[..n].copy_from_slice(&o.label[..n]);
    let mut sb = SuperBlock {
        rev_level: CURRENT_REV,
        minor_rev_level: MINOR_REV,
        magic: SUPER_MAGIC,
        bytes: SuperBlock::DEFAULT_BYTES,
        flags: 0,
        crc_seed: o.crc_seed,
        sum: 0,
        log_block_size: bs.trailing_zeros() - 10,
        nsegments,
        dev_size,
        first_data_block,
        blocks_per_segment: bps as u32,
        r_segments_percentage: o.reserved_percentage as u32,
        last_cno: Cno(1),
        last_pseg: BlockNr(log_start),
        last_seq: Seq(0),
        // count_free_blocks(): every segment but the one written.
        free_blocks_count: bps * (nsegments - (log_start + log_blocks).div_ceil(bps)),
        ctime,
        mtime: 0,
        wtime: ctime,
        mnt_count: 0,
        max_mnt_count: DFL_MAX_MNT_COUNT,
        state: superblock::STATE_VALID_FS,
        errors: 1,
        lastcheck: ctime,
        checkinterval: DEF_CHECK_INTERVAL,
        creator_os: 0,
        def_resuid: 0,
        def_resgid: 0,
        first_ino: ino::USER.0 as u32,
        inode_size: inode_size as u16,
        dat_entry_size: 32,
        checkpoint_size: 192,
        segment_usage_size: 16,
        uuid: o.uuid,
        volume_name,
        c_interval: 0,
        c_block_max: 0,
        feature_compat: 0,
        feature_compat_ro: o.feature_compat_ro,
        feature_incompat: 0,
        reserved: vec![0u8; 744],
    };
    sb.seal();

    Ok(Image {
        layout: Layout {
            block_size: bs,
            blocks_per_segment: bps,
            nsegments,
            first_data_block,
            log_blocks,
            sb2_offset,
        },
        blocks,
        super_block: sb.encode(),
    })
}

/// Write the descriptor, bitmap and (zeroed) entry blocks of a palloc file
/// whose entries `0..nentries` are allocated in group 0.
fn write_palloc(
    blocks: &mut BTreeMap<u64, Vec<u8>>,
    start: u64,
    geo: &palloc::PallocGeometry,
    nentries: u64,
    nblocks: u64,
    bs: u64,
) -> Result<()> {
    let epg = u64::from(geo.block_size) * 8;
    let mut descs = vec![epg as u32; (bs / 4) as usize];
    descs[0] = (epg - nentries) as u32;
    blocks.insert(start, palloc::encode_group_descs(&descs, bs as u32));
    let mut bitmap = vec![0u8; bs as usize];
    for e in 0..nentries {
        palloc::set_bit(&mut bitmap, e);
    }
    blocks.insert(start + 1, bitmap);
    for b in 2..nblocks {
        blocks.insert(start + b, vec![0u8; bs as usize]);
    }
    Ok(())
}
