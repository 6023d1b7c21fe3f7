//! The device's queue: bios in flight, the pending page completions by
//! simulated time, and the fault decisions made at submission.

use std::collections::BTreeMap;

use super::bio::{EndIo, PageCompletion, PageDone, PageSlot};
use super::timing::Mechanics;
use super::{relabel, Fault, Op, SimConfig, SimStats, SplitMix64, Submitted};
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

pub(super) struct Event {
    pub(super) bio: u64,
    pub(super) page: usize,
}

pub(super) struct State {
    /// Every accepted bio, in submission order.
    pub(super) log: Vec<Submitted>,
    pub(super) now_ns: u64,
    pub(super) next_bio: u64,
    pub(super) next_event: u64,
    pub(super) next_completion: u64,
    /// Pending page completions by (time, sequence).
    pub(super) events: BTreeMap<(u64, u64), Event>,
    pub(super) inflight: BTreeMap<u64, Inflight>,
    pub(super) mechanics: Mechanics,
    pub(super) busy_until_ns: u64,
    pub(super) rng: SplitMix64,
    pub(super) stats: SimStats,
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

    /// Run the earliest pending page completion; false if none is pending.
    pub(super) fn complete_next(&self, st: &mut State) -> bool {
        let Some(((time, _), ev)) = st.events.pop_first() else {
            return false;
        };
        st.now_ns = st.now_ns.max(time);
        let now = st.now_ns;
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
        true
    }
}
