//! What the command-line tests share: running the binary and a scratch
//! directory per test.
#![allow(dead_code)]

pub mod fuse;

use std::path::{Path, PathBuf};
use std::process::Command;

/// What one run of `nilref` gave.
pub struct Run {
    /// The exit code (-1 if killed by a signal).
    pub code: i32,
    pub out: String,
    pub err: String,
}

impl Run {
    pub fn ok(&self) -> bool {
        self.code == 0
    }
}

/// Run the `nilref` binary with `args`.
pub fn run(args: &[&str]) -> Run {
    let out = Command::new(env!("CARGO_BIN_EXE_nilref"))
        .args(args)
        .output()
        .expect("run nilref");
    Run {
        code: out.status.code().unwrap_or(-1),
        out: String::from_utf8_lossy(&out.stdout).into_owned(),
        err: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// [`run`] as (success, stdout, stderr).
pub fn nilref(args: &[&str]) -> (bool, String, String) {
    let r = run(args);
    (r.ok(), r.out, r.err)
}

/// A test's scratch folder: removed when its test passes, kept and named
/// on stderr when the test fails, so a failure can be looked at and a
/// passing run leaves nothing behind.
pub struct Scratch(PathBuf);

impl Scratch {
    /// A fresh, empty folder at `path` (whatever was there is removed).
    pub fn at(path: PathBuf) -> Scratch {
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).unwrap();
        Scratch(path)
    }
}

impl std::ops::Deref for Scratch {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.0
    }
}

impl AsRef<Path> for Scratch {
    fn as_ref(&self) -> &Path {
        &self.0
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!(
                "kept for inspection (remove it when done): {}",
                self.0.display()
            );
        } else {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

/// A fresh, empty folder for test `name` of suite `suite`, under cargo's
/// temp folder for tests.
pub fn scratch(suite: &str, name: &str) -> Scratch {
    Scratch::at(
        PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
            .join(format!("{suite}-{name}-{}", std::process::id())),
    )
}

/// A known-bad implementation's dropped chmod, found by lockstep within
/// the first `seeds` attrs workloads of `len` steps and shrunk: the
/// minimal workload holds a chmod and at most six lines.
pub fn finds_a_dropped_chmod(
    imp: &mut dyn nilfs_oracle::Implementation,
    cfg: &nilfs_oracle::Config,
    seeds: u64,
    len: usize,
) {
    use nilfs_workload::front::Drawn;
    use nilfs_workload::gen::{Choices, Profile};
    let failure = (1..=seeds)
        .find_map(|seed| {
            let drawn = Drawn {
                profile: Profile::Attrs,
                len,
                choices: Choices::Seed(seed),
            };
            nilfs_oracle::check(imp, cfg, &drawn).err()
        })
        .unwrap_or_else(|| panic!("a dropped chmod is caught within {seeds} attrs workloads"));
    eprintln!("{failure}");
    assert!(
        failure.divergence().is_some(),
        "the harness could not decide, so nothing was caught: {failure}"
    );
    let ops: Vec<&str> = failure
        .minimal
        .iter()
        .filter_map(|l| l["op"].as_str())
        .collect();
    assert!(ops.contains(&"chmod"), "{failure}");
    assert!(ops.len() <= 6, "not shrunk: {failure}");
}
