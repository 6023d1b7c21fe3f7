//! The runner's state: which root the process is in (the host's, the
//! live mount's, a snapshot's), the mounts the workload makes and unmakes,
//! the checkpoint ioctls, the cleaner, the clock lines and the
//! dm-log-writes marks; and the dispatch of each operation to its area
//! in `calls`.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use nilfs::format::superblock::SuperBlock;
use nilfs_model::{Errno, Op, Outcome};
use rustix::fd::{AsFd, OwnedFd};
use rustix::fs::{Mode, OFlags};

use crate::exec::calls::{self, Stop};
use crate::exec::nilfs_ioctl;

/// Where the runner writes and what it may do.
pub struct ExecOptions<'a> {
    pub dir: &'a Path,
    pub workload: &'a Path,
    pub out: Option<&'a Path>,
    pub device: Option<&'a Path>,
    /// The dm-log-writes target to mark before each operation.
    pub mark_log_writes: Option<&'a str>,
    /// Let real time pass as the workload's `clock` lines say.
    pub sleep_on_clock: bool,
    /// How long a concurrent phase's workers may run.
    pub worker_deadline: Duration,
}

/// Which root the process is in.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Root {
    Host,
    Live,
    Snapshot(u64),
}

/// The runner between operations.
pub struct Runner<'a> {
    pub opts: &'a ExecOptions<'a>,
    /// The host's root, to come back to from a chroot.
    pub host: OwnedFd,
    /// The working directory the runner started in (relative paths of its
    /// own arguments are relative to it).
    pub cwd: OwnedFd,
    /// DIR, absolute, as the host sees it.
    pub dir: PathBuf,
    /// The device DIR's file system lives on.
    pub device: PathBuf,
    pub mounted: bool,
    /// Mounted snapshots and their folders' fds.
    pub snapshots: Vec<(u64, OwnedFd)>,
    /// The folder holding the snapshot mount points (created on demand).
    pub snap_base: PathBuf,
    pub root: Root,
    pub live: Option<OwnedFd>,
}

impl<'a> Runner<'a> {
    pub fn new(opts: &'a ExecOptions<'a>) -> Result<Self, String> {
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
        };
        if r.mounted {
            r.open_live()
                .map_err(|e| format!("{}: {e:?}", r.dir.display()))?;
        }
        Ok(r)
    }

    /// The observed trace's first line (and, if DIR is not mounted yet, a
    /// mount to look at it is the workload's business).
    pub fn describe(&mut self) -> Result<Op, String> {
        let dev = nilfs::device::FileDevice::open_read_only(&self.device)
            .map_err(|e| format!("{}: {e}", self.device.display()))?;
        let mut buf = vec![0u8; SuperBlock::SIZE];
        nilfs::device::BlockDevice::read_at(&dev, 1024, &mut buf)
            .map_err(|e| format!("{}: {e}", self.device.display()))?;
        let sb = SuperBlock::decode_valid(&buf)
            .map_err(|e| format!("{}: not NILFS2: {e}", self.device.display()))?;
        let block_size = sb.block_size().map_err(|e| e.to_string())?;
        // Not mounted yet: the root is read from the device with our own
        // read path (mkfs.nilfs2 2.2.9 makes /.nilfs; 2.2.10 and later
        // do not), the clock from the root's mtime.
        let (dot_nilfs, clock) = if self.mounted {
            (self.dir.join(".nilfs").exists(), self.root_mtime()?)
        } else {
            let nilfs = nilfs::the_nilfs::Nilfs::open(&dev)
                .map_err(|e| format!("{}: {e}", self.device.display()))?;
            let view = nilfs::posix::CheckpointView::open(&nilfs, None)
                .map_err(|e| format!("{}: {e}", self.device.display()))?;
            let root = view
                .resolve(b"/", false)
                .map(|(_, inode)| inode.mtime as i64 * 1_000_000_000 + i64::from(inode.mtime_nsec))
                .unwrap_or(0);
            (view.resolve(b"/.nilfs", false).is_ok(), root)
        };
        // The kernel's own nilfs2 (not a FUSE mount or another file
        // system): its release names the model's variant.
        let kernel =
            (mount_fstype(&self.dir).as_deref() == Some("nilfs2") || !self.mounted).then(|| {
                rustix::system::uname()
                    .release()
                    .to_string_lossy()
                    .into_owned()
            });
        Ok(Op::Mkfs {
            block_size,
            blocks_per_segment: sb.blocks_per_segment,
            nsegments: sb.nsegments,
            r_segments_percentage: sb.r_segments_percentage,
            dot_nilfs,
            clock,
            kernel,
        })
    }

    /// `Some(read_only)` if DIR is mounted now.
    pub fn mounted_read_only(&self) -> Option<bool> {
        if !self.mounted {
            return None;
        }
        Some(mount_entry(&self.dir).is_some_and(|(_, ro)| ro))
    }

    /// The mtime of DIR's root (ns): on a fresh file system, mkfs's time.
    pub fn root_mtime(&self) -> Result<i64, String> {
        let st =
            rustix::fs::lstat(&self.dir).map_err(|e| format!("{}: {e}", self.dir.display()))?;
        Ok(st.st_mtime * 1_000_000_000 + st.st_mtime_nsec as i64)
    }

    /// The clock before a call: `CLOCK_REALTIME_COARSE`, the clock the
    /// kernel's `current_time()` stamps inodes with, which never runs
    /// ahead of the fine one.
    pub fn clock_before() -> i64 {
        ns(rustix::time::clock_gettime(
            rustix::time::ClockId::RealtimeCoarse,
        ))
    }

    /// The clock after a call: `CLOCK_REALTIME`, never behind the coarse
    /// clock, so a stamp from either (the kernel's coarse one, a FUSE
    /// server's `SystemTime::now()`) lies between the two readings.
    pub fn clock_after() -> i64 {
        ns(rustix::time::clock_gettime(rustix::time::ClockId::Realtime))
    }

    /// Back in the host's root (to start other programs, such as a
    /// concurrent run's workers).
    pub fn enter_host(&mut self) -> Result<(), String> {
        self.enter(Root::Host).map_err(|e| format!("{e:?}"))
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

    /// Runs one operation: the runner's own work for checkpoints, mounts
    /// and the cleaner, or the view the operation names entered and then
    /// the system calls of its area (`calls`).
    pub fn exec(&mut self, op: &Op) -> Result<Outcome, Stop> {
        match op {
            Op::Mkfs { .. } => Err(Stop::Cannot("mkfs is valid only as the first line".into())),
            Op::Clock { .. } => Ok(Outcome::Ok),
            Op::Sync => {
                rustix::fs::sync();
                Ok(Outcome::Ok)
            }
            Op::Mkcp { .. } | Op::Chcp { .. } | Op::Rmcp { .. } | Op::Lscp => self.checkpoints(op),
            Op::Mount { .. } | Op::Umount { .. } | Op::Remount { .. } | Op::Crash => {
                self.mounts(op)
            }
            Op::Clean { protection_s } => self.clean(*protection_s),
            // Everything else is a system call inside the view it names.
            op => {
                self.view(op.at())?;
                for area in calls::AREAS {
                    if let Some(out) = area(op)? {
                        return Ok(out);
                    }
                }
                Err(Stop::Cannot(format!("no system call runs {op:?}")))
            }
        }
    }

    /// The checkpoint ioctls, on the live mount's root.
    fn checkpoints(&mut self, op: &Op) -> Result<Outcome, Stop> {
        let ok = |_| Outcome::Ok;
        match op {
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
                Ok(Outcome::Checkpoints(calls::lscp(&fd)?))
            }
            _ => unreachable!("{op:?} is not a checkpoint operation"),
        }
    }

    /// Mounts, unmounts and remounts (with `--device`); a crash, never.
    fn mounts(&mut self, op: &Op) -> Result<Outcome, Stop> {
        match op {
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
            _ => unreachable!("{op:?} is not a mount operation"),
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

    /// Mark `op-K` in the dm-log-writes target `dm`'s log (from the
    /// host's root, where dmsetup is; no udev is needed for a message).
    pub fn mark(&mut self, dm: &str, k: usize) -> Result<(), String> {
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

    /// Back to the host's root; snapshot mounts the run made are unmounted
    /// (a live mount stays as the workload left it).
    pub fn finish(&mut self) {
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

/// The file system type mounted at `dir` (`nilfs2`, `fuse`, ...).
fn mount_fstype(dir: &Path) -> Option<String> {
    let info = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    let want = dir.to_str()?;
    info.lines().rev().find_map(|l| {
        let f: Vec<&str> = l.split(' ').collect();
        let dash = f.iter().position(|x| *x == "-")?;
        (f.get(4) == Some(&want)).then(|| f.get(dash + 1).map(|s| s.to_string()))?
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

// `tv_nsec` is narrower than i64 on some targets.
#[allow(clippy::unnecessary_cast)]
fn ns(t: rustix::time::Timespec) -> i64 {
    t.tv_sec * 1_000_000_000 + t.tv_nsec as i64
}
