//! The kernel mounts what our mount leaves after device faults (issue 13,
//! "the image afterwards mounts here and in the kernel"). Peer tier
//! (`NILFS_PEERS=1`).
//!
//! Each image comes from one fault in the middle of a workload on a fresh
//! 1 KiB image with 64-block segments, after which the mount carries on
//! (the operation that met the fault fails, is retried or not, later
//! operations run, and the unmount succeeds) or the device dies for good:
//! a write refused, a write torn, a cache flush failing, a super block
//! write refused, a cleaning step refused half way, a read failing in the
//! middle of roll-forward, and a sync cut short by the device dying after
//! an earlier fault. We check each image clean (or, for the last, recover
//! it); then Linux 6.1 mounts all of them read-write in one boot, and its
//! manifest of the latest checkpoint and its lscp must equal ours.

mod peer_common;

use nilfs_testkit::image::fresh_with;
use peer_common::prelude::*;

use nilfs::device::{BlockDevice, CutDevice};
use nilfs::format::SB_OFFSET_BYTES;
use nilfs::Result;

const BS: u64 = 1024;
const BPS: u64 = 64;
const DEV_BYTES: u64 = 32 << 20;
const NOW: u64 = 1_800_000_000;

const ACCEPTED_DMESG: &[&str] = &[
    "nilfs version 2 loaded",
    "mounting unchecked fs",
    "recovery complete",
    "segctord starting",
    "salvaged",
];

/// The workloads' starting image (mkfs seed 11: its UUID and CRC seed).
fn base_image() -> MemDevice {
    fresh_with(DEV_BYTES, &MkfsOptions::from_seed(11).geometry(BS, BPS))
}

/// The first part of the workload: files across the direct map and into
/// B-trees, synced, a snapshot, then changes left dirty.
fn prepare(fs: &mut Fs<'_>) -> Result<Vec<nilfs::format::Ino>> {
    let d = fs.mkdir(ino::ROOT, b"d", 0o755)?;
    let mut files = Vec::new();
    for n in 0..5u64 {
        let f = fs.create(d, format!("f{n}").as_bytes(), 0o644)?;
        fs.write(f, 0, &pattern(n, 3000 + 35_000 * n as usize))?;
        files.push(f);
    }
    fs.sync()?;
    fs.mkcp(true)?;
    fs.set_time(NOW + 100);
    fs.write(files[1], 10_000, &pattern(20, 9000))?;
    fs.write(files[4], 100_000, &pattern(21, 40_000))?;
    fs.unlink(d, b"f2")?;
    let n = fs.create(ino::ROOT, b"new", 0o600)?;
    fs.write(n, 0, &pattern(22, 12_345))?;
    Ok(files)
}

/// What runs after the faulty operation, on a device that works again.
fn carry_on(fs: &mut Fs<'_>) -> Result<()> {
    fs.set_time(NOW + 200);
    let l = fs.create(ino::ROOT, b"later", 0o644)?;
    fs.write(l, 0, b"written after the fault\n")?;
    fs.sync()?;
    Ok(())
}

/// Writes the workload makes before the operation under test, and during.
fn count_writes() -> (u64, u64) {
    let cut = CutDevice::new(base_image(), BS, u64::MAX);
    let nilfs = Nilfs::open(&cut).unwrap();
    let mut fs = Fs::mount(&nilfs, NOW).unwrap();
    prepare(&mut fs).unwrap();
    let before = cut.written();
    fs.sync().unwrap();
    (before, cut.written() - before)
}

/// The sync of the dirty changes meets `cut`'s fault, the device comes
/// back, the sync is retried and the mount carries on and unmounts.
fn sync_fault_then_carry_on(cut: &CutDevice) {
    let nilfs = Nilfs::open(cut).unwrap();
    let mut fs = Fs::mount(&nilfs, NOW).unwrap();
    prepare(&mut fs).unwrap();
    assert!(fs.sync().is_err(), "the fault did not reach the sync");
    cut.restore();
    fs.sync().unwrap();
    carry_on(&mut fs).unwrap();
    fs.unmount().unwrap();
}

fn is_super_block(off: u64) -> bool {
    off == SB_OFFSET_BYTES || off >= DEV_BYTES - 8192
}

fn latest(dev: &dyn BlockDevice) -> String {
    let nilfs = Nilfs::open(dev).unwrap();
    manifest(&CheckpointView::open(&nilfs, None).unwrap()).unwrap()
}

#[test]
fn the_kernel_mounts_what_faults_leave() {
    let Some(()) = peers::require("the_kernel_mounts_what_faults_leave", GUEST) else {
        return;
    };
    let (before, during) = count_writes();
    let mut cases: Vec<(String, MemDevice)> = Vec::new();
    // A refused and a torn write a third of the way into the sync.
    for torn in [false, true] {
        let k = before + during / 3;
        let cut = if torn {
            CutDevice::new(base_image(), BS, k + 1).tearing()
        } else {
            CutDevice::new(base_image(), BS, k)
        };
        sync_fault_then_carry_on(&cut);
        cases.push((format!("write {k} refused (torn: {torn})"), cut.inner));
    }
    // The sync's cache flush failing.
    {
        let probe = CutDevice::new(base_image(), BS, u64::MAX);
        let flushes = {
            let nilfs = Nilfs::open(&probe).unwrap();
            let mut fs = Fs::mount(&nilfs, NOW).unwrap();
            prepare(&mut fs).unwrap();
            probe.flushes()
        };
        let cut = CutDevice::new(base_image(), BS, u64::MAX).failing_flush(flushes);
        sync_fault_then_carry_on(&cut);
        cases.push(("the sync's first flush failing".into(), cut.inner));
    }
    // The sync's super block write refused (its logs are all on disk).
    {
        let probe = CutDevice::new(base_image(), BS, u64::MAX);
        {
            let nilfs = Nilfs::open(&probe).unwrap();
            let mut fs = Fs::mount(&nilfs, NOW).unwrap();
            prepare(&mut fs).unwrap();
            fs.sync().unwrap();
        }
        let offsets = probe.offsets();
        let k = (before..before + during)
            .find(|&i| is_super_block(offsets[i as usize]))
            .expect("the sync writes a super block");
        let cut = CutDevice::new(base_image(), BS, k);
        {
            let nilfs = Nilfs::open(&cut).unwrap();
            let mut fs = Fs::mount(&nilfs, NOW).unwrap();
            prepare(&mut fs).unwrap();
            let _ = fs.sync();
            cut.restore();
            carry_on(&mut fs).unwrap();
            fs.unmount().unwrap();
        }
        cases.push((format!("super block write {k} refused"), cut.inner));
    }
    // A cleaning step refused half way, then the cleaner again.
    {
        let setup = |fs: &mut Fs<'_>| {
            let files = prepare(fs).unwrap();
            fs.sync().unwrap();
            for &f in &files {
                if fs.stat(f).is_ok() {
                    fs.write(f, 0, &pattern(40, 2000)).unwrap();
                }
            }
            fs.sync().unwrap();
            fs.set_time(NOW + 3600);
            carry_on(fs).unwrap();
        };
        let probe = CutDevice::new(base_image(), BS, u64::MAX);
        let (b, d) = {
            let nilfs = Nilfs::open(&probe).unwrap();
            let mut fs = Fs::mount(&nilfs, NOW).unwrap();
            setup(&mut fs);
            let b = probe.written();
            nilfs::cleaner::clean(&mut fs, 0, 2).unwrap();
            (b, probe.written() - b)
        };
        assert!(d > 2, "the cleaner wrote {d} blocks");
        let cut = CutDevice::new(base_image(), BS, b + d / 2);
        {
            let nilfs = Nilfs::open(&cut).unwrap();
            let mut fs = Fs::mount(&nilfs, NOW).unwrap();
            setup(&mut fs);
            assert!(nilfs::cleaner::clean(&mut fs, 0, 2).is_err());
            cut.restore();
            nilfs::cleaner::clean(&mut fs, 0, 2).unwrap();
            fs.unmount().unwrap();
        }
        cases.push((
            format!("cleaning refused at write {}", b + d / 2),
            cut.inner,
        ));
    }
    // Roll-forward meeting a read error, then a mount that recovers.
    {
        let dev = base_image();
        {
            let nilfs = Nilfs::open(&dev).unwrap();
            let mut fs = Fs::mount(&nilfs, NOW).unwrap();
            let files = prepare(&mut fs).unwrap();
            fs.sync().unwrap();
            fs.write(files[3], 500, &pattern(50, 6000)).unwrap();
            fs.fdatasync(files[3]).unwrap();
            // Power off: the data-sync log waits for roll-forward.
        }
        let reads = {
            let probe = CutDevice::new(dev.duplicate(), BS, u64::MAX);
            let nilfs = Nilfs::open(&probe).unwrap();
            let fs = Fs::mount(&nilfs, NOW + 50).unwrap();
            let r = probe.reads();
            drop(fs);
            r
        };
        let cut = CutDevice::new(dev, BS, u64::MAX).failing_read(reads - 3);
        let first = Nilfs::open(&cut).and_then(|n| Fs::mount(&n, NOW + 50).map(|_| ()));
        assert!(
            first.is_err(),
            "the read error did not reach the roll-forward"
        );
        {
            let nilfs = Nilfs::open(&cut.inner).unwrap();
            let fs = Fs::mount(&nilfs, NOW + 60).unwrap();
            fs.unmount().unwrap();
        }
        cases.push(("roll-forward meeting a read error".into(), cut.inner));
    }
    // After a refused write, the retried sync is cut short for good: a
    // crash image whose logs include the failed attempt's.
    {
        let k = before + during / 2;
        let cut = CutDevice::new(base_image(), BS, k);
        {
            let nilfs = Nilfs::open(&cut).unwrap();
            let mut fs = Fs::mount(&nilfs, NOW).unwrap();
            prepare(&mut fs).unwrap();
            assert!(fs.sync().is_err());
            // Power is back for a third of the sync, then gone for good.
            cut.cut_after(during / 3);
            assert!(fs.sync().is_err());
            // Dropped without unmounting: a crash.
        }
        cases.push((format!("write {k} refused, then the retry ran"), cut.inner));
    }
    assert!(cases.len() <= DEVS.len());

    // Ours: every image checks clean, and (recovering if needed) reads.
    let dir = Scratch::new("kernel-faults");
    let mut images = Vec::new();
    // (manifest, lscp if the image needs no recovery: a recovery's
    // checkpoint carries the guest's clock)
    let mut ours: Vec<(String, Option<String>)> = Vec::new();
    for (i, (what, dev)) in cases.iter().enumerate() {
        {
            let nilfs = Nilfs::open(dev).unwrap_or_else(|e| panic!("{what}: open: {e}"));
            if nilfs.sb.state & nilfs::format::superblock::STATE_VALID_FS == 0 {
                // Our recovery on a copy; the kernel gets the image as is.
                let copy = dev.duplicate();
                let n = Nilfs::open(&copy).unwrap();
                Fs::mount(&n, NOW + 500).unwrap().unmount().unwrap();
                nilfs_conformance::assert_checks_clean(&copy, what);
                ours.push((latest(&copy), None));
            } else {
                nilfs_conformance::assert_checks_clean(dev, what);
                let lscp = tools::lscp(dev, &LscpOptions::default()).unwrap();
                ours.push((latest(dev), Some(lscp)));
            }
        }
        export_to(&dir, &format!("f{i}.img"), dev, &mut images);
    }
    let script = script_per_image("set -e\n", images.len(), |d| {
        format!("mount -t nilfs2 /dev/{d} /mnt\necho @@MANIFEST {d}; manifest /mnt\necho @@LSCP {d}; lscp\numount /mnt\n")
    });
    let secs = sections(&kernel_run(&images, &script, &dir, "faults.sh"));
    for (i, (what, _)) in cases.iter().enumerate() {
        let d = DEVS[i];
        assert_eq!(
            secs[&format!("MANIFEST {d}")],
            ours[i].0,
            "{what}: manifest"
        );
        if let Some(lscp) = &ours[i].1 {
            assert_eq!(&secs[&format!("LSCP {d}")], lscp, "{what}: lscp");
        }
    }
    assert_dmesg_clean(&secs["DMESG"], ACCEPTED_DMESG);
}
