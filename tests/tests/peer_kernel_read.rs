//! Images the Linux kernel writes, read by us. Peer tier (`NILFS_PEERS=1`).
//!
//! The kernel (6.1, qemu guest) populates three filesystems — 1, 2 and
//! 4 KiB blocks — with files under B-trees of height 3 and more, sparse
//! files, a directory of 1500 entries, hard links and symlinks, takes
//! several snapshots between rounds of deletions, truncations and
//! overwrites, and unmounts. A second, read-only boot prints lscp, lssu and
//! the manifest of the latest checkpoint and of every snapshot. Ours must
//! equal the kernel's, line for line.

mod peer_common;

use peer_common::prelude::*;

use nilfs::device::FileDevice;
use nilfs::format::Cno;

/// (block size, blocks per segment, image size)
const GEOMETRIES: &[(u64, u64, u64)] = &[
    (1024, 1024, 96 << 20),
    (2048, 512, 96 << 20),
    (4096, 256, 128 << 20),
];

/// The workload, in busybox sh. Content is deterministic: every byte comes
/// from seq/awk, never from /dev/urandom.
const POPULATE: &str = r#"
pat() { awk -v t="$1" -v n="$2" 'BEGIN{for(i=0;i<n;i++) printf "%s:%08d:%s\n", t, i, "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"}'; }
mount -t nilfs2 /dev/$D /mnt
cd /mnt
mkdir -p deep/a/b/c many empty
pat big 110000 > big            # ~8.5 MiB: B-tree of height 3 at 4 KiB, 4 at 1 KiB
pat mid 9000 > mid
printf tail | dd of=sparse bs=1 seek=5000000 conv=notrunc 2>/dev/null
printf head | dd of=sparse bs=1 seek=0 conv=notrunc 2>/dev/null
pat s 40 | dd of=sparse bs=4096 seek=300 conv=notrunc 2>/dev/null
i=0; while [ $i -lt 1500 ]; do echo "entry $i" > many/f$i; i=$((i+1)); done
echo leaf > deep/a/b/c/leaf
ln -s deep/a/b/c/leaf link-to-leaf
ln -s nowhere dangling
ln mid mid-hardlink
touch "$(printf 'N%.0s' $(seq 1 255))"
sync
mkcp -s
# Round 2: delete, truncate across the direct/B-tree boundary, overwrite.
rm -f many/f1* big
truncate -s 20000 mid
truncate -s 3 sparse
pat new 3000 > newfile
printf XYZ | dd of=newfile bs=1 seek=70000 conv=notrunc 2>/dev/null
mv deep/a/b/c/leaf deep/moved
sync
mkcp -s
# Round 3: more churn, a plain checkpoint, then a last snapshot.
pat big 30000 > big
rm -rf deep/a/b
i=0; while [ $i -lt 200 ]; do echo "again $i" >> many/f$i 2>/dev/null || true; i=$((i+3)); done
sync
mkcp
pat z 2000 >> mid
sync
mkcp -s
cd /
umount /mnt
"#;

const READ_BACK: &str = r#"
mount -t nilfs2 -o ro /dev/$D /mnt
echo "@@LSCP $D"; lscp
echo "@@LSSU $D"; lssu
echo "@@MANIFEST $D latest"; manifest /mnt
mkdir -p /snap
for cno in $(lscp -s | awk 'NR>1 {print $1}'); do
  mount -t nilfs2 -o ro,cp="$cno" /dev/$D /snap
  echo "@@MANIFEST $D $cno"; manifest /snap
  umount /snap
done
umount /mnt
"#;

#[test]
fn we_read_what_the_kernel_writes() {
    let Some(dir) = guest("we_read_what_the_kernel_writes", "kernel-read") else {
        return;
    };
    let images: Vec<_> = GEOMETRIES
        .iter()
        .enumerate()
        .map(|(i, &(bs, bps, size))| {
            let img = sized_file(&dir, &format!("k{i}.img"), size);
            let o = MkfsOptions {
                block_size: bs,
                blocks_per_segment: bps,
                ..MkfsOptions::from_seed(100 + i as u64)
            };
            mkfs::mkfs(&FileDevice::open_read_write(&img).unwrap(), &o).unwrap();
            img
        })
        .collect();
    let per_disk = |body: &str| -> String {
        DEVS[..images.len()]
            .iter()
            .map(|d| format!("D={d}\n{body}\n"))
            .collect()
    };
    let boot = |read_only| Boot {
        read_only,
        timeout_s: 900,
    };
    kernel_run_with(
        &images,
        &format!("set -e\n{}", per_disk(POPULATE)),
        &dir,
        "populate.sh",
        boot(false),
    );
    let out = kernel_run_with(
        &images,
        &format!("set -e\n{}", per_disk(READ_BACK)),
        &dir,
        "read.sh",
        boot(true),
    );
    let secs = sections(&out);

    for (i, d) in DEVS[..images.len()].iter().enumerate() {
        let ctx = format!("{d} (-b {} -B {})", GEOMETRIES[i].0, GEOMETRIES[i].1);
        let dev = FileDevice::open_read_only(&images[i]).unwrap();
        nilfs_conformance::assert_checks_clean(&dev, &format!("kernel-written image {i}"));
        assert_eq!(
            tools::lscp(&dev, &LscpOptions::default()).unwrap(),
            secs[&format!("LSCP {d}")],
            "{ctx}: lscp"
        );
        assert_eq!(
            tools::lssu(&dev, &LssuOptions::default()).unwrap(),
            secs[&format!("LSSU {d}")],
            "{ctx}: lssu"
        );
        let fs = Nilfs::open(&dev).unwrap();
        let latest = CheckpointView::open(&fs, None).unwrap();
        assert_eq!(
            manifest(&latest).unwrap(),
            secs[&format!("MANIFEST {d} latest")],
            "{ctx}: latest"
        );
        let snaps = fs.snapshots().unwrap();
        assert_eq!(snaps.len(), 3, "{ctx}: snapshots");
        for cp in snaps {
            let view = CheckpointView::open(&fs, Some(Cno(cp.cno.0))).unwrap();
            let key = format!("MANIFEST {d} {}", cp.cno);
            let theirs = secs
                .get(&key)
                .unwrap_or_else(|| panic!("{ctx}: the kernel has no {key}"));
            assert_eq!(
                &manifest(&view).unwrap(),
                theirs,
                "{ctx}: snapshot {}",
                cp.cno
            );
        }
        // The big file's B-tree is at least 3 levels high (root level >= 2).
        let (_, big) = latest.resolve(b"/big", false).unwrap();
        let root = nilfs::format::bmap::BmapRoot::decode(&big.bmap).unwrap();
        let nilfs::format::bmap::BmapRoot::Btree(n) = root else {
            panic!("{ctx}: big is not a B-tree")
        };
        assert!(
            n.level >= 2,
            "{ctx}: big's B-tree has height {}",
            n.level + 1
        );
    }
}
