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
use crate::sync::{
    lock, read, try_read, write, AtomicBool, AtomicUsize, Mutex, Ordering, RwLock, StdArc,
};
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

/// How a cleaning request claims `THE_NILFS_GC_RUNNING` (seed 001's
/// review).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum GcFlagRule {
    /// The kernel's (6.1 `nilfs_ioctl_clean_segments`): the request's
    /// buffers are copied in, then one `test_and_set_bit`; EBUSY goes to
    /// `out_free`, which frees them.
    #[default]
    TestAndSet,
    /// Known-bad: the patch's first version (Jiro Sekiba, 29 Aug 2009),
    /// after the request's buffers were allocated: `nilfs_gc_running()`,
    /// then `set_nilfs_gc_running()` — two steps another request can come
    /// between — and an EBUSY that returns without freeing the buffers.
    /// Ryusuke Konishi's review asked for `test_and_set_bit` before any
    /// allocation.
    TestThenSet,
}

/// One step of a cleaning request, as [`Shared::with_gc_observer`] reports
/// it (for the model checkers; nothing in the file system listens).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GcStep {
    /// The request's buffers are allocated and filled (`kbufs`).
    Copied,
    /// First version only: it found the flag clear and has not set it yet.
    Tested,
    /// It holds `THE_NILFS_GC_RUNNING`.
    Claimed,
    /// It found the flag held and returns EBUSY.
    Busy,
    /// It starts reading the source blocks (`nilfs_ioctl_move_blocks`).
    Reading,
    /// The reads are done (or failed).
    Read,
    /// It holds the exclusive side of the transaction lock.
    Locked,
    /// It has left the exclusive side.
    Unlocked,
    /// It has cleared `THE_NILFS_GC_RUNNING`.
    Released,
}

/// Who is told of each [`GcStep`].
pub type GcObserver = StdArc<dyn Fn(GcStep) + Send + Sync>;

/// A mounted filesystem shared between threads.
pub struct Shared<'a> {
    tx: RwLock<()>,
    fs: Mutex<Fs<'a>>,
    rule: TxRule,
    gc_rule: GcRule,
    gc_flag_rule: GcFlagRule,
    /// `THE_NILFS_GC_RUNNING`: one cleaning request at a time.
    gc_running: AtomicBool,
    /// Bytes held by cleaning requests' buffers (the kernel's `kbufs`).
    gc_buffer_bytes: AtomicUsize,
    gc_observer: Option<GcObserver>,
    dev: &'a dyn BlockDevice,
    block_size: u32,
}

/// A cleaning request's own copy of its arguments (`kbufs`: the kernel
/// copies the five vectors from user space before it looks at the flag),
/// counted in [`Shared::gc_buffer_bytes`] until dropped.
struct RequestBufs<'s> {
    args: CleanArgs,
    bytes: usize,
    held: &'s AtomicUsize,
}

impl<'s> RequestBufs<'s> {
    fn copy(args: &CleanArgs, held: &'s AtomicUsize) -> Self {
        let bytes = std::mem::size_of_val(args.vdescs.as_slice())
            + std::mem::size_of_val(args.periods.as_slice())
            + std::mem::size_of_val(args.vblocknrs.as_slice())
            + std::mem::size_of_val(args.bdescs.as_slice())
            + std::mem::size_of_val(args.segnums.as_slice())
            // kbufs[4] is allocated even for no segments.
            + 1;
        held.fetch_add(bytes, Ordering::SeqCst);
        RequestBufs {
            args: args.clone(),
            bytes,
            held,
        }
    }
}

impl Drop for RequestBufs<'_> {
    fn drop(&mut self) {
        self.held.fetch_sub(self.bytes, Ordering::SeqCst);
    }
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
            gc_flag_rule: GcFlagRule::default(),
            gc_running: AtomicBool::new(false),
            gc_buffer_bytes: AtomicUsize::new(0),
            gc_observer: None,
        }
    }

    /// The same, with the cleaner's reads placed by `gc_rule`.
    pub fn with_gc_rule(mut self, gc_rule: GcRule) -> Self {
        self.gc_rule = gc_rule;
        self
    }

    /// The same, with `THE_NILFS_GC_RUNNING` claimed by `rule`.
    pub fn with_gc_flag_rule(mut self, rule: GcFlagRule) -> Self {
        self.gc_flag_rule = rule;
        self
    }

    /// The same, telling `observer` every step of every cleaning request
    /// (it runs on the request's thread, holding no lock of ours that a
    /// step does not say it holds).
    pub fn with_gc_observer(mut self, observer: GcObserver) -> Self {
        self.gc_observer = Some(observer);
        self
    }

    /// Whether a cleaning request holds `THE_NILFS_GC_RUNNING` now.
    pub fn gc_running(&self) -> bool {
        self.gc_running.load(Ordering::SeqCst)
    }

    /// Bytes held by the buffers of cleaning requests now: 0 whenever none
    /// runs, whatever way the last one ended.
    pub fn gc_buffer_bytes(&self) -> usize {
        self.gc_buffer_bytes.load(Ordering::SeqCst)
    }

    fn gc_note(&self, step: GcStep) {
        if let Some(o) = &self.gc_observer {
            o(step);
        }
    }

    /// [`Shared::op`] if no construction holds the exclusive side right
    /// now; `None` instead of waiting.
    pub fn try_op<T>(&self, f: impl FnOnce(&mut Fs<'a>) -> Result<T>) -> Option<Result<T>> {
        let _tx = try_read(&self.tx)?;
        let mut fs = lock(&self.fs);
        Some(f(&mut fs))
    }

    /// `NILFS_IOCTL_CLEAN_SEGMENTS` as 6.1 has it: copy the request into
    /// buffers of its own, then EBUSY if another request holds
    /// `THE_NILFS_GC_RUNNING` (`test_and_set_bit`); the source blocks are
    /// read ([`move_blocks`], the device alone) and then, under the
    /// exclusive side, [`Fs::clean_segments`] runs the GC construction.
    /// On every way out — EBUSY, a failed read, a refused or failed
    /// construction, success — the flag is clear, the buffers and the GC
    /// inodes are freed and no lock is held.
    pub fn clean_segments(&self, args: &CleanArgs) -> Result<Option<Cno>> {
        let bufs = RequestBufs::copy(args, &self.gc_buffer_bytes);
        self.gc_note(GcStep::Copied);
        let busy = match self.gc_flag_rule {
            // test_and_set_bit as one compare-exchange: setting a bit that
            // is already set changes nothing, so the failed test need not
            // write. (A `swap` would be the same on hardware, but loom 0.7
            // lets a concurrent store slip between a swap's read and write,
            // loom issue #254, and reports a flag left set that cannot be.)
            GcFlagRule::TestAndSet => self
                .gc_running
                .compare_exchange(false, true, Ordering::SeqCst, Ordering::SeqCst)
                .is_err(),
            // nilfs_gc_running() and set_nilfs_gc_running() are test_bit
            // and set_bit: no ordering between them and other CPUs.
            GcFlagRule::TestThenSet => {
                let running = self.gc_running.load(Ordering::Relaxed);
                if !running {
                    self.gc_note(GcStep::Tested);
                    self.gc_running.store(true, Ordering::Relaxed);
                }
                running
            }
        };
        if busy {
            self.gc_note(GcStep::Busy);
            if self.gc_flag_rule == GcFlagRule::TestThenSet {
                // The first version's `return -EBUSY` skipped the frees.
                std::mem::forget(bufs);
            }
            return Err(Error::errno(Errno::EBUSY, "a cleaning request is running"));
        }
        self.gc_note(GcStep::Claimed);
        let r = self
            .op(|fs| fs.detach_metadata_loaders())
            .and_then(|()| self.clean_locked(&bufs.args));
        // nilfs_remove_all_gcinodes: the moved blocks were owned by
        // clean_locked and are gone with it, whatever it returned.
        self.gc_running.store(false, Ordering::SeqCst);
        self.gc_note(GcStep::Released);
        drop(bufs);
        r
    }

    /// The source-block reads, reported to the observer.
    fn read_sources(&self, args: &CleanArgs) -> Result<crate::gc::MovedBlocks> {
        self.gc_note(GcStep::Reading);
        let r = move_blocks(self.dev, self.block_size, &args.vdescs);
        self.gc_note(GcStep::Read);
        r
    }

    fn clean_locked(&self, args: &CleanArgs) -> Result<Option<Cno>> {
        if self.rule == TxRule::OpenWindow {
            // Known-bad: the GC construction, too, lets file operations in
            // between its collection and its write.
            let moved = self.read_sources(args)?;
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
            GcRule::ReadBeforeLock => self.read_sources(args).and_then(|moved| {
                let r = {
                    let _tx = write(&self.tx);
                    self.gc_note(GcStep::Locked);
                    lock(&self.fs).clean_segments(args, moved)
                };
                self.gc_note(GcStep::Unlocked);
                r
            }),
            GcRule::ReadUnderLock => {
                let r = {
                    let _tx = write(&self.tx);
                    self.gc_note(GcStep::Locked);
                    self.read_sources(args)
                        .and_then(|moved| lock(&self.fs).clean_segments(args, moved))
                };
                self.gc_note(GcStep::Unlocked);
                r
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
