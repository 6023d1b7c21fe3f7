//! The cached read path (`posix::cached`) on the kernel fixture: every
//! regular file of the latest checkpoint and of snapshot 4 reads the same
//! through `CachedFs::read_file` with B-tree read-ahead on and off as through
//! the uncached `CheckpointView::read_all`; with read-ahead on, the device
//! log shows B-tree read-ahead bios, with it off none. The same through
//! the 2.6.35 request queue and the disk's read cache, and seed 000's gain
//! as a direction on the fixture.

use nilfs::bmap::readahead::ReadAhead;
use nilfs::device::{BlockDevice, SimConfig, SimDevice};
use nilfs::format::{Cno, Ino};
use nilfs::posix::cached::{CachedFs, MountOptions, ReadParams};
use nilfs::posix::{is_reg, CheckpointView};
use nilfs::the_nilfs::Nilfs;
use nilfs_testkit::image::fixture;

fn sim_device(config: SimConfig) -> SimDevice {
    let mem = fixture();
    SimDevice::new(Box::new(mem), config).unwrap()
}

/// Regular files of a checkpoint: (path, inode number).
fn regular_files(view: &CheckpointView<'_, '_>) -> Vec<(String, Ino)> {
    let mut out = Vec::new();
    view.walk_tree(&mut |path, ino, inode| {
        if is_reg(inode) {
            out.push((String::from_utf8_lossy(path).into_owned(), ino));
        }
        Ok(())
    })
    .unwrap();
    out
}

/// Read-ahead bios in the device log since `from`, split into (B-tree node
/// read-ahead, DAT read-ahead) using the read path's own DAT count.
fn rahead_bios(dev: &SimDevice, from: usize, fs: &CachedFs, dat_ra_before: u64) -> (u64, u64) {
    let all = dev.submissions()[from..]
        .iter()
        .filter(|s| s.rahead)
        .count() as u64;
    let dat = fs.stats().dat_ra_bios - dat_ra_before;
    assert!(dat <= all, "the DAT's read-ahead bios are in the log");
    (all - dat, dat)
}

#[test]
fn cached_read_matches_uncached_reads_with_readahead_on_and_off() {
    let dev = sim_device(SimConfig::instant());
    let nilfs = Nilfs::open(&dev).unwrap();
    let snapshots: Vec<Cno> = nilfs.snapshots().unwrap().iter().map(|c| c.cno).collect();
    assert!(
        snapshots.contains(&Cno(4)),
        "fixture has snapshot 4: {snapshots:?}"
    );
    let mut btree_ra = [0u64; 2];
    let mut files_read = 0;
    for (m, ra) in [ReadAhead::On, ReadAhead::Off].into_iter().enumerate() {
        let fs = CachedFs::new(dev.clone(), &nilfs, MountOptions { readahead: ra }).unwrap();
        for cno in [None, Some(Cno(4))] {
            let view = CheckpointView::open(&nilfs, cno).unwrap();
            let files = regular_files(&view);
            assert!(!files.is_empty());
            for (path, ino) in files {
                let want = view.read_all(&view.inode(ino).unwrap()).unwrap();
                let from = dev.submissions().len();
                let dat_before = fs.stats().dat_ra_bios;
                let got = fs.read_file(&view, ino).unwrap();
                assert!(
                    got == want,
                    "{path} (ino {ino}) at {cno:?} with read-ahead {ra:?}: contents differ"
                );
                btree_ra[m] += rahead_bios(&dev, from, &fs, dat_before).0;
                files_read += 1;
            }
        }
    }
    assert!(files_read > 20, "{files_read} files");
    assert!(
        btree_ra[0] > 0,
        "read-ahead on: B-tree read-ahead bios in the log"
    );
    assert_eq!(btree_ra[1], 0, "read-ahead off: no B-tree read-ahead bio");
}

#[test]
fn readahead_off_without_mdt_readahead_submits_no_readahead_bio() {
    let dev = sim_device(SimConfig::instant());
    let nilfs = Nilfs::open(&dev).unwrap();
    let view = CheckpointView::open(&nilfs, None).unwrap();
    let params = ReadParams {
        mdt_ra_blocks: 0,
        ..ReadParams::default()
    };
    let fs = CachedFs::with_params(
        dev.clone(),
        &nilfs,
        MountOptions {
            readahead: ReadAhead::Off,
        },
        params,
    )
    .unwrap();
    let from = dev.submissions().len();
    for (_, ino) in regular_files(&view) {
        fs.read_file(&view, ino).unwrap();
    }
    let log = dev.submissions();
    assert!(log.len() > from);
    assert!(
        log[from..].iter().all(|s| !s.rahead),
        "no read-ahead bio at all"
    );
    assert_eq!(fs.stats().dat_ra_bios, 0);
}

#[test]
fn cached_read_on_the_simulated_disk_takes_simulated_time_and_the_same_data_bios() {
    // The biggest file of the latest checkpoint, on the 2010 disk model.
    let mut results = Vec::new();
    for ra in [ReadAhead::Off, ReadAhead::On] {
        let dev = sim_device(SimConfig::hdd_2010());
        let nilfs = Nilfs::open(&dev).unwrap();
        let view = CheckpointView::open(&nilfs, None).unwrap();
        let (_, ino) = regular_files(&view)
            .into_iter()
            .max_by_key(|(_, ino)| view.inode(*ino).unwrap().size)
            .unwrap();
        let want = view.read_all(&view.inode(ino).unwrap()).unwrap();
        let fs = CachedFs::new(dev.clone(), &nilfs, MountOptions { readahead: ra }).unwrap();
        let (t0, b0) = (dev.now_ns(), dev.stats().bios);
        let got = fs.read_file(&view, ino).unwrap();
        assert!(got == want);
        let (t, bios) = (dev.now_ns() - t0, dev.stats().bios - b0);
        assert!(t > 0, "reading takes simulated time");
        results.push((t, bios, fs.stats()));
    }
    let (off, on) = (&results[0], &results[1]);
    // Same data bios either way: read-ahead changes node reads only.
    assert_eq!(off.2.data_bios, on.2.data_bios);
    assert_eq!(off.2.data_blocks, on.2.data_blocks);
}

/// The biggest regular file of the latest checkpoint: (path, size).
fn biggest_file() -> (String, u64) {
    let dev = sim_device(SimConfig::instant());
    let nilfs = Nilfs::open(&dev).unwrap();
    let view = CheckpointView::open(&nilfs, None).unwrap();
    regular_files(&view)
        .into_iter()
        .map(|(p, ino)| (p, view.inode(ino).unwrap().size))
        .max_by_key(|f| f.1)
        .unwrap()
}

#[test]
fn cached_read_through_the_2635_queue_and_drive_cache_returns_the_same_data() {
    let cases = [
        (SimConfig::hdd_2010_linux(), ReadAhead::On),
        (SimConfig::ssd_2010_linux(), ReadAhead::Off),
    ];
    for (config, ra) in cases {
        {
            let dev = sim_device(config.clone());
            let nilfs = Nilfs::open(&dev).unwrap();
            let view = CheckpointView::open(&nilfs, None).unwrap();
            let fs = CachedFs::new(dev.clone(), &nilfs, MountOptions { readahead: ra }).unwrap();
            for (path, ino) in regular_files(&view) {
                let want = view.read_all(&view.inode(ino).unwrap()).unwrap();
                let got = fs.read_file(&view, ino).unwrap();
                assert!(got == want, "{path} differs through the request queue");
            }
            dev.run_until_idle();
            assert_eq!(dev.in_flight(), 0);
            let q = dev.queue_stats().unwrap();
            assert!(
                q.requests <= dev.stats().bios,
                "merging never adds commands"
            );
        }
    }
}

/// Seed 000's mechanism on the kernel fixture, as directions: sibling
/// read-ahead makes the read faster on the 2010 disk whose read-ahead stops
/// for the next command, and gains less on a drive that reads 64 KiB ahead
/// before serving the next command (its cache then holds the siblings
/// anyway). Deterministic: the same run twice is the same run.
#[test]
fn sibling_readahead_gains_less_when_the_drive_cache_hides_node_reads() {
    use nilfs::device::sim::{DiskCache, Prefetch};
    use nilfs::sim::readahead::dd;
    let (path, size) = biggest_file();
    assert!(size > 1 << 20, "a file with several level-1 nodes");
    let image = fixture();
    let open = || -> nilfs::Result<Box<dyn BlockDevice>> { Ok(Box::new(image.duplicate())) };
    let gain = |config: &SimConfig| {
        let run = |ra| dd(&open, config, path.as_bytes(), ra, ReadParams::default()).unwrap();
        let (off, on) = (run(ReadAhead::Off), run(ReadAhead::On));
        assert_eq!(off.bytes, size);
        assert_eq!(on, run(ReadAhead::On), "deterministic");
        assert!(on.node_ra_bios > 0, "siblings were read ahead");
        off.ns as f64 / on.ns as f64
    };
    let aborting = gain(&SimConfig::hdd_2010_linux());
    let hiding = gain(&SimConfig {
        disk_cache: Some(DiskCache {
            prefetch: Prefetch::Minimum(64 * 1024),
            ..DiskCache::scsi_2010()
        }),
        ..SimConfig::hdd_2010_linux()
    });
    assert!(
        aborting > 1.0,
        "read-ahead pays on the 2010 disk: x{aborting}"
    );
    assert!(
        hiding < aborting,
        "x{hiding} hiding vs x{aborting} aborting"
    );
}
