//! `Fs::ioctl`: nilfs_ioctl with its argument as bytes, the way a front end
//! that receives ioctls as bytes (the FUSE mount) calls it. Hermetic: the
//! FUSE tier and its kernel comparison (cli/tests/fuse_mount.rs) run the
//! same requests through real system calls.

use nilfs::device::MemDevice;
use nilfs::format::ino;
use nilfs::fs::ioctl::request as r;
use nilfs::fs::Fs;
use nilfs::the_nilfs::Nilfs;
use nilfs::{Errno, Error};
use nilfs_testkit::image::fresh;

const NOW: u64 = 1_800_000_000;

fn errno<T: std::fmt::Debug>(res: nilfs::Result<T>) -> Errno {
    match res {
        Err(Error::Errno { errno, .. }) => errno,
        other => panic!("expected an errno, got {other:?}"),
    }
}

fn cpmode(cno: u64, mode: u32) -> Vec<u8> {
    let mut b = cno.to_le_bytes().to_vec();
    b.extend(mode.to_le_bytes());
    b.extend(0u32.to_le_bytes());
    b
}

fn u64s(b: &[u8]) -> Vec<u64> {
    b.chunks(8)
        .map(|c| u64::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

fn image() -> MemDevice {
    fresh(32 << 20, 1024, 64)
}

#[test]
fn the_flat_requests_answer_as_nilfs_ioctl_does() {
    let dev = image();
    let nilfs = Nilfs::open(&dev).unwrap();
    let mut fs = Fs::mount(&nilfs, NOW).unwrap();
    let root = ino::ROOT;
    let f = fs.create(root, b"f", 0o644).unwrap();
    assert_eq!(u64s(&fs.ioctl(root, r::SYNC, false, &[]).unwrap()), [2]);
    // cs_cno is the next number, not the latest.
    assert_eq!(
        u64s(&fs.ioctl(root, r::GET_CPSTAT, false, &[]).unwrap()),
        [3, 2, 0]
    );
    // The capability first, then the mode, then the cpfile's refusals.
    assert_eq!(
        errno(fs.ioctl(root, r::CHANGE_CPMODE, false, &cpmode(1, 1))),
        Errno::EPERM
    );
    assert_eq!(
        errno(fs.ioctl(root, r::CHANGE_CPMODE, true, &cpmode(1, 7))),
        Errno::EINVAL
    );
    assert!(fs
        .ioctl(root, r::CHANGE_CPMODE, true, &cpmode(1, 1))
        .unwrap()
        .is_empty());
    let one = 1u64.to_le_bytes();
    assert_eq!(
        errno(fs.ioctl(root, r::DELETE_CHECKPOINT, true, &one)),
        Errno::EBUSY
    );
    assert_eq!(
        errno(fs.ioctl(root, r::DELETE_CHECKPOINT, false, &one)),
        Errno::EPERM
    );
    // A short argument never reaches the cpfile.
    assert_eq!(
        errno(fs.ioctl(root, r::DELETE_CHECKPOINT, true, &one[..4])),
        Errno::EINVAL
    );
    let sustat = u64s(&fs.ioctl(root, r::GET_SUSTAT, false, &[]).unwrap());
    assert_eq!(sustat.len(), 6);
    assert_eq!(sustat[0], fs.sustat().unwrap().nsegs);
    assert_eq!(sustat[3], NOW, "ss_ctime: the last log's");
    // FS_IOC_GETVERSION: the inode's generation, four bytes (put_user of
    // an int).
    let g = fs.ioctl(f, r::FS_IOC_GETVERSION, false, &[]).unwrap();
    assert_eq!(g, fs.stat(f).unwrap().generation.to_le_bytes());
    // FS_IOC_GETFLAGS: i_flags as lsattr sees them, an int.
    assert_eq!(fs.ioctl(f, r::FS_IOC_GETFLAGS, false, &[]).unwrap(), [0; 4]);
    // Whatever carries a pointer, and whatever nilfs-ref does not serve.
    for cmd in r::ARGV.iter().chain(&[r::RESIZE, 0x4008_6602, 0x1234_5678]) {
        assert_eq!(
            errno(fs.ioctl(root, *cmd, true, &[0; 120])),
            Errno::ENOTTY,
            "{cmd:#x}"
        );
    }
    fs.unmount().unwrap();
}

#[test]
fn a_read_only_mount_refuses_changes_but_takes_an_allocation_range() {
    let dev = image();
    let nilfs = Nilfs::open(&dev).unwrap();
    let mut fs = Fs::mount_read_only(&nilfs, NOW).unwrap();
    let root = ino::ROOT;
    // EPERM before EROFS (capable, then mnt_want_write_file).
    assert_eq!(
        errno(fs.ioctl(root, r::CHANGE_CPMODE, false, &cpmode(1, 1))),
        Errno::EPERM
    );
    assert_eq!(
        errno(fs.ioctl(root, r::CHANGE_CPMODE, true, &cpmode(1, 1))),
        Errno::EROFS
    );
    assert_eq!(
        errno(fs.ioctl(root, r::DELETE_CHECKPOINT, true, &1u64.to_le_bytes())),
        Errno::EROFS
    );
    assert_eq!(errno(fs.ioctl(root, r::SYNC, true, &[])), Errno::EROFS);
    // nilfs_ioctl_set_alloc_range asks for no write access; its own
    // checks: the end inside the device, at least 4 KiB, a whole segment
    // before the second super block, start before end.
    let range = |a: u64, b: u64| [a.to_le_bytes(), b.to_le_bytes()].concat();
    let size = 32u64 << 20;
    let seg = 64 * 1024;
    assert!(fs
        .ioctl(root, r::SET_ALLOC_RANGE, true, &range(10 * seg, size))
        .unwrap()
        .is_empty());
    for (a, b) in [(0, size + 1), (0, 100), (0, 8192), (20 * seg, 10 * seg)] {
        assert_eq!(
            errno(fs.ioctl(root, r::SET_ALLOC_RANGE, true, &range(a, b))),
            Errno::ERANGE,
            "[{a}, {b})"
        );
    }
    assert_eq!(
        errno(fs.ioctl(root, r::SET_ALLOC_RANGE, false, &range(0, size))),
        Errno::EPERM
    );
    assert_eq!(
        u64s(&fs.ioctl(root, r::GET_CPSTAT, false, &[]).unwrap()),
        [2, 1, 0]
    );
}
