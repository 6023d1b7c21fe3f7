//! The log summary: `struct nilfs_segment_summary` (the 64-byte header at the
//! start of every log), the `nilfs_finfo`/`nilfs_binfo` records after it, and
//! the two log checksums `ss_sumsum` and `ss_datasum` (digest §3.2–§3.4, §3.7).
//!
//! A log is `ss_nblocks` blocks: `ceil(ss_sumbytes / bs)` summary blocks, one
//! payload block per binfo in record order, then the super root if `SS_SR`.
//! The physical place of a payload block is implicit in its record's position,
//! which [`Summary::block_entries`] makes explicit.
//!
//! Packing rule, shared by the kernel writer (`nilfs_segctor_map_segsum_entry`),
//! the kernel reader (`nilfs_read_summary_info`) and nilfs-utils
//! (`nilfs_file_adjust_finfo_position`, `nilfs_binfo_total_size`): a record
//! goes at the current offset if it fits in the rest of the current summary
//! block, else at offset 0 of the next one. Records never straddle blocks.

use super::crc::crc32_le;
use super::le::{encoded, layout, need};
use super::{ino, BlockNr, Cno, FileBlk, Ino, Seq, VBlockNr, SEGSUM_MAGIC};
use crate::{Error, Result};

const WHAT: &str = "segment summary";

/// `NILFS_SS_LOGBGN`: first log of a logical segment.
pub const SS_LOGBGN: u16 = 0x0001;
/// `NILFS_SS_LOGEND`: last log of a logical segment.
pub const SS_LOGEND: u16 = 0x0002;
/// `NILFS_SS_SR`: the last block of the log is a super root.
pub const SS_SR: u16 = 0x0004;
/// `NILFS_SS_SYNDT`: a data-only sync log.
pub const SS_SYNDT: u16 = 0x0008;
/// `NILFS_SS_GC`: written by the cleaner.
pub const SS_GC: u16 = 0x0010;

/// The 64-byte header at the start of a log's first summary block.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SegmentSummary {
    /// `ss_datasum`: CRC of log bytes 4.. to the end ([`compute_datasum`]).
    pub datasum: u32,
    /// `ss_sumsum`: CRC of log bytes 8..`sumbytes` ([`compute_sumsum`]).
    pub sumsum: u32,
    /// `ss_magic`: [`SEGSUM_MAGIC`] when valid.
    pub magic: u32,
    /// `ss_bytes`: header size; the first finfo starts here (64 as written).
    pub bytes: u16,
    /// `ss_flags`: `SS_*` bits.
    pub flags: u16,
    /// `ss_seq`: sequence number of the full segment.
    pub seq: Seq,
    /// `ss_create`: creation time of the log (seconds).
    pub create: u64,
    /// `ss_next`: start block of the next full segment the writer will use.
    pub next: BlockNr,
    /// `ss_nblocks`: blocks in the log, summary and super root included.
    pub nblocks: u32,
    /// `ss_nfinfo`: number of file records.
    pub nfinfo: u32,
    /// `ss_sumbytes`: summary bytes, from the log start to the end of the last record.
    pub sumbytes: u32,
    /// `ss_pad`.
    pub pad: u32,
    /// `ss_cno`: checkpoint number under construction.
    pub cno: Cno,
}

impl SegmentSummary {
    /// `sizeof(struct nilfs_segment_summary)`.
    pub const SIZE: usize = 64;

    /// Decode the first 64 bytes of `buf`. Structural only; the checks are in
    /// [`Summary::decode`] and [`verify_log`].
    pub fn decode(buf: &[u8]) -> Result<Self> {
        need(buf, Self::SIZE, WHAT)?;
        Ok(SegmentSummary {
            datasum: Self::ss_datasum.u32(buf),
            sumsum: Self::ss_sumsum.u32(buf),
            magic: Self::ss_magic.u32(buf),
            bytes: Self::ss_bytes.u16(buf),
            flags: Self::ss_flags.u16(buf),
            seq: Seq(Self::ss_seq.u64(buf)),
            create: Self::ss_create.u64(buf),
            next: BlockNr(Self::ss_next.u64(buf)),
            nblocks: Self::ss_nblocks.u32(buf),
            nfinfo: Self::ss_nfinfo.u32(buf),
            sumbytes: Self::ss_sumbytes.u32(buf),
            pad: Self::ss_pad.u32(buf),
            cno: Cno(Self::ss_cno.u64(buf)),
        })
    }

    /// Encode into the first 64 bytes of `out` (which must hold them).
    pub fn encode(&self, out: &mut [u8]) {
        Self::ss_datasum.put_u32(out, self.datasum);
        Self::ss_sumsum.put_u32(out, self.sumsum);
        Self::ss_magic.put_u32(out, self.magic);
        Self::ss_bytes.put_u16(out, self.bytes);
        Self::ss_flags.put_u16(out, self.flags);
        Self::ss_seq.put_u64(out, self.seq.0);
        Self::ss_create.put_u64(out, self.create);
        Self::ss_next.put_u64(out, self.next.0);
        Self::ss_nblocks.put_u32(out, self.nblocks);
        Self::ss_nfinfo.put_u32(out, self.nfinfo);
        Self::ss_sumbytes.put_u32(out, self.sumbytes);
        Self::ss_pad.put_u32(out, self.pad);
        Self::ss_cno.put_u64(out, self.cno.0);
    }

    /// The encoded 64 bytes.
    pub fn to_bytes(&self) -> [u8; 64] {
        encoded(|b| self.encode(b))
    }

    /// Whether the log ends with a super root.
    pub fn has_super_root(&self) -> bool {
        self.flags & SS_SR != 0
    }

    /// Summary blocks: `ceil(sumbytes / bs)`, at least 1 (the header's own).
    ///
    /// # Panics
    /// If `block_size` is not a NILFS block size.
    pub fn nsumblk(&self, block_size: u32) -> u32 {
        self.sumbytes.div_ceil(checked_bs(block_size) as u32).max(1)
    }
}

layout!(SegmentSummary {
    ss_datasum: 0, 4;
    ss_sumsum: 4, 4;
    ss_magic: 8, 4;
    ss_bytes: 12, 2;
    ss_flags: 14, 2;
    ss_seq: 16, 8;
    ss_create: 24, 8;
    ss_next: 32, 8;
    ss_nblocks: 40, 4;
    ss_nfinfo: 44, 4;
    ss_sumbytes: 48, 4;
    ss_pad: 52, 4;
    ss_cno: 56, 8;
});

/// `struct nilfs_finfo`: the head of one file's group of block records.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Finfo {
    /// `fi_ino`.
    pub ino: Ino,
    /// `fi_cno`: 0 for DAT/cpfile/sufile in kernel logs, 1 in mkfs logs.
    pub cno: Cno,
    /// `fi_nblocks`: data plus node blocks of this file in this log.
    pub nblocks: u32,
    /// `fi_ndatablk`: how many of them are data blocks (they come first).
    pub ndatablk: u32,
}

impl Finfo {
    /// `sizeof(struct nilfs_finfo)`.
    pub const SIZE: usize = 24;

    /// Decode the first 24 bytes of `buf`.
    pub fn decode(buf: &[u8]) -> Result<Self> {
        need(buf, Self::SIZE, "finfo")?;
        Ok(Finfo {
            ino: Ino(Self::fi_ino.u64(buf)),
            cno: Cno(Self::fi_cno.u64(buf)),
            nblocks: Self::fi_nblocks.u32(buf),
            ndatablk: Self::fi_ndatablk.u32(buf),
        })
    }

    /// Encode into the first 24 bytes of `out` (which must hold them).
    pub fn encode(&self, out: &mut [u8]) {
        Self::fi_ino.put_u64(out, self.ino.0);
        Self::fi_cno.put_u64(out, self.cno.0);
        Self::fi_nblocks.put_u32(out, self.nblocks);
        Self::fi_ndatablk.put_u32(out, self.ndatablk);
    }

    /// The encoded 24 bytes.
    pub fn to_bytes(&self) -> [u8; 24] {
        encoded(|b| self.encode(b))
    }

    /// The DAT records physical addresses, so its binfos take other forms.
    pub fn is_dat(&self) -> bool {
        self.ino == ino::DAT
    }
}

layout!(Finfo {
    fi_ino: 0, 8;
    fi_cno: 8, 8;
    fi_nblocks: 16, 4;
    fi_ndatablk: 20, 4;
});

/// One block record. The form is not stored on disk: it follows from the
/// file (DAT or not) and the position (the first `fi_ndatablk` are data).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Binfo {
    /// `nilfs_binfo_v` (16 bytes): a data block of any file but the DAT.
    DataV {
        /// `bi_vblocknr`: the block's virtual block number.
        vblocknr: VBlockNr,
        /// `bi_blkoff`: its offset in the file.
        blkoff: FileBlk,
    },
    /// 8 bytes: a B-tree node of any file but the DAT; only its virtual block
    /// number (level and key are in the node itself).
    NodeV {
        /// The node's virtual block number.
        vblocknr: VBlockNr,
    },
    /// 8 bytes: a DAT data block, by its offset in the DAT.
    DataDat {
        /// `bi_blkoff`.
        blkoff: FileBlk,
    },
    /// `nilfs_binfo_dat` (16 bytes): a DAT B-tree node. Its 7 pad bytes are
    /// written as zero (as the kernel's `nilfs_btree_assign_p` does) and not
    /// kept on decode, like the padding between records.
    NodeDat {
        /// `bi_blkoff`: the node's key.
        blkoff: FileBlk,
        /// `bi_level`: the node's level (≥ 1).
        level: u8,
    },
}

impl Binfo {
    /// Encoded size of this record.
    pub fn size(&self) -> usize {
        match self {
            Binfo::DataV { .. } | Binfo::NodeDat { .. } => 16,
            Binfo::NodeV { .. } | Binfo::DataDat { .. } => 8,
        }
    }

    /// Size of the record for a block of the DAT (`dat`) or not, data or node.
    pub fn size_for(dat: bool, data: bool) -> usize {
        match (dat, data) {
            (false, true) | (true, false) => 16,
            (false, false) | (true, true) => 8,
        }
    }

    /// Whether this describes a data block (as opposed to a B-tree node).
    pub fn is_data(&self) -> bool {
        matches!(self, Binfo::DataV { .. } | Binfo::DataDat { .. })
    }

    /// Whether this is one of the DAT's forms.
    pub fn is_dat(&self) -> bool {
        matches!(self, Binfo::DataDat { .. } | Binfo::NodeDat { .. })
    }

    /// Decode the form selected by `dat` and `data` from the start of `buf`,
    /// which must hold [`Binfo::size_for`] bytes.
    fn decode(buf: &[u8], dat: bool, data: bool) -> Binfo {
        match (dat, data) {
            (false, true) => Binfo::DataV {
                vblocknr: VBlockNr(BinfoV::bi_vblocknr.u64(buf)),
                blkoff: FileBlk(BinfoV::bi_blkoff.u64(buf)),
            },
            (false, false) => Binfo::NodeV {
                vblocknr: VBlockNr(BinfoV::bi_vblocknr.u64(buf)),
            },
            (true, true) => Binfo::DataDat {
                blkoff: FileBlk(BinfoDat::bi_blkoff.u64(buf)),
            },
            (true, false) => Binfo::NodeDat {
                blkoff: FileBlk(BinfoDat::bi_blkoff.u64(buf)),
                level: BinfoDat::bi_level.u8(buf),
            },
        }
    }

    /// Encode into the first [`size`](Self::size) bytes of `out`.
    pub fn encode(&self, out: &mut [u8]) {
        match *self {
            Binfo::DataV { vblocknr, blkoff } => {
                BinfoV::bi_vblocknr.put_u64(out, vblocknr.0);
                BinfoV::bi_blkoff.put_u64(out, blkoff.0);
            }
            Binfo::NodeV { vblocknr } => BinfoV::bi_vblocknr.put_u64(out, vblocknr.0),
            Binfo::DataDat { blkoff } => BinfoDat::bi_blkoff.put_u64(out, blkoff.0),
            Binfo::NodeDat { blkoff, level } => {
                BinfoDat::bi_blkoff.put_u64(out, blkoff.0);
                BinfoDat::bi_level.put_u8(out, level);
                out[BinfoDat::bi_pad.range()].fill(0);
            }
        }
    }
}

/// `struct nilfs_binfo_v`'s layout: the record of a block of any file but
/// the DAT (a node's record is its first 8 bytes).
pub struct BinfoV;

layout!(BinfoV {
    bi_vblocknr: 0, 8;
    bi_blkoff: 8, 8;
});

/// `struct nilfs_binfo_dat`'s layout: the record of a DAT block (a data
/// block's record is its first 8 bytes).
pub struct BinfoDat;

layout!(BinfoDat {
    bi_blkoff: 0, 8;
    bi_level: 8, 1;
    bi_pad: 9, 7;
});

/// One file's records: its finfo and one binfo per block, data first.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileRecord {
    /// The finfo.
    pub finfo: Finfo,
    /// `finfo.nblocks` block records.
    pub binfos: Vec<Binfo>,
}

impl FileRecord {
    /// A record whose counts are taken from `binfos` (data records first).
    pub fn new(ino: Ino, cno: Cno, binfos: Vec<Binfo>) -> Self {
        let ndatablk = binfos.iter().filter(|b| b.is_data()).count() as u32;
        let finfo = Finfo {
            ino,
            cno,
            nblocks: binfos.len() as u32,
            ndatablk,
        };
        FileRecord { finfo, binfos }
    }

    /// Whether the binfos agree with the finfo: `nblocks` of them, the first
    /// `ndatablk` data and the rest nodes, in the DAT's forms iff ino is 3.
    /// Only such records survive an encode/decode round trip.
    pub fn check(&self) -> Result<()> {
        let f = &self.finfo;
        if self.binfos.len() != f.nblocks as usize || f.ndatablk > f.nblocks {
            return Err(Error::Invalid(format!(
                "file record of ino {}: {} binfos for nblocks {} ndatablk {}",
                f.ino,
                self.binfos.len(),
                f.nblocks,
                f.ndatablk
            )));
        }
        for (i, b) in self.binfos.iter().enumerate() {
            if b.is_data() != (i < f.ndatablk as usize) || b.is_dat() != f.is_dat() {
                return Err(Error::Invalid(format!(
                    "file record of ino {}: binfo {i} has the wrong form {b:?}",
                    f.ino
                )));
            }
        }
        Ok(())
    }
}

/// Where a payload block sits and what describes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BlockEntry<'a> {
    /// The file it belongs to.
    pub ino: Ino,
    /// Index of its file record in [`Summary::files`].
    pub file: usize,
    /// Its block record.
    pub binfo: &'a Binfo,
    /// Its block index within the log (0 = first summary block); add the
    /// log's start block for the physical address.
    pub index: u64,
}

/// A log's whole summary: the header and every file record.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Summary {
    /// The header.
    pub header: SegmentSummary,
    /// The file records, in on-disk order.
    pub files: Vec<FileRecord>,
}

/// The packing rule: a record of `size` bytes at cursor `off` starts there if
/// it fits in the rest of the current summary block, else at the next block.
fn place(off: usize, size: usize, bs: usize) -> usize {
    if off % bs + size > bs {
        off - off % bs + bs
    } else {
        off
    }
}

fn checked_bs(block_size: u32) -> usize {
    assert!(
        super::is_block_size(block_size.into()),
        "invalid NILFS block size {block_size}"
    );
    block_size as usize
}

/// Offset just past the last record when laying `files` out from `start`.
fn layout_end(start: usize, files: &[FileRecord], bs: usize) -> usize {
    let mut off = start;
    for f in files {
        off = place(off, Finfo::SIZE, bs) + Finfo::SIZE;
        for b in &f.binfos {
            off = place(off, b.size(), bs) + b.size();
        }
    }
    off
}

/// `ss_sumbytes` for a log holding `files`: the 64-byte header, then the
/// records packed by the block rule (what `nilfs_segctor_end_finfo` computes).
/// Saturates at `u32::MAX` for absurdly many records.
///
/// # Panics
/// If `block_size` is not a NILFS block size.
pub fn summary_bytes(files: &[FileRecord], block_size: u32) -> u32 {
    let bs = checked_bs(block_size);
    u32::try_from(layout_end(SegmentSummary::SIZE, files, bs)).unwrap_or(u32::MAX)
}

impl Summary {
    /// Decode and check a log summary. `buf` starts at the log's first block
    /// and must hold at least `ss_sumbytes` bytes; more is ignored.
    ///
    /// Checks, beyond the structure:
    /// - `ss_magic` (the kernel's first test in `nilfs_validate_log`);
    /// - `ss_bytes`, where the first record starts, is at least the 64-byte
    ///   header, 8-byte aligned and no more than `ss_sumbytes`
    ///   (nilfs-utils `nilfs_psegment_is_valid`) and lies in the first block
    ///   (the kernel's `nilfs_scan_dsync_log` assumes so);
    /// - `ss_sumbytes` ≤ `ss_nblocks * bs`, and the summary blocks plus the
    ///   super root (if `SS_SR`) fit in `ss_nblocks`;
    /// - per finfo, `fi_ndatablk` ≤ `fi_nblocks` (nilfs-utils
    ///   `nilfs_file_is_valid`), and the payload blocks of all files fit
    ///   between the summary blocks and the super root;
    /// - every record lies within `ss_sumbytes`.
    ///
    /// It does not check `ss_seq`, `ss_nblocks` against the segment size, or
    /// the checksums: those need the log's context ([`verify_log`]).
    pub fn decode(buf: &[u8], block_size: u32) -> Result<Summary> {
        if !super::is_block_size(block_size.into()) {
            return Err(Error::Invalid(format!(
                "invalid NILFS block size {block_size}"
            )));
        }
        let bs = block_size as usize;
        let header = SegmentSummary::decode(buf)?;
        let bad = |detail: String| Err(Error::corrupt(WHAT, detail));
        if header.magic != SEGSUM_MAGIC {
            return bad(format!("bad magic {:#010x}", header.magic));
        }
        let hdr = usize::from(header.bytes);
        let sumbytes = header.sumbytes as usize;
        if hdr < SegmentSummary::SIZE || hdr % 8 != 0 || hdr > bs || hdr > sumbytes {
            return bad(format!("header size {hdr} with ss_sumbytes {sumbytes}"));
        }
        if u64::from(header.sumbytes) > u64::from(header.nblocks) * bs as u64 {
            return bad(format!(
                "ss_sumbytes {sumbytes} exceeds {} blocks",
                header.nblocks
            ));
        }
        let reserved = header.nsumblk(block_size) + u32::from(header.has_super_root());
        let Some(capacity) = header.nblocks.checked_sub(reserved) else {
            return bad(format!(
                "{reserved} summary and super root blocks in a {}-block log",
                header.nblocks
            ));
        };
        need(buf, sumbytes, WHAT)?;

        let mut files = Vec::new();
        let mut off = hdr;
        let mut payload = 0u64;
        for i in 0..header.nfinfo {
            let at = place(off, Finfo::SIZE, bs);
            off = at + Finfo::SIZE;
            if off > sumbytes {
                return bad(format!(
                    "finfo {i} at byte {at} overruns ss_sumbytes {sumbytes}"
                ));
            }
            let finfo = Finfo::decode(&buf[at..off])?;
            if finfo.ndatablk > finfo.nblocks {
                return bad(format!(
                    "finfo {i}: ndatablk {} > nblocks {}",
                    finfo.ndatablk, finfo.nblocks
                ));
            }
            payload += u64::from(finfo.nblocks);
            if payload > u64::from(capacity) {
                return bad(format!(
                    "finfo {i}: {payload} payload blocks exceed the log's {capacity}"
                ));
            }
            let dat = finfo.is_dat();
            let mut binfos = Vec::with_capacity((finfo.nblocks as usize).min((sumbytes - off) / 8));
            for k in 0..finfo.nblocks {
                let data = k < finfo.ndatablk;
                let size = Binfo::size_for(dat, data);
                let at = place(off, size, bs);
                off = at + size;
                if off > sumbytes {
                    return bad(format!(
                        "finfo {i}: binfo {k} at byte {at} overruns ss_sumbytes {sumbytes}"
                    ));
                }
                binfos.push(Binfo::decode(&buf[at..off], dat, data));
            }
            files.push(FileRecord { finfo, binfos });
        }
        Ok(Summary { header, files })
    }

    /// The summary blocks: the header verbatim (checksums included), records
    /// laid out from `ss_bytes` (at least 64) by the packing rule, zeros
    /// elsewhere. The length is `ceil(ss_sumbytes / bs)` blocks, at least
    /// one, and more if the records need them (an inconsistent header is
    /// written as is rather than truncating records).
    ///
    /// # Panics
    /// If `block_size` is not a NILFS block size.
    pub fn encode(&self, block_size: u32) -> Vec<u8> {
        let bs = checked_bs(block_size);
        let start = usize::from(self.header.bytes).max(SegmentSummary::SIZE);
        let end = layout_end(start, &self.files, bs).max(self.header.sumbytes as usize);
        let mut out = vec![0u8; end.div_ceil(bs).max(1) * bs];
        self.header.encode(&mut out);
        let mut off = start;
        for f in &self.files {
            let at = place(off, Finfo::SIZE, bs);
            f.finfo.encode(&mut out[at..]);
            off = at + Finfo::SIZE;
            for b in &f.binfos {
                let at = place(off, b.size(), bs);
                b.encode(&mut out[at..]);
                off = at + b.size();
            }
        }
        out
    }

    /// Summary blocks of this log (see [`SegmentSummary::nsumblk`]).
    ///
    /// # Panics
    /// If `block_size` is not a NILFS block size.
    pub fn nsumblk(&self, block_size: u32) -> u32 {
        self.header.nsumblk(block_size)
    }

    /// Every payload block in log order with its position: the first sits
    /// right after the summary blocks, and each binfo describes the next one
    /// (as GC and `nilfs_scan_dsync_log` walk them).
    ///
    /// # Panics
    /// If `block_size` is not a NILFS block size.
    pub fn block_entries(&self, block_size: u32) -> impl Iterator<Item = BlockEntry<'_>> {
        let first = u64::from(self.nsumblk(block_size));
        self.files
            .iter()
            .enumerate()
            .flat_map(|(file, f)| f.binfos.iter().map(move |binfo| (file, f.finfo.ino, binfo)))
            .zip(first..)
            .map(|((file, ino, binfo), index)| BlockEntry {
                ino,
                file,
                binfo,
                index,
            })
    }

    /// Block index of the super root within the log, if the log has one.
    pub fn super_root_index(&self) -> Option<u64> {
        let n = u64::from(self.header.nblocks);
        (self.header.has_super_root() && n > 0).then(|| n - 1)
    }
}

/// `ss_sumsum`: `crc32_le(seed)` over log bytes 8..`sumbytes`, i.e. the
/// summary after the two checksum fields (`nilfs_segbuf_fill_in_segsum_crc`).
/// The range is clamped to `log`, and empty if `sumbytes` ≤ 8.
pub fn compute_sumsum(log: &[u8], seed: u32, sumbytes: u32) -> u32 {
    let end = (sumbytes as usize).min(log.len());
    crc32_le(seed, log.get(8..end).unwrap_or(&[]))
}

/// `ss_datasum`: `crc32_le(seed)` over log bytes 4.. to the end of `log`:
/// the summary blocks (`ss_sumsum` included), payload and super root
/// (`nilfs_segbuf_fill_in_data_crc`, checked by `nilfs_validate_log`).
pub fn compute_datasum(log: &[u8], seed: u32) -> u32 {
    crc32_le(seed, log.get(4..).unwrap_or(&[]))
}

/// Store both checksums in the header of `log` (the whole log, `ss_nblocks`
/// blocks): `ss_sumsum` first, then `ss_datasum`, which covers it. A super
/// root in the log must already be sealed.
///
/// # Panics
/// If `log` is shorter than the 64-byte header.
pub fn seal_log(log: &mut [u8], seed: u32) {
    assert!(
        log.len() >= SegmentSummary::SIZE,
        "log of {} bytes has no summary header",
        log.len()
    );
    let sumsum = compute_sumsum(log, seed, SegmentSummary::ss_sumbytes.u32(log));
    SegmentSummary::ss_sumsum.put_u32(log, sumsum);
    let datasum = compute_datasum(log, seed);
    SegmentSummary::ss_datasum.put_u32(log, datasum);
}

/// Check both checksums of `log`, which must be exactly the log: `ss_nblocks`
/// blocks of a NILFS block size. The kernel checks only `ss_datasum`
/// (`nilfs_validate_log`) and nilfs-utils only `ss_sumsum`
/// (`nilfs_psegment_is_valid`); a log must satisfy both. The error names
/// which one failed.
pub fn verify_log(log: &[u8], seed: u32) -> Result<()> {
    let h = SegmentSummary::decode(log)?;
    let n = h.nblocks as usize;
    let bs = log.len().checked_div(n).unwrap_or(0);
    if bs * n != log.len() || !super::is_block_size(bs as u64) {
        return Err(Error::corrupt(
            WHAT,
            format!(
                "{} bytes are not ss_nblocks {} whole blocks",
                log.len(),
                h.nblocks
            ),
        ));
    }
    if h.sumbytes < 8 || h.sumbytes as usize > log.len() {
        return Err(Error::corrupt(
            WHAT,
            format!("ss_sumbytes {} outside the log", h.sumbytes),
        ));
    }
    let sumsum = compute_sumsum(log, seed, h.sumbytes);
    let datasum = compute_datasum(log, seed);
    let mut failed = Vec::new();
    if sumsum != h.sumsum {
        failed.push(format!(
            "summary checksum: stored {:#010x}, computed {sumsum:#010x}",
            h.sumsum
        ));
    }
    if datasum != h.datasum {
        failed.push(format!(
            "data checksum: stored {:#010x}, computed {datasum:#010x}",
            h.datasum
        ));
    }
    if failed.is_empty() {
        Ok(())
    } else {
        Err(Error::corrupt(WHAT, failed.join("; ")))
    }
}
