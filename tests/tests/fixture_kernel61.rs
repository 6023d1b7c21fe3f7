//! The image Linux 6.1 wrote (tests/fixtures/kernel-6.1: scenario-gc.sh,
//! GC with protection period 0, one snapshot), read by us.
//!
//! Hermetic: our lscp and lssu equal the listings the kernel guest printed
//! (the fixture manifest), and every checksum verifies. Peer tier: our
//! dumpseg equals the real dumpseg for every segment, and our `tune -l`
//! equals the real `nilfs-tune -l`, both run on a read-only loop device.

use std::process::Command;

use nilfs::check::verify_checksums;
use nilfs::device::{export_image, MemDevice};
use nilfs::inspect::nilfs_utils::{LscpOptions, LssuOptions};
use nilfs::inspect::{report, tools};
use nilfs::the_nilfs::Nilfs;
use nilfs_conformance::manifest_section;
use nilfs_conformance::peers::{self, Loop, Scratch};

/// The fixture image and its manifest.
fn fixture() -> (MemDevice, String) {
    (
        nilfs_testkit::image::fixture(),
        nilfs_testkit::fixture::read(nilfs_testkit::fixture::manifest()),
    )
}

#[test]
fn lscp_equals_the_kernels() {
    let (dev, manifest) = fixture();
    let ours = tools::lscp(&dev, &LscpOptions::default()).unwrap();
    assert_eq!(ours, manifest_section(&manifest, "lscp").unwrap());
}

#[test]
fn lssu_equals_the_kernels() {
    let (dev, manifest) = fixture();
    let ours = tools::lssu(&dev, &LssuOptions::default()).unwrap();
    assert_eq!(ours, manifest_section(&manifest, "lssu").unwrap());
}

#[test]
fn lscp_snapshots_lists_the_one_snapshot() {
    let (dev, _) = fixture();
    let ours = tools::lscp(
        &dev,
        &LscpOptions {
            snapshots: true,
            ..LscpOptions::default()
        },
    )
    .unwrap();
    let rows: Vec<&str> = ours.lines().skip(1).collect();
    assert_eq!(rows.len(), 1, "{ours}");
    assert!(
        rows[0].trim_start().starts_with("4 ") && rows[0].contains(" ss "),
        "{ours}"
    );
}

#[test]
fn every_checksum_verifies() {
    let (dev, _) = fixture();
    let r = verify_checksums(&dev).unwrap();
    // 30 dirty segments in the lssu listing; all but the fresh next
    // segment 35 hold logs.
    assert_eq!(r.super_blocks, 2);
    assert_eq!(r.segments, 29, "{r:?}");
    assert!(r.logs >= 30 && r.super_roots >= 8, "{r:?}");
}

/// nilref check finds the image Linux wrote consistent, every checkpoint.
#[test]
fn nilref_check_finds_the_kernel_image_clean() {
    let (dev, _) = fixture();
    nilfs_conformance::assert_checks_clean(&dev, "kernel fixture");
}

/// The mount decision the kernel made for this image: the secondary super
/// block is newer (cno 29 against the primary's 20, which was written
/// before the GC pass and never refreshed), the image was cleanly
/// unmounted, so the scan stops at the first super root.
#[test]
fn mount_decision_matches_the_kernel() {
    let (dev, _) = fixture();
    let fs = Nilfs::open(&dev).unwrap();
    assert_eq!(fs.sb_choice.chosen, 1);
    assert!(!fs.rolled_back);
    assert_eq!(fs.scan.cno.0, 29);
    assert_eq!(fs.scan.visits.len(), 1);
    // lssu's "a" flags: the writer resumes in segment 34 with 35 as next.
    assert_eq!((fs.scan.segnum.0, fs.scan.nextnum.0), (34, 35));
    let text = report::inspect(&dev).unwrap();
    assert!(text.contains("chosen: secondary"), "{text}");
}

/// A corrupted checksum anywhere in a used segment is reported with its
/// block: the checker can fail.
#[test]
fn checksum_checker_catches_a_flipped_byte() {
    let (dev, _) = fixture();
    // A data block in the middle of segment 34's log (blocks 17408..17578).
    let at = 17_500 * 4096 + 100;
    let mut b = vec![0u8; 512];
    nilfs::device::BlockDevice::read_at(&dev, at - 100, &mut b).unwrap();
    b[100] ^= 0x40;
    nilfs::device::BlockDevice::write_at(&dev, at - 100, &b).unwrap();
    // nilref check reports it as the kernel meets it: the newer super
    // block's log fails its data checksum, so the mount rolls back.
    let report = nilfs::check::check_device(&dev, &Default::default());
    assert!(
        report.has(nilfs::check::Code::SbCursor) && report.to_string().contains("data checksum"),
        "{report}"
    );
    let err = verify_checksums(&dev).unwrap_err().to_string();
    assert!(
        err.contains("data checksum") && err.contains("block 17408"),
        "{err}"
    );
    // The kernel would mount it all the same, from the spare super block.
    let fs = Nilfs::open(&dev).unwrap();
    assert!(fs.rolled_back);
    assert_eq!(fs.sb_choice.chosen, 1);
    assert!(fs.scan.cno.0 < 29);
}

#[test]
fn dumpseg_equals_the_real_dumpseg() {
    let Some(()) = peers::require("dumpseg_equals_the_real_dumpseg", &["dumpseg", "losetup"])
    else {
        return;
    };
    let (dev, _) = fixture();
    let dir = Scratch::new("fixture-dumpseg");
    let img = dir.file("fixture.img");
    export_image(&dev, &img).unwrap();
    let lo = Loop::attach(&img);
    let fs = Nilfs::open(&dev).unwrap();
    for s in 0..fs.geo.nsegments {
        let theirs = peers::run_ok(
            Command::new(peers::which("dumpseg").unwrap())
                .arg(&lo.dev)
                .arg(s.to_string()),
        );
        let ours = tools::dumpseg(&dev, &[s]).unwrap();
        assert_eq!(ours.error, None);
        assert_eq!(ours.stdout, theirs, "segment {s}");
    }
    // Out of range: the same refusal.
    let out = peers::run(
        Command::new(peers::which("dumpseg").unwrap())
            .arg(&lo.dev)
            .arg("63"),
    );
    assert!(!out.status.success());
    let ours = tools::dumpseg(&dev, &[63]).unwrap();
    assert_eq!(
        ours.error.as_deref(),
        Some(String::from_utf8_lossy(&out.stderr).trim())
    );
}

#[test]
fn tune_list_equals_nilfs_tune() {
    let Some(()) = peers::require(
        "tune_list_equals_nilfs_tune",
        &["nilfs-tune", "mkfs.nilfs2", "losetup"],
    ) else {
        return;
    };
    let dir = Scratch::new("tune");
    let mut images = Vec::new();
    // The kernel fixture (a stale primary, as the kernel left it) and Debian
    // mkfs.nilfs2 images at every block size.
    let (dev, _) = fixture();
    let fx = dir.file("fixture.img");
    export_image(&dev, &fx).unwrap();
    images.push(fx);
    for (i, args) in [
        &["-b", "1024", "-B", "256"][..],
        &["-b", "2048", "-B", "1024", "-L", "label-2k", "-m", "10"][..],
        &["-b", "4096", "-B", "512", "-O", "block_count"][..],
    ]
    .iter()
    .enumerate()
    {
        let img = dir.file(&format!("mkfs{i}.img"));
        peers::host_mkfs(&img, 96 << 20, args);
        images.push(img);
    }
    for img in &images {
        let lo = Loop::attach(img);
        let theirs = peers::run_ok(
            Command::new(peers::which("nilfs-tune").unwrap())
                .arg("-l")
                .arg(&lo.dev),
        );
        let dev = nilfs::device::FileDevice::open_read_only(img).unwrap();
        assert_eq!(
            tools::tune_list(&dev, nilfs::inspect::nilfs_utils::tune::NilfsUtils::V2_2_9).unwrap(),
            theirs,
            "{}",
            img.display()
        );
    }
}

fn manifest_of(dev: &MemDevice, cp: Option<u64>) -> String {
    let fs = Nilfs::open(dev).unwrap();
    let view = nilfs::posix::CheckpointView::open(&fs, cp.map(nilfs::format::Cno)).unwrap();
    nilfs::inspect::manifest::manifest(&view).unwrap()
}

/// Every file, directory and symlink of the latest checkpoint, with sizes
/// and sha256 — including the sparse 16 MiB B-tree file GRUB cannot read
/// and the 32 MiB file under a 3-level B-tree.
#[test]
fn manifest_of_latest_checkpoint_equals_the_kernels() {
    let (dev, manifest) = fixture();
    let expected = manifest_section(&manifest, "manifest (latest checkpoint)").unwrap();
    assert_eq!(manifest_of(&dev, None), expected);
}

/// The snapshot taken before the churn: big2 and the 300-file directory
/// survive there although GC ran after they were deleted.
#[test]
fn manifest_of_snapshot_equals_the_kernels() {
    let (dev, manifest) = fixture();
    let expected = manifest_section(&manifest, "manifest (snapshot cno=4)").unwrap();
    assert_eq!(manifest_of(&dev, Some(4)), expected);
}

/// Checkpoints GC deleted are gone; reading one is ENOENT, not garbage.
#[test]
fn a_deleted_checkpoint_cannot_be_opened() {
    let (dev, _) = fixture();
    let fs = Nilfs::open(&dev).unwrap();
    let err = nilfs::posix::CheckpointView::open(&fs, Some(nilfs::format::Cno(3)))
        .err()
        .unwrap();
    assert!(
        matches!(
            err,
            nilfs::Error::Errno {
                errno: nilfs::Errno::ENOENT,
                ..
            }
        ),
        "{err}"
    );
}
