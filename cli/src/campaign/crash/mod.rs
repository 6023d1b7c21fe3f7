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
//! 2. **Replay** ([`log_writes`](crate::campaign::log_writes)): the log onto the
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
//! workload through `Fs` on a [`Recorder`](crate::campaign::log_writes::Recorder)),
//! without a guest; that is how the checkers are shown to fail on their
//! known-bad variants (tests in `judge`).

pub mod blkid;
mod envelope;
mod findings;
mod judge;
mod kernel;
pub(crate) use kernel::kernel_recover;
pub(crate) use recovery::KernelRecovery;
mod record;
mod recovery;
mod summary;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::Instant;

use crate::campaign::common::workload::{parse_seeds, shard};
use crate::campaign::common::{
    args, bar, problem_name, same_problem, shrink_batched, Finding, Problem, Workload,
};
use crate::campaign::crash::blkid::Blkid;
use crate::campaign::crash::judge::{judge_log, sampling_seed, JudgeOptions, LogVerdict};
use crate::campaign::crash::record::{record_batch, record_ours, Recorded, RECORD_BATCH};
use crate::campaign::crash::recovery::Recovery;
use crate::campaign::crash::summary::CrashSummary;
use crate::campaign::guest::Harness;
use crate::campaign::log_writes::Sampling;
use crate::peers::{Installed, Kind};

#[derive(clap::Args)]
pub struct CrashArgs {
    /// Seeds, `A..B` (both included) or one number.
    #[arg(long, default_value = "1..6")]
    pub seeds: String,
    /// Generation steps per workload.
    #[arg(long, default_value_t = 12)]
    pub len: usize,
    /// The generator's profile.
    #[arg(long, default_value = "crash")]
    pub profile: String,
    /// Run only the I-th of N slices of the seeds (for a CI matrix).
    #[arg(long)]
    pub shard: Option<String>,
    /// Workload files to run instead of generated ones.
    #[arg(long)]
    pub workload: Vec<PathBuf>,
    /// Where findings go.
    #[arg(long, default_value = "target/campaign-crash")]
    pub out: PathBuf,
    /// Do not shrink failing workloads.
    #[arg(long)]
    pub no_shrink: bool,
    /// Stop after this many failing workloads (0: never).
    #[arg(long, default_value_t = 0)]
    pub max_findings: usize,
    /// Torn states sampled per epoch of writes.
    #[arg(long, default_value_t = 1)]
    pub torn: usize,
    /// Reordered states sampled per epoch of writes.
    #[arg(long, default_value_t = 1)]
    pub reordered: usize,
    /// Per epoch, the states with one of its first N writes missing.
    #[arg(long, default_value_t = 8)]
    pub all_but_one: usize,
    /// Crash states per workload that the kernel recovers too.
    #[arg(long, default_value_t = 2)]
    pub kernel_sample: usize,
    /// Record nilfs-ref's own write path instead of the kernel's (no guest).
    #[arg(long)]
    pub ours: bool,
    /// Judge a finding folder's kept crash images again, and nothing else.
    #[arg(long, value_name = "FINDING")]
    pub replay: Option<PathBuf>,
    /// The Linux version to judge (tests/peers.toml; default: its default).
    #[arg(long)]
    pub kernel: Option<String>,
    /// Also probe every crash state (with `--replay`, every kept one) with
    /// this pinned blkid release (more than once for several): it must
    /// name the file system, UUID and label of the super block copy Linux
    /// mounts.
    #[arg(long, value_name = "VERSION")]
    pub blkid: Vec<String>,
}

/// `nilref campaign crash`.
pub fn run(a: &CrashArgs) -> Result<String, String> {
    if let Some(folder) = &a.replay {
        let blkids = a
            .blkid
            .iter()
            .map(|v| Blkid::get(v))
            .collect::<Result<Vec<_>, _>>()?;
        let scratch = std::env::temp_dir().join(format!("nilref-replay-{}", std::process::id()));
        let replayed = findings::replay(folder, &blkids, &scratch);
        let _ = std::fs::remove_dir_all(&scratch);
        let (text, failing) = replayed?;
        return if failing { Err(text) } else { Ok(text) };
    }
    let profile: nilfs_workload::gen::Profile = a.profile.parse()?;
    let workloads = if a.workload.is_empty() {
        shard(parse_seeds(&a.seeds)?, a.shard.as_deref())?
            .into_iter()
            .map(|s| {
                Workload::generated(
                    s,
                    a.len,
                    Some(profile),
                    nilfs_workload::gen::Features::DEVICE,
                )
            })
            .collect()
    } else {
        a.workload
            .iter()
            .map(|p| Workload::from_file(p))
            .collect::<Result<Vec<_>, _>>()?
    };
    let s = campaign(&CrashOptions {
        workloads,
        out: a.out.clone(),
        shrink: !a.no_shrink,
        max_findings: a.max_findings,
        torn: a.torn,
        reordered: a.reordered,
        all_but_one: a.all_but_one,
        kernel_sample: a.kernel_sample,
        ours: a.ours,
        kernel: a.kernel.clone(),
        blkid: a
            .blkid
            .iter()
            .map(|v| Blkid::get(v))
            .collect::<Result<_, _>>()?,
    })?;
    args::verdict(s.table(), s.findings.is_empty(), &a.out)
}

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
    /// The pinned Linux version to judge (None: the default).
    pub kernel: Option<String>,
    /// Pinned blkid releases that probe every crash state.
    pub blkid: Vec<Blkid>,
}

/// A workload's recording and judgement.
struct Judged {
    recorded: Option<Recorded>,
    verdict: LogVerdict,
}

fn judge_opts(w: &Workload, o: &CrashOptions, scratch: &Path) -> JudgeOptions {
    JudgeOptions {
        blkid: o.blkid.clone(),
        scratch: scratch.to_path_buf(),
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
                let verdict = judge_log(&rec.trace, &rec.log, &rec.base, &judge_opts(w, o, work));
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
pub fn campaign(o: &CrashOptions) -> Result<CrashSummary, String> {
    let harness = if o.ours {
        None
    } else {
        Some(Harness::new(
            Installed::get(Kind::Kernel, o.kernel.as_deref())?,
            Installed::get(Kind::Grub, None)?,
        )?)
    };
    // The version judged, for the findings' READMEs and replay commands.
    let kernel = harness.as_ref().map(|h| h.kernel.version.as_str());
    let t0 = Instant::now();
    std::fs::create_dir_all(&o.out).map_err(|e| format!("{}: {e}", o.out.display()))?;
    let work = o.out.join("work");
    std::fs::create_dir_all(&work).map_err(|e| format!("{}: {e}", work.display()))?;
    let progress = bar(o.workloads.len(), "crash");
    let mut sum = CrashSummary {
        target: kernel.map_or("nilfs-ref".to_string(), |k| format!("Linux {k}")),
        blkid: o.blkid.iter().map(|b| b.version.clone()).collect(),
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
            let mut verdicts: Vec<&mut LogVerdict> =
                judged.iter_mut().map(|(_, j)| &mut j.verdict).collect();
            kernel::kernel_round(h, &o.out.join("kernel"), &mut verdicts, &mut sum)?;
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
            sum.blkid_probes += v.blkid_probes;
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
            let folder = findings::write_finding(
                &o.out,
                &w,
                &minimal,
                j.recorded.as_ref(),
                v,
                kernel,
                &o.blkid,
            )?;
            sum.findings.push(Finding {
                workload: w.clone(),
                minimal,
                problems: v.problems.clone(),
                folder,
            });
        }
        if args::enough(o.max_findings, sum.findings.len()) {
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

/// Problems a host-side judgement decides (shrinking re-records, but needs
/// no second boot to see them again).
fn shrinkable(p: &Problem) -> bool {
    matches!(
        p.class,
        "crash-envelope" | "crash-check" | "crash-recovery" | "blkid"
    )
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
    let mut ignored = 0.0;
    let budget = if harness.is_some() { 48 } else { 400 };
    let minimal = shrink_batched(w, RECORD_BATCH, budget, |batch| {
        let judged = run_batch(harness, work, batch, o, &mut ignored)?;
        if harness.is_some() {
            *boots += 1;
        }
        Ok(judged
            .iter()
            .map(|j| same_problem(&j.verdict.problems, target))
            .collect())
    });
    let _ = std::fs::remove_dir_all(work);
    minimal
}
