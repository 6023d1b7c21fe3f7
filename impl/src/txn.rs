//! The transaction lock: how file operations and the segment constructor
//! share a mounted filesystem (the kernel's `nilfs_transaction_begin` /
//! `_commit`, which take `ns_segctor_sem` shared, and
//! `nilfs_transaction_lock`, which the constructor takes exclusive).
//!
//! Every file operation holds the shared side for its whole duration; a
//! construction holds the exclusive side from collection to the write, so
//! no operation can dirty a block between the moment the constructor
//! collects the dirty blocks and the moment it marks them clean. Inside the
//! shared side the filesystem state itself is one mutex for now; finer
//! locks (per inode, per metadata file, as the kernel has) can replace it
//! without changing this interface.

use crate::device::BlockDevice;
use crate::format::Cno;
use crate::fs::Fs;
use crate::gc::{move_blocks, CleanArgs};
use crate::sync::{lock, read, try_read, write, AtomicBool, Mutex, Ordering, RwLock};
use crate::{Errno, Error, Result};

/// Whether constructions hold the exclusive side throughout.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum TxRule {
    /// The kernel's rule.
    #[default]
    Exclusive,
    /// Known-bad: the constructor lets file operations in between
    /// collection and the write (the state a missing exclusive lock
    /// allows). Writes made in that window are marked clean unwritten.
    OpenWindow,
}

/// Where the cleaner reads the blocks it moves (seed 001).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum GcRule {
    /// After "nilfs2: shorten freeze period due to GC in write operation":
    /// `nilfs_ioctl_move_blocks` runs before `nilfs_transaction_lock`, so
    /// file operations go on while the source blocks are read.
    #[default]
    ReadBeforeLock,
    /// Known-bad (the pre-patch kernel): the reads happen inside the
    /// exclusive section and every writer waits for them.
    ReadUnderLock,
}

/// A mounted filesystem shared between threads.
pub struct Shared<'a> {
    tx: RwLock<()>,
    fs: Mutex<Fs<'a>>,
    rule: TxRule,
    gc_rule: GcRule,
    /// `THE_NILFS_GC_RUNNING`: one cleaning request at a time.
    gc_running: AtomicBool,
    dev: &'a dyn BlockDevice,
    block_size: u32,
}

impl<'a> Shared<'a> {
    /// Share `fs` under `rule`.
    pub fn new(fs: Fs<'a>, rule: TxRule) -> Self {
        Shared {
            tx: RwLock::new(()),
            dev: fs.device(),
            block_size: fs.seg_geometry().block_size,
            fs: Mutex::new(fs),
            rule,
            gc_rule: GcRule::default(),
            gc_running: AtomicBool::new(false),
        }
    }

    /// The same, with the cleaner's reads placed by `gc_rule`.
    pub fn with_gc_rule(mut self, gc_rule: GcRule) -> Self {
        self.gc_rule = gc_rule;
        self
    }

    /// [`Shared::op`] if no construction holds the exclusive side right
    /// now; `None` instead of waiting.
    pub fn try_op<T>(&self, f: impl FnOnce(&mut Fs<'a>) -> Result<T>) -> Option<Result<T>> {
        let _tx = try_read(&self.tx)?;
        let mut fs = lock(&self.fs);
        Some(f(&mut fs))
    }

    /// `NILFS_IOCTL_CLEAN_SEGMENTS`: EBUSY while another request runs
    /// (`test_and_set_bit(THE_NILFS_GC_RUNNING)`); the source blocks are
    /// read ([`move_blocks`], the device alone) and then, under the
    /// exclusive side, [`Fs::clean_segments`] runs the GC construction.
    pub fn clean_segments(&self, args: &CleanArgs) -> Result<Option<Cno>> {
        if self.gc_running.swap(true, Ordering::SeqCst) {
            return Err(Error::errno(Errno::EBUSY, "a cleaning request is running"));
        }
        let r = self
            .op(|fs| fs.detach_metadata_loaders())
            .and_then(|()| self.clean_locked(args));
        self.gc_running.store(false, Ordering::SeqCst);
        r
    }

    fn clean_locked(&self, args: &CleanArgs) -> Result<Option<Cno>> {
        if self.rule == TxRule::OpenWindow {
            // Known-bad: the GC construction, too, lets file operations in
            // between its collection and its write.
            let moved = move_blocks(self.dev, self.block_size, &args.vdescs)?;
            let c = {
                let _tx = read(&self.tx);
                lock(&self.fs).clean_segments_begin(args, moved)?
            };
            crate::sync::thread::yield_now();
            let _tx = read(&self.tx);
            return match c {
                Some(c) => lock(&self.fs).sync_finish(c),
                None => Ok(None),
            };
        }
        match self.gc_rule {
            GcRule::ReadBeforeLock => move_blocks(self.dev, self.block_size, &args.vdescs)
                .and_then(|moved| {
                    let _tx = write(&self.tx);
                    lock(&self.fs).clean_segments(args, moved)
                }),
            GcRule::ReadUnderLock => {
                let _tx = write(&self.tx);
                move_blocks(self.dev, self.block_size, &args.vdescs)
                    .and_then(|moved| lock(&self.fs).clean_segments(args, moved))
            }
        }
    }

    /// Run one file operation inside a transaction (shared side).
    pub fn op<T>(&self, f: impl FnOnce(&mut Fs<'a>) -> Result<T>) -> Result<T> {
        let _tx = read(&self.tx);
        let mut fs = lock(&self.fs);
        f(&mut fs)
    }

    /// A construction (`nilfs_construct_segment`) under the exclusive side.
    pub fn sync(&self) -> Result<Option<Cno>> {
        match self.rule {
            TxRule::Exclusive => {
                let _tx = write(&self.tx);
                lock(&self.fs).sync()
            }
            TxRule::OpenWindow => {
                let c = {
                    let _tx = read(&self.tx);
                    lock(&self.fs).sync_begin()?
                };
                crate::sync::thread::yield_now();
                let _tx = read(&self.tx);
                match c {
                    Some(c) => lock(&self.fs).sync_finish(c),
                    None => Ok(None),
                }
            }
        }
    }

    /// The filesystem back, for unmounting.
    pub fn into_inner(self) -> Fs<'a> {
        match self.fs.into_inner() {
            Ok(fs) => fs,
            Err(p) => p.into_inner(),
        }
    }
}
