//! A read planned under the file system's lock and carried out later
//! (`Fs::plan_read`, `ReadPlan::read_into`; how `nilref mount` lets
//! readers copy at the same time). It reads the bytes as they stood when
//! it was planned, whatever is written and constructed since, as long as
//! no cleaning pass has freed a segment (`Fs::reclaims`). Once one has,
//! its disk blocks may hold anything: the known-bad half of the test
//! trusts the plan anyway and reads other bytes, which is why the mount
//! compares the count.

use nilfs::cleaner;
use nilfs::format::ino;
use nilfs::fs::{Fs, ReadPlan};
use nilfs::the_nilfs::Nilfs;
use nilfs_testkit::image::fresh;
use nilfs_testkit::pattern;

const T0: u64 = 1_800_000_000;

#[test]
fn a_plan_reads_its_moment_until_a_segment_is_freed() {
    let dev = fresh(16 << 20, 1024, 64);
    let nilfs = Nilfs::open(&dev).unwrap();
    let mut fs = Fs::mount(&nilfs, T0).unwrap();
    let mut t = T0;
    let mut tick = |fs: &mut Fs<'_>| {
        t += 1;
        fs.set_time(t);
    };
    let a = fs.create(ino::ROOT, b"a", 0o644).unwrap();
    let first = pattern(1, 8192 + 100);
    fs.write(a, 0, &first).unwrap();
    fs.sync().unwrap();
    // One block dirty in memory, the others on disk, a hole past them.
    fs.write(a, 4096, b"dirty").unwrap();
    fs.truncate(a, 12_000).unwrap();
    let mut then = first.clone();
    then[4096..4101].copy_from_slice(b"dirty");
    then.resize(12_000, 0);
    let plan = fs.plan_read(a, 100, 1 << 20).unwrap();
    assert_eq!(plan.len(), 12_000 - 100, "short at EOF");
    let read = |plan: &ReadPlan| {
        let mut b = vec![0xa5; plan.len()];
        assert_eq!(plan.read_into(&dev, &mut b).unwrap(), plan.len());
        b
    };
    assert_eq!(read(&plan), then[100..]);
    assert_eq!(fs.read(a, 100, 1 << 20).unwrap(), then[100..]);
    // Written over and constructed, again and again, with no cleaning:
    // the plan still reads its moment, and the count stays.
    let before = fs.reclaims();
    for k in 0..20 {
        tick(&mut fs);
        fs.write(a, 0, &pattern(100 + k, 12_000)).unwrap();
        fs.sync().unwrap();
    }
    assert_eq!(fs.reclaims(), before);
    assert_eq!(read(&plan), then[100..]);
    assert_ne!(fs.read(a, 100, 1 << 20).unwrap(), then[100..]);
    // Now the cleaner frees segments and the writer reuses them: the
    // count moves, and the plan, trusted anyway, comes to read other
    // bytes.
    let b = fs.create(ino::ROOT, b"b", 0o644).unwrap();
    let mut stale = false;
    for k in 0..2000u64 {
        tick(&mut fs);
        fs.write(b, (k % 8) << 16, &pattern(1000 + k, 64 << 10))
            .unwrap();
        fs.sync().unwrap();
        if k % 8 == 7 {
            cleaner::clean(&mut fs, 0, 16).unwrap();
        }
        if read(&plan) != then[100..] {
            stale = true;
            break;
        }
    }
    assert!(stale, "the segments the plan read from were never reused");
    assert!(fs.reclaims() > before);
    fs.unmount().unwrap();
}

/// Whole blocks that follow each other on disk are read in one request;
/// a block rewritten since lies elsewhere, and a file so laid out reads
/// back byte for byte, from any offset.
#[test]
fn a_plan_over_blocks_moved_by_a_rewrite_reads_them_in_order() {
    let dev = fresh(16 << 20, 1024, 64);
    let nilfs = Nilfs::open(&dev).unwrap();
    let mut fs = Fs::mount(&nilfs, T0).unwrap();
    let c = fs.create(ino::ROOT, b"c", 0o644).unwrap();
    let mut want = pattern(7, 16 << 10);
    fs.write(c, 0, &want).unwrap();
    fs.sync().unwrap();
    for (k, at) in [(1u64, 1024usize), (2, 5000), (3, 9 << 10)] {
        let bytes = pattern(70 + k, 700);
        want[at..at + 700].copy_from_slice(&bytes);
        fs.write(c, at as u64, &bytes).unwrap();
        fs.sync().unwrap();
    }
    for off in [0u64, 1, 1023, 1024, 4999, 10_000] {
        let plan = fs.plan_read(c, off, 1 << 20).unwrap();
        let mut got = vec![0; plan.len()];
        plan.read_into(&dev, &mut got).unwrap();
        assert_eq!(got, want[off as usize..], "from {off}");
    }
    fs.unmount().unwrap();
}

/// What `Fs::plan_read_noting` says of the clean blocks is enough to plan
/// a later read of them with no file system at hand (`ReadPlan::of_clean`,
/// how `nilref mount` reads clean data without its lock): the same bytes
/// as `Fs::read`, then still the bytes of that moment after the file is
/// rewritten and constructed, as long as `Fs::reclaims_watch` stands. A
/// dirty block is never noted, so a range that holds one is not planned.
#[test]
fn the_clean_blocks_noted_plan_later_reads_without_the_file_system() {
    let dev = fresh(16 << 20, 1024, 64);
    let nilfs = Nilfs::open(&dev).unwrap();
    let mut fs = Fs::mount(&nilfs, T0).unwrap();
    let bs = 1024u32;
    let a = fs.create(ino::ROOT, b"a", 0o644).unwrap();
    let first = pattern(3, 6000);
    fs.write(a, 0, &first).unwrap();
    fs.write(a, 9000, b"past a hole").unwrap();
    fs.sync().unwrap();
    fs.write(a, 2048, b"dirty").unwrap();
    let mut now = fs.read(a, 0, 1 << 20).unwrap();
    let mut noted = std::collections::HashMap::new();
    let plan = fs
        .plan_read_noting(a, 0, 1 << 20, |k, p| {
            assert!(noted.insert(k, p).is_none(), "block {k} noted twice");
        })
        .unwrap();
    assert_eq!(plan.file_size(), 9011);
    assert!(!noted.contains_key(&2), "the dirty block was noted");
    assert_eq!(noted.len(), 8, "blocks 0-1 and 3-8 are clean");
    assert_eq!(noted[&7], None, "block 7 is a hole");
    assert!(noted[&0].is_some() && noted[&8].is_some());
    let place = |k: u64| noted.get(&k).copied();
    let of_clean = |off: u64, len: u64| ReadPlan::of_clean(bs, 9011, off, len, place);
    assert!(
        of_clean(0, 1 << 20).is_none(),
        "planned over the dirty block"
    );
    let read = |plan: &ReadPlan| {
        let mut b = vec![0xa5; plan.len()];
        assert_eq!(plan.read_into(&dev, &mut b).unwrap(), plan.len());
        b
    };
    let later = of_clean(3 * 1024 + 10, 1 << 20).unwrap();
    assert_eq!(later.len(), 9011 - 3 * 1024 - 10, "short at EOF");
    assert_eq!(read(&later), now[3 * 1024 + 10..]);
    assert_eq!(read(&of_clean(100, 1900).unwrap()), now[100..2000]);
    // Rewritten and constructed, no cleaning: the moment's bytes stay.
    let watch = fs.reclaims_watch();
    for k in 0..10 {
        fs.set_time(T0 + 1 + k);
        fs.write(a, 0, &pattern(50 + k, 9011)).unwrap();
        fs.sync().unwrap();
    }
    assert_eq!(watch.now(), 0);
    assert_eq!(read(&later), now[3 * 1024 + 10..]);
    now = fs.read(a, 0, 1 << 20).unwrap();
    assert_ne!(read(&later), now[3 * 1024 + 10..]);
    // A cleaning pass that frees segments moves the watch as it moves
    // the count.
    let mut k = 0;
    while watch.now() == 0 && k < 64 {
        fs.set_time(T0 + 100 + k);
        fs.write(a, 0, &pattern(500 + k, 9011)).unwrap();
        fs.sync().unwrap();
        cleaner::clean(&mut fs, 0, 4).unwrap();
        k += 1;
    }
    assert!(watch.now() > 0, "no cleaning pass freed a segment");
    assert_eq!(watch.now(), fs.reclaims());
    fs.unmount().unwrap();
}

/// A directory is not read as a file: planning a read of one is EISDIR
/// (`generic_read_dir`), as `Fs::read` is. Postmortem (mutants of the
/// noting plan: its `mode & S_IFMT` as `|` or `^` survived the tests of
/// this file).
#[test]
fn a_plan_of_a_directory_is_eisdir() {
    let dev = fresh(16 << 20, 1024, 64);
    let nilfs = Nilfs::open(&dev).unwrap();
    let mut fs = Fs::mount(&nilfs, T0).unwrap();
    let d = fs.mkdir(ino::ROOT, b"d", 0o755).unwrap();
    let f = fs.create(ino::ROOT, b"f", 0o644).unwrap();
    let eisdir = |e: nilfs::Error| {
        matches!(
            e,
            nilfs::Error::Errno {
                errno: nilfs::Errno::EISDIR,
                ..
            }
        )
    };
    for i in [ino::ROOT, d] {
        assert!(eisdir(fs.plan_read(i, 0, 100).unwrap_err()));
        assert!(eisdir(
            fs.plan_read_noting(i, 0, 100, |_, _| {}).unwrap_err()
        ));
    }
    assert_eq!(fs.plan_read(f, 0, 100).unwrap().len(), 0);
    fs.unmount().unwrap();
}
