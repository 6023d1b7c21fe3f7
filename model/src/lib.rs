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
//! - [`trace`]: the oracle interface: JSON Lines traces and their checker;
//!   [`linearize`]: concurrent histories against a sequential specification.
//! - [`pattern::Pattern`]: compact descriptions of written data.
//! - [`manifest::manifest`]: manifest.sh's listing of a namespace.
//! - [`workload`]: workloads (traces before they run) and their checkpoint
//!   references; [`gen`]: the workload generator every runner shares;
//!   [`shrink`]: delta debugging of a failing workload.

pub mod fs;
pub mod gen;
pub mod laws;
pub mod linearize;
pub mod manifest;
pub mod pattern;
pub mod shrink;
pub mod state;
pub mod trace;
pub mod workload;

pub use fs::{Errno, FileType, Namespace, StatInfo, LINK_MAX, MAX_FILE_SIZE, NAME_LEN_MAX};
pub use pattern::Pattern;
pub use state::{crash, step, Branch, Cno, CpEntry, Expect, Geometry, Op, Outcome, State};
pub use trace::{check_trace, check_trace_str, follow_trace, Line, Rejection, Verdict};
