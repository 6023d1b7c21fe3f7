//! Scale benchmark (issue 15): a 16 GiB sparse image file holding
//! 1,000,000 small files in 1,000 directories and 100 checkpoints, made
//! through `Fs` on a `FileDevice`; then a remount, the manifest of the
//! latest checkpoint and `check`, each timed with its peak memory.
//! Results go to docs/benchmarks/scale.md.
//!
//! `cargo bench -p nilfs-impl --bench scale` (about 16 GiB apparent, 4-5
//! GiB allocated, under target/scale-bench/); `-- --files N` for another
//! file count (directories of 1,000, a checkpoint per tenth of them).
//!
//! Every phase runs in a fresh child process, so that its peak resident
//! set (`VmHWM`) is that phase's alone; the image lives in a host file, so
//! the memory is the file system's own (metadata, caches, dirty data), not
//! the image's. The page cache holds the image between phases, as it would
//! for any reader on this host; the first phase after the write reads it
//! warm. A single-shot harness for the same reasons as write_path.rs.

mod common;

use common::{arg, content, status};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use nilfs::check::{check_device, Options};
use nilfs::device::{BlockDevice, FileDevice};
use nilfs::format::ino;
use nilfs::fs::Fs;
use nilfs::inspect::manifest::manifest;
use nilfs::mkfs::{self, MkfsOptions};
use nilfs::posix::CheckpointView;
use nilfs::the_nilfs::Nilfs;

const GIB: u64 = 1 << 30;
const MIB: u64 = 1 << 20;
const NOW: u64 = 1_800_000_000;
const FILES_PER_DIR: u64 = 1_000;

/// One phase's line: what, how long, its rate, its peak memory.
fn row(what: &str, secs: f64, rate: String) {
    println!(
        "| {what} | {secs:.2} s | {rate} | {} MiB |",
        status("VmHWM:") / MIB
    );
}

/// Make the image: `files` files of 1-4 KiB in directories of 1,000, a
/// sync (a checkpoint) after every tenth of the directories... or after
/// every directory when there are fewer than 100 of them.
fn write(path: &Path, files: u64) {
    let dirs = files.div_ceil(FILES_PER_DIR);
    let per_cp = (dirs / 100).max(1);
    let f = std::fs::File::create(path).expect("image file");
    f.set_len(16 * GIB).expect("sparse image");
    drop(f);
    let dev = FileDevice::open_read_write(path).expect("open");
    mkfs::mkfs(&dev, &MkfsOptions::default()).expect("mkfs");
    let t = Instant::now();
    let nilfs = Nilfs::open(&dev).expect("open");
    let mut fs = Fs::mount(&nilfs, NOW).expect("mount");
    let mut n = 0u64;
    let mut peak_dirty = 0u64;
    for d in 0..dirs {
        let dir = fs
            .mkdir(ino::ROOT, format!("d{d:04}").as_bytes(), 0o755)
            .expect("mkdir");
        for k in 0..FILES_PER_DIR.min(files - n) {
            let i = fs
                .create(dir, format!("f{k:04}").as_bytes(), 0o644)
                .expect("create");
            let len = 1024 + (n * 7919 % 3072) as usize;
            fs.write(i, 0, &content(n, len)).expect("write");
            n += 1;
        }
        peak_dirty = peak_dirty.max(fs.dirty_data_blocks());
        if (d + 1) % per_cp == 0 || d + 1 == dirs {
            fs.set_time(NOW + d + 1);
            fs.sync().expect("sync");
        }
        if (d + 1) % (dirs / 10).max(1) == 0 {
            eprintln!(
                "  {n} files, {:.1} s, RSS {} MiB",
                t.elapsed().as_secs_f64(),
                status("VmRSS:") / MIB
            );
        }
    }
    fs.unmount().expect("unmount");
    let secs = t.elapsed().as_secs_f64();
    row(
        &format!(
            "write {files} files in {dirs} directories, {} checkpoints (peak dirty data {} MiB)",
            dirs.div_ceil(per_cp),
            peak_dirty * 4096 / MIB
        ),
        secs,
        format!("{:.0} files/s", files as f64 / secs),
    );
}

fn remount(path: &Path) {
    let dev = FileDevice::open_read_write(path).expect("open");
    let t = Instant::now();
    let nilfs = Nilfs::open(&dev).expect("open");
    let fs = Fs::mount(&nilfs, NOW + 1_000_000).expect("mount");
    let ncp = nilfs.scan.cno.0;
    fs.unmount().expect("unmount");
    row(
        &format!("remount: scan, recovery, mount and unmount (latest checkpoint {ncp})"),
        t.elapsed().as_secs_f64(),
        "-".into(),
    );
}

fn manifest_phase(path: &Path) {
    let dev = FileDevice::open_read_only(path).expect("open");
    let t = Instant::now();
    let nilfs = Nilfs::open(&dev).expect("open");
    let view = CheckpointView::open(&nilfs, None).expect("view");
    let m = manifest(&view).expect("manifest");
    let secs = t.elapsed().as_secs_f64();
    let lines = m.lines().count();
    row(
        &format!(
            "manifest of the latest checkpoint ({lines} lines, {} MiB of text)",
            m.len() as u64 / MIB
        ),
        secs,
        format!("{:.0} entries/s", lines as f64 / secs),
    );
}

fn check_phase(path: &Path) {
    let dev = FileDevice::open_read_only(path).expect("open");
    let t = Instant::now();
    let r = check_device(&dev, &Options::default());
    let secs = t.elapsed().as_secs_f64();
    assert!(r.is_clean(), "{r}");
    row(
        &format!(
            "check (clean: {} logs, {} checkpoints, {} inodes)",
            r.stats.logs, r.stats.checkpoints, r.stats.inodes
        ),
        secs,
        format!("{:.2} GB/s read", r.stats.bytes_read as f64 / secs / 1e9),
    );
}

fn main() {
    if let (Some(phase), Some(image)) = (arg("--phase"), arg("--image")) {
        let path = Path::new(&image);
        match phase.as_str() {
            "write" => write(
                path,
                arg("--files").map_or(1_000_000, |v| v.parse().expect("N")),
            ),
            "remount" => remount(path),
            "manifest" => manifest_phase(path),
            "check" => check_phase(path),
            other => panic!("unknown phase {other}"),
        }
        return;
    }
    let files = arg("--files").unwrap_or_else(|| "1000000".into());
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join("target")
        .join("scale-bench");
    std::fs::create_dir_all(&dir).expect("target dir");
    let image = dir.join(format!("image-{files}.img"));
    println!("scale benchmark: {files} files on a 16 GiB sparse image file");
    println!("| phase | time | rate | peak RSS |");
    println!("|---|---|---|---|");
    for phase in ["write", "remount", "manifest", "check"] {
        let ok = Command::new(std::env::current_exe().expect("self"))
            .args(["--phase", phase, "--files", &files, "--image"])
            .arg(&image)
            .status()
            .expect("child")
            .success();
        assert!(ok, "phase {phase} failed");
    }
    let dev = FileDevice::open_read_only(&image).expect("open");
    let allocated = std::fs::metadata(&image)
        .map(|m| std::os::unix::fs::MetadataExt::blocks(&m) * 512)
        .unwrap_or(0);
    println!(
        "image: {} GiB apparent, {} MiB allocated ({})",
        dev.size_bytes() / GIB,
        allocated / MIB,
        image.display()
    );
}
