//! The model's stated laws, as checks of one transition. The property tests
//! (model/tests/laws.rs) and the bounded-exhaustive proof
//! (proofs/tests/model_exhaustive.rs) run them on every step they take.
//!
//! Each law is a property a user relies on; docs/model.md lists them.

use crate::fs::{FileData, Id, Kind};
use crate::op::{Op, Outcome};
use crate::state::State;
use imbl::OrdMap;

/// Data promised durable by a successful fsync/fdatasync, per inode, until
/// the file changes again.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Promises {
    pub files: OrdMap<Id, FileData>,
}

fn file_data(s: &State, id: Id) -> Option<&FileData> {
    match s.live.inodes.get(&id).map(|i| &i.kind) {
        Some(Kind::File(f)) => Some(f),
        _ => None,
    }
}

fn file_data_in(ns: &crate::fs::Namespace, id: Id) -> Option<&FileData> {
    match ns.inodes.get(&id).map(|i| &i.kind) {
        Some(Kind::File(f)) => Some(f),
        _ => None,
    }
}

fn is_modifying(op: &Op) -> Option<Option<u64>> {
    match op {
        Op::Create { at, .. }
        | Op::Mkdir { at, .. }
        | Op::Symlink { at, .. }
        | Op::Link { at, .. }
        | Op::Unlink { at, .. }
        | Op::Rmdir { at, .. }
        | Op::Rename { at, .. }
        | Op::Write { at, .. }
        | Op::Truncate { at, .. }
        | Op::Chmod { at, .. }
        | Op::Chown { at, .. }
        | Op::Utimes { at, .. }
        | Op::Mknod { at, .. } => Some(*at),
        _ => None,
    }
}

/// Checks every law on the transition `before --op/outcome--> after` and
/// updates `promises`. Returns the first broken law.
pub fn check_transition(
    before: &State,
    op: &Op,
    outcome: &Outcome,
    after: &State,
    promises: &mut Promises,
) -> Result<(), String> {
    // Law 1: a checkpoint's view never changes while it exists.
    for (c, cp) in before.checkpoints.iter() {
        if let Some(now) = after.checkpoints.get(c) {
            if now.ns != cp.ns {
                return Err(format!("law 1: the view of checkpoint {c} changed"));
            }
        }
    }
    // Law 2: a snapshot is never removed (only `chcp cp` turns it back into
    // a checkpoint; a crash may forget a snapshot flag set after the last
    // construction).
    for (c, _) in before.checkpoints.iter().filter(|(_, cp)| cp.snapshot) {
        let durable_flag = match &before.pending.table_at_construction {
            Some(t) => t.get(c).is_some_and(|x| x.snapshot),
            None => true,
        };
        let unset = matches!(op, Op::Chcp { cno, snapshot: false } if cno == c);
        let kept = after.checkpoints.get(c).is_some_and(|x| x.snapshot);
        if !kept && !unset && (durable_flag || !matches!(op, Op::Crash)) {
            return Err(format!(
                "law 2: snapshot {c} disappeared ({op:?} -> {outcome:?})"
            ));
        }
    }
    // Law 3: rmcp of a snapshot is refused with EBUSY (EROFS first on a
    // read-only mount: the ioctl takes write access before it looks).
    if let Op::Rmcp { cno } = op {
        let refusal = if before.mount == Some(crate::state::Mount::ReadOnly) {
            crate::Errno::EROFS
        } else {
            crate::Errno::EBUSY
        };
        if before.checkpoints.get(cno).is_some_and(|c| c.snapshot)
            && *outcome != Outcome::Err(refusal)
        {
            return Err(format!("law 3: rmcp of snapshot {cno} gave {outcome:?}"));
        }
    }
    // Law 4: a read-only checkpoint mount refuses every change.
    if let Some(Some(c)) = is_modifying(op) {
        if matches!(outcome, Outcome::Ok | Outcome::Written(_)) {
            return Err(format!(
                "law 4: {op:?} succeeded on read-only checkpoint mount {c}"
            ));
        }
        if before.checkpoints.get(&c).map(|x| &x.ns) != after.checkpoints.get(&c).map(|x| &x.ns) {
            return Err(format!("law 4: {op:?} changed read-only checkpoint {c}"));
        }
    }
    // Law 5: the cleaner changes no view: not the live one, not any
    // checkpoint's (law 1), and removes no snapshot (law 2).
    if let Op::Clean { .. } = op {
        if after.live != before.live {
            return Err("law 5: clean changed the live namespace".into());
        }
    }
    // Law 6: write then read returns the data.
    // With O_APPEND the data went to the end: it ends at the new size.
    if let (
        Op::Write {
            path,
            offset,
            data,
            append,
            at: None,
        },
        Outcome::Written(n),
    ) = (op, outcome)
    {
        let offset = if *append {
            let id = after
                .live
                .lookup(path, true)
                .map_err(|e| format!("law 6: the appended file is gone: {e:?}"))?;
            file_data(after, id).map_or(0, |f| f.size) - n
        } else {
            *offset
        };
        let got = after
            .live
            .read(path, offset, *n)
            .map_err(|e| format!("law 6: read after write: {e:?}"))?;
        let mut want = vec![0; *n as usize];
        data.fill(0, &mut want);
        if got != want {
            return Err(format!("law 6: read after {op:?} returned other bytes"));
        }
    }
    // Law 8: chmod, chown and utimensat change one inode's attributes and
    // nothing else: no other inode, no contents, no link count, no name;
    // what they set is what stat then shows.
    if let (
        Op::Chmod { path, .. } | Op::Chown { path, .. } | Op::Utimes { path, .. },
        Outcome::Ok,
    ) = (op, outcome)
    {
        let follow = match op {
            Op::Chown { follow, .. } | Op::Utimes { follow, .. } => *follow,
            _ => true,
        };
        let id = after
            .live
            .lookup(path, follow)
            .map_err(|e| format!("law 8: {op:?} lost its file: {e:?}"))?;
        for (i, b) in before.live.inodes.iter() {
            let a = after.live.inodes.get(i);
            let same = a.is_some_and(|a| {
                if *i == id {
                    a.kind == b.kind && a.nlink == b.nlink
                } else {
                    a == b
                }
            });
            if !same {
                return Err(format!(
                    "law 8: {op:?} changed inode {i} beyond its attributes"
                ));
            }
        }
        if after.live.inodes.len() != before.live.inodes.len() {
            return Err(format!("law 8: {op:?} added an inode"));
        }
        let st = after.live.stat_of(id);
        let shows = match op {
            Op::Chmod { perm, .. } => st.perm == perm & 0o7777,
            Op::Chown { uid, gid, .. } => {
                uid.is_none_or(|u| st.uid == Some(u)) && gid.is_none_or(|g| st.gid == Some(g))
            }
            Op::Utimes { mtime, .. } => st.mtime == Some(mtime.unwrap_or(after.clock)),
            _ => true,
        };
        if !shows || st.ctime != Some(after.clock) {
            return Err(format!("law 8: stat after {op:?} does not show it: {st:?}"));
        }
    }
    // Law 9: mknod adds one inode of its type (a device with its number)
    // under its name, with one link and no data, and changes no other file.
    if let (
        Op::Mknod {
            path,
            file_type,
            rdev,
            ..
        },
        Outcome::Ok,
    ) = (op, outcome)
    {
        let id = after
            .live
            .lookup(path, false)
            .map_err(|e| format!("law 9: {op:?} made no name: {e:?}"))?;
        if before.live.inodes.contains_key(&id) {
            return Err(format!("law 9: {op:?} reused inode {id}"));
        }
        let st = after.live.stat_of(id);
        let want_rdev = matches!(
            file_type,
            crate::fs::FileType::CharDevice | crate::fs::FileType::BlockDevice
        )
        .then_some(*rdev);
        if st.file_type != *file_type || st.nlink != 1 || st.size != 0 || st.rdev != want_rdev {
            return Err(format!("law 9: {op:?} made {st:?}"));
        }
        for (i, b) in before.live.inodes.iter() {
            let Some(a) = after.live.inodes.get(i) else {
                return Err(format!("law 9: {op:?} removed inode {i}"));
            };
            if !matches!(b.kind, Kind::Dir { .. }) && a != b {
                return Err(format!("law 9: {op:?} changed inode {i}"));
            }
        }
    }
    // Law 7: after a crash, nothing is mounted, the live namespace is the
    // latest checkpoint's, and every fsync'd/fdatasync'd file has its data.
    if let Op::Crash = op {
        if after.mount.is_some() || !after.snapshot_mounts.is_empty() {
            return Err("law 7: something is still mounted after a crash".into());
        }
        if after.live != *after.latest_ns() {
            return Err("law 7: recovery did not end in a checkpoint".into());
        }
        for (id, f) in promises.files.iter() {
            if file_data(after, *id) != Some(f) {
                return Err(format!(
                    "law 7: fsync'd file (model id {id}) lost its data in a crash"
                ));
            }
        }
    }
    // Promises: fsync/fdatasync that succeeded on the rw latest, for a file
    // it had to write (its pages were dirty: nilfs_sync_file writes nothing
    // for an inode nilfs_inode_dirty calls clean, such as a new empty file)
    // or whose data is already in the latest checkpoint.
    match (op, outcome) {
        (Op::Fsync { path, at: None } | Op::Fdatasync { path, at: None }, Outcome::Ok)
            if before.mount == Some(crate::state::Mount::ReadWrite) =>
        {
            if let Ok(id) = after.live.lookup(path, true) {
                let in_checkpoint = file_data_in(before.latest_ns(), id) == file_data(after, id);
                if before.pending.dirty_inodes.contains(&id) || in_checkpoint {
                    if let Some(f) = file_data(after, id) {
                        promises.files.insert(id, f.clone());
                    }
                }
            }
        }
        _ => {}
    }
    let stale: Vec<Id> = promises
        .files
        .iter()
        .filter(|(id, f)| file_data(after, **id) != Some(*f))
        .map(|(id, _)| *id)
        .collect();
    for id in stale {
        // The user changed (or removed) the file since: the promise ends.
        promises.files.remove(&id);
    }
    Ok(())
}
