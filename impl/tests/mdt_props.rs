//! State-machine property tests of the metadata files' write side against
//! small models: the allocator against a set, the cpfile against a map of
//! checkpoints, the DAT against per-number life cycle states, the sufile
//! against a vector of flags. Every run uses proptest's deterministic RNG, so
//! a failure replays by running the test again; the shrunk op list is printed.

mod mdt_support;

use std::collections::{BTreeMap, BTreeSet};

use mdt_support::open_files;
use nilfs::alloc::Palloc;
use nilfs::cpfile::{CheckpointFinal, CpMode, Cpfile};
use nilfs::format::palloc::PallocGeometry;
use nilfs::format::sufile::{SU_DIRTY, SU_ERROR};
use nilfs::format::{BlockNr, Cno, SegNum, VBlockNr};
use nilfs::mdt::Mdt;
use nilfs::metafile::MetaStore;
use nilfs::the_nilfs::Nilfs;
use nilfs::{Errno, Error};
use nilfs_testkit::image::fresh;
use proptest::prelude::*;
use proptest::test_runner::{Config, RngAlgorithm, TestCaseError, TestRng, TestRunner};

const MIB: u64 = 1 << 20;

fn runner(cases: u32) -> TestRunner {
    TestRunner::new_with_rng(
        Config {
            cases,
            ..Config::default()
        },
        TestRng::deterministic_rng(RngAlgorithm::ChaCha),
    )
}

fn errno<T>(r: &nilfs::Result<T>) -> Option<Errno> {
    match r {
        Err(Error::Errno { errno, .. }) => Some(*errno),
        Err(e) => panic!("untyped error {e}"),
        Ok(_) => None,
    }
}

// ---------------------------------------------------------------- palloc

const EPG: u64 = 8192; // 1 KiB blocks
const EPB: u64 = 32; // 32-byte entries
/// Four groups: runs of full groups for the search to pass over, before
/// and after the target's.
const NGROUPS: u64 = 4;

#[derive(Clone, Debug)]
enum POp {
    Alloc {
        target: u64,
        wrap: bool,
        n: u8,
    },
    AbortAlloc {
        target: u64,
        wrap: bool,
    },
    /// Allocate every entry of a group except those `== 0 mod keep`
    /// (every entry when `keep` is 0: a full group).
    Fill {
        group: u64,
        keep: u16,
    },
    Free {
        pick: usize,
    },
    FreeBad {
        nr: u64,
    },
    Batch {
        picks: Vec<usize>,
    },
}

fn pop() -> impl Strategy<Value = POp> {
    let target = prop_oneof![
        0..40u64,
        EPG - 40..EPG + 40,
        2 * EPG - 40..2 * EPG + 40,
        NGROUPS * EPG - 40..NGROUPS * EPG + 5,
        0..NGROUPS * EPG
    ];
    prop_oneof![
        4 => (target.clone(), any::<bool>(), 1..40u8).prop_map(|(target, wrap, n)| POp::Alloc { target, wrap, n }),
        1 => (target, any::<bool>()).prop_map(|(target, wrap)| POp::AbortAlloc { target, wrap }),
        1 => (0..NGROUPS, 1..400u16).prop_map(|(group, keep)| POp::Fill { group, keep }),
        1 => (0..NGROUPS).prop_map(|group| POp::Fill { group, keep: 0 }),
        2 => any::<usize>().prop_map(|pick| POp::Free { pick }),
        1 => (0..NGROUPS * EPG).prop_map(|nr| POp::FreeBad { nr }),
        2 => prop::collection::vec(any::<usize>(), 1..80).prop_map(|picks| POp::Batch { picks }),
    ]
}

/// The model's answer: the kernel's search order over a set.
fn model_find(set: &BTreeSet<u64>, target: u64, wrap: bool) -> Option<u64> {
    let max = NGROUPS * EPG;
    let first_gap = |r: std::ops::Range<u64>| -> Option<u64> {
        let mut want = r.start;
        for &x in set.range(r.clone()) {
            if x != want {
                return Some(want);
            }
            want += 1;
        }
        (want < r.end).then_some(want)
    };
    let tg = target / EPG;
    if tg >= NGROUPS {
        return if wrap { first_gap(0..max) } else { None };
    }
    let mut order: Vec<std::ops::Range<u64>> = Vec::with_capacity(4);
    order.push(target..(tg + 1) * EPG);
    if wrap {
        order.push(tg * EPG..target);
    }
    order.push((tg + 1) * EPG..max);
    if wrap {
        order.push(0..tg * EPG);
    }
    order.into_iter().find_map(first_gap)
}

fn pick(set: &BTreeSet<u64>, i: usize) -> Option<u64> {
    (!set.is_empty()).then(|| *set.iter().nth(i % set.len()).unwrap())
}

fn check_palloc(p: &mut Palloc<'_>, model: &BTreeSet<u64>) -> Result<(), TestCaseError> {
    let geo = p.geometry();
    for g in 0..NGROUPS {
        // The bitmap equals the model, bit for bit; nfrees + popcount = epg.
        let mut want = vec![0u8; 1024];
        for &x in model.range(g * EPG..(g + 1) * EPG) {
            let o = x - g * EPG;
            want[(o / 8) as usize] |= 1 << (o % 8);
        }
        let got = p
            .mdt()
            .read(geo.bitmap_blkoff(g).unwrap())
            .unwrap()
            .unwrap_or(vec![0; 1024]);
        prop_assert!(got == want, "bitmap of group {} differs from the model", g);
        let n = model.range(g * EPG..(g + 1) * EPG).count() as u64;
        prop_assert_eq!(u64::from(p.group_nfrees(g).unwrap()), EPG - n);
    }
    prop_assert_eq!(p.check_groups(0..NGROUPS).unwrap(), None);
    Ok(())
}

fn alloc_one(
    p: &mut Palloc<'_>,
    model: &mut BTreeSet<u64>,
    target: u64,
    wrap: bool,
) -> Result<(), TestCaseError> {
    let want = model_find(model, target, wrap);
    let got = p.prepare_alloc(target, wrap);
    match want {
        None => prop_assert_eq!(errno(&got), Some(Errno::ENOSPC), "ENOSPC exactly when full"),
        Some(w) => {
            let req = got.unwrap();
            prop_assert_eq!(req.entry_nr(), w, "target {} wrap {}", target, wrap);
            let nr = p.commit_alloc(req);
            prop_assert!(model.insert(nr), "double allocation of {}", nr);
            p.entry_create(nr).unwrap();
            p.mark_entry_dirty(nr).unwrap();
        }
    }
    Ok(())
}

#[test]
fn palloc_matches_a_set() {
    runner(48)
        .run(&prop::collection::vec(pop(), 1..40), |ops| {
            let geo = PallocGeometry::new(1024, 32).unwrap();
            let mut p = Palloc::new(Mdt::empty(1024), geo).with_max_groups(NGROUPS);
            let mut model = BTreeSet::new();
            for op in ops {
                match op {
                    POp::Alloc { target, wrap, n } => {
                        for _ in 0..n {
                            alloc_one(&mut p, &mut model, target, wrap)?;
                        }
                    }
                    POp::AbortAlloc { target, wrap } => {
                        let before = p.clone();
                        if let Ok(r) = p.prepare_alloc(target, wrap) {
                            prop_assert!(!model.contains(&r.entry_nr()));
                            p.abort_alloc(r);
                        }
                        prop_assert!(p.mdt().same_state(before.mdt()).unwrap(), "abort restores");
                    }
                    POp::Fill { group, keep } => {
                        for nr in group * EPG..(group + 1) * EPG {
                            let kept = keep != 0 && nr % u64::from(keep) == 0;
                            if !kept && !model.contains(&nr) {
                                alloc_one(&mut p, &mut model, nr, false)?;
                            }
                        }
                    }
                    POp::Free { pick: i } => {
                        if let Some(nr) = pick(&model, i) {
                            p.free_entry(nr).unwrap();
                            model.remove(&nr);
                            prop_assert_eq!(errno(&p.free_entry(nr)), Some(Errno::EINVAL));
                        }
                    }
                    POp::FreeBad { nr } => {
                        let r = p.free_entry(nr);
                        if model.remove(&nr) {
                            prop_assert!(r.is_ok());
                        } else {
                            prop_assert_eq!(errno(&r), Some(Errno::EINVAL));
                        }
                    }
                    POp::Batch { picks } => {
                        let mut batch: Vec<u64> =
                            picks.iter().filter_map(|&i| pick(&model, i)).collect();
                        let unique: BTreeSet<u64> = batch.iter().copied().collect();
                        if unique.len() != batch.len() {
                            let before = p.clone();
                            prop_assert_eq!(errno(&p.free_entries(&batch)), Some(Errno::EINVAL));
                            prop_assert!(p.mdt().same_state(before.mdt()).unwrap());
                            batch = unique.into_iter().collect();
                        }
                        p.free_entries(&batch).unwrap();
                        for nr in &batch {
                            model.remove(nr);
                        }
                        // Emptied entry blocks and all-free groups' bitmaps are holes.
                        for &nr in &batch {
                            let blk_start = nr - nr % EPB;
                            let used = model.range(blk_start..blk_start + EPB).next().is_some();
                            prop_assert_eq!(
                                p.mdt().read(p.entry_blk(nr).unwrap()).unwrap().is_some(),
                                used
                            );
                            let g = nr / EPG;
                            let gused = model.range(g * EPG..(g + 1) * EPG).next().is_some();
                            prop_assert_eq!(
                                p.mdt()
                                    .read(geo.bitmap_blkoff(g).unwrap())
                                    .unwrap()
                                    .is_some(),
                                gused
                            );
                        }
                    }
                }
                check_palloc(&mut p, &model)?;
            }
            Ok(())
        })
        .unwrap();
}

// ---------------------------------------------------------------- cpfile

#[derive(Clone, Debug)]
enum COp {
    Create { n: u8 },
    SetSs { cno: u64 },
    ClearSs { cno: u64 },
    Rmcp { cno: u64 },
    RmRange { start: u64, len: u64 },
}

fn cop() -> impl Strategy<Value = COp> {
    prop_oneof![
        3 => (1..8u8).prop_map(|n| COp::Create { n }),
        3 => (0..60u64).prop_map(|cno| COp::SetSs { cno }),
        2 => (0..60u64).prop_map(|cno| COp::ClearSs { cno }),
        2 => (0..60u64).prop_map(|cno| COp::Rmcp { cno }),
        1 => (0..60u64, 0..25u64).prop_map(|(start, len)| COp::RmRange { start, len }),
    ]
}

/// The model: valid checkpoints (value: snapshot?) and the next number.
struct CpModel {
    cps: BTreeMap<u64, bool>,
    next: u64,
}

fn check_cpfile(cp: &mut Cpfile<'_>, m: &CpModel) -> Result<(), TestCaseError> {
    let listed: Vec<u64> = cp
        .cpinfos(Cno(1), usize::MAX)
        .unwrap()
        .0
        .iter()
        .map(|c| c.cno.0)
        .collect();
    prop_assert_eq!(listed, m.cps.keys().copied().collect::<Vec<_>>());
    let snaps: Vec<u64> = m.cps.iter().filter(|(_, s)| **s).map(|(c, _)| *c).collect();
    let listed: Vec<u64> = cp.snapshots().unwrap().iter().map(|c| c.cno.0).collect();
    prop_assert_eq!(&listed, &snaps, "snapshot list, forwards, sorted");
    // Backwards through ssl_prev, and each node's links.
    let h = cp.header().unwrap();
    prop_assert_eq!(h.ncheckpoints, m.cps.len() as u64);
    prop_assert_eq!(h.nsnapshots, snaps.len() as u64);
    let mut back = Vec::new();
    let mut c = h.snapshot_prev.0;
    while c != 0 && back.len() <= snaps.len() {
        back.push(c);
        c = cp.entry(Cno(c)).unwrap().unwrap().snapshot_prev.0;
    }
    back.reverse();
    prop_assert_eq!(&back, &snaps, "snapshot list, backwards");
    for (i, &s) in snaps.iter().enumerate() {
        let e = cp.entry(Cno(s)).unwrap().unwrap();
        prop_assert!(e.is_snapshot() && !e.is_invalid());
        prop_assert_eq!(e.snapshot_prev.0, if i == 0 { 0 } else { snaps[i - 1] });
        prop_assert_eq!(e.snapshot_next.0, snaps.get(i + 1).copied().unwrap_or(0));
    }
    // Blocks >= 1 exist iff they hold a valid checkpoint; slot 0 counts them.
    let per = cp.geometry().checkpoints_per_block();
    let last_blk = cp.geometry().locate(m.next + 1).unwrap().0 .0;
    for blk in 1..=last_blk {
        let n = m
            .cps
            .keys()
            .filter(|&&c| cp.geometry().locate(c).unwrap().0 .0 == blk)
            .count();
        match cp.mdt().read(blk).unwrap() {
            None => prop_assert_eq!(n, 0, "block {} is a hole but holds checkpoints", blk),
            Some(b) => {
                prop_assert!(n > 0, "block {} has no checkpoint but is not a hole", blk);
                let count = nilfs::format::cpfile::Checkpoint::decode(&b)
                    .unwrap()
                    .checkpoints_count;
                prop_assert_eq!(count as usize, n);
            }
        }
    }
    let _ = per;
    Ok(())
}

#[test]
fn cpfile_matches_a_model() {
    let dev = fresh(64 * MIB, 1024, 2048);
    let nilfs = Nilfs::open(&dev).unwrap();
    runner(64)
        .run(&prop::collection::vec(cop(), 1..40), |ops| {
            let mut cp = open_files(&nilfs).cpfile;
            let mut m = CpModel {
                cps: BTreeMap::from([(1, false)]),
                next: 2,
            };
            let enoent = Some(Errno::ENOENT);
            for op in ops {
                match op {
                    COp::Create { n } => {
                        for _ in 0..n {
                            let c = Cno(m.next);
                            cp.create_checkpoint(c).unwrap();
                            let fin = CheckpointFinal {
                                create: m.next,
                                nblk_inc: 3,
                                ..Default::default()
                            };
                            cp.finalize_checkpoint(c, &fin).unwrap();
                            m.next += 1;
                            cp.set_next_cno(Cno(m.next));
                            m.cps.insert(c.0, false);
                        }
                    }
                    COp::SetSs { cno } => {
                        let r = cp.change_mode(Cno(cno), CpMode::Snapshot, &[]);
                        match m.cps.get_mut(&cno) {
                            Some(ss) => {
                                prop_assert!(r.is_ok());
                                *ss = true;
                            }
                            None => prop_assert_eq!(errno(&r), enoent),
                        }
                    }
                    COp::ClearSs { cno } => {
                        let r = cp.change_mode(Cno(cno), CpMode::Checkpoint, &[]);
                        if cno <= m.next && cno + 1 >= m.next {
                            prop_assert_eq!(errno(&r), Some(Errno::EBUSY), "latest is mounted");
                        } else if let Some(ss) = m.cps.get_mut(&cno) {
                            prop_assert!(r.is_ok());
                            *ss = false;
                        } else {
                            prop_assert_eq!(errno(&r), enoent);
                        }
                    }
                    COp::Rmcp { cno } => {
                        let r = cp.delete_checkpoint(Cno(cno));
                        match m.cps.get(&cno) {
                            None => prop_assert_eq!(errno(&r), enoent),
                            Some(true) => prop_assert_eq!(errno(&r), Some(Errno::EBUSY)),
                            Some(false) => {
                                prop_assert!(r.is_ok());
                                m.cps.remove(&cno);
                            }
                        }
                    }
                    COp::RmRange { start, len } => {
                        let end = start + len;
                        let r = cp.delete_checkpoints(Cno(start), Cno(end));
                        if start == 0 {
                            prop_assert_eq!(errno(&r), Some(Errno::EINVAL));
                        } else {
                            let inrange: Vec<(u64, bool)> =
                                m.cps.range(start..end).map(|(c, s)| (*c, *s)).collect();
                            let busy = inrange.iter().any(|(_, s)| *s);
                            for (c, s) in &inrange {
                                if !s {
                                    m.cps.remove(c);
                                }
                            }
                            if busy {
                                prop_assert_eq!(errno(&r), Some(Errno::EBUSY));
                            } else {
                                prop_assert_eq!(r.unwrap(), inrange.len() as u64);
                            }
                        }
                    }
                }
                check_cpfile(&mut cp, &m)?;
            }
            Ok(())
        })
        .unwrap();
}

// ---------------------------------------------------------------- DAT

#[derive(Clone, Debug)]
enum DOp {
    Alloc { target: u64 },
    Start { pick: usize, pbn: u64 },
    End { pick: usize, vs: bool },
    Update { pick: usize, vs: bool, target: u64 },
    AbortUpdate { pick: usize },
    Move { pick: usize, pbn: u64 },
    Gc { picks: Vec<usize> },
    NextCno,
}

fn dop() -> impl Strategy<Value = DOp> {
    let target = prop_oneof![Just(16384u64), 0..200u64, 16380..16400u64];
    prop_oneof![
        3 => target.clone().prop_map(|target| DOp::Alloc { target }),
        3 => (any::<usize>(), 1..100_000u64).prop_map(|(pick, pbn)| DOp::Start { pick, pbn }),
        2 => (any::<usize>(), any::<bool>()).prop_map(|(pick, vs)| DOp::End { pick, vs }),
        2 => (any::<usize>(), any::<bool>(), target).prop_map(|(pick, vs, target)| DOp::Update { pick, vs, target }),
        1 => any::<usize>().prop_map(|pick| DOp::AbortUpdate { pick }),
        1 => (any::<usize>(), 1..100_000u64).prop_map(|(pick, pbn)| DOp::Move { pick, pbn }),
        1 => prop::collection::vec(any::<usize>(), 1..6).prop_map(|picks| DOp::Gc { picks }),
        2 => Just(DOp::NextCno),
    ]
}

/// One virtual block number's expected entry and allocation state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct DModel {
    allocated: bool,
    blocknr: u64,
    start: u64,
    end: u64,
}

#[test]
fn dat_life_cycle_matches_a_model() {
    let dev = fresh(128 * MIB, 4096, 512);
    let nilfs = Nilfs::open(&dev).unwrap();
    runner(64)
        .run(&prop::collection::vec(dop(), 1..50), |ops| {
            let mut dat = open_files(&nilfs).dat;
            let mut cno = nilfs.next_cno().0;
            let mut m: BTreeMap<u64, DModel> = BTreeMap::new();
            let pick = |m: &BTreeMap<u64, DModel>, i: usize| -> Option<u64> {
                (!m.is_empty()).then(|| *m.keys().nth(i % m.len()).unwrap())
            };
            let alloc_entry = DModel {
                allocated: true,
                blocknr: 0,
                start: 1,
                end: u64::MAX,
            };
            for op in ops {
                match op {
                    DOp::Alloc { target } => {
                        let v = dat.alloc(VBlockNr(target)).unwrap();
                        prop_assert!(
                            !m.get(&v.0).is_some_and(|e| e.allocated),
                            "{} handed out twice",
                            v
                        );
                        m.insert(v.0, alloc_entry);
                    }
                    DOp::Start { pick: i, pbn } => {
                        let Some(v) = pick(&m, i) else { continue };
                        let e = m.get_mut(&v).unwrap();
                        let r = dat.start(VBlockNr(v), Cno(cno), BlockNr(pbn));
                        if e.allocated && e.end == u64::MAX {
                            prop_assert!(r.is_ok());
                            (e.blocknr, e.start) = (pbn, cno);
                        } else if !e.allocated {
                            prop_assert_eq!(errno(&r), Some(Errno::EINVAL));
                        } else {
                            prop_assert!(r.is_ok()); // restart of an ended entry
                            (e.blocknr, e.start) = (pbn, cno);
                        }
                    }
                    DOp::End { pick: i, vs } => {
                        let Some(v) = pick(&m, i) else { continue };
                        let e = m.get_mut(&v).unwrap();
                        let r = dat.end(VBlockNr(v), Cno(cno), vs);
                        if !e.allocated || e.start > cno {
                            prop_assert_eq!(errno(&r), Some(Errno::EINVAL));
                        } else if e.blocknr == 0 {
                            prop_assert!(r.is_ok());
                            *e = DModel {
                                allocated: false,
                                blocknr: 0,
                                start: 1,
                                end: 1,
                            };
                        } else {
                            prop_assert!(r.is_ok());
                            e.end = if vs { e.start } else { cno };
                        }
                    }
                    DOp::Update {
                        pick: i,
                        vs,
                        target,
                    } => {
                        let Some(v) = pick(&m, i) else { continue };
                        let e = m[&v];
                        let r = dat.prepare_update(VBlockNr(v), Cno(cno), VBlockNr(target));
                        if !e.allocated || e.start > cno {
                            prop_assert_eq!(errno(&r), Some(Errno::EINVAL));
                            continue;
                        }
                        let req = r.unwrap();
                        let nv = dat.commit_update(req, vs);
                        let e = m.get_mut(&v).unwrap();
                        if e.blocknr == 0 {
                            *e = DModel {
                                allocated: false,
                                blocknr: 0,
                                start: 1,
                                end: 1,
                            };
                        } else {
                            e.end = if vs { e.start } else { cno };
                        }
                        prop_assert!(!m.get(&nv.0).is_some_and(|e| e.allocated));
                        m.insert(nv.0, alloc_entry);
                    }
                    DOp::AbortUpdate { pick: i } => {
                        let Some(v) = pick(&m, i) else { continue };
                        let before = dat.clone();
                        if let Ok(req) = dat.prepare_update(VBlockNr(v), Cno(cno), VBlockNr(16384))
                        {
                            dat.abort_update(req);
                        }
                        prop_assert!(dat.mdt().same_state(before.mdt()).unwrap());
                    }
                    DOp::Move { pick: i, pbn } => {
                        let Some(v) = pick(&m, i) else { continue };
                        let e = m.get_mut(&v).unwrap();
                        let r = dat.move_block(VBlockNr(v), BlockNr(pbn));
                        if e.blocknr == 0 {
                            prop_assert_eq!(errno(&r), Some(Errno::EINVAL));
                        } else {
                            prop_assert!(r.is_ok());
                            e.blocknr = pbn;
                        }
                    }
                    DOp::Gc { picks } => {
                        // The cleaner frees dead (ended) numbers.
                        let dead: BTreeSet<u64> = picks
                            .iter()
                            .filter_map(|&i| pick(&m, i))
                            .filter(|v| m[v].allocated && m[v].end != u64::MAX)
                            .collect();
                        let vs: Vec<VBlockNr> = dead.iter().map(|&v| VBlockNr(v)).collect();
                        dat.free_vblocknrs(&vs).unwrap();
                        for v in dead {
                            m.get_mut(&v).unwrap().allocated = false;
                        }
                    }
                    DOp::NextCno => cno += 1,
                }
                for (&v, e) in &m {
                    prop_assert_eq!(
                        dat.is_allocated(VBlockNr(v)).unwrap(),
                        e.allocated,
                        "bit of {}",
                        v
                    );
                    if !e.allocated {
                        continue; // freed: its block may have become a hole since
                    }
                    let got = dat.entry(VBlockNr(v)).unwrap();
                    prop_assert_eq!(
                        (got.blocknr.0, got.start.0, got.end.0),
                        (e.blocknr, e.start, e.end),
                        "entry of {}",
                        v
                    );
                    let t = dat.translate(VBlockNr(v));
                    if e.blocknr == 0 {
                        prop_assert_eq!(errno(&t), Some(Errno::ENOENT));
                    } else {
                        prop_assert_eq!(t.unwrap().0, e.blocknr);
                    }
                }
            }
            Ok(())
        })
        .unwrap();
}

// ---------------------------------------------------------------- sufile

#[derive(Clone, Debug)]
enum SOp {
    Alloc,
    Free { seg: u64 },
    SetError { seg: u64 },
    Scrap { seg: u64 },
    CancelFree { seg: u64 },
    SetUsage { seg: u64, nblocks: u32 },
}

fn sop(nseg: u64) -> impl Strategy<Value = SOp> {
    prop_oneof![
        6 => Just(SOp::Alloc),
        3 => (0..nseg + 2).prop_map(|seg| SOp::Free { seg }),
        1 => (0..nseg + 2).prop_map(|seg| SOp::SetError { seg }),
        1 => (0..nseg + 2).prop_map(|seg| SOp::Scrap { seg }),
        1 => (0..nseg + 2).prop_map(|seg| SOp::CancelFree { seg }),
        1 => (0..nseg + 2, 0..2048u32).prop_map(|(seg, nblocks)| SOp::SetUsage { seg, nblocks }),
    ]
}

#[test]
fn sufile_matches_a_model() {
    let dev = fresh(64 * MIB, 1024, 2048);
    let nilfs = Nilfs::open(&dev).unwrap();
    let nseg = nilfs.sb.nsegments;
    runner(64)
        .run(&prop::collection::vec(sop(nseg), 1..120), |ops| {
            let mut su = open_files(&nilfs).sufile;
            // The model: flags, nblocks, lastmod per segment, last_alloc.
            let mut flags: Vec<u32> = (0..nseg)
                .map(|s| su.usage(SegNum(s)).unwrap().flags)
                .collect();
            let mut nblocks: Vec<u32> = (0..nseg)
                .map(|s| su.usage(SegNum(s)).unwrap().nblocks)
                .collect();
            let mut last = su.header().unwrap().last_alloc.0;
            for (i, op) in ops.into_iter().enumerate() {
                let now = 1_000 + i as u64;
                let einval = Some(Errno::EINVAL);
                match op {
                    SOp::Alloc => {
                        let want = (1..=nseg)
                            .map(|k| (last + k) % nseg)
                            .find(|&s| flags[s as usize] == 0);
                        let r = su.alloc();
                        match want {
                            None => prop_assert_eq!(errno(&r), Some(Errno::ENOSPC)),
                            Some(s) => {
                                prop_assert_eq!(r.unwrap(), SegNum(s));
                                flags[s as usize] = SU_DIRTY;
                                last = s;
                            }
                        }
                    }
                    SOp::Free { seg } => {
                        let r = su.free(SegNum(seg));
                        if seg >= nseg {
                            prop_assert_eq!(errno(&r), einval);
                        } else {
                            prop_assert!(r.is_ok());
                            // An already clean segment is left alone (the kernel warns).
                            if flags[seg as usize] != 0 {
                                (flags[seg as usize], nblocks[seg as usize]) = (0, 0);
                            }
                        }
                    }
                    SOp::SetError { seg } => {
                        let r = su.set_error(SegNum(seg));
                        if seg >= nseg {
                            prop_assert_eq!(errno(&r), einval);
                        } else {
                            flags[seg as usize] |= SU_ERROR;
                        }
                    }
                    SOp::Scrap { seg } => {
                        let r = su.scrap(SegNum(seg));
                        if seg >= nseg {
                            prop_assert_eq!(errno(&r), einval);
                        } else {
                            (flags[seg as usize], nblocks[seg as usize]) = (SU_DIRTY, 0);
                        }
                    }
                    SOp::CancelFree { seg } => {
                        let r = su.cancel_free(SegNum(seg));
                        if seg >= nseg {
                            prop_assert_eq!(errno(&r), einval);
                        } else if flags[seg as usize] == 0 {
                            flags[seg as usize] = SU_DIRTY;
                        }
                    }
                    SOp::SetUsage { seg, nblocks: n } => {
                        let r = su.set_segment_usage(SegNum(seg), n, now);
                        if seg >= nseg {
                            prop_assert_eq!(errno(&r), einval);
                        } else {
                            prop_assert!(r.is_ok());
                            nblocks[seg as usize] = n;
                        }
                    }
                }
                let h = su.header().unwrap();
                prop_assert_eq!(h.last_alloc.0, last);
                prop_assert_eq!(
                    h.ncleansegs,
                    flags.iter().filter(|&&f| f == 0).count() as u64
                );
                prop_assert_eq!(
                    h.ndirtysegs,
                    flags.iter().filter(|&&f| f & SU_DIRTY != 0).count() as u64
                );
                for s in 0..nseg {
                    let u = su.usage(SegNum(s)).unwrap();
                    prop_assert_eq!(
                        (u.flags, u.nblocks),
                        (flags[s as usize], nblocks[s as usize]),
                        "segment {}",
                        s
                    );
                }
            }
            Ok(())
        })
        .unwrap();
}
