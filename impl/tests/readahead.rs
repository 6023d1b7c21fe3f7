//! Seed 000 (nilfs2: read ahead btree sibling nodes), checked on B-trees of
//! any shape laid out on a simulated device:
//!
//! - every `lookup` and `lookup_contig` answers the same with read-ahead on
//!   and off, and agrees with the mapping the tree was built from;
//! - read-ahead only ever submits the block right after the previously
//!   submitted one, and never waits (read from the device's own log and
//!   wait counter);
//! - a corrupt node that arrives by read-ahead is rejected on first use,
//!   naming its block; the known-bad variant that skips the check for
//!   buffers it did not wait for uses the corrupt node, and the test that
//!   catches it is shown to fail there.

use std::collections::{BTreeMap, HashMap};

use nilfs::bmap::readahead::{BtreeReader, NodeCheck, ReadAhead, ReaderConfig};
use nilfs::cache::{BtnodeCache, BufferRules};
use nilfs::device::{BlockDevice, SimConfig, SimDevice};
use nilfs::format::bmap::BmapRoot;
use nilfs::format::btree::{node_ncmax, BtreeNode, ROOT_NCHILDREN_MAX};
use nilfs::format::BlockNr;
use nilfs::{Error, Result};
use proptest::prelude::*;

/// How node blocks are placed on the device.
#[derive(Clone, Copy, Debug)]
enum Layout {
    /// Level-1 nodes back to back, in key order (what a sequential writer makes).
    Contiguous,
    /// Every node at a pseudo-random distinct block.
    Scattered(u64),
}

/// A B-tree written to a device: the root in `i_bmap` form, the map from
/// node pointers (virtual numbers) to physical blocks, and the physical
/// blocks of the level-1 nodes in key order.
struct Tree {
    root: [u64; 7],
    locate: HashMap<u64, u64>,
    leaves: Vec<u64>,
}

/// Build a tree over `entries` (sorted keys) with `fill` entries per node,
/// on `dev` (whose blocks from 16 up are free).
fn build(
    dev: &dyn BlockDevice,
    bs: u32,
    entries: &[(u64, u64)],
    fill: usize,
    layout: Layout,
) -> Tree {
    let ncmax = node_ncmax(bs);
    let fill = fill.clamp(2, ncmax);
    // Levels from the bottom; the root (at most 3 entries) stays in the inode.
    let mut level_nodes: Vec<Vec<BtreeNode>> = Vec::new();
    let mut items: Vec<(u64, u64)> = entries.to_vec();
    while items.len() > ROOT_NCHILDREN_MAX {
        let level = level_nodes.len() as u8 + 1;
        let base = 1_000_000 * u64::from(level);
        let mut nodes = Vec::new();
        let mut parents = Vec::new();
        for (i, chunk) in items.chunks(fill).enumerate() {
            let mut n = BtreeNode::new_block(bs, level);
            n.nchildren = chunk.len() as u16;
            for (j, &(k, p)) in chunk.iter().enumerate() {
                n.keys[j] = k;
                n.ptrs[j] = p;
            }
            nodes.push(n);
            // Parents name nodes by virtual number.
            parents.push((chunk[0].0, base + i as u64));
        }
        level_nodes.push(nodes);
        items = parents;
    }
    // Place nodes.
    let total: usize = level_nodes.iter().map(Vec::len).sum();
    let mut slots: Vec<u64> = (0..total as u64).map(|i| 16 + i).collect();
    if let Layout::Scattered(seed) = layout {
        let mut rng = nilfs_testkit::Xorshift::new(seed);
        for i in (1..slots.len()).rev() {
            slots.swap(i, (rng.next() % (i as u64 + 1)) as usize);
        }
        for s in &mut slots {
            *s = 16 + (*s - 16) * 3; // gaps between nodes
        }
    }
    let mut locate = HashMap::new();
    let mut leaves = Vec::new();
    let mut next = 0;
    for (li, nodes) in level_nodes.iter().enumerate() {
        let base = 1_000_000 * (li as u64 + 1);
        for (i, n) in nodes.iter().enumerate() {
            let pbn = slots[next];
            next += 1;
            locate.insert(base + i as u64, pbn);
            if li == 0 {
                leaves.push(pbn);
            }
            dev.write_at(pbn * u64::from(bs), &n.encode_block(bs))
                .unwrap();
        }
    }
    let mut root = BtreeNode::new_root(level_nodes.len() as u8 + 1);
    root.nchildren = items.len() as u16;
    for (i, &(k, p)) in items.iter().enumerate() {
        root.keys[i] = k;
        root.ptrs[i] = p;
    }
    Tree {
        root: BmapRoot::Btree(root).encode(),
        locate,
        leaves,
    }
}

/// The node pointer's block, as a DAT translation would give it; an unused
/// or stale slot (read-ahead probes up to the parent's capacity) fails.
fn lookup_locate(t: &Tree, p: u64) -> Result<BlockNr> {
    t.locate
        .get(&p)
        .map(|&b| BlockNr(b))
        .ok_or_else(|| Error::corrupt("DAT entry", format!("{p} unmapped")))
}

/// Keys with holes and data pointers in runs, from a seed.
fn mapping(seed: u64, n: usize) -> Vec<(u64, u64)> {
    let mut rng = nilfs_testkit::Xorshift::spread(seed);
    let mut rnd = move || rng.next();
    let (mut key, mut ptr) = (rnd() % 50, 100_000 + rnd() % 1000);
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        out.push((key, ptr));
        key += if rnd() % 10 == 0 { 1 + rnd() % 5 } else { 1 };
        ptr += if rnd() % 12 == 0 { 2 + rnd() % 100 } else { 1 };
    }
    out
}

struct Rig {
    dev: SimDevice,
    cache: BtnodeCache,
}

fn rig(bs: u32, config: SimConfig) -> Rig {
    let dev = SimDevice::mem(
        64 << 20,
        SimConfig {
            block_size: bs,
            ..config
        },
    )
    .unwrap();
    let cache = BtnodeCache::new(dev.clone(), bs, BufferRules::default()).unwrap();
    Rig { dev, cache }
}

fn reader_config(readahead: ReadAhead) -> ReaderConfig {
    ReaderConfig {
        readahead,
        check: NodeCheck::OnFirstUse,
        ra_submit_cpu_ns: 500,
    }
}

/// The answers of `lookup` and `lookup_contig` for one query.
type Answers = (Result<Option<u64>>, Result<Option<(u64, u32)>>);

/// Run `queries` (key, maxblocks) through a fresh cache; returns the
/// answers for each, the device, and the waits of the first (cold) query.
fn run_queries(
    bs: u32,
    config: SimConfig,
    entries: &[(u64, u64)],
    fill: usize,
    layout: Layout,
    ra: ReadAhead,
    queries: &[(u64, u32)],
) -> (Vec<Answers>, SimDevice, u64) {
    let r = rig(bs, config);
    let t = build(&r.dev, bs, entries, fill, layout);
    let locate = |p: u64| lookup_locate(&t, p);
    let reader = BtreeReader::new(&r.cache, &locate, reader_config(ra));
    // The first query runs on a cold cache: its waits are the descent's own.
    let before = r.dev.stats().waits;
    let first = queries
        .first()
        .map(|&(k, max)| reader.lookup_contig(&t.root, k, max, None));
    let cold_waits = r.dev.stats().waits - before;
    drop(first);
    let out = queries
        .iter()
        .map(|&(k, max)| {
            (
                reader.lookup(&t.root, k),
                reader.lookup_contig(&t.root, k, max, None),
            )
        })
        .collect();
    (out, r.dev, cold_waits)
}

/// Every read-ahead bio in the device log directly follows the bio
/// submitted just before it.
fn readahead_is_contiguous(dev: &SimDevice) -> std::result::Result<(), String> {
    let log = dev.submissions();
    for w in log.windows(2) {
        if w[1].rahead && w[1].start.0 != w[0].start.0 + 1 {
            return Err(format!(
                "read-ahead of block {} after block {}",
                w[1].start, w[0].start
            ));
        }
    }
    Ok(())
}

fn sim_config(model: u8) -> SimConfig {
    match model % 3 {
        0 => SimConfig::instant(),
        1 => SimConfig::hdd_2010(),
        _ => SimConfig::ssd_2010(),
    }
}

/// One generated case: `n` entries of a mapping from `seed`, `fill_pct`
/// full nodes of `1024 << bs_sel` bytes, laid out contiguously or
/// scattered, read under timing `model` with read-ahead on and off: every
/// answer is the same, and read-ahead never adds a wait.
#[allow(clippy::too_many_arguments)]
fn readahead_agrees(
    seed: u64,
    n: usize,
    fill_pct: usize,
    bs_sel: u32,
    scattered: bool,
    model: u8,
    raw_queries: &[(u64, u32)],
) -> std::result::Result<(), TestCaseError> {
    let bs = 1024 << bs_sel;
    let entries = mapping(seed, n);
    let fill = node_ncmax(bs) * fill_pct / 100;
    let layout = if scattered {
        Layout::Scattered(seed)
    } else {
        Layout::Contiguous
    };
    let oracle: BTreeMap<u64, u64> = entries.iter().copied().collect();
    let (on, dev_on, cold_on) = run_queries(
        bs,
        sim_config(model),
        &entries,
        fill,
        layout,
        ReadAhead::On,
        raw_queries,
    );
    let (off, dev_off, cold_off) = run_queries(
        bs,
        sim_config(model),
        &entries,
        fill,
        layout,
        ReadAhead::Off,
        raw_queries,
    );
    for (i, ((l_on, c_on), (l_off, c_off))) in on.iter().zip(&off).enumerate() {
        let (k, max) = raw_queries[i];
        prop_assert_eq!(l_on, l_off, "lookup {}", k);
        prop_assert_eq!(c_on, c_off, "lookup_contig {} {}", k, max);
        prop_assert_eq!(
            l_on.as_ref().unwrap(),
            &oracle.get(&k).copied(),
            "lookup {} vs the mapping",
            k
        );
        if let Ok(Some((p, cnt))) = c_on {
            prop_assert!(*cnt >= 1 && *cnt <= max);
            for j in 0..u64::from(*cnt) {
                prop_assert_eq!(
                    oracle.get(&(k + j)),
                    Some(&(p + j)),
                    "block {} of the run at {}",
                    j,
                    k
                );
            }
        } else {
            prop_assert_eq!(c_on.as_ref().unwrap(), &None);
            prop_assert!(!oracle.contains_key(&k));
        }
    }
    prop_assert!(
        readahead_is_contiguous(&dev_on).is_ok(),
        "{:?}",
        readahead_is_contiguous(&dev_on)
    );
    // Read-ahead never waits: a cold lookup with it waits no more often
    // than without (fewer, when the run reaches a sibling it read ahead).
    prop_assert!(
        cold_on <= cold_off,
        "read-ahead added waits: {} > {}",
        cold_on,
        cold_off
    );
    prop_assert!(dev_off.submissions().iter().all(|s| !s.rahead));
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, .. ProptestConfig::default() })]

    #[test]
    fn readahead_changes_no_answer(
        seed in any::<u64>(),
        n in 1usize..3000,
        fill_pct in 40usize..=100,
        bs_sel in 0u32..3,
        scattered in any::<bool>(),
        model in 0u8..3,
        raw_queries in proptest::collection::vec((0u64..4000, 1u32..600), 1..40),
    ) {
        readahead_agrees(seed, n, fill_pct, bs_sel, scattered, model, &raw_queries)?;
    }
}

// postmortem: two cases proptest shrank while seed 000's read path was
// written (commit 6ace637): contiguous trees of about 800 entries at 1 KiB
// blocks (799 at 78% fill, 841 at 40%, so several level-1 nodes under
// more than one index level), read cold from key 0, one also past its last
// key. What was wrong then was not recorded with the seeds; they are kept
// as named cases of that shape, under the HDD and the instant model.
// (Were impl/tests/readahead.proptest-regressions.)
#[test]
fn regress_000_trees_of_800_entries_read_cold_from_key_zero() {
    readahead_agrees(
        3859292284591254898,
        799,
        78,
        0,
        false,
        1,
        &[(802, 15), (0, 1)],
    )
    .unwrap();
    readahead_agrees(0, 841, 40, 0, false, 0, &[(0, 1)]).unwrap();
}

/// On a sequentially laid out tree, a cold lookup_contig of the first key
/// reads the wanted level-1 node and reads ahead exactly the 7 siblings
/// that follow it on disk, with no extra wait.
#[test]
fn a_cold_lookup_reads_ahead_seven_contiguous_siblings() {
    let bs = 4096;
    let entries: Vec<(u64, u64)> = (0..20 * 255).map(|k| (k, 500_000 + k)).collect();
    for (ra, expect_ra) in [(ReadAhead::On, 7), (ReadAhead::Off, 0)] {
        let r = rig(bs, SimConfig::instant());
        let t = build(&r.dev, bs, &entries, 255, Layout::Contiguous);
        let locate = |p: u64| lookup_locate(&t, p);
        let cfg = ReaderConfig {
            readahead: ra,
            check: NodeCheck::OnFirstUse,
            ra_submit_cpu_ns: 0,
        };
        let reader = BtreeReader::new(&r.cache, &locate, cfg);
        let before = r.dev.stats().waits;
        assert_eq!(
            reader.lookup_contig(&t.root, 0, 1, None).unwrap(),
            Some((500_000, 1))
        );
        let log = r.dev.submissions();
        let rahead: Vec<u64> = log.iter().filter(|s| s.rahead).map(|s| s.start.0).collect();
        assert_eq!(rahead.len(), expect_ra, "{ra:?}: {log:?}");
        let first_leaf = t.leaves[0];
        assert_eq!(
            rahead,
            (first_leaf + 1..first_leaf + 1 + expect_ra as u64).collect::<Vec<_>>()
        );
        // Root at level 3 here: two node reads, two waits, read-ahead or not.
        assert_eq!(r.dev.stats().waits - before, 2, "{ra:?}");
    }
}

/// `nilfs_btree_lookup_contig`: the run from a key goes on while keys and
/// pointers both advance by one, along the leaf and into the next ones,
/// up to the count asked for; a gap in either ends it.
#[test]
fn lookup_contig_follows_the_run_across_leaves() {
    let bs = 1024;
    // Keys 0..2000 contiguous on disk, but key 1000 maps elsewhere.
    let entries: Vec<(u64, u64)> = (0..2000)
        .map(|k| (k, if k == 1000 { 90_000 } else { 7_000 + k }))
        .collect();
    let r = rig(bs, SimConfig::instant());
    let t = build(&r.dev, bs, &entries, 63, Layout::Contiguous);
    let locate = |p: u64| lookup_locate(&t, p);
    let reader = BtreeReader::new(&r.cache, &locate, reader_config(ReadAhead::Off));
    let contig = |k, max| reader.lookup_contig(&t.root, k, max, None).unwrap();
    assert_eq!(contig(5, 1), Some((7_005, 1)));
    assert_eq!(contig(5, 40), Some((7_005, 40)));
    // Across leaves of 63 entries.
    assert_eq!(contig(60, 200), Some((7_060, 200)));
    // Up to the gap at 1000.
    assert_eq!(contig(990, 64), Some((7_990, 10)));
    assert_eq!(contig(1000, 64), Some((90_000, 1)));
    assert_eq!(contig(5000, 64), None);
}

/// With scattered nodes nothing is contiguous, so nothing is read ahead.
#[test]
fn scattered_siblings_are_not_read_ahead() {
    let bs = 1024;
    let entries: Vec<(u64, u64)> = (0..5000).map(|k| (k, 9_000 + k)).collect();
    let r = rig(bs, SimConfig::instant());
    let t = build(&r.dev, bs, &entries, 63, Layout::Scattered(7));
    let locate = |p: u64| lookup_locate(&t, p);
    let reader = BtreeReader::new(&r.cache, &locate, reader_config(ReadAhead::On));
    for k in (0..5000).step_by(97) {
        reader.lookup_contig(&t.root, k, 64, None).unwrap();
    }
    assert!(r.dev.submissions().iter().all(|s| !s.rahead));
}

/// Build a contiguous tree, corrupt level-1 node `victim` with `damage`, read
/// the node before it with lookup_contig (so the victim arrives by
/// read-ahead), then look up a key that lives in the victim. Returns the
/// error of that lookup, or `None` if the corrupt node was used.
fn corrupt_node_via_readahead(check: NodeCheck, damage: fn(&mut [u8])) -> Option<Error> {
    let bs = 1024;
    let ncmax = node_ncmax(bs) as u64; // 63
    let entries: Vec<(u64, u64)> = (0..6 * ncmax).map(|k| (k, 70_000 + k)).collect();
    let r = rig(bs, SimConfig::instant());
    let t = build(&r.dev, bs, &entries, ncmax as usize, Layout::Contiguous);
    let victim = t.leaves[1];
    let mut blk = vec![0u8; bs as usize];
    r.dev.read_at(victim * 1024, &mut blk).unwrap();
    damage(&mut blk);
    r.dev.write_at(victim * 1024, &blk).unwrap();
    let locate = |p: u64| lookup_locate(&t, p);
    let cfg = ReaderConfig {
        readahead: ReadAhead::On,
        check,
        ra_submit_cpu_ns: 0,
    };
    let reader = BtreeReader::new(&r.cache, &locate, cfg);
    // Reading node 0 reads ahead node 1 (the victim) without checking it.
    assert_eq!(
        reader.lookup_contig(&t.root, 0, 1, None).unwrap(),
        Some((70_000, 1))
    );
    r.dev.run_until_idle();
    assert!(
        r.dev
            .submissions()
            .iter()
            .any(|s| s.rahead && s.start.0 == victim),
        "victim not read ahead"
    );
    // First use of the victim.
    match reader.lookup(&t.root, ncmax + 5) {
        Err(e) => {
            let msg = e.to_string();
            assert!(
                msg.contains(&format!("block {victim}")),
                "error does not name block {victim}: {msg}"
            );
            // Still rejected on the next use: the buffer was not marked Checked.
            assert!(reader.lookup(&t.root, ncmax + 6).is_err());
            Some(e)
        }
        Ok(_) => None,
    }
}

/// A way to damage a node block, by name.
type Damage = (&'static str, fn(&mut [u8]));

const DAMAGES: &[Damage] = &[
    ("level 0", |b| b[1] = 0),
    ("level 14", |b| b[1] = 14),
    ("root flag", |b| b[0] |= 1),
    ("empty node", |b| {
        b[2..4].copy_from_slice(&0u16.to_le_bytes())
    }),
    ("nchildren above capacity", |b| {
        b[2..4].copy_from_slice(&64u16.to_le_bytes())
    }),
    ("keys out of order", |b| {
        let (k1, k2) = (16 + 8 * 3, 16 + 8 * 4);
        let a: [u8; 8] = b[k1..k1 + 8].try_into().unwrap();
        let c: [u8; 8] = b[k2..k2 + 8].try_into().unwrap();
        b[k1..k1 + 8].copy_from_slice(&c);
        b[k2..k2 + 8].copy_from_slice(&a);
    }),
];

#[test]
fn a_corrupt_node_read_ahead_is_rejected_on_first_use() {
    for (what, damage) in DAMAGES {
        let err = corrupt_node_via_readahead(NodeCheck::OnFirstUse, *damage);
        assert!(
            matches!(err, Some(Error::Corrupt { .. })),
            "{what}: {err:?}"
        );
    }
}

/// The known-bad variant (check only buffers this lookup waited for) uses
/// the read-ahead node unchecked: the detection above fails there.
#[test]
fn the_unchecked_variant_uses_a_corrupt_read_ahead_node() {
    let missed = DAMAGES
        .iter()
        .filter(|(_, damage)| {
            corrupt_node_via_readahead(NodeCheck::OnlyWhenWaited, *damage).is_none()
        })
        .count();
    assert!(
        missed > 0,
        "the known-bad variant caught every corrupt node: the test cannot tell them apart"
    );
}

/// The contiguity checker itself can fail: a read-ahead bio that does not
/// follow the previous submission is reported.
#[test]
fn the_contiguity_checker_catches_a_gap() {
    use nilfs::device::Bio;
    let dev = SimDevice::mem(1 << 20, SimConfig::instant()).unwrap();
    dev.submit(Bio::read(BlockNr(10), 4096, 1)).unwrap();
    dev.submit(Bio::read(BlockNr(11), 4096, 1).rahead())
        .unwrap();
    assert!(readahead_is_contiguous(&dev).is_ok());
    dev.submit(Bio::read(BlockNr(13), 4096, 1).rahead())
        .unwrap();
    assert!(readahead_is_contiguous(&dev).is_err());
}
