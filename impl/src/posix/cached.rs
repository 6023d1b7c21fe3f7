//! The cached read path: the kernel's read side of a mounted NILFS2, on a
//! [`SimDevice`] so that its simulated clock measures every I/O.
//!
//! [`CheckpointView`] reads uncached, one block at a time, and is the
//! reference for *what* a file contains. [`CachedFs`] reads the way the kernel
//! does, which is what seed 000's `dd` figures are about:
//!
//! - **Page cache and read-ahead** (mm/filemap.c `do_generic_file_read`,
//!   mm/readahead.c `ondemand_readahead` as of Linux 2.6.35, the kernel of
//!   seed 000). A read of `req` bytes walks its pages; a page not cached
//!   starts a synchronous read-ahead, a page carrying the read-ahead mark an
//!   asynchronous one; then the reader waits for the page and copies it out.
//!   The window starts at `get_init_ra_size` and grows with
//!   `get_next_ra_size` up to [`ReadParams::ra_max_bytes`] (default 128 KiB,
//!   `VM_MAX_READAHEAD`); the mark sits on the first page of the
//!   asynchronous part, so for a sequential reader one window is always in
//!   flight ahead of the one being consumed. We model the page cache in
//!   filesystem blocks (a 4 KiB-block filesystem: one page = one block; the
//!   window is converted from bytes). Pages are dropped once copied out: a
//!   `dd` never reads them again, and memory stays bounded.
//! - **`readpages`** = fs/mpage.c `mpage_readpages` with `nilfs_get_block`
//!   (fs/nilfs2/inode.c): for each new page not covered by the last mapping,
//!   `nilfs_bmap_lookup_contig(key, maxblocks = pages left in the batch)`,
//!   which is [`BtreeReader::lookup_contig`] with the seed-000 sibling
//!   read-ahead when [`MountOptions::readahead`] is on, every pointer
//!   translated through the DAT; physically contiguous pages share one bio
//!   (at most [`MAX_BIO_PAGES`]); a hole page is zero-filled without I/O.
//! - **One B-tree node cache per inode** (`i_btnode_cache`), keyed by
//!   (checkpoint, inode number): a snapshot's inode is a different inode.
//! - **The DAT** (fs/nilfs2/dat.c, mdt.c): its own B-tree nodes in a node
//!   cache with identity location (the DAT maps physical pointers); its file
//!   blocks in a block cache keyed by file block (the mdt's page cache),
//!   read by `nilfs_mdt_read_block`: submit the wanted block, then up to
//!   [`NILFS_MDT_MAX_RA_BLOCKS`] following blocks as read-ahead (trylock,
//!   busy skipped, a hole or error ends it, stop once the wanted block has
//!   arrived), then wait.
//!
//! Left out: the ifile and the directories are read uncached through
//! [`CheckpointView`] (open(2) and path lookup are not what `dd` measures);
//! no eviction of node or DAT buffers (a 512 MB file needs a few MB of them);
//! no write path, so no dirty pages; the palloc "previous entry block" cache
//! is implicit (a cached DAT block costs no I/O either way).

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::rc::Rc;

use crate::bmap::readahead::{BtreeReader, NodeCheck, ReadAhead, ReaderConfig};
use crate::cache::{BtnodeCache, BufFlag, BufRef, BufferCache, BufferRules};
use crate::device::sim::MAX_BIO_PAGES;
use crate::device::{Bio, BioHandle, SimDevice};
use crate::format::dat::DatEntry;
use crate::format::geometry::SegGeometry;
use crate::format::inode::Inode;
use crate::format::palloc::PallocGeometry;
use crate::format::{BlockNr, Cno, Ino, INODE_BMAP_SIZE};
use crate::posix::CheckpointView;
use crate::the_nilfs::Nilfs;
use crate::{Error, Result};

/// `NILFS_MDT_MAX_RA_BLOCKS` (fs/nilfs2/mdt.h): blocks read ahead after a
/// metadata-file block.
pub const NILFS_MDT_MAX_RA_BLOCKS: u32 = 15;

/// `VM_MAX_READAHEAD` (include/linux/mm.h): the default maximum read-ahead
/// window, 128 KiB.
pub const VM_MAX_READAHEAD_BYTES: u64 = 128 * 1024;

/// Mount options of the read path.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MountOptions {
    /// B-tree sibling read-ahead (seed 000): `On` is the kernel after the
    /// seed, `Off` before it.
    pub readahead: ReadAhead,
}

/// Model parameters of the read path (not mount options: properties of the
/// kernel and the CPU).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReadParams {
    /// Maximum read-ahead window, bytes (`ra_pages`; 128 KiB default).
    pub ra_max_bytes: u64,
    /// Blocks the mdt reads ahead after a DAT block (15; 0 disables).
    pub mdt_ra_blocks: u32,
    /// CPU time to copy one block to the user (`copy_to_user` and page
    /// cache lookup), ns. 1 µs per 4 KiB is about 4 GB/s, a 2010 desktop.
    pub copy_ns_per_block: u64,
    /// CPU time charged per B-tree read-ahead submission, ns
    /// ([`ReaderConfig::ra_submit_cpu_ns`]).
    pub ra_submit_cpu_ns: u64,
}

impl Default for ReadParams {
    fn default() -> Self {
        ReadParams {
            ra_max_bytes: VM_MAX_READAHEAD_BYTES,
            mdt_ra_blocks: NILFS_MDT_MAX_RA_BLOCKS,
            copy_ns_per_block: 1_000,
            ra_submit_cpu_ns: 500,
        }
    }
}

/// What the read path submitted, by kind. Device bios not counted here
/// (B-tree node reads, plain or read-ahead) are read from the device's log:
/// every bio is either a data bio, a DAT block bio, or a node bio.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CachedStats {
    /// Bios of file data (`mpage_readpages`).
    pub data_bios: u64,
    /// Data blocks read by them.
    pub data_blocks: u64,
    /// Hole blocks zero-filled.
    pub hole_blocks: u64,
    /// `lookup_contig` calls (`nilfs_get_block`).
    pub lookups: u64,
    /// DAT block bios (one block each), wanted or read ahead.
    pub dat_bios: u64,
    /// Of which read-ahead.
    pub dat_ra_bios: u64,
    /// Read-ahead windows submitted (sync and async).
    pub windows: u64,
}

/// What `nilfs_mdt_submit_block` did.
enum MdtSubmit {
    Issued(BufRef),
    Exists(BufRef),
    Busy,
}

/// The DAT, read through caches: its B-tree nodes (identity location) and
/// its entry blocks (keyed by file block), with the mdt's read-ahead.
struct DatReader {
    dev: SimDevice,
    bmap: [u64; INODE_BMAP_SIZE],
    nodes: BtnodeCache,
    blocks: BufferCache,
    geo: PallocGeometry,
    /// Where DAT entries may point.
    area: SegGeometry,
    ra_blocks: u32,
    bios: Cell<u64>,
    ra_bios: Cell<u64>,
}

impl DatReader {
    /// The DAT block `blkoff`'s physical block, by a plain B-tree lookup
    /// through the DAT's node cache (`nilfs_bmap_lookup`, no read-ahead).
    fn lookup_blk(&self, blkoff: u64) -> Result<Option<BlockNr>> {
        let identity = |p: u64| -> Result<BlockNr> { Ok(BlockNr(p)) };
        let cfg = ReaderConfig {
            readahead: ReadAhead::Off,
            check: NodeCheck::OnFirstUse,
            ra_submit_cpu_ns: 0,
        };
        let reader = BtreeReader::new(&self.nodes, &identity, cfg);
        Ok(reader.lookup(&self.bmap, blkoff)?.map(BlockNr))
    }

    /// `nilfs_mdt_submit_block`: look up or start reading DAT block `blkoff`.
    /// A hole is an error (the kernel's -ENOENT).
    fn submit(&self, blkoff: u64, rahead: bool) -> Result<MdtSubmit> {
        let bh = self.blocks.get(blkoff);
        if bh.test(BufFlag::Uptodate) {
            return Ok(MdtSubmit::Exists(bh));
        }
        if rahead {
            if !bh.trylock() {
                return Ok(MdtSubmit::Busy);
            }
        } else {
            bh.lock();
        }
        if bh.test(BufFlag::Uptodate) {
            bh.unlock();
            return Ok(MdtSubmit::Exists(bh));
        }
        let pbn = match self.lookup_blk(blkoff) {
            Ok(Some(p)) => p,
            Ok(None) => {
                bh.unlock();
                return Err(Error::corrupt("DAT", format!("block {blkoff} is a hole")));
            }
            Err(e) => {
                bh.unlock();
                return Err(e);
            }
        };
        let mut io_ref = Some(bh.clone());
        let mut bio = Bio::read(pbn, self.blocks.block_size(), 1).on_page_done(move |done| {
            if let Some(b) = io_ref.take() {
                b.end_read(done.result.is_ok().then_some(done.data));
            }
        });
        if rahead {
            bio = bio.rahead();
        }
        match self.dev.submit(bio) {
            Ok(_) => {
                bh.io_started();
                self.bios.set(self.bios.get() + 1);
                if rahead {
                    self.ra_bios.set(self.ra_bios.get() + 1);
                }
                Ok(MdtSubmit::Issued(bh))
            }
            Err(e) => {
                bh.unlock();
                Err(e)
            }
        }
    }

    /// `nilfs_mdt_read_block(readahead = 1)`: the up-to-date buffer of DAT
    /// block `blkoff`.
    fn read_block(&self, blkoff: u64) -> Result<BufRef> {
        let bh = match self.submit(blkoff, false)? {
            MdtSubmit::Exists(bh) => return Ok(bh),
            MdtSubmit::Issued(bh) => bh,
            MdtSubmit::Busy => unreachable!("a normal read never reports busy"),
        };
        let mut done_early = false;
        for i in 1..=u64::from(self.ra_blocks) {
            match self.submit(blkoff + i, true) {
                Ok(_) => {}
                Err(_) => break, // a hole or a failed lookup ends read-ahead
            }
            if !bh.is_locked() {
                done_early = true;
                break;
            }
        }
        bh.finish_read(done_early, blkoff, "DAT block")?;
        Ok(bh)
    }

    /// `nilfs_dat_translate`: the disk block of virtual block `v`.
    fn translate(&self, v: u64) -> Result<BlockNr> {
        let blk = self
            .geo
            .entry_blkoff(v)
            .ok_or_else(|| Error::OutOfRange(format!("virtual block number {v}")))?;
        let off = self.geo.entry_offset_in_block(v);
        let entry = self
            .read_block(blk)?
            .read_data(|d| DatEntry::decode(d.get(off..).unwrap_or(&[])))?;
        self.area.dat_block(v, entry.blocknr)
    }
}

/// Read-ahead state of one open file (`struct file_ra_state`), in blocks.
#[derive(Clone, Copy, Debug, Default)]
struct RaState {
    start: u64,
    size: u64,
    async_size: u64,
}

/// A cached page: in flight (or done) in a bio, or a zero-filled hole.
enum Page {
    Io(Rc<BioHandle>, usize),
    Hole,
}

/// The per-read page cache: pages by block index and the read-ahead mark.
#[derive(Default)]
struct PageCache {
    pages: BTreeMap<u64, Page>,
    mark: Option<u64>,
    ra: RaState,
}

/// `get_init_ra_size` (mm/readahead.c): the first window for a read of
/// `size` blocks.
fn init_ra_size(size: u64, max: u64) -> u64 {
    let newsize = size.max(1).next_power_of_two();
    let s = if newsize <= max / 32 {
        newsize * 4
    } else if newsize <= max / 4 {
        newsize * 2
    } else {
        max
    };
    s.min(max)
}

/// `get_next_ra_size`: ramp up the window (x4 while small, then x2).
fn next_ra_size(cur: u64, max: u64) -> u64 {
    let s = if cur < max / 16 { 4 * cur } else { 2 * cur };
    s.min(max)
}

/// A mounted filesystem's read path over a simulated device.
pub struct CachedFs {
    dev: SimDevice,
    block_size: u32,
    opts: MountOptions,
    params: ReadParams,
    dat: DatReader,
    btnode_caches: RefCell<BTreeMap<(u64, u64), BtnodeCache>>,
    stats: Cell<CachedStats>,
}

impl CachedFs {
    /// Mount the read path over `dev`, with the DAT of `nilfs`'s super root.
    /// `nilfs` may be opened over `dev` itself (its uncached reads then also
    /// run on the simulated clock) or over the same image elsewhere.
    pub fn new(dev: SimDevice, nilfs: &Nilfs<'_>, opts: MountOptions) -> Result<Self> {
        Self::with_params(dev, nilfs, opts, ReadParams::default())
    }

    /// [`Self::new`] with explicit model parameters.
    pub fn with_params(
        dev: SimDevice,
        nilfs: &Nilfs<'_>,
        opts: MountOptions,
        params: ReadParams,
    ) -> Result<Self> {
        let bs = nilfs.block_size();
        let geo = PallocGeometry::new(bs, u32::from(nilfs.sb.dat_entry_size))?;
        let dat = DatReader {
            dev: dev.clone(),
            bmap: nilfs.super_root.dat.bmap,
            nodes: BtnodeCache::new(dev.clone(), bs, BufferRules::default())?,
            blocks: BufferCache::new(bs, Some(dev.clone()), BufferRules::default())?,
            geo,
            area: nilfs.geo,
            ra_blocks: params.mdt_ra_blocks,
            bios: Cell::new(0),
            ra_bios: Cell::new(0),
        };
        Ok(CachedFs {
            dev,
            block_size: bs,
            opts,
            params,
            dat,
            btnode_caches: RefCell::new(BTreeMap::new()),
            stats: Cell::new(CachedStats::default()),
        })
    }

    /// The device.
    pub fn device(&self) -> &SimDevice {
        &self.dev
    }

    /// The mount options.
    pub fn options(&self) -> MountOptions {
        self.opts
    }

    /// Counters so far.
    pub fn stats(&self) -> CachedStats {
        let mut s = self.stats.get();
        s.dat_bios = self.dat.bios.get();
        s.dat_ra_bios = self.dat.ra_bios.get();
        s
    }

    fn bump(&self, f: impl FnOnce(&mut CachedStats)) {
        let mut s = self.stats.get();
        f(&mut s);
        self.stats.set(s);
    }

    /// The node cache of inode `ino` of checkpoint `cno`, created empty.
    fn btnode_cache(&self, cno: Cno, ino: Ino) -> Result<BtnodeCache> {
        let mut map = self.btnode_caches.borrow_mut();
        if let Some(c) = map.get(&(cno.0, ino.0)) {
            return Ok(c.clone());
        }
        let c = BtnodeCache::new(self.dev.clone(), self.block_size, BufferRules::default())?;
        map.insert((cno.0, ino.0), c.clone());
        Ok(c)
    }

    /// The whole content of inode `ino` of `view`'s checkpoint, read with
    /// 1 MiB requests (`dd bs=1M`).
    pub fn read_file(&self, view: &CheckpointView<'_, '_>, ino: Ino) -> Result<Vec<u8>> {
        let inode = view.inode(ino)?;
        let mut out = Vec::with_capacity(inode.size.min(1 << 30) as usize);
        self.read_inode_with(view.checkpoint().cno, ino, &inode, 1 << 20, &mut |d| {
            out.extend_from_slice(d)
        })?;
        Ok(out)
    }

    /// Read inode `ino` (of checkpoint `cno`) from its start to its size
    /// with sequential `req_bytes` reads, as `read(2)` in a loop would, and
    /// hand the bytes to `sink` in order. Every I/O goes through the device.
    pub fn read_inode_with(
        &self,
        cno: Cno,
        ino: Ino,
        inode: &Inode,
        req_bytes: u64,
        sink: &mut dyn FnMut(&[u8]),
    ) -> Result<()> {
        let bs = u64::from(self.block_size);
        let size = inode.size;
        if size == 0 {
            return Ok(());
        }
        let nblocks = size.div_ceil(bs);
        let ra_max = (self.params.ra_max_bytes / bs).max(1);
        let req_bytes = req_bytes.max(1);
        let btnc = self.btnode_cache(cno, ino)?;
        let locate = |p: u64| self.dat.translate(p);
        let translate = |p: u64| self.dat.translate(p).map(|b| b.0);
        let cfg = ReaderConfig {
            readahead: self.opts.readahead,
            check: NodeCheck::OnFirstUse,
            ra_submit_cpu_ns: self.params.ra_submit_cpu_ns,
        };
        let reader = BtreeReader::new(&btnc, &locate, cfg);
        let file = FileCtx {
            reader: &reader,
            bmap: &inode.bmap,
            translate: &translate,
            nblocks,
            ra_max,
        };
        let mut pc = PageCache::default();
        let mut pos = 0u64;
        while pos < size {
            let end = size.min(pos.saturating_add(req_bytes));
            let last = (end - 1) / bs;
            let mut idx = pos / bs;
            while idx <= last {
                // do_generic_file_read: a missing page starts a synchronous
                // read-ahead, a marked page an asynchronous one.
                let wanted = last - idx + 1;
                if !pc.pages.contains_key(&idx) {
                    self.ondemand(&file, &mut pc, idx, wanted, false)?;
                } else if pc.mark == Some(idx) {
                    pc.mark = None;
                    self.ondemand(&file, &mut pc, idx, wanted, true)?;
                    // page_cache_async_readahead: when the marked page is
                    // already up to date nobody will sleep on it, so the
                    // new window's I/O is kicked off explicitly
                    // (blk_run_backing_dev); a no-op without a request queue.
                    let uptodate = match pc.pages.get(&idx) {
                        Some(Page::Io(h, k)) => h.is_page_done(*k),
                        Some(Page::Hole) | None => true,
                    };
                    if uptodate {
                        self.dev.unplug();
                    }
                }
                let page = pc
                    .pages
                    .remove(&idx)
                    .ok_or_else(|| Error::Invalid(format!("page {idx} not read")))?;
                let data = match page {
                    Page::Hole => vec![0u8; bs as usize],
                    Page::Io(h, k) => {
                        h.wait_page(k)?;
                        h.take_data(k).ok_or_else(|| Error::Io {
                            blocknr: idx,
                            detail: "page without data".into(),
                        })?
                    }
                };
                self.dev.advance_by(self.params.copy_ns_per_block);
                let from = if idx == pos / bs {
                    (pos % bs) as usize
                } else {
                    0
                };
                let to = if idx == last {
                    (end - idx * bs) as usize
                } else {
                    bs as usize
                };
                sink(&data[from..to]);
                idx += 1;
            }
            pos = end;
        }
        Ok(())
    }

    /// `ondemand_readahead` for a sequential reader at block `offset` that
    /// wants `req` blocks; submits the window.
    fn ondemand(
        &self,
        f: &FileCtx<'_>,
        pc: &mut PageCache,
        offset: u64,
        req: u64,
        hit_marker: bool,
    ) -> Result<()> {
        let max = f.ra_max;
        let ra = &mut pc.ra;
        if offset != 0
            && (offset == ra.start + ra.size - ra.async_size || offset == ra.start + ra.size)
        {
            // The expected offset: push the window forward and ramp it up.
            ra.start += ra.size;
            ra.size = next_ra_size(ra.size, max);
            ra.async_size = ra.size;
        } else if offset != 0 && hit_marker {
            // A marked page without matching state: restart from here.
            ra.start = offset;
            ra.size = next_ra_size(req.min(max), max);
            ra.async_size = ra.size;
        } else {
            // initial_readahead (offset 0, or an unexpected position).
            ra.start = offset;
            ra.size = init_ra_size(req, max);
            ra.async_size = if ra.size > req {
                ra.size - req
            } else {
                ra.size
            };
        }
        // A read that would hit its own marker at once: merge the next window.
        if offset == ra.start && ra.size == ra.async_size {
            ra.async_size = next_ra_size(ra.size, max);
            ra.size += ra.async_size;
        }
        let RaState {
            start,
            size,
            async_size,
        } = *ra;
        self.bump(|s| s.windows += 1);
        self.submit_window(f, pc, start, size, async_size)
    }

    /// `__do_page_cache_readahead` + `mpage_readpages`: read the blocks of
    /// `[start, start+size)` not yet cached, mark the first asynchronous one.
    fn submit_window(
        &self,
        f: &FileCtx<'_>,
        pc: &mut PageCache,
        start: u64,
        size: u64,
        async_size: u64,
    ) -> Result<()> {
        let end = (start + size).min(f.nblocks);
        let new: Vec<u64> = (start..end).filter(|i| !pc.pages.contains_key(i)).collect();
        let mark_at = start + size - async_size;
        if async_size > 0 && new.contains(&mark_at) {
            pc.mark = Some(mark_at);
        }
        // The current mapping: (first key, first physical block or None for
        // a hole, length).
        let mut map: Option<(u64, Option<u64>, u64)> = None;
        // The bio being built: (first physical block, page indexes).
        let mut bio: Option<(u64, Vec<u64>)> = None;
        for (n, &idx) in new.iter().enumerate() {
            let covered = matches!(map, Some((k, _, len)) if idx >= k && idx < k + len);
            if !covered {
                let left = (new.len() - n) as u64;
                let maxblocks = u32::try_from(left).unwrap_or(u32::MAX);
                self.bump(|s| s.lookups += 1);
                map = Some(
                    match f
                        .reader
                        .lookup_contig(f.bmap, idx, maxblocks, Some(f.translate))?
                    {
                        Some((p, cnt)) => (idx, Some(p), u64::from(cnt)),
                        None => (idx, None, 1),
                    },
                );
            }
            let (k, p, _) = map.expect("set above");
            let Some(p) = p else {
                pc.pages.insert(idx, Page::Hole);
                self.bump(|s| s.hole_blocks += 1);
                continue;
            };
            let pblock = p + (idx - k);
            let continues = matches!(&bio, Some((b0, v)) if b0 + v.len() as u64 == pblock && v.len() < MAX_BIO_PAGES);
            if !continues {
                if let Some((b0, v)) = bio.take() {
                    self.submit_data(pc, b0, v)?;
                }
                bio = Some((pblock, Vec::new()));
            }
            bio.as_mut().expect("set above").1.push(idx);
        }
        if let Some((b0, v)) = bio.take() {
            self.submit_data(pc, b0, v)?;
        }
        Ok(())
    }

    /// Submit one data bio of `idxs.len()` blocks from physical `first`.
    fn submit_data(&self, pc: &mut PageCache, first: u64, idxs: Vec<u64>) -> Result<()> {
        let h = Rc::new(
            self.dev
                .submit(Bio::read(BlockNr(first), self.block_size, idxs.len()))?,
        );
        self.bump(|s| {
            s.data_bios += 1;
            s.data_blocks += idxs.len() as u64;
        });
        for (k, idx) in idxs.into_iter().enumerate() {
            pc.pages.insert(idx, Page::Io(h.clone(), k));
        }
        Ok(())
    }
}

/// What one file's read needs besides the page cache.
struct FileCtx<'a> {
    reader: &'a BtreeReader<'a>,
    bmap: &'a [u64; INODE_BMAP_SIZE],
    translate: &'a dyn Fn(u64) -> Result<u64>,
    nblocks: u64,
    ra_max: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn window_sizes_follow_mm_readahead() {
        // 128 KiB of 4 KiB pages.
        assert_eq!(init_ra_size(256, 32), 32);
        assert_eq!(init_ra_size(1, 32), 4);
        assert_eq!(init_ra_size(4, 32), 8);
        assert_eq!(next_ra_size(4, 32), 8);
        assert_eq!(next_ra_size(16, 32), 32);
        assert_eq!(next_ra_size(32, 32), 32);
    }
}
