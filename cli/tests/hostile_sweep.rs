//! The hostile-image sweep (issue 13's figures): every damage class of the
//! check corpus (tests/check-corpus/*.case: one named field of a base
//! image, resealed), plus seeded random damage to the metadata of a base
//! (`corrupt::damage_random`), met by every command a user runs, each
//! under a 2 GiB address-space limit and a 60 s timeout:
//!
//! - read commands: inspect, tune, lscp, lscp -s, lssu, dumpseg, ls, cat,
//!   manifest, export, check;
//! - write commands, each on its own copy: mkcp, chcp, rmcp, clean, and
//!   apply of a small workload.
//!
//! Counted, and each required to be zero: panics, hangs, allocations past
//! the limit (the process aborts), files written outside an export's
//! destination, and write commands that succeed on an image whose latest
//! checkpoint read in full and leave one that does not. A `cat`,
//! `manifest` or `export` that reaches the time limit on an image whose
//! files declare more than 4 GiB (a damaged `i_size` still below the
//! largest file size: a valid sparse file, which the kernel's tools would
//! also stream for hours) is counted apart, as streaming, not as a hang. The table is
//! printed (`-- --nocapture`); docs/TESTING.md keeps the figures. The
//! default run takes every corpus class and 8 random seeds;
//! `NILFS_HOSTILE_SEEDS=N` takes N.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use nilfs::device::{export_image, MemDevice};
use nilfs_conformance::corrupt::{self, Recipe};

const READS: &[&str] = &[
    "inspect", "tune", "lscp", "lscp-s", "lssu", "dumpseg", "ls", "cat", "manifest", "export",
    "check",
];
const WRITES: &[&str] = &["mkcp", "chcp", "rmcp", "clean", "apply"];

const TRACE: &str = "{\"op\":\"mount\"}\n\
    {\"op\":\"create\",\"path\":\"/sweep\"}\n\
    {\"op\":\"write\",\"path\":\"/sweep\",\"offset\":0,\"data\":{\"seeded\":{\"seed\":7,\"len\":70000}}}\n\
    {\"op\":\"sync\"}\n\
    {\"op\":\"umount\"}\n";

/// How one command run ended.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum End {
    Ok,
    /// A typed refusal: a nonzero exit with a message, no panic.
    Refused,
    Panic,
    Hang,
    /// Killed by a signal: an allocation past the limit aborts.
    Abort,
}

fn bounded(args: &[String]) -> End {
    // Standard output is thrown away: a `cat` of a damaged size streams
    // terabytes of zeros, as it should.
    let out = Command::new("timeout")
        .args(["60", "sh", "-c", "ulimit -v 2097152; exec \"$@\"", "sh"])
        .arg(env!("CARGO_BIN_EXE_nilref"))
        .args(args)
        .stdout(std::process::Stdio::null())
        .output()
        .expect("run nilref");
    let err = String::from_utf8_lossy(&out.stderr);
    match out.status.code() {
        Some(0) => End::Ok,
        Some(124) => End::Hang,
        Some(101) => End::Panic,
        _ if err.contains("panicked") => End::Panic,
        Some(_) => End::Refused,
        None => End::Abort,
    }
}

/// Every entry below `d`, relative (symlinks not followed).
fn tree(d: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut todo = vec![d.to_path_buf()];
    while let Some(p) = todo.pop() {
        let Ok(rd) = std::fs::read_dir(&p) else {
            continue;
        };
        for e in rd.flatten() {
            out.push(e.path().strip_prefix(d).unwrap().display().to_string());
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                todo.push(e.path());
            }
        }
    }
    out
}

#[derive(Default)]
struct Tally {
    runs: u64,
    ok: u64,
    refused: u64,
    streaming: Vec<String>,
    panics: Vec<String>,
    hangs: Vec<String>,
    aborts: Vec<String>,
    outside: Vec<String>,
    broke: Vec<String>,
}

impl Tally {
    fn count(&mut self, class: &str, cmd: &str, end: End) {
        self.runs += 1;
        let what = format!("{class}: {cmd}");
        match end {
            End::Ok => self.ok += 1,
            End::Refused => self.refused += 1,
            End::Panic => self.panics.push(what),
            End::Hang => self.hangs.push(what),
            End::Abort => self.aborts.push(what),
        }
    }
}

fn s(p: &Path) -> String {
    p.to_str().unwrap().to_string()
}

fn sweep_one(class: &str, dev: &MemDevice, dir: &Path, t: &mut Tally) {
    std::fs::create_dir_all(dir).unwrap();
    let img = dir.join("img");
    export_image(dev, &img).unwrap();
    let readable = bounded(&["manifest".into(), s(&img)]) == End::Ok;
    let declared = declared_bytes(dev);
    for &cmd in READS {
        let out = dir.join("out");
        let dest = out.join("dest");
        let args: Vec<String> = match cmd {
            "lscp-s" => vec!["lscp".into(), "-s".into(), s(&img)],
            "dumpseg" => vec![
                "dumpseg".into(),
                s(&img),
                "0".into(),
                "1".into(),
                "2".into(),
            ],
            "ls" => vec!["ls".into(), s(&img), "/".into()],
            "cat" => vec!["cat".into(), s(&img), "/small".into()],
            "export" => {
                std::fs::create_dir_all(&out).unwrap();
                vec!["export".into(), s(&img), s(&dest)]
            }
            _ => vec![cmd.into(), s(&img)],
        };
        let end = bounded(&args);
        if end == End::Hang && declared > 4 << 30 && ["cat", "manifest", "export"].contains(&cmd) {
            t.runs += 1;
            t.streaming
                .push(format!("{class}: {cmd} ({declared} bytes declared)"));
        } else {
            t.count(class, cmd, end);
        }
        if cmd == "export" {
            let stray: Vec<String> = tree(&out)
                .into_iter()
                .filter(|p| p != "dest" && !p.starts_with("dest/"))
                .collect();
            if !stray.is_empty() {
                t.outside.push(format!("{class}: {stray:?}"));
            }
            let _ = std::fs::remove_dir_all(&out);
        }
    }
    for &cmd in WRITES {
        let copy = dir.join(format!("w-{cmd}"));
        std::fs::copy(&img, &copy).unwrap();
        let args: Vec<String> = match cmd {
            "chcp" => vec!["chcp".into(), s(&copy), "ss".into(), "1".into()],
            "rmcp" => vec!["rmcp".into(), s(&copy), "1".into()],
            "clean" => vec![
                "clean".into(),
                s(&copy),
                "--time".into(),
                "1900000000".into(),
            ],
            "apply" => {
                let trace = dir.join("trace.jsonl");
                std::fs::write(&trace, TRACE).unwrap();
                let o = dir.join("observed.jsonl");
                vec!["apply".into(), s(&copy), s(&trace), "-o".into(), s(&o)]
            }
            _ => vec![cmd.into(), s(&copy)],
        };
        let end = bounded(&args);
        t.count(class, cmd, end);
        if readable && end == End::Ok && bounded(&["manifest".into(), s(&copy)]) != End::Ok {
            t.broke.push(format!("{class}: {cmd}"));
        }
        let _ = std::fs::remove_file(&copy);
    }
}

/// The sum of the regular files' sizes in the latest checkpoint, as far
/// as it reads (0 if it does not).
fn declared_bytes(dev: &MemDevice) -> u64 {
    let Ok(fs) = nilfs::the_nilfs::Nilfs::open(dev) else {
        return 0;
    };
    let Ok(view) = nilfs::posix::CheckpointView::open(&fs, None) else {
        return 0;
    };
    let mut total = 0u64;
    let _ = view.walk_tree(&mut |_, _, inode| {
        if nilfs::posix::is_reg(inode) {
            total = total.saturating_add(inode.size);
        }
        Ok(())
    });
    total
}

/// The corpus's damage classes: (name, base, recipes).
fn corpus_classes() -> Vec<(String, String, Vec<Recipe>)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/check-corpus");
    let mut paths: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "case"))
        .collect();
    paths.sort();
    paths
        .into_iter()
        .map(|p| {
            let text = std::fs::read_to_string(&p).unwrap();
            let head = text.split("--- output").next().unwrap_or_default();
            let base = head
                .lines()
                .find_map(|l| l.strip_prefix("base: "))
                .unwrap()
                .trim()
                .to_string();
            let recipes = head
                .lines()
                .filter_map(|l| l.strip_prefix("corrupt: "))
                .map(|r| Recipe::parse(r).unwrap())
                .collect();
            (
                p.file_stem().unwrap().to_string_lossy().into_owned(),
                base,
                recipes,
            )
        })
        .collect()
}

#[test]
fn every_command_survives_every_damage_class() {
    let root = common::scratch("sweep", "all");
    let mut bases: BTreeMap<String, MemDevice> = BTreeMap::new();
    let mut base = |name: &str| -> MemDevice {
        bases
            .entry(name.to_string())
            .or_insert_with(|| corrupt::base(name).unwrap())
            .duplicate()
    };
    let mut t = Tally::default();
    let mut classes = 0;
    for (name, b, recipes) in corpus_classes() {
        let dev = base(&b);
        for r in &recipes {
            corrupt::apply(&dev, r).unwrap_or_else(|e| panic!("{name}: {e}"));
        }
        sweep_one(&name, &dev, &root.join(&name), &mut t);
        let _ = std::fs::remove_dir_all(root.join(&name));
        classes += 1;
    }
    let seeds: u64 = std::env::var("NILFS_HOSTILE_SEEDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(8);
    for seed in 0..seeds {
        let name = format!("random-{seed}");
        let dev = base("ours");
        corrupt::damage_random(&dev, seed, 3).unwrap();
        sweep_one(&name, &dev, &root.join(&name), &mut t);
        let _ = std::fs::remove_dir_all(root.join(&name));
        classes += 1;
    }
    println!(
        "hostile sweep: {classes} damage classes x {} commands = {} runs: {} ok, {} refused, \
         {} streaming a declared size past the time limit, \
         {} panics, {} hangs, {} aborts past 2 GiB, {} writes outside an export, \
         {} write commands that left a readable image unreadable",
        READS.len() + WRITES.len(),
        t.runs,
        t.ok,
        t.refused,
        t.streaming.len(),
        t.panics.len(),
        t.hangs.len(),
        t.aborts.len(),
        t.outside.len(),
        t.broke.len()
    );
    if !t.streaming.is_empty() {
        println!("streaming: {:?}", t.streaming);
    }
    assert!(t.panics.is_empty(), "panics: {:?}", t.panics);
    assert!(t.hangs.is_empty(), "hangs: {:?}", t.hangs);
    assert!(t.aborts.is_empty(), "aborts: {:?}", t.aborts);
    assert!(
        t.outside.is_empty(),
        "written outside an export: {:?}",
        t.outside
    );
    assert!(
        t.broke.is_empty(),
        "readable images made unreadable: {:?}",
        t.broke
    );
}
