//! Collection (`nilfs_segctor_collect`, `nilfs_segctor_collect_blocks`):
//! every block of the construction, stage by stage, into the segment
//! buffers of a [`Layout`]; when the last buffer is full, the construction
//! is extended by more segments and collected again.

use std::collections::BTreeSet;

use super::layout::{FileTag, Full, Layout};
use super::{Construction, Segs, Src, Stage};
use crate::bmap::write::{Bmap, LeafHint};
use crate::format::segsum::Binfo;
use crate::format::{ino, Cno, FileBlk, Ino, SegNum, VBlockNr};
use crate::fs::Fs;
use crate::metafile::record_cno;
use crate::{Error, Result};

/// Every block of a stage as (file tag, binfo, source), in order.
type Collected = Vec<(FileTag, Binfo, Src)>;

impl<'a> Fs<'a> {
    /// Lay the construction out, extending as `nilfs_segctor_collect`
    /// does, up to [`Stage::SuperRoot`].
    pub(super) fn collect_construction(&mut self, c: &mut Construction) -> Result<()> {
        let mut layout = Layout::begin(
            self.geo,
            &mut self.cursor,
            &mut Segs(self.sufile.file_mut()),
            c.ctime,
            c.cno,
            c.gc.is_some(),
            true,
        )?;
        // Which segments a construction takes, and in what order, is the
        // kernel's: `nilfs_segctor_collect` extends only when the stages
        // from the checkpoint file on do not fit, by 1, 2, 4, ... segments
        // a retry. A fill-up before them ends the current log instead, and
        // the next pass of `nilfs_segctor_do_construct` goes on in one more
        // segment (`nilfs_segctor_begin_construction` allocates it). Any
        // segment taken and left unused is freed again
        // (`nilfs_segctor_truncate_segments`), but `sh_last_alloc` has
        // moved past it, and the next construction's segments come after
        // it: so no more may be taken than the kernel would take. Ours
        // collects once into every segment; a large construction takes up
        // front the segments its data blocks fill for certain (a lower
        // bound, so the same ones), and the retry below takes the rest one
        // by one, then doubling at the tail. (The sufile's blocks for them
        // must be dirty before its stage is propagated.)
        let mut nadd = 1usize;
        let rest = layout.bufs()[0].rest_blocks;
        let surely = self.segments_filled_for_certain(&c.order, rest);
        // Never more than there are: past them the retry takes one at a
        // time, so that only a real shortage is ENOSPC.
        let clean = self.ncleansegs()?;
        let surely = surely.min(usize::try_from(clean).unwrap_or(usize::MAX));
        if surely > 0 {
            layout.extend(&mut Segs(self.sufile.file_mut()), surely)?;
            layout.restart(true);
        }
        // NILFS_ST_SUFILE of a GC construction frees the cleaned segments
        // (nilfs_free_segments) after this attempt's segments were
        // allocated, so none of them can be reused by it.
        let freesegs: Vec<SegNum> = c.gc.as_ref().map_or(Vec::new(), |g| g.segnums.clone());
        self.sufile.file_mut().free_segments(&freesegs)?;
        let mut cpfile_done = false;
        let mut sufile_done = BTreeSet::new();
        loop {
            let dat_keys = self.propagate_late_stages(c, &mut cpfile_done, &mut sufile_done)?;
            c.srcs.clear();
            match self.collect_blocks(c, &mut layout, &dat_keys)? {
                Ok(()) => break,
                Err(Full) => {
                    // Cancel the frees (nilfs_sufile_cancel_freev), so
                    // that no extension takes a cleaned segment, extend,
                    // free again.
                    let sufile = self.sufile.file_mut();
                    for &s in &freesegs {
                        sufile.cancel_free(s)?;
                    }
                    if c.stage < Stage::Cpfile {
                        // A fill-up the kernel writes out as a log, going
                        // on in the next segment with a fresh retry count.
                        layout.extend(&mut Segs(sufile), 1)?;
                        nadd = 1;
                    } else {
                        // nilfs_segctor_collect's retry (SC_MAX_SEGDELTA).
                        layout.extend(&mut Segs(sufile), nadd)?;
                        nadd = (nadd * 2).min(64);
                    }
                    sufile.free_segments(&freesegs)?;
                    layout.restart(true);
                }
            }
        }
        let (plans, cursor) = layout.finish(&mut Segs(self.sufile.file_mut()))?;
        self.check_reused_segments(&plans)?;
        c.plans = plans;
        c.cursor = Some(cursor);
        Ok(())
    }

    /// How many segments past the current one (with `rest` blocks left)
    /// the construction's data blocks fill for certain: every dirty data
    /// block of a collected file is written, and a segment holds no more
    /// blocks than it has (summaries, B-tree nodes and the metadata files
    /// only add to them).
    fn segments_filled_for_certain(&self, order: &[Ino], rest: u64) -> usize {
        let data: u64 = order
            .iter()
            .map(|&i| self.inodes.loaded(i).dirty.len() as u64)
            .sum();
        let beyond = data.saturating_sub(rest);
        usize::try_from(beyond.div_ceil(self.geo.blocks_per_segment)).unwrap_or(usize::MAX)
    }

    /// Add every block of the construction to `layout`, stage by stage
    /// (`nilfs_segctor_collect_blocks`). `Ok(Err(Full))` when the last
    /// segment buffer is full.
    fn collect_blocks(
        &mut self,
        c: &mut Construction,
        layout: &mut Layout,
        dat_keys: &[u64],
    ) -> Result<std::result::Result<(), Full>> {
        let mut blocks: Collected = Vec::new();
        for stage in Stage::COLLECTED {
            c.stage = stage;
            match stage {
                Stage::Gc => collect_gc(c, &mut blocks),
                Stage::File => {
                    for &i in &c.order {
                        let f = self.inodes.loaded_mut(i);
                        let keys: Vec<u64> = f.dirty.keys().copied().collect();
                        let tag = FileTag { ino: i, cno: c.cno };
                        collect_virtual(tag, &mut f.bmap, &keys, &mut blocks)?;
                    }
                }
                Stage::Ifile | Stage::Cpfile | Stage::Sufile => {
                    let m = match stage {
                        Stage::Ifile => self.ifile.parts(),
                        Stage::Cpfile => self.cpfile.parts(),
                        _ => self.sufile.parts(),
                    };
                    let keys = m.mdt.dirty_blocks();
                    let tag = FileTag {
                        ino: m.ino,
                        cno: record_cno(m.ino, c.cno),
                    };
                    collect_virtual(tag, m.bmap, &keys, &mut blocks)?;
                }
                Stage::Dat => collect_dat(self.dat.bmap(), dat_keys, &mut blocks),
                Stage::SuperRoot => {
                    // Laid out at once: the stage a fill-up happened in is
                    // the stage of the block that did not fit (the
                    // kernel's stage counter when nilfs_segctor_collect
                    // sees -E2BIG), or the super root's own.
                    if let Err((full, at)) = feed(layout, blocks, &mut c.srcs) {
                        c.stage = at;
                        return Ok(Err(full));
                    }
                    return Ok(layout.add_super_root());
                }
                Stage::Init | Stage::Dsync | Stage::Done => unreachable!("not a collected stage"),
            }
        }
        unreachable!("the super root stage ends the collection")
    }
}

/// `NILFS_ST_GC`: the GC inodes' blocks, each under its own checkpoint
/// number (`nilfs_segctor_end_finfo` uses `i_cno` for GC inodes).
fn collect_gc(c: &Construction, out: &mut Collected) {
    let moved = c.gc.as_ref().map_or(&[][..], |g| g.moved.blocks());
    for (n, b) in moved.iter().enumerate() {
        let tag = FileTag {
            ino: b.ino,
            cno: b.cno,
        };
        let binfo = match b.offset {
            Some(off) => Binfo::DataV {
                vblocknr: b.vblocknr,
                blkoff: FileBlk(off),
            },
            None => Binfo::NodeV {
                vblocknr: b.vblocknr,
            },
        };
        out.push((tag, binfo, Src::Gc(n)));
    }
}

/// A virtually mapped file's propagated data blocks `keys`, then its dirty
/// nodes (`nilfs_segctor_scan_file`: data buffers before node buffers).
fn collect_virtual(tag: FileTag, bmap: &mut Bmap, keys: &[u64], out: &mut Collected) -> Result<()> {
    let mut hint = LeafHint::default();
    for &key in keys {
        let v = propagated_ptr(bmap, key, &mut hint)?;
        out.push((
            tag,
            Binfo::DataV {
                vblocknr: VBlockNr(v),
                blkoff: FileBlk(key),
            },
            Src::Data(tag.ino, key, VBlockNr(v)),
        ));
    }
    for dn in bmap.dirty_nodes() {
        let (_, _, ptr) = bmap.node_info(dn.id).expect("segctor: dirty node exists");
        out.push((
            tag,
            Binfo::NodeV {
                vblocknr: VBlockNr(ptr),
            },
            Src::Node(tag.ino, dn.id),
        ));
    }
    Ok(())
}

/// `NILFS_ST_DAT`: the DAT's dirty blocks and nodes, named by offset (and
/// level) since their pointers are the addresses being chosen.
fn collect_dat(bmap: &Bmap, keys: &[u64], out: &mut Collected) {
    let tag = FileTag {
        ino: ino::DAT,
        cno: Cno(0),
    };
    for &key in keys {
        out.push((
            tag,
            Binfo::DataDat {
                blkoff: FileBlk(key),
            },
            Src::DatData(key),
        ));
    }
    for dn in bmap.dirty_nodes() {
        out.push((
            tag,
            Binfo::NodeDat {
                blkoff: FileBlk(dn.first_key),
                level: dn.level,
            },
            Src::Node(ino::DAT, dn.id),
        ));
    }
}

/// Feed the collected blocks to the layout, closing each file's record
/// when the file changes (`nilfs_segctor_begin_finfo`/`_end_finfo`).
fn feed(
    layout: &mut Layout,
    blocks: Collected,
    srcs: &mut Vec<Src>,
) -> std::result::Result<(), (Full, Stage)> {
    let mut prev: Option<FileTag> = None;
    for (tag, binfo, s) in blocks {
        if let Some(p) = prev.filter(|&p| p != tag) {
            layout.end_file(p);
        }
        prev = Some(tag);
        srcs.push(s);
        layout
            .add_block(tag, binfo, srcs.len() as u64 - 1)
            .map_err(|full| (full, stage_of(tag)))?;
    }
    if let Some(p) = prev {
        layout.end_file(p);
    }
    Ok(())
}

/// The stage that collects a block of `tag`'s file (the GC stage's blocks
/// count as the file stage's: both come before the checkpoint file).
fn stage_of(tag: FileTag) -> Stage {
    match tag.ino {
        ino::IFILE => Stage::Ifile,
        ino::CPFILE => Stage::Cpfile,
        ino::SUFILE => Stage::Sufile,
        ino::DAT => Stage::Dat,
        _ => Stage::File,
    }
}

/// The pointer a propagated mapping holds for `key` (every node on its
/// path is in memory once propagated); `hint` carries the level-1 node
/// from the last key of an ascending run of one file's keys.
pub(super) fn propagated_ptr(bmap: &mut Bmap, key: u64, hint: &mut LeafHint) -> Result<u64> {
    bmap.lookup_in_memory_from(key, hint)?
        .ok_or_else(|| Error::Invalid(format!("propagated block {key} is not mapped")))
}
