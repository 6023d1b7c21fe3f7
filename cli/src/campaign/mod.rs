//! `nilref campaign kernel|grub|crash|matrix|hostile …`: the oracle judging other NILFS2
//! implementations at scale (docs/ORACLE.md, docs/findings.md).
//!
//! A campaign takes a seed range (split across machines with `--shard
//! I/N`), generates one workload per seed (`nilfs_workload::gen`), runs the
//! implementation under test on each, judges the outcome, shrinks each
//! failing workload to a minimal one, and writes a folder per finding:
//! the minimal workload, what the implementation observed, what nilfs-ref
//! observed, the verdict and the command that replays it. Progress shows
//! on a bar; a summary table ends the run.
//!
//! What the campaigns share lives in [`common`]; each campaign's module
//! owns its arguments and its `run`.

pub mod common;
pub mod concurrent;
pub mod crash;
pub mod grub;
pub mod guest;
pub mod hostile;
pub mod kernel;
pub mod log_writes;
pub mod matrix;

use clap::Subcommand;

#[derive(Subcommand)]
pub enum Cmd {
    /// Linux's nilfs2 in a qemu guest (one boot per batch of 12 workloads):
    /// the kernel's traces through the oracle, its images through our read
    /// path, and our own run of each workload.
    Kernel(common::CampaignArgs),
    /// GRUB's reader (grub-fstest) on images our write path makes from the
    /// workloads: every difference from our manifest classified.
    Grub(common::CampaignArgs),
    /// Crash consistency on Linux (CrashMonkey/ACE for NILFS2): the
    /// kernel's block writes recorded with dm-log-writes, every flush/FUA
    /// state (and sampled torn and reordered ones) recovered by nilfs-ref
    /// and judged by the model's crash envelope; a sample recovered by the
    /// kernel too, which must agree.
    Crash(crash::CrashArgs),
    /// The same seeds on every pinned version of Linux and GRUB
    /// (tests/peers.toml): one table of versions × workloads passed ×
    /// findings, every line where two versions answered differently, and
    /// an HTML report.
    Matrix(matrix::MatrixArgs),
    /// Corrupted images (every field of every on-disk structure, one or
    /// several at once, checksums resealed; image files as they are)
    /// mounted, read, written and unmounted by Linux in the guest, hundreds
    /// a boot: refused, errored, degraded, failed badly or silently
    /// accepted, beside `nilref check`'s verdict and our own tools'.
    Hostile(hostile::HostileArgs),
    /// Concurrent histories on `nilref mount`: several workers at once on
    /// one mount, judged for linearizability against the model; rejected
    /// histories shrunk.
    Concurrent(concurrent::ConcurrentArgs),
}

/// `nilref campaign …`.
pub fn run(cmd: &Cmd) -> Result<String, String> {
    match cmd {
        Cmd::Kernel(a) => kernel::run(a),
        Cmd::Grub(a) => grub::run(a),
        Cmd::Crash(a) => crash::run(a),
        Cmd::Matrix(a) => matrix::run(a),
        Cmd::Hostile(a) => hostile::run(a),
        Cmd::Concurrent(a) => concurrent::run(a),
    }
}
