//! `dumpseg` (nilfs-tools 2.2.9): the printer. The segment walk it prints
//! is libnilfs's ([`crate::psegment`]), shared with the cleaner.

use std::fmt::Write as _;

use super::time::format_date_time;
use crate::psegment::{read_segment_logs, DumpBinfo, DumpSegment, SegmentGeometry};

/// The standard output of `dumpseg DEV SEGNUM` for one segment.
/// `blocks_per_segment` is the super block's, the divisor of `next segnum`
/// (0 would crash dumpseg; here it prints `next segnum = 0`).
pub fn dumpseg(seg: &DumpSegment, blocks_per_segment: u32) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "segment: segnum = {}", seg.segnum);
    let Some(first) = seg.logs.first() else {
        return out;
    };
    let next_segnum = first
        .next
        .checked_div(u64::from(blocks_per_segment))
        .unwrap_or(0);
    let _ = writeln!(
        out,
        "  sequence number = {}, next segnum = {}",
        first.seq, next_segnum
    );
    for log in &seg.logs {
        let _ = writeln!(
            out,
            "  partial segment: blocknr = {}, nblocks = {}",
            log.blocknr, log.nblocks
        );
        let _ = writeln!(out, "    creation time = {}", format_date_time(log.create));
        let _ = writeln!(out, "    nfinfo = {}", log.nfinfo as i32);
        for file in &log.files {
            out.push_str("    finfo\n");
            let _ = writeln!(
                out,
                "      ino = {}, cno = {}, nblocks = {}, ndatblk = {}",
                file.ino, file.cno, file.nblocks as i32, file.ndatablk as i32
            );
            for blk in &file.blocks {
                let b = blk.blocknr;
                let _ = match blk.binfo {
                    DumpBinfo::Data { vblocknr, blkoff } => {
                        writeln!(
                            out,
                            "        vblocknr = {vblocknr}, blkoff = {blkoff}, blocknr = {b}"
                        )
                    }
                    DumpBinfo::Node { vblocknr } => {
                        writeln!(out, "        vblocknr = {vblocknr}, blocknr = {b}")
                    }
                    DumpBinfo::DatData { blkoff } => {
                        writeln!(out, "        blkoff = {blkoff}, blocknr = {b}")
                    }
                    DumpBinfo::DatNode { blkoff, level } => {
                        writeln!(
                            out,
                            "        blkoff = {blkoff}, level = {level}, blocknr = {b}"
                        )
                    }
                };
            }
        }
    }
    out
}

/// Decode a segment the way dumpseg (libnilfs 2.2.9) walks it.
///
/// `segment` holds the raw bytes of the whole segment, i.e. the device from
/// byte `segnum * blocks_per_segment * block_size` on, `blocks_per_segment *
/// block_size` bytes (missing bytes read as zero). The walk:
///
/// - starts at block `min(first_data_block, bps)` of segment 0, block 0 of
///   any other; a log is taken while at least 2 blocks remain in the segment
///   and its summary is valid: magic, `8 <= ss_sumbytes <= bytes left in the
///   segment`, `ss_sumsum` = crc32_le(seed) over summary bytes `8..sumbytes`,
///   and `ss_bytes <= ss_sumbytes`. Then it jumps `ss_nblocks` blocks. The
///   data CRC and `ss_seq` are **not** checked, so a stale older log after
///   the newest one is printed too. (An `ss_nblocks` of 0 makes the real
///   dumpseg loop forever; this stops after printing that log once.)
/// - finfos start at byte `ss_bytes`; records never straddle a block (a
///   finfo or binfo that does not fit in the rest of a summary block starts
///   at the next block). A finfo is taken while fewer than `ss_nfinfo` were
///   taken and it is sane: it lies within `ss_sumbytes`, its blocks stay
///   within the log (32-bit sum), `ndatablk <= nblocks`, and all its binfos
///   lie within `ss_sumbytes`; the first insane finfo ends the log's list.
/// - the blocks of the first finfo start right after the summary blocks
///   (`ceil(ss_sumbytes / block_size)`), each finfo's after the previous
///   one's `fi_nblocks`.
pub fn dumpseg_read_segment(segment: &[u8], segnum: u64, geo: &SegmentGeometry) -> DumpSegment {
    read_segment_logs(segment, segnum, geo, u64::from(geo.blocks_per_segment))
}
