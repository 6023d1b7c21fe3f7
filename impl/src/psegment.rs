//! libnilfs's segment walk (nilfs-utils 2.2.9, `nilfs_psegment_*`,
//! `nilfs_file_*` and `nilfs_block_*`): the logs of a raw segment, their
//! file records and block records, read as leniently as the library reads
//! them (no sequence check, no data CRC). dumpseg prints what it finds
//! ([`dumpseg`](mod@crate::inspect::nilfs_utils::dumpseg)); the cleaner
//! (`nilfs_acc_blocks_segment`, [`crate::cleaner`]) collects the blocks of
//! a segment to clean with it.
//!
//! Its geometry is [`SegmentGeometry`], not [`crate::format::SegGeometry`]:
//! the tools take it from a super block nobody validated (nilfs-tune's
//! choice), with libnilfs's 32-bit quantities, and the walk must stay
//! total on whatever that holds.

/// One block record of a finfo, with the block's physical address.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DumpBlock {
    /// Physical block number: the file's first block (after the summary
    /// blocks and the blocks of earlier finfos) plus the record's index.
    pub blocknr: u64,
    pub binfo: DumpBinfo,
}

/// A binfo as dumpseg decodes it. Which kind a record is follows from the
/// finfo alone: ino 3 (DAT) or not, and index `< ndatablk` (data) or not.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DumpBinfo {
    /// Non-DAT data block: `vblocknr = V, blkoff = O, blocknr = B`.
    Data { vblocknr: u64, blkoff: u64 },
    /// Non-DAT node block: `vblocknr = V, blocknr = B`.
    Node { vblocknr: u64 },
    /// DAT data block: `blkoff = O, blocknr = B`.
    DatData { blkoff: u64 },
    /// DAT node block: `blkoff = O, level = L, blocknr = B`.
    DatNode { blkoff: u64, level: u8 },
}

/// One finfo with the binfos dumpseg reached.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DumpFile {
    pub ino: u64,
    pub cno: u64,
    /// `fi_nblocks`; printed as a signed 32-bit number.
    pub nblocks: u32,
    /// `fi_ndatablk`; printed as a signed 32-bit number.
    pub ndatablk: u32,
    pub blocks: Vec<DumpBlock>,
}

/// One log (partial segment) as dumpseg prints it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DumpLog {
    /// Physical block number of the log's first (summary) block.
    pub blocknr: u64,
    /// `ss_seq` (printed only for the first log of the segment).
    pub seq: u64,
    /// `ss_next`, a block number (printed divided by blocks per segment,
    /// only for the first log).
    pub next: u64,
    /// `ss_create`.
    pub create: u64,
    /// `ss_nblocks`.
    pub nblocks: u32,
    /// `ss_nfinfo` as recorded, even if fewer finfos were valid; printed as a
    /// signed 32-bit number.
    pub nfinfo: u32,
    /// The finfos dumpseg reached (it stops at the first invalid one).
    pub files: Vec<DumpFile>,
}

/// A segment as dumpseg sees it: the valid logs from its start.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DumpSegment {
    pub segnum: u64,
    /// Empty if the first log is not valid (a clean or never-written
    /// segment): dumpseg then prints only the `segment:` line.
    pub logs: Vec<DumpLog>,
}

/// The super block values dumpseg's segment walk depends on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SegmentGeometry {
    /// `1024 << s_log_block_size`.
    pub block_size: u32,
    pub blocks_per_segment: u32,
    pub first_data_block: u64,
    pub crc_seed: u32,
}

const SEGSUM_MAGIC: u32 = 0x1EAF_FA11;
const FINFO_LEN: u64 = 24;
const PSEG_MIN_BLOCKS: u64 = 2;
const DAT_INO: u64 = 3;

fn rd_u8(b: &[u8], off: u64) -> u8 {
    usize::try_from(off)
        .ok()
        .and_then(|o| b.get(o))
        .copied()
        .unwrap_or(0)
}

fn rd_le(b: &[u8], off: u64, len: u64) -> u64 {
    (0..len).rev().fold(0u64, |acc, i| {
        acc << 8 | u64::from(rd_u8(b, off.saturating_add(i)))
    })
}

fn rd_u16(b: &[u8], off: u64) -> u16 {
    rd_le(b, off, 2) as u16
}

fn rd_u32(b: &[u8], off: u64) -> u32 {
    rd_le(b, off, 4) as u32
}

fn rd_u64(b: &[u8], off: u64) -> u64 {
    rd_le(b, off, 8)
}

/// Bytes that `count` records of `size` bytes take from byte `offset` of a
/// summary, given that a record never straddles a block boundary (the tail
/// of a block too short for a record is skipped).
fn binfo_span(offset: u64, block_size: u64, size: u64, count: u64) -> u64 {
    let room = block_size - offset % block_size;
    if size * count <= room {
        return size * count;
    }
    let left = count - room / size;
    let per_block = block_size / size;
    room + left / per_block * block_size + left % per_block * size
}

/// Where the record of `size` bytes wanted at `offset` really starts.
fn record_start(offset: u64, block_size: u64, size: u64) -> u64 {
    let room = block_size - offset % block_size;
    if size > room {
        offset + room
    } else {
        offset
    }
}

fn binfo_sizes(ino: u64) -> (u64, u64) {
    // (data, node) record sizes.
    if ino == DAT_INO {
        (8, 16)
    } else {
        (16, 8)
    }
}

/// The same walk bounded to the first `blkcnt` blocks of the segment, as
/// `nilfs_psegment_for_each(pseg, segment, blkcnt)` is: dumpseg passes the
/// whole segment, the cleaner (`nilfs_acc_blocks_segment`) the segment's
/// `su_nblocks`.
pub fn read_segment_logs(
    segment: &[u8],
    segnum: u64,
    geo: &SegmentGeometry,
    blkcnt: u64,
) -> DumpSegment {
    let mut seg = DumpSegment {
        segnum,
        logs: Vec::new(),
    };
    let bs = u64::from(geo.block_size);
    let bps = u64::from(geo.blocks_per_segment);
    if bs == 0 {
        return seg;
    }
    let skip = if segnum == 0 {
        geo.first_data_block.min(bps)
    } else {
        0
    };
    let seg_start = bps.wrapping_mul(segnum).wrapping_add(skip);
    let max_blocks = bps - skip;
    // The iterator's bound: `blkcnt`, at most the blocks the segment
    // buffer holds from `seg_start`.
    let bound = blkcnt.min(max_blocks);
    let mut blocknr = seg_start;
    loop {
        let rel = blocknr - seg_start;
        if bound < rel.saturating_add(PSEG_MIN_BLOCKS) {
            break;
        }
        let base = (skip + rel) * bs;
        let Some(log) = read_log(segment, base, blocknr, max_blocks - rel, geo) else {
            break;
        };
        let step = u64::from(log.nblocks);
        seg.logs.push(log);
        if step == 0 {
            break;
        }
        blocknr += step;
    }
    seg
}

/// One log at byte `base` of the segment, or `None` if its summary is not
/// valid. `blocks_left` counts the blocks from this log to the segment end.
fn read_log(
    segment: &[u8],
    base: u64,
    blocknr: u64,
    blocks_left: u64,
    geo: &SegmentGeometry,
) -> Option<DumpLog> {
    let bs = u64::from(geo.block_size);
    let at = |off: u64| base + off;
    if rd_u32(segment, at(8)) != SEGSUM_MAGIC {
        return None;
    }
    let sumbytes = u64::from(rd_u32(segment, at(48)));
    // `restblocks` is a 32-bit quantity in libnilfs.
    let rest_bytes = u64::from(blocks_left as u32) * bs;
    if sumbytes < 8 || sumbytes > rest_bytes {
        return None;
    }
    let lo = usize::try_from(at(8)).ok()?;
    let hi = usize::try_from(at(sumbytes)).ok()?;
    let summed = segment.get(lo..hi)?;
    if rd_u32(segment, at(4)) != crate::format::crc::crc32_le(geo.crc_seed, summed) {
        return None;
    }
    let hdr_bytes = u64::from(rd_u16(segment, at(12)));
    if hdr_bytes > sumbytes {
        return None;
    }
    let log_nblocks = rd_u32(segment, at(40));
    let nfinfo = rd_u32(segment, at(44));
    let mut log = DumpLog {
        blocknr,
        seq: rd_u64(segment, at(16)),
        next: rd_u64(segment, at(32)),
        create: rd_u64(segment, at(24)),
        nblocks: log_nblocks,
        nfinfo,
        files: Vec::new(),
    };

    let mut offset = record_start(hdr_bytes, bs, FINFO_LEN);
    let mut file_blocknr = blocknr + sumbytes.div_ceil(bs);
    for _ in 0..nfinfo {
        if offset + FINFO_LEN > sumbytes {
            break;
        }
        let ino = rd_u64(segment, at(offset));
        let cno = rd_u64(segment, at(offset + 8));
        let nblocks = rd_u32(segment, at(offset + 16));
        let ndatablk = rd_u32(segment, at(offset + 20));
        let blkoff = (file_blocknr - blocknr) as u32;
        if blkoff.wrapping_add(nblocks) > log_nblocks || ndatablk > nblocks {
            break;
        }
        let (dsize, nsize) = binfo_sizes(ino);
        let data_span = binfo_span(offset + FINFO_LEN, bs, dsize, u64::from(ndatablk));
        let node_span = binfo_span(
            offset + FINFO_LEN + data_span,
            bs,
            nsize,
            u64::from(nblocks - ndatablk),
        );
        let info_len = FINFO_LEN + data_span + node_span;
        if offset + info_len > sumbytes {
            break;
        }

        let mut file = DumpFile {
            ino,
            cno,
            nblocks,
            ndatablk,
            blocks: Vec::new(),
        };
        let mut rec = offset + FINFO_LEN;
        for index in 0..u64::from(nblocks) {
            let is_data = index < u64::from(ndatablk);
            let size = if is_data { dsize } else { nsize };
            rec = record_start(rec, bs, size);
            let w0 = rd_u64(segment, at(rec));
            let binfo = match (ino == DAT_INO, is_data) {
                (false, true) => DumpBinfo::Data {
                    vblocknr: w0,
                    blkoff: rd_u64(segment, at(rec + 8)),
                },
                (false, false) => DumpBinfo::Node { vblocknr: w0 },
                (true, true) => DumpBinfo::DatData { blkoff: w0 },
                (true, false) => DumpBinfo::DatNode {
                    blkoff: w0,
                    level: rd_u8(segment, at(rec + 8)),
                },
            };
            file.blocks.push(DumpBlock {
                blocknr: file_blocknr + index,
                binfo,
            });
            rec += size;
        }
        log.files.push(file);

        file_blocknr += u64::from(nblocks);
        offset = record_start(offset + info_len, bs, FINFO_LEN);
    }
    Some(log)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn binfo_span_matches_record_by_record_placement() {
        for bs in [1024u64, 4096] {
            for (size, start) in [(8u64, 24u64), (16, 24), (16, 1000), (8, 1016), (16, 1020)] {
                for count in 0..600u64 {
                    let mut rec = start;
                    for _ in 0..count {
                        rec = record_start(rec, bs, size) + size;
                    }
                    assert_eq!(
                        start + binfo_span(start, bs, size, count),
                        rec,
                        "bs {bs} size {size} start {start} n {count}"
                    );
                }
            }
        }
    }
}
