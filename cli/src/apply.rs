//! `nilref apply IMAGE TRACE [-o OUT] [--dry-run]`: runs a workload written
//! in the model's trace format (docs/model.md, "Traces and the checker")
//! against an image, through nilfs-ref's file system, and records what it
//! observed, so that `nilref oracle check OUT` can judge it.
//!
//! - The trace is JSON Lines; each line's `out` field is optional and
//!   ignored (the output carries the observed outcomes instead). Checkpoint
//!   references (`{"$mkcp": k}`, `{"$lscp": i}`, see
//!   `nilfs_workload`) are resolved from the outcomes observed so
//!   far; a line whose reference cannot be resolved, or that reads a
//!   snapshot view that is not mounted (its mount failed), is not run and
//!   leaves no line in the output.
//! - IMAGE (raw, or `.xz` with `--dry-run`) is loaded into memory; nothing
//!   is written to it unless every line ran, and then it is written back as
//!   a sparse raw image (not with `--dry-run`).
//! - A leading `mkfs` line formats the image with our mkfs at the image's
//!   size and the line's geometry, refusing a geometry whose segment count
//!   the image size does not give. Without one, the output starts with an
//!   `mkfs` line describing the image's super block, since the checker
//!   starts from one (its model is a fresh file system: the output is
//!   judgeable only for an image as mkfs left it).
//! - The operations run through the model's adapter
//!   (`nilfs_adapter::ImplUnderTest`, the one the lockstep harness drives):
//!   nilfs-ref's path-level calls (`nilfs::fs::path`) with errnos and stat
//!   fields in the model's terms; an operation it does not support stops
//!   the run with an error naming the trace line, before anything is
//!   written.
//! - The injected clock starts at 0 ns, as the checker's model clock does at
//!   `mkfs` (or at the `mkfs` line's `clock`, in whole seconds), and moves
//!   only with `clock` lines; a leading `mkfs` stamps that creation time. Observed times are therefore deterministic and on the
//!   checker's clock.
//! - A trace that ends mounted leaves the image as a power cut there would:
//!   end it with `umount` (or `sync`) to keep everything.

use std::path::{Path, PathBuf};

use nilfs::device::{export_image, import_image, BlockDevice, MemDevice};
use nilfs::mkfs::{self, MkfsOptions};
use nilfs::posix::CheckpointView;
use nilfs::the_nilfs::Nilfs;
use nilfs_adapter::ImplUnderTest;
use nilfs_model::{Line, Op, Outcome};
use nilfs_workload::{self as workload, Resolver, Unresolved};

const XZ_MAGIC: [u8; 6] = [0xFD, b'7', b'z', b'X', b'Z', 0];

/// Runs `trace` against `image`; see the module documentation. Returns the
/// observed trace when `out` is `None`, else writes it to `out` and returns
/// a one-line summary.
pub fn apply_file(
    image: &Path,
    trace: &Path,
    out: Option<&Path>,
    dry_run: bool,
) -> Result<String, String> {
    let text = std::fs::read_to_string(trace).map_err(|e| format!("{}: {e}", trace.display()))?;
    let lines =
        workload::parse(&text).map_err(|(n, m)| format!("{} line {n}: {m}", trace.display()))?;
    let mut magic = [0u8; XZ_MAGIC.len()];
    let n = std::fs::File::open(image)
        .and_then(|mut f| std::io::Read::read(&mut f, &mut magic))
        .map_err(|e| format!("{}: {e}", image.display()))?;
    if !dry_run && n == magic.len() && magic == XZ_MAGIC {
        return Err(format!(
            "{}: xz-compressed; apply writes raw images back, so decompress it first or use --dry-run",
            image.display()
        ));
    }
    // A path no system call can pass (a C string ends at its NUL): refused
    // before anything runs, naming the line.
    for (n, v) in &lines {
        if has_nul(v) {
            return Err(format!(
                "{} line {n}: a path contains a NUL byte, which no system call can pass; nothing was written",
                trace.display()
            ));
        }
    }
    let dev = import_image(image).map_err(|e| e.to_string())?;
    let formats = lines
        .first()
        .is_some_and(|(_, v)| v.get("op").and_then(|o| o.as_str()) == Some("mkfs"));
    if !dry_run && !formats {
        // The write-safety rule of mkcp/chcp/rmcp/clean (Fs::mount): an
        // unknown read-only-compatible feature is EROFS for a writer.
        if let Ok(nilfs) = Nilfs::open(&dev) {
            if nilfs.sb.requires_read_only() {
                return Err(format!(
                    "{}: unsupported read-only-compatible features {:#x}: EROFS; nothing was written",
                    image.display(),
                    nilfs.sb.feature_compat_ro
                ));
            }
        }
    }
    let applied = apply_lines(&dev, &lines, &image.display().to_string())
        .map_err(|(n, m)| format!("{} line {n}: {m}; nothing was written", trace.display()))?;
    // The image is written back when the trace's last sync or unmount
    // succeeded: what it asked to keep is durable. An earlier one that
    // failed (ENOSPC, then space freed and synced again) is an outcome in
    // the observed trace, not a reason to lose the final state. When the
    // last one failed, the state nobody could make durable is not written
    // (the observed trace still is, for the oracle) and the run fails.
    let is_durability = |l: &&Line| matches!(l.op, Op::Sync | Op::Umount { cp: None });
    let failed = applied
        .lines
        .iter()
        .rev()
        .find(is_durability)
        .filter(|l| !matches!(l.out, Outcome::Ok));
    let earlier_failures = applied
        .lines
        .iter()
        .filter(is_durability)
        .filter(|l| !matches!(l.out, Outcome::Ok))
        .count();
    let note = if applied.mounted_at_end {
        " (the trace ends mounted: what it did not sync is lost, as in a power cut)"
    } else {
        ""
    };
    let observed: String = applied.lines.iter().map(|l| l.to_json() + "\n").collect();
    if let Some(l) = failed {
        if let Some(o) = out {
            std::fs::write(o, &observed).map_err(|e| format!("{}: {e}", o.display()))?;
        }
        return Err(format!(
            "{}: the last durability point {} failed ({}); the image was not written{}",
            image.display(),
            l.to_json(),
            match &l.out {
                Outcome::Err(e) => format!("{e:?}"),
                other => format!("{other:?}"),
            },
            out.map_or(String::new(), |o| format!(
                "; observed trace in {}",
                o.display()
            ))
        ));
    }
    let note = if earlier_failures > 0 {
        format!("{note} ({earlier_failures} earlier sync or unmount failed; their outcomes are in the trace)")
    } else {
        note.to_string()
    };
    if !dry_run {
        export_image(&dev, image).map_err(|e| e.to_string())?;
    }
    match out {
        None => Ok(observed),
        Some(o) => {
            std::fs::write(o, &observed).map_err(|e| format!("{}: {e}", o.display()))?;
            Ok(format!(
                "{}: applied {} operations{}{note}; observed trace in {}\n",
                image.display(),
                applied.lines.len(),
                if dry_run {
                    " (dry run, image unchanged)"
                } else {
                    ""
                },
                o.display()
            ))
        }
    }
}

/// Whether a path or symlink target of a trace line (`path`, `old`, `new`,
/// `target`) holds a NUL byte. Data payloads may hold any byte.
fn has_nul(v: &serde_json::Value) -> bool {
    ["path", "old", "new", "target"].iter().any(|k| {
        v.get(k)
            .and_then(|x| x.as_str())
            .is_some_and(|t| t.contains('\0'))
    })
}

/// What a workload did on a device.
pub struct Applied {
    /// The observed trace, `mkfs` line first.
    pub lines: Vec<Line>,
    /// The workload left the file system mounted.
    pub mounted_at_end: bool,
}

/// Runs a parsed workload on `dev` through nilfs-ref's file system (see the
/// module documentation); `label` names the device in messages. An error
/// names the workload line it stopped at.
pub fn apply_lines(
    dev: &dyn BlockDevice,
    lines: &[(usize, serde_json::Value)],
    label: &str,
) -> Result<Applied, (usize, String)> {
    apply_lines_on(dev, dev, lines, label, &mut |_| {})
}

/// [`apply_lines`] on `dev` (formatted through `mem`, the same storage),
/// calling `before(k)` before running the operation that becomes line `k`
/// of the observed trace (the crash campaign marks its write log there).
pub fn apply_lines_on(
    mem: &dyn BlockDevice,
    dev: &dyn BlockDevice,
    lines: &[(usize, serde_json::Value)],
    label: &str,
    before: &mut dyn FnMut(usize),
) -> Result<Applied, (usize, String)> {
    let mut resolver = Resolver::default();
    let mut observed_lines = Vec::with_capacity(lines.len() + 1);
    let (first_n, first) = lines
        .first()
        .map(|(n, v)| (*n, resolver.resolve(v)))
        .ok_or((0, "empty workload".to_string()))?;
    let rest = match first {
        Ok(op @ Op::Mkfs { .. }) => {
            format_image(mem, &op, label).map_err(|m| (first_n, m))?;
            // nilfs-ref stamps inodes with the workload's own clock: the
            // trace is judged with exact times from its first line on.
            let t = match &op {
                Op::Mkfs { clock, .. } => Some([*clock, *clock]),
                _ => None,
            };
            observed_lines.push(Line {
                op,
                out: Outcome::Ok,
                t,
            });
            &lines[1..]
        }
        _ => {
            observed_lines.push(Line {
                op: describe_image(mem).map_err(|m| {
                    (
                        0,
                        format!("{label}: {m} (and the trace does not start with mkfs)"),
                    )
                })?,
                out: Outcome::Ok,
                t: None,
            });
            lines
        }
    };
    let start_s = match &observed_lines[0].op {
        Op::Mkfs { clock, .. } => (*clock).max(0) as u64 / 1_000_000_000,
        _ => 0,
    };
    let mut sut = ImplUnderTest::from_device(dev, start_s);
    let mut views = std::collections::BTreeSet::new();
    for (n, line) in rest {
        let op = match resolver.resolve(line) {
            Ok(op) => op,
            Err(u @ Unresolved::Malformed(_)) => return Err((*n, u.to_string())),
            Err(Unresolved::Reference(_)) => {
                resolver.skipped(line);
                continue;
            }
        };
        if op.at().is_some_and(|c| !views.contains(&c)) {
            continue;
        }
        if matches!(op, Op::Mkfs { .. }) {
            return Err((*n, "mkfs is valid only as the first line".into()));
        }
        before(observed_lines.len());
        let observed = sut.try_apply(&op).map_err(|u| (*n, u.to_string()))?;
        resolver.observe(&op, &observed);
        match (&op, &observed) {
            (Op::Mount { cp: Some(c), .. }, Outcome::Ok) => {
                views.insert(*c);
            }
            (Op::Umount { cp: Some(c) }, Outcome::Ok) => {
                views.remove(c);
            }
            (Op::Crash, _) => views.clear(),
            _ => {}
        }
        observed_lines.push(Line {
            op,
            out: observed,
            t: None,
        });
    }
    Ok(Applied {
        lines: observed_lines,
        mounted_at_end: sut.is_mounted(),
    })
}

/// Formats `dev` for a trace's `mkfs` line: our mkfs at the device's size
/// with the line's geometry, creation time 0 (the checker's model clock),
/// CRC seed and UUID from seed 0. Refuses when the image size does not give
/// the line's segment count, naming the size that would.
fn format_image(dev: &dyn BlockDevice, op: &Op, label: &str) -> Result<(), String> {
    let Op::Mkfs {
        block_size,
        blocks_per_segment,
        nsegments,
        r_segments_percentage,
        dot_nilfs,
        clock,
        ..
    } = op
    else {
        unreachable!("called for mkfs lines only");
    };
    let o = MkfsOptions {
        block_size: u64::from(*block_size),
        blocks_per_segment: u64::from(*blocks_per_segment),
        reserved_percentage: u64::from(*r_segments_percentage),
        dot_nilfs: *dot_nilfs,
        ctime: (*clock).max(0) as u64 / 1_000_000_000,
        ..MkfsOptions::from_seed(0)
    };
    mkfs::check_options(&o).map_err(|m| format!("mkfs refuses the geometry: {m}"))?;
    let size = dev.size_bytes();
    let layout = mkfs::mkfs(dev, &o).map_err(|e| format!("mkfs: {e}"))?;
    if layout.nsegments == *nsegments {
        return Ok(());
    }
    // The smallest whole-segment size that gives the asked count, if any
    // (the super blocks take room, so it is a segment or two more).
    let seg_bytes = o.blocks_per_segment * o.block_size;
    let fits = (*nsegments..nsegments + 3)
        .map(|n| n * seg_bytes)
        .find(|&b| mkfs::mkfs(&MemDevice::new(b), &o).is_ok_and(|l| l.nsegments == *nsegments));
    Err(format!(
        "the geometry does not fit: mkfs asks for {nsegments} segments of {} blocks of {} bytes, \
         but {} ({size} bytes) holds {}{}",
        o.blocks_per_segment,
        o.block_size,
        label,
        layout.nsegments,
        fits.map_or(String::new(), |b| format!(
            "; an image of {b} bytes holds {nsegments}"
        ))
    ))
}

/// The `mkfs` line for the file system already on `dev`: the geometry from
/// its super block, `dot_nilfs` from whether the latest checkpoint has
/// `/.nilfs`.
fn describe_image(dev: &dyn BlockDevice) -> Result<Op, String> {
    let nilfs = Nilfs::open(dev).map_err(|e| format!("not a NILFS2 image: {e}"))?;
    let view = CheckpointView::open(&nilfs, None).map_err(|e| e.to_string())?;
    Ok(Op::Mkfs {
        block_size: nilfs.block_size(),
        blocks_per_segment: nilfs.sb.blocks_per_segment,
        nsegments: nilfs.sb.nsegments,
        r_segments_percentage: nilfs.sb.r_segments_percentage,
        dot_nilfs: view.resolve(b"/.nilfs", false).is_ok(),
        clock: 0,
        kernel: None,
    })
}

/// Arguments of `nilref apply`.
#[derive(clap::Args)]
pub struct ApplyArgs {
    /// Image file (written back unless --dry-run).
    pub image: PathBuf,
    /// The trace (JSON Lines; `out` fields are ignored).
    pub trace: PathBuf,
    /// Where to write the observed trace (default: stdout).
    #[arg(short = 'o')]
    pub out: Option<PathBuf>,
    /// Leave the image unchanged.
    #[arg(long)]
    pub dry_run: bool,
}

/// `nilref apply`.
pub fn run(a: ApplyArgs) -> Result<String, String> {
    apply_file(&a.image, &a.trace, a.out.as_deref(), a.dry_run)
}
