//! The cleaner's policy, as nilfs-utils runs it in user space: which
//! segments to clean (`nilfs_cleanerd_select_segments`, timestamp policy),
//! which of their blocks are still live and which checkpoints and virtual
//! numbers die with them (`nilfs_xreclaim_segment` in lib/gc.c), and the
//! `nilfs-clean` loop. Everything goes through the mounted file system's
//! ioctl-like reads ([`Fs::suinfo`], [`Fs::vinfo`], [`Fs::bdescs`], ...) and
//! the device, so this module could drive another implementation.
//!
//! Differences from nilfs-utils, on purpose:
//! - the protection period is measured on the file system's injected
//!   clock, and `protcno` is the oldest checkpoint made within it (the
//!   library's `nilfs_cnormap_track_back` estimates the same from a
//!   history of monotonic times);
//! - no `min_reclaimable_blks` deferral (`NILFS_IOCTL_SET_SUINFO`): every
//!   selected segment is cleaned.

use crate::format::segsum::SegmentSummary;
use crate::format::sufile::SegmentUsage;
use crate::format::{BlockNr, Cno, Ino, SegNum, Seq, VBlockNr};
use crate::fs::Fs;
use crate::gc::{move_blocks, Bdesc, CleanArgs, Period, Vdesc};
use crate::psegment::{read_segment_logs, DumpBinfo, SegmentGeometry};
use crate::{Error, Result};

/// `NILFS_CNO_MAX`.
pub const CNO_MAX: Cno = Cno(u64::MAX);

/// `struct nilfs_reclaim_params`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReclaimParams {
    /// Segments whose first log has this sequence number or later are
    /// protected (`ss_prot_seq`).
    pub protseq: Seq,
    /// Blocks alive at this checkpoint or later are live
    /// ([`CNO_MAX`]: only the latest tree and snapshots count).
    pub protcno: Cno,
}

/// `struct nilfs_reclaim_stat`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReclaimStat {
    pub cleaned_segs: u64,
    pub protected_segs: u64,
    pub live_vblks: u64,
    pub defunct_vblks: u64,
    pub freed_vblks: u64,
    pub live_pblks: u64,
    pub defunct_pblks: u64,
}

/// `nilfs_suinfo_reclaimable`: dirty, not the log writer's, not in error.
pub fn reclaimable(su: &SegmentUsage) -> bool {
    su.is_dirty() && !su.is_active() && !su.is_error()
}

/// A segment's bytes as libnilfs's `nilfs_get_segment` reads them, and
/// `ss_seq` of its first summary (taken whether the log is valid or not).
fn read_segment(fs: &Fs<'_>, segnum: SegNum) -> Result<(Vec<u8>, Seq)> {
    let geo = fs.seg_geometry();
    let (bs, bps) = (u64::from(geo.block_size), geo.blocks_per_segment);
    let mut bytes = vec![0u8; (bps * bs) as usize];
    fs.device().read_at(segnum.0 * bps * bs, &mut bytes)?;
    let skip = if segnum.0 == 0 {
        geo.first_data_block.min(bps)
    } else {
        0
    };
    let first = (skip * bs) as usize;
    // libnilfs's nilfs_get_segment_seqnum reads the summary at block
    // s_first_data_block of segment 0 unchecked, past the segment when that
    // block is not in it. The kernel mounts such a super block (neither
    // nilfs_store_disk_layout nor the log scan checks s_first_data_block
    // against s_blocks_per_segment), so the refusal is here, where a summary
    // must be read: a typed corruption naming the super block field.
    let Some(header) = bytes.get(first..first + SegmentSummary::SIZE) else {
        return Err(Error::corrupt(
            "super block",
            format!(
                "s_first_data_block {} leaves segment {segnum} of {bps} blocks no room for a segment summary",
                geo.first_data_block
            ),
        ));
    };
    let seq = SegmentSummary::decode(header)?.seq;
    Ok((bytes, seq))
}

/// `nilfs_acc_blocks_segment`: every block of the segment's valid logs
/// within its first `nblocks` (`su_nblocks`) blocks, walked with libnilfs's
/// iterators (the walk dumpseg uses, [`read_segment_logs`]). A log whose
/// file records end before `ss_nfinfo` is an error, as
/// `nilfs_file_is_error` makes it in nilfs-utils.
fn acc_blocks_segment(
    fs: &Fs<'_>,
    segnum: SegNum,
    bytes: &[u8],
    nblocks: u64,
    vdescs: &mut Vec<Vdesc>,
    bdescs: &mut Vec<Bdesc>,
) -> Result<()> {
    let geo = fs.seg_geometry();
    let walk_geo = SegmentGeometry {
        block_size: geo.block_size,
        blocks_per_segment: geo.blocks_per_segment as u32,
        first_data_block: geo.first_data_block,
        crc_seed: fs.crc_seed(),
    };
    let no_period = Period {
        start: Cno(0),
        end: Cno(0),
    };
    for log in read_segment_logs(bytes, segnum.0, &walk_geo, nblocks).logs {
        if log.files.len() < log.nfinfo as usize {
            return Err(Error::corrupt(
                "segment summary",
                format!(
                    "log at {}: file record {} of {} is broken",
                    log.blocknr,
                    log.files.len(),
                    log.nfinfo
                ),
            ));
        }
        for file in &log.files {
            for b in &file.blocks {
                let blocknr = BlockNr(b.blocknr);
                let vd = |vblocknr: u64, offset: u64, node: bool| Vdesc {
                    ino: Ino(file.ino),
                    cno: Cno(file.cno),
                    vblocknr: VBlockNr(vblocknr),
                    period: no_period,
                    offset,
                    blocknr,
                    node,
                };
                let bd = |offset: u64, level: u8| Bdesc {
                    ino: Ino(file.ino),
                    oblocknr: blocknr,
                    blocknr: BlockNr(0),
                    offset,
                    level,
                };
                match b.binfo {
                    DumpBinfo::Data { vblocknr, blkoff } => {
                        vdescs.push(vd(vblocknr, blkoff, false))
                    }
                    DumpBinfo::Node { vblocknr } => vdescs.push(vd(vblocknr, 0, true)),
                    DumpBinfo::DatData { blkoff } => bdescs.push(bd(blkoff, 0)),
                    DumpBinfo::DatNode { blkoff, level } => bdescs.push(bd(blkoff, level)),
                }
            }
        }
    }
    Ok(())
}

/// `nilfs_vdesc_is_live`.
pub fn vdesc_is_live(vd: &Vdesc, protect: Cno, snapshots: &[Cno]) -> bool {
    let p = vd.period;
    if vd.cno == Cno(0) {
        // The cpfile and sufile: only the current version is live.
        return p.end == CNO_MAX;
    }
    if p.end == vd.cno {
        // Overwritten within the checkpoint that wrote it (an fdatasync
        // log, say): never part of any checkpoint.
        return false;
    }
    if p.end == CNO_MAX || p.end > protect {
        return true;
    }
    // Alive in some snapshot: a snapshot number in [start, end).
    let i = snapshots.partition_point(|&s| s < p.start);
    snapshots.get(i).is_some_and(|&s| s < p.end)
}

/// `nilfs_unify_period`: sort by start and merge periods that overlap or
/// touch.
fn unify_periods(periods: &mut Vec<Period>) {
    periods.sort_by_key(|p| p.start);
    let mut out: Vec<Period> = Vec::with_capacity(periods.len());
    for p in periods.drain(..) {
        match out.last_mut() {
            Some(last) if p.start <= last.end => last.end = last.end.max(p.end),
            _ => out.push(p),
        }
    }
    *periods = out;
}

/// The part of `nilfs_xreclaim_segment` before the ioctl: drop segments
/// that are no longer reclaimable or are protected by `protseq`, collect
/// their blocks, judge them, and build the request. The returned stat
/// counts what the request would do.
pub fn plan_reclaim(
    fs: &mut Fs<'_>,
    segnums: &[SegNum],
    params: ReclaimParams,
) -> Result<(CleanArgs, ReclaimStat)> {
    let mut vdescs = Vec::new();
    let mut bdescs = Vec::new();
    let mut chosen = Vec::new();
    for &s in segnums {
        let su = fs.suinfo(s, 1)?.pop().unwrap_or_default();
        if !reclaimable(&su) {
            continue;
        }
        if su.nblocks == 0 {
            // "Scrapped": nothing valid was written; reclaim it as is.
            chosen.push(s);
            continue;
        }
        let (bytes, seq) = read_segment(fs, s)?;
        if seq.0.wrapping_sub(params.protseq.0) as i64 >= 0 {
            continue; // cnt64_ge(seq, protseq)
        }
        acc_blocks_segment(
            fs,
            s,
            &bytes,
            u64::from(su.nblocks),
            &mut vdescs,
            &mut bdescs,
        )?;
        chosen.push(s);
    }
    let mut stat = ReclaimStat {
        cleaned_segs: chosen.len() as u64,
        protected_segs: (segnums.len() - chosen.len()) as u64,
        ..ReclaimStat::default()
    };
    if chosen.is_empty() {
        return Ok((CleanArgs::default(), stat));
    }

    // nilfs_get_vdesc and nilfs_toss_vdescs.
    vdescs.sort_by_key(|v| v.vblocknr);
    let vs: Vec<_> = vdescs.iter().map(|v| v.vblocknr).collect();
    for (vd, e) in vdescs.iter_mut().zip(fs.vinfo(&vs)?) {
        vd.period = Period {
            start: e.start,
            end: e.end,
        };
    }
    let snapshots = fs.snapshot_cnos()?;
    let total_v = vdescs.len() as u64;
    let mut periods = Vec::new();
    let mut vblocknrs = Vec::new();
    vdescs.retain(|vd| {
        if vdesc_is_live(vd, params.protcno, &snapshots) {
            return true;
        }
        vblocknrs.push(vd.vblocknr);
        if vd.cno != Cno(0) {
            periods.push(vd.period);
        }
        false
    });
    stat.live_vblks = vdescs.len() as u64;
    stat.defunct_vblks = total_v - stat.live_vblks;
    stat.freed_vblks = vblocknrs.len() as u64;
    vdescs.sort_by_key(|v| v.blocknr);
    unify_periods(&mut periods);

    // nilfs_get_bdesc and nilfs_toss_bdescs.
    bdescs.sort_by_key(|b| (b.ino, b.level, b.offset));
    fs.bdescs(&mut bdescs)?;
    let total_p = bdescs.len() as u64;
    bdescs.retain(|b| b.oblocknr == b.blocknr);
    stat.live_pblks = bdescs.len() as u64;
    stat.defunct_pblks = total_p - stat.live_pblks;

    Ok((
        CleanArgs {
            vdescs,
            periods,
            vblocknrs,
            bdescs,
            segnums: chosen,
        },
        stat,
    ))
}

/// `nilfs_xreclaim_segment` to the end: plan, read the live blocks
/// ([`move_blocks`], outside any lock), and clean.
pub fn reclaim(fs: &mut Fs<'_>, segnums: &[SegNum], params: ReclaimParams) -> Result<ReclaimStat> {
    let (args, stat) = plan_reclaim(fs, segnums, params)?;
    if args.segnums.is_empty() {
        return Ok(stat);
    }
    let moved = move_blocks(fs.device(), fs.seg_geometry().block_size, &args.vdescs)?;
    fs.clean_segments(&args, moved)?;
    Ok(stat)
}

/// `nilfs_cleanerd_select_segments` with the timestamp policy: reclaimable
/// segments last modified before the protection period (or in the
/// future), older than the last non-GC construction, oldest first, at
/// most `max`.
pub fn select_segments(fs: &mut Fs<'_>, protection_s: u64, max: usize) -> Result<Vec<SegNum>> {
    let stat = fs.sustat()?;
    let max = max.min(stat.ncleansegs as usize);
    let now = fs.now() as i64;
    let prottime = now - protection_s as i64;
    let thr = stat.nongc_ctime as i64;
    let mut cands: Vec<(i64, SegNum)> = Vec::new();
    let mut from = 0u64;
    while from < stat.nsegs {
        let batch = fs.suinfo(SegNum(from), 512)?;
        for (i, su) in batch.iter().enumerate() {
            if !reclaimable(su) {
                continue;
            }
            let lastmod = su.lastmod as i64;
            let imp = if lastmod <= now { lastmod } else { thr - 1 };
            if imp < thr && (lastmod < prottime || lastmod > now) {
                cands.push((imp, SegNum(from + i as u64)));
            }
        }
        from += batch.len().max(1) as u64;
    }
    cands.sort();
    Ok(cands.into_iter().take(max).map(|(_, s)| s).collect())
}

/// The checkpoint the protection period starts at: the oldest checkpoint
/// made at or after `now - protection_s`; [`CNO_MAX`] if none or for a
/// zero period (`nilfs_cnormap_track_back`).
pub fn protcno(fs: &mut Fs<'_>, protection_s: u64) -> Result<Cno> {
    if protection_s == 0 {
        return Ok(CNO_MAX);
    }
    let since = fs.now().saturating_sub(protection_s);
    Ok(fs
        .lscp()?
        .iter()
        .find(|c| c.create >= since)
        .map_or(CNO_MAX, |c| c.cno))
}

/// What one `nilfs-clean` run did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CleanReport {
    /// Cleaning steps (GC constructions) made.
    pub steps: u64,
    /// Segments freed.
    pub cleaned_segs: u64,
    /// Live blocks moved.
    pub moved_blocks: u64,
    /// Virtual block numbers freed.
    pub freed_vblks: u64,
}

/// `nilfs-clean -p PROTECTION_S` with `nsegments_per_clean` segments per
/// step: clean until no segment is selectable or a step frees nothing.
pub fn clean(fs: &mut Fs<'_>, protection_s: u64, nsegs_per_step: usize) -> Result<CleanReport> {
    // The cleaner works only on a writable mount: nilfs_ioctl_clean_segments
    // (like every ioctl that changes the file system) starts with
    // mnt_want_write_file, and the model answers EROFS whatever the
    // segments would have been.
    if fs.is_read_only() {
        return Err(crate::Error::errno(
            crate::Errno::EROFS,
            "the cleaner needs a read-write mount",
        ));
    }
    let mut report = CleanReport::default();
    loop {
        let segs = select_segments(fs, protection_s, nsegs_per_step)?;
        if segs.is_empty() {
            return Ok(report);
        }
        let params = ReclaimParams {
            protseq: fs.sustat()?.prot_seq,
            protcno: protcno(fs, protection_s)?,
        };
        let stat = reclaim(fs, &segs, params)?;
        if stat.cleaned_segs == 0 {
            return Ok(report);
        }
        report.steps += 1;
        report.cleaned_segs += stat.cleaned_segs;
        report.moved_blocks += stat.live_vblks + stat.live_pblks;
        report.freed_vblks += stat.freed_vblks;
    }
}
