//! The seeds' figures as SVG plots (plotters' SVG backend: no system fonts
//! needed), written by `nilref sim ... --svg FILE`: seed 001's and 002's
//! here, with the chart helpers every figure uses (seed 000's is drawn by
//! `sim_readahead`, which owns its rows).

use std::path::Path;

use nilfs::sim::gc_latency::{Figures, Mode};
use plotters::prelude::*;

pub fn err(e: impl std::fmt::Display) -> String {
    format!("svg: {e}")
}

/// The legend, framed on a light background, at `position`.
pub fn framed_legend<'a, 'b: 'a, X, Y>(
    chart: &mut ChartContext<'a, SVGBackend<'b>, Cartesian2d<X, Y>>,
    position: SeriesLabelPosition,
) -> Result<(), String>
where
    X: Ranged<ValueType = f64>,
    Y: Ranged<ValueType = f64>,
{
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .position(position)
        .draw()
        .map_err(err)
}

/// A legend entry drawn as a box filled with `style`, carried by an empty
/// rectangle at `at` (nothing shows in the plot).
pub fn legend_box<X, Y>(
    chart: &mut ChartContext<'_, SVGBackend<'_>, Cartesian2d<X, Y>>,
    at: (f64, f64),
    style: ShapeStyle,
    label: &str,
) -> Result<(), String>
where
    X: Ranged<ValueType = f64>,
    Y: Ranged<ValueType = f64>,
{
    chart
        .draw_series([Rectangle::new([at, at], style)])
        .map_err(err)?
        .label(label)
        .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 15, y + 5)], style));
    Ok(())
}

/// The legend: `boxes` (see [`legend_box`]) then the frame at `position`.
pub fn legend<'a, 'b: 'a, X, Y>(
    chart: &mut ChartContext<'a, SVGBackend<'b>, Cartesian2d<X, Y>>,
    at: (f64, f64),
    boxes: &[(ShapeStyle, &str)],
    position: SeriesLabelPosition,
) -> Result<(), String>
where
    X: Ranged<ValueType = f64>,
    Y: Ranged<ValueType = f64>,
{
    for &(style, label) in boxes {
        legend_box(chart, at, style, label)?;
    }
    framed_legend(chart, position)
}

/// Seed 001: per-request latency over time, before and after the patch,
/// random and sequential, each cleaning request's span shaded (its reads
/// in one shade, its locked part in another). Requests are bucketed by
/// 50 ms of start time; each bucket shows its slowest request.
pub fn gc_latency(path: &Path, f: &Figures) -> Result<(), String> {
    let root = SVGBackend::new(path, (1100, 800)).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let panels = root.split_evenly((2, 2));
    let reads = RGBColor(255, 200, 120).mix(0.5);
    let locked = RGBColor(230, 90, 90).mix(0.35);
    let boxes = [
        (reads.filled(), "cleaning: source-block reads"),
        (locked.filled(), "cleaning: exclusive side held"),
    ];
    for (k, area) in panels.iter().enumerate() {
        let mode = if k < 2 {
            Mode::Random
        } else {
            Mode::Sequential
        };
        let patched = k % 2 == 1;
        let r = f.get(mode, patched);
        let end_s = r.total_ns as f64 / 1e9;
        let title = format!(
            "{} writes, rc8{}",
            if mode == Mode::Random {
                "random"
            } else {
                "sequential"
            },
            if patched { " + patch" } else { "" }
        );
        let mut chart = ChartBuilder::on(area)
            .caption(title, ("sans-serif", 18))
            .margin(10)
            .x_label_area_size(30)
            .y_label_area_size(50)
            .build_cartesian_2d(0.0..end_s, (0.1f64..2000.0).log_scale())
            .map_err(err)?;
        chart
            .configure_mesh()
            .x_desc("simulated time (s)")
            .y_desc("request latency (ms)")
            .draw()
            .map_err(err)?;
        for c in &r.cleanings {
            let s = |ns: u64| ns as f64 / 1e9;
            let (rd0, rd1, lk0) = if c.locked_ns <= c.read_ns {
                (s(c.locked_ns), s(c.read_ns), s(c.locked_ns))
            } else {
                (s(c.start_ns), s(c.read_ns), s(c.locked_ns))
            };
            chart
                .draw_series([Rectangle::new(
                    [(lk0, 0.1), (s(c.end_ns), 2000.0)],
                    locked.filled(),
                )])
                .map_err(err)?;
            chart
                .draw_series([Rectangle::new([(rd0, 0.1), (rd1, 2000.0)], reads.filled())])
                .map_err(err)?;
        }
        let bucket = 50_000_000u64;
        let mut pts: Vec<(f64, f64)> = Vec::new();
        for q in &r.requests {
            let b = q.start_ns / bucket;
            let x = (b * bucket) as f64 / 1e9;
            let y = (q.latency_ns as f64 / 1e6).max(0.1);
            match pts.last_mut() {
                Some(p) if p.0 == x => p.1 = p.1.max(y),
                _ => pts.push((x, y)),
            }
        }
        chart
            .draw_series(LineSeries::new(pts, BLUE.stroke_width(1)))
            .map_err(err)?
            .label("slowest request per 50 ms")
            .legend(|(x, y)| PathElement::new([(x, y), (x + 15, y)], BLUE));
        legend(
            &mut chart,
            (0.0, 0.1),
            &boxes,
            SeriesLabelPosition::UpperRight,
        )?;
    }
    root.present().map_err(err)
}

/// Seed 002: misses per level (the readers' and the checksums' together),
/// reverse (the baseline) beside submission order (the patch), for the
/// thread's workload shape.
pub fn streams(
    path: &Path,
    reverse: &nilfs::sim::streams::StreamsRun,
    submission: &nilfs::sim::streams::StreamsRun,
) -> Result<(), String> {
    let root = SVGBackend::new(path, (800, 500)).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let per_page = |r: &nilfs::sim::streams::StreamsRun| {
        let p = r.pages.max(1) as f64;
        [
            (r.csum.l1 + r.reader.l1) as f64 / p,
            (r.csum.l2 + r.reader.l2) as f64 / p,
            (r.csum.l3 + r.reader.l3) as f64 / p,
        ]
    };
    let (rv, sb) = (per_page(reverse), per_page(submission));
    let top = rv.iter().chain(&sb).fold(0.0f64, |a, &b| a.max(b)) * 1.15;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            "seed 002, 8 streams: cache misses per 4 KiB page read",
            ("sans-serif", 18),
        )
        .margin(15)
        .x_label_area_size(35)
        .y_label_area_size(50)
        .build_cartesian_2d(0.0f64..3.0, 0.0..top)
        .map_err(err)?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(7)
        .x_label_formatter(&|x| match (*x * 2.0).round() as i32 {
            1 => "L1d".into(),
            3 => "L2".into(),
            5 => "L3 (perf cache-misses)".into(),
            _ => String::new(),
        })
        .y_desc("misses per page (64-byte lines; 64 = every line once)")
        .draw()
        .map_err(err)?;
    let red = RGBColor(200, 80, 80);
    let blue = RGBColor(70, 110, 200);
    for i in 0..3 {
        let x = i as f64;
        chart
            .draw_series([Rectangle::new(
                [(x + 0.15, 0.0), (x + 0.48, rv[i])],
                red.filled(),
            )])
            .map_err(err)?;
        chart
            .draw_series([Rectangle::new(
                [(x + 0.52, 0.0), (x + 0.85, sb[i])],
                blue.filled(),
            )])
            .map_err(err)?;
    }
    let boxes = [
        (red.filled(), "reverse completion (before the patch)"),
        (blue.filled(), "submission order (the patch)"),
    ];
    legend(
        &mut chart,
        (0.0, 0.0),
        &boxes,
        SeriesLabelPosition::UpperLeft,
    )?;
    root.present().map_err(err)
}
