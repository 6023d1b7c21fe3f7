//! impl/tests/crash.rs's workload and what judges it, in one place for
//! the test and for the benchmark that times it
//! (tests/benches/throughput.rs, `--part sync`), so the bench measures
//! exactly what the test runs.

use nilfs::device::{BlockDevice, MemDevice};
use nilfs::format::ino;
use nilfs::fs::Fs;
use nilfs::the_nilfs::Nilfs;
use nilfs::Result;

use crate::image;
use crate::pattern::pattern;

/// The image's block size.
pub const BS: u64 = 1024;

/// `pattern(seed, len)`, made once and kept: every cut point's run writes
/// the same contents, and making them byte by byte was a third of a run.
pub fn data(seed: u64, len: usize) -> &'static [u8] {
    static MADE: std::sync::Mutex<std::collections::BTreeMap<(u64, usize), &'static [u8]>> =
        std::sync::Mutex::new(std::collections::BTreeMap::new());
    let mut made = MADE.lock().unwrap_or_else(|e| e.into_inner());
    made.entry((seed, len))
        .or_insert_with(|| Box::leak(pattern(seed, len).into_boxed_slice()))
}

/// A fresh 64 MiB image of 1 KiB blocks and 64-block segments.
pub fn fresh() -> MemDevice {
    image::fresh(64 << 20, BS, 64)
}

/// Every cut image, as the crash left it, must check clean: consistent as
/// of its last super root, with pending data-sync logs reported, not errors.
#[track_caller]
pub fn assert_checks_clean(dev: &dyn BlockDevice) {
    image::assert_checks_clean(dev, "after the cut");
}

/// `nilref check` of the cut image, then the latest tree's manifest.
pub fn latest_manifest(dev: &dyn BlockDevice) -> String {
    assert_checks_clean(dev);
    image::latest_manifest(dev)
}

/// The workload: 27 operations and 4 syncs (the last from unmount's final
/// construction), on a fresh 1 KiB image with 64-block segments. Returns
/// how many syncs completed, also when the device failed.
pub fn workload(dev: &dyn BlockDevice) -> std::result::Result<usize, usize> {
    let synced = std::cell::Cell::new(0usize);
    let r = (|| -> Result<()> {
        let nilfs = Nilfs::open(dev)?;
        let mut fs = Fs::mount(&nilfs, 1_800_000_000)?;
        let a = fs.create(ino::ROOT, b"a", 0o644)?;
        fs.write(a, 0, data(1, 12_000))?;
        let d = fs.mkdir(ino::ROOT, b"d", 0o755)?;
        let b = fs.create(d, b"b", 0o644)?;
        fs.write(b, 0, b"first")?;
        fs.sync()?;
        synced.set(1);
        for n in 0..8 {
            let f = fs.create(d, format!("n{n}").as_bytes(), 0o644)?;
            fs.write(f, 0, data(10 + n, 700))?;
        }
        fs.write(a, 5000, b"overwritten in the middle")?;
        fs.sync()?;
        synced.set(2);
        fs.rename(d, b"b", ino::ROOT, b"b")?;
        fs.unlink(d, b"n3")?;
        fs.truncate(a, 3000)?;
        fs.symlink(ino::ROOT, b"l", b"d/n1")?;
        fs.sync()?;
        synced.set(3);
        let big = fs.create(ino::ROOT, b"big", 0o644)?;
        fs.write(big, 0, data(99, 300_000))?;
        fs.link(a, d, b"a2")?;
        fs.sync()?;
        synced.set(4);
        fs.unmount()?;
        Ok(())
    })();
    match r {
        Ok(()) => Ok(synced.get()),
        Err(_) => Err(synced.get()),
    }
}
