//! `nilref mount`, our FUSE mount, as a `nilfs_oracle::Implementation`:
//! the same traits as the in-process `Fs` ([`crate::Ours`]), driven through
//! real system calls. Each case is an image file made as the spec says;
//! the workload's `mount` starts `nilref mount --no-log-writer` on it and a
//! `nilref exec --stream` runner on the mount point ([`Pipe`]), which runs
//! every other operation; `umount` stops both (a clean unmount), `crash`
//! kills the server (SIGKILL: what it had not written is lost). The
//! durable state is the image file read back by [`ImplUnderTest`](crate::ImplUnderTest)'s
//! abstraction function, every checkpoint checked and read. The server's
//! clock is real, so each operation reports its clock interval
//! ([`Sut::clock_interval`]) and the workload has no `clock` lines.
//!
//! It needs root (the runner chroots, as `nilref exec` does), /dev/fuse
//! and fusermount3.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use nilfs::device::FileDevice;
use nilfs_model::{Errno, Geometry, Op, Outcome};
use nilfs_oracle::{Durable, ImageSpec, Implementation, Pipe, Sut, WriteLog};

/// `nilref mount` under test: the `nilref` binary, a folder for the image
/// and the mount point, and extra arguments of `nilref mount` (a
/// known-bad variant, say).
pub struct FuseMount {
    nilref: PathBuf,
    dir: PathBuf,
    mount_args: Vec<String>,
}

impl FuseMount {
    /// Cases made in `dir` (created if missing), served by the `nilref`
    /// binary at `nilref`.
    pub fn new(nilref: &Path, dir: &Path) -> FuseMount {
        FuseMount {
            nilref: nilref.to_path_buf(),
            dir: dir.to_path_buf(),
            mount_args: Vec::new(),
        }
    }

    /// Extra arguments of every `nilref mount`.
    pub fn mount_args(mut self, args: &[&str]) -> FuseMount {
        self.mount_args = args.iter().map(|a| a.to_string()).collect();
        self
    }
}

impl Implementation for FuseMount {
    fn format(
        &mut self,
        spec: &ImageSpec,
        log: Option<&WriteLog>,
    ) -> Result<(Geometry, Box<dyn Sut + '_>), String> {
        if log.is_some() {
            return Err("the FUSE mount's block writes cannot be recorded".into());
        }
        std::fs::create_dir_all(&self.dir).map_err(|e| format!("{}: {e}", self.dir.display()))?;
        // As /proc/self/mounts names it.
        let dir = std::fs::canonicalize(&self.dir).map_err(|e| e.to_string())?;
        let image = dir.join("lockstep.img");
        let point = dir.join("lockstep.mnt");
        // A case that panicked may have left its mount behind.
        unmount(&point, true);
        std::fs::create_dir_all(&point).map_err(|e| format!("{}: {e}", point.display()))?;
        let file =
            std::fs::File::create(&image).map_err(|e| format!("{}: {e}", image.display()))?;
        file.set_len(spec.device_bytes)
            .map_err(|e| format!("{}: {e}", image.display()))?;
        drop(file);
        let dev = FileDevice::open_read_write(&image).map_err(|e| e.to_string())?;
        let g = crate::ours::format(&dev, spec).map_err(|e| format!("mkfs: {e}"))?;
        Ok((
            g,
            Box::new(FuseSut {
                imp: self,
                image,
                point,
                server: None,
                pipe: None,
                t: None,
                detail: None,
                cannot: None,
            }),
        ))
    }
}

/// One case: the server and the runner while mounted.
struct FuseSut<'a> {
    imp: &'a FuseMount,
    image: PathBuf,
    point: PathBuf,
    server: Option<Child>,
    pipe: Option<Pipe>,
    t: Option<[i64; 2]>,
    detail: Option<String>,
    /// Why the harness could not observe the last call (`Sut::undecided`).
    cannot: Option<String>,
}

impl FuseSut<'_> {
    /// The harness could not give the mount `op`, or read its answer.
    fn cannot(&mut self, why: String) -> Outcome {
        self.cannot = Some(why.clone());
        self.failed(why)
    }

    fn failed(&mut self, why: String) -> Outcome {
        self.detail = Some(why);
        Outcome::Err(Errno::EIO)
    }

    fn mount(&mut self, ro: bool) -> Result<(), String> {
        if self.server.is_some() {
            return Err("already mounted".into());
        }
        let log = self.imp.dir.join("mount.log");
        let err = std::fs::File::create(&log).map_err(|e| e.to_string())?;
        let mut cmd = Command::new(&self.imp.nilref);
        cmd.arg("mount").arg(&self.image).arg(&self.point);
        if ro {
            cmd.args(["-o", "ro"]);
        } else {
            cmd.arg("--no-log-writer");
        }
        let mut child = cmd
            .args(&self.imp.mount_args)
            .stdout(Stdio::null())
            .stderr(err)
            .spawn()
            .map_err(|e| format!("nilref mount: {e}"))?;
        let t0 = Instant::now();
        while !mounted(&self.point) {
            if let Ok(Some(status)) = child.try_wait() {
                let why = std::fs::read_to_string(&log).unwrap_or_default();
                return Err(format!("nilref mount ended with {status}: {}", why.trim()));
            }
            if t0.elapsed() > Duration::from_secs(20) {
                let _ = child.kill();
                let _ = child.wait();
                return Err("nilref mount did not mount within 20 s".into());
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        self.server = Some(child);
        let mut runner = Command::new(&self.imp.nilref);
        runner.arg("exec").arg(&self.point).arg("--stream");
        self.pipe = Some(Pipe::spawn(runner)?);
        Ok(())
    }

    /// Stops the runner, then the server: a clean unmount, or with
    /// `crash` the server killed first.
    fn umount(&mut self, crash: bool) -> Result<(), String> {
        let Some(mut server) = self.server.take() else {
            return Err("not mounted".into());
        };
        let runner = self.pipe.take().map(Pipe::close);
        if crash {
            let _ = server.kill();
            let _ = server.wait();
            unmount(&self.point, true);
            return Ok(());
        }
        if !unmount(&self.point, false) {
            let _ = server.kill();
            let _ = server.wait();
            unmount(&self.point, true);
            return Err("fusermount3 -u failed".into());
        }
        let status = server.wait().map_err(|e| e.to_string())?;
        runner.unwrap_or(Ok(()))?;
        if !status.success() {
            let log = std::fs::read_to_string(self.imp.dir.join("mount.log")).unwrap_or_default();
            return Err(format!("nilref mount ended with {status}: {}", log.trim()));
        }
        Ok(())
    }
}

impl Sut for FuseSut<'_> {
    fn apply(&mut self, op: &Op) -> Outcome {
        self.t = None;
        self.detail = None;
        self.cannot = None;
        let done = |r: Result<(), String>, s: &mut Self| match r {
            Ok(()) => Outcome::Ok,
            Err(why) => s.failed(why),
        };
        match op {
            Op::Mount { cp: None, ro } => {
                let r = self.mount(*ro);
                done(r, self)
            }
            Op::Umount { cp: None } => {
                let r = self.umount(false);
                done(r, self)
            }
            Op::Crash => {
                let r = self.umount(true);
                done(r, self)
            }
            Op::Mount { cp: Some(_), .. }
            | Op::Umount { cp: Some(_) }
            | Op::Remount { .. }
            | Op::Clock { .. } => self.cannot(format!(
                "not run on the FUSE mount (leave it out of the features): {op:?}"
            )),
            op => match self.pipe.as_mut() {
                None => self.cannot("no runner: not mounted".into()),
                Some(p) => {
                    // sync(2) and syncfs(2) never reach a /dev/fuse server:
                    // the kernel's FUSE client sends FUSE_SYNCFS only when
                    // `fc->sync_fs` is set, which virtiofs does and a
                    // /dev/fuse mount cannot (docs/findings.md, F3). The
                    // construction nilfs_sync_fs makes is
                    // nilfs_construct_segment, NILFS_IOCTL_SYNC's too, and
                    // that ioctl does reach the server: the runner's mkcp.
                    let sync_as_ioctl = Op::Mkcp { snapshot: false };
                    let sent = if *op == Op::Sync { &sync_as_ioctl } else { op };
                    let mut a = p.call(sent);
                    if let (Op::Sync, Outcome::Cno(_)) = (op, &a.out) {
                        a.out = Outcome::Ok;
                    }
                    self.t = a.t;
                    self.detail.clone_from(&a.cannot);
                    self.cannot = a.cannot;
                    a.out
                }
            },
        }
    }

    fn durable(&mut self) -> Result<Durable, String> {
        crate::durable_of_image(&self.image, &mut self.cannot)
    }

    fn detail(&self) -> Option<String> {
        self.detail.clone()
    }

    fn undecided(&self) -> Option<String> {
        self.cannot.clone()
    }

    fn clock_interval(&self) -> Option<[i64; 2]> {
        self.t
    }
}

impl Drop for FuseSut<'_> {
    fn drop(&mut self) {
        if self.server.is_some() {
            let _ = self.umount(true);
        }
    }
}

/// Whether `point` is a mount point now (/proc/self/mounts; `point` as
/// it names it, canonical).
pub fn mounted(point: &Path) -> bool {
    let want = point.to_string_lossy().into_owned();
    std::fs::read_to_string("/proc/self/mounts")
        .map(|m| {
            m.lines()
                .any(|l| l.split(' ').nth(1) == Some(want.as_str()))
        })
        .unwrap_or(false)
}

/// `fusermount3 -u [-z] point`, retried while the mount is busy (for up
/// to 10 s: a loaded machine may still be finishing the runner's last
/// releases); whether it is gone. `point` is absolute, as
/// /proc/self/mounts lists it.
pub fn unmount(point: &Path, lazy: bool) -> bool {
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if !mounted(point) {
            return true;
        }
        let mut cmd = Command::new("fusermount3");
        cmd.arg(if lazy { "-uz" } else { "-u" }).arg(point);
        let _ = cmd.stdout(Stdio::null()).stderr(Stdio::null()).status();
        if !mounted(point) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}
