//! The kernel recovers our cut images the way we do. Peer tier
//! (`NILFS_PEERS=1`).
//!
//! A workload of 26 operations and 5 constructions (the last from
//! unmount) runs on a fresh 1 KiB image with 64-block segments, so its
//! 300 KB file makes one construction span several segments. A recording
//! run finds where each construction's block writes lie; from those
//! boundaries 8 cut points are chosen (see [`cut_points`]): the device
//! stops after the k-th block write, and for some the k-th write is torn
//! (only its first 512-byte sector lands). For each cut image our read path
//! must recover the tree of the last completed sync (either side of a torn
//! write); then Linux 6.1 mounts all 8 images read-write in one boot, runs
//! its own recovery, and its manifest must equal ours. After the kernel
//! unmounts, our reader must read the kernel's result identically.

mod peer_common;

use nilfs_testkit::image::fresh_with;
use peer_common::prelude::*;

use nilfs::device::{BlockDevice, CutDevice, FileDevice};
use nilfs::format::{ino, Cno, SB_OFFSET_BYTES};
use nilfs::Result;

const BS: u64 = 1024;
const BPS: u64 = 64;
const DEV_BYTES: u64 = 64 << 20;

/// Kernel messages a read-write mount of a cut image may print, and why
/// each is expected rather than an error:
const ACCEPTED_DMESG: &[&str] = &[
    // The module loading.
    "nilfs version 2 loaded",
    // The cut left VALID_FS clear (our mount cleared it, as
    // nilfs_setup_super does): the kernel notes it and recovers.
    "mounting unchecked fs",
    // nilfs_mount_load_nilfs finished its recovery (discarding the logs
    // after the last super root; ours have no SYNDT logs to roll forward).
    "recovery complete",
    // The log writer thread starting at every read-write mount.
    "segctord starting",
];

/// The crash device: a fresh image that accepts `budget` block writes,
/// the last one torn with `tear` ([`CutDevice`], which records where every
/// write went).
fn cut_device(budget: u64, tear: bool) -> CutDevice {
    let inner = fresh_with(DEV_BYTES, &MkfsOptions::from_seed(7).geometry(BS, BPS));
    let dev = CutDevice::new(inner, BS, budget);
    if tear {
        dev.tearing()
    } else {
        dev
    }
}

/// What a run of the workload did: the number of block writes done when
/// the mount finished and when each sync returned, and the checkpoint each
/// sync made.
#[derive(Debug, Default)]
struct Run {
    mounted: u64,
    synced: Vec<(u64, Cno)>,
}

/// The workload: 26 operations, 4 syncs and unmount's construction (the
/// snapshot mode change). Stops at the first device error.
fn workload(dev: &CutDevice) -> Run {
    let mut run = Run::default();
    let _ = (|| -> Result<()> {
        let nilfs = Nilfs::open(dev)?;
        let mut fs = Fs::mount(&nilfs, 1_800_000_000)?;
        run.mounted = dev.written();
        let sync = |fs: &mut Fs, run: &mut Run| -> Result<()> {
            let cno = fs.sync()?.expect("every sync has changes");
            run.synced.push((dev.written(), cno));
            Ok(())
        };
        let a = fs.create(ino::ROOT, b"a", 0o644)?;
        fs.write(a, 0, &pattern(1, 12_000))?;
        let d = fs.mkdir(ino::ROOT, b"d", 0o755)?;
        let b = fs.create(d, b"b", 0o644)?;
        fs.write(b, 0, b"first")?;
        sync(&mut fs, &mut run)?;
        fs.set_time(1_800_000_010);
        for n in 0..6 {
            let f = fs.create(d, format!("n{n}").as_bytes(), 0o644)?;
            fs.write(f, 0, &pattern(10 + n, 700))?;
        }
        fs.write(a, 5000, b"overwritten in the middle")?;
        sync(&mut fs, &mut run)?;
        fs.set_time(1_800_000_020);
        fs.rename(d, b"b", ino::ROOT, b"b")?;
        fs.unlink(d, b"n3")?;
        fs.truncate(a, 3000)?;
        fs.symlink(ino::ROOT, b"l", b"d/n1")?;
        sync(&mut fs, &mut run)?;
        fs.set_time(1_800_000_030);
        let big = fs.create(ino::ROOT, b"big", 0o644)?;
        fs.write(big, 0, &pattern(99, 300_000))?;
        fs.link(a, d, b"a2")?;
        fs.rmdir(ino::ROOT, b"d").expect_err("d is not empty");
        sync(&mut fs, &mut run)?;
        fs.mkcp(true)?; // nothing new to write; the mode change waits
        fs.unmount()?;
        Ok(())
    })();
    run
}

fn is_super_block(off: u64) -> bool {
    off == SB_OFFSET_BYTES || off >= DEV_BYTES - 8192
}

/// A construction's block writes: `first..end` (0-based write indices).
#[derive(Clone, Copy, Debug)]
struct Span {
    first: u64,
    end: u64,
}

/// The 8 cut points `(budget, tear, what)`, chosen from the recording
/// run's boundaries: every one lands in a different phase of the run.
fn cut_points(run: &Run, offsets: &[u64]) -> Vec<(u64, bool, String)> {
    let total = offsets.len() as u64;
    let mut starts = vec![run.mounted];
    starts.extend(run.synced.iter().map(|s| s.0));
    let span = |n: usize| Span {
        first: starts[n - 1],
        end: starts[n],
    };
    let seg = |i: u64| offsets[i as usize] / BS / BPS;
    // The super root: the last log block of a construction.
    let super_root = |s: Span| {
        (s.first..s.end)
            .rev()
            .find(|&i| !is_super_block(offsets[i as usize]))
            .unwrap()
    };
    let (s1, s2, s3, s4) = (span(1), span(2), span(3), span(4));
    // Sync 4 (the 300 KB file) spans several segments: the first write
    // in its second segment, and the summary (first block) of its last log.
    let second_seg = (s4.first..s4.end)
        .find(|&i| !is_super_block(offsets[i as usize]) && seg(i) != seg(s4.first))
        .expect("sync 4 stays in one segment");
    let last_sr = super_root(s4);
    let last_log = (s4.first..=last_sr)
        .find(|&i| !is_super_block(offsets[i as usize]) && seg(i) == seg(last_sr))
        .unwrap();
    assert!(
        seg(last_sr) >= seg(s4.first) + 2,
        "sync 4 should span 3 or more segments"
    );
    vec![
        (run.mounted, false, "after mount's super block write".into()),
        ((s1.first + s1.end) / 2, false, "middle of sync 1".into()),
        (
            (s2.first + s2.end) / 2,
            true,
            "torn block in the middle of sync 2".into(),
        ),
        (s2.end, false, "right after sync 2".into()),
        (super_root(s3) + 1, true, "torn super root of sync 3".into()),
        (
            second_seg + 2,
            false,
            "sync 4, two blocks into its second segment".into(),
        ),
        (
            last_log + 1,
            true,
            "torn summary of sync 4's last log".into(),
        ),
        (total - 1, false, "unmount's last super block write".into()),
    ]
}

fn latest_manifest(dev: &dyn BlockDevice) -> String {
    let nilfs = Nilfs::open(dev).unwrap_or_else(|e| panic!("mount after the cut: {e}"));
    manifest(&CheckpointView::open(&nilfs, None).unwrap()).unwrap()
}

#[test]
fn the_kernel_recovers_our_cut_images_as_we_do() {
    let Some(()) = peers::require("the_kernel_recovers_our_cut_images_as_we_do", GUEST) else {
        return;
    };
    // The recording run: all writes land.
    let full = cut_device(u64::MAX, false);
    let run = workload(&full);
    assert_eq!(run.synced.len(), 4, "{run:?}");
    let offsets = full.offsets();
    // The tree after n completed syncs: checkpoint 1 (mkfs) or the
    // checkpoint sync n made, read from the complete image.
    let states: Vec<String> = {
        let nilfs = Nilfs::open(&full.inner).unwrap();
        let mut cnos = vec![Cno(1)];
        cnos.extend(run.synced.iter().map(|s| s.1));
        cnos.iter()
            .map(|&c| manifest(&CheckpointView::open(&nilfs, Some(c)).unwrap()).unwrap())
            .collect()
    };
    let completed = |k: u64| run.synced.iter().filter(|s| s.0 <= k).count();

    let dir = Scratch::new("kernel-crash");
    let points = cut_points(&run, &offsets);
    let mut images = Vec::new();
    let mut ours = Vec::new();
    let mut unclean = Vec::new();
    for (i, (k, tear, what)) in points.iter().enumerate() {
        let dev = cut_device(*k, *tear);
        workload(&dev);
        let got = latest_manifest(&dev.inner);
        let before = completed(k - 1);
        let after = completed(*k);
        let ok = if *tear {
            got == states[before] || got == states[after]
        } else {
            got == states[after]
        };
        assert!(
            ok,
            "cut {i} ({what}, k={k}): our recovery is not the state of {before}..={after} syncs:\n{got}"
        );
        let state = states.iter().position(|s| *s == got).unwrap();
        eprintln!(
            "cut {i}: k={k} of {} tear={tear} ({what}): state of {state} syncs",
            offsets.len()
        );
        // Which super block copy recovery trusts, and whether it says the
        // file system was cleanly unmounted: the kernel must agree.
        unclean.push(
            Nilfs::open(&dev.inner).unwrap().sb.state & nilfs::format::superblock::STATE_VALID_FS
                == 0,
        );
        export_to(&dir, &format!("cut{i}.img"), &dev.inner, &mut images);
        ours.push(got);
    }

    let script = script_per_image("set -e\nmkdir -p /mnt\n", images.len(), |d| {
        format!("mount -t nilfs2 /dev/{d} /mnt\necho @@MANIFEST {d}; manifest /mnt\numount /mnt\n")
    });
    let secs = sections(&kernel_run(&images, &script, &dir, "crash.sh"));
    for (i, (k, tear, what)) in points.iter().enumerate() {
        let d = DEVS[i];
        let ctx = format!("cut {i} on {d} ({what}, k={k}, tear={tear})");
        assert_eq!(
            secs[&format!("MANIFEST {d}")],
            ours[i],
            "{ctx}: kernel manifest"
        );
        // The kernel's recovery and unmount leave an image we read as it did.
        let dev = FileDevice::open_read_only(&images[i]).unwrap();
        nilfs_conformance::assert_checks_clean(&dev, &format!("{ctx}: after the kernel unmounted"));
        assert_eq!(
            latest_manifest(&dev),
            ours[i],
            "{ctx}: after the kernel unmounted"
        );
    }
    let dmesg = &secs["DMESG"];
    assert_dmesg_clean(dmesg, ACCEPTED_DMESG);
    // The kernel recovered exactly the images whose chosen super block copy
    // (ours, nilfs_load_super_block's rule) lacks VALID_FS. Every cut before
    // unmount is unclean; whether the last one is depends on which copy
    // nilfs_cleanup_super wrote last (roles alternate with the commits).
    assert!(
        unclean[..images.len() - 1].iter().all(|&u| u),
        "{unclean:?}"
    );
    for (i, d) in DEVS[..images.len()].iter().enumerate() {
        let recovered = dmesg.contains(&format!("NILFS ({d}): recovery complete"));
        assert_eq!(recovered, unclean[i], "{d}:\n{dmesg}");
    }
}
