//! `nilref guest serve` and `nilref guest loop` (internal): the kernel's
//! nilfs2 behind `nilfs_oracle`'s traits (`nilfs_adapter::KernelGuest`).
//!
//! One boot serves many cases. On the host, `serve` boots the pinned
//! kernel (the campaigns' guest, `campaign::guest`) with one image as
//! /dev/vda and a virtio-serial port, named "nilref", that qemu serves as
//! a unix socket; it runs until the guest ends. In the guest, `loop` talks
//! on that port, one line each way at a time:
//!
//! - `{"begin": true}`: the host has written a fresh image into the disk
//!   file. The guest drops what its block device caches of the old one
//!   (`blockdev --flushbufs`), answers `{"ready": true}`, and serves a
//!   `nilref exec --stream --device /dev/vda` session
//!   ([`crate::exec::serve_stream`]): an operation per line, its observed
//!   line back;
//! - `{"end": true}` ends the session: whatever is still mounted is
//!   unmounted, so that the next image is read afresh, and the guest
//!   answers `{"ended": true}`;
//! - `{"quit": true}`, or the host closing its end after it spoke: the
//!   loop returns and the guest powers off.
//!
//! Nothing else is in flight: the host sends a line only after the answer
//! to its last one, so a session's buffered reader never holds the next
//! session's lines.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::campaign::guest::Harness;
use crate::exec::{serve_stream, ExecOptions};
use crate::peers::{Installed, Kind};

#[derive(clap::Subcommand)]
pub enum Cmd {
    /// (host) Boot the kernel guest with IMAGE as /dev/vda and its control
    /// port served at SOCKET; runs until the guest powers off.
    Serve(ServeArgs),
    /// (guest) Serve stream sessions on the "nilref" port.
    Loop(LoopArgs),
}

#[derive(clap::Args)]
pub struct ServeArgs {
    /// The pinned kernel to boot (tests/peers.toml; default: its default).
    #[arg(long)]
    pub kernel: Option<String>,
    /// The disk image, /dev/vda in the guest (the host rewrites it per case).
    #[arg(long)]
    pub image: PathBuf,
    /// Where qemu listens for the host's end of the control port.
    #[arg(long)]
    pub socket: PathBuf,
    /// Seconds the guest may live.
    #[arg(long, default_value_t = 3600)]
    pub timeout: u64,
}

#[derive(clap::Args)]
pub struct LoopArgs {
    /// The block device the sessions mount.
    #[arg(long, default_value = "/dev/vda")]
    pub device: PathBuf,
    /// Where the sessions mount it.
    #[arg(long, default_value = "/mnt/t")]
    pub dir: PathBuf,
    /// Seconds to wait for the host's first line.
    #[arg(long, default_value_t = 600)]
    pub wait: u64,
}

pub fn run(cmd: Cmd) -> Result<String, String> {
    match cmd {
        Cmd::Serve(a) => serve(a),
        Cmd::Loop(a) => guest_loop(a),
    }
}

fn serve(a: ServeArgs) -> Result<String, String> {
    // The harness carries a GRUB for the campaigns' judges; a boot does
    // not use it.
    let mut harness = Harness::new(
        Installed::get(Kind::Kernel, a.kernel.as_deref())?,
        Installed::get(Kind::Grub, None)?,
    )?;
    harness.control = Some(a.socket.clone());
    let share = a.socket.with_extension("share");
    let _ = std::fs::remove_dir_all(&share);
    std::fs::create_dir_all(&share).map_err(|e| format!("{}: {e}", share.display()))?;
    let script = "mkdir -p /mnt/t\nnilref guest loop --device /dev/vda --dir /mnt/t\n";
    let boot = harness.boot(std::slice::from_ref(&a.image), &share, script, a.timeout)?;
    let _ = std::fs::remove_dir_all(&share);
    if boot.success {
        Ok(String::new())
    } else {
        Err(format!(
            "the guest failed after {:.0} s:\n{}{}",
            boot.seconds, boot.stdout, boot.stderr
        ))
    }
}

/// The virtio-serial port named `name` (/sys/class/virtio-ports/*/name).
fn port(name: &str) -> Result<PathBuf, String> {
    let dir = Path::new("/sys/class/virtio-ports");
    let entries = std::fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    for e in entries.flatten() {
        let named = std::fs::read_to_string(e.path().join("name")).unwrap_or_default();
        if named.trim() == name {
            return Ok(Path::new("/dev").join(e.file_name()));
        }
    }
    Err(format!("no virtio-serial port named {name}"))
}

fn guest_loop(a: LoopArgs) -> Result<String, String> {
    let path = port("nilref")?;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&path)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    let mut reader = BufReader::new(file.try_clone().map_err(|e| e.to_string())?);
    let mut writer = file;
    let stdin = PathBuf::from("-");
    let opts = ExecOptions {
        dir: &a.dir,
        workload: &stdin,
        out: None,
        device: Some(&a.device),
        mark_log_writes: None,
        sleep_on_clock: false,
        worker_deadline: Duration::from_secs(600),
    };
    let t0 = Instant::now();
    let mut spoken = false;
    loop {
        let mut line = String::new();
        // A port the host has not connected to yet reads as its end.
        let n = reader.read_line(&mut line).map_err(|e| e.to_string())?;
        if n == 0 {
            if spoken || t0.elapsed() > Duration::from_secs(a.wait) {
                return Ok(String::new());
            }
            std::thread::sleep(Duration::from_millis(50));
            continue;
        }
        spoken = true;
        let v: serde_json::Value = serde_json::from_str(&line).unwrap_or_default();
        if v["quit"] == true {
            return Ok(String::new());
        }
        if v["begin"] != true {
            answer(
                &mut writer,
                &serde_json::json!({ "cannot": "expected begin" }),
            )?;
            continue;
        }
        let _ = std::process::Command::new("blockdev")
            .arg("--flushbufs")
            .arg(&a.device)
            .status();
        answer(&mut writer, &serde_json::json!({ "ready": true }))?;
        let served = serve_stream(&opts, &mut reader, &mut writer);
        let _ = rustix::mount::unmount(&a.dir, rustix::mount::UnmountFlags::empty());
        let mut ended = serde_json::json!({ "ended": true });
        if let Err(e) = served {
            ended["error"] = e.into();
        }
        answer(&mut writer, &ended)?;
    }
}

fn answer(w: &mut impl Write, v: &serde_json::Value) -> Result<(), String> {
    writeln!(w, "{v}")
        .and_then(|()| w.flush())
        .map_err(|e| format!("the port: {e}"))
}
