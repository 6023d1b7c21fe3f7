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

/// Seed 000 end to end on a two-leaf tree: one thread runs `lookup_contig`
/// from the first leaf, which reads the second leaf ahead (it is the next
/// block on disk); a second thread looks up a key in the second leaf; the
/// main thread evicts that leaf and plays the device's interrupt. The
/// second leaf is corrupt (no children), so whatever the interleaving, the
/// second lookup must fail with a corruption error: if it ever answers,
/// a buffer that arrived by read-ahead was used unchecked.
pub fn lookup_contig_vs_lookup_vs_evict(check: nilfs::bmap::readahead::NodeCheck) {
    use nilfs::bmap::readahead::{BtreeReader, ReadAhead, ReaderConfig};
    use nilfs::format::bmap::BmapRoot;
    use nilfs::format::btree::BtreeNode;

    const BS: u32 = 1024;
    let dev = SimDevice::mem(
        64 * 1024,
        SimConfig {
            block_size: BS,
            ..SimConfig::instant()
        },
    )
    .unwrap();
    // Leaf 0 at block 20 maps keys 0,1 to blocks 100,101; leaf 1 at block
    // 21 would map keys 5,6 but is corrupt.
    let mut leaf0 = BtreeNode::new_block(BS, 1);
    leaf0.nchildren = 2;
    leaf0.keys[..2].copy_from_slice(&[0, 1]);
    leaf0.ptrs[..2].copy_from_slice(&[100, 101]);
    let mut leaf1 = BtreeNode::new_block(BS, 1);
    leaf1.keys[..2].copy_from_slice(&[5, 6]);
    leaf1.ptrs[..2].copy_from_slice(&[500, 501]);
    let mut b1 = leaf1.encode_block(BS);
    b1[2..4].copy_from_slice(&0u16.to_le_bytes()); // nchildren 0: broken
    nilfs::device::BlockDevice::write_at(&dev, 20 * u64::from(BS), &leaf0.encode_block(BS))
        .unwrap();
    nilfs::device::BlockDevice::write_at(&dev, 21 * u64::from(BS), &b1).unwrap();
    let mut root = BtreeNode::new_root(2);
    root.nchildren = 2;
    root.keys[..2].copy_from_slice(&[0, 5]);
    root.ptrs[..2].copy_from_slice(&[1000, 1001]);
    let bmap = BmapRoot::Btree(root).encode();

    let nodes = BtnodeCache::new(dev.clone(), BS, BufferRules::default()).unwrap();
    let config = ReaderConfig {
        readahead: ReadAhead::On,
        check,
        ra_submit_cpu_ns: 0,
    };
    fn locate(p: u64) -> nilfs::Result<BlockNr> {
        match p {
            1000 => Ok(BlockNr(20)),
            1001 => Ok(BlockNr(21)),
            _ => Err(nilfs::Error::corrupt("DAT entry", format!("{p} unmapped"))),
        }
    }
    let n1 = nodes.clone();
    let contig = thread::spawn(move || {
        let r = BtreeReader::new(&n1, &locate, config);
        // The run stops at the sibling (its first key is 5, not 2), after
        // the sibling was read ahead.
        assert_eq!(r.lookup_contig(&bmap, 0, 4, None).unwrap(), Some((100, 2)));
    });
    let n2 = nodes.clone();
    let other = thread::spawn(move || {
        let r = BtreeReader::new(&n2, &locate, config);
        let got = r.lookup(&bmap, 5);
        assert!(
            matches!(got, Err(nilfs::Error::Corrupt { .. })),
            "an unchecked corrupt node was used: lookup gave {got:?}"
        );
    });
    let _ = nodes.buffers().try_evict(1001);
    dev.run_until_idle();
    contig.join().unwrap();
    other.join().unwrap();
    dev.run_until_idle();
    for key in nodes.buffers().keys() {
        if let Some(b) = nodes.buffers().find(key) {
            assert!(
                !b.is_locked(),
                "node {key} left locked with no I/O in flight"
            );
        }
    }
}
