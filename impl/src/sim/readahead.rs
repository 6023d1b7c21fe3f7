//! Seed 000's experiment: `dd` of a 512 MB file with B-tree sibling
//! read-ahead off and on, on the simulated 2010 SCSI disk and Intel SSD.
//!
//! One run ([`dd`]) mounts the image on a fresh [`SimDevice`] (clock at 0,
//! head at 0, cold caches), resolves the file with the uncached reader (the
//! `open(2)` before dd's clock starts), then reads it with 1 MiB requests
//! (`dd bs=1M`) through [`CachedFs`] — the kernel's page cache read-ahead
//! windows, `nilfs_get_block` → `lookup_contig` with the DAT translation,
//! one bio per contiguous run — and reports the simulated time from the
//! first read to the last as dd does: `bytes / seconds / 10^6` MB/s.
//!
//! Calibration ([`calibrate`]) tunes **one** device parameter (a [`Knob`])
//! by bisection until the read-ahead-**off** run gives the seed's figure
//! (38.5 MB/s on the disk, 188 MB/s on the SSD); the read-ahead-on run with
//! the same parameters is then a prediction, to be compared with 67.0 and
//! 200 MB/s. Everything runs on the simulated clock: the figures are the same
//! on every machine.

use crate::bmap::readahead::ReadAhead;
use crate::device::sim::{
    BlockLayer, CacheStats, DeviceModel, DiskCache, HddModel, Prefetch, QueueModel, QueueStats,
    RequestRecord, Service, SsdModel,
};
use crate::device::{BlockDevice, SimConfig, SimDevice};
use crate::posix::cached::{CachedFs, CachedStats, MountOptions, ReadParams};
use crate::posix::CheckpointView;
use crate::the_nilfs::Nilfs;
use crate::{Error, Result};

/// The seed's hard disk figures, MB/s: (off, on).
pub const SEED_HDD: (f64, f64) = (38.5, 67.0);
/// The seed's SSD figures, MB/s: (off, on).
pub const SEED_SSD: (f64, f64) = (188.0, 200.0);

/// `dd bs=1M`: bytes per read request.
pub const DD_BS: u64 = 1 << 20;

/// Opens the image's store afresh for each run.
pub type OpenStore<'a> = &'a dyn Fn() -> Result<Box<dyn BlockDevice>>;

/// What one simulated `dd` measured.
#[derive(Clone, Debug, PartialEq)]
pub struct DdRun {
    /// The mount option.
    pub readahead: ReadAhead,
    /// Bytes read.
    pub bytes: u64,
    /// Simulated time from the first read to the last, ns.
    pub ns: u64,
    /// All bios of the read.
    pub bios: u64,
    /// Requests the device served (bios after merging; without a request
    /// queue, one per bio).
    pub requests: u64,
    /// Requests that moved the disk's head (a seek and a rotational wait;
    /// partial cache hits included). Zero on the SSD.
    pub head_moves: u64,
    /// B-tree node bios of the file and of the DAT (wanted or read ahead).
    pub node_bios: u64,
    /// Of which B-tree sibling read-ahead.
    pub node_ra_bios: u64,
    /// Times the reader slept on I/O.
    pub waits: u64,
    /// The read path's own counters (data bios, DAT bios, lookups).
    pub path: CachedStats,
    /// The request queue's counters during the read (`None`: no queue).
    pub queue: Option<QueueStats>,
    /// The disk cache's counters during the read (`None`: no cache).
    pub cache: Option<CacheStats>,
    /// Every request of the read, in dispatch order.
    pub trace: Vec<RequestRecord>,
}

impl DdRun {
    /// dd's figure: decimal megabytes per simulated second.
    pub fn mb_per_s(&self) -> f64 {
        if self.ns == 0 {
            return 0.0;
        }
        self.bytes as f64 / (self.ns as f64 / 1e9) / 1e6
    }
}

/// `b - a`, field by field (counters only grow; maxima are `b`'s).
fn queue_delta(a: Option<QueueStats>, b: Option<QueueStats>) -> Option<QueueStats> {
    let (a, b) = (a.unwrap_or_default(), b?);
    Some(QueueStats {
        requests: b.requests - a.requests,
        back_merges: b.back_merges - a.back_merges,
        front_merges: b.front_merges - a.front_merges,
        request_merges: b.request_merges - a.request_merges,
        plugs: b.plugs - a.plugs,
        unplug_wait: b.unplug_wait - a.unplug_wait,
        unplug_threshold: b.unplug_threshold - a.unplug_threshold,
        unplug_timer: b.unplug_timer - a.unplug_timer,
        unplug_completion: b.unplug_completion - a.unplug_completion,
        max_queued: b.max_queued,
        max_in_flight: b.max_in_flight,
    })
}

fn cache_delta(a: Option<CacheStats>, b: Option<CacheStats>) -> Option<CacheStats> {
    let (a, b) = (a.unwrap_or_default(), b?);
    Some(CacheStats {
        hits: b.hits - a.hits,
        sequential: b.sequential - a.sequential,
        partial_hits: b.partial_hits - a.partial_hits,
        misses: b.misses - a.misses,
        prefetched_bytes: b.prefetched_bytes - a.prefetched_bytes,
        prefetch_aborts: b.prefetch_aborts - a.prefetch_aborts,
    })
}

/// One simulated `dd if=PATH of=/dev/null bs=1M` on a fresh device made by
/// `config` over a fresh `open()` store.
pub fn dd(
    open: OpenStore<'_>,
    config: &SimConfig,
    path: &[u8],
    readahead: ReadAhead,
    params: ReadParams,
) -> Result<DdRun> {
    let dev = SimDevice::new(open()?, config.clone())?;
    let nilfs = Nilfs::open(&dev)?;
    let view = CheckpointView::open(&nilfs, None)?;
    let (ino, inode) = view.resolve(path, true)?;
    let fs = CachedFs::with_params(dev.clone(), &nilfs, MountOptions { readahead }, params)?;
    dev.run_until_idle();
    let (t0, log0, st0) = (dev.now_ns(), dev.submissions().len(), dev.stats());
    let (rq0, q0, c0) = (dev.requests().len(), dev.queue_stats(), dev.cache_stats());
    let mut bytes = 0u64;
    fs.read_inode_with(view.checkpoint().cno, ino, &inode, DD_BS, &mut |d| {
        bytes += d.len() as u64
    })?;
    let ns = dev.now_ns() - t0;
    let log = dev.submissions();
    let log = &log[log0..];
    let st = dev.stats();
    let path = fs.stats();
    let bios = log.len() as u64;
    let rahead = log.iter().filter(|s| s.rahead).count() as u64;
    let trace = dev.requests().split_off(rq0);
    let head_moves = trace
        .iter()
        .filter(|r| matches!(r.service, Service::Miss | Service::PartialHit))
        .count() as u64;
    Ok(DdRun {
        readahead,
        bytes,
        ns,
        bios,
        requests: trace.len() as u64,
        head_moves,
        node_bios: bios - path.data_bios - path.dat_bios,
        node_ra_bios: rahead - path.dat_ra_bios,
        waits: st.waits - st0.waits,
        path,
        queue: queue_delta(q0, dev.queue_stats()),
        cache: cache_delta(c0, dev.cache_stats()),
        trace,
    })
}

/// A device parameter the calibration may tune.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Knob {
    /// [`HddModel::command_overhead_ns`]: fixed cost of every request.
    HddCommandOverhead,
    /// [`HddModel::media_bytes_per_s`]: sustained media rate.
    HddMediaRate,
    /// [`HddModel::track_to_track_seek_ns`]: the shortest seek, which
    /// dominates the short seeks between a log's data and its B-tree nodes.
    HddMinSeek,
    /// [`HddModel::rpm`]: spindle speed (rotational waits).
    HddRpm,
    /// [`SsdModel::read_latency_ns`]: time before a read's data moves.
    SsdReadLatency,
    /// [`SsdModel::read_bytes_per_s`]: read channel bandwidth.
    SsdReadBandwidth,
    /// [`QueueModel::completion_ns`]: the host's completion path per
    /// request (interrupt, softirq, midlayer) before end_io and the next
    /// dispatch.
    HostCompletion,
}

impl Knob {
    /// Its name and unit, for reports.
    pub fn describe(self) -> &'static str {
        match self {
            Knob::HddCommandOverhead => "HDD per-request overhead (ns)",
            Knob::HddMediaRate => "HDD media rate (bytes/s)",
            Knob::HddMinSeek => "HDD track-to-track seek (ns)",
            Knob::HddRpm => "HDD spindle speed (rpm)",
            Knob::SsdReadLatency => "SSD read latency (ns)",
            Knob::SsdReadBandwidth => "SSD read bandwidth (bytes/s)",
            Knob::HostCompletion => "host completion path (ns)",
        }
    }

    /// The search range, and whether throughput rises with the value.
    fn range(self) -> (u64, u64, bool) {
        match self {
            Knob::HddCommandOverhead => (0, 5_000_000, false),
            Knob::HddMediaRate => (10_000_000, 400_000_000, true),
            Knob::HddMinSeek => (0, 20_000_000, false),
            Knob::HddRpm => (1_000, 20_000, true),
            Knob::SsdReadLatency => (0, 2_000_000, false),
            Knob::SsdReadBandwidth => (50_000_000, 1_000_000_000, true),
            Knob::HostCompletion => (0, 2_000_000, false),
        }
    }

    /// The current value in `config`.
    pub fn get(self, config: &SimConfig) -> Option<u64> {
        match (self, &config.model, &config.block_layer) {
            (Knob::HddCommandOverhead, DeviceModel::Hdd(m), _) => Some(m.command_overhead_ns),
            (Knob::HddMediaRate, DeviceModel::Hdd(m), _) => Some(m.media_bytes_per_s),
            (Knob::HddMinSeek, DeviceModel::Hdd(m), _) => Some(m.track_to_track_seek_ns),
            (Knob::HddRpm, DeviceModel::Hdd(m), _) => Some(u64::from(m.rpm)),
            (Knob::SsdReadLatency, DeviceModel::Ssd(m), _) => Some(m.read_latency_ns),
            (Knob::SsdReadBandwidth, DeviceModel::Ssd(m), _) => Some(m.read_bytes_per_s),
            (Knob::HostCompletion, _, BlockLayer::Queue(q)) => Some(q.completion_ns),
            _ => None,
        }
    }

    /// `config` with this parameter set to `v`.
    pub fn set(self, config: &SimConfig, v: u64) -> Result<SimConfig> {
        if self.get(config).is_none() {
            return Err(Error::Invalid(format!(
                "{self:?} does not apply to {:?} with {:?}",
                config.model, config.block_layer
            )));
        }
        let mut c = config.clone();
        let hdd = |c: &mut SimConfig, f: &dyn Fn(&mut HddModel)| {
            if let DeviceModel::Hdd(m) = &mut c.model {
                f(m);
            }
        };
        let ssd = |c: &mut SimConfig, f: &dyn Fn(&mut SsdModel)| {
            if let DeviceModel::Ssd(m) = &mut c.model {
                f(m);
            }
        };
        match self {
            Knob::HddCommandOverhead => hdd(&mut c, &|m| m.command_overhead_ns = v),
            Knob::HddMediaRate => hdd(&mut c, &|m| m.media_bytes_per_s = v),
            Knob::HddMinSeek => hdd(&mut c, &|m| m.track_to_track_seek_ns = v),
            Knob::HddRpm => hdd(&mut c, &|m| m.rpm = u32::try_from(v).unwrap_or(u32::MAX)),
            Knob::SsdReadLatency => ssd(&mut c, &|m| m.read_latency_ns = v),
            Knob::SsdReadBandwidth => ssd(&mut c, &|m| m.read_bytes_per_s = v),
            Knob::HostCompletion => {
                if let BlockLayer::Queue(q) = &mut c.block_layer {
                    q.completion_ns = v;
                }
            }
        }
        Ok(c)
    }
}

/// The outcome of a calibration.
#[derive(Clone, Debug, PartialEq)]
pub struct Calibration {
    /// The parameter tuned.
    pub knob: Knob,
    /// Its value before, in the model's defaults.
    pub default_value: u64,
    /// The value chosen.
    pub value: u64,
    /// The calibrated device.
    pub config: SimConfig,
    /// The read-ahead-off run with it (the fit).
    pub off: DdRun,
    /// The read-ahead-on run with it (the prediction).
    pub on: DdRun,
    /// Runs the search took.
    pub runs: u32,
}

/// Tune `knob` of `base` until the read-ahead-off `dd` gives `target` MB/s
/// (bisection, 24 steps at most, stops within 0.25 %), then run read-ahead on
/// with the result. Deterministic: the same inputs give the same value.
pub fn calibrate(
    open: OpenStore<'_>,
    base: &SimConfig,
    knob: Knob,
    target: f64,
    path: &[u8],
    params: ReadParams,
) -> Result<Calibration> {
    let default_value = knob
        .get(base)
        .ok_or_else(|| Error::Invalid(format!("{knob:?} does not apply to {:?}", base.model)))?;
    let (mut lo, mut hi, rising) = knob.range();
    let mut runs = 0;
    let mut best: Option<(f64, u64, DdRun)> = None;
    for _ in 0..24 {
        let mid = lo + (hi - lo) / 2;
        let run = dd(open, &knob.set(base, mid)?, path, ReadAhead::Off, params)?;
        runs += 1;
        let got = run.mb_per_s();
        let err = (got - target).abs() / target;
        if best.as_ref().is_none_or(|b| err < b.0) {
            best = Some((err, mid, run));
        }
        if err < 0.0025 || hi - lo <= 1 {
            break;
        }
        // Too fast: move the value toward slower, and vice versa.
        if (got > target) == rising {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    let (_, value, off) = best.expect("at least one run");
    let config = knob.set(base, value)?;
    let on = dd(open, &config, path, ReadAhead::On, params)?;
    Ok(Calibration {
        knob,
        default_value,
        value,
        config,
        off,
        on,
        runs: runs + 1,
    })
}

/// One row of the sensitivity table: a device configuration and the
/// parameter calibrated on it.
#[derive(Clone, Debug, PartialEq)]
pub struct Variant {
    /// What differs from the main configuration.
    pub name: &'static str,
    /// The device.
    pub config: SimConfig,
    /// The parameter fitted on the read-ahead-off figure.
    pub knob: Knob,
}

fn hdd_with(f: impl FnOnce(&mut SimConfig)) -> SimConfig {
    let mut c = SimConfig::hdd_2010_linux();
    f(&mut c);
    c
}

fn with_cache(f: impl FnOnce(&mut DiskCache)) -> SimConfig {
    hdd_with(|c| {
        if let Some(d) = c.disk_cache.as_mut() {
            f(d);
        }
    })
}

fn with_queue(mut c: SimConfig, f: impl FnOnce(&mut QueueModel)) -> SimConfig {
    if let BlockLayer::Queue(q) = &mut c.block_layer {
        f(q);
    }
    c
}

fn with_disk(f: impl FnOnce(&mut HddModel)) -> SimConfig {
    hdd_with(|c| {
        if let DeviceModel::Hdd(m) = &mut c.model {
            f(m);
        }
    })
}

/// The main disk configuration and knob: [`SimConfig::hdd_2010_linux`]
/// (data-sheet parameters), media rate fitted.
pub fn hdd_main() -> Variant {
    Variant {
        name: "main: 2.6.35 queue, TCQ 32, 8 segments, read-ahead stops for a command",
        config: SimConfig::hdd_2010_linux(),
        knob: Knob::HddMediaRate,
    }
}

/// The main SSD configuration and knob: [`SimConfig::ssd_2010_linux`],
/// read bandwidth fitted.
pub fn ssd_main() -> Variant {
    Variant {
        name: "main: 2.6.35 queue (plugged), NCQ 31",
        config: SimConfig::ssd_2010_linux(),
        knob: Knob::SsdReadBandwidth,
    }
}

/// The disk's sensitivity rows: one property of the 2010 setup changed at a
/// time (the media rate fitted again on each), then other parameters fitted
/// on the main configuration.
pub fn hdd_variants() -> Vec<Variant> {
    let kib = 1024;
    let media = Knob::HddMediaRate;
    let v = |name, config, knob| Variant { name, config, knob };
    vec![
        v(
            "the simulator before: no request queue, no drive cache",
            SimConfig::hdd_2010(),
            media,
        ),
        v(
            "no request queue: every bio its own command",
            hdd_with(|c| c.block_layer = BlockLayer::Direct),
            media,
        ),
        v(
            "no drive cache: contiguous commands stream, others seek",
            hdd_with(|c| c.disk_cache = None),
            media,
        ),
        v(
            "no plugging",
            with_queue(SimConfig::hdd_2010_linux(), |q| q.plugging = false),
            media,
        ),
        v(
            "untagged: queue depth 1",
            with_queue(SimConfig::hdd_2010_linux(), |q| q.depth = 1),
            media,
        ),
        v(
            "drive read-ahead off (DRA=1)",
            with_cache(|d| d.prefetch = Prefetch::Off),
            media,
        ),
        v(
            "drive read-ahead: at least 64 KiB before the next command",
            with_cache(|d| d.prefetch = Prefetch::Minimum(64 * kib)),
            media,
        ),
        v(
            "drive read-ahead: at least 256 KiB before the next command",
            with_cache(|d| d.prefetch = Prefetch::Minimum(256 * kib)),
            media,
        ),
        v(
            "drive read-ahead: the whole segment before the next command",
            with_cache(|d| d.prefetch = Prefetch::ToLimit),
            media,
        ),
        v(
            "drive read-ahead at most 64 KiB",
            with_cache(|d| d.max_prefetch_bytes = 64 * kib),
            media,
        ),
        v("2 cache segments", with_cache(|d| d.segments = 2), media),
        v("16 cache segments", with_cache(|d| d.segments = 16), media),
        v("7,200 rpm", with_disk(|m| m.rpm = 7_200), media),
        v("15,000 rpm", with_disk(|m| m.rpm = 15_000), media),
        v(
            "main, per-command overhead fitted instead",
            SimConfig::hdd_2010_linux(),
            Knob::HddCommandOverhead,
        ),
        v(
            "main, shortest seek fitted instead",
            SimConfig::hdd_2010_linux(),
            Knob::HddMinSeek,
        ),
        v(
            "main, spindle speed fitted instead",
            SimConfig::hdd_2010_linux(),
            Knob::HddRpm,
        ),
    ]
}

/// The SSD's sensitivity rows.
pub fn ssd_variants() -> Vec<Variant> {
    let bw = Knob::SsdReadBandwidth;
    let base = SimConfig::ssd_2010_linux;
    let v = |name, config, knob| Variant { name, config, knob };
    vec![
        v(
            "the simulator before: no request queue",
            SimConfig::ssd_2010(),
            bw,
        ),
        v(
            "not plugged (a block-layer-tagged SSD: queue_should_plug false)",
            with_queue(base(), |q| q.plugging = false),
            bw,
        ),
        v(
            "IDE mode: queue depth 1",
            with_queue(base(), |q| q.depth = 1),
            bw,
        ),
        v(
            "main, read latency fitted instead",
            base(),
            Knob::SsdReadLatency,
        ),
        v(
            "main, host completion path fitted instead",
            base(),
            Knob::HostCompletion,
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn knobs_set_what_they_name() {
        let c = Knob::HddCommandOverhead
            .set(&SimConfig::hdd_2010(), 7)
            .unwrap();
        assert_eq!(Knob::HddCommandOverhead.get(&c), Some(7));
        let c = Knob::SsdReadLatency.set(&SimConfig::ssd_2010(), 9).unwrap();
        assert_eq!(Knob::SsdReadLatency.get(&c), Some(9));
        assert!(Knob::SsdReadLatency.set(&SimConfig::hdd_2010(), 1).is_err());
    }
}
