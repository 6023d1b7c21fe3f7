//! The kernel's own recovery of crash states: a sample (and each
//! workload's first failing state) goes back to the guest as disks, the
//! kernel mounts each read-write and reports its manifest and `lscp -a`,
//! which must equal our recovery's.

use std::path::Path;

use nilfs::device::{export_image, MemDevice};

use crate::campaign::common::{first_difference, problem_name, Problem};
use crate::campaign::crash::judge::{Failed, LogVerdict, Sample, KEPT_FAILURES};
use crate::campaign::crash::recovery::{lines_of, parse_lscp, KernelRecovery};
use crate::campaign::crash::summary::CrashSummary;
use crate::campaign::guest::{fresh_share, Harness, BOOT_TIMEOUT_S, DEVS};

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

/// The kernel mounts each image (at most 12) read-write and reports.
pub fn kernel_recover(
    harness: &Harness,
    work: &Path,
    images: &[&MemDevice],
) -> Result<Vec<KernelRecovery>, String> {
    assert!(!images.is_empty() && images.len() <= DEVS.len());
    fresh_share(work, &[])?;
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
            first_difference(
                &k.manifest,
                &s.ours_live,
                "manifest line",
                ("model", "recovered")
            )
            .replace("model", "kernel"),
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

/// Which image of a batch the kernel recovers.
#[derive(Clone, Copy)]
enum KernelJob {
    Sample(usize, usize),
    Failed(usize, usize),
}

/// The kernel's recovery of a batch's sampled states, compared with ours,
/// and of each workload's first failing state (for its finding): one boot
/// per 12 images.
pub fn kernel_round(
    h: &Harness,
    work: &Path,
    verdicts: &mut [&mut LogVerdict],
    sum: &mut CrashSummary,
) -> Result<(), String> {
    let mut jobs = Vec::new();
    for (i, v) in verdicts.iter().enumerate() {
        jobs.extend((0..v.samples.len()).map(|k| KernelJob::Sample(i, k)));
        // The first failing state of each workload (its finding's).
        jobs.extend((0..v.failed.len().min(1)).map(|k| KernelJob::Failed(i, k)));
    }
    for part in jobs.chunks(DEVS.len()) {
        let images: Vec<&MemDevice> = part
            .iter()
            .map(|job| match *job {
                KernelJob::Sample(i, k) => &verdicts[i].samples[k].raw,
                KernelJob::Failed(i, k) => &verdicts[i].failed[k].raw,
            })
            .collect();
        let kernel = kernel_recover(h, work, &images)?;
        sum.boots += 1;
        for (job, kr) in part.iter().zip(kernel) {
            sum.kernel_states += 1;
            match *job {
                KernelJob::Failed(i, k) => verdicts[i].failed[k].kernel = Some(kr),
                KernelJob::Sample(i, k) => {
                    let v = &mut *verdicts[i];
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::campaign::crash::recovery::LscpRow;

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
