//! The first slice of the write path end to end: mount a fresh image read-
//! write, create files and directories, write data (direct maps, B-trees,
//! holes), sync, unmount; then the read path, which shares nothing with the
//! write path above the format, must see exactly that tree at the new
//! checkpoint, every checksum must verify, and the older checkpoint must
//! still show the fresh filesystem.

use nilfs_testkit::image::{assert_checks_clean, fresh};
use nilfs_testkit::{pattern, sha256_hex};

use std::collections::BTreeMap;

use nilfs::check::verify_checksums;

use nilfs::device::MemDevice;
use nilfs::format::{ino, Cno};
use nilfs::fs::Fs;
use nilfs::inspect::manifest::manifest;
use nilfs::mkfs::{self, MkfsOptions};
use nilfs::posix::CheckpointView;
use nilfs::the_nilfs::Nilfs;

#[test]
fn files_and_directories_survive_sync_and_remount() {
    for (bs, bps) in [(4096u64, 512u64), (1024, 256), (2048, 128)] {
        let dev = fresh(128 << 20, bs, bps);
        let mut expect: BTreeMap<String, Vec<u8>> = BTreeMap::new();
        {
            let nilfs = Nilfs::open(&dev).unwrap();
            let mut fs = Fs::mount(&nilfs, 1_800_000_000).unwrap();
            let small = fs.create(ino::ROOT, b"small", 0o644).unwrap();
            fs.write(small, 0, b"hello, nilfs\n").unwrap();
            expect.insert("/small".into(), b"hello, nilfs\n".to_vec());
            let mid = fs.create(ino::ROOT, b"mid", 0o600).unwrap();
            let d = pattern(1, 30_000);
            fs.write(mid, 0, &d).unwrap();
            expect.insert("/mid".into(), d);
            let big = fs.create(ino::ROOT, b"big", 0o644).unwrap();
            let d = pattern(2, 3 << 20);
            fs.write(big, 0, &d).unwrap();
            expect.insert("/big".into(), d);
            let sparse = fs.create(ino::ROOT, b"sparse", 0o644).unwrap();
            fs.write(sparse, 5_000_000, b"tail").unwrap();
            let mut d = vec![0u8; 5_000_004];
            d[5_000_000..].copy_from_slice(b"tail");
            expect.insert("/sparse".into(), d);
            let sub = fs.mkdir(ino::ROOT, b"sub", 0o755).unwrap();
            let deeper = fs.mkdir(sub, b"deeper", 0o755).unwrap();
            let leaf = fs.create(deeper, b"leaf", 0o644).unwrap();
            fs.write(leaf, 0, b"leaf\n").unwrap();
            expect.insert("/sub/deeper/leaf".into(), b"leaf\n".to_vec());
            for n in 0..200 {
                let f = fs
                    .create(sub, format!("f{n:03}").as_bytes(), 0o644)
                    .unwrap();
                fs.write(f, 0, format!("entry {n}\n").as_bytes()).unwrap();
                expect.insert(format!("/sub/f{n:03}"), format!("entry {n}\n").into_bytes());
            }
            assert_eq!(fs.sync().unwrap(), Some(Cno(2)));
            // A second construction on top: overwrite part of big, grow small.
            fs.set_time(1_800_000_100);
            fs.write(big, 4096 * 100 + 10, b"OVERWRITE").unwrap();
            expect.get_mut("/big").unwrap()[4096 * 100 + 10..4096 * 100 + 19]
                .copy_from_slice(b"OVERWRITE");
            fs.write(small, 13, b"more\n").unwrap();
            expect
                .get_mut("/small")
                .unwrap()
                .extend_from_slice(b"more\n");
            fs.unmount().unwrap();
        }
        let ctx = format!("-b {bs} -B {bps}");
        let r = verify_checksums(&dev).unwrap_or_else(|e| panic!("{ctx}: {e}"));
        assert_checks_clean(&dev, &ctx);
        assert!(r.super_roots >= 3, "{ctx}: {r:?}");
        let nilfs = Nilfs::open(&dev).unwrap();
        assert_eq!(nilfs.scan.cno, Cno(3), "{ctx}");
        let view = CheckpointView::open(&nilfs, None).unwrap();
        for (path, data) in &expect {
            let (_, inode) = view
                .resolve(path.as_bytes(), true)
                .unwrap_or_else(|e| panic!("{ctx}: {path}: {e}"));
            let got = view.read_all(&inode).unwrap();
            assert!(
                got == *data,
                "{ctx}: {path}: {} bytes read, {} expected",
                got.len(),
                data.len()
            );
        }
        let m = manifest(&view).unwrap();
        assert!(
            m.contains(&format!(
                "{}  {}  /big\n",
                sha256_hex(&expect["/big"]),
                3 << 20
            )),
            "{ctx}:\n{m}"
        );
        assert!(m.contains("DIR  -  /sub/deeper/\n"), "{ctx}");
        // Checkpoint 1 still shows the fresh filesystem; 2 the first sync.
        let one = CheckpointView::open(&nilfs, Some(Cno(1))).unwrap();
        assert_eq!(
            manifest(&one).unwrap(),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855  0  /.nilfs\n"
        );
        let two = CheckpointView::open(&nilfs, Some(Cno(2))).unwrap();
        let (_, small) = two.resolve(b"/small", false).unwrap();
        assert_eq!(two.read_all(&small).unwrap(), b"hello, nilfs\n");
    }
}

/// Unlink, rmdir, rename (plain, over a file, a directory across
/// directories), hard links, symlinks and truncation across the
/// direct/B-tree boundary, over two constructions; then the read path sees
/// exactly the resulting tree, older checkpoints keep theirs, and the DAT
/// ended the versions that went away.
#[test]
fn namespace_operations_and_truncate() {
    let dev = fresh(128 << 20, 1024, 256);
    {
        let nilfs = Nilfs::open(&dev).unwrap();
        let mut fs = Fs::mount(&nilfs, 1_800_000_000).unwrap();
        let a = fs.create(ino::ROOT, b"a", 0o644).unwrap();
        fs.write(a, 0, &pattern(3, 20_000)).unwrap();
        let b = fs.create(ino::ROOT, b"b", 0o644).unwrap();
        fs.write(b, 0, b"bee").unwrap();
        let d1 = fs.mkdir(ino::ROOT, b"d1", 0o755).unwrap();
        let d2 = fs.mkdir(ino::ROOT, b"d2", 0o755).unwrap();
        fs.mkdir(d1, b"inner", 0o755).unwrap();
        let gone = fs.create(d1, b"gone", 0o644).unwrap();
        fs.write(gone, 0, &pattern(4, 9000)).unwrap();
        fs.sync().unwrap();
        // Checkpoint 3 changes everything around.
        fs.link(b, d2, b"b-hardlink").unwrap();
        fs.symlink(ino::ROOT, b"to-a", b"a").unwrap();
        fs.unlink(d1, b"gone").unwrap();
        fs.rename(ino::ROOT, b"b", d1, b"b-moved").unwrap();
        fs.rename(d1, b"inner", d2, b"inner").unwrap();
        let c = fs.create(ino::ROOT, b"c", 0o644).unwrap();
        fs.write(c, 0, b"to be replaced").unwrap();
        let e = fs.create(ino::ROOT, b"e", 0o644).unwrap();
        fs.write(e, 0, b"replacement").unwrap();
        fs.rename(ino::ROOT, b"e", ino::ROOT, b"c").unwrap();
        fs.truncate(a, 4000).unwrap(); // B-tree back to a direct map
        fs.truncate(a, 10_000).unwrap(); // and a hole after it
        assert!(matches!(
            fs.rmdir(ino::ROOT, b"d2"),
            Err(nilfs::Error::Errno {
                errno: nilfs::Errno::ENOTEMPTY,
                ..
            })
        ));
        assert!(matches!(
            fs.rename(ino::ROOT, b"d2", d2, b"x"),
            Err(nilfs::Error::Errno {
                errno: nilfs::Errno::EINVAL,
                ..
            })
        ));
        fs.rmdir(d2, b"inner").unwrap();
        fs.unmount().unwrap();
    }
    verify_checksums(&dev).unwrap();
    assert_checks_clean(&dev, "fs_write.rs");
    let nilfs = Nilfs::open(&dev).unwrap();
    let view = CheckpointView::open(&nilfs, None).unwrap();
    let mut a = pattern(3, 4000);
    a.resize(10_000, 0);
    let expect = format!(
        "{}  10000  /a\n{}  11  /c\nDIR  -  /d1/\n{}  3  /d1/b-moved\nDIR  -  /d2/\n{}  3  /d2/b-hardlink\nLNK  -  /to-a -> a\n",
        sha256_hex(&a),
        sha256_hex(b"replacement"),
        sha256_hex(b"bee"),
        sha256_hex(b"bee")
    );
    let got = manifest(&view).unwrap();
    // .nilfs comes first in the listing.
    assert_eq!(
        got.lines()
            .skip(1)
            .map(|l| format!("{l}\n"))
            .collect::<String>(),
        expect,
        "{got}"
    );
    let (_, b) = view.resolve(b"/d1/b-moved", false).unwrap();
    assert_eq!(b.links_count, 2);
    let (_, d1) = view.resolve(b"/d1", false).unwrap();
    assert_eq!(d1.links_count, 2, "d1 lost its subdirectory");
    // Checkpoint 2 still has the tree before the changes.
    let two = CheckpointView::open(&nilfs, Some(Cno(2))).unwrap();
    let (_, gone) = two.resolve(b"/d1/gone", false).unwrap();
    assert_eq!(two.read_all(&gone).unwrap(), pattern(4, 9000));
}

/// fdatasync writes a data-only log; after a crash, a read-only look
/// (no recovery) still shows the last checkpoint, and a read-write mount
/// rolls the log forward into a new checkpoint, as nilfs_salvage_orphan_logs
/// does. fsync and an fdatasync that needs an inode sync make checkpoints.
#[test]
fn fdatasync_survives_a_crash_by_roll_forward() {
    let dev = fresh(64 << 20, 1024, 64);
    let original = pattern(7, 10_000);
    let mut updated = original.clone();
    updated[100..200].copy_from_slice(&[0xAB; 100]);
    updated[9000..9050].copy_from_slice(&[0xCD; 50]);
    {
        let nilfs = Nilfs::open(&dev).unwrap();
        let mut fs = Fs::mount(&nilfs, 1_800_000_000).unwrap();
        let f = fs.create(ino::ROOT, b"f", 0o644).unwrap();
        fs.write(f, 0, &original).unwrap();
        // A new file needs an inode sync: fdatasync makes a checkpoint.
        fs.fdatasync(f).unwrap();
        fs.write(f, 100, &[0xAB; 100]).unwrap();
        fs.write(f, 9000, &[0xCD; 50]).unwrap();
        fs.fdatasync(f).unwrap(); // data only: an SS_SYNDT log
                                  // Crash: the Fs is dropped without unmounting.
    }
    let nilfs = Nilfs::open(&dev).unwrap();
    assert_eq!(
        nilfs.scan.cno,
        Cno(2),
        "the data-only log made no checkpoint"
    );
    assert!(
        nilfs.scan.lsegs_start.is_some() && nilfs.scan.lsegs_end.is_some(),
        "no orphan log found"
    );
    let view = CheckpointView::open(&nilfs, None).unwrap();
    let (_, f) = view.resolve(b"/f", false).unwrap();
    assert_eq!(view.read_all(&f).unwrap(), original);
    {
        let mut fs = Fs::mount(&nilfs, 1_800_000_100).unwrap(); // rolls forward
        let f = fs.resolve(b"/f").unwrap();
        assert_eq!(fs.read(f, 0, 20_000).unwrap(), updated);
        fs.unmount().unwrap();
    }
    verify_checksums(&dev).unwrap();
    assert_checks_clean(&dev, "fs_write.rs");
    let nilfs = Nilfs::open(&dev).unwrap();
    assert_eq!(nilfs.scan.cno, Cno(3), "recovery wrote one checkpoint");
    let view = CheckpointView::open(&nilfs, None).unwrap();
    let (_, f) = view.resolve(b"/f", false).unwrap();
    assert_eq!(view.read_all(&f).unwrap(), updated);
    // The replayed log is never replayed again.
    assert!(nilfs.scan.lsegs_start.is_none());
}

/// Constructions that run across many segments and many sufile blocks
/// (1 KiB blocks, 16-block segments: a sufile block covers 64 segments):
/// every sync lands, the data reads back, the checksums hold.
#[test]
fn many_segments_and_sufile_blocks() {
    let dev = fresh(64 << 20, 1024, 16);
    let data = pattern(11, 800_000);
    {
        let nilfs = Nilfs::open(&dev).unwrap();
        let mut fs = Fs::mount(&nilfs, 1_800_000_000).unwrap();
        let f = fs.create(ino::ROOT, b"f", 0o644).unwrap();
        for (k, chunk) in data.chunks(100_000).enumerate() {
            fs.write(f, (k * 100_000) as u64, chunk).unwrap();
            fs.sync().unwrap();
        }
        // Overwrites spread over the file, each sync rewriting many leaves.
        for k in 0..10u64 {
            fs.write(f, k * 59_999, b"0123456789").unwrap();
            fs.sync().unwrap();
        }
        fs.unmount().unwrap();
    }
    let mut expect = data;
    for k in 0..10usize {
        expect[k * 59_999..k * 59_999 + 10].copy_from_slice(b"0123456789");
    }
    verify_checksums(&dev).unwrap();
    assert_checks_clean(&dev, "fs_write.rs");
    let nilfs = Nilfs::open(&dev).unwrap();
    // Past segment 62: the second sufile block.
    assert!(
        nilfs.scan.segnum.0 > 70,
        "only reached segment {}",
        nilfs.scan.segnum
    );
    let view = CheckpointView::open(&nilfs, None).unwrap();
    let (_, f) = view.resolve(b"/f", false).unwrap();
    assert!(view.read_all(&f).unwrap() == expect);
}

/// A read-only mount refuses every change with EROFS and writes nothing.
#[test]
fn a_read_only_mount_refuses_changes_and_writes_nothing() {
    let dev = fresh(32 << 20, 1024, 64);
    {
        let nilfs = Nilfs::open(&dev).unwrap();
        let mut fs = Fs::mount(&nilfs, 1_800_000_000).unwrap();
        let f = fs.create(ino::ROOT, b"f", 0o644).unwrap();
        fs.write(f, 0, b"data").unwrap();
        fs.mkdir(ino::ROOT, b"d", 0o755).unwrap();
        fs.unmount().unwrap();
    }
    let before = nilfs_image_bytes(&dev);
    {
        let nilfs = Nilfs::open(&dev).unwrap();
        let mut fs = Fs::mount_read_only(&nilfs, 1_800_000_100).unwrap();
        let f = fs.resolve(b"/f").unwrap();
        let d = fs.resolve(b"/d").unwrap();
        let erofs = |r: nilfs::Result<()>| {
            matches!(
                r,
                Err(nilfs::Error::Errno {
                    errno: nilfs::Errno::EROFS,
                    ..
                })
            )
        };
        assert!(erofs(fs.write(f, 0, b"x").map(|_| ())));
        assert!(erofs(fs.truncate(f, 0)));
        assert!(erofs(fs.create(ino::ROOT, b"g", 0o644).map(|_| ())));
        assert!(erofs(fs.mkdir(ino::ROOT, b"e", 0o755).map(|_| ())));
        assert!(erofs(fs.unlink(ino::ROOT, b"f")));
        assert!(erofs(fs.rmdir(ino::ROOT, b"d")));
        assert!(erofs(fs.rename(ino::ROOT, b"f", d, b"f")));
        assert!(erofs(fs.link(f, d, b"l")));
        assert!(erofs(fs.symlink(ino::ROOT, b"s", b"f").map(|_| ())));
        assert!(erofs(fs.mkcp(false).map(|_| ())));
        // An existing name is still EEXIST, as the VFS looks it up first.
        assert!(matches!(
            fs.create(ino::ROOT, b"f", 0o644),
            Err(nilfs::Error::Errno {
                errno: nilfs::Errno::EEXIST,
                ..
            })
        ));
        assert_eq!(fs.read(f, 0, 10).unwrap(), b"data");
        assert_eq!(fs.sync().unwrap(), None);
        fs.unmount().unwrap();
    }
    assert!(
        nilfs_image_bytes(&dev) == before,
        "a read-only mount wrote to the device"
    );
}

fn nilfs_image_bytes(dev: &MemDevice) -> Vec<u8> {
    use nilfs::device::BlockDevice;
    let mut v = vec![0u8; dev.size_bytes() as usize];
    dev.read_at(0, &mut v).unwrap();
    v
}

/// Filling the device: operations that add blocks get ENOSPC once the
/// clean segments beyond the reserved ones cannot take more
/// (nilfs_near_disk_full); nothing already accepted is lost, the image
/// stays consistent, and it mounts again.
#[test]
fn a_full_device_gives_enospc_and_stays_consistent() {
    let dev = fresh(2 << 20, 1024, 16);
    let mut accepted: Vec<(String, Vec<u8>)> = Vec::new();
    let mut enospc = false;
    {
        let nilfs = Nilfs::open(&dev).unwrap();
        let mut fs = Fs::mount(&nilfs, 1_800_000_000).unwrap();
        for n in 0..400u64 {
            let name = format!("f{n}");
            let data = pattern(n, 9000);
            let r = fs
                .create(ino::ROOT, name.as_bytes(), 0o644)
                .and_then(|f| fs.write(f, 0, &data).map(|_| f));
            match r {
                Ok(_) => accepted.push((name, data)),
                Err(nilfs::Error::Errno {
                    errno: nilfs::Errno::ENOSPC,
                    ..
                }) => {
                    enospc = true;
                    break;
                }
                Err(e) => panic!("file {n}: {e}"),
            }
            if n % 4 == 3 {
                fs.sync().unwrap();
            }
        }
        fs.unmount().unwrap();
    }
    assert!(enospc, "the device never filled up");
    verify_checksums(&dev).unwrap();
    assert_checks_clean(&dev, "fs_write.rs");
    let nilfs = Nilfs::open(&dev).unwrap();
    let view = CheckpointView::open(&nilfs, None).unwrap();
    // A create that succeeded before its write hit ENOSPC leaves an empty
    // file; every accepted write is there.
    for (name, data) in &accepted {
        let (_, inode) = view.resolve(format!("/{name}").as_bytes(), false).unwrap();
        assert!(view.read_all(&inode).unwrap() == *data, "{name}");
    }
    // And it mounts read-write again.
    Fs::mount(&nilfs, 1_800_000_100).unwrap().unmount().unwrap();
}

/// One sync of 1,500 one-byte files on 1 KiB blocks and 16-block segments
/// outgrows the constructor's first estimate: the retry extends into
/// segments whose usage entries lie in sufile blocks the first pass did
/// not prepare, and later passes insert sufile blocks into a mapping whose
/// nodes were already given new addresses.
///
// postmortem: Fs::sync refused such constructions ("needs sufile blocks
// beyond its first extension, not supported yet") and Bmap::insert refused
// to run after assignment began. The kernel's nilfs_segctor_collect simply
// collects the sufile's dirty blocks again on each retry; ours now prepares
// the new blocks and assigns only the nodes not yet assigned.
#[test]
fn a_construction_that_outgrows_its_estimate_reaches_new_sufile_blocks() {
    let dev = fresh(1200 * 16 * 1024, 1024, 16);
    {
        let nilfs = Nilfs::open(&dev).unwrap();
        let mut fs = Fs::mount(&nilfs, 1_800_000_000).unwrap();
        for r in 0..6 {
            let d = fs
                .mkdir(ino::ROOT, format!("d{r}").as_bytes(), 0o755)
                .unwrap();
            for n in 0..1500 {
                let f = fs.create(d, format!("f{n}").as_bytes(), 0o644).unwrap();
                fs.write(f, 0, &[b'a' + (n % 26) as u8]).unwrap();
            }
            fs.sync().unwrap_or_else(|e| panic!("round {r}: {e}"));
        }
        fs.unmount().unwrap();
    }
    verify_checksums(&dev).unwrap();
    assert_checks_clean(&dev, "fs_write.rs");
    let nilfs = Nilfs::open(&dev).unwrap();
    let view = CheckpointView::open(&nilfs, None).unwrap();
    for r in 0..6 {
        for n in [0u32, 777, 1499] {
            let (_, inode) = view
                .resolve(format!("/d{r}/f{n}").as_bytes(), false)
                .unwrap();
            assert_eq!(view.read_all(&inode).unwrap(), [b'a' + (n % 26) as u8]);
        }
    }
}

/// An injected write-path bug: every log's sufile header block goes out
/// with `sh_ndirtysegs` one too high (the logs are sealed after the bug, as
/// a buggy constructor would seal them). Nothing a read-back test compares
/// changes, so the namespace reads as written; nilref check fails it.
#[test]
fn a_write_path_bug_that_reads_back_fine_is_caught_by_check() {
    use nilfs::device::BlockDevice;
    use nilfs::format::segsum::{seal_log, Binfo, Summary};
    use nilfs::format::superblock::SuperBlock;

    struct Buggy {
        inner: MemDevice,
        bs: u64,
        seed: u32,
    }
    impl BlockDevice for Buggy {
        fn size_bytes(&self) -> u64 {
            self.inner.size_bytes()
        }
        fn read_at(&self, off: u64, buf: &mut [u8]) -> nilfs::Result<()> {
            self.inner.read_at(off, buf)
        }
        fn write_at(&self, off: u64, buf: &[u8]) -> nilfs::Result<()> {
            let mut log = buf.to_vec();
            if let Ok(s) = Summary::decode(&log, self.bs as u32) {
                if log.len() as u64 == u64::from(s.header.nblocks) * self.bs {
                    let sufile_header = s.block_entries(self.bs as u32).find(|e| {
                        e.ino == ino::SUFILE
                            && matches!(e.binfo, Binfo::DataV { blkoff, .. } if blkoff.0 == 0)
                    });
                    if let Some(e) = sufile_header {
                        let at = (e.index * self.bs) as usize + 8;
                        let n = u64::from_le_bytes(log[at..at + 8].try_into().unwrap());
                        log[at..at + 8].copy_from_slice(&(n + 1).to_le_bytes());
                        seal_log(&mut log, self.seed);
                    }
                }
            }
            self.inner.write_at(off, &log)
        }
        fn flush(&self) -> nilfs::Result<()> {
            self.inner.flush()
        }
    }

    let inner = MemDevice::new(32 << 20);
    mkfs::mkfs(
        &inner,
        &MkfsOptions {
            block_size: 1024,
            blocks_per_segment: 256,
            ..Default::default()
        },
    )
    .unwrap();
    let mut raw = vec![0u8; 1024];
    inner.read_at(1024, &mut raw).unwrap();
    let seed = SuperBlock::decode(&raw).unwrap().crc_seed;
    let dev = Buggy {
        inner,
        bs: 1024,
        seed,
    };
    {
        let nilfs = Nilfs::open(&dev).unwrap();
        let mut fs = Fs::mount(&nilfs, 1_800_000_000).unwrap();
        let f = fs.create(ino::ROOT, b"f", 0o644).unwrap();
        fs.write(f, 0, &pattern(3, 50_000)).unwrap();
        fs.unmount().unwrap();
    }
    // Read back: the file is exactly what was written.
    let nilfs = Nilfs::open(&dev.inner).unwrap();
    let view = CheckpointView::open(&nilfs, None).unwrap();
    let (_, f) = view.resolve(b"/f", true).unwrap();
    assert_eq!(view.read_all(&f).unwrap(), pattern(3, 50_000));
    verify_checksums(&dev.inner).unwrap();
    // nilref check is not fooled.
    let r = nilfs::check::check_device(&dev.inner, &Default::default());
    assert!(r.has(nilfs::check::Code::SuDirtyCount), "{r}");
    assert_eq!(r.exit_code(), 4);
}

/// Attributes and special files reach the disk as the kernel writes them
/// and read back through the read path: a device's number in
/// `i_device_code` (`huge_encode_dev`), no mapping for a FIFO or a device,
/// chmod/chown/utimensat values with nanoseconds; and statfs counts as
/// `nilfs_statfs` does on the fresh and the changed file system.
#[test]
fn attributes_and_special_files_survive_remount() {
    use nilfs::format::inode::{S_IFBLK, S_IFCHR, S_IFIFO, S_IFMT, S_IFSOCK};
    let (bs, bps, size) = (1024u64, 64u64, 32u64 << 20);
    let dev = fresh(size, bs, bps);
    let nilfs = Nilfs::open(&dev).unwrap();
    let nsegs = nilfs.sb.nsegments;
    let first = nilfs.sb.first_data_block;
    let mut fs = Fs::mount(&nilfs, 1_800_000_000).unwrap();
    let st = fs.statfs().unwrap();
    // 1 KiB blocks: 8192 entries a group, 256 groups a descriptor block.
    assert_eq!((st.bsize, st.namelen), (1024, 255));
    assert_eq!(st.blocks, nsegs * bps - first);
    assert_eq!(
        (st.files, st.ffree),
        (8192 * 256, 8192 * 256 - 2),
        "root and .nilfs"
    );
    let nrsv = nilfs::sufile::nrsvsegs(nsegs, 5) * bps;
    assert_eq!(st.bavail, st.bfree - nrsv);
    assert!(st.bfree.is_multiple_of(bps) && st.bfree <= (nsegs - 2) * bps);

    let mut p = fs.paths();
    p.mknod(b"/chr", S_IFCHR | 0o620, [4, 300]).unwrap();
    p.mknod(b"/blk", S_IFBLK | 0o600, [4095, (1 << 20) - 1])
        .unwrap();
    p.mknod(b"/fifo", S_IFIFO | 0o644, [9, 9]).unwrap();
    p.mknod(b"/sock", S_IFSOCK | 0o755, [0, 0]).unwrap();
    p.create(b"/f", 0o644, true).unwrap();
    p.chmod(b"/f", 0o6755).unwrap();
    p.chown(b"/f", Some(1000), Some(100), true).unwrap();
    p.utimes(b"/f", Some(-1_000_000_001), true).unwrap();
    let e = p.mknod(b"/d/", S_IFIFO | 0o644, [0, 0]).unwrap_err();
    assert!(
        e.to_string().contains("ENOENT") || format!("{e:?}").contains("ENOENT"),
        "{e}"
    );
    assert_eq!(fs.statfs().unwrap().ffree, 8192 * 256 - 7);
    fs.unmount().unwrap();
    assert_checks_clean(&dev, "after mknod and setattr");

    let nilfs = Nilfs::open(&dev).unwrap();
    let view = CheckpointView::open(&nilfs, None).unwrap();
    let get = |p: &[u8]| view.resolve(p, false).unwrap().1;
    let chr = get(b"/chr");
    assert_eq!((chr.mode & S_IFMT, chr.rdev()), (S_IFCHR, Some([4, 300])));
    assert_eq!(chr.bmap[0], (300 & 0xff) | (4 << 8) | ((300 & !0xff) << 12));
    assert_eq!(chr.bmap[1..], [0; 6], "no mapping after the device number");
    assert_eq!(get(b"/blk").rdev(), Some([4095, (1 << 20) - 1]));
    assert_eq!(get(b"/fifo").rdev(), None);
    assert_eq!(get(b"/fifo").bmap, [0; 7], "a FIFO's number is dropped");
    let f = get(b"/f");
    // chown cleared S_ISUID, and S_ISGID (group execute is set).
    assert_eq!((f.mode & 0o7777, f.uid, f.gid), (0o755, 1000, 100));
    assert_eq!((f.mtime as i64, f.mtime_nsec), (-2, 999_999_999));
    let m = manifest(&view).unwrap();
    for line in [
        "CHR  4:300  /chr",
        "BLK  4095:1048575  /blk",
        "FIFO  -  /fifo",
        "SOCK  -  /sock",
    ] {
        assert!(m.lines().any(|l| l == line), "{line} in\n{m}");
    }
}

/// An open file outlives its last name until its last close, as the
/// VFS's reference keeps the kernel's inode (found by pjdfstest's
/// `unlink::open_file_not_freed` on `nilref mount`, which answered ESTALE):
/// reads and writes go on, a construction in between writes the inode
/// with no links, and the last release frees it; an unmount with the file
/// still open frees it too. The access time a utimensat set lives in
/// memory only (also found by pjdfstest).
#[test]
fn an_unlinked_open_file_lives_until_its_last_close() {
    unlinked_open_file(None);
}

/// The same with the inode cache's limit at 0: every construction lets go
/// of every file it may, and must keep the unlinked open one and the one
/// whose access time is only in memory.
#[test]
fn an_unlinked_open_file_outlives_the_inode_cache() {
    unlinked_open_file(Some(0));
}

fn unlinked_open_file(cache_limit: Option<usize>) {
    let dev = fresh(32 << 20, 1024, 64);
    let nilfs = Nilfs::open(&dev).unwrap();
    let mut fs = Fs::mount(&nilfs, 1_800_000_000).unwrap();
    if let Some(n) = cache_limit {
        fs.set_inode_cache_limit(n);
    }
    let f = fs.create(ino::ROOT, b"f", 0o644).unwrap();
    fs.write(f, 0, &pattern(5000, 1)).unwrap();
    let g = fs.create(ino::ROOT, b"g", 0o644).unwrap();
    fs.write(g, 0, b"kept open at unmount").unwrap();
    fs.sync().unwrap();
    let files = fs.statfs().unwrap().ffree;

    fs.open_file(f).unwrap();
    fs.open_file(f).unwrap();
    fs.open_file(g).unwrap();
    fs.unlink(ino::ROOT, b"f").unwrap();
    fs.unlink(ino::ROOT, b"g").unwrap();
    assert_eq!(fs.lookup(ino::ROOT, b"f").unwrap(), None);
    assert_eq!(fs.stat(f).unwrap().links_count, 0);
    // vfs_link: no new name for an inode that has none left. On `nilref
    // mount` a lookup answered before a concurrent unlink sent such a
    // link (the concurrent campaign, seed 8 of a run of 80): it went
    // through, and the image had a name for an inode freed later.
    let e = fs.link(f, ino::ROOT, b"again").unwrap_err();
    assert!(
        matches!(
            e,
            nilfs::Error::Errno {
                errno: nilfs::Errno::ENOENT,
                ..
            }
        ),
        "{e}"
    );
    assert_eq!(fs.lookup(ino::ROOT, b"again").unwrap(), None);
    assert_eq!(fs.stat(f).unwrap().links_count, 0);
    fs.write(f, 5000, b"after unlink").unwrap();
    fs.sync().unwrap();
    assert_checks_clean(&dev, "a construction with an unlinked open file");
    assert_eq!(fs.read(f, 4990, 100).unwrap()[10..], b"after unlink"[..]);
    assert_eq!(fs.statfs().unwrap().ffree, files, "still counted");
    fs.release_file(f).unwrap();
    assert!(fs.stat(f).is_ok(), "one open is left");
    fs.release_file(f).unwrap();
    assert!(fs.stat(f).is_err(), "the last close evicts it");
    assert_eq!(fs.statfs().unwrap().ffree, files + 1);

    let h = fs.create(ino::ROOT, b"h", 0o644).unwrap();
    let mtime = fs.stat(h).unwrap().mtime_ns();
    assert_eq!(
        fs.atime_ns(h).unwrap(),
        mtime,
        "atime is loaded from i_mtime"
    );
    fs.setattr(
        h,
        nilfs::fs::SetAttr {
            atime: Some(1_900_000_000_123_456_789),
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(fs.atime_ns(h).unwrap(), 1_900_000_000_123_456_789);
    assert_eq!(fs.stat(h).unwrap().mtime_ns(), mtime);
    fs.sync().unwrap();
    assert_eq!(
        fs.atime_ns(h).unwrap(),
        1_900_000_000_123_456_789,
        "the in-memory access time outlives a construction"
    );

    fs.unmount().unwrap();
    assert_checks_clean(&dev, "after an unmount with an unlinked file open");
    let nilfs = Nilfs::open(&dev).unwrap();
    let mut fs = Fs::mount(&nilfs, 1_800_000_100).unwrap();
    assert_eq!(
        fs.statfs().unwrap().ffree,
        files + 1,
        "f and g freed (g at the unmount), h made"
    );
    assert!(fs.stat(g).is_err());
    assert_eq!(
        fs.atime_ns(h).unwrap(),
        mtime,
        "the access time was never on disk"
    );
    fs.unmount().unwrap();
}

/// `CheckpointView::read_into` walks only the part of the tree a range
/// needs (`bmap::for_each_in`) and reads runs of whole blocks in one device
/// call; on a three-level tree of a sparse file (1 KiB blocks, 62 keys a
/// node), every range reads exactly what the whole-file map says, holes as
/// zeros and partial blocks at both ends included.
#[test]
fn ranged_reads_agree_with_the_whole_file_map() {
    use nilfs::rng::SplitMix64;
    let dev = MemDevice::new(64 << 20);
    mkfs::mkfs(
        &dev,
        &MkfsOptions {
            block_size: 1024,
            blocks_per_segment: 256,
            ..Default::default()
        },
    )
    .unwrap();
    let mut rng = SplitMix64::new(11);
    // 8,000 block slots, about half written: a three-level tree.
    let mut expect = vec![0u8; 8_000 * 1024];
    {
        let nilfs = Nilfs::open(&dev).unwrap();
        let mut fs = Fs::mount(&nilfs, 1_800_000_000).unwrap();
        let f = fs.create(ino::ROOT, b"sparse", 0o644).unwrap();
        for b in 0..8_000u64 {
            if rng.next_u64().is_multiple_of(2) {
                let data = pattern(b, 1024);
                fs.write(f, b * 1024, &data).unwrap();
                expect[(b * 1024) as usize..][..1024].copy_from_slice(&data);
            }
        }
        // A size that ends inside a block.
        fs.truncate(f, 8_000 * 1024 - 300).unwrap();
        expect.truncate(8_000 * 1024 - 300);
        fs.unmount().unwrap();
    }
    // nilref check reads a small image on one thread and a larger one
    // with a second thread reading ahead: both ways, the same report.
    let report = |inline_bytes| {
        let r = nilfs::check::check_device(
            &dev,
            &nilfs::check::Options {
                inline_bytes: Some(inline_bytes),
                ..Default::default()
            },
        );
        assert!(r.is_clean(), "{r}");
        (r.to_string(), r.stats.bytes_read, r.stats.logs)
    };
    let (one_thread, two_threads) = (report(u64::MAX), report(0));
    assert!(one_thread.2 > 10, "the image has many logs");
    assert_eq!(one_thread, two_threads);
    let nilfs = Nilfs::open(&dev).unwrap();
    let view = CheckpointView::open(&nilfs, None).unwrap();
    let (_, inode) = view.resolve(b"/sparse", true).unwrap();
    assert_eq!(view.read_all(&inode).unwrap(), expect);
    let mut buf = vec![0u8; 300_000];
    for _ in 0..300 {
        let off = rng.next_u64() % (expect.len() as u64 + 2_000);
        let len = (rng.next_u64() % 300_000) as usize;
        buf[..len].fill(0xA5);
        let n = view.read_into(&inode, off, &mut buf[..len]).unwrap();
        let lo = (off as usize).min(expect.len());
        let hi = (off as usize + len).min(expect.len());
        assert_eq!(n, hi - lo, "length of the read at {off}+{len}");
        assert!(
            buf[..n] == expect[lo..hi],
            "content of the read at {off}+{len}"
        );
    }
}

/// Postmortem: a directory moved to another parent kept its mtime, while
/// `nilfs_rename` rewrites its ".." with `nilfs_set_link`, which sets the
/// directory's mtime and ctime. Lockstep never saw it (its clock rarely
/// moved between a mkdir and the move), the one-thread campaigns' 1 s
/// slack hid it, and the concurrent campaign's first history on `nilref
/// mount` caught it.
#[test]
fn regress_a_moved_directory_gets_a_new_mtime() {
    let dev = fresh(32 << 20, 1024, 64);
    let nilfs = Nilfs::open(&dev).unwrap();
    let mut fs = Fs::mount(&nilfs, 1_800_000_000).unwrap();
    fs.paths().mkdir(b"/a", 0o755).unwrap();
    fs.paths().mkdir(b"/b", 0o755).unwrap();
    let d = fs.paths().mkdir(b"/a/d", 0o755).unwrap();
    fs.set_time(1_800_000_100);
    fs.paths().rename(b"/a/d", b"/b/d").unwrap();
    let st = fs.stat(d).unwrap();
    assert_eq!((st.mtime, st.ctime), (1_800_000_100, 1_800_000_100));
}

/// Postmortem: lockstep over the FUSE mount renamed `/d1` onto `/` with
/// RENAME_NOREPLACE, and the VFS answered EEXIST where model and
/// implementation said EBUSY: `do_renameat2` sets EEXIST for NOREPLACE
/// before it tests the target's last component. The source's is EBUSY.
#[test]
fn regress_rename_noreplace_onto_the_root_is_eexist() {
    use nilfs::error::{Errno, Error};
    let dev = fresh(32 << 20, 1024, 64);
    let nilfs = Nilfs::open(&dev).unwrap();
    let mut fs = Fs::mount(&nilfs, 1_800_000_000).unwrap();
    let errno = |r: nilfs::Result<()>| match r {
        Err(Error::Errno { errno, .. }) => Some(errno),
        _ => None,
    };
    let mut p = fs.paths();
    for target in [&b"/"[..], b"/.", b"/.."] {
        assert_eq!(
            errno(p.rename_flags(b"/d1", target, true, false)),
            Some(Errno::EEXIST)
        );
        assert_eq!(
            errno(p.rename_flags(b"/d1", target, false, false)),
            Some(Errno::EBUSY)
        );
        assert_eq!(
            errno(p.rename_flags(target, b"/d1", true, false)),
            Some(Errno::EBUSY)
        );
    }
}

/// Finding K19 (the kernel in lockstep): a link leaves the file needing an
/// inode sync with no dirty page; a construction that does not collect it
/// (an fsync of another file) keeps NILFS_I_INODE_SYNC set, so a later
/// fdatasync of a write inside its size still makes a checkpoint
/// (`nilfs_drop_collected_inodes`). One the construction did collect (its
/// pages were dirty) loses the flag: the same fdatasync is data-only.
#[test]
fn an_inode_sync_outlives_a_construction_that_did_not_collect_the_file() {
    for linked in [true, false] {
        let dev = fresh(64 << 20, 1024, 64);
        let nilfs = Nilfs::open(&dev).unwrap();
        let mut fs = Fs::mount(&nilfs, 1_800_000_000).unwrap();
        let a = fs.create(ino::ROOT, b"a", 0o644).unwrap();
        fs.write(a, 0, &pattern(1, 3000)).unwrap();
        fs.sync().unwrap();
        if linked {
            fs.link(a, ino::ROOT, b"b").unwrap();
        } else {
            // Collected by the fsync below: its page is dirty.
            fs.write(a, 0, &[9; 10]).unwrap();
        }
        let c = fs.create(ino::ROOT, b"c", 0o644).unwrap();
        fs.write(c, 0, &[1; 100]).unwrap();
        fs.fsync(c).unwrap();
        let before = fs.latest_cno();
        fs.write(a, 10, &[2; 100]).unwrap();
        fs.fdatasync(a).unwrap();
        let made = fs.latest_cno().0 - before.0;
        assert_eq!(made, u64::from(linked), "linked: {linked}");
    }
}

/// `open(O_CREAT)` of a path ending in `/` is EISDIR before its last name
/// is looked up: for a file, a directory, nothing, with or without
/// O_EXCL, and at the end of a followed symlink's body, where a file or
/// a symlink is neither opened nor followed (docs/findings.md M9; Linux
/// 6.1 and 7.3, model/traces/kernel-*/create-with-a-trailing-slash.jsonl).
/// Nothing is created.
#[test]
fn a_create_with_a_trailing_slash_is_eisdir() {
    let dev = fresh(32 << 20, 1024, 64);
    let nilfs = Nilfs::open(&dev).unwrap();
    let mut fs = Fs::mount(&nilfs, 1_800_000_000).unwrap();
    let mut p = fs.paths();
    p.create(b"/f", 0o644, false).unwrap();
    p.mkdir(b"/d", 0o755).unwrap();
    p.symlink(b"f/", b"/l").unwrap();
    p.symlink(b"l/", b"/l2").unwrap();
    p.symlink(b"nowhere/", b"/l3").unwrap();
    for (path, excl) in [
        (&b"/f/"[..], false),
        (b"/g/", false),
        (b"/h/", true),
        (b"/f/", true),
        (b"/d/", false),
        (b"/l", false),
        (b"/l2", false),
        (b"/l3", false),
    ] {
        let e = p.create(path, 0o644, excl).unwrap_err();
        assert!(
            matches!(
                e,
                nilfs::Error::Errno {
                    errno: nilfs::Errno::EISDIR,
                    ..
                }
            ),
            "{}: {e}",
            String::from_utf8_lossy(path)
        );
    }
    for missing in [&b"/g"[..], b"/h", b"/nowhere"] {
        assert!(p.lstat(missing).is_err(), "{missing:?} was made");
    }
}
