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
//! A rejected history is shrunk: worker operations are removed, one at a
//! time, while the history stays rejected at the same operation; what is
//! left is kept with its workload and a replay command. An unknown
//! verdict (the search's bound) is counted apart, never as a failure.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

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
    /// Mount a known-bad variant of `nilref mount` (`late-writes`): the
    /// campaign must reject its histories.
    #[arg(long)]
    pub known_bad: Option<String>,
    /// The most model states the search keeps at once.
    #[arg(long)]
    pub max_states: Option<usize>,
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
    let mnt = dir.join("mnt");
    std::fs::create_dir_all(&mnt).map_err(|e| format!("{}: {e}", mnt.display()))?;
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
    while !is_mounted(&mnt) {
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
    let _ = Command::new("fusermount3").arg("-u").arg(&mnt).status();
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
    let t = Instant::now();
    let judged = check_history(&text, opts);
    let check_ms = t.elapsed().as_secs_f64() * 1e3;
    let ops = text.lines().filter(|l| l.contains("\"w\":")).count();
    let (verdict, nodes, searched) = match judged {
        Ok(v) => (Verdict::Linearizable, v.nodes, v.searched()),
        Err(r) if r.is_unknown() => (Verdict::Unknown(r.to_string()), 0, true),
        Err(r) => {
            let small = shrink(&text, opts);
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
        seed,
        verdict,
        ops,
        check_ms,
        nodes,
        searched,
        image_clean,
    })
}

fn is_mounted(dir: &Path) -> bool {
    let Ok(m) = std::fs::read_to_string("/proc/self/mounts") else {
        return false;
    };
    let Ok(d) = std::fs::canonicalize(dir) else {
        return false;
    };
    m.lines()
        .any(|l| l.split_whitespace().nth(1) == Some(&*d.to_string_lossy()))
}

/// The rejected history with worker operations removed while it stays
/// rejected at the same operation (the first one the search could not
/// place), latest first.
pub fn shrink(text: &str, opts: Options) -> String {
    let stuck_at = |t: &str| -> Option<String> {
        match check_history(t, opts) {
            Err(r) if !r.is_unknown() && r.unreadable.is_none() => {
                r.stuck.first().map(|s| s.op.clone())
            }
            _ => None,
        }
    };
    let Some(target) = stuck_at(text) else {
        return text.to_string();
    };
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    let mut i = lines.len();
    while i > 0 {
        i -= 1;
        let is_worker = serde_json::from_str::<Event>(&lines[i]).is_ok_and(|e| e.w.is_some());
        if !is_worker {
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
        "concurrent campaign on nilref mount{}: {} histories ({} writers x {} ops) in {:.0} s ({:.1} histories/min)\n\
         linearizable {lin}, rejected {}, unknown {unknown}; images not clean: {unclean:?}\n\
         operations per history: {:.0}; checker: {:.0} ms mean, {:.0} ms max; search: {:.0} nodes mean, {max_nodes} max; \
         {searched} of {} needed more than real time's order\n",
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
