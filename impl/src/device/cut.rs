//! A fault-injecting device for crash tests: it stores block writes until
//! its budget runs out and fails every write after that, as power loss
//! would; it can also fail one chosen read, once (a medium error). The write that exhausts the budget can be torn (only its first
//! sector lands), and one write can be silently lost (acknowledged, never
//! stored: the known-bad disk cache that crash checkers must catch). It
//! records where every block write it accepted went, so a test can choose
//! its cut points by what was written (a super block, a log's last block).

use super::{BlockDevice, MemDevice};
use crate::sync::{lock, AtomicU64, Mutex, Ordering};
use crate::{Error, Result};

/// A [`MemDevice`] behind a write budget.
pub struct CutDevice {
    /// What reached the medium.
    pub inner: MemDevice,
    block_size: u64,
    budget: AtomicU64,
    tear: bool,
    written: AtomicU64,
    lose: Option<u64>,
    /// Byte offset of every block write accepted, in order.
    offsets: Mutex<Vec<u64>>,
    /// Reads made so far, and the one (0-based) that fails, once.
    reads: AtomicU64,
    fail_read: Option<u64>,
    /// With [`CutDevice::recording_reads`]: the byte range of every read.
    read_spans: Option<Mutex<Vec<(u64, u64)>>>,
    /// A block every read of which fails (a bad sector, for good).
    bad_block: Option<u64>,
    /// Flushes made so far, and the one (0-based) that fails, once.
    flushes: AtomicU64,
    fail_flush: Option<u64>,
}

impl CutDevice {
    /// `inner` accepting `budget` more block writes (`u64::MAX`: all).
    /// Writes are counted in pieces of `block_size` bytes (a super block
    /// write, shorter, is one piece).
    pub fn new(inner: MemDevice, block_size: u64, budget: u64) -> Self {
        CutDevice {
            inner,
            block_size,
            budget: AtomicU64::new(budget),
            tear: false,
            written: AtomicU64::new(0),
            lose: None,
            offsets: Mutex::new(Vec::new()),
            reads: AtomicU64::new(0),
            fail_read: None,
            read_spans: None,
            bad_block: None,
            flushes: AtomicU64::new(0),
            fail_flush: None,
        }
    }

    /// Fail read number `index` (0-based, counting every `read_at`) with
    /// an I/O error, once: a medium error the next read of the same
    /// place does not repeat.
    pub fn failing_read(mut self, index: u64) -> Self {
        self.fail_read = Some(index);
        self
    }

    /// Fail every read that touches block `blocknr` (of `block_size`
    /// bytes) with an I/O error: a medium error that a retry does not
    /// clear.
    pub fn bad_block(mut self, blocknr: u64) -> Self {
        self.bad_block = Some(blocknr);
        self
    }

    /// Record where every read goes ([`CutDevice::read_spans`]), so a test
    /// can choose the read to fail by what it reads.
    pub fn recording_reads(mut self) -> Self {
        self.read_spans = Some(Mutex::new(Vec::new()));
        self
    }

    /// With [`CutDevice::recording_reads`]: the byte offset and length of
    /// every read so far, in order (the failed one included); else empty.
    pub fn read_spans(&self) -> Vec<(u64, u64)> {
        self.read_spans
            .as_ref()
            .map_or_else(Vec::new, |m| lock(m).clone())
    }

    /// Fail flush number `index` (0-based) with an I/O error, once: the
    /// writes before it are stored, but the device could not say they are
    /// durable (a cache flush that failed).
    pub fn failing_flush(mut self, index: u64) -> Self {
        self.fail_flush = Some(index);
        self
    }

    /// Flushes made so far (the failed one included).
    pub fn flushes(&self) -> u64 {
        self.flushes.load(Ordering::SeqCst)
    }

    /// The read that fails, if one does.
    pub fn fails_at(&self) -> Option<u64> {
        self.fail_read
    }

    /// Reads made so far (the failed one included).
    pub fn reads(&self) -> u64 {
        self.reads.load(Ordering::SeqCst)
    }

    /// Tear the write that exhausts the budget: its first sector lands.
    pub fn tearing(mut self) -> Self {
        self.tear = true;
        self
    }

    /// Known-bad: acknowledge write number `index` (0-based) without
    /// storing it.
    pub fn losing(mut self, index: u64) -> Self {
        self.lose = Some(index);
        self
    }

    /// Block writes accepted so far.
    pub fn written(&self) -> u64 {
        self.written.load(Ordering::SeqCst)
    }

    /// The byte offset of every block write accepted so far, in order
    /// (the torn one and a lost one included).
    pub fn offsets(&self) -> Vec<u64> {
        lock(&self.offsets).clone()
    }

    /// Accept `n` more block writes, then refuse every one (the device
    /// dying again after it came back).
    pub fn cut_after(&self, n: u64) {
        self.budget.store(n, Ordering::SeqCst);
    }

    /// Power back: no more budget limit (for mounting what was left).
    pub fn restore(&self) {
        self.budget.store(u64::MAX, Ordering::SeqCst);
    }
}

impl BlockDevice for CutDevice {
    fn size_bytes(&self) -> u64 {
        self.inner.size_bytes()
    }
    fn read_at(&self, off: u64, buf: &mut [u8]) -> Result<()> {
        let index = self.reads.fetch_add(1, Ordering::SeqCst);
        if let Some(spans) = &self.read_spans {
            lock(spans).push((off, buf.len() as u64));
        }
        if self.fail_read == Some(index) {
            return Err(Error::Io {
                blocknr: off / self.block_size,
                detail: "injected read error".into(),
            });
        }
        if let Some(b) = self.bad_block {
            let (from, to) = (b * self.block_size, (b + 1) * self.block_size);
            if off < to && from < off + buf.len() as u64 {
                return Err(Error::Io {
                    blocknr: b,
                    detail: "bad block".into(),
                });
            }
        }
        self.inner.read_at(off, buf)
    }
    fn write_at(&self, off: u64, buf: &[u8]) -> Result<()> {
        let piece = (self.block_size as usize).min(buf.len()).max(512);
        for (n, chunk) in buf.chunks(piece).enumerate() {
            let at = off + (n * piece) as u64;
            if self.budget.load(Ordering::SeqCst) == 0 {
                return Err(Error::Io {
                    blocknr: at / self.block_size,
                    detail: "cut".into(),
                });
            }
            let left = self.budget.fetch_sub(1, Ordering::SeqCst) - 1;
            let index = self.written.fetch_add(1, Ordering::SeqCst);
            lock(&self.offsets).push(at);
            if self.lose == Some(index) {
                continue;
            }
            if left == 0 && self.tear {
                self.inner.write_at(at, &chunk[..512.min(chunk.len())])?;
                return Err(Error::Io {
                    blocknr: at / self.block_size,
                    detail: "torn".into(),
                });
            }
            self.inner.write_at(at, chunk)?;
        }
        Ok(())
    }
    fn flush(&self) -> Result<()> {
        let index = self.flushes.fetch_add(1, Ordering::SeqCst);
        if self.fail_flush == Some(index) {
            return Err(Error::Io {
                blocknr: 0,
                detail: "injected flush error".into(),
            });
        }
        Ok(())
    }
}
