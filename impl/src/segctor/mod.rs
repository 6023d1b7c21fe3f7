//! The segment constructor (the kernel's segment.c): turning the dirty
//! files and metadata files of a mount into logs on disk.
//!
//! A construction is a staged machine, as `nilfs_segctor_do_construct`
//! runs one. A full construction (`sync`, `fsync`, mkcp, recovery, and the
//! cleaner's GC construction, which enters the same machine with its moved
//! blocks) passes the stages of [`Stage`] in order; a data-only log of one
//! file (`fdatasync`) is its own path, [`Stage::Dsync`].
//!
//! | phase | kernel | file |
//! |---|---|---|
//! | propagate: new virtual numbers for every dirty block and node (`nilfs_bmap_propagate`) | `nilfs_segctor_apply_buffers` → `nilfs_collect_*` | `propagate.rs` |
//! | collect: the stages' blocks into segment buffers, extending on overflow | `nilfs_segctor_collect`, `_collect_blocks` | `collect.rs`, [`layout`] |
//! | assign: disk addresses into the DAT and the DAT's own mapping | `nilfs_segctor_assign`, `_update_payload_blocknr` | `assign.rs` |
//! | fill in: segment usage, the checkpoint, the super root | `nilfs_segctor_update_segusage`, `_fill_in_checkpoint`, `_fill_in_super_root` | `assign.rs` |
//! | write: summaries checked, logs sealed and written | `nilfs_segctor_write`, `nilfs_segbuf_fill_in_*` | `complete.rs`, [`write`](mod@write) |
//! | complete: everything clean, the cursor moved, the super block | `nilfs_segctor_complete_write` | `complete.rs` |
//! | dsync: a data-only log of one file | `nilfs_segctor_collect_blocks` in `SC_LSEG_DSYNC` mode | `dsync.rs` |
//!
//! Differences from the kernel, on purpose: propagation runs as a pass of
//! its own before collection (the kernel propagates each buffer as it
//! collects it), so that a collection retried after extending the
//! construction only re-lays-out blocks; and addresses are fixed only at
//! [`layout::Layout::finish`] (see [`layout`]).
//!
//! # Aborting a construction
//!
//! Everything up to the write phase changes memory only; the first device
//! write is the point of no return. The kernel records in `sc_stage.flags`
//! what an abort must undo (`NILFS_CF_IFILE_STARTED`: redirty the inodes
//! written into the ifile, `nilfs_redirty_inodes`; `NILFS_CF_SUFREED`:
//! cancel the cleaner's frees, `nilfs_sufile_cancel_freev`), and undoes
//! the segments its logs allocated and dirtied (`nilfs_free_incomplete_logs`,
//! `nilfs_cancel_segusage`). Ours needs no such record: a construction
//! that fails before its logs are on disk is rolled back as a whole
//! (`nilfs_segctor_abort_construction`, [`abort`]) from the savepoint
//! taken when it began, so the mount's memory is as it was, and the next
//! one can succeed once there is room. (The retry's cancel of the
//! cleaner's frees is in `collect`.)

pub mod layout;
pub mod write;

mod abort;
mod assign;
mod collect;
mod complete;
mod dsync;
mod propagate;
mod reuse;

use std::collections::BTreeSet;

use crate::bmap::write::NodeId;
use crate::format::{ino, Cno, Ino, SegNum, VBlockNr};
use crate::fs::Fs;
use crate::gc::MovedBlocks;
use crate::Result;
use layout::{Cursor, LogPlan, SegmentSource};

/// `sc_stage.scnt`: the kernel's `NILFS_ST_*`, in the order a full
/// construction passes them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Stage {
    /// `NILFS_ST_INIT`: nothing done yet.
    Init,
    /// `NILFS_ST_GC`: the blocks the cleaner moves (the GC inodes), each
    /// under the checkpoint it was written in.
    Gc,
    /// `NILFS_ST_FILE`: user files' data blocks and B-tree nodes, in the
    /// order the files were dirtied.
    File,
    /// `NILFS_ST_IFILE`: the ifile (inodes written, then its blocks).
    Ifile,
    /// `NILFS_ST_CPFILE`: the checkpoint file (the new checkpoint's entry).
    Cpfile,
    /// `NILFS_ST_SUFILE`: segment usage, including the segments this
    /// construction writes and the ones the cleaner frees.
    Sufile,
    /// `NILFS_ST_DAT`: the DAT's own blocks and nodes, physically mapped.
    Dat,
    /// `NILFS_ST_SR`: the super root closes the logical segment.
    SuperRoot,
    /// `NILFS_ST_DSYNC`: a data-only log of one file (`fdatasync`).
    Dsync,
    /// `NILFS_ST_DONE`: the logs are written.
    Done,
}

impl Stage {
    /// The stages whose blocks a full construction collects, in order.
    pub const COLLECTED: [Stage; 7] = [
        Stage::Gc,
        Stage::File,
        Stage::Ifile,
        Stage::Cpfile,
        Stage::Sufile,
        Stage::Dat,
        Stage::SuperRoot,
    ];
}

/// A cleaning request accepted by [`Fs::clean_segments`], waiting for its
/// construction: the blocks to move (`sc_gc_inodes`) and the segments to
/// free (`sc_freesegs`).
#[derive(Debug)]
pub(crate) struct GcWork {
    pub(crate) moved: MovedBlocks,
    pub(crate) segnums: Vec<SegNum>,
}

/// The constructor's state between constructions (the part of
/// `struct nilfs_sc_info` that outlives one).
#[derive(Debug, Default)]
pub(crate) struct SegCtor {
    /// `NILFS_SC_HAVE_DELTA`: a log since the last checkpoint recorded
    /// blocks of a file that belongs to the checkpoint (a user file or the
    /// ifile). A checkpoint without one is MINOR (hidden by `lscp`).
    have_delta: bool,
    /// A cleaning request for the next construction.
    gc: Option<GcWork>,
    /// Known-bad: a failed construction is not rolled back (memory stays
    /// as far as the attempt got, as before the abort path existed).
    keep_failed: bool,
}

impl SegCtor {
    /// Queue a cleaning request for the next construction.
    pub(crate) fn request_gc(&mut self, work: GcWork) {
        self.gc = Some(work);
    }
}

/// Which file a laid-out block belongs to, and which block it is.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Src {
    /// Data block `key` of the DAT (mapped by the address being chosen).
    DatData(u64),
    /// Data block `key` of file `ino` (a user file, or the ifile, cpfile
    /// or sufile) and the virtual number collection read for its binfo:
    /// the one assignment starts in the DAT, so the two cannot differ.
    Data(Ino, u64, VBlockNr),
    /// A dirty B-tree node of file `ino`.
    Node(Ino, NodeId),
    /// The `n`th block of the GC stage ([`crate::gc::MovedBlocks::blocks`]).
    Gc(usize),
}

/// A construction between [`Fs::sync_begin`] and [`Fs::sync_finish`]:
/// the token the stages pass on (the kernel's `nilfs_sc_info` of one run).
pub struct Construction<'a> {
    /// The mount as the construction found it, for an abort.
    save: Option<abort::Savepoint<'a>>,
    stage: Stage,
    cno: Cno,
    ctime: u64,
    /// The dirty files it took, in dirty order.
    order: Vec<Ino>,
    /// The cleaning request it serves, if any.
    gc: Option<GcWork>,
    /// Every laid-out block's source, by the layout's tag.
    srcs: Vec<Src>,
    /// The logs, once laid out.
    plans: Vec<LogPlan>,
    /// The writer's cursor after them.
    cursor: Option<Cursor>,
}

impl Construction<'_> {
    /// The stage reached.
    pub fn stage(&self) -> Stage {
        self.stage
    }
}

/// The sufile as the layout's segment source.
pub(crate) struct Segs<'x, 'a>(pub(crate) &'x mut crate::sufile::Sufile<'a>);

impl SegmentSource for Segs<'_, '_> {
    fn alloc(&mut self) -> Result<SegNum> {
        self.0.alloc()
    }
    fn free(&mut self, s: SegNum) -> Result<()> {
        self.0.free(s)
    }
    fn mark_dirty(&mut self, s: SegNum) -> Result<()> {
        self.0.mark_dirty(s)
    }
}

/// Does the log record blocks of a file with a checkpoint root
/// (`nilfs_segctor_begin_finfo` sets `NILFS_SC_HAVE_DELTA` for inodes with
/// `i_root`): anything but the DAT, cpfile and sufile, and the GC inodes
/// (`gc_tags`), which have none.
pub(crate) fn has_delta(p: &LogPlan, gc_tags: &BTreeSet<(Ino, Cno)>) -> bool {
    p.files.iter().any(|r| {
        ![ino::DAT, ino::CPFILE, ino::SUFILE].contains(&r.finfo.ino)
            && !gc_tags.contains(&(r.finfo.ino, r.finfo.cno))
    })
}

impl<'a> Fs<'a> {
    /// A segment construction (`nilfs_construct_segment`, as the sync
    /// ioctl, fsync and recovery request it): no `sync_fs` super block
    /// commit.
    pub(crate) fn construct(&mut self) -> Result<Option<Cno>> {
        match self.sync_begin()? {
            None => Ok(None),
            Some(c) => self.sync_finish(c),
        }
    }

    /// The first half of a construction: propagation and collection, up to
    /// the laid-out logs ([`Stage::SuperRoot`]). Everything from here to
    /// [`Fs::sync_finish`] must run under the exclusive side of the
    /// transaction lock (see `txn`): a file operation in between would
    /// dirty blocks the layout did not take, which the finish then marks
    /// clean — a lost write. The split exists so that the known-bad
    /// variant can be tested.
    pub fn sync_begin(&mut self) -> Result<Option<Construction<'a>>> {
        if self.read_only || !self.is_dirty() {
            return Ok(None);
        }
        // nilfs_segctor_thread on waking: a dirty super block that is due
        // for an update marks the file system discontinued.
        self.sbw.log_writer_wakeup(self.now);
        let save = self.savepoint(None);
        self.begin_construction(save).map(Some)
    }

    /// [`Fs::sync_begin`] from `save`, the mount as the construction
    /// found it (the cleaner's takes it before its preparation).
    pub(crate) fn begin_construction(
        &mut self,
        save: abort::Savepoint<'a>,
    ) -> Result<Construction<'a>> {
        let mut c = Construction {
            save: Some(save),
            stage: Stage::Init,
            cno: self.cpfile.file().next_cno(),
            ctime: self.now,
            order: Vec::new(),
            gc: self.sc.gc.take(),
            srcs: Vec::new(),
            plans: Vec::new(),
            cursor: None,
        };
        let collected = self
            .propagate_construction(&mut c)
            .and_then(|()| self.collect_construction(&mut c));
        if let Err(e) = collected {
            self.abort_construction(c);
            return Err(e);
        }
        Ok(c)
    }

    /// The second half: addresses, metadata, the checked write, completion.
    /// A failure before the logs are all written rolls the construction
    /// back ([`abort`]).
    pub fn sync_finish(&mut self, mut c: Construction<'a>) -> Result<Option<Cno>> {
        let written = self
            .assign_addresses(&mut c)
            .and_then(|()| self.fill_in(&mut c))
            .and_then(|filled| self.write_logs(&mut c, filled));
        if let Err(e) = written {
            self.abort_construction(c);
            return Err(e);
        }
        if let Some(s) = c.save.take() {
            self.release(s);
        }
        self.complete_construction(c).map(Some)
    }

    /// `nilfs_segctor_abort_construction`: back to the savepoint. The
    /// cleaning request the construction served is dropped with it (the
    /// kernel's `nilfs_remove_all_gcinodes`); the cleaner hears the error.
    fn abort_construction(&mut self, mut c: Construction<'a>) {
        if let Some(s) = c.save.take() {
            self.roll_back(s);
        }
    }
}
