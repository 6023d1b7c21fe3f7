//! The model's stated laws, as checks of one transition. The property tests
//! (model/tests/laws.rs) and the bounded-exhaustive proof
//! (proofs/tests/model_exhaustive.rs) run them on every step they take.
//!
//! Each law is a property a user relies on, with a number (its name in
//! messages: "law 7: ...", which the proofs' mutants are matched against),
//! a name and a description; [`LAWS`] holds them in order and
//! [`check_transition`] runs them in that order. docs/model.md lists them.
//! The checkpoint laws come first (1-5: views, snapshots, rmcp, read-only
//! mounts, the cleaner), then data (6), durability (7) and the attribute
//! and special-file laws (8, 9).

use crate::fs::{FileData, FileType, Id, Kind, Namespace};
use crate::op::{Op, Outcome};
use crate::state::{Mount, State};
use crate::Errno;
use imbl::OrdMap;

/// Data promised durable by a successful fsync/fdatasync, per inode, until
/// the file changes again.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Promises {
    pub files: OrdMap<Id, FileData>,
}

/// One transition `before --op/outcome--> after`, with the promises made
/// before it.
pub struct Transition<'a> {
    pub before: &'a State,
    pub op: &'a Op,
    pub outcome: &'a Outcome,
    pub after: &'a State,
    pub promises: &'a Promises,
}

/// One law: its number, name, what it says, and its check (`Err` with
/// what broke it).
pub struct Law {
    pub number: u32,
    pub name: &'static str,
    pub description: &'static str,
    pub check: fn(&Transition) -> Result<(), String>,
}

/// Every law, in the order [`check_transition`] checks them.
pub const LAWS: &[Law] = &[
    Law {
        number: 1,
        name: "checkpoint-views-are-frozen",
        description: "a checkpoint's view never changes while it exists",
        check: checkpoint_views_are_frozen,
    },
    Law {
        number: 2,
        name: "snapshots-stay",
        description: "a snapshot never disappears, except by `chcp cp` or a crash \
                      forgetting a flag set after the last construction",
        check: snapshots_stay,
    },
    Law {
        number: 3,
        name: "rmcp-of-a-snapshot-is-ebusy",
        description: "rmcp of a snapshot is refused with EBUSY (EROFS first on a \
                      read-only mount)",
        check: rmcp_of_a_snapshot_is_ebusy,
    },
    Law {
        number: 4,
        name: "read-only-mounts-refuse-changes",
        description: "a read-only checkpoint mount refuses every change and stays as it was",
        check: read_only_mounts_refuse_changes,
    },
    Law {
        number: 5,
        name: "clean-changes-no-view",
        description: "the cleaner changes no view (the live one here; checkpoints by law 1, \
                      snapshots by law 2)",
        check: clean_changes_no_view,
    },
    Law {
        number: 6,
        name: "write-then-read",
        description: "what a write wrote reads back",
        check: write_then_read,
    },
    Law {
        number: 7,
        name: "crash-keeps-what-was-synced",
        description: "after a crash nothing is mounted, the live state is a checkpoint, and \
                      every fsync'd / fdatasync'd file still has its data",
        check: crash_keeps_what_was_synced,
    },
    Law {
        number: 8,
        name: "setattr-changes-one-inode",
        description: "chmod, chown and utimensat change one inode's attributes and nothing \
                      else, and stat then shows what they set, with ctime at the clock",
        check: setattr_changes_one_inode,
    },
    Law {
        number: 9,
        name: "mknod-adds-one-inode",
        description: "mknod adds one inode of its type with one link and no data (a device \
                      with its number) and changes no other file",
        check: mknod_adds_one_inode,
    },
];

/// Checks every law on the transition `before --op/outcome--> after`, in
/// [`LAWS`]' order, and then updates `promises`. Returns the first broken
/// law ("law N: what broke it"); the promises are then left as they were.
pub fn check_transition(
    before: &State,
    op: &Op,
    outcome: &Outcome,
    after: &State,
    promises: &mut Promises,
) -> Result<(), String> {
    let t = Transition {
        before,
        op,
        outcome,
        after,
        promises,
    };
    for law in LAWS {
        (law.check)(&t).map_err(|e| format!("law {}: {e}", law.number))?;
    }
    promises.update(before, op, outcome, after);
    Ok(())
}

fn file_data_in(ns: &Namespace, id: Id) -> Option<&FileData> {
    match ns.inodes.get(&id).map(|i| &i.kind) {
        Some(Kind::File(f)) => Some(f),
        _ => None,
    }
}

fn file_data(s: &State, id: Id) -> Option<&FileData> {
    file_data_in(&s.live, id)
}

impl Promises {
    /// A successful fsync/fdatasync on the rw latest promises its file's
    /// data, for a file it had to write (its pages were dirty:
    /// `nilfs_sync_file` writes nothing for an inode `nilfs_inode_dirty`
    /// calls clean, such as a new empty file) or whose data is already in
    /// the latest checkpoint. A promise ends when the user changes (or
    /// removes) the file.
    fn update(&mut self, before: &State, op: &Op, outcome: &Outcome, after: &State) {
        match (op, outcome) {
            (Op::Fsync { path, at: None } | Op::Fdatasync { path, at: None }, Outcome::Ok)
                if before.mount == Some(Mount::ReadWrite) =>
            {
                if let Ok(id) = after.live.lookup(path, true) {
                    let in_checkpoint =
                        file_data_in(before.latest_ns(), id) == file_data(after, id);
                    if before.pending.dirty_inodes.contains(&id) || in_checkpoint {
                        if let Some(f) = file_data(after, id) {
                            self.files.insert(id, f.clone());
                        }
                    }
                }
            }
            _ => {}
        }
        let stale: Vec<Id> = self
            .files
            .iter()
            .filter(|(id, f)| file_data(after, **id) != Some(*f))
            .map(|(id, _)| *id)
            .collect();
        for id in stale {
            self.files.remove(&id);
        }
    }
}

/// Law 1.
///
/// What the model knows of a view may grow or shrink without the view
/// changing: an observation narrows its time stamps (a read through a
/// real clock), and a listing that leaves which checkpoint is which
/// undecided forgets its contents (`accept::bind_matched`). Neither is a
/// change; a different tree, or a stamp outside its interval, is. The law
/// holds a checkpoint by its number once that number is observed: before,
/// a listing may renumber it (`accept::lscp_accept`), and another may come
/// to hold its provisional number.
fn checkpoint_views_are_frozen(t: &Transition) -> Result<(), String> {
    for (c, cp) in t.before.checkpoints.iter().filter(|(_, cp)| cp.bound) {
        let Some(now) = t.after.checkpoints.get(c) else {
            continue;
        };
        if let (Some(was), Some(is)) = (&cp.ns, &now.ns) {
            if !was.refined_by(is) {
                return Err(format!("the view of checkpoint {c} changed"));
            }
        }
    }
    Ok(())
}

/// Law 2: only `chcp cp` turns a snapshot back into a checkpoint; a crash
/// may forget a snapshot flag set after the last construction.
fn snapshots_stay(t: &Transition) -> Result<(), String> {
    let (op, outcome) = (t.op, t.outcome);
    for (c, _) in t.before.checkpoints.iter().filter(|(_, cp)| cp.snapshot) {
        let durable_flag = match &t.before.pending.table_at_construction {
            Some(table) => table.get(c).is_some_and(|x| x.snapshot),
            None => true,
        };
        let unset = matches!(op, Op::Chcp { cno, snapshot: false } if cno == c);
        let kept = t.after.checkpoints.get(c).is_some_and(|x| x.snapshot);
        if !kept && !unset && (durable_flag || !matches!(op, Op::Crash)) {
            return Err(format!("snapshot {c} disappeared ({op:?} -> {outcome:?})"));
        }
    }
    Ok(())
}

/// Law 3: the ioctl takes write access before it looks.
fn rmcp_of_a_snapshot_is_ebusy(t: &Transition) -> Result<(), String> {
    let Op::Rmcp { cno } = t.op else {
        return Ok(());
    };
    let refusal = if t.before.mount == Some(Mount::ReadOnly) {
        Errno::EROFS
    } else {
        Errno::EBUSY
    };
    if t.before.checkpoints.get(cno).is_some_and(|c| c.snapshot)
        && *t.outcome != Outcome::Err(refusal)
    {
        return Err(format!("rmcp of snapshot {cno} gave {:?}", t.outcome));
    }
    Ok(())
}

/// Law 4.
fn read_only_mounts_refuse_changes(t: &Transition) -> Result<(), String> {
    let (true, Some(c)) = (t.op.is_change(), t.op.at()) else {
        return Ok(());
    };
    let op = t.op;
    if matches!(t.outcome, Outcome::Ok | Outcome::Written(_)) {
        return Err(format!(
            "{op:?} succeeded on read-only checkpoint mount {c}"
        ));
    }
    if t.before.checkpoints.get(&c).map(|x| &x.ns) != t.after.checkpoints.get(&c).map(|x| &x.ns) {
        return Err(format!("{op:?} changed read-only checkpoint {c}"));
    }
    Ok(())
}

/// Law 5.
fn clean_changes_no_view(t: &Transition) -> Result<(), String> {
    if let Op::Clean { .. } = t.op {
        if t.after.live != t.before.live {
            return Err("clean changed the live namespace".into());
        }
    }
    Ok(())
}

/// Law 6. With O_APPEND the data went to the end: it ends at the new size.
fn write_then_read(t: &Transition) -> Result<(), String> {
    let (
        Op::Write {
            path,
            offset,
            data,
            append,
            at: None,
        },
        Outcome::Written(n),
    ) = (t.op, t.outcome)
    else {
        return Ok(());
    };
    let after = t.after;
    let offset = if *append {
        let id = after
            .live
            .lookup(path, true)
            .map_err(|e| format!("the appended file is gone: {e:?}"))?;
        file_data(after, id).map_or(0, |f| f.size) - n
    } else {
        *offset
    };
    let got = after
        .live
        .read(path, offset, *n)
        .map_err(|e| format!("read after write: {e:?}"))?;
    let mut want = vec![0; *n as usize];
    data.fill(0, &mut want);
    if got != want {
        return Err(format!("read after {:?} returned other bytes", t.op));
    }
    Ok(())
}

/// Law 7.
fn crash_keeps_what_was_synced(t: &Transition) -> Result<(), String> {
    let Op::Crash = t.op else {
        return Ok(());
    };
    let after = t.after;
    if after.mount.is_some() || !after.snapshot_mounts.is_empty() {
        return Err("something is still mounted after a crash".into());
    }
    if after.live != *after.latest_ns() {
        return Err("recovery did not end in a checkpoint".into());
    }
    for (id, f) in t.promises.files.iter() {
        if file_data(after, *id) != Some(f) {
            return Err(format!(
                "fsync'd file (model id {id}) lost its data in a crash"
            ));
        }
    }
    Ok(())
}

/// Law 8: no other inode, no contents, no link count, no name changes.
fn setattr_changes_one_inode(t: &Transition) -> Result<(), String> {
    let (Op::Chmod { path, .. } | Op::Chown { path, .. } | Op::Utimes { path, .. }, Outcome::Ok) =
        (t.op, t.outcome)
    else {
        return Ok(());
    };
    let (op, before, after) = (t.op, t.before, t.after);
    let follow = match op {
        Op::Chown { follow, .. } | Op::Utimes { follow, .. } => *follow,
        _ => true,
    };
    let id = after
        .live
        .lookup(path, follow)
        .map_err(|e| format!("{op:?} lost its file: {e:?}"))?;
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
            return Err(format!("{op:?} changed inode {i} beyond its attributes"));
        }
    }
    if after.live.inodes.len() != before.live.inodes.len() {
        return Err(format!("{op:?} added an inode"));
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
        return Err(format!("stat after {op:?} does not show it: {st:?}"));
    }
    Ok(())
}

/// Law 9: under its name, with one link and no data.
fn mknod_adds_one_inode(t: &Transition) -> Result<(), String> {
    let Op::Mknod {
        path,
        file_type,
        rdev,
        ..
    } = t.op
    else {
        return Ok(());
    };
    if *t.outcome != Outcome::Ok {
        return Ok(());
    }
    let (op, before, after) = (t.op, t.before, t.after);
    let id = after
        .live
        .lookup(path, false)
        .map_err(|e| format!("{op:?} made no name: {e:?}"))?;
    if before.live.inodes.contains_key(&id) {
        return Err(format!("{op:?} reused inode {id}"));
    }
    let st = after.live.stat_of(id);
    let want_rdev =
        matches!(file_type, FileType::CharDevice | FileType::BlockDevice).then_some(*rdev);
    if st.file_type != *file_type || st.nlink != 1 || st.size != 0 || st.rdev != want_rdev {
        return Err(format!("{op:?} made {st:?}"));
    }
    for (i, b) in before.live.inodes.iter() {
        let Some(a) = after.live.inodes.get(i) else {
            return Err(format!("{op:?} removed inode {i}"));
        };
        if !matches!(b.kind, Kind::Dir { .. }) && a != b {
            return Err(format!("{op:?} changed inode {i}"));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::LAWS;

    /// The table runs in number order, every law once, each named.
    #[test]
    fn laws_are_numbered_in_order_and_named_once() {
        for (i, law) in LAWS.iter().enumerate() {
            assert_eq!(law.number as usize, i + 1, "{}", law.name);
            assert!(!law.description.is_empty(), "{}", law.name);
        }
        let mut names: Vec<&str> = LAWS.iter().map(|l| l.name).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), LAWS.len());
    }
}
