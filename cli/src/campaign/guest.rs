//! The kernel guest, from the binary: tests/guest's scripts are compiled
//! in and written out once per content, so an installed `nilref` runs
//! campaigns without a checkout beside it. One boot serves a batch of
//! workloads: each gets a disk of its own, the runner (this very binary)
//! rides in the initramfs, and the workloads and their results pass
//! through a shared folder (9p).

use std::path::{Path, PathBuf};
use std::process::Command;

use sha2::{Digest, Sha256};

use crate::peers::Installed;

use crate::campaign::common::Workload;

const SCRIPTS: [(&str, &str); 4] = [
    (
        "kernel-run.sh",
        include_str!("../../../tests/guest/kernel-run.sh"),
    ),
    (
        "build-initramfs.sh",
        include_str!("../../../tests/guest/build-initramfs.sh"),
    ),
    ("init.sh", include_str!("../../../tests/guest/init.sh")),
    (
        "manifest.sh",
        include_str!("../../../tests/guest/manifest.sh"),
    ),
];

/// Seconds one boot may take (a batch of workloads).
pub const BOOT_TIMEOUT_S: u64 = 1800;

/// Guest device names, in attach order (qemu: the first image, then DISKS).
pub const DEVS: [&str; 12] = [
    "vda", "vdb", "vdc", "vdd", "vde", "vdf", "vdg", "vdh", "vdi", "vdj", "vdk", "vdl",
];

/// The harness scripts on disk, and the pinned peers a kernel campaign
/// uses: the kernel it boots and the GRUB that reads the kernel's images.
pub struct Harness {
    dir: PathBuf,
    pub kernel: Installed,
    pub grub: Installed,
    /// The guest's vCPUs (1 unless a campaign needs more: the concurrent
    /// one runs its workers on 2).
    pub smp: u32,
    /// A unix socket for the guest's control port (kernel-run.sh's
    /// CONTROL; `nilref guest serve`).
    pub control: Option<PathBuf>,
}

/// What one boot printed.
pub struct Boot {
    pub stdout: String,
    pub stderr: String,
    pub success: bool,
    pub seconds: f64,
}

impl Harness {
    /// Writes the scripts (once per version) under the temp folder.
    pub fn new(kernel: Installed, grub: Installed) -> Result<Harness, String> {
        let mut h = Sha256::new();
        for (name, text) in SCRIPTS {
            h.update(name.as_bytes());
            h.update(text.as_bytes());
        }
        let tag: String = h.finalize()[..6]
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        let dir = std::env::temp_dir().join(format!("nilref-guest-{tag}"));
        std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        for (name, text) in SCRIPTS {
            let p = dir.join(name);
            if std::fs::read_to_string(&p).ok().as_deref() != Some(text) {
                let tmp = dir.join(format!(".{name}.{}", std::process::id()));
                std::fs::write(&tmp, text).map_err(|e| format!("{}: {e}", tmp.display()))?;
                set_executable(&tmp)?;
                std::fs::rename(&tmp, &p).map_err(|e| format!("{}: {e}", p.display()))?;
            }
        }
        Ok(Harness {
            dir,
            kernel,
            grub,
            smp: 1,
            control: None,
        })
    }

    /// Boots the guest with `disks` as /dev/vda, /dev/vdb, ..., `share` at
    /// /host, this binary in /usr/local/bin, and runs `script`.
    pub fn boot(
        &self,
        disks: &[PathBuf],
        share: &Path,
        script: &str,
        timeout_s: u64,
    ) -> Result<Boot, String> {
        assert!(!disks.is_empty() && disks.len() <= DEVS.len());
        let script_path = share.join("run.sh");
        std::fs::write(&script_path, script).map_err(|e| e.to_string())?;
        // The guest calls the runner `nilref`, whatever this binary is named.
        let me = std::env::current_exe().map_err(|e| format!("this binary: {e}"))?;
        let runner = share.join("bin").join("nilref");
        std::fs::create_dir_all(share.join("bin")).map_err(|e| e.to_string())?;
        std::fs::copy(&me, &runner).map_err(|e| format!("{}: {e}", runner.display()))?;
        let rest: Vec<String> = disks[1..].iter().map(|p| p.display().to_string()).collect();
        let t0 = std::time::Instant::now();
        let mut cmd = Command::new(self.dir.join("kernel-run.sh"));
        self.kernel.apply(&mut cmd);
        let out = cmd
            .arg(&disks[0])
            .arg(&script_path)
            .env("DISKS", rest.join(" "))
            .env("SHARE", share)
            .env("BINS", &runner)
            .env("TIMEOUT", timeout_s.to_string())
            .env("SMP", self.smp.to_string())
            .env("CONTROL", self.control.as_deref().unwrap_or(Path::new("")))
            .output()
            .map_err(|e| format!("kernel-run.sh: {e}"))?;
        Ok(Boot {
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
            success: out.status.success(),
            seconds: t0.elapsed().as_secs_f64(),
        })
    }
}

fn set_executable(p: &Path) -> Result<(), String> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o755))
        .map_err(|e| format!("{}: {e}", p.display()))
}

/// A fresh shared folder for one boot, holding workload i of `batch` as
/// `w{i}.jsonl` (the guest's /host/w{i}.jsonl).
pub fn fresh_share(work: &Path, batch: &[Workload]) -> Result<(), String> {
    let _ = std::fs::remove_dir_all(work);
    std::fs::create_dir_all(work).map_err(|e| format!("{}: {e}", work.display()))?;
    for (i, w) in batch.iter().enumerate() {
        std::fs::write(work.join(format!("w{i}.jsonl")), w.to_jsonl())
            .map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// A sparse file of `bytes` (a guest disk).
pub fn sparse_disk(path: &Path, bytes: u64) -> Result<(), String> {
    let f = std::fs::File::create(path).map_err(|e| format!("{}: {e}", path.display()))?;
    f.set_len(bytes)
        .map_err(|e| format!("{}: {e}", path.display()))
}
