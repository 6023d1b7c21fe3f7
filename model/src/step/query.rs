//! Reads that change nothing: lstat, readdir, readlink, statfs, manifest
//! (and `read_op`, the guard every read shares).

use super::{invalid, Branch, Expect, R};
use crate::fs::Namespace;
use crate::manifest::manifest as manifest_of;
use crate::op::Outcome;
use crate::state::{Cno, State};

/// A read of a mounted view: the view must be mounted (else the trace is
/// invalid); the outcome is `f`'s, or its errno; nothing changes.
pub(super) fn read_op(
    s: &State,
    at: Option<Cno>,
    f: impl FnOnce(&Namespace) -> R<Outcome>,
) -> Vec<Branch> {
    let Some(ns) = s.view(at) else {
        return invalid(s, "operation on a view that is not mounted");
    };
    let outcome = f(ns).unwrap_or_else(Outcome::Err);
    vec![Branch::exact(outcome, s.clone())]
}

/// `lstat`: its times are judged against the inode's stamps
/// ([`Expect::Stat`]).
pub(super) fn lstat(s: &State, at: Option<Cno>, path: &str) -> Vec<Branch> {
    let Some(ns) = s.view(at) else {
        return invalid(s, "operation on a view that is not mounted");
    };
    match ns.lookup(path, false) {
        Err(e) => vec![Branch::exact(Outcome::Err(e), s.clone())],
        Ok(id) => {
            let (mtime, ctime) = ns.stamps_of(id);
            vec![Branch {
                expect: Expect::Stat {
                    info: ns.stat_of(id),
                    mtime,
                    ctime,
                    at,
                    id,
                },
                next: s.clone(),
            }]
        }
    }
}

pub(super) fn readdir(s: &State, at: Option<Cno>, path: &str) -> Vec<Branch> {
    read_op(s, at, |ns| ns.readdir(path).map(Outcome::Names))
}

pub(super) fn readlink(s: &State, at: Option<Cno>, path: &str) -> Vec<Branch> {
    read_op(s, at, |ns| ns.readlink(path).map(Outcome::Target))
}

/// tests/guest/manifest.sh of the view.
pub(super) fn manifest(s: &State, at: Option<Cno>) -> Vec<Branch> {
    read_op(s, at, |ns| Ok(Outcome::Manifest(manifest_of(ns))))
}

/// `statfs` (`nilfs_statfs`), judged by `accept::statfs_accepts`. An
/// inode whose pages were dirtied is held by the log writer's dirty list
/// (`nilfs_set_file_dirty` takes `igrab`) until a full construction writes
/// it and lets it go (`nilfs_dispose_list`): removed since, it is evicted
/// only then, and counted till then (`nilfs_evict_inode` drops
/// `inodes_count`). Seen on Linux 6.1 (campaign kernel seeds 17 and 21,
/// profile attrs).
pub(super) fn statfs(s: &State, at: Option<Cno>) -> Vec<Branch> {
    let Some(ns) = s.view(at) else {
        return invalid(s, "operation on a view that is not mounted");
    };
    let held = if at.is_none() {
        s.pending
            .dirty_inodes
            .iter()
            .filter(|id| !ns.inodes.contains_key(*id))
            .count() as u64
    } else {
        0
    };
    vec![Branch {
        expect: Expect::Statfs {
            inodes: ns.inodes_used(),
            held,
        },
        next: s.clone(),
    }]
}
