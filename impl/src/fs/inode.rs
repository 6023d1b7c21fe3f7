//! The inode table (inode.c): user files and directories in memory, the
//! dirty list the segment constructor takes them from, and what inode.c
//! does to one file: load it (`nilfs_iget`), create it
//! (`nilfs_new_inode`), read a block of it as it stands, truncate its
//! mapping (`nilfs_truncate_bmap`) and evict it (`nilfs_evict_inode`).

use std::collections::hash_map::Entry;
use std::collections::{BTreeMap, VecDeque};

use rustc_hash::{FxHashMap, FxHashSet};

use super::{sectors, Fs};
use crate::bmap::write::Bmap;
use crate::bmap::DiskNodes;
use crate::dir::DirFile;
use crate::format::inode::{Inode, S_IFDIR, S_IFMT};
use crate::format::{Ino, VBlockNr};
use crate::{Errno, Error, Result};

/// A user file or directory in memory.
#[derive(Clone, Debug)]
pub(crate) struct FileState {
    pub(crate) raw: Inode,
    pub(crate) bmap: Bmap,
    /// Dirty data blocks by offset.
    pub(crate) dirty: BTreeMap<u64, Vec<u8>>,
    /// The directory's blocks, once loaded for a change.
    pub(crate) dir: Option<DirFile>,
    /// The raw inode must be written into the ifile.
    pub(crate) inode_dirty: bool,
    /// `NILFS_I_INODE_SYNC`: the inode changed beyond its timestamps
    /// (created, linked or unlinked, grown, truncated) since the last
    /// checkpoint, so fdatasync needs a full construction.
    pub(crate) inode_sync: bool,
    /// `NILFS_I_DIRTY` (`nilfs_set_file_dirty`): its pages were dirtied —
    /// a write, a truncate that changed the size, a directory entry, a new
    /// directory's or symlink's block. What fsync and fdatasync test
    /// (`nilfs_inode_dirty`): an inode changed only in metadata (new and
    /// empty, renamed, linked) makes them write nothing.
    pub(crate) pages_dirty: bool,
    /// `i_atime` as a utimensat left it (ns), while the inode stays in
    /// memory; `None`: as loaded, the modification time.
    pub(crate) atime_ns: Option<i64>,
}

impl FileState {
    fn new(raw: Inode, bmap: Bmap, dirty: bool) -> Self {
        FileState {
            raw,
            bmap,
            dirty: BTreeMap::new(),
            dir: None,
            inode_dirty: dirty,
            inode_sync: dirty,
            pages_dirty: false,
            atime_ns: None,
        }
    }

    /// `mark_inode_dirty` after a change at `now` (seconds, nanoseconds):
    /// ctime moves, and the inode changed beyond its timestamps.
    pub(crate) fn changed(&mut self, (now, nsec): (u64, u32)) {
        self.raw.ctime = now;
        self.raw.ctime_nsec = nsec;
        self.inode_dirty = true;
        self.inode_sync = true;
    }

    /// [`changed`](Self::changed), and the contents too: mtime moves.
    pub(crate) fn modified(&mut self, (now, nsec): (u64, u32)) {
        self.raw.mtime = now;
        self.raw.mtime_nsec = nsec;
        self.changed((now, nsec));
    }

    /// Whether the file has anything a construction would write.
    pub(crate) fn needs_write(&self) -> bool {
        self.inode_dirty || !self.dirty.is_empty()
    }

    /// The construction that wrote the file is on disk. It collected the
    /// file only if its pages were dirty, and only then does the file
    /// lose `NILFS_I_INODE_SYNC` (`nilfs_drop_collected_inodes`): a file
    /// changed in metadata alone (linked, say) keeps it, and a later
    /// fdatasync of its data still makes a full construction (K19).
    pub(crate) fn mark_clean(&mut self) -> Result<()> {
        if self.pages_dirty || !self.dirty.is_empty() {
            self.inode_sync = false;
        }
        self.dirty.clear();
        self.inode_dirty = false;
        self.pages_dirty = false;
        self.bmap.mark_clean()?;
        if let Some(d) = &mut self.dir {
            d.mark_clean();
        }
        Ok(())
    }
}

/// The files in memory and the dirty list (`sc_dirty_files`, in the order
/// the files were dirtied). Invariant: every file on the dirty list is in
/// memory; eviction takes a file off both.
#[derive(Debug, Default)]
pub(crate) struct Inodes {
    /// Boxed, so that the table's growth moves pointers: moving the
    /// states themselves was a tenth of the 100,000-file bench's time.
    files: FxHashMap<Ino, Box<FileState>>,
    /// The files in memory in the order they came in (loaded or
    /// created): the order [`Inodes::shrink`] lets them go in, a file
    /// still in use going to the back. It may also name files no longer
    /// in memory (skipped when their turn comes) and name one twice; it
    /// never misses one in memory.
    order: VecDeque<Ino>,
    dirty: Vec<Ino>,
    /// The same inodes as `dirty`, for membership in O(1).
    on_dirty_list: FxHashSet<Ino>,
    /// `ns_ndirtyblks`, kept as the kernel keeps it rather than summed on
    /// every operation (which made each operation O(dirty files)). The
    /// sum is exact for every file but those in `recount`, which were
    /// handed out mutably since they were last counted; `counted` holds
    /// what each file contributes to the sum. `None`: recount them all.
    ndirty: Option<u64>,
    counted: FxHashMap<Ino, u64>,
    recount: FxHashSet<Ino>,
    /// References open files hold (the `igrab` of an open file): an
    /// inode whose last link goes while it is open stays, unlinked, until
    /// the last one is released.
    open: FxHashMap<Ino, u32>,
    /// How many files may stay in memory after a construction before the
    /// clean, unreferenced ones are let go ([`Inodes::shrink`]); `None`:
    /// [`INODE_CACHE_FILES`].
    cache_limit: Option<usize>,
    /// Known-bad: [`Inodes::shrink`] lets dirty files go too, and `sync`
    /// calls it before its construction.
    pub(crate) shrink_dirty: bool,
    /// While an operation runs under [`Fs::atomically`]: each file's
    /// state before the operation first changed it (`None`: not in
    /// memory), and the dirty list then.
    journal: Option<Journal>,
}

#[derive(Debug, Default)]
struct Journal {
    pre: FxHashMap<Ino, Option<Box<FileState>>>,
    /// The dirty list's length then: an operation only appends to it, so
    /// the list is saved whole (`dirty`) only before an eviction edits it.
    dirty_len: usize,
    dirty: Option<Vec<Ino>>,
}

/// Files kept in memory after a construction, clean or not, before the
/// clean ones nobody holds are let go (about 1 KiB each with a small
/// mapping: some 64 MiB).
pub(crate) const INODE_CACHE_FILES: usize = 65_536;

impl Inodes {
    /// The kernel's inode cache lets go of unused inodes under memory
    /// pressure (`prune_icache_sb` → `evict`, which for a linked nilfs2
    /// inode only drops it from memory): after a construction, when more
    /// than the limit are in memory, drop every file that is clean (not
    /// on the dirty list, nothing to write), not open, and whose access
    /// time is the on-disk one. Nothing is lost: the next use reads the
    /// inode back from the ifile the construction wrote, and its mapping
    /// from the medium. Without this, memory grew with every file ever
    /// touched (1.1 GiB for a million created files).
    ///
    /// As the kernel's shrinker takes a batch from the end of its LRU list
    /// rather than the whole cache, the files go oldest first (in the
    /// order they came into memory), and only until seven eighths of the
    /// limit remain: the cost is the files let go, not the files kept.
    /// Letting all of them go at once, in one pass over the table, cost
    /// one construction of a file creator 17 ms where the others took
    /// 2.5 ms; a pass over the table for each batch cost a third of the
    /// time of a million file creations.
    pub(crate) fn shrink(&mut self) {
        let limit = self.cache_limit.unwrap_or(INODE_CACHE_FILES);
        if self.files.len() <= limit || self.journal.is_some() {
            return;
        }
        if self.shrink_dirty {
            let open = &self.open;
            self.files.retain(|i, _| open.contains_key(i));
            let files = &self.files;
            self.dirty.retain(|i| files.contains_key(i));
            self.on_dirty_list.retain(|i| files.contains_key(i));
            self.recount.retain(|i| files.contains_key(i));
            self.counted.retain(|i, _| files.contains_key(i));
            self.ndirty = None;
            return;
        }
        let keep = limit - limit / 8;
        // Each entry is looked at once at most: files all in use end it.
        for _ in 0..self.order.len() {
            if self.files.len() <= keep {
                break;
            }
            let Some(i) = self.order.pop_front() else {
                break;
            };
            let Entry::Occupied(e) = self.files.entry(i) else {
                continue; // gone already (unlinked and released)
            };
            let f = e.get();
            // A file may go with NILFS_I_INODE_SYNC still set (changed in
            // metadata alone since a construction collected it): the flag
            // lives in the kernel's in-memory inode too, and goes when the
            // VFS evicts that clean inode.
            let idle = !self.on_dirty_list.contains(&i)
                && !f.needs_write()
                && !f.pages_dirty
                && f.atime_ns.is_none()
                && !self.open.contains_key(&i);
            if idle {
                e.remove();
                self.recount.remove(&i);
                self.counted.remove(&i);
            } else {
                self.order.push_back(i);
            }
        }
        self.ndirty = None;
    }

    /// Start journaling (see [`Fs::atomically`]).
    pub(crate) fn begin_journal(&mut self) {
        self.journal = Some(Journal {
            pre: FxHashMap::default(),
            dirty_len: self.dirty.len(),
            dirty: None,
        });
    }

    /// Put every file the journal saw back as it was, and the dirty list.
    pub(crate) fn roll_back(&mut self) {
        let Some(j) = self.journal.take() else { return };
        for (i, pre) in j.pre {
            match pre {
                Some(f) => self.files.insert(i, f),
                None => self.files.remove(&i),
            };
        }
        match j.dirty {
            Some(list) => self.dirty = list,
            None => self.dirty.truncate(j.dirty_len),
        }
        self.on_dirty_list = self.dirty.iter().copied().collect();
        self.ndirty = None;
    }

    /// Stop journaling: the changes stand.
    pub(crate) fn commit(&mut self) {
        self.journal = None;
        self.compact_order();
    }

    /// Journal `i` before its first change.
    fn save(&mut self, i: Ino) {
        if let Some(j) = self.journal.as_mut() {
            if let Entry::Vacant(e) = j.pre.entry(i) {
                e.insert(self.files.get(&i).cloned());
            }
        }
    }

    pub(crate) fn contains(&self, i: Ino) -> bool {
        self.files.contains_key(&i)
    }

    /// A file known to be in memory (loaded by [`Fs::file`] before).
    pub(crate) fn loaded(&self, i: Ino) -> &FileState {
        self.files
            .get(&i)
            .unwrap_or_else(|| panic!("fs: inode {i} is not loaded"))
    }

    /// The same, mutably.
    pub(crate) fn loaded_mut(&mut self, i: Ino) -> &mut FileState {
        self.save(i);
        self.recount.insert(i);
        self.files
            .get_mut(&i)
            .unwrap_or_else(|| panic!("fs: inode {i} is not loaded"))
    }

    fn insert(&mut self, i: Ino, f: FileState) {
        self.save(i);
        self.recount.insert(i);
        if self.files.insert(i, Box::new(f)).is_none() {
            self.order.push_back(i);
            self.compact_order();
        }
    }

    /// Entries of files gone (evicted when unlinked and released) stay in
    /// [`Inodes::order`] until their turn; a long run of creations and
    /// unlinks under the limit would pile them up. Compacting once they
    /// outnumber the files twice over costs O(1) a file, amortized. Not
    /// under a journal: a rollback may bring back a file evicted since.
    fn compact_order(&mut self) {
        if self.journal.is_none() && self.order.len() > 2 * self.files.len() + 1024 {
            let files = &self.files;
            let mut seen = FxHashSet::default();
            self.order
                .retain(|i| files.contains_key(i) && seen.insert(*i));
        }
    }

    /// Put `i` on the dirty list (once).
    pub(crate) fn touch(&mut self, i: Ino) {
        if self.on_dirty_list.insert(i) {
            self.dirty.push(i);
            self.recount.insert(i);
        }
    }

    /// `nilfs_set_file_dirty`: file `i`'s pages (or, for a truncate, its
    /// mapping) became dirty. The kernel's dirty-file list holds only such
    /// files, each from the first time its pages got dirty since the last
    /// construction, and the construction writes the files in that order;
    /// a file changed only in its inode (new and empty, chmod'ed) is not on
    /// it — `nilfs_mark_inode_dirty` writes the inode into the ifile at
    /// once. Ours lists those too (their raw inodes go to the ifile at the
    /// construction); one listed for that reason moves to the end now,
    /// where the kernel adds it. Files with no blocks to write have no
    /// place in the log, so the order of the files that do is the kernel's.
    pub(crate) fn pages_dirtied(&mut self, i: Ino) {
        let f = self.loaded_mut(i);
        if f.pages_dirty {
            return; // already on the list, where its pages first put it
        }
        f.pages_dirty = true;
        if self.on_dirty_list.contains(&i) {
            if self.dirty.last() != Some(&i) {
                self.save_dirty_list();
                self.dirty.retain(|&d| d != i);
                self.dirty.push(i);
            }
        } else {
            self.touch(i);
        }
    }

    /// The dirty list.
    pub(crate) fn dirty(&self) -> &[Ino] {
        &self.dirty
    }

    /// Put back the dirty list a failed construction took
    /// (`nilfs_redirty_inodes`).
    pub(crate) fn restore_dirty(&mut self, list: Vec<Ino>) {
        self.save_dirty_list();
        self.on_dirty_list = list.iter().copied().collect();
        self.dirty = list;
        self.ndirty = None;
    }

    /// Take the dirty list for a construction (`nilfs_segctor_collect_dirty_files`).
    pub(crate) fn take_dirty(&mut self) -> Vec<Ino> {
        self.save_dirty_list();
        self.on_dirty_list.clear();
        self.ndirty = None;
        std::mem::take(&mut self.dirty)
    }

    /// `ns_ndirtyblks`: the dirty data blocks of the files on the dirty
    /// list. O(files changed since the last call), not O(dirty files).
    pub(crate) fn ndirty_blocks(&mut self) -> u64 {
        let contribution =
            |files: &FxHashMap<Ino, Box<FileState>>, on: &FxHashSet<Ino>, i: &Ino| {
                if on.contains(i) {
                    files.get(i).map_or(0, |f| f.dirty.len() as u64)
                } else {
                    0
                }
            };
        let sum = match self.ndirty {
            None => {
                self.recount.clear();
                self.counted.clear();
                let mut sum = 0;
                for i in &self.dirty {
                    let n = contribution(&self.files, &self.on_dirty_list, i);
                    self.counted.insert(*i, n);
                    sum += n;
                }
                sum
            }
            Some(mut sum) => {
                for i in std::mem::take(&mut self.recount) {
                    let n = contribution(&self.files, &self.on_dirty_list, &i);
                    let was = if n == 0 {
                        self.counted.remove(&i)
                    } else {
                        self.counted.insert(i, n)
                    };
                    sum = sum - was.unwrap_or(0) + n;
                }
                sum
            }
        };
        self.ndirty = Some(sum);
        debug_assert_eq!(sum, self.ndirty_blocks_summed(), "ns_ndirtyblks drifted");
        sum
    }

    /// The same sum, walked over the dirty list (O(dirty files)).
    pub(crate) fn ndirty_blocks_summed(&self) -> u64 {
        self.dirty
            .iter()
            .map(|i| self.files.get(i).map_or(0, |f| f.dirty.len() as u64))
            .sum()
    }

    /// Under a journal, keep the whole dirty list before an edit other
    /// than an append.
    fn save_dirty_list(&mut self) {
        if let Some(j) = self.journal.as_mut() {
            if j.dirty.is_none() {
                j.dirty = Some(self.dirty.clone());
            }
        }
    }

    fn evict(&mut self, i: Ino) {
        self.save(i);
        self.files.remove(&i);
        if self.on_dirty_list.remove(&i) {
            self.save_dirty_list();
            self.dirty.retain(|&x| x != i);
        }
        self.recount.insert(i);
    }

    /// Whether an open file holds `i`.
    pub(crate) fn is_open(&self, i: Ino) -> bool {
        self.open.contains_key(&i)
    }
}

impl<'a> Fs<'a> {
    /// How many files may stay in memory after a construction before the
    /// clean, unreferenced ones are let go (default 65,536; 0 lets every
    /// clean file go after every construction, which lockstep uses to show
    /// that nothing depends on a file staying in memory).
    pub fn set_inode_cache_limit(&mut self, files: usize) {
        self.inodes.cache_limit = Some(files);
    }

    /// Known-bad, for the test that shows eviction is judged: `sync` lets
    /// files go before its construction, dirty ones with their changes.
    #[doc(hidden)]
    pub fn known_bad_evict_dirty_inodes(&mut self) {
        self.inodes.shrink_dirty = true;
    }

    /// `nilfs_iget`: load a file's state (its raw inode from the ifile).
    /// ESTALE for a deleted inode.
    pub(crate) fn file(&mut self, i: Ino) -> Result<&mut FileState> {
        if !self.inodes.contains(i) {
            let raw = self.ifile.file_mut().read_inode(i)?;
            if raw.links_count == 0 {
                return Err(Error::errno(Errno::ESTALE, format!("inode {i}")));
            }
            raw.check_loadable(i.0)?;
            // __nilfs_read_inode reads the bmap of regular files,
            // directories and symlinks only; a FIFO's or device's i_bmap
            // is a device number or a former inode's leftovers.
            let bmap = if raw.has_bmap() {
                Bmap::open(&raw.bmap, self.bs).map_err(|e| e.of_inode(i.0))?
            } else {
                Bmap::new_empty(self.bs)?
            };
            self.inodes.insert(i, FileState::new(raw, bmap, false));
        }
        Ok(self.inodes.loaded_mut(i))
    }

    /// `nilfs_new_inode`: a new inode in directory `parent` with `mode`
    /// and `links` links, dirty. Its owner is `inode_init_owner`'s (Linux
    /// 6.1): the caller's uid; the caller's gid, or the directory's when
    /// the directory is setgid, and then a new directory is setgid too; a
    /// file asking for setgid and group execute in a group the caller is
    /// not in loses setgid unless the caller has CAP_FSETID (root has).
    pub(crate) fn new_inode(&mut self, parent: Ino, mode: u16, links: u16) -> Result<Ino> {
        let (uid, mut gid) = self.cred;
        let mut mode = mode;
        let dir = self.file(parent)?.raw.clone();
        if dir.mode & 0o2000 != 0 {
            gid = dir.gid;
            if mode & S_IFMT == S_IFDIR {
                mode |= 0o2000;
            } else if mode & 0o2010 == 0o2010 && !self.cred_in_group(gid) && self.cred.0 != 0 {
                mode &= !0o2000;
            }
        }
        let i = self.ifile.file_mut().create_inode()?;
        self.generation = self.generation.wrapping_add(1);
        let raw = Inode {
            uid,
            gid,
            ctime: self.now,
            mtime: self.now,
            ctime_nsec: self.now_nsec,
            mtime_nsec: self.now_nsec,
            mode,
            links_count: links,
            generation: self.generation,
            ..Inode::default()
        };
        let bmap = Bmap::new_empty(self.bs)?;
        self.inodes.insert(i, FileState::new(raw, bmap, true));
        // atomic64_inc(&root->inodes_count): wraps on a damaged count.
        self.inodes_count = self.inodes_count.wrapping_add(1);
        self.inodes.touch(i);
        Ok(i)
    }

    /// `in_group_p` for the caller's credentials: its own gid (the mount
    /// passes no supplementary groups).
    fn cred_in_group(&self, gid: u32) -> bool {
        self.cred.1 == gid
    }

    /// Block `key` of file `i` as it reads now.
    pub(crate) fn read_file_block(&mut self, i: Ino, key: u64) -> Result<Vec<u8>> {
        let (dev, bs) = (self.dev, self.bs);
        let f = self.inodes.loaded_mut(i);
        if let Some(d) = f.dirty.get(&key) {
            return Ok(d.clone());
        }
        let dat = self.dat.file_mut();
        let ptr = f
            .bmap
            .lookup(key, &mut DiskNodes::translated(dev, bs, dat))?;
        match ptr {
            None => Ok(vec![0u8; bs as usize]),
            Some(v) => {
                let pbn = dat.translate(VBlockNr(v))?;
                crate::device::read_block(dev, bs, pbn.0)
            }
        }
    }

    /// Load the directory `i`'s blocks for a change: its pages become
    /// dirty (NILFS_I_DIRTY, as `nilfs_commit_chunk` and `nilfs_set_link`
    /// leave it).
    pub(crate) fn dir(&mut self, i: Ino) -> Result<&mut DirFile> {
        self.dir_read(i)?;
        self.inodes.pages_dirtied(i);
        let f = self.inodes.loaded_mut(i);
        Ok(f.dir.as_mut().expect("fs: directory loaded"))
    }

    /// Load the directory `i`'s blocks to read them (a lookup, readdir, an
    /// emptiness test): nothing becomes dirty.
    pub(crate) fn dir_read(&mut self, i: Ino) -> Result<&mut DirFile> {
        let f = self.file(i)?;
        if f.raw.mode & S_IFMT != S_IFDIR {
            return Err(Error::errno(Errno::ENOTDIR, format!("inode {i}")));
        }
        if f.dir.is_none() {
            let n = f.raw.size.div_ceil(u64::from(self.bs));
            let bs = self.bs;
            let d = DirFile::load(bs, n, |b| self.read_file_block(i, b))
                .map_err(|e| e.of_inode(i.0))?;
            self.inodes.loaded_mut(i).dir = Some(d);
        }
        let f = self.inodes.loaded_mut(i);
        Ok(f.dir.as_mut().expect("fs: directory loaded above"))
    }

    /// Unmap blocks `from..` of file `i` (`nilfs_bmap_truncate`): each
    /// written version is ended in the DAT at the checkpoint under
    /// construction (a version never written is freed there), dirty pages
    /// past the end are dropped, and the block counts shrink.
    pub(crate) fn release_blocks(&mut self, i: Ino, from: u64) -> Result<()> {
        let cno = self.cpfile.file().next_cno();
        let (dev, bs) = (self.dev, self.bs);
        let f = self.inodes.loaded_mut(i);
        let dat = self.dat.file_mut();
        let out = f
            .bmap
            .truncate(from, &mut DiskNodes::translated(dev, bs, dat))?;
        for &(_, ptr) in &out.deleted {
            dat.end(VBlockNr(ptr), cno, false)?;
        }
        for &ptr in &out.freed_nodes {
            dat.end(VBlockNr(ptr), cno, false)?;
        }
        let n = out.deleted.len() as u64 + u64::from(out.nodes_removed);
        f.raw.blocks = f.raw.blocks.saturating_sub(n * sectors(bs));
        self.blocks_count = self.blocks_count.saturating_sub(n);
        f.dirty.retain(|&k, _| k < from);
        Ok(())
    }

    /// An inode lost a link (`drop_nlink` in unlink, rename): with links
    /// left, or held by an open file, it is marked dirty (the ifile then
    /// keeps the unlinked inode, `i_links_count` 0, as the kernel writes
    /// it); otherwise it is evicted at once (`iput`'s final reference).
    pub(crate) fn drop_link(&mut self, i: Ino, by: u16) -> Result<()> {
        let f = self.inodes.loaded_mut(i);
        f.raw.links_count = f.raw.links_count.saturating_sub(by);
        if f.raw.links_count == 0 && !self.inodes.is_open(i) {
            self.evict(i)
        } else {
            self.mark(i);
            Ok(())
        }
    }

    /// `open(2)` of file `i` took a reference (the VFS's file holds the
    /// inode): ESTALE if it is gone.
    pub fn open_file(&mut self, i: Ino) -> Result<()> {
        self.file(i)?;
        *self.inodes.open.entry(i).or_insert(0) += 1;
        Ok(())
    }

    /// The last `close` of one open of `i`: the reference goes, and with
    /// the last one an inode with no links left is evicted
    /// (`nilfs_evict_inode`: its blocks and number freed).
    pub fn release_file(&mut self, i: Ino) -> Result<()> {
        let Some(n) = self.inodes.open.get_mut(&i) else {
            return Ok(());
        };
        *n -= 1;
        if *n == 0 {
            self.inodes.open.remove(&i);
            self.evict_if_unlinked(i)?;
        }
        Ok(())
    }

    /// At unmount every open reference goes (`evict_inodes`): the unlinked
    /// inodes still held are evicted before the last construction.
    pub(crate) fn release_all_files(&mut self) -> Result<()> {
        for i in std::mem::take(&mut self.inodes.open).into_keys() {
            self.evict_if_unlinked(i)?;
        }
        Ok(())
    }

    /// The last reference to `i` went: evict it if no link is left.
    fn evict_if_unlinked(&mut self, i: Ino) -> Result<()> {
        let unlinked = self.inodes.contains(i) && self.inodes.loaded(i).raw.links_count == 0;
        if unlinked && !self.read_only {
            self.atomically(|fs| fs.evict(i))?;
        }
        Ok(())
    }

    /// `nilfs_evict_inode` for an inode whose last link is gone: free its
    /// blocks and its inode number.
    pub(crate) fn evict(&mut self, i: Ino) -> Result<()> {
        self.release_blocks(i, 0)?;
        self.ifile.file_mut().delete_inode(i)?;
        self.inodes.evict(i);
        self.inodes_count = self.inodes_count.saturating_sub(1);
        Ok(())
    }

    /// The inode changed (`mark_inode_dirty` after a link count or
    /// ownership change): ctime, dirty, needing a full construction.
    pub(crate) fn mark(&mut self, i: Ino) {
        let now = self.now;
        let nsec = self.now_nsec;
        if self.inodes.contains(i) {
            self.inodes.loaded_mut(i).changed((now, nsec));
        }
        self.inodes.touch(i);
    }

    /// A directory's entries changed: mtime and ctime, dirty.
    pub(crate) fn touch_dir(&mut self, d: Ino) {
        let now = self.now;
        let nsec = self.now_nsec;
        self.inodes.loaded_mut(d).modified((now, nsec));
        self.inodes.touch(d);
    }
}

#[cfg(test)]
mod tests {
    use crate::device::MemDevice;
    use crate::format::{ino, Ino};
    use crate::fs::Fs;
    use crate::mkfs::{mkfs, MkfsOptions};
    use crate::the_nilfs::Nilfs;

    /// `test` on a fresh file system's mount.
    fn on_a_fresh_mount(test: impl FnOnce(&mut Fs<'_>)) {
        let dev = MemDevice::new(256 << 20);
        mkfs(&dev, &MkfsOptions::default()).expect("mkfs");
        let nilfs = Nilfs::open(&dev).expect("open");
        test(&mut Fs::mount(&nilfs, 1_800_000_000).expect("mount"));
    }

    fn in_memory(fs: &Fs<'_>, inos: &[Ino]) -> Vec<bool> {
        inos.iter().map(|&i| fs.inodes.contains(i)).collect()
    }

    /// Over the limit after a construction, the files that came into
    /// memory first go first, an open one stays whatever its age, and
    /// only enough go to leave seven eighths of the limit.
    #[test]
    fn the_oldest_idle_files_go_first_and_only_down_to_seven_eighths() {
        on_a_fresh_mount(|fs| {
            fs.set_inode_cache_limit(16);
            let files: Vec<Ino> = (0..40)
                .map(|n| {
                    let name = format!("f{n:02}");
                    fs.create(ino::ROOT, name.as_bytes(), 0o644)
                        .expect("create")
                })
                .collect();
            fs.open_file(files[0]).expect("open");
            let before = fs.inodes.files.len();
            assert!(before > 40, "root and the 40 files: {before}");
            fs.sync().expect("sync");
            assert_eq!(fs.inodes.files.len(), 14, "16 - 16 / 8 stay");
            // The open file, then the newest: 13 of the 40 besides it.
            let kept = in_memory(fs, &files);
            assert!(kept[0], "the open file stays");
            assert!(kept[27..].iter().all(|&k| k), "the newest stay: {kept:?}");
            assert!(kept[1..27].iter().all(|&k| !k), "the oldest go: {kept:?}");
            // Nothing was lost: the files read back from the ifile.
            for (n, &i) in files.iter().enumerate() {
                let name = format!("f{n:02}");
                assert_eq!(
                    fs.lookup(ino::ROOT, name.as_bytes()).expect("lookup"),
                    Some(i)
                );
                assert_eq!(fs.stat(i).expect("stat").links_count, 1);
            }
        });
    }

    /// Files created and unlinked under the limit leave entries in the
    /// eviction order that no construction takes; they are compacted
    /// away, so the order stays within twice the files (plus a margin)
    /// however long the mount runs.
    #[test]
    fn the_eviction_order_stays_bounded_under_creates_and_unlinks() {
        on_a_fresh_mount(|fs| {
            for n in 0..5000u32 {
                let name = format!("t{}", n % 7);
                fs.create(ino::ROOT, name.as_bytes(), 0o644)
                    .expect("create");
                fs.unlink(ino::ROOT, name.as_bytes()).expect("unlink");
                let (order, files) = (fs.inodes.order.len(), fs.inodes.files.len());
                assert!(
                    order <= 2 * files + 1024,
                    "{order} entries for {files} files at {n}"
                );
            }
            // Many inode numbers gone at once: 3,000 files, then all unlinked.
            let names: Vec<String> = (0..3000).map(|n| format!("u{n}")).collect();
            for name in &names {
                fs.create(ino::ROOT, name.as_bytes(), 0o644)
                    .expect("create");
            }
            for name in &names {
                fs.unlink(ino::ROOT, name.as_bytes()).expect("unlink");
                let (order, files) = (fs.inodes.order.len(), fs.inodes.files.len());
                assert!(
                    order <= 2 * files + 1024,
                    "{order} entries for {files} files after {name}"
                );
            }
        });
    }

    /// An operation that fails puts back a file it evicted; that file
    /// must still have its place in the eviction order, so the order is
    /// not compacted while the operation's journal runs.
    #[test]
    fn a_file_an_operation_evicted_and_put_back_keeps_its_place() {
        use super::{FileState, Inodes};
        use crate::bmap::write::Bmap;
        use crate::format::inode::Inode;
        let file = || {
            FileState::new(
                Inode::default(),
                Bmap::new_empty(4096).expect("bmap"),
                false,
            )
        };
        let mut inodes = Inodes::default();
        inodes.insert(Ino(11), file());
        inodes.begin_journal();
        inodes.evict(Ino(11));
        for n in 0..3000 {
            inodes.insert(Ino(100 + n), file());
            inodes.evict(Ino(100 + n));
        }
        inodes.roll_back();
        assert!(inodes.contains(Ino(11)), "the rollback puts the file back");
        assert!(
            inodes.order.contains(&Ino(11)),
            "and it can still be let go"
        );
    }
}
