//! `nilref check IMAGE [--cp N] [--json] [--all-checkpoints]`: the library's
//! checker with fsck's exit codes (0 clean, 4 errors, 8 operational error),
//! a progress bar on a terminal, and one JSON object per finding with
//! `--json` (the verdict as a last object).

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use nilfs::check::{check_device, Checkpoints, Finding, Options, Report};
use nilfs::format::Cno;

/// A finding as JSON.
pub fn finding_json(f: &Finding) -> serde_json::Value {
    serde_json::json!({
        "code": f.code.id(),
        "severity": format!("{:?}", f.code.severity()).to_lowercase(),
        "pass": f.code.pass(),
        "structure": f.structure,
        "block": f.block,
        "found": f.found,
        "expected": f.expected,
        "kernel": f.code.kernel(),
    })
}

/// The whole report as JSON lines: one object per finding, then the verdict.
pub fn report_json(r: &Report) -> String {
    let mut out = String::new();
    for f in &r.findings {
        out.push_str(&finding_json(f).to_string());
        out.push('\n');
    }
    let verdict = serde_json::json!({
        "verdict": match r.exit_code() { 0 => "clean", 4 => "errors", _ => "operational-error" },
        "exit": r.exit_code(),
        "errors": r.errors() as u64 + r.suppressed,
        "suppressed": r.suppressed,
        "operational": r.operational,
        "notes": r.notes,
        "roll_forward": r.roll_forward.as_ref().map(|x| serde_json::json!({
            "start": x.start.0, "end": x.end.0, "logs": x.logs,
        })),
        "used_blocks": r.stats.used_blocks,
        "bytes_read": r.stats.bytes_read,
        "logs": r.stats.logs,
        "checkpoints": r.stats.checkpoints,
        "inodes": r.stats.inodes,
    });
    out.push_str(&verdict.to_string());
    out.push('\n');
    out
}

pub fn check_image(image: &Path, cp: Option<u64>, json: bool, all: bool, quiet: bool) -> ExitCode {
    let dev = match crate::image::open_image(image) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("nilref: {e}");
            return ExitCode::from(8);
        }
    };
    let checkpoints = match (cp, all) {
        (Some(c), _) => Checkpoints::Only(Cno(c)),
        (None, true) => Checkpoints::All,
        (None, false) => Checkpoints::Default,
    };
    let mut opts = Options {
        checkpoints,
        ..Options::default()
    };
    let bar = (!quiet && std::io::stderr().is_terminal()).then(|| {
        let b = indicatif::ProgressBar::new(0);
        b.set_style(
            indicatif::ProgressStyle::with_template(
                "{msg:>10} [{bar:40}] {pos}/{len} {per_sec} {eta}",
            )
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar())
            .progress_chars("=> "),
        );
        b
    });
    if let Some(b) = &bar {
        let b = b.clone();
        opts.progress = Some(Arc::new(move |p| {
            b.set_message(p.phase);
            b.set_length(p.total.max(p.done));
            b.set_position(p.done);
        }));
    }
    let r = check_device(dev.as_ref(), &opts);
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    if json {
        crate::print_out(&report_json(&r));
    } else {
        crate::print_out(&r.to_string());
    }
    ExitCode::from(r.exit_code())
}

/// Arguments of `nilref check`.
#[derive(clap::Args)]
pub struct CheckArgs {
    /// Image file (raw, or .xz-compressed).
    pub image: PathBuf,
    /// Also check this checkpoint (default: the latest and every snapshot).
    #[arg(long)]
    pub cp: Option<u64>,
    /// One JSON object per finding.
    #[arg(long)]
    pub json: bool,
    /// Check every valid checkpoint.
    #[arg(long, conflicts_with = "cp")]
    pub all_checkpoints: bool,
    /// No progress bar.
    #[arg(short = 'q', long)]
    pub quiet: bool,
}

/// `nilref check`: its own exit codes, as fsck's.
pub fn run(a: &CheckArgs) -> ExitCode {
    check_image(&a.image, a.cp, a.json, a.all_checkpoints, a.quiet)
}
