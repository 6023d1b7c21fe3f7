//! Mount-time discovery: which super block to trust, and where the latest
//! super root is (the kernel's `nilfs_load_super_block` in the_nilfs.c and
//! `nilfs_search_super_root` in recovery.c).
//!
//! Everything here is read-only and reports what it saw (each super block
//! copy and why it was or was not chosen, each log the scan visited), so the
//! inspector can explain a mount decision and tests can check it. Roll-forward
//! of data-only logs belongs to the write path.

use crate::device::{read_block, read_blocks_into, BlockDevice};
use crate::format::segsum::{compute_datasum, SegmentSummary, SS_LOGBGN, SS_LOGEND, SS_SR};
use crate::format::superblock::{self, SuperBlock};
use crate::format::{BlockNr, Cno, SegNum, Seq, SB_OFFSET_BYTES};
use crate::{Error, Result};

/// Moved to [`crate::format::SegGeometry`]; kept here for old paths.
pub use crate::format::SegGeometry;

/// One of the two super block copies as found on the device.
#[derive(Clone, Debug)]
pub struct SbCopy {
    /// Byte offset it was read from.
    pub offset: u64,
    /// The decoded fields, if 1024 bytes could be read there.
    pub sb: Option<SuperBlock>,
    /// `Ok` if the kernel's `nilfs_valid_sb` accepts it, else why not.
    pub valid: std::result::Result<(), String>,
}

/// The outcome of `nilfs_load_super_block`.
#[derive(Clone, Debug)]
pub struct SbChoice {
    /// The primary (offset 1024) and secondary copies; the secondary is
    /// `None` when the device is too small to have one.
    pub copies: [Option<SbCopy>; 2],
    /// Index into `copies` of the copy in use.
    pub chosen: usize,
    /// Why that copy was chosen, in words.
    pub reason: String,
    /// `ns_prot_seq` as `nilfs_load_super_block` sets it: the secondary's
    /// `s_last_seq` when that copy is valid, else the primary's. GC
    /// protects the segments with newer sequence numbers.
    pub prot_seq: Seq,
}

impl SbChoice {
    /// The super block in use.
    pub fn sb(&self) -> &SuperBlock {
        self.copies[self.chosen]
            .as_ref()
            .and_then(|c| c.sb.as_ref())
            .expect("the chosen copy is valid")
    }

    /// The other copy, if it is valid (the kernel's fallback for a failed scan).
    pub fn spare(&self) -> Option<&SuperBlock> {
        let other = self.copies[1 - self.chosen].as_ref()?;
        other.valid.as_ref().ok()?;
        other.sb.as_ref()
    }
}

fn read_copy(dev: &dyn BlockDevice, offset: u64) -> SbCopy {
    let mut raw = vec![0u8; SuperBlock::SIZE];
    if let Err(e) = dev.read_at(offset, &mut raw) {
        return SbCopy {
            offset,
            sb: None,
            valid: Err(e.to_string()),
        };
    }
    match SuperBlock::decode(&raw) {
        Ok(sb) => {
            let valid = sb.check_valid().map_err(|e| e.to_string());
            SbCopy {
                offset,
                sb: Some(sb),
                valid,
            }
        }
        Err(e) => SbCopy {
            offset,
            sb: None,
            valid: Err(e.to_string()),
        },
    }
}

/// Choose the super block as `nilfs_load_super_block` does.
pub fn load_super_block(dev: &dyn BlockDevice) -> Result<SbChoice> {
    let size = dev.size_bytes();
    // nilfs_load_super_block refuses devices too small for a minimal filesystem.
    if size < 16 * 1024 + 4096 {
        return Err(Error::corrupt(
            "super block",
            format!("device too small: {size} bytes"),
        ));
    }
    let primary = read_copy(dev, SB_OFFSET_BYTES);
    let secondary = superblock::sb2_offset_bytes(size).map(|off| read_copy(dev, off));
    let valid = [
        primary.valid.is_ok(),
        secondary.as_ref().is_some_and(|c| c.valid.is_ok()),
    ];
    let cno = |c: &SbCopy| c.sb.as_ref().map_or(0, |s| s.last_cno.0);
    let mut swp = valid[1] && (!valid[0] || secondary.as_ref().map_or(0, cno) > cno(&primary));
    let mut reason = if swp {
        if valid[0] {
            "secondary has the newer log cursor (s_last_cno greater than the primary's)".to_string()
        } else {
            "primary is invalid; falling back to the secondary".to_string()
        }
    } else if valid[0] {
        if valid[1] {
            "primary's s_last_cno is not older than the secondary's".to_string()
        } else {
            "primary is valid; the secondary is not".to_string()
        }
    } else {
        String::new()
    };
    let mut copies = [Some(primary), secondary];
    let mut valid = valid;
    // A secondary copy that the chosen super block places inside the segment
    // area is stale data, not a super block (nilfs_sb2_bad_offset).
    if valid[usize::from(swp)] {
        let chosen = copies[usize::from(swp)]
            .as_ref()
            .and_then(|c| c.sb.as_ref());
        if let (Some(sb), Some(_)) = (chosen, copies[1].as_ref()) {
            if superblock::secondary_is_inside_segments(sb, size) {
                if let Some(c) = copies[1].as_mut() {
                    c.valid = Err("lies inside the segment area of the chosen super block".into());
                }
                valid[1] = false;
                if swp {
                    reason =
                        "primary is used: the secondary's location lies inside its segment area"
                            .into();
                }
                swp = false;
            }
        }
    }
    let chosen = usize::from(swp);
    if !valid[chosen] {
        let why = |c: &Option<SbCopy>| match c {
            Some(c) => c.valid.clone().err().unwrap_or_default(),
            None => "absent".to_string(),
        };
        return Err(Error::corrupt(
            "super block",
            format!(
                "no valid super block: primary: {}; secondary: {}",
                why(&copies[0]),
                why(&copies[1])
            ),
        ));
    }
    // ns_prot_seq = sbp[valid[1] & !swp]->s_last_seq, indexing the copies
    // after the swap: with the primary chosen that is the secondary when it
    // is valid; with the secondary chosen, the secondary itself. Either
    // way: the secondary when valid, else the primary. (A rw mount's first
    // super block write recomputes it in nilfs_sync_super, from the copy
    // with the smaller s_last_cno.)
    let from = usize::from(valid[1]);
    let prot_seq = copies[from]
        .as_ref()
        .and_then(|c| c.sb.as_ref())
        .map_or(Seq(0), |s| s.last_seq);
    Ok(SbChoice {
        copies,
        chosen,
        reason,
        prot_seq,
    })
}

/// What the scan found at one log position.
#[derive(Clone, Debug)]
pub struct LogVisit {
    /// First block of the log.
    pub pseg: BlockNr,
    /// The sequence number the scan expected there.
    pub seq: Seq,
    /// The summary header, if the block could be read.
    pub header: Option<SegmentSummary>,
    /// `Ok` for a valid log, else the kernel's reason (`NILFS_SEG_FAIL_*`).
    pub verdict: std::result::Result<(), String>,
    /// For a log with a super root: the checkpoint it made.
    pub super_root_cno: Option<Cno>,
}

/// The result of `nilfs_search_super_root`.
#[derive(Clone, Debug)]
pub struct ScanResult {
    /// Every log position examined, in order.
    pub visits: Vec<LogVisit>,
    /// Block of the latest super root (`ri_super_root`).
    pub super_root: BlockNr,
    /// First block of the log that carries it (the new `ns_last_pseg`).
    pub sr_pseg: BlockNr,
    /// Its checkpoint (`ri_cno`, the new `ns_last_cno`).
    pub cno: Cno,
    /// Its sequence number (the new `ns_last_seq`).
    pub seq: Seq,
    /// Segment the writer continues in (`ns_segnum`).
    pub segnum: SegNum,
    /// Blocks used in that segment (`ns_pseg_offset`).
    pub pseg_offset: u64,
    /// Segment allocated as next (`ns_nextnum`).
    pub nextnum: SegNum,
    /// `ss_create` of the super root's log (`ns_ctime`).
    pub ctime: u64,
    /// First log of an unclosed logical segment after the super root, if any
    /// (`ri_lsegs_start`), with its sequence number: roll-forward starts here.
    pub lsegs_start: Option<(BlockNr, Seq)>,
    /// Last log with `LOGEND` after the super root (`ri_lsegs_end`).
    pub lsegs_end: Option<BlockNr>,
    /// Last valid log seen (`ri_pseg_start`), its seq, segment and next.
    pub last_valid: (BlockNr, Seq, SegNum, SegNum),
    /// Segments walked past after the super root's segment (`ri_used_segments`).
    pub used_segments: Vec<SegNum>,
    /// Whether a newer super root than the super block's was found.
    pub super_root_updated: bool,
}

/// Validate the log at `pseg` (`nilfs_validate_log`): its header, and
/// whether it is a valid log of sequence `seq` (magic, sequence, size,
/// data checksum) or why not.
pub fn validate_log(
    dev: &dyn BlockDevice,
    g: &SegGeometry,
    seed: u32,
    pseg: BlockNr,
    seq: Seq,
) -> Result<(SegmentSummary, std::result::Result<(), String>)> {
    let first = read_block(dev, g.block_size, pseg.0)?;
    let header = SegmentSummary::decode(&first).map_err(|e| e.at_block(pseg.0))?;
    let verdict = (|| {
        if header.magic != crate::format::SEGSUM_MAGIC {
            return Err("bad magic (NILFS_SEG_FAIL_MAGIC)".to_string());
        }
        if header.seq != seq {
            return Err(format!(
                "sequence {} where {} was expected (NILFS_SEG_FAIL_SEQ)",
                header.seq, seq
            ));
        }
        let n = u64::from(header.nblocks);
        if n == 0 || n > g.blocks_per_segment {
            return Err(format!("{n} blocks (NILFS_SEG_FAIL_CONSISTENCY)"));
        }
        Ok(n)
    })();
    let Ok(n) = verdict else {
        return Ok((header, verdict.map(|_| ())));
    };
    // A block that cannot be read is NILFS_SEG_FAIL_IO: the scan and the
    // roll-forward fail with EIO (nilfs_warn_segment_error), where a
    // checksum mismatch would only end the log chain.
    // Block by block, so an I/O error names the block that failed.
    let bs = g.block_size as usize;
    let mut log = first;
    log.resize(n as usize * bs, 0);
    for (b, buf) in log.chunks_exact_mut(bs).enumerate().skip(1) {
        read_blocks_into(dev, g.block_size, pseg.0 + b as u64, buf)?;
    }
    if compute_datasum(&log, seed) != header.datasum {
        return Ok((
            header,
            Err("data checksum mismatch (NILFS_SEG_FAIL_CHECKSUM_FULL)".to_string()),
        ));
    }
    Ok((header, Ok(())))
}

/// The kernel's `nilfs_search_super_root`, starting from the log cursor of
/// `sb`. With `valid_fs` (cleanly unmounted) it stops at the first super root;
/// otherwise it scans on for newer logs along the `ss_next` chain.
pub fn search_super_root(
    dev: &dyn BlockDevice,
    sb: &SuperBlock,
    valid_fs: bool,
) -> Result<ScanResult> {
    search_super_root_traced(dev, sb, valid_fs).1
}

/// [`search_super_root`], with the logs it examined whether or not it
/// ended in an error (an I/O error past a damaged `ss_next` fails the
/// kernel's search, and the mount, after it has passed logs a checker
/// wants to see).
pub fn search_super_root_traced(
    dev: &dyn BlockDevice,
    sb: &SuperBlock,
    valid_fs: bool,
) -> (Vec<LogVisit>, Result<ScanResult>) {
    let mut visits = Vec::new();
    let r = search(dev, sb, valid_fs, &mut visits);
    let r = r.map(|mut r| {
        r.visits = visits.clone();
        r
    });
    (visits, r)
}

fn search(
    dev: &dyn BlockDevice,
    sb: &SuperBlock,
    valid_fs: bool,
    visits: &mut Vec<LogVisit>,
) -> Result<ScanResult> {
    let g = SegGeometry::new(sb)?;
    let seed = sb.crc_seed;
    let mut pseg = sb.last_pseg;
    let mut seq = sb.last_seq;
    let mut cno = sb.last_cno;
    let mut segnum = g.segnum_of(pseg);
    if segnum.0 >= g.nsegments {
        return Err(Error::corrupt(
            "super block",
            format!(
                "pointed segment number is out of range: segnum={segnum}, nsegments={}",
                g.nsegments
            ),
        ));
    }
    let (mut seg_start, mut seg_end) = g.range(segnum);
    // The kernel checks only the segment number (nilfs_store_log_cursor);
    // a cursor in segment 0 but before s_first_data_block would make the
    // log offset it derives (pseg + nblocks - seg_start) wrap.
    if pseg < seg_start {
        return Err(Error::corrupt(
            "super block",
            format!(
                "s_last_pseg {pseg} lies before the first data block {}",
                seg_start
            ),
        ));
    }
    let mut found: Option<ScanResult> = None;
    let mut scan_newer = false;
    let mut empty_seg = 0u32;
    let mut nextnum = SegNum(0);
    let mut used = Vec::new();
    let mut lsegs_start = None;
    let mut lsegs_end = None;
    let mut last_valid = (pseg, seq, segnum, nextnum);
    // Bound: each segment is entered at most once per hop and every hop needs
    // a valid log, so the walk ends within nsegments hops; the explicit limit
    // turns a cyclic ss_next chain on a hostile image into an error.
    let max_visits = g
        .nsegments
        .saturating_mul(g.blocks_per_segment / 2 + 1)
        .saturating_add(16);

    loop {
        if visits.len() as u64 > max_visits {
            return Err(Error::corrupt(
                "segment summary",
                "log chain does not terminate",
            ));
        }
        let (header, verdict) = validate_log(dev, &g, seed, pseg, seq)?;
        let mut visit = LogVisit {
            pseg,
            seq,
            header: Some(header),
            verdict: verdict.clone(),
            super_root_cno: None,
        };
        let strayed = match verdict {
            Err(_) => true,
            Ok(()) => {
                let nblocks = u64::from(header.nblocks);
                let pseg_end = BlockNr(pseg.0 + nblocks - 1);
                if pseg_end > seg_end {
                    visit.verdict =
                        Err("log crosses the segment end (NILFS_SEG_FAIL_CONSISTENCY)".into());
                    true
                } else {
                    nextnum = g.segnum_of(header.next);
                    last_valid = (pseg, seq, segnum, nextnum);
                    empty_seg = 0;
                    let flags = header.flags;
                    if flags & SS_SR == 0 && !scan_newer {
                        visits.push(visit);
                        return Err(Error::corrupt(
                            "segment summary",
                            "the super block's log has no super root (NILFS_SEG_FAIL_CONSISTENCY)",
                        )
                        .at_block(pseg.0));
                    }
                    if flags & SS_SR == 0 {
                        if lsegs_start.is_none() && flags & SS_LOGBGN != 0 {
                            lsegs_start = Some((pseg, seq));
                        }
                        if flags & SS_LOGEND != 0 {
                            lsegs_end = Some(pseg);
                        }
                    } else {
                        visit.super_root_cno = Some(cno);
                        found = Some(ScanResult {
                            visits: Vec::new(),
                            super_root: pseg_end,
                            sr_pseg: pseg,
                            cno,
                            seq,
                            segnum,
                            pseg_offset: pseg.0 + nblocks - seg_start.0,
                            nextnum,
                            ctime: header.create,
                            lsegs_start: None,
                            lsegs_end: None,
                            last_valid,
                            used_segments: Vec::new(),
                            super_root_updated: scan_newer,
                        });
                        cno = Cno(cno.0.wrapping_add(1)); // u64 in the kernel too
                        lsegs_start = None;
                        lsegs_end = None;
                        used.clear();
                        if !scan_newer {
                            if valid_fs {
                                visits.push(visit);
                                break;
                            }
                            scan_newer = true;
                        }
                    }
                    visits.push(visit.clone());
                    pseg = BlockNr(pseg.0 + nblocks);
                    if pseg < seg_end {
                        continue;
                    }
                    false
                }
            }
        };
        if strayed {
            let why = visit.verdict.clone().err().unwrap_or_default();
            visits.push(visit);
            if !scan_newer {
                return Err(Error::corrupt(
                    "segment summary",
                    format!("the log the super block points at is invalid: {why}"),
                )
                .at_block(pseg.0));
            }
        }
        // feed_segment: hop to the next full segment, unless nothing valid
        // was found since the previous hop.
        if empty_seg > 0 {
            break;
        }
        empty_seg += 1;
        used.push(segnum);
        seq = Seq(seq.0 + 1);
        segnum = nextnum;
        (seg_start, seg_end) = g.range(segnum);
        pseg = seg_start;
    }
    let mut r = found.expect("the first log has a super root or the scan failed");
    r.lsegs_start = lsegs_start;
    r.lsegs_end = lsegs_end;
    r.last_valid = last_valid;
    r.used_segments = used;
    Ok(r)
}

#[cfg(test)]
mod tests {
    use crate::corrupt::{apply, Recipe};
    use crate::device::MemDevice;
    use crate::mkfs::{mkfs, MkfsOptions};
    use crate::the_nilfs::Nilfs;

    /// `nilfs_load_super_block` refuses a device smaller than sixteen
    /// 1 KiB blocks and 4 KiB (`NILFS_SEG_MIN_BLOCKS *
    /// NILFS_MIN_BLOCK_SIZE + 4096`): 20,480 bytes is the smallest device
    /// whose super blocks it reads.
    #[test]
    fn the_smallest_device_whose_super_blocks_are_read() {
        let too_small = |size: u64| {
            matches!(super::load_super_block(&MemDevice::new(size)),
                     Err(e) if e.to_string().contains("device too small"))
        };
        assert!(too_small(20_479));
        assert!(!too_small(20_480));
    }

    /// mkfs's one log, the one both super blocks point at, damaged by
    /// `recipe` (checksums resealed): the mount's error.
    fn open_error(recipe: &str) -> String {
        let dev = MemDevice::new(8 << 20);
        mkfs(&dev, &MkfsOptions::with_geometry(1024, 64)).unwrap();
        apply(&dev, &Recipe::parse(recipe).unwrap()).unwrap();
        match Nilfs::open(&dev) {
            Ok(_) => panic!("{recipe}: mounted"),
            Err(e) => e.to_string(),
        }
    }

    /// `nilfs_search_super_root`: the log the super block names must hold
    /// a super root (NILFS_SEG_FAIL_CONSISTENCY otherwise), and
    /// `load_segment_summary` refuses a log of more blocks than a segment
    /// has before it reads them for the checksum.
    #[test]
    fn the_super_blocks_log_is_judged_by_the_kernels_checks() {
        let e = open_error("ss@0:0.ss_flags &= 0xfffb");
        assert!(e.contains("has no super root"), "{e}");
        let e = open_error("ss@0:0.ss_nblocks = 65");
        assert!(e.contains("65 blocks (NILFS_SEG_FAIL_CONSISTENCY)"), "{e}");
    }
}
