//! The transition function: every way an operation may go from a state.
//!
//! [`step`] is a dispatcher. Each operation's rule is one guarded action in
//! the file of its area: its preconditions (the view is mounted, the path
//! resolves, the view is writable...) each give one refusal, then its
//! effect gives the successor state, and where the disk may be full the
//! space guard (`space_guard`) adds the refusals it allows. The areas:
//! `namespace` (names), `data` (contents), `attr` (setattr, xattrs),
//! `query` (reads that change nothing), `checkpoint` (mkcp, chcp, rmcp,
//! lscp, the cleaner), `mount` (mount, umount, remount); sync, fsync and
//! fdatasync and crash are `durability`'s. `step` is pure.

mod attr;
mod checkpoint;
pub(crate) mod data;
pub mod durability;
mod mount;
mod namespace;
mod query;

use crate::fs::{Errno, Id, StatInfo};
use crate::op::{Op, Outcome};
use crate::pattern::Pattern;
use crate::state::{Cno, State};
use crate::time::Stamp;
use crate::variant::XattrCall;

/// The set of outcomes one branch allows.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Expect {
    /// This outcome (readdir names compared as sets; see
    /// [`crate::accept::outcome_matches`]).
    Exact(Outcome),
    /// A successful `lstat` of inode `id` in the view `at`: `info` without
    /// its times, which must lie within the inode's stamps. An observed
    /// time becomes the stamp's exact value in the state after (a later
    /// stat must show it again unless something set it since).
    Stat {
        info: StatInfo,
        mtime: Stamp,
        ctime: Stamp,
        at: Option<Cno>,
        id: Id,
    },
    /// `mkcp -p`: the latest cno if nothing was dirty, else (or also) a new
    /// number above it. The checkpoint gets the observed number.
    NewCno {
        latest: Cno,
        must_be_new: bool,
        snapshot: bool,
    },
    /// `lscp`: the listing shape rule of docs/model.md.
    Lscp,
    /// `statfs`: the rule of [`crate::accept::statfs_accepts`]; `inodes` is the view's
    /// count of inodes in use, `held` how many removed inodes the log
    /// writer may still hold (counted until the next construction).
    Statfs { inodes: u64, held: u64 },
    /// A write that stopped early for want of space: `generic_perform_write`
    /// copies page by page, each page through `nilfs_write_begin`, whose
    /// `nilfs_transaction_begin(sb, NULL, 1)` may refuse with ENOSPC; what
    /// was copied before stays and the call returns its length. Accepts
    /// `{"written": k}` with 0 < k < the write's length and the write's end
    /// `offset + k` on a page boundary (the kernel's 4 KiB page).
    ShortWrite {
        path: String,
        offset: u64,
        data: Pattern,
    },
    /// The operation is not meaningful here (the checker rejects the trace).
    Invalid(String),
    /// Any outcome: the model cannot tell what it should be (an operation
    /// on a mounted snapshot whose contents it does not know, finding M1).
    /// The state is unchanged: a snapshot view is read-only.
    Unjudged(String),
}

/// One allowed way an operation may go.
#[derive(Clone, Debug, PartialEq)]
pub struct Branch {
    pub expect: Expect,
    pub next: State,
}

pub(crate) type R<T> = Result<T, Errno>;

impl Branch {
    /// The branch that expects exactly `outcome` and leaves `next`.
    pub(crate) fn exact(outcome: Outcome, next: State) -> Branch {
        Branch {
            expect: Expect::Exact(outcome),
            next,
        }
    }
}

/// Success, leaving `next`.
pub(crate) fn ok(next: State) -> Vec<Branch> {
    vec![Branch::exact(Outcome::Ok, next)]
}

/// Refused with `e`: nothing changes.
pub(crate) fn fail(s: &State, e: Errno) -> Vec<Branch> {
    vec![Branch::exact(Outcome::Err(e), s.clone())]
}

/// The operation means nothing here: the checker rejects the trace.
pub(crate) fn invalid(s: &State, why: &str) -> Vec<Branch> {
    vec![Branch {
        expect: Expect::Invalid(why.to_string()),
        next: s.clone(),
    }]
}

/// The one guard for a full disk. An action that may find no space
/// (`nilfs_transaction_begin(sb, ti, vacancy_check = 1)`, a construction
/// that allocates a segment) goes as `done`; when it needs `blocks` more
/// and the space rule allows ENOSPC for them ([`State::may_enospc`]), the
/// ways a refusal may leave the file system (`refused`) are allowed too,
/// after it. `blocks` is `None` for an action that cannot run out (no
/// vacancy check, or a construction with nothing to write).
pub(crate) fn space_guard(
    s: &State,
    blocks: Option<u64>,
    done: Branch,
    refused: impl FnOnce() -> Vec<Branch>,
) -> Vec<Branch> {
    let mut out = vec![done];
    if blocks.is_some_and(|b| s.may_enospc(b)) {
        out.extend(refused());
    }
    out
}

/// ENOSPC with nothing changed: the refusal of most guarded actions.
pub(crate) fn enospc(s: &State) -> Vec<Branch> {
    fail(s, Errno::ENOSPC)
}

/// The transition function: every way `op` may go from `s`.
pub fn step(s: &State, op: &Op) -> Vec<Branch> {
    // sync(2), an unmount and a remount read-only all run
    // `sync_filesystem`.
    let sync_all = matches!(
        op,
        Op::Sync | Op::Umount { cp: None } | Op::Remount { ro: true }
    );
    held_evictions(step_op(s, op), sync_all)
}

/// Finding K11: a construction that held inodes removed while their pages
/// were dirty lets them go only when it ends (`nilfs_dispose_list` drops
/// the `igrab` reference), and their eviction (`nilfs_evict_inode`:
/// truncate the bmap, free the ifile entry) is written by the next
/// construction, a checkpoint of its own with the same files (seen on
/// Linux 6.1: create, write, unlink, mkcp, sync lists one checkpoint
/// more). nilfs-ref evicts at once. Both readings are allowed: the
/// eviction pending (a change that makes the next construction write a
/// checkpoint), or nothing left.
///
/// A `sync` (sync(2)), an unmount or a remount read-only (`sync_all`:
/// each runs `sync_filesystem`) may write the evictions itself: its
/// writeback pass (`sync_inodes_sb`, WB_SYNC_ALL) reaches a removed
/// inode's dirty pages through `nilfs_writepages`, whose
/// `nilfs_construct_dsync_segment` makes the full construction that holds
/// the inodes, and the evictions that follow are written by the
/// constructions after it in the same call — the next inode's writeback,
/// then `nilfs_sync_fs`. Seen through the kernel guest in lockstep
/// (`peer_kernel_lockstep.rs`): one file created, written and unlinked,
/// then sync or umount, left checkpoints 2 and 3 (6.1, 7.3); two such
/// files left 2, 3 and 4 (6.1), or 2 and 3 with the other eviction
/// written by the next unmount (6.12, not every time), or both evictions
/// in checkpoint 3 (6.1: a symlink and a directory). So with `k` inodes
/// held, the call writes `m` eviction checkpoints, `0 <= m <= k`, and
/// what is left, if anything, waits for the next construction.
fn held_evictions(branches: Vec<Branch>, sync_all: bool) -> Vec<Branch> {
    if !branches.iter().any(|b| b.next.pending.held_evictions > 0) {
        return branches;
    }
    let mut out = Vec::with_capacity(branches.len() + 2);
    for mut b in branches {
        let k = b.next.pending.held_evictions;
        if k == 0 {
            out.push(b);
            continue;
        }
        b.next.pending.held_evictions = 0;
        let evicting = b.clone();
        out.push(b);
        // `m` checkpoints in the call, each writing the evictions done by
        // then (one may carry several), and evictions `left` for the next
        // construction or not; without any, it is nilfs-ref's reading,
        // pushed above.
        let most = if sync_all { k } else { 0 };
        for m in 0..=most {
            for left in [false, true] {
                if (m == 0 && !left) || (m == k && left) {
                    continue;
                }
                let mut n = evicting.clone();
                for step in 0..m + u32::from(left) {
                    let p = &mut n.next.pending;
                    p.dirty = true;
                    p.history.push_back(n.next.live.clone());
                    p.history_times.push_back(n.next.clock);
                    p.history_ends.push_back(n.next.clock_hi);
                    if step < m {
                        n.next.construct();
                    }
                }
                out.push(n);
            }
        }
    }
    out
}

fn step_op(s: &State, op: &Op) -> Vec<Branch> {
    if let Some(c) = op.at() {
        let unknown = s.snapshot_mounts.contains(&c)
            && s.checkpoints.get(&c).is_some_and(|cp| cp.ns.is_none());
        if unknown {
            return vec![Branch {
                expect: Expect::Unjudged(format!(
                    "snapshot {c} is known only from an lscp listing, not what it holds"
                )),
                next: s.clone(),
            }];
        }
    }
    match op {
        // Opening a FIFO blocks until a writer or reader comes, a device
        // reaches its driver: not what the model describes. A runner's
        // truncate opens the file too (open, then ftruncate).
        Op::Read { path, at, .. }
        | Op::Truncate { path, at, .. }
        | Op::Fsync { path, at }
        | Op::Fdatasync { path, at }
        | Op::Create { path, at, .. }
            if s.view(*at).is_some_and(|ns| ns.is_special(path)) =>
        {
            invalid(s, "opening a FIFO, socket or device")
        }
        Op::Mkfs { .. } => invalid(s, "mkfs is only valid as the first line"),
        Op::Clock { now } => clock(s, *now),
        Op::Create {
            path,
            perm,
            excl,
            at,
        } => namespace::create(s, *at, path, *perm, *excl),
        Op::Mkdir { path, perm, at } => namespace::mkdir(s, *at, path, *perm),
        Op::Symlink { target, path, at } => namespace::symlink(s, *at, target, path),
        Op::Link { old, new, at } => namespace::link(s, *at, old, new),
        Op::Unlink { path, at } => namespace::removal(
            s,
            *at,
            |ns| ns.unlink_precheck(path),
            |ns| ns.unlink(path, s.now()),
        ),
        Op::Rmdir { path, at } => namespace::removal(
            s,
            *at,
            |ns| ns.rmdir_precheck(path),
            |ns| ns.rmdir(path, s.now()),
        ),
        Op::Rename {
            old,
            new,
            noreplace,
            exchange,
            at,
        } => namespace::rename(s, *at, old, new, *noreplace, *exchange),
        Op::Mknod {
            path,
            file_type,
            perm,
            rdev,
            at,
        } => namespace::mknod(s, *at, path, *file_type, *perm, *rdev),
        Op::Write {
            path,
            offset,
            data,
            append,
            at,
        } => data::write(s, *at, path, *offset, data, *append),
        Op::Truncate { path, size, at } => data::truncate(s, *at, path, *size),
        Op::Read {
            path,
            offset,
            len,
            at,
        } => data::read(s, *at, path, *offset, *len),
        Op::Chmod { path, perm, at } => {
            let now = s.now();
            attr::setattr(s, *at, (path, true), |ns| ns.chmod(path, *perm, now))
        }
        Op::Chown {
            path,
            uid,
            gid,
            follow,
            at,
        } => {
            let now = s.now();
            attr::setattr(s, *at, (path, *follow), |ns| {
                ns.chown(path, *uid, *gid, *follow, now)
            })
        }
        Op::Utimes {
            path,
            mtime,
            follow,
            at,
        } => {
            let now = s.now();
            attr::setattr(s, *at, (path, *follow), |ns| {
                ns.utimes(path, *mtime, *follow, now)
            })
        }
        Op::Setxattr {
            path,
            name,
            follow,
            at,
            ..
        } => attr::xattr(s, *at, path, name, *follow, XattrCall::Set),
        Op::Removexattr {
            path,
            name,
            follow,
            at,
        } => attr::xattr(s, *at, path, name, *follow, XattrCall::Remove),
        Op::Getxattr {
            path,
            name,
            follow,
            at,
        } => attr::xattr(s, *at, path, name, *follow, XattrCall::Get),
        Op::Listxattr { path, follow, at } => attr::listxattr(s, *at, path, *follow),
        Op::Lstat { path, at } => query::lstat(s, *at, path),
        Op::Readdir { path, at } => query::readdir(s, *at, path),
        Op::Readlink { path, at } => query::readlink(s, *at, path),
        Op::Statfs { at } => query::statfs(s, *at),
        Op::Manifest { at } => query::manifest(s, *at),
        Op::Fsync { path, at } => durability::fsync(s, *at, path, false),
        Op::Fdatasync { path, at } => durability::fsync(s, *at, path, true),
        Op::Sync => durability::sync(s),
        Op::Crash => durability::crash(s)
            .into_iter()
            .map(|next| Branch::exact(Outcome::Ok, next))
            .collect(),
        Op::Mkcp { snapshot } => after_timer(s, |s| checkpoint::mkcp(s, *snapshot)),
        Op::Chcp { cno, snapshot } => after_timer(s, |s| checkpoint::chcp(s, *cno, *snapshot)),
        Op::Rmcp { cno } => after_timer(s, |s| checkpoint::rmcp(s, *cno)),
        Op::Lscp => after_timer(s, checkpoint::lscp),
        Op::Clean { protection_s } => checkpoint::clean(s, *protection_s),
        Op::Mount { cp, ro } => mount::mount(s, *cp, *ro),
        Op::Umount { cp } => mount::umount(s, *cp),
        Op::Remount { ro } => mount::remount(s, *ro),
    }
}

/// An operation on the checkpoint table, from `s` and from every state
/// the log writer's timer may have left before it
/// ([`durability::timer_fired`]): the table is where a timer checkpoint
/// shows.
fn after_timer(s: &State, f: impl Fn(&State) -> Vec<Branch>) -> Vec<Branch> {
    let mut out = f(s);
    for t in durability::timer_fired(s) {
        for b in f(&t) {
            if !out.contains(&b) {
                out.push(b);
            }
        }
    }
    out
}

/// `clock`: the injected clock moves forward, never back.
fn clock(s: &State, now: i64) -> Vec<Branch> {
    if now < s.clock {
        return invalid(s, "the clock went back");
    }
    let mut n = s.clone();
    n.clock = now;
    n.clock_hi = now + s.time_window;
    ok(n)
}
