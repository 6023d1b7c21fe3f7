//! Names: create, mkdir, symlink, link, unlink, rmdir, rename (with its
//! renameat2 flags) and mknod. Each is the namespace's rule (`fs::namei`)
//! under one guard, [`namespace_op`]; only create, mkdir, symlink, link,
//! rename and mknod pass `vacancy_check = 1` to `nilfs_transaction_begin`
//! and so may find the disk full (unlink and rmdir pass 0).

use super::{enospc, fail, invalid, ok, space_guard, Branch, R};
use crate::fs::{Errno, FileType, Namespace};
use crate::op::Outcome;
use crate::space::META_OP_BLOCKS;
use crate::state::{Cno, State};

/// What a change of the live namespace costs and dirties.
pub(super) struct Change {
    /// Blocks charged to the space estimate.
    pub blocks: u64,
    /// `nilfs_transaction_begin(sb, ti, vacancy_check = 1)`: the change
    /// may find the disk full.
    pub vacancy_check: bool,
    /// The inode is marked dirty even when nothing changed (`nilfs_setattr`
    /// ends in `mark_inode_dirty`): the next construction makes a
    /// checkpoint all the same.
    pub always_dirties: bool,
}

/// A namespace change with `vacancy_check = 1`, charged a directory block
/// and an ifile block.
const CREATES: Change = Change {
    blocks: META_OP_BLOCKS,
    vacancy_check: true,
    always_dirties: false,
};

/// The guarded action every path operation that changes the namespace
/// is: the view must be mounted (else the trace is invalid); the
/// namespace's rule `f` gives its errno or the namespace after; on a
/// read-only view, EROFS (`mnt_want_write`, after the path's own errors);
/// a change to nothing dirties nothing (`vfs_rename` of a name onto
/// another link of the same inode returns 0 at once); otherwise the
/// change is recorded (`State::changed`: every inode it changed went
/// through `nilfs_mark_inode_dirty`), `mark` adds what the namespaces'
/// difference cannot show, and the space guard allows ENOSPC when the
/// change checks vacancy.
pub(super) fn namespace_op(
    s: &State,
    at: Option<Cno>,
    change: Change,
    f: impl FnOnce(&Namespace) -> R<Namespace>,
    mark: impl FnOnce(&mut State),
) -> Vec<Branch> {
    let Some(ns) = s.view(at) else {
        return invalid(s, "operation on a view that is not mounted");
    };
    let after = match f(ns) {
        Err(e) => return fail(s, e),
        Ok(_) if !s.writable(at) => return fail(s, Errno::EROFS),
        Ok(after) => after,
    };
    if after == *ns && !change.always_dirties {
        return ok(s.clone());
    }
    let mut next = s.changed(after, change.blocks);
    mark(&mut next);
    space_guard(
        s,
        change.vacancy_check.then_some(change.blocks),
        Branch::exact(Outcome::Ok, next),
        || enospc(s),
    )
}

/// Removals, links and renames on a read-only view: `do_unlinkat`,
/// `do_rmdir`, `do_linkat` and `do_renameat2` take write access to the
/// mount (`mnt_want_write`, EROFS) right after walking to the parent
/// directories, before they look the last component up — so a missing
/// name is EROFS there, not ENOENT. `None` when the view is writable (or
/// not mounted): the operation's own guard decides.
fn read_only_first(
    s: &State,
    at: Option<Cno>,
    precheck: impl FnOnce(&Namespace) -> R<()>,
) -> Option<Vec<Branch>> {
    let ns = s.view(at)?;
    if s.writable(at) {
        return None;
    }
    Some(fail(s, precheck(ns).err().unwrap_or(Errno::EROFS)))
}

/// `open(O_CREAT)` (`nilfs_create`). The new inode is among the changed
/// ones, so it needs an inode sync (`NILFS_I_INODE_SYNC`); opening an
/// existing file changes nothing (the rule returns the namespace as it
/// was).
pub(super) fn create(s: &State, at: Option<Cno>, path: &str, perm: u32, excl: bool) -> Vec<Branch> {
    let now = s.now();
    namespace_op(
        s,
        at,
        CREATES,
        |ns| ns.create(path, perm, excl, now),
        |_| {},
    )
}

/// `mkdir` (`nilfs_mkdir`).
pub(super) fn mkdir(s: &State, at: Option<Cno>, path: &str, perm: u32) -> Vec<Branch> {
    let now = s.now();
    namespace_op(s, at, CREATES, |ns| ns.mkdir(path, perm, now), |_| {})
}

/// `symlink` (`nilfs_symlink`).
pub(super) fn symlink(s: &State, at: Option<Cno>, target: &str, path: &str) -> Vec<Branch> {
    let (now, bs) = (s.now(), s.geometry.block_size);
    namespace_op(
        s,
        at,
        CREATES,
        |ns| ns.symlink(target, path, bs, now),
        |_| {},
    )
}

/// `mknod` (`nilfs_mknod`).
pub(super) fn mknod(
    s: &State,
    at: Option<Cno>,
    path: &str,
    file_type: FileType,
    perm: u32,
    rdev: [u32; 2],
) -> Vec<Branch> {
    let now = s.now();
    namespace_op(
        s,
        at,
        CREATES,
        |ns| ns.mknod(path, file_type, perm, rdev, now),
        |_| {},
    )
}

/// `link` (`nilfs_link`).
pub(super) fn link(s: &State, at: Option<Cno>, old: &str, new: &str) -> Vec<Branch> {
    let now = s.now();
    read_only_first(s, at, |ns| ns.link_precheck(old, new))
        .unwrap_or_else(|| namespace_op(s, at, CREATES, |ns| ns.link(old, new, now), |_| {}))
}

/// A removal, `unlink` (`nilfs_unlink`) or `rmdir` (`nilfs_rmdir`):
/// `do_unlinkat`'s and `do_rmdir`'s order on a read-only view
/// (`precheck`), and no vacancy check (`nilfs_transaction_begin(.., 0)`).
pub(super) fn removal(
    s: &State,
    at: Option<Cno>,
    precheck: impl FnOnce(&Namespace) -> R<()>,
    f: impl FnOnce(&Namespace) -> R<Namespace>,
) -> Vec<Branch> {
    let change = Change {
        vacancy_check: false,
        ..CREATES
    };
    read_only_first(s, at, precheck).unwrap_or_else(|| namespace_op(s, at, change, f, |_| {}))
}

/// `renameat2(old, new, flags)`. `do_renameat2` refuses RENAME_NOREPLACE
/// with RENAME_EXCHANGE before any lookup. A plain rename marks the moved
/// inode dirty (`nilfs_rename`: its ctime) even when the clock has not
/// moved, so it needs an inode sync; a moved directory's ".." is
/// rewritten by `nilfs_set_link` even within one parent (`nilfs_rename`
/// takes `dir_de` for every directory), so its pages are dirty too and an
/// fsync of it constructs.
pub(super) fn rename(
    s: &State,
    at: Option<Cno>,
    old: &str,
    new: &str,
    noreplace: bool,
    exchange: bool,
) -> Vec<Branch> {
    if noreplace && exchange {
        return fail(s, Errno::EINVAL);
    }
    let now = s.now();
    // Whether the renamed inode is a directory, and whether it changes
    // parent: its mtime follows the variant's rule.
    let moved = s.view(at).and_then(|ns| ns.rename_subject(old, new));
    let choices: &[bool] = match moved {
        Some((_, true, changes_parent)) => s.variant.renamed_dir_mtime(changes_parent),
        _ => &[false],
    };
    read_only_first(s, at, |ns| ns.rename_precheck(old, new, noreplace)).unwrap_or_else(|| {
        let mut branches: Vec<Branch> = Vec::new();
        for &dir_mtime in choices {
            let more = if noreplace || exchange {
                namespace_op(
                    s,
                    at,
                    CREATES,
                    |ns| ns.rename_flags(old, new, noreplace, exchange, now, dir_mtime),
                    |_| {},
                )
            } else {
                namespace_op(
                    s,
                    at,
                    CREATES,
                    |ns| ns.rename(old, new, now, dir_mtime),
                    |next| {
                        if let Some((id, is_dir, _)) = moved {
                            next.pending.inode_sync.insert(id);
                            if is_dir {
                                next.pending.dirty_inodes.insert(id);
                            }
                        }
                    },
                )
            };
            branches.extend(more);
        }
        branches
    })
}
