//! A concurrent workload's phases: every worker's lines at once, one
//! process per worker, recorded as a history (`nilfs_model::history`).
//!
//! - Each worker is its own process (`nilref exec-worker`, this binary
//!   again): the runner `chroot`s into the view an operation names, and a
//!   root is per process, so workers on the live mount, a cleaner run from
//!   the host's root and a checkpoint worker do not disturb one another.
//! - The workers start together: each sets itself up, then sleeps until
//!   one start instant on `CLOCK_MONOTONIC`, the clock every event's
//!   `call` and `ret` are read on (one clock for every process).
//! - A worker writes a record before each call (`call`) and one after it
//!   (`ret`, the outcome), and flushes both; an operation whose `ret`
//!   never came (the worker was killed at the deadline, or its process
//!   died) is in the history without a response: the checker lets it have
//!   taken effect or not.
//! - Checkpoint references resolve in the worker that runs the line, from
//!   what the runner had observed before the phase and what the worker
//!   observed itself; after the phase the runner observes every worker's
//!   outcomes, worker by worker (the order of a generated workload's
//!   lines), so later references count as they would in one thread.

use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use nilfs_model::{Event, Op, Outcome};
use nilfs_workload::{Resolver, Unresolved};
use serde_json::{json, Value};

use crate::exec::calls::Stop;
use crate::exec::runner::{ExecOptions, Runner};

/// `CLOCK_MONOTONIC` now (ns).
pub fn monotonic() -> u64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
}

/// How long the workers get to set themselves up before they start.
const START_DELAY: Duration = Duration::from_millis(500);

/// Runs one phase: `lines` are the workload's worker lines (with their
/// line numbers), in workload order. Returns the events, ordered by call.
pub fn run_phase(
    runner: &mut Runner<'_>,
    opts: &ExecOptions<'_>,
    lines: &[(usize, Value)],
    resolver: &mut Resolver,
    deadline: Duration,
) -> Result<Vec<Event>, String> {
    let mut ids: Vec<u64> = lines.iter().filter_map(|(_, v)| v["w"].as_u64()).collect();
    ids.sort_unstable();
    ids.dedup();
    runner.enter_host()?;
    let exe = std::env::current_exe().map_err(|e| format!("this program's path: {e}"))?;
    let start = monotonic() + START_DELAY.as_nanos() as u64;
    let mut children: Vec<(u64, Child, std::thread::JoinHandle<String>)> = Vec::new();
    for &w in &ids {
        let mine: String = lines
            .iter()
            .filter(|(_, v)| v["w"].as_u64() == Some(w))
            .map(|(_, v)| v.to_string() + "\n")
            .collect();
        let mut cmd = Command::new(&exe);
        cmd.arg("exec-worker")
            .arg(&runner.dir)
            .arg("--start-at")
            .arg(start.to_string())
            .arg("--resolver")
            .arg(resolver.to_json().to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        if opts.device.is_some() {
            cmd.arg("--device").arg(&runner.device);
        }
        let mut child = cmd.spawn().map_err(|e| format!("{}: {e}", exe.display()))?;
        let mut stdin = child.stdin.take().expect("piped");
        stdin
            .write_all(mine.as_bytes())
            .map_err(|e| format!("worker {w}: {e}"))?;
        drop(stdin);
        let mut stdout = child.stdout.take().expect("piped");
        let reader = std::thread::spawn(move || {
            let mut s = String::new();
            let _ = stdout.read_to_string(&mut s);
            s
        });
        children.push((w, child, reader));
    }
    let until = Instant::now() + START_DELAY + deadline;
    let mut outputs: Vec<(u64, String)> = Vec::new();
    for (w, mut child, reader) in children {
        loop {
            match child.try_wait() {
                Ok(Some(_)) => break,
                Ok(None) if Instant::now() < until => std::thread::sleep(Duration::from_millis(20)),
                _ => {
                    eprintln!("nilref exec: worker {w} passed the deadline; stopped, its last call has no response");
                    // The watchdog: blocked tasks into the kernel log
                    // (sysrq w), where a hang's stacks are.
                    let _ = std::fs::write("/proc/sysrq-trigger", "w");
                    let _ = child.kill();
                    let _ = child.wait();
                    break;
                }
            }
        }
        outputs.push((w, reader.join().unwrap_or_default()));
    }
    let end = Runner::clock_after();
    // Assemble: calls and returns by workload line.
    let mut events: Vec<Event> = Vec::new();
    for (w, text) in &outputs {
        let mine: Vec<&(usize, Value)> = lines
            .iter()
            .filter(|(_, v)| v["w"].as_u64() == Some(*w))
            .collect();
        let mut open: Option<Event> = None;
        let mut records = text
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok());
        let mut k = 0usize;
        for rec in records.by_ref() {
            if let Some(e) = open.take() {
                if rec.get("ret").is_some() {
                    let mut e = e;
                    e.ret = rec["ret"].as_u64();
                    e.out = serde_json::from_value(rec["out"].clone()).ok();
                    if let (Some(lo), Some(hi)) = (e.t.map(|t| t[0]), rec["t1"].as_i64()) {
                        e.t = Some([lo, hi]);
                    }
                    let out = e
                        .out
                        .clone()
                        .ok_or_else(|| format!("worker {w}: a response without an outcome"))?;
                    resolver.observe(&e.op, &out);
                    events.push(e);
                    k += 1;
                    continue;
                }
                return Err(format!("worker {w}: a call without its response"));
            }
            if rec.get("skip").is_some() {
                if let Some((_, v)) = mine.get(k) {
                    resolver.skipped(v);
                }
                k += 1;
                continue;
            }
            if let Some(why) = rec.get("stop").and_then(Value::as_str) {
                return Err(format!("worker {w}: {why}"));
            }
            let op: Op = serde_json::from_value(rec["op"].clone())
                .map_err(|e| format!("worker {w}: {e}"))?;
            open = Some(Event {
                w: Some(*w as u32),
                call: rec["call"].as_u64(),
                ret: None,
                op,
                out: None,
                t: rec["t0"].as_i64().map(|lo| [lo, lo]),
            });
        }
        if let Some(mut e) = open {
            // Never returned: it may have run until the phase ended.
            e.t = e.t.map(|[lo, _]| [lo, end.max(lo)]);
            events.push(e);
        }
    }
    events.sort_by_key(|e| (e.call, e.w));
    Ok(events)
}

/// Arguments of `nilref exec-worker` (internal: one worker of a
/// concurrent run).
#[derive(clap::Args)]
pub struct WorkerArgs {
    pub dir: PathBuf,
    /// When to start (`CLOCK_MONOTONIC`, ns).
    #[arg(long)]
    pub start_at: u64,
    /// The runner's resolver state (JSON).
    #[arg(long)]
    pub resolver: String,
    #[arg(long)]
    pub device: Option<PathBuf>,
}

/// `nilref exec-worker`: runs the lines on stdin, writing a call record
/// before each and a return record after it, on stdout.
pub fn worker(a: WorkerArgs) -> Result<String, String> {
    let mut text = String::new();
    std::io::stdin()
        .read_to_string(&mut text)
        .map_err(|e| format!("stdin: {e}"))?;
    let lines = nilfs_workload::parse(&text).map_err(|(n, m)| format!("line {n}: {m}"))?;
    let placeholder = PathBuf::new();
    let opts = ExecOptions {
        dir: &a.dir,
        workload: &placeholder,
        out: None,
        device: a.device.as_deref(),
        mark_log_writes: None,
        sleep_on_clock: false,
        worker_deadline: Duration::ZERO,
    };
    let mut runner = Runner::new(&opts)?;
    let mut resolver = Resolver::from_json(
        &serde_json::from_str(&a.resolver).map_err(|e| format!("--resolver: {e}"))?,
    )
    .ok_or("--resolver: not a resolver's state")?;
    let mut out = std::io::stdout().lock();
    let mut emit = |v: Value| {
        let _ = writeln!(out, "{v}");
        let _ = out.flush();
    };
    let now = monotonic();
    if a.start_at > now {
        std::thread::sleep(Duration::from_nanos(a.start_at - now));
    }
    for (_, line) in &lines {
        let op = match resolver.resolve(line) {
            Ok(op) => op,
            Err(Unresolved::Reference(_)) => {
                resolver.skipped(line);
                emit(json!({"skip": true}));
                continue;
            }
            Err(e @ Unresolved::Malformed(_)) => {
                emit(json!({"stop": e.to_string()}));
                break;
            }
        };
        let t0 = Runner::clock_before();
        let call = monotonic();
        emit(json!({"call": call, "t0": t0, "op": op}));
        let res = runner.exec(&op);
        let ret = monotonic();
        let t1 = Runner::clock_after();
        let o = match res {
            Ok(o) => o,
            Err(Stop::Errno(e)) => Outcome::Err(e),
            Err(Stop::Cannot(why)) => {
                emit(json!({"stop": why}));
                break;
            }
        };
        resolver.observe(&op, &o);
        emit(json!({"ret": ret, "t1": t1, "out": o}));
    }
    let _ = runner.enter_host();
    Ok(String::new())
}
