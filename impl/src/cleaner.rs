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

use crate::format::segsum::{compute_sumsum, Binfo, SegmentSummary, Summary};
use crate::format::sufile::SegmentUsage;
use crate::format::SEGSUM_MAGIC;
use crate::format::{BlockNr, Cno, SegNum, Seq};
use crate::fs::Fs;
use crate::gc::{move_blocks, Bdesc, CleanArgs, Period, Vdesc};
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

/// The blocks of one segment's valid logs, as `nilfs_acc_blocks_segment`
/// collects them: up to `nblocks` (`su_nblocks`) blocks from the segment's
/// start, log by log, stopping at the first summary that is not a log
/// (`nilfs_psegment_is_valid`: magic, size, `ss_sumsum`). A summary that
/// passes those but is malformed is an error, as in nilfs-utils.
fn acc_blocks_segment(
    fs: &Fs<'_>,
    segnum: SegNum,
    nblocks: u64,
    vdescs: &mut Vec<Vdesc>,
    bdescs: &mut Vec<Bdesc>,
) -> Result<()> {
    let geo = fs.seg_geometry();
    let bs = geo.block_size;
    let (start, end) = geo.range(segnum);
    let seg_nblocks = end.0 + 1 - start.0;
    let mut blkcnt = nblocks.min(seg_nblocks);
    let mut pseg = start.0;
    let dev = fs.device();
    while blkcnt >= u64::from(crate::format::PSEG_MIN_BLOCKS) {
        let first = crate::device::read_block(dev, bs, pseg)?;
        let hdr = SegmentSummary::decode(&first)?;
        if hdr.magic != SEGSUM_MAGIC {
            break;
        }
        let limit = (end.0 + 1 - pseg) * u64::from(bs);
        if hdr.sumbytes < 8 || u64::from(hdr.sumbytes) >= limit {
            break;
        }
        let nsum = u64::from(hdr.sumbytes).div_ceil(u64::from(bs));
        let mut sum = first;
        for b in 1..nsum {
            sum.extend(crate::device::read_block(dev, bs, pseg + b)?);
        }
        if compute_sumsum(&sum, fs.crc_seed(), hdr.sumbytes) != hdr.sumsum {
            break;
        }
        if pseg + u64::from(hdr.nblocks) > end.0 + 1 {
            return Err(Error::corrupt(
                "segment summary",
                format!(
                    "log at {pseg} runs past its segment ({} blocks)",
                    hdr.nblocks
                ),
            ));
        }
        let summary = Summary::decode(&sum, bs).map_err(|e| e.at_block(pseg))?;
        for e in summary.block_entries(bs) {
            let blocknr = BlockNr(pseg + e.index);
            let finfo = &summary.files[e.file].finfo;
            match *e.binfo {
                Binfo::DataDat { blkoff } => bdescs.push(Bdesc {
                    ino: e.ino,
                    oblocknr: blocknr,
                    blocknr: BlockNr(0),
                    offset: blkoff.0,
                    level: 0,
                }),
                Binfo::NodeDat { blkoff, level } => bdescs.push(Bdesc {
                    ino: e.ino,
                    oblocknr: blocknr,
                    blocknr: BlockNr(0),
                    offset: blkoff.0,
                    level,
                }),
                Binfo::DataV { vblocknr, blkoff } => vdescs.push(Vdesc {
                    ino: e.ino,
                    cno: finfo.cno,
                    vblocknr,
                    period: Period {
                        start: Cno(0),
                        end: Cno(0),
                    },
                    offset: blkoff.0,
                    blocknr,
                    node: false,
                }),
                Binfo::NodeV { vblocknr } => vdescs.push(Vdesc {
                    ino: e.ino,
                    cno: finfo.cno,
                    vblocknr,
                    period: Period {
                        start: Cno(0),
                        end: Cno(0),
                    },
                    offset: 0,
                    blocknr,
                    node: true,
                }),
            }
        }
        let n = u64::from(hdr.nblocks);
        blkcnt = blkcnt.saturating_sub(n);
        pseg += n;
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
        let geo = fs.seg_geometry();
        let first = crate::device::read_block(fs.device(), geo.block_size, geo.range(s).0 .0)?;
        let seq = Seq(u64::from_le_bytes(
            first[16..24].try_into().expect("8 bytes"),
        ));
        if seq.0.wrapping_sub(params.protseq.0) as i64 >= 0 {
            continue; // cnt64_ge(seq, protseq)
        }
        acc_blocks_segment(fs, s, u64::from(su.nblocks), &mut vdescs, &mut bdescs)?;
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
