//! Which logs roll forward after a crash: `nilfs_search_super_root`
//! starts the roll-forward range at the first log after the last super
//! root that begins a logical segment (`NILFS_SS_LOGBGN`); a log without
//! that flag starts none, and `nilfs_salvage_orphan_logs` then has
//! nothing to do; the roll-forward's own walk (`nilfs_do_roll_forward`)
//! starts a data-sync run only at LOGBGN as well. Written for a mutant of
//! `recovery::search_super_root`'s LOGBGN test: the recovered tree is the
//! same either way (the walk tests the flag again), so the range the
//! search reports (`ri_lsegs_start`, which `nilref check` and `inspect`
//! show) is what tells them apart (docs/TESTING.md, "Mutation testing").

use nilfs::corrupt::{apply, Recipe};
use nilfs::format::ino;
use nilfs::fs::Fs;
use nilfs::recovery::{load_super_block, search_super_root};
use nilfs::the_nilfs::Nilfs;
use nilfs_testkit::image::fresh;

/// A file synced with "old", then written "new" and fdatasync'd (a
/// data-only log after the last super root), then a crash; `recipe`
/// damages the data-only log. What the file reads after a mount, and
/// where the super root search says the roll-forward range starts and
/// ends.
fn after_crash(recipe: Option<&str>) -> (Vec<u8>, Option<u64>, Option<u64>) {
    let dev = fresh(16 << 20, 1024, 64);
    let f;
    {
        let nilfs = Nilfs::open(&dev).unwrap();
        let mut fs = Fs::mount(&nilfs, 1_800_000_000).unwrap();
        f = fs.create(ino::ROOT, b"f", 0o644).unwrap();
        fs.write(f, 0, b"old").unwrap();
        fs.sync().unwrap();
        fs.write(f, 0, b"new").unwrap();
        fs.fdatasync(f).unwrap();
        // The crash: no unmount.
    }
    if let Some(r) = recipe {
        apply(&dev, &Recipe::parse(r).unwrap()).unwrap();
    }
    let sb = load_super_block(&dev).unwrap();
    let scan = search_super_root(&dev, sb.sb(), false).unwrap();
    let start = scan.lsegs_start.map(|(pseg, _)| pseg.0);
    let end = scan.lsegs_end.map(|pseg| pseg.0);
    let nilfs = Nilfs::open(&dev).unwrap();
    let mut fs = Fs::mount(&nilfs, 1_800_000_100).unwrap();
    (fs.read(f, 0, 3).unwrap(), start, end)
}

#[test]
fn only_a_log_that_begins_a_logical_segment_rolls_forward() {
    let (data, start, end) = after_crash(None);
    assert_eq!(data, b"new", "the data-only log rolls forward");
    assert!(start.is_some(), "the range starts at the data-only log");
    assert_eq!(end, start, "and ends there");
    // The same log without LOGBGN (checksums resealed): no range starts,
    // nothing rolls forward, the file is as the last checkpoint has it.
    let (data, start, _) = after_crash(Some("ss@0:2.ss_flags &= 0xfffe"));
    assert_eq!(data, b"old");
    assert_eq!(start, None, "a log without LOGBGN starts no range");
    // Without LOGEND the run never ended: the range has no end.
    let (_, start, end) = after_crash(Some("ss@0:2.ss_flags &= 0xfffd"));
    assert!(start.is_some());
    assert_eq!(end, None, "a log without LOGEND ends no range");
}

/// The super root search walks every log written since the last super
/// root, however many: here 120 data-only logs (an fdatasync each) on a
/// 64-segment device. Its bound against a cyclic chain (each segment
/// entered at most once per hop, at most half a segment's blocks in
/// logs) must not cut a real chain short.
#[test]
fn a_long_run_of_data_only_logs_is_walked_to_its_end() {
    let dev = fresh(4 << 20, 1024, 64);
    let f;
    {
        let nilfs = Nilfs::open(&dev).unwrap();
        let mut fs = Fs::mount(&nilfs, 1_800_000_000).unwrap();
        f = fs.create(ino::ROOT, b"f", 0o644).unwrap();
        fs.write(f, 0, &[0; 8]).unwrap();
        fs.sync().unwrap();
        for i in 0..120u8 {
            fs.write(f, 0, &[i; 8]).unwrap();
            fs.fdatasync(f).unwrap();
        }
        // The crash: no unmount.
    }
    let sb = load_super_block(&dev).unwrap();
    let scan = search_super_root(&dev, sb.sb(), false).unwrap();
    assert!(scan.visits.len() > 120, "{} logs walked", scan.visits.len());
    let nilfs = Nilfs::open(&dev).unwrap();
    let mut fs = Fs::mount(&nilfs, 1_800_000_100).unwrap();
    assert_eq!(fs.read(f, 0, 8).unwrap(), [119; 8]);
}
