//! Directory contents, the write side: the kernel's fs/nilfs2/dir.c
//! (`nilfs_add_link`, `nilfs_delete_entry`, `nilfs_set_link`,
//! `nilfs_make_empty`, `nilfs_empty_dir`, `nilfs_find_entry`) on the blocks
//! of one directory.
//!
//! Entries are placed exactly where the kernel places them — the first
//! record, in block order, that is free and large enough or has enough
//! slack after its own name; a new block at the end otherwise — and deleted
//! the way it deletes them (merged into the previous record of the block;
//! the first record of a block only loses its inode number). Stale bytes
//! are left as the kernel leaves them, so the blocks match byte for byte.
//!
//! The searches are the kernel's linear scans, in the same order, but a
//! small index per block ([`BlockIndex`]: which names it holds, and the
//! largest record it could take) lets them skip the blocks that cannot
//! hold their answer. A skipped block is one the scan would have passed
//! without effect, so the results, errors included, are the scan's.

use std::collections::{BTreeSet, HashMap};
use std::hash::{BuildHasherDefault, Hasher};

use crate::format::dir::{parse_block, rec_len_for, FT_DIR};
use crate::format::le::{put_bytes, put_u16, put_u64, put_u8, u16_at, u64_at, u8_at};
use crate::format::{Ino, NAME_LEN};
use crate::sync::StdArc;
use crate::{Errno, Error, Result};

/// The blocks of one directory, in memory. The directory's size is always
/// a whole number of blocks (the kernel's chunk is one block).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DirFile {
    block_size: u32,
    /// Shared copy-on-write (`StdArc::make_mut`): the journal a failed
    /// operation rolls back to copies a directory's state before every
    /// create, and this makes that a copy of pointers.
    blocks: Vec<StdArc<Vec<u8>>>,
    dirty: BTreeSet<u64>,
    index: DirIndex,
}

/// One block's summary for the searches: the live names it holds (by
/// [`name_hash`], counted), and every record that offers a new record
/// room (`rooms`: offset and room, in the order the scan meets them; the
/// room is all of a free record, the slack after a live one's name). In
/// a packed directory that is one record per block, so `add_link` goes
/// straight to the record the scan would stop at. `scan` marks a block
/// the index cannot vouch for (a zero `rec_len`): the searches walk it,
/// and report its damage where the scan meets it.
#[derive(Clone, Debug, Default)]
struct BlockIndex {
    names: HashMap<u64, u32, BuildHasherDefault<Prehashed>>,
    rooms: Vec<(usize, usize)>,
    scan: bool,
}

/// The keys of [`BlockIndex::names`] are hashes already: used as they are.
#[derive(Default)]
struct Prehashed(u64);

impl Hasher for Prehashed {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(b);
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

/// Every block's [`BlockIndex`], or `None` until the next change builds it
/// (a copy starts without one, so the journal's copy before every create
/// costs nothing; a search without an index scans every block).
#[derive(Default)]
struct DirIndex(Option<Vec<BlockIndex>>);

impl Clone for DirIndex {
    fn clone(&self) -> Self {
        DirIndex(None)
    }
}

/// A cache of the blocks: two directories with the same blocks are equal
/// whatever their indexes hold.
impl PartialEq for DirIndex {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl Eq for DirIndex {}

impl std::fmt::Debug for DirIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.0 {
            Some(v) => write!(f, "DirIndex({} blocks)", v.len()),
            None => write!(f, "DirIndex(none)"),
        }
    }
}

/// FNV-1a of a name, the key of [`BlockIndex::names`].
fn name_hash(name: &[u8]) -> u64 {
    name.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// What a record at `off` of `b` offers a new record: all of it if free,
/// the slack after its name if live (`nilfs_add_link`'s two tests).
fn room_of(b: &[u8], off: usize) -> usize {
    let len = rec_len_at(b, off);
    if u64_at(b, off) == 0 {
        len
    } else {
        len.saturating_sub(rec_len_for(usize::from(u8_at(b, off + 10))))
    }
}

/// The records of block `b` that offer a new one room, as (offset,
/// room) in offset order, walked as [`DirFile::records`] walks the block;
/// `None` if a record has a zero length or no room for its header.
fn block_rooms(b: &[u8]) -> Option<Vec<(usize, usize)>> {
    let (mut off, mut rooms) = (0usize, Vec::new());
    while off < b.len() {
        let len = rec_len_at(b, off);
        if len == 0 || off + 12 > b.len() {
            return None;
        }
        match room_of(b, off) {
            0 => {}
            room => rooms.push((off, room)),
        }
        off += len;
    }
    Some(rooms)
}

/// The index of block `b`.
fn index_block(b: &[u8]) -> BlockIndex {
    let scan = BlockIndex {
        scan: true,
        ..BlockIndex::default()
    };
    let Some(rooms) = block_rooms(b) else {
        return scan;
    };
    let mut ix = BlockIndex {
        rooms,
        ..BlockIndex::default()
    };
    let mut off = 0usize;
    while off < b.len() {
        if u64_at(b, off) != 0 {
            let name_len = usize::from(u8_at(b, off + 10));
            let Some(name) = b.get(off + 12..off + 12 + name_len) else {
                return scan;
            };
            *ix.names.entry(name_hash(name)).or_default() += 1;
        }
        off += rec_len_at(b, off);
    }
    ix
}

impl BlockIndex {
    /// Whether a search for `name` (hash `h`) may stop in this block.
    fn may_hold(&self, h: u64) -> bool {
        self.scan || self.names.contains_key(&h)
    }

    /// The first record with `reclen` bytes of room: where the scan stops
    /// in a block that holds no record of the name it adds.
    fn first_fit(&self, reclen: usize) -> Option<usize> {
        self.rooms.iter().find(|r| r.1 >= reclen).map(|r| r.0)
    }

    /// The record at `at` gave the new record named by hash `h` its room:
    /// what is left of that room now belongs to the record at `now` (the
    /// new record after a split, the old free record reused), `left`
    /// bytes. `false` if the index cannot vouch for the block or did not
    /// list `at` (so it cannot be updated, only rebuilt).
    fn took_room(&mut self, at: usize, now: usize, left: usize, h: u64) -> bool {
        let found = self.rooms.iter().position(|r| r.0 == at);
        let Some(p) = found.filter(|_| !self.scan) else {
            return false;
        };
        if left == 0 {
            self.rooms.remove(p);
        } else {
            self.rooms[p] = (now, left);
        }
        *self.names.entry(h).or_default() += 1;
        true
    }
}

/// Where an entry lives: block index and byte offset in it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EntryPos {
    /// Block of the directory.
    pub block: u64,
    /// Byte offset of the record in the block.
    pub offset: usize,
}

/// A live entry found by name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Found {
    /// Where it is.
    pub pos: EntryPos,
    /// Its inode number.
    pub ino: Ino,
    /// Its file type (`dir::FT_*`).
    pub file_type: u8,
}

/// On-disk `rec_len` of a record, with 65535 meaning 65536 (64 KiB blocks).
fn rec_len_at(b: &[u8], off: usize) -> usize {
    match u16_at(b, off + 8) {
        u16::MAX => 65536,
        v => usize::from(v),
    }
}

fn put_rec_len(b: &mut [u8], off: usize, len: usize) {
    put_u16(b, off + 8, if len >= 65536 { u16::MAX } else { len as u16 });
}

impl DirFile {
    /// A directory of `n` blocks read one by one with `read`, each checked
    /// as it arrives: a block that fails the kernel's directory checks (an
    /// unmapped one reads as zeros, whose first record is too short) ends
    /// the load there, so a damaged `i_size` costs no more than the
    /// directory's real blocks.
    pub fn load(
        block_size: u32,
        n: u64,
        mut read: impl FnMut(u64) -> Result<Vec<u8>>,
    ) -> Result<Self> {
        let mut blocks = Vec::new();
        for k in 0..n {
            let b = read(k)?;
            parse_block(&b, block_size).map_err(|e| e.of_inode_block(k))?;
            blocks.push(StdArc::new(b));
        }
        Ok(DirFile {
            block_size,
            blocks,
            dirty: BTreeSet::new(),
            index: DirIndex::default(),
        })
    }

    /// `nilfs_make_empty`: a new directory's first block, "." and "..".
    pub fn make_empty(block_size: u32, self_ino: Ino, parent: Ino) -> Self {
        let bs = block_size as usize;
        let mut b = vec![0u8; bs];
        let dot = rec_len_for(1);
        put_u64(&mut b, 0, self_ino.0);
        put_rec_len(&mut b, 0, dot);
        put_u8(&mut b, 10, 1);
        put_u8(&mut b, 11, FT_DIR);
        put_bytes(&mut b, 12, b".");
        put_u64(&mut b, dot, parent.0);
        put_rec_len(&mut b, dot, bs - dot);
        put_u8(&mut b, dot + 10, 2);
        put_u8(&mut b, dot + 11, FT_DIR);
        put_bytes(&mut b, dot + 12, b"..");
        DirFile {
            block_size,
            blocks: vec![StdArc::new(b)],
            dirty: BTreeSet::from([0]),
            index: DirIndex::default(),
        }
    }

    /// `i_size` in bytes.
    pub fn size(&self) -> u64 {
        self.blocks.len() as u64 * u64::from(self.block_size)
    }

    /// The blocks.
    pub fn blocks(&self) -> &[StdArc<Vec<u8>>] {
        &self.blocks
    }

    /// Blocks changed since the last [`Self::mark_clean`], ascending.
    pub fn dirty_blocks(&self) -> impl Iterator<Item = u64> + '_ {
        self.dirty.iter().copied()
    }

    /// Forget the dirty set (after the blocks were written).
    pub fn mark_clean(&mut self) {
        self.dirty.clear();
    }

    /// Every record start of block `i`, with a typed error for the zero
    /// `rec_len` the kernel reports as "zero-length directory entry".
    fn records(&self, i: usize) -> Result<impl Iterator<Item = usize> + Clone + '_> {
        // The whole block is checked first, so a damaged record anywhere
        // in it fails the caller before it acts on any record; then the
        // offsets are walked again without a list.
        let b = &self.blocks[i];
        let mut off = 0usize;
        while off < b.len() {
            let len = rec_len_at(b, off);
            if len == 0 {
                return Err(Error::corrupt(
                    "directory entry",
                    format!("zero-length entry in block {i} at {off}"),
                ));
            }
            off += len;
        }
        let mut off = 0usize;
        Ok(std::iter::from_fn(move || {
            (off < b.len()).then(|| {
                let at = off;
                off += rec_len_at(b, at);
                at
            })
        }))
    }

    /// The index, built if a copy or a load left none.
    fn index_mut(&mut self) -> &mut Vec<BlockIndex> {
        let blocks = &self.blocks;
        self.index
            .0
            .get_or_insert_with(|| blocks.iter().map(|b| index_block(b)).collect())
    }

    /// Block `i` lost the live name `removed` (or only changed its
    /// records' lengths): the name counts follow, and the rooms are
    /// measured again (one walk, no hashing).
    fn reindex_names(&mut self, i: usize, removed: Option<&[u8]>) {
        let scan = self.index_mut().get(i).is_none_or(|ix| ix.scan);
        let rooms = block_rooms(&self.blocks[i]);
        let (Some(rooms), false) = (rooms, scan) else {
            return self.reindex(i);
        };
        let ix = &mut self.index_mut()[i];
        ix.rooms = rooms;
        if let Some(name) = removed {
            let h = name_hash(name);
            match ix.names.get_mut(&h) {
                Some(n) if *n > 1 => *n -= 1,
                _ => {
                    ix.names.remove(&h);
                }
            }
        }
    }

    /// Block `i` changed: its index is built again.
    fn reindex(&mut self, i: usize) {
        let ix = index_block(&self.blocks[i]);
        let index = self.index_mut();
        if i < index.len() {
            index[i] = ix;
        } else {
            index.push(ix);
        }
    }

    /// `nilfs_find_entry`: the live entry named `name`.
    pub fn find(&self, name: &[u8]) -> Result<Option<Found>> {
        let h = name_hash(name);
        for i in 0..self.blocks.len() {
            if let Some(ix) = self.index.0.as_ref().and_then(|v| v.get(i)) {
                if !ix.may_hold(h) {
                    continue;
                }
            }
            let b = &self.blocks[i];
            for off in self.records(i)? {
                let ino = u64_at(b, off);
                let len = usize::from(u8_at(b, off + 10));
                if ino != 0 && len == name.len() && &b[off + 12..off + 12 + len] == name {
                    return Ok(Some(Found {
                        pos: EntryPos {
                            block: i as u64,
                            offset: off,
                        },
                        ino: Ino(ino),
                        file_type: u8_at(b, off + 11),
                    }));
                }
            }
        }
        Ok(None)
    }

    /// `nilfs_add_link`: add `name` → `ino`. Like the kernel, it notices a
    /// duplicate only among the records it passes before the slot it picks
    /// (EEXIST); callers look the name up first, as the VFS does.
    pub fn add_link(&mut self, name: &[u8], ino: Ino, file_type: u8) -> Result<EntryPos> {
        if name.is_empty() || name.len() > NAME_LEN {
            return Err(Error::errno(
                Errno::ENAMETOOLONG,
                String::from_utf8_lossy(name),
            ));
        }
        let bs = self.block_size as usize;
        let reclen = rec_len_for(name.len());
        let h = name_hash(name);
        self.index_mut();
        // The block and record the scan stops at (`None`: it reaches i_size).
        let mut slot = None;
        'search: for i in 0..self.blocks.len() {
            if let Some(ix) = self.index.0.as_ref().and_then(|v| v.get(i)) {
                // No record here has this name, so the scan would stop at
                // the first record with room, or pass the block.
                if !ix.may_hold(h) {
                    if let Some(off) = ix.first_fit(reclen) {
                        slot = Some((i, off));
                        break 'search;
                    }
                    continue;
                }
            }
            for off in self.records(i)? {
                let b = &self.blocks[i];
                let d_ino = u64_at(b, off);
                let d_name_len = usize::from(u8_at(b, off + 10));
                if d_ino != 0
                    && d_name_len == name.len()
                    && &b[off + 12..off + 12 + d_name_len] == name
                {
                    return Err(Error::errno(Errno::EEXIST, String::from_utf8_lossy(name)));
                }
                if room_of(b, off) >= reclen {
                    slot = Some((i, off));
                    break 'search;
                }
            }
        }
        // The record taken, the new record's offset and length.
        let (i, taken, off, len) = match slot {
            Some((i, at)) => {
                let b = StdArc::make_mut(&mut self.blocks[i]);
                let len = rec_len_at(b, at);
                if u64_at(b, at) != 0 {
                    // Split: the live entry keeps its own length, the rest
                    // becomes the new entry.
                    let used = rec_len_for(usize::from(u8_at(b, at + 10)));
                    put_rec_len(b, at + used, len - used);
                    put_rec_len(b, at, used);
                    (i, at, at + used, len - used)
                } else {
                    (i, at, at, len)
                }
            }
            None => {
                // We hit i_size: a new block, one record spanning it.
                let mut b = vec![0u8; bs];
                put_rec_len(&mut b, 0, bs);
                self.blocks.push(StdArc::new(b));
                (self.blocks.len() - 1, 0, 0, bs)
            }
        };
        let b = StdArc::make_mut(&mut self.blocks[i]);
        put_u8(b, off + 10, name.len() as u8);
        put_bytes(b, off + 12, name);
        put_u64(b, off, ino.0);
        put_u8(b, off + 11, file_type);
        self.dirty.insert(i as u64);
        let kept = self
            .index_mut()
            .get_mut(i)
            .is_some_and(|ix| ix.took_room(taken, off, len - reclen, h));
        if !kept {
            self.reindex(i);
        }
        Ok(EntryPos {
            block: i as u64,
            offset: off,
        })
    }

    /// `nilfs_delete_entry`: remove the record at `pos`, merging it into
    /// the previous record of its block, or clearing its inode number if it
    /// is the block's first.
    pub fn delete_entry(&mut self, pos: EntryPos) -> Result<()> {
        let i = usize::try_from(pos.block)
            .ok()
            .filter(|&i| i < self.blocks.len());
        let i = i.ok_or_else(|| Error::OutOfRange(format!("directory block {}", pos.block)))?;
        let offs: Vec<usize> = self.records(i)?.collect();
        let k = offs.iter().position(|&o| o == pos.offset).ok_or_else(|| {
            Error::OutOfRange(format!("no record at {} in block {i}", pos.offset))
        })?;
        let b = StdArc::make_mut(&mut self.blocks[i]);
        let end = pos.offset + rec_len_at(b, pos.offset);
        let was_live = u64_at(b, pos.offset) != 0;
        if k > 0 {
            let prev = offs[k - 1];
            put_rec_len(b, prev, end - prev);
        }
        put_u64(b, pos.offset, 0);
        self.dirty.insert(i as u64);
        let len = usize::from(u8_at(&self.blocks[i], pos.offset + 10));
        let name = self.blocks[i]
            .get(pos.offset + 12..pos.offset + 12 + len)
            .map(<[u8]>::to_vec);
        match name {
            Some(name) if was_live => self.reindex_names(i, Some(&name)),
            Some(_) => self.reindex_names(i, None),
            None => self.reindex(i),
        }
        Ok(())
    }

    /// `nilfs_set_link`: point the record at `pos` to another inode (rename
    /// over an existing name, or a moved directory's "..").
    pub fn set_link(&mut self, pos: EntryPos, ino: Ino, file_type: u8) -> Result<()> {
        let i = usize::try_from(pos.block)
            .ok()
            .filter(|&i| i < self.blocks.len());
        let i = i.ok_or_else(|| Error::OutOfRange(format!("directory block {}", pos.block)))?;
        if !self.records(i)?.any(|o| o == pos.offset) {
            return Err(Error::OutOfRange(format!(
                "no record at {} in block {i}",
                pos.offset
            )));
        }
        let b = StdArc::make_mut(&mut self.blocks[i]);
        put_u64(b, pos.offset, ino.0);
        put_u8(b, pos.offset + 11, file_type);
        self.dirty.insert(i as u64);
        self.reindex(i);
        Ok(())
    }

    /// `nilfs_empty_dir`: only ".", ".." and unused records.
    pub fn is_empty(&self, self_ino: Ino) -> Result<bool> {
        for i in 0..self.blocks.len() {
            let b = &self.blocks[i];
            for off in self.records(i)? {
                let ino = u64_at(b, off);
                if ino == 0 {
                    continue;
                }
                let len = usize::from(u8_at(b, off + 10));
                let name = &b[off + 12..off + 12 + len.min(2)];
                let ok = match len {
                    1 => name == b"." && ino == self_ino.0,
                    2 => name == b"..",
                    _ => false,
                };
                if !ok {
                    return Ok(false);
                }
            }
        }
        Ok(true)
    }

    /// Live entries (name, inode, type), in on-disk order.
    pub fn entries(&self) -> Result<Vec<(Vec<u8>, Ino, u8)>> {
        let mut out = Vec::new();
        for b in &self.blocks {
            for e in parse_block(b, self.block_size)? {
                if e.ino.0 != 0 {
                    out.push((e.name, e.ino, e.file_type));
                }
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Where the kernel's scan (`nilfs_add_link`, every record of every
    /// block in order, no index) puts a record for `name`: `Err` for a
    /// duplicate it passes, `None` for a new block.
    fn scan_slot(d: &DirFile, name: &[u8]) -> std::result::Result<Option<EntryPos>, ()> {
        let reclen = rec_len_for(name.len());
        for (i, b) in d.blocks.iter().enumerate() {
            let mut off = 0;
            while off < b.len() {
                let (ino, nlen) = (u64_at(b, off), usize::from(u8_at(b, off + 10)));
                if ino != 0 && &b[off + 12..off + 12 + nlen] == name {
                    return Err(());
                }
                let (used, len) = (rec_len_for(nlen), rec_len_at(b, off));
                if (ino == 0 && len >= reclen) || len >= used + reclen {
                    let at = if ino != 0 { off + used } else { off };
                    return Ok(Some(EntryPos {
                        block: i as u64,
                        offset: at,
                    }));
                }
                off += len;
            }
        }
        Ok(None)
    }

    proptest! {
        /// After any mix of adds and deletes (names of 1 to 40 bytes, so
        /// records of many sizes, on 1 KiB blocks), every lookup and every
        /// placement is the scan's: `find` with the index kept through the
        /// changes equals `find` on a copy (which has none, so scans), and
        /// `add_link` puts each record where the scan would.
        #[test]
        fn the_index_changes_no_answer(
            ops in prop::collection::vec((any::<bool>(), 0u16..200, 1usize..40), 1..300),
        ) {
            let mut d = DirFile::make_empty(1024, Ino(11), Ino(2));
            let name = |n: u16, len: usize| {
                let mut v = format!("{n}-").into_bytes();
                v.resize(len.max(v.len()), b'x');
                v
            };
            for (add, n, len) in ops {
                let nm = name(n, len);
                let found = d.find(&nm).unwrap();
                prop_assert_eq!(found, d.clone().find(&nm).unwrap());
                if add {
                    let want = scan_slot(&d, &nm);
                    let nblocks = d.blocks.len() as u64;
                    match (d.add_link(&nm, Ino(100 + u64::from(n)), 1), want) {
                        (Ok(pos), Ok(Some(w))) => prop_assert_eq!(pos, w),
                        (Ok(pos), Ok(None)) => {
                            prop_assert_eq!(pos, EntryPos { block: nblocks, offset: 0 })
                        }
                        (Err(_), Err(())) => {}
                        (got, want) => prop_assert!(false, "{:?} vs the scan's {:?}", got, want),
                    }
                } else if let Some(f) = found {
                    d.delete_entry(f.pos).unwrap();
                }
            }
        }
    }
}
