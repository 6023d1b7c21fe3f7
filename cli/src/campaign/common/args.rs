//! The arguments the kernel and GRUB campaigns share, the workloads they
//! name, and a campaign's table as the command's result.

use std::path::PathBuf;

use nilfs_workload::gen::{Features, Profile};

use crate::campaign::common::workload::{parse_seeds, shard, Workload};
use crate::peers::{Installed, Kind};

/// The workloads a campaign runs and what becomes of its findings: every
/// campaign's arguments but the versions it judges.
#[derive(clap::Args, Clone, Debug)]
pub struct RunArgs {
    /// Seeds, `A..B` (both included) or one number.
    #[arg(long, default_value = "1..12")]
    pub seeds: String,
    /// Generation steps per workload.
    #[arg(long, default_value_t = 60)]
    pub len: usize,
    /// One profile for every seed (default: the seed picks one of mixed,
    /// namespace, data, checkpoints, enospc, crash, attrs in turn).
    #[arg(long)]
    pub profile: Option<String>,
    /// Run only the I-th of N slices of the seeds (for a CI matrix).
    #[arg(long)]
    pub shard: Option<String>,
    /// Workload files to run instead of generated ones (a finding's
    /// workload.jsonl replays it).
    #[arg(long)]
    pub workload: Vec<PathBuf>,
    /// Where findings go.
    #[arg(long, default_value = "target/campaign")]
    pub out: PathBuf,
    /// Do not shrink failing workloads.
    #[arg(long)]
    pub no_shrink: bool,
    /// Stop after this many failing workloads (0: never).
    #[arg(long, default_value_t = 0)]
    pub max_findings: usize,
    /// Guests booted at once, each with its own batch of 12 (the kernel
    /// behaviour campaign). A guest spends most of its time waiting in the
    /// cleaner's passes, so three on two cores run 2.5 times as many
    /// workloads a minute as one (docs/benchmarks/issue-36.md);
    /// shrinking still boots one at a time.
    #[arg(long, default_value_t = 3)]
    pub jobs: usize,
}

/// The kernel and GRUB campaigns' arguments: the run, and the version
/// judged.
#[derive(clap::Args, Clone, Debug)]
pub struct CampaignArgs {
    #[command(flatten)]
    pub run: RunArgs,
    /// The Linux version to judge (tests/peers.toml; default: its
    /// default). `matrix`: a comma-separated list (default: every one).
    #[arg(long)]
    pub kernel: Option<String>,
    /// The GRUB version to judge (tests/peers.toml; default: its
    /// default). `matrix`: a comma-separated list (default: every one).
    #[arg(long)]
    pub grub: Option<String>,
}

impl std::ops::Deref for CampaignArgs {
    type Target = RunArgs;
    fn deref(&self) -> &RunArgs {
        &self.run
    }
}

/// What a campaign is asked to do.
pub struct Options {
    pub workloads: Vec<Workload>,
    pub out: PathBuf,
    pub shrink: bool,
    pub batch: usize,
    /// Stop judging after this many failing workloads (0: never).
    pub max_findings: usize,
    /// The pinned Linux and GRUB versions judged (None: the defaults).
    pub kernel: Option<String>,
    pub grub: Option<String>,
    /// Where to keep every workload's observed trace (`LABEL.jsonl`), for
    /// the version matrix's comparison.
    pub traces: Option<PathBuf>,
    /// Guests booted at once (at least 1).
    pub jobs: usize,
}

impl Options {
    /// The options `a` names.
    pub fn of(a: &CampaignArgs, workloads: Vec<Workload>, batch: usize) -> Options {
        Options {
            workloads,
            out: a.out.clone(),
            shrink: !a.no_shrink,
            batch,
            max_findings: a.max_findings,
            kernel: a.kernel.clone(),
            grub: a.grub.clone(),
            traces: None,
            jobs: a.jobs.max(1),
        }
    }

    /// The kernel this campaign boots.
    pub fn kernel_peer(&self) -> Result<Installed, String> {
        Installed::get(Kind::Kernel, self.kernel.as_deref())
    }

    /// The GRUB whose reader this campaign runs.
    pub fn grub_peer(&self) -> Result<Installed, String> {
        Installed::get(Kind::Grub, self.grub.as_deref())
    }

    /// Keeps `text` as the observed trace of workload `label`.
    pub fn keep_trace(&self, label: &str, text: &str) {
        if let Some(dir) = &self.traces {
            let name: String = label
                .chars()
                .map(|c| {
                    if c.is_ascii_alphanumeric() || c == '.' {
                        c
                    } else {
                        '-'
                    }
                })
                .collect();
            let _ = std::fs::write(dir.join(format!("{name}.jsonl")), text);
        }
    }

    /// Whether `found` failing workloads are enough to stop.
    pub fn enough(&self, found: usize) -> bool {
        enough(self.max_findings, found)
    }
}

/// Whether `found` failing workloads reach `max_findings` (0: never).
pub fn enough(max_findings: usize, found: usize) -> bool {
    max_findings > 0 && found >= max_findings
}

/// The workloads a campaign's arguments name.
pub fn workloads(a: &CampaignArgs, features: Features) -> Result<Vec<Workload>, String> {
    if !a.workload.is_empty() {
        return a.workload.iter().map(|p| Workload::from_file(p)).collect();
    }
    let profile = a
        .profile
        .as_deref()
        .map(str::parse::<Profile>)
        .transpose()?;
    let seeds = shard(parse_seeds(&a.seeds)?, a.shard.as_deref())?;
    Ok(seeds
        .into_iter()
        .map(|s| Workload::generated(s, a.len, profile, features))
        .collect())
}

/// A campaign's table as the command's result: an error (non-zero exit)
/// when it found something, naming where the findings went.
pub fn verdict(table: String, clean: bool, out: &std::path::Path) -> Result<String, String> {
    if clean {
        Ok(table)
    } else {
        Err(format!(
            "{table}\nfindings are in {}",
            out.join("findings").display()
        ))
    }
}
