//! Lockstep: the implementation (`nilfs::fs::Fs`) against the model
//! (`nilfs_model`), operation by operation.
//!
//! This is the only place that knows both sides (docs/direction.md, rule 2).
//! It has three parts:
//!
//! - [`Sut`], the system under test as the harness sees it: it executes a
//!   model [`Op`] and reports the observed [`Outcome`], and it shows its
//!   durable state through the abstraction function ([`Sut::durable`]).
//! - [`ImplUnderTest`], the adapter for nilfs-ref: a [`MemDevice`] with a
//!   mounted [`Fs`]. The `Fs` API is inode based, so the adapter plays the
//!   VFS's part: path walk (`.`, `..`, symlinks), the create-or-open rule,
//!   and the errno of each refusal. `nilref apply` (cli/src/apply.rs) uses
//!   it on its own: [`ImplUnderTest::from_device`] and
//!   [`ImplUnderTest::try_apply`], which reports an operation it cannot run
//!   as [`Unsupported`] instead of panicking.
//! - [`run`], the harness: it keeps every model state the observations so
//!   far allow (a crash leaves several), steps each with [`step`] and keeps
//!   the branches whose [`Branch::accept`] takes the observed outcome, checks
//!   the model's laws on every accepted transition, and after every
//!   construction or mount compares the abstraction of the implementation
//!   with each surviving model state. It stops at the first divergence.
//!
//! The abstraction function ([`ImplUnderTest::durable`]) reads the device
//! through the *read path* (`Nilfs::open`, `CheckpointView`,
//! `inspect::manifest`), which shares nothing with the write path above the
//! on-disk format: the manifest of the latest checkpoint, and the manifest
//! of every checkpoint the cpfile lists. The model's side
//! ([`model_durable`]) is `manifest::manifest` of its live namespace and of
//! each checkpoint's frozen one. nilfs-ref makes a checkpoint only when asked
//! (it has no timer), so its checkpoint numbers must be exactly the model's:
//! the sets of numbers are compared exactly, a stricter rule than the lscp
//! shape rule the model applies to the kernel.

use std::collections::BTreeMap;
use std::fmt;

use nilfs::device::{BlockDevice, MemDevice};
use nilfs::format::inode::{Inode, S_IFDIR, S_IFLNK, S_IFMT};
use nilfs::format::{ino, Cno, Ino};
use nilfs::fs::Fs;
use nilfs::mkfs::{self, MkfsOptions};
use nilfs::posix::CheckpointView;
use nilfs::the_nilfs::Nilfs;
use nilfs_model::laws::{check_transition, Promises};
use nilfs_model::state::Mount;
use nilfs_model::{step, Errno, FileType, Geometry, Op, Outcome, StatInfo, State};

/// Nanoseconds per second: the model's clock is in ns, `Fs`'s in seconds.
pub const NS: i64 = 1_000_000_000;

/// Symlinks followed during one path walk before ELOOP (`MAXSYMLINKS`).
const MAX_SYMLINKS: u32 = 40;

/// What the harness can observe of an implementation's durable state: the
/// manifest (manifest.sh lines) of the live tree and of every checkpoint.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Durable {
    pub live: Vec<String>,
    pub checkpoints: BTreeMap<u64, Vec<String>>,
}

/// A system under test, driven by model operations.
pub trait Sut {
    /// Execute `op` and report what was observed.
    fn apply(&mut self, op: &Op) -> Outcome;
    /// The abstraction function: the durable state as a [`Durable`], read
    /// back from the medium. Called only when nothing is pending (after a
    /// construction or a mount).
    fn durable(&mut self) -> Result<Durable, String>;
    /// Why the last operation failed, in the implementation's words (shown
    /// in divergence reports).
    fn detail(&self) -> Option<String> {
        None
    }
}

/// The model's side of the abstraction: what [`Sut::durable`] must show
/// for model state `s`.
pub fn model_durable(s: &State) -> Durable {
    Durable {
        live: nilfs_model::manifest::manifest(&s.live),
        checkpoints: s
            .checkpoints
            .iter()
            .map(|(c, cp)| (*c, nilfs_model::manifest::manifest(&cp.ns)))
            .collect(),
    }
}

// ------------------------------------------------------------------ adapter

/// The image a test case runs on.
#[derive(Clone, Debug)]
pub struct ImageSpec {
    pub block_size: u64,
    pub blocks_per_segment: u64,
    pub device_bytes: u64,
    /// mkfs's creation time, seconds; the model's clock starts there.
    pub ctime: u64,
}

impl Default for ImageSpec {
    fn default() -> Self {
        ImageSpec {
            block_size: 1024,
            blocks_per_segment: 64,
            device_bytes: 32 << 20,
            ctime: mkfs::DEFAULT_CTIME,
        }
    }
}

/// Makes the file system on `dev` and returns the model's geometry of it
/// (read back from the super block, so both sides agree on it).
pub fn format(dev: &MemDevice, spec: &ImageSpec) -> Result<Geometry, nilfs::Error> {
    mkfs::mkfs(
        dev,
        &MkfsOptions {
            block_size: spec.block_size,
            blocks_per_segment: spec.blocks_per_segment,
            ctime: spec.ctime,
            ..MkfsOptions::from_seed(spec.block_size)
        },
    )?;
    let nilfs = Nilfs::open(dev)?;
    Ok(Geometry {
        block_size: nilfs.block_size(),
        blocks_per_segment: nilfs.sb.blocks_per_segment,
        nsegments: nilfs.sb.nsegments,
        r_segments_percentage: nilfs.sb.r_segments_percentage,
    })
}

/// The model state right after [`format`] (not mounted).
pub fn model_after_format(g: Geometry, spec: &ImageSpec) -> State {
    State::mkfs(g, true, spec.ctime as i64 * NS)
}

type R<T> = Result<T, Errno>;

/// nilfs-ref under test: a device and, while mounted, an `Fs` on it.
///
/// `Fs<'d>` borrows a `Nilfs<'d>` for its whole life, so each mount leaks
/// one `Nilfs` (a few hundred bytes: super block, scan result, super root)
/// to give it the device's lifetime; the device itself is the caller's and
/// is freed with the test case. That keeps this file free of `unsafe` and of
/// a self-referential struct.
pub struct ImplUnderTest<'d> {
    dev: &'d dyn BlockDevice,
    fs: Option<Fs<'d>>,
    /// The injected clock, seconds.
    now: u64,
    /// The latest checkpoint number (what `mkcp -p` prints: `ns_cno - 1`).
    latest: Cno,
    last_error: Option<String>,
    /// Read-only snapshot mounts (`mount -o ro,cp=N`), by number.
    snaps: BTreeMap<u64, CheckpointView<'d, 'd>>,
}

impl<'d> ImplUnderTest<'d> {
    /// An adapter for the file system [`format`] made on `dev` (unmounted).
    pub fn new(dev: &'d dyn BlockDevice, spec: &ImageSpec) -> Self {
        Self::from_device(dev, spec.ctime)
    }

    /// An adapter for whatever file system `dev` holds (unmounted; the
    /// first `mount` operation opens it), with the injected clock at `now`
    /// seconds. `Op::Clock` moves the clock on; nothing else does, so the
    /// observed times are deterministic.
    pub fn from_device(dev: &'d dyn BlockDevice, now: u64) -> Self {
        ImplUnderTest {
            dev,
            fs: None,
            now,
            latest: Cno(1),
            last_error: None,
            snaps: BTreeMap::new(),
        }
    }

    /// Executes `op` and returns the observed outcome (an errno is
    /// `Outcome::Err`), or [`Unsupported`] for an operation this adapter
    /// cannot run yet (nothing is executed then). [`Sut::apply`] is this,
    /// panicking on `Unsupported`.
    pub fn try_apply(&mut self, op: &Op) -> Result<Outcome, Unsupported> {
        self.last_error = None;
        match self.exec(op) {
            Ok(o) => Ok(o),
            Err(Stop::Errno(e)) => Ok(Outcome::Err(e)),
            Err(Stop::Unsupported) => Err(Unsupported(op.clone())),
        }
    }

    /// Whether a file system is mounted (the trace has not unmounted it).
    pub fn is_mounted(&self) -> bool {
        self.fs.is_some()
    }

    /// Records an implementation error and maps it to the model's errno.
    /// Errors without an errno (corruption, I/O, invariant reports) become
    /// EIO, which the model never allows: a divergence, with the detail.
    fn errno(&mut self, e: nilfs::Error) -> Errno {
        self.last_error = Some(e.to_string());
        match e {
            nilfs::Error::Errno { errno, .. } => map_errno(errno),
            _ => Errno::EIO,
        }
    }

    fn fs(&mut self) -> R<&mut Fs<'d>> {
        if self.fs.is_none() {
            self.last_error = Some("not mounted".into());
            return Err(Errno::EIO);
        }
        Ok(self.fs.as_mut().expect("checked"))
    }

    /// Runs `f` on the mounted `Fs`, mapping its error.
    fn with<T>(&mut self, f: impl FnOnce(&mut Fs<'d>) -> nilfs::Result<T>) -> R<T> {
        let r = f(self.fs()?);
        r.map_err(|e| self.errno(e))
    }

    fn stat(&mut self, i: Ino) -> R<Inode> {
        self.with(|fs| fs.stat(i))
    }

    /// The VFS path walk (`link_path_walk`): from the root, `.` and `..`,
    /// intermediate symlinks followed, the last one only if `follow`.
    fn resolve(&mut self, path: &str, follow: bool) -> R<Ino> {
        let mut budget = MAX_SYMLINKS;
        self.walk(ino::ROOT, path, follow, &mut budget)
    }

    fn walk(&mut self, start: Ino, path: &str, follow: bool, budget: &mut u32) -> R<Ino> {
        if path.is_empty() {
            return Err(Errno::ENOENT);
        }
        if path.len() >= nilfs_model::fs::PATH_MAX {
            return Err(Errno::ENAMETOOLONG);
        }
        let mut cur = if path.starts_with('/') {
            ino::ROOT
        } else {
            start
        };
        let comps: Vec<&str> = path.split('/').filter(|c| !c.is_empty()).collect();
        for (k, comp) in comps.iter().enumerate() {
            let last = k + 1 == comps.len();
            if self.stat(cur)?.mode & S_IFMT != S_IFDIR {
                return Err(Errno::ENOTDIR);
            }
            if *comp == "." {
                continue;
            }
            if comp.len() > nilfs_model::NAME_LEN_MAX {
                return Err(Errno::ENAMETOOLONG);
            }
            let dir = cur;
            let next = self
                .with(|fs| fs.lookup(dir, comp.as_bytes()))?
                .ok_or(Errno::ENOENT)?;
            let raw = self.stat(next)?;
            cur = if raw.mode & S_IFMT == S_IFLNK && (!last || follow) {
                if *budget == 0 {
                    return Err(Errno::ELOOP);
                }
                *budget -= 1;
                let target = self.with(|fs| fs.read(next, 0, raw.size))?;
                let target = String::from_utf8_lossy(&target).into_owned();
                self.walk(dir, &target, true, budget)?
            } else {
                next
            };
        }
        Ok(cur)
    }

    /// The directory that would hold `path`'s last component, and that
    /// component (trailing slashes ignored).
    fn parent(&mut self, path: &str) -> R<(Ino, String)> {
        let (dir, name) = self.parent_walk(path)?;
        if name.len() > nilfs_model::NAME_LEN_MAX {
            return Err(Errno::ENAMETOOLONG);
        }
        Ok((dir, name))
    }

    /// What unlink and rmdir check once the parent walk is done: write
    /// access (EROFS), then the last name's length (its lookup).
    fn name_after_write_access(&mut self, name: &str) -> R<()> {
        if self.fs()?.is_read_only() {
            return Err(Errno::EROFS);
        }
        if name.len() > nilfs_model::NAME_LEN_MAX {
            return Err(Errno::ENAMETOOLONG);
        }
        Ok(())
    }

    /// [`Self::parent`] without the last name's length check, which the
    /// VFS leaves to that name's lookup (`filename_parentat`).
    fn parent_walk(&mut self, path: &str) -> R<(Ino, String)> {
        if path.is_empty() {
            return Err(Errno::ENOENT);
        }
        let trimmed = path.trim_end_matches('/');
        let (dir_path, name) = match trimmed.rfind('/') {
            Some(k) => (&trimmed[..k], &trimmed[k + 1..]),
            None => ("", trimmed),
        };
        let dir = if dir_path.is_empty() {
            ino::ROOT
        } else {
            self.resolve(dir_path, true)?
        };
        if self.stat(dir)?.mode & S_IFMT != S_IFDIR {
            return Err(Errno::ENOTDIR);
        }
        Ok((dir, name.to_string()))
    }

    /// `open(path, O_CREAT [| O_EXCL])`: an existing file is opened
    /// (EEXIST with O_EXCL; EISDIR for a directory, which cannot be opened
    /// for writing).
    fn create(&mut self, path: &str, perm: u32, excl: bool) -> R<()> {
        let (dir, name) = self.parent(path)?;
        // "/", "." or "..": do_open finds the directory and creates nothing.
        if is_special(&name) {
            return Err(if excl { Errno::EEXIST } else { Errno::EISDIR });
        }
        if self.with(|fs| fs.lookup(dir, name.as_bytes()))?.is_some() {
            if excl {
                return Err(Errno::EEXIST);
            }
            let i = self.resolve(path, true)?;
            if self.stat(i)?.mode & S_IFMT == S_IFDIR {
                return Err(Errno::EISDIR);
            }
            // may_open: write access on a read-only mount.
            if self.fs()?.is_read_only() {
                return Err(Errno::EROFS);
            }
            return Ok(());
        }
        self.with(|fs| fs.create(dir, name.as_bytes(), perm as u16))
            .map(|_| ())
    }

    fn lstat(&mut self, path: &str) -> R<StatInfo> {
        let i = self.resolve(path, false)?;
        Ok(stat_info(&self.stat(i)?))
    }

    fn readdir(&mut self, i: Ino) -> R<Vec<String>> {
        let entries = self.with(|fs| fs.readdir(i))?;
        Ok(entries
            .into_iter()
            .filter(|(n, _, _)| n != b"." && n != b"..")
            .map(|(n, _, _)| String::from_utf8_lossy(&n).into_owned())
            .collect())
    }

    /// manifest.sh of the live tree, through the write path's own view.
    fn live_manifest(&mut self) -> R<Vec<String>> {
        let mut lines = Vec::new();
        let mut stack = vec![(String::new(), ino::ROOT)];
        while let Some((prefix, dir)) = stack.pop() {
            let entries = self.with(|fs| fs.readdir(dir))?;
            for (name, i, _) in entries {
                if name == b"." || name == b".." {
                    continue;
                }
                let path = format!("{prefix}/{}", String::from_utf8_lossy(&name));
                let raw = self.stat(i)?;
                let line = match raw.mode & S_IFMT {
                    S_IFDIR => {
                        stack.push((path.clone(), i));
                        format!("DIR  -  {path}/")
                    }
                    S_IFLNK => {
                        let t = self.with(|fs| fs.read(i, 0, raw.size))?;
                        format!("LNK  -  {path} -> {}", String::from_utf8_lossy(&t))
                    }
                    _ => {
                        let d = self.with(|fs| fs.read(i, 0, raw.size))?;
                        format!("{}  {}  {path}", crate::sha256_hex(&d), raw.size)
                    }
                };
                lines.push(line);
            }
        }
        Ok(sort_manifest(lines))
    }

    fn mount(&mut self, ro: bool) -> R<()> {
        if self.fs.is_some() {
            return Err(Errno::EBUSY);
        }
        let nilfs = Nilfs::open(self.dev).map_err(|e| self.errno(e))?;
        self.latest = nilfs.scan.cno;
        // See the type's comment: the mount keeps the Nilfs for good.
        let nilfs: &'d Nilfs<'d> = Box::leak(Box::new(nilfs));
        let fs = if ro {
            Fs::mount_read_only(nilfs, self.now)
        } else {
            Fs::mount(nilfs, self.now)
        }
        .map_err(|e| self.errno(e))?;
        self.fs = Some(fs);
        Ok(())
    }

    /// `mount -o ro,cp=C` (`nilfs_attach_snapshot`): EINVAL unless C is a
    /// snapshot — as the mounted file system's cpfile says, changes not
    /// yet written included — EBUSY if already mounted. The tree is read
    /// from the medium (a snapshot's checkpoint is always written).
    fn mount_snapshot(&mut self, c: u64) -> R<()> {
        if self.snaps.contains_key(&c) {
            return Err(Errno::EBUSY);
        }
        let is_snapshot = match self.fs.as_mut() {
            Some(fs) => {
                let list = fs.lscp().map_err(|e| self.errno(e))?;
                list.iter().any(|cp| cp.cno.0 == c && cp.is_snapshot())
            }
            None => {
                let nilfs = Nilfs::open(self.dev).map_err(|e| self.errno(e))?;
                let list = nilfs.checkpoints(Cno(c)).map_err(|e| self.errno(e))?;
                list.iter().any(|cp| cp.cno.0 == c && cp.is_snapshot())
            }
        };
        if !is_snapshot {
            return Err(Errno::EINVAL);
        }
        let nilfs = Nilfs::open(self.dev).map_err(|e| self.errno(e))?;
        let nilfs: &'d Nilfs<'d> = Box::leak(Box::new(nilfs));
        let view = CheckpointView::open(nilfs, Some(Cno(c))).map_err(|e| self.errno(e))?;
        self.snaps.insert(c, view);
        Ok(())
    }

    /// A read-only operation on a mounted snapshot, through the read path.
    fn snapshot_read(&mut self, c: u64, op: &Op) -> R<Outcome> {
        let view = self.snaps.get(&c).ok_or(Errno::EINVAL)?;
        let r = (|| -> nilfs::Result<Outcome> {
            Ok(match op {
                Op::Read {
                    path, offset, len, ..
                } => {
                    let (_, inode) = view.resolve(path.as_bytes(), true)?;
                    if inode.mode & S_IFMT == S_IFDIR {
                        return Err(nilfs::Error::errno(nilfs::Errno::EISDIR, path.clone()));
                    }
                    let d = view.read(&inode, *offset, *len)?;
                    Outcome::Data {
                        len: d.len() as u64,
                        sha256: crate::sha256_hex(&d),
                    }
                }
                Op::Lstat { path, .. } => {
                    Outcome::Stat(stat_info(&view.resolve(path.as_bytes(), false)?.1))
                }
                Op::Readdir { path, .. } => {
                    let (_, inode) = view.resolve(path.as_bytes(), true)?;
                    if inode.mode & S_IFMT != S_IFDIR {
                        return Err(nilfs::Error::errno(nilfs::Errno::ENOTDIR, path.clone()));
                    }
                    Outcome::Names(
                        view.readdir(&inode)?
                            .into_iter()
                            .filter(|e| e.name != b"." && e.name != b"..")
                            .map(|e| String::from_utf8_lossy(&e.name).into_owned())
                            .collect(),
                    )
                }
                Op::Readlink { path, .. } => {
                    let (_, inode) = view.resolve(path.as_bytes(), false)?;
                    if inode.mode & S_IFMT != S_IFLNK {
                        return Err(nilfs::Error::errno(nilfs::Errno::EINVAL, path.clone()));
                    }
                    Outcome::Target(String::from_utf8_lossy(&view.readlink(&inode)?).into_owned())
                }
                Op::Manifest { .. } => Outcome::Manifest(
                    nilfs::inspect::manifest::manifest(view)?
                        .lines()
                        .map(str::to_string)
                        .collect(),
                ),
                _ => return Err(nilfs::Error::errno(nilfs::Errno::EROFS, "snapshot")),
            })
        })();
        r.map_err(|e| self.errno(e))
    }

    fn sync(&mut self) -> R<Cno> {
        let c = self.with(|fs| fs.sync().map(|_| fs.latest_cno()))?;
        self.latest = c;
        Ok(c)
    }

    /// Executes one operation (those of the generated alphabet; see
    /// tests/tests/lockstep.rs for which).
    fn exec(&mut self, op: &Op) -> Result<Outcome, Stop> {
        Ok(match op {
            Op::Clock { now } => {
                self.now = (*now / NS) as u64;
                if let Some(fs) = self.fs.as_mut() {
                    fs.set_time(self.now);
                }
                Outcome::Ok
            }
            Op::Mount { cp: None, ro } => self.mount(*ro).map(ok)?,
            Op::Mount {
                cp: Some(_),
                ro: false,
            } => return Err(Errno::EINVAL.into()),
            Op::Mount {
                cp: Some(c),
                ro: true,
            } => self.mount_snapshot(*c).map(ok)?,
            Op::Umount { cp: Some(c) } => {
                self.snaps.remove(c).ok_or(Errno::EINVAL)?;
                Outcome::Ok
            }
            Op::Read { at: Some(c), .. }
            | Op::Lstat { at: Some(c), .. }
            | Op::Readdir { at: Some(c), .. }
            | Op::Readlink { at: Some(c), .. }
            | Op::Manifest { at: Some(c) } => self.snapshot_read(*c, op)?,
            Op::Umount { cp: None } => {
                let fs = self.fs.take().ok_or(Errno::EINVAL)?;
                fs.unmount().map_err(|e| self.errno(e))?;
                Outcome::Ok
            }
            // Power loss at an operation boundary: what is in memory is gone.
            Op::Crash => {
                self.fs = None;
                self.snaps.clear();
                Outcome::Ok
            }
            // sync(2) with nothing mounted has nothing to do.
            Op::Sync if self.fs.is_none() => Outcome::Ok,
            Op::Sync => self.sync().map(ok)?,
            Op::Mkcp { snapshot } => {
                let c = self.with(|fs| fs.mkcp(*snapshot))?;
                self.latest = c;
                Outcome::Cno(c.0)
            }
            Op::Chcp { cno, snapshot } => self
                .with(|fs| fs.chcp(nilfs::format::Cno(*cno), *snapshot))
                .map(ok)?,
            Op::Lscp => {
                let list = self.with(|fs| fs.lscp())?;
                Outcome::Checkpoints(
                    list.iter()
                        // lscp without -a (lscp.c): MINOR ones are hidden
                        // unless they are snapshots.
                        .filter(|c| c.is_snapshot() || !c.is_minor())
                        .map(|c| nilfs_model::CpEntry {
                            cno: c.cno.0,
                            ss: c.is_snapshot(),
                        })
                        .collect(),
                )
            }
            Op::Rmcp { cno } => self.with(|fs| fs.rmcp(nilfs::format::Cno(*cno))).map(ok)?,
            Op::Create {
                path,
                perm,
                excl,
                at: None,
            } => self.create(path, *perm, *excl).map(ok)?,
            Op::Mkdir {
                path,
                perm,
                at: None,
            } => {
                let (d, n) = self.parent(path)?;
                // filename_create: EEXIST unless the last part is a name.
                if is_special(&n) {
                    return Err(Errno::EEXIST.into());
                }
                self.with(|fs| fs.mkdir(d, n.as_bytes(), *perm as u16))
                    .map(ok)?
            }
            Op::Write {
                path,
                offset,
                data,
                at: None,
            } => {
                let i = self.resolve(path, true)?;
                // open(O_WRONLY): a directory is EISDIR (whatever the
                // write's length), then may_open's write access on a
                // read-only mount is EROFS.
                if self.stat(i)?.mode & S_IFMT == S_IFDIR {
                    return Err(Errno::EISDIR.into());
                }
                if self.fs()?.is_read_only() {
                    return Err(Errno::EROFS.into());
                }
                // pwrite64: a loff_t below 0 is EINVAL (ksys_pwrite64);
                // then generic_write_check_limits: EFBIG at or past
                // s_maxbytes (MAX_LFS_FILESIZE for NILFS2, nilfs_max_size),
                // and a write crossing it shortened.
                if *offset > i64::MAX as u64 {
                    return Err(Errno::EINVAL.into());
                }
                let mut bytes = data.to_bytes();
                if bytes.is_empty() {
                    return Ok(Outcome::Written(0));
                }
                if *offset >= nilfs_model::MAX_FILE_SIZE {
                    return Err(Errno::EFBIG.into());
                }
                let room = nilfs_model::MAX_FILE_SIZE - *offset;
                bytes.truncate(room.min(bytes.len() as u64) as usize);
                self.with(|fs| fs.write(i, *offset, &bytes))?;
                Outcome::Written(bytes.len() as u64)
            }
            Op::Read {
                path,
                offset,
                len,
                at: None,
            } => {
                let i = self.resolve(path, true)?;
                let d = self.with(|fs| fs.read(i, *offset, *len))?;
                Outcome::Data {
                    len: d.len() as u64,
                    sha256: crate::sha256_hex(&d),
                }
            }
            Op::Lstat { path, at: None } => Outcome::Stat(self.lstat(path)?),
            Op::Readdir { path, at: None } => {
                let i = self.resolve(path, true)?;
                Outcome::Names(self.readdir(i)?)
            }
            Op::Manifest { at: None } => Outcome::Manifest(self.live_manifest()?),
            Op::Unlink { path, at: None } => {
                let (d, n) = self.parent_walk(path)?;
                // do_unlinkat: EISDIR before write access for a non-name;
                // then mnt_want_write (EROFS); then the lookup (the name's
                // length: nilfs_lookup's ENAMETOOLONG).
                if is_special(&n) {
                    return Err(Errno::EISDIR.into());
                }
                self.name_after_write_access(&n)?;
                self.with(|fs| fs.unlink(d, n.as_bytes())).map(ok)?
            }
            Op::Rmdir { path, at: None } => {
                let (d, n) = self.parent_walk(path)?;
                // do_rmdir: ENOTEMPTY for "..", EINVAL for ".", EBUSY for "/".
                match n.as_str() {
                    ".." => return Err(Errno::ENOTEMPTY.into()),
                    "." => return Err(Errno::EINVAL.into()),
                    "" => return Err(Errno::EBUSY.into()),
                    _ => {}
                }
                self.name_after_write_access(&n)?;
                self.with(|fs| fs.rmdir(d, n.as_bytes())).map(ok)?
            }
            Op::Symlink {
                target,
                path,
                at: None,
            } => {
                let (d, n) = self.parent(path)?;
                if is_special(&n) {
                    return Err(Errno::EEXIST.into());
                }
                self.with(|fs| fs.symlink(d, n.as_bytes(), target.as_bytes()))
                    .map(ok)?
            }
            // linkat without AT_SYMLINK_FOLLOW: the old name is not followed.
            Op::Link { old, new, at: None } => {
                let i = self.resolve(old, false)?;
                let (d, n) = self.parent(new)?;
                if is_special(&n) {
                    return Err(Errno::EEXIST.into());
                }
                self.with(|fs| fs.link(i, d, n.as_bytes())).map(ok)?
            }
            Op::Rename { old, new, at: None } => {
                let (od, on) = self.parent_walk(old)?;
                let (nd, nn) = self.parent_walk(new)?;
                // do_renameat2: EBUSY if either last part is not a name;
                // then the source's lookup (nilfs_lookup: ENAMETOOLONG);
                // Fs::rename looks the source up before checking the
                // target's name.
                if is_special(&on) || is_special(&nn) {
                    return Err(Errno::EBUSY.into());
                }
                if self.fs()?.is_read_only() {
                    return Err(Errno::EROFS.into()); // mnt_want_write
                }
                if on.len() > nilfs_model::NAME_LEN_MAX {
                    return Err(Errno::ENAMETOOLONG.into());
                }
                self.with(|fs| fs.rename(od, on.as_bytes(), nd, nn.as_bytes()))
                    .map(ok)?
            }
            Op::Truncate {
                path,
                size,
                at: None,
            } => {
                let i = self.resolve(path, true)?;
                // truncate(2): a negative length is EINVAL (do_sys_truncate);
                // s_maxbytes is i64::MAX, so inode_newsize_ok's EFBIG
                // cannot follow.
                if *size > i64::MAX as u64 {
                    return Err(Errno::EINVAL.into());
                }
                self.with(|fs| fs.truncate(i, *size)).map(ok)?
            }
            // readlink: the target is the symlink's data (`page_get_link`).
            Op::Readlink { path, at: None } => {
                let i = self.resolve(path, false)?;
                let raw = self.stat(i)?;
                if raw.mode & S_IFMT != S_IFLNK {
                    return Err(Errno::EINVAL.into());
                }
                let t = self.with(|fs| fs.read(i, 0, raw.size))?;
                Outcome::Target(String::from_utf8_lossy(&t).into_owned())
            }
            Op::Fsync { path, at: None } => {
                let i = self.resolve(path, true)?;
                self.with(|fs| fs.fsync(i)).map(ok)?
            }
            Op::Fdatasync { path, at: None } => {
                let i = self.resolve(path, true)?;
                self.with(|fs| fs.fdatasync(i)).map(ok)?
            }
            // nilfs-clean -p P with cleanerd's default nsegments_per_clean.
            Op::Clean { protection_s } => self
                .with(|fs| nilfs::cleaner::clean(fs, *protection_s, 2))
                .map(ok)?,
            // To add an operation once `Fs` has it: one arm here and one
            // line in the generator (nilfs_model::gen).
            _ => return Err(Stop::Unsupported),
        })
    }

    /// The abstraction function: the device read through the read path.
    pub fn durable(&self) -> Result<Durable, String> {
        // The image itself must be consistent, every checkpoint of it.
        let opts = nilfs::check::Options {
            checkpoints: nilfs::check::Checkpoints::All,
            ..Default::default()
        };
        let report = nilfs::check::check_device(self.dev, &opts);
        if !report.is_clean() {
            return Err(format!("nilref check:\n{report}"));
        }
        let nilfs = Nilfs::open(self.dev).map_err(|e| format!("open: {e}"))?;
        let view_manifest = |cno: Option<Cno>| -> Result<Vec<String>, String> {
            let view = CheckpointView::open(&nilfs, cno).map_err(|e| format!("cp {cno:?}: {e}"))?;
            let m = nilfs::inspect::manifest::manifest(&view)
                .map_err(|e| format!("manifest of cp {cno:?}: {e}"))?;
            Ok(m.lines().map(str::to_string).collect())
        };
        let mut checkpoints = BTreeMap::new();
        for cp in nilfs
            .checkpoints(Cno(1))
            .map_err(|e| format!("cpfile: {e}"))?
        {
            checkpoints.insert(cp.cno.0, view_manifest(Some(cp.cno))?);
        }
        Ok(Durable {
            live: view_manifest(None)?,
            checkpoints,
        })
    }
}

impl Sut for ImplUnderTest<'_> {
    fn apply(&mut self, op: &Op) -> Outcome {
        self.try_apply(op).unwrap_or_else(|u| panic!("{u}"))
    }
    fn durable(&mut self) -> Result<Durable, String> {
        ImplUnderTest::durable(self)
    }
    fn detail(&self) -> Option<String> {
        self.last_error.clone()
    }
}

/// An operation [`ImplUnderTest`] cannot execute (yet): a read-only or
/// checkpoint mount, remount, chcp, rmcp, lscp, the cleaner, a snapshot
/// mkcp, an operation on a checkpoint (`at`), or a second mkfs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unsupported(pub Op);

impl fmt::Display for Unsupported {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let op = serde_json::to_string(&self.0).expect("an operation serialises");
        write!(f, "the adapter does not support {op} yet")
    }
}

impl std::error::Error for Unsupported {}

/// Why [`ImplUnderTest::exec`] stopped: the operation's errno (an outcome),
/// or an operation it cannot run (no outcome at all).
enum Stop {
    Errno(Errno),
    Unsupported,
}

impl From<Errno> for Stop {
    fn from(e: Errno) -> Self {
        Stop::Errno(e)
    }
}

/// What lstat(2) reports of a raw inode, as the model states it.
fn stat_info(raw: &Inode) -> StatInfo {
    let file_type = match raw.mode & S_IFMT {
        S_IFDIR => FileType::Dir,
        S_IFLNK => FileType::Symlink,
        _ => FileType::File,
    };
    StatInfo {
        file_type,
        size: raw.size,
        nlink: u32::from(raw.links_count),
        perm: u32::from(raw.mode & 0o7777),
        mtime: Some(raw.mtime as i64 * NS + i64::from(raw.mtime_nsec)),
    }
}

/// A last component that is not a name (`type != LAST_NORM` in namei):
/// the root ("" after the slashes), "." or "..".
fn is_special(name: &str) -> bool {
    name.is_empty() || name == "." || name == ".."
}

/// `Outcome::Ok`, whatever the call returned.
fn ok<T>(_: T) -> Outcome {
    Outcome::Ok
}

/// The implementation's errno, by name, as the model's.
pub fn map_errno(e: nilfs::Errno) -> Errno {
    use nilfs::Errno as I;
    match e {
        I::EPERM => Errno::EPERM,
        I::ENOENT => Errno::ENOENT,
        I::EIO => Errno::EIO,
        I::EBUSY => Errno::EBUSY,
        I::EEXIST => Errno::EEXIST,
        I::EXDEV => Errno::EXDEV,
        I::ENOTDIR => Errno::ENOTDIR,
        I::EISDIR => Errno::EISDIR,
        I::EINVAL => Errno::EINVAL,
        I::EFBIG => Errno::EFBIG,
        I::ENOSPC => Errno::ENOSPC,
        I::EROFS => Errno::EROFS,
        I::EMLINK => Errno::EMLINK,
        I::ENAMETOOLONG => Errno::ENAMETOOLONG,
        I::ENOTEMPTY => Errno::ENOTEMPTY,
        I::ELOOP => Errno::ELOOP,
        // A stale handle is never a user-visible answer of a path call.
        I::ESTALE => Errno::EIO,
    }
}

/// manifest.sh's order (`LC_ALL=C sort -k3`): by the text from the path
/// on, then by the whole line.
pub fn sort_manifest(lines: Vec<String>) -> Vec<String> {
    let key = |l: &str| -> String {
        let b = l.as_bytes();
        let mut k = 0;
        for _ in 0..2 {
            while k < b.len() && b[k] == b' ' {
                k += 1;
            }
            while k < b.len() && b[k] != b' ' {
                k += 1;
            }
        }
        l[k..].to_string()
    };
    let mut keyed: Vec<(String, String)> = lines.into_iter().map(|l| (key(&l), l)).collect();
    keyed.sort();
    keyed.into_iter().map(|(_, l)| l).collect()
}

// ------------------------------------------------------------------ harness

/// One executed step: the operation and what the implementation answered.
#[derive(Clone, Debug)]
pub struct Step {
    pub op: Op,
    pub out: Outcome,
}

/// The first place the implementation left the model's envelope.
#[derive(Clone, Debug)]
pub struct Divergence {
    /// The steps up to and including the divergent one.
    pub steps: Vec<Step>,
    /// What went wrong, in words.
    pub what: String,
    /// What the model allowed there.
    pub allowed: Vec<String>,
    /// The implementation's own account of its last error, or the durable
    /// view it showed, if any.
    pub detail: Option<String>,
}

impl fmt::Display for Divergence {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "divergence after {} operations: {}",
            self.steps.len(),
            self.what
        )?;
        writeln!(f, "trace (model trace format, observed outcomes):")?;
        for s in &self.steps {
            let line = nilfs_model::Line {
                op: s.op.clone(),
                out: s.out.clone(),
            };
            writeln!(f, "  {}", line.to_json())?;
        }
        writeln!(f, "the model allowed:")?;
        for a in &self.allowed {
            writeln!(f, "  {a}")?;
        }
        if let Some(d) = &self.detail {
            writeln!(f, "the implementation: {d}")?;
        }
        Ok(())
    }
}

/// Most model states followed at once (a crash's envelope is at most one
/// per change since the last checkpoint, times two checkpoint tables).
const MAX_STATES: usize = 256;

/// Whether `op` leaves nothing pending, so the durable state is the whole
/// state and the abstraction can be compared.
fn settles(op: &Op) -> bool {
    matches!(op, Op::Sync | Op::Mkcp { .. } | Op::Mount { cp: None, .. })
}

fn show(o: &Outcome) -> String {
    match o {
        Outcome::Manifest(l) => format!("manifest {l:#?}"),
        _ => serde_json::to_string(o).expect("an outcome serialises"),
    }
}

/// The first differing line of two durable views, in words.
fn durable_diff(want: &Durable, got: &Durable) -> String {
    let lines = |what: &str, w: &[String], g: &[String]| -> Option<String> {
        if w == g {
            return None;
        }
        let k = w.iter().zip(g).take_while(|(a, b)| a == b).count();
        Some(format!(
            "{what}: {} lines in the model, {} observed; first difference at line {}: model {:?}, observed {:?}",
            w.len(),
            g.len(),
            k + 1,
            w.get(k),
            g.get(k)
        ))
    };
    if let Some(d) = lines("live tree", &want.live, &got.live) {
        return d;
    }
    let (wk, gk): (Vec<_>, Vec<_>) = (
        want.checkpoints.keys().collect(),
        got.checkpoints.keys().collect(),
    );
    if wk != gk {
        return format!("checkpoints: model {wk:?}, observed {gk:?}");
    }
    for (c, w) in &want.checkpoints {
        if let Some(d) = lines(&format!("checkpoint {c}"), w, &got.checkpoints[c]) {
            return d;
        }
    }
    "equal".into()
}

/// Runs `ops` against `sut` in lockstep with the model, starting from
/// `initial` (the model state after mkfs). Returns the executed steps, or
/// the first divergence.
pub fn run(sut: &mut dyn Sut, initial: State, ops: &[Op]) -> Result<Vec<Step>, Divergence> {
    let mut l = Lockstep::new(initial, OnInvalid::Panic);
    for op in ops {
        l.step(sut, op)?;
    }
    Ok(l.steps)
}

/// Runs a workload (`nilfs_model::workload` lines, checkpoint references
/// resolved from what `sut` answers) in lockstep with the model; its
/// `mkfs` line, if any, is skipped (the device is formatted already).
pub fn run_workload(
    sut: &mut dyn Sut,
    initial: State,
    lines: &[serde_json::Value],
    on_invalid: OnInvalid,
) -> Result<Vec<Step>, Divergence> {
    use nilfs_model::workload::{Resolver, Unresolved};
    let mut l = Lockstep::new(initial, on_invalid);
    let mut r = Resolver::default();
    for line in lines {
        let op = match r.resolve(line) {
            Ok(Op::Mkfs { .. }) => continue,
            Ok(op) => op,
            Err(Unresolved::Reference(_)) => {
                r.skipped(line);
                continue;
            }
            Err(e @ Unresolved::Malformed(_)) => panic!("a malformed workload line {line}: {e}"),
        };
        if let Some(out) = l.step(sut, &op)? {
            r.observe(&op, &out);
        }
    }
    Ok(l.steps)
}

/// What to do with an operation the model calls invalid (on a view that
/// is not mounted, say).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OnInvalid {
    /// A generated workload never has one: the generator is wrong.
    Panic,
    /// A workload cut down by shrinking may have one: leave it out.
    Skip,
}

/// The model states the observations so far allow, with their promises.
struct Lockstep {
    states: Vec<(State, Promises)>,
    steps: Vec<Step>,
    on_invalid: OnInvalid,
}

impl Lockstep {
    fn new(initial: State, on_invalid: OnInvalid) -> Self {
        Lockstep {
            states: vec![(initial, Promises::default())],
            steps: Vec::new(),
            on_invalid,
        }
    }

    /// Sends `op` (unless no state allows sending it) and checks the
    /// outcome; returns it, or `None` if the operation was not sent.
    fn step(&mut self, sut: &mut dyn Sut, op: &Op) -> Result<Option<Outcome>, Divergence> {
        // rmcp of the latest checkpoint: the kernel's ioctl deletes it, the
        // model refuses it (a model rule, docs/model.md). Outside the
        // model, so not sent.
        if let Op::Rmcp { cno } = op {
            if self.states.iter().any(|(s, _)| s.latest().0 == *cno) {
                return Ok(None);
            }
        }
        // An operation on a snapshot mount is sent only while it is mounted
        // (a generated `mount -o cp=` may have failed): elsewhere the model
        // calls it invalid, a shell would have no such path.
        if let Some(c) = op.at() {
            if !self
                .states
                .iter()
                .all(|(s, _)| s.snapshot_mounts.contains(&c))
            {
                return Ok(None);
            }
        }
        if self.on_invalid == OnInvalid::Skip
            && self.states.iter().all(|(s, _)| {
                step(s, op)
                    .iter()
                    .all(|b| matches!(b.expect, nilfs_model::Expect::Invalid(_)))
            })
        {
            return Ok(None);
        }
        let out = sut.apply(op);
        self.steps.push(Step {
            op: op.clone(),
            out: out.clone(),
        });
        let mut next: Vec<(State, Promises)> = Vec::new();
        let mut allowed: Vec<String> = Vec::new();
        for (s, promises) in &self.states {
            for b in step(s, op) {
                if let nilfs_model::Expect::Invalid(why) = &b.expect {
                    panic!("the generator produced an operation the model calls invalid ({why}): {op:?}");
                }
                let accepted = b.accept_all(&out);
                if accepted.is_empty() {
                    allowed.push(match &b.expect {
                        nilfs_model::Expect::Exact(o) => show(o),
                        e => format!("{e:?}"),
                    });
                }
                for n in accepted {
                    let mut p = promises.clone();
                    if let Err(law) = check_transition(s, op, &out, &n, &mut p) {
                        panic!("the model broke its own {law} on {op:?}");
                    }
                    if !next.iter().any(|(m, _)| *m == n) {
                        next.push((n, p));
                    }
                }
            }
        }
        if next.is_empty() {
            allowed.dedup();
            return Err(Divergence {
                what: format!("observed {}", show(&out)),
                steps: self.steps.clone(),
                allowed,
                detail: sut.detail(),
            });
        }
        assert!(
            next.len() <= MAX_STATES,
            "envelope too large: {}",
            next.len()
        );
        self.states = next;
        let mounted = self
            .states
            .iter()
            .any(|(s, _)| s.mount == Some(Mount::ReadWrite));
        if settles(op) && mounted && matches!(out, Outcome::Ok | Outcome::Cno(_)) {
            let got = sut.durable().map_err(|e| Divergence {
                what: format!("the abstraction function failed: {e}"),
                steps: self.steps.clone(),
                allowed: vec!["a readable image".into()],
                detail: sut.detail(),
            })?;
            let first = model_durable(&self.states[0].0);
            self.states.retain(|(s, _)| model_durable(s) == got);
            if self.states.is_empty() {
                return Err(Divergence {
                    what: format!(
                        "the durable state read through the read path differs: {}",
                        durable_diff(&first, &got)
                    ),
                    steps: self.steps.clone(),
                    allowed: vec![format!("{first:#?}")],
                    detail: Some(format!("{got:#?}")),
                });
            }
        }
        Ok(Some(out))
    }
}
