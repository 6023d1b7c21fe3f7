//! The B-tree node cache (fs/nilfs2/btnode.c): node buffers of one B-tree,
//! keyed by the **pointer value** that names the node in its parent — a
//! virtual block number for ordinary files, a physical block number for the
//! DAT, whose own tree cannot be translated through itself — and read from a
//! [`SimDevice`] at the physical block the caller resolves.

use super::{BufFlag, BufRef, BufferCache, BufferRules};
use crate::device::{Bio, SimDevice};
use crate::format::BlockNr;
use crate::Result;

/// How [`BtnodeCache::submit_block`] may treat a busy buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ReadMode {
    /// A read the caller will wait for: sleep on the buffer lock (`READ`).
    Read,
    /// A read-ahead (`REQ_RAHEAD`): submit only a block physically right after
    /// the previously submitted one, only if `trylock` succeeds; never sleep.
    ReadAhead,
}

/// What [`BtnodeCache::submit_block`] did (the kernel's `0`, `-EEXIST` and
/// internal `-EBUSY`).
#[derive(Debug)]
pub enum Submit {
    /// A read was submitted; the buffer is locked until it completes.
    Issued(BufRef),
    /// The buffer was already up to date (or dirty); no I/O.
    Exists(BufRef),
    /// Read-ahead declined: not contiguous, or the buffer was locked.
    Busy,
}

/// The node buffers of one B-tree (one inode's `i_btnode_cache`).
#[derive(Clone, Debug)]
pub struct BtnodeCache {
    bufs: BufferCache,
    dev: SimDevice,
}

impl BtnodeCache {
    /// An empty node cache of `block_size`-byte nodes read from `dev`.
    pub fn new(dev: SimDevice, block_size: u32, rules: BufferRules) -> Result<Self> {
        let bufs = BufferCache::new(block_size, Some(dev.clone()), rules)?;
        Ok(BtnodeCache { bufs, dev })
    }

    /// The underlying buffers (find, eviction, statistics).
    pub fn buffers(&self) -> &BufferCache {
        &self.bufs
    }

    /// The device nodes are read from.
    pub fn device(&self) -> &SimDevice {
        &self.dev
    }

    /// Look up or read the node named `ptr` (`nilfs_btnode_submit_block`).
    ///
    /// - A buffer already up to date or dirty: [`Submit::Exists`], no I/O,
    ///   and `locate` is not called.
    /// - Else `locate()` gives the physical block (the DAT translation of
    ///   `ptr`, or `ptr` itself for the DAT); its error is returned as is.
    /// - [`ReadMode::ReadAhead`] proceeds only if that block is
    ///   `*last_submitted + 1` and `trylock` succeeds, else [`Submit::Busy`];
    ///   [`ReadMode::Read`] sleeps for the lock.
    /// - Up to date once locked (another reader won): unlock, `Exists`.
    /// - Else submit a one-page read whose completion fills the buffer, sets
    ///   or clears `Uptodate` and unlocks it (`end_buffer_read_sync`); set
    ///   `*last_submitted` to the block; [`Submit::Issued`]. The caller waits
    ///   with [`super::Buffer::wait_on_buffer`] when it needs the data.
    ///
    /// `last_submitted` starts as `None` (the kernel starts `submit_ptr` at 0,
    /// which would let a first read-ahead of block 1 through; no caller
    /// relies on that).
    pub fn submit_block(
        &self,
        ptr: u64,
        locate: impl FnOnce() -> Result<BlockNr>,
        mode: ReadMode,
        last_submitted: &mut Option<BlockNr>,
    ) -> Result<Submit> {
        let bh = self.bufs.get(ptr);
        if bh.test(BufFlag::Uptodate) || bh.test(BufFlag::Dirty) {
            return Ok(Submit::Exists(bh));
        }
        let pblocknr = locate()?;
        match mode {
            ReadMode::ReadAhead => {
                let next = last_submitted.and_then(|p| p.0.checked_add(1));
                if next != Some(pblocknr.0) || !bh.trylock() {
                    return Ok(Submit::Busy);
                }
            }
            ReadMode::Read => bh.lock(),
        }
        if bh.test(BufFlag::Uptodate) {
            bh.unlock();
            return Ok(Submit::Exists(bh));
        }
        // The I/O's own reference (`get_bh` before `submit_bh`), released
        // by the completion once it has unlocked the buffer.
        let mut io_ref = Some(bh.clone());
        let mut bio = Bio::read(pblocknr, self.bufs.block_size(), 1);
        if mode == ReadMode::ReadAhead {
            bio = bio.rahead();
        }
        let bio = bio.on_page_done(move |done| {
            if let Some(b) = io_ref.take() {
                b.end_read(done.result.is_ok().then_some(done.data));
            }
        });
        match self.dev.submit(bio) {
            Ok(_) => {
                bh.io_started();
                *last_submitted = Some(pblocknr);
                Ok(Submit::Issued(bh))
            }
            Err(e) => {
                bh.unlock();
                Err(e)
            }
        }
    }

    /// A new, empty node buffer for `ptr`: zeroed, up to date, unlocked
    /// (`nilfs_btnode_create_block`, for the write path). An existing up to
    /// date or dirty buffer for `ptr` is returned as an error, as the kernel
    /// treats it as a bug.
    pub fn create_block(&self, ptr: u64) -> Result<BufRef> {
        let bh = self.bufs.get(ptr);
        if bh.test(BufFlag::Uptodate) || bh.test(BufFlag::Dirty) {
            return Err(crate::Error::Invalid(format!(
                "btnode {ptr} already exists"
            )));
        }
        bh.lock();
        bh.write_data(|d| d.fill(0));
        bh.set(BufFlag::Uptodate);
        bh.unlock();
        Ok(bh)
    }
}
