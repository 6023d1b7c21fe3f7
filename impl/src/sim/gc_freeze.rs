//! Seed 001 on the simulated clock: how long one cleaning request keeps
//! writers out ("nilfs2: shorten freeze period due to GC in write
//! operation"). The request's work splits into reading the live blocks
//! (`nilfs_ioctl_move_blocks`) and the locked part (`nilfs_clean_segments`:
//! preparing, then the GC construction that writes them). Before the
//! patch both ran under the transaction lock; after it only the second
//! does. Each part is timed on the simulated device, so the figures are
//! deterministic.
//!
//! The image is built on an instant device first (a history of writes,
//! overwrites and deletions with a snapshot, so the victims hold live and
//! dead blocks), then mounted on the simulated disk.

use crate::cleaner::{self, ReclaimParams};
use crate::device::sim::SplitMix64;
use crate::device::{BlockDevice, MemDevice, SimConfig, SimDevice};
use crate::format::ino;
use crate::fs::Fs;
use crate::gc::move_blocks;
use crate::mkfs::{self, MkfsOptions};
use crate::the_nilfs::Nilfs;
use crate::Result;

/// One request's figures.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GcFreeze {
    /// Segments the request cleaned.
    pub cleaned_segs: u64,
    /// Live blocks it moved.
    pub moved_blocks: u64,
    /// Simulated time reading them.
    pub read_ns: u64,
    /// Simulated time of the locked part (prepare + GC construction).
    pub locked_ns: u64,
}

impl GcFreeze {
    /// Writers wait this long with the patch (the locked part only).
    pub fn freeze_after_ns(&self) -> u64 {
        self.locked_ns
    }

    /// And this long without it (the reads were locked too).
    pub fn freeze_before_ns(&self) -> u64 {
        self.read_ns + self.locked_ns
    }
}

const T0: u64 = 1_800_000_000;

/// Deterministic file contents.
fn bytes(seed: u64, len: usize) -> Vec<u8> {
    let mut rng = SplitMix64::new(seed);
    (0..len.div_ceil(8))
        .flat_map(|_| rng.next_u64().to_le_bytes())
        .take(len)
        .collect()
}

/// The image: 4 KiB blocks, 2 MiB segments; rounds of 64 files of 64 KiB,
/// each round deleting most of the one before and overwriting the rest,
/// a snapshot early on.
fn build(rounds: u64) -> Result<MemDevice> {
    let dev = MemDevice::new(512 << 20);
    mkfs::mkfs(
        &dev,
        &MkfsOptions {
            block_size: 4096,
            blocks_per_segment: 512,
            ..MkfsOptions::default()
        },
    )?;
    let nilfs = Nilfs::open(&dev)?;
    let mut fs = Fs::mount(&nilfs, T0)?;
    for r in 0..rounds {
        fs.set_time(T0 + r);
        for k in 0..64u64 {
            let f = fs.create(ino::ROOT, format!("r{r}-{k}").as_bytes(), 0o644)?;
            fs.write(f, 0, &bytes(r * 64 + k, 64 << 10))?;
        }
        if r > 0 {
            for k in 0..48u64 {
                fs.unlink(ino::ROOT, format!("r{}-{k}", r - 1).as_bytes())?;
            }
            for k in 48..64u64 {
                let f = fs
                    .lookup(ino::ROOT, format!("r{}-{k}", r - 1).as_bytes())?
                    .expect("kept");
                fs.write(f, 8192, &bytes(r + 7, 16 << 10))?;
            }
        }
        fs.sync()?;
        if r == 1 {
            fs.mkcp(true)?;
        }
    }
    fs.unmount()?;
    Ok(dev)
}

/// One cleaning request of `nsegs` segments (cleanerd's
/// `nsegments_per_clean`; the seed's configuration used 2) on the image
/// mounted on a simulated device configured by `config`.
pub fn run(config: SimConfig, nsegs: usize) -> Result<GcFreeze> {
    let image = build(12)?;
    let dev = SimDevice::new(Box::new(image), config)?;
    let nilfs = Nilfs::open(&dev)?;
    let mut fs = Fs::mount(&nilfs, T0 + 100)?;
    let segs = cleaner::select_segments(&mut fs, 0, nsegs)?;
    let params = ReclaimParams {
        protseq: fs.sustat()?.prot_seq,
        protcno: cleaner::CNO_MAX,
    };
    let (args, stat) = cleaner::plan_reclaim(&mut fs, &segs, params)?;
    // Once per mount, outside the lock (see Fs::detach_metadata_loaders).
    fs.detach_metadata_loaders()?;
    let t0 = dev.now_ns();
    let moved = move_blocks(&dev, 4096, &args.vdescs)?;
    let t1 = dev.now_ns();
    fs.clean_segments(&args, moved)?;
    dev.flush()?;
    let t2 = dev.now_ns();
    fs.unmount()?;
    Ok(GcFreeze {
        cleaned_segs: stat.cleaned_segs,
        moved_blocks: stat.live_vblks + stat.live_pblks,
        read_ns: t1 - t0,
        locked_ns: t2 - t1,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_moves_live_blocks_and_both_parts_take_time() {
        let f = run(SimConfig::hdd_2010(), 2).unwrap();
        assert_eq!(f.cleaned_segs, 2, "{f:?}");
        assert!(f.moved_blocks > 0, "{f:?}");
        assert!(f.read_ns > 0 && f.locked_ns > 0, "{f:?}");
    }
}
