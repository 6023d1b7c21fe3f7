//! Which logs roll forward after a crash: `nilfs_search_super_root`
//! starts the roll-forward range at the first log after the last super
//! root that begins a logical segment (`NILFS_SS_LOGBGN`); a log without
//! that flag starts none, and `nilfs_salvage_orphan_logs` then has
//! nothing to do; the roll-forward's own walk (`nilfs_do_roll_forward`)
//! starts a data-sync run only at LOGBGN as well. Written for a mutant of
//! `recovery::search_super_root`'s LOGBGN test, which it does not kill:
//! the walk's test gives the same tree (docs/TESTING.md, "Mutation
//! testing").

use nilfs::corrupt::{apply, Recipe};
use nilfs::format::ino;
use nilfs::fs::Fs;
use nilfs::the_nilfs::Nilfs;
use nilfs_testkit::image::fresh;

/// A file synced with "old", then written "new" and fdatasync'd (a
/// data-only log after the last super root), then a crash; `recipe`
/// damages the data-only log. What the file reads after a mount.
fn after_crash(recipe: Option<&str>) -> Vec<u8> {
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
    let nilfs = Nilfs::open(&dev).unwrap();
    let mut fs = Fs::mount(&nilfs, 1_800_000_100).unwrap();
    fs.read(f, 0, 3).unwrap()
}

#[test]
fn only_a_log_that_begins_a_logical_segment_rolls_forward() {
    assert_eq!(after_crash(None), b"new", "the data-only log rolls forward");
    // The same log without LOGBGN (checksums resealed): nothing rolls
    // forward, the file is as the last checkpoint has it.
    assert_eq!(after_crash(Some("ss@0:2.ss_flags &= 0xfffe")), b"old");
}
