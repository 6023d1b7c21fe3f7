//! Durability (docs/model.md, "Checkpoint numbers" and "Crash"): what a
//! change leaves pending, what a construction makes durable, the log
//! writer's own timer, sync, fsync and fdatasync, and the crash envelope.
//!
//! The writeback rules are stated by what a user can observe: which
//! changes a sync must write (`Pending::dirty_inodes`: an fsync of a clean
//! inode writes nothing), which fdatasync must be a full checkpoint
//! (`Pending::inode_sync`), and which states recovery may leave. The
//! kernel's flags are named where the rule follows them.

use super::{enospc, fail, invalid, ok, space_guard, Branch};
use crate::fs::{FileData, Id, Inode, Kind, Namespace, PAGE};
use crate::op::Outcome;
use crate::space::CHECKPOINT_BLOCKS;
use crate::state::{Checkpoint, Cno, DsyncLog, Mount, Pending, State};
use imbl::{OrdMap, OrdSet, Vector};
use std::sync::Arc;

impl State {
    /// Records a successful modification of the live namespace: the
    /// inodes whose pages it dirtied ([`pages_dirtied`]), the namespace
    /// after it (the crash envelope's points), the blocks it is charged.
    pub(crate) fn modified(mut self, ns: Namespace, blocks: u64) -> State {
        for (id, before, after) in inode_changes(&self.live, &ns) {
            if pages_dirtied(before, after) {
                self.pending.dirty_inodes.insert(id);
            }
        }
        self.live = ns;
        self.pending.dirty = true;
        self.pending.history.push_back(self.live.clone());
        self.pending.history_times.push_back(self.clock);
        self.pending.history_ends.push_back(self.clock_hi);
        self.consumed_blocks += blocks;
        self
    }

    /// A namespace operation's change ([`State::modified`]): every inode it
    /// changed went through `nilfs_mark_inode_dirty` (I_DIRTY, which
    /// includes I_DIRTY_DATASYNC), so it needs an inode sync — an
    /// fdatasync of it makes a full checkpoint (`nilfs_update_inode` sets
    /// NILFS_I_INODE_SYNC). Link counts, ctime, parents' times.
    pub(crate) fn changed(&self, ns: Namespace, blocks: u64) -> State {
        let changed: Vec<Id> = ns
            .inodes
            .iter()
            .filter(|(id, ino)| self.live.inodes.get(*id) != Some(*ino))
            .map(|(id, _)| *id)
            .collect();
        let mut next = self.clone().modified(ns, blocks);
        next.pending.inode_sync.extend(changed);
        next
    }

    /// Makes the live namespace a new checkpoint, if anything is dirty
    /// (`nilfs_segctor_confirm` skips a clean construction).
    pub(crate) fn construct(&mut self) {
        self.pending.table_at_construction = None;
        if !self.pending.dirty {
            self.pending.history = Vector::new();
            self.pending.history_times = Vector::new();
            self.pending.history_ends = Vector::new();
            self.pending.dsync = Vector::new();
            return;
        }
        let minor = self.pending.history.is_empty() && self.pending.dsync.is_empty();
        // K11: an inode removed while its pages were dirty is still held
        // by the construction's dirty-file list (`nilfs_set_file_dirty`
        // took `igrab`), so its eviction comes after this checkpoint.
        let held = self
            .pending
            .dirty_inodes
            .iter()
            .filter(|id| !self.live.inodes.contains_key(*id))
            .count() as u32;
        // NILFS_I_INODE_SYNC is cleared only for the inodes the
        // construction collected, those on its dirty-file list
        // (`nilfs_drop_collected_inodes`): an inode whose metadata alone
        // changed (a link, a setattr) keeps it, and a later fdatasync of
        // its data still makes a full checkpoint (seen on Linux 6.1 and
        // 7.3 through the kernel guest in lockstep: link, fsync of another
        // file, write, fdatasync).
        let inode_sync = self
            .pending
            .inode_sync
            .iter()
            .filter(|&&id| {
                !self.pending.dirty_inodes.contains(&id) && self.live.inodes.contains_key(&id)
            })
            .copied()
            .collect();
        self.new_checkpoint(self.live.clone(), minor);
        self.consumed_blocks += CHECKPOINT_BLOCKS;
        self.pending = Pending {
            held_evictions: held,
            inode_sync,
            ..Pending::default()
        };
    }

    /// A new plain checkpoint of `ns` at the clock, under the next number,
    /// which is not observed (the kernel's may be larger: its timer's
    /// checkpoints are not counted). MINOR when it holds no file change.
    fn new_checkpoint(&mut self, ns: Namespace, minor: bool) {
        let cno = self.next_cno;
        self.next_cno += 1;
        self.checkpoints.insert(
            cno,
            Checkpoint {
                ns: Some(ns),
                snapshot: false,
                created: self.clock,
                bound: false,
                may_be_gone: false,
                minor,
                removed: false,
            },
        );
        // A latest deleted by rmcp is replaced now (its slot was invalid).
        let gone: Vec<Cno> = self
            .checkpoints
            .iter()
            .filter(|(_, cp)| cp.removed)
            .map(|(c, _)| *c)
            .collect();
        for c in gone {
            self.checkpoints.remove(&c);
        }
    }
}

/// The inodes that differ between two namespaces, with each side.
fn inode_changes<'a>(
    a: &'a Namespace,
    b: &'a Namespace,
) -> impl Iterator<Item = (Id, Option<&'a Inode>, Option<&'a Inode>)> {
    a.inodes.diff(&b.inodes).map(|d| match d {
        imbl::ordmap::DiffItem::Add(k, v) => (*k, None, Some(v)),
        imbl::ordmap::DiffItem::Remove(k, v) => (*k, Some(v), None),
        imbl::ordmap::DiffItem::Update { old, new } => (*new.0, Some(old.1), Some(new.1)),
    })
}

/// `sync` (`nilfs_sync_fs`): a construction, if mounted read-write.
pub(crate) fn sync(s: &State) -> Vec<Branch> {
    if s.mount != Some(Mount::ReadWrite) {
        return ok(s.clone());
    }
    construct_branches(s, Outcome::Ok)
}

/// fsync (`data_only` false) and fdatasync of `path`: the path's errors;
/// on a read-only view nothing can be dirty; otherwise [`sync_file`].
pub(crate) fn fsync(s: &State, at: Option<Cno>, path: &str, data_only: bool) -> Vec<Branch> {
    let Some(ns) = s.view(at) else {
        return invalid(s, "operation on a view that is not mounted");
    };
    let id = match ns.lookup(path, true) {
        Ok(id) => id,
        Err(e) => return fail(s, e),
    };
    if !s.writable(at) {
        return ok(s.clone());
    }
    sync_file(s, id, data_only)
}

/// A full construction; with something to write, it may find no segment
/// (ENOSPC under the space guard).
fn construct_branches(s: &State, outcome: Outcome) -> Vec<Branch> {
    let mut n = s.clone();
    n.construct();
    space_guard(
        s,
        s.pending.dirty.then_some(CHECKPOINT_BLOCKS),
        Branch::exact(outcome, n),
        || enospc(s),
    )
}

/// `nilfs_sync_file`: nothing if the inode is clean; fsync makes a full
/// checkpoint (`nilfs_construct_segment`); fdatasync writes a data-only
/// SYNDT segment (`nilfs_construct_dsync_segment`) unless the inode needs
/// its metadata synced (NILFS_I_INODE_SYNC: created, truncated or grown),
/// which escalates to a full checkpoint.
///
/// The kernel's log writer also constructs on its own timer (`segctord`,
/// every 5 s while anything is dirty), which the model does not see: if it
/// ran after the last change that made the inode need this sync, the sync
/// finds less to do — fsync nothing, fdatasync a data-only log of what was
/// written since. Those branches are allowed too, once the clock says the
/// timer can have fired.
fn sync_file(s: &State, id: Id, data_only: bool) -> Vec<Branch> {
    let mut out = sync_file_now(s, id, data_only);
    let full = !data_only || s.pending.inode_sync.contains(&id);
    if s.pending.dirty_inodes.contains(&id) && full && timer_may_have_run(s) {
        // The timer may have written the changes up to the file's last
        // one, or all of them: then the file is clean and the sync writes
        // nothing, and the latest checkpoint is the timer's, with its
        // earlier creation time (Linux 6.1: a file written, fsync'd 12 s
        // later, lscp dates the checkpoint 5 s after the write).
        if let Some(k) = last_change(s, id, data_only) {
            let t = timer(s, k);
            for b in sync_file_now(&t, id, data_only) {
                if !out.contains(&b) {
                    out.push(b);
                }
            }
        }
    }
    out
}

/// The log writer's timer interval (`NILFS_SC_DEFAULT_TIMEOUT`, 5 s): the
/// first change after a construction arms it (`nilfs_segctor_start_timer`
/// from `nilfs_transaction_commit`), and it fires that long after.
const TIMER_NS: i64 = 5_000_000_000;

/// How much earlier than its interval the timer may fire, by the clock
/// the trace gives: the timer is armed at `jiffies + interval`, and the
/// jiffy it was armed in may be nearly over, so it can fire up to one
/// jiffy (10 ms at the slowest tick, HZ = 100) short of the interval;
/// the timer wheel only ever rounds expiries up.
const TIMER_EARLY_NS: i64 = 10_000_000;

/// Whether the timer can have fired since the first pending change: the
/// change was made at the earliest at `history_times[0]`, and the latest
/// the current operation can run at is `clock_hi`.
fn timer_may_have_run(s: &State) -> bool {
    s.pending
        .history_times
        .front()
        .is_some_and(|t0| s.clock_hi.saturating_sub(*t0) >= TIMER_NS - TIMER_EARLY_NS)
}

/// The earliest the timer can have fired: an interval after the first
/// pending change, less a jiffy (pending changes exist).
fn earliest_firing(s: &State) -> i64 {
    s.pending.history_times[0].saturating_add(TIMER_NS - TIMER_EARLY_NS)
}

/// The position in `pending.history` just after the last change to `id`
/// that a sync of it must write: any change for fsync, a metadata change
/// (the inode is new, or its kind, size, link count or permissions
/// differ) for fdatasync.
fn last_change(s: &State, id: Id, data_only: bool) -> Option<usize> {
    let latest = s.latest_ns();
    let h = &s.pending.history;
    (0..h.len()).rev().find_map(|i| {
        let before = if i == 0 { latest } else { &h[i - 1] };
        let (a, b) = (before.inodes.get(&id), h[i].inodes.get(&id));
        let changed = if data_only {
            metadata_differs(a, b)
        } else {
            pages_dirtied(a, b)
        };
        changed.then_some(i + 1)
    })
}

/// Whether a change from `before` to `after` dirtied pages of the inode
/// (`nilfs_set_file_dirty`): a file's data or size (`nilfs_write_end`,
/// `nilfs_truncate` — which `nilfs_setattr` calls only when the size
/// changes), a directory's entries or its ".." (`nilfs_commit_chunk`,
/// `nilfs_set_link`), a new directory (`nilfs_make_empty`) or symlink
/// (`page_symlink`). A change of attributes alone dirties no page
/// (`nilfs_dirty_inode` writes the inode into the ifile): a chowned file
/// or symlink is not held by the log writer, and an unlink evicts it at
/// once (kernel trace `chowned-symlink-evicted-at-unlink`). A symlink's
/// target never changes, so its arm is false between two states one
/// operation apart, which are all this is asked about.
fn pages_dirtied(before: Option<&Inode>, after: Option<&Inode>) -> bool {
    let Some(a) = after else { return false };
    let Some(b) = before else {
        return !matches!(a.kind, Kind::File(_));
    };
    match (&b.kind, &a.kind) {
        (Kind::File(x), Kind::File(y)) => {
            x.size != y.size
                || x.pages.len() != y.pages.len()
                || x.pages
                    .iter()
                    .zip(y.pages.iter())
                    .any(|((i, p), (j, q))| i != j || !Arc::ptr_eq(p, q))
        }
        (
            Kind::Dir {
                entries: e1,
                parent: p1,
            },
            Kind::Dir {
                entries: e2,
                parent: p2,
            },
        ) => e1 != e2 || p1 != p2,
        (Kind::Symlink(x), Kind::Symlink(y)) => x != y,
        _ => true,
    }
}

fn metadata_differs(a: Option<&Inode>, b: Option<&Inode>) -> bool {
    match (a, b) {
        (Some(a), Some(b)) => {
            let size = |i: &Inode| match &i.kind {
                Kind::File(f) => Some(f.size),
                _ => None,
            };
            std::mem::discriminant(&a.kind) != std::mem::discriminant(&b.kind)
                || size(a) != size(b)
                || a.nlink != b.nlink
                || a.perm != b.perm
        }
        (None, None) => false,
        _ => true,
    }
}

/// Every state the log writer's timer may have left since the last
/// construction, once the clock says it can have fired: a checkpoint of
/// the namespace after the k-th pending change, for each k (finding M6,
/// docs/findings.md). A construction of the model's own reads the
/// timer's checkpoints as made before it, and an lscp reads them so
/// (`learn_unpredicted`); this is the other order, where nothing of the
/// model's came after the timer, and the kernel's latest checkpoint holds
/// changes the model still has pending. Linux 6.1 lists it, shows those
/// changes in it, and makes the next `mkcp` a MINOR one.
pub(crate) fn timer_fired(s: &State) -> Vec<State> {
    if !timer_may_have_run(s) {
        return Vec::new();
    }
    // The changes the timer's checkpoint leaves out were made after it
    // fired, so each can have been made after its earliest firing.
    let earliest = earliest_firing(s);
    let ends = &s.pending.history_ends;
    (1..=s.pending.history.len())
        .filter(|&k| ends.iter().skip(k).all(|&e| e >= earliest))
        .map(|k| timer(s, k))
        .collect()
}

/// The state after the log writer's timer wrote a checkpoint of the
/// namespace as it was after the k-th change since the latest checkpoint
/// (1 <= k <= the number of changes): that checkpoint's number is not
/// observed; the changes after it stay pending, and so do the SYNDT logs
/// written after it. It was made when the timer fired, at the earliest an
/// interval after the first change: its creation time is that lower
/// bound, as a learned checkpoint's is (the cleaner's protection period
/// then only ever allows more removals, never fewer).
fn timer(s: &State, k: usize) -> State {
    let mut n = s.clone();
    let h = &s.pending.history;
    let base = h[k - 1].clone();
    let cno = n.next_cno;
    n.new_checkpoint(base.clone(), false);
    if let Some(cp) = n.checkpoints.get_mut(&cno) {
        cp.created = cp.created.min(earliest_firing(s));
    }
    n.consumed_blocks += CHECKPOINT_BLOCKS;
    let rest: Vector<Namespace> = h.iter().skip(k).cloned().collect();
    let mut p = Pending {
        dirty: !rest.is_empty(),
        history: rest,
        history_times: s.pending.history_times.iter().skip(k).copied().collect(),
        history_ends: s.pending.history_ends.iter().skip(k).copied().collect(),
        ..Pending::default()
    };
    // The timer's construction cleared every inode's flags; each change
    // after it sets them again, whatever a later change undoes (a
    // truncate down and back up still marked the inode for an inode
    // sync: `nilfs_dirty_inode` with I_DIRTY_DATASYNC).
    let mut prev = &base;
    for ns in h.iter().skip(k) {
        for (id, a, b) in inode_changes(prev, ns) {
            if pages_dirtied(a, b) {
                p.dirty_inodes.insert(id);
            }
            if metadata_differs(a, b) {
                p.inode_sync.insert(id);
            }
        }
        prev = ns;
    }
    p.dsync = s
        .pending
        .dsync
        .iter()
        .filter(|l| l.after > k)
        .map(|l| DsyncLog {
            after: l.after - k,
            ..l.clone()
        })
        .collect();
    n.pending = p;
    n
}

/// `nilfs_sync_file` on the state as the model has it.
fn sync_file_now(s: &State, id: Id, data_only: bool) -> Vec<Branch> {
    let latest = s.latest_ns();
    let live_ino = s.live.inodes.get(&id);
    if !s.pending.dirty_inodes.contains(&id) {
        return ok(s.clone());
    }
    if !data_only || s.pending.inode_sync.contains(&id) {
        return construct_branches(s, Outcome::Ok);
    }
    let (Some(Kind::File(now_f)), Some(Kind::File(old_f))) = (
        live_ino.map(|i| &i.kind),
        latest.inodes.get(&id).map(|i| &i.kind),
    ) else {
        return construct_branches(s, Outcome::Ok);
    };
    let mut pages = OrdMap::new();
    let max_page = now_f.size.div_ceil(PAGE);
    for (idx, p) in now_f.pages.iter() {
        // Dirty pages: written since the checkpoint (a new page object),
        // whatever their contents.
        if !old_f.pages.get(idx).is_some_and(|o| Arc::ptr_eq(o, p)) {
            pages.insert(*idx, p.clone());
        }
    }
    for idx in old_f.pages.keys() {
        if *idx < max_page && !now_f.pages.contains_key(idx) {
            pages.insert(*idx, Arc::new(vec![0; PAGE as usize]));
        }
    }
    let mut n = s.clone();
    n.pending.dsync.push_back(DsyncLog {
        after: s.pending.history.len(),
        id,
        pages,
    });
    ok(n)
}

/// The crash envelope (docs/model.md, "Crash"): every state recovery may
/// leave. For each point k since the latest checkpoint (k = 0: none; k > 0:
/// the segment constructor's timer made a checkpoint of the namespace after
/// the k-th modification), the SYNDT logs written after k are replayed
/// (`nilfs_do_roll_forward` -> `nilfs_recover_dsync_blocks`: the blocks are
/// copied into the file as of that checkpoint, its size is unchanged). A
/// timer checkpoint or a salvage makes one more checkpoint. chcp/rmcp since
/// the last construction may be lost. Nothing is mounted afterwards.
pub fn crash(s: &State) -> Vec<State> {
    let p = &s.pending;
    // 4. The checkpoint table: the current one, or the one at the last
    // construction (chcp/rmcp are cpfile changes, durable at the next).
    let mut tables = vec![s.checkpoints.clone()];
    if let Some(t) = &p.table_at_construction {
        tables.push(t.clone());
    }
    let mut out: Vec<State> = Vec::new();
    for k in 0..=p.history.len() {
        // 1. The base: the latest checkpoint's namespace, or the one the
        // timer wrote after the k-th change.
        let base = if k == 0 {
            s.latest_ns()
        } else {
            &p.history[k - 1]
        };
        // 2. The SYNDT logs written after it, replayed.
        let (ns, salvaged) = roll_forward(base, p.dsync.iter().filter(|l| l.after > k));
        // 3. A timer checkpoint or a salvage made one more checkpoint; with
        // chcp/rmcp since the last construction and k = 0, the timer may
        // have written the dirty cpfile as a checkpoint of the unchanged
        // namespace.
        let timer_cp = k == 0 && p.dirty && p.table_at_construction.is_some();
        let made: &[bool] = if k > 0 || salvaged {
            &[true]
        } else if timer_cp {
            &[false, true]
        } else {
            &[false]
        };
        for table in &tables {
            for &made in made {
                // A latest deleted by rmcp reaches the disk only with the
                // construction that replaces it (`Checkpoint::removed`).
                if !made && table.get_max().is_some_and(|(_, cp)| cp.removed) {
                    continue;
                }
                let mut n = s.clone();
                n.checkpoints = table.clone();
                n.mount = None;
                n.snapshot_mounts = OrdSet::new();
                n.pending = Pending::default();
                n.live = ns.clone();
                if made {
                    n.new_checkpoint(ns.clone(), !(k > 0 || salvaged));
                }
                if !out.contains(&n) {
                    out.push(n);
                }
            }
        }
    }
    out
}

/// `nilfs_do_roll_forward` -> `nilfs_recover_dsync_blocks`: each log's
/// blocks copied into its file as of `base` (`block_write_begin`/
/// `block_write_end`, which leave `i_size` alone: what lies past the size
/// is dropped); a log whose file is gone is skipped (`nilfs_iget` fails).
/// Whether any block was salvaged.
fn roll_forward<'a>(
    base: &Namespace,
    logs: impl Iterator<Item = &'a DsyncLog>,
) -> (Namespace, bool) {
    let mut ns = base.clone();
    let mut salvaged = false;
    for log in logs {
        let Some(ino) = ns.inodes.get(&log.id) else {
            continue;
        };
        let Kind::File(f) = &ino.kind else {
            continue;
        };
        let mut f: FileData = f.clone();
        for (idx, page) in log.pages.iter() {
            if *idx * PAGE >= f.size {
                continue;
            }
            let mut page = (**page).clone();
            let keep = (f.size - *idx * PAGE).min(PAGE) as usize;
            page[keep..].fill(0);
            f.pages.insert(*idx, Arc::new(page));
            salvaged = true;
        }
        let mut ino = ino.clone();
        ino.kind = Kind::File(f);
        ns.inodes.insert(log.id, ino);
    }
    (ns, salvaged)
}
