//! The namespace (namei.c, with the directory edits of dir.c): lookup,
//! create, mkdir, unlink, rmdir, link, symlink, rename and readdir, each
//! with the refusals the VFS and the kernel give, in their order.

use super::Fs;
use crate::dir::{DirFile, Found};
use crate::format::dir::file_type_from_mode;
use crate::format::inode::{S_IFBLK, S_IFCHR, S_IFDIR, S_IFIFO, S_IFMT, S_IFREG, S_IFSOCK};
use crate::format::{ino, Ino};
use crate::{Errno, Error, Result};

impl<'a> Fs<'a> {
    /// Look `name` up in directory `parent`.
    pub fn lookup(&mut self, parent: Ino, name: &[u8]) -> Result<Option<Ino>> {
        Ok(self.dir_read(parent)?.find(name)?.map(|f| f.ino))
    }

    pub(crate) fn check_name(&mut self, parent: Ino, name: &[u8]) -> Result<()> {
        if name.is_empty() || name.contains(&b'/') || name == b"." || name == b".." {
            return Err(Error::errno(Errno::EINVAL, String::from_utf8_lossy(name)));
        }
        if name.len() > crate::format::NAME_LEN {
            return Err(Error::errno(
                Errno::ENAMETOOLONG,
                String::from_utf8_lossy(name),
            ));
        }
        if self.lookup(parent, name)?.is_some() {
            return Err(Error::errno(Errno::EEXIST, String::from_utf8_lossy(name)));
        }
        Ok(())
    }

    pub(crate) fn link_into(
        &mut self,
        parent: Ino,
        name: &[u8],
        child: Ino,
        mode: u16,
    ) -> Result<()> {
        let now = self.now;
        let nsec = self.now_nsec;
        let d = self.dir(parent)?;
        d.add_link(name, child, file_type_from_mode(mode))?;
        let size = d.size();
        let f = self.inodes.loaded_mut(parent);
        // A directory grows by whole blocks (the kernel's chunk).
        f.raw.size = size;
        f.modified((now, nsec));
        self.inodes.touch(parent);
        Ok(())
    }

    /// `nilfs_create`: a new empty regular file `name` in `parent`.
    pub fn create(&mut self, parent: Ino, name: &[u8], perm: u16) -> Result<Ino> {
        self.atomically(|fs| fs.create_now(parent, name, perm))
    }

    fn create_now(&mut self, parent: Ino, name: &[u8], perm: u16) -> Result<Ino> {
        self.check_name(parent, name)?;
        self.begin(true)?;
        let mode = S_IFREG | (perm & 0o7777);
        let i = self.new_inode(parent, mode, 1)?;
        self.link_into(parent, name, i, mode)?;
        Ok(i)
    }

    /// `nilfs_mknod`: a FIFO, socket or device node `name` in `parent`
    /// (`mode` carries the type), a device with its number
    /// (`init_special_inode`; stored by `nilfs_write_inode_common` as
    /// `i_device_code`). A FIFO's or socket's number is dropped. EINVAL for
    /// a number the kernel's `dev_t` cannot hold (12-bit major, 20-bit
    /// minor: the syscall's `new_decode_dev` never makes one).
    pub fn mknod(&mut self, parent: Ino, name: &[u8], mode: u16, rdev: [u32; 2]) -> Result<Ino> {
        self.atomically(|fs| fs.mknod_now(parent, name, mode, rdev))
    }

    fn mknod_now(&mut self, parent: Ino, name: &[u8], mode: u16, rdev: [u32; 2]) -> Result<Ino> {
        let raw_type = mode & S_IFMT;
        if !matches!(raw_type, S_IFCHR | S_IFBLK | S_IFIFO | S_IFSOCK) {
            return Err(Error::errno(Errno::EINVAL, "mknod of no special type"));
        }
        if rdev[0] >= 1 << 12 || rdev[1] >= 1 << 20 {
            return Err(Error::errno(Errno::EINVAL, "device number too large"));
        }
        self.check_name(parent, name)?;
        self.begin(true)?;
        let mode = raw_type | (mode & 0o7777);
        let i = self.new_inode(parent, mode, 1)?;
        let f = self.inodes.loaded_mut(i);
        if matches!(raw_type, S_IFCHR | S_IFBLK) {
            f.raw.set_rdev(rdev);
        }
        self.link_into(parent, name, i, mode)?;
        Ok(i)
    }

    /// `nilfs_mkdir`: a new directory with "." and "..".
    pub fn mkdir(&mut self, parent: Ino, name: &[u8], perm: u16) -> Result<Ino> {
        self.atomically(|fs| fs.mkdir_now(parent, name, perm))
    }

    fn mkdir_now(&mut self, parent: Ino, name: &[u8], perm: u16) -> Result<Ino> {
        self.check_name(parent, name)?;
        self.begin(true)?;
        if self.file(parent)?.raw.links_count >= crate::format::LINK_MAX as u16 {
            return Err(Error::errno(Errno::EMLINK, String::from_utf8_lossy(name)));
        }
        let mode = S_IFDIR | (perm & 0o7777);
        let i = self.new_inode(parent, mode, 2)?;
        let d = DirFile::make_empty(self.bs, i, parent);
        let f = self.inodes.loaded_mut(i);
        f.raw.size = d.size();
        f.dir = Some(d);
        self.inodes.pages_dirtied(i); // nilfs_make_empty writes "." and ".."
        self.file(parent)?.raw.links_count += 1;
        self.link_into(parent, name, i, mode)?;
        Ok(i)
    }

    /// The live entries of directory `i` (name, inode, type), "." and ".."
    /// included, in on-disk order.
    pub fn readdir(&mut self, i: Ino) -> Result<Vec<(Vec<u8>, Ino, u8)>> {
        self.dir_read(i)?.entries()
    }

    /// The entry `name` of `parent`; ENOENT if there is none.
    fn find_entry(&mut self, parent: Ino, name: &[u8]) -> Result<Found> {
        self.dir_read(parent)?
            .find(name)?
            .ok_or_else(|| Error::errno(Errno::ENOENT, String::from_utf8_lossy(name)))
    }

    /// `nilfs_unlink`: remove `name` from `parent`; the inode goes with its
    /// last link. EISDIR for a directory.
    pub fn unlink(&mut self, parent: Ino, name: &[u8]) -> Result<()> {
        self.atomically(|fs| fs.unlink_now(parent, name))
    }

    fn unlink_now(&mut self, parent: Ino, name: &[u8]) -> Result<()> {
        self.begin(false)?;
        let found = self.find_entry(parent, name)?;
        if self.file(found.ino)?.raw.mode & S_IFMT == S_IFDIR {
            return Err(Error::errno(Errno::EISDIR, String::from_utf8_lossy(name)));
        }
        self.dir(parent)?.delete_entry(found.pos)?;
        self.touch_dir(parent);
        self.drop_link(found.ino, 1)
    }

    /// `nilfs_rmdir`: remove the empty directory `name` (ENOTDIR,
    /// ENOTEMPTY as the kernel gives them).
    pub fn rmdir(&mut self, parent: Ino, name: &[u8]) -> Result<()> {
        self.atomically(|fs| fs.rmdir_now(parent, name))
    }

    fn rmdir_now(&mut self, parent: Ino, name: &[u8]) -> Result<()> {
        self.begin(false)?;
        let found = self.find_entry(parent, name)?;
        if self.file(found.ino)?.raw.mode & S_IFMT != S_IFDIR {
            return Err(Error::errno(Errno::ENOTDIR, String::from_utf8_lossy(name)));
        }
        if !self.dir_read(found.ino)?.is_empty(found.ino)? {
            return Err(Error::errno(
                Errno::ENOTEMPTY,
                String::from_utf8_lossy(name),
            ));
        }
        self.dir(parent)?.delete_entry(found.pos)?;
        self.touch_dir(parent);
        let p = self.inodes.loaded_mut(parent);
        p.raw.links_count = p.raw.links_count.saturating_sub(1);
        self.evict(found.ino)
    }

    /// `nilfs_link`: another name for `target` (EPERM for a directory,
    /// EMLINK at the link limit).
    pub fn link(&mut self, target: Ino, parent: Ino, name: &[u8]) -> Result<()> {
        self.atomically(|fs| fs.link_now(target, parent, name))
    }

    fn link_now(&mut self, target: Ino, parent: Ino, name: &[u8]) -> Result<()> {
        // do_linkat looks the new name up (EEXIST) before vfs_link refuses
        // a directory (EPERM), an inode no name holds any more (ENOENT:
        // "don't allow creating hardlink to an unlinked file") or a full
        // link count (EMLINK).
        self.check_name(parent, name)?;
        self.begin(true)?;
        let raw = self.file(target)?.raw.clone();
        if raw.mode & S_IFMT == S_IFDIR {
            return Err(Error::errno(Errno::EPERM, String::from_utf8_lossy(name)));
        }
        if raw.links_count == 0 {
            return Err(Error::errno(Errno::ENOENT, String::from_utf8_lossy(name)));
        }
        if u32::from(raw.links_count) >= crate::format::LINK_MAX {
            return Err(Error::errno(Errno::EMLINK, String::from_utf8_lossy(name)));
        }
        self.link_into(parent, name, target, raw.mode)?;
        self.inodes.loaded_mut(target).raw.links_count += 1;
        self.mark(target);
        Ok(())
    }

    /// `nilfs_symlink`: a symlink whose target is stored as file data
    /// (ENAMETOOLONG when it does not fit in one block with its NUL).
    pub fn symlink(&mut self, parent: Ino, name: &[u8], target: &[u8]) -> Result<Ino> {
        self.atomically(|fs| fs.symlink_now(parent, name, target))
    }

    fn symlink_now(&mut self, parent: Ino, name: &[u8], target: &[u8]) -> Result<Ino> {
        if target.len() + 1 > self.bs as usize {
            return Err(Error::errno(
                Errno::ENAMETOOLONG,
                String::from_utf8_lossy(target),
            ));
        }
        if target.is_empty() {
            return Err(Error::errno(Errno::ENOENT, "empty symlink target"));
        }
        self.check_name(parent, name)?;
        self.begin(true)?;
        let mode = crate::format::inode::S_IFLNK | 0o777;
        let i = self.new_inode(parent, mode, 1)?;
        let mut block = vec![0u8; self.bs as usize];
        block[..target.len()].copy_from_slice(target);
        let f = self.inodes.loaded_mut(i);
        f.dirty.insert(0, block);
        f.raw.size = target.len() as u64;
        self.inodes.pages_dirtied(i); // page_symlink writes the target's block
        self.link_into(parent, name, i, mode)?;
        Ok(i)
    }

    /// Whether `anc` is `d` or one of its ancestors.
    pub(crate) fn is_ancestor(&mut self, anc: Ino, mut d: Ino) -> Result<bool> {
        for _ in 0..u32::from(u16::MAX) {
            if d == anc {
                return Ok(true);
            }
            if d == ino::ROOT {
                return Ok(false);
            }
            d = self
                .lookup(d, b"..")?
                .ok_or_else(|| Error::corrupt("directory", "no \"..\" entry"))?;
        }
        Err(Error::corrupt(
            "directory",
            "\"..\" chain does not reach the root",
        ))
    }

    /// `nilfs_rename` (with the VFS's checks): move `oname` of `odir` to
    /// `nname` of `ndir`, replacing what is there.
    pub fn rename(&mut self, odir: Ino, oname: &[u8], ndir: Ino, nname: &[u8]) -> Result<()> {
        self.atomically(|fs| fs.rename_now(odir, oname, ndir, nname))
    }

    fn rename_now(&mut self, odir: Ino, oname: &[u8], ndir: Ino, nname: &[u8]) -> Result<()> {
        self.begin(true)?;
        let shown = || String::from_utf8_lossy(oname).into_owned();
        let old = self
            .dir_read(odir)?
            .find(oname)?
            .ok_or_else(|| Error::errno(Errno::ENOENT, shown()))?;
        if nname.len() > crate::format::NAME_LEN {
            return Err(Error::errno(
                Errno::ENAMETOOLONG,
                String::from_utf8_lossy(nname),
            ));
        }
        let is_dir = self.file(old.ino)?.raw.mode & S_IFMT == S_IFDIR;
        if is_dir && self.is_ancestor(old.ino, ndir)? {
            return Err(Error::errno(Errno::EINVAL, shown()));
        }
        let target = self.dir_read(ndir)?.find(nname)?;
        if let Some(t) = target {
            if t.ino == old.ino {
                return Ok(());
            }
            // do_renameat2: a target that is an ancestor of the source
            // (lock_rename's trap) is ENOTEMPTY, before any type check.
            if self.is_ancestor(t.ino, odir)? {
                return Err(Error::errno(Errno::ENOTEMPTY, shown()));
            }
            let t_dir = self.file(t.ino)?.raw.mode & S_IFMT == S_IFDIR;
            match (is_dir, t_dir) {
                (true, false) => return Err(Error::errno(Errno::ENOTDIR, shown())),
                (false, true) => return Err(Error::errno(Errno::EISDIR, shown())),
                (true, true) if !self.dir_read(t.ino)?.is_empty(t.ino)? => {
                    return Err(Error::errno(Errno::ENOTEMPTY, shown()))
                }
                _ => {}
            }
        } else if is_dir
            && odir != ndir
            && u32::from(self.file(ndir)?.raw.links_count) >= crate::format::LINK_MAX
        {
            return Err(Error::errno(Errno::EMLINK, shown()));
        }
        let mode = self.inodes.loaded(old.ino).raw.mode;
        match target {
            Some(t) => {
                self.dir(ndir)?
                    .set_link(t.pos, old.ino, file_type_from_mode(mode))?;
                self.touch_dir(ndir);
                self.drop_link(t.ino, if is_dir { 2 } else { 1 })?;
            }
            None => {
                self.link_into(ndir, nname, old.ino, mode)?;
                if is_dir {
                    self.inodes.loaded_mut(ndir).raw.links_count += 1;
                }
            }
        }
        self.mark(old.ino);
        // The old entry's position is unchanged by the add above (records
        // never move; at most its slack was split off).
        let old_pos = self
            .dir_read(odir)?
            .find(oname)?
            .map(|f| f.pos)
            .unwrap_or(old.pos);
        self.dir(odir)?.delete_entry(old_pos)?;
        self.touch_dir(odir);
        if is_dir {
            let dotdot = self
                .dir_read(old.ino)?
                .find(b"..")?
                .ok_or_else(|| Error::corrupt("directory", "no \"..\""))?;
            self.dir(old.ino)?
                .set_link(dotdot.pos, ndir, crate::format::dir::FT_DIR)?;
            // nilfs_set_link: the directory whose entry was rewritten,
            // here the moved one's "..", gets mtime and ctime (6.1 does it
            // for every renamed directory, as this does).
            self.touch_dir(old.ino);
            let p = self.inodes.loaded_mut(odir);
            p.raw.links_count = p.raw.links_count.saturating_sub(1);
        }
        Ok(())
    }
}
