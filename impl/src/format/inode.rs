//! `struct nilfs_inode` (128 bytes; the ifile stride is `s_inode_size`).

use super::le::{encoded, layout, need, put_u64, u64_at};
use super::INODE_BMAP_SIZE;
use crate::Result;

/// `nilfs_max_size`, the super block's `s_maxbytes`: the page cache's
/// limit, `MAX_LFS_FILESIZE`, since the bmap's key space (block bits + 64)
/// is wider.
pub const MAX_FILE_SIZE: u64 = i64::MAX as u64;
/// Nanoseconds per second.
const NS: i64 = 1_000_000_000;

/// File type mask of `i_mode` (`S_IFMT`).
pub const S_IFMT: u16 = 0o170000;
/// Socket.
pub const S_IFSOCK: u16 = 0o140000;
/// Symbolic link.
pub const S_IFLNK: u16 = 0o120000;
/// Regular file.
pub const S_IFREG: u16 = 0o100000;
/// Block device.
pub const S_IFBLK: u16 = 0o060000;
/// Directory.
pub const S_IFDIR: u16 = 0o040000;
/// Character device.
pub const S_IFCHR: u16 = 0o020000;
/// FIFO.
pub const S_IFIFO: u16 = 0o010000;

/// An on-disk inode. `i_blocks` is in 512-byte sectors when the kernel wrote
/// it and in filesystem blocks when mkfs did (digest §4.1); it is kept as read.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Inode {
    /// `i_blocks`.
    pub blocks: u64,
    /// `i_size` in bytes (0 for metadata files).
    pub size: u64,
    /// `i_ctime`, seconds.
    pub ctime: u64,
    /// `i_mtime`, seconds.
    pub mtime: u64,
    /// `i_ctime_nsec`.
    pub ctime_nsec: u32,
    /// `i_mtime_nsec`.
    pub mtime_nsec: u32,
    /// `i_uid`.
    pub uid: u32,
    /// `i_gid`.
    pub gid: u32,
    /// `i_mode`: type and permission bits.
    pub mode: u16,
    /// `i_links_count`; 0 marks a deleted inode.
    pub links_count: u16,
    /// `i_flags` (ext2-compatible `FS_*_FL`).
    pub flags: u32,
    /// `i_bmap`: the direct map or B-tree root (see [`super::bmap`]), or a
    /// device number in slot 0 for device nodes.
    pub bmap: [u64; INODE_BMAP_SIZE],
    /// `i_xattr` (unused, 0).
    pub xattr: u64,
    /// `i_generation`.
    pub generation: u32,
    /// `i_pad`.
    pub pad: u32,
}

impl Inode {
    /// Size of the structure; the stride may be larger (`s_inode_size`).
    pub const SIZE: usize = 128;

    /// Decode the first 128 bytes of `buf`.
    pub fn decode(buf: &[u8]) -> Result<Self> {
        need(buf, Self::SIZE, "inode")?;
        let mut bmap = [0u64; INODE_BMAP_SIZE];
        for (i, slot) in bmap.iter_mut().enumerate() {
            *slot = u64_at(buf, Self::i_bmap.offset + 8 * i);
        }
        Ok(Inode {
            blocks: Self::i_blocks.u64(buf),
            size: Self::i_size.u64(buf),
            ctime: Self::i_ctime.u64(buf),
            mtime: Self::i_mtime.u64(buf),
            ctime_nsec: Self::i_ctime_nsec.u32(buf),
            mtime_nsec: Self::i_mtime_nsec.u32(buf),
            uid: Self::i_uid.u32(buf),
            gid: Self::i_gid.u32(buf),
            mode: Self::i_mode.u16(buf),
            links_count: Self::i_links_count.u16(buf),
            flags: Self::i_flags.u32(buf),
            bmap,
            xattr: Self::i_xattr.u64(buf),
            generation: Self::i_generation.u32(buf),
            pad: Self::i_pad.u32(buf),
        })
    }

    /// Encode into the first 128 bytes of `out` (which must hold them).
    /// Bytes beyond 128 of a larger stride are left alone.
    pub fn encode(&self, out: &mut [u8]) {
        Self::i_blocks.put_u64(out, self.blocks);
        Self::i_size.put_u64(out, self.size);
        Self::i_ctime.put_u64(out, self.ctime);
        Self::i_mtime.put_u64(out, self.mtime);
        Self::i_ctime_nsec.put_u32(out, self.ctime_nsec);
        Self::i_mtime_nsec.put_u32(out, self.mtime_nsec);
        Self::i_uid.put_u32(out, self.uid);
        Self::i_gid.put_u32(out, self.gid);
        Self::i_mode.put_u16(out, self.mode);
        Self::i_links_count.put_u16(out, self.links_count);
        Self::i_flags.put_u32(out, self.flags);
        for (i, p) in self.bmap.iter().enumerate() {
            put_u64(out, Self::i_bmap.offset + 8 * i, *p);
        }
        Self::i_xattr.put_u64(out, self.xattr);
        Self::i_generation.put_u32(out, self.generation);
        Self::i_pad.put_u32(out, self.pad);
    }

    /// The encoded 128 bytes.
    pub fn to_bytes(&self) -> [u8; 128] {
        encoded(|b| self.encode(b))
    }

    /// File type bits of `i_mode`.
    pub fn file_type(&self) -> u16 {
        self.mode & S_IFMT
    }

    /// Whether the bmap is meaningful for this inode: the kernel interprets
    /// it only for regular files, directories and symlinks.
    pub fn has_bmap(&self) -> bool {
        matches!(self.file_type(), S_IFREG | S_IFDIR | S_IFLNK)
    }

    /// A FIFO, socket or device node: no mapping; `i_bmap[0]` holds a
    /// device's number (`i_device_code`) and the rest is whatever the
    /// ifile slot held before (`nilfs_write_inode_common` writes no bmap
    /// for these, and `nilfs_ifile_delete_inode` clears only `i_flags`).
    pub fn is_special(&self) -> bool {
        matches!(self.file_type(), S_IFCHR | S_IFBLK | S_IFIFO | S_IFSOCK)
    }

    /// A device's `[major, minor]`, decoded from `i_device_code` as
    /// `huge_decode_dev` does (`new_decode_dev` of the low 32 bits: minor
    /// bits 0-7 and 20-31, major bits 8-19); `None` unless a character or
    /// block device.
    pub fn rdev(&self) -> Option<[u32; 2]> {
        if !matches!(self.file_type(), S_IFCHR | S_IFBLK) {
            return None;
        }
        let dev = self.bmap[0] as u32;
        Some([(dev & 0xfff00) >> 8, (dev & 0xff) | ((dev >> 12) & 0xfff00)])
    }

    /// Store a device number as `huge_encode_dev` does (`new_encode_dev`:
    /// the inverse of [`Inode::rdev`]); majors above 12 bits and minors
    /// above 20 bits do not fit the kernel's `dev_t` and are the caller's
    /// to refuse.
    pub fn set_rdev(&mut self, [major, minor]: [u32; 2]) {
        let dev = (minor & 0xff) | (major << 8) | ((minor & !0xff) << 12);
        self.bmap[0] = u64::from(dev);
    }

    /// `i_mtime` and `i_mtime_nsec` from a time in nanoseconds since the
    /// epoch (seconds stored as the kernel stores `tv_sec`: its 64 bits).
    pub fn set_mtime_ns(&mut self, ns: i64) {
        self.mtime = ns.div_euclid(NS) as u64;
        self.mtime_nsec = ns.rem_euclid(NS) as u32;
    }

    /// The same for `i_ctime`.
    pub fn set_ctime_ns(&mut self, ns: i64) {
        self.ctime = ns.div_euclid(NS) as u64;
        self.ctime_nsec = ns.rem_euclid(NS) as u32;
    }

    /// `i_mtime` in nanoseconds since the epoch.
    pub fn mtime_ns(&self) -> i64 {
        (self.mtime as i64).wrapping_mul(NS) + i64::from(self.mtime_nsec)
    }

    /// `i_ctime` in nanoseconds since the epoch.
    pub fn ctime_ns(&self) -> i64 {
        (self.ctime as i64).wrapping_mul(NS) + i64::from(self.ctime_nsec)
    }

    /// Whether `i_mode` names one of the seven file types.
    pub fn has_valid_type(&self) -> bool {
        matches!(
            self.file_type(),
            S_IFREG | S_IFDIR | S_IFLNK | S_IFCHR | S_IFBLK | S_IFIFO | S_IFSOCK
        )
    }

    /// The checks `nilfs_iget` makes of a file's type before giving the inode
    /// to anyone: a mode outside the seven types is corruption. Linux 6.1's
    /// `__nilfs_read_inode` hands such a mode to `init_special_inode`, which
    /// only logs "bogus i_mode" and leaves the inode without file operations
    /// (a read of it fails); ext4, erofs and hfsplus refuse it with EIO, and
    /// so do we, naming the inode. Metadata-file inodes are not checked here:
    /// the kernel never asks their type.
    ///
    /// And a size past `MAX_FILE_SIZE` (`s_maxbytes`, `i64::MAX`) is
    /// corruption too: the kernel stores `i_size` in a signed `loff_t`, so
    /// such a file reads there as empty while stat reports a negative size;
    /// we refuse it rather than stream 2^63 bytes.
    pub fn check_loadable(&self, ino: u64) -> Result<()> {
        if !self.has_valid_type() {
            return Err(crate::Error::corrupt(
                "inode",
                format!("inode {ino}: i_mode {:#o} is no file type", self.mode),
            ));
        }
        if self.size > MAX_FILE_SIZE {
            return Err(crate::Error::corrupt(
                "inode",
                format!(
                    "inode {ino}: i_size {} is past the largest file size {MAX_FILE_SIZE}",
                    self.size
                ),
            ));
        }
        Ok(())
    }
}

layout!(Inode {
    i_blocks: 0, 8;
    i_size: 8, 8;
    i_ctime: 16, 8;
    i_mtime: 24, 8;
    i_ctime_nsec: 32, 4;
    i_mtime_nsec: 36, 4;
    i_uid: 40, 4;
    i_gid: 44, 4;
    i_mode: 48, 2;
    i_links_count: 50, 2;
    i_flags: 52, 4;
    i_bmap: 56, 56;
    i_xattr: 112, 8;
    i_generation: 120, 4;
    i_pad: 124, 4;
});

#[cfg(test)]
mod tests {
    use super::*;

    /// `huge_encode_dev` / `huge_decode_dev` as the kernel computes them:
    /// makedev(8, 1) is 0x801, and a minor above 255 goes to bits 20-31.
    #[test]
    fn device_numbers_are_stored_as_the_kernel_stores_them() {
        let mut i = Inode {
            mode: S_IFBLK | 0o600,
            ..Inode::default()
        };
        i.set_rdev([8, 1]);
        assert_eq!(i.bmap[0], 0x801);
        i.set_rdev([0xeb2, 0x100]);
        assert_eq!(i.bmap[0], 0x1e_b200);
        for rdev in [
            [0, 0],
            [4095, 0],
            [0, (1 << 20) - 1],
            [4095, (1 << 20) - 1],
            [1, 256],
        ] {
            i.set_rdev(rdev);
            assert_eq!(i.rdev(), Some(rdev), "{rdev:?} round-trips");
        }
        i.mode = S_IFIFO | 0o644;
        assert_eq!(i.rdev(), None, "a FIFO has no device number");
        assert!(i.is_special() && !i.has_bmap());
    }

    /// Times before 1970 keep their nanoseconds positive, as `timespec64`.
    #[test]
    fn times_in_nanoseconds_round_trip() {
        let mut i = Inode::default();
        for ns in [
            0i64,
            1,
            1_999_999_999,
            -1,
            -1_000_000_001,
            1_796_147_861_584_223_106,
        ] {
            i.set_mtime_ns(ns);
            i.set_ctime_ns(ns);
            assert!(i.mtime_nsec < 1_000_000_000);
            assert_eq!((i.mtime_ns(), i.ctime_ns()), (ns, ns));
        }
    }
}
