//! `nilref sim ...`: the seeds' benchmarks on the simulated device's clock.
//!
//! `sim completion-order` (seed 002) streams a file on the simulated SSD and
//! HDD with a per-page checksum pass in the completion handler and a CPU
//! cache model, in submission and in reverse completion order, and prints
//! cache misses, first-page latency and total time. The model and its
//! reasoning are in `nilfs::sim::completion`; the figures and how they
//! compare with the seed's thread are in docs/seeds/002-completion-order.md.

use std::fmt::Write as _;

use clap::Subcommand;

use nilfs::device::CompletionOrder;
use nilfs::sim::completion::{self, relative_pct, Device, Experiment, RunResult};

/// Arguments of `nilref sim completion-order`.
#[derive(clap::Args, Clone, Debug)]
pub struct CompletionOrderArgs {
    /// Size of the file streamed, MiB.
    #[arg(long, default_value_t = 64)]
    pub file_mib: u64,
    /// Page (block) size, bytes.
    #[arg(long, default_value_t = 4096)]
    pub page_size: u32,
    /// Pages per bio (1 to 256).
    #[arg(long, default_value_t = 32)]
    pub bio_pages: usize,
    /// Bios submitted ahead of the one the reader consumes.
    #[arg(long, default_value_t = 2)]
    pub ahead: usize,
    /// Reader CPU time per page (the copy to user space), ns.
    #[arg(long, default_value_t = 500)]
    pub reader_ns: u64,
    /// Bio sizes (pages) for the sweep table on the SSD; `--sweep` alone for none.
    #[arg(long, value_delimiter = ',', num_args = 0.., default_value = "8,32,128,256")]
    pub sweep: Vec<usize>,
    /// Let each bio's completion loop finish before the reader runs (one
    /// CPU) instead of running the two concurrently.
    #[arg(long)]
    pub same_cpu: bool,
}

impl Default for CompletionOrderArgs {
    fn default() -> Self {
        CompletionOrderArgs {
            file_mib: 64,
            page_size: 4096,
            bio_pages: 32,
            ahead: 2,
            reader_ns: 500,
            sweep: vec![8, 32, 128, 256],
            same_cpu: false,
        }
    }
}

impl CompletionOrderArgs {
    fn experiment(&self, bio_pages: usize) -> Result<Experiment, String> {
        let file_bytes = self
            .file_mib
            .checked_mul(1 << 20)
            .ok_or("--file-mib is too large")?;
        Ok(Experiment {
            file_bytes,
            page_bytes: self.page_size,
            bio_pages,
            bios_ahead: self.ahead,
            reader_page_ns: self.reader_ns,
            same_cpu: self.same_cpu,
            ..Experiment::default()
        })
    }
}

fn order_name(order: CompletionOrder) -> &'static str {
    match order {
        CompletionOrder::Submission => "submission",
        CompletionOrder::Reverse => "reverse",
    }
}

fn us(ns: u64) -> String {
    format!("{:.1}", ns as f64 / 1e3)
}

/// The result for `order` among `runs` of one device.
fn pick(runs: &[RunResult], device: Device, order: CompletionOrder) -> Result<&RunResult, String> {
    runs.iter()
        .find(|r| r.device == device && r.order == order)
        .ok_or_else(|| format!("no {} {} run", device.name(), order_name(order)))
}

/// Run `nilref sim completion-order` and return its report.
pub fn completion_order(args: &CompletionOrderArgs) -> Result<String, String> {
    let exp = args.experiment(args.bio_pages)?;
    let runs = completion::run_all(&exp).map_err(|e| e.to_string())?;
    let end_io_ns = Device::Ssd
        .config(CompletionOrder::Submission)
        .end_io_page_ns;
    let mut out = String::new();
    let w = &mut out;
    let levels = &runs[0].levels;

    let _ = writeln!(
        w,
        "seed 002: bio completion order on a streaming read (simulated clock)"
    );
    let _ = writeln!(
        w,
        "file {} MiB, {} B pages, bios of {} pages ({} KiB), {} bios ahead; \
         checksum {} ns/page in end_io, reader {} ns/page",
        args.file_mib,
        exp.page_bytes,
        exp.bio_pages,
        exp.bio_pages as u64 * u64::from(exp.page_bytes) / 1024,
        exp.bios_ahead,
        end_io_ns,
        exp.reader_page_ns
    );
    let _ = writeln!(
        w,
        "completion and reader: {}",
        if exp.same_cpu {
            "one CPU, each bio's completion loop runs to its end first (--same-cpu)"
        } else {
            "concurrent, sharing the caches"
        }
    );
    let caches: Vec<String> = exp.caches.iter().map(ToString::to_string).collect();
    let _ = writeln!(w, "caches (one Intel Nehalem core): {}", caches.join(", "));
    let _ = writeln!(w);

    let _ = write!(w, "{:<6} {:<11}", "device", "order");
    for l in levels {
        let _ = write!(w, " {:>10}", format!("{l} miss"));
    }
    for l in levels {
        let _ = write!(w, " {:>10}", format!("rd {l}"));
    }
    let _ = writeln!(
        w,
        " {:>9} {:>9} {:>9} {:>9} {:>10}",
        "p0 done", "p0 read", "avg done", "avg read", "total"
    );
    for r in &runs {
        let _ = write!(w, "{:<6} {:<11}", r.device.name(), order_name(r.order));
        for m in r.total_misses() {
            let _ = write!(w, " {m:>10}");
        }
        for m in &r.reader_misses {
            let _ = write!(w, " {m:>10}");
        }
        let _ = writeln!(
            w,
            " {:>9} {:>9} {:>9} {:>9} {:>10}",
            us(r.first_page_ns),
            us(r.first_read_ns),
            us(r.mean_first_page_ns),
            us(r.mean_first_read_ns),
            format!("{:.3}", r.total_ns as f64 / 1e6)
        );
    }
    let _ = writeln!(
        w,
        "(misses: checksum + reader passes; rd = the reader's pass alone; p0 done / p0 read: \
         first bio, submission to page 0's completion / to the reader holding it, µs; avg: \
         the same averaged over all bios, µs; total: ms)"
    );
    let _ = writeln!(w);

    let _ = writeln!(
        w,
        "submission vs reverse (change = (submission - reverse) / reverse):"
    );
    for device in Device::ALL {
        let fwd = pick(&runs, device, CompletionOrder::Submission)?;
        let rev = pick(&runs, device, CompletionOrder::Reverse)?;
        let mut parts = Vec::new();
        for (i, l) in levels.iter().enumerate() {
            let (f, r) = (fwd.total_misses()[i], rev.total_misses()[i]);
            parts.push(format!("{l} misses {:+.1}%", relative_pct(f, r)));
        }
        parts.push(format!(
            "first page {:+.1}%",
            relative_pct(fwd.first_page_ns, rev.first_page_ns)
        ));
        parts.push(format!(
            "total time {:+.2}%",
            relative_pct(fwd.total_ns, rev.total_ns)
        ));
        let _ = writeln!(w, "  {}: {}", device.name(), parts.join(", "));
    }
    let _ = writeln!(
        w,
        "  thread (Jens Axboe, 8 streams of 16 GB, perf LLC misses): 2318 M -> 2244 M, -3.2%; \
         references 3394 M -> 3494 M, +2.9%"
    );

    if !args.sweep.is_empty() {
        let _ = writeln!(w);
        let _ = writeln!(
            w,
            "bio size sweep on the SSD: total misses per level, submission / reverse (change)"
        );
        let _ = write!(w, "{:>9} {:>8}", "bio pages", "bio KiB");
        for l in levels {
            let _ = write!(w, " {:>30}", l);
        }
        let _ = writeln!(w);
        for &n in &args.sweep {
            let exp = args.experiment(n)?;
            let run = |o| completion::run(&exp, Device::Ssd, o).map_err(|e| e.to_string());
            let fwd = run(CompletionOrder::Submission)?;
            let rev = run(CompletionOrder::Reverse)?;
            let _ = write!(
                w,
                "{n:>9} {:>8}",
                n as u64 * u64::from(exp.page_bytes) / 1024
            );
            for (f, r) in fwd.total_misses().into_iter().zip(rev.total_misses()) {
                let cell = format!("{f} / {r} ({:+.1}%)", relative_pct(f, r));
                let _ = write!(w, " {cell:>30}");
            }
            let _ = writeln!(w);
        }
    }
    Ok(out)
}

#[derive(Subcommand)]
pub enum Cmd {
    /// Seed 002: a streaming read with per-page checksums and a CPU cache
    /// model, pages completing in submission order vs reverse order.
    CompletionOrder(CompletionOrderArgs),
    /// Seed 000: dd of a file on the simulated hard disk and SSD, B-tree
    /// sibling read-ahead off vs on (see scripts/bench-readahead.sh).
    Readahead(crate::sim_readahead::ReadaheadArgs),
    /// Seed 001: how long one cleaning request keeps writers out, with the
    /// block reads inside the lock (before the patch) and outside (after),
    /// on the simulated hard disk and SSD.
    GcFreeze {
        /// Segments per request (cleanerd's nsegments_per_clean).
        #[arg(long, default_value_t = 2)]
        nsegs: usize,
    },
    /// Seed 001's own figure: sysbench per-request write latency with
    /// nilfs_cleanerd running, before and after the patch, next to the
    /// seed's table.
    GcLatency(crate::sim_gc_latency::GcLatencyArgs),
    /// Seed 002 in the shape of the thread's measurement: 8 concurrent
    /// streams sharing the last-level cache, beside its LLC-miss figure.
    CompletionStreams(crate::sim_streams::StreamsArgs),
}

/// `nilref sim …`.
pub fn run(cmd: Cmd) -> Result<String, String> {
    match cmd {
        Cmd::CompletionOrder(args) => completion_order(&args),
        Cmd::Readahead(args) => crate::sim_readahead::run(&args),
        Cmd::GcFreeze { nsegs } => gc_freeze(nsegs),
        Cmd::GcLatency(args) => crate::sim_gc_latency::run(&args),
        Cmd::CompletionStreams(args) => crate::sim_streams::run_cli(&args),
    }
}

fn gc_freeze(nsegs: usize) -> Result<String, String> {
    use nilfs::device::SimConfig;
    let mut out = format!(
        "seed 001 on the simulated clock: one cleaning request of {nsegs} segments\n\
         | device | segments | live blocks moved | reading them | locked part | freeze before the patch | after |\n\
         |---|---|---|---|---|---|---|\n"
    );
    for (name, config) in [
        ("HDD (2010 SCSI)", SimConfig::hdd_2010()),
        ("SSD (2010 Intel)", SimConfig::ssd_2010()),
    ] {
        let f = nilfs::sim::gc_freeze::run(config, nsegs).map_err(|e| e.to_string())?;
        let ms = |ns: u64| format!("{:.1} ms", ns as f64 / 1e6);
        out.push_str(&format!(
            "| {name} | {} | {} | {} | {} | {} | {} |\n",
            f.cleaned_segs,
            f.moved_blocks,
            ms(f.read_ns),
            ms(f.locked_ns),
            ms(f.freeze_before_ns()),
            ms(f.freeze_after_ns())
        ));
    }
    Ok(out)
}
