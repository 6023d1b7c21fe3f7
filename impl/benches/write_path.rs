//! Write-path benchmark (issue 5): sequential write and read of 1 GiB,
//! random 4 KiB overwrites, creation of 100,000 small files, all through the
//! library API on a `MemDevice`, next to the memcpy bandwidth measured in the
//! same run. Results go to docs/benchmarks/write-path.md.
//!
//! A single-shot harness (`harness = false`), not criterion or divan: one
//! pass of the 1 GiB phase takes many seconds and leaves a 1 GiB image
//! behind, so the tens of samples those frameworks take would cost minutes
//! and gigabytes without making a multi-second figure more precise. A
//! warm-up pass of every phase at 1/16 scale runs first, on its own device.
//!
//! `cargo bench -p nilfs-impl --bench write_path` (full scale);
//! append `-- --scale 16` to divide every size by 16, and `--profile` to
//! run the phases alone (no memcpy baseline, no warm-up) under a profiler;
//! `--only seq`, `--only small` or `--only over` runs one phase on the
//! pre-faulted dense device three times, with nothing else; with
//! `--only small`, `--dirs N` sets the directories of 1,000 files
//! (`--dirs 1000`: a million files).

use std::hint::black_box;
use std::time::{Duration, Instant};

use nilfs::device::MemDevice;
use nilfs::format::{ino, Ino};
use nilfs::fs::Fs;
use nilfs::mkfs::{self, MkfsOptions};
use nilfs::posix::CheckpointView;
use nilfs::rng::SplitMix64;
use nilfs::the_nilfs::Nilfs;

const MIB: u64 = 1 << 20;
const BLOCK: u64 = 4096;
/// Sync policy for the sequential write: a sync per 64 MiB written.
const SEQ_SYNC_BYTES: u64 = 64 * MIB;
/// Sync policy for the overwrites: a sync per 1,000 (4 MiB dirty).
const OVERWRITE_SYNC_EVERY: u64 = 1_000;
/// Random overwrites at full scale.
const OVERWRITES: u64 = 20_000;
/// Small files per directory; a sync after each directory.
const FILES_PER_DIR: u64 = 1_000;
/// 512 segments of 8 MiB (sparse: only written blocks take memory). It
/// must hold 1 GiB of file, the overwrites, the small files and every log's
/// metadata, as nothing is cleaned. The segment usage table spans two
/// sufile blocks (254 entries in the first), so constructions extend into
/// segments whose usage entries lie in the second.
const DEVICE_BYTES: u64 = 512 * 8 * MIB;
const NOW: u64 = 1_800_000_000;

/// Content of the sequential file's 1 MiB chunk `n`: a seeded random MiB
/// with `n` and the block index stamped at the start of every 4 KiB block,
/// so no two blocks are equal and generating it costs almost nothing.
fn seq_chunk(base: &[u8], n: u64, out: &mut [u8]) {
    out.copy_from_slice(base);
    for (b, blk) in out.chunks_mut(BLOCK as usize).enumerate() {
        blk[..8].copy_from_slice(&n.to_le_bytes());
        blk[8..16].copy_from_slice(&(b as u64).to_le_bytes());
    }
}

/// Peak and current resident set of this process, from /proc (kB).
fn rss_kib() -> (u64, u64) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    (field("VmHWM:"), field("VmRSS:"))
}

/// Prints table rows, unless it reports a warm-up.
struct Report {
    quiet: bool,
}

impl Report {
    fn row(&self, what: &str, amount: String, t: Duration, rate: String, dev: &MemDevice) {
        let (hwm, rss) = rss_kib();
        let line = format!(
            "| {what} | {amount} | {:.2} s | {rate} | {} MiB | {} MiB / {} MiB |",
            t.as_secs_f64(),
            dev.resident_bytes() / MIB,
            rss / 1024,
            hwm / 1024,
        );
        self.line(&line);
    }

    fn line(&self, line: &str) {
        if !self.quiet {
            println!("{line}");
        }
    }
}

fn mib_s(bytes: u64, t: Duration) -> String {
    format!("{:.0} MiB/s", bytes as f64 / MIB as f64 / t.as_secs_f64())
}

fn ops_s(ops: u64, t: Duration) -> String {
    format!("{:.0} ops/s", ops as f64 / t.as_secs_f64())
}

/// Copy a 256 MiB buffer 8 times; the best pass, in MiB/s copied.
fn memcpy_bandwidth() -> (f64, f64) {
    let len = (256 * MIB) as usize;
    let mut src = vec![0u8; len];
    SplitMix64::new(7).fill(&mut src);
    let mut dst = vec![0u8; len];
    dst.copy_from_slice(&src); // fault the pages in
    let mut times = Vec::new();
    for pass in 0..8u8 {
        src[0] = pass;
        let t = Instant::now();
        dst.copy_from_slice(black_box(&src));
        times.push(t.elapsed());
        black_box(&dst);
    }
    times.sort();
    let rate = |t: Duration| len as f64 / MIB as f64 / t.as_secs_f64();
    (rate(times[0]), rate(times[times.len() / 2]))
}

/// A dense in-memory device whose memory is allocated and touched before
/// the run: writes are one copy into memory already faulted in, so a
/// phase on it measures the file system's own cost without the host's
/// page faults for a device that grows (which `MemDevice` pays for every
/// new block, as a RAM disk does).
struct DenseDevice {
    data: std::sync::Mutex<Vec<u8>>,
    /// Bytes written so far.
    written: std::sync::atomic::AtomicU64,
}

impl DenseDevice {
    fn new(bytes: u64) -> Self {
        let mut data = vec![0u8; bytes as usize];
        // Touch every page (vec! of zeros may map them lazily).
        for page in data.chunks_mut(4096) {
            page[0] = 1;
            page[0] = 0;
        }
        black_box(&data);
        DenseDevice {
            data: std::sync::Mutex::new(data),
            written: Default::default(),
        }
    }
}

impl nilfs::device::BlockDevice for DenseDevice {
    fn size_bytes(&self) -> u64 {
        self.data.lock().expect("lock").len() as u64
    }
    fn read_at(&self, off: u64, buf: &mut [u8]) -> nilfs::Result<()> {
        let data = self.data.lock().expect("lock");
        nilfs::device::check_range(data.len() as u64, off, buf.len())?;
        buf.copy_from_slice(&data[off as usize..off as usize + buf.len()]);
        Ok(())
    }
    fn write_at(&self, off: u64, buf: &[u8]) -> nilfs::Result<()> {
        self.write_vectored_at(off, &[buf])
    }
    /// Each piece copied straight into place, as `MemDevice` does.
    fn write_vectored_at(&self, off: u64, bufs: &[&[u8]]) -> nilfs::Result<()> {
        let mut data = self.data.lock().expect("lock");
        let len = bufs.iter().map(|b| b.len()).sum();
        nilfs::device::check_range(data.len() as u64, off, len)?;
        let mut at = off as usize;
        for b in bufs {
            data[at..at + b.len()].copy_from_slice(b);
            at += b.len();
        }
        self.written
            .fetch_add(len as u64, std::sync::atomic::Ordering::Relaxed);
        Ok(())
    }
    fn flush(&self) -> nilfs::Result<()> {
        Ok(())
    }
}

/// `f` on a fresh file system mounted on a pre-faulted `DenseDevice` of
/// at least `bytes` (whole segments).
fn on_dense<R>(bytes: u64, f: impl FnOnce(&mut Fs<'_>, &DenseDevice) -> R) -> R {
    let dev = DenseDevice::new(bytes.next_multiple_of(8 * MIB));
    mkfs::mkfs(&dev, &MkfsOptions::default()).expect("mkfs");
    let nilfs = Nilfs::open(&dev).expect("open");
    let mut fs = Fs::mount(&nilfs, NOW).expect("mount");
    f(&mut fs, &dev)
}

/// The sequential write of phase (1) on a pre-faulted `DenseDevice`:
/// (time, time inside sync).
fn sequential_on_dense(file_bytes: u64, base: &[u8]) -> (Duration, Duration) {
    on_dense((file_bytes * 3 / 2).max(256 * MIB) + 8 * MIB, |fs, _| {
        let (f, total, sync_time) = write_sequential(fs, file_bytes, base);
        let mut chunk = vec![0u8; MIB as usize];
        let got = fs.read(f, file_bytes - MIB, MIB).expect("read");
        seq_chunk(base, file_bytes / MIB - 1, &mut chunk);
        assert!(got == chunk, "the last chunk on the dense device");
        (total, sync_time)
    })
}

/// The floor under the sequential write on the dense device: what that
/// write cannot avoid with a device that copies, without any metadata.
/// The same 1 MiB chunks are copied into fresh 4 KiB pages (as `Fs::write`
/// copies into dirty pages), and every 64 MiB the pages are checksummed
/// (`crc32_le`, the logs' data checksum), copied into place on a
/// pre-faulted buffer (the device) and freed (as a sync does).
fn copy_floor_on_dense(file_bytes: u64, base: &[u8]) -> Duration {
    let mut dev = vec![0u8; file_bytes as usize];
    for page in dev.chunks_mut(BLOCK as usize) {
        page[0] = 1;
    }
    black_box(&dev);
    let mut chunk = vec![0u8; MIB as usize];
    let mut pages: Vec<Vec<u8>> = Vec::new();
    let mut written = 0usize;
    let mut crc = 0u32;
    let t = Instant::now();
    for n in 0..file_bytes / MIB {
        seq_chunk(base, n, &mut chunk);
        pages.extend(chunk.chunks(BLOCK as usize).map(<[u8]>::to_vec));
        let last = n + 1 == file_bytes / MIB;
        if ((n + 1) * MIB).is_multiple_of(SEQ_SYNC_BYTES) || last {
            for p in pages.drain(..) {
                crc = nilfs::format::crc::crc32_le(crc, &p);
                dev[written..written + p.len()].copy_from_slice(&p);
                written += p.len();
            }
        }
    }
    let t = t.elapsed();
    black_box((crc, &dev));
    t
}

/// Phase (1): `/big` written in 1 MiB calls, a sync per 64 MiB and at
/// the end. Returns the file, the time, and the time inside the syncs.
fn write_sequential(fs: &mut Fs<'_>, file_bytes: u64, base: &[u8]) -> (Ino, Duration, Duration) {
    let f = fs.create(ino::ROOT, b"big", 0o644).expect("create");
    let mut chunk = vec![0u8; MIB as usize];
    let mut sync_time = Duration::ZERO;
    let t = Instant::now();
    for n in 0..file_bytes / MIB {
        seq_chunk(base, n, &mut chunk);
        fs.write(f, n * MIB, &chunk).expect("write");
        if ((n + 1) * MIB).is_multiple_of(SEQ_SYNC_BYTES) {
            let s = Instant::now();
            fs.sync().expect("sync");
            sync_time += s.elapsed();
        }
    }
    let s = Instant::now();
    fs.sync().expect("sync");
    sync_time += s.elapsed();
    (f, t.elapsed(), sync_time)
}

/// Phase (2): `n` random 4 KiB overwrites of the first `nblocks` blocks
/// of `f`, a sync per 1,000 and at the end. Returns the time and the last
/// value written to each block.
fn overwrite_random(
    fs: &mut Fs<'_>,
    f: Ino,
    nblocks: u64,
    n: u64,
) -> (Duration, std::collections::BTreeMap<u64, u64>) {
    let mut rng = SplitMix64::new(2);
    let mut latest = std::collections::BTreeMap::new();
    let mut block = vec![0u8; BLOCK as usize];
    let t = Instant::now();
    for k in 0..n {
        let b = rng.next_u64() % nblocks;
        block.fill(k as u8);
        block[..8].copy_from_slice(&k.to_le_bytes());
        fs.write(f, b * BLOCK, &block).expect("overwrite");
        latest.insert(b, k);
        if (k + 1) % OVERWRITE_SYNC_EVERY == 0 {
            fs.sync().expect("sync");
        }
    }
    fs.sync().expect("sync");
    (t.elapsed(), latest)
}

/// Phase (3): `dirs` directories of 1,000 files of 1-4 KiB (seeded), a
/// sync after each directory. Returns the time, the time of each tenth,
/// and the bytes written.
fn write_small_files(fs: &mut Fs<'_>, dirs: u64) -> (Duration, Vec<Duration>, u64) {
    let mut rng = SplitMix64::new(3);
    let mut data = vec![0u8; 4 * 1024];
    let mut bytes = 0u64;
    let mut tenths = Vec::new();
    let t = Instant::now();
    let mut mark = Instant::now();
    for d in 0..dirs {
        let dir = fs
            .mkdir(ino::ROOT, format!("d{d:03}").as_bytes(), 0o755)
            .expect("mkdir");
        for n in 0..FILES_PER_DIR {
            let len = 1024 + (rng.next_u64() % (3 * 1024 + 1)) as usize;
            rng.fill(&mut data[..len]);
            let i: Ino = fs
                .create(dir, format!("f{n:04}").as_bytes(), 0o644)
                .expect("create");
            fs.write(i, 0, &data[..len]).expect("write");
            bytes += len as u64;
        }
        fs.sync().expect("sync");
        // A tenth ends where (d + 1) / dirs passes the next tenth: ten
        // of them for any count of ten directories or more.
        if (d + 1) * 10 / dirs > tenths.len() as u64 {
            tenths.push(mark.elapsed());
            mark = Instant::now();
        }
    }
    (t.elapsed(), tenths, bytes)
}

/// Phase (3)'s small files on a fresh file system on a pre-faulted
/// `DenseDevice`: (time, files, time per tenth).
fn small_files_on_dense(dirs: u64) -> (Duration, u64, Vec<Duration>) {
    // One data block a file, with room for its inode, DAT entry, B-tree
    // and the logs' summaries and metadata blocks: 3 blocks a file up to
    // 100,000 files, 1.5 beyond (the extra per file is far below a block).
    let per_file = if dirs <= 100 { 3 * 4096 } else { 3 * 4096 / 2 };
    let bytes = (dirs * FILES_PER_DIR * per_file).max(256 * MIB) + 64 * MIB;
    let (t, tenths, _) = on_dense(bytes, |fs, _| write_small_files(fs, dirs));
    (t, dirs * FILES_PER_DIR, tenths)
}

fn fresh_device(bytes: u64) -> MemDevice {
    let dev = MemDevice::new(bytes);
    mkfs::mkfs(&dev, &MkfsOptions::default()).expect("mkfs");
    dev
}

/// Every phase at `1/scale` of the full sizes.
fn run(scale: u64, report: &Report) {
    let file_bytes = 1024 * MIB / scale;
    let overwrites = OVERWRITES / scale;
    let dirs = (100 / scale).max(1);
    let dev = fresh_device(DEVICE_BYTES);
    let nilfs = Nilfs::open(&dev).expect("open");
    let mut fs = Fs::mount(&nilfs, NOW).expect("mount");

    // (1) Sequential write, 1 MiB per call, a sync per 64 MiB and at the end.
    let mut base = vec![0u8; MIB as usize];
    SplitMix64::new(1).fill(&mut base);
    let mut chunk = vec![0u8; MIB as usize];
    // The device's own speed first, as a floor under the file system's:
    // the same bytes written straight to a fresh MemDevice in 8 MiB calls
    // (a segment at a time), which allocates and faults in each block as
    // the file system's writes do.
    {
        let raw = MemDevice::new(DEVICE_BYTES);
        let mut seg = vec![0u8; (8 * MIB) as usize];
        let t = Instant::now();
        for s in 0..file_bytes / (8 * MIB) {
            for (j, c) in seg.chunks_mut(MIB as usize).enumerate() {
                seq_chunk(&base, s * 8 + j as u64, c);
            }
            nilfs::device::BlockDevice::write_at(&raw, s * 8 * MIB, &seg).expect("write");
        }
        let total = t.elapsed();
        report.row(
            "baseline: the same bytes straight to a fresh MemDevice, 8 MiB writes",
            format!("{} MiB", file_bytes / MIB),
            total,
            mib_s(file_bytes, total),
            &raw,
        );
    }
    let (f, total, sync_time) = write_sequential(&mut fs, file_bytes, &base);
    let (dense, dense_sync) = sequential_on_dense(file_bytes, &base);
    let floor = copy_floor_on_dense(file_bytes, &base);
    report.row(
        "floor: the same bytes copied into fresh pages, checksummed and copied into a pre-faulted buffer (no metadata)",
        format!("{} MiB", file_bytes / MIB),
        floor,
        mib_s(file_bytes, floor),
        &dev,
    );
    report.row(
        "sequential write, the same, on a pre-faulted dense device (the file system's own cost)",
        format!("{} MiB", file_bytes / MIB),
        dense,
        format!(
            "{} (sync {:.2} s)",
            mib_s(file_bytes, dense),
            dense_sync.as_secs_f64()
        ),
        &dev,
    );
    report.row(
        "sequential write, 1 MiB writes, sync per 64 MiB",
        format!("{} MiB", file_bytes / MIB),
        total,
        mib_s(file_bytes, total),
        &dev,
    );
    report.row(
        "  of which in sync",
        format!("{} syncs", file_bytes / SEQ_SYNC_BYTES + 1),
        sync_time,
        mib_s(file_bytes, sync_time),
        &dev,
    );

    // Sequential read back through Fs::read_into (every block from the
    // device, through the bmap and the DAT), 1 MiB per call into one
    // buffer, as a program reads, checked.
    let mut buf = vec![0u8; MIB as usize];
    let mut busy = Duration::ZERO;
    for n in 0..file_bytes / MIB {
        seq_chunk(&base, n, &mut chunk);
        let t = Instant::now();
        let got = fs.read_into(f, n * MIB, &mut buf).expect("read");
        busy += t.elapsed();
        assert!(
            got as u64 == MIB && buf == chunk,
            "chunk {n} reads back wrong"
        );
    }
    report.row(
        "sequential read, Fs::read_into, 1 MiB calls",
        format!("{} MiB", file_bytes / MIB),
        busy,
        mib_s(file_bytes, busy),
        &dev,
    );

    // (2) Random 4 KiB overwrites at block-aligned offsets, seeded, a sync
    // per 1,000 and at the end; the last value of each block is checked.
    let nblocks = file_bytes / BLOCK;
    let (total, latest) = overwrite_random(&mut fs, f, nblocks, overwrites);
    report.row(
        "random 4 KiB overwrites, sync per 1,000",
        format!("{overwrites} writes"),
        total,
        format!(
            "{} ({})",
            ops_s(overwrites, total),
            mib_s(overwrites * BLOCK, total)
        ),
        &dev,
    );
    for (&b, &k) in &latest {
        let got = fs.read(f, b * BLOCK, 8).expect("read");
        assert_eq!(got, k.to_le_bytes(), "block {b}");
    }

    // (3) Small files: `dirs` directories of 1,000 files of 1-4 KiB each,
    // a sync after each directory. Timed per tenth to expose growth.
    let (total, tenths, bytes) = write_small_files(&mut fs, dirs);
    let files = dirs * FILES_PER_DIR;
    report.row(
        "create + write small files (1-4 KiB), sync per directory",
        format!("{files} files, {} MiB", bytes / MIB),
        total,
        format!("{} ({})", ops_s(files, total), mib_s(bytes, total)),
        &dev,
    );
    let (dense, dense_files, _) = small_files_on_dense(dirs);
    report.row(
        "small files, the same, on a fresh file system on a pre-faulted dense device",
        format!("{dense_files} files"),
        dense,
        ops_s(dense_files, dense),
        &dev,
    );
    let per: Vec<String> = tenths
        .iter()
        .map(|t| format!("{:.2}", t.as_secs_f64()))
        .collect();
    report.line(&format!(
        "small files, seconds per tenth: {}",
        per.join(" ")
    ));

    // Unmount, remount, read the big file back through the read path.
    let t = Instant::now();
    fs.unmount().expect("unmount");
    drop(nilfs);
    let nilfs = Nilfs::open(&dev).expect("reopen");
    report.row(
        "unmount + Nilfs::open (scan, recovery)",
        "-".into(),
        t.elapsed(),
        "-".into(),
        &dev,
    );
    let view = CheckpointView::open(&nilfs, None).expect("view");
    let (_, inode) = view.resolve(b"/big", true).expect("resolve");
    let t = Instant::now();
    let all = view.read_all(&inode).expect("read_all");
    let total = t.elapsed();
    assert_eq!(all.len() as u64, file_bytes);
    for (&b, &k) in &latest {
        let at = (b * BLOCK) as usize;
        assert_eq!(all[at..at + 8], k.to_le_bytes(), "block {b} after remount");
    }
    drop(all);
    report.row(
        "sequential read after remount, CheckpointView::read_all",
        format!("{} MiB", file_bytes / MIB),
        total,
        mib_s(file_bytes, total),
        &dev,
    );
    // CheckpointView::read_into in 1 MiB calls into one reused buffer, as
    // a program reads a file: the whole file, checked outside the timing.
    let mut buf = vec![0u8; MIB as usize];
    let mut busy = Duration::ZERO;
    for n in 0..file_bytes / MIB {
        let t = Instant::now();
        let got = view.read_into(&inode, n * MIB, &mut buf).expect("read");
        busy += t.elapsed();
        assert_eq!(got as u64, MIB);
        seq_chunk(&base, n, &mut chunk);
        for (&b, &k) in latest.range(n * MIB / BLOCK..(n + 1) * MIB / BLOCK) {
            let at = (b * BLOCK - n * MIB) as usize;
            chunk[at..at + BLOCK as usize].fill(k as u8);
            chunk[at..at + 8].copy_from_slice(&k.to_le_bytes());
        }
        assert!(buf == chunk, "chunk {n} after remount");
    }
    report.row(
        "sequential read after remount, CheckpointView::read_into, 1 MiB calls",
        format!("{} MiB", file_bytes / MIB),
        busy,
        mib_s(file_bytes, busy),
        &dev,
    );
}

/// The number after `flag` on the command line, if the flag is there.
fn number_after(args: &[String], flag: &str) -> Option<u64> {
    let p = args.iter().position(|a| a == flag)?;
    let n = args.get(p + 1)?;
    Some(n.parse().unwrap_or_else(|_| panic!("{flag} N")))
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let scale = number_after(&args, "--scale").unwrap_or(1).max(1);
    // --dirs N: the small files' directory count for `--only small`
    // (1,000 files each), instead of 100 / scale.
    let dirs = number_after(&args, "--dirs").map(|n| n.max(1));
    // --profile: the phases alone, without the memcpy baseline and the
    // warm-up, so that a profiler sees only the file system.
    let profile = args.iter().any(|a| a == "--profile");
    // --only seq|small|over: one phase on the pre-faulted dense device, three
    // times, for a profiler that should see nothing else.
    if let Some(only) = args
        .iter()
        .position(|a| a == "--only")
        .and_then(|p| args.get(p + 1))
    {
        let mut base = vec![0u8; MIB as usize];
        SplitMix64::new(1).fill(&mut base);
        for _ in 0..3 {
            match only.as_str() {
                "seq" => {
                    let (t, s) = sequential_on_dense(1024 * MIB / scale, &base);
                    let floor = copy_floor_on_dense(1024 * MIB / scale, &base);
                    println!(
                        "seq on dense: {:.3} s (sync {:.3} s), {}; floor {:.3} s, {}",
                        t.as_secs_f64(),
                        s.as_secs_f64(),
                        mib_s(1024 * MIB / scale, t),
                        floor.as_secs_f64(),
                        mib_s(1024 * MIB / scale, floor)
                    );
                }
                "small" => {
                    let (t, n, tenths) = small_files_on_dense(dirs.unwrap_or((100 / scale).max(1)));
                    let tenths: Vec<String> = tenths
                        .iter()
                        .map(|d| format!("{:.3}", d.as_secs_f64()))
                        .collect();
                    println!(
                        "small on dense: {:.3} s, {} (tenths {})",
                        t.as_secs_f64(),
                        ops_s(n, t),
                        tenths.join(" ")
                    );
                }
                "over" => {
                    // Phase (2) on the dense device, after its file is
                    // written (the write is not timed).
                    let file_bytes = 1024 * MIB / scale;
                    let n = OVERWRITES / scale;
                    let (t, bytes) =
                        on_dense((file_bytes * 2).max(256 * MIB) + 64 * MIB, |fs, dev| {
                            let (f, _, _) = write_sequential(fs, file_bytes, &base);
                            let before = dev.written.load(std::sync::atomic::Ordering::Relaxed);
                            let (t, _) = overwrite_random(fs, f, file_bytes / BLOCK, n);
                            let after = dev.written.load(std::sync::atomic::Ordering::Relaxed);
                            (t, after - before)
                        });
                    // What copying and checksumming those bytes alone
                    // costs, at the sequential floor's measured rate.
                    let floor_bytes = 256 * MIB;
                    let per_byte =
                        copy_floor_on_dense(floor_bytes, &base).as_secs_f64() / floor_bytes as f64;
                    let per_op = bytes as f64 / n as f64;
                    println!(
                        "over on dense: {:.3} s, {}; {:.1} blocks written per overwrite, \
                         their copies and checksum alone {:.0} ops/s",
                        t.as_secs_f64(),
                        ops_s(n, t),
                        per_op / BLOCK as f64,
                        1.0 / (per_op * per_byte)
                    );
                }
                other => panic!("--only {other}: seq, small or over"),
            }
        }
        return;
    }
    println!("write-path benchmark, sizes / {scale}");
    if !profile {
        let (best, median) = memcpy_bandwidth();
        println!("memcpy (start): best {best:.0} MiB/s, median {median:.0} MiB/s");
        println!("warm-up at 1/16 of the sizes below...");
        run(scale * 16, &Report { quiet: true });
    }
    println!("| phase | amount | time | rate | device resident | RSS now / peak |");
    println!("|---|---|---|---|---|---|");
    run(scale, &Report { quiet: false });
    if !profile {
        let (best, median) = memcpy_bandwidth();
        println!("memcpy (end): best {best:.0} MiB/s, median {median:.0} MiB/s");
    }
}
