//! `nilref sim readahead IMAGE PATH`: seed 000's benchmark. A simulated
//! `dd bs=1M` of the file PATH of IMAGE (written by the Linux kernel: see
//! scripts/bench-readahead.sh) on the simulated 2010 SCSI disk and Intel SSD,
//! B-tree sibling read-ahead off and on, through the Linux 2.6.35 request
//! queue and (on the disk) the drive's segmented read cache. Each device is
//! calibrated on the seed's read-ahead-off figure only (one parameter, by
//! bisection); the read-ahead-on figure is a prediction. The sensitivity
//! table changes one property of the 2010 setup at a time and fits again.
//! The model is `nilfs::sim::readahead`; the figures are in
//! docs/seeds/000-readahead.md.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use nilfs::bmap::readahead::ReadAhead;
use nilfs::device::{BlockDevice, FileDevice};
use nilfs::posix::cached::ReadParams;
use nilfs::sim::readahead::{
    calibrate, hdd_main, hdd_variants, ssd_main, ssd_variants, Calibration, DdRun, Variant,
    SEED_HDD, SEED_SSD,
};
use plotters::prelude::*;

use crate::svg::{err, framed_legend, legend_box};

/// Arguments of `nilref sim readahead`.
#[derive(clap::Args, Clone, Debug)]
pub struct ReadaheadArgs {
    /// Image holding the file (written by the kernel).
    pub image: PathBuf,
    /// The file to read.
    pub path: String,
    /// Write the MB/s plot (read-ahead off and on, per device, the
    /// simulator beside the seed) here (SVG).
    #[arg(long)]
    pub svg: Option<PathBuf>,
    /// Write every device request of the main runs here (CSV).
    #[arg(long)]
    pub trace: Option<PathBuf>,
    /// Only the main table (no sensitivity rows: about 10 s instead of 2 min).
    #[arg(long)]
    pub main_only: bool,
}

/// A calibrated row: which device it models and the fit.
pub struct Row {
    /// "HDD" or "SSD".
    pub dev: &'static str,
    /// The configuration and knob.
    pub variant: Variant,
    /// The fit and the prediction.
    pub cal: Calibration,
    /// The seed's (off, on).
    pub seed: (f64, f64),
}

impl Row {
    /// Whether the off run reached the seed's off figure (within 1 %).
    pub fn fitted(&self) -> bool {
        (self.cal.off.mb_per_s() / self.seed.0 - 1.0).abs() < 0.01
    }
}

/// The sensitivity rows the plot shows as "what the seed's figure needs".
const HDD_NEEDS: &str = "main, shortest seek fitted instead";
const SSD_NEEDS: &str = "main, read latency fitted instead";

type Open = Box<dyn Fn() -> nilfs::Result<Box<dyn BlockDevice>>>;

fn opener(image: &Path) -> Open {
    let img = image.to_path_buf();
    Box::new(move || -> nilfs::Result<Box<dyn BlockDevice>> {
        Ok(Box::new(FileDevice::open_read_only(&img)?))
    })
}

fn pct(a: f64, b: f64) -> f64 {
    (a / b - 1.0) * 100.0
}

fn ra_name(r: ReadAhead) -> &'static str {
    match r {
        ReadAhead::On => "on",
        ReadAhead::Off => "off",
    }
}

/// Run the benchmark; the report as text.
pub fn run(args: &ReadaheadArgs) -> Result<String, String> {
    let open = opener(&args.image);
    let params = ReadParams::default();
    let fit = |dev: &'static str, variant: Variant| -> Result<Row, String> {
        let seed = if dev == "HDD" { SEED_HDD } else { SEED_SSD };
        let cal = calibrate(
            &*open,
            &variant.config,
            variant.knob,
            seed.0,
            args.path.as_bytes(),
            params,
        )
        .map_err(|e| format!("{}: {}: {e}", args.image.display(), variant.name))?;
        Ok(Row {
            dev,
            variant,
            cal,
            seed,
        })
    };
    let main = [fit("HDD", hdd_main())?, fit("SSD", ssd_main())?];
    let mut out = String::new();
    let _ = writeln!(
        out,
        "seed 000: dd bs=1M of {} ({} bytes) from {}",
        args.path,
        main[0].cal.off.bytes,
        args.image.display()
    );
    let _ = writeln!(
        out,
        "read path: 128 KiB read-ahead window, mdt read-ahead {} blocks, copy {} ns/block, {} ns per B-tree read-ahead submission",
        params.mdt_ra_blocks, params.copy_ns_per_block, params.ra_submit_cpu_ns
    );
    let _ = writeln!(out);
    let _ = writeln!(
        out,
        "calibrated on the read-ahead-off figure, read-ahead on predicted (main):"
    );
    main_table(&mut out, &main);
    let _ = writeln!(out);
    implied(&mut out, &main[0]);
    implied(&mut out, &main[1]);

    if !args.main_only {
        let _ = writeln!(out);
        let _ = writeln!(
            out,
            "sensitivity: one property changed, the same calibration on the off figure:"
        );
        let mut rows = Vec::new();
        for v in hdd_variants() {
            rows.push(fit("HDD", v)?);
        }
        for v in ssd_variants() {
            rows.push(fit("SSD", v)?);
        }
        sensitivity(&mut out, &main, &rows);
        if let Some(path) = &args.svg {
            let pick = |name: &str| {
                rows.iter()
                    .filter(|r| r.variant.name == name)
                    .collect::<Vec<_>>()
            };
            let before: Vec<&Row> = rows
                .iter()
                .filter(|r| r.variant.name.starts_with("the simulator before"))
                .collect();
            let needs = [pick(HDD_NEEDS), pick(SSD_NEEDS)].concat();
            plot(
                path,
                &main,
                &[
                    ("simulator before: no queue, no drive cache", before),
                    ("simulator, per-node-read cost fitted instead", needs),
                ],
            )?;
            let _ = writeln!(out, "\nplot: {}", path.display());
        }
    } else if let Some(path) = &args.svg {
        plot(path, &main, &[])?;
        let _ = writeln!(out, "\nplot: {}", path.display());
    }

    if let Some(t) = &args.trace {
        write_trace(t, &main)?;
        let _ = writeln!(out, "trace: {}", t.display());
    }
    Ok(out)
}

fn main_table(out: &mut String, rows: &[Row]) {
    let _ = writeln!(
        out,
        "{:<4} {:<30} {:>11} {:>11} {:<3} {:>8} {:>6} {:>6} {:>6} {:>6} {:>6} {:>6} {:>6} {:>6} {:>6}",
        "dev", "tuned parameter", "default", "chosen", "ra", "sim MB/s", "seed", "bios", "reqs",
        "merged", "moves", "hits", "node", "nodeRA", "dat"
    );
    for r in rows {
        for (run, seed_v, tag) in [
            (&r.cal.off, r.seed.0, "fit".to_string()),
            (
                &r.cal.on,
                r.seed.1,
                format!(
                    "predicted: {:+.1}% vs seed's {:+.1}%",
                    pct(r.cal.on.mb_per_s(), r.cal.off.mb_per_s()),
                    pct(r.seed.1, r.seed.0)
                ),
            ),
        ] {
            line(out, r, run, seed_v, &tag);
        }
    }
    let _ = writeln!(
        out,
        "(bios: submitted; reqs: commands the device served; merged: bios merged into a waiting request; \
         moves: commands that moved the head; hits: served from the drive's buffer, sequential read-ahead included; \
         node/nodeRA/dat: B-tree node bios, of which sibling read-ahead, DAT block bios)"
    );
}

fn line(out: &mut String, r: &Row, run: &DdRun, seed: f64, tag: &str) {
    let merged = run.queue.map_or(0, |q| q.back_merges + q.front_merges);
    let hits = run.cache.map_or(0, |c| c.hits + c.sequential);
    let _ = writeln!(
        out,
        "{:<4} {:<30} {:>11} {:>11} {:<3} {:>8.1} {:>6.1} {:>6} {:>6} {:>6} {:>6} {:>6} {:>6} {:>6} {:>6}  ({tag})",
        r.dev,
        r.cal.knob.describe(),
        r.cal.default_value,
        r.cal.value,
        ra_name(run.readahead),
        run.mb_per_s(),
        seed,
        run.bios,
        run.requests,
        merged,
        run.head_moves,
        hits,
        run.node_bios,
        run.node_ra_bios,
        run.path.dat_bios,
    );
}

/// What the gain costs per avoided node read, in the model and in the seed.
fn implied(out: &mut String, r: &Row) {
    let (off, on) = (&r.cal.off, &r.cal.on);
    let avoided = off.node_bios.saturating_sub(on.node_bios) + on.node_ra_bios;
    let saved_ns = off.ns.saturating_sub(on.ns) as f64;
    let seed_saved_ns = off.bytes as f64 * (1.0 / r.seed.0 - 1.0 / r.seed.1) * 1e3;
    let _ = writeln!(
        out,
        "{}: read-ahead saves {:.2} s, {:.0} µs per node read it takes off the reader's path ({avoided}); \
         the seed's figures save {:.2} s, {:.0} µs per node read on this layout",
        r.dev,
        saved_ns / 1e9,
        saved_ns / 1e3 / avoided.max(1) as f64,
        seed_saved_ns / 1e9,
        seed_saved_ns / 1e3 / avoided.max(1) as f64,
    );
}

fn sensitivity(out: &mut String, main: &[Row], rows: &[Row]) {
    let _ = writeln!(
        out,
        "{:<4} {:<72} {:<30} {:>11} {:>7} {:>7} {:>7} {:>9}",
        "dev", "configuration", "fitted", "value", "off", "on", "gain", "on/seed"
    );
    for r in main.iter().chain(rows) {
        let (off, on) = (r.cal.off.mb_per_s(), r.cal.on.mb_per_s());
        let note = if r.fitted() {
            ""
        } else {
            "  (no fit in range)"
        };
        let _ = writeln!(
            out,
            "{:<4} {:<72} {:<30} {:>11} {:>7.1} {:>7.1} {:>6.1}% {:>8.1}%{note}",
            r.dev,
            r.variant.name,
            r.cal.knob.describe(),
            r.cal.value,
            off,
            on,
            pct(on, off),
            pct(on, r.seed.1),
        );
    }
    let _ = writeln!(
        out,
        "seed: HDD {:.1} -> {:.1} MB/s ({:+.1}%), SSD {:.0} -> {:.0} MB/s ({:+.1}%)",
        SEED_HDD.0,
        SEED_HDD.1,
        pct(SEED_HDD.1, SEED_HDD.0),
        SEED_SSD.0,
        SEED_SSD.1,
        pct(SEED_SSD.1, SEED_SSD.0)
    );
}

fn write_trace(path: &Path, main: &[Row]) -> Result<(), String> {
    let mut csv = String::from("dev,ra,op,offset,len,bios,rahead,dispatch_ns,done_ns,service\n");
    for r in main {
        for run in [&r.cal.off, &r.cal.on] {
            for q in &run.trace {
                let _ = writeln!(
                    csv,
                    "{},{},{:?},{},{},{},{},{},{},{:?}",
                    r.dev,
                    ra_name(run.readahead),
                    q.op,
                    q.offset,
                    q.len,
                    q.bios,
                    q.rahead,
                    q.dispatch_ns,
                    q.done_ns,
                    q.service
                );
            }
        }
    }
    std::fs::write(path, csv).map_err(|e| format!("{}: {e}", path.display()))
}

/// Seed 000: dd's MB/s with B-tree read-ahead off and on, per device: the
/// seed's figures, the simulator's main fit (off fitted, on predicted) and
/// further fits (`extra`: a legend label and, per device, the row to show).
fn plot(path: &Path, main: &[Row], extra: &[(&str, Vec<&Row>)]) -> Result<(), String> {
    let root = SVGBackend::new(path, (1100, 480)).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let panels = root.split_evenly((1, main.len().max(1)));
    let palette = [
        RGBColor(120, 120, 120),
        RGBColor(70, 110, 200),
        RGBColor(170, 195, 235),
        RGBColor(230, 150, 60),
    ];
    for (area, row) in panels.iter().zip(main) {
        let mut bars: Vec<(String, [f64; 2])> = vec![
            ("seed (2010)".into(), [row.seed.0, row.seed.1]),
            (
                format!("simulator: off fitted ({}), on predicted", short(row)),
                [row.cal.off.mb_per_s(), row.cal.on.mb_per_s()],
            ),
        ];
        for (label, rows) in extra {
            if let Some(r) = rows.iter().find(|r| r.dev == row.dev) {
                bars.push((
                    format!("{label} ({})", short(r)),
                    [r.cal.off.mb_per_s(), r.cal.on.mb_per_s()],
                ));
            }
        }
        let top = bars.iter().flat_map(|b| b.1).fold(0.0f64, f64::max) * 1.45;
        let title = match row.dev {
            "HDD" => "SCSI hard disk (10,000 rpm class)",
            _ => "Intel SSD (X25-M G2)",
        };
        let mut chart = ChartBuilder::on(area)
            .caption(
                format!("seed 000, dd of 512 MB: {title}"),
                ("sans-serif", 17),
            )
            .margin(12)
            .x_label_area_size(30)
            .y_label_area_size(50)
            .build_cartesian_2d(0.0f64..2.0, 0.0..top)
            .map_err(err)?;
        chart
            .configure_mesh()
            .disable_x_mesh()
            .max_light_lines(1)
            .x_labels(5)
            .x_label_formatter(&|x| match (*x * 2.0).round() as i32 {
                1 => "B-tree read-ahead off".into(),
                3 => "B-tree read-ahead on".into(),
                _ => String::new(),
            })
            .y_desc("MB/s (dd)")
            .draw()
            .map_err(err)?;
        let w = 0.7 / bars.len() as f64;
        for (k, (label, v)) in bars.iter().enumerate() {
            let color = palette[k % palette.len()];
            for (g, val) in v.iter().enumerate() {
                let x0 = g as f64 + 0.15 + k as f64 * w;
                chart
                    .draw_series([Rectangle::new(
                        [(x0, 0.0), (x0 + w * 0.92, *val)],
                        color.filled(),
                    )])
                    .map_err(err)?;
                chart
                    .draw_series([Text::new(
                        format!("{val:.1}"),
                        (x0, *val + top * 0.015),
                        ("sans-serif", 12),
                    )])
                    .map_err(err)?;
            }
            legend_box(&mut chart, (0.0, 0.0), color.filled(), label)?;
        }
        framed_legend(&mut chart, SeriesLabelPosition::UpperLeft)?;
    }
    root.present().map_err(err)
}

/// The fitted parameter of a row, short.
fn short(r: &Row) -> String {
    use nilfs::sim::readahead::Knob;
    let v = r.cal.value as f64;
    match r.cal.knob {
        Knob::HddMediaRate => format!("media {:.1} MB/s", v / 1e6),
        Knob::SsdReadBandwidth => format!("bandwidth {:.1} MB/s", v / 1e6),
        Knob::HddMinSeek => format!("shortest seek {:.2} ms", v / 1e6),
        Knob::HddCommandOverhead => format!("command overhead {:.2} ms", v / 1e6),
        Knob::HddRpm => format!("{v:.0} rpm"),
        Knob::SsdReadLatency => format!("read latency {:.0} µs", v / 1e3),
        Knob::HostCompletion => format!("host completion {:.0} µs", v / 1e3),
    }
}
