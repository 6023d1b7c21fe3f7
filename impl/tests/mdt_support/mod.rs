//! Shared helpers for the metadata-file write-side tests: images to start
//! from, and the four metadata files opened on them.

#![allow(dead_code)]

use std::path::Path;

use nilfs::cpfile::Cpfile;
use nilfs::dat::Dat;
use nilfs::device::{import_image, MemDevice};
use nilfs::format::Ino;
use nilfs::ifile::Ifile;
use nilfs::mdt::{ImageFile, Mdt};
use nilfs::mkfs::{mkfs, MkfsOptions};
use nilfs::sufile::Sufile;
use nilfs::the_nilfs::Nilfs;

/// The kernel-written fixture (committed in tests/fixtures).
pub const FIXTURE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../tests/fixtures/kernel-6.1/scenario-gc-128M.img.xz"
);

/// A fresh mkfs image of `size` bytes with `block_size`-byte blocks.
pub fn fresh(size: u64, block_size: u64, blocks_per_segment: u64) -> MemDevice {
    let dev = MemDevice::new(size);
    let o = MkfsOptions {
        block_size,
        blocks_per_segment,
        ..MkfsOptions::default()
    };
    mkfs(&dev, &o).expect("mkfs");
    dev
}

/// The kernel fixture (committed, so always there).
pub fn fixture() -> Option<MemDevice> {
    Some(import_image(Path::new(FIXTURE)).expect("import the kernel fixture"))
}

/// The metadata files of an opened image.
pub struct Files<'a> {
    pub dat: Dat<'a>,
    pub cpfile: Cpfile<'a>,
    pub sufile: Sufile<'a>,
    pub ifile: Ifile<'a>,
}

/// Open the DAT, cpfile, sufile and the latest checkpoint's ifile.
pub fn open_files<'a>(nilfs: &'a Nilfs<'_>) -> Files<'a> {
    let sb = &nilfs.sb;
    let dat = Dat::new(
        Mdt::from_image(nilfs, ImageFile::Dat),
        u32::from(sb.dat_entry_size),
    )
    .expect("dat");
    let cpfile = Cpfile::new(
        Mdt::from_image(nilfs, ImageFile::Cpfile),
        sb.checkpoint_size,
        nilfs.next_cno(),
    )
    .expect("cpfile");
    let sufile = Sufile::new(
        Mdt::from_image(nilfs, ImageFile::Sufile),
        sb.segment_usage_size,
        sb.nsegments,
    )
    .expect("sufile");
    let latest = nilfs
        .checkpoint(nilfs.scan.cno)
        .expect("read latest checkpoint")
        .expect("latest checkpoint exists");
    let ifile = Ifile::new(
        Mdt::from_image(nilfs, ImageFile::Ifile(latest.ifile_inode)),
        u32::from(sb.inode_size),
        Ino(u64::from(sb.first_ino)),
    )
    .expect("ifile");
    Files {
        dat,
        cpfile,
        sufile,
        ifile,
    }
}
