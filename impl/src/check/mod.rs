//! `nilref check`: the whole-image checker. Read-only, in seven passes over
//! the image, each enforcing invariants the kernel's code relies on (the
//! table is in [`codes`] and docs/check.md, each with the kernel function
//! it comes from):
//!
//! 1. super blocks ([`superblocks`]): both copies, the choice, the cursor;
//! 2. logs ([`logs`]): every used segment's logs, and those after the latest
//!    super root (a pending roll-forward is reported, not an error);
//! 3. B-trees ([`btree`]) of every file and metadata file reached;
//! 4. the DAT ([`dat`], with [`palloc`]): every translation, every entry;
//! 5. segment usage ([`sufile`]);
//! 6. the checkpoint file ([`cpfile`]);
//! 7. the namespace of each checked checkpoint ([`namespace`]).
//!
//! The passes run in the order the data needs (the DAT's and the sufile's
//! mappings before the logs, whose summaries the placement checks then
//! use). Every loop over an on-disk count is bounded by the geometry or by
//! the blocks a file maps; findings are capped at [`MAX_FINDINGS`]. No
//! input panics it; an unreadable device or one without NILFS2 is an
//! operational error (exit status 8), not a finding.

mod bits;
mod btree;
mod checksums;
mod codes;
mod cpfile;
mod ctx;
mod dat;
mod logs;
mod memo;
mod namespace;
mod palloc;
mod report;
mod sufile;
mod superblocks;

use crate::sync::StdArc as Arc;

pub use checksums::{verify_checksums, ChecksumReport};
pub use codes::{Code, Severity};
pub use memo::Memo;
pub use report::{Finding, Progress, Report, RollForward, Stats};

use crate::device::BlockDevice;
use crate::format::Cno;
use crate::the_nilfs::Nilfs;

/// Findings kept in a report; beyond, they are only counted.
pub const MAX_FINDINGS: usize = 10_000;

/// Which checkpoints get the tree and namespace passes (the latest always
/// does: the DAT's leak check needs it).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Checkpoints {
    /// The latest and every snapshot (what can be mounted).
    #[default]
    Default,
    /// The latest and this one (`--cp N`).
    Only(Cno),
    /// Every valid checkpoint (`--all-checkpoints`).
    All,
}

/// How to check.
#[derive(Clone, Default)]
pub struct Options {
    /// Which checkpoints to check.
    pub checkpoints: Checkpoints,
    /// Called now and then on long checks.
    pub progress: Option<Arc<dyn Fn(Progress) + Send + Sync>>,
    /// Used segments of at most this many bytes are read and checked on
    /// one thread; above it a second thread reads ahead. `None`: 16 MiB.
    /// (Set by the test that runs both ways on one image.)
    pub inline_bytes: Option<u64>,
}

/// Whether `e` is the device's failure rather than the image's: an I/O
/// error at a block inside the device. A read past the device's end (a
/// pointer out of range) fails in the kernel too, and is the image's to
/// explain; one inside is a medium error, about which the check cannot
/// say what the read would have shown.
fn device_fault(dev: &dyn BlockDevice, block_size: u64, e: &crate::Error) -> bool {
    match e {
        crate::Error::Io { blocknr, .. } => blocknr
            .checked_add(1)
            .and_then(|end| end.checked_mul(block_size))
            .is_some_and(|end| end <= dev.size_bytes()),
        _ => false,
    }
}

/// Check the NILFS2 file system on `dev`.
pub fn check_device(dev: &dyn BlockDevice, opts: &Options) -> Report {
    let mut report = Report::default();
    if !superblocks::copies(dev, &mut report) {
        return report;
    }
    let fs = match Nilfs::open(dev) {
        Ok(fs) => fs,
        Err(e) => {
            superblocks::open_failed(dev, &e, &mut report);
            return report;
        }
    };
    run(&fs, opts, report)
}

/// [`check_device`] on the device of `fs`, which its caller opened: the
/// same report whenever the device opens, without opening it a second
/// time for a caller that reads the image on (the lockstep adapter). The
/// check only reads, so `fs` serves that caller afterwards as it was.
pub fn check_opened(fs: &Nilfs<'_>, opts: &Options) -> Report {
    let mut report = Report::default();
    if !superblocks::copies(fs.device(), &mut report) {
        return report;
    }
    run(fs, opts, report)
}

/// [`check_opened`], remembering what each checkpoint's passes read so
/// that the next call on the same device skips those whose inputs have
/// not changed since ([`Memo`]). The report is the one [`check_opened`]
/// gives, but for the names in findings a skipped pass's shared checks
/// make (they name the checkpoint, not the structure), and for
/// `stats.bytes_read`. A device that does not say which blocks changed
/// ([`BlockDevice::last_change`]) is checked whole.
pub fn check_opened_memo(fs: &Nilfs<'_>, opts: &Options, memo: &mut Memo) -> Report {
    let mut report = Report::default();
    let generation = fs.device().write_generation();
    let probe = fs.device().last_change(0, 0);
    let (Some(generation), Some(_)) = (generation, probe) else {
        memo.clear();
        return check_opened(fs, opts);
    };
    if !superblocks::copies(fs.device(), &mut report) {
        memo.clear();
        return report;
    }
    let mut ck = ctx::Ck::new(fs, opts, report);
    ck.memo = Some(memo::Running::new(std::mem::take(memo), generation));
    ck.run();
    *memo = ck
        .memo
        .take()
        .map(memo::Running::finish)
        .unwrap_or_default();
    ck.report
}

fn run(fs: &Nilfs<'_>, opts: &Options, report: Report) -> Report {
    let mut ck = ctx::Ck::new(fs, opts, report);
    ck.run();
    ck.report
}

impl ctx::Ck<'_, '_> {
    fn run(&mut self) {
        self.superblocks();
        self.load_dat();
        self.load_sufile();
        // Without its header the kernel cannot load the sufile (nor mount).
        if self.stopped() || self.report.has(Code::SuHeaderMissing) {
            return;
        }
        let dsync = self.logs();
        self.run_deferred();
        self.sufile_entries();
        let Some(cp) = self.cpfile() else { return };
        if let Checkpoints::Only(c) = self.opts.checkpoints {
            if cp.valid.binary_search_by_key(&c.0, |e| e.0).is_err() {
                self.report.operational = Some(format!("checkpoint {c} does not exist"));
                return;
            }
        }
        let mut latest_scope = None;
        for (i, cno) in self.checkpoints_to_check(&cp).into_iter().enumerate() {
            if self.stopped() {
                return;
            }
            // A missing or invalid latest checkpoint is the cpfile pass's finding.
            let Some(mut entry) = self.cp_entry(&cp, cno.0).filter(|e| !e.is_invalid()) else {
                continue;
            };
            entry.cno = cno; // cp_cno itself may be wrong (cp-cno)
                             // The latest is always checked whole (the DAT's leak check
                             // takes its scope).
            if i != 0 && self.replay(&entry) {
                continue;
            }
            self.checkpoint_recorded(&entry, i == 0, &dsync);
            if i == 0 {
                latest_scope = Some(self.scope.clone());
            }
        }
        if let Some(s) = latest_scope {
            self.dat_entries(&s);
        }
    }
}
