//! `nilref campaign kernel|grub …`: the oracle judging other NILFS2
//! implementations at scale (docs/ORACLE.md, docs/findings.md).
//!
//! A campaign takes a seed range (split across machines with `--shard
//! I/N`), generates one workload per seed (`nilfs_workload::gen`), runs the
//! implementation under test on each, judges the outcome, shrinks each
//! failing workload to a minimal one, and writes a folder per finding:
//! the minimal workload, what the implementation observed, what nilfs-ref
//! observed, the verdict and the command that replays it. Progress shows
//! on a bar; a summary table ends the run.

pub mod crash;
pub mod grub;
pub mod guest;
pub mod kernel;
pub mod log_writes;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

use indicatif::{ProgressBar, ProgressStyle};
use nilfs_model::{Geometry, Op, Rejection};
use nilfs_workload::gen::{generate, Features, GenConfig, Profile};
use serde_json::Value;

/// A workload to run: its lines and where it came from.
#[derive(Clone, Debug)]
pub struct Workload {
    pub label: String,
    pub lines: Vec<Value>,
    pub geometry: Geometry,
}

impl Workload {
    /// The workload of `seed` (the profile from the seed unless given).
    pub fn generated(
        seed: u64,
        len: usize,
        profile: Option<Profile>,
        features: Features,
    ) -> Workload {
        let p = kernel::profile_for(seed, profile);
        let mut cfg = GenConfig::new(seed, len, p);
        cfg.features = features;
        let lines = generate(&cfg).lines;
        Workload {
            label: format!("seed {seed} profile {} len {len}", p.name()),
            geometry: geometry_of(&lines),
            lines,
        }
    }

    /// A workload read from a file.
    pub fn from_file(path: &Path) -> Result<Workload, String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
        let lines: Vec<Value> = nilfs_workload::parse(&text)
            .map_err(|(n, m)| format!("{} line {n}: {m}", path.display()))?
            .into_iter()
            .map(|(_, v)| v)
            .collect();
        if lines
            .first()
            .and_then(|l| l.get("op"))
            .and_then(Value::as_str)
            != Some("mkfs")
        {
            return Err(format!(
                "{}: a campaign workload starts with mkfs",
                path.display()
            ));
        }
        Ok(Workload {
            label: path.display().to_string(),
            geometry: geometry_of(&lines),
            lines,
        })
    }

    pub fn with_lines(&self, lines: Vec<Value>) -> Workload {
        Workload {
            label: self.label.clone(),
            geometry: self.geometry.clone(),
            lines,
        }
    }

    /// The lines numbered from 1, as `apply::apply_lines` takes them.
    pub fn numbered_lines(&self) -> Vec<(usize, Value)> {
        self.lines
            .iter()
            .cloned()
            .enumerate()
            .map(|(i, v)| (i + 1, v))
            .collect()
    }

    pub fn to_jsonl(&self) -> String {
        self.lines.iter().map(|l| l.to_string() + "\n").collect()
    }

    /// The device mkfs gives this geometry on.
    pub fn device_bytes(&self) -> u64 {
        kernel::device_bytes_for(&self.lines)
    }
}

/// The geometry of a workload's mkfs line (defaults for a missing one).
pub fn geometry_of(lines: &[Value]) -> Geometry {
    match lines
        .first()
        .and_then(|l| serde_json::from_value::<Op>(l.clone()).ok())
    {
        Some(Op::Mkfs {
            block_size,
            blocks_per_segment,
            nsegments,
            r_segments_percentage,
            ..
        }) => Geometry {
            block_size,
            blocks_per_segment,
            nsegments,
            r_segments_percentage,
        },
        _ => Profile::Mixed.default_geometry(),
    }
}

/// What went wrong, in a form that shrinking can keep constant.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problem {
    /// Which check: kernel-rejected, read-path, ours-rejected, runner,
    /// ours-runner, guest, grub.
    pub class: &'static str,
    /// What must stay the same while shrinking (the rejected operation's
    /// kind and the observed outcome, say).
    pub key: String,
    /// The whole story, for the finding's folder.
    pub detail: String,
}

impl Problem {
    /// The key of a rejection: the operation's kind and the observed
    /// outcome's shape (the errno, or which kind of answer), which stay the
    /// same while shrinking changes the numbers around them.
    fn rejected(class: &'static str, r: &Rejection, trace: &str) -> Problem {
        let op: Value = serde_json::from_str(&r.op).unwrap_or(Value::Null);
        let kind = op.get("op").and_then(Value::as_str).unwrap_or("?");
        let observed: Value = serde_json::from_str(&r.observed).unwrap_or(Value::Null);
        let shape = match &observed {
            Value::String(s) => s.clone(),
            Value::Object(o) => match o.iter().next() {
                Some((k, Value::String(e))) if k == "err" => format!("err {e}"),
                Some((k, _)) => k.clone(),
                None => "?".into(),
            },
            _ => r.observed.chars().take(40).collect(),
        };
        Problem {
            class,
            key: format!("{kind} -> {shape}"),
            detail: format!("{r}\n\ntrace:\n{trace}"),
        }
    }
    pub fn kernel_rejected(r: &Rejection, trace: &str) -> Problem {
        Problem::rejected("kernel-rejected", r, trace)
    }
    pub fn ours_rejected(r: &Rejection, trace: &str) -> Problem {
        Problem::rejected("ours-rejected", r, trace)
    }
    pub fn read_path(detail: impl Into<String>) -> Problem {
        let detail = detail.into();
        Problem {
            class: "read-path",
            key: detail.split(':').next().unwrap_or("").to_string(),
            detail,
        }
    }
    pub fn runner(detail: impl Into<String>) -> Problem {
        Problem {
            class: "runner",
            key: String::new(),
            detail: detail.into(),
        }
    }
    pub fn ours_runner(detail: impl Into<String>) -> Problem {
        Problem {
            class: "ours-runner",
            key: String::new(),
            detail: detail.into(),
        }
    }
    pub fn guest(detail: impl Into<String>) -> Problem {
        Problem {
            class: "guest",
            key: String::new(),
            detail: detail.into(),
        }
    }
    /// One line for tables.
    pub fn headline(&self) -> String {
        let first = self.detail.lines().next().unwrap_or("");
        if self.key.is_empty() {
            format!("{}: {first}", self.class)
        } else {
            format!("{}: {}", self.class, self.key)
        }
    }
}

/// `A..B` (both included) or a single seed.
pub fn parse_seeds(s: &str) -> Result<Vec<u64>, String> {
    let bad = || format!("seeds: {s:?} is not A..B or N");
    match s.split_once("..") {
        Some((a, b)) => {
            let a: u64 = a.trim().parse().map_err(|_| bad())?;
            let b: u64 = b.trim().parse().map_err(|_| bad())?;
            if b < a {
                return Err(bad());
            }
            Ok((a..=b).collect())
        }
        None => Ok(vec![s.trim().parse().map_err(|_| bad())?]),
    }
}

/// The `I/N` shard of a seed list (every N-th seed from the I-th).
pub fn shard(seeds: Vec<u64>, shard: Option<&str>) -> Result<Vec<u64>, String> {
    let Some(s) = shard else { return Ok(seeds) };
    let bad = || format!("shard: {s:?} is not I/N with 1 <= I <= N");
    let (i, n) = s.split_once('/').ok_or_else(bad)?;
    let (i, n): (usize, usize) = (i.parse().map_err(|_| bad())?, n.parse().map_err(|_| bad())?);
    if i == 0 || i > n {
        return Err(bad());
    }
    Ok(seeds
        .into_iter()
        .enumerate()
        .filter(|(k, _)| k % n == i - 1)
        .map(|(_, s)| s)
        .collect())
}

/// What a campaign is asked to do.
pub struct Options {
    pub workloads: Vec<Workload>,
    pub out: PathBuf,
    pub shrink: bool,
    pub batch: usize,
    /// Stop judging after this many failing workloads (0: never).
    pub max_findings: usize,
}

/// One failing workload, shrunk.
pub struct Finding {
    pub workload: Workload,
    pub minimal: Workload,
    pub problems: Vec<Problem>,
    pub folder: PathBuf,
}

/// The end of a campaign.
pub struct Summary {
    pub kind: &'static str,
    /// The `nilref campaign` subcommand that replays a finding.
    pub command: &'static str,
    pub workloads: usize,
    pub passed: usize,
    pub findings: Vec<Finding>,
    pub seconds: f64,
    pub boots: usize,
}

impl Summary {
    pub fn table(&self) -> String {
        let per_min = if self.seconds > 0.0 {
            self.workloads as f64 * 60.0 / self.seconds
        } else {
            0.0
        };
        let mut t = format!(
            "| campaign | workloads | passed | failing | boots | time | workloads/min |\n\
             |---|---|---|---|---|---|---|\n\
             | {} | {} | {} | {} | {} | {:.0} s | {:.1} |\n",
            self.kind,
            self.workloads,
            self.passed,
            self.findings.len(),
            self.boots,
            self.seconds,
            per_min
        );
        if !self.findings.is_empty() {
            t.push_str("\n| finding | workload | minimal lines | problem | replay |\n|---|---|---|---|---|\n");
            for f in &self.findings {
                t.push_str(&format!(
                    "| {} | {} | {} | {} | `{}` |\n",
                    f.folder.file_name().unwrap_or_default().to_string_lossy(),
                    f.workload.label,
                    f.minimal.lines.len(),
                    f.problems
                        .first()
                        .map(Problem::headline)
                        .unwrap_or_default(),
                    replay_command(self.command, &f.folder.join("workload.jsonl"))
                ));
            }
        }
        t
    }
}

fn bar(n: usize, what: &str) -> ProgressBar {
    let b = ProgressBar::new(n as u64);
    b.set_style(
        ProgressStyle::with_template(
            "{spinner} {prefix} [{bar:30}] {pos}/{len} {elapsed_precise} eta {eta} {msg}",
        )
        .expect("a valid template")
        .progress_chars("=> "),
    );
    b.set_prefix(what.to_string());
    b
}

/// The command that replays a finding's workload.
pub fn replay_command(campaign: &str, workload: &Path) -> String {
    format!(
        "nilref campaign {campaign} --workload {}",
        workload.display()
    )
}

/// The behaviour campaign against the kernel (see [`kernel`]).
pub fn run_kernel(opts: &Options) -> Result<Summary, String> {
    let harness = guest::Harness::new()?;
    let t0 = Instant::now();
    std::fs::create_dir_all(&opts.out).map_err(|e| format!("{}: {e}", opts.out.display()))?;
    let progress = bar(opts.workloads.len(), "kernel");
    let mut findings = Vec::new();
    let mut passed = 0;
    let mut boots = 0;
    let work = opts.out.join("work");
    for chunk in opts
        .workloads
        .chunks(opts.batch.clamp(1, guest::DEVS.len()))
    {
        let (verdicts, _) = kernel::run_batch(&harness, &work, chunk)?;
        boots += 1;
        for (i, (w, problems)) in chunk.iter().zip(verdicts).enumerate() {
            progress.inc(1);
            if problems.is_empty() {
                passed += 1;
                continue;
            }
            progress.set_message(format!("{} failing", findings.len() + 1));
            let kernel_trace = kernel::kernel_trace(&work, i);
            let image = kernel::kernel_image(&work, i);
            let minimal = if opts.shrink && problems[0].class.starts_with("ours") {
                shrink_ours(w, &problems[0])
            } else if opts.shrink {
                progress.suspend(|| eprintln!("shrinking {}: {}", w.label, problems[0].headline()));
                shrink_kernel(
                    &harness,
                    &opts.out.join("shrink"),
                    w,
                    &problems[0],
                    &mut boots,
                )?
            } else {
                w.clone()
            };
            let folder = write_finding(
                &opts.out,
                "kernel",
                w,
                &minimal,
                &problems,
                kernel_trace.as_deref(),
                Some(&image),
            )?;
            findings.push(Finding {
                workload: w.clone(),
                minimal,
                problems,
                folder,
            });
        }
        if opts.max_findings > 0 && findings.len() >= opts.max_findings {
            break;
        }
    }
    progress.finish_and_clear();
    let _ = std::fs::remove_dir_all(&work);
    Ok(Summary {
        kind: "kernel behaviour",
        command: "kernel",
        workloads: passed + findings.len(),
        passed,
        findings,
        seconds: t0.elapsed().as_secs_f64(),
        boots,
    })
}

/// The GRUB campaign (see [`grub`]): our images through GRUB's reader.
pub fn run_grub(opts: &Options) -> Result<Summary, String> {
    let t0 = Instant::now();
    std::fs::create_dir_all(&opts.out).map_err(|e| format!("{}: {e}", opts.out.display()))?;
    let progress = bar(opts.workloads.len(), "grub");
    let work = opts.out.join("work");
    let (mut passed, mut findings) = (0, Vec::new());
    let (mut same, mut explained) = (0usize, BTreeMap::<&'static str, usize>::new());
    for w in &opts.workloads {
        let (cmp, problems) = grub::run_one(w, &work)?;
        progress.inc(1);
        same += cmp.same;
        for (k, n) in &cmp.explained {
            *explained.entry(k).or_default() += n;
        }
        if problems.is_empty() {
            passed += 1;
            continue;
        }
        let target = problems[0].clone();
        let minimal = if opts.shrink {
            let lines = nilfs_workload::shrink::ddmin(
                &w.lines,
                |cands| {
                    cands
                        .iter()
                        .map(|c| {
                            grub::run_one(&w.with_lines(c.clone()), &work)
                                .is_ok_and(|(_, ps)| ps.iter().any(|p| p.key == target.key))
                        })
                        .collect()
                },
                400,
            );
            // Leave the minimal case's image behind for the folder.
            let m = w.with_lines(lines);
            let _ = grub::run_one(&m, &work);
            m
        } else {
            w.clone()
        };
        let folder = write_finding(
            &opts.out,
            "grub",
            w,
            &minimal,
            &problems,
            None,
            Some(&grub::image_path(&work)),
        )?;
        findings.push(Finding {
            workload: w.clone(),
            minimal,
            problems,
            folder,
        });
        if opts.max_findings > 0 && findings.len() >= opts.max_findings {
            break;
        }
    }
    progress.finish_and_clear();
    let _ = std::fs::remove_dir_all(&work);
    eprintln!(
        "grub: {same} entries read as ours; known GRUB limitations: {}",
        if explained.is_empty() {
            "none met".to_string()
        } else {
            explained
                .iter()
                .map(|(k, n)| format!("{k} x{n}"))
                .collect::<Vec<_>>()
                .join(", ")
        }
    );
    Ok(Summary {
        kind: "GRUB reader",
        command: "grub",
        workloads: passed + findings.len(),
        passed,
        findings,
        seconds: t0.elapsed().as_secs_f64(),
        boots: 0,
    })
}

/// ddmin on the kernel: candidates judged a batch per boot; a candidate
/// fails when it shows a problem of the same class and key.
fn shrink_kernel(
    harness: &guest::Harness,
    work: &Path,
    w: &Workload,
    target: &Problem,
    boots: &mut usize,
) -> Result<Workload, String> {
    let mut error = None;
    let lines = nilfs_workload::shrink::ddmin(
        &w.lines,
        |cands| {
            let mut out = Vec::new();
            for chunk in cands.chunks(guest::DEVS.len()) {
                let batch: Vec<Workload> = chunk.iter().map(|c| w.with_lines(c.clone())).collect();
                match kernel::run_batch(harness, work, &batch) {
                    Ok((v, _)) => {
                        *boots += 1;
                        out.extend(v.iter().map(|ps| same_problem(ps, target)));
                    }
                    Err(e) => {
                        error = Some(e);
                        out.extend(chunk.iter().map(|_| false));
                    }
                }
            }
            out
        },
        240,
    );
    let _ = std::fs::remove_dir_all(work);
    match error {
        Some(e) => Err(e),
        None => Ok(w.with_lines(lines)),
    }
}

fn same_problem(ps: &[Problem], target: &Problem) -> bool {
    ps.iter()
        .any(|p| p.class == target.class && p.key == target.key)
}

/// Shrinks against nilfs-ref alone (for `ours-*` problems; no guest).
pub fn shrink_ours(w: &Workload, target: &Problem) -> Workload {
    let lines = nilfs_workload::shrink::ddmin(
        &w.lines,
        |cands| {
            cands
                .iter()
                .map(|c| same_problem(&kernel::ours(&w.with_lines(c.clone())), target))
                .collect()
        },
        2000,
    );
    w.with_lines(lines)
}

/// The finding's folder: `OUT/findings/<label>-<class>/`.
fn write_finding(
    out: &Path,
    command: &str,
    w: &Workload,
    minimal: &Workload,
    problems: &[Problem],
    kernel_trace: Option<&str>,
    image: Option<&Path>,
) -> Result<PathBuf, String> {
    let slug: String = format!("{}-{}", w.label, problems[0].class)
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
    if let Some(t) = kernel_trace {
        put("original-kernel.jsonl", t)?;
    }
    let mut verdict = String::new();
    for p in problems {
        verdict.push_str(&format!("== {}\n{}\n\n", p.headline(), p.detail));
    }
    put("verdict.txt", &verdict)?;
    if let Some(img) = image {
        if img.exists() {
            let _ = std::process::Command::new("xz")
                .args(["-T1", "-k", "-c"])
                .arg(img)
                .stdout(
                    std::fs::File::create(dir.join("original-image.img.xz"))
                        .map_err(|e| e.to_string())?,
                )
                .status();
        }
    }
    put(
        "README.md",
        &format!(
            "# {}\n\nFound by {}; {} lines, shrunk to {}.\n\nReplay: `{}`\n\n{}\n",
            problems[0].headline(),
            w.label,
            w.lines.len(),
            minimal.lines.len(),
            replay_command(command, &dir.join("workload.jsonl")),
            problems
                .iter()
                .map(|p| format!("- {}", p.headline()))
                .collect::<Vec<_>>()
                .join("\n")
        ),
    )?;
    Ok(dir)
}
