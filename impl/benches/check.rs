//! `nilref check` benchmark (issue 12): the whole-image checker on a
//! multi-GiB image with many files, as GB/s of used image and peak memory,
//! beside the time to read the same used blocks once in the same run.
//! Results go to docs/benchmarks/check.md.
//!
//! `cargo bench -p nilfs-impl --bench check` builds the image once (1,000
//! dirs of 1,000 small files plus a 1 GiB file, through our write path),
//! keeps it at target/check-bench/image.img (about 5 GiB on disk, sparse),
//! then measures in a fresh child process so that the peak memory is the
//! checker's alone. `-- --files N` changes the file count, `-- --rebuild`
//! forces a new image, `-- --image PATH` measures an existing image.
//!
//! A single-shot harness, not criterion or divan: one check of a 5 GiB
//! image takes seconds, and the figure is a rate over the whole image.

mod common;

use common::{arg, content, flag, status};
use std::path::{Path, PathBuf};
use std::time::Instant;

use nilfs::check::{check_device, Options};
use nilfs::device::{export_image, BlockDevice, FileDevice, MemDevice};
use nilfs::format::{ino, SegNum};
use nilfs::fs::Fs;
use nilfs::mkfs::{self, MkfsOptions};
use nilfs::the_nilfs::Nilfs;

const MIB: u64 = 1 << 20;
const NOW: u64 = 1_800_000_000;
const FILES_PER_DIR: u64 = 1_000;

fn build(path: &Path, files: u64) {
    let dirs = files.div_ceil(FILES_PER_DIR);
    // 1 GiB file, one block per small file, and room for the metadata.
    let used = 1024 * MIB + files * 4096 * 11 / 10;
    let segments = (used / (8 * MIB) * 13 / 10 + 64).max(128);
    let dev = MemDevice::new(segments * 8 * MIB);
    mkfs::mkfs(&dev, &MkfsOptions::default()).unwrap();
    let t = Instant::now();
    {
        let nilfs = Nilfs::open(&dev).unwrap();
        let mut fs = Fs::mount(&nilfs, NOW).unwrap();
        let big = fs.create(ino::ROOT, b"big", 0o644).unwrap();
        let chunk = content(7, MIB as usize);
        for i in 0..1024u64 {
            fs.write(big, i * MIB, &chunk).unwrap();
            if i % 64 == 63 {
                fs.sync().unwrap();
            }
        }
        let mut n = 0u64;
        for d in 0..dirs {
            let dir = fs
                .mkdir(ino::ROOT, format!("d{d:04}").as_bytes(), 0o755)
                .unwrap();
            for f in 0..FILES_PER_DIR.min(files - n) {
                let i = fs
                    .create(dir, format!("f{f:04}").as_bytes(), 0o644)
                    .unwrap();
                let len = 1024 + (n * 7919 % 3072) as usize;
                fs.write(i, 0, &content(n, len)).unwrap();
                n += 1;
            }
            fs.sync().unwrap();
            if d % 100 == 99 {
                eprintln!("  {n} files, {:.0} s", t.elapsed().as_secs_f64());
            }
        }
        fs.unmount().unwrap();
    }
    eprintln!(
        "built {files} files in {:.0} s, {} MiB resident; exporting",
        t.elapsed().as_secs_f64(),
        dev.resident_bytes() / MIB
    );
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    export_image(&dev, path).unwrap();
}

/// Read every used block of the image once, in 8 MiB requests: the
/// physical limit of any checker that verifies `ss_datasum`.
fn read_used(dev: &dyn BlockDevice) -> (u64, f64) {
    let nilfs = Nilfs::open(dev).unwrap();
    let bs = u64::from(nilfs.block_size());
    let usages = nilfs.segment_usages().unwrap();
    let mut buf = vec![0u8; (8 * MIB) as usize];
    let t = Instant::now();
    let mut bytes = 0;
    for (s, su) in usages.iter().enumerate() {
        let (start, _) = nilfs.geo.range(SegNum(s as u64));
        let mut left = u64::from(su.nblocks) * bs;
        let mut off = start.0 * bs;
        while left > 0 {
            let n = left.min(8 * MIB) as usize;
            dev.read_at(off, &mut buf[..n]).unwrap();
            std::hint::black_box(&buf[..n]);
            off += n as u64;
            left -= n as u64;
            bytes += n as u64;
        }
    }
    (bytes, t.elapsed().as_secs_f64())
}

fn measure(path: &Path) {
    let dev = FileDevice::open_read_only(path).unwrap();
    // Warm the page cache, then time one read of the used blocks.
    let _ = read_used(&dev);
    let (bytes, t_read) = read_used(&dev);
    let rss0 = status("VmRSS:");
    let t = Instant::now();
    // When each phase the progress reports was first seen.
    let phases = std::sync::Arc::new(std::sync::Mutex::new(Vec::<(&'static str, f64)>::new()));
    let seen = phases.clone();
    let opts = Options {
        progress: Some(std::sync::Arc::new(move |p: nilfs::check::Progress| {
            let mut v = seen.lock().unwrap();
            if v.last().map(|l| l.0) != Some(p.phase) {
                v.push((p.phase, t.elapsed().as_secs_f64()));
            }
        })),
        ..Options::default()
    };
    let r = check_device(&dev, &opts);
    let t_check = t.elapsed().as_secs_f64();
    let phases: Vec<String> = phases
        .lock()
        .unwrap()
        .iter()
        .map(|(p, at)| format!("{p} from {at:.2} s"))
        .collect();
    let hwm = status("VmHWM:");
    assert!(r.is_clean(), "{r}");
    let gb = |b: u64, s: f64| b as f64 / s / 1e9;
    println!(
        "| image | {} MiB used, {} MiB device |",
        bytes / MIB,
        dev.size_bytes() / MIB
    );
    println!(
        "| covered | {} logs, {} checkpoints, {} inodes, {} directory entries, {} B-tree nodes |",
        r.stats.logs, r.stats.checkpoints, r.stats.inodes, r.stats.dirents, r.stats.nodes
    );
    println!(
        "| read the used blocks once | {t_read:.2} s | **{:.2} GB/s** |",
        gb(bytes, t_read)
    );
    println!(
        "| nilref check (latest + snapshots) | {t_check:.2} s | **{:.2} GB/s** of used image ({:.0} % of the read) |",
        gb(bytes, t_check),
        100.0 * t_read / t_check
    );
    println!("| phases | {} |", phases.join(", "));
    println!(
        "| bytes the check read | {} MiB |",
        r.stats.bytes_read / MIB
    );
    println!(
        "| memory | RSS {} MiB before the check, peak {} MiB |",
        rss0 / MIB,
        hwm / MIB
    );
}

fn main() {
    if flag("--bench") && std::env::args().len() <= 2 {
        // cargo bench passes --bench; fall through with the defaults.
    }
    if let Some(p) = arg("--measure") {
        measure(Path::new(&p));
        return;
    }
    let files: u64 = arg("--files").map_or(1_000_000, |v| v.parse().unwrap());
    let path = match arg("--image") {
        Some(p) => PathBuf::from(p),
        None => {
            let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
                .join("..")
                .join("target")
                .join("check-bench")
                .join(format!("image-{files}.img"));
            if flag("--rebuild") || !p.exists() {
                build(&p, files);
            }
            p
        }
    };
    // Measure in a fresh process: its peak memory is the checker's.
    let status = std::process::Command::new(std::env::current_exe().unwrap())
        .arg("--measure")
        .arg(&path)
        .status()
        .unwrap();
    assert!(status.success());
}
