//! Running the real NILFS2 peers: host tools, loop devices, GRUB's reader
//! and the Linux kernel in a qemu guest (the scripts in tests/guest).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Whether the peer tier is enabled (`NILFS_PEERS=1`).
pub fn enabled() -> bool {
    std::env::var("NILFS_PEERS").is_ok_and(|v| v == "1")
}

/// Gate for a peer test: `None` (after saying so) when the tier is off;
/// when it is on, every named program must exist or the test fails.
#[must_use]
pub fn require(test: &str, programs: &[&str]) -> Option<()> {
    if !enabled() {
        eprintln!("{test}: peer tier off (set NILFS_PEERS=1 to run it against the real tools)");
        return None;
    }
    for p in programs {
        // GRUB and the guest's kernel are pinned peers (tests/peers.toml),
        // fetched into the peer cache rather than installed on the host.
        let fetched = match *p {
            "grub-fstest" => Some("grub"),
            "qemu-system-x86_64" => Some("kernel"),
            _ => None,
        };
        if let Some(kind) = fetched {
            assert!(
                peer_cache().join(format!("{kind}.env")).is_file(),
                "{test}: NILFS_PEERS=1 but no default {kind} is fetched: run `nilref peers fetch {kind}`"
            );
        }
        assert!(
            *p == "grub-fstest" || which(p).is_some(),
            "{test}: NILFS_PEERS=1 but `{p}` is not installed"
        );
    }
    Some(())
}

/// Where `nilref peers fetch` keeps the pinned peers (`$NILFS_PEER_CACHE`,
/// default ~/.cache/nilfs-ref-peers); `KIND.env` there names the default
/// version of each, which tests/guest's scripts use when a caller names none.
pub fn peer_cache() -> PathBuf {
    if let Some(d) = std::env::var_os("NILFS_PEER_CACHE") {
        return PathBuf::from(d);
    }
    std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .unwrap_or_else(std::env::temp_dir)
        .join("nilfs-ref-peers")
}

/// Locate a program on PATH (also /sbin and /usr/sbin, where nilfs-tools lives).
pub fn which(program: &str) -> Option<PathBuf> {
    let path = std::env::var("PATH").unwrap_or_default();
    let found = path
        .split(':')
        .chain(["/sbin", "/usr/sbin", "/bin", "/usr/bin"])
        .map(|d| Path::new(d).join(program))
        .find(|p| p.is_file());
    found
}

/// Run a command; panics with its output if it cannot start.
pub fn run(cmd: &mut Command) -> Output {
    cmd.output()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"))
}

/// Run a command that must succeed; returns its stdout.
pub fn run_ok(cmd: &mut Command) -> String {
    let out = run(cmd);
    assert!(
        out.status.success(),
        "{cmd:?} failed ({}):\nstdout:\n{}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A sparse image file of `size` bytes formatted by the host's mkfs.nilfs2.
pub fn host_mkfs(path: &Path, size: u64, args: &[&str]) {
    let f = std::fs::File::create(path).expect("create image");
    f.set_len(size).expect("size image");
    drop(f);
    run_ok(
        Command::new(which("mkfs.nilfs2").expect("mkfs.nilfs2"))
            .arg("-q")
            .arg("-f")
            .args(args)
            .arg(path),
    );
}

/// A read-only loop device over an image file, detached on drop
/// (nilfs-tune and dumpseg need a block device).
pub struct Loop {
    /// The device node, e.g. /dev/loop3.
    pub dev: String,
}

impl Loop {
    /// Attach `image` read-only.
    pub fn attach(image: &Path) -> Loop {
        let dev = run_ok(
            Command::new("losetup")
                .args(["-r", "-f", "--show"])
                .arg(image),
        );
        Loop {
            dev: dev.trim().to_string(),
        }
    }
}

impl Drop for Loop {
    fn drop(&mut self) {
        let _ = Command::new("losetup").args(["-d", &self.dev]).status();
    }
}

/// The kernel-guest and GRUB scripts (`tests/guest`: kernel-run.sh,
/// build-initramfs.sh, init.sh, manifest.sh, grub-check.sh).
pub fn oracle_dir() -> PathBuf {
    crate::harness_dir().join("guest")
}

/// A scratch directory under the target dir, removed on drop.
pub struct Scratch {
    /// Its path.
    pub path: PathBuf,
}

impl Scratch {
    /// A fresh, empty scratch directory named after `test`.
    pub fn new(test: &str) -> Scratch {
        let base = std::env::var_os("CARGO_TARGET_TMPDIR")
            .map(PathBuf::from)
            .unwrap_or_else(std::env::temp_dir);
        let path = base.join(format!("nilfs-{test}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).expect("scratch dir");
        Scratch { path }
    }

    /// A path inside it.
    pub fn file(&self, name: &str) -> PathBuf {
        self.path.join(name)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}
