//! `nilref sim completion-streams`: seed 002 in the shape of the thread's
//! measurement — 8 concurrent streaming readers sharing the last-level
//! cache — beside Jens Axboe's LLC-miss figure. The model is
//! `nilfs::sim::streams`; the figures are in docs/seeds/002-completion-order.md.

use std::fmt::Write as _;

use nilfs::device::CompletionOrder;
use nilfs::sim::cache_model::CacheConfig;
use nilfs::sim::streams::{run, Streams, StreamsRun};

/// Arguments of `nilref sim completion-streams`.
#[derive(clap::Args, Clone, Debug)]
pub struct StreamsArgs {
    /// Concurrent streams (one file and one core each).
    #[arg(long, default_value_t = 8)]
    pub streams: usize,
    /// Size of each file, MiB (the thread's were 16 GB; misses are per page).
    #[arg(long, default_value_t = 32)]
    pub file_mib: u64,
    /// Pages per bio (max_sectors_kb 512 = 128 pages).
    #[arg(long, default_value_t = 128)]
    pub bio_pages: usize,
    /// Write the misses-per-level plot here (SVG).
    #[arg(long)]
    pub svg: Option<std::path::PathBuf>,
}

fn pct(a: u64, b: u64) -> f64 {
    if b == 0 {
        0.0
    } else {
        (a as f64 / b as f64 - 1.0) * 100.0
    }
}

fn both(e: &Streams) -> Result<(StreamsRun, StreamsRun), String> {
    let f = run(e, CompletionOrder::Submission).map_err(|e| e.to_string())?;
    let r = run(e, CompletionOrder::Reverse).map_err(|e| e.to_string())?;
    Ok((f, r))
}

/// Run it; the report as text.
pub fn run_cli(a: &StreamsArgs) -> Result<String, String> {
    let e = Streams {
        streams: a.streams,
        file_bytes: a.file_mib << 20,
        bio_pages: a.bio_pages,
        ..Streams::default()
    };
    let (f, r) = both(&e)?;
    let mut o = String::new();
    let _ = writeln!(
        o,
        "seed 002 in the thread's shape: {} streams x {} MiB, bios of {} pages ({} KiB), {} MiB read-ahead window each, {:.1} GB/s device; per core L1d 32 KiB + L2 256 KiB, shared L3 {} KiB 16-way",
        e.streams,
        a.file_mib,
        e.bio_pages,
        e.bio_pages * 4,
        e.window_bytes >> 20,
        e.device_bytes_per_s as f64 / 1e9,
        e.shared.size_bytes >> 10
    );
    let _ = writeln!(o);
    let _ = writeln!(
        o,
        "| order | LLC misses (L3) | per page | reader L1d | reader L2 | reader L3 | L3 references |"
    );
    let _ = writeln!(o, "|---|---|---|---|---|---|---|");
    for x in [&r, &f] {
        let _ = writeln!(
            o,
            "| {} | {} | {:.2} | {} | {} | {} | {} |",
            match x.order {
                CompletionOrder::Submission => "submission (patched)",
                CompletionOrder::Reverse => "reverse (baseline)",
            },
            x.llc_misses(),
            x.llc_misses() as f64 / x.pages as f64,
            x.reader.l1,
            x.reader.l2,
            x.reader.l3,
            x.l3_refs
        );
    }
    let _ = writeln!(
        o,
        "\nLLC misses {:+.2}% (thread: 2318 M -> 2244 M, -3.2%); L3 references {:+.2}% (thread: 3394 M -> 3494 M, +2.9%)",
        pct(f.llc_misses(), r.llc_misses()),
        pct(f.l3_refs, r.l3_refs)
    );
    let _ = writeln!(
        o,
        "\nsensitivity: LLC misses, submission vs reverse, by the L3 share left to the streams and the bio size"
    );
    let sizes: [u64; 5] = [8 << 20, 2 << 20, 1 << 20, 512 << 10, 256 << 10];
    let _ = write!(o, "| bio pages |");
    for s in sizes {
        let _ = write!(o, " L3 {} KiB |", s >> 10);
    }
    let _ = writeln!(o);
    let _ = writeln!(o, "|---|{}", "---|".repeat(sizes.len()));
    for bio in [32usize, 64, 128, 256] {
        let _ = write!(o, "| {bio} |");
        for s in sizes {
            let e2 = Streams {
                bio_pages: bio,
                shared: CacheConfig::new("L3", s, 16, 64),
                ..e.clone()
            };
            let (f2, r2) = both(&e2)?;
            let _ = write!(o, " {:+.1}% |", pct(f2.llc_misses(), r2.llc_misses()));
        }
        let _ = writeln!(o);
    }
    if let Some(p) = &a.svg {
        crate::svg::streams(p, &r, &f)?;
        let _ = writeln!(o, "\nplot: {}", p.display());
    }
    Ok(o)
}
