//! The first slice of the write path end to end: mount a fresh image read-
//! write, create files and directories, write data (direct maps, B-trees,
//! holes), sync, unmount; then the read path, which shares nothing with the
//! write path above the format, must see exactly that tree at the new
//! checkpoint, every checksum must verify, and the older checkpoint must
//! still show the fresh filesystem.

use std::collections::BTreeMap;

use nilfs::check::verify_checksums;
use nilfs::device::MemDevice;
use nilfs::format::{ino, Cno};
use nilfs::fs::Fs;
use nilfs::inspect::manifest::manifest;
use nilfs::mkfs::{self, MkfsOptions};
use nilfs::posix::CheckpointView;
use nilfs::the_nilfs::Nilfs;

fn pattern(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

fn sha(d: &[u8]) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(d).iter().map(|b| format!("{b:02x}")).collect()
}

#[test]
fn files_and_directories_survive_sync_and_remount() {
    for (bs, bps) in [(4096u64, 512u64), (1024, 256), (2048, 128)] {
        let dev = MemDevice::new(128 << 20);
        mkfs::mkfs(&dev, &MkfsOptions { block_size: bs, blocks_per_segment: bps, ..Default::default() }).unwrap();
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
                let f = fs.create(sub, format!("f{n:03}").as_bytes(), 0o644).unwrap();
                fs.write(f, 0, format!("entry {n}\n").as_bytes()).unwrap();
                expect.insert(format!("/sub/f{n:03}"), format!("entry {n}\n").into_bytes());
            }
            assert_eq!(fs.sync().unwrap(), Some(Cno(2)));
            // A second construction on top: overwrite part of big, grow small.
            fs.set_time(1_800_000_100);
            fs.write(big, 4096 * 100 + 10, b"OVERWRITE").unwrap();
            expect.get_mut("/big").unwrap()[4096 * 100 + 10..4096 * 100 + 19].copy_from_slice(b"OVERWRITE");
            fs.write(small, 13, b"more\n").unwrap();
            expect.get_mut("/small").unwrap().extend_from_slice(b"more\n");
            fs.unmount().unwrap();
        }
        let ctx = format!("-b {bs} -B {bps}");
        let r = verify_checksums(&dev).unwrap_or_else(|e| panic!("{ctx}: {e}"));
        assert!(r.super_roots >= 3, "{ctx}: {r:?}");
        let nilfs = Nilfs::open(&dev).unwrap();
        assert_eq!(nilfs.scan.cno, Cno(3), "{ctx}");
        let view = CheckpointView::open(&nilfs, None).unwrap();
        for (path, data) in &expect {
            let (_, inode) = view.resolve(path.as_bytes(), true).unwrap_or_else(|e| panic!("{ctx}: {path}: {e}"));
            let got = view.read_all(&inode).unwrap();
            assert!(got == *data, "{ctx}: {path}: {} bytes read, {} expected", got.len(), data.len());
        }
        let m = manifest(&view).unwrap();
        assert!(m.contains(&format!("{}  {}  /big\n", sha(&expect["/big"]), 3 << 20)), "{ctx}:\n{m}");
        assert!(m.contains("DIR  -  /sub/deeper/\n"), "{ctx}");
        // Checkpoint 1 still shows the fresh filesystem; 2 the first sync.
        let one = CheckpointView::open(&nilfs, Some(Cno(1))).unwrap();
        assert_eq!(manifest(&one).unwrap(), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855  0  /.nilfs\n");
        let two = CheckpointView::open(&nilfs, Some(Cno(2))).unwrap();
        let (_, small) = two.resolve(b"/small", false).unwrap();
        assert_eq!(two.read_all(&small).unwrap(), b"hello, nilfs\n");
    }
}
