//! What the command-line tests share: running the binary and a scratch
//! directory per test.
#![allow(dead_code)]

pub mod fuse;

use std::path::PathBuf;
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

/// A fresh, empty directory for test `name` of suite `suite`.
pub fn scratch(suite: &str, name: &str) -> PathBuf {
    let d = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("{suite}-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}
