//! GRUB's own NILFS2 reader (grub-fstest) reads what our write path
//! writes, on the latest checkpoint. Peer tier (`NILFS_PEERS=1`).
//!
//! GRUB reads only the latest checkpoint and cannot read sparse B-tree
//! files, so the tree here has none; it has direct-mapped files, B-tree
//! files of height 2 and 3, nested directories, a multi-block directory,
//! hard links and files rewritten over several checkpoints.

mod peer_common;

use nilfs_testkit::image::fresh_with;
use peer_common::prelude::*;

use peer_common::pattern;
use std::process::Command;

#[test]
fn grub_reads_our_writes() {
    let Some(()) = peers::require("grub_reads_our_writes", &["grub-fstest"]) else {
        return;
    };
    let dir = Scratch::new("grub-writes");
    for (i, (bs, bps)) in [(1024u64, 256u64), (2048, 128), (4096, 512)]
        .into_iter()
        .enumerate()
    {
        let dev = fresh_with(
            128 << 20,
            &MkfsOptions::from_seed(i as u64).geometry(bs, bps),
        );
        {
            let nilfs = Nilfs::open(&dev).unwrap();
            let mut fs = Fs::mount(&nilfs, 1_800_000_000).unwrap();
            let small = fs.create(ino::ROOT, b"small", 0o644).unwrap();
            fs.write(small, 0, b"small file\n").unwrap();
            let big = fs.create(ino::ROOT, b"big", 0o644).unwrap();
            fs.write(big, 0, &pattern(1, 2 << 20)).unwrap();
            let d = fs.mkdir(ino::ROOT, b"d", 0o755).unwrap();
            let e = fs.mkdir(d, b"e", 0o755).unwrap();
            for n in 0..150 {
                let f = fs.create(e, format!("file-{n}").as_bytes(), 0o644).unwrap();
                fs.write(f, 0, &pattern(100 + n, 500 + n as usize * 37))
                    .unwrap();
            }
            fs.sync().unwrap();
            fs.link(small, d, b"small-link").unwrap();
            fs.write(big, 123_456, b"rewritten").unwrap();
            fs.truncate(big, 1_500_000).unwrap();
            fs.unlink(e, b"file-7").unwrap();
            fs.unmount().unwrap();
        }
        let nilfs = Nilfs::open(&dev).unwrap();
        let ours = manifest(&CheckpointView::open(&nilfs, None).unwrap()).unwrap();
        let img = dir.file(&format!("g{i}.img"));
        export_image(&dev, &img).unwrap();
        let out = peers::run(Command::new(peers::oracle_dir().join("grub-check.sh")).arg(&img));
        let theirs = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(
            out.status.success(),
            "-b {bs}: grub-check.sh exited {}:\n{theirs}",
            out.status
        );
        assert_eq!(theirs, ours, "-b {bs}: GRUB reads our image differently");
    }
}
