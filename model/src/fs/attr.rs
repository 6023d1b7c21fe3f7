//! Attributes: what lstat reports, what chmod, chown and utimensat change
//! (`notify_change` -> `nilfs_setattr`), and the extended attribute calls'
//! refusals (nilfs2 installs no xattr handler).

use super::{Errno, FileType, Id, Kind, Namespace, StatInfo, R};
use crate::time::Stamp;

impl Namespace {
    /// `lstat(path)`.
    pub fn lstat(&self, path: &str) -> R<StatInfo> {
        let id = self.lookup(path, false)?;
        Ok(self.stat_of(id))
    }

    pub fn stat_of(&self, id: Id) -> StatInfo {
        let ino = self.get(id);
        let (file_type, size) = match &ino.kind {
            Kind::File(f) => (FileType::File, f.size),
            // nilfs directories are whole blocks; how many depends on the
            // entries' layout, so the model says 0 here and accepts any
            // non-zero multiple of the block size (`outcome_matches`).
            Kind::Dir { .. } => (FileType::Dir, 0),
            Kind::Symlink(t) => (FileType::Symlink, t.len() as u64),
            Kind::Special { file_type, .. } => (*file_type, 0),
        };
        let rdev = match &ino.kind {
            Kind::Special {
                file_type: FileType::CharDevice | FileType::BlockDevice,
                rdev,
            } => Some(*rdev),
            _ => None,
        };
        StatInfo {
            file_type,
            size,
            nlink: ino.nlink,
            perm: ino.perm,
            // The earliest each stamp can be; `Expect::Stat` carries the
            // stamps themselves.
            mtime: Some(ino.mtime.lo),
            ctime: Some(ino.ctime.lo),
            uid: Some(ino.uid),
            gid: Some(ino.gid),
            rdev,
        }
    }

    /// Inode `id`'s mtime and ctime stamps.
    pub fn stamps_of(&self, id: Id) -> (Stamp, Stamp) {
        let ino = self.get(id);
        (ino.mtime, ino.ctime)
    }

    /// The same namespace with inode `id`'s times known to be `mtime` and
    /// `ctime` (observed by a stat; each must lie within its stamp).
    pub fn bind_times(&self, id: Id, mtime: Option<i64>, ctime: Option<i64>) -> Namespace {
        let mut ns = self.clone();
        let ino = ns.get_mut(id);
        if let Some(t) = mtime {
            ino.mtime = Stamp::exact(t);
        }
        if let Some(t) = ctime {
            ino.ctime = Stamp::exact(t);
        }
        ns
    }

    /// What a get, set or removal of the extended attribute `name` of
    /// inode `id` answers on nilfs2, which installs no xattr handler: a
    /// name empty or over `XATTR_NAME_MAX` (255) is ERANGE (the copy from
    /// user space); `xattr_permission` lets `user.*` only on regular files
    /// and directories, and on sockets when `sockets` (the release's,
    /// [`Variant::user_xattrs_on_sockets`](crate::Variant::user_xattrs_on_sockets))
    /// (EPERM to write, ENODATA to read); everything else is
    /// `xattr_resolve_name`'s EOPNOTSUPP.
    pub fn xattr_refusal(&self, id: Id, name: &str, write: bool, sockets: bool) -> Errno {
        if name.is_empty() || name.len() > 255 {
            return Errno::ERANGE;
        }
        let allowed = match self.get(id).kind {
            Kind::File(_) | Kind::Dir { .. } => true,
            Kind::Special {
                file_type: FileType::Socket,
                ..
            } => sockets,
            _ => false,
        };
        if name.starts_with("user.") && !allowed {
            return if write { Errno::EPERM } else { Errno::ENODATA };
        }
        Errno::EOPNOTSUPP
    }

    /// `chmod(path, mode)` (`chmod_common`: the 12 bits of `S_IALLUGO`
    /// replaced, ATTR_MODE | ATTR_CTIME; `setattr_copy` keeps S_ISGID for
    /// a caller with CAP_FSETID, which the model's root has). Follows a
    /// trailing symlink.
    pub fn chmod(&self, path: &str, perm: u32, now: Stamp) -> R<Namespace> {
        let id = self.lookup(path, true)?;
        let mut ns = self.clone();
        let ino = ns.get_mut(id);
        ino.perm = perm & 0o7777;
        ino.ctime = now;
        Ok(ns)
    }

    /// `fchownat(path, uid, gid, follow ? 0 : AT_SYMLINK_NOFOLLOW)`, an
    /// absent id meaning -1 (`chown_common`). ctime is always set, even
    /// when neither id changes. On anything but a directory,
    /// `chown_common` adds ATTR_KILL_SUID | ATTR_KILL_SGID and
    /// `notify_change` clears S_ISUID, and S_ISGID when S_IXGRP is also
    /// set (a setgid bit without group execute is mandatory locking, kept).
    pub fn chown(
        &self,
        path: &str,
        uid: Option<u32>,
        gid: Option<u32>,
        follow: bool,
        now: Stamp,
    ) -> R<Namespace> {
        let id = self.lookup(path, follow)?;
        let mut ns = self.clone();
        let ino = ns.get_mut(id);
        if let Some(u) = uid {
            ino.uid = u;
        }
        if let Some(g) = gid {
            ino.gid = g;
        }
        if !matches!(ino.kind, Kind::Dir { .. }) {
            ino.perm &= !0o4000;
            if ino.perm & 0o2010 == 0o2010 {
                ino.perm &= !0o2000;
            }
        }
        ino.ctime = now;
        Ok(ns)
    }

    /// `utimensat(path, {UTIME_OMIT, mtime or UTIME_NOW}, flags)`
    /// (`utimes_common`: ATTR_MTIME, with ATTR_MTIME_SET for a given time,
    /// and ATTR_CTIME). nilfs2's time granularity is one nanosecond.
    pub fn utimes(&self, path: &str, mtime: Option<i64>, follow: bool, now: Stamp) -> R<Namespace> {
        let id = self.lookup(path, follow)?;
        let mut ns = self.clone();
        let ino = ns.get_mut(id);
        ino.mtime = mtime.map_or(now, Stamp::exact);
        ino.ctime = now;
        Ok(ns)
    }
}
