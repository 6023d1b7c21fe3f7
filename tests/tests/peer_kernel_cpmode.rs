//! Checkpoint mode changes against Linux 6.1: `mkcp -s`, `chcp` and `rmcp`
//! are cpfile changes that the next construction records in a checkpoint
//! of its own (`nilfs_segctor_do_construct` -> `nilfs_test_metadata_dirty`),
//! and `chcp cp` of the latest checkpoint is EBUSY
//! (`nilfs_checkpoint_is_mounted`). The kernel runs the sequence on an
//! image we made; we run it on the same image; `lscp` (number and mode)
//! and every step's success must agree. Those checkpoints carry no file
//! blocks, so they are MINOR (`!NILFS_SC_HAVE_DELTA`): plain `lscp` hides
//! them. Peer tier.

mod peer_common;

use nilfs_testkit::image::fresh;
use peer_common::prelude::*;

use nilfs::format::{ino, Cno};
use nilfs::inspect::nilfs_utils::LscpOptions;

/// The guest's side: each step prints `ok` or `fail`, then lscp's number
/// and mode columns.
const SCRIPT: &str = "set -e
mount -t nilfs2 /dev/vda /mnt
touch /mnt/a
echo @@S; mkcp -s -p
chcp cp /dev/vda 2 2>/dev/null && echo ok || echo fail
chcp ss /dev/vda 1 && echo ok || echo fail
umount /mnt
mount -t nilfs2 /dev/vda /mnt
rmcp /dev/vda 1 2>/dev/null && echo ok || echo fail
chcp cp /dev/vda 1 && echo ok || echo fail
umount /mnt
mount -t nilfs2 -o ro /dev/vda /mnt
echo @@L; lscp | awk 'NR > 1 { print $1, $4, $5 }'
echo @@A; lscp -a | awk 'NR > 1 { print $1, $4, $5 }'
umount /mnt
echo @@D; dmesg | grep -i nilfs || true
";

fn ok<T>(r: nilfs::Result<T>) -> String {
    if r.is_ok() { "ok" } else { "fail" }.to_string()
}

#[test]
fn checkpoint_mode_changes_match_the_kernel() {
    let Some(()) = peers::require("checkpoint_mode_changes_match_the_kernel", GUEST) else {
        return;
    };
    let dev = fresh(32 << 20, 4096, 256);
    let dir = Scratch::new("kernel-cpmode");
    let img = dir.file("cpmode.img");
    export_image(&dev, &img).unwrap();

    let mut steps = Vec::new();
    {
        let nilfs = Nilfs::open(&dev).unwrap();
        let mut fs = Fs::mount(&nilfs, 1_800_000_000).unwrap();
        fs.create(ino::ROOT, b"a", 0o644).unwrap();
        steps.push(fs.mkcp(true).unwrap().0.to_string());
        steps.push(ok(fs.chcp(Cno(2), false)));
        steps.push(ok(fs.chcp(Cno(1), true)));
        fs.unmount().unwrap();
    }
    {
        let nilfs = Nilfs::open(&dev).unwrap();
        let mut fs = Fs::mount(&nilfs, 1_800_000_010).unwrap();
        steps.push(ok(fs.rmcp(Cno(1))));
        steps.push(ok(fs.chcp(Cno(1), false)));
        fs.unmount().unwrap();
    }
    let listing = |all: bool| -> Vec<String> {
        tools::lscp(
            &dev,
            &LscpOptions {
                all,
                ..LscpOptions::default()
            },
        )
        .unwrap()
        .lines()
        .skip(1)
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            format!("{} {} {}", f[0], f[3], f[4])
        })
        .collect()
    };
    let (ours_lscp, ours_all) = (listing(false), listing(true));

    let stdout = kernel_run(&[img], SCRIPT, &dir, "cpmode.sh");
    let secs = sections(&stdout);
    let lines = |name: &str| -> Vec<String> { secs[name].lines().map(String::from).collect() };
    assert_eq!(lines("S"), steps, "step outcomes\n{stdout}");
    assert_eq!(lines("L"), ours_lscp, "lscp\n{stdout}");
    assert_eq!(lines("A"), ours_all, "lscp -a\n{stdout}");
    // The expected shape, so that agreeing on something else fails: the
    // checkpoints made only for the cpfile changes are MINOR (flag `i`,
    // hidden without -a).
    assert_eq!(ours_all, ["1 cp -", "2 ss -", "3 cp i", "4 cp i"]);
    let dmesg = &secs["D"];
    assert!(!dmesg.to_lowercase().contains("error"), "{dmesg}");
}
