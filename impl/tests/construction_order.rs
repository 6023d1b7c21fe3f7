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
use nilfs::the_nilfs::Nilfs;
use nilfs_testkit::image::fresh;

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
    let dev = fresh(64 << 20, 4096, 512);
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

/// The virtual numbers the last log of segment 0 gives file `ino`'s
/// blocks, by block offset.
fn vblocknrs_of(dev: &MemDevice, ino: u64) -> Vec<(u64, u64)> {
    let out = tools::dumpseg(dev, &[0]).unwrap().stdout;
    let last = out.rsplit("partial segment").next().unwrap();
    let mut mine = false;
    let mut v = Vec::new();
    for l in last.lines().map(str::trim) {
        if let Some(rest) = l.strip_prefix("ino = ") {
            mine = rest.split(',').next() == Some(&ino.to_string());
        } else if mine {
            if let Some(rest) = l.strip_prefix("vblocknr = ") {
                let n: Vec<u64> = rest
                    .split(", ")
                    .filter_map(|p| p.rsplit(" = ").next().unwrap_or(p).parse().ok())
                    .collect();
                v.push((n[1], n[0]));
            }
        }
    }
    v
}

// postmortem: a block rewritten in place got its new virtual number from
// the file's group target (nilfs_bmap_find_target_in_group: 8,192 for the
// root directory at 4 KiB), so the log wrote one more DAT block than the
// kernel's. The kernel seeks it next to the old number
// (nilfs_direct_propagate; nilfs_btree_prepare_update_v: old + 1). Found by
// the SET_ALLOC_RANGE comparison with Linux 6.1 (docs/findings.md L2).
#[test]
fn regress_a_rewritten_block_is_renumbered_next_to_its_old_number() {
    let dev = fresh(64 << 20, 4096, 512);
    let nilfs = Nilfs::open(&dev).unwrap();
    let mut fs = Fs::mount(&nilfs, 1_800_000_000).unwrap();
    fs.create(ino::ROOT, b"f", 0o644).unwrap();
    fs.sync().unwrap();
    drop(fs);
    let root = vblocknrs_of(&dev, ino::ROOT.0);
    assert_eq!(root.len(), 1, "{root:?}");
    // mkfs numbered the root's block among the first few; the next free
    // number after it is still small, far below the group target.
    assert!(root[0].1 < 64, "the root's block took {root:?}");
}
