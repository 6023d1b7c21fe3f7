//! The request queue between bio submission and the simulated device: the
//! Linux 2.6.35 block layer of seed 000's measurement (block/blk-core.c
//! `__make_request`, block/elevator.c `elv_merge` / `elv_insert`,
//! `blk_plug_device` / `__generic_unplug_device`), or no queue at all.
//!
//! # What 2.6.35 did with a bio
//!
//! `__make_request` first tries to merge the bio into a request still
//! waiting in the elevator: a **back merge** when the bio starts where the
//! request ends, a **front merge** when it ends where the request starts
//! (`elv_merge`: the one-hit `last_merge` cache, the back-merge hash, then
//! the scheduler's `elevator_merge_fn`), within the queue's limits
//! (`ll_back_merge_fn`: `max_sectors`, `max_segments`). A merged request that
//! now touches its neighbour is merged with it (`attempt_back_merge`,
//! `attempt_front_merge`). Nothing merges into a request the driver has
//! already taken, nor when the queue is empty (`elv_queue_empty`).
//!
//! Otherwise the bio becomes a new request. On a rotating disk — and on
//! any disk without block-layer tagging (`queue_should_plug`) — a request
//! added to an empty queue **plugs** it: the driver is not called until the
//! queue is unplugged, which happens
//! - when someone sleeps on I/O (`sync_page`, `sync_buffer` →
//!   `blk_run_backing_dev`): [`super::SimDevice`]'s waits call
//!   [`RequestQueue::unplug`] first;
//! - when [`QueueModel::unplug_thresh`] requests (4) are queued (`elv_insert`);
//! - when the unplug timer fires, [`QueueModel::unplug_delay_ns`] (3 ms)
//!   after the plug (`blk_unplug_timeout` → kblockd);
//! - when a request completes (`scsi_next_command` → `__blk_run_queue`,
//!   which removes the plug);
//! - at once on a tagged non-rotational device, which is never plugged.
//!
//! An unplugged queue hands requests to the driver in FIFO order (noop;
//! CFQ and deadline sort by sector, which only matters with two or more
//! requests waiting, see [`QueueStats::max_queued`]) while fewer than
//! [`QueueModel::depth`] are outstanding at the device (TCQ/NCQ depth; 1 =
//! untagged). As `scsi_request_fn` does, the head request is prepared (taken
//! off the elevator, no longer mergeable) even when the device is full.
//!
//! [`BlockLayer::Direct`] keeps the simulator's first behaviour: every bio is
//! its own request, given to the device the moment it is submitted. It is the
//! default, so every experiment written against it (seeds 001 and 002) is
//! unchanged; for seed 000 it is the known-bad variant that sends contiguous
//! read-ahead bios as separate commands.

use super::Op;

/// How bios reach the device.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum BlockLayer {
    /// No request queue: each bio is a request, dispatched at submission.
    #[default]
    Direct,
    /// A request queue with plugging, merging and a device queue depth.
    Queue(QueueModel),
}

/// Which merges the elevator attempts (`/sys/block/*/queue/nomerges`, and
/// whether the scheduler has an `elevator_merge_fn`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Merges {
    /// `nomerges=2`: none.
    Off,
    /// Back merges only (noop has no `elevator_merge_fn`; its front merges
    /// come only from the one-hit cache, which we leave out).
    Back,
    /// Back and front merges (CFQ, deadline, anticipatory).
    BackFront,
}

/// The parameters of a 2.6.35 request queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QueueModel {
    /// Whether the queue plugs (`queue_should_plug`: every queue except a
    /// tagged non-rotational one).
    pub plugging: bool,
    /// Queued requests that unplug a plugged queue (`q->unplug_thresh`, 4).
    pub unplug_thresh: usize,
    /// Unplug timer, ns (`q->unplug_delay = msecs_to_jiffies(3)`).
    pub unplug_delay_ns: u64,
    /// Merging.
    pub merges: Merges,
    /// Largest request, bytes (`max_sectors_kb`: `BLK_DEF_MAX_SECTORS` =
    /// 1024 sectors = 512 KiB).
    pub max_request_bytes: u64,
    /// Most bios' pages in one request (`max_segments`, `BLK_MAX_SEGMENTS`
    /// = 128; each page counts as a segment).
    pub max_segments: usize,
    /// Requests outstanding at the device at once (the SCSI device's queue
    /// depth: TCQ on a parallel-SCSI HBA, NCQ on AHCI; 1 = untagged).
    pub depth: usize,
    /// Host time from the device finishing a request to its bios' end_io
    /// and the next dispatch (interrupt, softirq, SCSI midlayer), ns.
    pub completion_ns: u64,
}

impl QueueModel {
    /// A 2.6.35 queue in front of a parallel-SCSI disk: plugged (rotational),
    /// back and front merges (the default CFQ has a merge function), 512 KiB
    /// requests, 128 segments, tagged command queueing 32 deep
    /// (`CONFIG_AIC79XX_CMDS_PER_DEVICE=32` in the distribution kernels of the
    /// time), 20 µs completion path.
    pub fn linux_2635_scsi() -> Self {
        QueueModel {
            plugging: true,
            unplug_thresh: 4,
            unplug_delay_ns: 3_000_000,
            merges: Merges::BackFront,
            max_request_bytes: 512 * 1024,
            max_segments: 128,
            depth: 32,
            completion_ns: 20_000,
        }
    }

    /// A 2.6.35 queue in front of a SATA SSD on AHCI: libata's NCQ is not
    /// block-layer tagging, so `queue_should_plug` still plugs; NCQ depth 31
    /// (`ATA_MAX_QUEUE - 1`).
    pub fn linux_2635_ahci_ssd() -> Self {
        QueueModel {
            depth: 31,
            ..Self::linux_2635_scsi()
        }
    }

    pub(super) fn validate(&self) -> crate::Result<()> {
        if self.depth == 0 || self.max_segments == 0 || self.max_request_bytes == 0 {
            return Err(crate::Error::Invalid(
                "request queue: depth, max_segments and max_request_bytes must be non-zero".into(),
            ));
        }
        Ok(())
    }
}

/// One bio as the queue sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct QueuedBio {
    pub id: u64,
    pub op: Op,
    /// Byte offset and length on the device.
    pub offset: u64,
    pub len: u64,
    pub pages: usize,
}

/// A request: contiguous bios of one direction.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Request {
    pub id: u64,
    pub op: Op,
    pub offset: u64,
    pub len: u64,
    pub pages: usize,
    /// Bio ids, in device order.
    pub bios: Vec<u64>,
    /// Taken off the elevator by the driver's peek: no longer mergeable.
    prepared: bool,
}

impl Request {
    fn end(&self) -> u64 {
        self.offset + self.len
    }
}

/// Why the queue was run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Unplug {
    /// Somebody sleeps on I/O.
    Wait,
    /// `unplug_thresh` requests queued.
    Threshold,
    /// The unplug timer.
    Timer,
    /// A request completed.
    Completion,
    /// The queue never plugs.
    NoPlug,
}

/// Counters of the request queue.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QueueStats {
    /// Requests created.
    pub requests: u64,
    /// Bios back-merged into a waiting request.
    pub back_merges: u64,
    /// Bios front-merged into a waiting request.
    pub front_merges: u64,
    /// Requests merged with a neighbour after a bio merge.
    pub request_merges: u64,
    /// Times the queue was plugged.
    pub plugs: u64,
    /// Unplugs by a sleeper.
    pub unplug_wait: u64,
    /// Unplugs by the request threshold.
    pub unplug_threshold: u64,
    /// Unplugs by the 3 ms timer.
    pub unplug_timer: u64,
    /// Unplugs by a completion.
    pub unplug_completion: u64,
    /// Most requests waiting (not yet at the device) at once.
    pub max_queued: u64,
    /// Most requests outstanding at the device at once.
    pub max_in_flight: u64,
}

/// What the caller must do after a queue operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Kick {
    /// Nothing.
    None,
    /// Arm the unplug timer: fire at this time with this generation.
    ArmTimer { at_ns: u64, generation: u64 },
    /// Run the queue (dispatch what the device can take).
    Run,
}

/// The request queue's state.
#[derive(Debug)]
pub(super) struct RequestQueue {
    model: QueueModel,
    /// Requests not yet at the device, in dispatch order.
    queued: Vec<Request>,
    plugged: bool,
    /// Bumped at each plug: a timer event of an older generation is stale
    /// (`del_timer` at unplug).
    generation: u64,
    in_flight: usize,
    next_id: u64,
    stats: QueueStats,
}

impl RequestQueue {
    pub fn new(model: QueueModel) -> Self {
        RequestQueue {
            model,
            queued: Vec::new(),
            plugged: false,
            generation: 0,
            in_flight: 0,
            next_id: 0,
            stats: QueueStats::default(),
        }
    }

    pub fn stats(&self) -> QueueStats {
        self.stats
    }

    /// `elv_queue_empty`: nothing waiting in the elevator or dispatch list.
    fn is_empty(&self) -> bool {
        self.queued.is_empty()
    }

    fn fits(&self, rq: &Request, bio: &QueuedBio) -> bool {
        rq.op == bio.op
            && !rq.prepared
            && rq.len + bio.len <= self.model.max_request_bytes
            && rq.pages + bio.pages <= self.model.max_segments
    }

    fn fits_pair(&self, a: &Request, b: &Request) -> bool {
        a.op == b.op
            && !a.prepared
            && !b.prepared
            && a.end() == b.offset
            && a.len + b.len <= self.model.max_request_bytes
            && a.pages + b.pages <= self.model.max_segments
    }

    /// `elv_merge` + the merge itself: true if `bio` joined a request.
    fn try_merge(&mut self, bio: &QueuedBio) -> bool {
        if self.model.merges == Merges::Off {
            return false;
        }
        if let Some(i) = (0..self.queued.len())
            .find(|&i| self.queued[i].end() == bio.offset && self.fits(&self.queued[i], bio))
        {
            let rq = &mut self.queued[i];
            rq.len += bio.len;
            rq.pages += bio.pages;
            rq.bios.push(bio.id);
            self.stats.back_merges += 1;
            // attempt_back_merge: the request may now reach the next one.
            let end = self.queued[i].end();
            if let Some(j) = (0..self.queued.len()).find(|&j| {
                j != i
                    && self.queued[j].offset == end
                    && self.fits_pair(&self.queued[i], &self.queued[j])
            }) {
                let next = self.queued.remove(j);
                let i = if j < i { i - 1 } else { i };
                let rq = &mut self.queued[i];
                rq.len += next.len;
                rq.pages += next.pages;
                rq.bios.extend(next.bios);
                self.stats.request_merges += 1;
            }
            return true;
        }
        if self.model.merges == Merges::BackFront {
            if let Some(i) = (0..self.queued.len()).find(|&i| {
                self.queued[i].offset == bio.offset + bio.len && self.fits(&self.queued[i], bio)
            }) {
                let rq = &mut self.queued[i];
                rq.offset = bio.offset;
                rq.len += bio.len;
                rq.pages += bio.pages;
                rq.bios.insert(0, bio.id);
                self.stats.front_merges += 1;
                // attempt_front_merge: the previous request may now reach it.
                let start = self.queued[i].offset;
                if let Some(j) = (0..self.queued.len()).find(|&j| {
                    j != i
                        && self.queued[j].end() == start
                        && self.fits_pair(&self.queued[j], &self.queued[i])
                }) {
                    let this = self.queued.remove(i);
                    let j = if i < j { j - 1 } else { j };
                    let prev = &mut self.queued[j];
                    prev.len += this.len;
                    prev.pages += this.pages;
                    prev.bios.extend(this.bios);
                    self.stats.request_merges += 1;
                }
                return true;
            }
        }
        false
    }

    /// `__make_request` for a bio submitted at `now`.
    pub fn make_request(&mut self, now: u64, bio: QueuedBio) -> Kick {
        let was_empty = self.is_empty();
        if !was_empty && self.try_merge(&bio) {
            return if self.model.plugging {
                Kick::None
            } else {
                self.run_kick(Unplug::NoPlug)
            };
        }
        let rq = Request {
            id: self.next_id,
            op: bio.op,
            offset: bio.offset,
            len: bio.len,
            pages: bio.pages,
            bios: vec![bio.id],
            prepared: false,
        };
        self.next_id += 1;
        self.stats.requests += 1;
        let mut kick = Kick::None;
        if self.model.plugging && was_empty && !self.plugged {
            self.plugged = true;
            self.generation += 1;
            self.stats.plugs += 1;
            kick = Kick::ArmTimer {
                at_ns: now.saturating_add(self.model.unplug_delay_ns),
                generation: self.generation,
            };
        }
        self.queued.push(rq);
        self.stats.max_queued = self.stats.max_queued.max(self.queued.len() as u64);
        if !self.model.plugging {
            return self.run_kick(Unplug::NoPlug);
        }
        // elv_insert: unplug once enough requests wait.
        if self.plugged && self.queued.len() >= self.model.unplug_thresh {
            return self.run_kick(Unplug::Threshold);
        }
        kick
    }

    fn run_kick(&mut self, why: Unplug) -> Kick {
        self.remove_plug(why);
        Kick::Run
    }

    fn remove_plug(&mut self, why: Unplug) {
        if self.plugged {
            self.plugged = false;
            match why {
                Unplug::Wait => self.stats.unplug_wait += 1,
                Unplug::Threshold => self.stats.unplug_threshold += 1,
                Unplug::Timer => self.stats.unplug_timer += 1,
                Unplug::Completion => self.stats.unplug_completion += 1,
                Unplug::NoPlug => {}
            }
        }
    }

    /// `generic_unplug_device` by a sleeper: true if the queue should run.
    pub fn unplug(&mut self) -> bool {
        if self.plugged {
            self.remove_plug(Unplug::Wait);
            true
        } else {
            false
        }
    }

    /// The unplug timer of `generation` fired: true if the queue should run.
    pub fn timer(&mut self, generation: u64) -> bool {
        if self.plugged && generation == self.generation {
            self.remove_plug(Unplug::Timer);
            true
        } else {
            false
        }
    }

    /// A request completed at the device; the completion path runs the
    /// queue (`__blk_run_queue` removes the plug).
    pub fn completed(&mut self) {
        self.in_flight = self.in_flight.saturating_sub(1);
        self.remove_plug(Unplug::Completion);
    }

    /// `request_fn`: the next request for the device, if the queue is
    /// unplugged and the device has room. When it has none, the head
    /// request is still prepared (no longer mergeable).
    pub fn next_dispatch(&mut self) -> Option<Request> {
        if self.plugged || self.queued.is_empty() {
            return None;
        }
        if self.in_flight >= self.model.depth {
            self.queued[0].prepared = true;
            return None;
        }
        self.in_flight += 1;
        self.stats.max_in_flight = self.stats.max_in_flight.max(self.in_flight as u64);
        Some(self.queued.remove(0))
    }

    /// Whether requests wait while the queue is plugged.
    #[cfg(test)]
    pub fn is_plugged(&self) -> bool {
        self.plugged
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bio(id: u64, block: u64, pages: usize) -> QueuedBio {
        QueuedBio {
            id,
            op: Op::Read,
            offset: block * 4096,
            len: pages as u64 * 4096,
            pages,
        }
    }

    fn drain(q: &mut RequestQueue) -> Vec<Request> {
        std::iter::from_fn(|| q.next_dispatch()).collect()
    }

    #[test]
    fn contiguous_bios_merge_while_plugged() {
        let mut q = RequestQueue::new(QueueModel::linux_2635_scsi());
        assert!(matches!(
            q.make_request(0, bio(0, 100, 1)),
            Kick::ArmTimer { .. }
        ));
        for (i, b) in (101..108).enumerate() {
            assert_eq!(q.make_request(10, bio(i as u64 + 1, b, 1)), Kick::None);
        }
        assert!(
            q.next_dispatch().is_none(),
            "a plugged queue dispatches nothing"
        );
        assert!(q.unplug());
        let rqs = drain(&mut q);
        assert_eq!(rqs.len(), 1);
        assert_eq!((rqs[0].offset, rqs[0].len), (100 * 4096, 8 * 4096));
        assert_eq!(rqs[0].bios, (0..8).collect::<Vec<_>>());
        assert_eq!(q.stats().back_merges, 7);
    }

    #[test]
    fn front_merge_and_gap_filling_request_merge() {
        let mut q = RequestQueue::new(QueueModel::linux_2635_scsi());
        q.make_request(0, bio(0, 10, 1));
        q.make_request(0, bio(1, 12, 1)); // not contiguous: a second request
        q.make_request(0, bio(2, 9, 1)); // front merge into the first
        q.make_request(0, bio(3, 11, 1)); // back merge, then the two requests join
        q.unplug();
        let rqs = drain(&mut q);
        assert_eq!(rqs.len(), 1);
        assert_eq!((rqs[0].offset / 4096, rqs[0].len / 4096), (9, 4));
        assert_eq!(rqs[0].bios, vec![2, 0, 3, 1]);
        let s = q.stats();
        assert_eq!((s.front_merges, s.back_merges, s.request_merges), (1, 1, 1));
    }

    #[test]
    fn threshold_unplugs_and_no_merge_without_queue() {
        let mut q = RequestQueue::new(QueueModel::linux_2635_scsi());
        let kicks: Vec<_> = (0..4)
            .map(|i| q.make_request(0, bio(i, i * 10, 1)))
            .collect();
        assert!(matches!(kicks[0], Kick::ArmTimer { .. }));
        assert_eq!(
            kicks[3],
            Kick::Run,
            "the fourth request reaches unplug_thresh"
        );
        assert_eq!(drain(&mut q).len(), 4);
        assert_eq!(q.stats().unplug_threshold, 1);
        // With the queue empty again nothing is merged, even a bio
        // contiguous with a dispatched request: it is new and plugs.
        q.make_request(0, bio(9, 31, 1));
        assert!(q.is_plugged());
        q.unplug();
        assert_eq!(drain(&mut q)[0].bios, vec![9]);
    }

    #[test]
    fn limits_and_prepared_head_stop_merging() {
        let m = QueueModel {
            max_request_bytes: 8 * 4096,
            depth: 1,
            ..QueueModel::linux_2635_scsi()
        };
        let mut q = RequestQueue::new(m);
        q.make_request(0, bio(0, 0, 6));
        q.make_request(0, bio(1, 6, 6)); // would exceed 8 pages: new request
        q.unplug();
        let first = q.next_dispatch().unwrap();
        assert_eq!(first.len, 6 * 4096);
        assert!(q.next_dispatch().is_none(), "depth 1 is full");
        // The waiting head is prepared: a contiguous bio may not join it.
        q.make_request(0, bio(2, 12, 1));
        q.completed();
        let rest = drain(&mut q);
        assert_eq!(rest.len(), 1, "depth 1 again full after one dispatch");
        assert_eq!(rest[0].bios, vec![1]);
    }

    #[test]
    fn timer_generations_and_no_plug_queues() {
        let mut q = RequestQueue::new(QueueModel::linux_2635_scsi());
        let Kick::ArmTimer { generation, .. } = q.make_request(0, bio(0, 0, 1)) else {
            panic!("plug expected")
        };
        assert!(q.unplug());
        drain(&mut q);
        q.completed();
        let Kick::ArmTimer { generation: g2, .. } = q.make_request(5, bio(1, 50, 1)) else {
            panic!("plug expected")
        };
        assert!(!q.timer(generation), "a stale timer does nothing");
        assert!(q.timer(g2));
        let mut q = RequestQueue::new(QueueModel {
            plugging: false,
            ..QueueModel::linux_2635_scsi()
        });
        assert_eq!(q.make_request(0, bio(0, 0, 1)), Kick::Run);
    }
}
