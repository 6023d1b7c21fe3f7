//! A memo of the checkpoint passes, for a caller that checks the same
//! device again and again (lockstep's abstraction function checks every
//! checkpoint after every sync).
//!
//! A checkpoint is immutable, so its tree and namespace passes (3, 4 and 7
//! for that checkpoint) are a function of what they read: the fields of
//! its cpfile entry they use (the ifile inode and the inode count), of the
//! DAT entry of every virtual block they translate what they use (its
//! allocation bit, its disk block, and whether its lifetime holds the
//! checkpoint: `de_end` moves on from "max" when a later tree drops the
//! block, which no pass of this checkpoint sees), and the disk blocks those
//! entries name, which are all the blocks the passes read. What they do beyond the
//! checkpoint goes through [`Ck::translate`]: the first translation of a
//! virtual block claims its disk block and checks its placement against
//! the logs and the segment usage, which other passes share.
//!
//! A pass that made no finding at all is recorded: those inputs, the
//! translations in order with the file tag each placement checks, and the
//! device's write generation it read at. At the next check the pass is
//! skipped exactly when its inputs are unchanged: the same entry fields,
//! the same disk blocks in allocated DAT entries whose lifetimes hold the
//! checkpoint, and no write since that generation to any block
//! they name ([`BlockDevice::last_change`]). A skipped pass still makes its
//! translations, in its place in the order, so every shared check sees
//! what a full pass would show it; only its own checks, which found
//! nothing on the same inputs, are not repeated.
//!
//! [`BlockDevice::last_change`]: crate::device::BlockDevice::last_change

use std::collections::HashMap;

use super::ctx::Ck;
use super::report::Stats;
use crate::format::cpfile::Checkpoint;
use crate::format::inode::Inode;
use crate::format::Cno;

/// What one pass read, recorded when it found nothing.
#[derive(Clone, Debug)]
struct Reach {
    ifile: Inode,
    inodes_count: u64,
    /// The device's write generation when the pass read.
    generation: u64,
    /// Every translation, in order: the virtual block, the file tag its
    /// placement checks, its disk block.
    translations: Vec<(u64, Option<u32>, u64)>,
    /// What the pass added to the report's counts.
    inodes: u64,
    nodes: u64,
    dirents: u64,
}

/// The memo of one device's checks ([`super::check_opened_memo`]). It
/// belongs to that device: its generations mean nothing on another.
#[derive(Clone, Debug, Default)]
pub struct Memo {
    reach: HashMap<u64, Reach>,
    /// Passes of the last check that were skipped.
    skipped: Vec<Cno>,
    /// Known-bad: skip every recorded pass without looking at its inputs.
    blind: bool,
}

impl Memo {
    /// The checkpoints whose passes the last check skipped: their inputs
    /// were those of a pass that found nothing, so it would again.
    pub fn skipped(&self) -> &[Cno] {
        &self.skipped
    }

    /// Whether the last check skipped checkpoint `cno`'s passes.
    pub fn was_skipped(&self, cno: Cno) -> bool {
        self.skipped.contains(&cno)
    }

    /// Forget everything.
    pub fn clear(&mut self) {
        let blind = self.blind;
        *self = Memo {
            blind,
            ..Memo::default()
        };
    }

    /// Known-bad, for the test that shows the memo's inputs matter: skip
    /// every recorded pass without comparing anything, as a memo that
    /// sampled instead of tracking writes would.
    #[doc(hidden)]
    pub fn known_bad_blind(&mut self) {
        self.blind = true;
    }
}

/// The memo inside a running check.
pub(crate) struct Running {
    memo: Memo,
    /// The device's write generation at the check's start.
    generation: u64,
    /// The passes recorded or kept by this check.
    next: HashMap<u64, Reach>,
}

impl Running {
    pub fn new(mut memo: Memo, generation: u64) -> Self {
        memo.skipped.clear();
        Running {
            memo,
            generation,
            next: HashMap::new(),
        }
    }

    /// The memo after the check: what it recorded and kept, nothing else.
    pub fn finish(mut self) -> Memo {
        self.memo.reach = self.next;
        self.memo
    }
}

fn counts(s: &Stats) -> (u64, u64, u64) {
    (s.inodes, s.nodes, s.dirents)
}

impl Ck<'_, '_> {
    /// Skip checkpoint `cp`'s passes if the memo holds a pass over the
    /// same inputs; `true` if skipped (its translations made).
    pub(crate) fn replay(&mut self, cp: &Checkpoint) -> bool {
        let Some(run) = self.memo.as_mut() else {
            return false;
        };
        let Some(r) = run.memo.reach.remove(&cp.cno.0) else {
            return false;
        };
        let blind = run.memo.blind;
        if !blind && !self.unchanged(cp, &r) {
            return false;
        }
        if !blind {
            let cno = cp.cno;
            self.scope.clear();
            for &(v, tag, _) in &r.translations {
                self.next_file = tag;
                self.translate(v, cno, &|| {
                    format!("a block of checkpoint {cno} (its passes skipped: unchanged)")
                });
                self.next_file = None;
            }
            let s = &mut self.report.stats;
            s.inodes += r.inodes;
            s.nodes += r.nodes;
            s.dirents += r.dirents;
            self.report.stats.checkpoints += 1;
        }
        let run = self.memo.as_mut().expect("present above");
        run.memo.skipped.push(cp.cno);
        run.next.insert(cp.cno.0, r);
        true
    }

    /// Whether the inputs of the pass `r` recorded are as they were.
    fn unchanged(&mut self, cp: &Checkpoint, r: &Reach) -> bool {
        if cp.ifile_inode != r.ifile || cp.inodes_count != r.inodes_count {
            return false;
        }
        let bs = u64::from(self.bs);
        let cno = cp.cno;
        r.translations.iter().all(|&(v, _, pbn)| {
            matches!(self.dat_entry(v), Ok(e) if e.blocknr.0 == pbn && e.is_live_at(cno))
                && self
                    .dev
                    .last_change(pbn.saturating_mul(bs), bs)
                    .is_some_and(|w| w <= r.generation)
        })
    }

    /// Check checkpoint `cp` ([`Ck::checkpoint`]), recording the pass in
    /// the memo if it finds nothing.
    pub(crate) fn checkpoint_recorded(
        &mut self,
        cp: &Checkpoint,
        latest: bool,
        dsync: &super::logs::DsyncInodes,
    ) {
        if self.memo.is_none() {
            self.checkpoint(cp, latest, dsync);
            return;
        }
        let (finds, before) = (self.finds, counts(&self.report.stats));
        self.recording = Some(Vec::new());
        self.checkpoint(cp, latest, dsync);
        let translations = self.recording.take().unwrap_or_default();
        if self.finds != finds || self.stopped() {
            return;
        }
        let after = counts(&self.report.stats);
        let run = self.memo.as_mut().expect("checked above");
        run.next.insert(
            cp.cno.0,
            Reach {
                ifile: cp.ifile_inode.clone(),
                inodes_count: cp.inodes_count,
                generation: run.generation,
                translations,
                inodes: after.0 - before.0,
                nodes: after.1 - before.1,
                dirents: after.2 - before.2,
            },
        );
    }
}

#[cfg(test)]
mod tests {
    use super::Memo;

    /// The known-bad memo stays blind when cleared (the adapter clears its
    /// memo after a durable read that failed): a test that made it blind
    /// must not get a sound memo back halfway through its run, and a sound
    /// memo stays sound. Postmortem (the second mutation samples: `clear`
    /// without its `blind` field).
    #[test]
    fn clearing_keeps_whether_the_memo_is_blind() {
        let mut m = Memo::default();
        m.known_bad_blind();
        m.clear();
        assert!(m.blind);
        let mut m = Memo::default();
        m.clear();
        assert!(!m.blind);
    }

    /// `clear` forgets every recorded pass and the last check's skips
    /// (the adapter clears its memo after a durable read failed, so the
    /// next check reads everything afresh). Issue 37: `clear` replaced by
    /// nothing survived.
    #[test]
    fn clearing_forgets_every_pass() {
        let mut m = Memo::default();
        m.skipped.push(crate::format::Cno(3));
        m.reach.insert(
            3,
            super::Reach {
                ifile: Default::default(),
                inodes_count: 1,
                generation: 7,
                translations: vec![(1, None, 2)],
                inodes: 1,
                nodes: 0,
                dirents: 1,
            },
        );
        m.clear();
        assert!(m.skipped().is_empty() && m.reach.is_empty());
        assert!(!m.was_skipped(crate::format::Cno(3)));
    }
}
