//! nilfs-model: the executable specification of NILFS2.
//!
//! It states what a user can observe — the namespace, file bytes,
//! checkpoints and snapshots, error numbers, what survives a crash, when the
//! disk may be full — written from the semantics and the Linux kernel's
//! documented behaviour, not from any implementation's data structures. It
//! depends on no other crate of this workspace. docs/model.md is its prose
//! form, rule by rule, with the kernel functions each rule follows.
//!
//! - [`fs::Namespace`]: one view's inodes and the POSIX operations on it.
//! - [`state::State`] and [`state::step`]: the whole file system and its
//!   transition function, which returns every allowed [`state::Branch`].
//! - [`trace`]: the oracle interface: JSON Lines traces and their checker.
//! - [`pattern::Pattern`]: compact descriptions of written data.
//! - [`manifest::manifest`]: manifest.sh's listing of a namespace.
//!
//! Workloads, their generator and their shrinker are tooling, not
//! specification: they live in the nilfs-workload crate, which depends on
//! this one.

pub mod fs;
pub mod laws;
pub mod manifest;
pub mod pattern;
pub mod state;
pub mod trace;

pub use fs::{Errno, FileType, Namespace, StatInfo, LINK_MAX, MAX_FILE_SIZE, NAME_LEN_MAX};
pub use pattern::Pattern;
pub use state::{crash, step, Branch, Cno, CpEntry, Expect, Geometry, Op, Outcome, State};
pub use trace::{check_trace, check_trace_str, follow_trace, Line, Rejection, Verdict};
