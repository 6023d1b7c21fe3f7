//! Data-only logs (fdatasync) in both directions with the kernel. Peer tier.
//!
//! (a) We fdatasync and crash: Linux 6.1 mounting the image read-write
//! must roll our SS_SYNDT logs forward and show the synced data.
//! (b) We roll the same logs forward ourselves and unmount: the kernel's
//! manifest of the result must equal ours.

mod peer_common;

use nilfs_testkit::image::fresh_with;
use peer_common::prelude::*;

use peer_common::pattern;
use std::process::Command;

/// Write, checkpoint, overwrite inside the files, fdatasync, crash.
fn crashed_after_fdatasync(bs: u64) -> MemDevice {
    let dev = fresh_with(64 << 20, &MkfsOptions::from_seed(7).geometry(bs, 128));
    nilfs_conformance::assert_checks_clean(&dev, "peer_kernel_rollforward.rs:43");
    let nilfs = Nilfs::open(&dev).unwrap();
    let mut fs = Fs::mount(&nilfs, 1_800_000_000).unwrap();
    let a = fs.create(ino::ROOT, b"a", 0o644).unwrap();
    fs.write(a, 0, &pattern(1, 40_000)).unwrap();
    let b = fs.create(ino::ROOT, b"b", 0o644).unwrap();
    fs.write(b, 0, &pattern(2, 3000)).unwrap();
    fs.sync().unwrap();
    fs.write(a, 1000, &[0x5A; 20_000]).unwrap();
    fs.fdatasync(a).unwrap();
    fs.write(b, 10, b"synced too").unwrap();
    fs.fdatasync(b).unwrap();
    drop(fs);
    dev
}

fn expected() -> String {
    let mut a = pattern(1, 40_000);
    a[1000..21_000].copy_from_slice(&[0x5A; 20_000]);
    let mut b = pattern(2, 3000);
    b[10..20].copy_from_slice(b"synced too");
    let sha = |d: &[u8]| nilfs_conformance::sha256_hex(d);
    format!(
        "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855  0  /.nilfs\n{}  40000  /a\n{}  3000  /b\n",
        sha(&a),
        sha(&b)
    )
}

#[test]
fn the_kernel_rolls_our_data_only_logs_forward() {
    let Some(dir) = guest(
        "the_kernel_rolls_our_data_only_logs_forward",
        "kernel-rollforward",
    ) else {
        return;
    };
    let mut images = Vec::new();
    let mut ours = Vec::new();
    for (i, bs) in [1024u64, 4096].into_iter().enumerate() {
        // (a) crashed, for the kernel to recover.
        let dev = crashed_after_fdatasync(bs);
        export_to(&dir, &format!("crashed{i}.img"), &dev, &mut images);
        // (b) recovered by us.
        let dev = crashed_after_fdatasync(bs);
        {
            let nilfs = Nilfs::open(&dev).unwrap();
            Fs::mount(&nilfs, 1_800_000_100).unwrap().unmount().unwrap();
        }
        nilfs_conformance::assert_checks_clean(&dev, "peer_kernel_rollforward.rs:94");
        let nilfs = Nilfs::open(&dev).unwrap();
        ours.push(manifest(&CheckpointView::open(&nilfs, None).unwrap()).unwrap());
        export_to(&dir, &format!("recovered{i}.img"), &dev, &mut images);
    }
    let mut script = String::from("set -e\n");
    for (k, d) in ["vda", "vdb", "vdc", "vdd"].iter().enumerate() {
        script.push_str(&format!(
            "mount -t nilfs2 /dev/{d} /mnt\necho @@M{k}; manifest /mnt\numount /mnt\n"
        ));
    }
    script.push_str("echo @@DMESG; dmesg | grep -i nilfs || true\n");
    let path = dir.file("run.sh");
    std::fs::write(&path, script).unwrap();
    let disks: Vec<String> = images[1..]
        .iter()
        .map(|p| p.display().to_string())
        .collect();
    let out = peers::run(
        Command::new(peers::oracle_dir().join("kernel-run.sh"))
            .arg(&images[0])
            .arg(&path)
            .env("DISKS", disks.join(" ")),
    );
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "{stdout}");
    let section = |k: usize| -> String {
        let head = format!("@@M{k}");
        stdout
            .lines()
            .skip_while(|l| *l != head)
            .skip(1)
            .take_while(|l| !l.starts_with("@@"))
            .map(|l| format!("{l}\n"))
            .collect()
    };
    #[allow(clippy::needless_range_loop)] // i also names the images
    for i in 0..2 {
        assert_eq!(
            section(2 * i),
            expected(),
            "image {i}: the kernel did not roll our data-only logs forward"
        );
        assert_eq!(
            section(2 * i + 1),
            ours[i],
            "image {i}: the kernel reads our recovery differently"
        );
        assert_eq!(ours[i], expected(), "image {i}: our recovery");
    }
    let dmesg: String = stdout
        .lines()
        .skip_while(|l| *l != "@@DMESG")
        .collect::<Vec<_>>()
        .join("\n");
    assert!(
        dmesg.contains("recovery complete") || dmesg.contains("salvaged"),
        "no kernel recovery seen:\n{dmesg}"
    );
    for l in dmesg.lines() {
        let lower = l.to_lowercase();
        assert!(
            !lower.contains("error") && !lower.contains("corrupt"),
            "{l}"
        );
    }
}
