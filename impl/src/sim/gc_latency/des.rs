//! The discrete-event simulation behind [`super::run`]: the recording
//! device and the block layer's merge of a plugged batch, the three
//! threads (the writer, the segment constructor's timer, `nilfs_cleanerd`)
//! and their steps, the transaction lock's shared and exclusive sides, and
//! the disk with CFQ's per-thread queues, time slices and idling.

use std::collections::VecDeque;

use crate::cleaner::{self, ReclaimParams};
use crate::device::sim::{HddModel, SplitMix64};
use crate::device::{BlockDevice, MemDevice};
use crate::format::Ino;
use crate::fs::Fs;
use crate::gc::{move_blocks, CleanArgs, MovedBlocks};
use crate::sync::{lock, Mutex};
use crate::the_nilfs::Nilfs;
use crate::txn::GcRule;
use crate::{Error, Result};

use super::{Cleanerd, Cleaning, Mode, Prepared, Request, RequestSync, Run, Timing, T_RUN};

/// One I/O the file system did.
#[derive(Clone, Copy, Debug)]
struct Io {
    write: bool,
    off: u64,
    len: u64,
}

/// A device that records every request made of it.
struct Recording {
    inner: MemDevice,
    log: Mutex<Vec<Io>>,
}

impl Recording {
    fn take(&self) -> Vec<Io> {
        std::mem::take(&mut *lock(&self.log))
    }
}

impl BlockDevice for Recording {
    fn size_bytes(&self) -> u64 {
        self.inner.size_bytes()
    }
    fn read_at(&self, off: u64, buf: &mut [u8]) -> Result<()> {
        lock(&self.log).push(Io {
            write: false,
            off,
            len: buf.len() as u64,
        });
        self.inner.read_at(off, buf)
    }
    fn write_at(&self, off: u64, buf: &[u8]) -> Result<()> {
        lock(&self.log).push(Io {
            write: true,
            off,
            len: buf.len() as u64,
        });
        self.inner.write_at(off, buf)
    }
    fn flush(&self) -> Result<()> {
        self.inner.flush()
    }
}

/// The block layer's merge of one plugged batch: contiguous requests in
/// the same direction become one, up to `max` bytes.
fn merge(ios: Vec<Io>, max: u64) -> Vec<Io> {
    let mut out: Vec<Io> = Vec::new();
    for io in ios {
        let mut rest = io;
        while rest.len > 0 {
            if let Some(last) = out.last_mut() {
                if last.write == rest.write && last.off + last.len == rest.off && last.len < max {
                    let n = (max - last.len).min(rest.len);
                    last.len += n;
                    rest.off += n;
                    rest.len -= n;
                    continue;
                }
            }
            let n = rest.len.min(max);
            out.push(Io { len: n, ..rest });
            rest.off += n;
            rest.len -= n;
        }
    }
    out
}

// ---------------------------------------------------------------------------
// The discrete-event simulation.

/// The simulated threads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Who {
    Writer = 0,
    Segctor = 1,
    Cleanerd = 2,
}

const WHO: [Who; 3] = [Who::Writer, Who::Segctor, Who::Cleanerd];

/// What a thread does next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Step {
    Shared,
    Exclusive,
    Unlock,
    Sleep(u64),
    /// Functional work with CPU and I/O.
    Work(Job),
    /// Bookkeeping, no time.
    Mark(MarkKind),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Job {
    Write,
    Dsync,
    TimerSync,
    Plan,
    Reads,
    CleanLocked,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum MarkKind {
    RequestStart,
    RequestEnd,
    CleanStart,
    ReadsDone,
    Locked,
    CleanEnd,
}

/// The per-thread program counter.
struct Thread {
    steps: VecDeque<Step>,
    /// When it may run its next step (None: blocked on the lock or disk).
    ready_at: Option<u64>,
    /// The lock mode it holds.
    holds: Option<bool>,
}

/// The elevator and the disk.
struct Disk {
    model: HddModel,
    head: u64,
    busy_until: u64,
    queues: [VecDeque<(u64, Io)>; 3],
    /// The slice owner and when its slice ends.
    owner: Option<(Who, u64)>,
    /// When the owner's last request completed (for idling).
    owner_done: u64,
    /// Requests outstanding per thread's batch.
    outstanding: [usize; 3],
    requests: u64,
    seeks: u64,
}

impl Disk {
    fn service(&mut self, start: u64, io: Io) -> u64 {
        let m = &self.model;
        let mut t = start + m.command_overhead_ns;
        if io.off != self.head {
            t += m.seek_ns(io.off.abs_diff(self.head));
            t += m.rotational_wait_ns(t, io.off);
            self.seeks += 1;
        }
        self.requests += 1;
        let done = t + m.transfer_ns(io.len);
        self.head = io.off + io.len;
        done
    }
}

struct Sim<'p, 'f> {
    t: Timing,
    rule: GcRule,
    mode: Mode,
    conf: Cleanerd,
    prep: &'p Prepared,
    fs: Fs<'f>,
    dev: &'f Recording,
    now: u64,
    threads: [Thread; 3],
    /// Lock: holders (shared count, exclusive) and the FIFO of waiters.
    shared: usize,
    exclusive: bool,
    waiters: VecDeque<(Who, bool)>,
    disk: Disk,
    rng: SplitMix64,
    seq_pos: u64,
    issued: u64,
    current: Option<(Ino, u64)>,
    args: Option<CleanArgs>,
    moved: Option<MovedBlocks>,
    run: Run,
    req_start: u64,
    clean: Option<Cleaning>,
}

impl Sim<'_, '_> {
    fn program_request(&mut self) {
        let th = &mut self.threads[Who::Writer as usize];
        th.steps.extend([
            Step::Mark(MarkKind::RequestStart),
            Step::Shared,
            Step::Work(Job::Write),
            Step::Unlock,
            Step::Exclusive,
            Step::Work(Job::Dsync),
            Step::Unlock,
            Step::Mark(MarkKind::RequestEnd),
        ]);
    }

    fn program_timer(&mut self) {
        let at = self.now + self.t.segctor_interval_ns;
        self.threads[Who::Segctor as usize].steps.extend([
            Step::Sleep(at),
            Step::Exclusive,
            Step::Work(Job::TimerSync),
            Step::Unlock,
        ]);
    }

    fn program_cleaning(&mut self) {
        let at = self.now + self.conf.interval_s * 1_000_000_000;
        let mut s = vec![
            Step::Sleep(at),
            Step::Work(Job::Plan),
            Step::Mark(MarkKind::CleanStart),
        ];
        match self.rule {
            GcRule::ReadBeforeLock => s.extend([
                Step::Work(Job::Reads),
                Step::Mark(MarkKind::ReadsDone),
                Step::Exclusive,
                Step::Mark(MarkKind::Locked),
            ]),
            GcRule::ReadUnderLock => s.extend([
                Step::Exclusive,
                Step::Mark(MarkKind::Locked),
                Step::Work(Job::Reads),
                Step::Mark(MarkKind::ReadsDone),
            ]),
        }
        s.extend([
            Step::Work(Job::CleanLocked),
            Step::Unlock,
            Step::Mark(MarkKind::CleanEnd),
        ]);
        self.threads[Who::Cleanerd as usize].steps.extend(s);
    }

    fn set_fs_time(&mut self) {
        self.fs.set_time(T_RUN + self.now / 1_000_000_000);
    }

    /// Try to grant queued lock requests in FIFO order.
    fn grant(&mut self) {
        while let Some(&(who, excl)) = self.waiters.front() {
            let ok = if excl {
                !self.exclusive && self.shared == 0
            } else {
                !self.exclusive
            };
            if !ok {
                return;
            }
            self.waiters.pop_front();
            if excl {
                self.exclusive = true;
            } else {
                self.shared += 1;
            }
            let th = &mut self.threads[who as usize];
            th.holds = Some(excl);
            th.ready_at = Some(self.now);
        }
    }

    /// Run a job functionally; returns its CPU time and I/O.
    fn job(&mut self, who: Who, job: Job) -> Result<(u64, Vec<Io>)> {
        self.set_fs_time();
        self.dev.take();
        let t = self.t;
        let mut cpu = 0;
        match job {
            Job::Write => {
                let w = &self.prep.workload;
                let per_file = w.file_bytes / w.request_bytes;
                let (f, slot) = match self.mode {
                    Mode::Random => {
                        let r = self.rng.next_u64() % (w.files * per_file);
                        (r / per_file, r % per_file)
                    }
                    Mode::Sequential => {
                        let p = self.seq_pos % (w.files * per_file);
                        self.seq_pos += 1;
                        (p / per_file, p % per_file)
                    }
                };
                let ino = self.prep.files[f as usize];
                let data = vec![0u8; w.request_bytes as usize];
                self.fs.write(ino, slot * w.request_bytes, &data)?;
                self.current = Some((ino, slot));
                cpu += t.write_cpu_ns;
            }
            Job::Dsync => {
                let (ino, _) = self.current.take().expect("a write before its sync");
                match self.prep.workload.sync {
                    RequestSync::DataOnly => self.fs.fdatasync(ino)?,
                    RequestSync::Full => self.fs.fsync(ino)?,
                }
                cpu += t.construct_cpu_ns;
            }
            Job::TimerSync => {
                if self.fs.is_dirty() {
                    self.fs.sync()?;
                    self.run.timer_syncs += 1;
                    cpu += t.construct_cpu_ns;
                }
            }
            Job::Plan => {
                let segs = cleaner::select_segments(
                    &mut self.fs,
                    self.conf.protection_s,
                    self.conf.nsegs,
                )?;
                let params = ReclaimParams {
                    protseq: self.fs.sustat()?.prot_seq,
                    protcno: cleaner::protcno(&mut self.fs, self.conf.protection_s)?,
                };
                let (args, _) = cleaner::plan_reclaim(&mut self.fs, &segs, params)?;
                self.args = (!args.segnums.is_empty()).then_some(args);
                // With use_mmap cleanerd touches only the segments'
                // summaries: a few blocks, not charged.
                self.dev.take();
            }
            Job::Reads => {
                if let Some(a) = &self.args {
                    self.moved = Some(move_blocks(self.dev, 4096, &a.vdescs)?);
                }
            }
            Job::CleanLocked => {
                if let (Some(a), Some(m)) = (self.args.take(), self.moved.take()) {
                    let n = m.len() as u64;
                    self.fs.clean_segments(&a, m)?;
                    if let Some(c) = &mut self.clean {
                        c.moved = n;
                    }
                    cpu += t.construct_cpu_ns;
                }
            }
        }
        let ios = self.dev.take();
        if job == Job::TimerSync && !ios.is_empty() {
            let bytes = ios.iter().filter(|i| i.write).map(|i| i.len).sum();
            self.run.timer_sync_log.push((self.now, bytes));
        }
        cpu += t.block_cpu_ns
            * ios
                .iter()
                .filter(|i| i.write)
                .map(|i| i.len / 4096)
                .sum::<u64>();
        let _ = who;
        Ok((cpu, merge(ios, t.max_request_bytes)))
    }

    fn mark(&mut self, m: MarkKind) {
        let now = self.now;
        match m {
            MarkKind::RequestStart => self.req_start = now,
            MarkKind::RequestEnd => {
                self.run.requests.push(Request {
                    start_ns: self.req_start,
                    latency_ns: now - self.req_start,
                });
                self.issued += 1;
                if self.issued < self.prep.workload.requests {
                    self.program_request();
                }
            }
            MarkKind::CleanStart => {
                self.clean = Some(Cleaning {
                    start_ns: now,
                    read_ns: now,
                    locked_ns: now,
                    end_ns: now,
                    moved: 0,
                });
            }
            MarkKind::ReadsDone => {
                if let Some(c) = &mut self.clean {
                    c.read_ns = now;
                }
            }
            MarkKind::Locked => {
                if let Some(c) = &mut self.clean {
                    c.locked_ns = now;
                }
            }
            MarkKind::CleanEnd => {
                if let Some(mut c) = self.clean.take() {
                    c.end_ns = now;
                    if c.moved > 0 {
                        self.run.cleanings.push(c);
                    }
                }
            }
        }
    }

    /// Advance thread `who` by one step at `now`.
    fn step(&mut self, who: Who) -> Result<()> {
        let i = who as usize;
        let Some(step) = self.threads[i].steps.pop_front() else {
            self.threads[i].ready_at = None;
            return Ok(());
        };
        match step {
            Step::Shared | Step::Exclusive => {
                self.threads[i].ready_at = None;
                self.waiters.push_back((who, step == Step::Exclusive));
                self.grant();
            }
            Step::Unlock => {
                match self.threads[i].holds.take() {
                    Some(true) => self.exclusive = false,
                    Some(false) => self.shared -= 1,
                    None => return Err(Error::Invalid("unlock without a lock".into())),
                }
                self.threads[i].ready_at = Some(self.now);
                self.grant();
            }
            Step::Sleep(at) => self.threads[i].ready_at = Some(at.max(self.now)),
            Step::Mark(m) => {
                self.mark(m);
                self.threads[i].ready_at = Some(self.now);
            }
            Step::Work(job) => {
                let (cpu, ios) = self.job(who, job)?;
                let at = self.now + cpu;
                if ios.is_empty() {
                    self.threads[i].ready_at = Some(at);
                } else {
                    self.threads[i].ready_at = None;
                    self.disk.outstanding[i] = ios.len();
                    for io in ios {
                        self.disk.queues[i].push_back((at, io));
                    }
                }
            }
        }
        // Keep the timer and the cleaner running while the writer works.
        if self.threads[i].steps.is_empty() && self.issued < self.prep.workload.requests {
            match who {
                Who::Segctor => self.program_timer(),
                Who::Cleanerd => self.program_cleaning(),
                Who::Writer => {}
            }
        }
        Ok(())
    }

    /// The elevator, when the disk is free at `now`: serve a request, or
    /// idle for the slice owner until the returned time, or (None) wait for
    /// any arrival.
    fn dispatch(&mut self) -> Option<u64> {
        let now = self.now;
        let arrived = |d: &Disk, w: Who| {
            d.queues[w as usize]
                .front()
                .is_some_and(|&(at, _)| at <= now)
        };
        let mut pick = None;
        if let Some((owner, until)) = self.disk.owner {
            if now < until && arrived(&self.disk, owner) {
                pick = Some(owner);
            } else if now < until
                && self.disk.outstanding[owner as usize] == 0
                && now < self.disk.owner_done + self.t.idle_ns
            {
                // slice_idle: wait a little for the owner's next request.
                return Some(self.disk.owner_done + self.t.idle_ns);
            }
        }
        if pick.is_none() {
            // Round robin from the thread after the owner.
            let start = self.disk.owner.map_or(0, |(o, _)| o as usize + 1);
            for k in 0..3 {
                let w = WHO[(start + k) % 3];
                if arrived(&self.disk, w) {
                    pick = Some(w);
                    self.disk.owner = Some((w, now + self.t.slice_ns));
                    break;
                }
            }
        }
        let w = pick?;
        let (_, io) = self.disk.queues[w as usize].pop_front().expect("arrived");
        let done = self.disk.service(now, io);
        self.disk.busy_until = done;
        let i = w as usize;
        self.disk.outstanding[i] -= 1;
        if self.disk.outstanding[i] == 0 {
            self.threads[i].ready_at = Some(done);
            self.disk.owner_done = done;
        }
        None
    }

    fn go(&mut self) -> Result<()> {
        self.program_request();
        self.program_timer();
        self.program_cleaning();
        let mut disk_wake: Option<u64> = None;
        loop {
            if let Some(w) = WHO.iter().copied().find(|&w| {
                self.threads[w as usize]
                    .ready_at
                    .is_some_and(|t| t <= self.now)
            }) {
                self.step(w)?;
                if w == Who::Writer && self.issued >= self.prep.workload.requests {
                    self.run.total_ns = self.now;
                    return Ok(());
                }
                continue;
            }
            if self.disk.busy_until <= self.now {
                let owner_waiting = self.disk.owner.is_some_and(|(o, _)| {
                    self.disk.queues[o as usize]
                        .front()
                        .is_some_and(|&(at, _)| at <= self.now)
                });
                if disk_wake.is_none_or(|t| self.now >= t) || owner_waiting {
                    disk_wake = self.dispatch();
                    if self.disk.busy_until > self.now {
                        continue;
                    }
                }
            }
            let now = self.now;
            let later = |t: u64| (t > now).then_some(t);
            let threads = self
                .threads
                .iter()
                .filter_map(|t| t.ready_at.and_then(later));
            let arrivals = self
                .disk
                .queues
                .iter()
                .filter_map(|q| q.front().and_then(|&(at, _)| later(at)));
            let next = threads
                .chain(arrivals)
                .chain(later(self.disk.busy_until))
                .chain(disk_wake.and_then(later))
                .min()
                .ok_or_else(|| Error::Invalid("the simulation stalled: nothing can run".into()))?;
            self.now = next;
        }
    }
}

/// One run of `mode` with the cleaner's reads placed by `rule`.
pub fn run(
    prep: &Prepared,
    mode: Mode,
    rule: GcRule,
    conf: Cleanerd,
    timing: Timing,
) -> Result<Run> {
    let dev = Recording {
        inner: prep.dev.duplicate(),
        log: Mutex::new(Vec::new()),
    };
    let nilfs = Nilfs::open(&dev)?;
    let mut fs = Fs::mount(&nilfs, T_RUN)?;
    // The metadata is in the page cache (a 2 GiB file set's fits in RAM).
    fs.detach_metadata_loaders()?;
    // So are the files' B-tree nodes: prepare has just written them.
    for &f in &prep.files {
        let mut off = 0;
        while off < prep.workload.file_bytes {
            fs.read(f, off, 4096)?;
            off += 256 << 10;
        }
    }
    dev.take();
    let mut sim = Sim {
        t: timing,
        rule,
        mode,
        conf,
        prep,
        fs,
        dev: &dev,
        now: 0,
        threads: std::array::from_fn(|_| Thread {
            steps: VecDeque::new(),
            ready_at: Some(0),
            holds: None,
        }),
        shared: 0,
        exclusive: false,
        waiters: VecDeque::new(),
        disk: Disk {
            model: timing.disk,
            head: 0,
            busy_until: 0,
            queues: Default::default(),
            owner: None,
            owner_done: 0,
            outstanding: [0; 3],
            requests: 0,
            seeks: 0,
        },
        rng: SplitMix64::new(prep.workload.seed),
        seq_pos: 0,
        issued: 0,
        current: None,
        args: None,
        moved: None,
        run: Run {
            mode,
            rule,
            requests: Vec::new(),
            cleanings: Vec::new(),
            timer_syncs: 0,
            timer_sync_log: Vec::new(),
            disk_requests: 0,
            disk_seeks: 0,
            total_ns: 0,
        },
        req_start: 0,
        clean: None,
    };
    sim.go()?;
    let mut run = sim.run;
    run.disk_requests = sim.disk.requests;
    run.disk_seeks = sim.disk.seeks;
    Ok(run)
}
