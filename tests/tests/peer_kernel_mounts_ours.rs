//! Our mkfs images in the real Linux kernel (6.1, qemu guest) and in GRUB's
//! reader. Peer tier (`NILFS_PEERS=1`).
//!
//! For 1, 2 and 4 KiB blocks and two segment sizes each, the kernel must
//! mount our image read-write, show checkpoint 1 in lscp, write files and
//! read them back, unmount, and in a second boot mount again and read the
//! same bytes, with no nilfs2 error in dmesg. Afterwards our reader must open
//! what the kernel wrote and verify every checksum of it.

mod peer_common;

use peer_common::prelude::*;

use std::process::Command;

use nilfs::check::verify_checksums;
use nilfs::device::FileDevice;

/// (block size, blocks per segment, image size)
const GEOMETRIES: &[(u64, u64, u64)] = &[
    (1024, 256, 48 << 20),
    (1024, 2048, 64 << 20),
    (2048, 64, 32 << 20),
    (2048, 1024, 64 << 20),
    (4096, 512, 128 << 20),
    (4096, 2048, 160 << 20),
];

fn make_images(dir: &Scratch) -> Vec<std::path::PathBuf> {
    GEOMETRIES
        .iter()
        .enumerate()
        .map(|(i, &(bs, bps, size))| {
            let img = sized_file(dir, &format!("ours{i}.img"), size);
            let dev = FileDevice::open_read_write(&img).unwrap();
            let o = MkfsOptions {
                block_size: bs,
                blocks_per_segment: bps,
                ..MkfsOptions::from_seed(i as u64)
            };
            mkfs::mkfs(&dev, &o).unwrap();
            img
        })
        .collect()
}

#[test]
fn kernel_mounts_writes_and_remounts_our_images() {
    let Some(()) = peers::require(
        "kernel_mounts_writes_and_remounts_our_images",
        &["qemu-system-x86_64", "busybox", "cpio", "mkfs.nilfs2"],
    ) else {
        return;
    };
    let dir = Scratch::new("kernel-mkfs");
    let images = make_images(&dir);

    // Boot 1: mount each fresh image, list checkpoints, write, read back, unmount.
    let mut s1 = String::from("set -e\n");
    for d in &DEVS[..images.len()] {
        s1.push_str(&format!(
            "mount -t nilfs2 /dev/{d} /mnt\n\
             echo \"@@LSCP {d}\"; lscp\n\
             echo 'hello from the kernel' > /mnt/hello\n\
             seq 1 30000 > /mnt/seq\n\
             mkdir /mnt/dir; seq 5 9 > /mnt/dir/five\n\
             sync\n\
             echo \"@@SUM1 {d} $(cat /mnt/hello /mnt/seq /mnt/dir/five /mnt/.nilfs | sha256sum | cut -c1-64)\"\n\
             umount /mnt\n"
        ));
    }
    s1.push_str("echo \"@@DMESG\"; dmesg | grep -i nilfs || true\n");
    let out1 = kernel_run(&images, &s1, &dir, "boot1.sh");

    // Boot 2: mount again, read the same bytes, list checkpoints, unmount.
    let mut s2 = String::from("set -e\n");
    for d in &DEVS[..images.len()] {
        s2.push_str(&format!(
            "mount -t nilfs2 /dev/{d} /mnt\n\
             echo \"@@SUM2 {d} $(cat /mnt/hello /mnt/seq /mnt/dir/five /mnt/.nilfs | sha256sum | cut -c1-64)\"\n\
             echo \"@@LSCP2 {d}\"; lscp\n\
             umount /mnt\n"
        ));
    }
    s2.push_str("echo \"@@DMESG\"; dmesg | grep -i nilfs || true\n");
    let out2 = kernel_run(&images, &s2, &dir, "boot2.sh");

    for (i, d) in DEVS[..images.len()].iter().enumerate() {
        let ctx = format!("{d} (-b {} -B {})", GEOMETRIES[i].0, GEOMETRIES[i].1);
        // lscp right after mkfs shows checkpoint 1, the one mkfs wrote.
        let lscp = section(&out1, &format!("@@LSCP {d}"));
        let cnos: Vec<&str> = lscp
            .lines()
            .skip(1)
            .filter_map(|l| l.split_whitespace().next())
            .collect();
        assert_eq!(cnos.first(), Some(&"1"), "{ctx}: lscp after mount:\n{lscp}");
        let sum1 = marker(&out1, &format!("@@SUM1 {d} "));
        let sum2 = marker(&out2, &format!("@@SUM2 {d} "));
        assert_eq!(sum1, sum2, "{ctx}: data changed across the remount");
        let expect = expected_sum();
        assert_eq!(
            sum1, expect,
            "{ctx}: data read back differs from what was written"
        );
        let lscp2 = section(&out2, &format!("@@LSCP2 {d}"));
        assert!(
            lscp2.lines().count() >= 3,
            "{ctx}: the kernel made no new checkpoint:\n{lscp2}"
        );
    }
    for out in [&out1, &out2] {
        let dmesg = section(out, "@@DMESG");
        for l in dmesg.lines() {
            let lower = l.to_lowercase();
            assert!(
                !(lower.contains("error")
                    || lower.contains("corrupt")
                    || lower.contains("invalid")
                    || lower.contains("bad ")),
                "nilfs2 complained in dmesg: {l}\n{dmesg}"
            );
        }
    }

    // Our reader opens what the kernel wrote, and every checksum verifies.
    for (i, img) in images.iter().enumerate() {
        let dev = FileDevice::open_read_only(img).unwrap();
        nilfs_conformance::assert_checks_clean(&dev, &format!("image {i}"));
        let fs = Nilfs::open(&dev).unwrap_or_else(|e| panic!("image {i}: {e}"));
        assert!(fs.scan.cno.0 > 1, "image {i}: no checkpoint after mkfs's");
        let r = verify_checksums(&dev).unwrap_or_else(|e| panic!("image {i}: {e}"));
        assert!(r.logs > 1 && r.super_roots > 1, "image {i}: {r:?}");
    }
}

/// The sha256 of the bytes the guest writes (hello, seq, dir/five, empty .nilfs).
fn expected_sum() -> String {
    let mut data = b"hello from the kernel\n".to_vec();
    for i in 1..=30000 {
        data.extend_from_slice(format!("{i}\n").as_bytes());
    }
    for i in 5..=9 {
        data.extend_from_slice(format!("{i}\n").as_bytes());
    }
    nilfs_conformance::sha256_hex(&data)
}

fn marker(out: &str, prefix: &str) -> String {
    out.lines()
        .find_map(|l| l.strip_prefix(prefix))
        .unwrap_or_else(|| panic!("no `{prefix}` line in guest output:\n{out}"))
        .trim()
        .to_string()
}

fn section(out: &str, head: &str) -> String {
    let mut lines = out.lines().skip_while(|l| *l != head);
    assert!(
        lines.next().is_some(),
        "no `{head}` in guest output:\n{out}"
    );
    lines
        .take_while(|l| !l.starts_with("@@"))
        .map(|l| format!("{l}\n"))
        .collect()
}

#[test]
fn grub_reads_our_images() {
    let Some(()) = peers::require("grub_reads_our_images", &["grub-fstest"]) else {
        return;
    };
    let dir = Scratch::new("grub-mkfs");
    for (i, img) in make_images(&dir).iter().enumerate() {
        let out = peers::run(Command::new(peers::oracle_dir().join("grub-check.sh")).arg(img));
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "image {i}: grub-check.sh exited {}: {stdout}",
            out.status
        );
        assert_eq!(
            stdout,
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855  0  /.nilfs\n",
            "image {i}"
        );
    }
}
