//! Finding K22, kept as a test (peer tier, `NILFS_PEERS=1`): both super
//! block copies are valid, but their `s_bytes` (61, resealed) ends inside
//! the log cursor, and the file system needs roll-forward. Linux 6.1, 6.12
//! and 7.3 mount it and recover: the salvage's commit writes the new cursor
//! into the other copy (`nilfs_sb_will_flip`), then `nilfs_setup_super`
//! copies only `ns_sbsize` (61) bytes of it back over the copy it left,
//! which keeps its old `s_last_pseg` and `s_last_seq` beside the new
//! `s_last_cno`. The unmount writes that copy again (same `s_last_cno`),
//! and the next mount chooses it, searches from mkfs's log as if it were
//! checkpoint 3, and fails: "Invalid checkpoint (checkpoint number=3)".
//! Ours always carries the cursor (sb_write.rs `copy_head`), so the same
//! steps leave a readable image; `check` reports such an image before any
//! mount (`sb-bytes-short`).
//!
//! If the kernel's second mount stops failing, K22 is fixed there: update
//! docs/findings.md and this test.

mod peer_common;

use peer_common::prelude::*;

use nilfs_conformance::corrupt::{self, Recipe};

fn damaged() -> MemDevice {
    let dev = corrupt::base("rollforward").unwrap();
    for copy in ["sb0", "sb1"] {
        let recipe = Recipe::parse(&format!("{copy}.s_bytes = 61")).unwrap();
        corrupt::apply(&dev, &recipe).unwrap();
    }
    dev
}

#[test]
fn ours_keeps_the_cursor_whole_where_the_kernel_tears_it() {
    // Ours, hermetic: recover, unmount, and the image still mounts, with
    // the salvaged data. Its only findings are the short copies'.
    let dev = damaged();
    {
        let nilfs = Nilfs::open(&dev).unwrap();
        Fs::mount(&nilfs, 1_800_001_000).unwrap().unmount().unwrap();
    }
    let codes: Vec<&str> = nilfs::check::check_device(&dev, &Default::default())
        .findings
        .iter()
        .map(|f| f.code.id())
        .collect();
    assert_eq!(
        codes,
        ["sb-bytes-short", "sb-bytes-short"],
        "after our recovery"
    );
    let ours = {
        let nilfs = Nilfs::open(&dev).unwrap();
        Fs::mount(&nilfs, 1_800_002_000)
            .expect("our image mounts again")
            .unmount()
            .unwrap();
        manifest(&CheckpointView::open(&nilfs, None).unwrap()).unwrap()
    };
    let Some(dir) = guest(
        "ours_keeps_the_cursor_whole_where_the_kernel_tears_it",
        "kernel-k22",
    ) else {
        return;
    };
    let img = dir.file("k22.img");
    export_image(&damaged(), &img).unwrap();
    let script = "mount -t nilfs2 /dev/vda /mnt\necho @@FIRST; manifest /mnt\numount /mnt\n\
                  echo @@SECOND; if mount -t nilfs2 -o ro /dev/vda /mnt; then echo mounted; umount /mnt; else echo refused; fi 2>&1\n\
                  echo @@DMESG; dmesg | grep -i 'invalid checkpoint'\n";
    let secs = sections(&kernel_run(
        std::slice::from_ref(&img),
        script,
        &dir,
        "k22.sh",
    ));
    assert_eq!(secs["FIRST"], ours, "the kernel's recovery reads as ours");
    assert!(
        secs["SECOND"].trim_end().ends_with("refused"),
        "K22 no longer reproduces on this kernel: update docs/findings.md\n{}",
        secs["SECOND"]
    );
    assert!(
        secs["DMESG"].contains("checkpoint number=3"),
        "{}",
        secs["DMESG"]
    );
    // The kernel's primary names checkpoint 3 but mkfs's log.
    let after = FileDevice::open_read_only(&img).unwrap();
    let report = nilfs::check::check_device(&after, &Default::default());
    assert!(
        report.findings.iter().any(|f| f.code.id() == "sb-last-cno"),
        "{report:?}"
    );
}
