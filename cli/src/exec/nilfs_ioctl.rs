//! NILFS2's ioctls (include/uapi/linux/nilfs2_api.h), the only `unsafe`
//! code of the project: each call hands the kernel a pointer to a
//! `#[repr(C)]` struct laid out as the header declares it. `nilref exec`
//! and `nilref ioctl` call them; the request codes are checked against
//! `nilfs::fs::ioctl::request`, the codes the FUSE mount serves.
//!
//! Audit notes, per ioctl (fs/nilfs2/ioctl.c):
//! - `NILFS_IOCTL_SYNC` (`_IOR('n', 0x8A, __u64)`): the kernel writes one
//!   `__u64` (`nilfs_ioctl_sync`: `ns_cno - 1`, the checkpoint it made or
//!   the latest). rustix's `Getter` owns that `u64`.
//! - `NILFS_IOCTL_CHANGE_CPMODE` (`_IOW`, `struct nilfs_cpmode`, 16 bytes)
//!   and `NILFS_IOCTL_DELETE_CHECKPOINT` (`_IOW`, `__u64`): the kernel only
//!   reads the argument (`copy_from_user`). rustix's `Setter` owns it.
//! - `NILFS_IOCTL_GET_CPINFO` (`_IOR`, `struct nilfs_argv`, 24 bytes): the
//!   kernel reads the argv, writes up to `v_nmembs` records of `v_size`
//!   bytes at `v_base`, and writes the argv back with the count filled
//!   (`nilfs_ioctl_get_info` -> `nilfs_ioctl_wrap_copy`). `v_base` points
//!   into a `Vec<CpInfo>` that this function borrows mutably for the whole
//!   call, with `v_nmembs` its length and `v_size` the record size, so the
//!   kernel never writes outside it; the count it returns is clamped to the
//!   buffer before the records are read.
//! - `NILFS_IOCTL_GET_CPSTAT` (`_IOR`, `struct nilfs_cpstat`, three
//!   `__u64`) and `NILFS_IOCTL_GET_SUSTAT` (`_IOR`, `struct nilfs_sustat`,
//!   six `__u64`): the kernel writes the struct (`copy_to_user` of its
//!   size). `Getter` owns a `[u64; 3]` / `[u64; 6]` of that size.
//! - `NILFS_IOCTL_SET_ALLOC_RANGE` (`_IOW`, `__u64[2]`): read only.
//!   `Setter` owns the array.
//! - `FS_IOC_GETVERSION` (`_IOR('v', 1, long)`): the kernel writes an
//!   `int` (`put_user(inode->i_generation, (int __user *)argp)`) into the
//!   eight bytes the code names; `Getter` owns a `[u32; 2]`. The same for
//!   `FS_IOC_GETFLAGS` (`_IOR('f', 1, long)`; `ioctl_getflags` writes an
//!   `int`).
#![allow(unsafe_code)]

use rustix::fd::AsFd;
use rustix::io::Result;
use rustix::ioctl::{self, opcode, Getter, Setter, Updater};

/// `struct nilfs_cpmode`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
struct CpMode {
    cm_cno: u64,
    cm_mode: u32,
    cm_pad: u32,
}

/// `struct nilfs_argv`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
struct Argv {
    v_base: u64,
    v_nmembs: u32,
    v_size: u16,
    v_flags: u16,
    v_index: u64,
}

/// `struct nilfs_cpinfo` (56 bytes).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct CpInfo {
    pub ci_flags: u32,
    pub ci_pad: u32,
    pub ci_cno: u64,
    pub ci_create: u64,
    pub ci_nblk_inc: u64,
    pub ci_inodes_count: u64,
    pub ci_blocks_count: u64,
    pub ci_next: u64,
}

impl CpInfo {
    /// `nilfs_cpinfo_snapshot` (bit `NILFS_CPINFO_SNAPSHOT` = 0).
    pub fn is_snapshot(&self) -> bool {
        self.ci_flags & 1 != 0
    }
    /// `nilfs_cpinfo_minor` (bit `NILFS_CPINFO_MINOR` = 3).
    pub fn is_minor(&self) -> bool {
        self.ci_flags & (1 << 3) != 0
    }
}

const _: () = assert!(std::mem::size_of::<CpMode>() == 16);
const _: () = assert!(std::mem::size_of::<Argv>() == 24);
const _: () = assert!(std::mem::size_of::<CpInfo>() == 56);

const IDENT: u8 = b'n';
const CHANGE_CPMODE: ioctl::Opcode = opcode::write::<CpMode>(IDENT, 0x80);
const DELETE_CHECKPOINT: ioctl::Opcode = opcode::write::<u64>(IDENT, 0x81);
const GET_CPINFO: ioctl::Opcode = opcode::read::<Argv>(IDENT, 0x82);
const SYNC: ioctl::Opcode = opcode::read::<u64>(IDENT, 0x8A);
const GET_CPSTAT: ioctl::Opcode = opcode::read::<[u64; 3]>(IDENT, 0x83);
const GET_SUSTAT: ioctl::Opcode = opcode::read::<[u64; 6]>(IDENT, 0x85);
const SET_ALLOC_RANGE: ioctl::Opcode = opcode::write::<[u64; 2]>(IDENT, 0x8C);
const FS_IOC_GETVERSION: ioctl::Opcode = opcode::read::<[u32; 2]>(b'v', 1);
const FS_IOC_GETFLAGS: ioctl::Opcode = opcode::read::<[u32; 2]>(b'f', 1);

// The codes the FUSE mount serves (`Fs::ioctl`) are these.
const _: () = {
    use nilfs::fs::ioctl::request as r;
    assert!(CHANGE_CPMODE == r::CHANGE_CPMODE);
    assert!(DELETE_CHECKPOINT == r::DELETE_CHECKPOINT);
    assert!(GET_CPINFO == r::GET_CPINFO);
    assert!(SYNC == r::SYNC);
    assert!(GET_CPSTAT == r::GET_CPSTAT);
    assert!(GET_SUSTAT == r::GET_SUSTAT);
    assert!(SET_ALLOC_RANGE == r::SET_ALLOC_RANGE);
    assert!(FS_IOC_GETVERSION == r::FS_IOC_GETVERSION);
    assert!(FS_IOC_GETFLAGS == r::FS_IOC_GETFLAGS);
};

/// `cm_mode` values (`NILFS_CHECKPOINT`, `NILFS_SNAPSHOT`).
const NILFS_CHECKPOINT: u32 = 0;
const NILFS_SNAPSHOT: u32 = 1;

/// `NILFS_IOCTL_SYNC`: construct, and return the latest checkpoint number
/// (what `mkcp -p` prints).
pub fn sync(fd: impl AsFd) -> Result<u64> {
    // SAFETY: SYNC writes exactly one u64, which Getter owns.
    unsafe { ioctl::ioctl(fd, Getter::<SYNC, u64>::new()) }
}

/// `NILFS_IOCTL_CHANGE_CPMODE` (what `chcp` and `mkcp -s` call).
pub fn change_cpmode(fd: impl AsFd, cno: u64, snapshot: bool) -> Result<()> {
    let mode = if snapshot {
        NILFS_SNAPSHOT
    } else {
        NILFS_CHECKPOINT
    };
    change_cpmode_raw(fd, cno, mode)
}

/// The same with any `cm_mode` (the kernel refuses all but 0 and 1).
pub fn change_cpmode_raw(fd: impl AsFd, cno: u64, mode: u32) -> Result<()> {
    let arg = CpMode {
        cm_cno: cno,
        cm_mode: mode,
        cm_pad: 0,
    };
    // SAFETY: CHANGE_CPMODE reads one struct nilfs_cpmode, which Setter owns.
    unsafe { ioctl::ioctl(fd, Setter::<CHANGE_CPMODE, CpMode>::new(arg)) }
}

/// `NILFS_IOCTL_DELETE_CHECKPOINT` (what `rmcp` calls for each number).
pub fn delete_checkpoint(fd: impl AsFd, cno: u64) -> Result<()> {
    // SAFETY: DELETE_CHECKPOINT reads one u64, which Setter owns.
    unsafe { ioctl::ioctl(fd, Setter::<DELETE_CHECKPOINT, u64>::new(cno)) }
}

/// `NILFS_IOCTL_GET_CPINFO` with `NILFS_CHECKPOINT`: up to `buf.len()`
/// checkpoints from number `start` on; returns how many were filled.
pub fn get_cpinfo(fd: impl AsFd, start: u64, buf: &mut [CpInfo]) -> Result<usize> {
    let nmembs = buf.len().min(u32::MAX as usize);
    let mut argv = Argv {
        v_base: buf.as_mut_ptr() as u64,
        v_nmembs: nmembs as u32,
        v_size: std::mem::size_of::<CpInfo>() as u16,
        v_flags: NILFS_CHECKPOINT as u16,
        v_index: start,
    };
    // SAFETY: GET_CPINFO reads and writes back the argv (Updater borrows it)
    // and writes at most v_nmembs records of v_size bytes at v_base, which
    // is `buf`, borrowed mutably and not touched until the call returns.
    unsafe { ioctl::ioctl(fd, Updater::<GET_CPINFO, Argv>::new(&mut argv))? };
    Ok((argv.v_nmembs as usize).min(nmembs))
}

/// `NILFS_IOCTL_GET_CPSTAT`: `cs_cno` (the next checkpoint number),
/// `cs_ncps`, `cs_nsss`.
pub fn get_cpstat(fd: impl AsFd) -> Result<[u64; 3]> {
    // SAFETY: GET_CPSTAT writes one struct nilfs_cpstat (three u64), which
    // Getter owns.
    unsafe { ioctl::ioctl(fd, Getter::<GET_CPSTAT, [u64; 3]>::new()) }
}

/// `NILFS_IOCTL_GET_SUSTAT`: `ss_nsegs`, `ss_ncleansegs`, `ss_ndirtysegs`,
/// `ss_ctime`, `ss_nongc_ctime`, `ss_prot_seq`.
pub fn get_sustat(fd: impl AsFd) -> Result<[u64; 6]> {
    // SAFETY: GET_SUSTAT writes one struct nilfs_sustat (six u64), which
    // Getter owns.
    unsafe { ioctl::ioctl(fd, Getter::<GET_SUSTAT, [u64; 6]>::new()) }
}

/// `NILFS_IOCTL_SET_ALLOC_RANGE`: the log writer allocates segments only
/// inside the byte range `[start, end)`.
pub fn set_alloc_range(fd: impl AsFd, start: u64, end: u64) -> Result<()> {
    // SAFETY: SET_ALLOC_RANGE reads one __u64[2], which Setter owns.
    unsafe { ioctl::ioctl(fd, Setter::<SET_ALLOC_RANGE, [u64; 2]>::new([start, end])) }
}

/// `FS_IOC_GETVERSION`: the inode's generation.
pub fn get_version(fd: impl AsFd) -> Result<u32> {
    // SAFETY: the kernel writes one int into the eight bytes the code
    // names; Getter owns all eight.
    unsafe { ioctl::ioctl(fd, Getter::<FS_IOC_GETVERSION, [u32; 2]>::new()) }.map(|v| v[0])
}

/// `FS_IOC_GETFLAGS`: the inode's flags, as lsattr reads them.
pub fn get_flags(fd: impl AsFd) -> Result<u32> {
    // SAFETY: the kernel writes one int into the eight bytes the code
    // names; Getter owns all eight.
    unsafe { ioctl::ioctl(fd, Getter::<FS_IOC_GETFLAGS, [u32; 2]>::new()) }.map(|v| v[0])
}

/// Every checkpoint GET_CPINFO lists, from number 1 on, a batch at a time
/// (what lscp -a reads).
pub fn all_cpinfo(fd: impl AsFd) -> Result<Vec<CpInfo>> {
    let mut buf = vec![CpInfo::default(); 512];
    let (mut next, mut out) = (1u64, Vec::new());
    loop {
        let n = get_cpinfo(&fd, next, &mut buf)?;
        if n == 0 {
            return Ok(out);
        }
        out.extend_from_slice(&buf[..n]);
        let last = buf[n - 1].ci_cno;
        if last < next {
            return Ok(out); // never go backwards, whatever the kernel says
        }
        next = last + 1;
    }
}
