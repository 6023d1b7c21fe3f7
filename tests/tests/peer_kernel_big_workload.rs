//! The kernel reads a big workload our write path wrote. Peer tier
//! (`NILFS_PEERS=1`).
//!
//! On fresh 1 KiB and 4 KiB images our Fs writes a directory of 3,000
//! files, a file whose B-tree has height 4, a 255-byte name, hard links and
//! symlinks, truncates a file from a B-tree down into the direct map (a
//! snapshot keeps that state) and grows it back, then makes 240 more checkpoints with small changes
//! between (a snapshot every 50), and removes some plain checkpoints. Linux
//! 6.1 mounts both images in one boot: its manifest of the latest
//! checkpoint and of every snapshot, its lscp and its lssu must equal ours,
//! with no nilfs2 complaint in dmesg.
//!
//! The guest's `manifest` forks three programs per file (about 25 s for
//! 3,000 files under TCG), so the guest lists files with [`FAST_MANIFEST`],
//! which prints the same lines in batches; one snapshot is also listed with
//! `manifest` itself to show the two agree.

mod peer_common;

use peer_common::prelude::*;

use nilfs::format::bmap::BmapRoot;
use nilfs::format::{ino, Cno};

/// (block size, blocks per segment, size of the height-4 file).
const GEOMETRIES: &[(u64, u64, usize)] = &[(1024, 256, 3 << 20), (4096, 512, 4 << 20)];
const DEV_BYTES: u64 = 256 << 20;
const ENTRIES: usize = 3000;
const ROUNDS: u64 = 240;

/// `manifest DIR` (manifest.sh) in one pass: the same lines, made with one
/// sha256sum and one stat over all files instead of one per file, then
/// sorted as manifest.sh sorts. Our names hold no blanks or glob
/// characters. (Not busybox xargs: it garbled a name of a 3,000-line list.)
const FAST_MANIFEST: &str = r#"fman() {
  cd "$1"
  find . -mindepth 1 -type f > /tmp/files
  : > /tmp/lines
  if [ -s /tmp/files ]; then
    sha256sum $(cat /tmp/files) > /tmp/sums
    stat -c %s $(cat /tmp/files) > /tmp/sizes
    awk 'NR==FNR {s[FNR]=$1; next} {print substr($0,1,64) "  " s[FNR] "  " substr($0,68)}' /tmp/sizes /tmp/sums > /tmp/lines
  fi
  find . -mindepth 1 -type d | sed 's|^\.\(.*\)$|DIR  -  \1/|' >> /tmp/lines
  find . -mindepth 1 -type l | while IFS= read -r p; do echo "LNK  -  ${p#.} -> $(readlink "$p")"; done >> /tmp/lines
  LC_ALL=C sort -k3 /tmp/lines
  cd /
}
"#;

/// Kernel messages a mount of our cleanly unmounted images may print.
const ACCEPTED_DMESG: &[&str] = &["nilfs version 2 loaded"];

/// The workload; returns the snapshot numbers.
fn populate(dev: &MemDevice, bs: u64, bps: u64, big_len: usize) -> Vec<Cno> {
    mkfs::mkfs(dev, &MkfsOptions::from_seed(bs + 1).geometry(bs, bps)).unwrap();
    let nilfs = Nilfs::open(dev).unwrap();
    let mut t = 1_800_000_000;
    let mut fs = Fs::mount(&nilfs, t).unwrap();
    let mut snapshots = Vec::new();
    // Height 4 at both block sizes: more than 3 * 62 * 62 1 KiB blocks, and
    // more than 3 * 254 4 KiB blocks (a root of 3 slots over full nodes).
    let big = fs.create(ino::ROOT, b"big", 0o644).unwrap();
    fs.write(big, 0, &pattern(2, big_len)).unwrap();
    let long = fs.create(ino::ROOT, &[b'n'; 255], 0o600).unwrap();
    fs.write(long, 0, b"a 255-byte name\n").unwrap();
    // 20 blocks: a B-tree, truncated below the direct map's 7 blocks and
    // grown back past it, with a sync at each step.
    let t20 = fs.create(ino::ROOT, b"shrink", 0o644).unwrap();
    fs.write(t20, 0, &pattern(3, 20 * bs as usize)).unwrap();
    snapshots.push(fs.mkcp(true).unwrap()); // before the big directory
    fs.truncate(t20, 3 * bs - 100).unwrap();
    snapshots.push(fs.mkcp(true).unwrap()); // /shrink back in the direct map
    fs.write(t20, 12 * bs, b"past the direct map again")
        .unwrap();
    fs.sync().unwrap();
    fs.truncate(t20, 9 * bs + 1).unwrap();
    let many = fs.mkdir(ino::ROOT, b"many", 0o755).unwrap();
    for n in 0..ENTRIES {
        let f = fs
            .create(many, format!("entry-{n:05}").as_bytes(), 0o644)
            .unwrap();
        fs.write(f, 0, format!("{n}\n").as_bytes()).unwrap();
    }
    let links = fs.mkdir(ino::ROOT, b"links", 0o755).unwrap();
    fs.link(big, links, b"big-hard").unwrap();
    fs.link(long, links, b"long-hard").unwrap();
    fs.symlink(links, b"to-big", b"../big").unwrap();
    fs.symlink(links, b"dangling", b"/nowhere/at/all").unwrap();
    fs.symlink(ino::ROOT, b"long-target", &[b'x'; 900]).unwrap();
    snapshots.push(fs.mkcp(true).unwrap());
    // Many small checkpoints; a few become snapshots, some plain ones go.
    let log = fs.create(ino::ROOT, b"log", 0o644).unwrap();
    let mut plain = Vec::new();
    for round in 0..ROUNDS {
        t += 1;
        fs.set_time(t);
        fs.write(log, round * 37, format!("round {round}\n").as_bytes())
            .unwrap();
        if round % 10 == 3 {
            let name = format!("entry-{:05}", round * 11);
            fs.unlink(many, name.as_bytes()).unwrap();
        }
        if round % 50 == 49 {
            fs.link(log, links, format!("log-{round}").as_bytes())
                .unwrap();
            snapshots.push(fs.mkcp(true).unwrap());
        } else {
            plain.push(fs.sync().unwrap().expect("a change to write"));
        }
    }
    for cno in plain.iter().step_by(9) {
        fs.rmcp(*cno).unwrap();
    }
    fs.unmount().unwrap();
    snapshots
}

/// What our read path says of an image: latest manifest, lscp, lssu, and
/// each snapshot's manifest.
struct Ours {
    latest: String,
    lscp: String,
    lssu: String,
    snapshots: Vec<(Cno, String)>,
}

fn read_ours(dev: &MemDevice, snapshots: &[Cno], big_len: usize) -> Ours {
    nilfs_conformance::assert_checks_clean(dev, "peer_kernel_big_workload.rs:145");
    let nilfs = Nilfs::open(dev).unwrap();
    let view = CheckpointView::open(&nilfs, None).unwrap();
    let (_, big) = view.resolve(b"/big", false).unwrap();
    assert_eq!(big.size, big_len as u64);
    let BmapRoot::Btree(root) = BmapRoot::decode(&big.bmap).unwrap() else {
        panic!("/big is not a B-tree");
    };
    assert!(root.level + 1 >= 4, "/big has height {}", root.level + 1);
    let (_, shrink) = view.resolve(b"/shrink", false).unwrap();
    assert!(
        matches!(BmapRoot::decode(&shrink.bmap).unwrap(), BmapRoot::Btree(_)),
        "/shrink should be a B-tree again"
    );
    let small = CheckpointView::open(&nilfs, Some(snapshots[1])).unwrap();
    let (_, shrunk) = small.resolve(b"/shrink", false).unwrap();
    assert!(
        matches!(BmapRoot::decode(&shrunk.bmap).unwrap(), BmapRoot::Direct(_)),
        "/shrink truncated to 3 blocks should be a direct map"
    );
    let (_, many) = view.resolve(b"/many", false).unwrap();
    let names = view.readdir(&many).unwrap();
    let files = names.iter().filter(|e| !e.name.starts_with(b".")).count();
    assert_eq!(files, ENTRIES - 24, "one unlink every 10 rounds");
    Ours {
        latest: manifest(&view).unwrap(),
        lscp: tools::lscp(dev, &LscpOptions::default()).unwrap(),
        lssu: tools::lssu(dev, &LssuOptions::default()).unwrap(),
        snapshots: snapshots
            .iter()
            .map(|&c| {
                let v = CheckpointView::open(&nilfs, Some(c)).unwrap();
                (c, manifest(&v).unwrap())
            })
            .collect(),
    }
}

#[test]
fn the_kernel_reads_our_big_workload() {
    let Some(dir) = guest("the_kernel_reads_our_big_workload", "kernel-big") else {
        return;
    };
    let mut images = Vec::new();
    let mut ours = Vec::new();
    for (i, &(bs, bps, big_len)) in GEOMETRIES.iter().enumerate() {
        let dev = MemDevice::new(DEV_BYTES);
        let snapshots = populate(&dev, bs, bps, big_len);
        assert_eq!(snapshots.len(), 7); // 3 + 240 / 50
        let o = read_ours(&dev, &snapshots, big_len);
        assert!(o.lscp.lines().count() > 200, "{}", o.lscp);
        ours.push(o);
        export_to(&dir, &format!("big{i}.img"), &dev, &mut images);
    }

    let mut script = format!("set -e\n{FAST_MANIFEST}mkdir -p /mnt /snap\n");
    for d in &DEVS[..images.len()] {
        script.push_str(&format!(
            "mount -t nilfs2 -o ro /dev/{d} /mnt\n\
             echo @@MANIFEST {d}; fman /mnt\necho @@LSCP {d}; lscp\necho @@LSSU {d}; lssu\n\
             first=1\n\
             for c in $(lscp -s | awk 'NR>1 {{print $1}}'); do\n\
               mount -t nilfs2 -o ro,cp=$c /dev/{d} /snap\n\
               echo @@SNAP {d} $c; fman /snap\n\
               if [ $first = 1 ]; then echo @@SLOW {d} $c; manifest /snap; first=0; fi\n\
               umount /snap\n\
             done\n\
             umount /mnt\n"
        ));
    }
    script.push_str("echo @@DMESG; dmesg | grep -i nilfs || true\n");
    let started = std::time::Instant::now();
    let secs = sections(&kernel_run(&images, &script, &dir, "big.sh"));
    eprintln!("guest run: {:?}", started.elapsed());
    for (i, o) in ours.iter().enumerate() {
        let d = DEVS[i];
        let ctx = format!("{d} (-b {})", GEOMETRIES[i].0);
        assert_eq!(secs[&format!("MANIFEST {d}")], o.latest, "{ctx}: manifest");
        assert_eq!(secs[&format!("LSCP {d}")], o.lscp, "{ctx}: lscp");
        assert_eq!(secs[&format!("LSSU {d}")], o.lssu, "{ctx}: lssu");
        let theirs: Vec<(Cno, &String)> = secs
            .iter()
            .filter_map(|(k, v)| {
                let cno = k.strip_prefix(&format!("SNAP {d} "))?;
                Some((Cno(cno.parse().unwrap()), v))
            })
            .collect();
        let mut theirs_sorted = theirs.clone();
        theirs_sorted.sort_by_key(|(c, _)| c.0);
        let ours_refs: Vec<(Cno, &String)> = o.snapshots.iter().map(|(c, m)| (*c, m)).collect();
        assert_eq!(theirs_sorted, ours_refs, "{ctx}: snapshots");
        // The fast listing agrees with manifest.sh on the first snapshot.
        let first = o.snapshots[0].0 .0;
        assert_eq!(
            secs[&format!("SLOW {d} {first}")],
            o.snapshots[0].1,
            "{ctx}: manifest.sh"
        );
    }
    assert_dmesg_clean(&secs["DMESG"], ACCEPTED_DMESG);
}
