//! Attributes: chmod, chown and utimensat (`notify_change` ->
//! `nilfs_setattr`), and the extended attribute calls, which nilfs2
//! refuses (it installs no xattr handler).

use super::namespace::{namespace_op, Change};
use super::query::read_op;
use super::{fail, invalid, Branch, R};
use crate::fs::{Errno, Namespace};
use crate::op::Outcome;
use crate::state::{Cno, State};
use crate::variant::XattrCall;

/// chmod, chown and utimensat: `notify_change` -> `nilfs_setattr`, which
/// ends with `mark_inode_dirty` whether or not anything changed, so even
/// a change to the same values at the same clock dirties the inode (the
/// next construction makes a checkpoint), and the inode needs an inode
/// sync all the same: `mark_inode_dirty` is I_DIRTY, whose
/// I_DIRTY_DATASYNC makes `nilfs_dirty_inode` -> `nilfs_update_inode` set
/// NILFS_I_INODE_SYNC, so an fdatasync of it makes a full checkpoint.
/// (The model added none when nothing differed until the lockstep fuzz
/// target found a `chown(-1, -1)` and a `utimensat` to the same time
/// before an fdatasync that made a checkpoint on nilfs-ref, as on the
/// kernel: fuzz/corpus/lockstep/regress-002-setattr-of-nothing-before-fdatasync.) No page is
/// dirtied: an fsync of the file afterwards writes nothing (the model's
/// rule for metadata alone, see `Pending::dirty_inodes`). The path is
/// looked up before `mnt_want_write` (EROFS) is taken; no vacancy check
/// (`nilfs_transaction_begin(.., 0)`), nothing charged.
pub(super) fn setattr(
    s: &State,
    at: Option<Cno>,
    (path, follow): (&str, bool),
    f: impl FnOnce(&Namespace) -> R<Namespace>,
) -> Vec<Branch> {
    let change = Change {
        blocks: 0,
        vacancy_check: false,
        always_dirties: true,
    };
    let target = s.view(at).and_then(|ns| ns.lookup(path, follow).ok());
    namespace_op(s, at, change, f, |next| {
        if let Some(id) = target {
            next.pending.inode_sync.insert(id);
        }
    })
}

/// setxattr, removexattr and getxattr: refused, with the errno
/// `Namespace::xattr_refusal` gives after the path's errors (and, for a
/// change, EROFS). Whether a bad name (ERANGE, copied from user space) or
/// the path's errors come first is the variant's
/// ([`Variant::xattr_name_first`](crate::Variant::xattr_name_first)):
/// Linux 6.1 looks the path up first, later releases copy the name first.
pub(super) fn xattr(
    s: &State,
    at: Option<Cno>,
    path: &str,
    name: &str,
    follow: bool,
    call: XattrCall,
) -> Vec<Branch> {
    let Some(ns) = s.view(at) else {
        return invalid(s, "operation on a view that is not mounted");
    };
    let write = call != XattrCall::Get;
    let mut out = Vec::new();
    let mut errnos: Vec<Errno> = Vec::new();
    for &sockets in s.variant.user_xattrs_on_sockets() {
        let e = match ns.lookup(path, follow) {
            Err(e) => e,
            Ok(_) if write && !s.writable(at) => Errno::EROFS,
            Ok(id) => ns.xattr_refusal(id, name, write, sockets),
        };
        if !(name.is_empty() || name.len() > 255) || e == Errno::ERANGE {
            errnos.push(e);
            continue;
        }
        for &name_first in s.variant.xattr_name_first(call) {
            errnos.push(if name_first { Errno::ERANGE } else { e });
        }
    }
    errnos.sort();
    errnos.dedup();
    for e in errnos {
        out.extend(fail(s, e));
    }
    out
}

/// listxattr: the path's errors, else no names.
pub(super) fn listxattr(s: &State, at: Option<Cno>, path: &str, follow: bool) -> Vec<Branch> {
    read_op(s, at, |ns| {
        ns.lookup(path, follow)?;
        Ok(Outcome::Names(Vec::new()))
    })
}
