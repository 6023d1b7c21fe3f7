//! The file API. Today its read side: a checkpoint of a mounted filesystem
//! seen as a tree of inodes — path lookup, stat, readdir, read, readlink —
//! with the errors the kernel gives (`ENOENT`, `ENOTDIR`, `ELOOP`, `ESTALE`,
//! ...).
//!
//! It reads through [`Nilfs`]: the checkpoint's ifile for inodes, each
//! file's bmap for its blocks, the DAT to turn virtual block numbers into
//! disk blocks. It knows nothing of output formats.

pub mod cached;

use std::collections::BTreeMap;

use crate::bmap::{self, DiskNodes};
use crate::format::bmap::BmapRoot;
use crate::format::cpfile::Checkpoint;
use crate::format::dir;
use crate::format::inode::{Inode, S_IFDIR, S_IFLNK, S_IFREG};
use crate::format::{ino, BlockNr, Cno, Ino, VBlockNr};
use crate::the_nilfs::Nilfs;
use crate::{Errno, Error, Result};

/// `MAXSYMLINKS` in Linux: nested symlinks followed during one lookup.
const MAX_SYMLINKS: usize = 40;

/// `PAGE_SIZE` of the kernel we follow (x86-64): a symlink is read as one
/// page.
pub(crate) const LINK_PAGE_SIZE: u64 = 4096;

/// The largest data piece [`CheckpointView::read_pieces`] hands over.
pub const STREAM_CHUNK: u64 = 1 << 20;

fn too_long(len: u64) -> Error {
    Error::errno(
        Errno::EFBIG,
        format!("a read of {len} bytes does not fit in memory"),
    )
}

/// A piece of a file's content, in order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Piece<'b> {
    /// Bytes read from mapped blocks.
    Data(&'b [u8]),
    /// This many bytes of unmapped blocks: zeros.
    Hole(u64),
}

/// The callback of [`CheckpointView::read_pieces`].
pub type PieceSink<'f> = dyn FnMut(Piece<'_>) -> Result<()> + 'f;

/// One directory entry as readdir returns it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DirEntry {
    /// The name (bytes; NILFS2 names are not necessarily UTF-8).
    pub name: Vec<u8>,
    /// The inode number.
    pub ino: Ino,
    /// The type recorded in the entry (`dir::FT_*`).
    pub file_type: u8,
}

/// The callback of [`CheckpointView::walk_tree`]: path, inode number, inode.
pub type TreeVisitor<'f> = dyn FnMut(&[u8], Ino, &Inode) -> Result<()> + 'f;

/// A checkpoint, read-only: the kernel's view after `mount -o ro,cp=N` (or
/// the latest checkpoint of a read-write mount, read here without writing).
pub struct CheckpointView<'a, 'd> {
    fs: &'a Nilfs<'d>,
    cp: Checkpoint,
}

impl<'a, 'd> CheckpointView<'a, 'd> {
    /// The checkpoint `cno`, or the latest one. Any valid checkpoint can be
    /// read; note the kernel itself mounts only snapshots with `cp=`
    /// ("The specified checkpoint is not a snapshot") and the latest
    /// checkpoint without it.
    pub fn open(fs: &'a Nilfs<'d>, cno: Option<Cno>) -> Result<Self> {
        let cno = cno.unwrap_or(fs.scan.cno);
        let cp = fs
            .checkpoint(cno)?
            .ok_or_else(|| Error::errno(Errno::ENOENT, format!("checkpoint {cno}")))?;
        Ok(CheckpointView { fs, cp })
    }

    /// The view of checkpoint entry `cp`, read before (a snapshot mount
    /// keeps the entry it was mounted with).
    /// The image the view reads.
    pub fn image(&self) -> &'a Nilfs<'d> {
        self.fs
    }

    pub fn with_checkpoint(fs: &'a Nilfs<'d>, cp: Checkpoint) -> Self {
        CheckpointView { fs, cp }
    }

    /// The checkpoint entry.
    pub fn checkpoint(&self) -> &Checkpoint {
        &self.cp
    }

    /// The inode `ino`, checked as `nilfs_iget` does: a valid inode number
    /// (`s_first_ino` or above, or a reserved one the kernel loads), present
    /// in the ifile, with links (0 links means deleted: `ESTALE`), of one
    /// of the seven file types, with a sound mapping root; corruption names
    /// the inode.
    pub fn inode(&self, i: Ino) -> Result<Inode> {
        let first = u64::from(self.fs.sb.first_ino);
        let valid = i.0 >= first || [2, 3, 4, 5, 6, 7, 10].contains(&i.0);
        if !valid {
            return Err(Error::errno(
                Errno::EINVAL,
                format!("inode {i} is not a valid inode number"),
            ));
        }
        let inode = self
            .fs
            .ifile_inode(&self.cp.ifile_inode, i)?
            .ok_or_else(|| {
                Error::errno(Errno::ESTALE, format!("inode {i} lies in an ifile hole"))
            })?;
        if inode.links_count == 0 {
            return Err(Error::errno(Errno::ESTALE, format!("inode {i} is deleted")));
        }
        inode.check_loadable(i.0)?;
        // `nilfs_read_inode_common` -> `nilfs_bmap_read`: the mapping's root
        // is checked when the inode is loaded (`nilfs_btree_root_broken`).
        if inode.has_bmap() {
            BmapRoot::decode(&inode.bmap).map_err(|e| e.of_inode(i.0))?;
        }
        Ok(inode)
    }

    /// Every mapped block of `inode` as (file block, disk block), in order,
    /// with virtual numbers translated through the DAT. One walk of the tree.
    pub fn block_map(&self, inode: &Inode) -> Result<BTreeMap<u64, BlockNr>> {
        self.block_map_in(inode, 0..u64::MAX)
    }

    /// [`Self::block_map`] of the blocks with offsets in `keys` alone.
    pub fn block_map_in(
        &self,
        inode: &Inode,
        keys: std::ops::Range<u64>,
    ) -> Result<BTreeMap<u64, BlockNr>> {
        let mut found = Vec::new();
        let mut dat = self.fs;
        let mut nodes = DiskNodes::translated(self.fs.device(), self.fs.block_size(), &mut dat);
        bmap::for_each_in(&inode.bmap, keys, &mut nodes, &mut |k, p| {
            found.push((k, p));
            Ok(())
        })?;
        let keys = found;
        let mut out = BTreeMap::new();
        for (k, v) in keys {
            if v != 0 {
                out.insert(k, self.fs.dat_translate(VBlockNr(v))?);
            }
        }
        Ok(out)
    }

    /// The first `len` bytes of the file's data from `off` (short at EOF;
    /// holes read as zeros).
    pub fn read(&self, inode: &Inode, off: u64, len: u64) -> Result<Vec<u8>> {
        let end = inode.size.min(off.saturating_add(len));
        if off >= end {
            return Ok(Vec::new());
        }
        let n = usize::try_from(end - off).map_err(|_| too_long(end - off))?;
        let mut out = Vec::new();
        out.try_reserve_exact(n).map_err(|_| too_long(end - off))?;
        // Every byte is written by the read; zeroed first all the same
        // (a page of zeros costs little next to the read).
        out.resize(n, 0);
        self.read_into(inode, off, &mut out)?;
        Ok(out)
    }

    /// Read the file's data from `off` into `buf`, as the kernel's read
    /// copies into a user buffer; returns how many bytes (short at EOF).
    /// Holes read as zeros; runs of blocks that lie one after another on
    /// the device are read in one device call.
    pub fn read_into(&self, inode: &Inode, off: u64, buf: &mut [u8]) -> Result<usize> {
        let end = inode.size.min(off.saturating_add(buf.len() as u64));
        if off >= end {
            return Ok(0);
        }
        let out = &mut buf[..(end - off) as usize];
        let bs = u64::from(self.fs.block_size());
        // The mapped blocks of the range alone, in one walk of the part of
        // the tree that holds them.
        let map = self.block_map_in(inode, off / bs..end.div_ceil(bs))?;
        self.fill(&map, off, out)?;
        Ok(out.len())
    }

    /// Fill `out` with bytes `[off, off + out.len())` of a file whose
    /// mapped blocks are `map`: unmapped blocks as zeros, whole blocks
    /// straight from the device in runs of consecutive disk blocks, a
    /// block cut by either end through one block read.
    fn fill(&self, map: &BTreeMap<u64, BlockNr>, off: u64, out: &mut [u8]) -> Result<()> {
        let bs = u64::from(self.fs.block_size());
        let end = off + out.len() as u64;
        // A run of whole blocks: (first key, first disk block, count).
        let mut run: Option<(u64, BlockNr, u64)> = None;
        let read_run = |run: Option<(u64, BlockNr, u64)>, out: &mut [u8]| -> Result<()> {
            if let Some((k, pbn, n)) = run {
                let at = (k * bs - off) as usize;
                self.fs
                    .read_blocks_into(pbn, &mut out[at..at + (n * bs) as usize])?;
            }
            Ok(())
        };
        // Bytes before `done` are read or zeroed (holes read as zeros).
        let mut done = 0usize;
        for (&k, &pbn) in map.range(off / bs..end.div_ceil(bs)) {
            let start = k * bs;
            let lo = (start.max(off) - off) as usize;
            let hi = ((start + bs).min(end) - off) as usize;
            out[done..lo].fill(0);
            done = hi;
            if start < off || start + bs > end {
                let block = self.fs.read_block(pbn)?;
                let within = (start.max(off) - start) as usize;
                out[lo..hi].copy_from_slice(&block[within..within + (hi - lo)]);
                continue;
            }
            match run {
                Some((rk, rp, n)) if rk + n == k && rp.0 + n == pbn.0 => {
                    run = Some((rk, rp, n + 1))
                }
                _ => {
                    read_run(run.take(), out)?;
                    run = Some((k, pbn, 1));
                }
            }
        }
        read_run(run, out)?;
        out[done..].fill(0);
        Ok(())
    }

    /// The whole content of a regular file or symlink, in one buffer of
    /// `i_size` bytes: for files known to be small. Anything that reads a
    /// file of any size uses [`Self::read_pieces`].
    pub fn read_all(&self, inode: &Inode) -> Result<Vec<u8>> {
        self.read(inode, 0, inode.size)
    }

    /// The file's content `[0, i_size)` handed to `sink` in order, as data
    /// pieces of at most [`STREAM_CHUNK`] bytes and holes (unmapped
    /// blocks, reading as zeros) by their length alone. Memory: the file's
    /// block map (one entry per mapped block, bounded by the device) and
    /// one chunk, whatever `i_size` says; a sparse file of 2^44 bytes is a
    /// few pieces.
    pub fn read_pieces(&self, inode: &Inode, sink: &mut PieceSink<'_>) -> Result<()> {
        let size = inode.size;
        let bs = u64::from(self.fs.block_size());
        let map = self.block_map(inode)?;
        let mut buf: Vec<u8> = Vec::new();
        // The end of what was handed over; then each extent of mapped
        // blocks (consecutive keys), at most a chunk at a time.
        let mut pos = 0u64;
        let mut keys = map.range(..size.div_ceil(bs)).map(|(&k, _)| k).peekable();
        while let Some(first) = keys.next() {
            let start = first * bs;
            if start > pos {
                sink(Piece::Hole(start - pos))?;
            }
            let mut last = first;
            while (last + 1 - first) * bs < STREAM_CHUNK && keys.peek() == Some(&(last + 1)) {
                last = keys.next().expect("peeked");
            }
            let stop = ((last + 1) * bs).min(size);
            // `fill` writes every byte: only what the buffer grows by is
            // zeroed first.
            buf.resize((stop - start) as usize, 0);
            self.fill(&map, start, &mut buf)?;
            sink(Piece::Data(&buf))?;
            pos = stop;
        }
        if pos < size {
            sink(Piece::Hole(size - pos))?;
        }
        Ok(())
    }

    /// The entries of directory `inode`, in on-disk order, "." and ".."
    /// included.
    ///
    /// Every name is checked by [`name_fault`]: a name no path can carry is
    /// a typed corruption naming the directory, its block and the offset,
    /// never a path component handed to a caller.
    pub fn readdir(&self, inode: &Inode) -> Result<Vec<DirEntry>> {
        self.readdir_of(None, inode)
    }

    /// [`Self::readdir`] of the directory inode `dir` (named in errors).
    pub fn readdir_ino(&self, dir: Ino) -> Result<Vec<DirEntry>> {
        let inode = self.inode(dir)?;
        self.readdir_of(Some(dir), &inode)
    }

    fn readdir_of(&self, dir_ino: Option<Ino>, inode: &Inode) -> Result<Vec<DirEntry>> {
        if inode.file_type() != S_IFDIR {
            return Err(Error::errno(Errno::ENOTDIR, "readdir"));
        }
        let bs = self.fs.block_size();
        let map = self.block_map(inode)?;
        let nblocks = inode.size.div_ceil(u64::from(bs));
        let mut out = Vec::new();
        // Only the mapped blocks below i_size: a hole in a directory reads
        // as an empty block to the kernel's page cache, which then fails
        // nilfs_check_folio; we skip it. Iterating the map, not 0..nblocks,
        // keeps a corrupt i_size of 2^63 from looping 2^53 times.
        for (&b, &pbn) in map.range(..nblocks) {
            let data = self.fs.read_block(pbn)?;
            let mut offs = 0usize;
            for (k, e) in dir::parse_block(&data, bs)
                .map_err(|e| e.at_block(pbn.0))?
                .into_iter()
                .enumerate()
            {
                let here = offs;
                offs += e.rec_len as usize;
                if e.ino.0 == 0 {
                    continue;
                }
                let position = if b == 0 { Some(k) } else { None };
                if let Some(fault) = name_fault(&e.name, position) {
                    let which = dir_ino.map_or_else(String::new, |i| format!(" {i}"));
                    return Err(Error::Corrupt {
                        what: "directory entry",
                        blocknr: Some(pbn.0),
                        detail: format!(
                            "directory{which}, block {b}, offset {here}: name {:?} {fault}",
                            String::from_utf8_lossy(&e.name)
                        ),
                    });
                }
                out.push(DirEntry {
                    name: e.name,
                    ino: e.ino,
                    file_type: e.file_type,
                });
            }
        }
        Ok(out)
    }

    /// Look `name` up in directory `dir_inode` (`nilfs_inode_by_name`).
    pub fn lookup_in(&self, dir_inode: &Inode, name: &[u8]) -> Result<Ino> {
        if name.len() > crate::format::NAME_LEN {
            return Err(Error::errno(
                Errno::ENAMETOOLONG,
                String::from_utf8_lossy(name),
            ));
        }
        self.readdir(dir_inode)?
            .into_iter()
            .find(|e| e.name == name)
            .map(|e| e.ino)
            .ok_or_else(|| Error::errno(Errno::ENOENT, String::from_utf8_lossy(name)))
    }

    /// Resolve an absolute or root-relative path. Symlinks in the middle are
    /// followed; the last component's only if `follow_last`.
    pub fn resolve(&self, path: &[u8], follow_last: bool) -> Result<(Ino, Inode)> {
        let mut budget = MAX_SYMLINKS;
        self.walk(ino::ROOT, path, follow_last, &mut budget)
    }

    fn walk(
        &self,
        start: Ino,
        path: &[u8],
        follow_last: bool,
        budget: &mut usize,
    ) -> Result<(Ino, Inode)> {
        let shown = || String::from_utf8_lossy(path).into_owned();
        let (mut cur, mut cur_inode) = if path.first() == Some(&b'/') {
            (ino::ROOT, self.inode(ino::ROOT)?)
        } else {
            (start, self.inode(start)?)
        };
        let parts: Vec<&[u8]> = path
            .split(|&c| c == b'/')
            .filter(|p| !p.is_empty() && *p != b".")
            .collect();
        for (i, part) in parts.iter().enumerate() {
            if cur_inode.file_type() != S_IFDIR {
                return Err(Error::errno(Errno::ENOTDIR, shown()));
            }
            let parent = cur;
            let next = self.lookup_in(&cur_inode, part)?;
            let next_inode = self.inode(next)?;
            let last = i + 1 == parts.len();
            if next_inode.file_type() == S_IFLNK && (!last || follow_last) {
                if *budget == 0 {
                    return Err(Error::errno(Errno::ELOOP, shown()));
                }
                *budget -= 1;
                let target = self.readlink(&next_inode)?;
                (cur, cur_inode) = self.walk(parent, &target, true, budget)?;
            } else {
                (cur, cur_inode) = (next, next_inode);
            }
        }
        Ok((cur, cur_inode))
    }

    /// A symlink's target as the kernel reads it: `page_get_link` reads the
    /// link's first page and ends the string at `min(i_size, PAGE_SIZE - 1)`
    /// (`nd_terminate_link`), and `readlink` returns it up to its first NUL
    /// (`readlink_copy`'s strlen). So a hostile `i_size` of 2^40 reads one
    /// page, not 2^40 bytes. (`nilfs_symlink` never writes a longer target:
    /// it refuses one longer than the block, and `symlink(2)` one longer than
    /// `PATH_MAX`.)
    pub fn readlink(&self, inode: &Inode) -> Result<Vec<u8>> {
        if inode.file_type() != S_IFLNK {
            return Err(Error::errno(Errno::EINVAL, "readlink of a non-symlink"));
        }
        let mut target = self.read(inode, 0, inode.size.min(LINK_PAGE_SIZE - 1))?;
        if let Some(nul) = target.iter().position(|&c| c == 0) {
            target.truncate(nul);
        }
        Ok(target)
    }

    /// Visit every entry below `dir` (depth first, on-disk order), with its
    /// path relative to the root ("/a/b"). Bounded: a directory reached
    /// twice (a corrupt, cyclic tree) is an error, not a loop.
    pub fn walk_tree(&self, f: &mut TreeVisitor<'_>) -> Result<()> {
        let mut seen = std::collections::BTreeSet::new();
        self.walk_dir(b"", ino::ROOT, &mut seen, f)
    }

    fn walk_dir(
        &self,
        prefix: &[u8],
        dir_ino: Ino,
        seen: &mut std::collections::BTreeSet<u64>,
        f: &mut TreeVisitor<'_>,
    ) -> Result<()> {
        if !seen.insert(dir_ino.0) {
            return Err(Error::corrupt(
                "directory",
                format!("directory {dir_ino} is reachable twice"),
            ));
        }
        for e in self.readdir_ino(dir_ino)? {
            if e.name == b"." || e.name == b".." {
                continue;
            }
            let mut path = prefix.to_vec();
            path.push(b'/');
            path.extend_from_slice(&e.name);
            let child = self.inode(e.ino)?;
            f(&path, e.ino, &child)?;
            if child.file_type() == S_IFDIR {
                self.walk_dir(&path, e.ino, seen, f)?;
            }
        }
        Ok(())
    }
}

/// Why a live directory entry's name cannot be a path component, if it
/// cannot. `position` is the record's index in the directory's first block
/// (`None` in later blocks).
///
/// `nilfs_check_folio` checks no names, but the VFS does before any name
/// reaches user space: `verify_dirent_name` (fs/readdir.c, Linux 5.5 on)
/// fails getdents with EIO on an empty name or one containing `/`. We refuse
/// those, and two more the kernel lets through to user space where they do
/// harm: a NUL byte (no system call can name such an entry; user space sees
/// the name cut short, another name), and `.`/`..` anywhere but the first
/// two records of the first block, where `nilfs_make_empty` puts them (a
/// second `..` would make a tree walker leave the tree).
pub fn name_fault(name: &[u8], position: Option<usize>) -> Option<&'static str> {
    if name.is_empty() {
        Some("is empty")
    } else if name.contains(&b'/') {
        Some("contains '/'")
    } else if name.contains(&0) {
        Some("contains a NUL byte")
    } else if name == b"." && position != Some(0) {
        Some("is \".\" outside the first record")
    } else if name == b".." && position != Some(1) {
        Some("is \"..\" outside the second record")
    } else {
        None
    }
}

/// Whether an inode is a regular file.
pub fn is_reg(i: &Inode) -> bool {
    i.file_type() == S_IFREG
}
