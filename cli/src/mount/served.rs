//! The FUSE side of `nilref mount`: the file system served (`Served`, a
//! `fuser::Filesystem` over `Fs` behind one lock, with the stats and
//! lookups answered outside it from `published`), the log writer's and
//! the cleaner's background work, and the conversions between FUSE's and
//! nilfs2's numbers. It knows nothing of the command line.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use fuser::{
    Errno as FErrno, FileAttr, FileHandle, FileType as FType, Filesystem, FopenFlags, Generation,
    INodeNo, IoctlFlags, LockOwner, OpenFlags, RenameFlags, ReplyAttr, ReplyCreate, ReplyData,
    ReplyDirectory, ReplyEmpty, ReplyEntry, ReplyIoctl, ReplyOpen, ReplyStatfs, ReplyWrite,
    ReplyXattr, Request, TimeOrNow, WriteFlags,
};
use nilfs::format::inode::{
    Inode, S_IFBLK, S_IFCHR, S_IFDIR, S_IFIFO, S_IFLNK, S_IFMT, S_IFREG, S_IFSOCK,
};
use nilfs::format::{ino, Ino};
use nilfs::fs::{Fs, SetAttr};

use super::published::{Listing, Published, Touches};

/// `sc_interval`: how long changes wait for the log writer.
const SC_INTERVAL: Duration = Duration::from_secs(5);
/// `NILFS_SC_DEFAULT_WATERMARK`: dirty data blocks that start a
/// construction at once.
const SC_WATERMARK: u64 = 3600;
/// nilfs_cleanerd.conf's defaults.
const CLEANING_INTERVAL: Duration = Duration::from_secs(5);
const PROTECTION_PERIOD_S: u64 = 3600;
const NSEGMENTS_PER_CLEAN: usize = 2;
const MIN_CLEAN_PERCENT: u64 = 10;
const MAX_CLEAN_PERCENT: u64 = 20;
/// How long the kernel may cache what a reply says: not at all. The
/// server changes attributes the kernel's FUSE client cannot predict (a
/// directory moved to another parent gets a new mtime, as
/// `nilfs_set_link` on its ".." gives it in `nilfs_rename`; the client
/// only updates ctime), and a cached reply showed the old mtime for up to
/// a second. Found by the concurrent campaign's first history; the
/// one-thread campaigns' 1 s time slack had hidden it.
const TTL: Duration = Duration::ZERO;

/// The mounted file system: `Fs` behind one lock, and the log writer's
/// state.
pub struct Mounted {
    pub state: Mutex<State>,
    /// Attributes and names answered without `state`'s lock; changed only
    /// by whoever holds it (lock order: `state`, then `published`).
    pub published: RwLock<Published>,
    /// The image the file system is on, for the reads carried out outside
    /// the lock ([`nilfs::fs::ReadPlan`]).
    pub dev: &'static dyn nilfs::device::BlockDevice,
    pub block_size: u32,
    /// The flags every open and create answers with.
    pub open_flags: FopenFlags,
    pub ignore_chmod: bool,
    pub drop_partial_writes: bool,
    /// Known-bad: a write is answered at once and stored later, by
    /// another thread (what the concurrent campaign must catch: a read
    /// that begins after the write returned may miss it).
    pub late_writes: bool,
    /// Known-bad: a write does not drop its inode's published attributes
    /// (what the concurrent campaign must catch: a stat after the write
    /// shows the size and times from before it).
    pub stale_attrs: bool,
    /// Known-bad: a change to a file drops its published attributes but
    /// not its noted clean blocks (what the concurrent campaign must
    /// catch: a read after a write shows the bytes from before it).
    pub stale_blocks: bool,
    /// `Fs::reclaims`, read without `state`'s lock by the reads carried
    /// out outside it.
    pub reclaims: nilfs::fs::Reclaims,
}

pub struct State {
    /// `None` once unmounted.
    pub fs: Option<Fs<'static>>,
    /// When the oldest change not yet constructed was made.
    pub dirty_since: Option<Instant>,
    /// Why the last background construction or cleaning step failed.
    pub last_error: Option<String>,
}

pub fn now_s() -> u64 {
    now_ns() / 1_000_000_000
}

fn now_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

/// nilfs-ref's error as an errno: its own for a refusal, EIO for damage
/// or an I/O failure (what the kernel answers for both).
fn errno_of(e: &nilfs::Error) -> FErrno {
    match e {
        nilfs::Error::Errno { errno, .. } => FErrno::from_i32(*errno as i32),
        _ => FErrno::EIO,
    }
}

/// The known-bad write's part that it keeps: the whole `block`-sized
/// blocks inside `[offset, offset + data.len())`.
fn whole_blocks(offset: u64, data: &[u8], block: u64) -> (u64, &[u8]) {
    let end = offset + data.len() as u64;
    let first = offset.div_ceil(block) * block;
    let last = end / block * block;
    if first >= last {
        return (offset, &[]);
    }
    let from = (first - offset) as usize;
    (first, &data[from..from + (last - first) as usize])
}

/// What getattr answers for `i`: its raw inode and its access time in
/// memory.
fn stat_pair(fs: &mut Fs<'static>, i: Ino) -> nilfs::Result<(Inode, i64)> {
    Ok((fs.stat(i)?, fs.atime_ns(i)?))
}

fn to_nilfs(i: INodeNo) -> Ino {
    match i.0 {
        1 => ino::ROOT,
        n => Ino(n),
    }
}

fn to_fuse(i: Ino) -> INodeNo {
    if i == ino::ROOT {
        INodeNo(1)
    } else {
        INodeNo(i.0)
    }
}

fn kind_of(mode: u16) -> FType {
    match mode & S_IFMT {
        S_IFDIR => FType::Directory,
        S_IFLNK => FType::Symlink,
        S_IFIFO => FType::NamedPipe,
        S_IFSOCK => FType::Socket,
        S_IFCHR => FType::CharDevice,
        S_IFBLK => FType::BlockDevice,
        _ => FType::RegularFile,
    }
}

fn time_of(secs: u64, nsec: u32) -> SystemTime {
    let secs = secs as i64;
    if secs >= 0 {
        UNIX_EPOCH + Duration::new(secs as u64, nsec)
    } else {
        UNIX_EPOCH - Duration::from_secs(secs.unsigned_abs()) + Duration::from_nanos(nsec.into())
    }
}

fn ns_of(t: SystemTime) -> i64 {
    match t.duration_since(UNIX_EPOCH) {
        Ok(d) => d.as_nanos() as i64,
        Err(e) => -(e.duration().as_nanos() as i64),
    }
}

impl Mounted {
    /// What getattr answers for inode `i`: its raw inode and the access
    /// time it has in memory (`Fs::atime_ns`).
    fn attr(&self, i: Ino, raw: &Inode, atime_ns: i64) -> FileAttr {
        let mtime = time_of(raw.mtime, raw.mtime_nsec);
        let atime = time_of(
            atime_ns.div_euclid(1_000_000_000) as u64,
            atime_ns.rem_euclid(1_000_000_000) as u32,
        );
        FileAttr {
            ino: to_fuse(i),
            size: raw.size,
            // i_blocks is in 512-byte sectors when the kernel (or our
            // write path) wrote it.
            blocks: raw.blocks,
            atime,
            mtime,
            ctime: time_of(raw.ctime, raw.ctime_nsec),
            crtime: mtime,
            kind: kind_of(raw.mode),
            perm: raw.mode & 0o7777,
            nlink: u32::from(raw.links_count),
            uid: raw.uid,
            gid: raw.gid,
            // The kernel's new_encode_dev form, which FUSE decodes.
            rdev: if raw.rdev().is_some() {
                raw.bmap[0] as u32
            } else {
                0
            },
            blksize: self.block_size,
            flags: 0,
        }
    }

    /// Runs `f` on the mounted `Fs` with the clock set to now; a change
    /// starts the log writer's wait. Before the lock goes, what `touches`
    /// names (and whatever a construction changed) is dropped from
    /// `published`.
    fn with<T>(
        &self,
        req: &Request,
        touches: Touches,
        f: impl FnOnce(&mut Fs<'static>) -> nilfs::Result<T>,
    ) -> Result<T, FErrno> {
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let State {
            fs, dirty_since, ..
        } = &mut *st;
        let Some(fs) = fs.as_mut() else {
            return Err(FErrno::EIO);
        };
        fs.set_time_ns(now_ns());
        // The requester owns what it creates.
        fs.set_credentials(req.uid(), req.gid());
        let out = f(fs).map_err(|e| errno_of(&e));
        self.settle(fs, touches);
        if fs.is_dirty() {
            dirty_since.get_or_insert_with(Instant::now);
        } else {
            *dirty_since = None;
        }
        out
    }

    /// `Published::drop_touched`, by whoever holds `state`'s lock, and
    /// after a construction `Published::refresh`. Reading takes no write
    /// lock when nothing can have changed.
    fn settle(&self, fs: &mut Fs<'static>, touches: Touches) {
        let touches = match touches {
            Touches::Inode(_) if self.stale_attrs => Touches::Nothing,
            t => t,
        };
        let constructions = fs.constructions();
        let settled = self.read_published().is_settled(constructions);
        if touches == Touches::Nothing && settled {
            return;
        }
        let mut p = self.write_published();
        match touches {
            Touches::Inode(i) if self.stale_blocks => p.drop_attr(i),
            t => p.drop_touched(t),
        }
        if !settled {
            p.refresh(constructions, |i| stat_pair(fs, i).ok());
        }
    }

    /// The attributes of `i` and its access time: published, or asked of
    /// `Fs` under the lock and published.
    fn stat_of(&self, req: &Request, i: Ino) -> Result<(Inode, i64), FErrno> {
        if let Some(a) = self.read_published().attr(i) {
            return Ok(a);
        }
        self.with(req, Touches::Nothing, |fs| {
            let (raw, atime) = stat_pair(fs, i)?;
            let mut p = self.write_published();
            p.publish_attr(i, &raw, atime, fs.constructions());
            Ok((raw, atime))
        })
    }

    fn read_published(&self) -> std::sync::RwLockReadGuard<'_, Published> {
        self.published.read().unwrap_or_else(|p| p.into_inner())
    }

    /// Only under `state`'s lock.
    fn write_published(&self) -> std::sync::RwLockWriteGuard<'_, Published> {
        self.published.write().unwrap_or_else(|p| p.into_inner())
    }

    fn entry_of(&self, req: &Request, i: Ino, reply: ReplyEntry) {
        match self.stat_of(req, i) {
            Ok((raw, atime)) => reply.entry(
                &TTL,
                &self.attr(i, &raw, atime),
                Generation(raw.generation.into()),
            ),
            Err(e) => reply.error(e),
        }
    }

    /// One turn of the background work: the log writer's construction when
    /// due, and the cleaner's step when the clean segments are few.
    pub fn background(&self, cleaner: bool, last_clean: &mut Instant) {
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let State {
            fs,
            dirty_since,
            last_error,
        } = &mut *st;
        let Some(fs) = fs.as_mut() else { return };
        if fs.is_read_only() {
            return;
        }
        fs.set_time_ns(now_ns());
        let due = dirty_since.is_some_and(|t| t.elapsed() >= SC_INTERVAL)
            || fs.dirty_data_blocks() >= SC_WATERMARK;
        if due && fs.is_dirty() {
            match fs.sync() {
                Ok(_) => *dirty_since = None,
                Err(e) => *last_error = Some(format!("log writer: {e}")),
            }
        }
        if cleaner && last_clean.elapsed() >= CLEANING_INTERVAL {
            *last_clean = Instant::now();
            if let Err(e) = clean_if_needed(fs) {
                *last_error = Some(format!("cleaner: {e}"));
            }
        }
        self.settle(fs, Touches::Nothing);
    }
}

/// nilfs_cleanerd's decision: below `min_clean_segments`, clean
/// `nsegments_per_clean` segments a step until `max_clean_segments`.
fn clean_if_needed(fs: &mut Fs<'static>) -> nilfs::Result<()> {
    let st = fs.sustat()?;
    let nsegs = st.nsegs.max(1);
    if st.ncleansegs * 100 >= nsegs * MIN_CLEAN_PERCENT {
        return Ok(());
    }
    while fs.sustat()?.ncleansegs * 100 < nsegs * MAX_CLEAN_PERCENT {
        let before = fs.sustat()?.ncleansegs;
        nilfs::cleaner::clean(fs, PROTECTION_PERIOD_S, NSEGMENTS_PER_CLEAN)?;
        if fs.sustat()?.ncleansegs <= before {
            break; // nothing more it may reclaim now
        }
    }
    Ok(())
}

/// What fuser serves: the mounted file system, shared with the background
/// worker.
pub struct Served(pub Arc<Mounted>);

impl std::ops::Deref for Served {
    type Target = Mounted;
    fn deref(&self) -> &Mounted {
        &self.0
    }
}

impl Filesystem for Served {
    fn destroy(&mut self) {
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(fs) = st.fs.take() {
            if let Err(e) = fs.unmount() {
                eprintln!("nilref mount: the unmount failed: {e}");
            }
        }
        self.write_published().clear();
    }

    fn lookup(&self, req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        let name = name.as_bytes();
        if name.len() > nilfs::format::NAME_LEN {
            return reply.error(FErrno::ENAMETOOLONG);
        }
        let dir = to_nilfs(parent);
        let published = self.read_published().lookup(dir, name);
        let found = match published {
            Some(e) => Ok(e),
            None => self.with(req, Touches::Nothing, |fs| {
                let Some(i) = fs.lookup(dir, name)? else {
                    self.write_published().publish_absent(dir, name);
                    return Ok(None);
                };
                let (raw, atime) = stat_pair(fs, i)?;
                let mut p = self.write_published();
                p.publish_entry(dir, name, i, &raw, atime, fs.constructions());
                Ok(Some((i, raw, atime)))
            }),
        };
        match found {
            Ok(Some((i, raw, atime))) => reply.entry(
                &TTL,
                &self.attr(i, &raw, atime),
                Generation(raw.generation.into()),
            ),
            Ok(None) => reply.error(FErrno::ENOENT),
            Err(e) => reply.error(e),
        }
    }

    fn getattr(&self, req: &Request, i: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        let i = to_nilfs(i);
        match self.stat_of(req, i) {
            Ok((raw, atime)) => reply.attr(&TTL, &self.attr(i, &raw, atime)),
            Err(e) => reply.error(e),
        }
    }

    fn setattr(
        &self,
        req: &Request,
        i: INodeNo,
        mode: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
        size: Option<u64>,
        atime: Option<TimeOrNow>,
        mtime: Option<TimeOrNow>,
        _ctime: Option<SystemTime>,
        _fh: Option<FileHandle>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<fuser::BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        let n = to_nilfs(i);
        let r = self.with(req, Touches::Inode(n), |fs| {
            // nilfs_setattr: the size first (nilfs_truncate), then the
            // rest (setattr_copy). The VFS has already cleared the set-id
            // bits a chown drops and sends them as the mode.
            if let Some(size) = size {
                fs.truncate(n, size)?;
            }
            let now = fs.now_ns() as i64;
            let ns = |t| match t {
                TimeOrNow::SpecificTime(t) => ns_of(t),
                TimeOrNow::Now => now,
            };
            let (mtime, atime) = (mtime.map(ns), atime.map(ns));
            let mode = mode.filter(|_| !self.ignore_chmod);
            let attr = SetAttr {
                perm: mode.map(|m| (m & 0o7777) as u16),
                uid,
                gid,
                mtime,
                atime,
            };
            // A SETATTR that names nothing is chown(f, -1, -1): the VFS
            // still passes ATTR_CTIME (chown_common), which the FUSE
            // client does not forward, and nilfs_setattr stamps the ctime.
            // After a size change the truncate has stamped both times.
            if size.is_none() || attr != SetAttr::default() {
                fs.setattr(n, attr)?;
            }
            stat_pair(fs, n)
        });
        match r {
            Ok((raw, atime)) => reply.attr(&TTL, &self.attr(n, &raw, atime)),
            Err(e) => reply.error(e),
        }
    }

    fn readlink(&self, req: &Request, i: INodeNo, reply: ReplyData) {
        match self.with(req, Touches::Nothing, |fs| fs.symlink_target(to_nilfs(i))) {
            Ok(t) => reply.data(&t),
            Err(e) => reply.error(e),
        }
    }

    fn mknod(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        rdev: u32,
        reply: ReplyEntry,
    ) {
        let mode = (mode & !umask & 0o7777) as u16 | (mode as u16 & S_IFMT);
        // new_decode_dev: the number as the kernel passed it.
        let rdev = [
            (rdev & 0xfff00) >> 8,
            (rdev & 0xff) | ((rdev >> 12) & 0xfff00),
        ];
        let p = to_nilfs(parent);
        let r = self.with(req, Touches::Names, |fs| match mode & S_IFMT {
            S_IFREG | 0 => fs.create(p, name.as_bytes(), mode & 0o7777),
            _ => fs.mknod(p, name.as_bytes(), mode, rdev),
        });
        match r {
            Ok(i) => self.entry_of(req, i, reply),
            Err(e) => reply.error(e),
        }
    }

    fn mkdir(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        reply: ReplyEntry,
    ) {
        let perm = (mode & !umask & 0o7777) as u16;
        match self.with(req, Touches::Names, |fs| {
            fs.mkdir(to_nilfs(parent), name.as_bytes(), perm)
        }) {
            Ok(i) => self.entry_of(req, i, reply),
            Err(e) => reply.error(e),
        }
    }

    fn unlink(&self, req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        match self.with(req, Touches::Names, |fs| {
            fs.unlink(to_nilfs(parent), name.as_bytes())
        }) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn rmdir(&self, req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        match self.with(req, Touches::Names, |fs| {
            fs.rmdir(to_nilfs(parent), name.as_bytes())
        }) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn symlink(
        &self,
        req: &Request,
        parent: INodeNo,
        link_name: &OsStr,
        target: &Path,
        reply: ReplyEntry,
    ) {
        let r = self.with(req, Touches::Names, |fs| {
            fs.symlink(
                to_nilfs(parent),
                link_name.as_bytes(),
                target.as_os_str().as_bytes(),
            )
        });
        match r {
            Ok(i) => self.entry_of(req, i, reply),
            Err(e) => reply.error(e),
        }
    }

    fn rename(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        newparent: INodeNo,
        newname: &OsStr,
        flags: RenameFlags,
        reply: ReplyEmpty,
    ) {
        // nilfs_rename: `if (flags & ~RENAME_NOREPLACE) return -EINVAL`;
        // the VFS has answered EEXIST for RENAME_NOREPLACE already.
        if !(flags - RenameFlags::RENAME_NOREPLACE).is_empty() {
            return reply.error(FErrno::EINVAL);
        }
        let (op, np) = (to_nilfs(parent), to_nilfs(newparent));
        let r = self.with(req, Touches::Names, |fs| {
            if flags.contains(RenameFlags::RENAME_NOREPLACE)
                && fs.lookup(np, newname.as_bytes())?.is_some()
            {
                return Err(nilfs::Error::errno(
                    nilfs::Errno::EEXIST,
                    "RENAME_NOREPLACE",
                ));
            }
            fs.rename(op, name.as_bytes(), np, newname.as_bytes())
        });
        match r {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn link(
        &self,
        req: &Request,
        i: INodeNo,
        newparent: INodeNo,
        newname: &OsStr,
        reply: ReplyEntry,
    ) {
        let n = to_nilfs(i);
        match self.with(req, Touches::Names, |fs| {
            fs.link(n, to_nilfs(newparent), newname.as_bytes())
        }) {
            Ok(()) => self.entry_of(req, n, reply),
            Err(e) => reply.error(e),
        }
    }

    fn open(&self, req: &Request, i: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        match self.with(req, Touches::Inode(to_nilfs(i)), |fs| {
            fs.open_file(to_nilfs(i))
        }) {
            Ok(()) => reply.opened(FileHandle(0), self.open_flags),
            Err(e) => reply.error(e),
        }
    }

    /// The last close of one open: its reference on the inode goes (an
    /// unlinked file is evicted with the last one).
    fn release(
        &self,
        req: &Request,
        i: INodeNo,
        _fh: FileHandle,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        match self.with(req, Touches::Inode(to_nilfs(i)), |fs| {
            fs.release_file(to_nilfs(i))
        }) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn read(
        &self,
        req: &Request,
        i: INodeNo,
        _fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        // Clean blocks an earlier read noted are planned and copied
        // without the lock; the rest is planned under it, noting its clean
        // blocks, and copied without it. Readers copy at the same time,
        // and a writer waits only for the planning. If a cleaning pass
        // freed segments meanwhile, the copy may hold bytes written there
        // since: the read is done again under the lock.
        let n = to_nilfs(i);
        let len = u64::from(size);
        let reclaims = self.reclaims.now();
        let published = self
            .read_published()
            .read_plan(n, offset, len, self.block_size, reclaims);
        let planned = match published {
            Some(plan) => Ok((plan, reclaims)),
            None => self.with(req, Touches::Nothing, |fs| {
                let mut noted = Vec::new();
                let plan = fs.plan_read_noting(n, offset, len, |k, at| noted.push((k, at)))?;
                let reclaims = fs.reclaims();
                self.write_published()
                    .publish_blocks(n, plan.file_size(), reclaims, noted);
                Ok((plan, reclaims))
            }),
        };
        let (plan, reclaims) = match planned {
            Ok(p) => p,
            Err(e) => return reply.error(e),
        };
        let mut buf = vec![0u8; plan.len()];
        if plan.read_into(self.dev, &mut buf).is_ok() && self.reclaims.now() == reclaims {
            return reply.data(&buf);
        }
        match self.with(req, Touches::Nothing, |fs| fs.read(n, offset, len)) {
            Ok(d) => reply.data(&d),
            Err(e) => reply.error(e),
        }
    }

    fn write(
        &self,
        req: &Request,
        i: INodeNo,
        _fh: FileHandle,
        offset: u64,
        data: &[u8],
        _write_flags: WriteFlags,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        // generic_write_check_limits: EFBIG at s_maxbytes, shortened at it.
        let max = nilfs::format::inode::MAX_FILE_SIZE;
        if offset >= max && !data.is_empty() {
            return reply.error(FErrno::EFBIG);
        }
        let data = &data[..(max - offset).min(data.len() as u64) as usize];
        let stored = if self.drop_partial_writes {
            whole_blocks(offset, data, u64::from(self.block_size))
        } else {
            (offset, data)
        };
        if self.late_writes {
            // The reply first; the bytes 50 ms later, under the lock.
            reply.written(data.len() as u32);
            let (m, bytes, at) = (self.0.clone(), stored.1.to_vec(), stored.0);
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(50));
                let mut st = m.state.lock().unwrap_or_else(|p| p.into_inner());
                if let Some(fs) = st.fs.as_mut() {
                    fs.set_time_ns(now_ns());
                    let _ = fs.write(to_nilfs(i), at, &bytes);
                    m.settle(fs, Touches::Inode(to_nilfs(i)));
                }
                if st.dirty_since.is_none() {
                    st.dirty_since = Some(Instant::now());
                }
            });
            return;
        }
        let n = to_nilfs(i);
        match self.with(req, Touches::Inode(n), |fs| fs.write(n, stored.0, stored.1)) {
            Ok(_) if self.drop_partial_writes => reply.written(data.len() as u32),
            Ok(n) => reply.written(n as u32),
            Err(e) => reply.error(e),
        }
    }

    fn flush(
        &self,
        _req: &Request,
        _i: INodeNo,
        _fh: FileHandle,
        _lock_owner: LockOwner,
        reply: ReplyEmpty,
    ) {
        reply.ok();
    }

    fn fsync(&self, req: &Request, i: INodeNo, _fh: FileHandle, datasync: bool, reply: ReplyEmpty) {
        let n = to_nilfs(i);
        match self.with(req, Touches::Inode(n), |fs| {
            if datasync {
                fs.fdatasync(n)
            } else {
                fs.fsync(n)
            }
        }) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn fsyncdir(
        &self,
        req: &Request,
        i: INodeNo,
        _fh: FileHandle,
        datasync: bool,
        reply: ReplyEmpty,
    ) {
        self.fsync(req, i, _fh, datasync, reply)
    }

    fn readdir(
        &self,
        req: &Request,
        i: INodeNo,
        _fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectory,
    ) {
        // Each entry's offset is its place in the on-disk order, one past
        // it: the next readdir starts after the last one the kernel took.
        // The listing is published, so the readdirs that take the rest of
        // it (and later ones, until a name changes) need no lock.
        let dir = to_nilfs(i);
        let published = self.read_published().listing(dir);
        let r = match published {
            Some(l) => Ok(l),
            None => self.with(req, Touches::Nothing, |fs| {
                let entries = fs.readdir(dir)?;
                let l: Listing = Arc::new(
                    entries
                        .into_iter()
                        .map(|(name, child, _)| Ok((name, child, fs.stat(child)?.mode)))
                        .collect::<nilfs::Result<Vec<_>>>()?,
                );
                self.write_published().publish_listing(dir, l.clone());
                Ok(l)
            }),
        };
        match r {
            Ok(entries) => {
                for (k, (name, child, mode)) in entries.iter().enumerate().skip(offset as usize) {
                    let kind = kind_of(*mode);
                    if reply.add(to_fuse(*child), k as u64 + 1, kind, OsStr::from_bytes(name)) {
                        break;
                    }
                }
                reply.ok();
            }
            Err(e) => reply.error(e),
        }
    }

    fn statfs(&self, req: &Request, _i: INodeNo, reply: ReplyStatfs) {
        match self.with(req, Touches::Nothing, |fs| fs.statfs()) {
            Ok(s) => reply.statfs(
                s.blocks,
                s.bfree,
                s.bavail,
                s.files,
                s.ffree,
                s.bsize as u32,
                s.namelen as u32,
                s.bsize as u32,
            ),
            Err(e) => reply.error(e),
        }
    }

    /// nilfs2's ioctls (`Fs::ioctl`), on any file or directory of the
    /// mount. FUSE passes an ioctl on as bytes ("restricted" ioctls: the
    /// argument the request code's size names, in and out), so the
    /// requests with a flat argument work as on the kernel's mount —
    /// SYNC, CHANGE_CPMODE, DELETE_CHECKPOINT, GET_CPSTAT, GET_SUSTAT,
    /// FS_IOC_GETVERSION — and the `nilfs_argv` ones (lscp's, lssu's, the
    /// cleaner's) cannot be: their data lies behind a pointer into the
    /// caller's memory, which only CUSE may follow. Those answer ENOTTY.
    /// `CAP_SYS_ADMIN` is taken to be uid 0, the only thing FUSE tells.
    #[allow(clippy::too_many_arguments)] // fuser's signature
    fn ioctl(
        &self,
        req: &Request,
        i: INodeNo,
        _fh: FileHandle,
        _flags: IoctlFlags,
        cmd: u32,
        in_data: &[u8],
        out_size: u32,
        reply: ReplyIoctl,
    ) {
        let admin = req.uid() == 0;
        match self.with(req, Touches::Names, |fs| {
            fs.ioctl(to_nilfs(i), cmd, admin, in_data)
        }) {
            Ok(mut out) => {
                out.truncate(out_size as usize);
                reply.ioctl(0, &out)
            }
            Err(e) => reply.error(e),
        }
    }

    // nilfs2 has no extended attributes: no xattr handler is installed
    // (`sb->s_xattr` is unset), so the VFS answers EOPNOTSUPP for a get or
    // a set, and a list is empty.
    fn setxattr(
        &self,
        _req: &Request,
        _i: INodeNo,
        _name: &OsStr,
        _value: &[u8],
        _flags: i32,
        _position: u32,
        reply: ReplyEmpty,
    ) {
        reply.error(FErrno::EOPNOTSUPP);
    }

    fn getxattr(&self, _req: &Request, _i: INodeNo, _name: &OsStr, _size: u32, reply: ReplyXattr) {
        reply.error(FErrno::EOPNOTSUPP);
    }

    fn listxattr(&self, _req: &Request, _i: INodeNo, size: u32, reply: ReplyXattr) {
        if size == 0 {
            reply.size(0);
        } else {
            reply.data(&[]);
        }
    }

    fn removexattr(&self, _req: &Request, _i: INodeNo, _name: &OsStr, reply: ReplyEmpty) {
        reply.error(FErrno::EOPNOTSUPP);
    }

    fn create(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        _flags: i32,
        reply: ReplyCreate,
    ) {
        let perm = (mode & !umask & 0o7777) as u16;
        let r = self.with(req, Touches::Names, |fs| {
            let i = fs.create(to_nilfs(parent), name.as_bytes(), perm)?;
            fs.open_file(i)?;
            let (raw, atime) = stat_pair(fs, i)?;
            Ok((i, raw, atime))
        });
        match r {
            Ok((i, raw, atime)) => reply.created(
                &TTL,
                &self.attr(i, &raw, atime),
                Generation(raw.generation.into()),
                FileHandle(0),
                self.open_flags,
            ),
            Err(e) => reply.error(e),
        }
    }
}
