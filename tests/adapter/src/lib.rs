//! nilfs-adapter: nilfs-ref driven by the model's operations.
//!
//! [`ImplUnderTest`] executes a model [`Op`] on a device through nilfs-ref
//! and reports the observed [`Outcome`]; [`ImplUnderTest::durable`] is the
//! abstraction function, the device read back through the read path. The
//! conformance harness (`nilfs_conformance::lockstep`) runs it in lockstep
//! with the model; `nilref apply` runs it on an image and records what it
//! observed. Together with the harness it is the only code that knows both
//! the model and the implementation (docs/ARCHITECTURE.md); it is a crate of
//! its own so that the CLI does not depend on the test harness.
//!
//! What it adds to the implementation is only the mapping: the path-level
//! calls, with the VFS's walk and refusals, are nilfs-ref's own
//! ([`nilfs::fs::path`]); the mount table here is what a shell would do
//! with `mount`, `umount` and a power cut; errnos and stat fields are
//! translated by name.

use std::collections::{BTreeMap, HashMap};
use std::fmt;

use nilfs::device::BlockDevice;
use nilfs::format::cpfile::Checkpoint;
use nilfs::format::inode::{
    Inode, S_IFBLK, S_IFCHR, S_IFDIR, S_IFIFO, S_IFLNK, S_IFMT, S_IFREG, S_IFSOCK,
};
use nilfs::format::Cno;
use nilfs::fs::Fs;
use nilfs::inspect::manifest::DigestMemo;
use nilfs::posix::CheckpointView;
use nilfs::the_nilfs::Nilfs;
use nilfs_model::pattern::sha256_hex;
use nilfs_model::{Errno, FileType, Op, Outcome, Pattern, StatInfo};
use sha2::{Digest, Sha256};

pub use nilfs_oracle::{Durable, Sut, NS};

mod fuse;
mod kernel;
mod ours;
pub use fuse::{mounted, unmount, FuseMount};

/// The durable state of the image file a mount or a guest wrote, read by
/// our read path. An image file that cannot be opened is the harness's
/// failure (`cannot`, for `Sut::undecided`); one that does not read back
/// is the implementation's.
fn durable_of_image(
    image: &std::path::Path,
    cannot: &mut Option<String>,
) -> Result<Durable, String> {
    *cannot = None;
    let dev = nilfs::device::FileDevice::open_read_only(image).map_err(|e| {
        let why = format!("{}: {e}", image.display());
        *cannot = Some(why.clone());
        why
    })?;
    let durable = ImplUnderTest::from_device(&dev, 0).read_durable();
    durable
}
pub use kernel::KernelGuest;
pub use ours::{format, Ours};

type R<T> = Result<T, Errno>;

/// The piece a write or read is made in (as `nilref exec`'s runner does).
const PIECE: u64 = 1 << 20;

/// nilfs-ref under test: a device, the mounted `Fs` while mounted, and the
/// snapshot mounts (`mount -o ro,cp=N`), each kept as the image it reads.
pub struct ImplUnderTest<'d> {
    dev: &'d dyn BlockDevice,
    fs: Option<Fs<'d>>,
    /// The injected clock, nanoseconds (a `clock` line's time exactly:
    /// inode times carry nanoseconds, as the model holds them).
    now_ns: u64,
    last_error: Option<String>,
    /// Read-only snapshot mounts, by checkpoint number: the image as it
    /// was mounted and the checkpoint entry it was mounted with.
    snaps: BTreeMap<u64, (Nilfs<'d>, Checkpoint)>,
    /// Called on every read-write mount (a tuning or a known-bad switch).
    on_mount: Option<fn(&mut Fs<'d>)>,
    /// The last answer of [`ImplUnderTest::durable`], with the device's
    /// write generation it was read at.
    last_durable: Option<(u64, Durable)>,
    /// The page digests of the file contents [`ImplUnderTest::durable`]
    /// has read, by the exact input hashed.
    digests: DigestMemo,
    /// What each checkpoint's check read at the last
    /// [`ImplUnderTest::durable`] (`nilfs::check::Memo`).
    check_memo: nilfs::check::Memo,
    /// The manifest lines of each checkpoint at the last
    /// [`ImplUnderTest::durable`], by checkpoint number.
    cp_lines: HashMap<u64, Vec<String>>,
}

impl<'d> ImplUnderTest<'d> {
    /// An adapter for whatever file system `dev` holds (unmounted; the
    /// first `mount` operation opens it), with the injected clock at `now`
    /// seconds. `Op::Clock` moves the clock on; nothing else does, so the
    /// observed times are deterministic.
    pub fn from_device(dev: &'d dyn BlockDevice, now: u64) -> Self {
        ImplUnderTest {
            dev,
            fs: None,
            now_ns: now.saturating_mul(NS as u64),
            last_error: None,
            snaps: BTreeMap::new(),
            on_mount: None,
            last_durable: None,
            digests: DigestMemo::default(),
            check_memo: nilfs::check::Memo::default(),
            cp_lines: HashMap::new(),
        }
    }

    /// Known-bad, for the tests that show the memo of
    /// [`ImplUnderTest::durable`] is one: skip every checkpoint checked
    /// before without looking at whether anything it reaches changed.
    #[doc(hidden)]
    pub fn known_bad_blind_memo(mut self) -> Self {
        self.check_memo.known_bad_blind();
        self
    }

    /// Start from the page digests another adapter computed (its
    /// [`ImplUnderTest::take_digests`]): a crash enumeration runs a fresh
    /// adapter per cut point on images that hold mostly the same files.
    /// Answers are unchanged ([`DigestMemo`] is exact).
    pub fn with_digests(mut self, digests: DigestMemo) -> Self {
        self.digests = digests;
        self
    }

    /// The page digests this adapter remembers, for the next one.
    pub fn take_digests(&mut self) -> DigestMemo {
        std::mem::take(&mut self.digests)
    }

    /// Call `f` on every read-write mount's `Fs` before its first
    /// operation (`Fs::set_inode_cache_limit`, a known-bad switch).
    pub fn on_mount(mut self, f: fn(&mut Fs<'d>)) -> Self {
        self.on_mount = Some(f);
        self
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

    /// Runs `f` on the mounted `Fs`, mapping its error.
    fn with<T>(&mut self, f: impl FnOnce(&mut Fs<'d>) -> nilfs::Result<T>) -> R<T> {
        let Some(fs) = self.fs.as_mut() else {
            self.last_error = Some("not mounted".into());
            return Err(Errno::EIO);
        };
        f(fs).map_err(|e| self.errno(e))
    }

    fn mount(&mut self, ro: bool) -> R<()> {
        if self.fs.is_some() {
            return Err(Errno::EBUSY);
        }
        let nilfs = Nilfs::open(self.dev).map_err(|e| self.errno(e))?;
        let secs = self.now_ns / NS as u64;
        let mut fs = if ro {
            Fs::mount_read_only(&nilfs, secs)
        } else {
            Fs::mount(&nilfs, secs)
        }
        .map_err(|e| self.errno(e))?;
        fs.set_time_ns(self.now_ns);
        if let (false, Some(f)) = (ro, self.on_mount) {
            f(&mut fs);
        }
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
        let list = match self.fs.as_mut() {
            Some(fs) => fs.lscp(),
            None => Nilfs::open(self.dev).and_then(|n| n.checkpoints(Cno(c))),
        }
        .map_err(|e| self.errno(e))?;
        if !list.iter().any(|cp| cp.cno.0 == c && cp.is_snapshot()) {
            return Err(Errno::EINVAL);
        }
        let nilfs = Nilfs::open(self.dev).map_err(|e| self.errno(e))?;
        let cp = CheckpointView::open(&nilfs, Some(Cno(c)))
            .map_err(|e| self.errno(e))?
            .checkpoint()
            .clone();
        self.snaps.insert(c, (nilfs, cp));
        Ok(())
    }

    /// A read-only operation on a mounted snapshot, through the read path.
    fn snapshot_read(&mut self, c: u64, op: &Op) -> R<Outcome> {
        let (nilfs, cp) = self.snaps.get(&c).ok_or(Errno::EINVAL)?;
        let view = CheckpointView::with_checkpoint(nilfs, cp.clone());
        let r = (|| -> nilfs::Result<Outcome> {
            let refuse = |errno, path: &str| Err(nilfs::Error::errno(errno, path.to_string()));
            Ok(match op {
                Op::Read {
                    path, offset, len, ..
                } => {
                    let (_, inode) = view.resolve(path.as_bytes(), true)?;
                    if inode.mode & S_IFMT == S_IFDIR {
                        return refuse(nilfs::Errno::EISDIR, path);
                    }
                    data(&view.read(&inode, *offset, *len)?)
                }
                Op::Lstat { path, .. } => {
                    Outcome::Stat(stat_info(&view.resolve(path.as_bytes(), false)?.1))
                }
                Op::Readdir { path, .. } => {
                    let (_, inode) = view.resolve(path.as_bytes(), true)?;
                    if inode.mode & S_IFMT != S_IFDIR {
                        return refuse(nilfs::Errno::ENOTDIR, path);
                    }
                    let names = view.readdir(&inode)?.into_iter().map(|e| e.name);
                    Outcome::Names(names_of(names.filter(|n| n != b"." && n != b"..")))
                }
                Op::Readlink { path, .. } => {
                    let (_, inode) = view.resolve(path.as_bytes(), false)?;
                    if inode.mode & S_IFMT != S_IFLNK {
                        return refuse(nilfs::Errno::EINVAL, path);
                    }
                    Outcome::Target(String::from_utf8_lossy(&view.readlink(&inode)?).into_owned())
                }
                Op::Manifest { .. } => {
                    Outcome::Manifest(lines(&nilfs::inspect::manifest::manifest(&view)?))
                }
                _ => return refuse(nilfs::Errno::EROFS, "snapshot"),
            })
        })();
        r.map_err(|e| self.errno(e))
    }

    /// A write as `nilref exec` makes it on a mounted file system: `pwrite`
    /// in pieces of [`PIECE`] bytes, stopping at the first short or failed
    /// piece (whose error is the answer only if nothing was written), so
    /// memory stays one piece whatever the pattern's length.
    fn write_pieces(&mut self, path: &str, offset: Option<u64>, data: &Pattern) -> R<u64> {
        let total = data.len();
        let mut buf = vec![0u8; total.min(PIECE) as usize];
        let mut done = 0u64;
        loop {
            let n = (total - done).min(PIECE) as usize;
            data.fill(done, &mut buf[..n]);
            let piece = &buf[..n];
            let wrote = match offset {
                Some(o) => {
                    let at = o.saturating_add(done);
                    self.with(|fs| fs.paths().write(path.as_bytes(), at, piece))
                }
                // O_APPEND: each write(2) goes to the end.
                None => self.with(|fs| fs.paths().append(path.as_bytes(), piece)),
            };
            match wrote {
                Ok(k) => {
                    done += k;
                    if k < n as u64 || done == total {
                        return Ok(done);
                    }
                }
                Err(e) if done == 0 => return Err(e),
                Err(_) => {
                    self.last_error = None;
                    return Ok(done);
                }
            }
        }
    }

    /// A read as `nilref exec` makes it: `pread` in pieces, hashed as they
    /// come, so memory stays one piece whatever the length asked for.
    fn read_pieces(&mut self, path: &str, offset: u64, len: u64) -> R<Outcome> {
        let mut h = Sha256::new();
        let mut got = 0u64;
        loop {
            let want = (len - got).min(PIECE);
            let at = offset.saturating_add(got);
            let d = self.with(|fs| fs.paths().read(path.as_bytes(), at, want))?;
            h.update(&d);
            got += d.len() as u64;
            if d.is_empty() || got == len {
                break;
            }
        }
        Ok(Outcome::Data {
            len: got,
            sha256: h.finalize().iter().map(|b| format!("{b:02x}")).collect(),
        })
    }

    /// Executes one operation (those of the generated alphabet; see
    /// tests/tests/lockstep.rs for which).
    fn exec(&mut self, op: &Op) -> Result<Outcome, Stop> {
        Ok(match op {
            Op::Clock { now } => {
                self.now_ns = (*now).max(0) as u64;
                if let Some(fs) = self.fs.as_mut() {
                    fs.set_time_ns(self.now_ns);
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
            Op::Sync => self.with(|fs| fs.sync()).map(ok)?,
            Op::Mkcp { snapshot } => Outcome::Cno(self.with(|fs| fs.mkcp(*snapshot))?.0),
            Op::Chcp { cno, snapshot } => {
                let mounted: Vec<Cno> = self.snaps.keys().map(|&c| Cno(c)).collect();
                self.with(|fs| fs.chcp_with_mounted(Cno(*cno), *snapshot, &mounted))
                    .map(ok)?
            }
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
            Op::Rmcp { cno } => self.with(|fs| fs.rmcp(Cno(*cno))).map(ok)?,
            Op::Create {
                path,
                perm,
                excl,
                at: None,
            } => self
                .with(|fs| fs.paths().create(path.as_bytes(), *perm as u16, *excl))
                .map(ok)?,
            Op::Mkdir {
                path,
                perm,
                at: None,
            } => self
                .with(|fs| fs.paths().mkdir(path.as_bytes(), *perm as u16))
                .map(ok)?,
            Op::Write {
                path,
                offset,
                data,
                append,
                at: None,
            } => Outcome::Written(self.write_pieces(path, (!*append).then_some(*offset), data)?),
            Op::Chmod {
                path,
                perm,
                at: None,
            } => self
                .with(|fs| fs.paths().chmod(path.as_bytes(), *perm as u16))
                .map(ok)?,
            Op::Chown {
                path,
                uid,
                gid,
                follow,
                at: None,
            } => self
                .with(|fs| fs.paths().chown(path.as_bytes(), *uid, *gid, *follow))
                .map(ok)?,
            Op::Utimes {
                path,
                mtime,
                follow,
                at: None,
            } => self
                .with(|fs| fs.paths().utimes(path.as_bytes(), *mtime, *follow))
                .map(ok)?,
            Op::Mknod {
                path,
                file_type,
                perm,
                rdev,
                at: None,
            } => {
                let mode = mode_of(*file_type) | (*perm as u16 & 0o7777);
                self.with(|fs| fs.paths().mknod(path.as_bytes(), mode, *rdev))
                    .map(ok)?
            }
            Op::Statfs { at: None } => {
                let st = self.with(|fs| fs.statfs())?;
                Outcome::Statfs(nilfs_model::StatfsInfo {
                    bsize: st.bsize,
                    blocks: st.blocks,
                    bfree: st.bfree,
                    bavail: st.bavail,
                    files: st.files,
                    ffree: st.ffree,
                    namelen: st.namelen,
                })
            }
            Op::Read {
                path,
                offset,
                len,
                at: None,
            } => self.read_pieces(path, *offset, *len)?,
            Op::Lstat { path, at: None } => Outcome::Stat(stat_info(
                &self.with(|fs| fs.paths().lstat(path.as_bytes()))?,
            )),
            Op::Readdir { path, at: None } => Outcome::Names(names_of(
                self.with(|fs| fs.paths().readdir(path.as_bytes()))?,
            )),
            Op::Manifest { at: None } => Outcome::Manifest(lines(
                &self.with(|fs| nilfs::inspect::manifest::live_manifest(fs))?,
            )),
            Op::Unlink { path, at: None } => {
                self.with(|fs| fs.paths().unlink(path.as_bytes())).map(ok)?
            }
            Op::Rmdir { path, at: None } => {
                self.with(|fs| fs.paths().rmdir(path.as_bytes())).map(ok)?
            }
            Op::Symlink {
                target,
                path,
                at: None,
            } => self
                .with(|fs| fs.paths().symlink(target.as_bytes(), path.as_bytes()))
                .map(ok)?,
            Op::Link { old, new, at: None } => self
                .with(|fs| fs.paths().link(old.as_bytes(), new.as_bytes()))
                .map(ok)?,
            Op::Rename {
                old,
                new,
                noreplace,
                exchange,
                at: None,
            } => self
                .with(|fs| {
                    fs.paths()
                        .rename_flags(old.as_bytes(), new.as_bytes(), *noreplace, *exchange)
                })
                .map(ok)?,
            Op::Setxattr {
                path,
                name,
                follow,
                at: None,
                ..
            }
            | Op::Removexattr {
                path,
                name,
                follow,
                at: None,
            }
            | Op::Getxattr {
                path,
                name,
                follow,
                at: None,
            } => {
                // Only the attribute's checks are modelled: set and remove
                // write, get reads.
                let write = !matches!(op, Op::Getxattr { .. });
                self.with(|fs| {
                    fs.paths()
                        .xattr(path.as_bytes(), name.as_bytes(), *follow, write)
                })
                .map(ok)?
            }
            Op::Listxattr {
                path,
                follow,
                at: None,
            } => Outcome::Names(names_of(
                self.with(|fs| fs.paths().listxattr(path.as_bytes(), *follow))?,
            )),
            Op::Truncate {
                path,
                size,
                at: None,
            } => self
                .with(|fs| fs.paths().truncate(path.as_bytes(), *size))
                .map(ok)?,
            Op::Readlink { path, at: None } => {
                let t = self.with(|fs| fs.paths().readlink(path.as_bytes()))?;
                Outcome::Target(String::from_utf8_lossy(&t).into_owned())
            }
            Op::Fsync { path, at: None } => {
                self.with(|fs| fs.paths().fsync(path.as_bytes())).map(ok)?
            }
            Op::Fdatasync { path, at: None } => self
                .with(|fs| fs.paths().fdatasync(path.as_bytes()))
                .map(ok)?,
            // nilfs-clean -p P with cleanerd's default nsegments_per_clean.
            Op::Clean { protection_s } => self
                .with(|fs| nilfs::cleaner::clean(fs, *protection_s, 2))
                .map(ok)?,
            // To add an operation once `Fs` has it: one arm here and one
            // line in the generator (nilfs_workload::gen).
            _ => return Err(Stop::Unsupported),
        })
    }

    /// The abstraction function: the device read through the read path.
    ///
    /// It reads nothing but the device, so where the device counts its
    /// writes ([`BlockDevice::write_generation`]) and none has come since
    /// the last answer, that answer is returned again: reading the same
    /// bytes again would give it. A sync with nothing to write and a mount
    /// write nothing; in the throughput bench's lockstep run, 278 of the
    /// 1,428 calls came with no write since the call before. File
    /// contents hashed at an earlier call are not hashed again
    /// ([`DigestMemo`]).
    ///
    /// Where the device also says which blocks changed
    /// ([`BlockDevice::last_change`]), a checkpoint is checked and read
    /// back only if something it reaches changed since the last call
    /// ([`nilfs::check::Memo`]: its cpfile entry's ifile inode, the DAT
    /// entry of a block it reaches, or one of those blocks); otherwise its
    /// manifest is the last call's. A checkpoint's read-back translates
    /// only blocks its check translated (a check that found nothing has
    /// seen every directory entry name an allocated inode, whose mapping it
    /// walked), and reads only their disk blocks, so the same inputs give
    /// the same lines. Each answer is the one [`ImplUnderTest::read_durable`]
    /// gives (tests/tests/lockstep.rs compares them over generated cases).
    pub fn durable(&mut self) -> Result<Durable, String> {
        let generation = self.dev.write_generation();
        if let (Some(now), Some((then, last))) = (generation, &self.last_durable) {
            if now == *then {
                return Ok(last.clone());
            }
        }
        let d = self.read(true);
        if d.is_err() {
            self.check_memo.clear();
            self.cp_lines.clear();
        }
        let d = d?;
        if let Some(now) = generation {
            self.last_durable = Some((now, d.clone()));
        }
        Ok(d)
    }

    /// The checkpoints the last [`ImplUnderTest::durable`] that read the
    /// device neither checked nor read back (nothing they reach changed).
    pub fn memo_skipped(&self) -> Vec<u64> {
        self.check_memo.skipped().iter().map(|c| c.0).collect()
    }

    /// [`ImplUnderTest::durable`], always read from the device, every
    /// checkpoint checked and read back.
    pub fn read_durable(&mut self) -> Result<Durable, String> {
        self.read(false)
    }

    /// The durable state read back; with `memo`, checkpoints whose inputs
    /// did not change since the last such call are neither checked nor
    /// read again.
    fn read(&mut self, memo: bool) -> Result<Durable, String> {
        // The image itself must be consistent, every checkpoint of it.
        let opts = nilfs::check::Options {
            checkpoints: nilfs::check::Checkpoints::All,
            ..Default::default()
        };
        // One open serves the check and the reading; a device that does
        // not open gets the whole check's report of why.
        let nilfs = match Nilfs::open(self.dev) {
            Ok(fs) => fs,
            Err(e) => {
                let report = nilfs::check::check_device(self.dev, &opts);
                return Err(format!("open: {e}\nnilref check:\n{report}"));
            }
        };
        let report = if memo {
            nilfs::check::check_opened_memo(&nilfs, &opts, &mut self.check_memo)
        } else {
            nilfs::check::check_opened(&nilfs, &opts)
        };
        if !report.is_clean() {
            return Err(format!("nilref check:\n{report}"));
        }
        // The lines of the checkpoints the check skipped: unchanged.
        let mut unchanged: HashMap<u64, Vec<String>> = HashMap::new();
        if memo {
            for c in self.check_memo.skipped() {
                if let Some(l) = self.cp_lines.remove(&c.0) {
                    unchanged.insert(c.0, l);
                }
            }
        }
        let digests = &mut self.digests;
        let mut view_manifest = |cno: Option<Cno>| -> Result<Vec<String>, String> {
            let view = CheckpointView::open(&nilfs, cno).map_err(|e| format!("cp {cno:?}: {e}"))?;
            // The page digest, as the harness's model side computes it; a
            // file's input hashed before is answered from memory.
            let m = nilfs::inspect::manifest::manifest_pages_memo(&view, digests)
                .map_err(|e| format!("manifest of cp {cno:?}: {e}"))?;
            Ok(lines(&m))
        };
        let mut checkpoints = BTreeMap::new();
        for cp in nilfs
            .checkpoints(Cno(1))
            .map_err(|e| format!("cpfile: {e}"))?
        {
            let l = match unchanged.remove(&cp.cno.0) {
                Some(l) => l,
                None => view_manifest(Some(cp.cno))?,
            };
            checkpoints.insert(cp.cno.0, Some(l));
        }
        // The live tree is the latest checkpoint's (`CheckpointView::open`
        // of `None`), read above if the cpfile lists it.
        let live = match checkpoints.get(&nilfs.scan.cno.0) {
            Some(Some(l)) => l.clone(),
            _ => view_manifest(None)?,
        };
        if memo {
            self.cp_lines = checkpoints
                .iter()
                .filter_map(|(c, l)| Some((*c, l.clone()?)))
                .collect();
        }
        Ok(Durable { live, checkpoints })
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

/// An operation [`ImplUnderTest`] cannot execute (yet): remount, a
/// read-write checkpoint mount, a change or a statfs on a snapshot (`at`),
/// or a second mkfs.
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
pub fn stat_info(raw: &Inode) -> StatInfo {
    let file_type = match raw.mode & S_IFMT {
        S_IFDIR => FileType::Dir,
        S_IFLNK => FileType::Symlink,
        S_IFIFO => FileType::Fifo,
        S_IFSOCK => FileType::Socket,
        S_IFCHR => FileType::CharDevice,
        S_IFBLK => FileType::BlockDevice,
        _ => FileType::File,
    };
    StatInfo {
        file_type,
        // nilfs_read_inode_common reads i_size for every type; a special
        // file's is 0 as nilfs_new_inode left it.
        size: raw.size,
        nlink: u32::from(raw.links_count),
        perm: u32::from(raw.mode & 0o7777),
        mtime: Some(raw.mtime_ns()),
        ctime: Some(raw.ctime_ns()),
        uid: Some(raw.uid),
        gid: Some(raw.gid),
        rdev: raw.rdev(),
    }
}

/// The `S_IF*` bits of a file type.
fn mode_of(t: FileType) -> u16 {
    match t {
        FileType::File => S_IFREG,
        FileType::Dir => S_IFDIR,
        FileType::Symlink => S_IFLNK,
        FileType::Fifo => S_IFIFO,
        FileType::Socket => S_IFSOCK,
        FileType::CharDevice => S_IFCHR,
        FileType::BlockDevice => S_IFBLK,
    }
}

/// `Outcome::Ok`, whatever the call returned.
fn ok<T>(_: T) -> Outcome {
    Outcome::Ok
}

/// A read's outcome: its length and digest.
fn data(d: &[u8]) -> Outcome {
    Outcome::Data {
        len: d.len() as u64,
        sha256: sha256_hex(d),
    }
}

/// Directory entry names as the model has them.
fn names_of(names: impl IntoIterator<Item = Vec<u8>>) -> Vec<String> {
    names
        .into_iter()
        .map(|n| String::from_utf8_lossy(&n).into_owned())
        .collect()
}

/// A manifest's lines.
fn lines(manifest: &str) -> Vec<String> {
    manifest.lines().map(str::to_string).collect()
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
        I::ERANGE => Errno::ERANGE,
        I::ENODATA => Errno::ENODATA,
        I::EOPNOTSUPP => Errno::EOPNOTSUPP,
        I::ENOTTY => Errno::ENOTTY,
        // A stale handle is never a user-visible answer of a path call.
        I::ESTALE => Errno::EIO,
    }
}
