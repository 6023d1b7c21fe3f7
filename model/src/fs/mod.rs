//! The namespace: what one mounted view of a NILFS2 file system shows.
//!
//! A [`Namespace`] is a value. Every operation returns a new one (or an
//! errno) and leaves the old one untouched; all maps are `imbl` persistent
//! maps, so keeping a namespace in a checkpoint is an O(1) clone that shares
//! everything with the live one.
//!
//! Each rule names the kernel code it follows (fs/nilfs2 of Linux 6.x, plus
//! the VFS checks every file system gets). docs/model.md has the table.
//!
//! This file holds the inode table and the path walk; the operations are
//! cut as the kernel's files are: `namei` (names: namei.c, dir.c, the
//! VFS's creation and removal checks), `file` (contents: file.c, inode.c's
//! truncate, the VFS's write limits), `attr` (stat, setattr, xattrs).

mod attr;
mod errno;
mod file;
mod namei;

pub use errno::Errno;
pub use file::read_data;

use crate::time::Stamp;
use imbl::OrdMap;
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// Granule of the model's file contents. It is a representation detail, not
/// the file system's block size: reads and writes are byte-exact.
pub const PAGE: u64 = 4096;
/// `NILFS_NAME_LEN` (include/uapi/linux/nilfs2_ondisk.h).
pub const NAME_LEN_MAX: usize = 255;
/// `NILFS_LINK_MAX`, installed as `sb->s_max_links` in `nilfs_fill_super`.
pub const LINK_MAX: u32 = 32000;
/// `PATH_MAX`, enforced by the VFS when it copies a path from user space.
pub const PATH_MAX: usize = 4096;
/// Symlinks followed during one lookup before ELOOP (`MAXSYMLINKS`).
pub const SYMLINK_FOLLOW_MAX: u32 = 40;
/// The largest file size. `nilfs_max_size(blkbits)` (the_nilfs.c) is
/// `min(MAX_LFS_FILESIZE, 2^(blkbits + BITS_PER_LONG) - 1)`; on a 64-bit
/// kernel the second term overflows 64 bits and is skipped, so every block
/// size gives `MAX_LFS_FILESIZE` = `LLONG_MAX`.
pub const MAX_FILE_SIZE: u64 = i64::MAX as u64;

/// The model's identity of an inode. Not the on-disk inode number: the
/// kernel chooses those (`nilfs_ifile_create_inode`), the model does not.
pub type Id = u64;
/// The root directory (NILFS_ROOT_INO).
pub const ROOT: Id = 2;

/// One file's bytes: a size and the non-hole pages. A page absent from the
/// map reads as zeros (a hole). Invariant: bytes at or past `size` are zero
/// in every stored page.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct FileData {
    pub size: u64,
    pub pages: OrdMap<u64, Arc<Vec<u8>>>,
}

/// What an inode is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Kind {
    File(FileData),
    /// Entries by name (never "." or ".."), and the parent directory.
    Dir {
        entries: OrdMap<String, Id>,
        parent: Id,
    },
    Symlink(String),
    /// A FIFO, a socket, or a character or block device (`nilfs_mknod`,
    /// `init_special_inode`): no data; a device's number `[major, minor]`
    /// (`[0, 0]` for a FIFO or a socket, whose number the kernel drops).
    Special {
        file_type: FileType,
        rdev: [u32; 2],
    },
}

/// An inode: kind, permission bits (the 12 of `S_IALLUGO`), owner, link
/// count and times (nanoseconds of the injected clock).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Inode {
    pub kind: Kind,
    pub perm: u32,
    pub uid: u32,
    pub gid: u32,
    pub nlink: u32,
    pub mtime: Stamp,
    pub ctime: Stamp,
}

/// File type as `stat` and `readdir` report it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FileType {
    File,
    Dir,
    Symlink,
    Fifo,
    Socket,
    CharDevice,
    BlockDevice,
}

impl FileType {
    /// A FIFO, socket or device: what only `mknod` makes.
    pub fn is_special(self) -> bool {
        matches!(
            self,
            FileType::Fifo | FileType::Socket | FileType::CharDevice | FileType::BlockDevice
        )
    }
}

/// What `lstat` reports (the inode number is the kernel's choice and is not
/// part of it; the times are compared within a bound, see `step`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StatInfo {
    #[serde(rename = "type")]
    pub file_type: FileType,
    pub size: u64,
    pub nlink: u32,
    pub perm: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mtime: Option<i64>,
    /// Compared like `mtime`, when both sides report it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ctime: Option<i64>,
    /// Owner and group, compared when both sides report them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uid: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gid: Option<u32>,
    /// A device's `[major, minor]` (reported for devices only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rdev: Option<[u32; 2]>,
}

/// A whole tree of inodes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Namespace {
    pub inodes: OrdMap<Id, Inode>,
    pub next_id: Id,
}

type R<T> = Result<T, Errno>;

impl Namespace {
    /// A fresh file system as mkfs.nilfs2 leaves it: the root directory
    /// (mode 040755, two links), and with nilfs-utils <= 2.2.x the empty
    /// regular file `.nilfs` (ino 11, mode 0100644; format digest §12.2).
    pub fn mkfs(dot_nilfs: bool, now: i64) -> Namespace {
        let now = Stamp::exact(now);
        let mut ns = Namespace {
            inodes: OrdMap::new(),
            next_id: ROOT + 1,
        };
        let root = Inode {
            kind: Kind::Dir {
                entries: OrdMap::new(),
                parent: ROOT,
            },
            perm: 0o755,
            uid: 0,
            gid: 0,
            nlink: 2,
            mtime: now,
            ctime: now,
        };
        ns.inodes.insert(ROOT, root);
        if dot_nilfs {
            let id = ns.alloc(ROOT, Kind::File(FileData::default()), 0o644, now);
            ns.add_entry(ROOT, ".nilfs", id, now);
        }
        ns
    }

    pub fn get(&self, id: Id) -> &Inode {
        self.inodes
            .get(&id)
            .expect("model invariant: dangling inode id")
    }

    fn get_mut(&mut self, id: Id) -> &mut Inode {
        self.inodes
            .get_mut(&id)
            .expect("model invariant: dangling inode id")
    }

    /// A new inode in directory `dir`. Its owner is `inode_init_owner`'s:
    /// the caller's uid (the model's caller is root, 0:0); the caller's gid,
    /// or the directory's when the directory is setgid — and then a new
    /// directory is setgid too (a file keeps a setgid bit it asks for: root
    /// has CAP_FSETID).
    fn alloc(&mut self, dir: Id, kind: Kind, mut perm: u32, now: Stamp) -> Id {
        let id = self.next_id;
        self.next_id += 1;
        let is_dir = matches!(kind, Kind::Dir { .. });
        let nlink = if is_dir { 2 } else { 1 };
        let mut gid = 0;
        if let Some(d) = self.inodes.get(&dir) {
            if d.perm & 0o2000 != 0 {
                gid = d.gid;
                if is_dir {
                    perm |= 0o2000;
                }
            }
        }
        self.inodes.insert(
            id,
            Inode {
                kind,
                perm,
                uid: 0,
                gid,
                nlink,
                mtime: now,
                ctime: now,
            },
        );
        id
    }

    fn entries(&self, dir: Id) -> &OrdMap<String, Id> {
        match &self.get(dir).kind {
            Kind::Dir { entries, .. } => entries,
            _ => unreachable!("model invariant: not a directory"),
        }
    }

    fn add_entry(&mut self, dir: Id, name: &str, id: Id, now: Stamp) {
        let d = self.get_mut(dir);
        if let Kind::Dir { entries, .. } = &mut d.kind {
            entries.insert(name.to_string(), id);
        }
        d.mtime = now;
        d.ctime = now;
    }

    fn remove_entry(&mut self, dir: Id, name: &str, now: Stamp) {
        let d = self.get_mut(dir);
        if let Kind::Dir { entries, .. } = &mut d.kind {
            entries.remove(name);
        }
        d.mtime = now;
        d.ctime = now;
    }

    /// Drops one link of `id`, never a directory (unlink refuses one;
    /// rmdir and a rename over one free it themselves); frees the inode
    /// when none is left (the model has no open files, so the last link
    /// is the last reference: `nilfs_evict_inode` then deletes it).
    fn drop_link(&mut self, id: Id, now: Stamp) {
        let ino = self.get_mut(id);
        ino.nlink -= 1;
        ino.ctime = now;
        if ino.nlink == 0 {
            self.inodes.remove(&id);
        }
    }

    fn is_dir(&self, id: Id) -> bool {
        matches!(self.get(id).kind, Kind::Dir { .. })
    }

    // ----------------------------------------------------------------- lookup

    /// Resolves `path` (absolute; "." and ".." allowed; intermediate
    /// symlinks followed, the last one only if `follow`).
    /// ENOENT for a missing component or an empty path, ENOTDIR when a
    /// non-directory is used as one, ENAMETOOLONG for a component over 255
    /// bytes (`nilfs_lookup`) or a path over PATH_MAX, ELOOP after 40 links.
    pub fn lookup(&self, path: &str, follow: bool) -> R<Id> {
        let mut budget = SYMLINK_FOLLOW_MAX;
        self.walk(ROOT, path, follow, &mut budget)
    }

    fn walk(&self, start: Id, path: &str, follow: bool, budget: &mut u32) -> R<Id> {
        if path.is_empty() {
            return Err(Errno::ENOENT);
        }
        if path.len() >= PATH_MAX {
            return Err(Errno::ENAMETOOLONG);
        }
        let mut cur = if path.starts_with('/') { ROOT } else { start };
        let comps: Vec<&str> = path.split('/').filter(|c| !c.is_empty()).collect();
        for (i, comp) in comps.iter().enumerate() {
            let last = i + 1 == comps.len();
            let Kind::Dir { entries, parent } = &self.get(cur).kind else {
                return Err(Errno::ENOTDIR);
            };
            cur = match *comp {
                "." => cur,
                ".." => *parent,
                name => {
                    if name.len() > NAME_LEN_MAX {
                        return Err(Errno::ENAMETOOLONG);
                    }
                    let next = *entries.get(name).ok_or(Errno::ENOENT)?;
                    if let Kind::Symlink(target) = &self.get(next).kind {
                        if !last || follow {
                            if *budget == 0 {
                                return Err(Errno::ELOOP);
                            }
                            *budget -= 1;
                            self.walk(cur, target, true, budget)?
                        } else {
                            next
                        }
                    } else {
                        next
                    }
                }
            };
        }
        Ok(cur)
    }

    /// Splits `path` into its parent directory (resolved) and last name.
    /// A last component "." or ".." (or the root itself) cannot be created or
    /// removed: the model answers EINVAL for those, EEXIST for creations.
    fn parent(&self, path: &str) -> R<(Id, String)> {
        let (dir, name) = self.parent_walk(path)?;
        Self::name_fits(&name)?;
        Ok((dir, name))
    }

    /// `nilfs_lookup` of a last component: ENAMETOOLONG over 255 bytes.
    fn name_fits(name: &str) -> R<()> {
        if name.len() > NAME_LEN_MAX {
            return Err(Errno::ENAMETOOLONG);
        }
        Ok(())
    }

    /// [`Self::parent`] without looking at the last name's length, as the
    /// VFS's `filename_parentat` does (the last component's length is
    /// checked only when it is looked up).
    fn parent_walk(&self, path: &str) -> R<(Id, String)> {
        let trimmed = path.trim_end_matches('/');
        if path.is_empty() {
            return Err(Errno::ENOENT);
        }
        if path.len() >= PATH_MAX {
            return Err(Errno::ENAMETOOLONG);
        }
        let (dir_path, name) = match trimmed.rfind('/') {
            Some(i) => (&trimmed[..i], &trimmed[i + 1..]),
            None => ("", trimmed),
        };
        let dir = if dir_path.is_empty() {
            if path.starts_with('/') {
                ROOT
            } else {
                return Err(Errno::ENOENT);
            }
        } else {
            self.lookup(dir_path, true)?
        };
        if !self.is_dir(dir) {
            return Err(Errno::ENOTDIR);
        }
        Ok((dir, name.to_string()))
    }

    fn special(name: &str) -> bool {
        name.is_empty() || name == "." || name == ".."
    }

    /// The inodes in use as `statfs`'s `f_files - f_ffree` counts them:
    /// the root's `inodes_count` (`cp_inodes_count`; mkfs.nilfs2 counts
    /// the root and `.nilfs`, not the reserved inode numbers below
    /// `NILFS_USER_INO`; `nilfs_new_inode` adds one, the eviction of a
    /// deleted inode takes one away).
    pub fn inodes_used(&self) -> u64 {
        self.inodes.len() as u64
    }

    /// Every path under the root, depth first in name order, with its id.
    pub fn walk_all(&self) -> Vec<(String, Id)> {
        let mut out = Vec::new();
        let mut stack = vec![(String::new(), ROOT)];
        while let Some((prefix, dir)) = stack.pop() {
            let mut subdirs = Vec::new();
            for (name, &id) in self.entries(dir) {
                let p = format!("{prefix}/{name}");
                out.push((p.clone(), id));
                if self.is_dir(id) {
                    subdirs.push((p, id));
                }
            }
            stack.extend(subdirs.into_iter().rev());
        }
        out
    }
}
