//! The checkpoint ioctls (ioctl.c): `NILFS_IOCTL_SYNC` + `CHANGE_CPMODE`
//! (mkcp), `CHANGE_CPMODE` (chcp), `DELETE_CHECKPOINT` (rmcp) and
//! `GET_CPINFO` (lscp), on the mounted file system; and [`Fs::ioctl`],
//! `nilfs_ioctl` itself: a request code and its argument's bytes in, the
//! bytes the caller gets back out, for a front end that receives ioctls
//! as bytes (the FUSE mount).

use super::Fs;
use crate::cpfile::CpMode;
use crate::format::cpfile::Checkpoint;
use crate::format::{Cno, Ino, SegNum};
use crate::{Errno, Error, Result};

/// Request codes (include/uapi/linux/nilfs2_api.h and linux/fs.h), built
/// as `_IOC` builds them on x86-64 and the other architectures with the
/// generic layout (dir << 30 | size << 16 | type << 8 | nr).
pub mod request {
    const WRITE: u32 = 1;
    const READ: u32 = 2;
    const fn ioc(dir: u32, ty: u8, nr: u8, size: usize) -> u32 {
        (dir << 30) | ((size as u32) << 16) | ((ty as u32) << 8) | nr as u32
    }
    /// `NILFS_IOCTL_IDENT`.
    const N: u8 = b'n';
    /// `struct nilfs_argv`: a user pointer and its counts (24 bytes).
    pub const ARGV_SIZE: usize = 24;
    /// `_IOW('n', 0x80, struct nilfs_cpmode)`.
    pub const CHANGE_CPMODE: u32 = ioc(WRITE, N, 0x80, 16);
    /// `_IOW('n', 0x81, __u64)`.
    pub const DELETE_CHECKPOINT: u32 = ioc(WRITE, N, 0x81, 8);
    /// `_IOR('n', 0x82, struct nilfs_argv)`.
    pub const GET_CPINFO: u32 = ioc(READ, N, 0x82, ARGV_SIZE);
    /// `_IOR('n', 0x83, struct nilfs_cpstat)`.
    pub const GET_CPSTAT: u32 = ioc(READ, N, 0x83, 24);
    /// `_IOR('n', 0x84, struct nilfs_argv)`.
    pub const GET_SUINFO: u32 = ioc(READ, N, 0x84, ARGV_SIZE);
    /// `_IOR('n', 0x85, struct nilfs_sustat)`.
    pub const GET_SUSTAT: u32 = ioc(READ, N, 0x85, 48);
    /// `_IOWR('n', 0x86, struct nilfs_argv)`.
    pub const GET_VINFO: u32 = ioc(READ | WRITE, N, 0x86, ARGV_SIZE);
    /// `_IOWR('n', 0x87, struct nilfs_argv)`.
    pub const GET_BDESCS: u32 = ioc(READ | WRITE, N, 0x87, ARGV_SIZE);
    /// `_IOW('n', 0x88, struct nilfs_argv[5])`.
    pub const CLEAN_SEGMENTS: u32 = ioc(WRITE, N, 0x88, 5 * ARGV_SIZE);
    /// `_IOR('n', 0x8A, __u64)`.
    pub const SYNC: u32 = ioc(READ, N, 0x8A, 8);
    /// `_IOW('n', 0x8B, __u64)`.
    pub const RESIZE: u32 = ioc(WRITE, N, 0x8B, 8);
    /// `_IOW('n', 0x8C, __u64[2])`.
    pub const SET_ALLOC_RANGE: u32 = ioc(WRITE, N, 0x8C, 16);
    /// `_IOW('n', 0x8D, struct nilfs_argv)`.
    pub const SET_SUINFO: u32 = ioc(WRITE, N, 0x8D, ARGV_SIZE);
    /// `FS_IOC_GETVERSION`: `_IOR('v', 1, long)`.
    pub const FS_IOC_GETVERSION: u32 = ioc(READ, b'v', 1, 8);
    /// `FS_IOC_GETFLAGS`: `_IOR('f', 1, long)` (the kernel writes an int;
    /// FUSE asks for four bytes).
    pub const FS_IOC_GETFLAGS: u32 = ioc(READ, b'f', 1, 8);
    /// The requests whose argument is a `struct nilfs_argv` (or five):
    /// the data is behind its `v_base` pointer, in the caller's memory.
    pub const ARGV: [u32; 6] = [
        GET_CPINFO,
        GET_SUINFO,
        GET_VINFO,
        GET_BDESCS,
        CLEAN_SEGMENTS,
        SET_SUINFO,
    ];
}

/// `NILFS_SB2_OFFSET_BYTES`: where the second super block of a device of
/// `size` bytes lies.
fn sb2_offset_bytes(size: u64) -> u64 {
    ((size >> 12).saturating_sub(1)) << 12
}

/// `FS_FL_USER_VISIBLE`: the `i_flags` bits lsattr may see.
const FS_FL_USER_VISIBLE: u32 = 0x0003_DFFF;

/// `nilfs_cpmode`'s `cm_mode` values.
const NILFS_CHECKPOINT: u32 = 0;
const NILFS_SNAPSHOT: u32 = 1;

fn u64_in(input: &[u8], at: usize) -> Result<u64> {
    input
        .get(at..at + 8)
        .map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes")))
        .ok_or_else(|| Error::errno(Errno::EINVAL, "ioctl argument too short"))
}

fn u64s(v: &[u64]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

impl<'a> Fs<'a> {
    /// `nilfs_ioctl` on a file or directory `i` of this file system, for a
    /// caller with or without `CAP_SYS_ADMIN`: request `cmd` with the bytes
    /// of its argument (`_IOW`), the bytes it returns (`_IOR`).
    ///
    /// Served as Linux 6.1 serves them: `SYNC`, `CHANGE_CPMODE`,
    /// `DELETE_CHECKPOINT`, `GET_CPSTAT`, `GET_SUSTAT`, `SET_ALLOC_RANGE`
    /// `FS_IOC_GETVERSION` and `FS_IOC_GETFLAGS`, with the kernel's
    /// refusals in its order
    /// (EPERM without the capability, then EROFS on a read-only mount —
    /// not for `SET_ALLOC_RANGE`, which does not ask for write access —
    /// then the request's own). ENOTTY for everything else:
    /// - the `nilfs_argv` requests (`request::ARGV`), whose data lies behind
    ///   a pointer into the caller's memory that only the kernel can
    ///   follow — a front end that receives the argument as bytes (FUSE's
    ///   restricted ioctls) never sees it; the cleaner's and lscp's
    ///   equivalents are `Fs::lscp`, `suinfo`, `vinfo`, `bdescs` and
    ///   `cleaner::clean`;
    /// - `RESIZE` and `FITRIM`, which nilfs-ref does not implement;
    /// - `FS_IOC_SETFLAGS` (nilfs2's `fileattr_set`: chattr), not
    ///   implemented: the flags' rules (immutable, append-only) are not.
    pub fn ioctl(
        &mut self,
        i: Ino,
        cmd: u32,
        cap_sys_admin: bool,
        input: &[u8],
    ) -> Result<Vec<u8>> {
        use request::*;
        let needs_admin = |fs: &Fs| {
            if !cap_sys_admin {
                Err(Error::errno(Errno::EPERM, "needs CAP_SYS_ADMIN"))
            } else if fs.read_only {
                // mnt_want_write_file
                Err(Error::errno(Errno::EROFS, "read-only mount"))
            } else {
                Ok(())
            }
        };
        match cmd {
            SYNC => Ok(self.mkcp(false)?.0.to_le_bytes().to_vec()),
            CHANGE_CPMODE => {
                needs_admin(self)?;
                let cno = Cno(u64_in(input, 0)?);
                let mode = u64_in(input, 8)? as u32; // cm_mode, then cm_pad
                match mode {
                    NILFS_CHECKPOINT => self.chcp(cno, false)?,
                    NILFS_SNAPSHOT => self.chcp(cno, true)?,
                    _ => return Err(Error::errno(Errno::EINVAL, "unknown checkpoint mode")),
                }
                Ok(Vec::new())
            }
            DELETE_CHECKPOINT => {
                needs_admin(self)?;
                self.rmcp(Cno(u64_in(input, 0)?))?;
                Ok(Vec::new())
            }
            GET_CPSTAT => {
                let s = self.cpfile.file_mut().stat()?;
                Ok(u64s(&[s.cno.0, s.ncps, s.nsss]))
            }
            GET_SUSTAT => {
                let s = self.sustat()?;
                Ok(u64s(&[
                    s.nsegs,
                    s.ncleansegs,
                    s.ndirtysegs,
                    s.ctime,
                    s.nongc_ctime,
                    s.prot_seq.0,
                ]))
            }
            SET_ALLOC_RANGE => {
                // nilfs_ioctl_set_alloc_range: the byte range [start, end)
                // becomes the whole segments inside it, the end held
                // clear of the second super block.
                if !cap_sys_admin {
                    return Err(Error::errno(Errno::EPERM, "needs CAP_SYS_ADMIN"));
                }
                let (start, end) = (u64_in(input, 0)?, u64_in(input, 8)?);
                let erange = || Error::errno(Errno::ERANGE, "allocation range out of range");
                if end > self.dev.size_bytes() {
                    return Err(erange());
                }
                let segbytes = self.geo.blocks_per_segment * u64::from(self.bs);
                let minseg = start.div_ceil(segbytes);
                if end < 4096 {
                    return Err(erange());
                }
                let maxseg = sb2_offset_bytes(end);
                if maxseg < segbytes {
                    return Err(erange());
                }
                let maxseg = maxseg / segbytes - 1;
                self.sufile
                    .file_mut()
                    .set_alloc_range(SegNum(minseg), SegNum(maxseg))?;
                Ok(Vec::new())
            }
            // nilfs_fileattr_get: the flags lsattr may see, as an int.
            FS_IOC_GETFLAGS => Ok((self.stat(i)?.flags & FS_FL_USER_VISIBLE)
                .to_le_bytes()
                .to_vec()),
            // put_user of an int: four bytes.
            FS_IOC_GETVERSION => Ok(self.stat(i)?.generation.to_le_bytes().to_vec()),
            _ => Err(Error::errno(
                Errno::ENOTTY,
                format!("ioctl {cmd:#x} is not served here"),
            )),
        }
    }

    /// `mkcp [-s]` (`NILFS_IOCTL_SYNC`, then `CHANGE_CPMODE`): make a
    /// checkpoint of everything (none if nothing changed) and return the
    /// latest checkpoint number; with `snapshot`, make it a snapshot, which
    /// the next construction records.
    pub fn mkcp(&mut self, snapshot: bool) -> Result<Cno> {
        self.begin(false)?;
        self.construct()?; // NILFS_IOCTL_SYNC: nilfs_construct_segment
        let cno = Cno(self.cpfile.file().next_cno().0 - 1);
        if snapshot {
            self.cpfile
                .file_mut()
                .change_mode(cno, CpMode::Snapshot, &[])?;
        }
        Ok(cno)
    }

    /// `chcp cp|ss CNO` (`nilfs_ioctl_change_cpmode`): ENOENT for a missing
    /// checkpoint; EBUSY to turn the latest checkpoint into a plain one
    /// (`nilfs_checkpoint_is_mounted`). Recorded by the next construction.
    pub fn chcp(&mut self, cno: Cno, snapshot: bool) -> Result<()> {
        self.chcp_with_mounted(cno, snapshot, &[])
    }

    /// [`Fs::chcp`] with the snapshots mounted beside this mount
    /// (`mount -o ro,cp=N`, which the kernel counts in the same super
    /// block's roots): one of them cannot become a plain checkpoint
    /// either (EBUSY). Found by the lockstep fuzz target (issue 35).
    pub fn chcp_with_mounted(&mut self, cno: Cno, snapshot: bool, mounted: &[Cno]) -> Result<()> {
        self.begin(false)?;
        let mode = if snapshot {
            CpMode::Snapshot
        } else {
            CpMode::Checkpoint
        };
        self.cpfile.file_mut().change_mode(cno, mode, mounted)
    }

    /// `rmcp CNO` (`nilfs_ioctl_delete_checkpoint`): EBUSY for a snapshot,
    /// ENOENT for a missing checkpoint. The kernel lets the latest
    /// checkpoint go too; nilfs-utils' rmcp only protects it in ranges.
    pub fn rmcp(&mut self, cno: Cno) -> Result<()> {
        self.begin(false)?;
        self.cpfile.file_mut().delete_checkpoint(cno)
    }

    /// `lscp` on the mounted file system (`NILFS_IOCTL_GET_CPINFO`): the
    /// valid checkpoints as the live cpfile has them, changes since the
    /// last construction included.
    ///
    /// Each batch continues after the last entry's own `cp_cno`, as the
    /// kernel's `nilfs_cpfile_do_get_cpinfo` hands it back and nilfs-utils'
    /// lscp uses it. On a damaged cpfile (entries read at the wrong size,
    /// say) that number can fail to move on, and lscp would ask for the
    /// same batch for ever: that is EIO here, never an endless list.
    pub fn lscp(&mut self) -> Result<Vec<Checkpoint>> {
        let mut out = Vec::new();
        let mut from = Cno(1);
        loop {
            let (batch, next) = self.cpfile.file_mut().cpinfos(from, 64)?;
            if batch.is_empty() {
                return Ok(out);
            }
            if next.0 <= from.0 {
                return Err(Error::corrupt(
                    "checkpoint file",
                    format!(
                        "the entries from checkpoint {from} on end at checkpoint {}: the listing would not move on",
                        next.0.wrapping_sub(1)
                    ),
                ));
            }
            out.extend(batch);
            from = next;
        }
    }
}
