//! The corruption generator behind `nilref check`'s corpus: the recipes,
//! locating and resealing are `nilfs::corrupt`'s (the hostile-image
//! campaign of the `nilref` tool uses them too); the base images the corpus
//! damages and the seeded random damage live here, with the tests'
//! helpers they use.

pub use nilfs::corrupt::*;

use nilfs::device::{BlockDevice, MemDevice};
use nilfs::format::segsum;
use nilfs::the_nilfs::Nilfs;

type R<T> = std::result::Result<T, String>;

fn s<E: std::fmt::Display>(e: E) -> String {
    e.to_string()
}

/// Flip `n` random bytes (seeded) in the metadata inside the logs of
/// `dev` (summaries, super roots, B-tree nodes, blocks of the DAT, cpfile,
/// sufile and ifile, directory blocks of the root), then reseal every log
/// touched: hostile input that passes the checksums. Returns the blocks hit.
pub fn damage_random(dev: &dyn BlockDevice, seed: u64, n: usize) -> R<Vec<u64>> {
    let logs = log_ranges(dev)?;
    let bs = block_size(dev)?;
    let mut cands: Vec<(u64, (u64, u64))> = Vec::new();
    for &(p, len) in &logs {
        let mut log = vec![0u8; (len * bs) as usize];
        dev.read_at(p * bs, &mut log).map_err(s)?;
        let Ok(sum) = segsum::Summary::decode(&log, bs as u32) else {
            continue;
        };
        for b in 0..u64::from(sum.nsumblk(bs as u32)) {
            cands.push((p + b, (p, len)));
        }
        if let Some(i) = sum.super_root_index() {
            cands.push((p + i, (p, len)));
        }
        for e in sum.block_entries(bs as u32) {
            if !e.binfo.is_data() || (2..=6).contains(&e.ino.0) {
                cands.push((p + e.index, (p, len)));
            }
        }
    }
    if cands.is_empty() {
        return Err("no metadata blocks".into());
    }
    let mut rng = nilfs_testkit::Xorshift::spread(seed);
    let mut next = move || rng.next();
    let mut hit = Vec::new();
    let mut touched = Vec::new();
    for _ in 0..n {
        let (pbn, log) = cands[(next() % cands.len() as u64) as usize];
        // Mostly the first bytes, where headers and early entries are.
        let off = if next() % 2 == 0 {
            next() % 128
        } else {
            next() % bs
        };
        let byte = pbn * bs + off;
        let sector = byte - byte % 512;
        let mut b = vec![0u8; 512];
        dev.read_at(sector, &mut b).map_err(s)?;
        b[(byte - sector) as usize] ^= (next() % 255 + 1) as u8;
        dev.write_at(sector, &b).map_err(s)?;
        hit.push(pbn);
        if !touched.contains(&log) {
            touched.push(log);
        }
    }
    for (p, len) in touched {
        // A damaged header may no longer decode: leave that log as it is.
        let _ = reseal_log(dev, p, len, false);
    }
    Ok(hit)
}

// --- base images ----------------------------------------------------------

/// The base images the corpus damages, by name.
pub const BASES: &[&str] = &["mkfs", "ours", "kernel", "rollforward", "wide"];

/// Build base image `name`.
pub fn base(name: &str) -> R<MemDevice> {
    use nilfs::fs::Fs;
    use nilfs::mkfs::{mkfs, MkfsOptions};
    let fresh = |size: u64, bs: u64, bps: u64| -> R<MemDevice> {
        let dev = MemDevice::new(size);
        mkfs(
            &dev,
            &MkfsOptions {
                block_size: bs,
                blocks_per_segment: bps,
                ..Default::default()
            },
        )
        .map_err(s)?;
        Ok(dev)
    };
    let root = nilfs::format::ino::ROOT;
    match name {
        "mkfs" => fresh(24 << 20, 4096, 256),
        "ours" => {
            let dev = fresh(16 << 20, 1024, 256)?;
            {
                let nilfs = Nilfs::open(&dev).map_err(s)?;
                let mut fs = Fs::mount(&nilfs, 1_800_000_000).map_err(s)?;
                let small = fs.create(root, b"small", 0o644).map_err(s)?;
                fs.write(small, 0, b"hello, nilfs\n").map_err(s)?;
                let big = fs.create(root, b"big", 0o644).map_err(s)?;
                let data: Vec<u8> = (0..400 * 1024u32).map(|i| (i * 7 % 251) as u8).collect();
                fs.write(big, 0, &data).map_err(s)?;
                let d = fs.mkdir(root, b"d", 0o755).map_err(s)?;
                let sub = fs.mkdir(d, b"sub", 0o755).map_err(s)?;
                for n in 0..40 {
                    let f = fs
                        .create(d, format!("file-{n:02}").as_bytes(), 0o644)
                        .map_err(s)?;
                    fs.write(f, 0, format!("entry {n}\n").as_bytes())
                        .map_err(s)?;
                }
                let leaf = fs.create(sub, b"leaf", 0o600).map_err(s)?;
                fs.write(leaf, 0, b"leaf\n").map_err(s)?;
                fs.link(small, d, b"hard").map_err(s)?;
                fs.symlink(root, b"link", b"small").map_err(s)?;
                fs.sync().map_err(s)?;
                fs.mkcp(true).map_err(s)?;
                fs.set_time(1_800_000_100);
                fs.write(big, 100 * 1024, b"OVERWRITE").map_err(s)?;
                fs.unlink(d, b"file-07").map_err(s)?;
                fs.write(small, 13, b"more\n").map_err(s)?;
                fs.unmount().map_err(s)?;
            }
            Ok(dev)
        }
        "wide" => {
            // Many small segments: the writer ends up in the sufile's
            // second block.
            let dev = fresh(4 << 20, 1024, 16)?;
            {
                let nilfs = Nilfs::open(&dev).map_err(s)?;
                let mut fs = Fs::mount(&nilfs, 1_800_000_000).map_err(s)?;
                let f = fs.create(root, b"f", 0o644).map_err(s)?;
                fs.write(f, 0, &vec![0x33; 1200 << 10]).map_err(s)?;
                fs.unmount().map_err(s)?;
            }
            Ok(dev)
        }
        "kernel" => nilfs::device::import_image(&nilfs_testkit::fixture::image_xz()).map_err(s),
        "rollforward" => {
            let dev = fresh(16 << 20, 1024, 64)?;
            {
                let nilfs = Nilfs::open(&dev).map_err(s)?;
                let mut fs = Fs::mount(&nilfs, 1_800_000_000).map_err(s)?;
                let f = fs.create(root, b"f", 0o644).map_err(s)?;
                fs.write(f, 0, &[0x5A; 10_000]).map_err(s)?;
                fs.fdatasync(f).map_err(s)?;
                fs.write(f, 100, &[0xAB; 100]).map_err(s)?;
                fs.fdatasync(f).map_err(s)?; // an SS_SYNDT log
                                             // Crash: dropped without unmounting.
            }
            Ok(dev)
        }
        other => Err(format!("unknown base image {other}")),
    }
}
