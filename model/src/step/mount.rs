//! mount, umount and remount.

use super::{fail, ok, Branch};
use crate::fs::Errno;
use crate::state::{Cno, Mount, State};

fn mode(ro: bool) -> Mount {
    if ro {
        Mount::ReadOnly
    } else {
        Mount::ReadWrite
    }
}

/// `mount [-o ro]` of the latest (EBUSY if mounted), or `mount -o
/// ro,cp=CNO` of a snapshot: `nilfs_attach_snapshot` answers "The
/// specified checkpoint is not a snapshot" with EINVAL, and `cp=` needs a
/// read-only mount (EINVAL); a snapshot mounted already is EBUSY.
pub(super) fn mount(s: &State, cp: Option<Cno>, ro: bool) -> Vec<Branch> {
    let Some(c) = cp else {
        if s.mount.is_some() {
            return fail(s, Errno::EBUSY);
        }
        let mut n = s.clone();
        n.mount = Some(mode(ro));
        return ok(n);
    };
    if !ro {
        return fail(s, Errno::EINVAL);
    }
    if s.snapshot_mounts.contains(&c) {
        return fail(s, Errno::EBUSY);
    }
    match s.checkpoints.get(&c) {
        Some(cp) if cp.snapshot => {
            let mut n = s.clone();
            n.snapshot_mounts.insert(c);
            ok(n)
        }
        _ => fail(s, Errno::EINVAL),
    }
}

/// `umount`: of a snapshot, it goes; of the latest, `nilfs_put_super` ->
/// `nilfs_detach_log_writer` makes a final construction, so everything
/// is durable. EINVAL for what is not mounted.
pub(super) fn umount(s: &State, cp: Option<Cno>) -> Vec<Branch> {
    let mut n = s.clone();
    match cp {
        Some(c) if s.snapshot_mounts.contains(&c) => {
            n.snapshot_mounts.remove(&c);
        }
        None if s.mount.is_some() => {
            n.construct();
            n.mount = None;
            // The in-memory inodes, and their flags, go with the mount.
            n.pending.inode_sync.clear();
        }
        _ => return fail(s, Errno::EINVAL),
    }
    ok(n)
}

/// `mount -o remount,ro|rw` of the latest: read-write to read-only
/// constructs first (`nilfs_remount` -> `nilfs_detach_log_writer`).
pub(super) fn remount(s: &State, ro: bool) -> Vec<Branch> {
    let Some(m) = s.mount else {
        return fail(s, Errno::EINVAL);
    };
    let mut n = s.clone();
    if m == Mount::ReadWrite && ro {
        n.construct();
    }
    n.mount = Some(mode(ro));
    ok(n)
}
