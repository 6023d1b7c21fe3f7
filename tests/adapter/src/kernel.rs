//! The kernel's nilfs2 in a qemu guest as a `nilfs_oracle::Implementation`:
//! the same traits as the in-process `Fs` ([`crate::Ours`]) and the FUSE
//! mount ([`crate::FuseMount`]). One guest serves every case: `nilref
//! guest serve` boots the pinned kernel with one image file as /dev/vda
//! and a control port (a unix socket here), and `nilref guest loop` in the
//! guest serves a `nilref exec --stream --device /dev/vda` session per
//! case over it (cli/src/guest.rs has the protocol).
//!
//! Each case: the image file is made afresh as the spec says (our mkfs,
//! which the kernel mounts like mkfs.nilfs2's), with the log writer's
//! timer set a day out (`s_c_interval`), so that every checkpoint is one a
//! workload's operation made and the model can number it; the guest drops
//! its cached blocks and runs the operations, mounts included. The
//! durable state is the image file read back by [`ImplUnderTest`](crate::ImplUnderTest)'s
//! abstraction function: after a sync the guest's writes are in the
//! host's file (qemu's `cache=unsafe` writes through to it; only flushes
//! are skipped). Times are the guest's, each operation's interval
//! reported ([`Sut::clock_interval`]); the workload has no `clock` lines
//! and no crash (a crash would end the guest).
//!
//! It needs the peer tier: qemu and a fetched kernel (`nilref peers fetch
//! kernel grub`).

use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use nilfs::corrupt::{apply, Recipe};
use nilfs::device::{BlockDevice, FileDevice};
use nilfs_model::{Errno, Geometry, Op, Outcome};
use nilfs_oracle::{Durable, ImageSpec, Implementation, Pipe, Sut, WriteLog};

/// How long the guest may take to boot, and to answer one line (TCG is
/// slow).
const TIMEOUT: Duration = Duration::from_secs(600);

/// The kernel under test: the `nilref` binary that boots it, which pinned
/// kernel (None: the default), and a folder for the image and the socket.
pub struct KernelGuest {
    nilref: PathBuf,
    kernel: Option<String>,
    dir: PathBuf,
    guest: Option<Guest>,
}

/// A booted guest: `nilref guest serve` and the host's end of the port.
struct Guest {
    serve: Child,
    pipe: Pipe,
    /// The image size the guest was booted with (a disk's size is fixed).
    bytes: u64,
}

impl KernelGuest {
    /// Cases made in `dir` (created if missing), in a guest booted by the
    /// `nilref` binary at `nilref`, running `kernel` (a version pinned in
    /// tests/peers.toml; None: the default).
    pub fn new(nilref: &Path, kernel: Option<&str>, dir: &Path) -> KernelGuest {
        KernelGuest {
            nilref: nilref.to_path_buf(),
            kernel: kernel.map(str::to_string),
            dir: dir.to_path_buf(),
            guest: None,
        }
    }

    fn image(&self) -> PathBuf {
        self.dir.join("kernel.img")
    }

    /// Boots the guest for images of `bytes` (again if the size changed).
    fn boot(&mut self, bytes: u64) -> Result<&mut Guest, String> {
        if self.guest.as_ref().is_some_and(|g| g.bytes != bytes) {
            self.shutdown();
        }
        if self.guest.is_none() {
            std::fs::create_dir_all(&self.dir)
                .map_err(|e| format!("{}: {e}", self.dir.display()))?;
            let image = self.image();
            std::fs::File::create(&image)
                .and_then(|f| f.set_len(bytes))
                .map_err(|e| format!("{}: {e}", image.display()))?;
            let socket = self.dir.join("control.sock");
            let _ = std::fs::remove_file(&socket);
            let log = std::fs::File::create(self.dir.join("guest.log"))
                .map_err(|e| format!("guest.log: {e}"))?;
            let mut cmd = Command::new(&self.nilref);
            cmd.args(["guest", "serve", "--image"])
                .arg(&image)
                .arg("--socket")
                .arg(&socket);
            if let Some(k) = &self.kernel {
                cmd.args(["--kernel", k]);
            }
            let mut serve = cmd
                .stdout(log.try_clone().map_err(|e| e.to_string())?)
                .stderr(log)
                .spawn()
                .map_err(|e| format!("nilref guest serve: {e}"))?;
            let t0 = Instant::now();
            let stream = loop {
                if let Ok(s) = UnixStream::connect(&socket) {
                    break s;
                }
                if let Ok(Some(status)) = serve.try_wait() {
                    return Err(format!(
                        "nilref guest serve ended with {status}: {}",
                        self.guest_log()
                    ));
                }
                if t0.elapsed() > TIMEOUT {
                    let _ = serve.kill();
                    let _ = serve.wait();
                    return Err("the guest's control port never opened".into());
                }
                std::thread::sleep(Duration::from_millis(50));
            };
            stream
                .set_read_timeout(Some(TIMEOUT))
                .map_err(|e| e.to_string())?;
            let from = stream.try_clone().map_err(|e| e.to_string())?;
            self.guest = Some(Guest {
                serve,
                pipe: Pipe::over(from, stream),
                bytes,
            });
        }
        Ok(self.guest.as_mut().expect("booted above"))
    }

    fn guest_log(&self) -> String {
        std::fs::read_to_string(self.dir.join("guest.log")).unwrap_or_default()
    }

    /// Ends the guest: `{"quit": true}`, then waits for it to power off.
    fn shutdown(&mut self) {
        if let Some(mut g) = self.guest.take() {
            let _ = g.pipe.exchange(r#"{"quit":true}"#);
            drop(g.pipe);
            let t0 = Instant::now();
            while t0.elapsed() < Duration::from_secs(60) {
                if let Ok(Some(_)) = g.serve.try_wait() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(100));
            }
            let _ = g.serve.kill();
            let _ = g.serve.wait();
        }
    }
}

impl Drop for KernelGuest {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// One control line's answer must carry `key: true`.
fn expect(answer: Result<String, String>, key: &str) -> Result<(), String> {
    let a = answer?;
    let v: serde_json::Value =
        serde_json::from_str(&a).map_err(|e| format!("the guest answered {a:?}: {e}"))?;
    if v[key] == true && v.get("error").is_none() {
        Ok(())
    } else {
        Err(format!("the guest answered {a} where {key} was due"))
    }
}

impl Implementation for KernelGuest {
    fn format(
        &mut self,
        spec: &ImageSpec,
        log: Option<&WriteLog>,
    ) -> Result<(Geometry, Box<dyn Sut + '_>), String> {
        if log.is_some() {
            return Err("the kernel guest's block writes cannot be recorded".into());
        }
        let image = self.image();
        self.boot(spec.device_bytes)?;
        // The guest has nothing mounted between cases: the file is ours.
        let g = {
            let file = std::fs::OpenOptions::new()
                .write(true)
                .open(&image)
                .map_err(|e| format!("{}: {e}", image.display()))?;
            file.set_len(0)
                .and_then(|()| file.set_len(spec.device_bytes))
                .map_err(|e| format!("{}: {e}", image.display()))?;
            let dev = FileDevice::open_read_write(&image).map_err(|e| e.to_string())?;
            let g = crate::ours::format(&dev, spec).map_err(|e| format!("mkfs: {e}"))?;
            // nilfs_segctor_new: sc_interval = s_c_interval seconds.
            for sb in ["sb0", "sb1"] {
                let r = Recipe::parse(&format!("{sb}.s_c_interval = 86400"))
                    .map_err(|e| e.to_string())?;
                apply(&dev, &r).map_err(|e| format!("{sb}: {e}"))?;
            }
            dev.flush().map_err(|e| e.to_string())?;
            g
        };
        let guest = self.guest.as_mut().expect("booted");
        expect(guest.pipe.exchange(r#"{"begin":true}"#), "ready")?;
        Ok((
            g,
            Box::new(KernelSut {
                guest,
                image,
                t: None,
                detail: None,
                cannot: None,
            }),
        ))
    }
}

/// One case: a stream session in the guest.
struct KernelSut<'a> {
    guest: &'a mut Guest,
    image: PathBuf,
    t: Option<[i64; 2]>,
    detail: Option<String>,
    /// Why the harness could not observe the last call (`Sut::undecided`):
    /// the guest's runner could not run it, or did not answer.
    cannot: Option<String>,
}

impl Sut for KernelSut<'_> {
    fn apply(&mut self, op: &Op) -> Outcome {
        self.t = None;
        self.detail = None;
        self.cannot = None;
        if matches!(op, Op::Crash | Op::Clock { .. }) {
            let why = format!("not run in the kernel guest (leave it out of the features): {op:?}");
            self.detail = Some(why.clone());
            self.cannot = Some(why);
            return Outcome::Err(Errno::EIO);
        }
        let a = self.guest.pipe.call(op);
        self.t = a.t;
        self.detail.clone_from(&a.cannot);
        self.cannot = a.cannot;
        a.out
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

impl Drop for KernelSut<'_> {
    /// Ends the session; the guest unmounts what the case left mounted.
    fn drop(&mut self) {
        let _ = self.guest.pipe.exchange(r#"{"end":true}"#);
    }
}
