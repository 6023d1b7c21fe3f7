//! shuttle: seed 001's scenarios of `gc_scenarios` (the ones `gc_loom.rs`
//! explores exhaustively within a preemption bound) under PCT and uniformly
//! random schedules with fixed seeds, and their canaries. shuttle is there
//! because loom 0.7 can miss interleavings when a thread's first action is
//! an atomic load (loom issue #392); it treats atomics as sequentially
//! consistent, so it finds the first version's race as the plain
//! interleaving (both requests test the flag before either sets it).
//!
//! ```text
//! RUSTFLAGS="--cfg shuttle" cargo test -p nilfs-proofs --release \
//!     --target-dir target-shuttle --test gc_flag_shuttle
//! ```
//! A failure prints a schedule string for `shuttle::replay`.
#![cfg(shuttle)]

mod gc_scenarios;

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc as StdArc, Mutex as StdMutex};

use gc_scenarios::{cleaner_vs_writer, resources_on_every_path, two_requests, Failing, Lab};
use nilfs::txn::{GcFlagRule, GcRule, TxRule};
use shuttle::scheduler::{PctScheduler, RandomScheduler};
use shuttle::{Config, Runner};

/// Shuttle's default task stack (60 KiB) is too small for a cleaning
/// request's construction path.
fn big_stacks() -> Config {
    let mut c = Config::new();
    c.stack_size = 8 << 20;
    c
}

const SEED: u64 = 0x5eed_0000_0000_0016;
const DEPTH: usize = 3;
const PCT_ITERATIONS: usize = 300;
const RANDOM_SEEDS: std::ops::Range<u64> = 0..3;
const RANDOM_ITERATIONS: usize = 200;

/// Build the image inside a one-schedule run (its locks are shuttle's).
fn lab() -> &'static Lab {
    let slot = StdArc::new(StdMutex::new(None));
    let s = slot.clone();
    Runner::new(RandomScheduler::new_from_seed(0, 1), big_stacks()).run(move || {
        *s.lock().unwrap() = Some(Lab::build());
    });
    let lab = slot.lock().unwrap().take().expect("built");
    Box::leak(Box::new(lab))
}

/// One budget: PCT with a fixed seed, then the random scheduler with each
/// fixed seed.
fn explore(f: impl Fn(&'static Lab) + Send + Sync + Clone + 'static) {
    let lab = lab();
    let g = f.clone();
    Runner::new(
        PctScheduler::new_from_seed(SEED, DEPTH, PCT_ITERATIONS),
        big_stacks(),
    )
    .run(move || g(lab));
    for seed in RANDOM_SEEDS {
        let g = f.clone();
        Runner::new(
            RandomScheduler::new_from_seed(seed, RANDOM_ITERATIONS),
            big_stacks(),
        )
        .run(move || g(lab));
    }
}

/// shuttle must report `f` within the same budget the good rules pass.
fn must_fail(what: &str, f: impl Fn(&'static Lab) + Send + Sync + Clone + 'static) {
    let caught = catch_unwind(AssertUnwindSafe(|| explore(f))).is_err();
    assert!(
        caught,
        "shuttle did not catch the known-bad variant: {what}"
    );
}

#[test]
fn two_requests_never_both_inside() {
    explore(|lab| {
        if let Some(b) = two_requests(lab, GcFlagRule::TestAndSet) {
            panic!("{}", b.schedule);
        }
    });
}

#[test]
fn two_requests_first_version_both_inside() {
    must_fail("test then set: both inside", |lab| {
        if let Some(b) = two_requests(lab, GcFlagRule::TestThenSet) {
            assert!(b.interleaved, "not an interleaving under shuttle");
            panic!("{}", b.schedule);
        }
    });
}

#[test]
fn cleaner_vs_writer_read_before_lock() {
    explore(|lab| cleaner_vs_writer(lab, TxRule::Exclusive, GcRule::ReadBeforeLock));
}

#[test]
fn cleaner_vs_writer_read_under_lock_makes_the_writer_wait() {
    must_fail("reads under the lock", |lab| {
        cleaner_vs_writer(lab, TxRule::Exclusive, GcRule::ReadUnderLock)
    });
}

#[test]
fn resources_freed_on_every_path() {
    explore(|lab| resources_on_every_path(lab, GcFlagRule::TestAndSet, Failing::Reads));
    explore(|lab| resources_on_every_path(lab, GcFlagRule::TestAndSet, Failing::Locked));
}

#[test]
fn resources_first_version_leaks_on_ebusy() {
    must_fail("EBUSY without freeing", |lab| {
        resources_on_every_path(lab, GcFlagRule::TestThenSet, Failing::Reads)
    });
}
