//! The nilfs-utils checkpoint tools and the cleaner: mkcp, chcp, rmcp,
//! lscp, nilfs-clean. Each needs a mounted file system (else the trace is
//! invalid) and write access (EROFS) but lscp.

use super::{fail, invalid, ok, space_guard, Branch, Expect, R};
use crate::fs::{Errno, Id, Kind, PAGE};
use crate::op::Outcome;
use crate::space::{CHECKPOINT_BLOCKS, META_OP_BLOCKS};
use crate::state::{Checkpoint, Cno, Mount, State};

/// The guard the ioctls share: mounted, and read-write.
fn mounted_rw(s: &State, tool: &str) -> Result<(), Vec<Branch>> {
    match s.mount {
        None => Err(invalid(s, &format!("{tool} needs a mounted file system"))),
        Some(Mount::ReadOnly) => Err(fail(s, Errno::EROFS)),
        Some(Mount::ReadWrite) => Ok(()),
    }
}

/// `mkcp [-s] -p` (`nilfs_ioctl_sync`): a construction as sync makes,
/// printing the latest number (new or not, `Expect::NewCno`); `-s` then
/// makes it a snapshot (`accept`). A construction with something to
/// write may find no segment: ENOSPC under the space guard.
pub(super) fn mkcp(s: &State, snapshot: bool) -> Vec<Branch> {
    if let Err(refused) = mounted_rw(s, "mkcp") {
        return refused;
    }
    let (latest, _) = s.latest();
    let mut next = s.clone();
    next.construct();
    let done = Branch {
        expect: Expect::NewCno {
            latest,
            must_be_new: s.pending.dirty,
            snapshot,
        },
        next,
    };
    space_guard(
        s,
        s.pending.dirty.then_some(CHECKPOINT_BLOCKS),
        done,
        || super::enospc(s),
    )
}

/// `chcp ss|cp CNO` (`nilfs_cpfile_change_cpmode`).
pub(super) fn chcp(s: &State, cno: Cno, snapshot: bool) -> Vec<Branch> {
    if let Err(refused) = mounted_rw(s, "chcp") {
        return refused;
    }
    // nilfs_cpfile_change_cpmode -> nilfs_checkpoint_is_mounted: the
    // latest checkpoint and `ns_cno` are "mounted" (EBUSY to make a
    // checkpoint) before the number is even looked up.
    let (latest, _) = s.latest();
    if !snapshot && (cno == latest || cno == latest + 1) {
        return fail(s, Errno::EBUSY);
    }
    cp_op(s, cno, |next| {
        // Clearing a mounted snapshot is EBUSY; setting or clearing twice
        // is a no-op that dirties nothing.
        if !snapshot && next.snapshot_mounts.contains(&cno) {
            return Err(Errno::EBUSY);
        }
        next.set_mode(cno, snapshot);
        Ok(())
    })
}

/// `rmcp CNO` (`nilfs_ioctl_delete_checkpoint` ->
/// `nilfs_cpfile_delete_checkpoint`): EBUSY for a snapshot, and nothing
/// else is refused: the latest is deleted too (Linux 6.1, trace
/// kernel-6.1/rmcp-of-the-latest), though it stays the model's latest,
/// `removed`, until the next construction (see `Checkpoint::removed`).
/// A deletion dirties the cpfile, as chcp does.
pub(super) fn rmcp(s: &State, cno: Cno) -> Vec<Branch> {
    if let Err(refused) = mounted_rw(s, "rmcp") {
        return refused;
    }
    let (latest, _) = s.latest();
    cp_op(s, cno, |next| {
        if next.checkpoints[&cno].snapshot {
            return Err(Errno::EBUSY);
        }
        if cno == latest {
            next.checkpoints.get_mut(&cno).expect("present").removed = true;
        } else {
            next.checkpoints.remove(&cno);
        }
        next.pending.dirty = true;
        Ok(())
    })
}

/// A change of checkpoint `cno` in the cpfile (chcp, rmcp). ENOENT for a
/// number the model does not hold. One the cleaner may have removed goes
/// two ways: it is gone (ENOENT, and the model forgets it), or it is
/// there (no longer "may be gone") and `f` decides — its errno leaves the
/// table as it was; its success is a cpfile change since the last
/// construction (`State::remember_table`).
fn cp_op(s: &State, cno: Cno, f: impl FnOnce(&mut State) -> R<()>) -> Vec<Branch> {
    let Some(cp) = s.checkpoints.get(&cno).filter(|cp| !cp.removed) else {
        return fail(s, Errno::ENOENT);
    };
    let mut out = Vec::new();
    if cp.may_be_gone {
        let mut gone = s.clone();
        gone.checkpoints.remove(&cno);
        out.push(Branch::exact(Outcome::Err(Errno::ENOENT), gone));
    }
    let seen = |mut n: State| {
        if let Some(c) = n.checkpoints.get_mut(&cno) {
            c.may_be_gone = false;
        }
        n
    };
    let mut changed = s.clone();
    changed.remember_table();
    let mut changed = seen(changed);
    out.push(match f(&mut changed) {
        Ok(()) => Branch::exact(Outcome::Ok, changed),
        Err(e) => Branch::exact(Outcome::Err(e), seen(s.clone())),
    });
    out
}

/// An upper bound of the blocks one cleaner run copies (finding M3): the
/// live blocks of the segments it cleans, which with snapshots and
/// protected checkpoints can be everything any checkpoint still reaches.
/// Each distinct page of the live tree and of every checkpoint whose
/// contents the model knows (pages shared between them are one), in
/// blocks, with the write rule's share for the DAT, the B-tree and the
/// summaries, plus an inode's worth of metadata blocks for each distinct
/// inode and a checkpoint's for each checkpoint (their ifile, cpfile,
/// sufile and DAT blocks move too). Checkpoints learned from a listing
/// hold pages the model cannot count (docs/findings.md, M3).
fn cleaner_moves(s: &State) -> u64 {
    use std::collections::HashSet;
    let mut pages: HashSet<*const Vec<u8>> = HashSet::new();
    let mut inodes: HashSet<Id> = HashSet::new();
    let views =
        std::iter::once(&s.live).chain(s.checkpoints.values().filter_map(|cp| cp.ns.as_ref()));
    for ns in views {
        for (id, ino) in ns.inodes.iter() {
            inodes.insert(*id);
            if let Kind::File(f) = &ino.kind {
                pages.extend(f.pages.values().map(std::sync::Arc::as_ptr));
            }
        }
    }
    let per_page = (PAGE / u64::from(s.geometry.block_size.max(1))).max(1);
    let data = pages.len() as u64 * per_page;
    data + data.div_ceil(32)
        + inodes.len() as u64 * META_OP_BLOCKS
        + s.checkpoints.len() as u64 * CHECKPOINT_BLOCKS
}

/// `lscp`: judged by the listing shape rule (`accept`).
pub(super) fn lscp(s: &State) -> Vec<Branch> {
    match s.mount {
        None => invalid(s, "lscp needs a mounted file system"),
        Some(_) => vec![Branch {
            expect: Expect::Lscp,
            next: s.clone(),
        }],
    }
}

/// `nilfs-clean -p PROTECTION_S` run to completion. No view changes.
///
/// `nilfs_xreclaim_segment` hands the cleaned segments' dead periods to
/// `nilfs_ioctl_delete_checkpoints`: plain checkpoints older than the
/// protection period, never snapshots (EBUSY) and never the latest (its
/// blocks are live). Which ones go depends on the segments chosen, so each
/// only "may be gone".
///
/// A cleaning step is a construction of its own (`nilfs_clean_segments` ->
/// `nilfs_segctor_construct`): if anything is pending, the first step that
/// moves blocks writes it as a new checkpoint; the later steps'
/// checkpoints are MINOR and hidden. Whether any step ran depends on the
/// segments chosen, so with changes pending both ways are allowed; after
/// the construction the checkpoint that was the latest is an ordinary one,
/// which the pass's later steps may delete like the others (seen on Linux
/// 6.1: campaign kernel seed 28).
pub(super) fn clean(s: &State, protection_s: u64) -> Vec<Branch> {
    if let Err(refused) = mounted_rw(s, "the cleaner") {
        return refused;
    }
    let (latest, _) = s.latest();
    // The cleaner reads the clock at the latest at the end of its call.
    let horizon = s
        .clock_hi
        .saturating_sub((protection_s as i64).saturating_mul(1_000_000_000));
    let old_enough = |cp: &Checkpoint| !cp.snapshot && (cp.created < horizon || protection_s == 0);
    let mut swept = s.clone();
    swept.consumed_blocks += cleaner_moves(s);
    let cnos: Vec<Cno> = swept.checkpoints.keys().copied().collect();
    for c in cnos {
        let cp = swept.checkpoints.get_mut(&c).expect("listed");
        if c != latest && old_enough(cp) {
            cp.may_be_gone = true;
        }
    }
    let mut out = ok(swept.clone());
    if s.pending.dirty {
        let mut constructed = swept;
        constructed.construct();
        if let Some(cp) = constructed.checkpoints.get_mut(&latest) {
            if old_enough(cp) {
                cp.may_be_gone = true;
            }
        }
        out.push(Branch::exact(Outcome::Ok, constructed));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::cleaner_moves;
    use crate::pattern::Pattern;
    use crate::space::Geometry;
    use crate::state::State;
    use crate::time::Stamp;

    /// The bound counts each distinct page once, in blocks (four 1 KiB
    /// blocks a page), with the write rule's 1/32 over them, two blocks
    /// for each distinct inode and 32 for each checkpoint.
    #[test]
    fn a_cleaner_run_is_charged_each_distinct_page_inode_and_checkpoint() {
        let g = Geometry {
            block_size: 1024,
            blocks_per_segment: 256,
            nsegments: 64,
            r_segments_percentage: 5,
        };
        let t = Stamp::exact(1);
        let mut s = State::mkfs(g, false, 0);
        // Three pages of /f, and a directory: three inodes with the root.
        let (ns, _) = s
            .live
            .create("/f", 0o644, false, t)
            .and_then(|ns| ns.mkdir("/d", 0o755, t))
            .and_then(|ns| ns.write("/f", 0, &Pattern::Zeros(10_000), t))
            .expect("a fresh file system takes them");
        // Checkpoint 2 shares those pages; the live tree then has a new
        // first page: four distinct pages, 16 blocks.
        let mut cp = s.checkpoints[&1].clone();
        cp.ns = Some(ns.clone());
        s.checkpoints.insert(2, cp);
        let (ns, _) = ns
            .write("/f", 0, &Pattern::Text("x".into()), t)
            .expect("an overwrite");
        s.live = ns;
        assert_eq!(cleaner_moves(&s), 16 + 1 + 3 * 2 + 2 * 32);
    }
}
