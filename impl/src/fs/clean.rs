//! The mounted file system's side of cleaning: the ioctls the cleaner
//! reads through (`GET_SUINFO`, `GET_SUSTAT`, `GET_VINFO`, `GET_BDESCS`,
//! `GET_CPINFO`) and `nilfs_clean_segments`, which prepares a cleaning
//! request and runs the GC construction.

use super::Fs;
use crate::bmap::DiskNodes;
use crate::dat::Dat;
use crate::format::dat::DatEntry;
use crate::format::sufile::segment_is_active;
use crate::format::sufile::SegmentUsage;
use crate::format::{Cno, SegNum, Seq, VBlockNr};
use crate::gc::{Bdesc, CleanArgs, MovedBlocks};
use crate::metafile::{MetaParts, MetaStore, CRATE};
use crate::segctor::GcWork;
use crate::{Errno, Error, Result};

/// `struct nilfs_sustat` (`NILFS_IOCTL_GET_SUSTAT`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SuStat {
    pub nsegs: u64,
    pub ncleansegs: u64,
    pub ndirtysegs: u64,
    /// `ss_ctime`: the last log.
    pub ctime: u64,
    /// `ss_nongc_ctime`: the last log not written by the cleaner.
    pub nongc_ctime: u64,
    /// `ss_prot_seq`: segments with this sequence number or later must not
    /// be reclaimed (the older super block's `s_last_seq`).
    pub prot_seq: Seq,
}

impl<'a> Fs<'a> {
    /// `NILFS_IOCTL_GET_SUSTAT`.
    pub fn sustat(&mut self) -> Result<SuStat> {
        let h = self.sufile.file_mut().header()?;
        Ok(SuStat {
            nsegs: self.sufile.file().nsegments(),
            ncleansegs: h.ncleansegs,
            ndirtysegs: h.ndirtysegs,
            ctime: self.ctime,
            nongc_ctime: self.nongc_ctime,
            prot_seq: self.sbw.prot_seq(),
        })
    }

    /// `NILFS_IOCTL_GET_SUINFO`: up to `max` segment usages from `from`,
    /// ACTIVE for the log writer's current and next segments.
    pub fn suinfo(&mut self, from: SegNum, max: usize) -> Result<Vec<SegmentUsage>> {
        let writer = self.cursor.writer_segments();
        self.sufile.file_mut().suinfo(from, max, writer)
    }

    /// `NILFS_IOCTL_GET_VINFO`: the DAT entry of each virtual number.
    pub fn vinfo(&mut self, vs: &[VBlockNr]) -> Result<Vec<DatEntry>> {
        vs.iter().map(|&v| self.dat.file_mut().entry(v)).collect()
    }

    /// `NILFS_IOCTL_GET_BDESCS`: where the DAT's mapping points now for
    /// each block (`nilfs_bmap_lookup_at_level`), 0 if nowhere.
    pub fn bdescs(&mut self, bdescs: &mut [Bdesc]) -> Result<()> {
        let mut src = DiskNodes::physical(self.dev, self.bs);
        let (_, bmap, _) = self.dat.split();
        for b in bdescs {
            b.blocknr = crate::format::BlockNr(
                bmap.lookup_at_level(b.offset, b.level, &mut src)?
                    .unwrap_or(0),
            );
        }
        Ok(())
    }

    /// The snapshots' checkpoint numbers, ascending (the cleaner's
    /// `nilfs_get_snapshot`).
    pub fn snapshot_cnos(&mut self) -> Result<Vec<Cno>> {
        Ok(self
            .cpfile
            .file_mut()
            .snapshots()?
            .iter()
            .map(|c| c.cno)
            .collect())
    }

    /// `nilfs_clean_segments` (the locked part of
    /// `NILFS_IOCTL_CLEAN_SEGMENTS`), given the blocks
    /// [`crate::gc::move_blocks`] read: delete the dead checkpoints, free
    /// the dead virtual numbers, mark the live DAT blocks dirty, then run
    /// a construction that writes the moved blocks first and frees
    /// `args.segnums`. Returns the checkpoint it made.
    ///
    /// EROFS on a read-only mount; EINVAL for a segment number out of
    /// range, for the log writer's current or next segment (a check the
    /// kernel leaves to the cleaner), or a DAT block number 0. When
    /// preparing fails, the DAT is as it was (the kernel's shadow map);
    /// deleted checkpoints stay deleted, as in the kernel. When the
    /// construction fails, the whole call is undone (see the comment in
    /// [`Fs::clean_segments_begin`]).
    pub fn clean_segments(&mut self, args: &CleanArgs, moved: MovedBlocks) -> Result<Option<Cno>> {
        match self.clean_segments_begin(args, moved)? {
            Some(c) => self.sync_finish(c),
            None => Ok(None),
        }
    }

    /// [`Fs::clean_segments`] up to the end of the GC construction's first
    /// half ([`Fs::sync_begin`]); [`Fs::sync_finish`] completes it. Split
    /// only so that the known-bad open-window rule can be tested.
    pub fn clean_segments_begin(
        &mut self,
        args: &CleanArgs,
        moved: MovedBlocks,
    ) -> Result<Option<super::Construction<'a>>> {
        self.begin(false)?;
        if let Some(s) = args
            .segnums
            .iter()
            .find(|s| s.0 >= self.sufile.file().nsegments())
        {
            return Err(Error::errno(
                Errno::EINVAL,
                format!("segment number {s} to be freed is out of range"),
            ));
        }
        // Not in the kernel, which trusts the cleaner here: freeing the
        // segment the log writer is in (or will move to) would let the
        // allocator hand it out again under the logs being written.
        let writer = self.cursor.writer_segments();
        if let Some(s) = args.segnums.iter().find(|&&s| segment_is_active(s, writer)) {
            return Err(Error::errno(
                Errno::EINVAL,
                format!("segment {s} is the log writer's and cannot be freed"),
            ));
        }
        self.detach_metadata_loaders()?;
        // Before any segment is freed: a read planned earlier must not
        // trust its disk blocks once one could be written over.
        if !args.segnums.is_empty() {
            self.reclaims.count_one();
        }
        // nilfs_ioctl_clean_segments: a super block due for an update
        // makes the file system discontinued first.
        self.sbw.gc_clean_segments(self.now);
        // One savepoint serves both failures: preparing restores the DAT
        // alone (the kernel's shadow map: deleted checkpoints stay
        // deleted); a failed construction restores everything, preparation
        // included. There the kernel retries the construction until it
        // succeeds (the loop in nilfs_clean_segments), which cannot end on
        // a device that keeps failing; returning the error with the mount
        // as it was before the ioctl leaves the retry to the cleaner.
        let save = self.savepoint(None);
        if let Err(e) = self.prepare_clean_segments(args) {
            self.roll_back_dat(save);
            return Err(e);
        }
        self.sc.request_gc(GcWork {
            moved,
            segnums: args.segnums.clone(),
        });
        self.sbw.log_writer_wakeup(self.now);
        self.begin_construction(save).map(Some)
    }

    /// `nilfs_ioctl_prepare_clean_segments`.
    fn prepare_clean_segments(&mut self, args: &CleanArgs) -> Result<()> {
        for p in &args.periods {
            self.cpfile.file_mut().delete_checkpoints(p.start, p.end)?;
        }
        self.dat.file_mut().free_vblocknrs(&args.vblocknrs)?;
        // nilfs_palloc_freev and nilfs_cpfile_delete_checkpoints delete
        // emptied blocks from their bmaps at once, so a DAT block freed
        // here is dead to the liveness check below.
        let cno = self.cpfile.file().next_cno();
        self.apply_meta_deletions(cno)?;
        let mut src = DiskNodes::physical(self.dev, self.bs);
        let (dat, bmap, _) = self.dat.split();
        for b in &args.bdescs {
            if b.oblocknr.0 == 0 {
                return Err(Error::errno(Errno::EINVAL, "GC: DAT block number 0"));
            }
            let now = bmap.lookup_at_level(b.offset, b.level, &mut src)?;
            if now != Some(b.oblocknr.0) {
                continue; // dead: skip it
            }
            if b.level == 0 {
                dat.mark_block_dirty(b.offset)?;
            } else {
                bmap.mark_node_dirty(b.offset, b.level, &mut src)?;
            }
        }
        Ok(())
    }

    /// Read every block of the four metadata files into memory and stop
    /// loading from the addresses they had at mount: once segments are
    /// freed and reused, those addresses may hold something else. (The
    /// kernel's page caches always read through the current mappings;
    /// ours load lazily through the mounted image's.) Done once per mount,
    /// by the first cleaning request; callers may do it earlier, outside
    /// the exclusive side (as `txn::Shared::clean_segments` does).
    pub fn detach_metadata_loaders(&mut self) -> Result<()> {
        let (dev, bs) = (self.dev, self.bs);
        let (dat, bmap, _) = self.dat.split();
        if dat.mdt().has_loader() {
            let keys = bmap.entries(&mut DiskNodes::physical(dev, bs))?;
            dat.mdt_mut(CRATE)
                .materialize(keys.into_iter().map(|(k, _)| k))?;
        }
        let dat = self.dat.file_mut();
        detach(self.ifile.parts(), dat, dev, bs)?;
        detach(self.cpfile.parts(), dat, dev, bs)?;
        detach(self.sufile.parts(), dat, dev, bs)
    }
}

/// Load every block of a virtually mapped metadata file and drop its loader.
fn detach(
    m: MetaParts<'_, '_>,
    dat: &mut Dat<'_>,
    dev: &dyn crate::device::BlockDevice,
    bs: u32,
) -> Result<()> {
    if !m.mdt.has_loader() {
        return Ok(());
    }
    let keys = m.bmap.entries(&mut DiskNodes::translated(dev, bs, dat))?;
    m.mdt.materialize(keys.into_iter().map(|(k, _)| k))
}
