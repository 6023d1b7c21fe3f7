//! Log layout: where each collected block goes, which logs a construction
//! writes, and what their summaries say — the segment buffer bookkeeping of
//! the kernel's segment constructor (fs/nilfs2/segment.c:
//! `nilfs_segctor_begin_construction`, `_extend_segments`,
//! `_reset_segment_buffer`, `_feed_segment`, `_add_file_block`,
//! `_begin_finfo`/`_end_finfo`, `_add_super_root`, `_truncate_segments`,
//! and segbuf.c: `nilfs_segbuf_map`, `_map_cont`, `_reset`,
//! `_extend_segsum`).
//!
//! A construction owns one or more segment buffers, one per full segment it
//! writes into; each becomes one log. Blocks are added in collection order;
//! when the current buffer is full the next one is used, and when the last
//! one is full the caller hears [`Full`] and decides — as
//! `nilfs_segctor_collect` does — whether to extend the construction by
//! more segments and collect again, or to write what it has. Disk addresses
//! are only fixed at [`Layout::finish`], because summary blocks may still be
//! added in front of the payload until then (`nilfs_segctor_assign`).
//!
//! This module does not know what the blocks contain or how segments are
//! allocated; the caller supplies a [`SegmentSource`].

use crate::format::segsum::{
    Binfo, FileRecord, Finfo, SegmentSummary, SS_GC, SS_LOGBGN, SS_LOGEND, SS_SR,
};
use crate::format::SegGeometry;
use crate::format::{BlockNr, Cno, Ino, SegNum, Seq, PSEG_MIN_BLOCKS};
use crate::Result;

/// The writer's position between constructions: the kernel's `ns_segnum`,
/// `ns_pseg_offset`, `ns_seg_seq` and `ns_nextnum`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cursor {
    /// The segment the next log goes into.
    pub segnum: SegNum,
    /// Blocks already used in it, from its start block.
    pub pseg_offset: u64,
    /// Its sequence number.
    pub seq: Seq,
    /// The segment already allocated to follow it.
    pub nextnum: SegNum,
}

impl Cursor {
    /// The current and next segments (`nilfs_segment_is_active`'s pair).
    pub fn writer_segments(&self) -> [SegNum; 2] {
        [self.segnum, self.nextnum]
    }
}

/// Segment allocation, as the sufile provides it.
pub trait SegmentSource {
    /// `nilfs_sufile_alloc`: a clean segment, now dirty.
    fn alloc(&mut self) -> Result<SegNum>;
    /// `nilfs_sufile_free`: give back a segment allocated but not used.
    fn free(&mut self, segnum: SegNum) -> Result<()>;
    /// `nilfs_sufile_mark_dirty`: the segment's usage entry will be written.
    fn mark_dirty(&mut self, segnum: SegNum) -> Result<()>;
}

/// The last segment buffer is full (the kernel's internal `-E2BIG`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Full;

/// One segment buffer: a log under construction.
#[derive(Clone, Debug)]
pub struct SegBuf {
    /// Its full segment.
    pub segnum: SegNum,
    /// First block of that segment.
    pub fseg_start: BlockNr,
    /// Last block of that segment.
    pub fseg_end: BlockNr,
    /// First block of the log.
    pub pseg_start: BlockNr,
    /// Blocks from the log start to the segment end.
    pub rest_blocks: u64,
    /// `ss_seq`.
    pub seq: Seq,
    /// The segment named by `ss_next`.
    pub nextnum: SegNum,
    /// `ss_flags`.
    pub flags: u16,
    /// Blocks in the log so far: summary blocks, payload and super root.
    pub nblocks: u64,
    /// Summary blocks.
    pub nsumblk: u64,
    /// `ss_sumbytes`.
    pub sumbytes: u32,
    /// The file records, complete ones only.
    pub files: Vec<FileRecord>,
    /// The caller's tags of the payload blocks, in order.
    pub payload: Vec<u64>,
    /// Whether the last block is a super root.
    pub super_root: bool,
}

impl SegBuf {
    /// An empty buffer for a log that starts at `pseg_start` in segment
    /// `segnum`, which spans `fseg` (first and last block).
    fn empty(
        segnum: SegNum,
        (fseg_start, fseg_end): (BlockNr, BlockNr),
        pseg_start: BlockNr,
        seq: Seq,
        nextnum: SegNum,
    ) -> SegBuf {
        SegBuf {
            segnum,
            fseg_start,
            fseg_end,
            pseg_start,
            // Saturating: segment 0 holds nothing when a damaged
            // s_first_data_block lies past it.
            rest_blocks: (fseg_end.0 + 1).saturating_sub(pseg_start.0),
            seq,
            nextnum,
            flags: 0,
            nblocks: 0,
            nsumblk: 0,
            sumbytes: 0,
            files: Vec::new(),
            payload: Vec::new(),
            super_root: false,
        }
    }
}

/// Where a summary record is written: its offset in the current summary
/// block (the kernel's `nilfs_segsum_pointer` also holds the block's
/// buffer head; the count of summary blocks is the buffer's `nsumblk`).
#[derive(Clone, Copy, Debug, Default)]
struct SumPtr {
    offset: u64,
}

/// The file whose blocks are being added.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FileTag {
    /// Inode number.
    pub ino: Ino,
    /// `fi_cno`: the checkpoint under construction, the original checkpoint
    /// of a block moved by GC, or 0 for the DAT, cpfile and sufile.
    pub cno: Cno,
}

/// The logs of one construction.
pub struct Layout {
    geo: SegGeometry,
    ctime: u64,
    cno: Cno,
    gc: bool,
    /// Flags every log of this construction carries (`SS_SYNDT` for a
    /// data-only construction).
    base_flags: u16,
    bufs: Vec<SegBuf>,
    cur: usize,
    finfo_ptr: SumPtr,
    binfo_ptr: SumPtr,
    blk_cnt: u32,
    datablk_cnt: u32,
    open: Vec<Binfo>,
}

/// A log ready to be written: its summary header and records, where every
/// payload block goes, and where the super root goes.
#[derive(Clone, Debug)]
pub struct LogPlan {
    /// The summary header; checksums are filled in when the log is sealed.
    pub header: SegmentSummary,
    /// The file records.
    pub files: Vec<FileRecord>,
    /// First block of the log.
    pub start: BlockNr,
    /// (caller's tag, disk block) of each payload block, in order.
    pub payload: Vec<(u64, BlockNr)>,
    /// The super root's block, if the log has one.
    pub super_root: Option<BlockNr>,
    /// Its segment.
    pub segnum: SegNum,
    /// `su_nblocks` for its segment after the write: blocks from the
    /// segment start to the end of this log (`nilfs_segctor_update_segusage`).
    pub live_blocks: u64,
}

impl Layout {
    /// `nilfs_segctor_begin_construction` for a construction that starts a
    /// new run of logs at `cursor` (`continue_from` is the last log of an
    /// earlier, unclosed construction in the same logical segment, if any).
    /// `logbgn`: this construction opens a logical segment.
    #[allow(clippy::too_many_arguments)]
    pub fn begin(
        geo: SegGeometry,
        cursor: &mut Cursor,
        segs: &mut dyn SegmentSource,
        ctime: u64,
        cno: Cno,
        gc: bool,
        logbgn: bool,
    ) -> Result<Layout> {
        let mut alloc = false;
        let (mut fseg_start, mut fseg_end) = geo.range(cursor.segnum);
        let mut pseg_start = fseg_start.0 + cursor.pseg_offset;
        if fseg_end.0 + 1 - pseg_start.min(fseg_end.0 + 1) < u64::from(PSEG_MIN_BLOCKS) {
            // nilfs_shift_to_next_segment: the rest of this segment is too
            // small for a log.
            cursor.segnum = cursor.nextnum;
            cursor.pseg_offset = 0;
            cursor.seq = Seq(cursor.seq.0 + 1);
            (fseg_start, fseg_end) = geo.range(cursor.segnum);
            pseg_start = fseg_start.0;
        }
        if cursor.segnum == cursor.nextnum {
            // Starting at the head of a new full segment: allocate a next.
            alloc = true;
        }
        segs.mark_dirty(cursor.segnum)?;
        let nextnum = if alloc { segs.alloc()? } else { cursor.nextnum };
        let buf = SegBuf::empty(
            cursor.segnum,
            (fseg_start, fseg_end),
            BlockNr(pseg_start),
            cursor.seq,
            nextnum,
        );
        let mut l = Layout {
            geo,
            ctime,
            cno,
            gc,
            base_flags: 0,
            bufs: vec![buf],
            cur: 0,
            finfo_ptr: SumPtr::default(),
            binfo_ptr: SumPtr::default(),
            blk_cnt: 0,
            datablk_cnt: 0,
            open: Vec::new(),
        };
        l.restart(logbgn);
        Ok(l)
    }

    /// `nilfs_segctor_extend_segments`: add `n` more segment buffers, each
    /// in the segment the previous one names as next, allocating a new
    /// next for each.
    pub fn extend(&mut self, segs: &mut dyn SegmentSource, n: usize) -> Result<()> {
        let last = self.bufs.last().expect("a construction has a buffer");
        segs.mark_dirty(last.nextnum)?;
        for _ in 0..n {
            let prev = self.bufs.last().expect("non-empty");
            let segnum = prev.nextnum;
            let (fseg_start, fseg_end) = self.geo.range(segnum);
            let seq = Seq(prev.seq.0 + 1);
            let nextnum = segs.alloc()?;
            self.bufs.push(SegBuf::empty(
                segnum,
                (fseg_start, fseg_end),
                fseg_start,
                seq,
                nextnum,
            ));
        }
        Ok(())
    }

    /// Drop everything collected and start again from the first buffer
    /// (the retry of `nilfs_segctor_collect` after extending).
    pub fn restart(&mut self, logbgn: bool) {
        self.cur = 0;
        for b in &mut self.bufs {
            b.files.clear();
            b.payload.clear();
            b.super_root = false;
        }
        self.reset_current();
        if logbgn {
            // NILFS_ST_INIT assigns the flags outright, dropping SS_GC.
            self.bufs[0].flags = SS_LOGBGN | self.base_flags;
        }
    }

    /// `nilfs_segctor_reset_segment_buffer` + `nilfs_segbuf_reset`.
    fn reset_current(&mut self) {
        let gc = self.gc;
        let base = self.base_flags;
        let b = &mut self.bufs[self.cur];
        b.nblocks = 1;
        b.nsumblk = 1;
        b.flags = if gc { SS_GC } else { 0 } | base;
        b.sumbytes = SegmentSummary::SIZE as u32;
        b.files.clear();
        b.payload.clear();
        b.super_root = false;
        let start = SumPtr {
            offset: SegmentSummary::SIZE as u64,
        };
        self.finfo_ptr = start;
        self.binfo_ptr = start;
        self.blk_cnt = 0;
        self.datablk_cnt = 0;
        self.open.clear();
    }

    fn bs(&self) -> u64 {
        u64::from(self.geo.block_size)
    }

    /// `nilfs_segctor_map_segsum_entry`: reserve `bytes` at `p`, moving to
    /// the next summary block when they do not fit.
    fn map_entry(bs: u64, p: &mut SumPtr, bytes: u64) {
        if p.offset + bytes > bs {
            p.offset = 0;
        }
        p.offset += bytes;
    }

    /// `nilfs_segctor_feed_segment`: move to the next buffer, or report Full.
    fn feed(&mut self) -> std::result::Result<(), Full> {
        if self.cur + 1 == self.bufs.len() {
            return Err(Full);
        }
        self.cur += 1;
        self.reset_current();
        Ok(())
    }

    /// Add one block of `file` (`nilfs_segctor_add_file_block`). `tag` is the
    /// caller's name for the block; data blocks of a file come before its
    /// node blocks, as the kernel collects them.
    pub fn add_block(
        &mut self,
        file: FileTag,
        binfo: Binfo,
        tag: u64,
    ) -> std::result::Result<(), Full> {
        let bs = self.bs();
        let size = binfo.size() as u64;
        loop {
            let first = self.blk_cnt == 0;
            let required = self.binfo_ptr.offset + size + if first { 24 } else { 0 } > bs;
            let b = &self.bufs[self.cur];
            if b.nblocks + u64::from(required) + 1 > b.rest_blocks {
                self.end_file(file);
                self.feed()?;
                continue;
            }
            if required {
                // nilfs_segbuf_extend_segsum
                let b = &mut self.bufs[self.cur];
                b.nsumblk += 1;
                b.nblocks += 1;
            }
            if first {
                // nilfs_segctor_begin_finfo: the finfo's place is reserved here.
                self.binfo_ptr = self.finfo_ptr;
                Self::map_entry(bs, &mut self.binfo_ptr, 24);
            }
            Self::map_entry(bs, &mut self.binfo_ptr, size);
            let b = &mut self.bufs[self.cur];
            b.nblocks += 1;
            b.payload.push(tag);
            self.blk_cnt += 1;
            if binfo.is_data() {
                self.datablk_cnt += 1;
            }
            self.open.push(binfo);
            return Ok(());
        }
    }

    /// `nilfs_segctor_end_finfo`: close the record of `file` in the current
    /// buffer (nothing if it has no block there).
    pub fn end_file(&mut self, file: FileTag) {
        if self.blk_cnt == 0 {
            return;
        }
        let bs = self.bs();
        let b = &mut self.bufs[self.cur];
        b.files.push(FileRecord {
            finfo: Finfo {
                ino: file.ino,
                cno: file.cno,
                nblocks: self.blk_cnt,
                ndatablk: self.datablk_cnt,
            },
            binfos: std::mem::take(&mut self.open),
        });
        b.sumbytes = (self.binfo_ptr.offset + bs * (b.nsumblk - 1)) as u32;
        self.finfo_ptr = self.binfo_ptr;
        self.blk_cnt = 0;
        self.datablk_cnt = 0;
    }

    /// `nilfs_segctor_add_super_root`, then `LOGEND` on the current buffer.
    pub fn add_super_root(&mut self) -> std::result::Result<(), Full> {
        let b = &self.bufs[self.cur];
        if b.nblocks >= b.rest_blocks {
            self.feed()?;
        }
        let b = &mut self.bufs[self.cur];
        b.nblocks += 1;
        b.super_root = true;
        b.flags |= SS_SR | SS_LOGEND;
        Ok(())
    }

    /// Flags for every log of this construction from now on (the data-only
    /// construction's `SS_SYNDT`, which recovery requires on each of its
    /// logs); applies to the current buffer too.
    pub fn set_base_flags(&mut self, flags: u16) {
        self.base_flags = flags;
        self.bufs[self.cur].flags |= flags;
    }

    /// End a logical segment without a super root (`LOGEND` alone, as a
    /// data-sync construction does).
    pub fn end_logical_segment(&mut self, extra_flags: u16) {
        self.bufs[self.cur].flags |= SS_LOGEND | extra_flags;
    }

    /// Blocks collected so far over all buffers (`sc_nblk_this_inc`).
    pub fn nblocks(&self) -> u64 {
        self.bufs[..=self.cur].iter().map(|b| b.nblocks).sum()
    }

    /// The buffers in use.
    pub fn bufs(&self) -> &[SegBuf] {
        &self.bufs[..=self.cur]
    }

    /// `nilfs_segctor_truncate_segments` and `nilfs_segctor_assign`: free
    /// the next segments of unused buffers, fix every block's address, and
    /// return the logs with the writer's new cursor
    /// (`nilfs_set_next_segment`).
    pub fn finish(mut self, segs: &mut dyn SegmentSource) -> Result<(Vec<LogPlan>, Cursor)> {
        for unused in self.bufs.drain(self.cur + 1..) {
            segs.free(unused.nextnum)?;
        }
        let bs = self.bs();
        let mut plans = Vec::with_capacity(self.bufs.len());
        for b in &self.bufs {
            let first_payload = b.pseg_start.0 + b.nsumblk;
            let payload = b
                .payload
                .iter()
                .enumerate()
                .map(|(i, &t)| (t, BlockNr(first_payload + i as u64)))
                .collect();
            let header = SegmentSummary {
                datasum: 0,
                sumsum: 0,
                magic: crate::format::SEGSUM_MAGIC,
                bytes: SegmentSummary::SIZE as u16,
                flags: b.flags,
                seq: b.seq,
                create: self.ctime,
                next: self.geo.range(b.nextnum).0,
                nblocks: b.nblocks as u32,
                nfinfo: b.files.len() as u32,
                sumbytes: b.sumbytes,
                pad: 0,
                cno: self.cno,
            };
            debug_assert!(u64::from(b.sumbytes) <= b.nsumblk * bs);
            plans.push(LogPlan {
                header,
                files: b.files.clone(),
                start: b.pseg_start,
                payload,
                super_root: b
                    .super_root
                    .then_some(BlockNr(b.pseg_start.0 + b.nblocks - 1)),
                segnum: b.segnum,
                live_blocks: b.nblocks + (b.pseg_start.0 - b.fseg_start.0),
            });
        }
        let last = self.bufs.last().expect("non-empty");
        let cursor = Cursor {
            segnum: last.segnum,
            pseg_offset: last.pseg_start.0 - last.fseg_start.0 + last.nblocks,
            seq: last.seq,
            nextnum: last.nextnum,
        };
        Ok((plans, cursor))
    }
}
