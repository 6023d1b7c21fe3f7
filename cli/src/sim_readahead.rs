//! `nilref sim readahead IMAGE PATH`: seed 000's benchmark. A simulated
//! `dd bs=1M` of the file PATH of IMAGE (written by the Linux kernel: see
//! scripts/bench-readahead.sh) on the simulated 2010 SCSI disk and Intel SSD,
//! B-tree sibling read-ahead off and on. Each device model is calibrated on
//! the seed's read-ahead-off figure only (one parameter, by bisection); the
//! read-ahead-on figure is a prediction. A second table repeats the
//! calibration with another parameter of each device, to show how much the
//! prediction depends on which one is tuned. The model is
//! `nilfs::sim::readahead`; the figures are in docs/seeds/000-readahead.md.

use std::fmt::Write as _;
use std::path::Path;

use nilfs::device::{BlockDevice, FileDevice, SimConfig};
use nilfs::posix::cached::ReadParams;
use nilfs::sim::readahead::{calibrate, Calibration, DdRun, Knob, SEED_HDD, SEED_SSD};

/// Run the benchmark on `image`'s file `path`; the report as text.
pub fn run(image: &Path, path: &str) -> Result<String, String> {
    let img = image.to_path_buf();
    let open = move || -> nilfs::Result<Box<dyn BlockDevice>> {
        Ok(Box::new(FileDevice::open_read_only(&img)?))
    };
    let params = ReadParams::default();
    let cal = |base: &SimConfig, knob: Knob, target: f64| {
        calibrate(&open, base, knob, target, path.as_bytes(), params)
            .map_err(|e| format!("{}: {e}", image.display()))
    };
    // Main: the parameter whose fitted value stays plausible for the
    // hardware (see docs/seeds/000-readahead.md); the others for sensitivity.
    let main = [
        (
            "HDD",
            cal(&SimConfig::hdd_2010(), Knob::HddMediaRate, SEED_HDD.0)?,
            SEED_HDD,
        ),
        (
            "SSD",
            cal(&SimConfig::ssd_2010(), Knob::SsdReadBandwidth, SEED_SSD.0)?,
            SEED_SSD,
        ),
    ];
    let alt = [
        (
            "HDD",
            cal(&SimConfig::hdd_2010(), Knob::HddCommandOverhead, SEED_HDD.0)?,
            SEED_HDD,
        ),
        (
            "HDD",
            cal(&SimConfig::hdd_2010(), Knob::HddMinSeek, SEED_HDD.0)?,
            SEED_HDD,
        ),
        (
            "SSD",
            cal(&SimConfig::ssd_2010(), Knob::SsdReadLatency, SEED_SSD.0)?,
            SEED_SSD,
        ),
    ];
    let mut out = String::new();
    let bytes = main[0].1.off.bytes;
    let _ = writeln!(
        out,
        "seed 000: dd bs=1M of {path} ({bytes} bytes) from {}",
        image.display()
    );
    let _ = writeln!(
        out,
        "read path: 128 KiB read-ahead window, mdt read-ahead {} blocks, copy {} ns/block, {} ns per B-tree read-ahead submission",
        params.mdt_ra_blocks, params.copy_ns_per_block, params.ra_submit_cpu_ns
    );
    let _ = writeln!(out);
    let _ = writeln!(out, "calibrated on the read-ahead-off figure (main):");
    table(&mut out, &main);
    let _ = writeln!(out);
    let _ = writeln!(
        out,
        "sensitivity: the same calibration, tuning another parameter instead:"
    );
    table(&mut out, &alt);
    Ok(out)
}

fn table(out: &mut String, rows: &[(&str, Calibration, (f64, f64))]) {
    let _ = writeln!(
        out,
        "{:<4} {:<30} {:>12} {:>12} {:<3} {:>8} {:>8} {:>7} {:>6} {:>6} {:>6} {:>6} {:>6}",
        "dev",
        "tuned parameter",
        "default",
        "chosen",
        "ra",
        "sim MB/s",
        "seed",
        "bios",
        "seeks",
        "node",
        "nodeRA",
        "dat",
        "waits"
    );
    for (dev, c, seed) in rows {
        for (run, seed_v, tag) in [(&c.off, seed.0, "fit"), (&c.on, seed.1, "predicted")] {
            line(out, dev, c, run, seed_v, tag);
        }
    }
}

fn line(out: &mut String, dev: &str, c: &Calibration, r: &DdRun, seed: f64, tag: &str) {
    let ra = match r.readahead {
        nilfs::bmap::readahead::ReadAhead::On => "on",
        nilfs::bmap::readahead::ReadAhead::Off => "off",
    };
    let _ = writeln!(
        out,
        "{:<4} {:<30} {:>12} {:>12} {:<3} {:>8.1} {:>8.1} {:>7} {:>6} {:>6} {:>6} {:>6} {:>6}  ({tag})",
        dev,
        c.knob.describe(),
        c.default_value,
        c.value,
        ra,
        r.mb_per_s(),
        seed,
        r.bios,
        r.seeks,
        r.node_bios,
        r.node_ra_bios,
        r.path.dat_bios,
        r.waits,
    );
}
