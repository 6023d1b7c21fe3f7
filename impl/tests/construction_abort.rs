//! A construction that fails is rolled back (issue 13: "failed
//! constructions roll back"; the kernel's `nilfs_segctor_abort_construction`).
//!
//! - ENOSPC: on a tiny device, a sync that does not fit fails, and after
//!   the files are unlinked the next sync succeeds (it used to fail with
//!   EIO, then ENOSPC for ever: the failed attempt kept its segments and
//!   half its propagation).
//! - A write error at every block write of a sync, an fdatasync and a
//!   cleaning step: the operation fails with the device's error, the mount
//!   reads as before, and once the device works again the next sync
//!   leaves an image identical to the one an undisturbed run leaves.
//! - The same with the failing write torn (its first sector lands, the
//!   rest does not), and with each cache flush of the operation failing
//!   instead: nothing synced before is lost and the retried operation
//!   leaves an image that checks clean and reads as the undisturbed one.

use nilfs_testkit::image::{assert_checks_clean, fresh, latest_manifest};
use nilfs_testkit::pattern;

use nilfs::device::{BlockDevice, CutDevice, MemDevice};
use nilfs::format::{ino, Cno, Ino};
use nilfs::fs::Fs;
use nilfs::inspect::manifest::live_manifest;
use nilfs::the_nilfs::Nilfs;
use nilfs::{Errno, Error};

const NOW: u64 = 1_800_000_000;

fn errno(r: nilfs::Result<impl std::fmt::Debug>) -> Option<Errno> {
    match r {
        Err(Error::Errno { errno, .. }) => Some(errno),
        other => panic!("expected an errno, got {other:?}"),
    }
}

/// The acceptance workload of issue 13: 1 MiB, 1 KiB blocks, 16 blocks
/// per segment; files until the vacancy check refuses, a sync that cannot
/// fit, every file unlinked, then a sync that must succeed.
#[test]
fn a_sync_refused_for_space_leaves_the_mount_usable() {
    let dev = fresh(1 << 20, 1024, 16);
    {
        let nilfs = Nilfs::open(&dev).unwrap();
        let mut fs = Fs::mount(&nilfs, NOW).unwrap();
        let mut made = Vec::new();
        for n in 0..1500u64 {
            let name = format!("f{n}");
            match fs.create(ino::ROOT, name.as_bytes(), 0o644) {
                Ok(i) => {
                    fs.write(i, 0, &pattern(n, 100)).unwrap();
                    made.push(name);
                }
                Err(e) => {
                    assert!(
                        matches!(
                            e,
                            Error::Errno {
                                errno: Errno::ENOSPC,
                                ..
                            }
                        ),
                        "{e}"
                    );
                    break;
                }
            }
        }
        assert!(made.len() > 100, "only {} files fit", made.len());
        let before = live_manifest(&mut fs).unwrap();
        assert_eq!(errno(fs.sync()), Some(Errno::ENOSPC));
        assert_eq!(
            live_manifest(&mut fs).unwrap(),
            before,
            "the refused sync changed what the mount reads"
        );
        for name in &made {
            fs.unlink(ino::ROOT, name.as_bytes()).unwrap();
        }
        fs.sync().expect("the sync after the unlinks");
        let after = fs.create(ino::ROOT, b"after", 0o644).unwrap();
        fs.write(after, 0, b"room again\n").unwrap();
        fs.sync().expect("a later sync");
        fs.unmount().expect("the unmount");
    }
    assert_checks_clean(&dev, "after the refused sync");
    let m = latest_manifest(&dev);
    assert!(m.contains("/after"), "{m}");
    assert!(!m.contains("/f0"), "{m}");
}

/// The known-bad variant the test above exists to catch: without the
/// rollback, the refused attempt keeps the segments it took, and the sync
/// after the unlinks fails too.
#[test]
fn without_the_rollback_the_refused_sync_poisons_the_mount() {
    let dev = fresh(1 << 20, 1024, 16);
    let nilfs = Nilfs::open(&dev).unwrap();
    let mut fs = Fs::mount(&nilfs, NOW).unwrap();
    fs.known_bad_keep_failed_constructions();
    let mut made = Vec::new();
    for n in 0..1500u64 {
        let name = format!("f{n}");
        let Ok(i) = fs.create(ino::ROOT, name.as_bytes(), 0o644) else {
            break;
        };
        fs.write(i, 0, &pattern(n, 100)).unwrap();
        made.push(name);
    }
    assert!(fs.sync().is_err());
    for name in &made {
        fs.unlink(ino::ROOT, name.as_bytes()).unwrap();
    }
    assert!(
        fs.sync().is_err(),
        "the known-bad variant synced: this test no longer tells the two apart"
    );
}

/// A workload in two parts: `prepare` (synced), then `change`, whose
/// changes the operation under test writes.
struct Workload {
    files: Vec<Ino>,
}

fn prepare(fs: &mut Fs<'_>) -> Workload {
    let d = fs.mkdir(ino::ROOT, b"d", 0o755).unwrap();
    let mut files = Vec::new();
    for n in 0..6u64 {
        let i = fs.create(d, format!("f{n}").as_bytes(), 0o644).unwrap();
        // Sizes across the direct map and into B-trees.
        fs.write(i, 0, &pattern(n, 3000 + 40_000 * n as usize))
            .unwrap();
        files.push(i);
    }
    fs.sync().unwrap();
    fs.mkcp(true).unwrap();
    Workload { files }
}

fn change(fs: &mut Fs<'_>, w: &Workload) {
    fs.write(w.files[1], 20_000, &pattern(77, 9000)).unwrap();
    fs.write(w.files[5], 300_000, &pattern(78, 5000)).unwrap();
    fs.truncate(w.files[4], 1000).unwrap();
    fs.unlink(ino::ROOT, b"nothing").unwrap_err();
    let d = fs.lookup(ino::ROOT, b"d").unwrap().unwrap();
    fs.unlink(d, b"f2").unwrap();
    fs.rename(d, b"f3", ino::ROOT, b"moved").unwrap();
    let e = fs.mkdir(ino::ROOT, b"e", 0o700).unwrap();
    let n = fs.create(e, b"new", 0o600).unwrap();
    fs.write(n, 0, &pattern(79, 12_345)).unwrap();
}

/// What the operation under test is.
#[derive(Clone, Copy, Debug)]
enum Op {
    Sync,
    /// fdatasync of the workload's file 1 (a data-only log).
    Fdatasync,
}

fn run(op: Op, fs: &mut Fs<'_>, w: &Workload) -> nilfs::Result<()> {
    match op {
        Op::Sync => fs.sync().map(|_| ()),
        Op::Fdatasync => fs.fdatasync(w.files[1]),
    }
}

fn image(dev: &MemDevice) -> Vec<u8> {
    let mut b = vec![0u8; dev.size_bytes() as usize];
    dev.read_at(0, &mut b).unwrap();
    b
}

const BS: u64 = 1024;

fn base_image() -> MemDevice {
    fresh(16 << 20, BS, 64)
}

/// The undisturbed run: (writes before the operation, where each block
/// write went, what the mount read before it, the final image).
fn reference(op: Op) -> (u64, Vec<u64>, String, Vec<u8>) {
    let cut = CutDevice::new(base_image(), BS, u64::MAX);
    let (before, during, live) = {
        let nilfs = Nilfs::open(&cut).unwrap();
        let mut fs = Fs::mount(&nilfs, NOW).unwrap();
        let w = prepare(&mut fs);
        change(&mut fs, &w);
        let live = live_manifest(&mut fs).unwrap();
        let before = cut.written();
        run(op, &mut fs, &w).unwrap();
        let offsets = cut.offsets();
        fs.unmount().unwrap();
        (before, offsets, live)
    };
    (before, during, live, image(&cut.inner))
}

/// Whether a block write at byte `off` of `dev` is a super block's.
fn is_super_block(dev: &dyn BlockDevice, off: u64) -> bool {
    off == 1024 || off >= (dev.size_bytes() & !4095) - 4096
}

/// Fails the operation at each of its block writes in turn (torn: the
/// failing write's first sector reaches the medium).
fn fail_at_every_write(op: Op, torn: bool) {
    let (before, offsets, live, want) = reference(op);
    let during = offsets.len() as u64 - before;
    assert!(during > 4, "{op:?} wrote only {during} blocks");
    println!("{op:?}: failing each of its {during} block writes (torn: {torn})");
    for k in 0..during {
        let ctx = format!("{op:?}, write {k} of {during} failing (torn: {torn})");
        // A tearing device tears the write that uses up its budget; a
        // plain one refuses the first write past it.
        let cut = if torn {
            CutDevice::new(base_image(), BS, before + k + 1).tearing()
        } else {
            CutDevice::new(base_image(), BS, before + k)
        };
        {
            let nilfs = Nilfs::open(&cut).unwrap();
            let mut fs = Fs::mount(&nilfs, NOW).unwrap();
            let w = prepare(&mut fs);
            change(&mut fs, &w);
            let e = run(op, &mut fs, &w).expect_err(&ctx);
            assert!(matches!(e, Error::Io { .. }), "{ctx}: {e}");
            cut.restore();
            let super_block = is_super_block(&cut, offsets[(before + k) as usize]);
            assert_eq!(
                live_manifest(&mut fs).unwrap(),
                live,
                "{ctx}: reads changed"
            );
            if super_block {
                // The logs are written and complete: the failed super block
                // write is the only loss, and the next one covers it.
                fs.unmount()
                    .unwrap_or_else(|e| panic!("{ctx}: unmount: {e}"));
                assert_checks_clean(&cut, &ctx);
                continue;
            }
            run(op, &mut fs, &w).unwrap_or_else(|e| panic!("{ctx}: the retry: {e}"));
            fs.unmount()
                .unwrap_or_else(|e| panic!("{ctx}: unmount: {e}"));
        }
        assert!(
            image(&cut.inner) == want,
            "{ctx}: the image differs from the undisturbed run's"
        );
    }
}

#[test]
fn a_sync_failing_at_any_write_is_rolled_back() {
    fail_at_every_write(Op::Sync, false);
}

#[test]
fn an_fdatasync_failing_at_any_write_is_rolled_back() {
    fail_at_every_write(Op::Fdatasync, false);
}

#[test]
fn a_sync_torn_at_any_write_is_rolled_back() {
    fail_at_every_write(Op::Sync, true);
}

#[test]
fn an_fdatasync_torn_at_any_write_is_rolled_back() {
    fail_at_every_write(Op::Fdatasync, true);
}

/// Fails each cache flush the operation makes, in turn: the operation
/// reports the device's error and reads stay as they were; the retry and
/// the unmount succeed, and the image checks clean and holds what the
/// undisturbed run's holds.
fn fail_at_every_flush(op: Op) {
    let flushes = |fail: Option<u64>| -> (u64, u64) {
        let cut = CutDevice::new(base_image(), BS, u64::MAX);
        let cut = match fail {
            Some(k) => cut.failing_flush(k),
            None => cut,
        };
        let nilfs = Nilfs::open(&cut).unwrap();
        let mut fs = Fs::mount(&nilfs, NOW).unwrap();
        let w = prepare(&mut fs);
        change(&mut fs, &w);
        let before = cut.flushes();
        run(op, &mut fs, &w).unwrap();
        (before, cut.flushes() - before)
    };
    let (before, during) = flushes(None);
    assert!(during >= 1, "{op:?} made no flush");
    println!("{op:?}: failing each of its {during} flushes");
    let (.., want) = reference(op);
    let want_manifest = {
        let dev = MemDevice::new(want.len() as u64);
        dev.write_at(0, &want).unwrap();
        latest_manifest(&dev)
    };
    for k in 0..during {
        let ctx = format!("{op:?}, flush {k} of {during} failing");
        let cut = CutDevice::new(base_image(), BS, u64::MAX).failing_flush(before + k);
        {
            let nilfs = Nilfs::open(&cut).unwrap();
            let mut fs = Fs::mount(&nilfs, NOW).unwrap();
            let w = prepare(&mut fs);
            change(&mut fs, &w);
            let live = live_manifest(&mut fs).unwrap();
            let e = run(op, &mut fs, &w).expect_err(&ctx);
            assert!(matches!(e, Error::Io { .. }), "{ctx}: {e}");
            assert_eq!(
                live_manifest(&mut fs).unwrap(),
                live,
                "{ctx}: reads changed"
            );
            run(op, &mut fs, &w).unwrap_or_else(|e| panic!("{ctx}: the retry: {e}"));
            fs.unmount()
                .unwrap_or_else(|e| panic!("{ctx}: unmount: {e}"));
        }
        assert_checks_clean(&cut, &ctx);
        assert_eq!(latest_manifest(&cut), want_manifest, "{ctx}");
    }
}

#[test]
fn a_sync_whose_flush_fails_loses_nothing() {
    fail_at_every_flush(Op::Sync);
}

#[test]
fn an_fdatasync_whose_flush_fails_loses_nothing() {
    fail_at_every_flush(Op::Fdatasync);
}

/// The cleaner's construction failing at each write: the cleaning step
/// fails, and the mount still syncs, unmounts and reads as before.
#[test]
fn a_cleaning_step_failing_at_any_write_loses_nothing() {
    let setup = |fs: &mut Fs<'_>| {
        let w = prepare(fs);
        change(fs, &w);
        fs.sync().unwrap();
        // Overwrite most of the data so the old segments are worth cleaning.
        for (n, &i) in w.files.iter().enumerate() {
            if n != 2 && n != 3 {
                fs.write(i, 0, &pattern(100 + n as u64, 2000)).unwrap();
            }
        }
        fs.sync().unwrap();
        // The cleaner takes segments older than the last construction
        // that was not its own.
        fs.set_time(NOW + 3600);
        let late = fs.create(ino::ROOT, b"late", 0o644).unwrap();
        fs.write(late, 0, b"late\n").unwrap();
        fs.sync().unwrap();
    };
    let cut = CutDevice::new(base_image(), BS, u64::MAX);
    let (before, during, want) = {
        let nilfs = Nilfs::open(&cut).unwrap();
        let mut fs = Fs::mount(&nilfs, NOW).unwrap();
        setup(&mut fs);
        let before = cut.written();
        let report = nilfs::cleaner::clean(&mut fs, 0, 2).unwrap();
        assert!(report.cleaned_segs > 0, "nothing to clean: {report:?}");
        let during = cut.written() - before;
        fs.unmount().unwrap();
        (before, during, latest_manifest(&cut))
    };
    println!("cleaning step: failing each of its {during} block writes");
    for k in 0..during {
        let ctx = format!("cleaning, write {k} of {during} failing");
        let cut = CutDevice::new(base_image(), BS, before + k);
        {
            let nilfs = Nilfs::open(&cut).unwrap();
            let mut fs = Fs::mount(&nilfs, NOW).unwrap();
            setup(&mut fs);
            let live = live_manifest(&mut fs).unwrap();
            nilfs::cleaner::clean(&mut fs, 0, 2).expect_err(&ctx);
            cut.restore();
            assert_eq!(
                live_manifest(&mut fs).unwrap(),
                live,
                "{ctx}: reads changed"
            );
            nilfs::cleaner::clean(&mut fs, 0, 2)
                .unwrap_or_else(|e| panic!("{ctx}: the second cleaning: {e}"));
            fs.unmount()
                .unwrap_or_else(|e| panic!("{ctx}: unmount: {e}"));
        }
        assert_checks_clean(&cut, &ctx);
        assert_eq!(latest_manifest(&cut), want, "{ctx}");
    }
}

/// The known-bad variant the write-failure tests exist to catch: without
/// the rollback, a sync that failed half way is not retried into the image
/// an undisturbed run leaves.
#[test]
fn without_the_rollback_a_failed_sync_is_caught() {
    let (before, offsets, _, want) = reference(Op::Sync);
    let during = offsets.len() as u64 - before;
    let cut = CutDevice::new(base_image(), BS, before + during / 2);
    let retried = {
        let nilfs = Nilfs::open(&cut).unwrap();
        let mut fs = Fs::mount(&nilfs, NOW).unwrap();
        fs.known_bad_keep_failed_constructions();
        let w = prepare(&mut fs);
        change(&mut fs, &w);
        fs.sync().unwrap_err();
        cut.restore();
        fs.sync().and_then(|_| fs.unmount())
    };
    assert!(
        retried.is_err() || image(&cut.inner) != want,
        "the known-bad variant left the undisturbed image: this test no longer tells the two apart"
    );
}

/// An image whose segment 1 holds live blocks (64 KiB segments: a 100
/// KiB file fills segments 1 and 2) but which the sufile calls clean and
/// hands out next, damaged further by `more` (corrupt recipes).
fn live_segment_marked_clean(more: &[&str]) -> MemDevice {
    let dev = fresh(16 << 20, 1024, 64);
    {
        let nilfs = Nilfs::open(&dev).unwrap();
        let mut fs = Fs::mount(&nilfs, NOW).unwrap();
        let f = fs.create(ino::ROOT, b"old", 0o644).unwrap();
        fs.write(f, 0, &pattern(1, 100 << 10)).unwrap();
        fs.unmount().unwrap();
    }
    mark_segment_1_clean(&dev, more);
    dev
}

/// Segment 1 of `dev` called clean by the sufile and handed out next
/// (its live blocks left where they are), then `more` (corrupt recipes).
fn mark_segment_1_clean(dev: &MemDevice, more: &[&str]) {
    use nilfs::corrupt::{apply, Recipe};
    let recipes = [
        "su[1].su_flags = 0",
        "suhdr.sh_ncleansegs += 1",
        "suhdr.sh_ndirtysegs -= 1",
        "suhdr.sh_last_alloc = 0",
    ];
    for r in recipes.iter().chain(more) {
        apply(dev, &Recipe::parse(r).unwrap()).unwrap();
    }
}

/// Mount `dev` later, write a new 300 KiB file `/new` (enough to reach
/// segment 1) and sync: the sync's result, and the file's first bytes
/// read after it (rolled back or not, the mount must still read them).
fn sync_a_new_file(dev: &MemDevice) -> (nilfs::Result<Option<Cno>>, Vec<u8>) {
    let nilfs = Nilfs::open(dev).unwrap();
    let mut fs = Fs::mount(&nilfs, NOW + 10).unwrap();
    let f = fs.create(ino::ROOT, b"new", 0o644).unwrap();
    fs.write(f, 0, &[0x77; 300 << 10]).unwrap();
    let synced = fs.sync();
    (synced, fs.read(f, 0, 4).unwrap())
}

/// `synced` is the guard's refusal of segment 1.
fn assert_refused_at_segment_1(synced: nilfs::Result<Option<Cno>>, why: &str) {
    let e = synced.expect_err(why);
    assert!(
        e.to_string()
            .contains("segment 1 is marked clean, but its block"),
        "{e}"
    );
}

// postmortem (issue 13.7): a segment holding live blocks but marked clean
// was handed to the next construction, which wrote over the live blocks:
// the write "succeeded" and the image no longer read. A construction
// about to write a segment from its head now checks that nothing still
// points into it (segctor/reuse.rs); the sync fails as corruption, is
// rolled back, and the image reads as before.
#[test]
fn a_write_never_reuses_a_clean_segment_that_holds_live_blocks() {
    let dev = live_segment_marked_clean(&[]);
    let before = latest_manifest(&dev);
    let (synced, read) = sync_a_new_file(&dev);
    assert_refused_at_segment_1(synced, "the sync wrote into a live segment");
    // Rolled back: the mount still reads.
    assert_eq!(read, vec![0x77; 4]);
    assert_eq!(
        latest_manifest(&dev),
        before,
        "the refused write changed the image"
    );
}

// Issue 37 (a mutation survivor of `check_segment_unused`'s sanity test):
// the guard reads a clean segment's old logs only while each is a log: a
// summary whose log would run past its segment's end is not one (the
// kernel's `nilfs_segbuf` never writes one), so its block entries hold
// nothing back, as a never-written segment's garbage does not. Here the
// summary is resealed, so only the size test tells it apart.
#[test]
fn a_clean_segment_guard_stops_at_a_summary_that_overruns_its_segment() {
    // Segment 1 is blocks 64 to 127: a log of 65 blocks from 64 ends past
    // it.
    let dev = live_segment_marked_clean(&["ss@1:0.ss_nblocks = 65"]);
    let (synced, read) = sync_a_new_file(&dev);
    synced.expect("a summary that overruns its segment is not a log the guard reads");
    assert_eq!(read, vec![0x77; 4]);
}

// Issue 37 (a survivor of `check_segment_unused`: its step to the next
// log, `pseg += n`, as `*=`): the guard reads every log of a segment
// marked clean, not just the first. Segment 1 holds two logs here, the
// first made to name no block (`ss_nfinfo` 0, resealed) and the second
// holding `/b`'s live blocks; the write must still be refused.
#[test]
fn a_clean_segment_guard_reads_past_the_first_log() {
    // 50 KiB fill segment 0's rest and start segment 1; 5 KiB more make
    // segment 1's second log; 60 KiB more take the writer on to segment
    // 2, so that segment 1 is taken again from its head.
    let dev = synced_files(&[(b"a", 50 << 10), (b"b", 5 << 10), (b"c", 60 << 10)]);
    mark_segment_1_clean(&dev, &["ss@1:0.ss_nfinfo = 0"]);
    let (synced, _) = sync_a_new_file(&dev);
    assert_refused_at_segment_1(
        synced,
        "the sync wrote over the live blocks of segment 1's second log",
    );
}

// Issue 37 (the last survivor of the same sanity test: `nsum == 0 || nsum
// > n` as `&&`): a summary longer than its log is not a log either (the
// kernel's `nilfs_segbuf_extend_segsum` grows the log with its summary),
// and the guard reads none of the blocks it claims. `Summary::decode`
// would refuse it too, but only after they were read: here segment 1's
// first log claims a summary of 4 GiB, resealed, which runs past the
// device's end, so reading it would fail the write.
#[test]
fn a_clean_segment_guard_stops_at_a_summary_longer_than_its_log() {
    let dev = live_segment_marked_clean(&["ss@1:0.ss_sumbytes = 4294966272"]);
    let (synced, read) = sync_a_new_file(&dev);
    synced.expect("a summary longer than its log is not a log the guard reads");
    assert_eq!(read, vec![0x77; 4]);
}

// Issue 37 (a survivor of `block_in_use`: `dat_block_at` answering "not
// in use" for every DAT block): the DAT maps its own blocks by physical
// number, and no DAT entry says where they are, so the guard asks the
// DAT's B-tree. Segment 1 holds three logs here and is then cleaned for
// real (`nilfs_xreclaim_segment`): the dead virtual blocks are freed and
// the live ones moved, so no DAT entry points into it any more. One DAT
// block the cleaner moved was not changed since, and its old copy in
// segment 1 is byte for byte the new one. Pointing the DAT's level-1 node
// back at the old copy leaves an image that reads the same, with one live
// block in a segment the sufile calls clean; only the DAT arm of the
// guard can see it.
#[test]
fn a_clean_segment_guard_knows_the_dat_s_own_blocks() {
    // 50 KiB fill segment 0's rest; two 5 KiB files make two more logs
    // in segment 1; 60 KiB take the writer past it.
    let dev = synced_files(&[
        (b"a", 50 << 10),
        (b"b", 5 << 10),
        (b"c", 5 << 10),
        (b"d", 60 << 10),
    ]);
    {
        use nilfs::cleaner::{self, ReclaimParams};
        let nilfs = Nilfs::open(&dev).unwrap();
        let mut fs = Fs::mount(&nilfs, NOW + 5).unwrap();
        let params = ReclaimParams {
            protseq: fs.sustat().unwrap().prot_seq,
            protcno: cleaner::CNO_MAX,
        };
        let stat = cleaner::reclaim(&mut fs, &[nilfs::format::SegNum(1)], params).unwrap();
        assert_eq!(stat.cleaned_segs, 1, "{stat:?}");
        fs.unmount().unwrap();
    }
    // Cleaned for real: a write that takes segment 1 goes through.
    let clean = dev.duplicate();
    mark_segment_1_next(&clean);
    let old_seq = seq_of_segment_1(&clean);
    let (synced, read) = sync_a_new_file(&clean);
    synced.expect("a segment cleaned by the cleaner holds nothing in use");
    assert_eq!(read, vec![0x77; 4]);
    assert!(
        seq_of_segment_1(&clean) > old_seq,
        "the write did not reach segment 1: this test no longer tests the guard"
    );

    let node = dat_level_1_node(&dev);
    let (slot, old) = dat_blocks_in_segment_1(&dev)
        .into_iter()
        .find_map(|(key, old)| {
            let slot = node.iter().position(|&(k, _)| k == key)?;
            let bytes = |b| nilfs::device::read_block(&dev, 1024, b).unwrap();
            (bytes(node[slot].1) == bytes(old)).then_some((slot, old))
        })
        .expect("segment 1 keeps an old copy of some DAT block equal to its live one");
    mark_segment_1_next(&dev);
    {
        use nilfs::corrupt::{apply, Recipe};
        let r = format!("node[dat:1:0].ptr[{slot}] = {old}");
        apply(&dev, &Recipe::parse(&r).unwrap()).unwrap();
    }
    let before = latest_manifest(&dev);
    let (synced, read) = sync_a_new_file(&dev);
    let e = synced.expect_err("the sync wrote over a live DAT block in segment 1");
    assert!(
        e.to_string()
            .contains("segment 1 is marked clean, but its block")
            && e.to_string().contains("DAT block"),
        "{e}"
    );
    assert_eq!(read, vec![0x77; 4]);
    assert_eq!(
        latest_manifest(&dev),
        before,
        "the refused write changed the image"
    );
}

/// A fresh image (1 KiB blocks, 64-block segments) with `files` created
/// in the root in turn, each written with its own pattern and synced.
fn synced_files(files: &[(&[u8], usize)]) -> MemDevice {
    let dev = fresh(16 << 20, 1024, 64);
    {
        let nilfs = Nilfs::open(&dev).unwrap();
        let mut fs = Fs::mount(&nilfs, NOW).unwrap();
        for (seed, (name, len)) in (1..).zip(files) {
            let f = fs.create(ino::ROOT, name, 0o644).unwrap();
            fs.write(f, 0, &pattern(seed, *len)).unwrap();
            fs.sync().unwrap();
        }
        fs.unmount().unwrap();
    }
    dev
}

/// Segment 1 handed out by the next segment allocation.
fn mark_segment_1_next(dev: &MemDevice) {
    use nilfs::corrupt::{apply, Recipe};
    apply(dev, &Recipe::parse("suhdr.sh_last_alloc = 0").unwrap()).unwrap();
}

/// The sequence number of the log at segment 1's head.
fn seq_of_segment_1(dev: &MemDevice) -> u64 {
    let head = nilfs::device::read_block(dev, 1024, 64).unwrap();
    nilfs::format::segsum::SegmentSummary::decode(&head)
        .unwrap()
        .seq
        .0
}

/// The (key, pointer) pairs of the DAT's first level-1 B-tree node.
fn dat_level_1_node(dev: &MemDevice) -> Vec<(u64, u64)> {
    use nilfs::corrupt::{locate, read_site};
    let read = |f: &str| read_site(dev, &locate(dev, f).unwrap()).unwrap();
    let n = read("node[dat:1:0].bn_nchildren");
    (0..n)
        .map(|i| {
            (
                read(&format!("node[dat:1:0].key[{i}]")),
                read(&format!("node[dat:1:0].ptr[{i}]")),
            )
        })
        .collect()
}

/// The (key, block) of every DAT data block the logs of segment 1
/// (blocks 64 to 127) describe.
fn dat_blocks_in_segment_1(dev: &MemDevice) -> Vec<(u64, u64)> {
    use nilfs::device::{read_block, read_blocks_into};
    use nilfs::format::segsum::{Binfo, SegmentSummary, Summary};
    let mut out = Vec::new();
    let mut pseg = 64;
    while pseg < 128 {
        let Ok(h) = SegmentSummary::decode(&read_block(dev, 1024, pseg).unwrap()) else {
            break;
        };
        let mut sum = vec![0; h.nsumblk(1024) as usize * 1024];
        read_blocks_into(dev, 1024, pseg, &mut sum).unwrap();
        let Ok(summary) = Summary::decode(&sum, 1024) else {
            break;
        };
        for e in summary.block_entries(1024) {
            if let Binfo::DataDat { blkoff } = e.binfo {
                out.push((blkoff.0, pseg + e.index));
            }
        }
        pseg += u64::from(h.nblocks).max(1);
    }
    out
}
