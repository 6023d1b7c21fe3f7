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

mod bio;
mod blk;
mod drive_cache;
mod queue;
mod timing;

use crate::format::BlockNr;
use crate::sync::{lock, Arc, Mutex};
use crate::{Error, Result};
use bio::PageSlot;
pub use bio::{Bio, BioHandle, PageCompletion, PageDone};
pub use blk::{BlockLayer, Merges, QueueModel, QueueStats};
use blk::{QueuedBio, RequestQueue};
pub use drive_cache::{CacheStats, DiskCache, Prefetch, Service};
pub use queue::RequestRecord;
use queue::{Event, Inflight, Inner, State};
use timing::Mechanics;
pub use timing::{DeviceModel, HddModel, SsdModel};

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

fn check_page_size(bs: u32) -> Result<()> {
    if bs == 0 || !u64::from(bs).is_multiple_of(SECTOR_SIZE) || bs > MAX_PAGE_SIZE {
        return Err(Error::Invalid(format!(
            "block size {bs} is not a multiple of {SECTOR_SIZE} between {SECTOR_SIZE} and {MAX_PAGE_SIZE}"
        )));
    }
    Ok(())
}

/// The crate's seeded generator, which the fault plan draws from.
pub use crate::rng::SplitMix64;

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
    fn split(&self, off: u64, len: usize) -> Result<(u64, Vec<(u64, u64)>)> {
        check_range(self.size_bytes(), off, len)?;
        let bs = u64::from(self.inner.config.block_size);
        let unit = if off.is_multiple_of(bs) && (len as u64).is_multiple_of(bs) {
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
