//! The data-only path ([`Stage::Dsync`], `nilfs_construct_dsync_segment`
//! in `SC_LSEG_DSYNC` mode): the dirty data blocks of one regular file in
//! logs flagged `SS_SYNDT`, without a checkpoint. Their new DAT entries,
//! B-tree nodes and inode stay dirty in memory for the next full
//! construction; after a crash, roll-forward replays the blocks.

use std::collections::BTreeSet;

use super::complete::write_checked;
use super::layout::{FileTag, Layout};
use super::propagate::Nodes;
use super::write::LogPieces;
use super::{has_delta, Segs};
use crate::format::segsum::{Binfo, SS_SYNDT};
use crate::format::{FileBlk, Ino, VBlockNr};
use crate::fs::Fs;
use crate::Result;

impl<'a> Fs<'a> {
    /// Write file `i`'s dirty data blocks as a data-only construction;
    /// one that fails is rolled back, as a full one is ([`super::abort`]).
    pub(crate) fn construct_dsync(&mut self, i: Ino) -> Result<()> {
        let save = self.savepoint(Some(i));
        match self.try_construct_dsync(i) {
            Ok(()) => {
                self.release(save);
                Ok(())
            }
            Err(e) => {
                self.roll_back(save);
                Err(e)
            }
        }
    }

    fn try_construct_dsync(&mut self, i: Ino) -> Result<()> {
        let cno = self.cpfile.file().next_cno();
        let bs = self.bs;
        let ctime = self.now;
        // Propagate: each dirty block gets its new virtual block number now;
        // the nodes stay dirty, unassigned, for the next construction.
        let (keys, out) = self.propagate_user_file(i, cno, Nodes::Leave)?;
        let blocks: Vec<(u64, VBlockNr)> = keys
            .iter()
            .zip(&out.ptrs)
            .map(|(&k, &v)| (k, VBlockNr(v)))
            .collect();

        let tag = FileTag { ino: i, cno };
        let mut layout = Layout::begin(
            self.geo,
            &mut self.cursor,
            &mut Segs(self.sufile.file_mut()),
            ctime,
            cno,
            false,
            true,
        )?;
        layout.set_base_flags(SS_SYNDT);
        let mut nadd = 1usize;
        loop {
            let mut full = false;
            for (t, &(key, v)) in blocks.iter().enumerate() {
                let b = Binfo::DataV {
                    vblocknr: v,
                    blkoff: FileBlk(key),
                };
                if layout.add_block(tag, b, t as u64).is_err() {
                    full = true;
                    break;
                }
            }
            if !full {
                layout.end_file(tag);
                layout.end_logical_segment(SS_SYNDT);
                break;
            }
            layout.extend(&mut Segs(self.sufile.file_mut()), nadd)?;
            nadd = (nadd * 2).min(64);
            layout.restart(true);
        }
        let (plans, cursor) = layout.finish(&mut Segs(self.sufile.file_mut()))?;
        self.check_reused_segments(&plans)?;
        // nilfs_segctor_update_segusage runs for data-only logs too: the
        // segments' usage (in memory until the next checkpoint) says they
        // hold blocks written now, so the cleaner neither picks them as
        // the oldest nor frees them as empty.
        for p in &plans {
            self.sufile
                .file_mut()
                .set_segment_usage(p.segnum, p.live_blocks as u32, ctime)?;
        }

        // Assign (the DAT entries start at the blocks' addresses) and write,
        // log by log.
        let f = self.inodes.loaded(i);
        for p in &plans {
            for &(t, pbn) in &p.payload {
                let (_, v) = blocks[t as usize];
                self.dat.file_mut().start(v, cno, pbn)?;
            }
            let content = |t: u64| {
                let (key, _) = blocks.get(usize::try_from(t).ok()?)?;
                f.dirty.get(key).map(|d| &d[..])
            };
            let log = LogPieces::build(p, content, None, bs, self.sb.crc_seed)?;
            write_checked(self.dev, p, &log, bs, self.sb.crc_seed)?;
        }
        self.dev.flush()?;

        // Complete: no checkpoint; the file's inode (its bmap, times) is
        // still dirty for the next one, and NILFS_I_DIRTY stays set: only a
        // full construction's file stage clears it
        // (nilfs_segctor_collect_blocks), so a later fsync still makes a
        // checkpoint.
        self.cursor = cursor;
        // nilfs_segctor_complete_write: a data-only log is not the
        // cleaner's, so it moves ns_nongc_ctime as well as ns_ctime.
        self.nongc_ctime = ctime;
        self.ctime = ctime;
        self.sc.have_delta |= plans.iter().any(|p| has_delta(p, &BTreeSet::new()));
        let f = self.inodes.loaded_mut(i);
        for (key, _) in &blocks {
            f.dirty.remove(key);
        }
        f.inode_dirty = true;
        self.inodes.touch(i);
        Ok(())
    }
}
