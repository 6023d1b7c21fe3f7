//! Seed 001's own figure on the simulated clock: sysbench's per-request
//! write latency (min, avg, max) with `nilfs_cleanerd` running the seed's
//! configuration, before and after "nilfs2: shorten freeze period due to GC
//! in write operation".
//!
//! # What runs
//!
//! The real file system (`Fs`) and the real cleaner (`cleaner`), driven by a
//! discrete-event simulation of three kernel threads sharing the transaction
//! lock and one disk:
//!
//! - **the writer** (sysbench `fileio`, one thread): each request is a 16 KiB
//!   `write(2)` under the shared side (`nilfs_transaction_begin`) followed by
//!   its synchronous completion under the exclusive side: a full
//!   construction, a checkpoint per request ([`RequestSync::Full`]), or a
//!   data-only log (`nilfs_construct_dsync_segment`, [`RequestSync::DataOnly`]).
//!   The seed's minimum of 0.84 ms per request is a disk write per request
//!   — a buffered write takes microseconds — so the requests were
//!   synchronous; its averages (3.05 and 2.88 ms, random and sequential
//!   alike) are those of a checkpoint per request, not of data-only logs
//!   (0.7 ms, and random writes' metadata piling up for the timer);
//! - **the segment constructor's timer** (`nilfs_segctor_thread`): every
//!   `sc_interval` (5 s) a full construction under the exclusive side writes
//!   what the data-only logs left dirty (B-tree nodes, inodes, DAT, sufile,
//!   checkpoint);
//! - **`nilfs_cleanerd`** with the seed's `nilfs_cleanerd.conf`
//!   (`protection_period 150`, timestamp policy, `nsegments_per_clean 2`,
//!   `cleaning_interval 2`): every 2 s it selects two segments, plans the
//!   request, and issues `NILFS_IOCTL_CLEAN_SEGMENTS`: the source-block reads
//!   ([`crate::gc::move_blocks`]) inside the exclusive side before the patch
//!   ([`GcRule::ReadUnderLock`]) or before it after ([`GcRule::ReadBeforeLock`]),
//!   then the GC construction.
//!
//! Each step runs functionally at its start time (the DES never lets two
//! conflicting steps overlap: the lock orders them, and the reads touch only
//! segments nobody else writes); the device I/O it did is recorded, merged
//! into requests as the block layer merges a plugged batch (contiguous bios,
//! at most `max_sectors_kb` = 512 KiB), and served by the disk model. The
//! disk serves one request at a time (`HddModel`: command overhead, seek and
//! rotational wait unless the request starts where the last ended, media
//! transfer), and the elevator shares it between the threads as CFQ (the
//! 2.6.31 default) does: per-thread queues, a 100 ms time slice
//! (`slice_sync`), and 8 ms of idling for the slice owner's next request
//! (`slice_idle`) before switching.
//!
//! # The image
//!
//! 4 KiB blocks, 8 MiB segments (the 2009 mkfs defaults). "DVD/CD images"
//! are copied first and a snapshot taken, so the oldest segments — the ones
//! the timestamp policy cleans — are entirely live; then sysbench's prepare
//! writes its file set. The data are zeros (the sparse device keeps no zero
//! chunk), so a 2 GiB file set costs only its metadata in memory.
//!
//! Everything is on the simulated clock and seeded: the same figures on
//! every machine.

use crate::device::sim::HddModel;
use crate::device::MemDevice;
use crate::format::{ino, Ino};
use crate::fs::Fs;
use crate::mkfs::{self, MkfsOptions};
use crate::the_nilfs::Nilfs;
use crate::txn::GcRule;
use crate::Result;

mod des;
pub use des::run;

/// The seed's figures, ms: (min, avg, max) without and with the patch.
pub const SEED_RANDOM: [(f64, f64, f64); 2] = [(0.843, 3.050, 680.406), (0.833, 3.226, 354.606)];
/// The same for sequential writes.
pub const SEED_SEQUENTIAL: [(f64, f64, f64); 2] =
    [(0.736, 2.883, 774.343), (0.740, 3.113, 563.780)];

/// sysbench's access pattern.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// `--file-test-mode=rndwr`.
    Random,
    /// `--file-test-mode=seqwr`.
    Sequential,
}

/// How each request is made durable.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RequestSync {
    /// `O_SYNC` as 2.6.31 had it (`generic_osync_inode` → `nilfs_writepages`
    /// with `WB_SYNC_ALL` → `nilfs_construct_dsync_segment`): a data-only
    /// log; the metadata waits for the timer's checkpoint.
    DataOnly,
    /// `fsync(2)` after every request (`--file-fsync-freq=1`): a full
    /// construction, a checkpoint per request.
    Full,
}

/// The workload: the image and sysbench's run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Workload {
    /// The "DVD/CD images" copied before the snapshot, bytes.
    pub dvd_bytes: u64,
    /// sysbench `--file-num`.
    pub files: u64,
    /// Bytes per file (`--file-total-size` / `--file-num`).
    pub file_bytes: u64,
    /// `--file-block-size`.
    pub request_bytes: u64,
    /// `--max-requests`.
    pub requests: u64,
    /// Seed of the random offsets.
    pub seed: u64,
    /// How each request is made durable.
    pub sync: RequestSync,
}

impl Default for Workload {
    /// sysbench 0.4's defaults (128 files, 2 GiB, 16 KiB requests, 10,000
    /// requests) after 1 GiB of "DVD/CD images", each request a write and
    /// a full construction ([`RequestSync::Full`]).
    fn default() -> Self {
        Workload {
            dvd_bytes: 1 << 30,
            files: 128,
            file_bytes: 16 << 20,
            request_bytes: 16 << 10,
            requests: 10_000,
            seed: 0x5eed_0001,
            sync: RequestSync::Full,
        }
    }
}

/// The seed's `nilfs_cleanerd.conf`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cleanerd {
    /// `protection_period`, s.
    pub protection_s: u64,
    /// `nsegments_per_clean`.
    pub nsegs: usize,
    /// `cleaning_interval`, s.
    pub interval_s: u64,
}

impl Default for Cleanerd {
    fn default() -> Self {
        Cleanerd {
            protection_s: 150,
            nsegs: 2,
            interval_s: 2,
        }
    }
}

/// Timing: the disk, the elevator, the threads' CPU costs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Timing {
    /// The disk.
    pub disk: HddModel,
    /// CFQ `slice_sync`, ns.
    pub slice_ns: u64,
    /// CFQ `slice_idle`, ns.
    pub idle_ns: u64,
    /// Largest merged request, bytes (`max_sectors_kb`).
    pub max_request_bytes: u64,
    /// `sc_interval` of the segment constructor's timer, ns.
    pub segctor_interval_ns: u64,
    /// CPU of one 16 KiB `write(2)` into the page cache, ns.
    pub write_cpu_ns: u64,
    /// CPU of one construction besides its blocks, ns.
    pub construct_cpu_ns: u64,
    /// CPU per block a construction writes (checksums, bio set-up), ns.
    pub block_cpu_ns: u64,
}

impl Timing {
    /// A 2009 desktop: the 7,200 rpm SATA disk of the period (Seagate
    /// Barracuda 7200.11/12, WD Caviar Blue: 8.3 ms a turn, 8.5 ms average
    /// read seek, track-to-track 0.8 ms, full stroke about 17 ms, 60–120 MB/s
    /// inner to outer zone, 0.25 ms command overhead), CFQ's defaults, and
    /// CPU costs of a 2009 dual core.
    pub fn desktop_2009() -> Self {
        Timing {
            disk: HddModel {
                rpm: 7_200,
                track_to_track_seek_ns: 800_000,
                full_stroke_seek_ns: 17_000_000,
                capacity_bytes: 320_000_000_000,
                media_bytes_per_s: 90_000_000,
                command_overhead_ns: 250_000,
            },
            slice_ns: 100_000_000,
            idle_ns: 8_000_000,
            max_request_bytes: 512 << 10,
            segctor_interval_ns: 5_000_000_000,
            write_cpu_ns: 30_000,
            construct_cpu_ns: 60_000,
            block_cpu_ns: 5_000,
        }
    }
}

/// One sysbench request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Request {
    /// Simulated time it started, ns from the run's start.
    pub start_ns: u64,
    /// How long it took, ns.
    pub latency_ns: u64,
}

/// One cleaning request, ns from the run's start.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cleaning {
    /// The ioctl was issued.
    pub start_ns: u64,
    /// The source blocks were read.
    pub read_ns: u64,
    /// The exclusive side was taken.
    pub locked_ns: u64,
    /// The ioctl returned.
    pub end_ns: u64,
    /// Blocks moved.
    pub moved: u64,
}

/// What one run measured.
#[derive(Clone, Debug, PartialEq)]
pub struct Run {
    pub mode: Mode,
    pub rule: GcRule,
    pub requests: Vec<Request>,
    pub cleanings: Vec<Cleaning>,
    /// Full constructions of the timer.
    pub timer_syncs: u64,
    /// When each of them started, ns, and the bytes it wrote.
    pub timer_sync_log: Vec<(u64, u64)>,
    /// Disk requests served, and how many of them seeked.
    pub disk_requests: u64,
    pub disk_seeks: u64,
    /// Simulated time of the whole run, ns.
    pub total_ns: u64,
}

impl Run {
    /// (min, avg, max) per-request latency, ms.
    pub fn summary_ms(&self) -> (f64, f64, f64) {
        let ms = |ns: u64| ns as f64 / 1e6;
        let l = self.requests.iter().map(|r| r.latency_ns);
        let min = l.clone().min().unwrap_or(0);
        let max = l.clone().max().unwrap_or(0);
        let sum: u64 = l.sum();
        let n = self.requests.len().max(1) as u64;
        (ms(min), sum as f64 / n as f64 / 1e6, ms(max))
    }
}

const T_RUN: u64 = 1_900_000_000;

/// The prepared image and the files' inode numbers.
pub struct Prepared {
    dev: MemDevice,
    files: Vec<Ino>,
    workload: Workload,
}

/// Build the image: DVD images, a snapshot, sysbench's prepare.
pub fn prepare(w: &Workload) -> Result<Prepared> {
    let seg_bytes: u64 = 8 << 20;
    let need = w.dvd_bytes + w.files * w.file_bytes;
    // Room for the run's own logs and the cleaner's, and a margin.
    let size = (need + need / 2 + (1 << 30)).div_ceil(seg_bytes) * seg_bytes;
    let dev = MemDevice::new(size);
    mkfs::mkfs(
        &dev,
        &MkfsOptions {
            block_size: 4096,
            blocks_per_segment: 2048,
            ..MkfsOptions::default()
        },
    )?;
    let files = {
        let nilfs = Nilfs::open(&dev)?;
        let mut fs = Fs::mount(&nilfs, T_RUN - 7200)?;
        let chunk = vec![0u8; 1 << 20];
        let put = |fs: &mut Fs<'_>, f: Ino, bytes: u64| -> Result<()> {
            let mut off = 0;
            while off < bytes {
                let n = (bytes - off).min(chunk.len() as u64);
                fs.write(f, off, &chunk[..n as usize])?;
                off += n;
                if off % (64 << 20) == 0 {
                    fs.sync()?;
                }
            }
            fs.sync().map(|_| ())
        };
        // The images, an hour before the run.
        let mut left = w.dvd_bytes;
        let mut k = 0;
        while left > 0 {
            let n = left.min(700 << 20);
            let f = fs.create(ino::ROOT, format!("image{k}.iso").as_bytes(), 0o644)?;
            put(&mut fs, f, n)?;
            left -= n;
            k += 1;
        }
        fs.mkcp(true)?;
        // sysbench prepare, a minute before the run.
        fs.set_time(T_RUN - 60);
        let mut files = Vec::new();
        for i in 0..w.files {
            let f = fs.create(ino::ROOT, format!("test_file.{i}").as_bytes(), 0o600)?;
            put(&mut fs, f, w.file_bytes)?;
            files.push(f);
        }
        fs.unmount()?;
        files
    };
    Ok(Prepared {
        dev,
        files,
        workload: w.clone(),
    })
}

/// The four runs: (random, sequential) × (before the patch, after).
#[derive(Clone, Debug, PartialEq)]
pub struct Figures {
    /// The timing used (after calibration).
    pub timing: Timing,
    /// `[mode][rule]`: mode 0 random, 1 sequential; rule 0 before the
    /// patch (reads under the lock), 1 after.
    pub runs: [[Run; 2]; 2],
}

impl Figures {
    /// The run of `mode` before (`patched` false) or after the patch.
    pub fn get(&self, mode: Mode, patched: bool) -> &Run {
        &self.runs[usize::from(mode == Mode::Sequential)][usize::from(patched)]
    }
}

/// The seed's figure for `mode`, before or after the patch, ms.
pub fn seed(mode: Mode, patched: bool) -> (f64, f64, f64) {
    match mode {
        Mode::Random => SEED_RANDOM[usize::from(patched)],
        Mode::Sequential => SEED_SEQUENTIAL[usize::from(patched)],
    }
}

/// Run all four.
pub fn figures(prep: &Prepared, conf: Cleanerd, timing: Timing) -> Result<Figures> {
    let one = |mode, rule| run(prep, mode, rule, conf, timing);
    Ok(Figures {
        timing,
        runs: [
            [
                one(Mode::Random, GcRule::ReadUnderLock)?,
                one(Mode::Random, GcRule::ReadBeforeLock)?,
            ],
            [
                one(Mode::Sequential, GcRule::ReadUnderLock)?,
                one(Mode::Sequential, GcRule::ReadBeforeLock)?,
            ],
        ],
    })
}

/// The one fitted parameter: the disk's media rate, bisected until the
/// unpatched random run's maximum latency is `target_ms` (within 0.5 %, at
/// most 16 runs). Returns the timing and the runs it took.
pub fn calibrate(
    prep: &Prepared,
    conf: Cleanerd,
    base: Timing,
    target_ms: f64,
) -> Result<(Timing, u32)> {
    let (mut lo, mut hi) = (20_000_000u64, 300_000_000u64);
    let mut best: Option<(f64, Timing)> = None;
    let mut runs = 0;
    for _ in 0..16 {
        let mid = lo + (hi - lo) / 2;
        let mut t = base;
        t.disk.media_bytes_per_s = mid;
        let r = run(prep, Mode::Random, GcRule::ReadUnderLock, conf, t)?;
        runs += 1;
        let got = r.summary_ms().2;
        let err = (got - target_ms).abs() / target_ms;
        if best.as_ref().is_none_or(|b| err < b.0) {
            best = Some((err, t));
        }
        if err < 0.005 {
            break;
        }
        // A faster disk freezes for less.
        if got > target_ms {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    Ok((best.expect("one run").1, runs))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A small image and run: one cleaning request falls inside it.
    fn small() -> Prepared {
        prepare(&Workload {
            dvd_bytes: 64 << 20,
            files: 8,
            file_bytes: 2 << 20,
            requests: 4_000,
            // Data-only logs keep the test quick (a checkpoint per request
            // costs several times the host time).
            sync: RequestSync::DataOnly,
            ..Workload::default()
        })
        .unwrap()
    }

    #[test]
    fn the_patch_shortens_the_worst_request_and_the_runs_repeat() {
        let p = small();
        let t = Timing::desktop_2009();
        let c = Cleanerd::default();
        let before = run(&p, Mode::Sequential, GcRule::ReadUnderLock, c, t).unwrap();
        let after = run(&p, Mode::Sequential, GcRule::ReadBeforeLock, c, t).unwrap();
        assert!(!before.cleanings.is_empty() && !after.cleanings.is_empty());
        assert_eq!(before.requests.len(), 4_000);
        let (b, a) = (before.summary_ms(), after.summary_ms());
        // Direction and bounds, not values: the worst request waited for
        // the whole request before the patch, for its locked part after.
        assert!(a.2 < b.2, "{a:?} {b:?}");
        let c0 = before.cleanings[0];
        assert!(b.2 * 1e6 >= (c0.end_ns - c0.locked_ns) as f64 * 0.9);
        // Before the patch the reads ran under the lock, after it outside.
        assert!(c0.locked_ns <= c0.read_ns);
        let c1 = after.cleanings[0];
        assert!(c1.read_ns <= c1.locked_ns);
        // The fastest request is a lone data-only log either way.
        assert!((a.0 - b.0).abs() / b.0 < 0.05, "{a:?} {b:?}");
        // Deterministic.
        let again = run(&p, Mode::Sequential, GcRule::ReadBeforeLock, c, t).unwrap();
        assert_eq!(again, after);
    }
}
