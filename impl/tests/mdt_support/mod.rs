//! Shared helper of the metadata-file write-side tests: the four metadata
//! files opened on an image (the images come from nilfs-testkit).

#![allow(dead_code)]

use nilfs::cpfile::Cpfile;
use nilfs::dat::Dat;
use nilfs::format::Ino;
use nilfs::ifile::Ifile;
use nilfs::mdt::{ImageFile, Mdt};
use nilfs::sufile::Sufile;
use nilfs::the_nilfs::Nilfs;

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
