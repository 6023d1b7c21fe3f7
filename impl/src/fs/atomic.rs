//! A failed operation changes nothing. [`Fs::atomically`] runs one
//! namespace operation (create, mkdir, symlink, link, unlink, rmdir,
//! rename, truncate) with the inode table and the metadata files
//! journaled, and puts both back when it fails: a read error half way
//! through a rename, say, after one directory was changed. The kernel has
//! an undo path for each such failure (`nilfs_create` drops the new inode
//! when `nilfs_add_nondir` fails, `nilfs_rename` restores the link counts
//! it changed); one journal does the same for every operation here.
//!
//! The journal costs a copy of each file the operation touches and of each
//! metadata block it changes (see [`crate::mdt`]), nothing for the rest.

use crate::cpfile::Cpfile;
use crate::dat::Dat;
use crate::ifile::Ifile;
use crate::metafile::MetaSave;
use crate::sufile::Sufile;
use crate::Result;

use super::Fs;

/// The four metadata files' savepoints ([`crate::metafile::MetaFile::savepoint`]),
/// shared by an operation's journal and a construction's savepoint.
#[derive(Debug)]
pub(crate) struct MetaSaves<'a> {
    pub(crate) dat: MetaSave<Dat<'a>>,
    pub(crate) cpfile: MetaSave<Cpfile<'a>>,
    pub(crate) sufile: MetaSave<Sufile<'a>>,
    pub(crate) ifile: MetaSave<Ifile<'a>>,
}

/// What [`Fs::atomically`] restores besides the journaled inode table.
struct OpSave<'a> {
    inodes_count: u64,
    blocks_count: u64,
    generation: u32,
    meta: MetaSaves<'a>,
}

impl<'a> Fs<'a> {
    /// Savepoints of the four metadata files; their stores start journaling.
    pub(crate) fn save_metadata(&mut self) -> MetaSaves<'a> {
        MetaSaves {
            dat: self.dat.savepoint(),
            cpfile: self.cpfile.savepoint(),
            sufile: self.sufile.savepoint(),
            ifile: self.ifile.savepoint(),
        }
    }

    /// The four metadata files back as `s` saved them.
    pub(crate) fn restore_metadata(&mut self, s: MetaSaves<'a>) {
        self.dat.rollback(s.dat);
        self.cpfile.rollback(s.cpfile);
        self.sufile.rollback(s.sufile);
        self.ifile.rollback(s.ifile);
    }

    /// The metadata files' changes stand; their journals end.
    pub(crate) fn release_metadata(&mut self) {
        self.dat.release();
        self.cpfile.release();
        self.sufile.release();
        self.ifile.release();
    }

    /// Known-bad, for the tests that show the journal matters: a failed
    /// operation keeps whatever it changed before it failed.
    #[doc(hidden)]
    pub fn known_bad_keep_failed_operations(&mut self) {
        self.keep_failed_ops = true;
    }

    /// Run `op`; if it fails, leave the mount exactly as it was before.
    pub(crate) fn atomically<T>(&mut self, op: impl FnOnce(&mut Self) -> Result<T>) -> Result<T> {
        let save = OpSave {
            inodes_count: self.inodes_count,
            blocks_count: self.blocks_count,
            generation: self.generation,
            meta: self.save_metadata(),
        };
        self.inodes.begin_journal();
        let r = op(self);
        if r.is_ok() || self.keep_failed_ops {
            self.inodes.commit();
            self.release_metadata();
        } else {
            self.inodes.roll_back();
            self.inodes_count = save.inodes_count;
            self.blocks_count = save.blocks_count;
            self.generation = save.generation;
            self.restore_metadata(save.meta);
        }
        r
    }
}
