//! What a campaign leaves behind: one folder per failing workload (the
//! minimal workload, the original, the verdict, the command that replays
//! it), the findings table that ends every campaign's summary, and the
//! progress bar shown while it runs.

use std::path::{Path, PathBuf};
use std::time::Instant;

use indicatif::{ProgressBar, ProgressStyle};

use crate::campaign::common::problem::{verdict_text, Problem};
use crate::campaign::common::workload::Workload;

/// One failing workload, shrunk.
pub struct Finding {
    pub workload: Workload,
    pub minimal: Workload,
    pub problems: Vec<Problem>,
    pub folder: PathBuf,
}

/// The end of a kernel or GRUB campaign.
pub struct Summary {
    pub kind: &'static str,
    /// The `nilref campaign` subcommand, with the peer versions it judged
    /// (`kernel --kernel 6.12 --grub 2.06`), that replays a finding.
    pub command: String,
    pub workloads: usize,
    pub passed: usize,
    pub findings: Vec<Finding>,
    pub seconds: f64,
    pub boots: usize,
    /// Of `seconds`, those the guest ran (its boots), where a campaign
    /// measures them: the rest is the host's (images, judging, shrinking).
    pub guest_seconds: Option<f64>,
    /// The guest's seconds by phase (boot, mkfs, exec, ...), where the
    /// guest stamps them.
    pub guest_phases: Option<Vec<(&'static str, f64)>>,
}

impl Summary {
    /// The end of a campaign begun at `t0`: its workloads are those that
    /// passed and those that became findings.
    pub fn new(
        kind: &'static str,
        command: String,
        passed: usize,
        findings: Vec<Finding>,
        t0: Instant,
        boots: usize,
    ) -> Summary {
        Summary {
            kind,
            command,
            workloads: passed + findings.len(),
            passed,
            findings,
            seconds: t0.elapsed().as_secs_f64(),
            boots,
            guest_seconds: None,
            guest_phases: None,
        }
    }

    pub fn table(&self) -> String {
        let per_min = if self.seconds > 0.0 {
            self.workloads as f64 * 60.0 / self.seconds
        } else {
            0.0
        };
        let mut t = format!(
            "| campaign | judged | workloads | passed | failing | boots | time | workloads/min |\n\
             |---|---|---|---|---|---|---|---|\n\
             | {} | `{}` | {} | {} | {} | {} | {:.0} s | {:.1} |\n",
            self.kind,
            self.command,
            self.workloads,
            self.passed,
            self.findings.len(),
            self.boots,
            self.seconds,
            per_min
        );
        if let Some(g) = self.guest_seconds {
            t.push_str(&format!(
                "\ntime in the guest: {g:.0} s ({:.0}%); on the host, and in shrinking (its boots included): {:.0} s\n",
                100.0 * g / self.seconds.max(1e-9),
                (self.seconds - g).max(0.0)
            ));
        }
        if let Some(phases) = &self.guest_phases {
            let total: f64 = phases.iter().map(|(_, s)| s).sum::<f64>().max(1e-9);
            let parts: Vec<String> = phases
                .iter()
                .map(|(n, s)| format!("{n} {s:.0} s ({:.0}%)", 100.0 * s / total))
                .collect();
            t.push_str(&format!(
                "the guest's time by phase: {}\n",
                parts.join(", ")
            ));
        }
        t.push_str(&findings_table(&self.findings, |f| {
            replay_command(&self.command, &f.folder.join("workload.jsonl"))
        }));
        t
    }
}

/// The findings part of a summary (empty without findings): one row per
/// finding, `replay` giving the command that replays it.
pub fn findings_table(findings: &[Finding], replay: impl Fn(&Finding) -> String) -> String {
    if findings.is_empty() {
        return String::new();
    }
    let mut t = String::from(
        "\n| finding | workload | minimal lines | problem | replay |\n|---|---|---|---|---|\n",
    );
    for f in findings {
        t.push_str(&format!(
            "| {} | {} | {} | {} | `{}` |\n",
            f.folder.file_name().unwrap_or_default().to_string_lossy(),
            f.workload.label,
            f.minimal.lines.len(),
            f.problems
                .first()
                .map(Problem::headline)
                .unwrap_or_default(),
            replay(f)
        ));
    }
    t
}

/// The progress bar of a campaign named `what`.
pub fn bar(n: usize, what: &str) -> ProgressBar {
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

/// A finding's folder, `OUT/findings/<prefix><label>-<class>/`, holding
/// what every campaign writes there: `workload.jsonl` (the minimal
/// workload), `original-workload.jsonl` and `verdict.txt`.
pub struct FindingFolder {
    pub dir: PathBuf,
}

impl FindingFolder {
    pub fn create(
        out: &Path,
        prefix: &str,
        w: &Workload,
        minimal: &Workload,
        problems: &[Problem],
    ) -> Result<FindingFolder, String> {
        let slug: String = format!("{prefix}{}-{}", w.label, problems[0].class)
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
            .collect();
        let dir = out.join("findings").join(slug);
        std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let folder = FindingFolder { dir };
        folder.put("workload.jsonl", &minimal.to_jsonl())?;
        folder.put("original-workload.jsonl", &w.to_jsonl())?;
        folder.put("verdict.txt", &verdict_text(problems))?;
        Ok(folder)
    }

    /// Writes one file of the folder.
    pub fn put(&self, name: &str, text: &str) -> Result<(), String> {
        std::fs::write(self.dir.join(name), text)
            .map_err(|e| format!("{}: {e}", self.dir.join(name).display()))
    }
}

/// The problems as the README's list: one headline a line.
pub fn headlines(problems: &[Problem]) -> String {
    problems
        .iter()
        .map(|p| format!("- {}", p.headline()))
        .collect::<Vec<_>>()
        .join("\n")
}

/// What a kernel or GRUB finding keeps beside its workloads, when there
/// is any: the kernel's observed trace and the image.
pub struct Evidence<'a> {
    pub kernel_trace: Option<&'a str>,
    pub image: Option<&'a Path>,
}

impl Evidence<'_> {
    pub fn new<'a>(kernel_trace: Option<&'a str>, image: Option<&'a Path>) -> Evidence<'a> {
        Evidence {
            kernel_trace,
            image,
        }
    }

    /// The folder of a kernel or GRUB finding (see [`FindingFolder`]), with
    /// this evidence (the image as xz); the finding.
    pub fn write(
        &self,
        out: &Path,
        command: &str,
        w: &Workload,
        minimal: Workload,
        problems: Vec<Problem>,
    ) -> Result<Finding, String> {
        let Evidence {
            kernel_trace,
            image,
        } = *self;
        write_finding(out, command, w, minimal, problems, kernel_trace, image)
    }
}

fn write_finding(
    out: &Path,
    command: &str,
    w: &Workload,
    minimal: Workload,
    problems: Vec<Problem>,
    kernel_trace: Option<&str>,
    image: Option<&Path>,
) -> Result<Finding, String> {
    let folder = FindingFolder::create(out, "", w, &minimal, &problems)?;
    let dir = &folder.dir;
    if let Some(t) = kernel_trace {
        folder.put("original-kernel.jsonl", t)?;
    }
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
    folder.put(
        "README.md",
        &format!(
            "# {}\n\nFound by {}; {} lines, shrunk to {}.\n\nReplay: `{}`\n\n{}\n",
            problems[0].headline(),
            w.label,
            w.lines.len(),
            minimal.lines.len(),
            replay_command(command, &dir.join("workload.jsonl")),
            headlines(&problems)
        ),
    )?;
    Ok(Finding {
        workload: w.clone(),
        minimal,
        problems,
        folder: folder.dir,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The guest's share is said where a campaign measured it, and only there.
    #[test]
    fn the_table_splits_guest_and_host_time() {
        let mut s = Summary {
            kind: "kernel behaviour",
            command: "kernel --kernel 6.1 --grub 2.06".into(),
            workloads: 12,
            passed: 12,
            findings: Vec::new(),
            seconds: 40.0,
            boots: 1,
            guest_seconds: None,
            guest_phases: None,
        };
        assert!(!s.table().contains("time in the guest"));
        assert!(!s.table().contains("by phase"));
        s.guest_seconds = Some(30.0);
        s.guest_phases = Some(vec![("boot", 6.0), ("exec", 24.0)]);
        let t = s.table();
        assert!(t.contains("time in the guest: 30 s (75%)"), "{t}");
        assert!(t.contains("(its boots included): 10 s"), "{t}");
        assert!(
            t.contains("by phase: boot 6 s (20%), exec 24 s (80%)"),
            "{t}"
        );
    }
}
