//! File contents: write (pwrite, O_APPEND), truncate and read.

use super::namespace::{namespace_op, Change};
use super::{fail, invalid, space_guard, Branch, Expect};
use crate::fs::{Errno, Id, Kind, Namespace};
use crate::op::Outcome;
use crate::pattern::{sha256_hex, Pattern};
use crate::state::{Cno, State};

/// The kernel's page size on the machines the model speaks for (x86-64,
/// arm64 with 4 KiB pages): the step of a short write.
pub(crate) const KERNEL_PAGE: u64 = 4096;

/// A regular file's size.
pub(crate) fn size_of(ns: &Namespace, id: Id) -> Option<u64> {
    match ns.inodes.get(&id).map(|i| &i.kind) {
        Some(Kind::File(f)) => Some(f.size),
        _ => None,
    }
}

/// `pwrite(path, data, offset)`, or `write(2)` on an `O_APPEND` file,
/// whose data goes at the size when the write is made
/// (`generic_write_checks`). The namespace's rule (`fs::file`) gives the
/// errno or the bytes written; a read-only view is EROFS after it; a
/// zero-length write never reaches the file system (`generic_write_checks`
/// returns 0 before any change, mtime included), so nothing becomes dirty.
///
/// Done, it dirties every page it copies into (`nilfs_write_end` ->
/// `nilfs_set_file_dirty`), even when the bytes and the times come out as
/// they were, which the namespaces' difference cannot see (lockstep
/// regress_013); a write that grew the file needs an inode sync.
///
/// Its space guard (`nilfs_write_begin` checks vacancy for every page)
/// allows three refusals:
/// - ENOSPC with the times set: `__generic_file_write_iter` calls
///   `file_update_time` before `generic_perform_write`, so a write whose
///   first page `nilfs_write_begin` refuses has already set mtime and ctime
///   if the clock moved since they were last set; `nilfs_dirty_inode` then
///   marks the inode for the ifile (not its pages), and the next sync
///   makes a checkpoint (seen on Linux 6.1, docs/findings.md K7).
///   (`generic_update_time` passes I_DIRTY_SYNC alone, so
///   NILFS_I_INODE_SYNC stays as it was.)
/// - ENOSPC with nothing changed, when the clock may not have moved since
///   the times were set (their stamps and the call's interval overlap);
///   when it surely has not (an injected clock, exact stamps), this is
///   the only refusal of the two: `inode_needs_update_time` finds nothing
///   to do and nothing is dirtied.
/// - a short write (`Expect::ShortWrite`) of a write longer than a page:
///   the pages before the refused one stay written.
pub(super) fn write(
    s: &State,
    at: Option<Cno>,
    path: &str,
    offset: u64,
    data: &Pattern,
    append: bool,
) -> Vec<Branch> {
    let Some(ns) = s.view(at) else {
        return invalid(s, "operation on a view that is not mounted");
    };
    if ns.is_special(path) {
        return invalid(s, "opening a FIFO, socket or device for writing");
    }
    let offset = if append {
        ns.lookup(path, true)
            .ok()
            .and_then(|id| size_of(ns, id))
            .unwrap_or(0)
    } else {
        offset
    };
    let (after, n) = match ns.write(path, offset, data, s.now()) {
        Err(e) => return fail(s, e),
        Ok(_) if !s.writable(at) => return fail(s, Errno::EROFS),
        Ok((_, 0)) => return vec![Branch::exact(Outcome::Written(0), s.clone())],
        Ok(written) => written,
    };
    let id = ns.lookup(path, true).expect("write resolved it");
    let grew = size_of(&after, id) != size_of(ns, id);
    let blocks = s.blocks_for(data.len());
    let mut next = s.clone().modified(after, blocks);
    next.pending.dirty_inodes.insert(id);
    if grew {
        next.pending.inode_sync.insert(id);
    }
    space_guard(
        s,
        Some(blocks),
        Branch::exact(Outcome::Written(n), next),
        || {
            let now = s.now();
            let mut refused = Vec::new();
            if !ns.times_surely_stay(id, now) {
                let touched = ns.touch_times(id, now);
                refused.push(Branch::exact(
                    Outcome::Err(Errno::ENOSPC),
                    s.clone().modified(touched, 0),
                ));
            }
            if ns.times_may_stay(id, now) {
                refused.push(Branch::exact(Outcome::Err(Errno::ENOSPC), s.clone()));
            }
            // `generic_perform_write` asks `nilfs_write_begin` (its
            // vacancy check) page by page: a write that reaches into a
            // second page may stop at the page boundary, whatever its
            // length.
            if offset % KERNEL_PAGE + n > KERNEL_PAGE {
                refused.push(Branch {
                    expect: Expect::ShortWrite {
                        path: path.to_string(),
                        offset,
                        data: data.clone(),
                    },
                    next: s.clone(),
                });
            }
            refused
        },
    )
}

/// `truncate(path, size)` (`nilfs_setattr` -> `nilfs_truncate`): no
/// vacancy check, one block charged. `nilfs_setattr` ends with
/// `mark_inode_dirty` whether or not the size or the times changed, so
/// even a truncate to the same size at the same clock dirties the inode
/// (the next construction makes a checkpoint), and the file needs an
/// inode sync.
pub(super) fn truncate(s: &State, at: Option<Cno>, path: &str, size: u64) -> Vec<Branch> {
    let now = s.now();
    let change = Change {
        blocks: 1,
        vacancy_check: false,
        always_dirties: true,
    };
    namespace_op(
        s,
        at,
        change,
        |ns| ns.truncate(path, size, now),
        |next| {
            let id = next.live.lookup(path, true).expect("truncate resolved it");
            next.pending.inode_sync.insert(id);
        },
    )
}

/// `pread`: the bytes' length and SHA-256.
pub(super) fn read(s: &State, at: Option<Cno>, path: &str, offset: u64, len: u64) -> Vec<Branch> {
    super::query::read_op(s, at, |ns| {
        let d = ns.read(path, offset, len)?;
        Ok(Outcome::Data {
            len: d.len() as u64,
            sha256: sha256_hex(&d),
        })
    })
}
