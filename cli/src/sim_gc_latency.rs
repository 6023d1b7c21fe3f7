//! `nilref sim gc-latency`: seed 001's own figure. sysbench's per-request
//! write latency (min, avg, max), random and sequential, with
//! `nilfs_cleanerd` running the seed's configuration, before and after the
//! patch, on the simulated clock; one parameter (the disk's media rate)
//! fitted on the unpatched random max, everything else predicted. The model
//! is `nilfs::sim::gc_latency`; the figures are in docs/seeds/001-gc-freeze.md.

use std::fmt::Write as _;
use std::path::Path;

use nilfs::sim::gc_latency::{
    self, calibrate, figures, prepare, Cleanerd, Figures, Mode, RequestSync, Timing, Workload,
};

/// Arguments of `nilref sim gc-latency`.
#[derive(clap::Args, Clone, Debug)]
pub struct GcLatencyArgs {
    /// sysbench requests per run (`--max-requests`).
    #[arg(long, default_value_t = 10_000)]
    pub requests: u64,
    /// How each request is made durable: `full` (a full construction, a
    /// checkpoint, per request: what the seed's averages point to; see
    /// docs/seeds/001-gc-freeze.md) or `data-only` (a data-only log, the
    /// metadata left for the timer's checkpoint).
    #[arg(long, default_value = "full")]
    pub sync: String,
    /// Skip the fit: use the data-sheet media rate as it is.
    #[arg(long)]
    pub no_fit: bool,
    /// Write the latency-over-time plot here (SVG).
    #[arg(long)]
    pub svg: Option<std::path::PathBuf>,
}

fn pct(a: f64, b: f64) -> f64 {
    (a / b - 1.0) * 100.0
}

/// Run the experiment; the report as text.
pub fn run(args: &GcLatencyArgs) -> Result<String, String> {
    let sync = match args.sync.as_str() {
        "data-only" => RequestSync::DataOnly,
        "full" => RequestSync::Full,
        other => return Err(format!("--sync: data-only or full, not {other}")),
    };
    let w = Workload {
        requests: args.requests,
        sync,
        ..Workload::default()
    };
    let e = |e: nilfs::Error| e.to_string();
    let conf = Cleanerd::default();
    let prep = prepare(&w).map_err(e)?;
    let base = Timing::desktop_2009();
    let (timing, fit_runs) = if args.no_fit {
        (base, 0)
    } else {
        calibrate(&prep, conf, base, gc_latency::SEED_RANDOM[0].2).map_err(e)?
    };
    let f = figures(&prep, conf, timing).map_err(e)?;
    let mut out = report(&w, conf, base, &f, fit_runs);
    if let Some(path) = &args.svg {
        crate::svg::gc_latency(path, &f)?;
        let _ = writeln!(out, "\nplot: {}", Path::new(path).display());
    }
    Ok(out)
}

fn report(w: &Workload, c: Cleanerd, base: Timing, f: &Figures, fit_runs: u32) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "seed 001: sysbench per-request write latency with nilfs_cleanerd (simulated clock)"
    );
    let _ = writeln!(
        o,
        "image: {} MiB of \"DVD/CD images\" + snapshot, then {} files x {} MiB; 4 KiB blocks, 8 MiB segments",
        w.dvd_bytes >> 20,
        w.files,
        w.file_bytes >> 20
    );
    let _ = writeln!(
        o,
        "sysbench: {} requests of {} KiB, each {}; cleanerd: protection_period {}, timestamp, nsegments_per_clean {}, cleaning_interval {}",
        w.requests,
        w.request_bytes >> 10,
        match w.sync {
            RequestSync::DataOnly => "write + O_SYNC (data-only log)",
            RequestSync::Full => "write + fsync (full construction)",
        },
        c.protection_s,
        c.nsegs,
        c.interval_s
    );
    let d = f.timing.disk;
    let _ = writeln!(
        o,
        "disk: {} rpm, seek {:.2}-{:.1} ms, {:.2} ms/command; CFQ slice {} ms, idle {} ms; timer sync every {} s",
        d.rpm,
        d.track_to_track_seek_ns as f64 / 1e6,
        d.full_stroke_seek_ns as f64 / 1e6,
        d.command_overhead_ns as f64 / 1e6,
        f.timing.slice_ns / 1_000_000,
        f.timing.idle_ns / 1_000_000,
        f.timing.segctor_interval_ns / 1_000_000_000
    );
    if fit_runs > 0 {
        let _ = writeln!(
            o,
            "fitted (one parameter, on the unpatched random max {:.3} ms, {fit_runs} runs): media rate {:.1} MB/s (data sheet default {:.1})",
            gc_latency::SEED_RANDOM[0].2,
            d.media_bytes_per_s as f64 / 1e6,
            base.disk.media_bytes_per_s as f64 / 1e6
        );
    } else {
        let _ = writeln!(
            o,
            "not fitted: media rate {:.1} MB/s",
            d.media_bytes_per_s as f64 / 1e6
        );
    }
    let _ = writeln!(o);
    let _ = writeln!(
        o,
        "| mode | kernel | min ms (seed) | avg ms (seed) | max ms (seed) | cleanings | reads ms | locked ms | timer syncs | run s |"
    );
    let _ = writeln!(o, "|---|---|---|---|---|---|---|---|---|---|");
    for mode in [Mode::Random, Mode::Sequential] {
        for patched in [false, true] {
            let r = f.get(mode, patched);
            let (mn, av, mx) = r.summary_ms();
            let (smn, sav, smx) = gc_latency::seed(mode, patched);
            let n = r.cleanings.len().max(1) as f64;
            let reads: f64 = r
                .cleanings
                .iter()
                .map(|c| {
                    let from = if c.locked_ns <= c.read_ns {
                        c.locked_ns
                    } else {
                        c.start_ns
                    };
                    (c.read_ns - from) as f64
                })
                .sum::<f64>()
                / n
                / 1e6;
            let locked: f64 = r
                .cleanings
                .iter()
                .map(|c| (c.end_ns - c.locked_ns) as f64)
                .sum::<f64>()
                / n
                / 1e6;
            let tag = |fit: bool| if fit { " (fit)" } else { "" };
            let _ = writeln!(
                o,
                "| {} | {} | {mn:.3} ({smn:.3}) | {av:.3} ({sav:.3}) | {mx:.1}{} ({smx:.1}) | {} | {reads:.0} | {locked:.0} | {} | {:.1} |",
                mode_name(mode),
                if patched { "rc8 + patch" } else { "rc8" },
                tag(fit_runs > 0 && mode == Mode::Random && !patched),
                r.cleanings.len(),
                r.timer_syncs,
                r.total_ns as f64 / 1e9
            );
        }
    }
    let _ = writeln!(o);
    let _ = writeln!(o, "patched / unpatched:");
    let _ = writeln!(o, "| ratio | sim | seed | sim vs seed | within 15% |");
    let _ = writeln!(o, "|---|---|---|---|---|");
    for mode in [Mode::Random, Mode::Sequential] {
        let (b, a) = (
            f.get(mode, false).summary_ms(),
            f.get(mode, true).summary_ms(),
        );
        let (sb, sa) = (gc_latency::seed(mode, false), gc_latency::seed(mode, true));
        for (name, x, y, sx, sy) in [
            ("min", a.0, b.0, sa.0, sb.0),
            ("avg", a.1, b.1, sa.1, sb.1),
            ("max", a.2, b.2, sa.2, sb.2),
        ] {
            let (r, s) = (x / y, sx / sy);
            let _ = writeln!(
                o,
                "| {} {name} | x{r:.3} | x{s:.3} | {:+.1}% | {} |",
                mode_name(mode),
                pct(r, s),
                if pct(r, s).abs() <= 15.0 { "yes" } else { "no" }
            );
        }
    }
    o
}

fn mode_name(m: Mode) -> &'static str {
    match m {
        Mode::Random => "random",
        Mode::Sequential => "sequential",
    }
}
