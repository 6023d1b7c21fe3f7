//! shuttle: file operations from one thread while another constructs a
//! checkpoint, through the transaction lock (`nilfs::txn`). Whatever the
//! schedule, the last write must survive to disk: nothing written while a
//! construction runs may be marked clean unwritten. The known-bad rule that
//! lets operations into the middle of a construction loses a write in some
//! schedule, and shuttle must find it.
//!
//! ```text
//! RUSTFLAGS="--cfg shuttle" cargo test -p nilfs-proofs --release \
//!     --target-dir target-shuttle --test fs_shuttle
//! ```
#![cfg(shuttle)]

use std::panic::{catch_unwind, AssertUnwindSafe};

use nilfs::device::MemDevice;
use nilfs::format::ino;
use nilfs::fs::Fs;
use nilfs::mkfs::{self, MkfsOptions};
use nilfs::posix::CheckpointView;
use nilfs::sync::{thread, Arc};
use nilfs::the_nilfs::Nilfs;
use nilfs::txn::{Shared, TxRule};
use shuttle::scheduler::{PctScheduler, RandomScheduler};
use shuttle::{Config, Runner};

fn scenario(rule: TxRule) {
    // Leaked so that the mount can be shared with 'static threads; a few
    // kilobytes per schedule.
    let dev: &'static MemDevice = Box::leak(Box::new(MemDevice::new(4 << 20)));
    mkfs::mkfs(
        dev,
        &MkfsOptions {
            block_size: 1024,
            blocks_per_segment: 16,
            ..Default::default()
        },
    )
    .unwrap();
    let nilfs = Nilfs::open(dev).unwrap();
    let mut fs = Fs::mount(&nilfs, 1_800_000_000).unwrap();
    let f = fs.create(ino::ROOT, b"f", 0o644).unwrap();
    fs.write(f, 0, b"v0").unwrap();
    fs.sync().unwrap();
    let shared = Arc::new(Shared::new(fs, rule));
    let w = shared.clone();
    let writer = thread::spawn(move || {
        w.op(|fs| fs.write(f, 0, b"v1")).unwrap();
        // A second block: if it lands between collection and the write of
        // a construction that took the file, only the lock keeps it.
        w.op(|fs| fs.write(f, 1024, b"w1")).unwrap();
    });
    let s = shared.clone();
    let syncer = thread::spawn(move || {
        s.sync().unwrap();
    });
    writer.join().unwrap();
    syncer.join().unwrap();
    let Ok(shared) = Arc::try_unwrap(shared) else {
        panic!("a thread still holds the mount")
    };
    shared.into_inner().unmount().unwrap();
    let after = Nilfs::open(dev).unwrap();
    let view = CheckpointView::open(&after, None).unwrap();
    let (_, inode) = view.resolve(b"/f", false).unwrap();
    let mut want = vec![0u8; 1026];
    want[..2].copy_from_slice(b"v1");
    want[1024..].copy_from_slice(b"w1");
    assert!(
        view.read_all(&inode).unwrap() == want,
        "a write made during a construction was lost"
    );
}

fn explore(rule: TxRule) {
    Runner::new(
        PctScheduler::new_from_seed(0x5eed_0000_0000_0005, 3, 300),
        Config::new(),
    )
    .run(move || scenario(rule));
    for seed in 0..4 {
        Runner::new(RandomScheduler::new_from_seed(seed, 300), Config::new())
            .run(move || scenario(rule));
    }
}

#[test]
fn writes_during_a_construction_are_never_lost() {
    explore(TxRule::Exclusive);
}

#[test]
fn an_open_window_in_the_construction_loses_a_write() {
    let caught = catch_unwind(AssertUnwindSafe(|| explore(TxRule::OpenWindow))).is_err();
    assert!(
        caught,
        "shuttle did not find the lost write of the known-bad rule"
    );
}
