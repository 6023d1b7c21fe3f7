//! The crash campaign against Linux: CrashMonkey/ACE for NILFS2, with the
//! model as the judge (docs/findings.md, "Crash campaign against Linux").
//!
//! For every workload (profile `crash` by default: one to three operations,
//! then an fsync-family call):
//!
//! 1. **Record.** The host formats a data disk with its own mkfs.nilfs2 and
//!    keeps that pristine image as the base. In the guest, dm-log-writes
//!    sits over the data disk with a second disk as its log; the dm device
//!    is mounted and `nilref exec --mark-log-writes` runs the workload on
//!    it, marking `op-K` in the log before the operation of observed line
//!    K; then unmount and removal (which logs the end mark). The observed
//!    trace comes back over 9p, the log on its disk.
//! 2. **Replay** ([`log_writes`](super::log_writes)): the log onto the
//!    base, giving the disk at every flush/FUA boundary and, sampled with a
//!    seed, torn and reordered states within an epoch.
//! 3. **Judge** each state: our recovery (`Nilfs::open` + `Fs::mount`, with
//!    roll-forward) then our read path (`CheckpointView`, the manifest) must
//!    show a state of the model's crash envelope, and `nilref check` must
//!    find the raw crash image clean. The marks say how far the workload
//!    had got: under mark `op-K`, observed lines 0..K had completed and
//!    line K may have been in flight, so the allowed states are the crash
//!    envelope ([`nilfs_model::crash`]) of the model after the first K
//!    lines and after K+1 ([`Envelope`]). A state that stood under several
//!    marks (nothing reached the disk between them) is judged under each.
//! 4. **The kernel's own recovery**: a seeded sample of states (preferring
//!    ones with logs to roll forward) goes back to the guest as disks; the
//!    kernel mounts each read-write (running its recovery) and prints the
//!    manifest and `lscp -a`, which must equal ours.
//! 5. Failing states become findings: the workload shrunk (ddmin, re-running
//!    the kernel), the crash image, both recoveries, the verdict, and one
//!    command that judges the stored image again (`--replay FOLDER`).
//!
//! The same pipeline runs on nilfs-ref's own write path (`--ours`: the
//! workload through `Fs` on a [`Recorder`](super::log_writes::Recorder)),
//! without a guest; that is how the checkers are shown to fail on their
//! known-bad variants (tests below).

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::time::Instant;

use indicatif::{ProgressBar, ProgressStyle};
use nilfs::device::sim::SplitMix64;
use nilfs::device::{export_image, import_image, BlockDevice, MemDevice};
use nilfs::format::cpfile::Checkpoint;
use nilfs::format::Cno;
use nilfs::fs::Fs;
use nilfs::posix::CheckpointView;
use nilfs::the_nilfs::Nilfs;
use nilfs_model::{Rejection, State};
use serde_json::Value;
use sha2::{Digest, Sha256};

use super::guest::{sparse_disk, Harness, DEVS};
use super::log_writes::{self, crash_states, CrashState, Log, LogError, Sampling, END_MARK};
use super::{Problem, Workload};

/// Workloads per recording boot: each takes two disks (data and log).
pub const RECORD_BATCH: usize = DEVS.len() / 2;
/// Seconds one boot may take.
const BOOT_TIMEOUT_S: u64 = 1800;
/// Failing states kept per workload (the rest are counted).
const KEPT_FAILURES: usize = 3;

// ------------------------------------------------------------------ model

/// How far the workload had got when the disk was in a state, from the
/// mark in force.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Progress {
    /// Before the first mark: the lines the runner had before its first
    /// operation (`mkfs`, `mount`) were complete, nothing else had begun.
    Start,
    /// Mark `op-K`: lines 0..K complete, line K may be in flight.
    Op(usize),
    /// The end mark: every line complete.
    End,
}

impl Progress {
    pub fn of(mark: Option<&str>) -> Result<Progress, String> {
        match mark {
            None => Ok(Progress::Start),
            Some(END_MARK) => Ok(Progress::End),
            Some(m) => m
                .strip_prefix("op-")
                .and_then(|k| k.parse().ok())
                .map(Progress::Op)
                .ok_or_else(|| format!("a mark the runner does not write: {m:?}")),
        }
    }
}

/// A crashed model state with its live manifest (computed once).
struct Allowed {
    state: State,
    live: Vec<String>,
}

/// The model's crash envelopes along one observed trace.
pub struct Envelope {
    /// `prefix[k]`: the states after the first k lines.
    prefix: Vec<Vec<State>>,
    /// The trace's lines, for messages.
    lines: Vec<String>,
    /// Line of the first operation the runner marked (Start's prefix).
    first_marked: usize,
    crashed: RefCell<HashMap<usize, Rc<Vec<Allowed>>>>,
}

impl Envelope {
    /// From the observed trace, and the marks its log holds (the smallest
    /// `op-K` is where the runner began).
    pub fn new(trace: &str, marks: &[usize]) -> Result<Envelope, Rejection> {
        let prefix = nilfs_model::trace::trace_states(trace)?;
        let lines: Vec<String> = trace
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(str::to_string)
            .collect();
        let n = lines.len();
        Ok(Envelope {
            prefix,
            first_marked: marks.iter().copied().min().unwrap_or(n).min(n),
            lines,
            crashed: RefCell::new(HashMap::new()),
        })
    }

    /// Lines in the trace.
    pub fn len(&self) -> usize {
        self.lines.len()
    }

    /// The crash envelope after the first `k` lines (cached).
    fn crashed(&self, k: usize) -> Rc<Vec<Allowed>> {
        if let Some(c) = self.crashed.borrow().get(&k) {
            return c.clone();
        }
        let mut out: Vec<Allowed> = Vec::new();
        for s in &self.prefix[k] {
            for c in nilfs_model::crash(s) {
                if !out.iter().any(|a| a.state == c) {
                    let live = nilfs_model::manifest::manifest(&c.live);
                    out.push(Allowed { state: c, live });
                }
            }
        }
        let rc = Rc::new(out);
        self.crashed.borrow_mut().insert(k, rc.clone());
        rc
    }

    /// The prefixes whose crash envelope a state under `p` may be in.
    fn prefixes(&self, p: Progress) -> Result<Vec<usize>, String> {
        let n = self.len();
        match p {
            Progress::Start => Ok(vec![self.first_marked]),
            Progress::End => Ok(vec![n]),
            Progress::Op(k) if k < n => Ok(vec![k, k + 1]),
            Progress::Op(k) => Err(format!(
                "mark op-{k} names a line past the observed trace's {n}"
            )),
        }
    }

    /// Words for a mark: which line was in flight.
    fn describe(&self, p: Progress) -> String {
        match p {
            Progress::Start => format!(
                "before the first mark (lines 1..={} complete)",
                self.first_marked
            ),
            Progress::End => "after the end mark (every line complete)".into(),
            Progress::Op(k) => format!(
                "under mark op-{k}: lines 1..={k} complete, line {} in flight: {}",
                k + 1,
                self.lines.get(k).map_or("?", String::as_str)
            ),
        }
    }
}

// --------------------------------------------------------------- recovery

/// Which recovery to run on a crash state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Recovery {
    /// nilfs-ref's: `Nilfs::open` (super block choice, log scan) and
    /// `Fs::mount` (roll-forward of the data-only logs, a checkpoint of
    /// them).
    Ours,
    /// The known-bad variant for the checker's own test: the last valid log
    /// the scan finds is forgotten (its summary zeroed) before mounting.
    IgnoresLastLog,
}

/// A recovered image as our read path shows it.
pub struct Recovered {
    pub device: MemDevice,
    pub live: Vec<String>,
    pub checkpoints: BTreeMap<u64, Checkpoint>,
    /// The raw state had logs after its last super root to roll forward.
    pub rolled_forward: bool,
    manifests: RefCell<HashMap<u64, Result<Vec<String>, String>>>,
}

fn lines_of(s: &str) -> Vec<String> {
    s.lines().map(str::to_string).collect()
}

impl Recovered {
    fn manifest(&self, cno: u64) -> Result<Vec<String>, String> {
        if let Some(m) = self.manifests.borrow().get(&cno) {
            return m.clone();
        }
        let m = Nilfs::open(&self.device)
            .and_then(|n| {
                let v = CheckpointView::open(&n, Some(Cno(cno)))?;
                nilfs::inspect::manifest::manifest(&v)
            })
            .map(|s| lines_of(&s))
            .map_err(|e| e.to_string());
        self.manifests.borrow_mut().insert(cno, m.clone());
        m
    }

    /// `lscp -a` as comparable rows: cno, mode, minor, blocks, inodes.
    pub fn lscp_rows(&self) -> Vec<LscpRow> {
        self.checkpoints
            .values()
            .map(|cp| LscpRow {
                cno: cp.cno.0,
                snapshot: cp.is_snapshot(),
                minor: cp.is_minor(),
                blocks: cp.blocks_count,
                inodes: cp.inodes_count,
            })
            .collect()
    }
}

/// Recovers a copy of `raw` and reads it back.
pub fn recover(raw: &MemDevice, how: Recovery, now_s: u64) -> Result<Recovered, String> {
    let dev = raw.duplicate();
    let rolled_forward = Nilfs::open(&dev)
        .map(|n| n.scan.lsegs_start.is_some())
        .unwrap_or(false);
    if how == Recovery::IgnoresLastLog {
        let nilfs = Nilfs::open(&dev).map_err(|e| format!("open: {e}"))?;
        let bs = u64::from(nilfs.block_size());
        if let Some(v) = nilfs.scan.visits.iter().rev().find(|v| v.verdict.is_ok()) {
            dev.write_at(v.pseg.0 * bs, &vec![0u8; bs as usize])
                .map_err(|e| e.to_string())?;
        }
    }
    {
        let nilfs = Nilfs::open(&dev).map_err(|e| format!("our recovery: open: {e}"))?;
        // The mount is the recovery; what it left on the device is what a
        // later mount sees (dropping it is another power cut, after it).
        let fs = Fs::mount(&nilfs, now_s).map_err(|e| format!("our recovery: mount: {e}"))?;
        drop(fs);
    }
    let nilfs = Nilfs::open(&dev).map_err(|e| format!("reading the recovered image: {e}"))?;
    let view = CheckpointView::open(&nilfs, None).map_err(|e| format!("latest: {e}"))?;
    let live = nilfs::inspect::manifest::manifest(&view)
        .map(|s| lines_of(&s))
        .map_err(|e| format!("manifest of the latest checkpoint: {e}"))?;
    let checkpoints = nilfs
        .checkpoints(Cno(1))
        .map_err(|e| format!("cpfile: {e}"))?
        .into_iter()
        .map(|c| (c.cno.0, c))
        .collect();
    Ok(Recovered {
        device: dev,
        live,
        checkpoints,
        rolled_forward,
        manifests: RefCell::new(HashMap::new()),
    })
}

/// What stops a recovered image from being model state `s`, if anything:
/// the live tree, every checkpoint whose number the trace bound (it must be
/// there, in its mode, showing its tree) and no snapshot the model does not
/// have (unless the model has one whose number it does not know).
fn mismatch(a: &Allowed, r: &Recovered) -> Option<(&'static str, String)> {
    if a.live != r.live {
        return Some(("live", line_differences(&a.live, &r.live)));
    }
    let s = &a.state;
    for (c, cp) in s.checkpoints.iter() {
        if !cp.bound || cp.may_be_gone {
            continue;
        }
        let Some(k) = r.checkpoints.get(c) else {
            return Some(("checkpoints", format!("checkpoint {c} is missing")));
        };
        if k.is_snapshot() != cp.snapshot {
            return Some((
                "checkpoints",
                format!(
                    "checkpoint {c} is a {}, the model says {}",
                    if k.is_snapshot() {
                        "snapshot"
                    } else {
                        "plain checkpoint"
                    },
                    if cp.snapshot {
                        "snapshot"
                    } else {
                        "plain checkpoint"
                    }
                ),
            ));
        }
        // A checkpoint the model learned from a listing (finding M1) must
        // be there, but what it holds is not the model's to say.
        let Some(ns) = &cp.ns else {
            continue;
        };
        let want = nilfs_model::manifest::manifest(ns);
        match r.manifest(*c) {
            Ok(m) if m == want => {}
            Ok(m) => {
                return Some((
                    "checkpoints",
                    format!("checkpoint {c}: {}", first_difference(&want, &m)),
                ))
            }
            Err(e) => return Some(("checkpoints", format!("checkpoint {c}: {e}"))),
        }
    }
    let unnumbered = s.checkpoints.values().any(|cp| cp.snapshot && !cp.bound);
    for (c, k) in &r.checkpoints {
        if k.is_snapshot() && !unnumbered && !s.checkpoints.get(c).is_some_and(|cp| cp.snapshot) {
            return Some((
                "snapshots",
                format!("snapshot {c} is not one of the model's"),
            ));
        }
    }
    None
}

/// Lines in one manifest and not the other (how far apart two trees are).
fn distance(a: &[String], b: &[String]) -> usize {
    let (x, y): (BTreeSet<&String>, BTreeSet<&String>) = (a.iter().collect(), b.iter().collect());
    x.symmetric_difference(&y).count()
}

/// The lines only the model has and only the recovered tree has.
fn line_differences(want: &[String], got: &[String]) -> String {
    let (x, y): (BTreeSet<&String>, BTreeSet<&String>) =
        (want.iter().collect(), got.iter().collect());
    let only = |a: &BTreeSet<&String>, b: &BTreeSet<&String>| -> String {
        let v: Vec<&str> = a.difference(b).map(|s| s.as_str()).collect();
        if v.is_empty() {
            "(none)".into()
        } else {
            v.join(" | ")
        }
    };
    format!(
        "only the model has: {}; only the recovered tree has: {}",
        only(&x, &y),
        only(&y, &x)
    )
}

fn first_difference(want: &[String], got: &[String]) -> String {
    let k = want.iter().zip(got).take_while(|(a, b)| a == b).count();
    format!(
        "manifest line {}: model {:?}, recovered {:?}",
        k + 1,
        want.get(k).map_or("<end>", String::as_str),
        got.get(k).map_or("<end>", String::as_str)
    )
}

/// The recovery's log scan, if it stepped over an invalid log to a later
/// segment's super root: `nilfs_search_super_root` tolerates one invalid
/// log after the super root it started from (`strayed` -> `feed_segment`,
/// "this can happen if a checkpoint was written without barriers") and
/// goes on at the next segment. When the writes of one construction that
/// spans segments reach the disk out of order, the later segment's log
/// (with the super root) can be there while the earlier one is not; the
/// super root then names blocks that were never written.
pub fn skipped_log(raw: &MemDevice) -> Option<String> {
    let n = Nilfs::open(raw).ok()?;
    let s = &n.scan;
    let sr = s
        .visits
        .iter()
        .position(|v| v.pseg == s.sr_pseg && v.super_root_cno.is_some())?;
    let bad = s.visits[..sr].iter().rev().find(|v| v.verdict.is_err())?;
    Some(format!(
        "the log scan found no valid log at block {} ({}), went on to the next segment and took \
         the super root of the log at block {} (checkpoint {}): nilfs_search_super_root's \
         strayed -> feed_segment",
        bad.pseg.0,
        bad.verdict.as_ref().err().map_or("", String::as_str),
        s.sr_pseg.0,
        s.cno.0
    ))
}

/// One crash state's verdict.
pub struct StateVerdict {
    /// (problem, the mark it was judged under)
    pub problems: Vec<Problem>,
    /// Marks it was judged under.
    pub points: usize,
    pub recovered: Option<Recovered>,
}

/// Judges one crash state: `nilref check` on the raw image, our recovery,
/// and the envelope under each of its marks.
pub fn judge_state(env: &Envelope, state: &CrashState, how: Recovery, now_s: u64) -> StateVerdict {
    let mut problems = Vec::new();
    let skipped = skipped_log(&state.device);
    let report = nilfs::check::check_device(&state.device, &nilfs::check::Options::default());
    if !report.is_clean() {
        problems.push(Problem {
            class: "crash-check",
            key: skipped.as_ref().map_or("", |_| "skipped-log").to_string(),
            detail: format!(
                "state {} ({}): nilref check finds the crash image unclean:\n{report}{}",
                state.kind.slug(),
                state.kind,
                skipped.as_ref().map_or(String::new(), |s| format!("\n{s}"))
            ),
        });
    }
    let recovered = match recover(&state.device, how, now_s) {
        Ok(r) => r,
        Err(e) => {
            problems.push(Problem {
                class: "crash-recovery",
                key: skipped.as_ref().map_or("", |_| "skipped-log").to_string(),
                detail: format!(
                    "state {} ({}): our recovery fails: {e}{}",
                    state.kind.slug(),
                    state.kind,
                    skipped.as_ref().map_or(String::new(), |s| format!("\n{s}"))
                ),
            });
            return StateVerdict {
                problems,
                points: state.marks.len(),
                recovered: None,
            };
        }
    };
    for mark in &state.marks {
        let p = match Progress::of(mark.as_deref()) {
            Ok(p) => p,
            Err(e) => {
                problems.push(Problem::runner(e));
                continue;
            }
        };
        let prefixes = match env.prefixes(p) {
            Ok(v) => v,
            Err(e) => {
                problems.push(Problem::runner(e));
                continue;
            }
        };
        // The nearest allowed state: the fewest live lines apart.
        let mut closest: Option<(&'static str, String, usize)> = None;
        let mut inside = false;
        let mut count = 0;
        'outer: for k in prefixes {
            for a in env.crashed(k).iter() {
                count += 1;
                match mismatch(a, &recovered) {
                    None => {
                        inside = true;
                        break 'outer;
                    }
                    Some((what, why)) => {
                        let d = distance(&a.live, &recovered.live);
                        if closest.as_ref().is_none_or(|c| d < c.2) {
                            closest = Some((what, why, d));
                        }
                    }
                }
            }
        }
        if !inside {
            let (what, why, _) = closest.unwrap_or(("live", "no state allowed".into(), 0));
            problems.push(Problem {
                class: "crash-envelope",
                key: skipped.as_ref().map_or(what, |_| "skipped-log").to_string(),
                detail: format!(
                    "state {} ({}), {}: the recovered {} is outside the model's crash envelope \
                     ({count} states allowed); nearest: {why}{}\nrecovered live tree:\n{}",
                    state.kind.slug(),
                    state.kind,
                    env.describe(p),
                    if what == "live" { "live tree" } else { what },
                    skipped.as_ref().map_or(String::new(), |s| format!("\n{s}")),
                    recovered.live.join("\n")
                ),
            });
        }
    }
    StateVerdict {
        problems,
        points: state.marks.len(),
        recovered: Some(recovered),
    }
}

// ------------------------------------------------------- one workload's log

/// The crash states of a workload the kernel also recovers.
pub struct Sample {
    pub slug: String,
    pub raw: MemDevice,
    pub ours_live: Vec<String>,
    pub ours_lscp: Vec<LscpRow>,
}

/// A failing state, kept for its finding.
pub struct Failed {
    pub slug: String,
    pub raw: MemDevice,
    pub marks: Vec<Option<String>>,
    pub ours: Option<Vec<String>>,
    pub problems: Vec<Problem>,
    /// The kernel's recovery of it (kernel campaigns).
    pub kernel: Option<KernelRecovery>,
}

/// Everything the judgement of one workload's log found.
#[derive(Default)]
pub struct LogVerdict {
    pub problems: Vec<Problem>,
    pub failed: Vec<Failed>,
    pub failing_states: usize,
    /// Failing states by how they arose: prefix, torn, reordered.
    pub failing_by_kind: [usize; 3],
    /// Failing states by problem (`class: key`).
    pub failing_by_problem: BTreeMap<String, usize>,
    /// (state, mark) pairs judged.
    pub points: usize,
    pub states: usize,
    pub torn: usize,
    pub reordered: usize,
    /// Device-changing entries of the log (block writes and discards).
    pub log_writes: usize,
    pub samples: Vec<Sample>,
    /// The observed trace (for findings).
    pub trace: String,
}

/// How to judge a log.
#[derive(Clone, Debug)]
pub struct JudgeOptions {
    pub sampling: Sampling,
    pub recovery: Recovery,
    /// Crash states per workload the kernel recovers too.
    pub kernel_sample: usize,
}

/// Judges every crash state of `log` replayed on `base`, against the
/// envelope of `trace`.
pub fn judge_log(trace: &str, log: &Log, base: &MemDevice, opts: &JudgeOptions) -> LogVerdict {
    let mut v = LogVerdict {
        trace: trace.to_string(),
        log_writes: log.writes(),
        ..LogVerdict::default()
    };
    let marks: Vec<usize> = log
        .entries
        .iter()
        .filter_map(|e| e.mark_text()?.strip_prefix("op-")?.parse().ok())
        .collect();
    let env = match Envelope::new(trace, &marks) {
        Ok(e) => e,
        Err(r) => {
            v.problems.push(Problem::kernel_rejected(&r, trace));
            return v;
        }
    };
    let now_s = trace_clock_s(trace);
    let mut rng = SplitMix64::new(opts.sampling.seed ^ 0x6b65_726e_656c);
    // Reservoirs: states with logs to roll forward, and all states.
    let mut rolled: Vec<Sample> = Vec::new();
    let mut any: Vec<Sample> = Vec::new();
    let (mut seen_rolled, mut seen_any) = (0u64, 0u64);
    let want_rolled = opts.kernel_sample.div_ceil(2);
    let mut visit = |state: CrashState| {
        v.states += 1;
        match state.kind {
            log_writes::StateKind::Torn { .. } => v.torn += 1,
            log_writes::StateKind::Reordered { .. } => v.reordered += 1,
            log_writes::StateKind::Prefix { .. } | log_writes::StateKind::Stored { .. } => {}
        }
        let verdict = judge_state(&env, &state, opts.recovery, now_s);
        v.points += verdict.points;
        if !verdict.problems.is_empty() {
            v.failing_states += 1;
            v.failing_by_kind[kind_index(&state.kind)] += 1;
            let names: BTreeSet<String> = verdict.problems.iter().map(problem_name).collect();
            for n in names {
                *v.failing_by_problem.entry(n).or_default() += 1;
            }
            if v.failed.len() < KEPT_FAILURES {
                v.failed.push(Failed {
                    slug: state.kind.slug(),
                    raw: state.device.duplicate(),
                    marks: state.marks.clone(),
                    ours: verdict.recovered.as_ref().map(|r| r.live.clone()),
                    problems: verdict.problems.clone(),
                    kernel: None,
                });
            }
            for p in verdict.problems {
                if !v
                    .problems
                    .iter()
                    .any(|q| q.class == p.class && q.key == p.key)
                {
                    v.problems.push(p);
                }
            }
        }
        if opts.kernel_sample == 0 {
            return;
        }
        let Some(r) = verdict.recovered else { return };
        let sample = || Sample {
            slug: state.kind.slug(),
            raw: state.device.duplicate(),
            ours_live: r.live.clone(),
            ours_lscp: r.lscp_rows(),
        };
        seen_any += 1;
        reservoir(&mut any, opts.kernel_sample, seen_any, &mut rng, sample);
        if r.rolled_forward {
            seen_rolled += 1;
            reservoir(&mut rolled, want_rolled, seen_rolled, &mut rng, sample);
        }
    };
    if let Err(e) = crash_states(log, base, &opts.sampling, &mut visit) {
        v.problems.push(log_problem(&e));
    }
    // Roll-forward states first, then the uniform ones, no slug twice.
    for s in rolled.into_iter().chain(any) {
        if v.samples.len() < opts.kernel_sample && !v.samples.iter().any(|t| t.slug == s.slug) {
            v.samples.push(s);
        }
    }
    v
}

/// `class: key` (or the class alone).
pub fn problem_name(p: &Problem) -> String {
    if p.key.is_empty() {
        p.class.to_string()
    } else {
        format!("{}: {}", p.class, p.key)
    }
}

fn kind_index(k: &log_writes::StateKind) -> usize {
    match k {
        log_writes::StateKind::Torn { .. } => 1,
        log_writes::StateKind::Reordered { .. } => 2,
        _ => 0,
    }
}

/// Algorithm R: keep `k` of the `seen` items so far, uniformly.
fn reservoir<T>(
    keep: &mut Vec<T>,
    k: usize,
    seen: u64,
    rng: &mut SplitMix64,
    item: impl FnOnce() -> T,
) {
    if k == 0 {
        return;
    }
    if keep.len() < k {
        keep.push(item());
    } else {
        let j = rng.next_u64() % seen;
        if (j as usize) < k {
            keep[j as usize] = item();
        }
    }
}

fn log_problem(e: &LogError) -> Problem {
    Problem {
        class: "crash-log",
        key: String::new(),
        detail: e.to_string(),
    }
}

/// The last `clock` line's time (seconds), for our recovery's checkpoint.
fn trace_clock_s(trace: &str) -> u64 {
    trace
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| v.get("op").and_then(Value::as_str) == Some("clock"))
        .filter_map(|v| v.get("now").and_then(Value::as_i64))
        .next_back()
        .map_or(0, |ns| (ns.max(0) / 1_000_000_000) as u64)
}

/// A seed for a workload's sampling, from its label.
pub fn sampling_seed(w: &Workload) -> u64 {
    let h = Sha256::digest(w.label.as_bytes());
    u64::from_le_bytes(h[..8].try_into().expect("8 bytes"))
}

// ----------------------------------------------------- nilfs-ref's own path

/// Runs `w` through nilfs-ref's `Fs` on a device that logs its writes as
/// dm-log-writes does, marking `op-K` before observed line K: the base
/// image, the log and the observed trace.
pub fn record_ours(w: &Workload) -> Result<(MemDevice, Log, String), String> {
    let rec = log_writes::Recorder::new(MemDevice::new(w.device_bytes()));
    let lines: Vec<(usize, Value)> = w
        .lines
        .iter()
        .cloned()
        .enumerate()
        .map(|(i, v)| (i + 1, v))
        .collect();
    let applied = crate::apply::apply_lines_on(rec.device(), &rec, &lines, "memory", &mut |k| {
        rec.mark(&format!("op-{k}"))
    })
    .map_err(|(n, m)| format!("line {n}: {m}"))?;
    let trace: String = applied.lines.iter().map(|l| l.to_json() + "\n").collect();
    let (base, log) = rec.finish();
    Ok((base, log, trace))
}

// ------------------------------------------------------------- the kernel

/// The guest script recording batch `i`: data disk `DEVS[2i]`, log disk
/// `DEVS[2i+1]`.
fn record_script(batch: &[Workload]) -> String {
    let mut s = String::from("set +e\nexport DM_DISABLE_UDEV=1\n");
    for (i, w) in batch.iter().enumerate() {
        let (d, l) = (DEVS[2 * i], DEVS[2 * i + 1]);
        s.push_str(&format!(
            r#"
# workload {i}: {label}
if dmsetup create lw{i} --table "0 {sectors} log-writes /dev/{d} /dev/{l}" 2>/host/e{i}.txt; then
  if mount -t nilfs2 /dev/mapper/lw{i} /mnt 2>>/host/e{i}.txt; then
    timeout 900 nilref exec /mnt /host/w{i}.jsonl -o /host/o{i}.jsonl --device /dev/mapper/lw{i} --mark-log-writes lw{i} 2>>/host/e{i}.txt
    echo $? > /host/rc{i}
    grep -q ' /mnt ' /proc/mounts && umount /mnt
  else
    echo "mount of the dm device failed" > /host/rc{i}
  fi
  dmsetup remove lw{i} 2>>/host/e{i}.txt || echo "dmsetup remove failed" >> /host/e{i}.txt
else
  echo "dmsetup create failed" > /host/rc{i}
fi
"#,
            label = w.label,
            sectors = w.device_bytes() / 512,
        ));
    }
    s.push_str("dmesg | grep -i -e nilfs -e log-writes > /host/dmesg.txt\ntrue\n");
    s
}

/// What one workload's recording brought back.
pub struct Recorded {
    pub trace: String,
    pub log: Log,
    pub base: MemDevice,
}

/// mkfs.nilfs2 (the host's) on a fresh sparse file of the workload's size.
fn host_mkfs(path: &Path, w: &Workload) -> Result<(), String> {
    sparse_disk(path, w.device_bytes())?;
    let g = &w.geometry;
    let out = std::process::Command::new("mkfs.nilfs2")
        .args(["-q", "-f", "-b"])
        .arg(g.block_size.to_string())
        .arg("-B")
        .arg(g.blocks_per_segment.to_string())
        .arg("-m")
        .arg(g.r_segments_percentage.to_string())
        .arg(path)
        .output()
        .map_err(|e| format!("mkfs.nilfs2: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "mkfs.nilfs2 {}: {}",
            path.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(())
}

/// Records a batch of at most [`RECORD_BATCH`] workloads in one boot.
pub fn record_batch(
    harness: &Harness,
    work: &Path,
    batch: &[Workload],
) -> Result<Vec<Result<Recorded, Problem>>, String> {
    assert!(batch.len() <= RECORD_BATCH);
    let _ = std::fs::remove_dir_all(work);
    std::fs::create_dir_all(work).map_err(|e| format!("{}: {e}", work.display()))?;
    let mut disks = Vec::new();
    for (i, w) in batch.iter().enumerate() {
        std::fs::write(work.join(format!("w{i}.jsonl")), w.to_jsonl())
            .map_err(|e| e.to_string())?;
        let base = work.join(format!("b{i}.img"));
        host_mkfs(&base, w)?;
        let data = work.join(format!("d{i}.img"));
        std::fs::copy(&base, &data).map_err(|e| format!("{}: {e}", data.display()))?;
        // The log holds every write and a sector per entry: a generous
        // multiple of the device, sparse.
        let log = work.join(format!("l{i}.img"));
        sparse_disk(&log, 4 * w.device_bytes() + (64 << 20))?;
        disks.push(data);
        disks.push(log);
    }
    let boot = harness.boot(&disks, work, &record_script(batch), BOOT_TIMEOUT_S)?;
    let _ = std::fs::write(
        work.join("guest.log"),
        format!("{}\n--- stderr\n{}", boot.stdout, boot.stderr),
    );
    let read = |name: String| std::fs::read_to_string(work.join(name)).ok();
    let mut out = Vec::new();
    for i in 0..batch.len() {
        let rc = read(format!("rc{i}")).map(|s| s.trim().to_string());
        if rc.as_deref() != Some("0") {
            out.push(Err(Problem::runner(format!(
                "the recording in the guest ended with {}: {}{}",
                rc.as_deref()
                    .unwrap_or("no status (the guest stopped first)"),
                read(format!("e{i}.txt")).unwrap_or_default().trim(),
                if boot.success {
                    String::new()
                } else {
                    format!("; guest: {}", boot.stderr.lines().last().unwrap_or(""))
                }
            ))));
            continue;
        }
        let trace = read(format!("o{i}.jsonl")).unwrap_or_default();
        let log_bytes = std::fs::read(work.join(format!("l{i}.img")))
            .map_err(|e| format!("log disk {i}: {e}"))?;
        let log = match Log::parse_complete(&log_bytes) {
            Ok(l) => l,
            Err(e) => {
                out.push(Err(log_problem(&e)));
                continue;
            }
        };
        let base = import_image(&work.join(format!("b{i}.img"))).map_err(|e| e.to_string())?;
        out.push(Ok(Recorded { trace, log, base }));
    }
    Ok(out)
}

/// `lscp -a`'s comparable columns.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LscpRow {
    pub cno: u64,
    pub snapshot: bool,
    pub minor: bool,
    pub blocks: u64,
    pub inodes: u64,
}

impl std::fmt::Display for LscpRow {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} {} {} {} {}",
            self.cno,
            if self.snapshot { "ss" } else { "cp" },
            if self.minor { "i" } else { "-" },
            self.blocks,
            self.inodes
        )
    }
}

/// Rows of `lscp -a` output (CNO DATE TIME MODE FLG BLKCNT ICNT).
pub fn parse_lscp(text: &str) -> Result<Vec<LscpRow>, String> {
    text.lines()
        .skip(1)
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let bad = || format!("an lscp row of another shape: {l:?}");
            if f.len() != 7 {
                return Err(bad());
            }
            Ok(LscpRow {
                cno: f[0].parse().map_err(|_| bad())?,
                snapshot: match f[3] {
                    "ss" => true,
                    "cp" => false,
                    _ => return Err(bad()),
                },
                minor: f[4] == "i",
                blocks: f[5].parse().map_err(|_| bad())?,
                inodes: f[6].parse().map_err(|_| bad())?,
            })
        })
        .collect()
}

fn kernel_script(n: usize) -> String {
    let mut s = String::from("set +e\n");
    for (i, d) in DEVS.iter().enumerate().take(n) {
        s.push_str(&format!(
            r#"
if mount -t nilfs2 /dev/{d} /mnt 2>/host/ke{i}.txt; then
  manifest /mnt > /host/km{i}
  lscp -a /dev/{d} > /host/kl{i} 2>>/host/ke{i}.txt
  umount /mnt 2>>/host/ke{i}.txt
  echo 0 > /host/kr{i}
else
  echo 1 > /host/kr{i}
fi
"#
        ));
    }
    s.push_str("dmesg | grep -i nilfs > /host/dmesg.txt\ntrue\n");
    s
}

/// What the kernel's recovery of one state showed.
pub struct KernelRecovery {
    pub mounted: bool,
    pub manifest: Vec<String>,
    pub lscp: Result<Vec<LscpRow>, String>,
    pub errors: String,
}

/// The kernel mounts each image (at most 12) read-write and reports.
pub fn kernel_recover(
    harness: &Harness,
    work: &Path,
    images: &[&MemDevice],
) -> Result<Vec<KernelRecovery>, String> {
    assert!(!images.is_empty() && images.len() <= DEVS.len());
    let _ = std::fs::remove_dir_all(work);
    std::fs::create_dir_all(work).map_err(|e| format!("{}: {e}", work.display()))?;
    let mut disks = Vec::new();
    for (i, img) in images.iter().enumerate() {
        let p = work.join(format!("s{i}.img"));
        export_image(img, &p).map_err(|e| e.to_string())?;
        disks.push(p);
    }
    let boot = harness.boot(&disks, work, &kernel_script(images.len()), BOOT_TIMEOUT_S)?;
    let _ = std::fs::write(
        work.join("guest.log"),
        format!("{}\n--- stderr\n{}", boot.stdout, boot.stderr),
    );
    let read = |name: String| std::fs::read_to_string(work.join(name)).unwrap_or_default();
    let dmesg = read("dmesg.txt".into());
    Ok((0..images.len())
        .map(|i| {
            let rc = read(format!("kr{i}"));
            KernelRecovery {
                mounted: rc.trim() == "0",
                manifest: lines_of(&read(format!("km{i}"))),
                lscp: parse_lscp(&read(format!("kl{i}"))),
                errors: format!(
                    "{}{}",
                    read(format!("ke{i}")),
                    if rc.trim().is_empty() {
                        format!(
                            "(no status: the guest stopped; {})",
                            boot.stderr.lines().last().unwrap_or("")
                        )
                    } else {
                        String::new()
                    }
                ) + &format!(
                    "\nkernel log about /dev/{}:\n{}",
                    DEVS[i],
                    dmesg
                        .lines()
                        .filter(|l| l.contains(&format!("({})", DEVS[i]))
                            || l.contains(&format!("device {}", DEVS[i])))
                        .collect::<Vec<_>>()
                        .join("\n")
                ),
            }
        })
        .collect())
}

/// Both recoveries must agree.
pub fn compare_recoveries(s: &Sample, k: &KernelRecovery) -> Option<Problem> {
    let problem = |detail: String| Problem {
        class: "crash-kernel-disagrees",
        key: String::new(),
        detail: format!("state {}: {detail}", s.slug),
    };
    if !k.mounted {
        return Some(problem(format!(
            "the kernel could not mount it, ours recovered it:\n{}",
            k.errors
        )));
    }
    if k.manifest != s.ours_live {
        return Some(problem(format!(
            "the live trees differ: {}\nkernel:\n{}\nours:\n{}",
            first_difference(&k.manifest, &s.ours_live).replace("model", "kernel"),
            k.manifest.join("\n"),
            s.ours_live.join("\n")
        )));
    }
    match &k.lscp {
        Err(e) => Some(problem(format!("lscp -a: {e}"))),
        Ok(rows) if *rows != s.ours_lscp => Some(problem(format!(
            "the checkpoints differ (cno mode flag blocks inodes):\nkernel:\n{}\nours:\n{}",
            rows.iter()
                .map(|r| r.to_string())
                .collect::<Vec<_>>()
                .join("\n"),
            s.ours_lscp
                .iter()
                .map(|r| r.to_string())
                .collect::<Vec<_>>()
                .join("\n")
        ))),
        Ok(_) => None,
    }
}

// --------------------------------------------------------------- campaign

/// What a crash campaign is asked to do.
pub struct CrashOptions {
    pub workloads: Vec<Workload>,
    pub out: PathBuf,
    pub shrink: bool,
    pub max_findings: usize,
    pub torn: usize,
    pub reordered: usize,
    pub all_but_one: usize,
    pub kernel_sample: usize,
    /// nilfs-ref's write path instead of the kernel's (no guest).
    pub ours: bool,
}

/// One failing workload.
pub struct CrashFinding {
    pub workload: Workload,
    pub minimal: Workload,
    pub problems: Vec<Problem>,
    pub folder: PathBuf,
}

/// The end of a crash campaign.
#[derive(Default)]
pub struct CrashSummary {
    pub target: &'static str,
    pub workloads: usize,
    pub passed: usize,
    pub points: usize,
    pub states: usize,
    pub torn: usize,
    pub reordered: usize,
    pub failing_states: usize,
    pub failing_by_kind: [usize; 3],
    /// Per problem: failing states, and workloads showing it.
    pub by_problem: BTreeMap<String, (usize, usize)>,
    pub block_writes: usize,
    pub kernel_states: usize,
    pub findings: Vec<CrashFinding>,
    pub boots: usize,
    pub seconds: f64,
    pub judge_seconds: f64,
}

impl CrashSummary {
    /// The figures, for scripts and the peer tier's test.
    pub fn to_json(&self) -> Value {
        let per_min = |n: usize, s: f64| if s > 0.0 { n as f64 * 60.0 / s } else { 0.0 };
        serde_json::json!({
            "target": self.target,
            "workloads": self.workloads,
            "passed": self.passed,
            "block_writes": self.block_writes,
            "states": self.states,
            "torn": self.torn,
            "reordered": self.reordered,
            "points": self.points,
            "failing_states": self.failing_states,
            "failing_prefix_torn_reordered": self.failing_by_kind,
            "kernel_states": self.kernel_states,
            "boots": self.boots,
            "seconds": self.seconds,
            "states_per_minute": per_min(self.states, self.seconds),
            "states_per_minute_judging": per_min(self.states, self.judge_seconds),
            "problems": self.by_problem.iter().map(|(k, (states, workloads))| {
                (k.clone(), serde_json::json!({"states": states, "workloads": workloads}))
            }).collect::<serde_json::Map<String, Value>>(),
            "findings": self.findings.iter().map(|f| f.folder.display().to_string()).collect::<Vec<_>>(),
        })
    }

    pub fn table(&self) -> String {
        let per_min = |n: usize, s: f64| if s > 0.0 { n as f64 * 60.0 / s } else { 0.0 };
        let mut t = format!(
            "| campaign | workloads | passed | block writes logged | crash states judged | of them torn / reordered | (state, mark) points | failing states (prefix / torn / reordered) | recovered by the kernel too | boots | time | states/min | states/min judging alone |\n\
             |---|---|---|---|---|---|---|---|---|---|---|---|---|\n\
             | crash, {} | {} | {} | {} | {} | {} / {} | {} | {} ({} / {} / {}) | {} | {} | {:.0} s | {:.0} | {:.0} |\n",
            self.target,
            self.workloads,
            self.passed,
            self.block_writes,
            self.states,
            self.torn,
            self.reordered,
            self.points,
            self.failing_states,
            self.failing_by_kind[0],
            self.failing_by_kind[1],
            self.failing_by_kind[2],
            self.kernel_states,
            self.boots,
            self.seconds,
            per_min(self.states, self.seconds),
            per_min(self.states, self.judge_seconds),
        );
        if !self.by_problem.is_empty() {
            t.push_str("\n| problem | failing states | workloads |\n|---|---|---|\n");
            for (name, (states, workloads)) in &self.by_problem {
                t.push_str(&format!("| {name} | {states} | {workloads} |\n"));
            }
        }
        if !self.findings.is_empty() {
            t.push_str("\n| finding | workload | minimal lines | problem | replay |\n|---|---|---|---|---|\n");
            for f in &self.findings {
                t.push_str(&format!(
                    "| {} | {} | {} | {} | `nilref campaign crash --replay {}` |\n",
                    f.folder.file_name().unwrap_or_default().to_string_lossy(),
                    f.workload.label,
                    f.minimal.lines.len(),
                    f.problems
                        .first()
                        .map(Problem::headline)
                        .unwrap_or_default(),
                    f.folder.display()
                ));
            }
        }
        t
    }
}

fn bar(n: usize) -> ProgressBar {
    let b = ProgressBar::new(n as u64);
    b.set_style(
        ProgressStyle::with_template(
            "{spinner} crash [{bar:30}] {pos}/{len} {elapsed_precise} eta {eta} {msg}",
        )
        .expect("a valid template")
        .progress_chars("=> "),
    );
    b
}

/// A workload's recording and judgement.
struct Judged {
    recorded: Option<Recorded>,
    verdict: LogVerdict,
}

fn judge_opts(w: &Workload, o: &CrashOptions) -> JudgeOptions {
    JudgeOptions {
        sampling: Sampling {
            torn: o.torn,
            reordered: o.reordered,
            all_but_one: o.all_but_one,
            ..Sampling::new(sampling_seed(w))
        },
        recovery: Recovery::Ours,
        kernel_sample: if o.ours { 0 } else { o.kernel_sample },
    }
}

/// Records and judges a batch (kernel: one boot; ours: in memory).
fn run_batch(
    harness: Option<&Harness>,
    work: &Path,
    batch: &[Workload],
    o: &CrashOptions,
    judge_seconds: &mut f64,
) -> Result<Vec<Judged>, String> {
    let recorded: Vec<Result<Recorded, Problem>> = match harness {
        Some(h) => record_batch(h, work, batch)?,
        None => batch
            .iter()
            .map(|w| {
                record_ours(w)
                    .map(|(base, log, trace)| Recorded { trace, log, base })
                    .map_err(Problem::ours_runner)
            })
            .collect(),
    };
    let t0 = Instant::now();
    let out = batch
        .iter()
        .zip(recorded)
        .map(|(w, r)| match r {
            Err(p) => Judged {
                recorded: None,
                verdict: LogVerdict {
                    problems: vec![p],
                    ..LogVerdict::default()
                },
            },
            Ok(rec) => {
                let verdict = judge_log(&rec.trace, &rec.log, &rec.base, &judge_opts(w, o));
                Judged {
                    recorded: Some(rec),
                    verdict,
                }
            }
        })
        .collect();
    *judge_seconds += t0.elapsed().as_secs_f64();
    Ok(out)
}

/// The crash campaign (see the module documentation).
pub fn run(o: &CrashOptions) -> Result<CrashSummary, String> {
    let harness = if o.ours { None } else { Some(Harness::new()?) };
    let t0 = Instant::now();
    std::fs::create_dir_all(&o.out).map_err(|e| format!("{}: {e}", o.out.display()))?;
    let work = o.out.join("work");
    let progress = bar(o.workloads.len());
    let mut sum = CrashSummary {
        target: if o.ours { "nilfs-ref" } else { "Linux" },
        ..CrashSummary::default()
    };
    let mut shrunk: BTreeSet<String> = BTreeSet::new();
    for chunk in o.workloads.chunks(RECORD_BATCH) {
        let judged = run_batch(harness.as_ref(), &work, chunk, o, &mut sum.judge_seconds)?;
        if harness.is_some() {
            sum.boots += 1;
        }
        let mut judged: Vec<(Workload, Judged)> = chunk.iter().cloned().zip(judged).collect();
        // The kernel's own recovery of the sampled states, and of the
        // failing ones (for their findings): one boot per 12.
        if let Some(h) = &harness {
            kernel_round(h, &o.out.join("kernel"), &mut judged, &mut sum)?;
        }
        for (w, j) in judged {
            progress.inc(1);
            let v = &j.verdict;
            sum.workloads += 1;
            sum.points += v.points;
            sum.states += v.states;
            sum.torn += v.torn;
            sum.reordered += v.reordered;
            sum.failing_states += v.failing_states;
            sum.block_writes += v.log_writes;
            for k in 0..3 {
                sum.failing_by_kind[k] += v.failing_by_kind[k];
            }
            for (name, n) in &v.failing_by_problem {
                let e = sum.by_problem.entry(name.clone()).or_default();
                e.0 += n;
                e.1 += 1;
            }
            for p in &v.problems {
                // Problems of the whole workload (a rejected trace, a runner
                // or log failure) have no failing state.
                if !v.failing_by_problem.contains_key(&problem_name(p)) {
                    sum.by_problem.entry(problem_name(p)).or_default().1 += 1;
                }
            }
            if v.problems.is_empty() {
                sum.passed += 1;
                continue;
            }
            progress.set_message(format!("{} failing", sum.findings.len() + 1));
            // Each problem is shrunk once (its first workload); later
            // workloads showing it keep their whole workload.
            let first_time = shrunk.insert(problem_name(&v.problems[0]));
            let minimal = if o.shrink && first_time && shrinkable(&v.problems[0]) {
                progress
                    .suspend(|| eprintln!("shrinking {}: {}", w.label, v.problems[0].headline()));
                shrink(
                    harness.as_ref(),
                    &o.out.join("shrink"),
                    &w,
                    &v.problems[0],
                    o,
                    &mut sum.boots,
                )?
            } else {
                w.clone()
            };
            let folder = write_finding(&o.out, &w, &minimal, &j, o.ours)?;
            sum.findings.push(CrashFinding {
                workload: w.clone(),
                minimal,
                problems: v.problems.clone(),
                folder,
            });
        }
        if o.max_findings > 0 && sum.findings.len() >= o.max_findings {
            break;
        }
    }
    progress.finish_and_clear();
    let _ = std::fs::remove_dir_all(&work);
    let _ = std::fs::remove_dir_all(o.out.join("kernel"));
    sum.seconds = t0.elapsed().as_secs_f64();
    let json = sum.to_json();
    std::fs::write(o.out.join("summary.json"), format!("{json:#}\n"))
        .map_err(|e| format!("{}: {e}", o.out.join("summary.json").display()))?;
    Ok(sum)
}

/// Which image of a batch the kernel recovers.
#[derive(Clone, Copy)]
enum KernelJob {
    Sample(usize, usize),
    Failed(usize, usize),
}

fn kernel_round(
    h: &Harness,
    work: &Path,
    judged: &mut [(Workload, Judged)],
    sum: &mut CrashSummary,
) -> Result<(), String> {
    let mut jobs = Vec::new();
    for (i, (_, j)) in judged.iter().enumerate() {
        jobs.extend((0..j.verdict.samples.len()).map(|k| KernelJob::Sample(i, k)));
        // The first failing state of each workload (its finding's).
        jobs.extend((0..j.verdict.failed.len().min(1)).map(|k| KernelJob::Failed(i, k)));
    }
    for part in jobs.chunks(DEVS.len()) {
        let images: Vec<&MemDevice> = part
            .iter()
            .map(|job| match *job {
                KernelJob::Sample(i, k) => &judged[i].1.verdict.samples[k].raw,
                KernelJob::Failed(i, k) => &judged[i].1.verdict.failed[k].raw,
            })
            .collect();
        let kernel = kernel_recover(h, work, &images)?;
        sum.boots += 1;
        for (job, kr) in part.iter().zip(kernel) {
            sum.kernel_states += 1;
            match *job {
                KernelJob::Failed(i, k) => judged[i].1.verdict.failed[k].kernel = Some(kr),
                KernelJob::Sample(i, k) => {
                    let v = &mut judged[i].1.verdict;
                    let s = &v.samples[k];
                    let Some(p) = compare_recoveries(s, &kr) else {
                        continue;
                    };
                    v.failing_states += 1;
                    *v.failing_by_problem.entry(problem_name(&p)).or_default() += 1;
                    if v.failed.len() < KEPT_FAILURES {
                        v.failed.push(Failed {
                            slug: s.slug.clone(),
                            raw: s.raw.duplicate(),
                            marks: Vec::new(),
                            ours: Some(s.ours_live.clone()),
                            problems: vec![p.clone()],
                            kernel: Some(kr),
                        });
                    }
                    v.problems.push(p);
                }
            }
        }
    }
    Ok(())
}

/// Problems a host-side judgement decides (shrinking re-records, but needs
/// no second boot to see them again).
fn shrinkable(p: &Problem) -> bool {
    matches!(p.class, "crash-envelope" | "crash-check" | "crash-recovery")
}

/// ddmin over the workload: a candidate fails when its crash states show
/// a problem of the same class and key.
fn shrink(
    harness: Option<&Harness>,
    work: &Path,
    w: &Workload,
    target: &Problem,
    o: &CrashOptions,
    boots: &mut usize,
) -> Result<Workload, String> {
    let mut error = None;
    let mut ignored = 0.0;
    let lines = nilfs_workload::shrink::ddmin(
        &w.lines,
        |cands| {
            let mut out = Vec::new();
            for chunk in cands.chunks(RECORD_BATCH) {
                let batch: Vec<Workload> = chunk.iter().map(|c| w.with_lines(c.clone())).collect();
                match run_batch(harness, work, &batch, o, &mut ignored) {
                    Ok(judged) => {
                        if harness.is_some() {
                            *boots += 1;
                        }
                        out.extend(judged.iter().map(|j| {
                            j.verdict
                                .problems
                                .iter()
                                .any(|p| p.class == target.class && p.key == target.key)
                        }));
                    }
                    Err(e) => {
                        error = Some(e);
                        out.extend(chunk.iter().map(|_| false));
                    }
                }
            }
            out
        },
        if harness.is_some() { 48 } else { 400 },
    );
    let _ = std::fs::remove_dir_all(work);
    match error {
        Some(e) => Err(e),
        None => Ok(w.with_lines(lines)),
    }
}

fn xz_to(path: &Path, data: &[u8]) -> Result<(), String> {
    use std::io::Write;
    let mut child = std::process::Command::new("xz")
        .args(["-T1", "-c"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::fs::File::create(path).map_err(|e| format!("{}: {e}", path.display()))?)
        .spawn()
        .map_err(|e| format!("xz: {e}"))?;
    child
        .stdin
        .take()
        .expect("piped")
        .write_all(data)
        .map_err(|e| format!("xz: {e}"))?;
    child.wait().map_err(|e| format!("xz: {e}"))?;
    Ok(())
}

fn raw_bytes(dev: &MemDevice) -> Vec<u8> {
    let mut b = vec![0u8; dev.size_bytes() as usize];
    let _ = dev.read_at(0, &mut b);
    b
}

/// The finding's folder: `OUT/findings/<label>-<class>/`.
fn write_finding(
    out: &Path,
    w: &Workload,
    minimal: &Workload,
    j: &Judged,
    ours: bool,
) -> Result<PathBuf, String> {
    let v = &j.verdict;
    let slug: String = format!("crash-{}-{}", w.label, v.problems[0].class)
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    let dir = out.join("findings").join(slug);
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let put = |name: &str, text: &str| {
        std::fs::write(dir.join(name), text)
            .map_err(|e| format!("{}: {e}", dir.join(name).display()))
    };
    put("workload.jsonl", &minimal.to_jsonl())?;
    put("original-workload.jsonl", &w.to_jsonl())?;
    put("trace.jsonl", &v.trace)?;
    let mut verdict = String::new();
    for p in &v.problems {
        verdict.push_str(&format!("== {}\n{}\n\n", p.headline(), p.detail));
    }
    put("verdict.txt", &verdict)?;
    let mut states = Vec::new();
    for f in &v.failed {
        let sd = dir.join(format!("state-{}", f.slug));
        std::fs::create_dir_all(&sd).map_err(|e| e.to_string())?;
        xz_to(&sd.join("crash-image.img.xz"), &raw_bytes(&f.raw))?;
        let marks: Vec<String> = f
            .marks
            .iter()
            .map(|m| m.clone().unwrap_or_else(|| "-".into()))
            .collect();
        std::fs::write(sd.join("marks.txt"), marks.join("\n") + "\n").map_err(|e| e.to_string())?;
        if let Some(m) = &f.ours {
            std::fs::write(sd.join("ours-recovered.manifest"), m.join("\n") + "\n")
                .map_err(|e| e.to_string())?;
        }
        if let Some(k) = &f.kernel {
            let text = if k.mounted {
                format!(
                    "{}\n\n# lscp -a (cno mode flag blocks inodes)\n{}\n",
                    k.manifest.join("\n"),
                    match &k.lscp {
                        Ok(rows) => rows
                            .iter()
                            .map(|r| r.to_string())
                            .collect::<Vec<_>>()
                            .join("\n"),
                        Err(e) => e.clone(),
                    }
                )
            } else {
                "the kernel did not mount it\n".to_string()
            };
            std::fs::write(sd.join("kernel-recovered.manifest"), text)
                .map_err(|e| e.to_string())?;
            std::fs::write(sd.join("kernel-messages.txt"), &k.errors).map_err(|e| e.to_string())?;
        }
        let mut vt = String::new();
        for p in &f.problems {
            vt.push_str(&format!("== {}\n{}\n\n", p.headline(), p.detail));
            if p.class == "crash-kernel-disagrees" {
                vt.push_str("(the kernel's side is in the detail above)\n");
            }
        }
        std::fs::write(sd.join("verdict.txt"), vt).map_err(|e| e.to_string())?;
        states.push(f.slug.clone());
    }
    if let Some(rec) = &j.recorded {
        xz_to(&dir.join("base.img.xz"), &raw_bytes(&rec.base))?;
        xz_to(&dir.join("log-writes.bin.xz"), &rec.log.encode())?;
    }
    put(
        "README.md",
        &format!(
            "# {}\n\nFound by the crash campaign against {} on {}; {} lines, shrunk to {}. \
             {} failing crash states; kept: {}.\n\n\
             Judge the kept crash images again (deterministic): \
             `nilref campaign crash --replay {}`\n\n\
             Record the minimal workload again (the kernel's timing may differ): \
             `nilref campaign crash --workload {}{}`\n\n{}\n",
            v.problems[0].headline(),
            if ours { "nilfs-ref" } else { "Linux" },
            w.label,
            w.lines.len(),
            minimal.lines.len(),
            v.failing_states,
            states.join(", "),
            dir.display(),
            dir.join("workload.jsonl").display(),
            if ours { " --ours" } else { "" },
            v.problems
                .iter()
                .map(|p| format!("- {}", p.headline()))
                .collect::<Vec<_>>()
                .join("\n")
        ),
    )?;
    Ok(dir)
}

/// `--replay FOLDER`: judges a finding's kept crash images again against
/// its trace and marks; the verdicts, and whether any state still fails.
pub fn replay(folder: &Path) -> Result<(String, bool), String> {
    let trace = std::fs::read_to_string(folder.join("trace.jsonl"))
        .map_err(|e| format!("{}: {e}", folder.join("trace.jsonl").display()))?;
    let mut out = String::new();
    let mut failing = false;
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(folder)
        .map_err(|e| format!("{}: {e}", folder.display()))?
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.join("crash-image.img.xz").exists())
        .collect();
    dirs.sort();
    if dirs.is_empty() {
        return Err(format!(
            "{}: no state-*/crash-image.img.xz",
            folder.display()
        ));
    }
    for d in dirs {
        let img = import_image(&d.join("crash-image.img.xz")).map_err(|e| e.to_string())?;
        let marks: Vec<Option<String>> = std::fs::read_to_string(d.join("marks.txt"))
            .unwrap_or_default()
            .lines()
            .map(|l| (l != "-").then(|| l.to_string()))
            .collect();
        let marks = if marks.is_empty() { vec![None] } else { marks };
        let ks: BTreeSet<usize> = marks
            .iter()
            .filter_map(|m| m.as_deref()?.strip_prefix("op-")?.parse().ok())
            .collect();
        let env = Envelope::new(&trace, &ks.into_iter().collect::<Vec<_>>())
            .map_err(|r| format!("the trace is rejected: {r}"))?;
        let name = d
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .into_owned();
        let state = CrashState {
            kind: log_writes::StateKind::Stored { name: name.clone() },
            marks,
            device: img,
        };
        let v = judge_state(&env, &state, Recovery::Ours, trace_clock_s(&trace));
        if v.problems.is_empty() {
            out.push_str(&format!("{name}: inside the envelope, check clean\n"));
        } else {
            failing = true;
            for p in &v.problems {
                out.push_str(&format!("{name}: {}\n{}\n\n", p.headline(), p.detail));
            }
        }
    }
    Ok((out, failing))
}

#[cfg(test)]
mod tests {
    use super::*;
    use nilfs_workload::gen::{Features, Profile};

    fn workload(seed: u64, len: usize) -> Workload {
        Workload::generated(seed, len, Some(Profile::Crash), Features::DEVICE)
    }

    fn judge(w: &Workload, sampling: Sampling, recovery: Recovery) -> LogVerdict {
        let (base, log, trace) = record_ours(w).expect("our write path runs the workload");
        judge_log(
            &trace,
            &log,
            &base,
            &JudgeOptions {
                sampling,
                recovery,
                kernel_sample: 0,
            },
        )
    }

    #[test]
    fn progress_reads_the_runners_marks() {
        assert_eq!(Progress::of(None), Ok(Progress::Start));
        assert_eq!(Progress::of(Some("op-7")), Ok(Progress::Op(7)));
        assert_eq!(Progress::of(Some(END_MARK)), Ok(Progress::End));
        assert!(Progress::of(Some("op-x")).is_err());
        assert!(Progress::of(Some("mymark")).is_err());
    }

    #[test]
    fn lscp_rows_parse() {
        let text = "                 CNO        DATE     TIME  MODE  FLG      BLKCNT       ICNT\n\
                    \x20                  1  2024-12-01 13:07:00   cp    -            4          2\n\
                    \x20                  3  2024-12-01 13:07:05   ss    i           11          5\n";
        let rows = parse_lscp(text).unwrap();
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[1].to_string(), "3 ss i 11 5");
        assert!(parse_lscp("header\n1 2 3\n").is_err());
    }

    /// Our own write path through the whole pipeline: every crash state of
    /// a few crash-profile workloads recovers inside the model's envelope
    /// with a clean check, except reordered states that show the finding
    /// "skipped-log" (see the next test), which our recovery shares with
    /// the kernel's by design.
    #[test]
    fn our_write_path_passes_its_own_crash_campaign() {
        let mut states = 0;
        let mut points = 0;
        for seed in 1..=3 {
            let w = workload(seed, 6);
            let v = judge(&w, Sampling::new(seed), Recovery::Ours);
            let unexpected: Vec<String> = v
                .problems
                .iter()
                .filter(|p| p.key != "skipped-log")
                .map(|p| format!("{}\n{}", p.headline(), p.detail))
                .collect();
            assert!(
                unexpected.is_empty(),
                "{}: {}",
                w.label,
                unexpected.join("\n\n")
            );
            assert_eq!(
                v.failing_by_kind[..2],
                [0, 0],
                "{}: a prefix or torn state failed",
                w.label
            );
            assert!(
                v.torn > 0 && v.reordered > 0,
                "{}: nothing sampled",
                w.label
            );
            states += v.states;
            points += v.points;
        }
        assert!(states > 30, "only {states} crash states");
        assert!(points >= states);
    }

    /// postmortem (finding "skipped-log", docs/findings.md): one
    /// construction wrote its logical segment as two logs, the first at
    /// the end of one segment, the second (with the super root) at the
    /// start of the next, with no flush between them. If only the second
    /// reaches the disk, nilfs_search_super_root steps over the missing
    /// log (strayed -> feed_segment) and takes the second one's super
    /// root, which names blocks that were never written. Linux 6.1 does
    /// the same (the crash campaign's kernel recovery agreed with ours on
    /// every such state); the campaign must keep reporting it.
    #[test]
    fn a_construction_across_segments_with_its_first_log_lost_is_caught() {
        use serde_json::json;
        let mut w = workload(1, 1);
        w.lines = vec![
            w.lines[0].clone(),
            json!({"op": "mount"}),
            json!({"op": "create", "path": "/a", "excl": true}),
            json!({"op": "write", "path": "/a", "offset": 0,
                   "data": {"seeded": {"seed": 7, "len": 90_000}}}),
            json!({"op": "sync"}),
            json!({"op": "umount"}),
        ];
        let (base, log, trace) = record_ours(&w).unwrap();
        let env = Envelope::new(&trace, &[1, 2, 3, 4, 5]).unwrap();
        let seg_bytes = 64 * 1024;
        let mut caught = 0;
        let mut start = 0;
        for (end, e) in log.entries.iter().enumerate() {
            if !e.is_durable_point() {
                continue;
            }
            // The logs of the epoch (not the super blocks at either end).
            let size = base.size_bytes();
            let writes: Vec<usize> = (start..end)
                .filter(|&i| {
                    let x = &log.entries[i];
                    let at = x.sector * 512;
                    x.changes_device() && at >= 4096 && at < size - 4096
                })
                .collect();
            let seg = |i: usize| log.entries[i].sector * 512 / seg_bytes;
            let dev = base.duplicate();
            for i in (0..start).filter(|&i| log.entries[i].changes_device()) {
                // The state before the epoch.
                let x = &log.entries[i];
                dev.write_at(x.sector * 512, &x.data).unwrap();
            }
            if let Some(&last) = writes.last() {
                if writes.iter().any(|&i| seg(i) != seg(last)) {
                    for &i in writes.iter().filter(|&&i| seg(i) == seg(last)) {
                        let x = &log.entries[i];
                        dev.write_at(x.sector * 512, &x.data).unwrap();
                    }
                    let mark = log.entries[..end]
                        .iter()
                        .rev()
                        .find_map(|x| x.mark_text().map(str::to_string));
                    let state = CrashState {
                        kind: log_writes::StateKind::Stored {
                            name: format!("epoch-{end}-last-segment-only"),
                        },
                        marks: vec![mark],
                        device: dev,
                    };
                    assert!(skipped_log(&state.device).is_some());
                    let v = judge_state(&env, &state, Recovery::Ours, 0);
                    assert!(
                        v.problems.iter().any(|p| p.key == "skipped-log"),
                        "{:?}",
                        v.problems.iter().map(Problem::headline).collect::<Vec<_>>()
                    );
                    caught += 1;
                }
            }
            start = end + 1;
        }
        assert!(caught > 0, "no construction spanned two segments");
    }

    /// The known-bad replay (one write of an epoch silently dropped) is
    /// caught: for some dropped write, some state leaves the envelope or
    /// fails the check or the recovery.
    #[test]
    fn a_replay_that_drops_a_write_is_caught() {
        let w = workload(2, 6);
        let (base, log, trace) = record_ours(&w).unwrap();
        let writes = log.writes();
        let mut caught = 0;
        for k in (0..writes).step_by(3) {
            let v = judge_log(
                &trace,
                &log,
                &base,
                &JudgeOptions {
                    sampling: Sampling {
                        torn: 0,
                        reordered: 0,
                        all_but_one: 0,
                        drop_write: Some(k),
                        ..Sampling::new(0)
                    },
                    recovery: Recovery::Ours,
                    kernel_sample: 0,
                },
            );
            if !v.problems.is_empty() {
                caught += 1;
            }
        }
        assert!(
            caught > 0,
            "no dropped write of {writes} was noticed: the checkers cannot fail"
        );
    }

    /// The known-bad recovery (the last log forgotten) is caught: a synced
    /// change is lost, outside the envelope.
    #[test]
    fn a_recovery_that_ignores_the_last_log_is_caught() {
        let w = workload(1, 6);
        let v = judge(
            &w,
            Sampling {
                torn: 0,
                reordered: 0,
                all_but_one: 0,
                ..Sampling::new(0)
            },
            Recovery::IgnoresLastLog,
        );
        assert!(
            v.problems
                .iter()
                .any(|p| p.class == "crash-envelope" || p.class == "crash-recovery"),
            "the forgetful recovery passed: {:?}",
            v.problems.iter().map(Problem::headline).collect::<Vec<_>>()
        );
    }

    /// A trace whose observed outcome was altered cannot be judged, and says so.
    #[test]
    fn a_rejected_trace_is_a_problem_not_a_pass() {
        let w = workload(3, 4);
        let (base, log, trace) = record_ours(&w).unwrap();
        let bad = trace.replacen("\"out\":\"ok\"", "\"out\":{\"err\":\"EIO\"}", 3);
        let v = judge_log(
            &bad,
            &log,
            &base,
            &JudgeOptions {
                sampling: Sampling::new(0),
                recovery: Recovery::Ours,
                kernel_sample: 0,
            },
        );
        assert_eq!(v.problems[0].class, "kernel-rejected");
    }

    /// A kernel recovery that differs from ours is a problem.
    #[test]
    fn disagreeing_recoveries_are_caught() {
        let s = Sample {
            slug: "p3".into(),
            raw: MemDevice::new(512),
            ours_live: vec!["DIR  -  /d/".into()],
            ours_lscp: vec![LscpRow {
                cno: 1,
                snapshot: false,
                minor: false,
                blocks: 4,
                inodes: 2,
            }],
        };
        let mut k = KernelRecovery {
            mounted: true,
            manifest: s.ours_live.clone(),
            lscp: Ok(s.ours_lscp.clone()),
            errors: String::new(),
        };
        assert!(compare_recoveries(&s, &k).is_none());
        k.manifest.push("LNK  -  /l -> d".into());
        assert!(compare_recoveries(&s, &k).is_some());
        k.manifest = s.ours_live.clone();
        k.lscp = Ok(vec![]);
        assert!(compare_recoveries(&s, &k).is_some());
        k.mounted = false;
        assert!(compare_recoveries(&s, &k).is_some());
    }
}
