//! One metadata file of a mounted file system as a single value: its block
//! store (the DAT, cpfile, sufile or ifile over an [`Mdt`]), its block
//! mapping ([`Bmap`]) and its raw inode — what the kernel keeps in the
//! metadata file's `struct inode` with its `nilfs_bmap` and page cache.
//!
//! The segment constructor treats the four alike through [`MetaFile::parts`]
//! (one [`MetaParts`] view: blocks, mapping, inode, pointer type); only the
//! block store's own operations (allocation, checkpoints, segment usage)
//! differ, and those stay on the typed file ([`MetaFile::file`]).
//!
//! Must not know: the segment constructor's order, or where blocks go.

use crate::bmap::write::Bmap;
use crate::format::inode::Inode;
use crate::format::{ino, Cno, Ino};
use crate::mdt::Mdt;
use crate::Result;

/// What a mapping's pointers are (`bmap->b_ptr_type`, set by
/// `nilfs_bmap_init` from the inode number).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PtrType {
    /// `NILFS_BMAP_PTR_P`: disk block numbers (the DAT).
    Physical,
    /// `NILFS_BMAP_PTR_VS`: virtual numbers of a single-version file (the
    /// cpfile and the sufile): a superseded version ends dead at once.
    SingleVersion,
    /// `NILFS_BMAP_PTR_VM`: virtual numbers of a multi-version file (the
    /// ifile and every user file): a superseded version lives on in older
    /// checkpoints.
    MultiVersion,
}

impl PtrType {
    /// The pointer type of inode `i`'s mapping.
    pub fn of(i: Ino) -> PtrType {
        match i {
            ino::DAT => PtrType::Physical,
            ino::CPFILE | ino::SUFILE => PtrType::SingleVersion,
            _ => PtrType::MultiVersion,
        }
    }

    /// Whether superseded versions end dead (the `dead` argument of
    /// `nilfs_dat_commit_end`, set for `NILFS_BMAP_PTR_VS` mappings).
    pub fn is_single_version(self) -> bool {
        self == PtrType::SingleVersion
    }
}

/// Whether `i` is one of the four metadata files a mount writes.
pub fn is_metadata(i: Ino) -> bool {
    matches!(i, ino::DAT | ino::CPFILE | ino::SUFILE | ino::IFILE)
}

/// `fi_cno` of metadata file `i`'s records in a log of checkpoint `cno`:
/// the checkpoint for the ifile, 0 for the files the super root holds
/// (`nilfs_segctor_end_finfo`: `cno` only for files with an `i_root`).
pub fn record_cno(i: Ino, cno: Cno) -> Cno {
    if i == ino::IFILE {
        cno
    } else {
        Cno(0)
    }
}

/// A metadata file's block store: the typed file (DAT, cpfile, sufile,
/// ifile, or a bare [`Palloc`](crate::alloc::Palloc)) over its [`Mdt`].
///
/// Its blocks are readable by anyone and writable only by this crate
/// ([`MetaStore::mdt_mut`] takes a [`CrateOnly`] token no one else can
/// make): the typed file's own operations keep its counters, bitmaps and
/// lists consistent, and the segment constructor writes and cleans it.
pub trait MetaStore<'a> {
    /// The file's blocks.
    fn mdt(&self) -> &Mdt<'a>;
    /// The file's blocks, mutably (the constructor and the cleaner).
    fn mdt_mut(&mut self, token: CrateOnly) -> &mut Mdt<'a>;
    /// The dirty blocks and deletions have been written
    /// ([`Mdt::mark_clean`]).
    fn mark_clean(&mut self) {
        self.mdt_mut(CRATE).mark_clean();
    }
}

/// The token of [`MetaStore::mdt_mut`]: only this crate can make one.
#[derive(Clone, Copy, Debug)]
pub struct CrateOnly(());

/// The one [`CrateOnly`] token.
pub(crate) const CRATE: CrateOnly = CrateOnly(());

/// `impl MetaStore` for a file whose blocks are the field `$f` (`field`)
/// or the blocks of its allocator `$f` (`via`).
macro_rules! meta_store {
    ($t:ident, field $f:ident) => {
        impl<'a> $crate::metafile::MetaStore<'a> for $t<'a> {
            fn mdt(&self) -> &$crate::mdt::Mdt<'a> {
                &self.$f
            }
            fn mdt_mut(&mut self, _: $crate::metafile::CrateOnly) -> &mut $crate::mdt::Mdt<'a> {
                &mut self.$f
            }
        }
    };
    ($t:ident, via $f:ident) => {
        impl<'a> $crate::metafile::MetaStore<'a> for $t<'a> {
            fn mdt(&self) -> &$crate::mdt::Mdt<'a> {
                $crate::metafile::MetaStore::mdt(&self.$f)
            }
            fn mdt_mut(&mut self, t: $crate::metafile::CrateOnly) -> &mut $crate::mdt::Mdt<'a> {
                $crate::metafile::MetaStore::mdt_mut(&mut self.$f, t)
            }
        }
    };
}
pub(crate) use meta_store;

/// One metadata file: block store, mapping and raw inode.
#[derive(Clone, Debug)]
pub struct MetaFile<F> {
    ino: Ino,
    file: F,
    bmap: Bmap,
    raw: Inode,
    journal: Journal<F>,
}

/// Where a metadata file stands with the running journal
/// ([`MetaFile::savepoint`]). The file is saved at its first change, not
/// when the journal begins: most operations change one metadata file of
/// the four (a create, the ifile; a write, none), and the others' saves
/// were a third of a small file's journal.
#[derive(Clone, Debug)]
enum Journal<F> {
    /// No journal runs.
    Off,
    /// A journal runs; the file has not changed under it.
    Armed,
    /// A journal runs; the file as it was before its first change.
    Saved(Box<Saved<F>>),
}

/// A metadata file as it was before its first change under a journal:
/// the typed file's own fields (counters, geometry) around an empty block
/// store, the mapping and the raw inode; the blocks themselves are
/// journaled in the live store.
#[derive(Clone, Debug)]
struct Saved<F> {
    file: F,
    bmap: Bmap,
    raw: Inode,
}

/// A metadata file seen without its type: what the constructor collects,
/// propagates and cleans the same way for all four.
pub struct MetaParts<'m, 'a> {
    /// The inode number.
    pub ino: Ino,
    /// What its pointers are.
    pub ptr_type: PtrType,
    /// Its blocks.
    pub mdt: &'m mut Mdt<'a>,
    /// Its mapping.
    pub bmap: &'m mut Bmap,
    /// Its raw inode (`i_blocks`, `i_bmap`).
    pub raw: &'m mut Inode,
}

impl<'a, F: MetaStore<'a> + Clone> MetaFile<F> {
    /// Metadata file `ino` with block store `file` and raw inode `raw`
    /// (whose `i_bmap` is opened for `block_size`).
    pub fn new(ino: Ino, file: F, raw: &Inode, block_size: u32) -> Result<Self> {
        Ok(MetaFile {
            ino,
            file,
            bmap: Bmap::open(&raw.bmap, block_size)?,
            raw: raw.clone(),
            journal: Journal::Off,
        })
    }

    /// About to change: under a journal, save the file if this is its
    /// first change. Every `&mut` path into the file goes through here.
    fn touch(&mut self) {
        if !matches!(self.journal, Journal::Armed) {
            return;
        }
        let mdt = self.file.mdt_mut(CRATE);
        let shell = mdt.shell();
        let blocks = std::mem::replace(mdt, shell);
        let file = self.file.clone();
        let mdt = self.file.mdt_mut(CRATE);
        *mdt = blocks;
        mdt.begin_undo();
        self.journal = Journal::Saved(Box::new(Saved {
            file,
            bmap: self.bmap.clone(),
            raw: self.raw.clone(),
        }));
    }

    /// The inode number.
    pub fn ino(&self) -> Ino {
        self.ino
    }

    /// What the mapping's pointers are.
    pub fn ptr_type(&self) -> PtrType {
        PtrType::of(self.ino)
    }

    /// The typed file.
    pub fn file(&self) -> &F {
        &self.file
    }

    /// The typed file, to change it through its own operations.
    pub fn file_mut(&mut self) -> &mut F {
        self.touch();
        &mut self.file
    }

    /// The mapping.
    pub fn bmap(&self) -> &Bmap {
        &self.bmap
    }

    /// The raw inode as it will be written (`i_bmap` up to date once the
    /// constructor assigned the mapping).
    pub fn raw(&self) -> &Inode {
        &self.raw
    }

    /// The untyped view.
    pub fn parts(&mut self) -> MetaParts<'_, 'a> {
        self.touch();
        MetaParts {
            ino: self.ino,
            ptr_type: PtrType::of(self.ino),
            mdt: self.file.mdt_mut(CRATE),
            bmap: &mut self.bmap,
            raw: &mut self.raw,
        }
    }

    /// The typed file and the untyped rest at once (the DAT propagates
    /// its own mapping while it allocates).
    pub fn split(&mut self) -> (&mut F, &mut Bmap, &mut Inode) {
        self.touch();
        (&mut self.file, &mut self.bmap, &mut self.raw)
    }

    /// Whether any block awaits a log.
    pub fn is_dirty(&self) -> bool {
        !self.file.mdt().dirty_blocks().is_empty()
    }

    /// Store the mapping's root in the raw inode (`nilfs_bmap_write`).
    pub fn write_root(&mut self) -> Result<()> {
        self.touch();
        self.raw.bmap = self.bmap.root_bmap()?;
        Ok(())
    }

    /// The log holding the file's blocks is written: blocks and mapping
    /// are clean.
    pub fn mark_clean(&mut self) -> Result<()> {
        self.touch();
        self.bmap.mark_clean()?;
        self.file.mark_clean();
        Ok(())
    }
}

/// The proof that [`MetaFile::savepoint`] began a journal: what
/// [`MetaFile::rollback`] takes back.
#[derive(Debug)]
pub(crate) struct MetaSave<F>(std::marker::PhantomData<F>);

impl<'a, F: MetaStore<'a> + Clone> MetaFile<F> {
    /// Begin a journal, so that [`MetaFile::rollback`] can put the file
    /// back as it is now. Nothing is copied until the file first changes
    /// (see [`Journal`]); then the typed file and mapping are copied
    /// (without the blocks), and the block store journals its blocks.
    pub(crate) fn savepoint(&mut self) -> MetaSave<F> {
        self.file.mdt_mut(CRATE).end_undo();
        self.journal = Journal::Armed;
        MetaSave(std::marker::PhantomData)
    }

    /// Back to the savepoint: the typed file's fields, the mapping and the
    /// raw inode as saved, every block changed since as it was. A file
    /// that did not change under the journal is as it was already.
    pub(crate) fn rollback(&mut self, _: MetaSave<F>) {
        if let Journal::Saved(saved) = std::mem::replace(&mut self.journal, Journal::Off) {
            let Saved {
                mut file,
                bmap,
                raw,
            } = *saved;
            std::mem::swap(file.mdt_mut(CRATE), self.file.mdt_mut(CRATE));
            file.mdt_mut(CRATE).rollback();
            self.file = file;
            self.bmap = bmap;
            self.raw = raw;
        }
    }

    /// The savepoint is not needed any more: the changes stand.
    pub(crate) fn release(&mut self) {
        self.journal = Journal::Off;
        self.file.mdt_mut(CRATE).end_undo();
    }

    /// Whether a journal runs: a savepoint neither rolled back nor
    /// released, or a block store still keeping its undo journal.
    #[cfg(test)]
    pub(crate) fn journal_runs(&self) -> bool {
        !matches!(self.journal, Journal::Off) || self.file.mdt().undo_runs()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dat::Dat;
    use crate::format::VBlockNr;

    fn dat_file() -> MetaFile<Dat<'static>> {
        let dat = Dat::new(Mdt::empty(1024), 32).expect("dat");
        MetaFile::new(ino::DAT, dat, &Inode::default(), 1024).expect("metafile")
    }

    fn same(a: &MetaFile<Dat<'_>>, b: &MetaFile<Dat<'_>>) -> bool {
        a.file().mdt().same_state(b.file().mdt()).expect("compare")
            && a.raw() == b.raw()
            && a.file().mdt().dirty_blocks() == b.file().mdt().dirty_blocks()
    }

    #[test]
    fn a_rollback_puts_back_what_changed_after_the_savepoint() {
        let mut f = dat_file();
        for _ in 0..3 {
            f.file_mut().alloc(VBlockNr(0)).expect("alloc");
        }
        let before = f.clone();
        let s = f.savepoint();
        for _ in 0..40 {
            f.file_mut().alloc(VBlockNr(0)).expect("alloc");
        }
        f.write_root().expect("root");
        assert!(!same(&f, &before));
        f.rollback(s);
        assert!(same(&f, &before));
        assert!(matches!(f.journal, Journal::Off));
    }

    #[test]
    fn a_journal_the_file_never_changed_under_copies_nothing() {
        let mut f = dat_file();
        f.file_mut().alloc(VBlockNr(0)).expect("alloc");
        let before = f.clone();
        let s = f.savepoint();
        let _ = f.file().palloc();
        assert!(matches!(f.journal, Journal::Armed));
        f.rollback(s);
        assert!(same(&f, &before));
        // The first change saves the file.
        let s = f.savepoint();
        f.file_mut().alloc(VBlockNr(0)).expect("alloc");
        assert!(matches!(f.journal, Journal::Saved(_)));
        f.rollback(s);
        assert!(same(&f, &before));
    }

    #[test]
    fn released_changes_stand_and_a_later_journal_starts_from_them() {
        let mut f = dat_file();
        let before = f.clone();
        let _s = f.savepoint();
        f.file_mut().alloc(VBlockNr(0)).expect("alloc");
        f.release();
        let after = f.clone();
        assert!(!same(&f, &before));
        let s = f.savepoint();
        f.file_mut().alloc(VBlockNr(0)).expect("alloc");
        f.rollback(s);
        assert!(same(&f, &after));
    }
}
