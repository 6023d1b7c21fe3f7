//! A rotating disk with a segmented read cache and its own read-ahead
//! (look-ahead, prefetch), as the SCSI disks of 2002–2010 had it.
//!
//! # The drive
//!
//! The buffer is split into [`DiskCache::segments`] equal segments (SCSI
//! caching mode page 08h, NUMBER OF CACHE SEGMENTS). A read whose first
//! byte is not in any segment is a **miss**: the drive stops its current
//! read-ahead (see below), seeks, waits for the sector, reads the request
//! into the least recently used segment, then goes on reading the following
//! sectors into that segment — its **read-ahead** — while nothing else needs
//! the head, up to [`DiskCache::max_prefetch_bytes`]. A read entirely inside
//! a segment is a **hit**, served from the buffer over the interface. A read
//! that starts inside the segment being read ahead, at or before where the
//! read-ahead will go, is **sequential**: the drive keeps streaming (Fujitsu:
//! a READ whose first block is a sequential access block "is executed without
//! the look-ahead operation being halted"), and the read-ahead limit moves on.
//! A read whose first bytes are cached and whose rest is not is a hit for the
//! cached part and a miss for the rest (Seagate's "Case A").
//!
//! When a non-sequential command is waiting, what happens to the read-ahead
//! is the drive's policy ([`Prefetch`]): stop at once (MINIMUM PRE-FETCH 0,
//! the default of the Fujitsu and IBM drives; ABPF=1), read a fixed minimum
//! first (MINIMUM PRE-FETCH n: "regardless of the delay it may cause to other
//! commands"), or finish the read-ahead to its limit first. Hits do not need
//! the head and leave the read-ahead running.
//!
//! The drive serves commands one at a time in arrival order (no
//! rotational-position reordering), so the model is computed when each
//! command arrives, in arrival order: the read-ahead in progress is a
//! function of time (`position = start + media rate × elapsed`, capped at its
//! limit) and is settled lazily when the next command needs to know. Head
//! angle, seek curve and media rate are [`HddModel`]'s.

use super::HddModel;
use super::{Op, NS_PER_S};
use crate::{Error, Result};

/// What the drive does with its read-ahead when another command needs the head.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Prefetch {
    /// No read-ahead (DRA = 1).
    Off,
    /// Stop as soon as a non-sequential command is waiting (MINIMUM
    /// PRE-FETCH = 0).
    AbortOnCommand,
    /// Read at least this many bytes past the request first (MINIMUM
    /// PRE-FETCH, ABPF = 0).
    Minimum(u64),
    /// Read ahead to the limit before serving the next command.
    ToLimit,
}

/// The drive's buffer and read-ahead.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DiskCache {
    /// Buffer used for read caching, bytes.
    pub buffer_bytes: u64,
    /// Equal segments the buffer is split into.
    pub segments: u32,
    /// Read-ahead policy.
    pub prefetch: Prefetch,
    /// Most bytes read ahead past a request (at most a segment).
    pub max_prefetch_bytes: u64,
    /// Buffer-to-host rate, bytes per second (Ultra320: 320 MB/s).
    pub interface_bytes_per_s: u64,
    /// Command overhead of a cache hit, ns.
    pub hit_overhead_ns: u64,
}

impl DiskCache {
    /// The read cache of a 10,000 rpm Ultra320 disk of 2004–2008. Data
    /// sheets: 8 MiB buffer (Seagate Cheetah 10K.7; Fujitsu MAW/MBA: 8–16
    /// MiB); 8 segments (Fujitsu MBA3xxxNC default NUMBER OF CACHE SEGMENTS
    /// X'08'; MAA/MAN series 4); MINIMUM PRE-FETCH X'0000', i.e. read-ahead
    /// stops when a command needs the head (Fujitsu MBA3xxxNC default; IBM
    /// DDRS/Ultrastar: "a value of zero indicates that read ahead should be
    /// terminated immediately a new command arrives"); read-ahead up to a
    /// segment; Ultra320 interface 320 MB/s; under 30 µs command overhead
    /// on a hit (IBM Ultrastar 146Z10: "<30 µs cache hit, <400 µs cache not
    /// hit").
    pub fn scsi_2010() -> Self {
        let buffer_bytes = 8 << 20;
        let segments = 8;
        DiskCache {
            buffer_bytes,
            segments,
            prefetch: Prefetch::AbortOnCommand,
            max_prefetch_bytes: buffer_bytes / u64::from(segments),
            interface_bytes_per_s: 320_000_000,
            hit_overhead_ns: 30_000,
        }
    }

    /// Bytes in one segment.
    pub fn segment_bytes(&self) -> u64 {
        self.buffer_bytes / u64::from(self.segments.max(1))
    }

    pub(super) fn validate(&self) -> Result<()> {
        if self.segments == 0 || self.segment_bytes() == 0 || self.interface_bytes_per_s == 0 {
            return Err(Error::Invalid(
                "disk cache: segments, segment size and interface rate must be non-zero".into(),
            ));
        }
        Ok(())
    }
}

/// How the drive served one command.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Service {
    /// No head to move: the instant device or an SSD.
    NoHead,
    /// The head went to the data: seek and rotational wait.
    Miss,
    /// A miss with no seek or rotation: the head was streaming there (the
    /// uncached disk model's contiguous request).
    Streamed,
    /// Sequential with the read-ahead in progress.
    Sequential,
    /// Entirely from the buffer.
    Hit,
    /// The start from the buffer, the rest from the disk.
    PartialHit,
}

/// Counters of the drive cache.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CacheStats {
    /// Commands served entirely from the buffer.
    pub hits: u64,
    /// Commands that continued the read-ahead.
    pub sequential: u64,
    /// Commands partly from the buffer.
    pub partial_hits: u64,
    /// Commands that moved the head.
    pub misses: u64,
    /// Bytes read ahead from the media past what commands had asked for.
    pub prefetched_bytes: u64,
    /// Read-ahead stopped early by a waiting command.
    pub prefetch_aborts: u64,
}

#[derive(Clone, Copy, Debug)]
struct Segment {
    start: u64,
    end: u64,
    lru: u64,
}

/// The read-ahead in progress: reading from `pos0` at `t0` into `seg`, up to `limit`.
#[derive(Clone, Copy, Debug)]
struct Stream {
    seg: usize,
    pos0: u64,
    t0: u64,
    limit: u64,
    /// Where the read-ahead began (the end of the last request it continued):
    /// the minimum prefetch counts from here.
    from: u64,
}

/// The mutable state of a cached disk.
#[derive(Debug)]
pub(super) struct CachedDisk {
    model: HddModel,
    cache: DiskCache,
    free_at_ns: u64,
    head: u64,
    segs: Vec<Option<Segment>>,
    stream: Option<Stream>,
    tick: u64,
    stats: CacheStats,
}

impl CachedDisk {
    pub fn new(model: HddModel, cache: DiskCache) -> Self {
        CachedDisk {
            model,
            cache,
            free_at_ns: 0,
            head: 0,
            segs: vec![None; cache.segments as usize],
            stream: None,
            tick: 0,
            stats: CacheStats::default(),
        }
    }

    pub fn stats(&self) -> CacheStats {
        self.stats
    }

    fn iface_ns(&self, bytes: u64) -> u64 {
        (u128::from(bytes) * NS_PER_S / u128::from(self.cache.interface_bytes_per_s.max(1))) as u64
    }

    /// Bytes the media passes in `ns`.
    fn media_bytes(&self, ns: u64) -> u64 {
        (u128::from(ns) * u128::from(self.model.media_bytes_per_s) / NS_PER_S) as u64
    }

    /// Position of the read-ahead at time `t`.
    fn pos_at(&self, s: &Stream, t: u64) -> u64 {
        if t <= s.t0 {
            return s.pos0;
        }
        s.pos0
            .saturating_add(self.media_bytes(t - s.t0))
            .min(s.limit)
    }

    /// When the read-ahead reaches byte `pos` (≤ its limit).
    fn time_at(&self, s: &Stream, pos: u64) -> u64 {
        // Rounded up, so that `pos_at(time_at(p)) >= p`.
        let bytes = u128::from(pos.saturating_sub(s.pos0));
        let rate = u128::from(self.model.media_bytes_per_s.max(1));
        s.t0 + (bytes * NS_PER_S).div_ceil(rate) as u64
    }

    /// The valid range of segment `i` at time `t` (the streaming segment
    /// grows with the read-ahead and keeps its last `segment_bytes`).
    fn valid(&self, i: usize, t: u64) -> Option<(u64, u64)> {
        let seg = self.segs[i]?;
        let mut end = seg.end;
        if let Some(s) = &self.stream {
            if s.seg == i {
                end = end.max(self.pos_at(s, t));
            }
        }
        let start = seg
            .start
            .max(end.saturating_sub(self.cache.segment_bytes()));
        Some((start, end))
    }

    fn touch(&mut self, i: usize) {
        self.tick += 1;
        if let Some(seg) = self.segs[i].as_mut() {
            seg.lru = self.tick;
        }
    }

    /// Stop the read-ahead for a command that needs the head, starting at
    /// `s`; returns when the head is free and where it is.
    fn stop_stream(&mut self, s: u64) -> (u64, u64) {
        let Some(st) = self.stream.take() else {
            return (s, self.head);
        };
        let natural_end = self.time_at(&st, st.limit);
        let stop_t = match self.cache.prefetch {
            Prefetch::Off | Prefetch::AbortOnCommand => s.max(st.t0),
            Prefetch::Minimum(m) => {
                let min_pos = st.from.saturating_add(m).min(st.limit);
                s.max(self.time_at(&st, min_pos.max(st.pos0)))
            }
            Prefetch::ToLimit => natural_end,
        }
        .min(natural_end.max(st.t0));
        let pos = self.pos_at(&st, stop_t);
        if stop_t < natural_end {
            self.stats.prefetch_aborts += 1;
        }
        self.stats.prefetched_bytes += pos.saturating_sub(st.from);
        if let Some(seg) = self.segs[st.seg].as_mut() {
            seg.end = seg.end.max(pos);
            let keep = self.cache.segment_bytes();
            seg.start = seg.start.max(seg.end.saturating_sub(keep));
        }
        self.head = pos;
        (stop_t.max(s), pos)
    }

    /// Start reading ahead after a media read ending at `pos` at time `t` into `seg`.
    fn start_stream(&mut self, seg: usize, pos: u64, t: u64) {
        if self.cache.prefetch == Prefetch::Off {
            self.head = pos;
            return;
        }
        let limit = pos.saturating_add(
            self.cache
                .max_prefetch_bytes
                .min(self.cache.segment_bytes()),
        );
        self.stream = Some(Stream {
            seg,
            pos0: pos,
            t0: t,
            limit,
            from: pos,
        });
    }

    /// The least recently used (or an empty) segment.
    fn victim(&self) -> usize {
        let mut best = 0;
        let mut best_lru = u64::MAX;
        for (i, s) in self.segs.iter().enumerate() {
            match s {
                None => return i,
                Some(seg) if seg.lru < best_lru => {
                    best = i;
                    best_lru = seg.lru;
                }
                Some(_) => {}
            }
        }
        best
    }

    /// Drop cached bytes overlapping `[offset, offset+len)` (a write).
    fn invalidate(&mut self, offset: u64, len: u64) {
        let end = offset + len;
        for s in self.segs.iter_mut() {
            if let Some(seg) = s {
                if seg.start < end && offset < seg.end {
                    *s = None;
                }
            }
        }
    }

    /// Serve a command arriving at `now`; returns when it starts and when
    /// its data have reached the host, and how it was served.
    pub fn service(&mut self, now: u64, op: Op, offset: u64, len: u64) -> (u64, u64, Service) {
        let s = now.max(self.free_at_ns);
        let end = offset + len;
        if op == Op::Write {
            // Write-through: a write needs the head; cached copies go.
            let (t_free, head) = self.stop_stream(s);
            self.invalidate(offset, len);
            let done = self.media_access(
                t_free.max(s + self.model.command_overhead_ns),
                head,
                offset,
                len,
            );
            self.head = end;
            self.free_at_ns = done;
            self.stats.misses += 1;
            return (s, done, Service::Miss);
        }
        // Sequential with the read-ahead in progress: keep streaming. The
        // stream's position is linear in time from (pos0, t0), so moving its
        // limit on is all it takes.
        if let Some(st) = self.stream {
            let running = self.pos_at(&st, s) < st.limit;
            let vstart = self.valid(st.seg, s).map_or(u64::MAX, |v| v.0);
            if running && offset >= vstart && offset <= st.limit {
                let media_end = self.time_at(&st, end.max(st.pos0));
                let ahead = self
                    .cache
                    .max_prefetch_bytes
                    .min(self.cache.segment_bytes());
                self.stream = Some(Stream {
                    limit: st.limit.max(end.saturating_add(ahead)),
                    from: st.from.max(end),
                    ..st
                });
                let done = (s + self.cache.hit_overhead_ns + self.iface_ns(len)).max(media_end);
                self.touch(st.seg);
                self.free_at_ns = done;
                self.stats.sequential += 1;
                return (s, done, Service::Sequential);
            }
        }
        // Entirely in some segment.
        let mut prefix: Option<(usize, u64)> = None;
        for i in 0..self.segs.len() {
            if let Some((vs, ve)) = self.valid(i, s) {
                if offset >= vs && end <= ve {
                    let done = s + self.cache.hit_overhead_ns + self.iface_ns(len);
                    self.touch(i);
                    self.free_at_ns = done;
                    self.stats.hits += 1;
                    return (s, done, Service::Hit);
                }
                if offset >= vs && offset < ve && prefix.is_none_or(|(_, e)| ve > e) {
                    prefix = Some((i, ve));
                }
            }
        }
        // A miss, or a partial hit: the rest from the disk, once the
        // read-ahead has stopped (which may have read more of it).
        let (t_free, head) = self.stop_stream(s);
        let prefix = prefix.map(|(i, ve)| (i, self.valid(i, t_free).map_or(ve, |v| v.1.max(ve))));
        if let Some((i, ve)) = prefix {
            if ve >= end {
                let done = t_free.max(s + self.cache.hit_overhead_ns) + self.iface_ns(len);
                self.touch(i);
                self.free_at_ns = done;
                self.stats.hits += 1;
                return (s, done, Service::Hit);
            }
        }
        let (miss_from, kind) = match prefix {
            Some((_, ve)) => (ve, Service::PartialHit),
            None => (offset, Service::Miss),
        };
        let t = t_free.max(s + self.model.command_overhead_ns);
        let t_media = self.media_access(t, head, miss_from, end - miss_from);
        let seg = match prefix {
            Some((i, _)) => i,
            None => self.victim(),
        };
        let keep = self.cache.segment_bytes();
        let seg_start = match prefix {
            Some(_) => self.segs[seg].map_or(offset, |g| g.start),
            None => offset,
        };
        self.segs[seg] = Some(Segment {
            start: seg_start.max(end.saturating_sub(keep)),
            end,
            lru: 0,
        });
        self.touch(seg);
        self.start_stream(seg, end, t_media);
        let done = t_media.max(s + self.cache.hit_overhead_ns + self.iface_ns(len));
        self.free_at_ns = done;
        match kind {
            Service::PartialHit => self.stats.partial_hits += 1,
            _ => self.stats.misses += 1,
        }
        (s, done, kind)
    }

    /// Seek from `head` to `offset` at `t`, wait for it, read `len`: when done.
    fn media_access(&self, t: u64, head: u64, offset: u64, len: u64) -> u64 {
        let mut t = t;
        if offset != head {
            t += self.model.seek_ns(offset.abs_diff(head));
        }
        t += self.model.rotational_wait_ns(t, offset);
        t + self.model.transfer_ns(len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn disk(prefetch: Prefetch) -> CachedDisk {
        CachedDisk::new(
            HddModel::scsi_2010(),
            DiskCache {
                prefetch,
                ..DiskCache::scsi_2010()
            },
        )
    }

    const KB: u64 = 1024;

    #[test]
    fn sequential_reads_stream_without_rotation() {
        let mut d = disk(Prefetch::AbortOnCommand);
        let (_, t1, k1) = d.service(0, Op::Read, 0, 128 * KB);
        assert_eq!(k1, Service::Miss);
        // The next window arrives a little later: the read-ahead kept going.
        let (_, t2, k2) = d.service(t1 + 50_000, Op::Read, 128 * KB, 128 * KB);
        assert_eq!(k2, Service::Sequential);
        let media = d.model.transfer_ns(128 * KB);
        assert!(t2 - t1 <= media + 60_000, "no revolution lost: {}", t2 - t1);
    }

    #[test]
    fn abort_loses_the_read_ahead_and_to_limit_keeps_it() {
        // Data, then a far node read queued at once, then the data again.
        let run = |p| {
            let mut d = disk(p);
            let (_, t1, _) = d.service(0, Op::Read, 0, 128 * KB);
            let (_, t2, _) = d.service(t1, Op::Read, 8 << 20, 4 * KB);
            let (_, t3, k3) = d.service(t2 + 20_000, Op::Read, 128 * KB, 128 * KB);
            (t3, k3, d.stats())
        };
        let (t_abort, k_abort, s_abort) = run(Prefetch::AbortOnCommand);
        let (t_limit, k_limit, s_limit) = run(Prefetch::ToLimit);
        assert_eq!(
            k_abort,
            Service::Miss,
            "nothing was read ahead before the node read"
        );
        assert_eq!(
            k_limit,
            Service::Hit,
            "the whole segment was read ahead first"
        );
        assert!(s_abort.prefetch_aborts >= 1);
        assert!(s_limit.prefetched_bytes >= 128 * KB);
        // Both are physical: neither returns before its bytes could arrive.
        assert!(t_abort > 0 && t_limit > 0);
    }

    #[test]
    fn node_siblings_read_ahead_hit_later_unless_aborted() {
        let run = |p| {
            let mut d = disk(p);
            // A node read; the host waits 2 ms before the next command (the
            // sibling 4 KiB later), so even an aborting drive has read ahead.
            let (_, t1, _) = d.service(0, Op::Read, 64 << 20, 4 * KB);
            let (_, _, k) = d.service(t1 + 2_000_000, Op::Read, (64 << 20) + 4 * KB, 4 * KB);
            k
        };
        assert_eq!(run(Prefetch::AbortOnCommand), Service::Sequential);
        assert_eq!(run(Prefetch::Off), Service::Miss);
    }

    #[test]
    fn deterministic() {
        let go = || {
            let mut d = disk(Prefetch::Minimum(64 * KB));
            let mut out = Vec::new();
            let mut t = 0;
            for i in 0..200u64 {
                let off = (i * 7919 % 97) * 64 * KB;
                let (_, done, k) = d.service(t, Op::Read, off, 16 * KB);
                out.push((done, k));
                t = done + (i % 5) * 10_000;
            }
            (out, d.stats())
        };
        assert_eq!(go(), go());
    }
}
