//! A simulated block device: bios, a deterministic clock, timing models for a
//! 2010 hard disk and a 2010 SSD, and seeded fault injection.
//!
//! # Model
//!
//! A [`Bio`] is the block layer's unit of I/O: one operation on `N` pages of
//! `block_size` bytes starting at a block number (`struct bio` with its
//! `bi_io_vec`). [`SimDevice::submit`] queues it and returns a [`BioHandle`];
//! nothing completes during submission. The device keeps a **simulated clock**
//! in nanoseconds, starting at 0; no wall clock is read anywhere. At
//! submission the timing model ([`DeviceModel`]) decides when the device
//! finishes the bio's transfer; then the completion handler walks the pages,
//! spending [`SimConfig::end_io_page_ns`] on each (btrfs's
//! `end_bio_extent_readpage` checksums and unlocks every page), so every page
//! gets its own completion event at its own time.
//!
//! Simulated time advances only when somebody asks it to:
//! - a waiter ([`BioHandle::wait_page`], [`SimDevice::wait_next`], or a buffer
//!   waiter in `cache`) completes events in time order until what it waits
//!   for has happened: the device is passive, the waiter "sleeps" through
//!   simulated time;
//! - CPU work is charged with [`SimDevice::advance_by`], which completes
//!   whatever falls due meanwhile (so a polling check such as the kernel's
//!   `buffer_locked(bh)` in the read-ahead loop sees I/O finish while the CPU
//!   works).
//!
//! All of it runs under one device mutex, so one thread's view of time is
//! every thread's view: a single simulated CPU. Completion handlers
//! ([`Bio::on_page_done`]) run under that mutex, in completion order, and must
//! not call back into the device.
//!
//! # Completion order (seed 002)
//!
//! Pages complete in submission order by default
//! ([`CompletionOrder::Submission`]): btrfs commit "finish read pages in the
//! order they are submitted" (Shaohua Li, 2010) changed
//! `end_bio_extent_readpage` to walk `bi_io_vec` forwards, so that a reader
//! waiting on the first page of a sequential read is woken first.
//! [`CompletionOrder::Reverse`] keeps the old loop as a known-bad variant.
//!
//! # Determinism
//!
//! Events are ordered by (time, sequence number), sequence numbers are handed
//! out at submission, fault decisions are made at submission from a seeded
//! [`SplitMix64`], and every map is a `BTreeMap`. The same configuration, seed
//! and sequence of calls give the same completions at the same simulated
//! times and the same [`SimStats`].

use std::collections::BTreeMap;

use super::{check_range, BlockDevice, SECTOR_SIZE};

mod blk;
mod drive_cache;

use crate::format::BlockNr;
use crate::sync::{lock, Arc, Mutex};
use crate::{Error, Result};
pub use blk::{BlockLayer, Merges, QueueModel, QueueStats};
use blk::{Kick, QueuedBio, Request, RequestQueue};
use drive_cache::CachedDisk;
pub use drive_cache::{CacheStats, DiskCache, Prefetch, Service};

/// Most pages in one bio (the kernel's `BIO_MAX_VECS`).
pub const MAX_BIO_PAGES: usize = 256;

/// Largest page (block) size a bio may carry: NILFS2 blocks are 1 KiB to 64 KiB.
pub const MAX_PAGE_SIZE: u32 = 65536;

const NS_PER_S: u128 = 1_000_000_000;

/// The direction of a bio.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Op {
    /// Device to memory.
    Read,
    /// Memory to device.
    Write,
}

/// The order in which the completion handler walks a finished bio's pages.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum CompletionOrder {
    /// First submitted page first: btrfs after seed 002, and the block layer's
    /// usual `bio_for_each_segment_all` walk.
    #[default]
    Submission,
    /// Last page first: btrfs `end_bio_extent_readpage` before seed 002
    /// (`bvec = bio->bi_io_vec + bio->bi_vcnt - 1; ... --bvec`). Known bad:
    /// the page a sequential reader wants first is completed last.
    Reverse,
}

/// Timing of a rotating disk: FIFO, one request at a time (no command
/// queueing is modelled), service time = command overhead + seek + rotational
/// wait + media transfer.
///
/// A request that starts exactly where the previous one ended is served
/// without seek or rotational wait: the drive's own look-ahead (segment)
/// buffer kept streaming, as every drive of the period does. Any other request
/// seeks, then waits until its first byte comes under the head: the platter's
/// angle is a function of simulated time, so the wait is physical and
/// deterministic, not drawn at random.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HddModel {
    /// Spindle speed, revolutions per minute.
    pub rpm: u32,
    /// Seek time between adjacent tracks, ns (the shortest non-zero seek).
    pub track_to_track_seek_ns: u64,
    /// Seek time across the whole disk, ns.
    pub full_stroke_seek_ns: u64,
    /// Capacity of the whole disk in bytes: seek distances are measured
    /// against it (a file system image is usually a small part of a disk).
    pub capacity_bytes: u64,
    /// Sustained media transfer rate, bytes per second. Also fixes the bytes
    /// per track (`rate × rotation time`) used for the platter angle.
    pub media_bytes_per_s: u64,
    /// Fixed cost of every request (command decode, controller, interrupt), ns.
    pub command_overhead_ns: u64,
}

impl HddModel {
    /// A 2010 enterprise SCSI/SAS disk of the 10,000 rpm class (Seagate
    /// Cheetah 10K / Savvio 10K, Fujitsu MBA/MBD). Data sheets of the period
    /// give: 10,000 rpm (6 ms a turn, 3 ms average rotational latency),
    /// average read seek about 4 ms, track-to-track 0.3–0.4 ms, full stroke
    /// 8–9 ms, sustained transfer 100–150 MB/s (outer to inner zone), 73 to
    /// 300 GB. Chosen: track-to-track 0.35 ms and full stroke 8 ms, which with
    /// the square-root seek curve give a 4.4 ms mean seek over uniformly
    /// random positions (mean of `sqrt(|x-y|)` is 8/15); 120 MB/s mid-zone
    /// media rate; 0.1 ms per-command overhead; 146.8 GB. Seed 000 names only
    /// "a scsi hard drive"; the read-ahead experiment calibrates these
    /// numbers on its read-ahead-off figure (38.5 MB/s).
    pub fn scsi_2010() -> Self {
        HddModel {
            rpm: 10_000,
            track_to_track_seek_ns: 350_000,
            full_stroke_seek_ns: 8_000_000,
            capacity_bytes: 146_800_000_000,
            media_bytes_per_s: 120_000_000,
            command_overhead_ns: 100_000,
        }
    }

    /// One revolution, ns.
    pub fn rotation_ns(&self) -> u64 {
        60_000_000_000 / u64::from(self.rpm.max(1))
    }

    /// Seek time for a head movement of `distance` bytes. Short seeks are
    /// dominated by acceleration, so time grows with the square root of the
    /// distance (Ruemmler & Wilkes, "An introduction to disk drive
    /// modeling", IEEE Computer 1994).
    pub fn seek_ns(&self, distance: u64) -> u64 {
        if distance == 0 {
            return 0;
        }
        let span = self
            .full_stroke_seek_ns
            .saturating_sub(self.track_to_track_seek_ns);
        let frac = (distance as f64 / self.capacity_bytes.max(1) as f64).min(1.0);
        // IEEE 754 sqrt is correctly rounded, hence deterministic everywhere.
        self.track_to_track_seek_ns + (span as f64 * frac.sqrt()) as u64
    }

    /// Time for `bytes` to pass under the head, ns.
    pub fn transfer_ns(&self, bytes: u64) -> u64 {
        (u128::from(bytes) * NS_PER_S / u128::from(self.media_bytes_per_s.max(1))) as u64
    }

    /// Bytes on one track: what passes under the head in one revolution.
    fn track_bytes(&self) -> u64 {
        (u128::from(self.media_bytes_per_s) * u128::from(self.rotation_ns()) / NS_PER_S).max(1)
            as u64
    }

    /// Wait at time `t_ns` until byte `offset` comes under the head.
    pub fn rotational_wait_ns(&self, t_ns: u64, offset: u64) -> u64 {
        let track = u128::from(self.track_bytes());
        let rot = u128::from(self.rotation_ns());
        let head = u128::from(t_ns % self.rotation_ns()) * track / rot;
        let target = u128::from(offset) % track;
        let ahead = (target + track - head) % track;
        (ahead * rot / track) as u64
    }

    fn validate(&self) -> Result<()> {
        if self.rpm == 0 || self.media_bytes_per_s == 0 || self.capacity_bytes == 0 {
            return Err(Error::Invalid(
                "HDD model: rpm, media rate and capacity must be non-zero".into(),
            ));
        }
        Ok(())
    }
}

/// Timing of a flash SSD: up to `queue_depth` requests in service at once
/// (NCQ); each waits `latency` (flash array read or program, controller),
/// then occupies the one shared data channel for `command_overhead + bytes /
/// bandwidth`. Latency overlaps between requests; bandwidth does not.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SsdModel {
    /// Time from submission until a read's data can start to move, ns.
    pub read_latency_ns: u64,
    /// Time from submission until a write's data can start to move, ns.
    pub write_latency_ns: u64,
    /// Channel bandwidth for reads, bytes per second.
    pub read_bytes_per_s: u64,
    /// Channel bandwidth for writes, bytes per second.
    pub write_bytes_per_s: u64,
    /// Channel time every request costs besides its data, ns.
    pub command_overhead_ns: u64,
    /// Requests in service at once (NCQ depth).
    pub queue_depth: u32,
}

impl SsdModel {
    /// Intel X25-M G2 (34 nm MLC, 2009–2010), the "Intel SSD" of seed 000.
    /// Intel's product specification gives: sequential read up to 250 MB/s,
    /// sequential write up to 100 MB/s (160 GB model), read latency 65 µs,
    /// write latency 85 µs, 4 KiB random reads up to 35,000 IOPS, NCQ depth 32.
    /// Derived: 35,000 IOPS at 4 KiB is 28.6 µs of channel time per request,
    /// of which 16.4 µs is data at 250 MB/s, so 12 µs command overhead; a lone
    /// 4 KiB read then takes 65 µs with a 37 µs latency (37 + 12 + 16.4), a
    /// lone 4 KiB write 85 µs with 32 µs (32 + 12 + 41). The read-ahead
    /// experiment calibrates on its read-ahead-off figure (188 MB/s).
    pub fn intel_x25m_2010() -> Self {
        SsdModel {
            read_latency_ns: 37_000,
            write_latency_ns: 32_000,
            read_bytes_per_s: 250_000_000,
            write_bytes_per_s: 100_000_000,
            command_overhead_ns: 12_000,
            queue_depth: 32,
        }
    }

    /// Channel time of the data of a request, ns.
    pub fn transfer_ns(&self, op: Op, bytes: u64) -> u64 {
        let bw = match op {
            Op::Read => self.read_bytes_per_s,
            Op::Write => self.write_bytes_per_s,
        };
        (u128::from(bytes) * NS_PER_S / u128::from(bw.max(1))) as u64
    }

    fn validate(&self) -> Result<()> {
        if self.read_bytes_per_s == 0 || self.write_bytes_per_s == 0 || self.queue_depth == 0 {
            return Err(Error::Invalid(
                "SSD model: bandwidths and queue depth must be non-zero".into(),
            ));
        }
        Ok(())
    }
}

/// Which timing model the device follows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeviceModel {
    /// Every bio finishes the moment it is submitted (plus the per-page
    /// completion cost). For functional tests, mkfs, and model checking.
    Instant,
    /// A rotating disk.
    Hdd(HddModel),
    /// A flash SSD.
    Ssd(SsdModel),
}

/// One injected fault. Faults are decided when a bio is submitted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// Every page overlapping device block `blocknr` (in units of
    /// [`SimConfig::block_size`]) fails, for `op` or for both when `None`.
    Block {
        /// The failing block.
        blocknr: BlockNr,
        /// The operation that fails on it, or both.
        op: Option<Op>,
    },
    /// Every page of the bio with this submission index (0 = first bio) fails.
    NthBio(u64),
    /// Each page fails with probability `per_million / 1_000_000`, drawn from
    /// the plan's seeded generator.
    Random {
        /// Failure rate in parts per million.
        per_million: u32,
    },
}

/// Seeded fault injection: what fails, and the seed of the generator behind
/// [`Fault::Random`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FaultPlan {
    /// Seed of the device's [`SplitMix64`].
    pub seed: u64,
    /// The faults; a page fails if any of them says so.
    pub faults: Vec<Fault>,
}

/// Everything that makes one simulated device.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SimConfig {
    /// The device block size: the unit of [`Fault::Block`] and of the bios the
    /// [`BlockDevice`] adapter builds for aligned requests.
    pub block_size: u32,
    /// The timing model.
    pub model: DeviceModel,
    /// How a finished bio's pages are walked.
    pub order: CompletionOrder,
    /// CPU cost of completing one page, ns (btrfs: verify the checksum, unlock
    /// the page; a software crc32c of 4 KiB at about 4 GB/s is about 1 µs).
    pub end_io_page_ns: u64,
    /// Injected faults.
    pub faults: FaultPlan,
    /// How bios reach the device: directly (the default, and the model
    /// seeds 001 and 002 were measured on) or through a 2.6.35 request queue.
    pub block_layer: BlockLayer,
    /// The hard disk's segmented read cache and read-ahead; `None` is the
    /// uncached disk (a request contiguous with the previous one streams on,
    /// anything else seeks). Only for [`DeviceModel::Hdd`].
    pub disk_cache: Option<DiskCache>,
}

impl SimConfig {
    /// An instant device with 4 KiB blocks, in-order completion, no faults.
    pub fn instant() -> Self {
        SimConfig {
            block_size: 4096,
            model: DeviceModel::Instant,
            order: CompletionOrder::Submission,
            end_io_page_ns: 0,
            faults: FaultPlan::default(),
            block_layer: BlockLayer::Direct,
            disk_cache: None,
        }
    }

    /// The 2010 SCSI disk of seed 000 ([`HddModel::scsi_2010`]).
    pub fn hdd_2010() -> Self {
        SimConfig {
            model: DeviceModel::Hdd(HddModel::scsi_2010()),
            end_io_page_ns: 1_000,
            ..Self::instant()
        }
    }

    /// The 2010 Intel SSD of seed 000 ([`SsdModel::intel_x25m_2010`]).
    pub fn ssd_2010() -> Self {
        SimConfig {
            model: DeviceModel::Ssd(SsdModel::intel_x25m_2010()),
            end_io_page_ns: 1_000,
            ..Self::instant()
        }
    }

    /// Seed 000's disk as Linux 2.6.35 drove it: [`HddModel::scsi_2010`]
    /// with its segmented read cache ([`DiskCache::scsi_2010`]) behind a
    /// plugging, merging request queue with tagged queueing
    /// ([`QueueModel::linux_2635_scsi`]).
    pub fn hdd_2010_linux() -> Self {
        SimConfig {
            block_layer: BlockLayer::Queue(QueueModel::linux_2635_scsi()),
            disk_cache: Some(DiskCache::scsi_2010()),
            ..Self::hdd_2010()
        }
    }

    /// Seed 000's SSD as Linux 2.6.35 drove it: [`SsdModel::intel_x25m_2010`]
    /// behind the request queue of an AHCI port ([`QueueModel::linux_2635_ahci_ssd`]).
    pub fn ssd_2010_linux() -> Self {
        SimConfig {
            block_layer: BlockLayer::Queue(QueueModel::linux_2635_ahci_ssd()),
            ..Self::ssd_2010()
        }
    }

    fn validate(&self) -> Result<()> {
        check_page_size(self.block_size)?;
        if let BlockLayer::Queue(q) = &self.block_layer {
            q.validate()?;
        }
        if let Some(c) = &self.disk_cache {
            if !matches!(self.model, DeviceModel::Hdd(_)) {
                return Err(Error::Invalid("a disk cache needs the HDD model".into()));
            }
            c.validate()?;
        }
        match &self.model {
            DeviceModel::Instant => Ok(()),
            DeviceModel::Hdd(m) => m.validate(),
            DeviceModel::Ssd(m) => m.validate(),
        }
    }
}

#[allow(clippy::manual_is_multiple_of)] // is_multiple_of is newer than our MSRV (1.80)
fn check_page_size(bs: u32) -> Result<()> {
    if bs == 0 || u64::from(bs) % SECTOR_SIZE != 0 || bs > MAX_PAGE_SIZE {
        return Err(Error::Invalid(format!(
            "block size {bs} is not a multiple of {SECTOR_SIZE} between {SECTOR_SIZE} and {MAX_PAGE_SIZE}"
        )));
    }
    Ok(())
}

/// A tiny seeded generator (SplitMix64, Steele, Lea & Flood 2014): enough for
/// fault draws, and no dependency.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    /// A generator started at `seed`.
    pub fn new(seed: u64) -> Self {
        SplitMix64(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

/// What a completion handler learns about one page.
#[derive(Debug)]
pub struct PageDone<'a> {
    /// The page's index in its bio (0 = first submitted).
    pub index: usize,
    /// The page's block number, in units of the bio's block size.
    pub blocknr: BlockNr,
    /// For a successful read, the data read; otherwise empty.
    pub data: &'a [u8],
    /// Whether the page's I/O succeeded.
    pub result: &'a Result<()>,
    /// Simulated time of the completion, ns.
    pub time_ns: u64,
}

type EndIo = Box<dyn FnMut(PageDone<'_>) + Send>;

/// A block I/O request: one operation on consecutive pages.
pub struct Bio {
    op: Op,
    rahead: bool,
    start: BlockNr,
    block_size: u32,
    nr_pages: usize,
    write_data: Vec<Vec<u8>>,
    end_io: Option<EndIo>,
}

impl Bio {
    /// Read `nr_pages` blocks of `block_size` bytes starting at block `start`
    /// (in units of `block_size`). Page buffers are allocated only once the
    /// device has accepted the bio, so a hostile size costs nothing.
    pub fn read(start: BlockNr, block_size: u32, nr_pages: usize) -> Bio {
        Bio {
            op: Op::Read,
            rahead: false,
            start,
            block_size,
            nr_pages,
            write_data: Vec::new(),
            end_io: None,
        }
    }

    /// Write `pages` (each `block_size` bytes) starting at block `start`.
    pub fn write(start: BlockNr, block_size: u32, pages: Vec<Vec<u8>>) -> Bio {
        Bio {
            rahead: false,
            op: Op::Write,
            start,
            block_size,
            nr_pages: pages.len(),
            write_data: pages,
            end_io: None,
        }
    }

    /// Mark this bio as read-ahead (`REQ_RAHEAD`): the device treats it
    /// like any read, but records the flag in its submission log so tests
    /// can check what read-ahead submitted.
    #[must_use]
    pub fn rahead(mut self) -> Bio {
        self.rahead = true;
        self
    }

    /// Call `f` once per page as it completes, in completion order (the bio's
    /// `bi_end_io`). `f` runs under the device lock: it may take other locks
    /// (a buffer's) but must not call the device.
    #[must_use]
    pub fn on_page_done(mut self, f: impl FnMut(PageDone<'_>) + Send + 'static) -> Bio {
        self.end_io = Some(Box::new(f));
        self
    }

    /// The operation.
    pub fn op(&self) -> Op {
        self.op
    }

    /// The first block, in units of [`Self::block_size`].
    pub fn start(&self) -> BlockNr {
        self.start
    }

    /// Bytes per page.
    pub fn block_size(&self) -> u32 {
        self.block_size
    }

    /// Number of pages.
    pub fn nr_pages(&self) -> usize {
        self.nr_pages
    }
}

/// When and how one page completed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PageCompletion {
    /// Device-wide completion sequence number: total order of completions.
    pub seq: u64,
    /// Simulated time of the completion, ns.
    pub time_ns: u64,
    /// The page's outcome.
    pub result: Result<()>,
}

#[derive(Default)]
struct PageSlot {
    done: Option<PageCompletion>,
    data: Option<Vec<u8>>,
}

/// The caller's view of a submitted bio: per-page completion state, waiting,
/// and the data of completed reads.
#[derive(Clone)]
pub struct BioHandle {
    dev: SimDevice,
    id: u64,
    pages: Arc<Mutex<Vec<PageSlot>>>,
}

impl std::fmt::Debug for BioHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BioHandle")
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

impl BioHandle {
    /// Device-wide id of the bio: its submission index (0 = first bio).
    pub fn id(&self) -> u64 {
        self.id
    }

    /// Number of pages.
    pub fn nr_pages(&self) -> usize {
        lock(&self.pages).len()
    }

    /// How page `k` completed, or `None` while it is in flight. Never waits
    /// and never advances time (the kernel's `PageLocked` test).
    pub fn completion(&self, k: usize) -> Option<PageCompletion> {
        lock(&self.pages).get(k).and_then(|s| s.done.clone())
    }

    /// Whether page `k` has completed (its handler has run). Never waits.
    pub fn is_page_done(&self, k: usize) -> bool {
        self.completion(k).is_some()
    }

    /// Wait for page `k`: complete device events in time order until page
    /// `k`'s own completion has run, and return its outcome. Counts one wait
    /// in [`SimStats::waits`] if the page was still in flight.
    pub fn wait_page(&self, k: usize) -> Result<()> {
        let n = self.nr_pages();
        if k >= n {
            return Err(Error::OutOfRange(format!("page {k} of a bio of {n} pages")));
        }
        let inner = &self.dev.inner;
        let mut st = lock(&inner.state);
        let mut counted = false;
        loop {
            if let Some(c) = self.completion(k) {
                return c.result;
            }
            if !counted {
                st.stats.waits += 1;
                counted = true;
                // lock_page -> sync_page: a sleeper unplugs the queue.
                inner.unplug(&mut st);
            }
            let progressed = inner.complete_next(&mut st);
            assert!(
                progressed,
                "bio {} page {k} in flight with no pending event",
                self.id
            );
        }
    }

    /// Wait for every page; the first failing page's error, if any.
    pub fn wait(&self) -> Result<()> {
        let mut first = Ok(());
        for k in 0..self.nr_pages() {
            let r = self.wait_page(k);
            if first.is_ok() {
                first = r;
            }
        }
        first
    }

    /// Take the data of completed read page `k` (once; `None` before
    /// completion, after a failure, for writes, or when already taken).
    pub fn take_data(&self, k: usize) -> Option<Vec<u8>> {
        lock(&self.pages).get_mut(k).and_then(|s| s.data.take())
    }
}

/// Counters of one device. Pages are counted in units of their bio's block size.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SimStats {
    /// Bios accepted by [`SimDevice::submit`].
    pub bios: u64,
    /// Read pages completed (successfully or not).
    pub pages_read: u64,
    /// Written pages completed (successfully or not).
    pub pages_written: u64,
    /// Bytes moved by successful reads.
    pub bytes_read: u64,
    /// Bytes moved by successful writes.
    pub bytes_written: u64,
    /// Waits that found their I/O in flight and advanced time.
    pub waits: u64,
    /// Pages failed by injected faults.
    pub faults_injected: u64,
    /// Simulated time during which the device had at least one request in
    /// service, ns.
    pub busy_ns: u64,
}

/// The mutable state of the device's timing model.
enum Mechanics {
    Instant,
    Hdd {
        model: HddModel,
        head: u64,
        free_at_ns: u64,
    },
    Ssd {
        model: SsdModel,
        in_service: Vec<u64>,
        channel_free_at_ns: u64,
    },
    CachedHdd(CachedDisk),
}

impl Mechanics {
    fn new(model: DeviceModel, cache: Option<DiskCache>) -> Self {
        match model {
            DeviceModel::Instant => Mechanics::Instant,
            DeviceModel::Hdd(model) if cache.is_some() => {
                Mechanics::CachedHdd(CachedDisk::new(model, cache.expect("checked")))
            }
            DeviceModel::Hdd(model) => Mechanics::Hdd {
                model,
                head: 0,
                free_at_ns: 0,
            },
            DeviceModel::Ssd(model) => Mechanics::Ssd {
                model,
                in_service: Vec::new(),
                channel_free_at_ns: 0,
            },
        }
    }

    /// Schedule a request arriving at `now` for bytes `[offset, offset+len)`;
    /// returns when the device starts and finishes it, and how it served it.
    fn service(&mut self, now: u64, op: Op, offset: u64, len: u64) -> (u64, u64, Service) {
        match self {
            Mechanics::Instant => (now, now, Service::NoHead),
            Mechanics::CachedHdd(disk) => disk.service(now, op, offset, len),
            Mechanics::Hdd {
                model,
                head,
                free_at_ns,
            } => {
                let start = now.max(*free_at_ns);
                let mut t = start + model.command_overhead_ns;
                let kind = if offset != *head {
                    t += model.seek_ns(offset.abs_diff(*head));
                    t += model.rotational_wait_ns(t, offset);
                    Service::Miss
                } else {
                    Service::Streamed
                };
                let done = t + model.transfer_ns(len);
                *head = offset + len;
                *free_at_ns = done;
                (start, done, kind)
            }
            Mechanics::Ssd {
                model,
                in_service,
                channel_free_at_ns,
            } => {
                in_service.retain(|&d| d > now);
                let mut start = now;
                if in_service.len() >= model.queue_depth as usize {
                    start = in_service.iter().copied().min().unwrap_or(now);
                    in_service.retain(|&d| d > start);
                }
                let latency = match op {
                    Op::Read => model.read_latency_ns,
                    Op::Write => model.write_latency_ns,
                };
                let xfer_start = (start + latency).max(*channel_free_at_ns);
                let done = xfer_start + model.command_overhead_ns + model.transfer_ns(op, len);
                *channel_free_at_ns = done;
                in_service.push(done);
                (start, done, Service::NoHead)
            }
        }
    }

    fn cache_stats(&self) -> Option<CacheStats> {
        match self {
            Mechanics::CachedHdd(d) => Some(d.stats()),
            _ => None,
        }
    }
}

struct Inflight {
    op: Op,
    start: BlockNr,
    block_size: u32,
    write_data: Vec<Vec<u8>>,
    /// Per page: why it fails, if an injected fault says so.
    faults: Vec<Option<String>>,
    end_io: Option<EndIo>,
    pages: Arc<Mutex<Vec<PageSlot>>>,
    remaining: usize,
}

enum Event {
    /// Page `page` of bio `bio` completes.
    Page { bio: u64, page: usize },
    /// Request `rq` (in [`State::dispatched`]) is done at the device and
    /// its completion path runs.
    RequestDone { rq: u64 },
    /// The request queue's unplug timer of this generation fires.
    Unplug { generation: u64 },
}

/// One request the device served, as the request log records it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RequestRecord {
    /// Read or write.
    pub op: Op,
    /// First byte on the device.
    pub offset: u64,
    /// Bytes.
    pub len: u64,
    /// Bios merged into it (1 without a request queue).
    pub bios: usize,
    /// Whether every bio in it was flagged read-ahead.
    pub rahead: bool,
    /// When it was handed to the device, ns.
    pub dispatch_ns: u64,
    /// When the device had its data moved, ns.
    pub done_ns: u64,
    /// How the device served it.
    pub service: Service,
}

struct State {
    /// Every accepted bio, in submission order.
    log: Vec<Submitted>,
    now_ns: u64,
    next_bio: u64,
    next_event: u64,
    next_completion: u64,
    /// Pending page completions by (time, sequence).
    events: BTreeMap<(u64, u64), Event>,
    inflight: BTreeMap<u64, Inflight>,
    mechanics: Mechanics,
    busy_until_ns: u64,
    rng: SplitMix64,
    stats: SimStats,
    /// The request queue, when [`SimConfig::block_layer`] has one.
    queue: Option<RequestQueue>,
    /// Bios submitted to the queue and not yet in a dispatched request:
    /// (offset, rahead) by bio id.
    queued_bios: BTreeMap<u64, (u64, bool)>,
    /// Requests at the device, by request id.
    dispatched: BTreeMap<u64, Request>,
    /// Every request served, in dispatch order.
    requests: Vec<RequestRecord>,
}

struct Inner {
    config: SimConfig,
    store: Box<dyn BlockDevice>,
    state: Mutex<State>,
}

/// One accepted bio, as the device's submission log records it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Submitted {
    /// The bio's id.
    pub id: u64,
    /// Read or write.
    pub op: Op,
    /// Whether it was flagged read-ahead ([`Bio::rahead`]).
    pub rahead: bool,
    /// First block.
    pub start: BlockNr,
    /// Pages.
    pub nr_pages: usize,
}

/// The simulated device. Cheap to clone: clones share one device.
#[derive(Clone)]
pub struct SimDevice {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for SimDevice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SimDevice")
            .field("config", &self.inner.config)
            .finish_non_exhaustive()
    }
}

impl SimDevice {
    /// A simulated device keeping its data in `store` (a [`super::MemDevice`],
    /// a [`super::FileDevice`], ...).
    pub fn new(store: Box<dyn BlockDevice>, config: SimConfig) -> Result<Self> {
        config.validate()?;
        let state = State {
            log: Vec::new(),
            now_ns: 0,
            next_bio: 0,
            next_event: 0,
            next_completion: 0,
            events: BTreeMap::new(),
            inflight: BTreeMap::new(),
            mechanics: Mechanics::new(config.model, config.disk_cache),
            busy_until_ns: 0,
            rng: SplitMix64::new(config.faults.seed),
            stats: SimStats::default(),
            queue: match config.block_layer {
                BlockLayer::Direct => None,
                BlockLayer::Queue(m) => Some(RequestQueue::new(m)),
            },
            queued_bios: BTreeMap::new(),
            dispatched: BTreeMap::new(),
            requests: Vec::new(),
        };
        Ok(SimDevice {
            inner: Arc::new(Inner {
                config,
                store,
                state: Mutex::new(state),
            }),
        })
    }

    /// A simulated device over a fresh in-memory store of `size` bytes.
    pub fn mem(size: u64, config: SimConfig) -> Result<Self> {
        Self::new(Box::new(super::MemDevice::new(size)), config)
    }

    /// The configuration.
    pub fn config(&self) -> &SimConfig {
        &self.inner.config
    }

    /// Queue `bio`. Nothing completes here; the returned handle observes and
    /// waits for the pages. A malformed bio (bad page size, no or too many
    /// pages, wrong write data, beyond the device end) is an error and is
    /// dropped unsubmitted, with its handler never called.
    pub fn submit(&self, bio: Bio) -> Result<BioHandle> {
        let inner = &self.inner;
        check_page_size(bio.block_size)?;
        let n = bio.nr_pages;
        if n == 0 || n > MAX_BIO_PAGES {
            return Err(Error::Invalid(format!(
                "bio of {n} pages (1 to {MAX_BIO_PAGES})"
            )));
        }
        let bs = u64::from(bio.block_size);
        if bio.op == Op::Write
            && (bio.write_data.len() != n || bio.write_data.iter().any(|p| p.len() as u64 != bs))
        {
            return Err(Error::Invalid(
                "write bio pages must be block_size bytes each".into(),
            ));
        }
        let offset = bio.start.0.checked_mul(bs).ok_or_else(|| Error::Io {
            blocknr: bio.start.0,
            detail: "block number overflows the byte offset".into(),
        })?;
        let len = bs * n as u64;
        check_range(inner.store.size_bytes(), offset, len as usize)
            .map_err(|e| relabel(e, bio.start.0))?;

        let mut st = lock(&inner.state);
        let id = st.next_bio;
        st.next_bio += 1;
        st.stats.bios += 1;
        st.log.push(Submitted {
            id,
            op: bio.op,
            rahead: bio.rahead,
            start: bio.start,
            nr_pages: n,
        });
        let faults = (0..n)
            .map(|k| inner.fault_for(&mut st, id, bio.op, offset + k as u64 * bs, bs))
            .collect();
        let now = st.now_ns;
        if st.queue.is_none() {
            // No request queue: the bio is a request, at the device now.
            let (start, done, service) = st.mechanics.service(now, bio.op, offset, len);
            let busy_from = start.max(st.busy_until_ns);
            st.stats.busy_ns += done.saturating_sub(busy_from);
            st.busy_until_ns = st.busy_until_ns.max(done);
            st.requests.push(RequestRecord {
                op: bio.op,
                offset,
                len,
                bios: 1,
                rahead: bio.rahead,
                dispatch_ns: now,
                done_ns: done,
                service,
            });
            for pos in 0..n {
                let page = match inner.config.order {
                    CompletionOrder::Submission => pos,
                    CompletionOrder::Reverse => n - 1 - pos,
                };
                let t = done + (pos as u64 + 1) * inner.config.end_io_page_ns;
                let seq = st.next_event;
                st.next_event += 1;
                st.events.insert((t, seq), Event::Page { bio: id, page });
            }
        }
        let pages = Arc::new(Mutex::new((0..n).map(|_| PageSlot::default()).collect()));
        let inflight = Inflight {
            op: bio.op,
            start: bio.start,
            block_size: bio.block_size,
            write_data: bio.write_data,
            faults,
            end_io: bio.end_io,
            pages: pages.clone(),
            remaining: n,
        };
        st.inflight.insert(id, inflight);
        if let Some(q) = st.queue.as_mut() {
            let kick = q.make_request(
                now,
                QueuedBio {
                    id,
                    op: bio.op,
                    offset,
                    len,
                    pages: n,
                },
            );
            st.queued_bios.insert(id, (offset, bio.rahead));
            inner.kick(&mut st, kick, now);
        }
        Ok(BioHandle {
            dev: self.clone(),
            id,
            pages,
        })
    }

    /// Current simulated time, ns.
    pub fn now_ns(&self) -> u64 {
        lock(&self.inner.state).now_ns
    }

    /// Charge `ns` of CPU time: the clock moves on by `ns`, and every page
    /// completion that falls due meanwhile runs, in time order. Not a wait.
    pub fn advance_by(&self, ns: u64) {
        let mut st = lock(&self.inner.state);
        let target = st.now_ns.saturating_add(ns);
        while st
            .events
            .first_key_value()
            .is_some_and(|(&(t, _), _)| t <= target)
        {
            self.inner.step(&mut st);
        }
        st.now_ns = target;
    }

    /// Unplug the request queue, as `blk_run_backing_dev` does for a caller
    /// that will not sleep but wants its I/O started (the async read-ahead
    /// of an up-to-date page). A no-op without a queue or when unplugged.
    pub fn unplug(&self) {
        let mut st = lock(&self.inner.state);
        self.inner.unplug(&mut st);
    }

    /// The request queue's counters (`None` without a queue).
    pub fn queue_stats(&self) -> Option<QueueStats> {
        lock(&self.inner.state)
            .queue
            .as_ref()
            .map(RequestQueue::stats)
    }

    /// The disk cache's counters (`None` without a disk cache).
    pub fn cache_stats(&self) -> Option<CacheStats> {
        lock(&self.inner.state).mechanics.cache_stats()
    }

    /// Every request served so far, in dispatch order (without a request
    /// queue, one per bio).
    pub fn requests(&self) -> Vec<RequestRecord> {
        lock(&self.inner.state).requests.clone()
    }

    /// Wait for the next page completion of any bio (advancing the clock to
    /// it) and run it. Returns false, without waiting, when nothing is in
    /// flight. This is how a waiter that does not hold a [`BioHandle`] (a
    /// buffer waiter) sleeps; each call that completes something counts one
    /// wait in [`SimStats::waits`].
    pub fn wait_next(&self) -> bool {
        let mut st = lock(&self.inner.state);
        self.inner.unplug(&mut st);
        let progressed = self.inner.complete_next(&mut st);
        if progressed {
            st.stats.waits += 1;
        }
        progressed
    }

    /// Complete everything in flight (not counted as waits).
    pub fn run_until_idle(&self) {
        let mut st = lock(&self.inner.state);
        self.inner.unplug(&mut st);
        while self.inner.complete_next(&mut st) {}
    }

    /// Bios submitted and not yet fully completed.
    pub fn in_flight(&self) -> usize {
        lock(&self.inner.state).inflight.len()
    }

    /// Every bio accepted so far, in submission order.
    pub fn submissions(&self) -> Vec<Submitted> {
        lock(&self.inner.state).log.clone()
    }

    /// A snapshot of the counters.
    pub fn stats(&self) -> SimStats {
        lock(&self.inner.state).stats
    }

    /// Split the byte range `[off, off+len)` into bios: pages of the device
    /// block size when aligned to it, else of 512-byte sectors; at most
    /// [`MAX_BIO_PAGES`] pages each. Returns the page size and, per bio, its
    /// first page number (in page units) and page count.
    #[allow(clippy::manual_is_multiple_of)] // is_multiple_of is newer than our MSRV (1.80)
    fn split(&self, off: u64, len: usize) -> Result<(u64, Vec<(u64, u64)>)> {
        check_range(self.size_bytes(), off, len)?;
        let bs = u64::from(self.inner.config.block_size);
        let unit = if off % bs == 0 && len as u64 % bs == 0 {
            bs
        } else {
            SECTOR_SIZE
        };
        let (first, pages) = (off / unit, len as u64 / unit);
        let chunks = (0..pages)
            .step_by(MAX_BIO_PAGES)
            .map(|p| (first + p, (pages - p).min(MAX_BIO_PAGES as u64)))
            .collect();
        Ok((unit, chunks))
    }

    /// Wait for every handle; the first error, in submission order.
    fn wait_all(handles: &[BioHandle]) -> Result<()> {
        let mut first = Ok(());
        for h in handles {
            let r = h.wait();
            if first.is_ok() {
                first = r;
            }
        }
        first
    }
}

impl Inner {
    /// Decide at submission whether the page at `[offset, offset+len)` of bio
    /// `id` fails, and why.
    fn fault_for(&self, st: &mut State, id: u64, op: Op, offset: u64, len: u64) -> Option<String> {
        let bs = u64::from(self.config.block_size);
        let mut why = None;
        for f in &self.config.faults.faults {
            let hit = match *f {
                Fault::Block { blocknr, op: fop } => {
                    let lo = blocknr.0.saturating_mul(bs);
                    let hi = lo.saturating_add(bs);
                    (fop == Some(op) || fop.is_none()) && offset < hi && lo < offset + len
                }
                Fault::NthBio(n) => n == id,
                Fault::Random { per_million } => {
                    st.rng.next_u64() % 1_000_000 < u64::from(per_million)
                }
            };
            if hit && why.is_none() {
                why = Some(format!("injected fault {f:?}"));
            }
        }
        if why.is_some() {
            st.stats.faults_injected += 1;
        }
        why
    }

    /// Run pending events in time order until one page completion has run;
    /// false if nothing is pending.
    fn complete_next(&self, st: &mut State) -> bool {
        loop {
            match self.step(st) {
                None => return false,
                Some(true) => return true,
                Some(false) => {}
            }
        }
    }

    /// Run the earliest pending event; `Some(true)` if it completed a page,
    /// `Some(false)` for a request-queue event, `None` if nothing is pending.
    fn step(&self, st: &mut State) -> Option<bool> {
        let ((time, _), ev) = st.events.pop_first()?;
        st.now_ns = st.now_ns.max(time);
        let now = st.now_ns;
        let (bio_id, page) = match ev {
            Event::Page { bio, page } => (bio, page),
            Event::RequestDone { rq } => {
                self.request_done(st, rq, now);
                return Some(false);
            }
            Event::Unplug { generation } => {
                if st.queue.as_mut().is_some_and(|q| q.timer(generation)) {
                    self.run_queue(st, now);
                }
                return Some(false);
            }
        };
        let ev = PageEv { bio: bio_id, page };
        let seq = st.next_completion;
        st.next_completion += 1;
        let bio = st
            .inflight
            .get_mut(&ev.bio)
            .expect("completion event for an unknown bio");
        let bs = u64::from(bio.block_size);
        let blocknr = BlockNr(bio.start.0 + ev.page as u64);
        // In range: checked at submission.
        let offset = blocknr.0 * bs;
        let mut data = Vec::new();
        let result = match (&bio.faults[ev.page], bio.op) {
            (Some(why), _) => Err(Error::Io {
                blocknr: blocknr.0,
                detail: why.clone(),
            }),
            (None, Op::Read) => {
                data = vec![0u8; bs as usize];
                self.store
                    .read_at(offset, &mut data)
                    .map_err(|e| relabel(e, blocknr.0))
            }
            (None, Op::Write) => self
                .store
                .write_at(offset, &bio.write_data[ev.page])
                .map_err(|e| relabel(e, blocknr.0)),
        };
        if result.is_err() {
            data.clear();
        }
        if let Some(end_io) = bio.end_io.as_mut() {
            end_io(PageDone {
                index: ev.page,
                blocknr,
                data: &data,
                result: &result,
                time_ns: now,
            });
        }
        let op = bio.op;
        let ok = result.is_ok();
        {
            let mut pages = lock(&bio.pages);
            let slot = &mut pages[ev.page];
            assert!(
                slot.done.is_none(),
                "page {} of bio {} completed twice",
                ev.page,
                ev.bio
            );
            slot.done = Some(PageCompletion {
                seq,
                time_ns: now,
                result,
            });
            if op == Op::Read && ok {
                slot.data = Some(data);
            }
        }
        bio.remaining -= 1;
        if bio.remaining == 0 {
            st.inflight.remove(&ev.bio);
        }
        match (op, ok) {
            (Op::Read, true) => {
                st.stats.pages_read += 1;
                st.stats.bytes_read += bs;
            }
            (Op::Read, false) => st.stats.pages_read += 1,
            (Op::Write, true) => {
                st.stats.pages_written += 1;
                st.stats.bytes_written += bs;
            }
            (Op::Write, false) => st.stats.pages_written += 1,
        }
        Some(true)
    }

    /// Act on what the request queue asked for at time `now`.
    fn kick(&self, st: &mut State, kick: Kick, now: u64) {
        match kick {
            Kick::None => {}
            Kick::ArmTimer { at_ns, generation } => {
                let seq = st.next_event;
                st.next_event += 1;
                st.events.insert((at_ns, seq), Event::Unplug { generation });
            }
            Kick::Run => self.run_queue(st, now),
        }
    }

    /// A sleeper's unplug (`sync_page` / `sync_buffer`).
    fn unplug(&self, st: &mut State) {
        if st.queue.as_mut().is_some_and(RequestQueue::unplug) {
            let now = st.now_ns;
            self.run_queue(st, now);
        }
    }

    /// `request_fn`: hand the device every request it can take, at `now`.
    fn run_queue(&self, st: &mut State, now: u64) {
        let completion_ns = match self.config.block_layer {
            BlockLayer::Queue(m) => m.completion_ns,
            BlockLayer::Direct => 0,
        };
        while let Some(rq) = st.queue.as_mut().and_then(RequestQueue::next_dispatch) {
            let (start, done, service) = st.mechanics.service(now, rq.op, rq.offset, rq.len);
            let busy_from = start.max(st.busy_until_ns);
            st.stats.busy_ns += done.saturating_sub(busy_from);
            st.busy_until_ns = st.busy_until_ns.max(done);
            let rahead = rq
                .bios
                .iter()
                .all(|b| st.queued_bios.get(b).is_some_and(|&(_, ra)| ra));
            st.requests.push(RequestRecord {
                op: rq.op,
                offset: rq.offset,
                len: rq.len,
                bios: rq.bios.len(),
                rahead,
                dispatch_ns: now,
                done_ns: done,
                service,
            });
            let seq = st.next_event;
            st.next_event += 1;
            st.events.insert(
                (done + completion_ns, seq),
                Event::RequestDone { rq: rq.id },
            );
            st.dispatched.insert(rq.id, rq);
        }
    }

    /// Request `rq` is done at `now`: one softirq completes all its bios'
    /// pages, in device order, spending [`SimConfig::end_io_page_ns`] on
    /// each; nothing else runs meanwhile, so every page is visible at the
    /// end of it (no waiter wakes between two pages of one request, as on
    /// the kernel's CPU). Then the completion path runs the queue.
    fn request_done(&self, st: &mut State, rq: u64, now: u64) {
        let Some(rq) = st.dispatched.remove(&rq) else {
            return;
        };
        let pages: Vec<(u64, usize)> = rq
            .bios
            .iter()
            .map(|b| (*b, st.inflight.get(b).map_or(0, |f| lock(&f.pages).len())))
            .collect();
        let total: u64 = pages.iter().map(|&(_, n)| n as u64).sum();
        let end = now + total * self.config.end_io_page_ns;
        for (bio, n) in pages {
            st.queued_bios.remove(&bio);
            for pos in 0..n {
                let page = match self.config.order {
                    CompletionOrder::Submission => pos,
                    CompletionOrder::Reverse => n - 1 - pos,
                };
                let seq = st.next_event;
                st.next_event += 1;
                st.events.insert((end, seq), Event::Page { bio, page });
            }
        }
        if let Some(q) = st.queue.as_mut() {
            q.completed();
        }
        self.run_queue(st, end);
    }
}

/// A page completion being run.
struct PageEv {
    bio: u64,
    page: usize,
}

/// Name the block in an I/O error from the store.
fn relabel(e: Error, blocknr: u64) -> Error {
    match e {
        Error::Io { detail, .. } => Error::Io { blocknr, detail },
        other => other,
    }
}

/// The synchronous view: every call submits bios and waits for them, so mkfs,
/// the reader and any [`BlockDevice`] user run on the simulated device and
/// are timed by it. Requests aligned to [`SimConfig::block_size`] use bios of
/// that page size, others bios of 512-byte sectors; at most
/// [`MAX_BIO_PAGES`] pages a bio, all submitted before the first wait.
impl BlockDevice for SimDevice {
    fn size_bytes(&self) -> u64 {
        self.inner.store.size_bytes()
    }

    fn read_at(&self, off: u64, buf: &mut [u8]) -> Result<()> {
        let (unit, chunks) = self.split(off, buf.len())?;
        let handles = chunks
            .iter()
            .map(|&(start, n)| self.submit(Bio::read(BlockNr(start), unit as u32, n as usize)))
            .collect::<Result<Vec<_>>>()?;
        Self::wait_all(&handles)?;
        for (&(start, _), h) in chunks.iter().zip(&handles) {
            for k in 0..h.nr_pages() {
                let data = h.take_data(k).expect("completed read page without data");
                let at = ((start + k as u64) * unit - off) as usize;
                buf[at..at + data.len()].copy_from_slice(&data);
            }
        }
        Ok(())
    }

    fn write_at(&self, off: u64, buf: &[u8]) -> Result<()> {
        let (unit, chunks) = self.split(off, buf.len())?;
        let handles = chunks
            .iter()
            .map(|&(start, n)| {
                let at = ((start * unit) - off) as usize;
                let pages = buf[at..at + (n * unit) as usize]
                    .chunks(unit as usize)
                    .map(<[u8]>::to_vec);
                self.submit(Bio::write(BlockNr(start), unit as u32, pages.collect()))
            })
            .collect::<Result<Vec<_>>>()?;
        Self::wait_all(&handles)
    }

    fn flush(&self) -> Result<()> {
        self.run_until_idle();
        self.inner.store.flush()
    }
}
