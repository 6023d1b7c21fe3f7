//! `nilref exec DIR WORKLOAD [-o OBSERVED] [--device DEV]`: a trace runner
//! for any mounted file system. Each workload line goes through real system
//! calls on the mount at DIR; what came back (the errno included) is
//! recorded in the trace format the oracle reads.
//!
//! - Paths are the workload's, inside the file system: the runner
//!   `chroot`s into the view an operation names (the mount at DIR, or a
//!   `cp=N` snapshot mount), so `..` at the top and absolute symlink
//!   targets stay inside it, as they do for the model. It must run as root
//!   (chroot, mount, and the checkpoint ioctls need CAP_SYS_ADMIN).
//! - Checkpoint operations use NILFS2's ioctls directly, as the nilfs-tools
//!   do (module `nilfs_ioctl`): mkcp = `NILFS_IOCTL_SYNC` (then
//!   `CHANGE_CPMODE` for `-s`), chcp = `CHANGE_CPMODE`, rmcp =
//!   `DELETE_CHECKPOINT`, lscp = `GET_CPINFO` with lscp's filter (minor
//!   checkpoints that are not snapshots are hidden). The cleaner is the
//!   nilfs-tools' own: `nilfs_cleanerd -p P` started for the pass,
//!   `nilfs-clean -p P`, wait until it is idle, `nilfs-clean -q`.
//! - The observed trace starts with an `mkfs` line read from the device's
//!   super block (geometry), whether DIR holds `/.nilfs`, and the root's
//!   mtime as the model's clock at mkfs (so a fresh file system's times
//!   compare). A `mount` line follows: DIR is mounted read-write.
//! - The kernel's clock cannot be set: `clock` lines of the workload are
//!   dropped, and the runner writes its own before an operation whenever
//!   `CLOCK_REALTIME_COARSE` (the clock `current_time()` stamps inodes
//!   with) has moved 100 ms or more since the last one.
//! - Without `--device`, mount, umount, remount and crash cannot run: a
//!   leading `mount` is the mount DIR already is, a trailing `umount` is
//!   left out (the file system stays mounted), anything else stops the run
//!   naming the line. With `--device DEV`, DIR may start unmounted; mounts
//!   of DEV at DIR (`-o ro`, remount) and snapshot mounts at a runner-owned
//!   folder run as the workload says. A crash never does.
//! - Checkpoint references resolve from the outcomes observed so far
//!   (`nilfs_workload`); a line whose reference cannot be resolved,
//!   or that reads a snapshot view that is not mounted, is not run.
//! - With `--mark-log-writes DMNAME` (DIR's device is a dm-log-writes
//!   target of that name, see `campaign::crash`), the runner puts a mark
//!   `op-K` into the write log before it runs the operation that becomes
//!   line K (0-based) of the observed trace: `dmsetup message DMNAME 0 mark
//!   op-K`, which returns once the mark is queued behind every write that
//!   has completed. Whatever the log holds before mark `op-K` was written
//!   before operation K began.

pub(crate) mod nilfs_ioctl;

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use nilfs::format::superblock::SuperBlock;
use nilfs_model::{CpEntry, Errno, FileType, Line, Op, Outcome, Pattern, StatInfo};
use nilfs_workload::{self as workload, Resolver, Unresolved};
use rustix::fd::{AsFd, OwnedFd};
use rustix::fs::{AtFlags, Mode, OFlags, Timestamps, CWD};
use rustix::io::Errno as SysErrno;
use rustix::time::Timespec;
use sha2::{Digest, Sha256};

/// Where the runner writes and what it may do.
pub struct ExecOptions<'a> {
    pub dir: &'a Path,
    pub workload: &'a Path,
    pub out: Option<&'a Path>,
    pub device: Option<&'a Path>,
    /// The dm-log-writes target to mark before each operation.
    pub mark_log_writes: Option<&'a str>,
}

/// One clock line at most this often (ns): the model allows observed
/// times up to one second after its clock.
const CLOCK_STEP_NS: i64 = 100_000_000;
/// Bytes moved per read/write system call.
const CHUNK: usize = 1 << 20;

type R<T> = Result<T, Errno>;

fn errno(e: SysErrno) -> Errno {
    Errno::from_linux(e.raw_os_error())
}

/// Runs the workload; returns the observed trace (no `-o`) or a summary.
pub fn run(opts: &ExecOptions<'_>) -> Result<String, String> {
    let text = std::fs::read_to_string(opts.workload)
        .map_err(|e| format!("{}: {e}", opts.workload.display()))?;
    let lines = workload::parse(&text)
        .map_err(|(n, m)| format!("{} line {n}: {m}", opts.workload.display()))?;
    let mut runner = Runner::new(opts)?;
    let mut observed: Vec<Line> = Vec::new();
    let describe = match runner.describe() {
        Ok(op) => op,
        // Not NILFS2 underneath (tmpfs, a FUSE file system under test):
        // the workload's own mkfs line says what the trace is judged as.
        Err(why) => match lines.first().map(|(_, v)| resolver_free(v)) {
            Some(Ok(op @ Op::Mkfs { .. })) => {
                eprintln!("nilref exec: {why}; judging it as the workload's mkfs line says");
                with_root(
                    op,
                    runner.root_mtime().unwrap_or(0),
                    runner.dir.join(".nilfs").exists(),
                )
            }
            _ => return Err(why),
        },
    };
    observed.push(Line {
        op: describe,
        out: Outcome::Ok,
    });
    if let Some(ro) = runner.mounted_read_only() {
        observed.push(Line {
            op: Op::Mount { cp: None, ro },
            out: Outcome::Ok,
        });
    }
    let mut resolver = Resolver::default();
    let last = lines.len().saturating_sub(1);
    let mut skipped = 0usize;
    let mut result = Ok(());
    for (k, (n, line)) in lines.iter().enumerate() {
        let op = match resolver.resolve(line) {
            Ok(op) => op,
            Err(u @ Unresolved::Malformed(_)) => {
                result = Err(format!("{} line {n}: {u}", opts.workload.display()));
                break;
            }
            Err(Unresolved::Reference(_)) => {
                resolver.skipped(line);
                skipped += 1;
                continue;
            }
        };
        match &op {
            Op::Mkfs { .. } if k == 0 => continue,
            Op::Clock { .. } => continue,
            Op::Mount { cp: None, .. } if k <= 1 && runner.mounted => continue,
            Op::Umount { cp: None } if k == last && opts.device.is_none() => continue,
            _ => {}
        }
        if let Some(c) = op.at() {
            if !runner.snapshots.iter().any(|(s, _)| *s == c) {
                skipped += 1;
                continue;
            }
        }
        if let Some(now) = runner.clock_line() {
            observed.push(Line {
                op: Op::Clock { now },
                out: Outcome::Ok,
            });
        }
        if let Some(dm) = opts.mark_log_writes {
            if let Err(why) = runner.mark(dm, observed.len()) {
                result = Err(format!("{} line {n}: {why}", opts.workload.display()));
                break;
            }
        }
        let out = match runner.exec(&op) {
            Ok(o) => o,
            Err(Stop::Errno(e)) => Outcome::Err(e),
            Err(Stop::Cannot(why)) => {
                result = Err(format!("{} line {n}: {why}", opts.workload.display()));
                break;
            }
        };
        resolver.observe(&op, &out);
        observed.push(Line { op, out });
    }
    runner.finish();
    result?;
    let text: String = observed.iter().map(|l| l.to_json() + "\n").collect();
    match opts.out {
        None => Ok(text),
        Some(o) => {
            std::fs::write(o, &text).map_err(|e| format!("{}: {e}", o.display()))?;
            Ok(format!(
                "{}: ran {} lines ({skipped} not run: unresolved references or views not mounted); observed trace in {}\n",
                opts.dir.display(),
                observed.len(),
                o.display()
            ))
        }
    }
}

/// A line without references, as an operation.
fn resolver_free(v: &serde_json::Value) -> Result<Op, Unresolved> {
    Resolver::default().resolve(v)
}

fn with_root(op: Op, at: i64, has_dot_nilfs: bool) -> Op {
    match op {
        Op::Mkfs {
            block_size,
            blocks_per_segment,
            nsegments,
            r_segments_percentage,
            ..
        } => Op::Mkfs {
            block_size,
            blocks_per_segment,
            nsegments,
            r_segments_percentage,
            dot_nilfs: has_dot_nilfs,
            clock: at,
        },
        other => other,
    }
}

#[derive(Debug)]
enum Stop {
    Errno(Errno),
    Cannot(String),
}

impl From<Errno> for Stop {
    fn from(e: Errno) -> Self {
        Stop::Errno(e)
    }
}

impl From<SysErrno> for Stop {
    fn from(e: SysErrno) -> Self {
        Stop::Errno(errno(e))
    }
}

/// Which root the process is in.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Root {
    Host,
    Live,
    Snapshot(u64),
}

struct Runner<'a> {
    opts: &'a ExecOptions<'a>,
    /// The host's root, to come back to from a chroot.
    host: OwnedFd,
    /// The working directory the runner started in (relative paths of its
    /// own arguments are relative to it).
    cwd: OwnedFd,
    /// DIR, absolute, as the host sees it.
    dir: PathBuf,
    /// The device DIR's file system lives on.
    device: PathBuf,
    mounted: bool,
    /// Mounted snapshots and their folders' fds.
    snapshots: Vec<(u64, OwnedFd)>,
    /// The folder holding the snapshot mount points (created on demand).
    snap_base: PathBuf,
    root: Root,
    live: Option<OwnedFd>,
    last_clock: Option<i64>,
}

impl<'a> Runner<'a> {
    fn new(opts: &'a ExecOptions<'a>) -> Result<Self, String> {
        let dir =
            std::fs::canonicalize(opts.dir).map_err(|e| format!("{}: {e}", opts.dir.display()))?;
        let host = rustix::fs::open("/", OFlags::RDONLY | OFlags::DIRECTORY, Mode::empty())
            .map_err(|e| format!("/: {e}"))?;
        let cwd = rustix::fs::open(".", OFlags::RDONLY | OFlags::DIRECTORY, Mode::empty())
            .map_err(|e| format!(".: {e}"))?;
        let mounted_from = mount_source(&dir);
        let device = match (opts.device, &mounted_from) {
            (Some(d), _) => d.to_path_buf(),
            (None, Some(src)) => PathBuf::from(src),
            (None, None) => {
                return Err(format!(
                    "{} is not a mount point; give --device to let the runner mount it",
                    dir.display()
                ))
            }
        };
        rustix::process::umask(Mode::empty());
        let snap_base = std::env::temp_dir().join(format!("nilref-exec-{}", std::process::id()));
        let mut r = Runner {
            opts,
            host,
            cwd,
            dir,
            device,
            mounted: mounted_from.is_some(),
            snapshots: Vec::new(),
            snap_base,
            root: Root::Host,
            live: None,
            last_clock: None,
        };
        if r.mounted {
            r.open_live()
                .map_err(|e| format!("{}: {e:?}", r.dir.display()))?;
        }
        Ok(r)
    }

    /// The observed trace's first line (and, if DIR is not mounted yet, a
    /// mount to look at it is the workload's business).
    fn describe(&mut self) -> Result<Op, String> {
        let dev = nilfs::device::FileDevice::open_read_only(&self.device)
            .map_err(|e| format!("{}: {e}", self.device.display()))?;
        let mut buf = vec![0u8; SuperBlock::SIZE];
        nilfs::device::BlockDevice::read_at(&dev, 1024, &mut buf)
            .map_err(|e| format!("{}: {e}", self.device.display()))?;
        let sb = SuperBlock::decode_valid(&buf)
            .map_err(|e| format!("{}: not NILFS2: {e}", self.device.display()))?;
        let block_size = sb.block_size().map_err(|e| e.to_string())?;
        let (dot_nilfs, clock) = if self.mounted {
            (self.dir.join(".nilfs").exists(), self.root_mtime()?)
        } else {
            (false, 0)
        };
        Ok(Op::Mkfs {
            block_size,
            blocks_per_segment: sb.blocks_per_segment,
            nsegments: sb.nsegments,
            r_segments_percentage: sb.r_segments_percentage,
            dot_nilfs,
            clock,
        })
    }

    /// `Some(read_only)` if DIR is mounted now.
    fn mounted_read_only(&self) -> Option<bool> {
        if !self.mounted {
            return None;
        }
        Some(mount_entry(&self.dir).is_some_and(|(_, ro)| ro))
    }

    /// The mtime of DIR's root (ns): on a fresh file system, mkfs's time.
    fn root_mtime(&self) -> Result<i64, String> {
        let st =
            rustix::fs::lstat(&self.dir).map_err(|e| format!("{}: {e}", self.dir.display()))?;
        Ok(st.st_mtime * 1_000_000_000 + st.st_mtime_nsec as i64)
    }

    /// A clock line, if the coarse clock moved enough since the last one.
    fn clock_line(&mut self) -> Option<i64> {
        let t = rustix::time::clock_gettime(rustix::time::ClockId::RealtimeCoarse);
        let now = t.tv_sec * 1_000_000_000 + t.tv_nsec as i64;
        match self.last_clock {
            Some(l) if now < l + CLOCK_STEP_NS => None,
            _ => {
                self.last_clock = Some(now);
                Some(now)
            }
        }
    }

    fn open_live(&mut self) -> Result<(), Stop> {
        self.enter(Root::Host)?;
        let fd = rustix::fs::open(&self.dir, OFlags::RDONLY | OFlags::DIRECTORY, Mode::empty())?;
        self.live = Some(fd);
        Ok(())
    }

    /// chroot into `root` (through the host's root, whose fd is kept).
    fn enter(&mut self, root: Root) -> Result<(), Stop> {
        if self.root == root {
            return Ok(());
        }
        let fd = match root {
            Root::Host => self.host.as_fd(),
            Root::Live => match &self.live {
                Some(f) => f.as_fd(),
                None => return Err(Stop::Cannot("the file system is not mounted".into())),
            },
            Root::Snapshot(c) => match self.snapshots.iter().find(|(s, _)| *s == c) {
                Some((_, f)) => f.as_fd(),
                None => return Err(Stop::Cannot(format!("snapshot {c} is not mounted"))),
            },
        };
        rustix::process::fchdir(fd).map_err(|e| Stop::Cannot(format!("fchdir: {e}")))?;
        rustix::process::chroot(".").map_err(|e| Stop::Cannot(format!("chroot: {e}")))?;
        self.root = root;
        Ok(())
    }

    fn view(&mut self, at: Option<u64>) -> Result<(), Stop> {
        self.enter(match at {
            None => Root::Live,
            Some(c) => Root::Snapshot(c),
        })
    }

    /// An fd on the live mount's root, for the checkpoint ioctls.
    fn live_fd(&mut self) -> Result<OwnedFd, Stop> {
        self.view(None)?;
        Ok(rustix::fs::open(
            "/",
            OFlags::RDONLY | OFlags::DIRECTORY,
            Mode::empty(),
        )?)
    }

    fn need_device(&self, what: &str) -> Result<(), Stop> {
        if self.opts.device.is_none() {
            return Err(Stop::Cannot(format!(
                "{what} needs --device (the runner does not mount without it)"
            )));
        }
        Ok(())
    }

    fn exec(&mut self, op: &Op) -> Result<Outcome, Stop> {
        let ok = |_| Outcome::Ok;
        match op {
            Op::Mkfs { .. } => Err(Stop::Cannot("mkfs is valid only as the first line".into())),
            Op::Clock { .. } => Ok(Outcome::Ok),
            Op::Create {
                path,
                perm,
                excl,
                at,
            } => {
                self.view(*at)?;
                let mut flags = OFlags::CREATE | OFlags::WRONLY | OFlags::CLOEXEC;
                if *excl {
                    flags |= OFlags::EXCL;
                }
                rustix::fs::open(path.as_str(), flags, Mode::from_raw_mode(*perm))?;
                Ok(Outcome::Ok)
            }
            Op::Mkdir { path, perm, at } => {
                self.view(*at)?;
                Ok(rustix::fs::mkdir(path.as_str(), Mode::from_raw_mode(*perm)).map(ok)?)
            }
            Op::Symlink { target, path, at } => {
                self.view(*at)?;
                Ok(rustix::fs::symlink(target.as_str(), path.as_str()).map(ok)?)
            }
            Op::Link { old, new, at } => {
                self.view(*at)?;
                Ok(rustix::fs::link(old.as_str(), new.as_str()).map(ok)?)
            }
            Op::Unlink { path, at } => {
                self.view(*at)?;
                Ok(rustix::fs::unlink(path.as_str()).map(ok)?)
            }
            Op::Rmdir { path, at } => {
                self.view(*at)?;
                Ok(rustix::fs::rmdir(path.as_str()).map(ok)?)
            }
            Op::Rename {
                old,
                new,
                noreplace,
                exchange,
                at,
            } => {
                self.view(*at)?;
                let mut flags = rustix::fs::RenameFlags::empty();
                if *noreplace {
                    flags |= rustix::fs::RenameFlags::NOREPLACE;
                }
                if *exchange {
                    flags |= rustix::fs::RenameFlags::EXCHANGE;
                }
                Ok(rustix::fs::renameat_with(CWD, old.as_str(), CWD, new.as_str(), flags)
                    .map(ok)?)
            }
            Op::Setxattr {
                path,
                name,
                value,
                follow,
                at,
            } => {
                self.view(*at)?;
                let flags = rustix::fs::XattrFlags::empty();
                let r = if *follow {
                    rustix::fs::setxattr(path.as_str(), name.as_str(), value.as_bytes(), flags)
                } else {
                    rustix::fs::lsetxattr(path.as_str(), name.as_str(), value.as_bytes(), flags)
                };
                Ok(r.map(ok)?)
            }
            Op::Removexattr {
                path,
                name,
                follow,
                at,
            } => {
                self.view(*at)?;
                let r = if *follow {
                    rustix::fs::removexattr(path.as_str(), name.as_str())
                } else {
                    rustix::fs::lremovexattr(path.as_str(), name.as_str())
                };
                Ok(r.map(ok)?)
            }
            Op::Getxattr {
                path,
                name,
                follow,
                at,
            } => {
                self.view(*at)?;
                let mut buf = vec![0u8; 1 << 16];
                let n = if *follow {
                    rustix::fs::getxattr(path.as_str(), name.as_str(), &mut buf[..])
                } else {
                    rustix::fs::lgetxattr(path.as_str(), name.as_str(), &mut buf[..])
                }?;
                Ok(Outcome::Data {
                    len: n as u64,
                    sha256: hex(&Sha256::digest(&buf[..n])),
                })
            }
            Op::Listxattr { path, follow, at } => {
                self.view(*at)?;
                let mut buf = vec![0u8; 1 << 16];
                let n = if *follow {
                    rustix::fs::listxattr(path.as_str(), &mut buf[..])
                } else {
                    rustix::fs::llistxattr(path.as_str(), &mut buf[..])
                }?;
                Ok(Outcome::Names(
                    buf[..n]
                        .split(|&c| c == 0)
                        .filter(|n| !n.is_empty())
                        .map(|n| String::from_utf8_lossy(n).into_owned())
                        .collect(),
                ))
            }
            Op::Write {
                path,
                offset,
                data,
                append,
                at,
            } => {
                self.view(*at)?;
                Ok(write(path, (!*append).then_some(*offset), data)?)
            }
            Op::Chmod { path, perm, at } => {
                self.view(*at)?;
                Ok(rustix::fs::chmod(path.as_str(), Mode::from_raw_mode(*perm)).map(ok)?)
            }
            Op::Chown {
                path,
                uid,
                gid,
                follow,
                at,
            } => {
                self.view(*at)?;
                let flags = if *follow {
                    AtFlags::empty()
                } else {
                    AtFlags::SYMLINK_NOFOLLOW
                };
                let uid = uid.map(rustix::process::Uid::from_raw);
                let gid = gid.map(rustix::process::Gid::from_raw);
                Ok(rustix::fs::chownat(CWD, path.as_str(), uid, gid, flags).map(ok)?)
            }
            Op::Utimes {
                path,
                mtime,
                follow,
                at,
            } => {
                self.view(*at)?;
                let flags = if *follow {
                    AtFlags::empty()
                } else {
                    AtFlags::SYMLINK_NOFOLLOW
                };
                let omit = Timespec {
                    tv_sec: 0,
                    tv_nsec: rustix::fs::UTIME_OMIT,
                };
                let modified = match mtime {
                    Some(t) => Timespec {
                        tv_sec: t.div_euclid(1_000_000_000),
                        tv_nsec: t.rem_euclid(1_000_000_000) as _,
                    },
                    None => Timespec {
                        tv_sec: 0,
                        tv_nsec: rustix::fs::UTIME_NOW,
                    },
                };
                let times = Timestamps {
                    last_access: omit,
                    last_modification: modified,
                };
                Ok(rustix::fs::utimensat(CWD, path.as_str(), &times, flags).map(ok)?)
            }
            Op::Mknod {
                path,
                file_type,
                perm,
                rdev,
                at,
            } => {
                self.view(*at)?;
                let kind = match file_type {
                    FileType::File => rustix::fs::FileType::RegularFile,
                    FileType::Dir => rustix::fs::FileType::Directory,
                    FileType::Symlink => rustix::fs::FileType::Symlink,
                    FileType::Fifo => rustix::fs::FileType::Fifo,
                    FileType::Socket => rustix::fs::FileType::Socket,
                    FileType::CharDevice => rustix::fs::FileType::CharacterDevice,
                    FileType::BlockDevice => rustix::fs::FileType::BlockDevice,
                };
                let dev = rustix::fs::makedev(rdev[0], rdev[1]);
                Ok(rustix::fs::mknodat(CWD, path.as_str(), kind, Mode::from_raw_mode(*perm), dev)
                    .map(ok)?)
            }
            Op::Statfs { at } => {
                self.view(*at)?;
                let st = rustix::fs::statfs("/")?;
                Ok(Outcome::Statfs(nilfs_model::StatfsInfo {
                    bsize: st.f_bsize as u64,
                    blocks: st.f_blocks as u64,
                    bfree: st.f_bfree as u64,
                    bavail: st.f_bavail as u64,
                    files: st.f_files as u64,
                    ffree: st.f_ffree as u64,
                    namelen: st.f_namelen as u64,
                }))
            }
            Op::Read {
                path,
                offset,
                len,
                at,
            } => {
                self.view(*at)?;
                Ok(read(path, *offset, *len)?)
            }
            Op::Truncate { path, size, at } => {
                self.view(*at)?;
                let fd = rustix::fs::open(path.as_str(), OFlags::WRONLY | OFlags::CLOEXEC, Mode::empty())?;
                Ok(rustix::fs::ftruncate(&fd, *size).map(ok)?)
            }
            Op::Lstat { path, at } => {
                self.view(*at)?;
                Ok(Outcome::Stat(lstat(path)?))
            }
            Op::Readdir { path, at } => {
                self.view(*at)?;
                Ok(Outcome::Names(readdir(path)?))
            }
            Op::Readlink { path, at } => {
                self.view(*at)?;
                let t = rustix::fs::readlink(path.as_str(), Vec::new())?;
                Ok(Outcome::Target(
                    String::from_utf8_lossy(t.as_bytes()).into_owned(),
                ))
            }
            Op::Fsync { path, at } | Op::Fdatasync { path, at } => {
                self.view(*at)?;
                let fd = rustix::fs::open(path.as_str(), OFlags::RDONLY | OFlags::CLOEXEC, Mode::empty())?;
                if matches!(op, Op::Fsync { .. }) {
                    rustix::fs::fsync(&fd)?;
                } else {
                    rustix::fs::fdatasync(&fd)?;
                }
                Ok(Outcome::Ok)
            }
            Op::Sync => {
                rustix::fs::sync();
                Ok(Outcome::Ok)
            }
            Op::Mkcp { snapshot } => {
                let fd = self.live_fd()?;
                let cno = nilfs_ioctl::sync(&fd)?;
                if *snapshot {
                    nilfs_ioctl::change_cpmode(&fd, cno, true)?;
                }
                Ok(Outcome::Cno(cno))
            }
            Op::Chcp { cno, snapshot } => {
                let fd = self.live_fd()?;
                Ok(nilfs_ioctl::change_cpmode(&fd, *cno, *snapshot).map(ok)?)
            }
            Op::Rmcp { cno } => {
                let fd = self.live_fd()?;
                Ok(nilfs_ioctl::delete_checkpoint(&fd, *cno).map(ok)?)
            }
            Op::Lscp => {
                let fd = self.live_fd()?;
                Ok(Outcome::Checkpoints(lscp(&fd)?))
            }
            Op::Manifest { at } => {
                self.view(*at)?;
                Ok(Outcome::Manifest(manifest()?))
            }
            Op::Mount { cp, ro } => {
                self.need_device("mount")?;
                self.mount(*cp, *ro)
            }
            Op::Umount { cp } => {
                self.need_device("umount")?;
                self.umount(*cp)
            }
            Op::Remount { ro } => {
                self.need_device("remount")?;
                self.enter(Root::Host)?;
                let flags = if *ro {
                    rustix::mount::MountFlags::RDONLY
                } else {
                    rustix::mount::MountFlags::empty()
                };
                rustix::mount::mount_remount(&self.dir, flags, "")?;
                self.open_live()?;
                Ok(Outcome::Ok)
            }
            Op::Crash => Err(Stop::Cannot(
                "a crash cannot be run on a real mount (the crash campaign records the device's writes instead)".into(),
            )),
            Op::Clean { protection_s } => self.clean(*protection_s),
        }
    }

    fn mount(&mut self, cp: Option<u64>, ro: bool) -> Result<Outcome, Stop> {
        use rustix::mount::MountFlags;
        self.enter(Root::Host)?;
        let flags = if ro {
            MountFlags::RDONLY
        } else {
            MountFlags::empty()
        };
        match cp {
            None => {
                if self.mounted {
                    return Err(Stop::Errno(Errno::EBUSY));
                }
                rustix::mount::mount(&self.device, &self.dir, "nilfs2", flags, None)?;
                self.mounted = true;
                self.open_live()?;
            }
            Some(c) => {
                if self.snapshots.iter().any(|(s, _)| *s == c) {
                    return Err(Stop::Errno(Errno::EBUSY));
                }
                let target = self.snap_base.join(format!("cp-{c}"));
                std::fs::create_dir_all(&target)
                    .map_err(|e| Stop::Cannot(format!("{}: {e}", target.display())))?;
                let data = std::ffi::CString::new(format!("cp={c}")).expect("no NUL");
                rustix::mount::mount(&self.device, &target, "nilfs2", flags, data.as_c_str())?;
                let fd =
                    rustix::fs::open(&target, OFlags::RDONLY | OFlags::DIRECTORY, Mode::empty())?;
                self.snapshots.push((c, fd));
            }
        }
        Ok(Outcome::Ok)
    }

    fn umount(&mut self, cp: Option<u64>) -> Result<Outcome, Stop> {
        use rustix::mount::UnmountFlags;
        self.enter(Root::Host)?;
        match cp {
            None => {
                if !self.mounted {
                    return Err(Stop::Errno(Errno::EINVAL));
                }
                self.live = None;
                if let Err(e) = rustix::mount::unmount(&self.dir, UnmountFlags::empty()) {
                    self.open_live()?;
                    return Err(e.into());
                }
                self.mounted = false;
            }
            Some(c) => {
                let Some(i) = self.snapshots.iter().position(|(s, _)| *s == c) else {
                    return Err(Stop::Errno(Errno::EINVAL));
                };
                self.snapshots.remove(i);
                let target = self.snap_base.join(format!("cp-{c}"));
                rustix::mount::unmount(&target, UnmountFlags::empty())?;
            }
        }
        Ok(Outcome::Ok)
    }

    /// `nilfs-clean -p P` run to completion, as tests/guest/scenario-gc.sh
    /// does it: a cleanerd for the pass, the request, wait until idle, stop.
    fn clean(&mut self, protection_s: u64) -> Result<Outcome, Stop> {
        if !self.mounted {
            return Err(Stop::Cannot(
                "the cleaner needs the file system mounted".into(),
            ));
        }
        self.enter(Root::Host)?;
        // On a read-only mount the cleaner's NILFS_IOCTL_CLEAN_SEGMENTS
        // would be refused by mnt_want_write_file (EROFS); nilfs-clean does
        // not get that far ("no valid nilfs mountpoint found"), so the
        // runner asks the mount itself.
        let st = rustix::fs::statvfs(&self.dir)?;
        if st.f_flag.contains(rustix::fs::StatVfsMountFlags::RDONLY) {
            return Err(Stop::Errno(Errno::EROFS));
        }
        let p = protection_s.to_string();
        let dev = self.device.clone();
        let run = |args: &[&OsStr]| -> Result<std::process::Output, Stop> {
            Command::new(args[0])
                .args(&args[1..])
                .output()
                .map_err(|e| Stop::Cannot(format!("{}: {e}", args[0].to_string_lossy())))
        };
        let d = dev.as_os_str();
        let daemon = run(&[
            OsStr::new("nilfs_cleanerd"),
            OsStr::new("-p"),
            OsStr::new(&p),
            d,
            self.dir.as_os_str(),
        ])?;
        if !daemon.status.success() {
            return Err(Stop::Cannot(format!(
                "nilfs_cleanerd failed: {}",
                String::from_utf8_lossy(&daemon.stderr)
            )));
        }
        std::thread::sleep(Duration::from_millis(300));
        let request = run(&[
            OsStr::new("nilfs-clean"),
            OsStr::new("-p"),
            OsStr::new(&p),
            d,
        ])?;
        let deadline = Instant::now() + Duration::from_secs(300);
        let mut idle = false;
        while Instant::now() < deadline {
            let st = run(&[OsStr::new("nilfs-clean"), OsStr::new("-l"), d])?;
            if String::from_utf8_lossy(&st.stdout).contains("idle")
                || String::from_utf8_lossy(&st.stderr).contains("idle")
            {
                idle = true;
                break;
            }
            std::thread::sleep(Duration::from_millis(500));
        }
        let _ = run(&[OsStr::new("nilfs-clean"), OsStr::new("-q"), d]);
        // nilfs-clean -q only asks: the daemon holds the mount until it has
        // gone, and an unmount before that is EBUSY.
        let gone_by = Instant::now() + Duration::from_secs(60);
        while cleanerd_running() && Instant::now() < gone_by {
            std::thread::sleep(Duration::from_millis(100));
        }
        if !request.status.success() {
            return Err(Stop::Cannot(format!(
                "nilfs-clean failed: {}",
                String::from_utf8_lossy(&request.stderr)
            )));
        }
        if !idle {
            return Err(Stop::Cannot("the cleaner did not go idle in 300 s".into()));
        }
        Ok(Outcome::Ok)
    }

    /// Back to the host's root; snapshot mounts the run made are unmounted
    /// (a live mount stays as the workload left it).
    /// Mark `op-K` in the dm-log-writes target `dm`'s log (from the
    /// host's root, where dmsetup is; no udev is needed for a message).
    fn mark(&mut self, dm: &str, k: usize) -> Result<(), String> {
        self.enter(Root::Host).map_err(|e| format!("{e:?}"))?;
        let out = Command::new("dmsetup")
            .args(["message", dm, "0", "mark", &format!("op-{k}")])
            .env("DM_DISABLE_UDEV", "1")
            .output()
            .map_err(|e| format!("dmsetup: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "dmsetup message {dm} 0 mark op-{k}: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        Ok(())
    }

    fn finish(&mut self) {
        let _ = self.enter(Root::Host);
        let _ = rustix::process::fchdir(&self.cwd);
        for (c, fd) in std::mem::take(&mut self.snapshots) {
            drop(fd);
            let _ = rustix::mount::unmount(
                self.snap_base.join(format!("cp-{c}")),
                rustix::mount::UnmountFlags::empty(),
            );
        }
        let _ = std::fs::remove_dir_all(&self.snap_base);
    }
}

/// The file system mounted at `dir` (the last mount there, from
/// /proc/self/mountinfo): its source and whether it is read-only.
fn mount_entry(dir: &Path) -> Option<(String, bool)> {
    let info = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    let want = dir.to_str()?;
    // Fields: id parent major:minor root mountpoint options ... - fstype source super-options
    info.lines().rev().find_map(|l| {
        let f: Vec<&str> = l.split(' ').collect();
        let dash = f.iter().position(|x| *x == "-")?;
        if f.get(4) != Some(&want) {
            return None;
        }
        let ro = f.get(5)?.split(',').any(|o| o == "ro");
        Some((f.get(dash + 2)?.to_string(), ro))
    })
}

/// Whether a nilfs_cleanerd process exists (from /proc).
fn cleanerd_running() -> bool {
    std::fs::read_dir("/proc").is_ok_and(|d| {
        d.flatten().any(|e| {
            std::fs::read_to_string(e.path().join("comm"))
                .is_ok_and(|c| c.trim() == "nilfs_cleanerd")
        })
    })
}

fn mount_source(dir: &Path) -> Option<String> {
    mount_entry(dir).map(|(s, _)| s)
}

/// `pwrite` at `offset`, or, with no offset, `write` on a file opened
/// `O_APPEND`.
fn write(path: &str, offset: Option<u64>, data: &Pattern) -> R<Outcome> {
    let flags = match offset {
        Some(_) => OFlags::WRONLY | OFlags::CLOEXEC,
        None => OFlags::WRONLY | OFlags::APPEND | OFlags::CLOEXEC,
    };
    let fd = rustix::fs::open(path, flags, Mode::empty()).map_err(errno)?;
    let total = data.len();
    let mut done = 0u64;
    let mut buf = vec![0u8; CHUNK.min(total as usize)];
    while done < total {
        let n = ((total - done) as usize).min(CHUNK);
        data.fill(done, &mut buf[..n]);
        let wrote = match offset {
            Some(o) => rustix::io::pwrite(&fd, &buf[..n], o + done),
            None => rustix::io::write(&fd, &buf[..n]),
        };
        match wrote {
            Ok(0) => break,
            Ok(k) => done += k as u64,
            Err(e) if done == 0 => return Err(errno(e)),
            // A short write: the bytes that made it are the answer.
            Err(_) => break,
        }
    }
    Ok(Outcome::Written(done))
}

fn read(path: &str, offset: u64, len: u64) -> R<Outcome> {
    let fd =
        rustix::fs::open(path, OFlags::RDONLY | OFlags::CLOEXEC, Mode::empty()).map_err(errno)?;
    let mut h = Sha256::new();
    let mut buf = vec![0u8; CHUNK];
    let mut got = 0u64;
    while got < len {
        let want = ((len - got) as usize).min(CHUNK);
        let n = rustix::io::pread(&fd, &mut buf[..want], offset + got).map_err(errno)?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
        got += n as u64;
    }
    Ok(Outcome::Data {
        len: got,
        sha256: hex(&h.finalize()),
    })
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn lstat(path: &str) -> R<StatInfo> {
    let st = rustix::fs::lstat(path).map_err(errno)?;
    let kind = rustix::fs::FileType::from_raw_mode(st.st_mode);
    use rustix::fs::FileType as T;
    let file_type = match kind {
        T::Directory => FileType::Dir,
        T::Symlink => FileType::Symlink,
        T::Fifo => FileType::Fifo,
        T::Socket => FileType::Socket,
        T::CharacterDevice => FileType::CharDevice,
        T::BlockDevice => FileType::BlockDevice,
        _ => FileType::File,
    };
    let rdev = matches!(kind, T::CharacterDevice | T::BlockDevice)
        .then(|| [rustix::fs::major(st.st_rdev), rustix::fs::minor(st.st_rdev)]);
    Ok(StatInfo {
        file_type,
        size: st.st_size as u64,
        nlink: st.st_nlink as u32,
        perm: st.st_mode & 0o7777,
        mtime: Some(st.st_mtime * 1_000_000_000 + st.st_mtime_nsec as i64),
        ctime: Some(st.st_ctime * 1_000_000_000 + st.st_ctime_nsec as i64),
        uid: Some(st.st_uid),
        gid: Some(st.st_gid),
        rdev,
    })
}

fn readdir(path: &str) -> R<Vec<String>> {
    let fd = rustix::fs::open(
        path,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(errno)?;
    let dir = rustix::fs::Dir::read_from(&fd).map_err(errno)?;
    let mut names = Vec::new();
    for e in dir {
        let e = e.map_err(errno)?;
        let n = e.file_name().to_bytes();
        if n != b"." && n != b".." {
            names.push(String::from_utf8_lossy(n).into_owned());
        }
    }
    Ok(names)
}

/// lscp without -a: every checkpoint, minor ones hidden unless snapshots.
fn lscp(fd: &OwnedFd) -> R<Vec<CpEntry>> {
    Ok(nilfs_ioctl::all_cpinfo(fd)
        .map_err(errno)?
        .iter()
        .filter(|ci| !ci.is_minor() || ci.is_snapshot())
        .map(|ci| CpEntry {
            cno: ci.ci_cno,
            ss: ci.is_snapshot(),
        })
        .collect())
}

/// tests/guest/manifest.sh of the current root.
fn manifest() -> R<Vec<String>> {
    let mut lines = Vec::new();
    let mut stack = vec![String::new()];
    while let Some(dir) = stack.pop() {
        let at = if dir.is_empty() {
            "/".to_string()
        } else {
            dir.clone()
        };
        for name in readdir(&at)? {
            let path = format!("{dir}/{name}");
            let st = lstat(&path)?;
            lines.push(match st.file_type {
                FileType::Dir => {
                    stack.push(path.clone());
                    format!("DIR  -  {path}/")
                }
                FileType::Symlink => {
                    let t = rustix::fs::readlink(path.as_str(), Vec::new()).map_err(errno)?;
                    format!(
                        "LNK  -  {path} -> {}",
                        String::from_utf8_lossy(t.as_bytes())
                    )
                }
                FileType::File => match read(&path, 0, st.size)? {
                    Outcome::Data { sha256, len } => format!("{sha256}  {len}  {path}"),
                    _ => unreachable!("read returns data"),
                },
                t => nilfs_model::manifest::special_line(t, st.rdev.unwrap_or_default(), &path),
            });
        }
    }
    Ok(nilfs_model::manifest::sort_lines(lines))
}
