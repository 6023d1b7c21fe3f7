//! `nilref exec DIR WORKLOAD [-o OBSERVED] [--device DEV]`: a trace runner
//! for any mounted file system. Each workload line goes through real system
//! calls on the mount at DIR; what came back (the errno included) is
//! recorded in the trace format the oracle reads.
//!
//! - Paths are the workload's, inside the file system: the runner
//!   `chroot`s into the view an operation names (the mount at DIR, or a
//!   `cp=N` snapshot mount), so `..` at the top and absolute symlink
//!   targets stay inside it, as they do for the model. It must run as root
//!   (chroot, mount, and the checkpoint ioctls need CAP_SYS_ADMIN).
//! - Checkpoint operations use NILFS2's ioctls directly, as the nilfs-tools
//!   do (module `nilfs_ioctl`): mkcp = `NILFS_IOCTL_SYNC` (then
//!   `CHANGE_CPMODE` for `-s`), chcp = `CHANGE_CPMODE`, rmcp =
//!   `DELETE_CHECKPOINT`, lscp = `GET_CPINFO` with lscp's filter (minor
//!   checkpoints that are not snapshots are hidden). The cleaner is the
//!   nilfs-tools' own: `nilfs_cleanerd -p P` started for the pass,
//!   `nilfs-clean -p P`, wait until it is idle, `nilfs-clean -q`.
//! - The observed trace starts with an `mkfs` line read from the device's
//!   super block (geometry), whether DIR holds `/.nilfs`, and the root's
//!   mtime as the model's clock at mkfs (so a fresh file system's times
//!   compare). A `mount` line follows: DIR is mounted read-write.
//! - The kernel's clock cannot be set: `clock` lines of the workload are
//!   dropped (or slept, `--sleep-on-clock`), and every line records the
//!   interval its call ran in, `"t": [before, after]`:
//!   `CLOCK_REALTIME_COARSE` (the clock `current_time()` stamps inodes
//!   with) just before the call, `CLOCK_REALTIME` just after it. Every
//!   time stamp the call set lies in it, and the oracle judges it so
//!   (model `time`). The `mkfs` line's interval is the root's exact time.
//! - Without `--device`, mount, umount, remount and crash cannot run: a
//!   leading `mount` is the mount DIR already is, a trailing `umount` is
//!   left out (the file system stays mounted), anything else stops the run
//!   naming the line. With `--device DEV`, DIR may start unmounted; mounts
//!   of DEV at DIR (`-o ro`, remount) and snapshot mounts at a runner-owned
//!   folder run as the workload says. A crash never does.
//! - Checkpoint references resolve from the outcomes observed so far
//!   (`nilfs_workload`); a line whose reference cannot be resolved,
//!   or that reads a snapshot view that is not mounted, is not run.
//! - A concurrent workload (lines with `"w": K`, `nilfs_workload::concurrent`)
//!   runs its workers' lines at once, one process per worker, between its
//!   sequential lines, and the observed trace is a history: each worker
//!   line also records its worker and its call and return times on
//!   `CLOCK_MONOTONIC` (module `concurrent`), for `nilref oracle check`'s
//!   linearizability checker.
//! - With `--mark-log-writes DMNAME` (DIR's device is a dm-log-writes
//!   target of that name, see `campaign::crash`), the runner puts a mark
//!   `op-K` into the write log before it runs the operation that becomes
//!   line K (0-based) of the observed trace: `dmsetup message DMNAME 0 mark
//!   op-K`, which returns once the mark is queued behind every write that
//!   has completed. Whatever the log holds before mark `op-K` was written
//!   before operation K began.

mod calls;
pub mod concurrent;
pub(crate) mod nilfs_ioctl;
mod runner;

use std::path::PathBuf;

use nilfs_model::{Line, Op, Outcome};
use nilfs_workload::{self as workload, Resolver, Unresolved};

use crate::exec::calls::Stop;
pub use crate::exec::runner::ExecOptions;
use crate::exec::runner::Runner;

/// Runs the workload; returns the observed trace (no `-o`) or a summary.
pub fn exec_workload(opts: &ExecOptions<'_>) -> Result<String, String> {
    let text = std::fs::read_to_string(opts.workload)
        .map_err(|e| format!("{}: {e}", opts.workload.display()))?;
    let lines = workload::parse(&text)
        .map_err(|(n, m)| format!("{} line {n}: {m}", opts.workload.display()))?;
    let mut runner = Runner::new(opts)?;
    let mut observed: Vec<String> = Vec::new();
    let describe = match runner.describe() {
        Ok(op) => op,
        // Not NILFS2 underneath (tmpfs, a FUSE file system under test):
        // the workload's own mkfs line says what the trace is judged as.
        Err(why) => match lines.first().map(|(_, v)| resolver_free(v)) {
            Some(Ok(op @ Op::Mkfs { .. })) => {
                eprintln!("nilref exec: {why}; judging it as the workload's mkfs line says");
                with_root(
                    op,
                    runner.root_mtime().unwrap_or(0),
                    runner.dir.join(".nilfs").exists(),
                )
            }
            _ => return Err(why),
        },
    };
    // The root's time is exact: the trace is judged with exact times.
    let clock = match &describe {
        Op::Mkfs { clock, .. } => *clock,
        _ => 0,
    };
    observed.push(
        Line {
            t: Some([clock, clock]),
            ..Line::new(describe, Outcome::Ok)
        }
        .to_json(),
    );
    if let Some(ro) = runner.mounted_read_only() {
        observed.push(Line::new(Op::Mount { cp: None, ro }, Outcome::Ok).to_json());
    }
    let mut resolver = Resolver::default();
    let last = lines.len().saturating_sub(1);
    let mut workload_clock = match lines.first().map(|(_, v)| resolver_free(v)) {
        Some(Ok(Op::Mkfs { clock, .. })) => clock,
        _ => 0,
    };
    let mut skipped = 0usize;
    let mut result = Ok(());
    // A concurrent workload's worker lines since the last sequential one.
    let mut phase: Vec<(usize, serde_json::Value)> = Vec::new();
    let flush = |phase: &mut Vec<(usize, serde_json::Value)>,
                 runner: &mut Runner<'_>,
                 resolver: &mut Resolver,
                 observed: &mut Vec<String>|
     -> Result<(), String> {
        if phase.is_empty() {
            return Ok(());
        }
        if opts.mark_log_writes.is_some() {
            return Err("--mark-log-writes cannot mark a concurrent phase".into());
        }
        let events = concurrent::run_phase(runner, opts, phase, resolver, opts.worker_deadline)?;
        observed.extend(events.iter().map(|e| e.to_json()));
        phase.clear();
        Ok(())
    };
    for (k, (n, line)) in lines.iter().enumerate() {
        if line.get("w").is_some() {
            phase.push((*n, line.clone()));
            continue;
        }
        if let Err(why) = flush(&mut phase, &mut runner, &mut resolver, &mut observed) {
            result = Err(why);
            break;
        }
        let op = match resolver.resolve(line) {
            Ok(op) => op,
            Err(u @ Unresolved::Malformed(_)) => {
                result = Err(format!("{} line {n}: {u}", opts.workload.display()));
                break;
            }
            Err(Unresolved::Reference(_)) => {
                resolver.skipped(line);
                skipped += 1;
                continue;
            }
        };
        match &op {
            Op::Mkfs { .. } if k == 0 => continue,
            Op::Clock { now } => {
                if opts.sleep_on_clock && *now > workload_clock {
                    let ns = (*now - workload_clock).min(30_000_000_000);
                    std::thread::sleep(std::time::Duration::from_nanos(ns as u64));
                }
                workload_clock = workload_clock.max(*now);
                continue;
            }
            Op::Mount { cp: None, .. } if k <= 1 && runner.mounted => continue,
            Op::Umount { cp: None } if k == last && opts.device.is_none() => continue,
            _ => {}
        }
        if let Some(c) = op.at() {
            if !runner.snapshots.iter().any(|(s, _)| *s == c) {
                skipped += 1;
                continue;
            }
        }
        if let Some(dm) = opts.mark_log_writes {
            if let Err(why) = runner.mark(dm, observed.len()) {
                result = Err(format!("{} line {n}: {why}", opts.workload.display()));
                break;
            }
        }
        let line = match timed(&mut runner, op) {
            Ok(line) => line,
            Err(why) => {
                result = Err(format!("{} line {n}: {why}", opts.workload.display()));
                break;
            }
        };
        resolver.observe(&line.op, &line.out);
        observed.push(line.to_json());
    }
    if result.is_ok() {
        result = flush(&mut phase, &mut runner, &mut resolver, &mut observed);
    }
    runner.finish();
    result?;
    let text: String = observed.iter().map(|l| l.clone() + "\n").collect();
    match opts.out {
        None => Ok(text),
        Some(o) => {
            std::fs::write(o, &text).map_err(|e| format!("{}: {e}", o.display()))?;
            Ok(format!(
                "{}: ran {} lines ({skipped} not run: unresolved references or views not mounted); observed trace in {}\n",
                opts.dir.display(),
                observed.len(),
                o.display()
            ))
        }
    }
}

/// Runs `op` between two readings of the clock: its observed line, with
/// the interval (an errno is an outcome), or why the runner could not run
/// it.
fn timed(runner: &mut Runner<'_>, op: Op) -> Result<Line, String> {
    let before = Runner::clock_before();
    let out = match runner.exec(&op) {
        Ok(o) => o,
        Err(Stop::Errno(e)) => Outcome::Err(e),
        Err(Stop::Cannot(why)) => return Err(why),
    };
    let after = Runner::clock_after();
    Ok(Line {
        t: Some([before, after]),
        ..Line::new(op, out)
    })
}

/// A line without references, as an operation.
fn resolver_free(v: &serde_json::Value) -> Result<Op, Unresolved> {
    Resolver::default().resolve(v)
}

fn with_root(op: Op, at: i64, has_dot_nilfs: bool) -> Op {
    match op {
        Op::Mkfs {
            block_size,
            blocks_per_segment,
            nsegments,
            r_segments_percentage,
            ..
        } => Op::Mkfs {
            block_size,
            blocks_per_segment,
            nsegments,
            r_segments_percentage,
            dot_nilfs: has_dot_nilfs,
            clock: at,
            // Not the kernel's nilfs2: no release to judge it as.
            kernel: None,
        },
        other => other,
    }
}

/// Arguments of `nilref exec`.
#[derive(clap::Args)]
pub struct ExecArgs {
    /// The mount point (or, with --device, where to mount).
    pub dir: PathBuf,
    /// The workload (JSON Lines; `out` fields are ignored).
    #[arg(required_unless_present = "stream")]
    pub workload: Option<PathBuf>,
    /// Serve operations one at a time instead of running a workload: each
    /// line read from stdin is one operation (the model's trace format,
    /// references resolved), and one observed line goes to stdout for it,
    /// with its clock interval, or `{"cannot": WHY}` when the runner could
    /// not run it. The runner keeps its state between lines; it ends at
    /// the end of stdin. What `nilfs_oracle::Pipe` drives.
    #[arg(long, conflicts_with_all = ["out", "mark_log_writes"])]
    pub stream: bool,
    /// Where to write the observed trace (default: stdout).
    #[arg(short = 'o')]
    pub out: Option<PathBuf>,
    /// The block device: lets the workload mount, remount and unmount
    /// it, and mount snapshots.
    #[arg(long)]
    pub device: Option<PathBuf>,
    /// DIR's device is the dm-log-writes target DMNAME: put a mark
    /// `op-K` in its log before the operation of observed line K.
    #[arg(long, value_name = "DMNAME")]
    pub mark_log_writes: Option<String>,
    /// Let real time pass as the workload's `clock` lines say (each step
    /// forward slept, at most 30 s): for workloads whose point is that
    /// time moved between two operations, such as a timestamp a later
    /// operation must or must not change.
    #[arg(long)]
    pub sleep_on_clock: bool,
    /// A concurrent workload: how long (s) its workers may run in one
    /// phase before they are stopped (their last calls then have no
    /// response).
    #[arg(long, default_value_t = 600)]
    pub worker_deadline: u64,
}

/// `nilref exec`.
pub fn run(a: ExecArgs) -> Result<String, String> {
    let stdin = PathBuf::from("-");
    let opts = ExecOptions {
        dir: &a.dir,
        workload: a.workload.as_deref().unwrap_or(&stdin),
        out: a.out.as_deref(),
        device: a.device.as_deref(),
        mark_log_writes: a.mark_log_writes.as_deref(),
        sleep_on_clock: a.sleep_on_clock,
        worker_deadline: std::time::Duration::from_secs(a.worker_deadline),
    };
    if a.stream {
        let stdin = std::io::stdin().lock();
        let stdout = std::io::stdout().lock();
        serve_stream(&opts, stdin, stdout)?;
        return Ok(String::new());
    }
    exec_workload(&opts)
}

/// Whether `line` is a stream session's end, `{"end": true}`.
pub fn is_end(line: &str) -> bool {
    serde_json::from_str::<serde_json::Value>(line).is_ok_and(|v| v["end"] == true)
}

/// `--stream`: one operation in, one observed line out, until `input`
/// ends or a line `{"end": true}` comes (a session over a link that has no
/// end of input, the kernel guest's port: `nilref guest loop`). A line
/// that is not an operation, or one the runner cannot run (a mount
/// without `--device`, a concurrent worker line), is answered
/// `{"cannot": WHY}` and the runner goes on; only a failed write of the
/// answer stops it.
pub fn serve_stream(
    opts: &ExecOptions<'_>,
    input: impl std::io::BufRead,
    mut output: impl std::io::Write,
) -> Result<(), String> {
    let mut runner = Runner::new(opts)?;
    let mut result = Ok(());
    for line in input.lines() {
        let line = match line {
            Ok(l) => l,
            Err(e) => {
                result = Err(format!("stdin: {e}"));
                break;
            }
        };
        if line.trim().is_empty() {
            continue;
        }
        if is_end(&line) {
            break;
        }
        let answer = match serde_json::from_str::<serde_json::Value>(&line)
            .map_err(|e| e.to_string())
            .and_then(|v| resolver_free(&v).map_err(|u| u.to_string()))
        {
            Err(why) => {
                serde_json::json!({ "cannot": format!("not an operation: {why}") }).to_string()
            }
            // The injected clock has no system call: a kernel's or a
            // mount's clock cannot be set.
            Ok(Op::Clock { .. }) => {
                serde_json::json!({ "cannot": "a clock line cannot be run on a mount" }).to_string()
            }
            Ok(op) => match timed(&mut runner, op) {
                Ok(line) => line.to_json(),
                Err(why) => serde_json::json!({ "cannot": why }).to_string(),
            },
        };
        if let Err(e) = writeln!(output, "{answer}").and_then(|()| output.flush()) {
            result = Err(format!("stdout: {e}"));
            break;
        }
    }
    runner.finish();
    result
}
