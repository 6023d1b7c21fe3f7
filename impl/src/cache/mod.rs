//! Buffer cache and B-tree node cache.
//!
//! [`BufferCache`] maps a key (a block number, or a B-tree node's pointer
//! value) to one [`Buffer`]: the kernel's per-mapping buffer heads, reduced to
//! a map. [`BtnodeCache`] is `fs/nilfs2/btnode.c` on top of it: node buffers
//! keyed by pointer value and read through a [`SimDevice`] with the seed-000
//! read-ahead submission rules.
//!
//! All shared state goes through `crate::sync`, so the same code runs under
//! std, loom and shuttle. Lock order, outermost first: device state → cache
//! map → buffer wait queue → buffer data. (The device's completion handlers
//! take buffer locks; buffers never call the device while holding a lock.)

mod btnode;
mod buffer;

pub use btnode::{BtnodeCache, ReadMode, Submit};
pub use buffer::{BufFlag, BufRef, Buffer, BufferRules, EvictRule, WaitRule};

use std::collections::BTreeMap;

use crate::device::sim::MAX_PAGE_SIZE;
use crate::device::SimDevice;
use crate::sync::{lock, Arc, Mutex};
use crate::{Error, Result};

/// What an eviction attempt did.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Evict {
    /// The buffer was dropped from the cache.
    Evicted,
    /// The buffer is referenced, locked or dirty, and stays.
    Busy,
    /// No buffer has that key.
    Absent,
}

struct CacheInner {
    block_size: u32,
    io: Option<SimDevice>,
    rules: BufferRules,
    map: Mutex<BTreeMap<u64, Arc<Buffer>>>,
}

/// A set of buffers of one size, one per key. Cheap to clone: clones share
/// the cache.
#[derive(Clone)]
pub struct BufferCache {
    inner: Arc<CacheInner>,
}

impl std::fmt::Debug for BufferCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BufferCache")
            .field("block_size", &self.inner.block_size)
            .field("len", &self.len())
            .finish_non_exhaustive()
    }
}

impl BufferCache {
    /// An empty cache of `block_size`-byte buffers. `io` is the device whose
    /// in-flight I/O a sleeper lets run (see [`Buffer::wait_on_buffer`]);
    /// `None` when nothing here does asynchronous I/O.
    pub fn new(block_size: u32, io: Option<SimDevice>, rules: BufferRules) -> Result<Self> {
        if block_size == 0 || block_size > MAX_PAGE_SIZE {
            return Err(Error::Invalid(format!(
                "buffer size {block_size} (1 to {MAX_PAGE_SIZE})"
            )));
        }
        let inner = CacheInner {
            block_size,
            io,
            rules,
            map: Mutex::new(BTreeMap::new()),
        };
        Ok(BufferCache {
            inner: Arc::new(inner),
        })
    }

    /// Bytes per buffer.
    pub fn block_size(&self) -> u32 {
        self.inner.block_size
    }

    /// The protocol in force.
    pub fn rules(&self) -> BufferRules {
        self.inner.rules
    }

    /// The buffer for `key`, created (zeroed, not up to date) if absent
    /// (`__getblk`). Returns a new reference.
    pub fn get(&self, key: u64) -> BufRef {
        let mut map = lock(&self.inner.map);
        let buf = map.entry(key).or_insert_with(|| {
            let size = self.inner.block_size as usize;
            Arc::new(Buffer::new(
                key,
                size,
                self.inner.io.clone(),
                self.inner.rules.wait,
            ))
        });
        BufRef::new(buf.clone())
    }

    /// The buffer for `key` if cached (`__find_get_block`).
    pub fn find(&self, key: u64) -> Option<BufRef> {
        lock(&self.inner.map)
            .get(&key)
            .map(|b| BufRef::new(b.clone()))
    }

    /// Drop the buffer for `key` if nobody can be using it.
    ///
    /// The rule (fs/buffer.c `try_to_free_buffers` / `buffer_busy`): only a
    /// buffer that is **unreferenced, unlocked and clean** may go. The check
    /// runs under the map mutex, and references are only made under it (or
    /// by cloning one), so an unreferenced buffer cannot gain a reference
    /// during the check; an unreferenced buffer is normally unlocked too
    /// (I/O holds a reference while it holds the lock), but both are checked,
    /// as the kernel does. Dirty buffers wait for writeback.
    pub fn try_evict(&self, key: u64) -> Evict {
        let mut map = lock(&self.inner.map);
        let Some(buf) = map.get(&key) else {
            return Evict::Absent;
        };
        if !self.evictable(buf) {
            return Evict::Busy;
        }
        buf.mark_evicted();
        map.remove(&key);
        Evict::Evicted
    }

    /// Evict every evictable buffer, in key order; returns how many went.
    pub fn shrink(&self) -> usize {
        let mut map = lock(&self.inner.map);
        let before = map.len();
        map.retain(|_, buf| {
            let go = self.evictable(buf);
            if go {
                buf.mark_evicted();
            }
            !go
        });
        before - map.len()
    }

    fn evictable(&self, buf: &Buffer) -> bool {
        // Acquire on the count pairs with BufRef::drop's Release: a holder's
        // unlock and clean happen before we see its reference gone.
        let referenced = buf.refs() != 0;
        match self.inner.rules.evict {
            EvictRule::Kernel => !referenced && !buf.busy_bits(),
            EvictRule::IgnoreReferences => !buf.busy_bits(),
        }
    }

    /// Number of cached buffers.
    pub fn len(&self) -> usize {
        lock(&self.inner.map).len()
    }

    /// Whether the cache holds no buffer.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The cached keys, ascending.
    pub fn keys(&self) -> Vec<u64> {
        lock(&self.inner.map).keys().copied().collect()
    }
}
