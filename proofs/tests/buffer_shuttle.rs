//! shuttle: the buffer protocol scenarios of `buffer_scenarios` under PCT
//! (priority-based) and uniformly random schedules, each with fixed seeds and
//! a bounded number of iterations, and the canaries: each known-bad variant must fail. shuttle
//! complements loom, which can miss interleavings when a thread starts with
//! an atomic load (loom issue #392); shuttle treats atomics as SeqCst, so
//! weak-memory bugs remain loom's job.
//!
//! ```text
//! RUSTFLAGS="--cfg shuttle" cargo test -p nilfs-proofs --release \
//!     --target-dir target-shuttle --test buffer_shuttle
//! ```
//! A failure prints a schedule string for `shuttle::replay`;
//! `SHUTTLE_RANDOM_SEED` overrides the seed.
#![cfg(shuttle)]

mod buffer_scenarios;

use std::panic::{catch_unwind, AssertUnwindSafe};

use buffer_scenarios::{
    lock_trylock_wait_evict, lookup_contig_vs_lookup_vs_evict, read_vs_readahead_vs_evict,
};
use nilfs::cache::{BufferRules, EvictRule, WaitRule};
use shuttle::scheduler::{PctScheduler, RandomScheduler};
use shuttle::{Config, Runner};

const SEED: u64 = 0x5eed_0000_0000_0002;
const DEPTH: usize = 3;
const PCT_ITERATIONS: usize = 3_000;
/// Seeds of the random-scheduler runs (`RANDOM_ITERATIONS` schedules each).
const RANDOM_SEEDS: std::ops::Range<u64> = 0..8;
const RANDOM_ITERATIONS: usize = 5_000;

/// One budget: PCT with a fixed seed, then the random scheduler with each
/// fixed seed. PCT alone (depth 3, or depth 4 over 4 seeds × 20,000
/// iterations) misses the read-path lost wake-up, which needs about five
/// ordered steps across three threads; uniform random schedules find it.
fn explore(f: impl Fn() + Send + Sync + Clone + 'static) {
    Runner::new(
        PctScheduler::new_from_seed(SEED, DEPTH, PCT_ITERATIONS),
        Config::new(),
    )
    .run(f.clone());
    for seed in RANDOM_SEEDS {
        Runner::new(
            RandomScheduler::new_from_seed(seed, RANDOM_ITERATIONS),
            Config::new(),
        )
        .run(f.clone());
    }
}

/// shuttle must report `f` within the same budget the good variants pass:
/// the canary that shows the checker notices.
fn must_fail(what: &str, f: impl Fn() + Send + Sync + Clone + 'static) {
    let caught = catch_unwind(AssertUnwindSafe(|| explore(f))).is_err();
    assert!(
        caught,
        "shuttle did not catch the known-bad variant: {what}"
    );
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
    explore(|| lock_trylock_wait_evict(BufferRules::default()));
}

#[test]
fn lock_trylock_wait_evict_catches_lost_wakeup() {
    must_fail("wait tests Locked before taking the mutex", || {
        lock_trylock_wait_evict(LOST_WAKEUP)
    });
}

#[test]
fn lock_trylock_wait_evict_catches_evicting_referenced() {
    must_fail("eviction ignores references", || {
        lock_trylock_wait_evict(EVICT_REFERENCED)
    });
}

#[test]
fn read_vs_readahead_vs_evict_kernel_rules() {
    explore(|| read_vs_readahead_vs_evict(BufferRules::default()));
}

#[test]
fn read_vs_readahead_vs_evict_catches_lost_wakeup() {
    must_fail("wait tests Locked before taking the mutex", || {
        read_vs_readahead_vs_evict(LOST_WAKEUP)
    });
}

#[test]
fn read_vs_readahead_vs_evict_catches_evicting_referenced() {
    must_fail("eviction ignores references", || {
        read_vs_readahead_vs_evict(EVICT_REFERENCED)
    });
}

/// Seed 000 end to end: lookup_contig with read-ahead racing a lookup of
/// the node it reads ahead and an eviction of that node.
#[test]
fn lookup_contig_vs_lookup_vs_evict_kernel_check() {
    explore(|| lookup_contig_vs_lookup_vs_evict(nilfs::bmap::readahead::NodeCheck::OnFirstUse));
}

#[test]
fn lookup_contig_vs_lookup_catches_unchecked_readahead() {
    must_fail("a read-ahead buffer used without its check", || {
        lookup_contig_vs_lookup_vs_evict(nilfs::bmap::readahead::NodeCheck::OnlyWhenWaited)
    });
}
