//! Aborting a construction (`nilfs_segctor_abort_construction`): a
//! construction that fails before its logs are all on disk leaves the
//! mount's memory as it was when it began, so that nothing dirty is lost
//! and nothing it allocated stays taken.
//!
//! The kernel undoes piece by piece what the failed attempt did: it gives
//! back the segments the logs were to use (`nilfs_free_incomplete_logs`,
//! `nilfs_cancel_segusage`), cancels the cleaner's frees
//! (`nilfs_sufile_cancel_freev` under `NILFS_CF_SUFREED`) and redirties the
//! inodes it had taken (`nilfs_redirty_inodes` under
//! `NILFS_CF_IFILE_STARTED`); what propagation did stays, guarded by the
//! buffers' `volatile` flags, for the next attempt to reuse. Here the
//! stages do not keep such flags, so the whole attempt is undone instead:
//! a [`Savepoint`] taken as the construction begins holds the writer's
//! cursor and counters, the dirty list, each dirty file's mapping and raw
//! inode, and each metadata file's fields and mapping, and the metadata
//! files' block stores journal the blocks the attempt changes. Its cost is
//! the dirty files' mappings and the metadata blocks touched, not the
//! size of the file system.
//!
//! After the first device write the attempt's logs may be partly on disk;
//! they lie past the cursor, which is restored too, so the next
//! construction writes over them, as the kernel's does.

use crate::bmap::write::Bmap;
use crate::format::inode::Inode;
use crate::format::Ino;
use crate::fs::{Fs, MetaSaves};
use crate::sb_write::SbWriter;

use super::layout::Cursor;

/// One dirty file as a construction found it.
#[derive(Debug)]
struct FileSave {
    ino: Ino,
    raw: Inode,
    bmap: Bmap,
    /// The offsets of its dirty blocks, ascending (propagation adds a
    /// directory's dirty blocks to them; their contents do not change
    /// before the write). A sorted vector, not a set: built from the dirty
    /// map's ordered keys at every construction, and searched only on a
    /// rollback.
    dirty_keys: Vec<u64>,
}

/// The mount's memory as a construction began (see the module comment).
#[derive(Debug)]
pub(crate) struct Savepoint<'a> {
    cursor: Cursor,
    inodes_count: u64,
    blocks_count: u64,
    nongc_ctime: u64,
    ctime: u64,
    have_delta: bool,
    sbw: SbWriter,
    dirty_list: Vec<Ino>,
    files: Vec<FileSave>,
    meta: MetaSaves<'a>,
}

impl<'a> Fs<'a> {
    /// A savepoint for a construction that writes the files on the dirty
    /// list and, for a data-only one, `extra` too.
    pub(crate) fn savepoint(&mut self, extra: Option<Ino>) -> Savepoint<'a> {
        let dirty_list = self.inodes.dirty().to_vec();
        let mut inos = dirty_list.clone();
        inos.extend(extra.filter(|i| !dirty_list.contains(i)));
        let files = inos
            .into_iter()
            .map(|ino| {
                let f = self.inodes.loaded(ino);
                FileSave {
                    ino,
                    raw: f.raw.clone(),
                    bmap: f.bmap.clone(),
                    dirty_keys: f.dirty.keys().copied().collect(),
                }
            })
            .collect();
        Savepoint {
            cursor: self.cursor,
            inodes_count: self.inodes_count,
            blocks_count: self.blocks_count,
            nongc_ctime: self.nongc_ctime,
            ctime: self.ctime,
            have_delta: self.sc.have_delta,
            sbw: self.sbw.clone(),
            dirty_list,
            files,
            meta: self.save_metadata(),
        }
    }

    /// Known-bad, for the tests that show the rollback matters: failed
    /// constructions keep what they changed.
    #[doc(hidden)]
    pub fn known_bad_keep_failed_constructions(&mut self) {
        self.sc.keep_failed = true;
    }

    /// Put the mount back as `s` found it (the construction failed).
    pub(crate) fn roll_back(&mut self, s: Savepoint<'a>) {
        if self.sc.keep_failed {
            return self.release(s);
        }
        self.cursor = s.cursor;
        self.inodes_count = s.inodes_count;
        self.blocks_count = s.blocks_count;
        self.nongc_ctime = s.nongc_ctime;
        self.ctime = s.ctime;
        self.sc.have_delta = s.have_delta;
        self.sbw = s.sbw;
        for fs in s.files {
            let f = self.inodes.loaded_mut(fs.ino);
            f.raw = fs.raw;
            f.bmap = fs.bmap;
            f.dirty
                .retain(|k, _| fs.dirty_keys.binary_search(k).is_ok());
        }
        self.inodes.restore_dirty(s.dirty_list);
        self.restore_metadata(s.meta);
    }

    /// Restore the DAT alone from `s` (the cleaner's failed preparation:
    /// `nilfs_mdt_restore_from_shadow_map`); everything else stands.
    pub(crate) fn roll_back_dat(&mut self, s: Savepoint<'a>) {
        // The DAT first, while its journal is still on.
        self.dat.rollback(s.meta.dat);
        self.release_metadata();
    }

    /// The construction is on disk: its changes stand.
    pub(crate) fn release(&mut self, _s: Savepoint<'a>) {
        self.release_metadata();
    }
}

#[cfg(test)]
mod tests {
    use crate::device::MemDevice;
    use crate::format::ino;
    use crate::fs::Fs;
    use crate::mkfs::{mkfs, MkfsOptions};
    use crate::the_nilfs::Nilfs;

    /// A construction that reached the disk ends the metadata files'
    /// journals (`release`): a journal left running would keep a copy of
    /// every metadata block changed until the next savepoint replaced it.
    #[test]
    fn a_construction_that_reached_the_disk_ends_the_metadata_journals() {
        let dev = MemDevice::new(256 << 20);
        mkfs(&dev, &MkfsOptions::default()).expect("mkfs");
        let nilfs = Nilfs::open(&dev).expect("open");
        let mut fs = Fs::mount(&nilfs, 1_800_000_000).expect("mount");
        let f = fs.create(ino::ROOT, b"f", 0o644).expect("create");
        fs.write(f, 0, &[7; 8192]).expect("write");
        fs.sync().expect("sync");
        assert!(!fs.dat.journal_runs(), "the DAT's");
        assert!(!fs.cpfile.journal_runs(), "the cpfile's");
        assert!(!fs.sufile.journal_runs(), "the sufile's");
        assert!(!fs.ifile.journal_runs(), "the ifile's");
    }
}
