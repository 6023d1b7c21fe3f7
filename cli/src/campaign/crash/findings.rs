//! A crash finding's folder (the workload, the trace, the kept crash
//! states with both recoveries, the base image and the log) and
//! `--replay`, which judges its kept images again.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use nilfs::device::{import_image, BlockDevice, MemDevice};

use crate::campaign::common::findings::headlines;
use crate::campaign::common::{FindingFolder, Workload};
use crate::campaign::crash::blkid::{self, Blkid};
use crate::campaign::crash::envelope::Envelope;
use crate::campaign::crash::judge::{blkid_problem, judge_state, trace_clock_s, LogVerdict};
use crate::campaign::crash::record::Recorded;
use crate::campaign::crash::recovery::Recovery;
use crate::campaign::log_writes::{self, CrashState};

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

/// The finding's folder: `OUT/findings/<label>-<class>/`. `kernel`: the
/// pinned Linux version recorded (None: nilfs-ref's own write path), named
/// in its README and in the command that records the workload again.
pub fn write_finding(
    out: &Path,
    w: &Workload,
    minimal: &Workload,
    recorded: Option<&Recorded>,
    v: &LogVerdict,
    kernel: Option<&str>,
    blkids: &[Blkid],
) -> Result<PathBuf, String> {
    let folder = FindingFolder::create(out, "crash-", w, minimal, &v.problems)?;
    let dir = folder.dir.clone();
    let put = |name: &str, text: &str| folder.put(name, text);
    put("trace.jsonl", &v.trace)?;
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
    if let Some(rec) = recorded {
        xz_to(&dir.join("base.img.xz"), &raw_bytes(&rec.base))?;
        xz_to(&dir.join("log-writes.bin.xz"), &rec.log.encode())?;
    }
    put(
        "README.md",
        &format!(
            "# {}\n\nFound by the crash campaign against {} on {}; {} lines, shrunk to {}. \
             {} failing crash states; kept: {}.\n\n\
             Judge the kept crash images again (deterministic): \
             `nilref campaign crash --replay {}{blkid}`\n\n\
             Record the minimal workload again (the kernel's timing may differ): \
             `nilref campaign crash --workload {}{}{blkid}`\n\n{}\n",
            v.problems[0].headline(),
            kernel.map_or("nilfs-ref".to_string(), |k| format!("Linux {k}")),
            w.label,
            w.lines.len(),
            minimal.lines.len(),
            v.failing_states,
            states.join(", "),
            dir.display(),
            dir.join("workload.jsonl").display(),
            kernel.map_or(" --ours".to_string(), |k| format!(" --kernel {k}")),
            headlines(&v.problems),
            blkid = blkids
                .iter()
                .map(|b| format!(" --blkid {}", b.version))
                .collect::<String>(),
        ),
    )?;
    Ok(dir)
}

/// `--replay FOLDER`: judges a finding's kept crash images again against
/// its trace and marks (and by the blkid releases `blkids`, as the
/// finding's README says); the verdicts, and whether any state still
/// fails.
pub fn replay(folder: &Path, blkids: &[Blkid], scratch: &Path) -> Result<(String, bool), String> {
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
        let mut v = judge_state(&env, &state, Recovery::Ours, trace_clock_s(&trace));
        for b in blkid::judge(blkids, &state.device, scratch) {
            v.problems.push(blkid_problem(&state, b));
        }
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
