//! The timing models: a rotating disk and a flash SSD as parameters
//! ([`HddModel`], [`SsdModel`]), and their mutable state as the device
//! serves requests (`Mechanics`).

use super::drive_cache::{CacheStats, CachedDisk, DiskCache, Service};
use super::{Op, NS_PER_S};
use crate::{Error, Result};

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

    pub(super) fn validate(&self) -> Result<()> {
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

    pub(super) fn validate(&self) -> Result<()> {
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

/// The mutable state of the device's timing model.
pub(super) enum Mechanics {
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
    pub(super) fn new(model: DeviceModel, cache: Option<DiskCache>) -> Self {
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
    pub(super) fn service(
        &mut self,
        now: u64,
        op: Op,
        offset: u64,
        len: u64,
    ) -> (u64, u64, Service) {
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

    pub(super) fn cache_stats(&self) -> Option<CacheStats> {
        match self {
            Mechanics::CachedHdd(d) => Some(d.stats()),
            _ => None,
        }
    }
}
