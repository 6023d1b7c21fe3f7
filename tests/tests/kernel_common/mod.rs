//! Helpers shared by the kernel peer tests that mount images we wrote
//! (kernel_crash.rs, kernel_big_workload.rs, kernel_cpmode.rs,
//! kernel_enospc.rs): a deterministic byte
//! pattern, one guest boot over several images, and the `@@NAME` sections
//! a guest script prints.

#![allow(dead_code)] // each test file uses its own subset

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Command;

use nilfs_conformance::peers::{self, Scratch};

/// Guest device names for the first, second, ... image of one boot.
pub const DEVS: &[&str] = &["vda", "vdb", "vdc", "vdd", "vde", "vdf", "vdg", "vdh"];

/// Deterministic file contents (xorshift bytes).
pub fn pattern(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

/// Split guest output into sections: a line `@@NAME` starts section NAME.
pub fn sections(out: &str) -> BTreeMap<String, String> {
    let mut map = BTreeMap::new();
    let mut cur: Option<String> = None;
    for l in out.lines() {
        if let Some(h) = l.strip_prefix("@@") {
            cur = Some(h.to_string());
            map.insert(h.to_string(), String::new());
        } else if let Some(c) = &cur {
            let s = map.get_mut(c).expect("section exists");
            s.push_str(l);
            s.push('\n');
        }
    }
    map
}

/// Boot the guest once with `images` as /dev/vda, /dev/vdb, ... (read-write)
/// and run `script`; returns its output, failing the test if it fails.
pub fn kernel_run(images: &[PathBuf], script: &str, dir: &Scratch, name: &str) -> String {
    assert!(images.len() <= DEVS.len(), "too many disks for one boot");
    let path = dir.file(name);
    std::fs::write(&path, script).unwrap();
    let disks: Vec<String> = images[1..]
        .iter()
        .map(|p| p.display().to_string())
        .collect();
    let mut cmd = Command::new(peers::oracle_dir().join("kernel-run.sh"));
    cmd.arg(&images[0])
        .arg(&path)
        .env("DISKS", disks.join(" "))
        .env("TIMEOUT", "600");
    let out = peers::run(&mut cmd);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "kernel-run.sh {name} exited {}:\n{stdout}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// The nilfs lines of the guest's dmesg that are not in `accepted` (each an
/// allowed substring, case-insensitive).
pub fn unexpected_dmesg<'a>(dmesg: &'a str, accepted: &[&str]) -> Vec<&'a str> {
    dmesg
        .lines()
        .filter(|l| l.to_lowercase().contains("nilfs"))
        .filter(|l| {
            let lower = l.to_lowercase();
            !accepted.iter().any(|a| lower.contains(&a.to_lowercase()))
        })
        .collect()
}
