//! Names: creation, links, removal and rename of directory entries
//! (namei.c, dir.c, and the VFS's checks before them: `filename_create`,
//! `do_unlinkat`, `do_rmdir`, `do_renameat2`, `vfs_rename`), and the two
//! reads of names, readdir and readlink.

use super::{
    Errno, FileData, FileType, Id, Kind, Namespace, LINK_MAX, R, ROOT, SYMLINK_FOLLOW_MAX,
};
use crate::time::Stamp;
use imbl::OrdMap;

impl Namespace {
    /// The checks every creation shares (VFS `may_create`, `vfs_mkdir`...):
    /// the parent exists and is a directory, the name is new.
    fn creatable(&self, path: &str) -> R<(Id, String)> {
        let (dir, name) = self.parent(path)?;
        if Self::special(&name) || self.entries(dir).contains_key(&name) {
            return Err(Errno::EEXIST);
        }
        Ok((dir, name))
    }

    /// `open(path, O_CREAT | O_WRONLY [| O_EXCL])` (`nilfs_create`).
    /// An existing regular file is fine without `excl`; an existing
    /// directory gives EISDIR (`do_open`: write access to a directory).
    /// A path ending in `/` names a directory, which `O_CREAT` never
    /// makes: EISDIR before its last name is looked up
    /// (`open_last_lookups`' "trailing slashes?"), whether that name
    /// exists or not, with `excl` or without, and before the name's
    /// length is checked (Linux 6.1 and 7.3, finding M9).
    pub fn create(&self, path: &str, perm: u32, excl: bool, now: Stamp) -> R<Namespace> {
        let (dir, name) = self.parent_walk(path)?;
        // "/", "." or ".." last (not LAST_NORM): open_last_lookups creates
        // nothing, and do_open answers EEXIST for O_EXCL before EISDIR for
        // the directory it found.
        if Self::special(&name) {
            return Err(if excl { Errno::EEXIST } else { Errno::EISDIR });
        }
        if path.ends_with('/') {
            return Err(Errno::EISDIR);
        }
        Self::name_fits(&name)?;
        if let Some(&id) = self.entries(dir).get(&name) {
            if excl {
                return Err(Errno::EEXIST);
            }
            return match &self.get(id).kind {
                Kind::Dir { .. } => Err(Errno::EISDIR),
                // A trailing symlink is followed (open_last_lookups ->
                // step_into) and the walk goes on with its body, relative
                // to the link's directory: a dangling link's target is
                // created (the kernel campaign, seeds 415 and 469).
                Kind::Symlink(target) => {
                    let mut budget = SYMLINK_FOLLOW_MAX - 1;
                    self.create_through(dir, target, perm, now, &mut budget)
                }
                _ => Ok(self.clone()),
            };
        }
        let mut ns = self.clone();
        let id = ns.alloc(dir, Kind::File(FileData::default()), perm & 0o7777, now);
        ns.add_entry(dir, &name, id, now);
        Ok(ns)
    }

    /// `open(O_CREAT)` without `O_EXCL` continued through a symlink whose
    /// body is `target`, read in directory `start`: the body's parent is
    /// walked (its symlinks followed), and its last component is opened —
    /// followed again if it is a symlink, EISDIR for a directory — or
    /// created if it does not exist. A body ending in `/` names a
    /// directory, so creating a file there is EISDIR, before its last
    /// name is looked up: an existing file or symlink there is not
    /// opened or followed (finding M9). Symlinks count
    /// against one budget of 40 (`nd->depth`); the walk to the first link
    /// is not counted against it.
    fn create_through(
        &self,
        start: Id,
        target: &str,
        perm: u32,
        now: Stamp,
        budget: &mut u32,
    ) -> R<Namespace> {
        if target.is_empty() {
            return Err(Errno::ENOENT);
        }
        let trimmed = target.trim_end_matches('/');
        let (dir_path, name) = match trimmed.rfind('/') {
            Some(i) => (&trimmed[..i], &trimmed[i + 1..]),
            None => ("", trimmed),
        };
        let dir = match (dir_path.is_empty(), target.starts_with('/')) {
            (true, true) => ROOT,
            (true, false) => start,
            (false, _) => self.walk(start, dir_path, true, budget)?,
        };
        if !self.is_dir(dir) {
            return Err(Errno::ENOTDIR);
        }
        if Self::special(name) || trimmed.len() != target.len() {
            return Err(Errno::EISDIR);
        }
        Self::name_fits(name)?;
        match self.entries(dir).get(name).map(|&id| &self.get(id).kind) {
            Some(Kind::Dir { .. }) => Err(Errno::EISDIR),
            Some(Kind::Symlink(next)) => {
                if *budget == 0 {
                    return Err(Errno::ELOOP);
                }
                *budget -= 1;
                self.create_through(dir, next, perm, now, budget)
            }
            Some(_) => Ok(self.clone()),
            None => {
                let mut ns = self.clone();
                let id = ns.alloc(dir, Kind::File(FileData::default()), perm & 0o7777, now);
                ns.add_entry(dir, name, id, now);
                Ok(ns)
            }
        }
    }

    /// `mkdir` (`nilfs_mkdir`; EMLINK from `vfs_mkdir` when the parent
    /// already has `s_max_links` links).
    pub fn mkdir(&self, path: &str, perm: u32, now: Stamp) -> R<Namespace> {
        let (dir, name) = self.creatable(path)?;
        if self.get(dir).nlink >= LINK_MAX {
            return Err(Errno::EMLINK);
        }
        let mut ns = self.clone();
        let id = ns.alloc(
            dir,
            Kind::Dir {
                entries: OrdMap::new(),
                parent: dir,
            },
            perm & 0o7777,
            now,
        );
        ns.add_entry(dir, &name, id, now);
        ns.get_mut(dir).nlink += 1;
        Ok(ns)
    }

    /// `symlink(target, path)` (`nilfs_symlink`: ENAMETOOLONG when
    /// `strlen(target) + 1 > s_blocksize`; an empty target is ENOENT).
    pub fn symlink(&self, target: &str, path: &str, block_size: u32, now: Stamp) -> R<Namespace> {
        if target.is_empty() {
            return Err(Errno::ENOENT);
        }
        if target.len() + 1 > block_size as usize {
            return Err(Errno::ENAMETOOLONG);
        }
        let (dir, name) = self.creatable(path)?;
        let mut ns = self.clone();
        let id = ns.alloc(dir, Kind::Symlink(target.to_string()), 0o777, now);
        ns.add_entry(dir, &name, id, now);
        Ok(ns)
    }

    /// `link(old, new)` (`nilfs_link`; EPERM for a directory and EMLINK at
    /// `s_max_links` from `vfs_link`). The old path is not followed.
    pub fn link(&self, old: &str, new: &str, now: Stamp) -> R<Namespace> {
        let id = self.lookup(old, false)?;
        let (dir, name) = self.creatable(new)?;
        if self.is_dir(id) {
            return Err(Errno::EPERM);
        }
        if self.get(id).nlink >= LINK_MAX {
            return Err(Errno::EMLINK);
        }
        let mut ns = self.clone();
        let ino = ns.get_mut(id);
        ino.nlink += 1;
        ino.ctime = now;
        ns.add_entry(dir, &name, id, now);
        Ok(ns)
    }

    /// `unlink` (`nilfs_unlink`; EISDIR for a directory, as Linux answers).
    pub fn unlink(&self, path: &str, now: Stamp) -> R<Namespace> {
        let (dir, name) = self.parent(path)?;
        if Self::special(&name) {
            return Err(Errno::EISDIR);
        }
        let id = *self.entries(dir).get(&name).ok_or(Errno::ENOENT)?;
        if self.is_dir(id) {
            return Err(Errno::EISDIR);
        }
        let mut ns = self.clone();
        ns.remove_entry(dir, &name, now);
        ns.drop_link(id, now);
        Ok(ns)
    }

    /// What `do_unlinkat` checks before `mnt_want_write`: the parent walk
    /// and the kind of last component. On a read-only mount the rest of
    /// unlink (the name's lookup included) is never reached: EROFS.
    pub fn unlink_precheck(&self, path: &str) -> R<()> {
        // The last name's length is nilfs_lookup's to refuse, after
        // mnt_want_write (do_unlinkat): EROFS comes first.
        let (_, name) = self.parent_walk(path)?;
        if Self::special(&name) {
            return Err(Errno::EISDIR);
        }
        Ok(())
    }

    /// The same for `do_linkat`: the old name's walk, then the new name's
    /// (`filename_create`: parent, EEXIST); `vfs_link`'s EPERM and EMLINK
    /// come after write access.
    pub fn link_precheck(&self, old: &str, new: &str) -> R<()> {
        self.lookup(old, false)?;
        self.creatable(new)?;
        Ok(())
    }

    /// The same for `do_rmdir` (root EBUSY, "." EINVAL, ".." ENOTEMPTY).
    pub fn rmdir_precheck(&self, path: &str) -> R<()> {
        // As for unlink: the last name's length is checked after write
        // access (do_rmdir -> lookup_one_qstr_excl -> nilfs_lookup).
        let (_, name) = self.parent_walk(path)?;
        match name.as_str() {
            "" => Err(Errno::EBUSY),
            "." => Err(Errno::EINVAL),
            ".." => Err(Errno::ENOTEMPTY),
            _ => Ok(()),
        }
    }

    /// The same for `do_renameat2`: both parent walks, then neither last
    /// component "/", "." or "..": EBUSY for the source's; for the
    /// target's EBUSY too, but EEXIST with RENAME_NOREPLACE (the errno is
    /// set to EEXIST before the target's type is tested).
    pub fn rename_precheck(&self, old: &str, new: &str, noreplace: bool) -> R<()> {
        let (_, oname) = self.parent_walk(old)?;
        let (_, nname) = self.parent_walk(new)?;
        if Self::special(&oname) {
            return Err(Errno::EBUSY);
        }
        if Self::special(&nname) {
            return Err(if noreplace {
                Errno::EEXIST
            } else {
                Errno::EBUSY
            });
        }
        Ok(())
    }

    /// `rmdir` (`nilfs_rmdir` with `nilfs_empty_dir`; the root is EBUSY,
    /// "." is EINVAL, ".." is ENOTEMPTY as in `do_rmdir`).
    pub fn rmdir(&self, path: &str, now: Stamp) -> R<Namespace> {
        let (dir, name) = self.parent(path)?;
        match name.as_str() {
            "" => return Err(Errno::EBUSY),
            "." => return Err(Errno::EINVAL),
            ".." => return Err(Errno::ENOTEMPTY),
            _ => {}
        }
        let id = *self.entries(dir).get(&name).ok_or(Errno::ENOENT)?;
        if !self.is_dir(id) {
            return Err(Errno::ENOTDIR);
        }
        if !self.entries(id).is_empty() {
            return Err(Errno::ENOTEMPTY);
        }
        let mut ns = self.clone();
        ns.remove_entry(dir, &name, now);
        ns.get_mut(dir).nlink -= 1;
        ns.inodes.remove(&id);
        Ok(ns)
    }

    /// Is `a` equal to or an ancestor of `b`?
    fn is_ancestor(&self, a: Id, mut b: Id) -> bool {
        loop {
            if a == b {
                return true;
            }
            match &self.get(b).kind {
                Kind::Dir { parent, .. } if *parent != b => b = *parent,
                _ => return false,
            }
        }
    }

    /// What every rename does before it judges the pair (`do_renameat2`):
    /// both parent walks, EBUSY for "." and "..", then the source's lookup
    /// (ENAMETOOLONG, ENOENT), then the target's (ENAMETOOLONG): a missing
    /// source with an over-long target name is ENOENT (seen on Linux 6.1
    /// by the crash campaign). The source's directory, name and inode, the
    /// target's directory and name, and the target's inode if it exists.
    #[allow(clippy::type_complexity)]
    fn rename_lookups(&self, old: &str, new: &str) -> R<(Id, String, Id, Id, String, Option<Id>)> {
        let (odir, oname) = self.parent_walk(old)?;
        let (ndir, nname) = self.parent_walk(new)?;
        if Self::special(&oname) || Self::special(&nname) {
            return Err(Errno::EBUSY);
        }
        Self::name_fits(&oname)?;
        let id = *self.entries(odir).get(&oname).ok_or(Errno::ENOENT)?;
        Self::name_fits(&nname)?;
        let target = self.entries(ndir).get(&nname).copied();
        Ok((odir, oname, id, ndir, nname, target))
    }

    /// The inode `rename(old, new)` would move, whether it is a directory,
    /// and whether it changes parent; `None` where the lookups fail.
    pub fn rename_subject(&self, old: &str, new: &str) -> Option<(Id, bool, bool)> {
        let (odir, _, id, ndir, _, _) = self.rename_lookups(old, new).ok()?;
        Some((id, self.is_dir(id), odir != ndir))
    }

    /// `rename(old, new)`, atomic: afterwards `new` names what `old` named
    /// and `old` is gone, or nothing changed. Check order follows
    /// `do_renameat2`/`vfs_rename` then `nilfs_rename`: a directory moved
    /// into its own subtree is EINVAL; onto one of its ancestors ENOTEMPTY;
    /// the same inode under both names succeeds and does nothing; dir onto
    /// non-dir ENOTDIR; non-dir onto dir EISDIR; onto a non-empty directory
    /// ENOTEMPTY; a directory moved to a parent at `s_max_links` EMLINK.
    ///
    /// `dir_mtime`: whether a renamed directory's mtime is set too (see
    /// [`Variant::renamed_dir_mtime`](crate::Variant::renamed_dir_mtime)).
    pub fn rename(&self, old: &str, new: &str, now: Stamp, dir_mtime: bool) -> R<Namespace> {
        let (odir, oname, id, ndir, nname, target) = self.rename_lookups(old, new)?;
        let is_dir = self.is_dir(id);
        if is_dir && self.is_ancestor(id, ndir) {
            return Err(Errno::EINVAL);
        }
        if let Some(t) = target {
            if self.is_dir(t) && self.is_ancestor(t, odir) {
                return Err(Errno::ENOTEMPTY);
            }
            if t == id {
                return Ok(self.clone());
            }
            match (is_dir, self.is_dir(t)) {
                (true, false) => return Err(Errno::ENOTDIR),
                (false, true) => return Err(Errno::EISDIR),
                (true, true) if !self.entries(t).is_empty() => return Err(Errno::ENOTEMPTY),
                _ => {}
            }
        } else if is_dir && odir != ndir && self.get(ndir).nlink >= LINK_MAX {
            return Err(Errno::EMLINK);
        }
        let mut ns = self.clone();
        if let Some(t) = target {
            ns.remove_entry(ndir, &nname, now);
            if ns.is_dir(t) {
                ns.get_mut(ndir).nlink -= 1;
                ns.inodes.remove(&t);
            } else {
                ns.drop_link(t, now);
            }
        }
        ns.remove_entry(odir, &oname, now);
        ns.add_entry(ndir, &nname, id, now);
        let ino = ns.get_mut(id);
        ino.ctime = now;
        if let Kind::Dir { parent, .. } = &mut ino.kind {
            *parent = ndir;
            if dir_mtime {
                ino.mtime = now;
            }
        }
        if is_dir && odir != ndir {
            ns.get_mut(odir).nlink -= 1;
            ns.get_mut(ndir).nlink += 1;
        }
        Ok(ns)
    }

    /// `renameat2` with RENAME_NOREPLACE or RENAME_EXCHANGE (not both:
    /// `step` refuses the pair first). The lookups as for a plain rename;
    /// then EEXIST for NOREPLACE onto an existing name and ENOENT for
    /// EXCHANGE with a missing one (`do_renameat2`); an exchange of a name
    /// with itself (or another link of the same inode) succeeds and changes
    /// nothing (`vfs_rename`); any other exchange reaches `nilfs_rename`,
    /// which refuses every flag but NOREPLACE with EINVAL (so do the VFS's
    /// own subtree checks for an exchange). NOREPLACE onto a free name is a
    /// plain rename.
    pub fn rename_flags(
        &self,
        old: &str,
        new: &str,
        noreplace: bool,
        exchange: bool,
        now: Stamp,
        dir_mtime: bool,
    ) -> R<Namespace> {
        self.rename_precheck(old, new, noreplace)?;
        let (_, _, id, _, _, target) = self.rename_lookups(old, new)?;
        match target {
            Some(_) if noreplace => Err(Errno::EEXIST),
            None if exchange => Err(Errno::ENOENT),
            Some(t) if exchange && t == id => Ok(self.clone()),
            Some(_) => Err(Errno::EINVAL),
            None => self.rename(old, new, now, dir_mtime),
        }
    }

    /// `mknod(path, type | perm, makedev(major, minor))` (`do_mknodat`,
    /// `nilfs_mknod`). `may_mknod` refuses a directory (EPERM) and a
    /// symlink type (EINVAL) before the path is looked at; a regular type
    /// makes an empty file. `filename_create`: EEXIST for an existing name
    /// (or "/", ".", ".."), then ENOENT for a trailing slash. A FIFO's or
    /// socket's number is dropped (`init_special_inode`).
    pub fn mknod(
        &self,
        path: &str,
        file_type: FileType,
        perm: u32,
        rdev: [u32; 2],
        now: Stamp,
    ) -> R<Namespace> {
        match file_type {
            FileType::Dir => return Err(Errno::EPERM),
            FileType::Symlink => return Err(Errno::EINVAL),
            _ => {}
        }
        let (dir, name) = self.creatable(path)?;
        if path.ends_with('/') {
            return Err(Errno::ENOENT);
        }
        let kind = match file_type {
            FileType::File => Kind::File(FileData::default()),
            FileType::CharDevice | FileType::BlockDevice => Kind::Special { file_type, rdev },
            _ => Kind::Special {
                file_type,
                rdev: [0, 0],
            },
        };
        let mut ns = self.clone();
        let id = ns.alloc(dir, kind, perm & 0o7777, now);
        ns.add_entry(dir, &name, id, now);
        Ok(ns)
    }

    /// `readdir(path)`: the names, without "." and ".." (their order is the
    /// file system's choice; the model returns them sorted).
    pub fn readdir(&self, path: &str) -> R<Vec<String>> {
        let id = self.lookup(path, true)?;
        match &self.get(id).kind {
            Kind::Dir { entries, .. } => Ok(entries.keys().cloned().collect()),
            _ => Err(Errno::ENOTDIR),
        }
    }

    /// `readlink(path)` (EINVAL for a non-symlink).
    pub fn readlink(&self, path: &str) -> R<String> {
        let id = self.lookup(path, false)?;
        match &self.get(id).kind {
            Kind::Symlink(t) => Ok(t.clone()),
            _ => Err(Errno::EINVAL),
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::fs::{Errno, Namespace};

    /// postmortem: the crash campaign's seed 4 (len 12) renamed a missing
    /// file to a 300-byte name; Linux said ENOENT (do_renameat2 looks the
    /// source up before the target), the model said ENAMETOOLONG.
    #[test]
    fn rename_looks_up_the_source_before_the_targets_name_length() {
        let ns = Namespace::mkfs(false, 0)
            .create("/a", 0o644, true, crate::time::Stamp::exact(0))
            .unwrap();
        let long = format!("/{}", "n".repeat(300));
        assert_eq!(
            ns.rename("/missing", &long, crate::time::Stamp::exact(0), false),
            Err(Errno::ENOENT)
        );
        assert_eq!(
            ns.rename("/a", &long, crate::time::Stamp::exact(0), false),
            Err(Errno::ENAMETOOLONG)
        );
        assert_eq!(
            ns.rename(&long, "/b", crate::time::Stamp::exact(0), false),
            Err(Errno::ENAMETOOLONG)
        );
        assert_eq!(ns.rename_precheck("/missing", &long, false), Ok(()));
    }

    /// postmortem: lockstep over the FUSE mount (issue 35's
    /// `FuseMount`) renamed `/d1` onto `/` with RENAME_NOREPLACE; the VFS
    /// answered EEXIST, the model EBUSY. `do_renameat2` sets the errno to
    /// EEXIST for NOREPLACE before it tests the target's last component
    /// (every version, 6.1 to 7.x); the source's is EBUSY either way.
    #[test]
    fn rename_noreplace_onto_the_root_or_a_dot_is_eexist() {
        let ns = Namespace::mkfs(false, 0);
        for target in ["/", "/.", "/.."] {
            assert_eq!(ns.rename_precheck("/d1", target, true), Err(Errno::EEXIST));
            assert_eq!(ns.rename_precheck("/d1", target, false), Err(Errno::EBUSY));
            assert_eq!(ns.rename_precheck(target, "/d1", true), Err(Errno::EBUSY));
        }
        assert_eq!(ns.rename_precheck("/d1", "/d2", true), Ok(()));
    }

    /// A directory moved to another parent at `s_max_links` links is
    /// EMLINK (`nilfs_rename` checks the new parent's count only when the
    /// parent changes); renamed within that parent, it does not add a
    /// link and succeeds. Postmortem (model shard 7/16: `odir != ndir` as
    /// `==` survived: nothing reached the limit by a rename).
    #[test]
    fn a_directory_moved_to_a_full_parent_is_emlink() {
        let t = crate::time::Stamp::exact(0);
        let mut ns = Namespace::mkfs(false, 0)
            .mkdir("/a", 0o755, t)
            .and_then(|ns| ns.mkdir("/full", 0o755, t))
            .and_then(|ns| ns.mkdir("/full/d", 0o755, t))
            .and_then(|ns| ns.mkdir("/a/d", 0o755, t))
            .unwrap();
        let full = ns.lookup("/full", false).unwrap();
        ns.get_mut(full).nlink = crate::fs::LINK_MAX;
        assert_eq!(ns.rename("/a/d", "/full/e", t, false), Err(Errno::EMLINK));
        assert!(ns.rename("/full/d", "/full/e", t, false).is_ok());
        assert!(ns.rename("/a/d", "/a/e", t, false).is_ok());
    }
}
