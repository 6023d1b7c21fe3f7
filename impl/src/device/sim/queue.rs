//! The device's event queue: bios in flight, the pending events by
//! simulated time (page completions, and with a request queue, request
//! completions and unplug timers), the request log, and the fault
//! decisions made at submission. The request queue itself is [`super::blk`].

use std::collections::BTreeMap;

use super::bio::{EndIo, PageCompletion, PageDone, PageSlot};
use super::blk::{Kick, Request, RequestQueue};
use super::timing::Mechanics;
use super::{
    relabel, BlockLayer, CompletionOrder, Fault, Op, Service, SimConfig, SimStats, SplitMix64,
    Submitted,
};
use crate::device::BlockDevice;
use crate::format::BlockNr;
use crate::sync::{lock, Arc, Mutex};
use crate::Error;

pub(super) struct Inflight {
    pub(super) op: Op,
    pub(super) start: BlockNr,
    pub(super) block_size: u32,
    pub(super) write_data: Vec<Vec<u8>>,
    /// Per page: why it fails, if an injected fault says so.
    pub(super) faults: Vec<Option<String>>,
    pub(super) end_io: Option<EndIo>,
    pub(super) pages: Arc<Mutex<Vec<PageSlot>>>,
    pub(super) remaining: usize,
}

pub(super) enum Event {
    /// Page `page` of bio `bio` completes.
    Page { bio: u64, page: usize },
    /// Request `rq` (in [`State::dispatched`]) is done at the device and
    /// its completion path runs.
    RequestDone { rq: u64 },
    /// The request queue's unplug timer of this generation fires.
    Unplug { generation: u64 },
}

/// One request the device served, as the request log records it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RequestRecord {
    /// Read or write.
    pub op: Op,
    /// First byte on the device.
    pub offset: u64,
    /// Bytes.
    pub len: u64,
    /// Bios merged into it (1 without a request queue).
    pub bios: usize,
    /// Whether every bio in it was flagged read-ahead.
    pub rahead: bool,
    /// When it was handed to the device, ns.
    pub dispatch_ns: u64,
    /// When the device had its data moved, ns.
    pub done_ns: u64,
    /// How the device served it.
    pub service: Service,
}

pub(super) struct State {
    /// Every accepted bio, in submission order.
    pub(super) log: Vec<Submitted>,
    pub(super) now_ns: u64,
    pub(super) next_bio: u64,
    pub(super) next_event: u64,
    pub(super) next_completion: u64,
    /// Pending events by (time, sequence).
    pub(super) events: BTreeMap<(u64, u64), Event>,
    pub(super) inflight: BTreeMap<u64, Inflight>,
    pub(super) mechanics: Mechanics,
    pub(super) busy_until_ns: u64,
    pub(super) rng: SplitMix64,
    pub(super) stats: SimStats,
    /// The request queue, when [`SimConfig::block_layer`] has one.
    pub(super) queue: Option<RequestQueue>,
    /// Bios submitted to the queue and not yet in a dispatched request:
    /// (offset, rahead) by bio id.
    pub(super) queued_bios: BTreeMap<u64, (u64, bool)>,
    /// Requests at the device, by request id.
    pub(super) dispatched: BTreeMap<u64, Request>,
    /// Every request served, in dispatch order.
    pub(super) requests: Vec<RequestRecord>,
}

pub(super) struct Inner {
    pub(super) config: SimConfig,
    pub(super) store: Box<dyn BlockDevice>,
    pub(super) state: Mutex<State>,
}

impl Inner {
    /// Decide at submission whether the page at `[offset, offset+len)` of bio
    /// `id` fails, and why.
    pub(super) fn fault_for(
        &self,
        st: &mut State,
        id: u64,
        op: Op,
        offset: u64,
        len: u64,
    ) -> Option<String> {
        let bs = u64::from(self.config.block_size);
        let mut why = None;
        for f in &self.config.faults.faults {
            let hit = match *f {
                Fault::Block { blocknr, op: fop } => {
                    let lo = blocknr.0.saturating_mul(bs);
                    let hi = lo.saturating_add(bs);
                    (fop == Some(op) || fop.is_none()) && offset < hi && lo < offset + len
                }
                Fault::NthBio(n) => n == id,
                Fault::Random { per_million } => {
                    st.rng.next_u64() % 1_000_000 < u64::from(per_million)
                }
            };
            if hit && why.is_none() {
                why = Some(format!("injected fault {f:?}"));
            }
        }
        if why.is_some() {
            st.stats.faults_injected += 1;
        }
        why
    }

    /// Run pending events in time order until one page completion has run;
    /// false if nothing is pending.
    pub(super) fn complete_next(&self, st: &mut State) -> bool {
        loop {
            match self.step(st) {
                None => return false,
                Some(true) => return true,
                Some(false) => {}
            }
        }
    }

    /// Run the earliest pending event; `Some(true)` if it completed a page,
    /// `Some(false)` for a request-queue event, `None` if nothing is pending.
    pub(super) fn step(&self, st: &mut State) -> Option<bool> {
        let ((time, _), ev) = st.events.pop_first()?;
        st.now_ns = st.now_ns.max(time);
        let now = st.now_ns;
        let (bio_id, page) = match ev {
            Event::Page { bio, page } => (bio, page),
            Event::RequestDone { rq } => {
                self.request_done(st, rq, now);
                return Some(false);
            }
            Event::Unplug { generation } => {
                if st.queue.as_mut().is_some_and(|q| q.timer(generation)) {
                    self.run_queue(st, now);
                }
                return Some(false);
            }
        };
        let ev = PageEv { bio: bio_id, page };
        let seq = st.next_completion;
        st.next_completion += 1;
        let bio = st
            .inflight
            .get_mut(&ev.bio)
            .expect("completion event for an unknown bio");
        let bs = u64::from(bio.block_size);
        let blocknr = BlockNr(bio.start.0 + ev.page as u64);
        // In range: checked at submission.
        let offset = blocknr.0 * bs;
        let mut data = Vec::new();
        let result = match (&bio.faults[ev.page], bio.op) {
            (Some(why), _) => Err(Error::Io {
                blocknr: blocknr.0,
                detail: why.clone(),
            }),
            (None, Op::Read) => {
                data = vec![0u8; bs as usize];
                self.store
                    .read_at(offset, &mut data)
                    .map_err(|e| relabel(e, blocknr.0))
            }
            (None, Op::Write) => self
                .store
                .write_at(offset, &bio.write_data[ev.page])
                .map_err(|e| relabel(e, blocknr.0)),
        };
        if result.is_err() {
            data.clear();
        }
        if let Some(end_io) = bio.end_io.as_mut() {
            end_io(PageDone {
                index: ev.page,
                blocknr,
                data: &data,
                result: &result,
                time_ns: now,
            });
        }
        let op = bio.op;
        let ok = result.is_ok();
        {
            let mut pages = lock(&bio.pages);
            let slot = &mut pages[ev.page];
            assert!(
                slot.done.is_none(),
                "page {} of bio {} completed twice",
                ev.page,
                ev.bio
            );
            slot.done = Some(PageCompletion {
                seq,
                time_ns: now,
                result,
            });
            if op == Op::Read && ok {
                slot.data = Some(data);
            }
        }
        bio.remaining -= 1;
        if bio.remaining == 0 {
            st.inflight.remove(&ev.bio);
        }
        match (op, ok) {
            (Op::Read, true) => {
                st.stats.pages_read += 1;
                st.stats.bytes_read += bs;
            }
            (Op::Read, false) => st.stats.pages_read += 1,
            (Op::Write, true) => {
                st.stats.pages_written += 1;
                st.stats.bytes_written += bs;
            }
            (Op::Write, false) => st.stats.pages_written += 1,
        }
        Some(true)
    }

    /// Act on what the request queue asked for at time `now`.
    pub(super) fn kick(&self, st: &mut State, kick: Kick, now: u64) {
        match kick {
            Kick::None => {}
            Kick::ArmTimer { at_ns, generation } => {
                let seq = st.next_event;
                st.next_event += 1;
                st.events.insert((at_ns, seq), Event::Unplug { generation });
            }
            Kick::Run => self.run_queue(st, now),
        }
    }

    /// A sleeper's unplug (`sync_page` / `sync_buffer`).
    pub(super) fn unplug(&self, st: &mut State) {
        if st.queue.as_mut().is_some_and(RequestQueue::unplug) {
            let now = st.now_ns;
            self.run_queue(st, now);
        }
    }

    /// `request_fn`: hand the device every request it can take, at `now`.
    pub(super) fn run_queue(&self, st: &mut State, now: u64) {
        let completion_ns = match self.config.block_layer {
            BlockLayer::Queue(m) => m.completion_ns,
            BlockLayer::Direct => 0,
        };
        while let Some(rq) = st.queue.as_mut().and_then(RequestQueue::next_dispatch) {
            let (start, done, service) = st.mechanics.service(now, rq.op, rq.offset, rq.len);
            let busy_from = start.max(st.busy_until_ns);
            st.stats.busy_ns += done.saturating_sub(busy_from);
            st.busy_until_ns = st.busy_until_ns.max(done);
            let rahead = rq
                .bios
                .iter()
                .all(|b| st.queued_bios.get(b).is_some_and(|&(_, ra)| ra));
            st.requests.push(RequestRecord {
                op: rq.op,
                offset: rq.offset,
                len: rq.len,
                bios: rq.bios.len(),
                rahead,
                dispatch_ns: now,
                done_ns: done,
                service,
            });
            let seq = st.next_event;
            st.next_event += 1;
            st.events.insert(
                (done + completion_ns, seq),
                Event::RequestDone { rq: rq.id },
            );
            st.dispatched.insert(rq.id, rq);
        }
    }

    /// Request `rq` is done at `now`: one softirq completes all its bios'
    /// pages, in device order, spending [`SimConfig::end_io_page_ns`] on
    /// each; nothing else runs meanwhile, so every page is visible at the
    /// end of it (no waiter wakes between two pages of one request, as on
    /// the kernel's CPU). Then the completion path runs the queue.
    pub(super) fn request_done(&self, st: &mut State, rq: u64, now: u64) {
        let Some(rq) = st.dispatched.remove(&rq) else {
            return;
        };
        let pages: Vec<(u64, usize)> = rq
            .bios
            .iter()
            .map(|b| (*b, st.inflight.get(b).map_or(0, |f| lock(&f.pages).len())))
            .collect();
        let total: u64 = pages.iter().map(|&(_, n)| n as u64).sum();
        let end = now + total * self.config.end_io_page_ns;
        for (bio, n) in pages {
            st.queued_bios.remove(&bio);
            for pos in 0..n {
                let page = match self.config.order {
                    CompletionOrder::Submission => pos,
                    CompletionOrder::Reverse => n - 1 - pos,
                };
                let seq = st.next_event;
                st.next_event += 1;
                st.events.insert((end, seq), Event::Page { bio, page });
            }
        }
        if let Some(q) = st.queue.as_mut() {
            q.completed();
        }
        self.run_queue(st, end);
    }
}

/// A page completion being run.
struct PageEv {
    bio: u64,
    page: usize,
}
