//! loom: every interleaving (up to the preemption bound) of the buffer
//! protocol scenarios in `buffer_scenarios`, and the canaries: each known-bad
//! variant must make loom fail.
//!
//! ```text
//! RUSTFLAGS="--cfg loom" cargo test -p nilfs-proofs --release \
//!     --target-dir target-loom --test buffer_loom
//! ```
//! A failure prints the interleaving; `LOOM_CHECKPOINT_FILE` replays it.
#![cfg(loom)]

mod buffer_scenarios;

use buffer_scenarios::{
    lock_trylock_wait_evict, lookup_contig_vs_lookup_vs_evict, read_vs_readahead_vs_evict,
};
use nilfs::cache::{BufferRules, EvictRule, WaitRule};

/// Explore `f` exhaustively with at most `LOOM_MAX_PREEMPTIONS` (default 3)
/// preemptions.
fn model(f: impl Fn() + Sync + Send + 'static) {
    let mut b = loom::model::Builder::new();
    if b.preemption_bound.is_none() {
        b.preemption_bound = Some(3);
    }
    b.check(f);
}

/// Set in the child process that runs a known-bad model.
const CHILD: &str = "NILFS_LOOM_CANARY_CHILD";

/// loom must report the known-bad model run by test `child`, with a message
/// containing `expect`. The model runs in a child process (this test binary,
/// filtered to `child`): when loom finds a deadlock it panics, and its
/// threads' destructors panic again while unwinding, which aborts the
/// process, so `catch_unwind` cannot catch it in-process.
fn must_fail(child: &str, expect: &str) {
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", child, "--nocapture", "--test-threads", "1"])
        .env(CHILD, "1")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success(),
        "loom did not catch the known-bad variant in {child}"
    );
    assert!(
        stderr.contains(expect),
        "{child} failed, but not with {expect:?}:\n{stderr}"
    );
}

/// Run the known-bad model only in the child process of [`must_fail`].
fn child_model(f: impl Fn() + Sync + Send + 'static) {
    if std::env::var_os(CHILD).is_some() {
        model(f);
    }
}

const LOST_WAKEUP: BufferRules = BufferRules {
    wait: WaitRule::CheckBeforeMutex,
    evict: EvictRule::Kernel,
};
const EVICT_REFERENCED: BufferRules = BufferRules {
    wait: WaitRule::CheckUnderMutex,
    evict: EvictRule::IgnoreReferences,
};

#[test]
fn lock_trylock_wait_evict_kernel_rules() {
    model(|| lock_trylock_wait_evict(BufferRules::default()));
}

#[test]
fn lock_trylock_wait_evict_catches_lost_wakeup() {
    must_fail("bad_lock_trylock_wait_evict_lost_wakeup", "deadlock");
}

#[test]
fn bad_lock_trylock_wait_evict_lost_wakeup() {
    child_model(|| lock_trylock_wait_evict(LOST_WAKEUP));
}

#[test]
fn lock_trylock_wait_evict_catches_evicting_referenced() {
    must_fail(
        "bad_lock_trylock_wait_evict_evict_referenced",
        "evicted while",
    );
}

#[test]
fn bad_lock_trylock_wait_evict_evict_referenced() {
    child_model(|| lock_trylock_wait_evict(EVICT_REFERENCED));
}

#[test]
fn read_vs_readahead_vs_evict_kernel_rules() {
    model(|| read_vs_readahead_vs_evict(BufferRules::default()));
}

#[test]
fn read_vs_readahead_vs_evict_catches_lost_wakeup() {
    must_fail("bad_read_vs_readahead_vs_evict_lost_wakeup", "deadlock");
}

#[test]
fn bad_read_vs_readahead_vs_evict_lost_wakeup() {
    child_model(|| read_vs_readahead_vs_evict(LOST_WAKEUP));
}

#[test]
fn read_vs_readahead_vs_evict_catches_evicting_referenced() {
    must_fail(
        "bad_read_vs_readahead_vs_evict_evict_referenced",
        "evicted while",
    );
}

#[test]
fn bad_read_vs_readahead_vs_evict_evict_referenced() {
    child_model(|| read_vs_readahead_vs_evict(EVICT_REFERENCED));
}

/// Seed 000 end to end: lookup_contig with read-ahead racing a lookup of
/// the node it reads ahead and an eviction of that node.
#[test]
fn lookup_contig_vs_lookup_vs_evict_kernel_check() {
    model(|| lookup_contig_vs_lookup_vs_evict(nilfs::bmap::readahead::NodeCheck::OnFirstUse));
}

#[test]
fn lookup_contig_vs_lookup_catches_unchecked_readahead() {
    must_fail(
        "bad_lookup_contig_vs_lookup_unchecked",
        "an unchecked corrupt node was used",
    );
}

#[test]
fn bad_lookup_contig_vs_lookup_unchecked() {
    child_model(|| {
        lookup_contig_vs_lookup_vs_evict(nilfs::bmap::readahead::NodeCheck::OnlyWhenWaited)
    });
}
