//! The mounted filesystem's shared state, read side: the super block in use,
//! the log cursor found by the scan, the super root and the three metadata
//! files it roots (DAT, cpfile, sufile), and block reads through them.
//!
//! This is the read-only core that the inspector and the nilfs-tools-style
//! listings need; it answers the questions the kernel's ioctls answer
//! (`GET_CPINFO`, `GET_SUINFO`, `GET_SUSTAT`) from an image. Its only
//! cache is a bounded one of DAT entry blocks (the view never changes, so
//! they never go stale); read-ahead and the node cache are the cached read
//! path's (`posix::cached`). It never writes.

use std::collections::BTreeMap;

use crate::bmap::{self, DiskNodes, NodeSource, Translate};
use crate::device::{read_block, BlockDevice};
use crate::format::cpfile::{check_snapshot_step, Checkpoint, CpfileGeometry, CpfileHeader};
use crate::format::dat::DatEntry;
use crate::format::inode::Inode;
use crate::format::palloc::PallocGeometry;
use crate::format::sufile::{SegmentUsage, SufileGeometry, SufileHeader};
use crate::format::super_root::{self, SuperRoot};
use crate::format::superblock::{SuperBlock, STATE_VALID_FS};
use crate::format::SegGeometry;
use crate::format::{BlockNr, Cno, FileBlk, Ino, SegNum, VBlockNr};
use crate::recovery::{load_super_block, search_super_root, SbChoice, ScanResult};
use crate::sync::{lock, Mutex, StdArc};
use crate::{Error, Result};

/// A metadata file, as the reader addresses it.
#[derive(Clone, Copy, Debug)]
pub enum MetaFile<'a> {
    /// The DAT: physical pointers.
    Dat,
    /// The checkpoint file.
    Cpfile,
    /// The segment usage file.
    Sufile,
    /// The ifile of some checkpoint (its inode is in the checkpoint entry).
    Ifile(&'a Inode),
}

/// A read-only view of a NILFS2 filesystem at its latest super root.
pub struct Nilfs<'d> {
    dev: &'d dyn BlockDevice,
    /// The two super block copies and the kernel's choice.
    pub sb_choice: SbChoice,
    /// The super block in effect (the spare, if the scan had to roll back).
    pub sb: SuperBlock,
    /// Whether the scan failed from the chosen copy and used the spare
    /// ("trying rollback from an earlier position").
    pub rolled_back: bool,
    /// Why the scan from the chosen copy failed, when it did.
    pub rollback_reason: Option<Error>,
    /// Segment geometry.
    pub geo: SegGeometry,
    /// What the super root search found.
    pub scan: ScanResult,
    /// The latest super root.
    pub super_root: SuperRoot,
    /// DAT entry blocks already read, by DAT file offset (bounded). The
    /// view is read-only, so a block never changes under it.
    /// Shared (`StdArc`, immutable bytes), so a hit copies no block.
    dat_blocks: Mutex<BTreeMap<u64, Option<StdArc<[u8]>>>>,
    /// Ifile blocks [`Nilfs::ifile_inode`] read, by the ifile's mapping
    /// root (`i_bmap`, which names one version of one file in a read-only
    /// view) and block offset (bounded): a walk of a tree reads each block
    /// once for the 32 inodes it holds, not once per inode.
    ifile_blocks: Mutex<BTreeMap<IfileBlockKey, Option<StdArc<[u8]>>>>,
    /// File digests [`Nilfs::file_digest`] computed, by mapping root and
    /// size (bounded).
    digests: Mutex<BTreeMap<DigestKey, [u8; 32]>>,
}

/// A copy of the mounted state with an empty DAT block cache (a mount
/// keeps its own copy, so that it does not borrow the caller's).
impl Clone for Nilfs<'_> {
    fn clone(&self) -> Self {
        Nilfs {
            dev: self.dev,
            sb_choice: self.sb_choice.clone(),
            sb: self.sb.clone(),
            rolled_back: self.rolled_back,
            rollback_reason: self.rollback_reason.clone(),
            geo: self.geo,
            scan: self.scan.clone(),
            super_root: self.super_root.clone(),
            dat_blocks: Mutex::new(BTreeMap::new()),
            ifile_blocks: Mutex::new(BTreeMap::new()),
            digests: Mutex::new(BTreeMap::new()),
        }
    }
}

/// DAT entry blocks kept by [`Nilfs`] (16 MiB at 4 KiB blocks).
const DAT_CACHE_BLOCKS: usize = 4096;
/// An ifile block: the ifile's `i_bmap` and the block's offset.
type IfileBlockKey = ([u64; 7], u64);

/// A file digest: the file's `i_bmap`, its size, the digest's kind.
type DigestKey = ([u64; 7], u64, u8);

/// File digests kept by [`Nilfs`].
const DIGEST_CACHE_FILES: usize = 65_536;

/// Ifile blocks kept by [`Nilfs`] (4 MiB at 4 KiB blocks).
const IFILE_CACHE_BLOCKS: usize = 1024;

impl<'d> Nilfs<'d> {
    /// Open `dev` as the kernel's `load_nilfs` would, without recovery writes:
    /// choose the super block, check its geometry, search for the latest
    /// super root (falling back to the spare super block when the scan from
    /// the chosen one fails), and load the super root.
    pub fn open(dev: &'d dyn BlockDevice) -> Result<Self> {
        let sb_choice = load_super_block(dev)?;
        let mut sb = sb_choice.sb().clone();
        sb.check_geometry(dev.size_bytes())?;
        let valid_fs = sb.state & STATE_VALID_FS != 0;
        let (scan, rollback_reason) = match search_super_root(dev, &sb, valid_fs) {
            Ok(s) => (s, None),
            Err(e @ Error::Io { .. }) => return Err(e),
            Err(first) => {
                let Some(spare) = sb_choice.spare().cloned() else {
                    return Err(first);
                };
                if spare.block_size()? != sb.block_size()? {
                    return Err(Error::corrupt(
                        "super block",
                        "block size differs between the two super blocks",
                    ));
                }
                sb = spare.fallen_back_from(&sb)?;
                // The kernel drops VALID_FS to allow roll-forward after a rollback.
                (search_super_root(dev, &sb, false)?, Some(first))
            }
        };
        let rolled_back = rollback_reason.is_some();
        let geo = SegGeometry::new(&sb)?;
        let sr_data = read_block(dev, geo.block_size, scan.super_root.0)?;
        super_root::check_valid(&sr_data, geo.block_size, sb.crc_seed)
            .map_err(|e| e.at_block(scan.super_root.0))?;
        let super_root = SuperRoot::decode(&sr_data, sb.inode_size)
            .map_err(|e| e.at_block(scan.super_root.0))?;
        Ok(Nilfs {
            dev,
            sb_choice,
            sb,
            rolled_back,
            rollback_reason,
            geo,
            scan,
            super_root,
            dat_blocks: Mutex::new(BTreeMap::new()),
            ifile_blocks: Mutex::new(BTreeMap::new()),
            digests: Mutex::new(BTreeMap::new()),
        })
    }

    /// The device.
    pub fn device(&self) -> &'d dyn BlockDevice {
        self.dev
    }

    /// Block size in bytes.
    pub fn block_size(&self) -> u32 {
        self.geo.block_size
    }

    /// `ns_cno`: the checkpoint number the next construction would create.
    pub fn next_cno(&self) -> Cno {
        Cno(self.scan.cno.0.wrapping_add(1)) // u64 in the kernel (ns_cno)
    }

    /// Read physical block `b`.
    pub fn read_block(&self, b: BlockNr) -> Result<Vec<u8>> {
        read_block(self.dev, self.geo.block_size, b.0)
    }

    /// Read the blocks from `first` on into `buf` (a whole number of
    /// blocks) in one device call.
    pub fn read_blocks_into(&self, first: BlockNr, buf: &mut [u8]) -> Result<()> {
        crate::device::read_blocks_into(self.dev, self.geo.block_size, first.0, buf)
    }

    fn inode_of(&self, f: MetaFile<'_>) -> Inode {
        match f {
            MetaFile::Dat => self.super_root.dat.clone(),
            MetaFile::Cpfile => self.super_root.cpfile.clone(),
            MetaFile::Sufile => self.super_root.sufile.clone(),
            MetaFile::Ifile(i) => i.clone(),
        }
    }

    /// Run `body` with the node source of metadata file `f`'s B-tree: the
    /// DAT's nodes are at disk addresses, every other file's are virtual
    /// and translated through the DAT.
    fn with_mdt_nodes<T>(
        &self,
        f: MetaFile<'_>,
        body: impl FnOnce(&mut dyn NodeSource) -> Result<T>,
    ) -> Result<T> {
        let bs = self.geo.block_size;
        if matches!(f, MetaFile::Dat) {
            return body(&mut DiskNodes::physical(self.dev, bs));
        }
        let mut dat = self;
        body(&mut DiskNodes::translated(self.dev, bs, &mut dat))
    }

    /// Block `blkoff` of a metadata file; `Ok(None)` for a hole.
    pub fn mdt_block(&self, f: MetaFile<'_>, blkoff: FileBlk) -> Result<Option<Vec<u8>>> {
        let inode = self.inode_of(f);
        let physical = matches!(f, MetaFile::Dat);
        let ptr = self.with_mdt_nodes(f, |src| bmap::lookup(&inode.bmap, blkoff.0, src))?;
        let Some(ptr) = ptr else { return Ok(None) };
        let pbn = if physical {
            BlockNr(ptr)
        } else {
            self.dat_translate(VBlockNr(ptr))?
        };
        self.read_block(pbn).map(Some)
    }

    /// The mapped block offsets of a metadata file, in order (one walk of
    /// its bmap; as many entries as the file has blocks on disk).
    pub fn mdt_mapped_blocks(&self, f: MetaFile<'_>) -> Result<Vec<u64>> {
        let inode = self.inode_of(f);
        let mut out = Vec::new();
        self.with_mdt_nodes(f, |src| {
            bmap::for_each(&inode.bmap, src, &mut |k, p| {
                if p != 0 {
                    out.push(k);
                }
                Ok(())
            })
        })?;
        Ok(out)
    }

    /// The DAT entry of `v`, or `None` if its block is a hole.
    pub fn dat_entry(&self, v: VBlockNr) -> Result<Option<DatEntry>> {
        let esz = u32::from(self.sb.dat_entry_size);
        let geo = PallocGeometry {
            block_size: self.geo.block_size,
            entry_size: esz,
        };
        let blk = geo
            .entry_blkoff(v.0)
            .ok_or_else(|| Error::OutOfRange(format!("virtual block number {v}")))?;
        let cached = lock(&self.dat_blocks).get(&blk).cloned();
        let block = match cached {
            Some(b) => b,
            None => {
                let b: Option<StdArc<[u8]>> =
                    self.mdt_block(MetaFile::Dat, FileBlk(blk))?.map(Into::into);
                let mut cache = lock(&self.dat_blocks);
                if cache.len() >= DAT_CACHE_BLOCKS {
                    cache.clear();
                }
                cache.insert(blk, b.clone());
                b
            }
        };
        let Some(data) = block else {
            return Ok(None);
        };
        let off = geo.entry_offset_in_block(v.0);
        DatEntry::decode(data.get(off..).unwrap_or(&[])).map(Some)
    }

    /// Translate a virtual block number (`nilfs_dat_translate`): an entry
    /// that is a hole or has no block is corruption, as in the kernel.
    pub fn dat_translate(&self, v: VBlockNr) -> Result<BlockNr> {
        match self.dat_entry(v)? {
            Some(e) => self.geo.dat_block(v.0, e.blocknr),
            None => Err(Error::corrupt(
                "DAT entry",
                format!("virtual block {v} lies in a DAT hole"),
            )),
        }
    }

    fn cp_geometry(&self) -> CpfileGeometry {
        CpfileGeometry {
            block_size: self.geo.block_size,
            entry_size: self.sb.checkpoint_size,
        }
    }

    /// The cpfile header.
    pub fn cpfile_header(&self) -> Result<CpfileHeader> {
        let data = self
            .mdt_block(MetaFile::Cpfile, FileBlk(0))?
            .ok_or_else(|| Error::corrupt("cpfile", "header block is a hole"))?;
        CpfileHeader::decode(&data)
    }

    /// The checkpoint entry of `cno` as stored, or `None` if its block is a
    /// hole. Invalid entries are returned too; callers check the flags.
    pub fn checkpoint_entry(&self, cno: Cno) -> Result<Option<Checkpoint>> {
        let (blk, off) = self
            .cp_geometry()
            .locate(cno.0)
            .ok_or_else(|| Error::OutOfRange(format!("checkpoint number {cno}")))?;
        let Some(data) = self.mdt_block(MetaFile::Cpfile, blk)? else {
            return Ok(None);
        };
        Checkpoint::decode(data.get(off..).unwrap_or(&[])).map(Some)
    }

    /// A valid checkpoint `cno` (1 ≤ cno < `next_cno`, not INVALID), as
    /// `nilfs_cpfile_get_checkpoint` requires for mounting it.
    pub fn checkpoint(&self, cno: Cno) -> Result<Option<Checkpoint>> {
        if cno.0 == 0 || cno >= self.next_cno() {
            return Ok(None);
        }
        Ok(self.checkpoint_entry(cno)?.filter(|cp| !cp.is_invalid()))
    }

    /// Every valid checkpoint in `[from, next_cno)`, in order, as
    /// `nilfs_cpfile_do_get_cpinfo` lists them (hole blocks skipped).
    pub fn checkpoints(&self, from: Cno) -> Result<Vec<Checkpoint>> {
        let geo = self.cp_geometry();
        let end = self.next_cno().0;
        let mut out = Vec::new();
        let mut cno = from.0.max(1);
        // Holes are skipped a block at a time, to the next mapped block, as
        // nilfs_cpfile_find_checkpoint_block does: the time is bounded by
        // the cpfile's blocks on disk, not by a hostile s_last_cno of 2^40.
        let mut mapped = self.mdt_mapped_blocks(MetaFile::Cpfile)?;
        mapped.sort_unstable();
        mapped.dedup();
        let per = geo.checkpoints_per_block();
        let feo = geo.first_entry_offset();
        while cno < end {
            let (blk, _) = geo
                .locate(cno)
                .ok_or_else(|| Error::OutOfRange(format!("checkpoint {cno}")))?;
            if mapped.binary_search(&blk.0).is_err() {
                let Some(&next_blk) = mapped.iter().find(|&&b| b > blk.0) else {
                    break;
                };
                // The first checkpoint of that block: slot next_blk * per
                // holds checkpoint slot - first_entry_offset + 1.
                cno = (next_blk.saturating_mul(per) + 1)
                    .saturating_sub(feo)
                    .max(cno + 1);
                continue;
            }
            let block = self.mdt_block(MetaFile::Cpfile, blk)?;
            // Checkpoints sharing this block: up to the block's last slot.
            let mut next = cno;
            while next < end && geo.locate(next).map(|l| l.0) == Some(blk) {
                if let Some(data) = &block {
                    let (_, off) = geo.locate(next).expect("located above");
                    let cp = Checkpoint::decode(data.get(off..).unwrap_or(&[]))?;
                    if !cp.is_invalid() {
                        out.push(cp);
                    }
                }
                next += 1;
            }
            cno = next;
        }
        Ok(out)
    }

    /// The snapshot list, walked from the header as
    /// `nilfs_cpfile_do_get_ssinfo` does; stops at the first entry that is
    /// not a valid snapshot. A step that does not go up is corruption
    /// ([`check_snapshot_step`]).
    pub fn snapshots(&self) -> Result<Vec<Checkpoint>> {
        let mut out = Vec::new();
        let mut curr = self.cpfile_header()?.snapshot_next.0;
        while curr != 0 && (out.len() as u64) < self.next_cno().0 {
            let Some(cp) = self.checkpoint_entry(Cno(curr))? else {
                break;
            };
            if cp.is_invalid() || !cp.is_snapshot() {
                break;
            }
            check_snapshot_step(curr, cp.snapshot_next.0, true)?;
            curr = cp.snapshot_next.0;
            out.push(cp);
        }
        Ok(out)
    }

    fn su_geometry(&self) -> SufileGeometry {
        SufileGeometry {
            block_size: self.geo.block_size,
            entry_size: self.sb.segment_usage_size,
        }
    }

    /// The sufile header.
    pub fn sufile_header(&self) -> Result<SufileHeader> {
        let data = self
            .mdt_block(MetaFile::Sufile, FileBlk(0))?
            .ok_or_else(|| Error::corrupt("sufile", "header block is a hole"))?;
        SufileHeader::decode(&data)
    }

    /// Segment usage of every segment, as `nilfs_sufile_get_suinfo` reports
    /// it: holes read as zero, and the ACTIVE bit is the kernel's notion (the
    /// current and next segment of the writer), not the on-disk bit.
    pub fn segment_usages(&self) -> Result<Vec<SegmentUsage>> {
        let geo = self.su_geometry();
        let mut out = Vec::with_capacity(self.geo.nsegments.min(1 << 20) as usize);
        let mut cached: Option<(FileBlk, Option<Vec<u8>>)> = None;
        for s in 0..self.geo.nsegments {
            let (blk, off) = geo.locate(s);
            if cached.as_ref().map(|c| c.0) != Some(blk) {
                cached = Some((blk, self.mdt_block(MetaFile::Sufile, blk)?));
            }
            let su = match &cached {
                Some((_, Some(data))) => SegmentUsage::decode(data.get(off..).unwrap_or(&[]))?,
                _ => SegmentUsage::default(),
            };
            out.push(su.as_reported(SegNum(s), self.writer_segments()));
        }
        Ok(out)
    }

    /// `nilfs_segment_is_active`: the writer's current or next segment.
    pub fn segment_is_active(&self, s: SegNum) -> bool {
        crate::format::sufile::segment_is_active(s, self.writer_segments())
    }

    /// The log writer's current and next segments as the scan left them
    /// (`ns_segnum`, `ns_nextnum`).
    pub fn writer_segments(&self) -> [SegNum; 2] {
        [self.scan.segnum, self.scan.nextnum]
    }

    /// The digest of a file's contents whose inode has mapping root `bmap`
    /// and size `size`, computed by `compute` unless this view computed it
    /// before. In one read-only view the root and the size decide the
    /// contents (the same pointers, translated by the same DAT, read from
    /// the same blocks), so a file unchanged across checkpoints is read
    /// and hashed once for all of them, not once per checkpoint.
    /// `kind` tells digests of different definitions apart.
    pub fn file_digest(
        &self,
        bmap: [u64; 7],
        size: u64,
        kind: u8,
        compute: impl FnOnce() -> Result<[u8; 32]>,
    ) -> Result<[u8; 32]> {
        let key = (bmap, size, kind);
        if let Some(d) = lock(&self.digests).get(&key) {
            return Ok(*d);
        }
        let d = compute()?;
        let mut cache = lock(&self.digests);
        if cache.len() >= DIGEST_CACHE_FILES {
            cache.clear();
        }
        cache.insert(key, d);
        Ok(d)
    }

    /// Inode `ino` in the ifile whose inode is `ifile`; `None` if its block
    /// is a hole.
    pub fn ifile_inode(&self, ifile: &Inode, ino: Ino) -> Result<Option<Inode>> {
        let isz = u32::from(self.sb.inode_size);
        let geo = PallocGeometry {
            block_size: self.geo.block_size,
            entry_size: isz,
        };
        let blk = geo
            .entry_blkoff(ino.0)
            .ok_or_else(|| Error::OutOfRange(format!("inode number {ino}")))?;
        let key = (ifile.bmap, blk);
        let cached = lock(&self.ifile_blocks).get(&key).cloned();
        let block = match cached {
            Some(b) => b,
            None => {
                let b: Option<StdArc<[u8]>> = self
                    .mdt_block(MetaFile::Ifile(ifile), FileBlk(blk))?
                    .map(Into::into);
                let mut cache = lock(&self.ifile_blocks);
                if cache.len() >= IFILE_CACHE_BLOCKS {
                    cache.clear();
                }
                cache.insert(key, b.clone());
                b
            }
        };
        let Some(data) = block else {
            return Ok(None);
        };
        let off = geo.entry_offset_in_block(ino.0);
        Inode::decode(data.get(off..).unwrap_or(&[])).map(Some)
    }
}

/// The read-only image translates virtual numbers for node reads
/// ([`crate::bmap::DiskNodes`]).
impl Translate for &Nilfs<'_> {
    fn translate(&mut self, v: VBlockNr) -> Result<BlockNr> {
        self.dat_translate(v)
    }
}
