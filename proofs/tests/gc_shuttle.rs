//! shuttle: the cleaner against a writer, through the transaction lock
//! (`nilfs::txn::Shared::clean_segments`). One thread runs a cleaning
//! request — read the live blocks, then the locked GC construction that
//! moves them and frees their segments — while another writes a file and
//! syncs. Whatever the schedule: the writer's data survives, the snapshot
//! reads as before, and the moved files read as before. The known-bad rule
//! that lets file operations into the middle of a construction loses data
//! in some schedule, and shuttle must find it (it finds the writer's sync
//! running inside the GC construction's window: both lay out logs from
//! the same cursor, and the snapshot's moved blocks are overwritten).
//!
//! ```text
//! RUSTFLAGS="--cfg shuttle" cargo test -p nilfs-proofs --release \
//!     --target-dir target-shuttle --test gc_shuttle
//! ```
#![cfg(shuttle)]

use std::panic::{catch_unwind, AssertUnwindSafe};

use nilfs::cleaner::{self, ReclaimParams};
use nilfs::device::MemDevice;
use nilfs::format::{ino, Cno};
use nilfs::fs::Fs;
use nilfs::inspect::manifest::manifest;
use nilfs::mkfs::{self, MkfsOptions};
use nilfs::posix::CheckpointView;
use nilfs::sync::{thread, Arc};
use nilfs::the_nilfs::Nilfs;
use nilfs::txn::{GcRule, Shared, TxRule};
use shuttle::scheduler::{PctScheduler, RandomScheduler};
use shuttle::{Config, Runner};

const T0: u64 = 1_800_000_000;

/// The image every schedule starts from (built inside each schedule: the
/// device's locks are shuttle's): files written over several syncs, a
/// snapshot, most files then deleted, so the oldest segments hold live and
/// dead blocks.
fn base() -> &'static MemDevice {
    let dev: &'static MemDevice = Box::leak(Box::new(MemDevice::new(4 << 20)));
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
    dev
}

fn views(dev: &MemDevice) -> (String, String) {
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

fn scenario(rule: TxRule) {
    let dev = base();
    let want = views(dev);
    let nilfs = Nilfs::open(dev).unwrap();
    let mut fs = Fs::mount(&nilfs, T0 + 100).unwrap();
    let w = fs.lookup(ino::ROOT, b"w").unwrap().unwrap();
    let segs = cleaner::select_segments(&mut fs, 0, 2).unwrap();
    let params = ReclaimParams {
        protseq: fs.sustat().unwrap().prot_seq,
        protcno: cleaner::CNO_MAX,
    };
    let (args, _) = cleaner::plan_reclaim(&mut fs, &segs, params).unwrap();
    assert!(!args.vdescs.is_empty() && !args.segnums.is_empty());
    let shared = Arc::new(Shared::new(fs, rule).with_gc_rule(GcRule::ReadBeforeLock));
    let c = shared.clone();
    let cleaner = thread::spawn(move || {
        c.clean_segments(&args).unwrap();
    });
    let s = shared.clone();
    let writer = thread::spawn(move || {
        s.op(|fs| fs.write(w, 0, b"v1")).unwrap();
        s.op(|fs| fs.write(w, 1024, b"w1")).unwrap();
        s.sync().unwrap();
    });
    cleaner.join().unwrap();
    writer.join().unwrap();
    let Ok(shared) = Arc::try_unwrap(shared) else {
        panic!("a thread still holds the mount")
    };
    shared.into_inner().unmount().unwrap();
    let (snap, latest) = views(dev);
    assert!(snap == want.0, "the snapshot changed");
    // The latest tree: as before, except /w, which holds the writer's data.
    let others = |m: &str| -> Vec<String> {
        m.lines()
            .filter(|l| !l.ends_with("  /w"))
            .map(str::to_string)
            .collect()
    };
    assert!(others(&latest) == others(&want.1), "a moved file changed");
    let after = Nilfs::open(dev).unwrap();
    let view = CheckpointView::open(&after, None).unwrap();
    let (_, inode) = view.resolve(b"/w", false).unwrap();
    let mut expect = vec![0u8; 1026];
    expect[..2].copy_from_slice(b"v1");
    expect[1024..].copy_from_slice(b"w1");
    assert!(
        view.read_all(&inode).unwrap() == expect,
        "a write made while the cleaner ran was lost"
    );
}

/// A cleaning request needs more than shuttle's default 60 KiB task stack.
fn big_stacks() -> Config {
    let mut c = Config::new();
    c.stack_size = 8 << 20;
    c
}

fn explore(rule: TxRule) {
    Runner::new(
        PctScheduler::new_from_seed(0x5eed_0000_0000_0001, 3, 200),
        big_stacks(),
    )
    .run(move || scenario(rule));
    for seed in 0..3 {
        Runner::new(RandomScheduler::new_from_seed(seed, 200), big_stacks())
            .run(move || scenario(rule));
    }
}

#[test]
fn the_cleaner_and_a_writer_never_lose_data() {
    explore(TxRule::Exclusive);
}

#[test]
fn an_open_window_in_the_gc_construction_loses_a_write() {
    let caught = catch_unwind(AssertUnwindSafe(|| explore(TxRule::OpenWindow))).is_err();
    assert!(
        caught,
        "shuttle did not find the lost write of the known-bad rule"
    );
}
