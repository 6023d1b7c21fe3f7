//! The write path commits super blocks by the kernel's policy (sb_write.rs):
//! both copies at mount (`nilfs_setup_super`), then one copy per commit
//! (`nilfs_sync_fs` when the log moved to another segment) with the roles
//! alternating (`nilfs_sb_will_flip`), so that after a crash
//! the two copies hold different cursors and recovery still finds every
//! synced checkpoint by scanning forward from the one it trusts.

use nilfs::device::{BlockDevice, CutDevice};
use nilfs::format::superblock::{sb2_offset_bytes, STATE_VALID_FS};
use nilfs::format::{ino, SB_OFFSET_BYTES};
use nilfs::fs::Fs;
use nilfs::inspect::manifest::manifest;
use nilfs::posix::CheckpointView;
use nilfs::recovery::load_super_block;
use nilfs::the_nilfs::Nilfs;
use nilfs_testkit::image::fresh;

/// The super block writes among `dev`'s writes, by offset.
fn sb_writes(dev: &CutDevice) -> Vec<u64> {
    let sb2 = sb2_offset_bytes(dev.size_bytes());
    let is_sb = |off: &u64| *off == SB_OFFSET_BYTES || Some(*off) == sb2;
    dev.offsets().into_iter().filter(is_sb).collect()
}

#[test]
fn commits_alternate_between_the_copies_and_a_crash_keeps_both_usable() {
    let inner = fresh(64 << 20, 1024, 64);
    // A device that records where each write went (and never cuts).
    let dev = CutDevice::new(inner, 1024, u64::MAX);
    let sb2 = sb2_offset_bytes(dev.size_bytes()).unwrap();
    let want = {
        let nilfs = Nilfs::open(&dev).unwrap();
        let mut fs = Fs::mount(&nilfs, 1_800_000_000).unwrap();
        // nilfs_setup_super: both copies, primary first.
        assert_eq!(sb_writes(&dev), [SB_OFFSET_BYTES, sb2]);
        for n in 0..12u64 {
            fs.set_time(1_800_000_000 + 20 * n);
            let f = fs
                .create(ino::ROOT, format!("f{n}").as_bytes(), 0o644)
                .unwrap();
            fs.write(f, 0, &vec![n as u8; 40_000]).unwrap();
            fs.sync().unwrap();
        }
        // A crash: no unmount.
        let view_dev = &dev.inner;
        let n2 = Nilfs::open(view_dev).unwrap();
        let m = manifest(&CheckpointView::open(&n2, None).unwrap()).unwrap();
        drop(fs);
        m
    };
    let writes = sb_writes(&dev);
    let commits = &writes[2..];
    assert!(commits.len() >= 4, "too few commits to judge: {writes:?}");
    // nilfs_sb_will_flip: a commit swaps the roles unless ns_sbwcount & 0xF
    // is 8 or 15; the mount's commit made the count 1 and left the primary
    // copy in use.
    let mut in_use = [SB_OFFSET_BYTES, sb2];
    let expected: Vec<u64> = (1..=commits.len() as u32)
        .map(|count| {
            if !matches!(count & 0xF, 8 | 15) {
                in_use.swap(0, 1);
            }
            in_use[0]
        })
        .collect();
    assert_eq!(commits, expected, "super block commit locations");
    // Both copies are valid, unclean (the mount cleared VALID_FS), and
    // hold different cursors.
    let choice = load_super_block(&dev).unwrap();
    let copies: Vec<_> = choice
        .copies
        .iter()
        .map(|c| c.as_ref().unwrap().sb.as_ref().unwrap().clone())
        .collect();
    for sb in &copies {
        sb.check_valid().unwrap();
        assert_eq!(sb.state & STATE_VALID_FS, 0);
    }
    assert_ne!(copies[0].last_cno, copies[1].last_cno);
    // Recovery finds the last sync from whichever copy it trusts.
    let nilfs = Nilfs::open(&dev).unwrap();
    assert_eq!(
        manifest(&CheckpointView::open(&nilfs, None).unwrap()).unwrap(),
        want
    );
}
