//! A read-write mount: the in-memory state of a mounted filesystem and the
//! construction that turns it into a checkpoint on disk (the kernel's
//! `nilfs_segctor_do_construct` in super-root mode).
//!
//! This first slice supports creating files and directories, writing file
//! data at any offset, `sync` (one checkpoint per construction with every
//! stage in the kernel's order: user files, ifile, cpfile, sufile, DAT,
//! super root) and unmount. Unlink, rename, truncate, data-only logs, the
//! transaction lock and recovery come next (issue 5).
//!
//! Each construction:
//! 1. gives every dirty block of every file a new virtual block number
//!    (`nilfs_bmap_propagate` / `nilfs_btree_prepare_update_v`: the old one
//!    is ended at this checkpoint, single-version files' at once) and every
//!    dirty B-tree node one too;
//! 2. writes updated raw inodes into the ifile, creates the checkpoint
//!    entry, and lays the logs out (segctor::layout), extending by more
//!    segments when they do not fit;
//! 3. assigns disk addresses: DAT entries of virtual blocks get
//!    `de_blocknr`/`de_start`; the DAT's own blocks and nodes are pointed
//!    at directly;
//! 4. fills in segment usage, the checkpoint and the super root, and
//!    writes the sealed logs.

use std::collections::{BTreeMap, BTreeSet};

use crate::bmap::write::Bmap;
use crate::bmap::NodeSource;
use crate::cpfile::{CheckpointFinal, Cpfile};
use crate::dat::Dat;
use crate::device::BlockDevice;
use crate::dir::DirFile;
use crate::format::btree::BtreeNode;
use crate::format::dir::file_type_from_mode;
use crate::format::inode::{Inode, S_IFDIR, S_IFMT, S_IFREG};
use crate::format::segsum::Binfo;
use crate::format::super_root::{super_root_bytes, SuperRoot};
use crate::format::superblock::{SuperBlock, STATE_VALID_FS};
use crate::format::{ino, BlockNr, Cno, FileBlk, Ino, SegNum, VBlockNr};
use crate::ifile::Ifile;
use crate::mdt::{ImageFile, Mdt};
use crate::recovery::SegGeometry;
use crate::segctor::layout::{Cursor, FileTag, Full, Layout, SegmentSource};
use crate::segctor::write::{assemble, write};
use crate::sufile::Sufile;
use crate::the_nilfs::Nilfs;
use crate::{Errno, Error, Result};

mod clean;
pub use clean::SuStat;

/// Node reads for a virtual-pointer file: translate through the current DAT.
struct VNodes<'x, 'a> {
    dat: &'x mut Dat<'a>,
    dev: &'x dyn BlockDevice,
    bs: u32,
}

impl NodeSource for VNodes<'_, '_> {
    fn node(&mut self, ptr: u64, _level: u8) -> Result<BtreeNode> {
        let pbn = self.dat.translate(VBlockNr(ptr))?;
        let b = crate::device::read_block(self.dev, self.bs, pbn.0)?;
        BtreeNode::decode_block(&b, self.bs).map_err(|e| e.at_block(pbn.0))
    }
}

/// Node reads for the DAT: pointers are disk blocks.
struct PNodes<'x> {
    dev: &'x dyn BlockDevice,
    bs: u32,
}

impl NodeSource for PNodes<'_> {
    fn node(&mut self, ptr: u64, _level: u8) -> Result<BtreeNode> {
        let b = crate::device::read_block(self.dev, self.bs, ptr)?;
        BtreeNode::decode_block(&b, self.bs).map_err(|e| e.at_block(ptr))
    }
}

/// Whether a mount replays the data-only logs after the last super root.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum RollForward {
    /// As the kernel does.
    Kernel,
    /// The known-bad recovery.
    Forgotten,
}

/// A user file or directory in memory.
struct FileState {
    raw: Inode,
    bmap: Bmap,
    /// Dirty data blocks by offset.
    dirty: BTreeMap<u64, Vec<u8>>,
    /// The directory's blocks, once loaded for a change.
    dir: Option<DirFile>,
    /// The raw inode must be written into the ifile.
    inode_dirty: bool,
    /// `NILFS_I_INODE_SYNC`: the inode changed beyond its timestamps
    /// (created, linked or unlinked, grown, truncated) since the last
    /// checkpoint, so fdatasync needs a full construction.
    inode_sync: bool,
    /// `NILFS_I_DIRTY` (`nilfs_set_file_dirty`): its pages were dirtied —
    /// a write, a truncate that changed the size, a directory entry, a new
    /// directory's or symlink's block. What fsync and fdatasync test
    /// (`nilfs_inode_dirty`): an inode changed only in metadata (new and
    /// empty, renamed, linked) makes them write nothing.
    pages_dirty: bool,
}

/// A metadata file's mapping and raw inode.
struct MetaMap {
    raw: Inode,
    bmap: Bmap,
}

/// The sufile as the layout's segment source.
struct Segs<'x, 'a>(&'x mut Sufile<'a>);

impl SegmentSource for Segs<'_, '_> {
    fn alloc(&mut self) -> Result<SegNum> {
        self.0.alloc()
    }
    fn free(&mut self, s: SegNum) -> Result<()> {
        self.0.free(s)
    }
    fn mark_dirty(&mut self, s: SegNum) -> Result<()> {
        self.0.mark_dirty(s)
    }
}

/// Which file a laid-out block belongs to, and which block it is.
#[derive(Clone, Copy, Debug)]
enum Src {
    Data(Ino, u64),
    Node(Ino, crate::bmap::write::NodeId),
    /// The `n`th block of the GC stage ([`crate::gc::MovedBlocks::blocks`]).
    Gc(usize),
}

/// A cleaning request accepted by [`Fs::clean_segments`], waiting for its
/// construction: the blocks to move and the segments to free.
struct GcWork {
    moved: crate::gc::MovedBlocks,
    segnums: Vec<SegNum>,
}

/// A construction between [`Fs::sync_begin`] and [`Fs::sync_finish`].
pub struct Construction {
    cno: Cno,
    ctime: u64,
    order: Vec<Ino>,
    plans: Vec<crate::segctor::layout::LogPlan>,
    cursor: Cursor,
    srcs: Vec<Src>,
    gc: Option<GcWork>,
}

/// A mounted, writable filesystem.
pub struct Fs<'a> {
    dev: &'a dyn BlockDevice,
    sb: SuperBlock,
    geo: SegGeometry,
    bs: u32,
    cursor: Cursor,
    dat: Dat<'a>,
    dat_map: MetaMap,
    cpfile: Cpfile<'a>,
    cp_map: MetaMap,
    sufile: Sufile<'a>,
    su_map: MetaMap,
    ifile: Ifile<'a>,
    if_map: MetaMap,
    files: BTreeMap<Ino, FileState>,
    /// Files in the order they were dirtied (the kernel's dirty list).
    order: Vec<Ino>,
    inodes_count: u64,
    blocks_count: u64,
    now: u64,
    generation: u32,
    /// A read-only mount: every change is EROFS, nothing is written.
    read_only: bool,
    /// `NILFS_SC_HAVE_DELTA`: a log since the last checkpoint recorded
    /// blocks of a file that belongs to the checkpoint (a user file or the
    /// ifile). A checkpoint without one is MINOR (hidden by `lscp`).
    have_delta: bool,
    /// The kernel's super block write policy (which copy, when).
    sbw: crate::sb_write::SbWriter,
    /// `ns_nongc_ctime`: when the last construction not made by the
    /// cleaner was made (`sr_nongc_ctime`; the cleaner's threshold).
    nongc_ctime: u64,
    /// A cleaning request for the next construction (`sc_gc_inodes`,
    /// `sc_freesegs`).
    gc: Option<GcWork>,
}

/// Does the log record blocks of a file with a checkpoint root
/// (`nilfs_segctor_begin_finfo` sets `NILFS_SC_HAVE_DELTA` for inodes with
/// `i_root`): anything but the DAT, cpfile and sufile, and the GC inodes
/// (`gc_tags`), which have none.
fn has_delta(p: &crate::segctor::layout::LogPlan, gc_tags: &BTreeSet<(Ino, Cno)>) -> bool {
    p.files.iter().any(|r| {
        ![ino::DAT, ino::CPFILE, ino::SUFILE].contains(&r.finfo.ino)
            && !gc_tags.contains(&(r.finfo.ino, r.finfo.cno))
    })
}

/// Sectors per block, the unit the kernel keeps `i_blocks` in.
fn sectors(bs: u32) -> u64 {
    u64::from(bs) / 512
}

impl<'a> Fs<'a> {
    /// Mount the latest checkpoint of `nilfs` read-write at time `now`
    /// (seconds). The super block's VALID_FS bit is cleared on disk, as
    /// `nilfs_setup_super` does, so a crash leaves an unclean filesystem.
    /// Mount the latest checkpoint read-only (`mount -o ro`): no super
    /// block is written and no recovery runs (as with `norecovery`); every
    /// change is EROFS.
    pub fn mount_read_only(nilfs: &'a Nilfs<'a>, now: u64) -> Result<Self> {
        Self::mount_with(nilfs, now, true, RollForward::Kernel)
    }

    /// Mount the latest checkpoint read-write.
    pub fn mount(nilfs: &'a Nilfs<'a>, now: u64) -> Result<Self> {
        Self::mount_with(nilfs, now, false, RollForward::Kernel)
    }

    /// Known-bad: a read-write mount whose recovery forgets the roll-forward
    /// of data-only logs (`nilfs_salvage_orphan_logs`), so what fdatasync
    /// made durable after the last checkpoint is lost. Kept so that the
    /// demo's and the crash checkers' judgement can be shown to catch it.
    pub fn mount_forgetting_roll_forward(nilfs: &'a Nilfs<'a>, now: u64) -> Result<Self> {
        Self::mount_with(nilfs, now, false, RollForward::Forgotten)
    }

    fn mount_with(
        nilfs: &'a Nilfs<'a>,
        now: u64,
        read_only: bool,
        roll_forward: RollForward,
    ) -> Result<Self> {
        let dev = nilfs.device();
        let sb = nilfs.sb.clone();
        if sb.requires_read_only() && !read_only {
            return Err(Error::errno(
                Errno::EROFS,
                "unsupported read-only-compatible features",
            ));
        }
        let bs = nilfs.block_size();
        let s = &nilfs.scan;
        let cursor = Cursor {
            segnum: s.segnum,
            pseg_offset: s.pseg_offset,
            seq: s.seq,
            nextnum: s.nextnum,
        };
        let sr = &nilfs.super_root;
        let cp = nilfs.checkpoint(s.cno)?.ok_or_else(|| {
            Error::corrupt("cpfile", format!("latest checkpoint {} is missing", s.cno))
        })?;
        let map = |raw: &Inode| -> Result<MetaMap> {
            Ok(MetaMap {
                raw: raw.clone(),
                bmap: Bmap::open(&raw.bmap, bs)?,
            })
        };
        let dat = Dat::new(
            Mdt::from_image(nilfs, ImageFile::Dat),
            u32::from(sb.dat_entry_size),
        )?;
        let cpfile = Cpfile::new(
            Mdt::from_image(nilfs, ImageFile::Cpfile),
            sb.checkpoint_size,
            nilfs.next_cno(),
        )?;
        let sufile = Sufile::new(
            Mdt::from_image(nilfs, ImageFile::Sufile),
            sb.segment_usage_size,
            sb.nsegments,
        )?;
        let ifile = Ifile::new(
            Mdt::from_image(nilfs, ImageFile::Ifile(cp.ifile_inode.clone())),
            u32::from(sb.inode_size),
            Ino(u64::from(sb.first_ino)),
        )?;
        let mut fs = Fs {
            dev,
            geo: nilfs.geo,
            bs,
            cursor,
            dat,
            dat_map: map(&sr.dat)?,
            cpfile,
            cp_map: map(&sr.cpfile)?,
            sufile,
            su_map: map(&sr.sufile)?,
            ifile,
            if_map: map(&cp.ifile_inode)?,
            files: BTreeMap::new(),
            order: Vec::new(),
            inodes_count: cp.inodes_count,
            blocks_count: cp.blocks_count,
            now,
            generation: 0,
            read_only,
            have_delta: false,
            sbw: crate::sb_write::SbWriter::from_mount(&nilfs.sb_choice, dev.size_bytes())?,
            sb,
            nongc_ctime: sr.nongc_ctime,
            gc: None,
        };
        if read_only {
            return Ok(fs);
        }
        // The end of nilfs_search_super_root: from here on the cursor is the
        // one the scan found (a salvage construction moves it again).
        fs.sbw.store_recovered_cursor(s.sr_pseg, s.seq, s.cno);
        if nilfs.sb.state & STATE_VALID_FS == 0 {
            // load_nilfs: nilfs_salvage_orphan_logs (which runs, and may
            // find nothing, for every unclean mount), then mark clean and
            // nilfs_cleanup_super.
            if roll_forward == RollForward::Kernel {
                fs.salvage_orphan_logs(nilfs)?;
            }
            fs.sbw.set_mount_state_valid();
            fs.cleanup_super()?;
        }
        // nilfs_fill_super -> nilfs_setup_super(sb, 1): both copies, with
        // the mount count and time, VALID_FS cleared, cursor untouched.
        let w = fs.sbw.setup_rw_mount(now);
        fs.write_sb(w)?;
        Ok(fs)
    }

    /// `nilfs_salvage_orphan_logs` for an uncleanly unmounted filesystem:
    /// replay the data-only logs written after the latest super root
    /// (`nilfs_do_roll_forward`), then move the writer to a fresh segment
    /// (`nilfs_prepare_segment_for_recovery`), write a checkpoint of the
    /// salvaged blocks, and clear the first replayed summary when it shares
    /// the super root's segment (`nilfs_finish_roll_forward`) so it is never
    /// replayed again. The caller then records a clean state
    /// (`nilfs_cleanup_super`), as `load_nilfs` does before the mount.
    fn salvage_orphan_logs(&mut self, nilfs: &Nilfs<'_>) -> Result<()> {
        let scan = &nilfs.scan;
        let (Some((start, start_seq)), Some(end)) = (scan.lsegs_start, scan.lsegs_end) else {
            return Ok(());
        };
        let (dev, bs) = (self.dev, self.bs);
        let seed = self.sb.crc_seed;
        let geo = self.geo;
        let (last_pseg, last_seq, last_segnum, last_nextnum) = scan.last_valid;
        let mut salvaged = 0u64;
        let mut pending: Vec<(Ino, u64, BlockNr)> = Vec::new();
        let mut in_dsync = false;
        let mut pseg = start;
        let mut seq = start_seq;
        let mut segnum = geo.segnum_of(pseg);
        let (_, mut seg_end) = geo.range(segnum);
        let mut empty_seg = 0u32;
        let mut nextnum = segnum;
        let bound = geo
            .nsegments
            .saturating_mul(geo.blocks_per_segment)
            .saturating_add(1);
        for _ in 0..bound {
            if segnum == last_segnum && pseg > last_pseg {
                break;
            }
            let (h, verdict) = crate::recovery::validate_log(dev, &geo, seed, pseg, seq)?;
            if verdict.is_ok() {
                if h.flags & crate::format::segsum::SS_SR != 0 {
                    return Err(Error::corrupt(
                        "segment summary",
                        "super root in the roll-forward range",
                    )
                    .at_block(pseg.0));
                }
                nextnum = geo.segnum_of(h.next);
                empty_seg = 0;
                let syndt = h.flags & crate::format::segsum::SS_SYNDT != 0;
                if !in_dsync && syndt && h.flags & crate::format::segsum::SS_LOGBGN != 0 {
                    in_dsync = true;
                }
                if in_dsync {
                    if !syndt {
                        return Err(Error::corrupt(
                            "segment summary",
                            "a non data-sync log inside a data-sync run",
                        )
                        .at_block(pseg.0));
                    }
                    let nsum = u64::from(h.sumbytes).div_ceil(u64::from(bs)).max(1);
                    let mut buf = Vec::new();
                    for b in 0..nsum {
                        buf.extend_from_slice(&crate::device::read_block(dev, bs, pseg.0 + b)?);
                    }
                    let sum = crate::format::segsum::Summary::decode(&buf, bs)
                        .map_err(|e| e.at_block(pseg.0))?;
                    for e in sum.block_entries(bs) {
                        if let Binfo::DataV { blkoff, .. } = e.binfo {
                            pending.push((e.ino, blkoff.0, BlockNr(pseg.0 + e.index)));
                        }
                    }
                    if h.flags & crate::format::segsum::SS_LOGEND != 0 {
                        salvaged += self.recover_dsync_blocks(std::mem::take(&mut pending))?;
                        in_dsync = false;
                    }
                }
                if pseg == end {
                    break;
                }
                pseg = BlockNr(pseg.0 + u64::from(h.nblocks));
                if pseg < seg_end {
                    continue;
                }
            } else if pseg == end {
                break;
            }
            // feed_segment: on to the next full segment.
            if empty_seg > 0 {
                break;
            }
            empty_seg += 1;
            seq = crate::format::Seq(seq.0 + 1);
            segnum = nextnum;
            let (s0, e0) = geo.range(segnum);
            pseg = s0;
            seg_end = e0;
        }
        if salvaged == 0 {
            return Ok(());
        }
        // nilfs_prepare_segment_for_recovery.
        let sr_seg = scan.segnum;
        self.sufile.free(scan.nextnum)?;
        let mut scrap: Vec<SegNum> = scan.used_segments.clone();
        scrap.extend([scan.nextnum, last_segnum, last_nextnum]);
        for s in scrap {
            if s != sr_seg {
                self.sufile.scrap(s)?;
            }
        }
        let fresh = self.sufile.alloc()?;
        self.cursor = Cursor {
            segnum: fresh,
            pseg_offset: 0,
            seq: crate::format::Seq(last_seq.0 + 2),
            nextnum: fresh,
        };
        // nilfs_salvage_orphan_logs: set_nilfs_discontinued, then
        // nilfs_construct_segment (which therefore commits a super block).
        self.sbw.set_discontinued();
        self.construct()?;
        // nilfs_finish_roll_forward.
        if geo.segnum_of(start) == geo.segnum_of(scan.super_root) {
            dev.write_at(start.0 * u64::from(bs), &vec![0u8; bs as usize])?;
        }
        // The super block is written by the caller (nilfs_cleanup_super).
        Ok(())
    }

    /// `nilfs_recover_dsync_blocks`: copy each salvaged block into its file
    /// at its offset, as a write that does not change the file's size (a
    /// block past the end is dropped, `nilfs_write_failed`). Returns how
    /// many were salvaged.
    fn recover_dsync_blocks(&mut self, blocks: Vec<(Ino, u64, BlockNr)>) -> Result<u64> {
        let bs = u64::from(self.bs);
        let mut n = 0;
        for (i, blkoff, pbn) in blocks {
            let size = self.file(i)?.raw.size;
            if blkoff.saturating_mul(bs) >= size {
                continue;
            }
            let data = crate::device::read_block(self.dev, self.bs, pbn.0)?;
            let f = self.files.get_mut(&i).expect("loaded");
            f.dirty.insert(blkoff, data);
            f.inode_dirty = true;
            self.touch(i);
            n += 1;
        }
        Ok(n)
    }

    /// `nilfs_transaction_begin`: EROFS on a read-only mount; with
    /// `vacancy_check` (operations that add blocks: create, mkdir, symlink,
    /// link, rename, write), ENOSPC when `nilfs_near_disk_full` says the
    /// clean segments left, beyond the reserved ones, cannot take what is
    /// already dirty. Nothing has changed when it refuses.
    fn begin(&mut self, vacancy_check: bool) -> Result<()> {
        if self.read_only {
            return Err(Error::errno(Errno::EROFS, "read-only mount"));
        }
        if vacancy_check {
            let ncleansegs = self.sufile.ncleansegs()?;
            let nrsv = crate::sufile::nrsvsegs(
                self.geo.nsegments,
                u64::from(self.sb.r_segments_percentage),
            );
            // ns_ndirtyblks: the dirty blocks of the files on the dirty
            // list (a walk over every loaded file made each operation
            // O(files): 100,000 creations took 75 s instead of 4).
            let ndirty: u64 = self
                .order
                .iter()
                .map(|i| self.files.get(i).map_or(0, |f| f.dirty.len() as u64))
                .sum();
            if crate::sufile::near_disk_full(ncleansegs, nrsv, ndirty, self.geo.blocks_per_segment)
            {
                return Err(Error::errno(Errno::ENOSPC, "no room for another log"));
            }
        }
        Ok(())
    }

    /// Set the injected clock (seconds).
    pub fn set_time(&mut self, now: u64) {
        self.now = now;
    }

    /// Put the policy's super block writes on the device, in order.
    fn write_sb(&mut self, writes: Vec<crate::sb_write::SbWrite>) -> Result<()> {
        if writes.is_empty() {
            return Ok(());
        }
        for (off, buf) in &writes {
            self.dev.write_at(*off, buf)?;
        }
        self.dev.flush()
    }

    /// `nilfs_count_free_blocks`: clean segments times blocks per segment.
    fn free_blocks(&mut self) -> Result<u64> {
        Ok(self.sufile.ncleansegs()? * self.geo.blocks_per_segment)
    }

    /// `nilfs_cleanup_super`, with the free block count of now.
    fn cleanup_super(&mut self) -> Result<()> {
        let free = self.free_blocks()?;
        self.sbw.set_free_blocks(free);
        let w = self.sbw.cleanup_at_unmount(self.now);
        self.write_sb(w)
    }

    /// Load a file's state (its raw inode from the ifile).
    fn file(&mut self, i: Ino) -> Result<&mut FileState> {
        if !self.files.contains_key(&i) {
            let raw = self.ifile.read_inode(i)?;
            if raw.links_count == 0 {
                return Err(Error::errno(Errno::ESTALE, format!("inode {i}")));
            }
            let bmap = Bmap::open(&raw.bmap, self.bs)?;
            self.files.insert(
                i,
                FileState {
                    raw,
                    bmap,
                    dirty: BTreeMap::new(),
                    dir: None,
                    inode_dirty: false,
                    inode_sync: false,
                    pages_dirty: false,
                },
            );
        }
        Ok(self.files.get_mut(&i).expect("inserted above"))
    }

    fn touch(&mut self, i: Ino) {
        if !self.order.contains(&i) {
            self.order.push(i);
        }
    }

    /// Block `key` of file `i` as it reads now.
    fn read_file_block(&mut self, i: Ino, key: u64) -> Result<Vec<u8>> {
        let bs = self.bs;
        let dev = self.dev;
        let f = self.files.get_mut(&i).expect("loaded");
        if let Some(d) = f.dirty.get(&key) {
            return Ok(d.clone());
        }
        let mut src = VNodes {
            dat: &mut self.dat,
            dev,
            bs,
        };
        match f.bmap.lookup(key, &mut src)? {
            None => Ok(vec![0u8; bs as usize]),
            Some(v) => {
                let pbn = self.dat.translate(VBlockNr(v))?;
                crate::device::read_block(dev, bs, pbn.0)
            }
        }
    }

    /// Load the directory `i`'s blocks for a change: its pages become
    /// dirty (NILFS_I_DIRTY, as `nilfs_commit_chunk` and `nilfs_set_link`
    /// leave it).
    fn dir(&mut self, i: Ino) -> Result<&mut DirFile> {
        self.dir_read(i)?;
        let f = self.files.get_mut(&i).expect("loaded");
        f.pages_dirty = true;
        Ok(f.dir.as_mut().expect("loaded"))
    }

    /// Load the directory `i`'s blocks to read them (a lookup, readdir, an
    /// emptiness test): nothing becomes dirty.
    fn dir_read(&mut self, i: Ino) -> Result<&mut DirFile> {
        self.file(i)?;
        if self.files[&i].raw.mode & S_IFMT != S_IFDIR {
            return Err(Error::errno(Errno::ENOTDIR, format!("inode {i}")));
        }
        if self.files[&i].dir.is_none() {
            let n = self.files[&i].raw.size.div_ceil(u64::from(self.bs));
            let mut blocks = Vec::new();
            for b in 0..n {
                blocks.push(self.read_file_block(i, b)?);
            }
            let d = DirFile::from_blocks(self.bs, blocks)?;
            self.files.get_mut(&i).expect("loaded").dir = Some(d);
        }
        let f = self.files.get_mut(&i).expect("loaded");
        Ok(f.dir.as_mut().expect("set above"))
    }

    /// Look `name` up in directory `parent`.
    pub fn lookup(&mut self, parent: Ino, name: &[u8]) -> Result<Option<Ino>> {
        Ok(self.dir_read(parent)?.find(name)?.map(|f| f.ino))
    }

    fn new_inode(&mut self, mode: u16, links: u16) -> Result<Ino> {
        let i = self.ifile.create_inode()?;
        self.generation = self.generation.wrapping_add(1);
        let raw = Inode {
            ctime: self.now,
            mtime: self.now,
            mode,
            links_count: links,
            generation: self.generation,
            ..Inode::default()
        };
        let bmap = Bmap::new_empty(self.bs)?;
        self.files.insert(
            i,
            FileState {
                raw,
                bmap,
                dirty: BTreeMap::new(),
                dir: None,
                inode_dirty: true,
                inode_sync: true,
                pages_dirty: false,
            },
        );
        self.inodes_count += 1;
        self.touch(i);
        Ok(i)
    }

    fn check_name(&mut self, parent: Ino, name: &[u8]) -> Result<()> {
        if name.is_empty() || name.contains(&b'/') || name == b"." || name == b".." {
            return Err(Error::errno(Errno::EINVAL, String::from_utf8_lossy(name)));
        }
        if name.len() > crate::format::NAME_LEN {
            return Err(Error::errno(
                Errno::ENAMETOOLONG,
                String::from_utf8_lossy(name),
            ));
        }
        if self.lookup(parent, name)?.is_some() {
            return Err(Error::errno(Errno::EEXIST, String::from_utf8_lossy(name)));
        }
        Ok(())
    }

    fn link_into(&mut self, parent: Ino, name: &[u8], child: Ino, mode: u16) -> Result<()> {
        let now = self.now;
        let d = self.dir(parent)?;
        d.add_link(name, child, file_type_from_mode(mode))?;
        let size = d.size();
        let f = self.files.get_mut(&parent).expect("loaded");
        // A directory grows by whole blocks (the kernel's chunk).
        f.raw.size = size;
        f.raw.mtime = now;
        f.raw.ctime = now;
        f.inode_dirty = true;
        f.inode_sync = true;
        self.touch(parent);
        Ok(())
    }

    /// `nilfs_create`: a new empty regular file `name` in `parent`.
    pub fn create(&mut self, parent: Ino, name: &[u8], perm: u16) -> Result<Ino> {
        self.check_name(parent, name)?;
        self.begin(true)?;
        let mode = S_IFREG | (perm & 0o7777);
        let i = self.new_inode(mode, 1)?;
        self.link_into(parent, name, i, mode)?;
        Ok(i)
    }

    /// `nilfs_mkdir`: a new directory with "." and "..".
    pub fn mkdir(&mut self, parent: Ino, name: &[u8], perm: u16) -> Result<Ino> {
        self.check_name(parent, name)?;
        self.begin(true)?;
        if self.file(parent)?.raw.links_count >= crate::format::LINK_MAX as u16 {
            return Err(Error::errno(Errno::EMLINK, String::from_utf8_lossy(name)));
        }
        let mode = S_IFDIR | (perm & 0o7777);
        let i = self.new_inode(mode, 2)?;
        let d = DirFile::make_empty(self.bs, i, parent);
        let f = self.files.get_mut(&i).expect("created");
        f.raw.size = d.size();
        f.dir = Some(d);
        f.pages_dirty = true; // nilfs_make_empty writes "." and ".."
        self.file(parent)?.raw.links_count += 1;
        self.link_into(parent, name, i, mode)?;
        Ok(i)
    }

    /// Write `data` at `offset` of regular file `i` (beyond EOF leaves a hole).
    pub fn write(&mut self, i: Ino, offset: u64, data: &[u8]) -> Result<()> {
        if self.file(i)?.raw.mode & S_IFMT != S_IFREG {
            return Err(Error::errno(Errno::EISDIR, format!("inode {i}")));
        }
        // generic_write_checks: a zero-length write changes nothing.
        if data.is_empty() {
            return Ok(());
        }
        // __generic_file_write_iter calls file_update_time before any page
        // is written, so the times change (I_DIRTY_SYNC: the inode for the
        // ifile, not its pages) even when nilfs_write_begin's vacancy check
        // then refuses the first page with ENOSPC.
        self.begin(false)?;
        let now = self.now;
        let f = self.files.get_mut(&i).expect("loaded");
        if f.raw.mtime != now || f.raw.ctime != now {
            f.raw.mtime = now;
            f.raw.ctime = now;
            f.inode_dirty = true;
            self.touch(i);
        }
        self.begin(true)?;
        let bs = u64::from(self.bs);
        let end = offset
            .checked_add(data.len() as u64)
            .ok_or_else(|| Error::errno(Errno::EFBIG, "write"))?;
        let mut pos = offset;
        while pos < end {
            let key = pos / bs;
            let within = (pos % bs) as usize;
            let n = ((bs - within as u64).min(end - pos)) as usize;
            let mut block = if within == 0 && n as u64 == bs {
                vec![0u8; bs as usize]
            } else {
                self.read_file_block(i, key)?
            };
            let from = (pos - offset) as usize;
            block[within..within + n].copy_from_slice(&data[from..from + n]);
            self.files
                .get_mut(&i)
                .expect("loaded")
                .dirty
                .insert(key, block);
            pos += n as u64;
        }
        let now = self.now;
        let f = self.files.get_mut(&i).expect("loaded");
        if end > f.raw.size {
            // i_size_write + mark_inode_dirty: I_DIRTY_DATASYNC.
            f.raw.size = end;
            f.inode_sync = true;
        }
        f.raw.mtime = now;
        f.raw.ctime = now;
        f.inode_dirty = true;
        f.pages_dirty = true; // nilfs_write_end -> nilfs_set_file_dirty
        self.touch(i);
        Ok(())
    }

    /// The raw inode of `i` as it stands now (`stat`).
    pub fn stat(&mut self, i: Ino) -> Result<Inode> {
        Ok(self.file(i)?.raw.clone())
    }

    /// Up to `len` bytes of file `i` from `offset` (short at EOF; holes
    /// read as zeros), as they stand now.
    pub fn read(&mut self, i: Ino, offset: u64, len: u64) -> Result<Vec<u8>> {
        let size = self.file(i)?.raw.size;
        if self.files[&i].raw.mode & S_IFMT == S_IFDIR {
            return Err(Error::errno(Errno::EISDIR, format!("inode {i}")));
        }
        let end = size.min(offset.saturating_add(len));
        let bs = u64::from(self.bs);
        let mut out = Vec::with_capacity(end.saturating_sub(offset).min(1 << 30) as usize);
        let mut pos = offset;
        while pos < end {
            let key = pos / bs;
            let within = (pos % bs) as usize;
            let n = ((bs - within as u64).min(end - pos)) as usize;
            let b = self.read_file_block(i, key)?;
            out.extend_from_slice(&b[within..within + n]);
            pos += n as u64;
        }
        Ok(out)
    }

    /// The live entries of directory `i` (name, inode, type), "." and ".."
    /// included, in on-disk order.
    pub fn readdir(&mut self, i: Ino) -> Result<Vec<(Vec<u8>, Ino, u8)>> {
        self.dir_read(i)?.entries()
    }

    /// Resolve an absolute path (no symlinks are followed yet: this slice
    /// creates none).
    pub fn resolve(&mut self, path: &[u8]) -> Result<Ino> {
        let mut cur = ino::ROOT;
        for part in path
            .split(|&c| c == b'/')
            .filter(|p| !p.is_empty() && *p != b".")
        {
            cur = self
                .lookup(cur, part)?
                .ok_or_else(|| Error::errno(Errno::ENOENT, String::from_utf8_lossy(path)))?;
        }
        Ok(cur)
    }

    /// Unmap blocks `from..` of file `i` (`nilfs_bmap_truncate`): each
    /// written version is ended in the DAT at the checkpoint under
    /// construction (a version never written is freed there), dirty pages
    /// past the end are dropped, and the block counts shrink.
    fn release_blocks(&mut self, i: Ino, from: u64) -> Result<()> {
        let cno = self.cpfile.next_cno();
        let (dev, bs) = (self.dev, self.bs);
        let f = self.files.get_mut(&i).expect("loaded");
        let mut src = VNodes {
            dat: &mut self.dat,
            dev,
            bs,
        };
        let out = f.bmap.truncate(from, &mut src)?;
        for &(_, ptr) in &out.deleted {
            self.dat.end(VBlockNr(ptr), cno, false)?;
        }
        for &ptr in &out.freed_nodes {
            self.dat.end(VBlockNr(ptr), cno, false)?;
        }
        let n = out.deleted.len() as u64 + u64::from(out.nodes_removed);
        f.raw.blocks = f.raw.blocks.saturating_sub(n * sectors(bs));
        self.blocks_count = self.blocks_count.saturating_sub(n);
        f.dirty.retain(|&k, _| k < from);
        Ok(())
    }

    /// `nilfs_evict_inode` for an inode whose last link is gone: free its
    /// blocks and its inode number.
    fn evict(&mut self, i: Ino) -> Result<()> {
        self.release_blocks(i, 0)?;
        self.ifile.delete_inode(i)?;
        self.files.remove(&i);
        self.order.retain(|&x| x != i);
        self.inodes_count = self.inodes_count.saturating_sub(1);
        Ok(())
    }

    fn mark(&mut self, i: Ino) {
        let now = self.now;
        if let Some(f) = self.files.get_mut(&i) {
            f.raw.ctime = now;
            f.inode_dirty = true;
            f.inode_sync = true;
        }
        self.touch(i);
    }

    fn touch_dir(&mut self, d: Ino) {
        let now = self.now;
        let f = self.files.get_mut(&d).expect("loaded");
        f.raw.mtime = now;
        f.raw.ctime = now;
        f.inode_dirty = true;
        f.inode_sync = true;
        self.touch(d);
    }

    /// `nilfs_unlink`: remove `name` from `parent`; the inode goes with its
    /// last link. EISDIR for a directory.
    pub fn unlink(&mut self, parent: Ino, name: &[u8]) -> Result<()> {
        self.begin(false)?;
        let found = self
            .dir_read(parent)?
            .find(name)?
            .ok_or_else(|| Error::errno(Errno::ENOENT, String::from_utf8_lossy(name)))?;
        if self.file(found.ino)?.raw.mode & S_IFMT == S_IFDIR {
            return Err(Error::errno(Errno::EISDIR, String::from_utf8_lossy(name)));
        }
        self.dir(parent)?.delete_entry(found.pos)?;
        self.touch_dir(parent);
        let f = self.files.get_mut(&found.ino).expect("loaded");
        f.raw.links_count = f.raw.links_count.saturating_sub(1);
        if f.raw.links_count == 0 {
            self.evict(found.ino)?;
        } else {
            self.mark(found.ino);
        }
        Ok(())
    }

    /// `nilfs_rmdir`: remove the empty directory `name` (ENOTDIR,
    /// ENOTEMPTY as the kernel gives them).
    pub fn rmdir(&mut self, parent: Ino, name: &[u8]) -> Result<()> {
        self.begin(false)?;
        let found = self
            .dir_read(parent)?
            .find(name)?
            .ok_or_else(|| Error::errno(Errno::ENOENT, String::from_utf8_lossy(name)))?;
        if self.file(found.ino)?.raw.mode & S_IFMT != S_IFDIR {
            return Err(Error::errno(Errno::ENOTDIR, String::from_utf8_lossy(name)));
        }
        if !self.dir_read(found.ino)?.is_empty(found.ino)? {
            return Err(Error::errno(
                Errno::ENOTEMPTY,
                String::from_utf8_lossy(name),
            ));
        }
        self.dir(parent)?.delete_entry(found.pos)?;
        self.touch_dir(parent);
        let p = self.files.get_mut(&parent).expect("loaded");
        p.raw.links_count = p.raw.links_count.saturating_sub(1);
        self.evict(found.ino)
    }

    /// `nilfs_link`: another name for `target` (EPERM for a directory,
    /// EMLINK at the link limit).
    pub fn link(&mut self, target: Ino, parent: Ino, name: &[u8]) -> Result<()> {
        // do_linkat looks the new name up (EEXIST) before vfs_link refuses
        // a directory (EPERM) or a full link count (EMLINK).
        self.check_name(parent, name)?;
        self.begin(true)?;
        let raw = self.file(target)?.raw.clone();
        if raw.mode & S_IFMT == S_IFDIR {
            return Err(Error::errno(Errno::EPERM, String::from_utf8_lossy(name)));
        }
        if u32::from(raw.links_count) >= crate::format::LINK_MAX {
            return Err(Error::errno(Errno::EMLINK, String::from_utf8_lossy(name)));
        }
        self.link_into(parent, name, target, raw.mode)?;
        self.files.get_mut(&target).expect("loaded").raw.links_count += 1;
        self.mark(target);
        Ok(())
    }

    /// `nilfs_symlink`: a symlink whose target is stored as file data
    /// (ENAMETOOLONG when it does not fit in one block with its NUL).
    pub fn symlink(&mut self, parent: Ino, name: &[u8], target: &[u8]) -> Result<Ino> {
        if target.len() + 1 > self.bs as usize {
            return Err(Error::errno(
                Errno::ENAMETOOLONG,
                String::from_utf8_lossy(target),
            ));
        }
        if target.is_empty() {
            return Err(Error::errno(Errno::ENOENT, "empty symlink target"));
        }
        self.check_name(parent, name)?;
        self.begin(true)?;
        let mode = crate::format::inode::S_IFLNK | 0o777;
        let i = self.new_inode(mode, 1)?;
        let mut block = vec![0u8; self.bs as usize];
        block[..target.len()].copy_from_slice(target);
        let f = self.files.get_mut(&i).expect("created");
        f.dirty.insert(0, block);
        f.pages_dirty = true; // page_symlink writes the target's block
        f.raw.size = target.len() as u64;
        self.link_into(parent, name, i, mode)?;
        Ok(i)
    }

    /// `nilfs_setattr` size change (`nilfs_truncate` and
    /// `block_truncate_page`): shrinking drops blocks past the end and
    /// zeroes the tail of the last one; growing leaves a hole.
    pub fn truncate(&mut self, i: Ino, size: u64) -> Result<()> {
        // vfs_truncate: the file's type before write access to the mount.
        if self.file(i)?.raw.mode & S_IFMT != S_IFREG {
            return Err(Error::errno(Errno::EISDIR, format!("inode {i}")));
        }
        self.begin(false)?;
        let bs = u64::from(self.bs);
        let old = self.files[&i].raw.size;
        if size < old {
            self.release_blocks(i, size.div_ceil(bs))?;
            if !size.is_multiple_of(bs) {
                let key = size / bs;
                let mut b = self.read_file_block(i, key)?;
                b[(size % bs) as usize..].fill(0);
                self.files.get_mut(&i).expect("loaded").dirty.insert(key, b);
            }
        }
        let now = self.now;
        let f = self.files.get_mut(&i).expect("loaded");
        f.raw.size = size;
        f.raw.mtime = now;
        f.raw.ctime = now;
        f.inode_dirty = true;
        f.inode_sync = true;
        // nilfs_setattr calls nilfs_truncate (nilfs_set_file_dirty) only
        // when the size changes; otherwise the inode is only marked dirty.
        if size != old {
            f.pages_dirty = true;
        }
        self.touch(i);
        Ok(())
    }

    /// Whether `anc` is `d` or one of its ancestors.
    fn is_ancestor(&mut self, anc: Ino, mut d: Ino) -> Result<bool> {
        for _ in 0..u32::from(u16::MAX) {
            if d == anc {
                return Ok(true);
            }
            if d == ino::ROOT {
                return Ok(false);
            }
            d = self
                .lookup(d, b"..")?
                .ok_or_else(|| Error::corrupt("directory", "no \"..\" entry"))?;
        }
        Err(Error::corrupt(
            "directory",
            "\"..\" chain does not reach the root",
        ))
    }

    /// `nilfs_rename` (with the VFS's checks): move `oname` of `odir` to
    /// `nname` of `ndir`, replacing what is there.
    pub fn rename(&mut self, odir: Ino, oname: &[u8], ndir: Ino, nname: &[u8]) -> Result<()> {
        self.begin(true)?;
        let shown = || String::from_utf8_lossy(oname).into_owned();
        let old = self
            .dir_read(odir)?
            .find(oname)?
            .ok_or_else(|| Error::errno(Errno::ENOENT, shown()))?;
        if nname.len() > crate::format::NAME_LEN {
            return Err(Error::errno(
                Errno::ENAMETOOLONG,
                String::from_utf8_lossy(nname),
            ));
        }
        let is_dir = self.file(old.ino)?.raw.mode & S_IFMT == S_IFDIR;
        if is_dir && self.is_ancestor(old.ino, ndir)? {
            return Err(Error::errno(Errno::EINVAL, shown()));
        }
        let target = self.dir_read(ndir)?.find(nname)?;
        if let Some(t) = target {
            if t.ino == old.ino {
                return Ok(());
            }
            // do_renameat2: a target that is an ancestor of the source
            // (lock_rename's trap) is ENOTEMPTY, before any type check.
            if self.is_ancestor(t.ino, odir)? {
                return Err(Error::errno(Errno::ENOTEMPTY, shown()));
            }
            let t_dir = self.file(t.ino)?.raw.mode & S_IFMT == S_IFDIR;
            match (is_dir, t_dir) {
                (true, false) => return Err(Error::errno(Errno::ENOTDIR, shown())),
                (false, true) => return Err(Error::errno(Errno::EISDIR, shown())),
                (true, true) if !self.dir_read(t.ino)?.is_empty(t.ino)? => {
                    return Err(Error::errno(Errno::ENOTEMPTY, shown()))
                }
                _ => {}
            }
        } else if is_dir
            && odir != ndir
            && u32::from(self.file(ndir)?.raw.links_count) >= crate::format::LINK_MAX
        {
            return Err(Error::errno(Errno::EMLINK, shown()));
        }
        let mode = self.files[&old.ino].raw.mode;
        match target {
            Some(t) => {
                self.dir(ndir)?
                    .set_link(t.pos, old.ino, file_type_from_mode(mode))?;
                self.touch_dir(ndir);
                let tf = self.files.get_mut(&t.ino).expect("loaded");
                let drop = if is_dir { 2 } else { 1 };
                tf.raw.links_count = tf.raw.links_count.saturating_sub(drop);
                if tf.raw.links_count == 0 {
                    self.evict(t.ino)?;
                } else {
                    self.mark(t.ino);
                }
            }
            None => {
                self.link_into(ndir, nname, old.ino, mode)?;
                if is_dir {
                    self.files.get_mut(&ndir).expect("loaded").raw.links_count += 1;
                }
            }
        }
        self.mark(old.ino);
        // The old entry's position is unchanged by the add above (records
        // never move; at most its slack was split off).
        let old_pos = self
            .dir_read(odir)?
            .find(oname)?
            .map(|f| f.pos)
            .unwrap_or(old.pos);
        self.dir(odir)?.delete_entry(old_pos)?;
        self.touch_dir(odir);
        if is_dir {
            let dotdot = self
                .dir_read(old.ino)?
                .find(b"..")?
                .ok_or_else(|| Error::corrupt("directory", "no \"..\""))?;
            self.dir(old.ino)?
                .set_link(dotdot.pos, ndir, crate::format::dir::FT_DIR)?;
            self.touch(old.ino);
            let p = self.files.get_mut(&odir).expect("loaded");
            p.raw.links_count = p.raw.links_count.saturating_sub(1);
        }
        Ok(())
    }

    /// Give every dirty data block of user file `i` and every dirty node a
    /// new virtual block number for checkpoint `cno`.
    fn prepare_user_file(&mut self, i: Ino, cno: Cno) -> Result<()> {
        let bs = self.bs;
        let dev = self.dev;
        let f = self.files.get_mut(&i).expect("dirty files are loaded");
        if let Some(d) = &f.dir {
            for b in d.dirty_blocks().collect::<Vec<_>>() {
                f.dirty.insert(b, d.blocks()[b as usize].clone());
            }
        }
        let target = self.dat.target_for_ino(i);
        let keys: Vec<u64> = f.dirty.keys().copied().collect();
        for key in keys {
            let mut src = VNodes {
                dat: &mut self.dat,
                dev,
                bs,
            };
            match f.bmap.lookup(key, &mut src)? {
                None => {
                    let v = self.dat.alloc(target)?;
                    let mut src = VNodes {
                        dat: &mut self.dat,
                        dev,
                        bs,
                    };
                    let out = f.bmap.insert(key, v.0, &mut src)?;
                    let added = 1 + u64::from(out.nodes_added);
                    f.raw.blocks += added * sectors(bs);
                    self.blocks_count += added;
                }
                Some(old) => {
                    let req = self.dat.prepare_update(VBlockNr(old), cno, target)?;
                    let new = self.dat.commit_update(req, false);
                    let mut src = VNodes {
                        dat: &mut self.dat,
                        dev,
                        bs,
                    };
                    f.bmap.update_ptr(key, new.0, &mut src)?;
                }
            }
            let mut src = VNodes {
                dat: &mut self.dat,
                dev,
                bs,
            };
            f.bmap.mark_data_dirty(key, &mut src)?;
        }
        for dn in f.bmap.dirty_nodes() {
            let new = match dn.old_ptr {
                Some(old) => {
                    let req = self.dat.prepare_update(VBlockNr(old), cno, target)?;
                    self.dat.commit_update(req, false)
                }
                None => self.dat.alloc(target)?,
            };
            f.bmap.assign(dn.id, new.0)?;
        }
        f.raw.bmap = f.bmap.root_bmap()?;
        Ok(())
    }

    /// The same for a metadata file's dirty blocks (`vs`: single version).
    fn prepare_meta(
        dat: &mut Dat<'a>,
        map: &mut MetaMap,
        keys: &[u64],
        cno: Cno,
        vs: bool,
        dev: &dyn BlockDevice,
        bs: u32,
    ) -> Result<()> {
        let target = VBlockNr(0);
        for &key in keys {
            let mut src = VNodes { dat, dev, bs };
            match map.bmap.lookup(key, &mut src)? {
                None => {
                    let v = dat.alloc(target)?;
                    let mut src = VNodes { dat, dev, bs };
                    let out = map.bmap.insert(key, v.0, &mut src)?;
                    map.raw.blocks += (1 + u64::from(out.nodes_added)) * sectors(bs);
                }
                Some(old) => {
                    let req = dat.prepare_update(VBlockNr(old), cno, target)?;
                    let new = dat.commit_update(req, vs);
                    let mut src = VNodes { dat, dev, bs };
                    map.bmap.update_ptr(key, new.0, &mut src)?;
                }
            }
            let mut src = VNodes { dat, dev, bs };
            map.bmap.mark_data_dirty(key, &mut src)?;
        }
        Ok(())
    }

    /// Take the blocks the metadata files deleted (the cpfile's emptied
    /// checkpoint blocks, the DAT's emptied entry and bitmap blocks after
    /// the cleaner freed numbers) out of their mappings, as
    /// `nilfs_mdt_delete_block` -> `nilfs_bmap_delete` does; the virtual
    /// numbers of the cpfile's and sufile's blocks end dead at once
    /// (`NILFS_BMAP_PTR_VS`), the ifile's at checkpoint `cno`.
    pub(crate) fn apply_meta_deletions(&mut self, cno: Cno) -> Result<()> {
        let (dev, bs) = (self.dev, self.bs);
        let deleted = [
            (ino::IFILE, self.ifile.palloc.mdt.deleted_blocks()),
            (ino::CPFILE, self.cpfile.mdt.deleted_blocks()),
            (ino::SUFILE, self.sufile.mdt.deleted_blocks()),
            (ino::DAT, self.dat.palloc.mdt.deleted_blocks()),
        ];
        for (i, keys) in deleted {
            for key in keys {
                let (map, vs) = match i {
                    ino::IFILE => (&mut self.if_map, false),
                    ino::CPFILE => (&mut self.cp_map, true),
                    ino::SUFILE => (&mut self.su_map, true),
                    _ => (&mut self.dat_map, false),
                };
                // The DAT's pointers are disk blocks; the others' are
                // virtual, read through the DAT.
                let mut pnodes = PNodes { dev, bs };
                let mut vnodes = VNodes {
                    dat: &mut self.dat,
                    dev,
                    bs,
                };
                let src: &mut dyn NodeSource = if i == ino::DAT {
                    &mut pnodes
                } else {
                    &mut vnodes
                };
                if map.bmap.lookup(key, src)?.is_none() {
                    continue;
                }
                let out = map.bmap.delete(key, src)?;
                map.raw.blocks = map
                    .raw
                    .blocks
                    .saturating_sub((1 + u64::from(out.nodes_removed)) * sectors(bs));
                if i != ino::DAT {
                    self.dat.end(VBlockNr(out.ptr), cno, vs)?;
                    for p in out.freed_nodes {
                        self.dat.end(VBlockNr(p), cno, vs)?;
                    }
                }
            }
        }
        Ok(())
    }

    /// Give the metadata file's dirty nodes not yet assigned in this log
    /// their new virtual numbers (a construction that grows may dirty more
    /// of them after the first pass).
    fn assign_meta_nodes(dat: &mut Dat<'a>, map: &mut MetaMap, cno: Cno, vs: bool) -> Result<()> {
        for dn in map.bmap.dirty_nodes().into_iter().filter(|d| !d.assigned) {
            let new = match dn.old_ptr {
                Some(old) => {
                    let req = dat.prepare_update(VBlockNr(old), cno, VBlockNr(0))?;
                    dat.commit_update(req, vs)
                }
                None => dat.alloc(VBlockNr(0))?,
            };
            map.bmap.assign(dn.id, new.0)?;
        }
        map.raw.bmap = map.bmap.root_bmap()?;
        Ok(())
    }

    /// `fsync` (`nilfs_sync_file` without datasync): a full construction
    /// if the file's pages are dirty (`nilfs_inode_dirty`); nothing for an
    /// inode changed only in metadata.
    pub fn fsync(&mut self, i: Ino) -> Result<()> {
        let f = self.file(i)?;
        if f.pages_dirty || !f.dirty.is_empty() {
            self.construct()?;
        }
        Ok(())
    }

    /// `fdatasync` (`nilfs_construct_dsync_segment`): nothing if the file's
    /// pages are clean (`nilfs_inode_dirty`); a full construction if its inode needs a sync
    /// (`NILFS_I_INODE_SYNC`); otherwise a data-only log (`SS_SYNDT`) of
    /// its dirty blocks. Their new DAT entries, B-tree nodes and inode stay
    /// dirty in memory for the next checkpoint; after a crash, roll-forward
    /// replays the blocks.
    pub fn fdatasync(&mut self, i: Ino) -> Result<()> {
        let f = self.file(i)?;
        if !f.pages_dirty && f.dirty.is_empty() {
            return Ok(());
        }
        if f.inode_sync || f.raw.mode & S_IFMT != S_IFREG {
            return self.construct().map(|_| ());
        }
        if f.dirty.is_empty() {
            // Only timestamps: the data-only construction finds no block
            // and writes nothing ("Avoid empty segment").
            return Ok(());
        }
        self.construct_dsync(i)
    }

    fn construct_dsync(&mut self, i: Ino) -> Result<()> {
        let cno = self.cpfile.next_cno();
        let (dev, bs) = (self.dev, self.bs);
        let ctime = self.now;
        // Propagate: each dirty block gets its new virtual block number now;
        // the nodes stay dirty, unassigned, for the next construction.
        let target = self.dat.target_for_ino(i);
        let f = self.files.get_mut(&i).expect("loaded");
        let keys: Vec<u64> = f.dirty.keys().copied().collect();
        let mut blocks = Vec::with_capacity(keys.len());
        for &key in &keys {
            let mut src = VNodes {
                dat: &mut self.dat,
                dev,
                bs,
            };
            let v = match f.bmap.lookup(key, &mut src)? {
                None => {
                    let v = self.dat.alloc(target)?;
                    let mut src = VNodes {
                        dat: &mut self.dat,
                        dev,
                        bs,
                    };
                    let out = f.bmap.insert(key, v.0, &mut src)?;
                    let added = 1 + u64::from(out.nodes_added);
                    f.raw.blocks += added * sectors(bs);
                    self.blocks_count += added;
                    v
                }
                Some(old) => {
                    let req = self.dat.prepare_update(VBlockNr(old), cno, target)?;
                    let new = self.dat.commit_update(req, false);
                    let mut src = VNodes {
                        dat: &mut self.dat,
                        dev,
                        bs,
                    };
                    f.bmap.update_ptr(key, new.0, &mut src)?;
                    new
                }
            };
            let mut src = VNodes {
                dat: &mut self.dat,
                dev,
                bs,
            };
            f.bmap.mark_data_dirty(key, &mut src)?;
            blocks.push((key, v));
        }
        let tag = FileTag { ino: i, cno };
        let mut layout = Layout::begin(
            self.geo,
            &mut self.cursor,
            &mut Segs(&mut self.sufile),
            ctime,
            cno,
            false,
            true,
        )?;
        layout.set_base_flags(crate::format::segsum::SS_SYNDT);
        let mut nadd = 1usize;
        loop {
            let mut full = false;
            for (t, &(key, v)) in blocks.iter().enumerate() {
                let b = Binfo::DataV {
                    vblocknr: v,
                    blkoff: FileBlk(key),
                };
                if layout.add_block(tag, b, t as u64).is_err() {
                    full = true;
                    break;
                }
            }
            if !full {
                layout.end_file(tag);
                layout.end_logical_segment(crate::format::segsum::SS_SYNDT);
                break;
            }
            layout.extend(&mut Segs(&mut self.sufile), nadd)?;
            nadd = (nadd * 2).min(64);
            layout.restart(true);
        }
        let (plans, cursor) = layout.finish(&mut Segs(&mut self.sufile))?;
        // nilfs_segctor_update_segusage runs for data-only logs too: the
        // segments' usage (in memory until the next checkpoint) says they
        // hold blocks written now, so the cleaner neither picks them as
        // the oldest nor frees them as empty.
        for p in &plans {
            self.sufile
                .set_segment_usage(p.segnum, p.live_blocks as u32, ctime)?;
        }
        let f = &self.files[&i];
        for p in &plans {
            let mut payload = BTreeMap::new();
            for &(t, pbn) in &p.payload {
                let (key, v) = blocks[t as usize];
                self.dat.start(v, cno, pbn)?;
                payload.insert(t, f.dirty[&key].clone());
            }
            let log = assemble(p, &payload, None, bs, self.sb.crc_seed)?;
            write(self.dev, p, &log, bs)?;
        }
        self.dev.flush()?;
        self.cursor = cursor;
        self.have_delta |= plans.iter().any(|p| has_delta(p, &BTreeSet::new()));
        let f = self.files.get_mut(&i).expect("loaded");
        for (key, _) in &blocks {
            f.dirty.remove(key);
        }
        // The inode (its bmap, times) is still dirty for the next checkpoint,
        // and NILFS_I_DIRTY stays set: only a full construction's file stage
        // clears it (nilfs_segctor_collect_blocks), so a later fsync still
        // makes a checkpoint.
        f.inode_dirty = true;
        self.touch(i);
        Ok(())
    }

    /// Whether anything awaits a construction: a dirty file, or a dirty
    /// block of a metadata file (a checkpoint mode change, say).
    pub fn is_dirty(&self) -> bool {
        self.gc.is_some()
            || !self.order.is_empty()
            || !self.ifile.palloc.mdt.dirty_blocks().is_empty()
            || !self.cpfile.mdt.dirty_blocks().is_empty()
            || !self.sufile.mdt.dirty_blocks().is_empty()
            || !self.dat.palloc.mdt.dirty_blocks().is_empty()
    }

    /// A read-only mount (every change is EROFS).
    pub fn is_read_only(&self) -> bool {
        self.read_only
    }

    /// The latest checkpoint number (`ns_cno - 1`).
    pub fn latest_cno(&self) -> Cno {
        Cno(self.cpfile.next_cno().0 - 1)
    }

    /// `mkcp [-s]` (`NILFS_IOCTL_SYNC`, then `CHANGE_CPMODE`): make a
    /// checkpoint of everything (none if nothing changed) and return the
    /// latest checkpoint number; with `snapshot`, make it a snapshot, which
    /// the next construction records.
    pub fn mkcp(&mut self, snapshot: bool) -> Result<Cno> {
        self.begin(false)?;
        self.construct()?; // NILFS_IOCTL_SYNC: nilfs_construct_segment
        let cno = Cno(self.cpfile.next_cno().0 - 1);
        if snapshot {
            self.cpfile
                .change_mode(cno, crate::cpfile::CpMode::Snapshot, &[])?;
        }
        Ok(cno)
    }

    /// `chcp cp|ss CNO` (`nilfs_ioctl_change_cpmode`): ENOENT for a missing
    /// checkpoint; EBUSY to turn the latest checkpoint into a plain one
    /// (`nilfs_checkpoint_is_mounted`). Recorded by the next construction.
    pub fn chcp(&mut self, cno: Cno, snapshot: bool) -> Result<()> {
        self.begin(false)?;
        let mode = if snapshot {
            crate::cpfile::CpMode::Snapshot
        } else {
            crate::cpfile::CpMode::Checkpoint
        };
        self.cpfile.change_mode(cno, mode, &[])
    }

    /// `rmcp CNO` (`nilfs_ioctl_delete_checkpoint`): EBUSY for a snapshot,
    /// ENOENT for a missing checkpoint. The kernel lets the latest
    /// checkpoint go too; nilfs-utils' rmcp only protects it in ranges.
    pub fn rmcp(&mut self, cno: Cno) -> Result<()> {
        self.begin(false)?;
        self.cpfile.delete_checkpoint(cno)
    }

    /// `lscp` on the mounted file system (`NILFS_IOCTL_GET_CPINFO`): the
    /// valid checkpoints as the live cpfile has them, changes since the
    /// last construction included.
    pub fn lscp(&mut self) -> Result<Vec<crate::format::cpfile::Checkpoint>> {
        let mut out = Vec::new();
        let mut from = Cno(1);
        loop {
            let (batch, next) = self.cpfile.cpinfos(from, 64)?;
            if batch.is_empty() {
                return Ok(out);
            }
            out.extend(batch);
            from = next;
        }
    }

    /// `sync`: write one checkpoint holding every change (nothing if clean).
    /// Returns the new checkpoint number.
    pub fn sync(&mut self) -> Result<Option<Cno>> {
        let cno = self.construct()?;
        if !self.read_only {
            // nilfs_sync_fs: after the construction, one super block copy
            // if it is dirty (the log moved to another segment).
            let w = self.sbw.sync_fs(self.now);
            self.write_sb(w)?;
        }
        Ok(cno)
    }

    /// A segment construction (`nilfs_construct_segment`, as the sync
    /// ioctl, fsync and recovery request it): no `sync_fs` super block
    /// commit.
    fn construct(&mut self) -> Result<Option<Cno>> {
        match self.sync_begin()? {
            None => Ok(None),
            Some(c) => self.sync_finish(c),
        }
    }

    /// The first half of a construction: collection, pointer preparation
    /// and layout. Everything from here to [`Fs::sync_finish`] must run
    /// under the exclusive side of the transaction lock (see `txn`): a
    /// file operation in between would dirty blocks the layout did not
    /// take, which the finish then marks clean — a lost write. The split
    /// exists so that the known-bad variant can be tested.
    pub fn sync_begin(&mut self) -> Result<Option<Construction>> {
        if self.read_only || !self.is_dirty() {
            return Ok(None);
        }
        // nilfs_segctor_thread on waking: a dirty super block that is due
        // for an update marks the file system discontinued.
        self.sbw.log_writer_wakeup(self.now);
        let cno = self.cpfile.next_cno();
        let (dev, bs) = (self.dev, self.bs);
        let ctime = self.now;
        let gc = self.gc.take();

        // Blocks deleted from the metadata files since the last
        // construction (`nilfs_mdt_delete_block` -> `nilfs_bmap_delete`).
        self.apply_meta_deletions(cno)?;
        // The GC stage's blocks keep their virtual numbers; their DAT
        // entries will point at the new places (`nilfs_btree_propagate_gc`
        // -> `nilfs_dat_mark_dirty`).
        if let Some(g) = &gc {
            for b in g.moved.blocks() {
                self.dat.mark_dirty(b.vblocknr)?;
            }
        }

        // Stage 1: user files, in the order they were dirtied.
        let order = std::mem::take(&mut self.order);
        for &i in &order {
            self.prepare_user_file(i, cno)?;
        }
        for &i in &order {
            let f = &self.files[&i];
            if f.inode_dirty || !f.dirty.is_empty() {
                let raw = f.raw.clone();
                self.ifile.write_inode(i, &raw)?;
            }
        }
        // Stage 2: the ifile; then the checkpoint entry.
        let if_keys = self.ifile.palloc.mdt.dirty_blocks();
        Self::prepare_meta(
            &mut self.dat,
            &mut self.if_map,
            &if_keys,
            cno,
            false,
            dev,
            bs,
        )?;
        Self::assign_meta_nodes(&mut self.dat, &mut self.if_map, cno, false)?;
        self.cpfile.create_checkpoint(cno)?;

        // Lay out, extending as nilfs_segctor_collect does. The sufile and
        // the DAT change as segments are added, so their stages are
        // prepared inside the loop, once per block.
        let mut layout = Layout::begin(
            self.geo,
            &mut self.cursor,
            &mut Segs(&mut self.sufile),
            ctime,
            cno,
            gc.is_some(),
            true,
        )?;
        // The sufile's blocks for every segment this construction will use
        // must be dirty before its stage is prepared (its B-tree nodes get
        // their new addresses once). nilfs_segctor_collect discovers the
        // segments by retrying; we extend up front by a generous estimate
        // of the construction's size, and free what goes unused (as
        // nilfs_segctor_truncate_segments does).
        let mut nadd = 1usize;
        {
            let bs64 = u64::from(self.bs);
            let mut known: u64 = order
                .iter()
                .map(|i| {
                    let f = &self.files[i];
                    f.dirty.len() as u64 + f.bmap.dirty_nodes().len() as u64
                })
                .sum();
            known += if_keys.len() as u64 + self.if_map.bmap.dirty_nodes().len() as u64;
            known += self.cpfile.mdt.dirty_blocks().len() as u64 + 2;
            // DAT entries (32 bytes) of every block above, summaries, and a
            // margin for the sufile, the DAT's nodes and the super root.
            let estimate = known + known * 32 / bs64 + known * 16 / bs64 + 64;
            let rest = layout.bufs()[0].rest_blocks;
            if estimate > rest {
                let more = (estimate - rest).div_ceil(self.geo.blocks_per_segment) as usize;
                layout.extend(&mut Segs(&mut self.sufile), more)?;
                layout.restart(true);
                nadd = more.max(1);
            }
        }
        // NILFS_ST_SUFILE of a GC construction frees the cleaned segments
        // (nilfs_free_segments) after this attempt's segments were
        // allocated, so none of them can be reused by it.
        let freesegs: &[SegNum] = gc.as_ref().map_or(&[], |g| &g.segnums);
        self.sufile.free_segments(freesegs)?;
        let mut prepared_su: BTreeSet<u64> = BTreeSet::new();
        let mut prepared_cp = false;
        let (plans, cursor, srcs) = loop {
            if !prepared_cp {
                let cp_keys = self.cpfile.mdt.dirty_blocks();
                Self::prepare_meta(
                    &mut self.dat,
                    &mut self.cp_map,
                    &cp_keys,
                    cno,
                    true,
                    dev,
                    bs,
                )?;
                Self::assign_meta_nodes(&mut self.dat, &mut self.cp_map, cno, true)?;
                prepared_cp = true;
            }
            let su_keys: Vec<u64> = self
                .sufile
                .mdt
                .dirty_blocks()
                .into_iter()
                .filter(|k| !prepared_su.contains(k))
                .collect();
            // An extension in an earlier pass may have dirtied the usage
            // blocks of the segments it added: they join the sufile stage
            // now (the kernel's retry collects the sufile's dirty blocks
            // afresh, propagating each).
            if !su_keys.is_empty() {
                Self::prepare_meta(
                    &mut self.dat,
                    &mut self.su_map,
                    &su_keys,
                    cno,
                    true,
                    dev,
                    bs,
                )?;
                Self::assign_meta_nodes(&mut self.dat, &mut self.su_map, cno, true)?;
                prepared_su.extend(su_keys);
            }
            // The DAT: mark its dirty blocks in its own (physical) map.
            let dat_keys = self.dat.palloc.mdt.dirty_blocks();
            {
                let mut src = PNodes { dev, bs };
                for &k in &dat_keys {
                    if self.dat_map.bmap.lookup(k, &mut src)?.is_none() {
                        let out = self.dat_map.bmap.insert(
                            k,
                            crate::bmap::write::TEMP_PTR_BIT | k,
                            &mut src,
                        )?;
                        self.dat_map.raw.blocks += (1 + u64::from(out.nodes_added)) * sectors(bs);
                    }
                    self.dat_map.bmap.mark_data_dirty(k, &mut src)?;
                }
            }
            let mut srcs: Vec<Src> = Vec::new();
            let attempt = self.collect(
                &mut layout,
                gc.as_ref(),
                &order,
                cno,
                &if_keys,
                &dat_keys,
                &mut srcs,
            )?;
            match attempt {
                Ok(()) => {
                    let (plans, cursor) = layout.finish(&mut Segs(&mut self.sufile))?;
                    break (plans, cursor, srcs);
                }
                Err(Full) => {
                    // nilfs_segctor_collect's retry: cancel the frees
                    // (nilfs_sufile_cancel_freev), extend, free again.
                    for &s in freesegs {
                        self.sufile.cancel_free(s)?;
                    }
                    layout.extend(&mut Segs(&mut self.sufile), nadd)?;
                    self.sufile.free_segments(freesegs)?;
                    nadd = (nadd * 2).min(64);
                    layout.restart(true);
                }
            }
        };
        Ok(Some(Construction {
            cno,
            ctime,
            order,
            plans,
            cursor,
            srcs,
            gc,
        }))
    }

    /// The second half: addresses, metadata, checksums, the write.
    pub fn sync_finish(&mut self, c: Construction) -> Result<Option<Cno>> {
        self.finish_construction(c)
    }

    /// Add every block of the construction to the layout, in stage order.
    /// Returns `Ok(Err(Full))` when the last segment buffer is full.
    #[allow(clippy::too_many_arguments)]
    fn collect(
        &mut self,
        layout: &mut Layout,
        gc: Option<&GcWork>,
        order: &[Ino],
        cno: Cno,
        if_keys: &[u64],
        dat_keys: &[u64],
        srcs: &mut Vec<Src>,
    ) -> Result<std::result::Result<(), Full>> {
        // Every block as (file tag, binfo, source), in collection order.
        let mut blocks: Vec<(FileTag, Binfo, Src)> = Vec::new();
        // NILFS_ST_GC: the GC inodes, each under its own checkpoint number
        // (`nilfs_segctor_end_finfo` uses `i_cno` for GC inodes).
        for (n, b) in gc.map_or(&[][..], |g| g.moved.blocks()).iter().enumerate() {
            let tag = FileTag {
                ino: b.ino,
                cno: b.cno,
            };
            let binfo = match b.offset {
                Some(off) => Binfo::DataV {
                    vblocknr: b.vblocknr,
                    blkoff: FileBlk(off),
                },
                None => Binfo::NodeV {
                    vblocknr: b.vblocknr,
                },
            };
            blocks.push((tag, binfo, Src::Gc(n)));
        }
        for &i in order {
            let tag = FileTag { ino: i, cno };
            let f = self.files.get_mut(&i).expect("loaded");
            let keys: Vec<u64> = f.dirty.keys().copied().collect();
            for key in keys {
                let v = map_lookup_cached(&mut f.bmap, key)?;
                blocks.push((
                    tag,
                    Binfo::DataV {
                        vblocknr: VBlockNr(v),
                        blkoff: FileBlk(key),
                    },
                    Src::Data(i, key),
                ));
            }
            for dn in f.bmap.dirty_nodes() {
                let (_, _, ptr) = f.bmap.node_info(dn.id).expect("dirty node exists");
                blocks.push((
                    tag,
                    Binfo::NodeV {
                        vblocknr: VBlockNr(ptr),
                    },
                    Src::Node(i, dn.id),
                ));
            }
        }
        let cp_keys = self.cpfile.mdt.dirty_blocks();
        let su_keys = self.sufile.mdt.dirty_blocks();
        let meta: [(Ino, Cno, &mut MetaMap, Vec<u64>); 3] = [
            (ino::IFILE, cno, &mut self.if_map, if_keys.to_vec()),
            (ino::CPFILE, Cno(0), &mut self.cp_map, cp_keys),
            (ino::SUFILE, Cno(0), &mut self.su_map, su_keys),
        ];
        for (i, fcno, map, keys) in meta {
            let tag = FileTag { ino: i, cno: fcno };
            for key in keys {
                let v = map_lookup_cached(&mut map.bmap, key)?;
                blocks.push((
                    tag,
                    Binfo::DataV {
                        vblocknr: VBlockNr(v),
                        blkoff: FileBlk(key),
                    },
                    Src::Data(i, key),
                ));
            }
            for dn in map.bmap.dirty_nodes() {
                let (_, _, ptr) = map.bmap.node_info(dn.id).expect("dirty node exists");
                blocks.push((
                    tag,
                    Binfo::NodeV {
                        vblocknr: VBlockNr(ptr),
                    },
                    Src::Node(i, dn.id),
                ));
            }
        }
        let tag = FileTag {
            ino: ino::DAT,
            cno: Cno(0),
        };
        for &key in dat_keys {
            blocks.push((
                tag,
                Binfo::DataDat {
                    blkoff: FileBlk(key),
                },
                Src::Data(ino::DAT, key),
            ));
        }
        for dn in self.dat_map.bmap.dirty_nodes() {
            blocks.push((
                tag,
                Binfo::NodeDat {
                    blkoff: FileBlk(dn.first_key),
                    level: dn.level,
                },
                Src::Node(ino::DAT, dn.id),
            ));
        }
        // Feed them, closing each file's record when the file changes.
        let mut prev: Option<FileTag> = None;
        for (tag, binfo, s) in blocks {
            if prev.is_some_and(|p| p != tag) {
                layout.end_file(prev.expect("checked"));
            }
            prev = Some(tag);
            srcs.push(s);
            if let Err(full) = layout.add_block(tag, binfo, srcs.len() as u64 - 1) {
                return Ok(Err(full));
            }
        }
        if let Some(p) = prev {
            layout.end_file(p);
        }
        Ok(layout.add_super_root())
    }

    /// Assign addresses, fill in the metadata, write the logs.
    fn finish_construction(&mut self, c: Construction) -> Result<Option<Cno>> {
        let Construction {
            cno,
            ctime,
            order,
            plans,
            cursor,
            srcs,
            gc,
        } = c;
        let order = &order[..];
        let gc_blocks = gc.as_ref().map_or(&[][..], |g| g.moved.blocks());
        let gc_tags: BTreeSet<(Ino, Cno)> = gc_blocks.iter().map(|b| (b.ino, b.cno)).collect();
        let bs = self.bs;
        // Where every block goes.
        let mut pbn_of: Vec<BlockNr> = vec![BlockNr(0); srcs.len()];
        for p in &plans {
            for &(tag, b) in &p.payload {
                pbn_of[tag as usize] = b;
            }
        }
        // DAT entries of virtual blocks; the DAT's own blocks directly.
        for (t, s) in srcs.iter().enumerate() {
            let pbn = pbn_of[t];
            match *s {
                Src::Data(i, key) if i == ino::DAT => {
                    let mut src = PNodes { dev: self.dev, bs };
                    self.dat_map.bmap.update_ptr(key, pbn.0, &mut src)?;
                }
                Src::Node(i, id) if i == ino::DAT => {
                    self.dat_map.bmap.assign(id, pbn.0)?;
                }
                Src::Data(i, key) => {
                    let v = map_lookup_cached(self.bmap_of_mut(i), key)?;
                    self.dat.start(VBlockNr(v), cno, pbn)?;
                }
                Src::Node(i, id) => {
                    let (_, _, v) = self.bmap_of(i).node_info(id).expect("dirty node exists");
                    self.dat.start(VBlockNr(v), cno, pbn)?;
                }
                // nilfs_btree_assign_gc -> nilfs_dat_move.
                Src::Gc(n) => self.dat.move_block(gc_blocks[n].vblocknr, pbn)?,
            }
        }
        self.dat_map.raw.bmap = self.dat_map.bmap.root_bmap()?;
        // Segment usage and the checkpoint.
        let nblk_inc: u64 = plans.iter().map(|p| u64::from(p.header.nblocks)).sum();
        for p in &plans {
            self.sufile
                .set_segment_usage(p.segnum, p.live_blocks as u32, ctime)?;
        }
        self.if_map.raw.bmap = self.if_map.bmap.root_bmap()?;
        self.cpfile.finalize_checkpoint(
            cno,
            &CheckpointFinal {
                inodes_count: self.inodes_count,
                blocks_count: self.blocks_count,
                nblk_inc,
                create: ctime,
                // nilfs_segctor_do_construct ->
                // nilfs_cpfile_finalize_checkpoint(.., !HAVE_DELTA).
                minor: !(self.have_delta || plans.iter().any(|p| has_delta(p, &gc_tags))),
                ifile_inode: self.if_map.raw.clone(),
            },
        )?;
        // Contents, now final.
        let mut payload: BTreeMap<u64, Vec<u8>> = BTreeMap::new();
        for (t, s) in srcs.iter().enumerate() {
            let data = match *s {
                Src::Data(i, key) => self.data_block(i, key)?,
                Src::Node(i, id) => self.bmap_of(i).encode_node(id)?,
                Src::Gc(n) => gc_blocks[n].data.clone(),
            };
            payload.insert(t as u64, data);
        }
        let isz = self.sb.inode_size;
        let sr = SuperRoot {
            sum: 0,
            bytes: super_root_bytes(isz),
            flags: 0,
            // nilfs_segctor_fill_in_super_root: a GC construction keeps the
            // last non-GC time.
            nongc_ctime: if gc.is_some() {
                self.nongc_ctime
            } else {
                ctime
            },
            dat: self.dat_map.raw.clone(),
            cpfile: self.cp_map.raw.clone(),
            sufile: self.su_map.raw.clone(),
        }
        .encode(bs, isz);
        for p in &plans {
            let mine: BTreeMap<u64, Vec<u8>> = p
                .payload
                .iter()
                .filter_map(|(t, _)| payload.remove(t).map(|d| (*t, d)))
                .collect();
            let log = assemble(
                p,
                &mine,
                p.super_root.map(|_| &sr[..]),
                bs,
                self.sb.crc_seed,
            )?;
            write(self.dev, p, &log, bs)?;
        }
        self.dev.flush()?;
        // The construction is on disk: clean everything, move the cursor.
        let last = plans.last().expect("a construction writes a log");
        self.cursor = cursor;
        // nilfs_segctor_complete_write with a super root: HAVE_DELTA is
        // cleared and nilfs_set_last_segment moves the cursor; at the end of
        // nilfs_segctor_construct a "discontinued" file system commits one
        // super block copy.
        self.have_delta = false;
        if gc.is_none() {
            self.nongc_ctime = ctime;
        }
        let free = self.free_blocks()?;
        self.sbw
            .set_log_cursor(last.start, last.header.seq, cno, free);
        let w = self.sbw.after_super_root_log(self.now);
        self.write_sb(w)?;
        for i in order {
            let f = self.files.get_mut(i).expect("loaded");
            f.dirty.clear();
            f.inode_dirty = false;
            f.inode_sync = false;
            f.pages_dirty = false;
            f.bmap.mark_clean()?;
            if let Some(d) = &mut f.dir {
                d.mark_clean();
            }
        }
        for m in [
            &mut self.if_map,
            &mut self.cp_map,
            &mut self.su_map,
            &mut self.dat_map,
        ] {
            m.bmap.mark_clean()?;
        }
        self.ifile.palloc.mdt.mark_clean();
        self.cpfile.mdt.mark_clean();
        self.sufile.mdt.mark_clean();
        self.dat.palloc.mdt.mark_clean();
        self.cpfile.set_next_cno(Cno(cno.0 + 1));
        Ok(Some(cno))
    }

    fn bmap_of_mut(&mut self, i: Ino) -> &mut Bmap {
        match i {
            ino::IFILE => &mut self.if_map.bmap,
            ino::CPFILE => &mut self.cp_map.bmap,
            ino::SUFILE => &mut self.su_map.bmap,
            ino::DAT => &mut self.dat_map.bmap,
            _ => &mut self.files.get_mut(&i).expect("loaded").bmap,
        }
    }

    fn bmap_of(&self, i: Ino) -> &Bmap {
        match i {
            ino::IFILE => &self.if_map.bmap,
            ino::CPFILE => &self.cp_map.bmap,
            ino::SUFILE => &self.su_map.bmap,
            ino::DAT => &self.dat_map.bmap,
            _ => &self.files[&i].bmap,
        }
    }

    /// The final content of a data block being written.
    fn data_block(&self, i: Ino, key: u64) -> Result<Vec<u8>> {
        let from_mdt = |m: &Mdt<'_>| -> Result<Vec<u8>> {
            m.read(key)?
                .ok_or_else(|| Error::Invalid(format!("dirty block {key} of inode {i} vanished")))
        };
        match i {
            ino::IFILE => from_mdt(&self.ifile.palloc.mdt),
            ino::CPFILE => from_mdt(&self.cpfile.mdt),
            ino::SUFILE => from_mdt(&self.sufile.mdt),
            ino::DAT => from_mdt(&self.dat.palloc.mdt),
            _ => Ok(self.files[&i].dirty[&key].clone()),
        }
    }

    /// `nilfs_put_super`: write what is dirty, then mark the filesystem
    /// clean in the super blocks with the final log cursor.
    pub fn unmount(mut self) -> Result<()> {
        if self.read_only {
            return Ok(());
        }
        // sync_filesystem -> nilfs_sync_fs, then nilfs_put_super ->
        // nilfs_cleanup_super (the final construction found nothing).
        self.sync()?;
        self.cleanup_super()
    }
}

/// The pointer a prepared mapping holds for `key` (every node on the path
/// is in memory after preparation).
fn map_lookup_cached(map: &mut Bmap, key: u64) -> Result<u64> {
    map.lookup_in_memory(key)?
        .ok_or_else(|| Error::Invalid(format!("prepared block {key} is not mapped")))
}
