//! Pass 2: every log. Which logs exist is decided as the cleaner decides it
//! (libnilfsgc's segment walk): each segment whose usage records blocks is
//! walked from its start, log by log, up to `su_nblocks`; then the logs the
//! super root search found after the latest super root (the roll-forward
//! candidates, `nilfs_search_super_root`). Each log is read once, whole,
//! and checked as `nilfs_validate_log` checks it, plus its summary
//! checksum, its records and its super root. What the summaries say about
//! every payload block is kept (one word a block) for the placement checks
//! of the later passes.

use std::collections::HashMap;

use super::btree::detail;
use super::codes::Code;
use super::ctx::{file_tag, Ck, Name, Owner, SegOwners};
use super::report::RollForward;
use crate::format::segsum::{
    compute_datasum, compute_sumsum, Binfo, SegmentSummary, Summary, SS_GC, SS_LOGBGN, SS_LOGEND,
    SS_SR, SS_SYNDT,
};
use crate::format::superblock::STATE_VALID_FS;
use crate::format::{ino, super_root, BlockNr, SegNum, SEGSUM_MAGIC};

/// The largest segment the log pass reads in one request (a hostile
/// geometry can make a segment as large as the device).
const PREFETCH_MAX: u64 = 64 << 20;

/// Every `ss_flags` bit the format defines (`NILFS_SS_*`).
const SS_KNOWN: u16 = SS_LOGBGN | SS_LOGEND | SS_SR | SS_SYNDT | SS_GC;

/// A segment's used blocks as the read-ahead thread read them, with the
/// checksums of each log it found in them.
type Prefetched = (Vec<u8>, Vec<LogSums>);

/// A log's block offset in its segment, its blocks, `ss_sumsum` and
/// `ss_datasum` as computed.
type LogSums = (u64, u64, u32, u32);

/// What the read-ahead brought for the segment being checked.
#[derive(Clone, Copy)]
struct Pre<'b> {
    buf: Option<&'b [u8]>,
    sums: &'b [LogSums],
}

/// The checksums of the logs laid end to end in `buf` (a segment's used
/// blocks from its start), as far as their headers chain inside it.
fn log_sums(buf: &[u8], bs: u64, seed: u32) -> Vec<LogSums> {
    let mut out = Vec::new();
    let mut off = 0u64;
    let total = buf.len() as u64 / bs.max(1);
    while off < total {
        let at = (off * bs) as usize;
        let Ok(h) = SegmentSummary::decode(&buf[at..]) else {
            break;
        };
        let n = u64::from(h.nblocks);
        if h.magic != SEGSUM_MAGIC || n == 0 || off + n > total {
            break;
        }
        let log = &buf[at..at + (n * bs) as usize];
        out.push((
            off,
            n,
            compute_sumsum(log, seed, h.sumbytes),
            compute_datasum(log, seed),
        ));
        off += n;
    }
    out
}

/// The state of one segment's walk.
struct SegWalk {
    seq: Option<u64>,
    next: Option<u64>,
    /// Flags of the previous log of the segment.
    prev_flags: Option<u16>,
    prev_cno: u64,
}

/// Inodes that data-sync logs after the latest super root write to (the
/// latest checkpoint must have them), with the log that names each.
pub(crate) type DsyncInodes = Vec<(u64, u64, Option<u64>)>;

/// Below this many bytes of used segments, the logs pass reads and checks
/// on one thread.
const INLINE_MAX: u64 = 16 << 20;

impl Ck<'_, '_> {
    /// Walk every used segment's logs, then the logs after the latest
    /// super root; return the inodes of their data-sync logs.
    pub fn logs(&mut self) -> DsyncInodes {
        let mut seqs: HashMap<u64, u64> = HashMap::new();
        let mut plan = Vec::new();
        for seg in 0..self.su.len() as u64 {
            let su = self.su[seg as usize];
            if su.nblocks == 0 || su.is_clean() {
                continue;
            }
            let (start, end) = self.geo.range(SegNum(seg));
            // Segment 0 holds no block when s_first_data_block lies past
            // it (the kernel mounts such a super block).
            let seg_len = (end.0 + 1).saturating_sub(start.0);
            let mut limit = u64::from(su.nblocks);
            if limit > seg_len {
                self.find(
                    Code::SuNblocksRange,
                    format!("segment usage of segment {seg}"),
                    None,
                    format!("su_nblocks {}", su.nblocks),
                    format!("at most the segment's {seg_len} blocks"),
                );
                limit = seg_len;
            }
            plan.push((seg, start.0, end.0, limit));
        }
        // One thread reads the next segment's used blocks while this one
        // checks the current segment's logs: the pass runs at the speed of
        // the reads, not of reads plus checksums.
        // It also computes the checksums of the logs it finds there, so the
        // two cores share the work.
        let (dev, bs, dev_blocks) = (self.dev, u64::from(self.bs), self.dev_blocks);
        let seed = self.fs.sb.crc_seed;
        let reads: Vec<(u64, u64)> = plan.iter().map(|p| (p.1, p.3)).collect();
        let fetch = move |start: u64, n: u64| -> Option<Prefetched> {
            let bytes = n.saturating_mul(bs);
            (bytes <= PREFETCH_MAX && start.saturating_add(n) <= dev_blocks)
                .then(|| {
                    let mut b = vec![0u8; bytes as usize];
                    dev.read_at(start * bs, &mut b).ok().map(|()| b)
                })
                .flatten()
                .map(|b| {
                    let sums = log_sums(&b, bs, seed);
                    (b, sums)
                })
        };
        let mut check = |this: &mut Self, (seg, start, end, limit), got: Option<Prefetched>| {
            if let Some((b, _)) = &got {
                this.report.stats.bytes_read += b.len() as u64;
            }
            let pre = Pre {
                buf: got.as_ref().map(|g| &g.0[..]),
                sums: got.as_ref().map_or(&[][..], |g| &g.1[..]),
            };
            this.segment(seg, start, end, limit, pre, &mut seqs);
        };
        // A small image is checked on this thread: handing each segment to
        // a second thread and back cost more than the reads, and under
        // load the handoff waited on the scheduler.
        let total: u64 = reads.iter().map(|&(_, n)| n.saturating_mul(bs)).sum();
        if total <= self.opts.inline_bytes.unwrap_or(INLINE_MAX) {
            for (&p, &(start, n)) in plan.iter().zip(&reads) {
                if self.stopped() {
                    break;
                }
                check(self, p, fetch(start, n));
            }
            return self.roll_forward_logs();
        }
        crate::sync::std_scope(|sc| {
            let (tx, rx) = crate::sync::std_sync_channel::<Option<Prefetched>>(1);
            sc.spawn(move || {
                for (start, n) in reads {
                    if tx.send(fetch(start, n)).is_err() {
                        return;
                    }
                }
            });
            for &p in &plan {
                let got = rx.recv().ok().flatten();
                if self.stopped() {
                    break;
                }
                check(self, p, got);
            }
        });
        self.roll_forward_logs()
    }

    /// The logs of segment `seg` (blocks `start..=end`) up to `limit`
    /// blocks; `buf` holds those blocks if the prefetch read them.
    fn segment(
        &mut self,
        seg: u64,
        start: u64,
        end: u64,
        limit: u64,
        pre: Pre<'_>,
        seqs: &mut HashMap<u64, u64>,
    ) {
        let total = self.report.stats.used_blocks;
        let mut own = SegOwners {
            owners: vec![0; limit as usize],
            files: vec![0; limit as usize],
            complete: true,
        };
        let mut w = SegWalk {
            seq: None,
            next: None,
            prev_flags: None,
            prev_cno: 0,
        };
        let mut off = 0u64;
        while off < limit {
            let Some(n) = self.one_log(seg, start + off, end, &mut w, &mut own, off, pre) else {
                // Past a broken log nothing is known.
                own.complete = false;
                own.owners.truncate(off as usize);
                own.files.truncate(off as usize);
                break;
            };
            if off + n > limit {
                self.find(
                    Code::SuNblocksLogs,
                    format!("segment usage of segment {seg}"),
                    Some(start + off),
                    format!("su_nblocks {limit} ends inside the {n}-block log at offset {off}"),
                    "su_nblocks at the end of a log",
                );
            }
            off += n;
            self.done += n;
            self.progress("logs", self.done, total);
        }
        if let Some(seq) = w.seq {
            if let Some(other) = seqs.insert(seq, seg) {
                self.find(
                    Code::LogSeqDuplicate,
                    format!("logs of segment {seg}"),
                    Some(start),
                    format!("ss_seq {seq}, also carried by segment {other}"),
                    "a sequence number of its own",
                );
            }
        }
        self.segs.insert(seg, own);
    }

    /// A file system marked clean stops its search at the first super
    /// root (`nilfs_search_super_root` with VALID_FS), so valid logs past it
    /// are not part of it; but every read-write mount clears the mark
    /// (`nilfs_setup_super`) before the writer overwrites them, and a crash
    /// in between makes the next mount search on and recover them, a
    /// file system this one never became. Reported at the first valid log
    /// past the latest super root when that search would change what the
    /// mount shows: a newer super root, or a whole logical segment of
    /// data-sync logs to roll forward (`nilfs_salvage_orphan_logs` needs
    /// both `ri_lsegs_start` and `ri_lsegs_end`), or, past such valid logs,
    /// a log the search cannot read (a damaged `ss_next`), which fails it
    /// and the mount with it. No writer leaves any of these: a
    /// clean unmount's super root is the last log of its sequence. An
    /// unfinished logical segment (a crash during an fdatasync, then a
    /// mount that salvaged nothing and a clean unmount) can stay behind,
    /// and is never replayed.
    fn logs_after_clean(&mut self) {
        if self.fs.sb.state & STATE_VALID_FS == 0 || self.fs.rolled_back {
            return;
        }
        let (visits, searched) =
            crate::recovery::search_super_root_traced(self.dev, &self.fs.sb, false);
        if let Err(e) = &searched {
            if super::device_fault(self.dev, u64::from(self.bs), e) {
                self.report.operational = Some(e.to_string());
                return;
            }
        }
        let sr = self.fs.scan.sr_pseg;
        let Some(at) = visits.iter().position(|v| v.pseg == sr) else {
            return;
        };
        let Some(v) = visits[at + 1..].iter().find(|v| v.verdict.is_ok()) else {
            return;
        };
        let what = match &searched {
            Ok(on) if on.super_root_updated => format!(
                "recover checkpoint {} and any data-sync logs after it",
                on.cno
            ),
            Ok(on) if on.lsegs_start.is_some() && on.lsegs_end.is_some() => {
                "recover its data-sync logs".into()
            }
            Ok(_) => return,
            // Past the valid logs the walk met an unreadable log (a damaged
            // `ss_next` naming a segment past the device): the kernel's
            // search fails with EIO, and the mount with it.
            Err(e) => format!("fail the mount's search for the latest super root ({e})"),
        };
        self.find(
            Code::LogAfterClean,
            format!("log at block {} after the latest super root", v.pseg),
            Some(v.pseg.0),
            format!(
                "a valid log of sequence {} past the latest super root of a file system marked clean: a crash after the next mount, before its first log, would {what}",
                v.seq
            ),
            "nothing recovery would apply past the latest super root of a cleanly unmounted file system",
        );
    }

    /// Valid logs past the point where recovery stops that the writer's
    /// next logs can revive (K20, docs/findings.md). The search after the
    /// latest super root stops at the first log it cannot validate, and
    /// the writer goes on after the super root's log: its segment keeps
    /// its sequence number, the next segment gets the one after. A valid
    /// log of that sequence past the stop is then a log boundary away from
    /// the search: once a later log ends exactly where it begins, the next
    /// recovery (after a crash, or a mount that cleared the clean mark)
    /// replays it, old blocks of an old file system written into whatever
    /// inode has their number now. Linux 6.1 did (the finding's
    /// reproducer). Looked for behind whatever stopped the search, block
    /// by block through the rest of that segment and the next: a torn or
    /// damaged log of the expected sequence, one of a later sequence (a
    /// future the file system lost, fuzz-image-mutate-004), or the plain
    /// end of the logs. A healthy file system has no such log, since every
    /// segment the writer takes gets a sequence number above all it wrote
    /// before; but a crash alone can leave one, when the writes of two
    /// logs sent with no flush between them land out of order, and Linux
    /// 6.1 then revives it at the next crash (K23: the file system no
    /// longer mounts).
    fn logs_revivable(&mut self) {
        let searched;
        let scan = if self.fs.sb.state & STATE_VALID_FS == 0 {
            &self.fs.scan
        } else {
            // A clean file system's search stops at the first super root;
            // the next mount clears the mark and searches on.
            match crate::recovery::search_super_root(self.dev, &self.fs.sb, false) {
                Ok(s) => {
                    searched = s;
                    &searched
                }
                Err(e) if super::device_fault(self.dev, u64::from(self.bs), &e) => {
                    self.report.operational = Some(e.to_string());
                    return;
                }
                // The next mount's search fails: `log-after-clean` looks
                // at what it would read.
                Err(_) => return,
            }
        };
        let Some(stop) = search_stop(scan) else {
            return;
        };
        let Ok(g) = crate::recovery::SegGeometry::new(&self.fs.sb) else {
            return;
        };
        let seg = g.segnum_of(stop.pseg);
        let mut regions = vec![(stop.pseg.0 + 1, g.range(seg).1 .0, stop.seq)];
        // A next segment past the last is the super root log's pointer
        // out of range, which `log-next` reports; there is nothing to read.
        if seg == scan.segnum && scan.nextnum.0 < g.nsegments {
            let (start, end) = g.range(scan.nextnum);
            regions.push((start.0, end.0, crate::format::Seq(stop.seq.0 + 1)));
        }
        let (stop_at, seed) = (stop.pseg.0, self.fs.sb.crc_seed);
        let mut found = Vec::new();
        for (from, to, seq) in regions {
            let mut at = from;
            while at <= to {
                // A header always decodes from a whole block, so an error
                // is the device's: the check cannot decide (a skipped
                // block could hide the log it looks for).
                let (h, verdict) =
                    match crate::recovery::validate_log(self.dev, &g, seed, BlockNr(at), seq) {
                        Ok(v) => v,
                        Err(e) => {
                            self.report.operational = Some(format!("reading block {at}: {e}"));
                            return;
                        }
                    };
                if verdict.is_ok() && at + u64::from(h.nblocks) <= to + 1 {
                    found.push((at, seq));
                    at += u64::from(h.nblocks);
                } else {
                    at += 1;
                }
            }
        }
        for (at, seq) in found {
            self.find(
                Code::LogRevivable,
                format!("log at block {at} past the log at block {stop_at} where recovery stops"),
                Some(at),
                format!(
                    "a valid log of sequence {seq}, the sequence the writer gives its segment next: a later log that ends at block {at} makes the next recovery replay it"
                ),
                "no valid log of the writer's next sequence past the point where recovery stops",
            );
        }
    }

    /// Check the log at `pseg` of segment `seg` (whose last block is
    /// `seg_end`); record its payload blocks at `off` in `own`. The log's
    /// size if the walk can go on past it.
    #[allow(clippy::too_many_arguments)]
    fn one_log(
        &mut self,
        seg: u64,
        pseg: u64,
        seg_end: u64,
        w: &mut SegWalk,
        own: &mut SegOwners,
        off: u64,
        pre: Pre<'_>,
    ) -> Option<u64> {
        let buf = pre.buf;
        let bs = u64::from(self.bs);
        let here = || format!("log at block {pseg} of segment {seg}");
        let cut = |n: u64| {
            let from = (off * bs) as usize;
            buf.and_then(|b| b.get(from..from.checked_add((n * bs) as usize)?))
        };
        let first = match cut(1) {
            Some(b) => b.to_vec(),
            None => self.read(pseg, 1)?,
        };
        let h = SegmentSummary::decode(&first).ok()?;
        if h.magic != SEGSUM_MAGIC {
            self.find(
                Code::LogMagic,
                here(),
                Some(pseg),
                format!("ss_magic {:#010x}", h.magic),
                "0x1eaffa11 (a log where su_nblocks counts one)",
            );
            return None;
        }
        let n = u64::from(h.nblocks);
        if n == 0 || pseg + n > seg_end + 1 {
            self.find(
                Code::LogSize,
                here(),
                Some(pseg),
                format!("ss_nblocks {n}"),
                format!("1..={} (the rest of the segment)", seg_end + 1 - pseg),
            );
            return None;
        }
        match w.seq {
            None => w.seq = Some(h.seq.0),
            Some(s) if s != h.seq.0 => self.find(
                Code::LogSeq,
                here(),
                Some(pseg),
                format!("ss_seq {}", h.seq),
                format!("the segment's ss_seq {s}"),
            ),
            Some(_) => {}
        }
        let owned;
        let log: &[u8] = match cut(n) {
            Some(b) => b,
            None => {
                owned = self.read(pseg, n)?;
                &owned
            }
        };
        self.report.stats.logs += 1;
        let seed = self.fs.sb.crc_seed;
        let (sumsum, datasum) = match pre.sums.iter().find(|s| s.0 == off && s.1 == n) {
            Some(&(_, _, a, b)) => (a, b),
            None => (
                compute_sumsum(log, seed, h.sumbytes),
                compute_datasum(log, seed),
            ),
        };
        if u64::from(h.sumbytes) <= n * bs && sumsum != h.sumsum {
            self.find(
                Code::LogSumsum,
                here(),
                Some(pseg),
                format!("ss_sumsum {:#010x}", h.sumsum),
                format!("{sumsum:#010x}"),
            );
        }
        if datasum != h.datasum {
            self.find(
                Code::LogDatasum,
                here(),
                Some(pseg),
                format!("ss_datasum {:#010x}", h.datasum),
                format!("{datasum:#010x}"),
            );
        }
        if h.has_super_root() {
            let sr = &log[((n - 1) * bs) as usize..];
            if let Err(e) = super_root::check_valid(sr, self.bs, self.fs.sb.crc_seed) {
                self.find(
                    Code::LogSuperRoot,
                    format!("super root of the {}", here()),
                    Some(pseg + n - 1),
                    detail(&e),
                    "0 < sr_bytes <= block size and a matching sr_sum",
                );
            } else {
                let want = super_root::super_root_bytes(self.fs.sb.inode_size);
                let got = u16::from_le_bytes([sr[4], sr[5]]);
                if got != want {
                    self.find(
                        Code::LogSrBytes,
                        format!("super root of the {}", here()),
                        Some(pseg + n - 1),
                        format!("sr_bytes {got}"),
                        format!("{want}, for {}-byte inodes", self.fs.sb.inode_size),
                    );
                }
            }
        }
        if h.flags & !SS_KNOWN != 0 {
            self.find(
                Code::LogFlags,
                here(),
                Some(pseg),
                format!("ss_flags {:#x}", h.flags),
                format!("only bits of {SS_KNOWN:#x}"),
            );
        }
        self.check_next(seg, pseg, &here, h.next.0, w);
        self.check_lseg(&here, pseg, h.flags, h.cno.0, w);
        match Summary::decode(log, self.bs) {
            Err(e) => {
                self.find(
                    Code::LogSummary,
                    here(),
                    Some(pseg),
                    detail(&e),
                    "records inside ss_sumbytes and blocks inside the log",
                );
                own.complete = false;
            }
            Ok(s) => {
                self.check_records(&here, pseg, &s);
                // Only blocks inside `su_nblocks` are kept: those of a
                // log that runs past it are dropped with the rest of the
                // segment's tail (`su-nblocks-logs` reports the log).
                for b in s.block_entries(self.bs) {
                    let i = (off + b.index) as usize;
                    if let Some(slot) = own.owners.get_mut(i) {
                        *slot = owner_of(b.binfo).pack();
                        own.files[i] = file_of(b.ino.0, b.binfo);
                    }
                }
            }
        }
        Some(n)
    }

    fn check_next(&mut self, seg: u64, pseg: u64, here: Name<'_>, next: u64, w: &mut SegWalk) {
        let nseg = self.geo.segnum_of(BlockNr(next));
        let start_ok = nseg.0 < self.geo.nsegments && self.geo.range(nseg).0 .0 == next;
        if !start_ok || nseg.0 == seg {
            self.find(
                Code::LogNext,
                here(),
                Some(pseg),
                format!("ss_next {next}"),
                "the first block of another segment",
            );
        } else if let Some(prev) = w.next.filter(|&p| p != next) {
            self.find(
                Code::LogNext,
                here(),
                Some(pseg),
                format!("ss_next {next}"),
                format!("{prev}, as the segment's earlier logs"),
            );
        }
        w.next.get_or_insert(next);
    }

    fn check_lseg(&mut self, here: Name<'_>, pseg: u64, flags: u16, cno: u64, w: &mut SegWalk) {
        let bad = |found: String, want: &str| (found, want.to_string());
        let mut why = None;
        if flags & SS_SR != 0 && flags & SS_LOGEND == 0 {
            why = Some(bad(
                format!("ss_flags {flags:#x}: a super root without LOGEND"),
                "LOGEND with SR",
            ));
        } else if let Some(prev) = w.prev_flags {
            let open = prev & SS_LOGEND == 0;
            if open && flags & SS_LOGBGN != 0 {
                why = Some(bad(
                    format!(
                        "ss_flags {flags:#x}: LOGBGN while the previous logical segment is open"
                    ),
                    "LOGEND before the next LOGBGN",
                ));
            } else if !open && flags & SS_LOGBGN == 0 {
                why = Some(bad(
                    format!("ss_flags {flags:#x}: no LOGBGN after a LOGEND"),
                    "a new logical segment to begin with LOGBGN",
                ));
            }
        }
        if let Some((found, want)) = why {
            self.find(Code::LogLogicalSegment, here(), Some(pseg), found, want);
        }
        if w.prev_flags.is_some() && cno < w.prev_cno {
            self.find(
                Code::LogCno,
                here(),
                Some(pseg),
                format!("ss_cno {cno}"),
                format!("at least {}, the previous log's", w.prev_cno),
            );
        }
        w.prev_flags = Some(flags);
        w.prev_cno = cno;
    }

    fn check_records(&mut self, here: Name<'_>, pseg: u64, s: &Summary) {
        let first = u64::from(self.fs.sb.first_ino);
        for (i, f) in s.files.iter().enumerate() {
            let i_no = f.finfo.ino.0;
            let valid = i_no >= first || matches!(i_no, 2..=7 | 10);
            if !valid {
                self.find(
                    Code::LogBinfo,
                    format!("{}, finfo {i}", here()),
                    Some(pseg),
                    format!("fi_ino {i_no}"),
                    "a valid inode number (NILFS_VALID_INODE)",
                );
            }
            if f.finfo.ino != ino::DAT {
                if let Some(k) = f.binfos.iter().position(|b| vblocknr(b) == Some(0)) {
                    self.find(
                        Code::LogBinfo,
                        format!("{}, finfo {i}, binfo {k}", here()),
                        Some(pseg),
                        "virtual block number 0",
                        "a nonzero virtual block number",
                    );
                }
            }
        }
    }

    /// The logs after the latest super root that the search validated:
    /// check their summaries and record their blocks; data-sync logs must
    /// hold data blocks only. Note a pending roll-forward.
    fn roll_forward_logs(&mut self) -> DsyncInodes {
        self.logs_after_clean();
        self.logs_revivable();
        let scan = &self.fs.scan;
        let Some(sr_at) = scan.visits.iter().rposition(|v| v.super_root_cno.is_some()) else {
            return Vec::new();
        };
        let after: Vec<(u64, u64)> = scan.visits[sr_at + 1..]
            .iter()
            .filter(|v| v.verdict.is_ok())
            .map(|v| (v.pseg.0, v.header.map_or(0, |h| u64::from(h.nblocks))))
            .collect();
        if let Some(v) = broken_tail(scan) {
            let why = v.verdict.clone().err().unwrap_or_default();
            self.find(
                Code::LogTail,
                format!("log at block {} after the latest super root", v.pseg),
                Some(v.pseg.0),
                format!("{why}: recovery will stop here"),
                "a whole log, or none",
            );
        }
        let needs = self.fs.sb.state & STATE_VALID_FS == 0;
        if let (true, Some((start, _)), Some(end)) = (needs, scan.lsegs_start, scan.lsegs_end) {
            let logs = after
                .iter()
                .filter(|(p, _)| *p >= start.0 && *p <= end.0)
                .count()
                .max(1);
            self.report.roll_forward = Some(RollForward { start, end, logs });
        }
        let mut dsync = Vec::new();
        for (pseg, n) in after {
            let Some(log) = self.read(pseg, n) else { break };
            let here = format!("log at block {pseg} after the latest super root");
            let Ok(h) = SegmentSummary::decode(&log) else {
                continue;
            };
            if compute_sumsum(&log, self.fs.sb.crc_seed, h.sumbytes) != h.sumsum {
                self.find(
                    Code::LogSumsum,
                    here.clone(),
                    Some(pseg),
                    format!("ss_sumsum {:#010x}", h.sumsum),
                    "the CRC of the summary",
                );
            }
            let s = match Summary::decode(&log, self.bs) {
                Ok(s) => s,
                Err(e) => {
                    self.find(
                        Code::LogSummary,
                        here,
                        Some(pseg),
                        detail(&e),
                        "a valid summary",
                    );
                    continue;
                }
            };
            let seg = self.geo.segnum_of(BlockNr(pseg)).0;
            let start = self.geo.range(SegNum(seg)).0 .0;
            let own = self.segs.entry(seg).or_default();
            for b in s.block_entries(self.bs) {
                let i = (pseg - start + b.index) as usize;
                if own.owners.len() <= i {
                    own.owners.resize(i + 1, 0);
                    own.files.resize(i + 1, 0);
                }
                own.owners[i] = owner_of(b.binfo).pack();
                own.files[i] = file_of(b.ino.0, b.binfo);
            }
            if h.flags & SS_SYNDT != 0 {
                for f in &s.files {
                    if f.finfo.ndatablk != f.finfo.nblocks || f.finfo.is_dat() {
                        self.find(
                            Code::LogDsync,
                            here.clone(),
                            Some(pseg),
                            format!(
                                "finfo of inode {} with {} blocks, {} of them data",
                                f.finfo.ino, f.finfo.nblocks, f.finfo.ndatablk
                            ),
                            "data blocks of a regular inode only",
                        );
                    }
                    let last = f
                        .binfos
                        .iter()
                        .filter_map(|b| match b {
                            Binfo::DataV { blkoff, .. } => Some(blkoff.0),
                            _ => None,
                        })
                        .max();
                    dsync.push((f.finfo.ino.0, pseg, last));
                }
            }
        }
        dsync
    }
}

fn vblocknr(b: &Binfo) -> Option<u64> {
    match b {
        Binfo::DataV { vblocknr, .. } | Binfo::NodeV { vblocknr } => Some(vblocknr.0),
        _ => None,
    }
}

/// The [`file_tag`] of a virtual block's finfo and binfo (0 for the
/// DAT's own blocks).
fn file_of(ino: u64, b: &Binfo) -> u32 {
    match *b {
        Binfo::DataV { blkoff, .. } => file_tag(ino, Some(blkoff.0)),
        Binfo::NodeV { .. } => file_tag(ino, None),
        _ => 0,
    }
}

fn owner_of(b: &Binfo) -> Owner {
    match *b {
        Binfo::DataV { vblocknr, .. } | Binfo::NodeV { vblocknr } => Owner::Virtual(vblocknr.0),
        Binfo::DataDat { blkoff } => Owner::DatData(blkoff.0),
        Binfo::NodeDat { blkoff, .. } => Owner::DatNode(blkoff.0),
    }
}

/// Where the search after the latest super root stops: the first log
/// after it that fails validation, whatever the reason.
fn search_stop(scan: &crate::recovery::ScanResult) -> Option<&crate::recovery::LogVisit> {
    let sr_at = scan
        .visits
        .iter()
        .rposition(|v| v.super_root_cno.is_some())?;
    scan.visits[sr_at + 1..].iter().find(|v| v.verdict.is_err())
}

/// Where the search after the latest super root stopped, when that is a
/// torn or damaged write: a log of the right magic and sequence that fails
/// validation, not the end of the logs (`nilfs_search_super_root` stops at
/// it all the same).
fn broken_tail(scan: &crate::recovery::ScanResult) -> Option<&crate::recovery::LogVisit> {
    let v = search_stop(scan)?;
    v.header
        .is_some_and(|h| h.magic == SEGSUM_MAGIC && h.seq == v.seq)
        .then_some(v)
}
