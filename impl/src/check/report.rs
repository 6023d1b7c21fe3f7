//! What a check found: findings (each naming its invariant, the structure,
//! the block and what was expected), notes that are not findings (which
//! super block the kernel would use and why, a pending roll-forward), and
//! what was read.

use std::fmt;

use super::codes::{Code, Severity};
use crate::format::BlockNr;

/// One violated invariant.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Finding {
    /// The invariant.
    pub code: Code,
    /// The structure, in words ("DAT entry of virtual block 77",
    /// "inode 12 of checkpoint 5").
    pub structure: String,
    /// The disk block holding it, when there is one.
    pub block: Option<u64>,
    /// What is there.
    pub found: String,
    /// What the invariant requires.
    pub expected: String,
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.code.id(), self.structure)?;
        if let Some(b) = self.block {
            write!(f, " (block {b})")?;
        }
        write!(f, ": {}; expected {}", self.found, self.expected)
    }
}

/// Logs written after the latest super root that a read-write mount replays
/// (`nilfs_salvage_orphan_logs` after `nilfs_do_roll_forward`): reported,
/// not an error.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RollForward {
    /// First log of the unclosed run (`ri_lsegs_start`).
    pub start: BlockNr,
    /// Last log with LOGEND (`ri_lsegs_end`).
    pub end: BlockNr,
    /// Logs in between, both ends included.
    pub logs: usize,
}

/// Counts of what the check covered.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Blocks the segment usage file counts as used (the "used image").
    pub used_blocks: u64,
    /// Bytes read from the device.
    pub bytes_read: u64,
    /// Logs verified.
    pub logs: u64,
    /// Checkpoints whose trees and namespace were checked.
    pub checkpoints: u64,
    /// Allocated inodes examined (over all checked checkpoints).
    pub inodes: u64,
    /// B-tree node blocks examined.
    pub nodes: u64,
    /// Directory entries examined.
    pub dirents: u64,
}

/// A progress report for long checks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Progress {
    /// The pass under way ("logs", "checkpoint 12", ...).
    pub phase: &'static str,
    /// Blocks done in it.
    pub done: u64,
    /// Blocks it will take (an estimate for the tree passes).
    pub total: u64,
}

/// The outcome of [`check_device`](super::check_device).
#[derive(Clone, Debug, Default)]
pub struct Report {
    /// Violations, in the order found (one per invariant, structure and block).
    pub findings: Vec<Finding>,
    /// Findings not stored once [`MAX_FINDINGS`](super::MAX_FINDINGS) were.
    pub suppressed: u64,
    /// Facts about the image that are not findings.
    pub notes: Vec<String>,
    /// Set if the image needs roll-forward recovery.
    pub roll_forward: Option<RollForward>,
    /// Set if the check could not run: an unreadable device, or no NILFS2 on it.
    pub operational: Option<String>,
    /// What was covered.
    pub stats: Stats,
}

impl Report {
    /// No operational error and no finding of [`Severity::Error`].
    pub fn is_clean(&self) -> bool {
        self.operational.is_none() && self.errors() == 0 && self.suppressed == 0
    }

    /// Findings of [`Severity::Error`].
    pub fn errors(&self) -> usize {
        self.findings
            .iter()
            .filter(|f| f.code.severity() == Severity::Error)
            .count()
    }

    /// fsck's exit status: 0 clean, 4 errors left uncorrected, 8 an
    /// operational error.
    pub fn exit_code(&self) -> u8 {
        if self.operational.is_some() {
            8
        } else if self.is_clean() {
            0
        } else {
            4
        }
    }

    /// Whether some finding has code `c`.
    pub fn has(&self, c: Code) -> bool {
        self.findings.iter().any(|f| f.code == c)
    }

    /// The identifiers found, sorted and deduplicated.
    pub fn codes(&self) -> Vec<&'static str> {
        let mut v: Vec<&'static str> = self.findings.iter().map(|f| f.code.id()).collect();
        v.sort_unstable();
        v.dedup();
        v
    }
}

impl fmt::Display for Report {
    /// The findings, one a line, then the notes and a closing verdict.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(op) = &self.operational {
            return writeln!(f, "operational error: {op}");
        }
        for x in &self.findings {
            writeln!(f, "{x}")?;
        }
        if self.suppressed > 0 {
            writeln!(f, "... and {} more findings", self.suppressed)?;
        }
        for n in &self.notes {
            writeln!(f, "note: {n}")?;
        }
        if let Some(r) = &self.roll_forward {
            writeln!(
                f,
                "note: needs roll-forward recovery: {} logs from block {} to block {}",
                r.logs, r.start, r.end
            )?;
        }
        let errors = self.errors();
        let warnings = self.findings.len() - errors;
        if self.is_clean() {
            writeln!(f, "clean ({warnings} warnings)")
        } else {
            writeln!(
                f,
                "{} errors, {warnings} warnings",
                errors as u64 + self.suppressed
            )
        }
    }
}
