//! The VFS's part of the file API: path walks (`link_path_walk`,
//! `filename_parentat`: `.`, `..`, symlinks, `ENAMETOOLONG`, `ELOOP`) and
//! the path-level operations a process calls, each with the checks the VFS
//! makes before it reaches NILFS2 (`open(O_CREAT)`'s create-or-open rule,
//! `may_open`'s write access on a read-only mount, `readlink` on a
//! non-symlink). [`Fs`]'s own operations take inode numbers, as the
//! kernel's inode operations do; [`Paths`] is what `nilref apply` and the
//! lockstep adapter drive.

use super::file::SetAttr;
use super::Fs;
use crate::format::inode::{
    Inode, MAX_FILE_SIZE, S_IFBLK, S_IFCHR, S_IFDIR, S_IFIFO, S_IFLNK, S_IFMT, S_IFREG, S_IFSOCK,
};
use crate::format::{ino, Ino, NAME_LEN};
use crate::{Errno, Error, Result};

/// `PATH_MAX`: a path of this many bytes or more is ENAMETOOLONG.
pub const PATH_MAX: usize = 4096;
/// `MAXSYMLINKS`: symlinks followed during one walk before ELOOP.
pub const MAX_SYMLINKS: u32 = 40;

fn refuse(errno: Errno, path: &[u8]) -> Error {
    Error::errno(errno, String::from_utf8_lossy(path))
}

/// A last component that is not a name (`type != LAST_NORM` in namei):
/// the root ("" after the slashes), "." or "..".
fn is_special(name: &[u8]) -> bool {
    name.is_empty() || name == b"." || name == b".."
}

impl<'a> Fs<'a> {
    /// Resolve an absolute path from the root, following every symlink
    /// (the last component's too).
    pub fn resolve(&mut self, path: &[u8]) -> Result<Ino> {
        self.walk(path, true)
    }

    /// `link_path_walk` from the root: `.` and `..`, intermediate symlinks
    /// followed, the last one only if `follow`.
    pub fn walk(&mut self, path: &[u8], follow: bool) -> Result<Ino> {
        let mut budget = MAX_SYMLINKS;
        self.walk_from(ino::ROOT, path, follow, &mut budget)
    }

    fn walk_from(
        &mut self,
        start: Ino,
        path: &[u8],
        follow: bool,
        budget: &mut u32,
    ) -> Result<Ino> {
        if path.is_empty() {
            return Err(refuse(Errno::ENOENT, path));
        }
        if path.len() >= PATH_MAX {
            return Err(refuse(Errno::ENAMETOOLONG, path));
        }
        let mut cur = if path.starts_with(b"/") {
            ino::ROOT
        } else {
            start
        };
        let comps: Vec<&[u8]> = path
            .split(|&c| c == b'/')
            .filter(|c| !c.is_empty())
            .collect();
        for (k, comp) in comps.iter().enumerate() {
            let last = k + 1 == comps.len();
            if self.stat(cur)?.mode & S_IFMT != S_IFDIR {
                return Err(refuse(Errno::ENOTDIR, path));
            }
            if *comp == b"." {
                continue;
            }
            name_fits(comp)?;
            let dir = cur;
            let next = self
                .lookup(dir, comp)?
                .ok_or_else(|| refuse(Errno::ENOENT, path))?;
            let raw = self.stat(next)?;
            cur = if raw.mode & S_IFMT == S_IFLNK && (!last || follow) {
                if *budget == 0 {
                    return Err(refuse(Errno::ELOOP, path));
                }
                *budget -= 1;
                let target = self.symlink_target(next)?;
                self.walk_from(dir, &target, true, budget)?
            } else {
                next
            };
        }
        Ok(cur)
    }

    /// The directory that would hold `path`'s last component, and that
    /// component (trailing slashes ignored); ENAMETOOLONG if the component
    /// is longer than a name may be.
    pub fn walk_parent(&mut self, path: &[u8]) -> Result<(Ino, Vec<u8>)> {
        let (dir, name) = self.walk_parent_unchecked(path)?;
        name_fits(&name)?;
        Ok((dir, name))
    }

    /// `filename_parentat`: [`Self::walk_parent`] without the last name's
    /// length check, which the VFS leaves to that name's lookup.
    pub fn walk_parent_unchecked(&mut self, path: &[u8]) -> Result<(Ino, Vec<u8>)> {
        if path.is_empty() {
            return Err(refuse(Errno::ENOENT, path));
        }
        let end = path.iter().rposition(|&c| c != b'/').map_or(0, |k| k + 1);
        let trimmed = &path[..end];
        let (dir_path, name) = match trimmed.iter().rposition(|&c| c == b'/') {
            Some(k) => (&trimmed[..k], &trimmed[k + 1..]),
            None => (&b""[..], trimmed),
        };
        let dir = if dir_path.is_empty() {
            ino::ROOT
        } else {
            self.resolve(dir_path)?
        };
        if self.stat(dir)?.mode & S_IFMT != S_IFDIR {
            return Err(refuse(Errno::ENOTDIR, path));
        }
        Ok((dir, name.to_vec()))
    }

    /// The path-level operations on this mount.
    pub fn paths(&mut self) -> Paths<'_, 'a> {
        Paths { fs: self }
    }
}

/// The system calls a process makes on a mounted file system, by path
/// (see the module documentation).
pub struct Paths<'f, 'a> {
    fs: &'f mut Fs<'a>,
}

impl Paths<'_, '_> {
    /// `open(path, O_CREAT [| O_EXCL], perm)`: an existing file is opened
    /// (EEXIST with `excl`; EISDIR for a directory, which cannot be opened
    /// for writing; EROFS on a read-only mount), a missing one created.
    pub fn create(&mut self, path: &[u8], perm: u16, excl: bool) -> Result<Ino> {
        let (dir, name) = self.fs.walk_parent_unchecked(path)?;
        // "/", "." or "..": do_open finds the directory and creates nothing.
        if is_special(&name) {
            return Err(refuse(
                if excl { Errno::EEXIST } else { Errno::EISDIR },
                path,
            ));
        }
        // A trailing slash names a directory, which O_CREAT never makes:
        // EISDIR before the name is looked up or its length checked
        // (`open_last_lookups`, "trailing slashes?"; docs/findings.md M9).
        if path.ends_with(b"/") {
            return Err(refuse(Errno::EISDIR, path));
        }
        name_fits(&name)?;
        let Some(found) = self.fs.lookup(dir, &name)? else {
            return self.fs.create(dir, &name, perm);
        };
        if excl {
            return Err(refuse(Errno::EEXIST, path));
        }
        let mut budget = MAX_SYMLINKS - 1;
        self.open_creating(dir, found, path, perm, &mut budget)
    }

    /// The last step of `open(O_CREAT)` without `O_EXCL` on `found`, an
    /// existing entry of `dir`: a directory is EISDIR, a file is opened
    /// (EROFS on a read-only mount, `may_open`), and a symlink is followed
    /// (`open_last_lookups` -> `step_into`), the walk going on with its
    /// body from `dir`: the body's last component is opened the same way,
    /// or created when it does not exist, so a dangling link's target is
    /// created. A body ending in `/` is EISDIR before its last name is
    /// looked up, as a path ending in one is (M9).
    fn open_creating(
        &mut self,
        dir: Ino,
        found: Ino,
        path: &[u8],
        perm: u16,
        budget: &mut u32,
    ) -> Result<Ino> {
        let raw = self.fs.stat(found)?;
        match raw.mode & S_IFMT {
            S_IFDIR => return Err(refuse(Errno::EISDIR, path)),
            S_IFLNK => {}
            _ => {
                if self.fs.is_read_only() {
                    return Err(refuse(Errno::EROFS, path));
                }
                return Ok(found);
            }
        }
        let body = self.fs.symlink_target(found)?;
        if body.is_empty() {
            return Err(refuse(Errno::ENOENT, path));
        }
        let end = body.iter().rposition(|&c| c != b'/').map_or(0, |k| k + 1);
        let slash = end != body.len();
        let (parent, name) = match body[..end].iter().rposition(|&c| c == b'/') {
            Some(k) => (&body[..k], &body[k + 1..end]),
            None => (&b""[..], &body[..end]),
        };
        let next_dir = if !parent.is_empty() {
            self.fs.walk_from(dir, parent, true, budget)?
        } else if body.starts_with(b"/") {
            ino::ROOT
        } else {
            dir
        };
        if self.fs.stat(next_dir)?.mode & S_IFMT != S_IFDIR {
            return Err(refuse(Errno::ENOTDIR, path));
        }
        if is_special(name) || slash {
            return Err(refuse(Errno::EISDIR, path));
        }
        name_fits(name)?;
        match self.fs.lookup(next_dir, name)? {
            None => self.fs.create(next_dir, name, perm),
            Some(next) => {
                if self.fs.stat(next)?.mode & S_IFMT == S_IFLNK {
                    if *budget == 0 {
                        return Err(refuse(Errno::ELOOP, path));
                    }
                    *budget -= 1;
                }
                self.open_creating(next_dir, next, path, perm, budget)
            }
        }
    }

    /// `open(path, O_WRONLY)` then `pwrite`: EISDIR for a directory
    /// (whatever the write's length), then EROFS on a read-only mount
    /// (`may_open`); an offset past `i64::MAX` (a negative `loff_t`) is
    /// EINVAL (`ksys_pwrite64`); then `generic_write_check_limits`: EFBIG
    /// at or past `s_maxbytes`, and a write crossing it shortened. Returns
    /// the bytes written.
    pub fn write(&mut self, path: &[u8], offset: u64, data: &[u8]) -> Result<u64> {
        let i = self.fs.resolve(path)?;
        if self.fs.stat(i)?.mode & S_IFMT == S_IFDIR {
            return Err(refuse(Errno::EISDIR, path));
        }
        if self.fs.is_read_only() {
            return Err(refuse(Errno::EROFS, path));
        }
        if offset > i64::MAX as u64 {
            return Err(refuse(Errno::EINVAL, path));
        }
        if data.is_empty() {
            return Ok(0);
        }
        if offset >= MAX_FILE_SIZE {
            return Err(refuse(Errno::EFBIG, path));
        }
        let room = MAX_FILE_SIZE - offset;
        let data = &data[..room.min(data.len() as u64) as usize];
        self.fs.write(i, offset, data)
    }

    /// `pread`.
    pub fn read(&mut self, path: &[u8], offset: u64, len: u64) -> Result<Vec<u8>> {
        let i = self.fs.resolve(path)?;
        self.fs.read(i, offset, len)
    }

    /// `lstat`.
    pub fn lstat(&mut self, path: &[u8]) -> Result<Inode> {
        let i = self.fs.walk(path, false)?;
        self.fs.stat(i)
    }

    /// `readdir` without `.` and `..`, in on-disk order.
    pub fn readdir(&mut self, path: &[u8]) -> Result<Vec<Vec<u8>>> {
        let i = self.fs.resolve(path)?;
        Ok(self
            .fs
            .readdir(i)?
            .into_iter()
            .map(|(n, _, _)| n)
            .filter(|n| n != b"." && n != b"..")
            .collect())
    }

    /// `readlink`: the target is the symlink's data (`page_get_link`);
    /// EINVAL for anything else.
    pub fn readlink(&mut self, path: &[u8]) -> Result<Vec<u8>> {
        let i = self.fs.walk(path, false)?;
        let raw = self.fs.stat(i)?;
        if raw.mode & S_IFMT != S_IFLNK {
            return Err(refuse(Errno::EINVAL, path));
        }
        self.fs.symlink_target(i)
    }

    /// `mkdir`.
    pub fn mkdir(&mut self, path: &[u8], perm: u16) -> Result<Ino> {
        let (d, n) = self.fs.walk_parent(path)?;
        // filename_create: EEXIST unless the last part is a name.
        if is_special(&n) {
            return Err(refuse(Errno::EEXIST, path));
        }
        self.fs.mkdir(d, &n, perm)
    }

    /// What unlink and rmdir check once the parent walk is done: write
    /// access (`mnt_want_write`: EROFS), then the last name's length (its
    /// lookup, `nilfs_lookup`: ENAMETOOLONG).
    fn name_after_write_access(&mut self, name: &[u8]) -> Result<()> {
        if self.fs.is_read_only() {
            return Err(refuse(Errno::EROFS, name));
        }
        name_fits(name)?;
        Ok(())
    }

    /// `unlink`.
    pub fn unlink(&mut self, path: &[u8]) -> Result<()> {
        let (d, n) = self.fs.walk_parent_unchecked(path)?;
        // do_unlinkat: EISDIR before write access for a non-name; then
        // write access, then the name's length.
        if is_special(&n) {
            return Err(refuse(Errno::EISDIR, path));
        }
        self.name_after_write_access(&n)?;
        self.fs.unlink(d, &n)
    }

    /// `rmdir`.
    pub fn rmdir(&mut self, path: &[u8]) -> Result<()> {
        let (d, n) = self.fs.walk_parent_unchecked(path)?;
        // do_rmdir: ENOTEMPTY for "..", EINVAL for ".", EBUSY for "/".
        match &n[..] {
            b".." => return Err(refuse(Errno::ENOTEMPTY, path)),
            b"." => return Err(refuse(Errno::EINVAL, path)),
            b"" => return Err(refuse(Errno::EBUSY, path)),
            _ => {}
        }
        self.name_after_write_access(&n)?;
        self.fs.rmdir(d, &n)
    }

    /// `symlink(target, path)`.
    pub fn symlink(&mut self, target: &[u8], path: &[u8]) -> Result<Ino> {
        let (d, n) = self.fs.walk_parent(path)?;
        if is_special(&n) {
            return Err(refuse(Errno::EEXIST, path));
        }
        self.fs.symlink(d, &n, target)
    }

    /// `linkat` without `AT_SYMLINK_FOLLOW`: the old name is not followed.
    pub fn link(&mut self, old: &[u8], new: &[u8]) -> Result<()> {
        let i = self.fs.walk(old, false)?;
        let (d, n) = self.fs.walk_parent(new)?;
        if is_special(&n) {
            return Err(refuse(Errno::EEXIST, new));
        }
        self.fs.link(i, d, &n)
    }

    /// `rename`.
    pub fn rename(&mut self, old: &[u8], new: &[u8]) -> Result<()> {
        let ((od, on), (nd, nn)) = self.rename_parents(old, new, false)?;
        self.fs.rename(od, &on, nd, &nn)
    }

    /// What every rename checks before the source's lookup
    /// (`do_renameat2`): both parent walks, EBUSY if the source's last
    /// part is not a name, then the same for the target's, EEXIST instead
    /// with RENAME_NOREPLACE; mnt_want_write's EROFS, then the source
    /// name's length (nilfs_lookup: ENAMETOOLONG). `Fs::rename` looks the
    /// source up before checking the target's name.
    #[allow(clippy::type_complexity)]
    fn rename_parents(
        &mut self,
        old: &[u8],
        new: &[u8],
        noreplace: bool,
    ) -> Result<((Ino, Vec<u8>), (Ino, Vec<u8>))> {
        let (od, on) = self.fs.walk_parent_unchecked(old)?;
        let (nd, nn) = self.fs.walk_parent_unchecked(new)?;
        if is_special(&on) {
            return Err(refuse(Errno::EBUSY, old));
        }
        if is_special(&nn) {
            let e = if noreplace {
                Errno::EEXIST
            } else {
                Errno::EBUSY
            };
            return Err(refuse(e, new));
        }
        if self.fs.is_read_only() {
            return Err(refuse(Errno::EROFS, old));
        }
        name_fits(&on)?;
        Ok(((od, on), (nd, nn)))
    }

    /// `renameat2` with RENAME_NOREPLACE and/or RENAME_EXCHANGE: both is
    /// EINVAL before anything (`do_renameat2`); then as [`Paths::rename`]
    /// up to the lookups; EEXIST for NOREPLACE onto an existing name,
    /// ENOENT for EXCHANGE with a missing one; an exchange of an inode with
    /// itself succeeds (`vfs_rename`), any other reaches `nilfs_rename`,
    /// which allows no flag but NOREPLACE (EINVAL).
    pub fn rename_flags(
        &mut self,
        old: &[u8],
        new: &[u8],
        noreplace: bool,
        exchange: bool,
    ) -> Result<()> {
        if noreplace && exchange {
            return Err(refuse(Errno::EINVAL, old));
        }
        if !noreplace && !exchange {
            return self.rename(old, new);
        }
        let ((od, on), (nd, nn)) = self.rename_parents(old, new, noreplace)?;
        let src = self
            .fs
            .lookup(od, &on)?
            .ok_or_else(|| refuse(Errno::ENOENT, old))?;
        name_fits(&nn)?;
        match self.fs.lookup(nd, &nn)? {
            Some(_) if noreplace => Err(refuse(Errno::EEXIST, new)),
            None if exchange => Err(refuse(Errno::ENOENT, new)),
            Some(dst) if exchange && dst == src => Ok(()),
            Some(_) => Err(refuse(Errno::EINVAL, b"RENAME_EXCHANGE")),
            None => self.fs.rename(od, &on, nd, &nn),
        }
    }

    /// What an extended attribute call on `path` answers: nilfs2 installs
    /// no xattr handler. After the lookup: EROFS for a change on a
    /// read-only mount (`mnt_want_write`), ERANGE for a name empty or over
    /// 255 bytes, `xattr_permission`'s refusal of `user.*` on anything but
    /// a regular file or directory (EPERM to change, ENODATA to read), and
    /// then `xattr_resolve_name`'s EOPNOTSUPP.
    pub fn xattr(&mut self, path: &[u8], name: &[u8], follow: bool, write: bool) -> Result<()> {
        let i = self.fs.walk(path, follow)?;
        if write && self.fs.is_read_only() {
            return Err(refuse(Errno::EROFS, path));
        }
        if name.is_empty() || name.len() > 255 {
            return Err(refuse(Errno::ERANGE, name));
        }
        let t = self.fs.stat(i)?.mode & S_IFMT;
        if name.starts_with(b"user.") && t != S_IFREG && t != S_IFDIR {
            let e = if write { Errno::EPERM } else { Errno::ENODATA };
            return Err(refuse(e, name));
        }
        Err(refuse(Errno::EOPNOTSUPP, name))
    }

    /// `listxattr`: nilfs2 has none to list (with no security module's
    /// labels, the VFS answers an empty list).
    pub fn listxattr(&mut self, path: &[u8], follow: bool) -> Result<Vec<Vec<u8>>> {
        self.fs.walk(path, follow)?;
        Ok(Vec::new())
    }

    /// `truncate`: a negative length (past `i64::MAX`) is EINVAL
    /// (`do_sys_truncate`); `s_maxbytes` is `i64::MAX`, so
    /// `inode_newsize_ok`'s EFBIG cannot follow.
    pub fn truncate(&mut self, path: &[u8], size: u64) -> Result<()> {
        let i = self.fs.resolve(path)?;
        if size > i64::MAX as u64 {
            return Err(refuse(Errno::EINVAL, path));
        }
        self.fs.truncate(i, size)
    }

    /// `write(2)` on a file opened `O_WRONLY | O_APPEND`: the data goes at
    /// the end of the file as it is when the write is made
    /// (`generic_write_checks` sets the position to `i_size`), with the
    /// checks of [`Paths::write`]. Returns the bytes written.
    pub fn append(&mut self, path: &[u8], data: &[u8]) -> Result<u64> {
        let i = self.fs.resolve(path)?;
        let size = self.fs.stat(i)?.size;
        self.write(path, size, data)
    }

    /// `chmod`: the path followed; the 12 permission bits replaced
    /// (`chmod_common`: `S_IALLUGO`); ATTR_MODE | ATTR_CTIME.
    pub fn chmod(&mut self, path: &[u8], perm: u16) -> Result<()> {
        let i = self.fs.resolve(path)?;
        self.fs.setattr(
            i,
            SetAttr {
                perm: Some(perm & 0o7777),
                ..SetAttr::default()
            },
        )
    }

    /// `fchownat`, an absent id being -1, with `AT_SYMLINK_NOFOLLOW`
    /// unless `follow` (`chown_common`): the ids and ctime; on anything
    /// but a directory also ATTR_KILL_SUID | ATTR_KILL_SGID, which
    /// `notify_change` turns into clearing S_ISUID, and S_ISGID when
    /// S_IXGRP is set too (Linux 6.1).
    pub fn chown(
        &mut self,
        path: &[u8],
        uid: Option<u32>,
        gid: Option<u32>,
        follow: bool,
    ) -> Result<()> {
        let i = self.fs.walk(path, follow)?;
        let mode = self.fs.stat(i)?.mode;
        let mut perm = mode & 0o7777;
        if mode & S_IFMT != S_IFDIR {
            perm &= !0o4000;
            if perm & 0o2010 == 0o2010 {
                perm &= !0o2000;
            }
        }
        self.fs.setattr(
            i,
            SetAttr {
                perm: (perm != mode & 0o7777).then_some(perm),
                uid,
                gid,
                ..SetAttr::default()
            },
        )
    }

    /// `utimensat` with the access time `UTIME_OMIT` (nilfs2 keeps no
    /// access time on disk: `nilfs_read_inode_common` loads it from
    /// `i_mtime`): the modification time set to `mtime` nanoseconds since
    /// the epoch, or to the clock when `None` (UTIME_NOW); and ctime.
    pub fn utimes(&mut self, path: &[u8], mtime: Option<i64>, follow: bool) -> Result<()> {
        let i = self.fs.walk(path, follow)?;
        let mtime = mtime.unwrap_or(self.fs.now_ns() as i64);
        self.fs.setattr(
            i,
            SetAttr {
                mtime: Some(mtime),
                ..SetAttr::default()
            },
        )
    }

    /// `mknod(path, mode, rdev)` (`do_mknodat`): `may_mknod` first (EPERM
    /// for a directory type, EINVAL for a symlink or no known type; type
    /// 0 means a regular file), then `filename_create`: EEXIST for "/",
    /// "." or ".." or an existing name, ENOENT for a trailing slash on a
    /// new name; a regular type is `nilfs_create`, the others
    /// `nilfs_mknod`.
    pub fn mknod(&mut self, path: &[u8], mode: u16, rdev: [u32; 2]) -> Result<Ino> {
        let mode = match mode & S_IFMT {
            0 => mode | S_IFREG,
            S_IFREG | S_IFCHR | S_IFBLK | S_IFIFO | S_IFSOCK => mode,
            S_IFDIR => return Err(refuse(Errno::EPERM, path)),
            _ => return Err(refuse(Errno::EINVAL, path)),
        };
        let (d, n) = self.fs.walk_parent(path)?;
        if is_special(&n) {
            return Err(refuse(Errno::EEXIST, path));
        }
        if path.ends_with(b"/") && self.fs.lookup(d, &n)?.is_none() {
            return Err(refuse(Errno::ENOENT, path));
        }
        if mode & S_IFMT == S_IFREG {
            return self.fs.create(d, &n, mode & 0o7777);
        }
        self.fs.mknod(d, &n, mode, rdev)
    }

    /// `fsync` of an open file.
    pub fn fsync(&mut self, path: &[u8]) -> Result<()> {
        let i = self.fs.resolve(path)?;
        self.fs.fsync(i)
    }

    /// `fdatasync` of an open file.
    pub fn fdatasync(&mut self, path: &[u8]) -> Result<()> {
        let i = self.fs.resolve(path)?;
        self.fs.fdatasync(i)
    }
}

/// `nilfs_lookup`'s ENAMETOOLONG for a name over `NAME_LEN` bytes, where
/// the VFS looks a component up.
fn name_fits(name: &[u8]) -> Result<()> {
    if name.len() > NAME_LEN {
        return Err(refuse(Errno::ENAMETOOLONG, name));
    }
    Ok(())
}
