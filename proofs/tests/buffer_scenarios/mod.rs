//! Buffer-protocol scenarios shared by `buffer_loom.rs` and
//! `buffer_shuttle.rs`: the same code runs under both checkers because it
//! names threads and primitives only through `nilfs::sync`.
//!
//! Each scenario asserts what must hold: no thread ever holds a reference to
//! an evicted buffer, the final state is consistent; a deadlock (a lost
//! wake-up leaves a sleeper with nobody to wake it) is reported by the
//! checker itself.

use nilfs::cache::{BtnodeCache, BufFlag, BufferCache, BufferRules, Evict, ReadMode, Submit};
use nilfs::device::sim::{SimConfig, SimDevice};
use nilfs::format::BlockNr;
use nilfs::sync::thread;

/// Two threads on one buffer — one locks, marks it up to date and unlocks;
/// the other trylocks, or else waits for the unlock — while the main thread
/// tries to evict it.
pub fn lock_trylock_wait_evict(rules: BufferRules) {
    let cache = BufferCache::new(512, None, rules).unwrap();
    drop(cache.get(1));
    let c1 = cache.clone();
    let locker = thread::spawn(move || {
        let b = c1.get(1);
        b.lock();
        assert!(!b.is_evicted(), "evicted while locked and referenced");
        b.set(BufFlag::Uptodate);
        b.unlock();
        assert!(!b.is_evicted(), "evicted while referenced");
    });
    let c2 = cache.clone();
    let waiter = thread::spawn(move || {
        let b = c2.get(1);
        if b.trylock() {
            b.unlock();
        } else {
            b.wait_on_buffer();
            // The wait may return only once the buffer was unlocked (it may
            // be re-locked since, but only by a thread that then unlocks).
        }
        assert!(!b.is_evicted(), "evicted while referenced");
    });
    let _ = cache.try_evict(1);
    locker.join().unwrap();
    waiter.join().unwrap();
    // Quiescent: nobody holds it, so it must be evictable now.
    assert_ne!(cache.try_evict(1), Evict::Busy);
}

/// The seed-000 shape on one node: a lookup reads it (sleeping for the lock),
/// a read-ahead of the same node trylocks it, the main thread evicts and
/// plays the device's interrupt (completes whatever is in flight).
pub fn read_vs_readahead_vs_evict(rules: BufferRules) {
    let dev = SimDevice::mem(
        64 * 1024,
        SimConfig {
            block_size: 1024,
            ..SimConfig::instant()
        },
    )
    .unwrap();
    let nodes = BtnodeCache::new(dev.clone(), 1024, rules).unwrap();
    let n1 = nodes.clone();
    let lookup = thread::spawn(move || {
        let mut last = None;
        match n1
            .submit_block(10, || Ok(BlockNr(5)), ReadMode::Read, &mut last)
            .unwrap()
        {
            Submit::Issued(b) | Submit::Exists(b) => {
                b.wait_on_buffer();
                assert!(
                    b.test(BufFlag::Uptodate),
                    "woke on a buffer whose read did not finish"
                );
                assert!(!b.is_evicted(), "evicted while referenced");
            }
            Submit::Busy => panic!("a normal read is never declined"),
        }
    });
    let n2 = nodes.clone();
    let readahead = thread::spawn(move || {
        let mut last = Some(BlockNr(4));
        match n2
            .submit_block(10, || Ok(BlockNr(5)), ReadMode::ReadAhead, &mut last)
            .unwrap()
        {
            Submit::Issued(b) | Submit::Exists(b) => {
                assert!(!b.is_evicted(), "evicted while referenced")
            }
            Submit::Busy => {}
        }
    });
    let _ = nodes.buffers().try_evict(10);
    dev.run_until_idle();
    lookup.join().unwrap();
    readahead.join().unwrap();
    dev.run_until_idle();
    if let Some(b) = nodes.buffers().find(10) {
        assert!(!b.is_locked(), "left locked with no I/O in flight");
    }
}
