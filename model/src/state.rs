//! The whole file system as the model holds it: the live namespace, every
//! checkpoint with its frozen namespace, the mounts, what is not yet
//! durable (`Pending`), the space estimate and the clock. Only the data and
//! the accessors every rule shares; the rules are in `step` (operations),
//! `durability` (constructions, the timer, crash) and `accept` (outcomes).

use crate::fs::{Id, Namespace};
use crate::space::Geometry;
use crate::time::Stamp;
use crate::variant::Variant;
use imbl::{OrdMap, OrdSet, Vector};
use std::sync::Arc;

/// A checkpoint number.
pub type Cno = u64;

/// One checkpoint as lscp would list it, with the namespace it shows.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Checkpoint {
    /// What it shows; `None` for a checkpoint the model knows only from an
    /// lscp listing (finding M1): the kernel made it on its own (the
    /// segment constructor's timer, a cleaner step), so it exists, is
    /// plain and has that number, but the model cannot say which state it
    /// captured. The latest checkpoint's contents are always known.
    pub ns: Option<Namespace>,
    pub snapshot: bool,
    /// Model clock when it was made (the cleaner's protection period).
    pub created: i64,
    /// The number is known to be the file system's own (mkfs's cno 1, or
    /// observed in a trace). Otherwise the real number may be larger: the
    /// kernel's segment constructor also makes checkpoints on its timer.
    pub bound: bool,
    /// A cleaner run may have removed it (plain, not the latest, older
    /// than the protection period); resolved by the next `lscp`.
    pub may_be_gone: bool,
    /// MINOR: made for metadata changes alone (chcp, rmcp, mkcp -s), no
    /// file blocks (`nilfs_cpfile_finalize_checkpoint(.., !HAVE_DELTA)`).
    /// `lscp` hides it unless it is a snapshot.
    pub minor: bool,
    /// Deleted by `rmcp` while it was the latest. The kernel allows it
    /// (`nilfs_cpfile_delete_checkpoint` refuses only snapshots; seen on
    /// Linux 6.1): the slot is invalid, so lscp does not list it and chcp
    /// and rmcp of it find nothing, but it is still what the live file
    /// system was last made durable as and what a crash returns to (the
    /// deletion is a cpfile change of the next construction), so it stays
    /// the model's latest until the next construction replaces it.
    #[doc(alias = "invalid")]
    pub removed: bool,
}

/// How the latest checkpoint is mounted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mount {
    ReadWrite,
    ReadOnly,
}

/// One fdatasync that wrote a data-only (SYNDT) logical segment instead of a
/// checkpoint: the file's pages that differed from the latest checkpoint.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DsyncLog {
    /// Number of modifications (entries of `Pending::history`) before it.
    pub after: usize,
    pub id: Id,
    pub pages: OrdMap<u64, Arc<Vec<u8>>>,
}

/// What is not durable yet: what happened since the latest checkpoint.
/// It decides what a sync writes and what a crash may leave
/// (`durability`).
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Pending {
    /// Some change is not in the latest checkpoint: the next construction
    /// makes one.
    pub dirty: bool,
    /// The inodes an fsync must write: those whose pages changed (a write,
    /// a truncate that changes the size, a directory's entries or its
    /// "..", a new directory or symlink). A change of metadata alone (a
    /// new empty file, a link, a same-size truncate, setattr) leaves the
    /// inode clean for fsync, which then writes nothing (K1). The kernel's
    /// NILFS_I_DIRTY (`nilfs_set_file_dirty`, tested by
    /// `nilfs_inode_dirty`).
    pub dirty_inodes: OrdSet<Id>,
    /// The inodes whose fdatasync must be a full checkpoint rather than a
    /// data-only log: those whose metadata changed (created, truncated,
    /// grown, linked, unlinked, renamed, and the parents of such changes).
    /// The kernel's NILFS_I_INODE_SYNC (`nilfs_update_inode` for
    /// I_DIRTY_DATASYNC, tested by `nilfs_construct_dsync_segment`).
    pub inode_sync: OrdSet<Id>,
    /// The live namespace after each modification since the checkpoint.
    pub history: Vector<Namespace>,
    /// The clock at each of those modifications (the earliest its
    /// operation can have read it).
    pub history_times: Vector<i64>,
    /// The latest each of those modifications can have been made (its
    /// operation's `clock_hi`): one made later than the log writer's
    /// timer can have fired may be left out of the timer's checkpoint.
    pub history_ends: Vector<i64>,
    /// The data-only logs fdatasync wrote since (replayed by recovery).
    pub dsync: Vector<DsyncLog>,
    /// The checkpoint table as of the latest construction (chcp/rmcp made
    /// since then are lost by a crash unless a construction followed).
    pub table_at_construction: Option<OrdMap<Cno, Checkpoint>>,
    /// How many inodes the latest construction held that were removed
    /// while their pages were dirty (finding K11): set by
    /// `State::construct`, resolved by `step` into its readings (see
    /// `step::held_evictions`).
    pub held_evictions: u32,
}

/// The abstract state of one NILFS2 file system.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct State {
    pub geometry: Geometry,
    /// The clock, in nanoseconds: the earliest the current operation can
    /// have read it (a `clock` line's time, or the start of the interval
    /// the trace line records).
    pub clock: i64,
    /// The latest the current operation can have read the clock (`clock`
    /// itself when the model's own clock is injected).
    pub clock_hi: i64,
    /// How far past a `clock` line an operation without an interval of
    /// its own may stamp an inode: 0 for an injected clock, which stamps
    /// exactly; [`LEGACY_WINDOW_NS`](crate::time::LEGACY_WINDOW_NS) for a
    /// trace whose lines record no intervals.
    pub time_window: i64,
    pub live: Namespace,
    pub checkpoints: OrdMap<Cno, Checkpoint>,
    pub next_cno: Cno,
    pub mount: Option<Mount>,
    pub snapshot_mounts: OrdSet<Cno>,
    pub pending: Pending,
    /// Upper estimate of blocks written since mkfs (never lowered: the
    /// model cannot know how much a cleaner pass reclaims).
    pub consumed_blocks: u64,
    /// The Linux release described where releases differ.
    pub variant: Variant,
}

impl State {
    /// A freshly made file system, not mounted.
    pub fn mkfs(geometry: Geometry, dot_nilfs: bool, now: i64) -> State {
        let live = Namespace::mkfs(dot_nilfs, now);
        let mut checkpoints = OrdMap::new();
        checkpoints.insert(
            1,
            Checkpoint {
                ns: Some(live.clone()),
                snapshot: false,
                created: now,
                bound: true,
                may_be_gone: false,
                minor: false,
                removed: false,
            },
        );
        State {
            geometry,
            clock: now,
            clock_hi: now,
            time_window: 0,
            live,
            checkpoints,
            next_cno: 2,
            mount: None,
            snapshot_mounts: OrdSet::new(),
            pending: Pending::default(),
            consumed_blocks: 16,
            variant: Variant::Any,
        }
    }

    /// The stamp an operation sets now: somewhere in the current
    /// operation's interval (`time`).
    pub fn now(&self) -> Stamp {
        Stamp::between(self.clock, self.clock_hi)
    }

    /// The state with the clock read at `[lo, hi]` for the next operation
    /// (a trace line's interval); `None` if that goes back in time.
    pub fn at_time(&self, lo: i64, hi: i64) -> Option<State> {
        if lo < self.clock {
            return None;
        }
        let mut n = self.clone();
        n.clock = lo;
        n.clock_hi = hi.max(lo);
        Some(n)
    }

    /// The state with the clock read somewhere in `[lo, hi]` by an
    /// operation of a concurrent history: unlike [`State::at_time`], the
    /// interval may start before the current clock. Operations placed in
    /// a linearization order need not have read the clock in that order (a
    /// call reads it on entry, then may wait for a lock that a later
    /// reader's call takes first), so each is bounded by its own interval
    /// alone.
    pub fn at_interval(&self, lo: i64, hi: i64) -> State {
        let mut n = self.clone();
        n.clock = lo;
        n.clock_hi = hi.max(lo);
        n
    }

    /// The state after a stat of inode `id` in view `at` observed these
    /// times: each becomes its stamp's exact value.
    pub(crate) fn bind_times(
        &self,
        at: Option<Cno>,
        id: Id,
        mtime: Option<i64>,
        ctime: Option<i64>,
    ) -> State {
        let mut n = self.clone();
        match at {
            None => n.live = n.live.bind_times(id, mtime, ctime),
            Some(c) => {
                if let Some(ns) = n.checkpoints.get_mut(&c).and_then(|cp| cp.ns.as_mut()) {
                    *ns = ns.bind_times(id, mtime, ctime);
                }
            }
        }
        n
    }

    /// Blocks charged to a write of `bytes` ([`Geometry::blocks_for`]).
    pub(crate) fn blocks_for(&self, bytes: u64) -> u64 {
        self.geometry.blocks_for(bytes)
    }

    /// The space rule ([`Geometry::may_enospc`]) on this state's estimate.
    pub fn may_enospc(&self, blocks: u64) -> bool {
        self.geometry.may_enospc(self.consumed_blocks, blocks)
    }

    /// The latest checkpoint (there is always one).
    pub fn latest(&self) -> (Cno, &Checkpoint) {
        let (c, cp) = self
            .checkpoints
            .get_max()
            .expect("model invariant: no checkpoint");
        (*c, cp)
    }

    /// What the latest checkpoint shows (always known: the model made it,
    /// or bound one it made to the listed number).
    pub fn latest_ns(&self) -> &Namespace {
        self.latest()
            .1
            .ns
            .as_ref()
            .expect("model invariant: the latest checkpoint's contents are known")
    }

    /// The namespace a view shows: the live one, or a mounted snapshot's
    /// (`None` too for a snapshot whose contents the model does not know).
    pub fn view(&self, at: Option<Cno>) -> Option<&Namespace> {
        match at {
            None => self.mount.map(|_| &self.live),
            Some(c) if self.snapshot_mounts.contains(&c) => {
                self.checkpoints.get(&c).and_then(|cp| cp.ns.as_ref())
            }
            Some(_) => None,
        }
    }

    /// The view takes changes: the latest, mounted read-write.
    pub(crate) fn writable(&self, at: Option<Cno>) -> bool {
        at.is_none() && self.mount == Some(Mount::ReadWrite)
    }

    /// `NILFS_IOCTL_CHANGE_CPMODE` on an existing checkpoint (chcp, and
    /// mkcp -s after its construction): a cpfile change, durable only at
    /// the next construction, which it makes happen
    /// (`nilfs_segctor_do_construct` -> `nilfs_test_metadata_dirty`).
    /// Already in that mode: nothing changes.
    pub(crate) fn set_mode(&mut self, cno: Cno, snapshot: bool) {
        if self.checkpoints[&cno].snapshot == snapshot {
            return;
        }
        self.remember_table();
        self.checkpoints.get_mut(&cno).expect("present").snapshot = snapshot;
        self.pending.dirty = true;
    }

    /// Keeps the checkpoint table as of the last construction before its
    /// first change since (a crash may lose the changes: `durability`).
    pub(crate) fn remember_table(&mut self) {
        if self.pending.table_at_construction.is_none() {
            self.pending.table_at_construction = Some(self.checkpoints.clone());
        }
    }
}
