//! The kernel reads what our write path writes. Peer tier (`NILFS_PEERS=1`).
//!
//! Our Fs makes files (direct maps, a 3 MiB B-tree, a sparse file), nested
//! directories and a 200-entry directory on fresh 1, 2 and 4 KiB images,
//! syncs, overwrites, then links, symlinks, unlinks, renames (over a file,
//! a directory across directories), truncates and removes a directory, and
//! unmounts. Linux 6.1 then mounts each image read-only:
//! its manifest, lscp and lssu must equal ours, with no nilfs2 complaint in
//! dmesg. A second boot mounts them read-write, writes a file and unmounts;
//! our reader must then open the kernel's new checkpoint and verify every
//! checksum.

mod peer_common;

use peer_common::prelude::*;

use nilfs::check::verify_checksums;

/// The guest attaches the disks read-only.
const RO: Boot = Boot {
    read_only: true,
    timeout_s: 0,
};

const GEOMETRIES: &[(u64, u64)] = &[(1024, 256), (2048, 128), (4096, 512)];

fn populate(dev: &MemDevice, bs: u64, bps: u64) {
    mkfs::mkfs(dev, &MkfsOptions::from_seed(bs).geometry(bs, bps)).unwrap();
    let nilfs = Nilfs::open(dev).unwrap();
    let mut fs = Fs::mount(&nilfs, 1_800_000_000).unwrap();
    let small = fs.create(ino::ROOT, b"small", 0o644).unwrap();
    fs.write(small, 0, b"hello, nilfs\n").unwrap();
    let mid = fs.create(ino::ROOT, b"mid", 0o600).unwrap();
    fs.write(mid, 0, &pattern(1, 30_000)).unwrap();
    let big = fs.create(ino::ROOT, b"big", 0o644).unwrap();
    fs.write(big, 0, &pattern(2, 3 << 20)).unwrap();
    let sparse = fs.create(ino::ROOT, b"sparse", 0o644).unwrap();
    fs.write(sparse, 5_000_000, b"tail").unwrap();
    let sub = fs.mkdir(ino::ROOT, b"sub", 0o755).unwrap();
    let deeper = fs.mkdir(sub, b"deeper", 0o755).unwrap();
    let leaf = fs.create(deeper, b"leaf", 0o644).unwrap();
    fs.write(leaf, 0, b"leaf\n").unwrap();
    fs.mkdir(ino::ROOT, b"empty", 0o700).unwrap();
    for n in 0..200 {
        let f = fs
            .create(sub, format!("f{n:03}").as_bytes(), 0o644)
            .unwrap();
        fs.write(f, 0, format!("entry {n}\n").as_bytes()).unwrap();
    }
    fs.mkcp(true).unwrap(); // snapshot of the first checkpoint we write
    fs.set_time(1_800_000_100);
    fs.write(big, 4096 * 100 + 10, b"OVERWRITE").unwrap();
    fs.write(small, 13, b"more\n").unwrap();
    fs.mkcp(true).unwrap();
    // A third checkpoint of namespace changes and truncation.
    fs.set_time(1_800_000_200);
    fs.link(small, sub, b"small-link").unwrap();
    fs.symlink(ino::ROOT, b"to-leaf", b"sub/deeper/leaf")
        .unwrap();
    for n in (0..200).step_by(3) {
        fs.unlink(sub, format!("f{n:03}").as_bytes()).unwrap();
    }
    fs.rename(sub, b"deeper", ino::ROOT, b"moved").unwrap();
    fs.rename(ino::ROOT, b"mid", sub, b"f001").unwrap();
    fs.truncate(big, 10_000).unwrap();
    fs.rmdir(ino::ROOT, b"empty").unwrap();
    fs.unmount().unwrap();
}

#[test]
fn the_kernel_reads_what_we_write() {
    let Some(dir) = guest("the_kernel_reads_what_we_write", "kernel-reads-ours") else {
        return;
    };
    let mut images = Vec::new();
    let mut ours = Vec::new();
    for (i, &(bs, bps)) in GEOMETRIES.iter().enumerate() {
        let dev = MemDevice::new(128 << 20);
        populate(&dev, bs, bps);
        ours.push(listings(&dev));
        export_to(&dir, &format!("w{i}.img"), &dev, &mut images);
    }
    let mut ro = String::from("set -e\n");
    for d in &DEVS[..GEOMETRIES.len()] {
        ro.push_str(&format!(
            "mount -t nilfs2 -o ro /dev/{d} /mnt\necho @@MANIFEST {d}; manifest /mnt\necho @@LSCP {d}; lscp\necho @@LSSU {d}; lssu\n\
             mkdir -p /snap\nfor c in $(lscp -s | awk 'NR>1 {{print $1}}'); do mount -t nilfs2 -o ro,cp=$c /dev/{d} /snap; echo @@SNAP {d} $c; manifest /snap; umount /snap; done\n\
             umount /mnt\n"
        ));
    }
    ro.push_str("echo @@DMESG; dmesg | grep -i nilfs || true\n");
    let secs = sections(&kernel_run_with(&images, &ro, &dir, "ro.sh", RO));
    for (i, d) in DEVS[..GEOMETRIES.len()].iter().enumerate() {
        let ctx = format!("{d} (-b {} -B {})", GEOMETRIES[i].0, GEOMETRIES[i].1);
        assert_eq!(secs[&format!("MANIFEST {d}")], ours[i].0, "{ctx}: manifest");
        assert_eq!(secs[&format!("LSCP {d}")], ours[i].1, "{ctx}: lscp");
        assert_eq!(secs[&format!("LSSU {d}")], ours[i].2, "{ctx}: lssu");
        let snaps: Vec<&String> = secs
            .keys()
            .filter(|k| k.starts_with(&format!("SNAP {d} ")))
            .collect();
        assert_eq!(
            snaps.len(),
            2,
            "{ctx}: the kernel sees {} snapshots",
            snaps.len()
        );
        let dev = FileDevice::open_read_only(&images[i]).unwrap();
        nilfs_conformance::assert_checks_clean(&dev, &format!("image {i}"));
        let nilfs = Nilfs::open(&dev).unwrap();
        for k in snaps {
            let cno: u64 = k.rsplit(' ').next().unwrap().parse().unwrap();
            let view = CheckpointView::open(&nilfs, Some(nilfs::format::Cno(cno))).unwrap();
            assert_eq!(&manifest(&view).unwrap(), &secs[k], "{ctx}: snapshot {cno}");
        }
    }
    let dmesg = &secs["DMESG"];
    for l in dmesg.lines() {
        let lower = l.to_lowercase();
        assert!(
            !(lower.contains("error") || lower.contains("corrupt") || lower.contains("invalid")),
            "dmesg: {l}\n{dmesg}"
        );
    }

    // The kernel writes on top of our images; we read its result.
    let mut rw = String::from("set -e\n");
    for d in &DEVS[..GEOMETRIES.len()] {
        rw.push_str(&format!(
            "mount -t nilfs2 /dev/{d} /mnt\nseq 1 5000 > /mnt/from-kernel\nmkdir /mnt/sub/kdir\nsync\n\
             nilfs_cleanerd -p 0 /dev/{d} /mnt > /dev/null\nnilfs-clean -p 0 /dev/{d} || true\n\
             i=0; while [ $i -lt 60 ]; do st=$(nilfs-clean -l /dev/{d} 2>&1 || true); case $st in *idle*) break;; esac; sleep 1; i=$((i+1)); done\n\
             nilfs-clean -q /dev/{d} || true\nsleep 1\n\
             echo @@AFTER {d}; manifest /mnt\nfor c in $(lscp -s | awk 'NR>1 {{print $1}}'); do mkdir -p /snap; mount -t nilfs2 -o ro,cp=$c /dev/{d} /snap; echo @@ASNAP {d} $c; manifest /snap; umount /snap; done\n\
             umount /mnt\n"
        ));
    }
    rw.push_str("echo @@DMESG; dmesg | grep -i nilfs || true\n");
    let secs = sections(&kernel_run(&images, &rw, &dir, "rw.sh"));
    assert!(
        !secs["DMESG"].to_lowercase().contains("error"),
        "{}",
        secs["DMESG"]
    );
    for (i, img) in images.iter().enumerate() {
        let d = DEVS[i];
        let dev = FileDevice::open_read_only(img).unwrap();
        nilfs_conformance::assert_checks_clean(&dev, &format!("image {i} after the kernel wrote"));
        verify_checksums(&dev).unwrap_or_else(|e| panic!("image {i} after the kernel wrote: {e}"));
        // After the kernel's own cleaner ran, we still read the latest
        // checkpoint and every snapshot exactly as the kernel does.
        {
            let nilfs = Nilfs::open(&dev).unwrap();
            let view = CheckpointView::open(&nilfs, None).unwrap();
            assert_eq!(
                manifest(&view).unwrap(),
                secs[&format!("AFTER {d}")],
                "image {i}: latest after GC"
            );
            for (k, theirs) in secs
                .iter()
                .filter(|(k, _)| k.starts_with(&format!("ASNAP {d} ")))
            {
                let cno: u64 = k.rsplit(' ').next().unwrap().parse().unwrap();
                let view = CheckpointView::open(&nilfs, Some(nilfs::format::Cno(cno))).unwrap();
                assert_eq!(
                    &manifest(&view).unwrap(),
                    theirs,
                    "image {i}: snapshot {cno} after GC"
                );
            }
        }
        let nilfs = Nilfs::open(&dev).unwrap();
        let view = CheckpointView::open(&nilfs, None).unwrap();
        let (_, f) = view.resolve(b"/from-kernel", false).unwrap();
        let expect: String = (1..=5000).map(|n| format!("{n}\n")).collect();
        assert_eq!(view.read_all(&f).unwrap(), expect.as_bytes(), "image {i}");
        assert!(view.resolve(b"/sub/kdir", false).is_ok(), "image {i}");
        assert!(view.resolve(b"/sub/f199", false).is_ok(), "image {i}");
    }
}
