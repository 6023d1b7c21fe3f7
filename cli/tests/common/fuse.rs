//! The FUSE tests' shared parts: whether FUSE can be used here, one
//! `nilref mount` process with its image and mount point, and a shell
//! step.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Whether this machine can make FUSE mounts; why not, if not.
pub fn fuse_available(dir: &Path) -> Result<(), String> {
    if !Path::new("/dev/fuse").exists() {
        return Err("no /dev/fuse".into());
    }
    if Command::new("fusermount3").arg("-V").output().is_err() {
        return Err("no fusermount3 (Debian: fuse3)".into());
    }
    // A real mount, to learn whether we may.
    let m = Mount::start(dir, "probe", &[]).map_err(|e| format!("a probe mount failed: {e}"))?;
    m.stop()
        .map(|_| ())
        .map_err(|e| format!("the probe's unmount failed: {e}"))
}

/// Whether the FUSE tier can run here; if not, says why and skips, unless
/// NILFS_FUSE=1 requires it (then fails).
pub fn fuse_or_skip(dir: &Path) -> bool {
    match fuse_available(dir) {
        Ok(()) => true,
        Err(why) => {
            assert!(
                std::env::var_os("NILFS_FUSE").is_none(),
                "NILFS_FUSE is set but FUSE cannot be used here: {why}"
            );
            eprintln!("FUSE tier skipped: {why} (set NILFS_FUSE=1 to require it)");
            false
        }
    }
}

/// One `nilref mount` process and its mount point.
pub struct Mount {
    pub child: Child,
    pub point: PathBuf,
    pub image: PathBuf,
}

pub use nilfs_adapter::mounted;

impl Mount {
    /// mkfs a 32 MiB image (the generator's default geometry) and mount it.
    pub fn start(dir: &Path, name: &str, extra: &[&str]) -> Result<Mount, String> {
        Mount::start_with(
            dir,
            name,
            &["--size", "32M", "-b", "1024", "-B", "64"],
            extra,
        )
    }

    /// mkfs an image with `mkfs_args` and mount it with `extra`.
    pub fn start_with(
        dir: &Path,
        name: &str,
        mkfs_args: &[&str],
        extra: &[&str],
    ) -> Result<Mount, String> {
        let image = dir.join(format!("{name}.img"));
        let point = dir.join(format!("{name}.mnt"));
        std::fs::create_dir_all(&point).map_err(|e| e.to_string())?;
        let mut mkfs = vec!["mkfs"];
        mkfs.extend_from_slice(mkfs_args);
        mkfs.push(image.to_str().unwrap());
        let r = super::run(&mkfs);
        if !r.ok() {
            return Err(format!("mkfs: {}", r.err));
        }
        Mount::attach(image, point, extra)
    }

    /// Mount the existing `image` at `point` with `extra`.
    pub fn attach(image: PathBuf, point: PathBuf, extra: &[&str]) -> Result<Mount, String> {
        let mut args = vec!["mount", image.to_str().unwrap(), point.to_str().unwrap()];
        args.extend_from_slice(extra);
        let mut child = Command::new(env!("CARGO_BIN_EXE_nilref"))
            .args(&args)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| e.to_string())?;
        let t0 = Instant::now();
        while !mounted(&point) {
            if let Ok(Some(st)) = child.try_wait() {
                let mut err = String::new();
                use std::io::Read;
                child.stderr.take().map(|mut e| e.read_to_string(&mut err));
                return Err(format!("nilref mount exited ({st}): {err}"));
            }
            if t0.elapsed() > Duration::from_secs(20) {
                let _ = child.kill();
                return Err("the mount did not appear within 20 s".into());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(Mount {
            child,
            point,
            image,
        })
    }

    /// Unmount and wait for the server to finish its clean unmount.
    pub fn stop(mut self) -> Result<PathBuf, String> {
        let out = Command::new("fusermount3")
            .arg("-u")
            .arg(&self.point)
            .output()
            .map_err(|e| e.to_string())?;
        if !out.status.success() {
            let _ = self.child.kill();
            return Err(format!(
                "fusermount3 -u: {}",
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        let st = self.child.wait().map_err(|e| e.to_string())?;
        if !st.success() {
            let mut err = String::new();
            use std::io::Read;
            self.child
                .stderr
                .take()
                .map(|mut e| e.read_to_string(&mut err));
            return Err(format!("nilref mount ended with {st}: {err}"));
        }
        Ok(self.image)
    }
}

pub fn sh(cmd: &str) -> Result<String, String> {
    let out = Command::new("sh")
        .arg("-c")
        .arg(cmd)
        .output()
        .map_err(|e| e.to_string())?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(format!(
            "`{cmd}`: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}
