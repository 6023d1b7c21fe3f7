//! nilfs-model: the executable specification of NILFS2.
//!
//! It states what a user can observe — the namespace, file bytes,
//! checkpoints and snapshots, error numbers, what survives a crash, when the
//! disk may be full — written from the semantics and the Linux kernel's
//! documented behaviour, not from any implementation's data structures. It
//! depends on no other crate of this workspace. docs/model.md is its prose
//! form, rule by rule, with the kernel functions each rule follows.
//!
//! - [`op`]: the operations and their outcomes (the trace vocabulary).
//! - [`fs::Namespace`]: one view's inodes and the POSIX rules on it.
//! - [`state::State`]: the whole file system: checkpoints, mounts, what is
//!   not yet durable, the space estimate, the clock.
//! - [`step()`]: the transition function, which returns every allowed
//!   [`Branch`]; one guarded action per operation, by area.
//! - [`step::durability`]: constructions, the log writer's timer, sync and
//!   fsync, and the crash envelope ([`crash`]).
//! - [`space`]: when ENOSPC is allowed.
//! - [`accept`]: which observed outcomes a branch allows.
//! - [`laws`]: the model's stated laws, checked on every transition.
//! - [`time::Stamp`]: an inode time known within the interval of the call
//!   that set it.
//! - [`merge`]: states that differ only in when things happened, merged
//!   (what keeps a trace near a full device to a handful of states).
//! - [`trace`]: the oracle interface: JSON Lines traces and their checker;
//!   [`history`]: concurrent histories judged for linearizability against
//!   the model; [`linearize`]: the textbook search for any sequential
//!   specification.
//! - [`variant::Variant`]: the Linux releases the model tells apart where
//!   they differ.
//! - [`pattern::Pattern`]: compact descriptions of written data.
//! - [`manifest::manifest`]: manifest.sh's listing of a namespace.
//!
//! Workloads, their generator and their shrinker are tooling, not
//! specification: they live in the nilfs-workload crate, which depends on
//! this one.

pub mod accept;
pub mod fs;
pub mod history;
pub mod laws;
pub mod linearize;
pub mod manifest;
pub mod merge;
pub mod op;
pub mod pattern;
pub mod space;
pub mod state;
pub mod step;
pub mod time;
pub mod trace;
pub mod variant;

pub use fs::{Errno, FileType, Namespace, StatInfo, LINK_MAX, MAX_FILE_SIZE, NAME_LEN_MAX};
pub use history::{check_history, is_history, Event, HistoryRejection, HistoryVerdict};
pub use op::{CpEntry, Op, Outcome, StatfsInfo};
pub use pattern::Pattern;
pub use space::Geometry;
pub use state::{Cno, State};
pub use step::durability::crash;
pub use step::{step, Branch, Expect};
pub use time::Stamp;
pub use trace::{
    check_trace, check_trace_as, check_trace_str, check_trace_with, follow_trace, Bound, Line,
    Options, Rejection, Verdict,
};
pub use variant::Variant;
