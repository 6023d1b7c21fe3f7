//! Seed 001's scenarios, shared by `gc_loom.rs` and `gc_flag_shuttle.rs`:
//! cleaning requests (`nilfs::txn::Shared::clean_segments`) against each
//! other and against a writer, on a real mounted file system. The same code
//! runs under both checkers: it names threads and primitives only through
//! `nilfs::sync`.
//!
//! What the checkers interleave is the request's protocol — the request's
//! buffers, `THE_NILFS_GC_RUNNING`, the transaction lock and the file system
//! mutex — not the device: [`StdMem`] keeps its blocks under a std mutex the
//! checkers do not see, so each block read or write is one atomic step (as
//! `MemDevice`'s own mutex makes it). That keeps a whole GC construction a
//! handful of scheduling points, and each model small enough to explore
//! exhaustively within the preemption bound.
//!
//! Every execution starts from the same image ([`Lab`]): built once, in a
//! one-execution run of the checker (the file system's own locks are the
//! checker's), then copied back into the device before each execution.

use std::collections::BTreeMap;
use std::sync::Mutex as StdMutex;

use nilfs::cleaner::{self, ReclaimParams};
use nilfs::device::{check_range, BlockDevice};
use nilfs::format::{ino, BlockNr, Cno, Ino, SegNum};
use nilfs::fs::Fs;
use nilfs::gc::CleanArgs;
use nilfs::inspect::manifest::manifest;
use nilfs::mkfs::{self, MkfsOptions};
use nilfs::posix::CheckpointView;
use nilfs::sync::{thread, Arc, StdArc};
use nilfs::the_nilfs::Nilfs;
use nilfs::txn::{GcFlagRule, GcObserver, GcRule, GcStep, Shared, TxRule};
use nilfs::{Errno, Error};

const T0: u64 = 1_800_000_000;
const DEV_BYTES: u64 = 4 << 20;
const CHUNK: u64 = 1024;

/// A sparse in-memory device whose lock the model checkers do not see.
/// A read of the `pause` block (the first block a cleaning request moves)
/// yields to the checker first, so that other threads can run while the
/// request is inside its source-block reads.
pub struct StdMem {
    chunks: StdMutex<BTreeMap<u64, Box<[u8]>>>,
    pause: StdMutex<Option<u64>>,
}

impl StdMem {
    fn new() -> Self {
        StdMem {
            chunks: StdMutex::new(BTreeMap::new()),
            pause: StdMutex::new(None),
        }
    }

    fn contents(&self) -> BTreeMap<u64, Box<[u8]>> {
        self.chunks.lock().unwrap().clone()
    }

    fn restore(&self, from: &BTreeMap<u64, Box<[u8]>>) {
        *self.chunks.lock().unwrap() = from.clone();
    }
}

impl BlockDevice for StdMem {
    fn size_bytes(&self) -> u64 {
        DEV_BYTES
    }

    fn read_at(&self, off: u64, buf: &mut [u8]) -> nilfs::Result<()> {
        check_range(DEV_BYTES, off, buf.len())?;
        let pause = *self.pause.lock().unwrap();
        if pause == Some(off / CHUNK) {
            thread::yield_now();
        }
        let chunks = self.chunks.lock().unwrap();
        for (k, part) in buf.chunks_mut(CHUNK as usize).enumerate() {
            match chunks.get(&(off / CHUNK + k as u64)) {
                Some(c) => part.copy_from_slice(&c[..part.len()]),
                None => part.fill(0),
            }
        }
        Ok(())
    }

    fn write_at(&self, off: u64, buf: &[u8]) -> nilfs::Result<()> {
        check_range(DEV_BYTES, off, buf.len())?;
        // Every request here is in whole 1 KiB blocks (the image's block size).
        assert!(off.is_multiple_of(CHUNK) && (buf.len() as u64).is_multiple_of(CHUNK));
        let mut chunks = self.chunks.lock().unwrap();
        for (k, part) in buf.chunks(CHUNK as usize).enumerate() {
            chunks.insert(off / CHUNK + k as u64, part.into());
        }
        Ok(())
    }

    fn flush(&self) -> nilfs::Result<()> {
        Ok(())
    }
}

/// The image every execution starts from, and what is known about it.
pub struct Base {
    chunks: BTreeMap<u64, Box<[u8]>>,
    /// A cleaning request for the two oldest reclaimable segments, planned
    /// on the mounted image (cleanerd's `nsegments_per_clean 2`).
    args: CleanArgs,
    /// The snapshot's manifest and the latest checkpoint's.
    want: (String, String),
    /// The file the writer writes.
    w: Ino,
}

/// Files written over several syncs, a snapshot, most files then deleted:
/// the oldest segments hold live and dead blocks, some of them the
/// snapshot's. (The image of `gc_shuttle.rs`.)
fn build(dev: &StdMem) -> Base {
    mkfs::mkfs(
        dev,
        &MkfsOptions {
            block_size: 1024,
            blocks_per_segment: 32,
            ..Default::default()
        },
    )
    .unwrap();
    {
        let nilfs = Nilfs::open(dev).unwrap();
        let mut fs = Fs::mount(&nilfs, T0).unwrap();
        for r in 0..6u64 {
            fs.set_time(T0 + r);
            for k in 0..4u64 {
                let f = fs
                    .create(ino::ROOT, format!("r{r}-{k}").as_bytes(), 0o644)
                    .unwrap();
                let data: Vec<u8> = (0..6000)
                    .map(|i| (i as u64 * 7 + r * 13 + k) as u8)
                    .collect();
                fs.write(f, 0, &data).unwrap();
            }
            if r > 0 {
                for k in 0..3u64 {
                    fs.unlink(ino::ROOT, format!("r{}-{k}", r - 1).as_bytes())
                        .unwrap();
                }
            }
            fs.sync().unwrap();
            if r == 1 {
                fs.mkcp(true).unwrap();
            }
        }
        let f = fs.create(ino::ROOT, b"w", 0o644).unwrap();
        fs.write(f, 0, b"v0").unwrap();
        fs.unmount().unwrap();
    }
    let want = views(dev);
    let chunks = dev.contents();
    let nilfs = Nilfs::open(dev).unwrap();
    let mut fs = Fs::mount(&nilfs, T0 + 100).unwrap();
    let w = fs.lookup(ino::ROOT, b"w").unwrap().unwrap();
    let segs = cleaner::select_segments(&mut fs, 0, 2).unwrap();
    let params = ReclaimParams {
        protseq: fs.sustat().unwrap().prot_seq,
        protcno: cleaner::CNO_MAX,
    };
    let (args, _) = cleaner::plan_reclaim(&mut fs, &segs, params).unwrap();
    assert!(!args.vdescs.is_empty() && args.segnums.len() == 2);
    drop(fs);
    Base {
        chunks,
        args,
        want,
        w,
    }
}

fn views(dev: &dyn BlockDevice) -> (String, String) {
    let nilfs = Nilfs::open(dev).unwrap();
    let snap = nilfs
        .checkpoints(Cno(1))
        .unwrap()
        .into_iter()
        .find(|c| c.is_snapshot())
        .expect("the snapshot");
    let s = manifest(&CheckpointView::open(&nilfs, Some(snap.cno)).unwrap()).unwrap();
    let l = manifest(&CheckpointView::open(&nilfs, None).unwrap()).unwrap();
    (s, l)
}

/// A device and the image it is reset to before each execution.
pub struct Lab {
    dev: StdMem,
    base: Base,
}

impl Lab {
    /// Build the image. Call it inside a one-execution run of the checker
    /// (the file system's locks are the checker's), then leak the result:
    /// every execution's threads borrow it.
    pub fn build() -> Lab {
        let dev = StdMem::new();
        let base = build(&dev);
        *dev.pause.lock().unwrap() = Some(base.args.vdescs[0].blocknr.0);
        Lab { dev, base }
    }

    /// Reset the device, mount, and share the mount with `config`.
    fn mount(
        &'static self,
        tx: TxRule,
        config: impl FnOnce(Shared<'static>) -> Shared<'static>,
    ) -> Mounted {
        self.dev.restore(&self.base.chunks);
        // The mount borrows only the device, which outlives every execution
        // (it is reused), so it can be shared with 'static threads.
        let nilfs = Nilfs::open(&self.dev).unwrap();
        let fs = Fs::mount(&nilfs, T0 + 100).unwrap();
        let log = StdArc::new(StdMutex::new(Vec::new()));
        let l = log.clone();
        let observer: GcObserver = StdArc::new(move |step| {
            let who = thread::current().name().unwrap_or("main").to_string();
            l.lock().unwrap().push((who, step));
        });
        let shared = config(Shared::new(fs, tx).with_gc_observer(observer));
        Mounted {
            shared: Arc::new(shared),
            log,
        }
    }

    /// The request with a source block outside the device: refused by
    /// the reads (EINVAL), before anything is locked.
    fn bad_reads(&self) -> CleanArgs {
        let mut a = self.base.args.clone();
        a.vdescs[0].blocknr = BlockNr(DEV_BYTES / CHUNK + 5);
        a
    }

    /// The request with a segment number out of range: refused under the
    /// exclusive side, after the reads (EINVAL).
    fn bad_locked(&self) -> CleanArgs {
        let mut a = self.base.args.clone();
        a.segnums.push(SegNum(1 << 20));
        a
    }
}

type Log = StdArc<StdMutex<Vec<(String, GcStep)>>>;

struct Mounted {
    shared: Arc<Shared<'static>>,
    log: Log,
}

impl Mounted {
    fn finish(self, lab: &Lab) -> (String, String) {
        let Mounted { shared, .. } = self;
        let Ok(shared) = Arc::try_unwrap(shared) else {
            panic!("a thread still holds the mount")
        };
        shared.into_inner().unmount().unwrap();
        views(&lab.dev)
    }
}

/// The steps as a schedule, one per line.
fn schedule(log: &Log) -> String {
    log.lock()
        .unwrap()
        .iter()
        .map(|(who, s)| format!("    {who}: {s:?}"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The first moment two requests held `THE_NILFS_GC_RUNNING` at once.
fn both_inside(log: &Log) -> Option<usize> {
    let mut inside: Vec<&str> = Vec::new();
    for (i, (who, s)) in log.lock().unwrap().iter().enumerate() {
        match s {
            GcStep::Claimed => {
                inside.push(who);
                if inside.len() > 1 {
                    return Some(i);
                }
            }
            GcStep::Released => inside.retain(|w| w != who),
            _ => {}
        }
    }
    None
}

/// Whether some request is inside its source-block reads right now.
fn reading(log: &Log) -> bool {
    let mut r = false;
    for (_, s) in log.lock().unwrap().iter() {
        match s {
            GcStep::Reading => r = true,
            GcStep::Read => r = false,
            _ => {}
        }
    }
    r
}

/// Stack of each modelled thread.
pub const THREAD_STACK: usize = 8 << 20;

fn spawn<T: Send + 'static>(
    name: &str,
    f: impl FnOnce() -> T + Send + 'static,
) -> thread::JoinHandle<T> {
    // A cleaning request runs the whole construction path on this stack;
    // the model checkers' default coroutine stacks are smaller than that
    // path needs (it overflowed once Fs grew).
    thread::Builder::new()
        .name(name.to_string())
        .stack_size(THREAD_STACK)
        .spawn(f)
        .unwrap()
}

fn errno(r: &nilfs::Result<Option<Cno>>) -> Option<Errno> {
    match r {
        Ok(_) => None,
        Err(Error::Errno { errno, .. }) => Some(*errno),
        Err(e) => panic!("a cleaning request failed without an errno: {e}"),
    }
}

/// Two cleaning requests both inside: the schedule, and whether it is an
/// interleaving (both tested the flag before either set it) or a stale
/// read (the second tested after the first had set it, and read it
/// clear: allowed by the memory model, since `test_bit` and `set_bit`
/// order nothing).
pub struct BothInside {
    pub schedule: String,
    pub interleaved: bool,
}

/// Two cleaning requests for the same segments at once (cleanerd and a
/// `nilfs-clean` run). Never both inside: each gets EBUSY, or runs alone —
/// the later one on a plan the earlier one made stale, which must be
/// refused or harmless. Afterwards the flag is clear and the snapshot and the latest tree read as before. Returns (instead
/// of checking the rest) when both got inside.
pub fn two_requests(lab: &'static Lab, flag: GcFlagRule) -> Option<BothInside> {
    let m = lab.mount(TxRule::Exclusive, |s| s.with_gc_flag_rule(flag));
    let run = |name: &str| {
        let s = m.shared.clone();
        let args = lab.base.args.clone();
        spawn(name, move || s.clean_segments(&args))
    };
    let a = run("cleaner-1");
    let b = run("cleaner-2");
    let (ra, rb) = (a.join().unwrap(), b.join().unwrap());
    if let Some(at) = both_inside(&m.log) {
        let log = m.log.lock().unwrap();
        let first = |who: &str, step| log.iter().position(|(w, s)| w == who && *s == step);
        let (second, _) = &log[at];
        let other = if second == "cleaner-1" {
            "cleaner-2"
        } else {
            "cleaner-1"
        };
        let interleaved = first(second, GcStep::Tested) < first(other, GcStep::Claimed);
        drop(log);
        return Some(BothInside {
            schedule: format!(
                "both cleaning requests inside at step {}; the schedule:\n{}",
                at + 1,
                schedule(&m.log)
            ),
            interleaved,
        });
    }
    assert!(
        ra.is_ok() || rb.is_ok(),
        "neither request ran: {ra:?} {rb:?}"
    );
    for r in [&ra, &rb] {
        if let Some(e) = errno(r) {
            assert!(
                matches!(e, Errno::EBUSY | Errno::EINVAL | Errno::ENOENT),
                "{r:?}"
            );
        }
    }
    assert!(
        !m.shared.gc_running(),
        "THE_NILFS_GC_RUNNING left set ({ra:?}, {rb:?}); the schedule:\n{}",
        schedule(&m.log)
    );
    // (Whether the buffers came back is resources_on_every_path's check.)
    let (snap, latest) = m.finish(lab);
    assert!(snap == lab.base.want.0, "the snapshot changed");
    assert!(latest == lab.base.want.1, "the latest tree changed");
    None
}

/// A cleaning request against a writer that writes two blocks of `/w`
/// and syncs. The writer never waits for the cleaner's source-block reads
/// (it tries first; only a held exclusive side may make it wait, and then
/// not for reads); no write is lost, the snapshot and the moved files read
/// as before.
pub fn cleaner_vs_writer(lab: &'static Lab, tx: TxRule, gc: GcRule) {
    let m = lab.mount(tx, |s| s.with_gc_rule(gc));
    let c = m.shared.clone();
    let args = lab.base.args.clone();
    let cleaner = spawn("cleaner", move || c.clean_segments(&args));
    let s = m.shared.clone();
    let log = m.log.clone();
    let w = lab.base.w;
    let writer = spawn("writer", move || {
        for (off, data) in [(0u64, &b"v1"[..]), (1024, &b"w1"[..])] {
            let op = |fs: &mut Fs<'static>| fs.write(w, off, data).map(|_| ());
            match s.try_op(op) {
                Some(r) => r.unwrap(),
                None => {
                    assert!(
                        !reading(&log),
                        "the writer waited for the cleaner's source-block reads; the schedule:\n{}",
                        schedule(&log)
                    );
                    s.op(op).unwrap();
                }
            }
        }
        s.sync().unwrap();
    });
    cleaner.join().unwrap().unwrap();
    writer.join().unwrap();
    let (snap, latest) = m.finish(lab);
    assert!(snap == lab.base.want.0, "the snapshot changed");
    let others = |m: &str| -> Vec<String> {
        m.lines()
            .filter(|l| !l.ends_with("  /w"))
            .map(str::to_string)
            .collect()
    };
    assert!(
        others(&latest) == others(&lab.base.want.1),
        "a moved file changed"
    );
    let nilfs = Nilfs::open(&lab.dev).unwrap();
    let view = CheckpointView::open(&nilfs, None).unwrap();
    let (_, inode) = view.resolve(b"/w", false).unwrap();
    let mut expect = vec![0u8; 1026];
    expect[..2].copy_from_slice(b"v1");
    expect[1024..].copy_from_slice(b"w1");
    assert!(
        view.read_all(&inode).unwrap() == expect,
        "a write made while the cleaner ran was lost"
    );
}

/// Which way the second thread's request fails.
#[derive(Clone, Copy, Debug)]
pub enum Failing {
    /// In the source-block reads (EINVAL), before any lock.
    Reads,
    /// Under the exclusive side (EINVAL), after the reads.
    Locked,
}

/// A good request against one that fails (`failing`): every request ends
/// in success, EBUSY or its EINVAL, and on every path its resources are
/// returned — afterwards no buffer is held, the flag is clear (a new
/// request is not EBUSY), and the transaction lock is free (a sync runs).
pub fn resources_on_every_path(lab: &'static Lab, flag: GcFlagRule, failing: Failing) {
    let m = lab.mount(TxRule::Exclusive, |s| s.with_gc_flag_rule(flag));
    let good = lab.base.args.clone();
    let bad = match failing {
        Failing::Reads => lab.bad_reads(),
        Failing::Locked => lab.bad_locked(),
    };
    let s = m.shared.clone();
    let a = spawn("good", move || s.clean_segments(&good));
    let s = m.shared.clone();
    let b0 = bad.clone();
    let b = spawn("failing", move || s.clean_segments(&b0));
    let (ra, rb) = (a.join().unwrap(), b.join().unwrap());
    assert!(matches!(errno(&ra), None | Some(Errno::EBUSY)), "{ra:?}");
    assert!(
        matches!(errno(&rb), Some(Errno::EBUSY | Errno::EINVAL)),
        "{rb:?}"
    );
    assert_eq!(
        m.shared.gc_buffer_bytes(),
        0,
        "a request's buffers leaked (good: {:?}, failing: {:?}); the schedule:\n{}",
        errno(&ra),
        errno(&rb),
        schedule(&m.log)
    );
    assert!(!m.shared.gc_running(), "THE_NILFS_GC_RUNNING left set");
    // The lock is free: a construction can take the exclusive side.
    m.shared.sync().unwrap();
    // The flag is free: a new request gets past it (to its own EINVAL).
    assert_eq!(errno(&m.shared.clean_segments(&bad)), Some(Errno::EINVAL));
    assert_eq!(m.shared.gc_buffer_bytes(), 0);
    let (snap, _) = m.finish(lab);
    assert!(snap == lab.base.want.0, "the snapshot changed");
}
