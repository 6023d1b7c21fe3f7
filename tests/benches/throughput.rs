//! Throughput of the checking machinery (issue 15, "Speed"): how many
//! operations per second the lockstep harness runs, and how many cut points
//! per second the crash enumeration judges, each next to baselines measured
//! in the same run. The shuttle explorations are timed by
//! scripts/bench-shuttle.sh (they need `--cfg shuttle`).
//!
//! 1. Lockstep: workloads from the generator the lockstep test uses
//!    (`nilfs_workload::gen`, every profile, block sizes 1, 2 and 4 KiB,
//!    1..40 generation steps, drawn as tests/tests/lockstep.rs draws them
//!    but from a SplitMix64 with a fixed seed), run through
//!    `lockstep::run_workload` against `ImplUnderTest`. The adapter is
//!    wrapped to time its `apply` (the implementation) and `durable` (the
//!    abstraction function: `nilref check` of every checkpoint and the
//!    manifests read back) inside the run. Baselines on the same recorded
//!    operations: the model alone (the harness's own loop: `step`,
//!    `accept_all`, the laws, `ModelManifests::durable` where the harness
//!    compares)
//!    and the implementation alone (the adapter replaying the same
//!    operations, `durable` where the harness called it).
//! 2. Crash enumeration, judged by the model: the workload of
//!    tests/tests/crash_envelope.rs (30 operations) cut after every k-th
//!    block write, plain and torn; per cut point: the workload on a
//!    `CutDevice`, the model following the completed operations, crash,
//!    mount, the durable state read back, the envelope computed and
//!    checked. Baseline: the same workload on an uncut device, and the
//!    recovery and read-back alone.
//! 3. Crash enumeration, judged by the last completed sync: the workload
//!    of impl/tests/crash.rs (`every_cut_point_recovers_the_last_completed_sync`,
//!    27 operations, 4 syncs) through `Fs` directly, every k, plain and torn;
//!    per cut point: the workload, `nilref check` of the cut image, mount
//!    and the latest tree's manifest compared with the synced states.
//!
//! A single-shot harness (`harness = false`), like impl/benches: one pass
//! of each part takes seconds, and it is the rate of a fixed, deterministic
//! workload that matters. Single-threaded (but for the read-ahead thread
//! of `nilref check`): every rate is per core. Each headline rate is also
//! given per CPU second (all threads, /proc/self/stat), the steadier
//! figure on a machine shared with other work.
//!
//! `cargo bench -p nilfs-conformance --bench throughput` (default scale);
//! append `-- --scale N` to run 1/N of it (`--quick` is `--scale 8`),
//! `--part lockstep|crash|sync` to run one part, and `--profile` to run
//! the lockstep part alone without the baselines (under a profiler).

use std::collections::BTreeMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::{Duration, Instant};

use nilfs::device::{BlockDevice, CutDevice, MemDevice};
use nilfs::rng::SplitMix64;
use nilfs_conformance::crash_envelope;
use nilfs_conformance::lockstep::{
    self, format, model_after_format, model_durable, Case, Durable, ImageSpec, ImplUnderTest,
    ModelManifests, OnInvalid, Sut,
};
use nilfs_model::laws::{check_transition, Promises};
use nilfs_model::{step, Errno, Geometry, Op, Outcome, State};
use nilfs_workload::gen::Profile;

use nilfs_testkit::crash_workload::{self, fresh, latest_manifest, BS};

/// The seed the lockstep cases are drawn from.
const SEED: u64 = 0x4e49_4c46_5315_0015;
/// Lockstep cases at scale 1.
const CASES: u64 = 192;

fn secs(t: Duration) -> String {
    format!("{:.2} s", t.as_secs_f64())
}

fn rate(n: u64, t: Duration, unit: &str) -> String {
    if t.is_zero() {
        return "-".into();
    }
    format!("{:.0} {unit}", n as f64 / t.as_secs_f64())
}

/// CPU time of this process so far, all its threads (`nilref check`
/// reads ahead on a second thread), from /proc/self/stat: utime + stime
/// in clock ticks, taken as 100 a second (Linux's USER_HZ). Ticks are
/// 10 ms: a sum of many short intervals is right on average.
fn cpu_time() -> Duration {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let f: Vec<u64> = rest
        .split_whitespace()
        .map(|x| x.parse().unwrap_or(0))
        .collect();
    // Fields 14 and 15 of proc(5); `rest` starts at field 3.
    let ticks = f.get(11).copied().unwrap_or(0) + f.get(12).copied().unwrap_or(0);
    Duration::from_millis(ticks * 10)
}

/// What a timed loop had of the machine: its CPU time against its wall
/// time, and the rate per CPU second.
fn cpu_line(what: &str, n: u64, unit: &str, wall: Duration, cpu: Duration) {
    println!(
        "{what}: CPU time {} (all threads) in {} of wall time, {:.0} % of one core; {} per CPU second.",
        secs(cpu),
        secs(wall),
        100.0 * cpu.as_secs_f64() / wall.as_secs_f64(),
        rate(n, cpu, unit)
    );
}

fn share(part: Duration, whole: Duration) -> String {
    format!("{:.0} %", 100.0 * part.as_secs_f64() / whole.as_secs_f64())
}

// ------------------------------------------------------------ lockstep

fn cases(n: u64) -> Vec<Case> {
    let mut r = SplitMix64::new(SEED);
    (0..n)
        .map(|_| Case {
            spec: ImageSpec {
                block_size: [1024u64, 2048, 4096][(r.next_u64() % 3) as usize],
                ..ImageSpec::default()
            },
            seed: r.next_u64(),
            len: 1 + (r.next_u64() % 39) as usize,
            profile: Profile::ALL[(r.next_u64() % Profile::ALL.len() as u64) as usize],
        })
        .collect()
}

/// The adapter with a stopwatch on each call the harness makes.
struct Timed<'d> {
    inner: ImplUnderTest<'d>,
    applied: usize,
    apply: Duration,
    durable: Duration,
    /// After how many applied operations each `durable` call came, and
    /// what it returned.
    durables: Vec<(usize, Result<Durable, String>)>,
}

impl Sut for Timed<'_> {
    fn apply(&mut self, op: &Op) -> Outcome {
        let t = Instant::now();
        let out = self.inner.apply(op);
        self.apply += t.elapsed();
        self.applied += 1;
        out
    }
    fn durable(&mut self) -> Result<Durable, String> {
        let t = Instant::now();
        let d = self.inner.durable();
        self.durable += t.elapsed();
        self.durables.push((self.applied, d.clone()));
        d
    }
    fn detail(&self) -> Option<String> {
        self.inner.detail()
    }
}

/// What one lockstep run did, for the baselines to repeat.
struct Recorded {
    spec: ImageSpec,
    geometry: Geometry,
    steps: Vec<lockstep::Step>,
    durables: Vec<(usize, Result<Durable, String>)>,
}

#[derive(Default)]
struct LockstepTimes {
    cases: u64,
    lines: u64,
    ops: u64,
    durable_calls: u64,
    diverged: u64,
    panicked: u64,
    /// Generation and mkfs (outside the ops/s figure).
    setup: Duration,
    /// `run_workload`, all of it.
    run: Duration,
    /// The CPU time of the same.
    run_cpu: Duration,
    apply: Duration,
    durable: Duration,
}

fn run_lockstep(cases: &[Case], keep: bool) -> (LockstepTimes, Vec<Recorded>) {
    let mut t = LockstepTimes::default();
    let mut recorded = Vec::new();
    for case in cases {
        let t0 = Instant::now();
        let dev = MemDevice::new(case.spec.device_bytes);
        let g = format(&dev, &case.spec).expect("mkfs");
        let lines = case.workload(&g);
        let initial = model_after_format(g.clone(), &case.spec);
        t.setup += t0.elapsed();
        let mut sut = Timed {
            inner: ImplUnderTest::from_device(&dev, case.spec.ctime),
            applied: 0,
            apply: Duration::ZERO,
            durable: Duration::ZERO,
            durables: Vec::new(),
        };
        let (t1, c1) = (Instant::now(), cpu_time());
        let r = catch_unwind(AssertUnwindSafe(|| {
            lockstep::run_workload(&mut sut, initial, &lines, OnInvalid::Panic)
        }));
        t.run += t1.elapsed();
        t.run_cpu += cpu_time().saturating_sub(c1);
        t.cases += 1;
        t.lines += lines.len() as u64;
        t.ops += sut.applied as u64;
        t.apply += sut.apply;
        t.durable += sut.durable;
        t.durable_calls += sut.durables.len() as u64;
        match r {
            Ok(Ok(steps)) => {
                if keep {
                    recorded.push(Recorded {
                        spec: case.spec.clone(),
                        geometry: g,
                        steps,
                        durables: sut.durables,
                    });
                }
            }
            Ok(Err(d)) => {
                t.diverged += 1;
                eprintln!("{case:?} stopped: {d}");
            }
            Err(_) => t.panicked += 1,
        }
    }
    (t, recorded)
}

#[derive(Default)]
struct ModelTimes {
    ops: u64,
    /// `step`, `accept_all`, the laws, the dedup.
    step: Duration,
    /// The model's durable views (`ModelManifests`, as the harness makes
    /// them) and the filter, where the harness compares.
    durable: Duration,
    /// `step` time by operation kind.
    by_kind: BTreeMap<String, (u64, Duration)>,
}

/// The model's side of the harness on the recorded steps: what
/// `Lockstep::step` does but `sut.apply` and `sut.durable`.
fn replay_model(recs: &[Recorded]) -> ModelTimes {
    let mut t = ModelTimes::default();
    for rec in recs {
        let mut states = vec![(
            model_after_format(rec.geometry.clone(), &rec.spec),
            Promises::default(),
        )];
        let mut manifests = ModelManifests::default();
        let mut durables = rec.durables.iter().peekable();
        for (i, s) in rec.steps.iter().enumerate() {
            let t0 = Instant::now();
            let mut next: Vec<(State, Promises)> = Vec::new();
            for (st, promises) in &states {
                for b in step(st, &s.op) {
                    for n in b.accept_all(&s.out) {
                        let mut p = promises.clone();
                        if let Err(law) = check_transition(st, &s.op, &s.out, &n, &mut p) {
                            panic!("the model broke its own {law} on {:?}", s.op);
                        }
                        if !next.iter().any(|(m, _)| *m == n) {
                            next.push((n, p));
                        }
                    }
                }
            }
            assert!(!next.is_empty(), "replay diverged at {:?}", s.op);
            states = next;
            let d = t0.elapsed();
            t.step += d;
            add(&mut t.by_kind, &s.op, d);
            t.ops += 1;
            while let Some((_, got)) = durables.next_if(|(at, _)| *at == i + 1) {
                let got = got.as_ref().expect("a durable view");
                let t1 = Instant::now();
                let want: Vec<Durable> = states.iter().map(|(s, _)| manifests.durable(s)).collect();
                let mut keep = want.iter().map(|d| d.admits(got));
                states.retain(|_| keep.next() == Some(true));
                assert!(!states.is_empty(), "replay: the durable view differs");
                t.durable += t1.elapsed();
            }
        }
    }
    t
}

#[derive(Default)]
struct ImplTimes {
    ops: u64,
    apply: Duration,
    durable: Duration,
    /// `nilref check` of every checkpoint, timed apart where `durable` was
    /// called (not included in `durable`).
    check: Duration,
    /// `apply` time by operation kind.
    by_kind: BTreeMap<String, (u64, Duration)>,
}

/// The operation's name in the trace format (`"op"`).
fn kind(op: &Op) -> String {
    serde_json::to_value(op).expect("serialises")["op"]
        .as_str()
        .unwrap_or("?")
        .to_string()
}

fn add(by_kind: &mut BTreeMap<String, (u64, Duration)>, op: &Op, d: Duration) {
    let e = by_kind.entry(kind(op)).or_default();
    e.0 += 1;
    e.1 += d;
}

/// The adapter alone on the recorded operations, `durable` where the
/// harness called it.
fn replay_impl(recs: &[Recorded]) -> ImplTimes {
    let mut t = ImplTimes::default();
    for rec in recs {
        let dev = MemDevice::new(rec.spec.device_bytes);
        format(&dev, &rec.spec).expect("mkfs");
        let mut sut = ImplUnderTest::from_device(&dev, rec.spec.ctime);
        let mut durables = rec.durables.iter().peekable();
        for (i, s) in rec.steps.iter().enumerate() {
            let t0 = Instant::now();
            let out = sut.apply(&s.op);
            let d = t0.elapsed();
            t.apply += d;
            add(&mut t.by_kind, &s.op, d);
            t.ops += 1;
            assert_eq!(out, s.out, "the replay answered differently: {:?}", s.op);
            while durables.next_if(|(at, _)| *at == i + 1).is_some() {
                let t1 = Instant::now();
                std::hint::black_box(sut.durable().expect("a durable view"));
                t.durable += t1.elapsed();
                // The first half of `durable` again, alone: `nilref check`
                // of every checkpoint (the rest is the manifests).
                let t2 = Instant::now();
                let opts = nilfs::check::Options {
                    checkpoints: nilfs::check::Checkpoints::All,
                    ..Default::default()
                };
                assert!(nilfs::check::check_device(&dev, &opts).is_clean());
                t.check += t2.elapsed();
            }
        }
    }
    t
}

fn lockstep_part(scale: u64, profile: bool) {
    let n = (CASES / scale).max(1);
    let cases = cases(n);
    let wall = Instant::now();
    let (t, recs) = run_lockstep(&cases, !profile);
    println!();
    println!(
        "## Lockstep: {} generated cases (seed {SEED:#x}), {} workload lines, {} operations sent",
        t.cases, t.lines, t.ops
    );
    println!();
    println!(
        "{} abstraction calls (`durable`), {} divergences, {} panics; generation and mkfs {} (not counted below).",
        t.durable_calls,
        t.diverged,
        t.panicked,
        secs(t.setup)
    );
    println!();
    println!("| what | operations | time | share of the lockstep run | rate (per core) |");
    println!("| --- | ---: | ---: | ---: | ---: |");
    let row = |what: &str, ops: u64, d: Duration, whole: Duration| {
        println!(
            "| {what} | {ops} | {} | {} | {} |",
            secs(d),
            share(d, whole),
            rate(ops, d, "ops/s")
        );
    };
    row(
        "**lockstep** (`run_workload`, all of it)",
        t.ops,
        t.run,
        t.run,
    );
    row(
        "&nbsp; in the adapter's `apply` (nilfs-ref)",
        t.ops,
        t.apply,
        t.run,
    );
    row(
        "&nbsp; in the adapter's `durable` (check + manifests)",
        t.ops,
        t.durable,
        t.run,
    );
    let rest = t.run.saturating_sub(t.apply + t.durable);
    row("&nbsp; the rest (model and harness)", t.ops, rest, t.run);
    let cpu = || {
        println!();
        cpu_line("The lockstep run", t.ops, "ops", t.run, t.run_cpu);
    };
    if profile {
        cpu();
        println!();
        println!("wall time {}", secs(wall.elapsed()));
        return;
    }
    let m = replay_model(&recs);
    let i = replay_impl(&recs);
    println!(
        "| baseline: the model alone (step, accept, laws, `model_durable`) | {} | {} | {} | {} |",
        m.ops,
        secs(m.step + m.durable),
        share(m.step + m.durable, t.run),
        rate(m.ops, m.step + m.durable, "ops/s")
    );
    row("&nbsp; step, accept_all, laws", m.ops, m.step, t.run);
    row(
        "&nbsp; `model_durable` and compare",
        m.ops,
        m.durable,
        t.run,
    );
    println!(
        "| baseline: nilfs-ref alone (adapter `apply` + `durable`) | {} | {} | {} | {} |",
        i.ops,
        secs(i.apply + i.durable),
        share(i.apply + i.durable, t.run),
        rate(i.ops, i.apply + i.durable, "ops/s")
    );
    row("&nbsp; `apply` only", i.ops, i.apply, t.run);
    row("&nbsp; `durable` only", i.ops, i.durable, t.run);
    row(
        "&nbsp; &nbsp; of which `nilref check` (timed apart, again)",
        i.ops,
        i.check,
        t.run,
    );
    row(
        "&nbsp; &nbsp; of which the rest (open, manifests: read and sha256)",
        i.ops,
        i.durable.saturating_sub(i.check),
        t.run,
    );
    cpu();
    println!();
    println!("By operation kind, in the baselines (the eight costliest in nilfs-ref's `apply`):");
    println!();
    println!("| operation | count | nilfs-ref `apply` | per op | model step | per op |");
    println!("| --- | ---: | ---: | ---: | ---: | ---: |");
    let mut kinds: Vec<_> = i.by_kind.iter().collect();
    kinds.sort_by_key(|(_, (_, d))| std::cmp::Reverse(*d));
    for (k, (n, d)) in kinds.into_iter().take(8) {
        let (_, md) = m.by_kind.get(k).copied().unwrap_or_default();
        let per = |d: Duration| format!("{:.0} µs", d.as_secs_f64() * 1e6 / *n as f64);
        println!(
            "| {k} | {n} | {} | {} | {} | {} |",
            secs(*d),
            per(*d),
            secs(md),
            per(md)
        );
    }
    println!();
    println!(
        "(the baselines replay the {} cases that passed; wall time of the part {})",
        recs.len(),
        secs(wall.elapsed())
    );
}

// ---------------------------------------------- crash enumeration, model

#[derive(Default)]
struct CutTimes {
    points: u64,
    workload: Duration,
    model: Duration,
    recover: Duration,
    durable: Duration,
    envelope: Duration,
    /// The same envelope with every manifest made afresh (as the test did
    /// before it shared one `ModelManifests`); not part of the loop's time.
    envelope_memo: Duration,
    memo: ModelManifests,
    /// The adapter's page digests, carried from cut point to cut point as
    /// crash_envelope.rs's `run_cut` carries them.
    digests: nilfs::inspect::manifest::DigestMemo,
}

/// One cut point of crash_envelope.rs's `check_every_cut`: the workload
/// until the cut, the model following it, crash, mount, the durable view,
/// the envelope; panics outside it.
fn envelope_cut(
    base: &MemDevice,
    initial: &State,
    ops: &[Op],
    k: u64,
    tear: bool,
    t: &mut CutTimes,
) {
    let spec = crash_envelope::spec();
    let dev = CutDevice::new(base.duplicate(), 1024, k);
    let dev = if tear { dev.tearing() } else { dev };
    let mut model = vec![initial.clone()];
    let mut sut =
        ImplUnderTest::from_device(&dev, spec.ctime).with_digests(std::mem::take(&mut t.digests));
    let mut completed = 0;
    for op in ops {
        let t0 = Instant::now();
        let out = sut.try_apply(op).expect("supported");
        t.workload += t0.elapsed();
        if out == Outcome::Err(Errno::EIO) {
            break;
        }
        let t1 = Instant::now();
        model = crash_envelope::follow(&model, op, &out);
        t.model += t1.elapsed();
        completed += 1;
    }
    let t2 = Instant::now();
    dev.restore();
    assert_eq!(sut.apply(&Op::Crash), Outcome::Ok);
    let mounted = sut.apply(&Op::Mount {
        cp: None,
        ro: false,
    }) == Outcome::Ok;
    t.recover += t2.elapsed();
    let t3 = Instant::now();
    let durable = if mounted { sut.durable().ok() } else { None };
    t.digests = sut.take_digests();
    let durable = durable.unwrap_or_else(|| panic!("cut {k} (torn {tear}): did not mount or read"));
    t.durable += t3.elapsed();
    // The envelope as crash_envelope.rs computes it: one
    // `ModelManifests` for all cut points.
    let t4 = Instant::now();
    let allowed = crash_envelope::envelope(&model, ops.get(completed), &mut |s| t.memo.durable(s));
    assert!(
        allowed.iter().any(|a| a.admits(&durable)),
        "cut {k} (torn {tear}): outside the envelope"
    );
    t.envelope += t4.elapsed();
    t.points += 1;
    // Timed apart: the same envelope with every manifest made afresh.
    let t5 = Instant::now();
    let fresh = crash_envelope::envelope(&model, ops.get(completed), &mut model_durable);
    let fresh_time = t5.elapsed();
    assert!(fresh == allowed, "cut {k}: the remembered manifests differ");
    t.envelope_memo += fresh_time;
}

fn crash_part(scale: u64) {
    let wall = Instant::now();
    let ops = crash_envelope::workload();
    let spec = crash_envelope::spec();
    let (base, initial) = crash_envelope::formatted();
    let full = CutDevice::new(base.duplicate(), 1024, u64::MAX);
    {
        let mut sut = ImplUnderTest::from_device(&full, spec.ctime);
        for op in &ops {
            sut.apply(op);
        }
    }
    let total = full.written();
    let mut t = CutTimes::default();
    let (t0, c0) = (Instant::now(), cpu_time());
    for tear in [false, true] {
        for k in (u64::from(tear)..=total).step_by(scale as usize) {
            envelope_cut(&base, &initial, &ops, k, tear, &mut t);
        }
    }
    // The loop's time without the envelope made afresh, which is timed
    // apart for comparison only (and is one thread's CPU time too).
    let run = t0.elapsed().saturating_sub(t.envelope_memo);
    let run_cpu = cpu_time()
        .saturating_sub(c0)
        .saturating_sub(t.envelope_memo);
    // Baselines: the whole workload on an uncut device, and the recovery
    // and read-back of the final image alone.
    let reps = t.points.max(1);
    let (mut whole, mut rec) = (Duration::ZERO, Duration::ZERO);
    for _ in 0..reps {
        let dev = CutDevice::new(base.duplicate(), 1024, u64::MAX);
        let t1 = Instant::now();
        let mut sut = ImplUnderTest::from_device(&dev, spec.ctime);
        for op in &ops {
            sut.apply(op);
        }
        whole += t1.elapsed();
        let t2 = Instant::now();
        sut.apply(&Op::Crash);
        sut.apply(&Op::Mount {
            cp: None,
            ro: false,
        });
        std::hint::black_box(sut.durable().expect("durable"));
        rec += t2.elapsed();
    }
    println!();
    println!(
        "## Crash enumeration judged by the model (crash_envelope.rs's workload: {} operations, {total} block writes; every {}{} cut point, plain and torn)",
        ops.len(),
        scale,
        if scale == 1 { "st" } else { "th" }
    );
    println!();
    println!("| what | cut points | time | share | rate (per core) |");
    println!("| --- | ---: | ---: | ---: | ---: |");
    let row = |what: &str, d: Duration| {
        println!(
            "| {what} | {} | {} | {} | {} |",
            t.points,
            secs(d),
            share(d, run),
            rate(t.points, d, "cut points/s")
        );
    };
    row(
        "**every cut point** (workload, model, recovery, judgement)",
        run,
    );
    row("&nbsp; the workload until the cut (nilfs-ref)", t.workload);
    row(
        "&nbsp; the model following the completed operations",
        t.model,
    );
    row("&nbsp; crash and mount (recovery)", t.recover);
    row(
        "&nbsp; `durable` (check + manifests of every checkpoint)",
        t.durable,
    );
    row(
        "&nbsp; the envelope (model, manifests remembered) and the comparison",
        t.envelope,
    );
    row(
        "(apart: the envelope with every manifest made afresh)",
        t.envelope_memo,
    );
    println!(
        "| baseline: the whole workload, uncut, no judgement (×{reps}) | {reps} | {} | {} | {} |",
        secs(whole),
        share(whole, run),
        rate(reps, whole, "runs/s")
    );
    println!(
        "| baseline: crash, mount and `durable` of the final image (×{reps}) | {reps} | {} | {} | {} |",
        secs(rec),
        share(rec, run),
        rate(reps, rec, "runs/s")
    );
    println!();
    cpu_line("Every cut point", t.points, "cut points", run, run_cpu);
    println!();
    println!("wall time of the part {}", secs(wall.elapsed()));
}

// ------------------------------------- crash enumeration, last sync

/// impl/tests/crash.rs's workload (27 operations, 4 syncs); how many
/// syncs completed.
fn sync_workload(dev: &dyn BlockDevice) -> usize {
    match crash_workload::workload(dev) {
        Ok(n) | Err(n) => n,
    }
}

fn sync_part(scale: u64) {
    let wall = Instant::now();
    let base = fresh();
    let cut = |k: u64, tear: bool| {
        let d = CutDevice::new(base.duplicate(), BS, k);
        if tear {
            d.tearing()
        } else {
            d
        }
    };
    let full = cut(u64::MAX, false);
    assert_eq!(sync_workload(&full), 4);
    let total = full.written();
    // The write counts at which each sync completed, and the state of
    // each number of completed syncs (setup, as the test does it).
    let t_setup = Instant::now();
    let mut points = Vec::new();
    for k in 0..=total {
        let done = sync_workload(&cut(k, false));
        while points.len() < done {
            points.push(k);
        }
    }
    let states: Vec<String> = (0..=4)
        .map(|n| {
            let dev = cut(if n == 0 { 0 } else { points[n - 1] }, false);
            sync_workload(&dev);
            latest_manifest(&dev.inner)
        })
        .collect();
    let setup = t_setup.elapsed();
    let completed = |k: u64| points.iter().filter(|&&p| p <= k).count();
    let (mut n_points, mut work, mut judge) = (0u64, Duration::ZERO, Duration::ZERO);
    let (t0, c0) = (Instant::now(), cpu_time());
    for tear in [false, true] {
        for k in (u64::from(tear)..=total).step_by(scale as usize) {
            let t1 = Instant::now();
            let dev = cut(k, tear);
            sync_workload(&dev);
            work += t1.elapsed();
            let t2 = Instant::now();
            let got = latest_manifest(&dev.inner);
            let (lo, hi) = if tear {
                (completed(k - 1), (completed(k) + 1).min(4))
            } else {
                (completed(k), (completed(k) + 1).min(4))
            };
            assert!(
                (lo..=hi).any(|n| states[n] == got),
                "cut {k} (torn {tear}): not a synced state"
            );
            judge += t2.elapsed();
            n_points += 1;
        }
    }
    let run = t0.elapsed();
    let run_cpu = cpu_time().saturating_sub(c0);
    let reps = n_points.max(1);
    let mut whole = Duration::ZERO;
    for _ in 0..reps {
        let t1 = Instant::now();
        sync_workload(&cut(u64::MAX, false));
        whole += t1.elapsed();
    }
    println!();
    println!(
        "## Crash enumeration judged by the last completed sync (impl/tests/crash.rs's workload: 27 operations, 4 syncs, {total} block writes; every {}{} cut point, plain and torn)",
        scale,
        if scale == 1 { "st" } else { "th" }
    );
    println!();
    println!("| what | cut points | time | share | rate (per core) |");
    println!("| --- | ---: | ---: | ---: | ---: |");
    let row = |what: &str, n: u64, d: Duration| {
        println!(
            "| {what} | {n} | {} | {} | {} |",
            secs(d),
            share(d, run),
            rate(n, d, "cut points/s")
        );
    };
    row(
        "**every cut point** (workload, check, mount, compare)",
        n_points,
        run,
    );
    row(
        "&nbsp; the workload until the cut (nilfs-ref)",
        n_points,
        work,
    );
    row(
        "&nbsp; `nilref check`, mount, manifest, compare",
        n_points,
        judge,
    );
    println!(
        "| baseline: the whole workload, uncut, no judgement (×{reps}) | {reps} | {} | {} | {} |",
        secs(whole),
        share(whole, run),
        rate(reps, whole, "runs/s")
    );
    println!();
    cpu_line("Every cut point", n_points, "cut points", run, run_cpu);
    println!();
    println!(
        "setup (the sync points: {} uncut-to-k runs, and 5 reference states) {}; wall time of the part {}",
        total + 1,
        secs(setup),
        secs(wall.elapsed())
    );
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let mut scale = args
        .iter()
        .position(|a| a == "--scale")
        .and_then(|p| args.get(p + 1))
        .map(|s| s.parse::<u64>().expect("--scale N"))
        .unwrap_or(1)
        .max(1);
    if args.iter().any(|a| a == "--quick") {
        scale *= 8;
    }
    let part = args
        .iter()
        .position(|a| a == "--part")
        .and_then(|p| args.get(p + 1))
        .map(String::as_str)
        .unwrap_or("all");
    let profile = args.iter().any(|a| a == "--profile");
    let wall = Instant::now();
    println!("# Checking throughput (issue 15), scale 1/{scale}");
    if matches!(part, "all" | "lockstep") {
        lockstep_part(scale, profile);
    }
    if !profile && matches!(part, "all" | "crash") {
        crash_part(scale);
    }
    if !profile && matches!(part, "all" | "sync") {
        sync_part(scale);
    }
    println!();
    println!(
        "total wall time {}, CPU time {} (all threads); load average at the end: {}",
        secs(wall.elapsed()),
        secs(cpu_time()),
        std::fs::read_to_string("/proc/loadavg")
            .unwrap_or_default()
            .split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" ")
    );
}
