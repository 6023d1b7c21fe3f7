//! A read-write mount: the in-memory state of a mounted file system and the
//! operations on it, split as the kernel splits them over fs/nilfs2:
//!
//! | file | kernel | what |
//! |---|---|---|
//! | `mount.rs` | super.c, recovery.c | mount (read-write, read-only), roll-forward of data-only logs at an unclean mount, `sync`, unmount, super block writes |
//! | `inode.rs` | inode.c | the inode table: loading, creating and evicting inodes, block reads of a file as it stands, truncation of its mapping |
//! | `namei.rs` | namei.c, dir.c | lookup, create, mkdir, unlink, rmdir, link, symlink, rename, readdir |
//! | `file.rs` | file.c, inode.c | write, read, truncate, stat, fsync, fdatasync |
//! | `ioctl.rs` | ioctl.c | mkcp, chcp, rmcp, lscp |
//! | `clean.rs` | ioctl.c (GC), gcinode.c | the cleaner's ioctl views and `nilfs_clean_segments` |
//! | `path.rs` | the VFS | path walks and the path-level operations (`open(O_CREAT)`, ...) |
//!
//! Every change stays in memory until a construction writes it: the
//! segment constructor ([`crate::segctor`]) turns the dirty files and
//! metadata files into logs and a checkpoint, in the kernel's stage order.
//!
//! Must not know: locking between threads (see [`crate::txn`]).

use crate::cpfile::Cpfile;
use crate::dat::Dat;
use crate::device::BlockDevice;
use crate::format::superblock::SuperBlock;
use crate::format::{ino, Cno, Ino, SegGeometry};
use crate::ifile::Ifile;
use crate::metafile::{MetaFile, MetaParts};
use crate::sb_write::SbWriter;
use crate::segctor::layout::Cursor;
use crate::segctor::SegCtor;
use crate::sufile::Sufile;
use crate::{Errno, Error, Result};

mod atomic;
mod clean;
mod file;
mod inode;
pub mod ioctl;
mod mount;
mod namei;
pub mod path;

pub use crate::segctor::Construction;
pub(crate) use atomic::MetaSaves;
pub use clean::SuStat;
pub use file::{ReadPlan, Reclaims, SetAttr};
pub(crate) use inode::Inodes;
pub use mount::Statfs;

/// A mounted, writable filesystem.
///
/// Its fields are the crate's: the segment constructor reads and cleans
/// what the operations here dirty, as the kernel's segment.c works on the
/// inodes and `the_nilfs` that inode.c and namei.c change.
pub struct Fs<'a> {
    pub(crate) dev: &'a dyn BlockDevice,
    pub(crate) sb: SuperBlock,
    pub(crate) geo: SegGeometry,
    pub(crate) bs: u32,
    /// The log writer's position (`ns_segnum`, `ns_pseg_offset`,
    /// `ns_seg_seq`, `ns_nextnum`).
    pub(crate) cursor: Cursor,
    pub(crate) dat: MetaFile<Dat<'a>>,
    pub(crate) cpfile: MetaFile<Cpfile<'a>>,
    pub(crate) sufile: MetaFile<Sufile<'a>>,
    /// The ifile of the checkpoint being built.
    pub(crate) ifile: MetaFile<Ifile<'a>>,
    /// User files and directories in memory, and the dirty list.
    pub(crate) inodes: Inodes,
    /// `cp_inodes_count` and `cp_blocks_count` of the next checkpoint.
    pub(crate) inodes_count: u64,
    pub(crate) blocks_count: u64,
    /// The injected clock (seconds).
    pub(crate) now: u64,
    /// Its nanoseconds, for inode times (0 unless set by
    /// [`Fs::set_time_ns`]; checkpoints, segments and super blocks keep
    /// whole seconds, as on disk).
    pub(crate) now_nsec: u32,
    /// The caller's uid and gid (`current_fsuid`, `current_fsgid`): the
    /// owner of what it creates. Root unless [`Fs::set_credentials`] says.
    pub(crate) cred: (u32, u32),
    /// `i_generation` of the last inode created.
    generation: u32,
    /// Cleaning passes that freed segments since the mount
    /// ([`Fs::reclaims`]), shared with whoever watches it
    /// ([`Fs::reclaims_watch`]).
    pub(crate) reclaims: Reclaims,
    /// Constructions completed since the mount ([`Fs::constructions`]).
    pub(crate) constructions: u64,
    /// A read-only mount: every change is EROFS, nothing is written.
    pub(crate) read_only: bool,
    /// The kernel's super block write policy (which copy, when).
    pub(crate) sbw: SbWriter,
    /// `ns_nongc_ctime`: when the last log not written by the cleaner was
    /// made (data-only logs included: nilfs_segctor_complete_write);
    /// `sr_nongc_ctime` of a cleaner's super root and the cleaner's
    /// threshold.
    pub(crate) nongc_ctime: u64,
    /// `ns_ctime`: when the last log was made (`nilfs_set_next_segment`;
    /// `ss_ctime` of `NILFS_IOCTL_GET_SUSTAT`).
    pub(crate) ctime: u64,
    /// The constructor's own state between constructions.
    pub(crate) sc: SegCtor,
    /// Known-bad: a failed operation keeps what it changed (see
    /// [`Fs::known_bad_keep_failed_operations`]).
    keep_failed_ops: bool,
}

/// Sectors per block, the unit the kernel keeps `i_blocks` in.
pub(crate) fn sectors(bs: u32) -> u64 {
    u64::from(bs) / 512
}

impl<'a> Fs<'a> {
    /// `nilfs_transaction_begin`: EROFS on a read-only mount; with
    /// `vacancy_check` (operations that add blocks: create, mkdir, symlink,
    /// link, rename, write), ENOSPC when `nilfs_near_disk_full` says the
    /// clean segments left, beyond the reserved ones, cannot take what is
    /// already dirty. Nothing has changed when it refuses.
    pub(crate) fn begin(&mut self, vacancy_check: bool) -> Result<()> {
        if self.read_only {
            return Err(Error::errno(Errno::EROFS, "read-only mount"));
        }
        if vacancy_check {
            let ncleansegs = self.ncleansegs()?;
            let nrsv = crate::sufile::nrsvsegs(
                self.geo.nsegments,
                u64::from(self.sb.r_segments_percentage),
            );
            // ns_ndirtyblks: the dirty blocks of the files on the dirty
            // list (a walk over every loaded file made each operation
            // O(files): 100,000 creations took 75 s instead of 4).
            let ndirty = self.inodes.ndirty_blocks();
            if crate::sufile::near_disk_full(ncleansegs, nrsv, ndirty, self.geo.blocks_per_segment)
            {
                return Err(Error::errno(Errno::ENOSPC, "no room for another log"));
            }
        }
        Ok(())
    }

    /// `nilfs_sufile_get_ncleansegs`: read from the header in memory when
    /// it is there, without the mutable access that makes an operation's
    /// journal save the sufile (every write checks the count).
    pub(crate) fn ncleansegs(&mut self) -> Result<u64> {
        match self.sufile.file().cached_ncleansegs() {
            Some(n) => Ok(n),
            None => self.sufile.file_mut().ncleansegs(),
        }
    }

    /// Set the injected clock (seconds).
    pub fn set_time(&mut self, now: u64) {
        self.now = now;
        self.now_nsec = 0;
    }

    /// Set the clock to `ns` nanoseconds since the epoch (a mount on the
    /// wall clock: inode times get the nanoseconds, as the kernel's
    /// `current_time` with nilfs2's 1 ns granularity gives them).
    pub fn set_time_ns(&mut self, ns: u64) {
        self.now = ns / 1_000_000_000;
        self.now_nsec = (ns % 1_000_000_000) as u32;
    }

    /// Who calls the next operations (a FUSE request's uid and gid): the
    /// owner new inodes get.
    pub fn set_credentials(&mut self, uid: u32, gid: u32) {
        self.cred = (uid, gid);
    }

    /// The clock in nanoseconds since the epoch.
    pub fn now_ns(&self) -> u64 {
        self.now * 1_000_000_000 + u64::from(self.now_nsec)
    }

    /// The mount's clock (seconds).
    pub fn now(&self) -> u64 {
        self.now
    }

    /// The device the file system lives on.
    pub fn device(&self) -> &'a dyn BlockDevice {
        self.dev
    }

    /// Segment geometry.
    pub fn seg_geometry(&self) -> SegGeometry {
        self.geo
    }

    /// The checksum seed (`s_crc_seed`).
    pub fn crc_seed(&self) -> u32 {
        self.sb.crc_seed
    }

    /// Whether anything awaits a construction: a dirty file or a dirty
    /// block of a metadata file (a checkpoint mode change, say). A
    /// cleaning request never waits: `clean_segments` hands it to the
    /// construction it starts at once.
    pub fn is_dirty(&self) -> bool {
        !self.inodes.dirty().is_empty()
            || self.ifile.is_dirty()
            || self.cpfile.is_dirty()
            || self.sufile.is_dirty()
            || self.dat.is_dirty()
    }

    /// `ns_ndirtyblks`: the dirty data blocks awaiting a construction
    /// (what the log writer's watermark is compared with).
    pub fn dirty_data_blocks(&self) -> u64 {
        self.inodes.ndirty_blocks_summed()
    }

    /// A read-only mount (every change is EROFS).
    pub fn is_read_only(&self) -> bool {
        self.read_only
    }

    /// The metadata file with inode number `i`, untyped (the one place an
    /// inode number picks a metadata file); `None` for a user file.
    pub(crate) fn meta_file(&mut self, i: Ino) -> Option<MetaParts<'_, 'a>> {
        Some(match i {
            ino::DAT => self.dat.parts(),
            ino::CPFILE => self.cpfile.parts(),
            ino::SUFILE => self.sufile.parts(),
            ino::IFILE => self.ifile.parts(),
            _ => return None,
        })
    }

    /// The latest checkpoint number (`ns_cno - 1`).
    pub fn latest_cno(&self) -> Cno {
        Cno(self.cpfile.file().next_cno().0 - 1)
    }
}
