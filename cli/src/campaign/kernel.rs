//! The behaviour campaign against Linux: generated workloads run by
//! `nilref exec` on the kernel's nilfs2 in the guest, a batch per boot,
//! each on a fresh disk formatted on the host as mkfs.nilfs2 2.2.9 formats it
//! (`host_mkfs`). For every workload:
//!
//! 1. the kernel's observed trace goes through the oracle (the model);
//! 2. the kernel's final image is read by our read path: the latest
//!    checkpoint's manifest and every snapshot's must equal the kernel's
//!    own manifests, printed in the guest;
//! 3. the same workload runs through nilfs-ref's own file system (`apply`)
//!    and that trace must be accepted too.
//!
//! A workload that fails is shrunk (ddmin, re-running the kernel on each
//! candidate) to a minimal one that fails the same way.

use std::path::{Path, PathBuf};
use std::time::Instant;

use nilfs::device::{FileDevice, MemDevice};
use nilfs::format::Cno;
use nilfs::inspect::nilfs_utils::tune::NilfsUtils;
use nilfs::mkfs::MkfsOptions;
use nilfs::posix::CheckpointView;
use nilfs::the_nilfs::Nilfs;

use crate::apply;
use crate::campaign::common::{
    args, bar, first_difference, image_check, same_problem, shrink_batched, shrink_each,
    CampaignArgs, Evidence, Options, Problem, Summary, Workload,
};
use crate::campaign::grub;
use crate::campaign::guest::{fresh_share, sparse_disk, Harness, BOOT_TIMEOUT_S, DEVS};
use crate::peers::Installed;

/// `nilref campaign kernel`.
pub fn run(a: &CampaignArgs) -> Result<String, String> {
    let workloads = args::workloads(a, nilfs_workload::gen::Features::DEVICE)?;
    let s = campaign(&Options::of(a, workloads, 12))?;
    args::verdict(s.table(), s.findings.is_empty(), &a.out)
}

/// The behaviour campaign against the kernel (see the module documentation).
pub fn campaign(opts: &Options) -> Result<Summary, String> {
    let harness = Harness::new(opts.kernel_peer()?, opts.grub_peer()?)?;
    // A finding replays on the versions it was found on.
    let command = format!(
        "kernel --kernel {} --grub {}",
        harness.kernel.version, harness.grub.version
    );
    let t0 = Instant::now();
    std::fs::create_dir_all(&opts.out).map_err(|e| format!("{}: {e}", opts.out.display()))?;
    let progress = bar(opts.workloads.len(), "kernel");
    let mut findings = Vec::new();
    let mut passed = 0;
    let mut boots = 0;
    let mut guest_seconds = 0.0;
    let mut phases = GuestPhases::default();
    let work = opts.out.join("work");
    let chunks: Vec<&[Workload]> = opts
        .workloads
        .chunks(opts.batch.clamp(1, DEVS.len()))
        .collect();
    'groups: for group in chunks.chunks(opts.jobs.max(1)) {
        // One guest per chunk of the group, each in its own folder, all at
        // once; then their verdicts in order, as one guest would give them.
        let dirs: Vec<PathBuf> = (0..group.len())
            .map(|j| {
                if j == 0 {
                    work.clone()
                } else {
                    opts.out.join(format!("work-{j}"))
                }
            })
            .collect();
        let results: Vec<Result<BatchVerdicts, String>> = std::thread::scope(|scope| {
            let running: Vec<_> = group
                .iter()
                .zip(&dirs)
                .map(|(chunk, dir)| scope.spawn(|| run_batch(&harness, dir, chunk)))
                .collect();
            running
                .into_iter()
                .map(|t| {
                    t.join()
                        .unwrap_or_else(|_| Err("a guest's thread panicked".into()))
                })
                .collect()
        });
        // The group's guests ran side by side: its wall time is the longest.
        let mut group_seconds: f64 = 0.0;
        for ((chunk, dir), result) in group.iter().zip(&dirs).zip(results) {
            let (verdicts, guest) = result?;
            boots += 1;
            group_seconds = group_seconds.max(guest);
            phases.add(&std::fs::read_to_string(dir.join(TIMES)).unwrap_or_default());
            for (i, (w, problems)) in chunk.iter().zip(verdicts).enumerate() {
                progress.inc(1);
                if let Some(t) = kernel_trace(dir, i) {
                    opts.keep_trace(&w.label, &t);
                }
                if problems.is_empty() {
                    passed += 1;
                    continue;
                }
                progress.set_message(format!("{} failing", findings.len() + 1));
                let kernel_trace = kernel_trace(dir, i);
                let image = kernel_image(dir, i);
                let minimal = if opts.shrink && problems[0].class.starts_with("ours") {
                    shrink_ours(w, &problems[0])
                } else if opts.shrink {
                    progress
                        .suspend(|| eprintln!("shrinking {}: {}", w.label, problems[0].headline()));
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
                let evidence = Evidence::new(kernel_trace.as_deref(), Some(&image));
                findings.push(evidence.write(&opts.out, &command, w, minimal, problems)?);
            }
            if opts.enough(findings.len()) {
                guest_seconds += group_seconds;
                break 'groups;
            }
        }
        guest_seconds += group_seconds;
    }
    for dir in (1..opts.jobs).map(|j| opts.out.join(format!("work-{j}"))) {
        let _ = std::fs::remove_dir_all(dir);
    }
    progress.finish_and_clear();
    let _ = std::fs::remove_dir_all(&work);
    let kind = "kernel behaviour";
    // The batches' boots; shrinking's count with the host's share.
    Ok(Summary {
        guest_seconds: Some(guest_seconds),
        guest_phases: phases.seconds(),
        ..Summary::new(kind, command, passed, findings, t0, boots)
    })
}

/// The file the guest script stamps its phases into (`LABEL UPTIME`
/// lines, /proc/uptime's seconds, 10 ms resolution).
const TIMES: &str = "times";

/// The guest's seconds by phase, summed over the batches: the boot up to
/// the script, then each workload's mkfs, mount, `nilref exec`, the
/// unmount with its sync and cache drop, and the read-only readback
/// (lscp and the manifests of the latest checkpoint and each snapshot).
#[derive(Default)]
struct GuestPhases {
    seconds: Vec<(&'static str, f64)>,
}

impl GuestPhases {
    const NAMES: [&'static str; 6] = ["boot", "mkfs", "mount", "exec", "unmount", "readback"];

    /// One boot's stamps: a phase lasts from the stamp before its own.
    fn add(&mut self, stamps: &str) {
        if self.seconds.is_empty() {
            self.seconds = Self::NAMES.iter().map(|n| (*n, 0.0)).collect();
        }
        let mut last = 0.0;
        for line in stamps.lines() {
            let mut words = line.split_whitespace();
            let (Some(label), Some(Ok(t))) = (words.next(), words.next().map(str::parse::<f64>))
            else {
                continue;
            };
            let phase = label.trim_end_matches(|c: char| c.is_ascii_digit());
            if let Some(slot) = self.seconds.iter_mut().find(|(n, _)| *n == phase) {
                slot.1 += (t - last).max(0.0);
            }
            last = t;
        }
    }

    fn seconds(self) -> Option<Vec<(&'static str, f64)>> {
        (!self.seconds.is_empty()).then_some(self.seconds)
    }
}

/// ddmin on the kernel: candidates judged a batch per boot; a candidate
/// fails when it shows a problem of the same class and key.
fn shrink_kernel(
    harness: &Harness,
    work: &Path,
    w: &Workload,
    target: &Problem,
    boots: &mut usize,
) -> Result<Workload, String> {
    let minimal = shrink_batched(w, DEVS.len(), 240, |batch| {
        let (v, _) = run_batch(harness, work, batch)?;
        *boots += 1;
        Ok(v.iter().map(|ps| same_problem(ps, target)).collect())
    });
    let _ = std::fs::remove_dir_all(work);
    minimal
}

/// Shrinks against nilfs-ref alone (for `ours-*` problems; no guest).
pub fn shrink_ours(w: &Workload, target: &Problem) -> Workload {
    shrink_each(w, 2000, |c| same_problem(&ours(c), target))
}

/// The guest script for one batch: workload i on disk DEVS[i].
pub(crate) fn script(batch: &[Workload]) -> String {
    // Phase stamps (GuestPhases): the boot ends where the script begins.
    let mut s = String::from(
        "set +e\nmkdir -p /snap\nstamp() { echo \"$1 $(cut -d' ' -f1 /proc/uptime)\" >> /host/times; }\nstamp boot\n",
    );
    for (i, w) in batch.iter().enumerate() {
        let dev = DEVS[i];
        s.push_str(&format!(
            r#"
# workload {i}: {label}
d=/dev/{dev}
# The disk comes formatted from the host (host_mkfs).
mount -t nilfs2 $d /mnt
stamp mount{i}
timeout 900 nilref exec /mnt /host/w{i}.jsonl -o /host/o{i}.jsonl --device $d 2>/host/e{i}.txt
echo $? > /host/rc{i}
stamp exec{i}
grep -q ' /mnt ' /proc/mounts && umount /mnt
# Everything read from here on comes from the disk, not the page cache.
sync; echo 3 > /proc/sys/vm/drop_caches
stamp unmount{i}
if mount -t nilfs2 -o ro $d /mnt; then
  lscp > /host/k{i}.lscp
  manifest /mnt > /host/k{i}.latest
  for cno in $(lscp -s | awk 'NR>1 {{print $1}}'); do
    mount -t nilfs2 -o ro,cp=$cno $d /snap && manifest /snap > /host/k{i}.ss$cno && umount /snap
  done
  umount /mnt
fi
stamp readback{i}
"#,
            label = w.label,
        ));
    }
    s.push_str("dmesg | grep -i nilfs > /host/dmesg.txt\ntrue\n");
    s
}

/// A batch's problems per workload (empty: it passed) and the boot's
/// seconds.
pub type BatchVerdicts = (Vec<Vec<Problem>>, f64);

/// Runs a batch of at most 12 workloads in one boot; returns, per
/// workload, the problems found (empty: it passed) and the boot's seconds.
pub fn run_batch(
    harness: &Harness,
    work: &Path,
    batch: &[Workload],
) -> Result<BatchVerdicts, String> {
    assert!(batch.len() <= DEVS.len());
    fresh_share(work, batch)?;
    let mut disks = Vec::new();
    for (i, w) in batch.iter().enumerate() {
        let d = work.join(format!("d{i}.img"));
        host_mkfs(&d, w)?;
        disks.push(d);
    }
    let boot = harness.boot(&disks, work, &script(batch), BOOT_TIMEOUT_S)?;
    let _ = std::fs::write(
        work.join("guest.log"),
        format!("{}\n--- stderr\n{}", boot.stdout, boot.stderr),
    );
    let mut all = Vec::new();
    for (i, w) in batch.iter().enumerate() {
        let mut p = judge(&harness.grub, work, i, w);
        if p.is_empty() && !boot.success {
            p.push(Problem::guest(format!(
                "the guest failed: {}",
                boot.stderr.lines().last().unwrap_or("")
            )));
        }
        all.push(p);
    }
    Ok((all, boot.seconds))
}

/// Workload `w`'s disk, made on the host as the guest's mkfs.nilfs2
/// (nilfs-tools 2.2.9, which makes /.nilfs) would make it: `nilref mkfs
/// --like 2.2.9`'s image, byte-identical to that mkfs.nilfs2's given its
/// random inputs (the UUID and CRC seed, drawn here from the workload's
/// label, and the time, now). Under TCG mkfs.nilfs2 costs about 3 s a
/// disk in the guest (docs/benchmarks/issue-36.md, item 6).
pub(crate) fn host_mkfs(path: &Path, w: &Workload) -> Result<(), String> {
    use std::hash::{Hash, Hasher};
    sparse_disk(path, w.device_bytes())?;
    let mut h = std::collections::hash_map::DefaultHasher::new();
    w.label.hash(&mut h);
    let g = &w.geometry;
    let mut o = MkfsOptions::from_seed(h.finish());
    o.block_size = u64::from(g.block_size);
    o.blocks_per_segment = u64::from(g.blocks_per_segment);
    o.reserved_percentage = u64::from(g.r_segments_percentage);
    o.dot_nilfs = NilfsUtils::V2_2_9.makes_dot_nilfs();
    o.ctime = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let dev = FileDevice::open_read_write(path).map_err(|e| format!("{}: {e}", path.display()))?;
    nilfs::mkfs::mkfs(&dev, &o).map_err(|e| format!("mkfs of {}: {e}", path.display()))?;
    Ok(())
}

/// Everything wrong with workload `i` of a finished batch.
fn judge(grub: &Installed, work: &Path, i: usize, w: &Workload) -> Vec<Problem> {
    let mut problems = Vec::new();
    let read = |name: String| std::fs::read_to_string(work.join(name)).ok();
    let rc = read(format!("rc{i}")).map(|s| s.trim().to_string());
    if rc.as_deref() != Some("0") {
        let err = read(format!("e{i}.txt")).unwrap_or_default();
        problems.push(Problem::runner(format!(
            "nilref exec in the guest ended with {}: {}",
            rc.as_deref()
                .unwrap_or("no status (the guest stopped first)"),
            err.trim()
        )));
        return problems;
    }
    let kernel_trace = read(format!("o{i}.jsonl")).unwrap_or_default();
    if let Err(r) = nilfs_model::check_trace_str(&kernel_trace) {
        problems.push(Problem::kernel_rejected(&r, &kernel_trace));
    }
    // The kernel's image through our read path.
    match read_path_problems(&work.join(format!("d{i}.img")), work, i) {
        Ok(mut p) => problems.append(&mut p),
        Err(e) => problems.push(Problem::read_path(format!(
            "our read path cannot open the kernel's image: {e}"
        ))),
    }
    // GRUB's reader on the kernel's image, against our read path of it.
    match grub::check_image(
        &work.join(format!("d{i}.img")),
        &work.join(format!("grub{i}")),
        grub,
    ) {
        Ok((_, mut p)) => problems.append(&mut p),
        Err(e) => problems.push(Problem::guest(format!("GRUB's check could not run: {e}"))),
    }
    // Our own run of the same workload.
    problems.extend(ours(w));
    problems
}

/// Our manifests of the kernel's image against the kernel's own.
pub(crate) fn read_path_problems(
    img: &Path,
    work: &Path,
    i: usize,
) -> Result<Vec<Problem>, String> {
    let dev = FileDevice::open_read_only(img).map_err(|e| e.to_string())?;
    let mut problems = image_check(&dev, "the kernel's image");
    let nilfs = Nilfs::open(&dev).map_err(|e| e.to_string())?;
    let Ok(latest) = std::fs::read_to_string(work.join(format!("k{i}.latest"))) else {
        return Ok(vec![Problem::guest(
            "the kernel could not mount its own image read-only",
        )]);
    };
    let mut views: Vec<(Option<u64>, String)> = vec![(None, latest)];
    let mut snaps: Vec<u64> = std::fs::read_dir(work)
        .map_err(|e| e.to_string())?
        .flatten()
        .filter_map(|e| {
            let n = e.file_name().to_string_lossy().into_owned();
            n.strip_prefix(&format!("k{i}.ss"))?.parse().ok()
        })
        .collect();
    snaps.sort();
    for c in snaps {
        let text = std::fs::read_to_string(work.join(format!("k{i}.ss{c}"))).unwrap_or_default();
        views.push((Some(c), text));
    }
    for (cp, kernel) in views {
        let ours = CheckpointView::open(&nilfs, cp.map(Cno))
            .and_then(|v| nilfs::inspect::manifest::manifest(&v));
        let name = cp.map_or("the latest checkpoint".to_string(), |c| {
            format!("snapshot {c}")
        });
        match ours {
            Err(e) => problems.push(Problem::read_path(format!(
                "{name}: our read path fails: {e}"
            ))),
            Ok(m) if m != kernel => problems.push(Problem::read_path(format!(
                "{name}: our manifest differs from the kernel's: {}",
                first_difference(
                    &kernel.lines().collect::<Vec<_>>(),
                    &m.lines().collect::<Vec<_>>(),
                    "line",
                    ("kernel", "ours")
                )
            ))),
            Ok(_) => {}
        }
    }
    Ok(problems)
}

/// The workload through nilfs-ref (`apply` on a fresh image in memory).
pub fn ours(w: &Workload) -> Vec<Problem> {
    let dev = MemDevice::new(w.device_bytes());
    let lines = w.numbered_lines();
    match apply::apply_lines(&dev, &lines, "memory") {
        Err((n, m)) => vec![Problem::ours_runner(format!("line {n}: {m}"))],
        Ok(a) => {
            let text: String = a.lines.iter().map(|l| l.to_json() + "\n").collect();
            let mut p = match nilfs_model::check_trace_str(&text) {
                Ok(_) => Vec::new(),
                Err(r) => vec![Problem::ours_rejected(&r, &text)],
            };
            // (A workload that ends mounted leaves a power-cut image: the
            // checker reports the logs to roll forward, not an error.)
            p.extend(image_check(&dev, "our image"));
            p
        }
    }
}

/// The kernel's observed trace of workload `i` of a batch (for findings).
pub fn kernel_trace(work: &Path, i: usize) -> Option<String> {
    std::fs::read_to_string(work.join(format!("o{i}.jsonl"))).ok()
}

/// The kernel's image of workload `i` of a batch.
pub fn kernel_image(work: &Path, i: usize) -> PathBuf {
    work.join(format!("d{i}.img"))
}

#[cfg(test)]
mod tests {
    //! The judge proves it can fail: a batch directory laid out as the
    //! guest leaves it, filled by a faithful peer (our own write path) and
    //! then by the same peer with one lie planted in each of the things it
    //! reports, must pass the first time and be caught every other time.

    use super::*;
    use nilfs::device::export_image;
    use nilfs::inspect::manifest::manifest;
    use nilfs_workload::gen::Profile;

    /// Workload 0 of a batch, as the guest would leave it if the kernel
    /// behaved exactly as nilfs-ref does.
    fn faithful_batch(work: &Path, w: &Workload) {
        let _ = std::fs::remove_dir_all(work);
        std::fs::create_dir_all(work).unwrap();
        let dev = MemDevice::new(w.device_bytes());
        let lines = w.numbered_lines();
        let a = apply::apply_lines(&dev, &lines, "memory").expect("our run");
        let trace: String = a.lines.iter().map(|l| l.to_json() + "\n").collect();
        std::fs::write(work.join("o0.jsonl"), trace).unwrap();
        std::fs::write(work.join("rc0"), "0\n").unwrap();
        export_image(&dev, &work.join("d0.img")).unwrap();
        let nilfs = Nilfs::open(&dev).unwrap();
        let latest = manifest(&CheckpointView::open(&nilfs, None).unwrap()).unwrap();
        std::fs::write(work.join("k0.latest"), latest).unwrap();
    }

    fn edit(path: &Path, f: impl FnOnce(String) -> String) {
        let text = std::fs::read_to_string(path).unwrap();
        let changed = f(text.clone());
        assert_ne!(
            text,
            changed,
            "{}: the planted lie changed nothing",
            path.display()
        );
        std::fs::write(path, changed).unwrap();
    }

    fn classes(p: &[Problem]) -> Vec<&'static str> {
        p.iter().map(|p| p.class).collect()
    }

    #[test]
    fn the_guests_stamps_give_each_phase_its_seconds() {
        let mut p = GuestPhases::default();
        // Two workloads in one boot, then a second boot; a torn last line
        // (the guest stopped mid-write) is left out.
        p.add("boot 5.00\nmkfs0 5.50\nmount0 5.75\nexec0 15.75\nunmount0 16.25\nreadback0 18.25\nmkfs1 18.75\n");
        p.add("boot 4.00\nmkfs0 4.50\nexec0 ");
        let got: Vec<(&str, f64)> = p.seconds().unwrap();
        let want = [
            ("boot", 9.0),
            ("mkfs", 1.5),
            ("mount", 0.25),
            ("exec", 10.0),
            ("unmount", 0.5),
            ("readback", 2.0),
        ];
        for ((n, s), (wn, ws)) in got.iter().zip(want) {
            assert_eq!(*n, wn);
            assert!((s - ws).abs() < 1e-9, "{n}: {s} != {ws}");
        }
        // The script stamps every phase it names.
        let w = Workload::generated(1, 5, None, nilfs_workload::gen::Features::DEVICE);
        let script = script(&[w]);
        assert!(script.contains("stamp boot"));
        for n in GuestPhases::NAMES.iter().skip(1).filter(|n| **n != "mkfs") {
            assert!(script.contains(&format!("stamp {n}0")), "{n}");
        }
    }

    #[test]
    fn the_judge_passes_a_faithful_peer_and_catches_each_planted_lie() {
        if nilfs_conformance::peers::require(
            "the_judge_passes_a_faithful_peer_and_catches_each_planted_lie",
            &["grub-fstest"],
        )
        .is_none()
        {
            return;
        }
        let grub = Installed::get(crate::peers::Kind::Grub, None).unwrap();
        let work = std::env::temp_dir().join(format!("nilref-judge-{}", std::process::id()));
        let w = Workload::generated(
            3,
            40,
            Some(Profile::Data),
            nilfs_workload::gen::Features::ALL,
        );
        faithful_batch(&work, &w);
        assert_eq!(
            judge(&grub, &work, 0, &w),
            Vec::new(),
            "a faithful peer failed"
        );

        // The peer reports a read that returned other bytes.
        faithful_batch(&work, &w);
        edit(&work.join("o0.jsonl"), |t| {
            let mut lines: Vec<String> = t.lines().map(str::to_string).collect();
            let i = lines
                .iter()
                .position(|l| l.contains("\"op\":\"read\"") && l.contains("\"sha256\":\""))
                .expect("the workload reads a file");
            let at = lines[i].find("\"sha256\":\"").unwrap() + 10;
            let flipped = if &lines[i][at..=at] == "0" { "1" } else { "0" };
            lines[i].replace_range(at..=at, flipped);
            lines.join("\n") + "\n"
        });
        assert!(classes(&judge(&grub, &work, 0, &w)).contains(&"kernel-rejected"));

        // The peer's own manifest of its image says something our read
        // path does not find there.
        faithful_batch(&work, &w);
        edit(&work.join("k0.latest"), |t| t.replacen(' ', "  ", 1));
        assert!(classes(&judge(&grub, &work, 0, &w)).contains(&"read-path"));

        // A bit of the peer's image rots: the root directory's block, in
        // whatever log holds it (its checksum no longer matches).
        faithful_batch(&work, &w);
        {
            let img = work.join("d0.img");
            let dev = FileDevice::open_read_only(&img).unwrap();
            let nilfs = Nilfs::open(&dev).unwrap();
            let view = CheckpointView::open(&nilfs, None).unwrap();
            let (_, root) = view.resolve(b"/", false).unwrap();
            let pbn = *view.block_map(&root).unwrap().values().next().unwrap();
            let at = pbn.0 * u64::from(nilfs.block_size()) + 7;
            let mut bytes = std::fs::read(&img).unwrap();
            bytes[at as usize] ^= 0x40;
            std::fs::write(&img, bytes).unwrap();
        }
        assert!(classes(&judge(&grub, &work, 0, &w)).contains(&"check"));

        // The runner did not finish.
        faithful_batch(&work, &w);
        std::fs::write(work.join("rc0"), "124\n").unwrap();
        assert_eq!(classes(&judge(&grub, &work, 0, &w)), ["runner"]);
        let _ = std::fs::remove_dir_all(&work);
    }
}
