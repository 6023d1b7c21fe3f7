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
//! A lookup that finds nothing is kept as well, as a name absent from its
//! directory: only an operation on names can make it present
//! (`Fs::lookup` reads the directory and asks no permission), and those
//! drop everything. At most [`KEPT_MAX`] entries of each kind are kept.
//! A directory's listing (what readdir found: each entry's name, inode
//! and mode) is kept as the names are, and dropped with them; a change to
//! the directory's own inode drops it too.
//!
//! **Clean blocks.** A read under the lock notes where each clean block
//! it planned lies (`Fs::plan_read_noting`); a later read whose every
//! block is noted is planned from here and copied without the lock
//! ([`Published::read_plan`]). A noted block keeps its bytes until its
//! file is changed (the file's blocks go with its attributes, above) or
//! a cleaning pass frees a segment (`Fs::reclaims`, which moves first):
//! a construction writes elsewhere and moves no block it did not write,
//! and the cleaner copies a block before it frees its segment. So the
//! blocks stay across constructions; a read checks the count before it
//! plans and after it copied. At most [`BLOCKS_MAX`] blocks are kept.
//!
//! It knows nothing of FUSE.

use std::collections::{HashMap, HashSet};

use nilfs::format::inode::Inode;
use nilfs::format::Ino;
use nilfs::fs::ReadPlan;

/// The most attributes a construction has asked again: each is a
/// `Fs::stat` under the lock, which may read the ifile.
pub const REFRESH_MAX: usize = 4096;

/// The most attributes (and names) kept: a mount that never constructs
/// (read-only) would otherwise keep one entry for every name ever
/// looked up. At the limit everything goes and publishing starts again.
pub const KEPT_MAX: usize = 1 << 16;

/// The most clean blocks kept, over all files: 16 MiB or so of map, for
/// 4 GiB of 4 KiB blocks. At the limit all go and noting starts again.
pub const BLOCKS_MAX: usize = 1 << 20;

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
    /// `(directory, name)` that a lookup did not find.
    absent: HashSet<(Ino, Vec<u8>)>,
    /// `Fs::constructions` when the entries were last settled.
    constructions: u64,
    /// A directory's entries as readdir found them: name, inode, mode.
    listings: HashMap<Ino, Listing>,
    /// How many entries `listings` holds, over all directories.
    nlisted: usize,
    /// A regular file's clean blocks, as reads noted them.
    blocks: HashMap<Ino, Blocks>,
    /// How many blocks `blocks` holds, over all files.
    nblocks: usize,
}

/// A directory's entries, in on-disk order: name, inode, mode.
pub type Listing = std::sync::Arc<Vec<(Vec<u8>, Ino, u16)>>;

/// Where a file's clean blocks lie.
struct Blocks {
    /// The file's size when they were noted.
    size: u64,
    /// `Fs::reclaims` then: once it moves, none is trusted.
    reclaims: u64,
    /// A block's index in the file to its disk block (`None`: a hole).
    at: HashMap<u64, Option<u64>>,
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

    /// Whether a lookup of `name` in `dir` found nothing, and no name has
    /// changed since.
    pub fn is_absent(&self, dir: Ino, name: &[u8]) -> bool {
        self.absent.contains(&(dir, name.to_vec()))
    }

    /// What a lookup of `name` in `dir` answers, if published: the entry
    /// ([`entry`](Self::entry)), or `Some(None)` for an absent name.
    pub fn lookup(&self, dir: Ino, name: &[u8]) -> Option<Option<(Ino, Inode, i64)>> {
        match self.entry(dir, name) {
            Some(e) => Some(Some(e)),
            None => self.is_absent(dir, name).then_some(None),
        }
    }

    /// Publish that a lookup of `name` in `dir` found nothing, under the
    /// file system's lock.
    pub fn publish_absent(&mut self, dir: Ino, name: &[u8]) {
        if self.absent.len() >= KEPT_MAX {
            self.absent.clear();
        }
        self.absent.insert((dir, name.to_vec()));
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

    /// The entries of directory `i`, if published.
    pub fn listing(&self, i: Ino) -> Option<Listing> {
        self.listings.get(&i).cloned()
    }

    /// Publish what a readdir of `i` found, under the file system's lock.
    pub fn publish_listing(&mut self, i: Ino, entries: Listing) {
        if self.nlisted + entries.len() > KEPT_MAX {
            self.listings.clear();
            self.nlisted = 0;
        }
        self.nlisted += entries.len();
        if let Some(old) = self.listings.insert(i, entries) {
            self.nlisted -= old.len();
        }
    }

    /// A read of up to `len` bytes of `i` from `offset`, on blocks of
    /// `bs` bytes, planned from its noted blocks if they cover it and
    /// were noted when `Fs::reclaims` stood at `reclaims`, as it does now.
    pub fn read_plan(
        &self,
        i: Ino,
        offset: u64,
        len: u64,
        bs: u32,
        reclaims: u64,
    ) -> Option<ReadPlan> {
        let b = self.blocks.get(&i).filter(|b| b.reclaims == reclaims)?;
        ReadPlan::of_clean(bs, b.size, offset, len, |k| b.at.get(&k).copied())
    }

    /// Keep the clean blocks a read of `i` under the file system's lock
    /// noted, for a file of `size` bytes with `Fs::reclaims` at
    /// `reclaims`.
    pub fn publish_blocks(
        &mut self,
        i: Ino,
        size: u64,
        reclaims: u64,
        noted: impl IntoIterator<Item = (u64, Option<u64>)>,
    ) {
        let b = self.blocks.entry(i).or_insert_with(|| Blocks {
            size,
            reclaims,
            at: HashMap::new(),
        });
        if (b.size, b.reclaims) != (size, reclaims) {
            self.nblocks -= b.at.len();
            b.at.clear();
            (b.size, b.reclaims) = (size, reclaims);
        }
        for (k, at) in noted {
            if b.at.insert(k, at).is_none() {
                self.nblocks += 1;
            }
        }
        if self.nblocks > BLOCKS_MAX {
            self.blocks.clear();
            self.nblocks = 0;
        }
    }

    /// After an operation, still under the file system's lock: drop what
    /// it may have changed (a construction is [`refresh`](Self::refresh)'s).
    pub fn drop_touched(&mut self, touches: Touches) {
        match touches {
            Touches::Nothing => {}
            Touches::Inode(i) => {
                self.drop_attr(i);
                if let Some(b) = self.blocks.remove(&i) {
                    self.nblocks -= b.at.len();
                }
                if let Some(l) = self.listings.remove(&i) {
                    self.nlisted -= l.len();
                }
            }
            Touches::Names => self.clear(),
        }
    }

    /// Drop the attributes of `i` alone, keeping its blocks (only the
    /// known-bad `stale-blocks` mount does this after a change).
    pub fn drop_attr(&mut self, i: Ino) {
        self.attrs.remove(&i);
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
        self.absent.clear();
        self.blocks.clear();
        self.nblocks = 0;
        self.listings.clear();
        self.nlisted = 0;
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
    fn an_absent_name_stays_absent_until_names_change() {
        let mut p = Published::default();
        assert!(!p.is_absent(Ino(2), b"a"));
        p.publish_absent(Ino(2), b"a");
        assert!(p.is_absent(Ino(2), b"a"));
        assert!(!p.is_absent(Ino(2), b"b") && !p.is_absent(Ino(3), b"a"));
        // Neither a change to an inode (the directory's own included) nor
        // a construction makes a name present.
        p.drop_touched(Touches::Inode(Ino(2)));
        p.refresh(1, |_| None);
        p.publish_attr(Ino(9), &inode(1), 0, 2);
        assert!(p.is_absent(Ino(2), b"a"));
        p.drop_touched(Touches::Names);
        assert!(!p.is_absent(Ino(2), b"a"));
        // Bounded like the rest: at the limit they all go.
        for k in 0..KEPT_MAX as u64 {
            p.publish_absent(Ino(2), &k.to_le_bytes());
        }
        assert!(p.is_absent(Ino(2), &0u64.to_le_bytes()));
        p.publish_absent(Ino(3), b"x");
        assert!(!p.is_absent(Ino(2), &0u64.to_le_bytes()));
        assert!(p.is_absent(Ino(3), b"x"));
        p.clear();
        assert!(!p.is_absent(Ino(3), b"x"));
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

    /// Noted blocks of a 1,024-byte-block file of 3,000 bytes: block 0
    /// on disk block 500, block 1 a hole, block 2 on disk block 9.
    fn noted() -> Vec<(u64, Option<u64>)> {
        vec![(0, Some(500)), (1, None), (2, Some(9))]
    }

    #[test]
    fn a_read_is_planned_from_noted_blocks_while_they_stand() {
        let mut p = Published::default();
        p.publish_blocks(Ino(12), 3000, 4, noted());
        let plan = p.read_plan(Ino(12), 10, 1 << 20, 1024, 4).unwrap();
        assert_eq!(plan.len(), 2990, "short at the noted size");
        assert!(
            p.read_plan(Ino(12), 0, 100, 1024, 5).is_none(),
            "reclaims moved"
        );
        assert!(p.read_plan(Ino(13), 0, 100, 1024, 4).is_none());
        // Block 3 was never noted.
        p.publish_blocks(Ino(14), 5000, 4, noted());
        assert!(p.read_plan(Ino(14), 0, 5000, 1024, 4).is_none());
        assert!(p.read_plan(Ino(14), 0, 3072, 1024, 4).is_some());
        // A construction keeps them; a change to the file drops them, a
        // change to names drops all.
        p.refresh(1, |_| None);
        assert!(p.read_plan(Ino(12), 0, 100, 1024, 4).is_some());
        p.drop_touched(Touches::Inode(Ino(12)));
        assert!(p.read_plan(Ino(12), 0, 100, 1024, 4).is_none());
        assert!(p.read_plan(Ino(14), 0, 100, 1024, 4).is_some());
        p.drop_touched(Touches::Names);
        assert!(p.read_plan(Ino(14), 0, 100, 1024, 4).is_none());
        // Noted again after a cleaning pass: the old ones go.
        p.publish_blocks(Ino(12), 3000, 4, noted());
        p.publish_blocks(Ino(12), 3000, 5, [(0, Some(77))]);
        assert!(p.read_plan(Ino(12), 0, 1024, 1024, 5).is_some());
        assert!(p.read_plan(Ino(12), 0, 2048, 1024, 5).is_none());
        assert_eq!(p.nblocks, 1);
    }

    #[test]
    fn the_blocks_kept_are_bounded() {
        let mut p = Published::default();
        p.publish_blocks(Ino(12), 3000, 0, noted());
        let many = (0..BLOCKS_MAX as u64 - 3).map(|k| (k, Some(k)));
        p.publish_blocks(Ino(13), BLOCKS_MAX as u64 * 1024, 0, many);
        assert_eq!(p.nblocks, BLOCKS_MAX);
        assert!(p.read_plan(Ino(12), 0, 3000, 1024, 0).is_some());
        p.publish_blocks(Ino(14), 1024, 0, [(0, None)]);
        assert_eq!(p.nblocks, 0, "past the bound, all go");
        assert!(p.read_plan(Ino(12), 0, 3000, 1024, 0).is_none());
        p.publish_blocks(Ino(12), 3000, 0, noted());
        p.drop_touched(Touches::Inode(Ino(12)));
        assert_eq!(p.nblocks, 0, "dropped blocks are no longer counted");
    }

    #[test]
    fn a_listing_goes_with_its_directory_or_with_any_name() {
        let mut p = Published::default();
        let l = |n: usize| -> Listing {
            std::sync::Arc::new(
                (0..n)
                    .map(|k| (vec![b'a' + k as u8], Ino(20 + k as u64), 0o100644))
                    .collect(),
            )
        };
        p.publish_listing(Ino(2), l(2));
        p.publish_listing(Ino(3), l(3));
        assert_eq!(p.listing(Ino(2)).map(|l| l.len()), Some(2));
        assert_eq!(p.nlisted, 5);
        // A construction, or a change to a file in it, keeps it.
        p.refresh(1, |_| None);
        p.drop_touched(Touches::Inode(Ino(20)));
        assert!(p.listing(Ino(2)).is_some());
        // A change to the directory's inode drops it, names drop all.
        p.drop_touched(Touches::Inode(Ino(2)));
        assert!(p.listing(Ino(2)).is_none());
        assert_eq!(p.nlisted, 3);
        p.publish_listing(Ino(3), l(2));
        assert_eq!(p.nlisted, 2, "a listing published again replaces the old");
        p.drop_touched(Touches::Names);
        assert!(p.listing(Ino(3)).is_none());
        assert_eq!(p.nlisted, 0);
        // Bounded: past KEPT_MAX entries, all go.
        p.publish_listing(
            Ino(2),
            std::sync::Arc::new(vec![(vec![b'x'], Ino(9), 0); KEPT_MAX - 1]),
        );
        p.publish_listing(Ino(3), l(1));
        assert!(p.listing(Ino(2)).is_some());
        p.publish_listing(Ino(4), l(1));
        assert!(p.listing(Ino(2)).is_none() && p.listing(Ino(4)).is_some());
        assert_eq!(p.nlisted, 1);
    }
}
