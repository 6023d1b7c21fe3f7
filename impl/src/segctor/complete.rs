//! The write and its completion: each log assembled, checked against its
//! plan (in test and debug builds) and written, in order, then a flush
//! (`nilfs_segctor_write`, `nilfs_write_logs`); then, with the construction
//! on disk, everything it wrote becomes clean, the checkpoint number moves
//! on and the writer's cursor and the super block follow
//! (`nilfs_segctor_complete_write`, `nilfs_set_last_segment`).

use super::layout::LogPlan;

use super::assign::{Content, Filled};
use super::write::{check_log, LogPieces};
use super::{Construction, Stage};
use crate::format::Cno;
use crate::fs::Fs;
use crate::Result;

impl<'a> Fs<'a> {
    /// Assemble each log from `filled`, check it against its plan (debug
    /// and test builds), write it, in plan order; then flush. Each log is
    /// written as soon as it is assembled, so one segment's worth of bytes
    /// is in flight at a time. The first write is the construction's point
    /// of no return.
    pub(super) fn write_logs(&mut self, c: &mut Construction, filled: Filled) -> Result<()> {
        let Filled {
            payload,
            super_root,
        } = filled;
        let (bs, seed) = (self.bs, self.sb.crc_seed);
        let inodes = &self.inodes;
        let content = |tag: u64| -> Option<&[u8]> {
            Some(match payload.get(usize::try_from(tag).ok()?)? {
                Content::Built(b) => b,
                Content::Dirty(i, key) => inodes.loaded(*i).dirty.get(key)?,
            })
        };
        for p in &c.plans {
            let sr = p.super_root.map(|_| &super_root[..]);
            let pieces = LogPieces::build(p, content, sr, bs, seed)?;
            write_checked(self.dev, p, &pieces, bs, seed)?;
        }
        self.dev.flush()?;
        c.stage = Stage::Done;
        Ok(())
    }

    /// `nilfs_segctor_complete_write` for a construction with a super root:
    /// clean the files and metadata files it wrote, move the cursor, commit
    /// the super block the policy asks for, and return the checkpoint.
    pub(super) fn complete_construction(&mut self, c: Construction) -> Result<Cno> {
        let cno = c.cno;
        let last = c.plans.last().expect("a construction writes a log");
        self.cursor = c.cursor.expect("a laid-out construction has a cursor");
        self.constructions += 1;
        // HAVE_DELTA is cleared and nilfs_set_last_segment moves the
        // cursor; at the end of nilfs_segctor_construct a "discontinued"
        // file system commits one super block copy.
        self.sc.have_delta = false;
        // nilfs_segctor_complete_write, then nilfs_set_next_segment.
        if c.gc.is_none() {
            self.nongc_ctime = c.ctime;
        }
        self.ctime = c.ctime;
        let free = self.free_blocks()?;
        self.sbw
            .set_log_cursor(last.start, last.header.seq, cno, free);
        for &i in &c.order {
            self.inodes.loaded_mut(i).mark_clean()?;
        }
        self.inodes.shrink();
        self.ifile.mark_clean()?;
        self.cpfile.mark_clean()?;
        self.sufile.mark_clean()?;
        self.dat.mark_clean()?;
        self.cpfile.file_mut().set_next_cno(Cno(cno.0 + 1));
        // Last, with the construction complete in memory: a super block
        // that cannot be written leaves the logs written and clean (the
        // kernel only reports nilfs_commit_super's error).
        let w = self.sbw.after_super_root_log(self.now);
        self.write_sb(w)?;
        Ok(cno)
    }
}

/// Check the log against `plan` (in test and debug builds, assembled
/// whole), then write it in one request.
pub(super) fn write_checked(
    dev: &dyn crate::device::BlockDevice,
    plan: &LogPlan,
    log: &LogPieces<'_>,
    bs: u32,
    seed: u32,
) -> Result<()> {
    if cfg!(debug_assertions) {
        check_log(plan, &log.concat(), bs, seed)?;
    }
    log.write(dev, plan, bs)
}
