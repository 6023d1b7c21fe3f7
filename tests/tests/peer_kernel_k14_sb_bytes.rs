//! Finding K14, kept as a test (peer tier, `NILFS_PEERS=1`): the two super
//! block copies disagree on `s_bytes` (the primary, in use, resealed with
//! 282 where the secondary has 280), and the file system needs
//! roll-forward. Linux 6.1 mounts it, recovers, and unmounts, but the
//! salvage's super block commit swaps the copies (`nilfs_sb_will_flip`)
//! before `nilfs_setup_super` copies `sbp[0]` over `sbp[1]`, and every
//! commit seals both with `ns_sbsize` (282) while the copy now says 280: the
//! next mount fails with "couldn't find nilfs on the device", and no copy
//! verifies. Found by the image fuzzer (issue 13), which caught our writer
//! doing the same; ours now seals each copy over its own `s_bytes`
//! (sb_write.rs `seal`), so the same steps leave a readable image.
//!
//! If the kernel's second mount stops failing, K14 is fixed there: update
//! docs/findings.md and this test.

mod peer_common;

use peer_common::prelude::*;

use nilfs_conformance::corrupt::{self, Recipe};

fn damaged() -> MemDevice {
    let dev = corrupt::base("rollforward").unwrap();
    corrupt::apply(&dev, &Recipe::parse("sb0.s_bytes = 282").unwrap()).unwrap();
    dev
}

#[test]
fn ours_stays_readable_where_the_kernel_loses_both_super_blocks() {
    // Ours, hermetic: recover, unmount, and the image still opens, checks
    // clean and holds the salvaged data.
    let dev = damaged();
    {
        let nilfs = Nilfs::open(&dev).unwrap();
        Fs::mount(&nilfs, 1_800_001_000).unwrap().unmount().unwrap();
    }
    nilfs_conformance::assert_checks_clean(&dev, "after our recovery");
    let ours = {
        let nilfs = Nilfs::open(&dev).unwrap();
        manifest(&CheckpointView::open(&nilfs, None).unwrap()).unwrap()
    };
    let Some(dir) = guest(
        "ours_stays_readable_where_the_kernel_loses_both",
        "kernel-k14",
    ) else {
        return;
    };
    let img = dir.file("k14.img");
    export_image(&damaged(), &img).unwrap();
    let script = "mount -t nilfs2 /dev/vda /mnt\necho @@FIRST; manifest /mnt\numount /mnt\n\
                  echo @@SECOND; if mount -t nilfs2 -o ro /dev/vda /mnt; then echo mounted; umount /mnt; else echo refused; fi 2>&1\n";
    let secs = sections(&kernel_run(
        std::slice::from_ref(&img),
        script,
        &dir,
        "k14.sh",
    ));
    assert_eq!(secs["FIRST"], ours, "the kernel's recovery reads as ours");
    assert!(
        secs["SECOND"].trim_end().ends_with("refused"),
        "K14 no longer reproduces on this kernel: update docs/findings.md\n{}",
        secs["SECOND"]
    );
    let after = FileDevice::open_read_only(&img).unwrap();
    let e = Nilfs::open(&after).map(|_| ()).unwrap_err();
    assert!(e.to_string().contains("no valid super block"), "{e}");
}
