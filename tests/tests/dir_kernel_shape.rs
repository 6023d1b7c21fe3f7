//! Directory blocks built by our dir.c equal the kernel's byte for byte:
//! replaying, in on-disk order, the entries the kernel wrote into the
//! fixture's 300-entry directory (and its root) gives the same blocks.

use nilfs::dir::DirFile;
use nilfs::format::{Cno, Ino};
use nilfs::posix::CheckpointView;
use nilfs::the_nilfs::Nilfs;
use nilfs_testkit::image::fixture;

#[test]
fn replaying_the_kernels_entries_gives_the_kernels_blocks() {
    let dev = fixture();
    let fs = Nilfs::open(&dev).unwrap();
    let view = CheckpointView::open(&fs, Some(Cno(4))).unwrap();
    let bs = fs.block_size();
    for path in ["/many", "/d1/d2/d3", "/empty-dir"] {
        let (ino, inode) = view.resolve(path.as_bytes(), false).unwrap();
        let parent = view
            .resolve(format!("{path}/..").as_bytes(), false)
            .unwrap()
            .0;
        let entries = view.readdir(&inode).unwrap();
        let mut ours = DirFile::make_empty(bs, ino, parent);
        for e in entries.iter().filter(|e| e.name != b"." && e.name != b"..") {
            ours.add_link(&e.name, e.ino, e.file_type).unwrap();
        }
        let map = view.block_map(&inode).unwrap();
        assert_eq!(
            ours.blocks().len() as u64,
            inode.size / u64::from(bs),
            "{path}: block count"
        );
        for (i, b) in ours.blocks().iter().enumerate() {
            let theirs = fs.read_block(map[&(i as u64)]).unwrap();
            assert!(**b == theirs, "{path}: block {i} differs from the kernel's");
        }
        assert_eq!(ours.is_empty(ino).unwrap(), entries.len() == 2, "{path}");
        let _ = Ino(0);
    }
}
