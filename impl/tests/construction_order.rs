//! The order of files inside a construction is the kernel's: the order in
//! which their pages first got dirty since the last construction
//! (`ns_dirty_files`, filled by `nilfs_set_file_dirty`). A file changed
//! only in its inode is not on the kernel's list, so a new file's place is
//! taken at its first write, after the directory that `nilfs_add_link`
//! dirtied when it was created (docs/findings.md L1; checked against
//! Linux 6.1 by cli/tests/fuse_mount.rs
//! `the_allocation_range_ioctl_matches_the_kernels`).

use nilfs::device::MemDevice;
use nilfs::format::{ino, Ino};
use nilfs::fs::{Fs, SetAttr};
use nilfs::inspect::tools;
use nilfs::mkfs::{self, MkfsOptions};
use nilfs::the_nilfs::Nilfs;

/// The user files (not the metadata files) of the last log of segment 0,
/// in the order the log holds them.
fn files_of_last_log(dev: &MemDevice) -> Vec<u64> {
    let out = tools::dumpseg(dev, &[0]).unwrap().stdout;
    let last = out.rsplit("partial segment").next().unwrap();
    last.lines()
        .filter_map(|l| l.trim().strip_prefix("ino = "))
        .filter_map(|l| l.split(',').next()?.parse().ok())
        .filter(|&i: &u64| i == ino::ROOT.0 || i >= 11)
        .collect()
}

fn run(steps: impl FnOnce(&mut Fs) -> Vec<Ino>) -> (Vec<u64>, Vec<u64>) {
    let dev = MemDevice::new(64 << 20);
    mkfs::mkfs(&dev, &MkfsOptions::with_geometry(4096, 512)).unwrap();
    let nilfs = Nilfs::open(&dev).unwrap();
    let mut fs = Fs::mount(&nilfs, 1_800_000_000).unwrap();
    let expected = steps(&mut fs);
    fs.sync().unwrap();
    drop(fs);
    (
        files_of_last_log(&dev),
        expected.iter().map(|i| i.0).collect(),
    )
}

#[test]
fn a_new_file_is_written_after_its_directory_when_written_after_its_creation() {
    let (got, want) = run(|fs| {
        let f = fs.create(ino::ROOT, b"f", 0o644).unwrap();
        fs.write(f, 0, &[7; 10_000]).unwrap();
        vec![ino::ROOT, f]
    });
    assert_eq!(got, want);
}

#[test]
fn a_new_directory_or_symlink_is_written_before_its_parent() {
    // nilfs_make_empty and page_symlink dirty the new inode's block before
    // nilfs_add_link dirties the parent's; a file already listed keeps its
    // place (d, when the symlink's entry is added to it).
    let (got, want) = run(|fs| {
        let d = fs.mkdir(ino::ROOT, b"d", 0o755).unwrap();
        let s = fs.symlink(d, b"s", b"target").unwrap();
        vec![d, ino::ROOT, s]
    });
    assert_eq!(got, want);
}

#[test]
fn a_chmod_before_the_first_write_does_not_fix_the_place() {
    // chmod is nilfs_mark_inode_dirty only: the file's place is taken by
    // its first dirty page, after the directory created later.
    let (got, want) = run(|fs| {
        let f = fs.create(ino::ROOT, b"f", 0o644).unwrap();
        fs.sync().unwrap();
        let perm = SetAttr {
            perm: Some(0o600),
            ..SetAttr::default()
        };
        fs.setattr(f, perm).unwrap();
        let d = fs.mkdir(ino::ROOT, b"d", 0o755).unwrap();
        fs.write(f, 0, b"late").unwrap();
        vec![d, ino::ROOT, f]
    });
    assert_eq!(got, want);
}
