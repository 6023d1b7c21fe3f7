//! Seed 002's experiment: does completing a bio's pages in submission order
//! save CPU cache misses and first-page latency on a streaming read?
//!
//! # Setup
//!
//! A file of [`Experiment::file_bytes`] lies contiguously at the start of a
//! simulated device ([`SimDevice`], SSD or HDD timing). A reader streams it
//! in bios of [`Experiment::bio_pages`] pages, keeping
//! [`Experiment::bios_ahead`] bios submitted ahead of the one it consumes
//! (read-ahead; bio `b + bios_ahead` is submitted once bio `b` is consumed).
//! File page `p` is read into its own page frame at address `p ×
//! page_bytes` of a [`Hierarchy`] of CPU caches (default: one Nehalem core).
//! Three things touch a page, in this order:
//!
//! 1. **DMA.** When the device has moved a bio's data (at its first page
//!    completion) the frames' lines are *invalidated* in every cache level:
//!    x86 DMA is cache-coherent and, before Intel's DDIO (2012), the device
//!    writes memory and snoops cached copies away rather than writing into
//!    the cache. (Every frame here is fresh, so this only matters if frames
//!    were reused; it is modelled so that nothing in the cache can predate
//!    the data.)
//! 2. **Checksum.** The completion handler of each page reads the whole page
//!    once, as btrfs's `end_bio_extent_readpage` verifies the page's csum
//!    before unlocking it. Its CPU time is the device's
//!    [`SimConfig::end_io_page_ns`] per page (1 µs), charged on the device's
//!    completion timeline. Each of these reads misses every level: the lines
//!    were just invalidated. These misses are the same in both orders.
//! 3. **Reader.** The reader takes pages in file order: `wait_page(k)`, then
//!    reads the whole page again (the copy to user space) and charges
//!    [`Experiment::reader_page_ns`] of CPU time with
//!    [`SimDevice::advance_by`]; completions falling due meanwhile run (and
//!    touch the cache) while it works. So completion and reader run
//!    *concurrently* and share one cache hierarchy, as two hyperthreads of
//!    one Nehalem core share its L1, L2 and L3 (on two separate cores only
//!    the L3 would be shared). [`Experiment::same_cpu`] instead lets a
//!    bio's completion loop finish before the reader runs, as on one CPU
//!    where the loop is not preempted.
//!
//! # Why submission order is cheaper, and when it is not
//!
//! The two orders differ only in *when* each page's checksum pass runs
//! relative to the reader's pass over the same page:
//!
//! - **Submission order**: page 0 completes first and the reader, waiting on
//!   it, reads it right after its checksum; while the reader copies page `k`,
//!   the handler checksums page `k + 1`. The reader trails the checksum pass
//!   by about one page, so it finds every line it reads still in L1.
//! - **Reverse order**: page 0 completes *last*, so the reader can start only
//!   after the whole bio has been checksummed (first-page latency grows by
//!   `(bio_pages − 1) × end_io_page_ns`). It then reads pages 0, 1, 2, ...,
//!   i.e. from the most recently to the least recently checksummed page. The
//!   first `capacity / page_bytes` pages hit; the rest were checksummed
//!   longest ago and have been evicted by the later checksums, so the reader
//!   misses on the `bio_pages − capacity / page_bytes` pages that no longer
//!   fit — at every level smaller than the bio.
//!
//! So the effect is *threshold-shaped*: a level sees extra misses in reverse
//! order only if the bio is larger than that level. With the default 32-page
//! (128 KiB) bios, reverse order costs 24 of 32 pages in the 32 KiB L1 and
//! nothing in the 256 KiB L2 or the 8 MiB L3 — the level `perf`'s
//! `cache-misses` (the thread's ~3%) counts.
//!
//! The advantage also needs the reader to *keep pace* with the completions
//! (`reader_page_ns ≤ end_io_page_ns`). A slower reader falls behind the
//! checksum pass by a growing number of pages; once the lag outgrows a
//! level, it reads in forward order the pages checksummed longest ago —
//! LRU's worst case — and submission order ends up with *more* misses than
//! reverse (whose first pages at least hit). With [`Experiment::same_cpu`]
//! the reader always starts after the whole bio, and submission order is
//! that worst case outright. The tests pin all three regimes.
//!
//! Cache misses do not feed back into time: the clock charges fixed CPU
//! costs per page. Everything is deterministic: the same [`Experiment`],
//! device and order give the same [`RunResult`].

use std::collections::VecDeque;

use super::cache_model::{CacheConfig, Hierarchy, LevelMisses};
use crate::device::sim::MAX_BIO_PAGES;
use crate::device::{Bio, BioHandle, CompletionOrder, SimConfig, SimDevice};
use crate::format::BlockNr;
use crate::sync::{lock, Arc, Mutex};
use crate::{Error, Result};

/// Largest file the experiment accepts (bounds its run time and memory).
pub const MAX_FILE_BYTES: u64 = 1 << 30;

/// The experiment's parameters.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Experiment {
    /// Size of the file streamed, bytes (a multiple of `page_bytes`).
    pub file_bytes: u64,
    /// Page (and block) size, bytes.
    pub page_bytes: u32,
    /// Pages per bio (1 to [`MAX_BIO_PAGES`]); the last bio may be shorter.
    pub bio_pages: usize,
    /// Bios submitted and not yet consumed by the reader (at least 1).
    pub bios_ahead: usize,
    /// Reader CPU time per page, ns: copying 4 KiB to user space at about
    /// 8 GB/s is 0.5 µs on a 2010 core.
    pub reader_page_ns: u64,
    /// The CPU caches, L1 first.
    pub caches: Vec<CacheConfig>,
    /// Whether a bio's completion loop runs to its end before the reader
    /// may run (completion and reader on the same CPU, the loop not
    /// preempted): the reader then starts on a bio only once all its pages
    /// have completed, in either order. Default false: the two run
    /// concurrently (see the module documentation).
    pub same_cpu: bool,
}

impl Default for Experiment {
    /// 64 MiB in bios of 32 pages of 4 KiB (128 KiB, the kernel's default
    /// read-ahead window of the time), two bios ahead, 0.5 µs of reader
    /// work per page, one Nehalem core's caches.
    fn default() -> Self {
        Experiment {
            file_bytes: 64 << 20,
            page_bytes: 4096,
            bio_pages: 32,
            bios_ahead: 2,
            reader_page_ns: 500,
            caches: Hierarchy::nehalem_configs(),
            same_cpu: false,
        }
    }
}

impl Experiment {
    fn validate(&self) -> Result<()> {
        let bad = |why: String| Err(Error::Invalid(why));
        if self.page_bytes == 0 || !self.file_bytes.is_multiple_of(u64::from(self.page_bytes)) {
            return bad(format!(
                "file size {} is not a multiple of the page size {}",
                self.file_bytes, self.page_bytes
            ));
        }
        if self.file_bytes == 0 || self.file_bytes > MAX_FILE_BYTES {
            return bad(format!(
                "file size {} (1 page to {MAX_FILE_BYTES} bytes)",
                self.file_bytes
            ));
        }
        if self.bio_pages == 0 || self.bio_pages > MAX_BIO_PAGES {
            return bad(format!(
                "{} pages a bio (1 to {MAX_BIO_PAGES})",
                self.bio_pages
            ));
        }
        if self.bios_ahead == 0 {
            return bad("at least one bio must be in flight".into());
        }
        Ok(())
    }

    /// Pages in the file.
    pub fn pages(&self) -> u64 {
        self.file_bytes / u64::from(self.page_bytes.max(1))
    }
}

/// The simulated devices of the experiment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Device {
    /// [`SimConfig::ssd_2010`]: an Intel X25-M G2.
    Ssd,
    /// [`SimConfig::hdd_2010`]: a 10,000 rpm SCSI disk.
    Hdd,
}

impl Device {
    /// Both devices, SSD first.
    pub const ALL: [Device; 2] = [Device::Ssd, Device::Hdd];

    /// Short name for reports.
    pub fn name(self) -> &'static str {
        match self {
            Device::Ssd => "SSD",
            Device::Hdd => "HDD",
        }
    }

    /// The device configuration with completion order `order`.
    pub fn config(self, order: CompletionOrder) -> SimConfig {
        let base = match self {
            Device::Ssd => SimConfig::ssd_2010(),
            Device::Hdd => SimConfig::hdd_2010(),
        };
        SimConfig { order, ..base }
    }
}

/// What one run measured. Per-level vectors are L1 first.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunResult {
    /// The device.
    pub device: Device,
    /// The completion order.
    pub order: CompletionOrder,
    /// Cache level names, L1 first.
    pub levels: Vec<String>,
    /// Misses of the completion handlers' checksum passes, per level.
    pub csum_misses: LevelMisses,
    /// Misses of the reader's pass, per level.
    pub reader_misses: LevelMisses,
    /// Lookups per level (hits + misses) over the run.
    pub references: Vec<u64>,
    /// Bios submitted.
    pub bios: u64,
    /// Pages read.
    pub pages: u64,
    /// First bio: submission to page 0's completion, ns.
    pub first_page_ns: u64,
    /// First bio: submission to the reader holding page 0, ns.
    pub first_read_ns: u64,
    /// Mean over all bios of submission to page 0's completion, ns.
    pub mean_first_page_ns: u64,
    /// Mean over all bios of submission to the reader holding page 0, ns.
    pub mean_first_read_ns: u64,
    /// Simulated time from the first submission to the reader's last page, ns.
    pub total_ns: u64,
}

impl RunResult {
    /// All misses (checksum + reader) per level.
    pub fn total_misses(&self) -> LevelMisses {
        self.csum_misses
            .iter()
            .zip(&self.reader_misses)
            .map(|(a, b)| a + b)
            .collect()
    }
}

/// What the completion handlers and the reader share.
struct Shared {
    cache: Hierarchy,
    csum_misses: LevelMisses,
}

fn add(into: &mut [u64], more: &[u64]) {
    for (a, b) in into.iter_mut().zip(more) {
        *a += b;
    }
}

/// A submitted bio the reader has not consumed yet.
struct Pending {
    handle: BioHandle,
    first_page: u64,
    submitted_ns: u64,
}

/// Run the experiment once on `device` with completion order `order`.
pub fn run(exp: &Experiment, device: Device, order: CompletionOrder) -> Result<RunResult> {
    exp.validate()?;
    let cache = Hierarchy::new(&exp.caches).map_err(Error::Invalid)?;
    let nlevels = exp.caches.len();
    let shared = Arc::new(Mutex::new(Shared {
        cache,
        csum_misses: vec![0; nlevels],
    }));
    let dev = SimDevice::mem(exp.file_bytes, device.config(order))?;
    let page = u64::from(exp.page_bytes);
    let pages = exp.pages();
    let bio_pages = exp.bio_pages as u64;
    let nbios = pages.div_ceil(bio_pages);

    let submit = |b: u64| -> Result<Pending> {
        let first_page = b * bio_pages;
        let n = (pages - first_page).min(bio_pages) as usize;
        let base = first_page * page;
        let shared = shared.clone();
        let mut dma_done = false;
        let bio = Bio::read(BlockNr(first_page), exp.page_bytes, n).on_page_done(move |p| {
            let mut sh = lock(&shared);
            if !dma_done {
                // The device has written the whole bio to memory.
                sh.cache.invalidate(base, n as u64 * page);
                dma_done = true;
            }
            // The checksum pass over the page that just completed.
            let m = sh.cache.access(base + p.index as u64 * page, page);
            add(&mut sh.csum_misses, &m);
        });
        let submitted_ns = dev.now_ns();
        Ok(Pending {
            handle: dev.submit(bio)?,
            first_page,
            submitted_ns,
        })
    };

    let mut queue: VecDeque<Pending> = (0..nbios.min(exp.bios_ahead as u64))
        .map(submit)
        .collect::<Result<_>>()?;
    let mut reader_misses = vec![0; nlevels];
    let (mut first_page_ns, mut first_read_ns) = (0, 0);
    let (mut sum_page_ns, mut sum_read_ns) = (0u64, 0u64);
    for b in 0..nbios {
        let bio = queue.pop_front().expect("bios_ahead >= 1 keeps one queued");
        if exp.same_cpu {
            bio.handle.wait()?;
        }
        for k in 0..bio.handle.nr_pages() {
            bio.handle.wait_page(k)?;
            if k == 0 {
                let done = bio.handle.completion(0).map_or(0, |c| c.time_ns);
                let page_ns = done - bio.submitted_ns;
                let read_ns = dev.now_ns() - bio.submitted_ns;
                if b == 0 {
                    (first_page_ns, first_read_ns) = (page_ns, read_ns);
                }
                sum_page_ns += page_ns;
                sum_read_ns += read_ns;
            }
            bio.handle.take_data(k);
            let addr = (bio.first_page + k as u64) * page;
            let m = lock(&shared).cache.access(addr, page);
            add(&mut reader_misses, &m);
            dev.advance_by(exp.reader_page_ns);
        }
        let next = b + exp.bios_ahead as u64;
        if next < nbios {
            queue.push_back(submit(next)?);
        }
    }
    let total_ns = dev.now_ns();
    dev.run_until_idle();
    let sh = lock(&shared);
    Ok(RunResult {
        device,
        order,
        levels: exp.caches.iter().map(|c| c.name.clone()).collect(),
        csum_misses: sh.csum_misses.clone(),
        reader_misses,
        references: sh.cache.stats().iter().map(|s| s.hits + s.misses).collect(),
        bios: nbios,
        pages,
        first_page_ns,
        first_read_ns,
        mean_first_page_ns: sum_page_ns / nbios,
        mean_first_read_ns: sum_read_ns / nbios,
        total_ns,
    })
}

/// Run on every device in both orders: SSD submission, SSD reverse, HDD
/// submission, HDD reverse.
pub fn run_all(exp: &Experiment) -> Result<Vec<RunResult>> {
    let mut out = Vec::new();
    for device in Device::ALL {
        for order in [CompletionOrder::Submission, CompletionOrder::Reverse] {
            out.push(run(exp, device, order)?);
        }
    }
    Ok(out)
}

/// `(a − b) / b` in percent; 0 when `b` is 0.
pub fn relative_pct(a: u64, b: u64) -> f64 {
    if b == 0 {
        0.0
    } else {
        (a as f64 - b as f64) * 100.0 / b as f64
    }
}
