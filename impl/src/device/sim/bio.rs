//! Bios: block I/O requests of consecutive pages, their completion
//! handlers, and the handle a submitter waits on.

use super::{Op, SimDevice};
use crate::format::BlockNr;
use crate::sync::{lock, Arc, Mutex};
use crate::{Error, Result};

/// What a completion handler learns about one page.
#[derive(Debug)]
pub struct PageDone<'a> {
    /// The page's index in its bio (0 = first submitted).
    pub index: usize,
    /// The page's block number, in units of the bio's block size.
    pub blocknr: BlockNr,
    /// For a successful read, the data read; otherwise empty.
    pub data: &'a [u8],
    /// Whether the page's I/O succeeded.
    pub result: &'a Result<()>,
    /// Simulated time of the completion, ns.
    pub time_ns: u64,
}

pub(super) type EndIo = Box<dyn FnMut(PageDone<'_>) + Send>;

/// A block I/O request: one operation on consecutive pages.
pub struct Bio {
    pub(super) op: Op,
    pub(super) rahead: bool,
    pub(super) start: BlockNr,
    pub(super) block_size: u32,
    pub(super) nr_pages: usize,
    pub(super) write_data: Vec<Vec<u8>>,
    pub(super) end_io: Option<EndIo>,
}

impl Bio {
    /// Read `nr_pages` blocks of `block_size` bytes starting at block `start`
    /// (in units of `block_size`). Page buffers are allocated only once the
    /// device has accepted the bio, so a hostile size costs nothing.
    pub fn read(start: BlockNr, block_size: u32, nr_pages: usize) -> Bio {
        Bio {
            op: Op::Read,
            rahead: false,
            start,
            block_size,
            nr_pages,
            write_data: Vec::new(),
            end_io: None,
        }
    }

    /// Write `pages` (each `block_size` bytes) starting at block `start`.
    pub fn write(start: BlockNr, block_size: u32, pages: Vec<Vec<u8>>) -> Bio {
        Bio {
            rahead: false,
            op: Op::Write,
            start,
            block_size,
            nr_pages: pages.len(),
            write_data: pages,
            end_io: None,
        }
    }

    /// Mark this bio as read-ahead (`REQ_RAHEAD`): the device treats it
    /// like any read, but records the flag in its submission log so tests
    /// can check what read-ahead submitted.
    #[must_use]
    pub fn rahead(mut self) -> Bio {
        self.rahead = true;
        self
    }

    /// Call `f` once per page as it completes, in completion order (the bio's
    /// `bi_end_io`). `f` runs under the device lock: it may take other locks
    /// (a buffer's) but must not call the device.
    #[must_use]
    pub fn on_page_done(mut self, f: impl FnMut(PageDone<'_>) + Send + 'static) -> Bio {
        self.end_io = Some(Box::new(f));
        self
    }

    /// The operation.
    pub fn op(&self) -> Op {
        self.op
    }

    /// The first block, in units of [`Self::block_size`].
    pub fn start(&self) -> BlockNr {
        self.start
    }

    /// Bytes per page.
    pub fn block_size(&self) -> u32 {
        self.block_size
    }

    /// Number of pages.
    pub fn nr_pages(&self) -> usize {
        self.nr_pages
    }
}

/// When and how one page completed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PageCompletion {
    /// Device-wide completion sequence number: total order of completions.
    pub seq: u64,
    /// Simulated time of the completion, ns.
    pub time_ns: u64,
    /// The page's outcome.
    pub result: Result<()>,
}

#[derive(Default)]
pub(super) struct PageSlot {
    pub(super) done: Option<PageCompletion>,
    pub(super) data: Option<Vec<u8>>,
}

/// The caller's view of a submitted bio: per-page completion state, waiting,
/// and the data of completed reads.
#[derive(Clone)]
pub struct BioHandle {
    pub(super) dev: SimDevice,
    pub(super) id: u64,
    pub(super) pages: Arc<Mutex<Vec<PageSlot>>>,
}

impl std::fmt::Debug for BioHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BioHandle")
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

impl BioHandle {
    /// Device-wide id of the bio: its submission index (0 = first bio).
    pub fn id(&self) -> u64 {
        self.id
    }

    /// Number of pages.
    pub fn nr_pages(&self) -> usize {
        lock(&self.pages).len()
    }

    /// How page `k` completed, or `None` while it is in flight. Never waits
    /// and never advances time (the kernel's `PageLocked` test).
    pub fn completion(&self, k: usize) -> Option<PageCompletion> {
        lock(&self.pages).get(k).and_then(|s| s.done.clone())
    }

    /// Whether page `k` has completed (its handler has run). Never waits.
    pub fn is_page_done(&self, k: usize) -> bool {
        self.completion(k).is_some()
    }

    /// Wait for page `k`: complete device events in time order until page
    /// `k`'s own completion has run, and return its outcome. Counts one wait
    /// in [`SimStats::waits`](super::SimStats::waits) if the page was still in flight.
    pub fn wait_page(&self, k: usize) -> Result<()> {
        let n = self.nr_pages();
        if k >= n {
            return Err(Error::OutOfRange(format!("page {k} of a bio of {n} pages")));
        }
        let inner = &self.dev.inner;
        let mut st = lock(&inner.state);
        let mut counted = false;
        loop {
            if let Some(c) = self.completion(k) {
                return c.result;
            }
            if !counted {
                st.stats.waits += 1;
                counted = true;
                // lock_page -> sync_page: a sleeper unplugs the queue.
                inner.unplug(&mut st);
            }
            let progressed = inner.complete_next(&mut st);
            assert!(
                progressed,
                "bio {} page {k} in flight with no pending event",
                self.id
            );
        }
    }

    /// Wait for every page; the first failing page's error, if any.
    pub fn wait(&self) -> Result<()> {
        let mut first = Ok(());
        for k in 0..self.nr_pages() {
            let r = self.wait_page(k);
            if first.is_ok() {
                first = r;
            }
        }
        first
    }

    /// Take the data of completed read page `k` (once; `None` before
    /// completion, after a failure, for writes, or when already taken).
    pub fn take_data(&self, k: usize) -> Option<Vec<u8>> {
        lock(&self.pages).get_mut(k).and_then(|s| s.data.take())
    }
}
