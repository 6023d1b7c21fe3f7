//! What `nilref mount` answers without its lock: the attributes of inodes
//! and the names of directories that a stat or a lookup found, kept until
//! a change may have made them wrong. A writer holds the file system's
//! lock for a whole operation (a construction can take many
//! milliseconds); a stat or lookup answered from here does not wait for
//! it.
//!
//! **Why the answers are exact.** Every change to the file system happens
//! under the lock, and before the lock is let go the entries it may have
//! changed are dropped from here ([`Published::drop_touched`],
//! [`Published::refresh`]). Entries are added
//! only under the lock too. So at any moment an entry says what the file
//! system would answer now, or what it answered just before an operation
//! that has not yet returned: a reader that finds it linearizes before
//! that operation. What may change what:
//! - an operation on one inode's data or attributes (write, setattr,
//!   truncate, open, release): that inode's attributes;
//! - an operation on names (create, mkdir, mknod, symlink, link, unlink,
//!   rmdir, rename) or an ioctl: everything, as directories' sizes, times
//!   and link counts, the named inodes' link counts and times, and the
//!   names themselves change;
//! - a construction (the log writer's, an fsync's, the cleaner's): every
//!   inode's attributes, as it adds the blocks it maps to their
//!   `i_blocks`; it is seen through [`nilfs::fs::Fs::constructions`],
//!   whatever started it. The attributes still published are then asked
//!   again, under the lock ([`Published::refresh`]), up to
//!   [`REFRESH_MAX`] of them; past that they are dropped.
//!
//! Only names that exist are kept (a lookup that finds nothing is not),
//! and at most [`KEPT_MAX`] entries of each kind.
//! It knows nothing of FUSE.

use std::collections::HashMap;

use nilfs::format::inode::Inode;
use nilfs::format::Ino;

/// The most attributes a construction has asked again: each is a
/// `Fs::stat` under the lock, which may read the ifile.
pub const REFRESH_MAX: usize = 4096;

/// The most attributes (and names) kept: a mount that never constructs
/// (read-only) would otherwise keep one entry for every name ever
/// looked up. At the limit everything goes and publishing starts again.
pub const KEPT_MAX: usize = 1 << 16;

/// What an operation may have changed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Touches {
    /// Nothing (a stat, a lookup, a read, a readdir, a statfs).
    Nothing,
    /// The data or the attributes of one inode.
    Inode(Ino),
    /// Names: every entry goes.
    Names,
}

/// The published answers. Read under a read lock by anyone; changed only
/// by whoever holds the file system's lock.
#[derive(Default)]
pub struct Published {
    /// An inode's raw attributes and its access time in memory, as
    /// `Fs::stat` and `Fs::atime_ns` answered.
    attrs: HashMap<Ino, (Inode, i64)>,
    /// `(directory, name)` to the inode the lookup found.
    names: HashMap<(Ino, Vec<u8>), Ino>,
    /// `Fs::constructions` when the entries were last settled.
    constructions: u64,
}

impl Published {
    /// The attributes of `i`, if published.
    pub fn attr(&self, i: Ino) -> Option<(Inode, i64)> {
        self.attrs.get(&i).cloned()
    }

    /// The inode `name` in `dir` names and its attributes, if both are
    /// published.
    pub fn entry(&self, dir: Ino, name: &[u8]) -> Option<(Ino, Inode, i64)> {
        let i = *self.names.get(&(dir, name.to_vec()))?;
        let (raw, atime) = self.attr(i)?;
        Some((i, raw, atime))
    }

    /// Publish what a stat of `i` answered, under the file system's lock,
    /// when `Fs::constructions` stood at `constructions`.
    pub fn publish_attr(&mut self, i: Ino, raw: &Inode, atime: i64, constructions: u64) {
        self.settle_constructions(constructions);
        if self.attrs.len() >= KEPT_MAX || self.names.len() >= KEPT_MAX {
            self.clear();
        }
        self.attrs.insert(i, (raw.clone(), atime));
    }

    /// Publish what a lookup of `name` in `dir` found, with its inode's
    /// attributes, under the file system's lock.
    pub fn publish_entry(
        &mut self,
        dir: Ino,
        name: &[u8],
        i: Ino,
        raw: &Inode,
        atime: i64,
        constructions: u64,
    ) {
        self.publish_attr(i, raw, atime, constructions);
        self.names.insert((dir, name.to_vec()), i);
    }

    /// After an operation, still under the file system's lock: drop what
    /// it may have changed (a construction is [`refresh`](Self::refresh)'s).
    pub fn drop_touched(&mut self, touches: Touches) {
        match touches {
            Touches::Nothing => {}
            Touches::Inode(i) => {
                self.attrs.remove(&i);
            }
            Touches::Names => self.clear(),
        }
    }

    /// After a construction, under the file system's lock: ask `stat` again
    /// for every inode whose attributes are published (all of them dropped
    /// if more than [`REFRESH_MAX`]; one dropped if `stat` fails), so that
    /// stats after a construction are still answered without the lock.
    pub fn refresh(
        &mut self,
        constructions: u64,
        mut stat: impl FnMut(Ino) -> Option<(Inode, i64)>,
    ) {
        if self.attrs.len() > REFRESH_MAX {
            self.attrs.clear();
        }
        let mut kept = HashMap::with_capacity(self.attrs.len());
        for &i in self.attrs.keys() {
            if let Some(a) = stat(i) {
                kept.insert(i, a);
            }
        }
        self.attrs = kept;
        self.constructions = constructions;
    }

    /// Whether [`settle`](Self::settle) with [`Touches::Nothing`] would
    /// change nothing.
    pub fn is_settled(&self, constructions: u64) -> bool {
        constructions == self.constructions
    }

    /// Drop everything (an unmount).
    pub fn clear(&mut self) {
        self.attrs.clear();
        self.names.clear();
    }

    fn settle_constructions(&mut self, constructions: u64) {
        if constructions != self.constructions {
            self.attrs.clear();
            self.constructions = constructions;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inode(size: u64) -> Inode {
        Inode {
            size,
            ..Inode::default()
        }
    }

    #[test]
    fn an_inode_change_drops_that_inode_only() {
        let mut p = Published::default();
        p.publish_entry(Ino(2), b"a", Ino(12), &inode(1), 0, 0);
        p.publish_entry(Ino(2), b"b", Ino(13), &inode(2), 0, 0);
        p.drop_touched(Touches::Inode(Ino(12)));
        assert!(p.attr(Ino(12)).is_none());
        assert!(p.entry(Ino(2), b"a").is_none(), "a name without attributes");
        assert_eq!(p.entry(Ino(2), b"b").map(|e| e.1.size), Some(2));
        p.drop_touched(Touches::Nothing);
        assert_eq!(p.attr(Ino(13)).map(|a| a.0.size), Some(2));
        p.drop_touched(Touches::Names);
        assert!(p.entry(Ino(2), b"b").is_none());
        assert!(p.attr(Ino(13)).is_none());
    }

    #[test]
    fn a_construction_asks_again_what_is_published() {
        let mut p = Published::default();
        p.publish_entry(Ino(2), b"a", Ino(12), &inode(1), 0, 0);
        p.publish_attr(Ino(15), &inode(5), 0, 0);
        assert!(!p.is_settled(1));
        // Asked again: what answers is kept with its new attributes.
        p.refresh(1, |i| (i == Ino(12)).then(|| (inode(7), 0)));
        assert_eq!(p.entry(Ino(2), b"a").map(|e| e.1.size), Some(7));
        assert!(p.attr(Ino(15)).is_none());
        assert!(p.is_settled(1));
        // Published after a construction no refresh has seen yet (another
        // thread's stat cannot, as all happens under one lock, but the
        // rule holds anyway): everything older goes first.
        p.publish_attr(Ino(14), &inode(4), 0, 2);
        assert!(p.attr(Ino(12)).is_none());
        assert!(p.attr(Ino(14)).is_some());
        // Up to REFRESH_MAX are asked again; past it, none.
        for k in 1..REFRESH_MAX as u64 {
            p.publish_attr(Ino(100 + k), &inode(k), 0, 2);
        }
        let mut asked = 0;
        p.refresh(3, |_| {
            asked += 1;
            Some((inode(0), 0))
        });
        assert_eq!(asked, REFRESH_MAX);
        p.publish_attr(Ino(99), &inode(0), 0, 3);
        asked = 0;
        p.refresh(4, |_| {
            asked += 1;
            Some((inode(0), 0))
        });
        assert_eq!(asked, 0);
        assert!(p.attr(Ino(14)).is_none());
    }

    #[test]
    fn what_is_kept_is_bounded() {
        let mut p = Published::default();
        for k in 0..KEPT_MAX as u64 {
            p.publish_entry(Ino(2), &k.to_le_bytes(), Ino(100 + k), &inode(k), 0, 0);
        }
        assert!(p.attr(Ino(100)).is_some() && p.entry(Ino(2), &0u64.to_le_bytes()).is_some());
        p.publish_attr(Ino(7), &inode(7), 0, 0);
        assert!(p.attr(Ino(100)).is_none() && p.entry(Ino(2), &0u64.to_le_bytes()).is_none());
        assert!(p.attr(Ino(7)).is_some());
        // Names count on their own: a refresh keeps them without their
        // attributes.
        for k in 0..KEPT_MAX as u64 {
            p.publish_entry(Ino(3), &k.to_le_bytes(), Ino(100), &inode(1), 0, 0);
        }
        p.refresh(1, |_| None);
        p.publish_attr(Ino(100), &inode(1), 0, 1);
        assert!(p.entry(Ino(3), &0u64.to_le_bytes()).is_none());
    }
}
