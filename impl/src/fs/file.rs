//! File data and attributes (file.c and inode.c): write, read, stat,
//! truncate, and the two syncs of one file — `fsync` (a full construction)
//! and `fdatasync` (a data-only log when only data changed).

use super::Fs;
use crate::bmap::DiskNodes;
use crate::format::inode::{Inode, S_IFDIR, S_IFMT, S_IFREG};
use crate::format::{Ino, VBlockNr};
use crate::{Errno, Error, Result};

/// The kernel's `PAGE_SIZE` (x86-64): the unit a buffered write goes in.
const PAGE_SIZE: u64 = 4096;

impl<'a> Fs<'a> {
    /// Write `data` at `offset` of regular file `i` (beyond EOF leaves a
    /// hole); returns the bytes written. As `generic_perform_write`, the
    /// write goes page by page: a page whose blocks cannot be read (an I/O
    /// error while `block_write_begin` reads the part of it not
    /// overwritten) ends the write there, and the bytes before it are the
    /// answer — the error only if it was the first page.
    pub fn write(&mut self, i: Ino, offset: u64, data: &[u8]) -> Result<u64> {
        if self.file(i)?.raw.mode & S_IFMT != S_IFREG {
            return Err(Error::errno(Errno::EISDIR, format!("inode {i}")));
        }
        // generic_write_checks: a zero-length write changes nothing.
        if data.is_empty() {
            return Ok(0);
        }
        // __generic_file_write_iter calls file_update_time before any page
        // is written, so the times change (I_DIRTY_SYNC: the inode for the
        // ifile, not its pages) even when nilfs_write_begin's vacancy check
        // then refuses the first page with ENOSPC.
        self.begin(false)?;
        let now = self.now;
        let nsec = self.now_nsec;
        let f = self.inodes.loaded_mut(i);
        if (f.raw.mtime, f.raw.mtime_nsec, f.raw.ctime, f.raw.ctime_nsec) != (now, nsec, now, nsec)
        {
            f.raw.mtime = now;
            f.raw.mtime_nsec = nsec;
            f.raw.ctime = now;
            f.raw.ctime_nsec = nsec;
            f.inode_dirty = true;
            self.inodes.touch(i);
        }
        self.begin(true)?;
        let end = offset
            .checked_add(data.len() as u64)
            .ok_or_else(|| Error::errno(Errno::EFBIG, "write"))?;
        let bs = u64::from(self.bs);
        let mut pos = offset;
        while pos < end {
            let page_end = ((pos / PAGE_SIZE + 1) * PAGE_SIZE).min(end);
            if pos.is_multiple_of(bs) && page_end.is_multiple_of(bs) {
                // Whole blocks only: nothing to read first, so nothing can
                // fail; each is copied once, straight into the dirty map.
                let dirty = &mut self.inodes.loaded_mut(i).dirty;
                for key in pos / bs..page_end / bs {
                    let at = (key * bs - offset) as usize;
                    dirty.insert(key, data[at..at + bs as usize].to_vec());
                }
                pos = page_end;
                continue;
            }
            match self.page_blocks(i, offset, data, pos, page_end) {
                Ok(blocks) => self.inodes.loaded_mut(i).dirty.extend(blocks),
                Err(e) if pos == offset => return Err(e),
                Err(_) => break,
            }
            pos = page_end;
        }
        let end = pos;
        let now = self.now;
        let nsec = self.now_nsec;
        let f = self.inodes.loaded_mut(i);
        if end > f.raw.size {
            // i_size_write + mark_inode_dirty: I_DIRTY_DATASYNC.
            f.raw.size = end;
            f.inode_sync = true;
        }
        f.raw.mtime = now;
        f.raw.mtime_nsec = nsec;
        f.raw.ctime = now;
        f.raw.ctime_nsec = nsec;
        f.inode_dirty = true;
        self.inodes.pages_dirtied(i); // nilfs_write_end -> nilfs_set_file_dirty
        self.inodes.touch(i);
        Ok(end - offset)
    }

    /// The blocks of `[from, to)` (within one page) of file `i` with the
    /// bytes of `data` (which starts at `offset`) copied in, each read
    /// first unless it is overwritten whole; nothing changes if a read
    /// fails.
    fn page_blocks(
        &mut self,
        i: Ino,
        offset: u64,
        data: &[u8],
        from: u64,
        to: u64,
    ) -> Result<Vec<(u64, Vec<u8>)>> {
        let bs = u64::from(self.bs);
        let mut out = Vec::new();
        for (key, within, n) in block_spans(from, to, bs) {
            let at = (key * bs + within as u64 - offset) as usize;
            let src = &data[at..at + n];
            let block = if within == 0 && n as u64 == bs {
                // Overwritten whole: copied once, never zeroed first.
                src.to_vec()
            } else {
                let mut block = self.read_file_block(i, key)?;
                block[within..within + n].copy_from_slice(src);
                block
            };
            out.push((key, block));
        }
        Ok(out)
    }

    /// The raw inode of `i` as it stands now (`stat`).
    pub fn stat(&mut self, i: Ino) -> Result<Inode> {
        Ok(self.file(i)?.raw.clone())
    }

    /// The access time `stat` shows, in nanoseconds since the epoch: the
    /// one a utimensat set while the inode stayed in memory, else the
    /// modification time (`nilfs_read_inode_common`: nilfs2 keeps no
    /// access time on disk).
    pub fn atime_ns(&mut self, i: Ino) -> Result<i64> {
        let f = self.file(i)?;
        Ok(f.atime_ns.unwrap_or_else(|| f.raw.mtime_ns()))
    }

    /// Up to `len` bytes of file `i` from `offset` (short at EOF; holes
    /// read as zeros), as they stand now.
    pub fn read(&mut self, i: Ino, offset: u64, len: u64) -> Result<Vec<u8>> {
        let size = self.file(i)?.raw.size;
        if self.inodes.loaded(i).raw.mode & S_IFMT == S_IFDIR {
            return Err(Error::errno(Errno::EISDIR, format!("inode {i}")));
        }
        let end = size.min(offset.saturating_add(len));
        let n = end.saturating_sub(offset);
        let too_long = || Error::errno(Errno::EFBIG, format!("a read of {n} bytes"));
        let mut out = Vec::new();
        out.try_reserve_exact(usize::try_from(n).map_err(|_| too_long())?)
            .map_err(|_| too_long())?;
        out.resize(n as usize, 0);
        self.read_into(i, offset, &mut out)?;
        Ok(out)
    }

    /// Read from `offset` into `buf`, as the kernel's read copies into a
    /// user buffer; returns how many bytes (short at EOF). Dirty blocks
    /// come from memory, whole clean blocks straight from the device into
    /// `buf`, holes as zeros. It is [`Fs::plan_read`] carried out at once.
    pub fn read_into(&mut self, i: Ino, offset: u64, buf: &mut [u8]) -> Result<usize> {
        let plan = self.plan_read(i, offset, buf.len() as u64)?;
        plan.read_into(self.dev, buf)
    }

    /// Up to `len` bytes of file `i` from `offset` as they stand now, as a
    /// [`ReadPlan`]: the bytes of dirty blocks copied, holes as zeros, and
    /// every other block named by its disk address, to be read later, by
    /// any thread, without this file system.
    pub fn plan_read(&mut self, i: Ino, offset: u64, len: u64) -> Result<ReadPlan> {
        self.plan_read_noting(i, offset, len, |_, _| {})
    }

    /// [`Fs::plan_read`], telling `clean` where each block of the range
    /// that is not dirty lies: its index in the file and its disk block
    /// (`None` for a hole). Until the file is written, truncated or
    /// removed, and while [`Fs::reclaims`] stands, those blocks keep what
    /// they hold now (a construction writes elsewhere; the cleaner copies
    /// a block before its segment is freed), so a caller may plan later
    /// reads of them without this file system ([`ReadPlan::of_clean`]).
    pub fn plan_read_noting(
        &mut self,
        i: Ino,
        offset: u64,
        len: u64,
        mut clean: impl FnMut(u64, Option<u64>),
    ) -> Result<ReadPlan> {
        let size = self.file(i)?.raw.size;
        if self.inodes.loaded(i).raw.mode & S_IFMT == S_IFDIR {
            return Err(Error::errno(Errno::EISDIR, format!("inode {i}")));
        }
        let (dev, bsz) = (self.dev, self.bs);
        let mut plan = ReadPlan::empty(bsz, size);
        for (key, within, n) in plan.spans(offset, len) {
            let f = self.inodes.loaded(i);
            if let Some(d) = f.dirty.get(&key) {
                plan.push(Piece::Bytes(d[within..within + n].to_vec()));
                continue;
            }
            let f = self.inodes.loaded_mut(i);
            let dat = self.dat.file_mut();
            let ptr = f
                .bmap
                .lookup(key, &mut DiskNodes::translated(dev, bsz, dat))?;
            let pbn = match ptr {
                None => None,
                Some(v) => Some(dat.translate(VBlockNr(v))?.0),
            };
            clean(key, pbn);
            plan.push(Piece::placed(pbn, within, n));
        }
        Ok(plan)
    }

    /// How many times segments were given back for reuse since the mount
    /// (each cleaning pass that frees segments counts one, counted before
    /// any is freed). A log writer writes only into segments the sufile
    /// calls clean and never over a block in place, and only the cleaner
    /// makes a segment that held blocks clean again; so a [`ReadPlan`]
    /// made while this count stood at `k` reads what its file held then,
    /// if the count still stands at `k` once the read is done.
    pub fn reclaims(&self) -> u64 {
        self.reclaims.now()
    }

    /// [`Fs::reclaims`] for other threads, readable without this file
    /// system: the count moves before the first segment is freed.
    pub fn reclaims_watch(&self) -> Reclaims {
        self.reclaims.clone()
    }

    /// How many constructions completed since the mount (the log writer's,
    /// an fsync's, the cleaner's). A construction is the only change that
    /// reaches inodes no operation named: it adds the blocks it maps to
    /// their `i_blocks` (`nilfs_inode_add_blocks`). So what [`Fs::stat`]
    /// answered for an inode still holds while this count stands and
    /// nothing changed that inode, its names or its directory.
    pub fn constructions(&self) -> u64 {
        self.constructions
    }

    /// A symlink's target as `page_get_link` reads it: the first page, cut
    /// at `i_size` and at `PAGE_SIZE - 1` bytes (`nd_terminate_link`), and
    /// at a NUL. Bounded whatever a damaged inode's `i_size` says.
    pub fn symlink_target(&mut self, i: Ino) -> Result<Vec<u8>> {
        let size = self.file(i)?.raw.size;
        let mut target = self.read(i, 0, size.min(crate::posix::LINK_PAGE_SIZE - 1))?;
        if let Some(nul) = target.iter().position(|&c| c == 0) {
            target.truncate(nul);
        }
        Ok(target)
    }

    /// `nilfs_setattr` for everything but the size (which is
    /// [`Fs::truncate`]): `setattr_copy` of what `attr` names, the ctime
    /// always (every caller passes ATTR_CTIME), then `mark_inode_dirty`
    /// even if nothing changed. `nilfs_transaction_begin(sb, &ti, 0)`: no
    /// vacancy check, so never ENOSPC; EROFS on a read-only mount.
    pub fn setattr(&mut self, i: Ino, attr: SetAttr) -> Result<()> {
        self.atomically(|fs| {
            fs.file(i)?;
            fs.begin(false)?;
            let now = fs.now;
            let nsec = fs.now_nsec;
            let f = fs.inodes.loaded_mut(i);
            if let Some(perm) = attr.perm {
                f.raw.mode = (f.raw.mode & S_IFMT) | (perm & 0o7777);
            }
            if let Some(uid) = attr.uid {
                f.raw.uid = uid;
            }
            if let Some(gid) = attr.gid {
                f.raw.gid = gid;
            }
            if let Some(t) = attr.mtime {
                f.raw.set_mtime_ns(t);
            }
            if let Some(t) = attr.atime {
                f.atime_ns = Some(t);
            }
            // nilfs_mark_inode_dirty: I_DIRTY, so NILFS_I_INODE_SYNC; the
            // pages stay clean (an fsync after it writes nothing).
            f.changed((now, nsec));
            fs.inodes.touch(i);
            Ok(())
        })
    }

    /// `nilfs_setattr` size change (`nilfs_truncate` and
    /// `block_truncate_page`): shrinking drops blocks past the end and
    /// zeroes the tail of the last one; growing leaves a hole.
    pub fn truncate(&mut self, i: Ino, size: u64) -> Result<()> {
        self.atomically(|fs| fs.truncate_now(i, size))
    }

    fn truncate_now(&mut self, i: Ino, size: u64) -> Result<()> {
        // vfs_truncate: the file's type before write access to the mount,
        // EISDIR for a directory, EINVAL for anything else not regular.
        match self.file(i)?.raw.mode & S_IFMT {
            S_IFREG => {}
            S_IFDIR => return Err(Error::errno(Errno::EISDIR, format!("inode {i}"))),
            _ => return Err(Error::errno(Errno::EINVAL, format!("inode {i}"))),
        }
        self.begin(false)?;
        let bs = u64::from(self.bs);
        let old = self.inodes.loaded(i).raw.size;
        if size < old {
            self.release_blocks(i, size.div_ceil(bs))?;
            if !size.is_multiple_of(bs) {
                let key = size / bs;
                let mut b = self.read_file_block(i, key)?;
                b[(size % bs) as usize..].fill(0);
                self.inodes.loaded_mut(i).dirty.insert(key, b);
            }
        }
        let now = self.now;
        let nsec = self.now_nsec;
        let f = self.inodes.loaded_mut(i);
        f.raw.size = size;
        f.modified((now, nsec));
        // nilfs_setattr calls nilfs_truncate (nilfs_set_file_dirty) only
        // when the size changes; otherwise the inode is only marked dirty.
        if size != old {
            self.inodes.pages_dirtied(i);
        }
        self.inodes.touch(i);
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
    /// pages are clean (`nilfs_inode_dirty`); a full construction if its
    /// inode needs a sync
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
}

/// What [`Fs::setattr`] changes (the VFS's `struct iattr` without the
/// size): each field set is changed; ctime always is.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SetAttr {
    /// ATTR_MODE: the 12 permission bits (the type is kept).
    pub perm: Option<u16>,
    /// ATTR_UID.
    pub uid: Option<u32>,
    /// ATTR_GID.
    pub gid: Option<u32>,
    /// ATTR_MTIME, in nanoseconds since the epoch.
    pub mtime: Option<i64>,
    /// ATTR_ATIME, in nanoseconds since the epoch: kept by the inode in
    /// memory only, as the kernel's `i_atime` is (nilfs2's on-disk inode
    /// has no access time; `nilfs_read_inode_common` loads it from
    /// `i_mtime`), so it lasts until the inode leaves memory.
    pub atime: Option<i64>,
}

/// The pieces of the byte range `[start, end)` in blocks of `bs` bytes:
/// (block, offset within it, length), in order.
/// A read of a file's bytes as they stood at one moment, made under the
/// file system's lock ([`Fs::plan_read`]) and carried out later without
/// it ([`ReadPlan::read_into`]), so that readers copy at the same time and
/// a writer waits only for the planning. The disk blocks it names keep
/// their bytes until the cleaner frees their segment: the caller compares
/// [`Fs::reclaims`] before and after, and reads again under the lock if
/// it moved.
#[derive(Clone, Debug)]
pub struct ReadPlan {
    bs: u32,
    len: usize,
    /// The file's size when planned.
    size: u64,
    pieces: Vec<Piece>,
}

/// A count of the cleaning passes that freed segments ([`Fs::reclaims`]),
/// shared: a thread that read blocks planned while it stood at `k` and
/// finds it still at `k` read what they held when planned.
#[derive(Clone, Debug, Default)]
pub struct Reclaims(std::sync::Arc<std::sync::atomic::AtomicU64>);

impl Reclaims {
    /// The count now.
    pub fn now(&self) -> u64 {
        self.0.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// One more pass, before it frees anything.
    pub(crate) fn count_one(&self) {
        self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }
}

#[derive(Clone, Debug)]
enum Piece {
    /// Bytes copied from memory (a dirty block's).
    Bytes(Vec<u8>),
    /// A hole: this many zeros.
    Zeros(usize),
    /// `n` bytes from byte `within` of disk block `pbn` (whole blocks
    /// from `pbn` on when `within` is 0 and `n` a multiple of the block
    /// size).
    Disk { pbn: u64, within: usize, n: usize },
}

impl Piece {
    /// `n` bytes from byte `within` of a block that lies at `pbn` on disk,
    /// or of a hole.
    fn placed(pbn: Option<u64>, within: usize, n: usize) -> Piece {
        match pbn {
            None => Piece::Zeros(n),
            Some(pbn) => Piece::Disk { pbn, within, n },
        }
    }

    fn len(&self) -> usize {
        match self {
            Piece::Bytes(b) => b.len(),
            Piece::Zeros(n) | Piece::Disk { n, .. } => *n,
        }
    }
}

impl ReadPlan {
    /// The plan of a read of up to `len` bytes from `offset` of a file of
    /// `size` bytes whose every block in the range is clean, with `place`
    /// saying where block `key` lies as [`Fs::plan_read_noting`] told it
    /// (`Some(None)` a hole, `Some(Some(pbn))` a disk block); `None` if
    /// `place` does not know one of them.
    pub fn of_clean(
        bs: u32,
        size: u64,
        offset: u64,
        len: u64,
        place: impl Fn(u64) -> Option<Option<u64>>,
    ) -> Option<ReadPlan> {
        let mut plan = ReadPlan::empty(bs, size);
        for (key, within, n) in plan.spans(offset, len) {
            plan.push(Piece::placed(place(key)?, within, n));
        }
        Some(plan)
    }

    /// A plan of nothing yet, for a file of `size` bytes.
    fn empty(bs: u32, size: u64) -> ReadPlan {
        ReadPlan {
            bs,
            len: 0,
            size,
            pieces: Vec::new(),
        }
    }

    /// The blocks a read of up to `len` bytes from `offset` covers, cut
    /// at the file's size: each block's index, the offset in it and the
    /// bytes taken from it.
    fn spans(&self, offset: u64, len: u64) -> impl Iterator<Item = (u64, usize, usize)> {
        let end = self.size.min(offset.saturating_add(len));
        block_spans(offset, end, u64::from(self.bs))
    }

    /// How many bytes it reads (short of what was asked at EOF).
    pub fn len(&self) -> usize {
        self.len
    }

    /// The file's size when it was planned.
    pub fn file_size(&self) -> u64 {
        self.size
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    fn push(&mut self, p: Piece) {
        self.len += p.len();
        let bs = self.bs as usize;
        match (self.pieces.last_mut(), p) {
            (Some(Piece::Zeros(m)), Piece::Zeros(n)) => *m += n,
            // Whole blocks that follow each other on disk: one read.
            (
                Some(Piece::Disk {
                    pbn,
                    within: 0,
                    n: m,
                }),
                Piece::Disk {
                    pbn: next,
                    within: 0,
                    n,
                },
            ) if m.is_multiple_of(bs) && n == bs && *pbn + (*m / bs) as u64 == next => *m += n,
            (_, p) => self.pieces.push(p),
        }
    }

    /// Carry the plan out into `buf` (at least [`ReadPlan::len`] bytes)
    /// from `dev`; returns the bytes read.
    pub fn read_into(&self, dev: &dyn crate::device::BlockDevice, buf: &mut [u8]) -> Result<usize> {
        let bs = self.bs;
        let mut at = 0usize;
        for p in &self.pieces {
            match p {
                Piece::Bytes(b) => buf[at..at + b.len()].copy_from_slice(b),
                Piece::Zeros(n) => buf[at..at + n].fill(0),
                Piece::Disk { pbn, within, n } => {
                    let out = &mut buf[at..at + n];
                    if *within == 0 && (*n as u64).is_multiple_of(u64::from(bs)) {
                        crate::device::read_blocks_into(dev, bs, *pbn, out)?;
                    } else {
                        let b = crate::device::read_block(dev, bs, *pbn)?;
                        out.copy_from_slice(&b[*within..within + n]);
                    }
                }
            }
            at += p.len();
        }
        Ok(at)
    }
}

fn block_spans(start: u64, end: u64, bs: u64) -> impl Iterator<Item = (u64, usize, usize)> {
    let mut pos = start;
    std::iter::from_fn(move || {
        (pos < end).then(|| {
            let (key, within) = (pos / bs, pos % bs);
            let n = (bs - within).min(end - pos);
            pos += n;
            (key, within as usize, n as usize)
        })
    })
}
