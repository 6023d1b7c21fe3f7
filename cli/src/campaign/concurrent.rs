//! `nilref campaign concurrent --seeds A..B`: concurrent histories on
//! `nilref mount`, judged for linearizability against the model.
//!
//! For each seed: a fresh image (`nilref mkfs`, 32 MiB, 1 KiB blocks,
//! 64-block segments), mounted through FUSE by this program
//! (`-o direct_io`, so every read and write reaches nilfs-ref; the mount
//! serves requests on several threads), a concurrent workload of
//! `--writers` writers with `--ops` operations each
//! (`nilfs_workload::concurrent`; the FUSE mount carries no checkpoint
//! ioctls, so no checkpoint or cleaner worker), run by `nilref exec` with
//! one process per worker, the mount unmounted, the image checked
//! (`nilref check`), and the history judged (`nilfs_model::history`).
//!
//! With `--kernel V` the histories run on Linux's nilfs2 in the qemu
//! guest instead (2 vCPUs, up to 12 histories a boot, each on a fresh
//! disk formatted on the host as mkfs.nilfs2 2.2.9 formats it): the
//! workload gains a checkpoint worker (mkcp, mkcp -s, chcp, rmcp, lscp)
//! and a cleaner worker (`nilfs-clean -p 0` again and again, seed 001's
//! scenario), and its epilogue mounts every snapshot
//! taken during the run and reads its manifest, which the history's
//! linearizations must allow after the cleaner ran. Besides the history,
//! each run is judged by its image (`nilref check` of the kernel's disk,
//! and our read path's manifests of its latest checkpoint and snapshots
//! against the kernel's own), by the guest's kernel log (an oops, a BUG, a
//! WARN or a hung task is a finding; the runner dumps blocked tasks with
//! sysrq `w` when its workers pass their deadline), and by our own run of
//! the same workload (`apply`, one thread), whose image the kernel then
//! mounts read-write in a second boot of the batch: its manifest of the
//! latest checkpoint must equal the last one our run printed.
//!
//! A rejected history is shrunk: worker operations are removed, one at a
//! time, while the history stays rejected at the same operation; what is
//! left is kept with its workload and a replay command. An unknown
//! verdict (the search's bound) is counted apart, never as a failure.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use nilfs_adapter::{mounted, unmount};
use nilfs_model::{check_history, Event, Options};
use nilfs_workload::concurrent::{generate_concurrent, ConcurrentConfig};
use nilfs_workload::gen::Features;

use crate::campaign::common::workload::parse_seeds;

/// Arguments of `nilref campaign concurrent`.
#[derive(clap::Args)]
pub struct ConcurrentArgs {
    /// Seeds, `A..B` (inclusive) or one number.
    #[arg(long, default_value = "1..20")]
    pub seeds: String,
    /// Writers per history.
    #[arg(long, default_value_t = 3)]
    pub writers: usize,
    /// Operations per writer.
    #[arg(long, default_value_t = 50)]
    pub ops: usize,
    /// Where each seed's image, workload, history and verdict go.
    #[arg(long, default_value = "target/concurrent-campaign")]
    pub out: PathBuf,
    /// Mount a known-bad variant of `nilref mount` (`late-writes`,
    /// `stale-attrs`): the campaign must reject its histories.
    #[arg(long)]
    pub known_bad: Option<String>,
    /// The most model states the search keeps at once.
    #[arg(long)]
    pub max_states: Option<usize>,
    /// Run on this pinned Linux in the guest instead of on `nilref mount`.
    #[arg(long)]
    pub kernel: Option<String>,
    /// On the kernel: leave out the checkpoint worker (and so the
    /// snapshots read back), keeping the writers and the cleaner.
    #[arg(long)]
    pub without_checkpoints: bool,
}

/// One seed's result.
struct Run {
    seed: u64,
    verdict: Verdict,
    ops: usize,
    check_ms: f64,
    nodes: u64,
    searched: bool,
    image_clean: bool,
    /// Everything else found wrong (the kernel's runs): the image, our
    /// read path, the kernel log, our own run.
    problems: Vec<String>,
}

enum Verdict {
    Linearizable,
    Rejected(String),
    Unknown(String),
}

/// `nilref campaign concurrent`.
pub fn run(a: &ConcurrentArgs) -> Result<String, String> {
    let seeds = parse_seeds(&a.seeds)?;
    let exe = std::env::current_exe().map_err(|e| format!("this program's path: {e}"))?;
    std::fs::create_dir_all(&a.out).map_err(|e| format!("{}: {e}", a.out.display()))?;
    let mut opts = Options::default();
    if let Some(m) = a.max_states {
        opts.max_states = m;
    }
    let started = Instant::now();
    if a.kernel.is_some() {
        let runs = on_kernel(&seeds, a, opts)?;
        return Ok(report(&runs, started.elapsed(), a));
    }
    let mut runs = Vec::new();
    for &seed in &seeds {
        let dir = a.out.join(format!("seed-{seed}"));
        let r = one(&exe, &dir, seed, a, opts)?;
        eprintln!(
            "seed {seed}: {} ({} ops, checked in {:.0} ms, {} nodes{}){}",
            match &r.verdict {
                Verdict::Linearizable => "linearizable",
                Verdict::Rejected(_) => "REJECTED",
                Verdict::Unknown(_) => "unknown",
            },
            r.ops,
            r.check_ms,
            r.nodes,
            if r.searched { ", searched" } else { "" },
            if r.image_clean {
                ""
            } else {
                "; IMAGE NOT CLEAN"
            }
        );
        runs.push(r);
    }
    Ok(report(&runs, started.elapsed(), a))
}

fn one(
    exe: &Path,
    dir: &Path,
    seed: u64,
    a: &ConcurrentArgs,
    opts: Options,
) -> Result<Run, String> {
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(dir.join("mnt")).map_err(|e| format!("{}: {e}", dir.display()))?;
    // Absolute, as /proc/self/mounts names it.
    let mnt =
        std::fs::canonicalize(dir.join("mnt")).map_err(|e| format!("{}: {e}", dir.display()))?;
    let img = dir.join("image");
    let ok = |what: &str, st: std::io::Result<std::process::ExitStatus>| match st {
        Ok(s) if s.success() => Ok(()),
        Ok(s) => Err(format!("{what}: {s}")),
        Err(e) => Err(format!("{what}: {e}")),
    };
    ok(
        "nilref mkfs",
        Command::new(exe)
            .args(["mkfs", "--size", "32M", "-b", "1024", "-B", "64"])
            .arg(&img)
            .stdout(Stdio::null())
            .status(),
    )?;
    let mut cfg = ConcurrentConfig::new(seed, a.writers, a.ops);
    cfg.features = Features::FUSE;
    let workload: String = generate_concurrent(&cfg)
        .iter()
        .map(|v| v.to_string() + "\n")
        .collect();
    let wpath = dir.join("workload.jsonl");
    std::fs::write(&wpath, &workload).map_err(|e| e.to_string())?;
    let mut mount = Command::new(exe);
    mount
        .arg("mount")
        .arg(&img)
        .arg(&mnt)
        .args(["-o", "direct_io"]);
    if let Some(k) = &a.known_bad {
        mount.args(["--known-bad", k]);
    }
    let mut server = mount
        .stdout(Stdio::null())
        .spawn()
        .map_err(|e| format!("nilref mount: {e}"))?;
    let until = Instant::now() + Duration::from_secs(10);
    while !mounted(&mnt) {
        if Instant::now() > until {
            let _ = server.kill();
            return Err(format!("{}: not mounted after 10 s", mnt.display()));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let hpath = dir.join("history.jsonl");
    let exec = Command::new(exe)
        .arg("exec")
        .arg(&mnt)
        .arg(&wpath)
        .arg("-o")
        .arg(&hpath)
        .stdout(Stdio::null())
        .status();
    // A mount that will not go (fusermount3 missing, or the mount busy
    // past the wait) is an error of this run, never a wait for ever.
    if !unmount(&mnt, false) {
        let _ = server.kill();
        let _ = server.wait();
        unmount(&mnt, true);
        return Err(format!(
            "{}: fusermount3 -u failed (is fuse3 installed?)",
            mnt.display()
        ));
    }
    let _ = server.wait();
    ok("nilref exec", exec)?;
    let image_clean = Command::new(exe)
        .arg("check")
        .arg(&img)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    let text = std::fs::read_to_string(&hpath).map_err(|e| format!("{}: {e}", hpath.display()))?;
    let mut r = judge_text(&text, dir, opts)?;
    r.seed = seed;
    r.image_clean = image_clean;
    Ok(r)
}

/// The history's verdict, shrunk and kept in `dir` when rejected.
fn judge_text(text: &str, dir: &Path, opts: Options) -> Result<Run, String> {
    let t = Instant::now();
    let judged = check_history(text, opts);
    let check_ms = t.elapsed().as_secs_f64() * 1e3;
    let ops = text.lines().filter(|l| l.contains("\"w\":")).count();
    let (verdict, nodes, searched) = match judged {
        Ok(v) => (Verdict::Linearizable, v.nodes, v.searched()),
        Err(r) if r.is_unknown() => (Verdict::Unknown(r.to_string()), 0, true),
        Err(r) => {
            let small = shrink(text, opts);
            let spath = dir.join("history.min.jsonl");
            std::fs::write(&spath, &small).map_err(|e| e.to_string())?;
            let why = check_history(&small, opts)
                .err()
                .map_or(r.to_string(), |m| m.to_string());
            std::fs::write(dir.join("verdict.txt"), &why).map_err(|e| e.to_string())?;
            (Verdict::Rejected(why), 0, true)
        }
    };
    Ok(Run {
        seed: 0,
        verdict,
        ops,
        check_ms,
        nodes,
        searched,
        image_clean: true,
        problems: snapshot_rereads(text),
    })
}

/// A snapshot never changes, so every read of one must show the same
/// manifest: the checkpoint worker reads each snapshot it takes at once,
/// and the epilogue reads it again after the cleaner ran (seed 001's "no
/// snapshot block is lost", judged directly, whatever the linearizability
/// search decides). A checkpoint number is never given twice. Each pair
/// of reads that differ, as a problem.
fn snapshot_rereads(text: &str) -> Vec<String> {
    use nilfs_model::{Op, Outcome};
    let mut first: std::collections::BTreeMap<u64, (usize, Vec<String>)> = Default::default();
    let mut problems = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let Ok(e) = serde_json::from_str::<Event>(raw) else {
            continue;
        };
        let (Op::Manifest { at: Some(c) }, Some(Outcome::Manifest(m))) = (&e.op, &e.out) else {
            continue;
        };
        match first.get(c) {
            None => {
                first.insert(*c, (i + 1, m.clone()));
            }
            Some((line, seen)) if seen != m => problems.push(format!(
                "snapshot {c} changed between its reads at lines {line} and {}: {}",
                i + 1,
                crate::campaign::common::first_difference(
                    seen,
                    m,
                    "manifest line",
                    ("first", "later")
                )
            )),
            Some(_) => {}
        }
    }
    problems
}

/// The histories on Linux in the guest, a batch of up to 12 a boot.
fn on_kernel(seeds: &[u64], a: &ConcurrentArgs, opts: Options) -> Result<Vec<Run>, String> {
    use crate::campaign::common::Workload;
    use crate::campaign::guest::{fresh_share, Harness, BOOT_TIMEOUT_S, DEVS};
    use crate::campaign::kernel;
    use crate::peers::{Installed, Kind};
    let mut harness = Harness::new(
        Installed::get(Kind::Kernel, a.kernel.as_deref())?,
        Installed::get(Kind::Grub, None)?,
    )?;
    harness.smp = 2;
    let mut runs = Vec::new();
    for chunk in seeds.chunks(DEVS.len()) {
        let batch: Vec<Workload> = chunk
            .iter()
            .map(|&seed| {
                let mut cfg = ConcurrentConfig::new(seed, a.writers, a.ops);
                if a.without_checkpoints {
                    cfg.features.checkpoints = false;
                    cfg.features.snapshot_mounts = false;
                }
                let lines = generate_concurrent(&cfg);
                Workload {
                    label: format!("concurrent seed {seed} writers {} ops {}", a.writers, a.ops),
                    geometry: cfg.geometry.clone(),
                    lines,
                }
            })
            .collect();
        let work = a.out.join("work");
        fresh_share(&work, &batch)?;
        let mut disks = Vec::new();
        for (i, w) in batch.iter().enumerate() {
            let d = work.join(format!("d{i}.img"));
            kernel::host_mkfs(&d, w)?;
            disks.push(d);
        }
        let script = kernel::script(&batch).replace(
            "dmesg | grep -i nilfs > /host/dmesg.txt",
            "dmesg > /host/dmesg.txt",
        );
        let boot = harness.boot(&disks, &work, &script, BOOT_TIMEOUT_S)?;
        let log = std::fs::read_to_string(work.join("dmesg.txt")).unwrap_or_default();
        let bad_log: Vec<&str> = log
            .lines()
            .filter(|l| {
                [
                    "Oops",
                    "BUG:",
                    "WARNING:",
                    "blocked for more than",
                    "general protection",
                ]
                .iter()
                .any(|k| l.contains(k))
            })
            .collect();
        let ours_in_kernel = kernel_mounts_ours(&harness, &a.out.join("work-ours"), &batch)?;
        for (i, (w, &seed)) in batch.iter().zip(chunk).enumerate() {
            let dir = a.out.join(format!("seed-{seed}"));
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
            std::fs::write(dir.join("workload.jsonl"), w.to_jsonl()).map_err(|e| e.to_string())?;
            let read = |n: String| std::fs::read_to_string(work.join(n)).ok();
            let rc = read(format!("rc{i}")).map(|s| s.trim().to_string());
            let mut problems: Vec<String> = Vec::new();
            let mut r = match (rc.as_deref(), read(format!("o{i}.jsonl"))) {
                (Some("0"), Some(text)) => {
                    std::fs::write(dir.join("history.jsonl"), &text).map_err(|e| e.to_string())?;
                    judge_text(&text, &dir, opts)?
                }
                _ => {
                    problems.push(format!(
                        "nilref exec in the guest ended with {}: {}{}",
                        rc.as_deref()
                            .unwrap_or("no status (the guest stopped first)"),
                        read(format!("e{i}.txt")).unwrap_or_default().trim(),
                        if boot.success {
                            ""
                        } else {
                            " (the boot failed)"
                        }
                    ));
                    Run {
                        seed,
                        verdict: Verdict::Unknown("not run to the end".into()),
                        ops: 0,
                        check_ms: 0.0,
                        nodes: 0,
                        searched: false,
                        image_clean: false,
                        problems: vec![],
                    }
                }
            };
            r.seed = seed;
            match kernel::read_path_problems(&work.join(format!("d{i}.img")), &work, i) {
                Ok(ps) => {
                    r.image_clean = !ps.iter().any(|p| p.headline().contains("check"));
                    problems.extend(ps.iter().map(|p| p.headline()));
                }
                Err(e) => {
                    problems.push(format!("our read path cannot open the kernel's image: {e}"))
                }
            }
            problems.extend(kernel::ours(w).iter().map(|p| p.headline()));
            problems.extend(ours_in_kernel[i].iter().cloned());
            if !bad_log.is_empty() {
                problems.push(format!("kernel log: {}", bad_log.join(" | ")));
                let _ = std::fs::write(dir.join("dmesg.txt"), &log);
            }
            r.problems = problems;
            eprintln!(
                "seed {seed}: {}{}",
                match &r.verdict {
                    Verdict::Linearizable => "linearizable",
                    Verdict::Rejected(_) => "REJECTED",
                    Verdict::Unknown(_) => "unknown",
                },
                if r.problems.is_empty() {
                    String::new()
                } else {
                    format!("; {}", r.problems.join("; "))
                }
            );
            runs.push(r);
        }
    }
    Ok(runs)
}

/// The kernel mounts our images of a batch's workloads: each workload run
/// one thread at a time through nilfs-ref (`apply`), its image mounted
/// read-write by the kernel in a boot of its own, whose manifest of the
/// latest checkpoint must equal the last one our run printed (the
/// epilogue's, after its remount). Each workload's problems, as lines.
fn kernel_mounts_ours(
    harness: &crate::campaign::guest::Harness,
    work: &Path,
    batch: &[crate::campaign::common::Workload],
) -> Result<Vec<Vec<String>>, String> {
    use nilfs::device::MemDevice;
    use nilfs_model::{Op, Outcome};
    let mut devices = Vec::new();
    let mut expected = Vec::new();
    for w in batch {
        let dev = MemDevice::new(w.device_bytes());
        // A run of ours that fails is reported by `kernel::ours`.
        let last = crate::apply::apply_lines(&dev, &w.numbered_lines(), "memory")
            .ok()
            .and_then(|applied| {
                applied
                    .lines
                    .iter()
                    .rev()
                    .find_map(|l| match (&l.op, &l.out) {
                        (Op::Manifest { at: None }, Outcome::Manifest(m)) => Some(m.clone()),
                        _ => None,
                    })
            });
        devices.push(dev);
        expected.push(last);
    }
    let refs: Vec<&MemDevice> = devices.iter().collect();
    let got = crate::campaign::crash::kernel_recover(harness, work, &refs)?;
    Ok(got
        .iter()
        .zip(&expected)
        .map(|(k, want)| ours_in_kernel_problems(k, want.as_deref()))
        .collect())
}

/// What the kernel's mount of our image shows against what our run
/// printed last (`None`: our run failed, which is reported elsewhere).
fn ours_in_kernel_problems(
    k: &crate::campaign::crash::KernelRecovery,
    want: Option<&[String]>,
) -> Vec<String> {
    if !k.mounted {
        return vec![format!(
            "the kernel cannot mount our image: {}",
            k.errors.trim()
        )];
    }
    match want {
        Some(want) if want != k.manifest.as_slice() => {
            vec![crate::campaign::common::first_difference(
                want,
                &k.manifest,
                "the kernel's manifest of our image differs at line",
                ("ours", "kernel"),
            )]
        }
        _ => vec![],
    }
}

/// How long shrinking one history may take.
const SHRINK_BUDGET: Duration = Duration::from_secs(120);

/// The rejected history with worker operations removed while it stays
/// rejected at the same operation (the first one the search could not
/// place) with the same outcomes allowed for it. First the operations
/// that neither overlap it nor name its paths, by chunks and then one by
/// one, latest first; then those too, one by one. Within
/// [`SHRINK_BUDGET`].
pub fn shrink(text: &str, opts: Options) -> String {
    let stuck_at = |t: &str| -> Option<String> {
        match check_history(t, opts) {
            Err(r) if !r.is_unknown() && r.unreadable.is_none() => {
                // The operation and what the model allowed for it: a
                // removal that changes why it is stuck is not kept.
                r.stuck.first().map(|s| format!("{} {:?}", s.op, s.allowed))
            }
            _ => None,
        }
    };
    let Some(target) = stuck_at(text) else {
        return text.to_string();
    };
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    // The stuck operation itself, and the operations that explain it are
    // kept: those that overlap it in real time, and those that name one
    // of its paths (without them the operation may stay stuck for a
    // reason that says nothing, such as a name no longer made).
    let stuck = check_history(text, opts)
        .err()
        .and_then(|r| r.stuck.first().map(|s| s.line))
        .and_then(|n| lines.get(n - 1))
        .and_then(|l| serde_json::from_str::<Event>(l).ok());
    let paths = |e: &Event| -> Vec<String> {
        let v = serde_json::to_value(&e.op).unwrap_or_default();
        ["path", "old", "new"]
            .iter()
            .filter_map(|k| v.get(*k).and_then(|p| p.as_str()).map(str::to_string))
            .collect()
    };
    let keep = |l: &str| -> bool {
        let (Some(s), Ok(e)) = (&stuck, serde_json::from_str::<Event>(l)) else {
            return false;
        };
        let overlaps = e.call.unwrap_or(0) <= s.ret.unwrap_or(u64::MAX)
            && s.call.unwrap_or(0) <= e.ret.unwrap_or(u64::MAX);
        let mine = paths(s);
        overlaps || paths(&e).iter().any(|p| mine.contains(p))
    };
    let worker =
        |l: &str| !keep(l) && serde_json::from_str::<Event>(l).is_ok_and(|e| e.w.is_some());
    // Chunks of worker lines first (halves, quarters, ...), then single
    // lines, latest first; within a time budget, since each try is a
    // whole search.
    let deadline = Instant::now() + SHRINK_BUDGET;
    let mut chunk = lines
        .iter()
        .filter(|l| worker(l))
        .count()
        .div_ceil(2)
        .max(1);
    loop {
        let mut end = lines.len();
        while end > 0 && Instant::now() < deadline {
            // The last `chunk` worker lines before `end`.
            let mut picked = Vec::new();
            let mut i = end;
            while i > 0 && picked.len() < chunk {
                i -= 1;
                if worker(&lines[i]) {
                    picked.push(i);
                }
            }
            if picked.is_empty() {
                break;
            }
            let fewer: Vec<String> = lines
                .iter()
                .enumerate()
                .filter(|(k, _)| !picked.contains(k))
                .map(|(_, l)| l.clone())
                .collect();
            let t = fewer.join("\n") + "\n";
            if stuck_at(&t).as_deref() == Some(target.as_str()) {
                lines = fewer;
                end = i.min(lines.len());
            } else {
                end = i;
            }
        }
        if chunk == 1 || Instant::now() >= deadline {
            break;
        }
        chunk /= 2;
    }
    // Then the kept worker lines too, one at a time, latest first: the
    // target (the same operation stuck with the same allowed outcomes)
    // already keeps every line that changes why it is stuck, so this
    // drops the reads, stats and other operations on its paths that do
    // not (the first phase kept all 84 lines of F2's history).
    let stuck_line = |l: &str| {
        let (Some(s), Ok(e)) = (&stuck, serde_json::from_str::<Event>(l)) else {
            return false;
        };
        e.w == s.w && e.call == s.call && e.ret == s.ret
    };
    let mut i = lines.len();
    while i > 0 && Instant::now() < deadline {
        i -= 1;
        let l = &lines[i];
        if !keep(l)
            || stuck_line(l)
            || !serde_json::from_str::<Event>(l).is_ok_and(|e| e.w.is_some())
        {
            continue;
        }
        let mut fewer = lines.clone();
        fewer.remove(i);
        let t = fewer.join("\n") + "\n";
        if stuck_at(&t).as_deref() == Some(target.as_str()) {
            lines = fewer;
        }
    }
    lines.join("\n") + "\n"
}

fn report(runs: &[Run], took: Duration, a: &ConcurrentArgs) -> String {
    let n = runs.len().max(1) as f64;
    let lin = runs
        .iter()
        .filter(|r| matches!(r.verdict, Verdict::Linearizable))
        .count();
    let unknown = runs
        .iter()
        .filter(|r| matches!(r.verdict, Verdict::Unknown(_)))
        .count();
    let rejected: Vec<&Run> = runs
        .iter()
        .filter(|r| matches!(r.verdict, Verdict::Rejected(_)))
        .collect();
    let unclean: Vec<u64> = runs
        .iter()
        .filter(|r| !r.image_clean)
        .map(|r| r.seed)
        .collect();
    let ops: usize = runs.iter().map(|r| r.ops).sum();
    let ms: f64 = runs.iter().map(|r| r.check_ms).sum();
    let max_ms = runs.iter().map(|r| r.check_ms).fold(0.0, f64::max);
    let nodes: u64 = runs.iter().map(|r| r.nodes).sum();
    let max_nodes = runs.iter().map(|r| r.nodes).max().unwrap_or(0);
    let searched = runs.iter().filter(|r| r.searched).count();
    let mut out = format!(
        "concurrent campaign on {}{}: {} histories ({} writers x {} ops) in {:.0} s ({:.1} histories/min)\n\
         linearizable {lin}, rejected {}, unknown {unknown}; images not clean: {unclean:?}\n\
         operations per history: {:.0}; checker: {:.0} ms mean, {:.0} ms max; search: {:.0} nodes mean, {max_nodes} max; \
         {searched} of {} needed more than real time's order\n",
        a.kernel.as_deref().map_or("nilref mount".to_string(), |k| format!(
            "Linux {k} (2 vCPUs{})",
            if a.without_checkpoints {
                ", no checkpoint worker"
            } else {
                ""
            }
        )),
        a.known_bad
            .as_deref()
            .map_or(String::new(), |k| format!(" (known-bad: {k})")),
        runs.len(),
        a.writers,
        a.ops,
        took.as_secs_f64(),
        runs.len() as f64 / took.as_secs_f64().max(1e-9) * 60.0,
        rejected.len(),
        ops as f64 / n,
        ms / n,
        max_ms,
        nodes as f64 / n,
        runs.len(),
    );
    for r in rejected {
        let dir = a.out.join(format!("seed-{}", r.seed));
        out += &format!(
            "  seed {}: rejected; shrunk history {}/history.min.jsonl; replay: nilref oracle check {}/history.min.jsonl\n",
            r.seed,
            dir.display(),
            dir.display()
        );
        if let Verdict::Rejected(why) = &r.verdict {
            for l in why.lines().take(4) {
                out += &format!("    {l}\n");
            }
        }
    }
    for r in runs.iter().filter(|r| !r.problems.is_empty()) {
        out += &format!("  seed {}: {}\n", r.seed, r.problems.join("; "));
    }
    for r in runs {
        if let Verdict::Unknown(why) = &r.verdict {
            out += &format!(
                "  seed {}: unknown: {}\n",
                r.seed,
                why.lines().next().unwrap_or("")
            );
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// F2's recorded history on Linux 6.1 (84 lines, every worker on
    /// /s/f), its last read planted with bytes no order of the writes
    /// makes: the shrunk history is rejected at that read with the same
    /// allowed outcomes, and keeps only the worker lines that decide them
    /// (postmortem: the first phase alone kept all 84, since every line
    /// names the read's path).
    #[test]
    fn shrinking_drops_the_lines_on_the_stuck_paths_that_do_not_matter() {
        let real =
            include_str!("../../../docs/findings/concurrent/f2-torn-read-on-linux-6.1.jsonl");
        let mut lines: Vec<String> = real.lines().map(str::to_string).collect();
        let last_read = lines
            .iter()
            .rposition(|l| l.contains("\"op\":\"read\""))
            .unwrap();
        let at = lines[last_read].find("\"sha256\":\"").unwrap() + 10;
        lines[last_read].replace_range(at..at + 64, &"0".repeat(64));
        let planted = lines.join("\n") + "\n";
        let opts = Options::default();
        let why = |t: &str| {
            let r = check_history(t, opts).expect_err("rejected");
            let s = r.stuck.first().expect("a stuck operation");
            (s.op.clone(), format!("{:?}", s.allowed))
        };
        let small = shrink(&planted, opts);
        assert_eq!(why(&small), why(&planted));
        let workers = small.lines().filter(|l| l.contains("\"w\":")).count();
        assert!(workers <= 8, "{workers} worker lines left:\n{small}");
    }
    use crate::campaign::crash::KernelRecovery;

    fn mounted(manifest: &[&str]) -> KernelRecovery {
        KernelRecovery {
            mounted: true,
            manifest: manifest.iter().map(|l| l.to_string()).collect(),
            lscp: Err("not read".into()),
            errors: String::new(),
        }
    }

    /// Two reads of one snapshot must agree; a planted change is caught.
    #[test]
    fn a_snapshot_that_changed_between_reads_is_a_problem() {
        let read = |line: &str| {
            format!(r#"{{"op":"manifest","at":4,"out":{{"manifest":["DIR  -  /s/","{line}"]}}}}"#)
        };
        let same = [read("abc  3  /s/f"), read("abc  3  /s/f")].join("\n");
        assert!(snapshot_rereads(&same).is_empty());
        let changed = [read("abc  3  /s/f"), read("abd  3  /s/f")].join("\n");
        let p = snapshot_rereads(&changed);
        assert!(p.len() == 1 && p[0].contains("snapshot 4 changed"), "{p:?}");
    }

    /// The judge of the kernel's mount of our image passes an equal
    /// manifest and catches a changed line, a missing line and a mount
    /// that failed.
    #[test]
    fn the_kernel_mounting_our_image_is_judged() {
        let ours: Vec<String> = ["DIR  -  /s/", "abc  3  /s/f"]
            .iter()
            .map(|l| l.to_string())
            .collect();
        assert!(
            ours_in_kernel_problems(&mounted(&["DIR  -  /s/", "abc  3  /s/f"]), Some(&ours))
                .is_empty()
        );
        let changed =
            ours_in_kernel_problems(&mounted(&["DIR  -  /s/", "abd  3  /s/f"]), Some(&ours));
        assert!(changed[0].contains("differs at line"), "{changed:?}");
        assert_eq!(
            ours_in_kernel_problems(&mounted(&["DIR  -  /s/"]), Some(&ours)).len(),
            1
        );
        let mut failed = mounted(&[]);
        failed.mounted = false;
        failed.errors = "mount: wrong fs type".into();
        let p = ours_in_kernel_problems(&failed, Some(&ours));
        assert!(p[0].contains("cannot mount our image"), "{p:?}");
        // Our own run failed: nothing to compare (reported by `kernel::ours`).
        assert!(ours_in_kernel_problems(&mounted(&["x"]), None).is_empty());
    }
}
