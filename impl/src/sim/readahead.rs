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
use crate::device::sim::{DeviceModel, HddModel, SsdModel, Submitted};
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
    /// Bios that did not start where the previous one ended: a seek (and
    /// rotational wait) on the disk, which serves bios in submission order.
    pub seeks: u64,
    /// B-tree node bios of the file and of the DAT (wanted or read ahead).
    pub node_bios: u64,
    /// Of which B-tree sibling read-ahead.
    pub node_ra_bios: u64,
    /// Times the reader slept on I/O.
    pub waits: u64,
    /// The read path's own counters (data bios, DAT bios, lookups).
    pub path: CachedStats,
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

/// Bios in a submission log slice (of `bs`-byte blocks) that do not start
/// where the previous one ended.
fn count_seeks(log: &[Submitted], bs: u32) -> u64 {
    let mut end: Option<u64> = None;
    let mut seeks = 0;
    for s in log {
        let start = s.start.0 * u64::from(bs);
        if end != Some(start) {
            seeks += 1;
        }
        end = Some(start + s.nr_pages as u64 * u64::from(bs));
    }
    seeks
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
    let bs = nilfs.block_size();
    let view = CheckpointView::open(&nilfs, None)?;
    let (ino, inode) = view.resolve(path, true)?;
    let fs = CachedFs::with_params(dev.clone(), &nilfs, MountOptions { readahead }, params)?;
    dev.run_until_idle();
    let (t0, log0, st0) = (dev.now_ns(), dev.submissions().len(), dev.stats());
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
    Ok(DdRun {
        readahead,
        bytes,
        ns,
        bios,
        seeks: count_seeks(log, bs),
        node_bios: bios - path.data_bios - path.dat_bios,
        node_ra_bios: rahead - path.dat_ra_bios,
        waits: st.waits - st0.waits,
        path,
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
    /// [`SsdModel::read_latency_ns`]: time before a read's data moves.
    SsdReadLatency,
    /// [`SsdModel::read_bytes_per_s`]: read channel bandwidth.
    SsdReadBandwidth,
}

impl Knob {
    /// Its name and unit, for reports.
    pub fn describe(self) -> &'static str {
        match self {
            Knob::HddCommandOverhead => "HDD per-request overhead (ns)",
            Knob::HddMediaRate => "HDD media rate (bytes/s)",
            Knob::HddMinSeek => "HDD track-to-track seek (ns)",
            Knob::SsdReadLatency => "SSD read latency (ns)",
            Knob::SsdReadBandwidth => "SSD read bandwidth (bytes/s)",
        }
    }

    /// The search range, and whether throughput rises with the value.
    fn range(self) -> (u64, u64, bool) {
        match self {
            Knob::HddCommandOverhead => (0, 5_000_000, false),
            Knob::HddMediaRate => (10_000_000, 400_000_000, true),
            Knob::HddMinSeek => (0, 20_000_000, false),
            Knob::SsdReadLatency => (0, 2_000_000, false),
            Knob::SsdReadBandwidth => (50_000_000, 1_000_000_000, true),
        }
    }

    /// The current value in `config`.
    pub fn get(self, config: &SimConfig) -> Option<u64> {
        match (self, &config.model) {
            (Knob::HddCommandOverhead, DeviceModel::Hdd(m)) => Some(m.command_overhead_ns),
            (Knob::HddMediaRate, DeviceModel::Hdd(m)) => Some(m.media_bytes_per_s),
            (Knob::HddMinSeek, DeviceModel::Hdd(m)) => Some(m.track_to_track_seek_ns),
            (Knob::SsdReadLatency, DeviceModel::Ssd(m)) => Some(m.read_latency_ns),
            (Knob::SsdReadBandwidth, DeviceModel::Ssd(m)) => Some(m.read_bytes_per_s),
            _ => None,
        }
    }

    /// `config` with this parameter set to `v`.
    pub fn set(self, config: &SimConfig, v: u64) -> Result<SimConfig> {
        let mut c = config.clone();
        let set_hdd = |m: &mut HddModel| match self {
            Knob::HddCommandOverhead => m.command_overhead_ns = v,
            Knob::HddMinSeek => m.track_to_track_seek_ns = v,
            _ => m.media_bytes_per_s = v,
        };
        let set_ssd = |m: &mut SsdModel| match self {
            Knob::SsdReadLatency => m.read_latency_ns = v,
            _ => m.read_bytes_per_s = v,
        };
        match (self, &mut c.model) {
            (
                Knob::HddCommandOverhead | Knob::HddMediaRate | Knob::HddMinSeek,
                DeviceModel::Hdd(m),
            ) => set_hdd(m),
            (Knob::SsdReadLatency | Knob::SsdReadBandwidth, DeviceModel::Ssd(m)) => set_ssd(m),
            _ => {
                return Err(Error::Invalid(format!(
                    "{self:?} does not apply to {:?}",
                    config.model
                )))
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::sim::Op;
    use crate::format::BlockNr;

    #[test]
    fn seeks_count_discontiguous_bios() {
        let s = |start, n| Submitted {
            id: 0,
            op: Op::Read,
            rahead: false,
            start: BlockNr(start),
            nr_pages: n,
        };
        assert_eq!(
            count_seeks(&[s(10, 4), s(14, 2), s(100, 1), s(16, 8)], 4096),
            3
        );
    }

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
