//! One buffer per block: the kernel's `buffer_head` reduced to what NILFS2
//! uses — state bits, a sleeping lock that I/O completion releases, a
//! reference count, and the block's bytes.
//!
//! # State bits
//!
//! As in the kernel, the bits live in one atomic word (`b_state`) and are set
//! and tested with atomic bit operations, without a lock:
//! - `Uptodate`: the data is the block's current contents (`BH_Uptodate`);
//! - `Locked`: the buffer lock (`BH_Lock`), held while I/O is in flight and by
//!   whoever decides whether to start it;
//! - `Checked`: a B-tree node buffer passed the broken-node check
//!   (`BH_NILFS_Checked`, seed 000 patch 3), so read-ahead buffers are
//!   verified once, on first use;
//! - `Dirty`: modified in memory, not yet written (`BH_Dirty`).
//!
//! # Lock, trylock, wait (fs/buffer.c)
//!
//! [`Buffer::trylock`] is `trylock_buffer`: one atomic test-and-set, never
//! sleeps. [`Buffer::lock`] is `lock_buffer`/`__lock_buffer`: trylock, else
//! sleep until unlocked and retry. [`Buffer::wait_on_buffer`] sleeps until the
//! lock is free without taking it. [`Buffer::unlock`] is `unlock_buffer`:
//! clear the bit, then wake the sleepers. The lock is not a guard: like the
//! kernel's it is handed to the I/O, whose completion
//! ([`Buffer::end_read`], `end_buffer_read_sync`) releases it from another
//! context.
//!
//! Sleeping uses a mutex and condition variable as the kernel's bit wait
//! queue. The rule that makes it correct: **a sleeper tests `Locked` while
//! holding the wait-queue mutex, and an unlocker takes that mutex before
//! waking**, so no unlock can fall between the test and the sleep.
//! [`WaitRule::CheckBeforeMutex`] breaks exactly that rule (a lost wake-up),
//! as a known-bad variant for the model checkers to catch.
//!
//! # Sleeping through simulated I/O
//!
//! A [`SimDevice`] completes nothing by itself: time moves when someone waits
//! (see `device::sim`). So a sleeper on a buffer of a cache that has a device
//! first lets the device run ([`SimDevice::wait_next`]) until the buffer is
//! unlocked or nothing is in flight, and only then sleeps on the condition
//! variable. A submitter calls [`Buffer::io_started`] after submitting, which
//! bumps an I/O generation under the wait-queue mutex and wakes sleepers, so
//! a sleeper that found the device idle just before the submission re-checks
//! instead of sleeping through it.
//!
//! # References and eviction
//!
//! A [`BufRef`] is one counted reference (`get_bh` on clone, `brelse` on
//! drop). The cache's own pointer to a buffer is not counted. See
//! `BufferCache::try_evict` for the eviction rule.

use std::fmt;
use std::ops::Deref;

use crate::device::SimDevice;
use crate::sync::{lock, wait, Arc, AtomicUsize, Condvar, Mutex, Ordering};
use crate::Result;

const UPTODATE: usize = 1 << 0;
const LOCKED: usize = 1 << 1;
const CHECKED: usize = 1 << 2;
const DIRTY: usize = 1 << 3;
/// Not a kernel bit: set when the cache drops the buffer, so a holder of a
/// reference to an evicted buffer (a broken eviction rule) can be caught.
const EVICTED: usize = 1 << 4;

/// A state bit that callers set and clear directly. `Locked` is not one:
/// it changes only through lock, trylock and unlock.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BufFlag {
    /// `BH_Uptodate`: the data is valid.
    Uptodate,
    /// `BH_NILFS_Checked`: the node passed the broken-node check.
    Checked,
    /// `BH_Dirty`: the data must be written back.
    Dirty,
}

impl BufFlag {
    fn bit(self) -> usize {
        match self {
            BufFlag::Uptodate => UPTODATE,
            BufFlag::Checked => CHECKED,
            BufFlag::Dirty => DIRTY,
        }
    }
}

/// How a sleeper decides to sleep.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum WaitRule {
    /// Test `Locked` under the wait-queue mutex, then sleep (the kernel's
    /// `prepare_to_wait` then test then `schedule`).
    #[default]
    CheckUnderMutex,
    /// Known bad: test `Locked`, then take the mutex and sleep. An unlock in
    /// between wakes nobody and the sleeper never wakes.
    CheckBeforeMutex,
}

/// Which buffers eviction may drop.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum EvictRule {
    /// Only unreferenced, unlocked, clean buffers (fs/buffer.c `buffer_busy`:
    /// `b_count | (b_state & (BH_Dirty | BH_Lock))`).
    #[default]
    Kernel,
    /// Known bad: ignore references, dropping a buffer somebody still uses
    /// (the next lookup then makes a second buffer for the same block).
    IgnoreReferences,
}

/// The buffer protocol in force; the defaults are the kernel's, the others
/// known-bad variants kept so the checkers can show they catch them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct BufferRules {
    /// How sleepers test the lock.
    pub wait: WaitRule,
    /// What eviction may drop.
    pub evict: EvictRule,
}

/// One cached block.
pub struct Buffer {
    key: u64,
    flags: AtomicUsize,
    refs: AtomicUsize,
    data: Mutex<Vec<u8>>,
    /// The wait queue: its mutex orders sleepers against unlockers; the value
    /// is the I/O generation (see [`Buffer::io_started`]).
    wq: Mutex<u64>,
    unlocked: Condvar,
    io: Option<SimDevice>,
    wait_rule: WaitRule,
}

impl fmt::Debug for Buffer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Buffer")
            .field("key", &self.key)
            .field("flags", &self.flags.load(Ordering::Relaxed))
            .field("refs", &self.refs.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

impl Buffer {
    pub(super) fn new(key: u64, size: usize, io: Option<SimDevice>, wait_rule: WaitRule) -> Self {
        Buffer {
            key,
            flags: AtomicUsize::new(0),
            refs: AtomicUsize::new(0),
            data: Mutex::new(vec![0; size]),
            wq: Mutex::new(0),
            unlocked: Condvar::new(),
            io,
            wait_rule,
        }
    }

    /// The cache key: a block number, or for a B-tree node the pointer value.
    pub fn key(&self) -> u64 {
        self.key
    }

    /// Whether `flag` is set (`buffer_uptodate(bh)` and friends).
    pub fn test(&self, flag: BufFlag) -> bool {
        self.flags.load(Ordering::Acquire) & flag.bit() != 0
    }

    /// Set `flag`. Release ordering: data written before setting `Uptodate`
    /// is visible to whoever sees the bit (the kernel's barrier in
    /// `set_buffer_uptodate`).
    pub fn set(&self, flag: BufFlag) {
        self.flags.fetch_or(flag.bit(), Ordering::Release);
    }

    /// Clear `flag`.
    pub fn clear(&self, flag: BufFlag) {
        self.flags.fetch_and(!flag.bit(), Ordering::Release);
    }

    /// Set `flag`, returning whether it was already set.
    pub fn test_and_set(&self, flag: BufFlag) -> bool {
        self.flags.fetch_or(flag.bit(), Ordering::AcqRel) & flag.bit() != 0
    }

    /// Whether the buffer lock is held (`buffer_locked`). Never waits.
    pub fn is_locked(&self) -> bool {
        self.flags.load(Ordering::Acquire) & LOCKED != 0
    }

    /// Whether the cache has dropped this buffer. Always false for a buffer a
    /// caller holds a reference to, unless the eviction rule is broken.
    pub fn is_evicted(&self) -> bool {
        self.flags.load(Ordering::Acquire) & EVICTED != 0
    }

    pub(super) fn mark_evicted(&self) {
        self.flags.fetch_or(EVICTED, Ordering::AcqRel);
    }

    pub(super) fn refs(&self) -> usize {
        self.refs.load(Ordering::Acquire)
    }

    pub(super) fn busy_bits(&self) -> bool {
        self.flags.load(Ordering::Acquire) & (LOCKED | DIRTY) != 0
    }

    /// Take the lock if it is free; never sleeps (`trylock_buffer`:
    /// `test_and_set_bit_lock`). The seed's read-ahead uses only this.
    pub fn trylock(&self) -> bool {
        self.flags.fetch_or(LOCKED, Ordering::Acquire) & LOCKED == 0
    }

    /// Take the lock, sleeping (and letting simulated I/O run) while another
    /// holder has it (`lock_buffer`).
    pub fn lock(&self) {
        while !self.trylock() {
            self.wait_on_buffer();
        }
    }

    /// Release the lock and wake sleepers (`unlock_buffer`). Unlocking a
    /// buffer that is not locked is a broken invariant and panics.
    pub fn unlock(&self) {
        let old = self.flags.fetch_and(!LOCKED, Ordering::Release);
        assert!(old & LOCKED != 0, "unlock of unlocked buffer {}", self.key);
        let _wq = lock(&self.wq);
        self.unlocked.notify_all();
    }

    /// The end of a read that read-ahead followed: wait for the buffer
    /// unless it was seen unlocked already (`completed`), then an I/O
    /// error naming `what` at `blocknr` unless it is up to date.
    pub fn finish_read(&self, completed: bool, blocknr: u64, what: &str) -> Result<()> {
        if !completed {
            self.wait_on_buffer();
        }
        if !self.test(BufFlag::Uptodate) {
            return Err(crate::Error::Io {
                blocknr,
                detail: format!("I/O error reading {what} {blocknr}"),
            });
        }
        Ok(())
    }

    /// Sleep until the buffer is unlocked, without taking the lock
    /// (`wait_on_buffer`). With a device, in-flight I/O is run first, so the
    /// I/O holding this buffer's lock completes. Returns immediately if the
    /// buffer is unlocked.
    pub fn wait_on_buffer(&self) {
        loop {
            let seen = {
                let wq = lock(&self.wq);
                if !self.is_locked() {
                    return;
                }
                *wq
            };
            if let Some(dev) = &self.io {
                if dev.wait_next() {
                    continue;
                }
            }
            let wq = match self.wait_rule {
                WaitRule::CheckUnderMutex => {
                    let wq = lock(&self.wq);
                    if !self.is_locked() {
                        return;
                    }
                    wq
                }
                WaitRule::CheckBeforeMutex => {
                    if !self.is_locked() {
                        return;
                    }
                    lock(&self.wq)
                }
            };
            if *wq != seen {
                continue; // I/O was submitted since the device looked idle: run it.
            }
            drop(wait(&self.unlocked, wq));
        }
    }

    /// Tell sleepers that I/O holding this buffer's lock has been submitted,
    /// so they let the device run instead of sleeping. Call after submitting.
    pub fn io_started(&self) {
        let mut wq = lock(&self.wq);
        *wq = wq.wrapping_add(1);
        self.unlocked.notify_all();
    }

    /// Complete a read of this locked buffer (`end_buffer_read_sync`): on
    /// success copy `data` in and set `Uptodate`, on failure (`None`) clear
    /// it; then unlock. A `data` of the wrong size counts as a failure.
    pub fn end_read(&self, data: Option<&[u8]>) {
        let ok = match data {
            Some(d) => {
                let mut buf = lock(&self.data);
                let fits = d.len() == buf.len();
                if fits {
                    buf.copy_from_slice(d);
                }
                fits
            }
            None => false,
        };
        if ok {
            self.set(BufFlag::Uptodate);
        } else {
            self.clear(BufFlag::Uptodate);
        }
        self.unlock();
    }

    /// Run `f` on the block's bytes.
    pub fn read_data<R>(&self, f: impl FnOnce(&[u8]) -> R) -> R {
        f(&lock(&self.data))
    }

    /// Run `f` on the block's bytes, mutably. The caller holds the buffer
    /// lock or otherwise owns the buffer (a new node); setting `Dirty` or
    /// `Uptodate` afterwards is the caller's business.
    pub fn write_data<R>(&self, f: impl FnOnce(&mut [u8]) -> R) -> R {
        f(&mut lock(&self.data))
    }

    /// Verify the block once (seed 000 patch 3, `nilfs_btree_broken_node_block`):
    /// if `Checked` is set, succeed without looking; else run `check` on the
    /// bytes, set `Checked` on success, and on failure clear `Uptodate` (so
    /// the next reader re-reads it, as the kernel does) and return the error.
    pub fn verify_once(&self, check: impl FnOnce(&[u8]) -> Result<()>) -> Result<()> {
        if self.test(BufFlag::Checked) {
            return Ok(());
        }
        match self.read_data(check) {
            Ok(()) => {
                self.set(BufFlag::Checked);
                Ok(())
            }
            Err(e) => {
                self.clear(BufFlag::Uptodate);
                Err(e)
            }
        }
    }
}

/// One counted reference to a buffer: clone is `get_bh`, drop is `brelse`.
/// A buffer with a live `BufRef` is never evicted (under [`EvictRule::Kernel`]).
pub struct BufRef {
    buf: Arc<Buffer>,
}

impl BufRef {
    /// Count a new reference to `buf`. Only the cache creates these from its
    /// own pointer, under its map mutex, which orders it against eviction.
    pub(super) fn new(buf: Arc<Buffer>) -> Self {
        buf.refs.fetch_add(1, Ordering::Relaxed);
        BufRef { buf }
    }

    /// Whether two references name the same buffer object.
    pub fn same(&self, other: &BufRef) -> bool {
        Arc::ptr_eq(&self.buf, &other.buf)
    }
}

impl Clone for BufRef {
    fn clone(&self) -> Self {
        // Relaxed, as Arc's clone: the clone's creator already holds a
        // reference, so the count cannot be zero and eviction cannot race.
        self.buf.refs.fetch_add(1, Ordering::Relaxed);
        BufRef {
            buf: self.buf.clone(),
        }
    }
}

impl Drop for BufRef {
    fn drop(&mut self) {
        // Release: everything this holder did to the buffer (unlock, clear
        // Dirty) happens before an evictor's Acquire load sees the count drop.
        let old = self.buf.refs.fetch_sub(1, Ordering::Release);
        assert!(old > 0, "buffer {} reference count underflow", self.buf.key);
    }
}

impl Deref for BufRef {
    type Target = Buffer;

    fn deref(&self) -> &Buffer {
        &self.buf
    }
}

impl fmt::Debug for BufRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.buf.fmt(f)
    }
}
