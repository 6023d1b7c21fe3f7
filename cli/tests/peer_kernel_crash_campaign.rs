//! `nilref campaign crash` end to end. The first test runs the pipeline on
//! nilfs-ref's own write path (hermetic); the second is the crash
//! campaign's short tier against Linux in the qemu guest (peer tier,
//! `NILFS_PEERS=1`; about a minute: one boot records three workloads
//! through dm-log-writes, one more lets the kernel recover a sample).
//!
//! Both accept exactly two kinds of failing state, the known findings
//! "skipped-log" (K5, docs/findings.md): a construction spanning two
//! segments whose first log did not reach the disk, which NILFS2's
//! recovery (the kernel's, and ours, which follows it) steps over; and
//! "revivable-log" (K23): a later log landed without the one before it,
//! which `check` reports because the next crash revives it. Any other
//! problem fails the test.

mod common;

use std::path::Path;
use std::process::Command;

use serde_json::Value;

fn scratch(name: &str) -> common::Scratch {
    common::scratch("crash", name)
}

/// Runs the campaign; returns its summary.json and what it printed.
fn campaign(out: &Path, args: &[&str]) -> (Value, String) {
    let o = Command::new(env!("CARGO_BIN_EXE_nilref"))
        .args(["campaign", "crash", "--out", out.to_str().unwrap()])
        .args(args)
        .output()
        .expect("run nilref");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    let summary = std::fs::read_to_string(out.join("summary.json"))
        .unwrap_or_else(|e| panic!("no summary ({e}); the campaign printed:\n{text}"));
    (serde_json::from_str(&summary).unwrap(), text)
}

/// Every problem is the known finding, and the figures are not vacuous.
fn only_the_known_finding(s: &Value, text: &str, min_states: u64) {
    let problems = s["problems"].as_object().unwrap();
    for name in problems.keys() {
        assert!(
            name.ends_with(": skipped-log") || name.ends_with(": revivable-log"),
            "an unexpected problem {name}:\n{text}"
        );
    }
    assert!(
        s["states"].as_u64().unwrap() >= min_states,
        "too few crash states:\n{text}"
    );
    assert!(s["torn"].as_u64().unwrap() > 0, "{text}");
    assert!(s["reordered"].as_u64().unwrap() > 0, "{text}");
    let failing = s["failing_prefix_torn_reordered"].as_array().unwrap();
    assert_eq!(failing[0], 0, "a flush/FUA boundary state failed:\n{text}");
}

/// Finding K23's crash state, recorded from Linux 6.1, replays as the
/// known `revivable-log`: recovery inside the envelope, `check`'s only
/// error `log-revivable` (docs/findings/k23-crash-revives-a-stale-log).
#[test]
fn the_k23_crash_state_replays_as_a_revivable_log() {
    let folder = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../docs/findings/k23-crash-revives-a-stale-log/campaign");
    let o = Command::new(env!("CARGO_BIN_EXE_nilref"))
        .args(["campaign", "crash", "--replay"])
        .arg(&folder)
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(
        text.contains("state-r33-32: crash-check: revivable-log"),
        "{text}"
    );
    assert!(!text.contains("crash-envelope"), "{text}");
}

#[test]
fn our_write_path_through_the_crash_campaign_and_a_replay() {
    let out = scratch("ours");
    let (s, text) = campaign(&out, &["--ours", "--seeds", "1..4", "--len", "6"]);
    only_the_known_finding(&s, &text, 60);
    assert_eq!(s["failing_prefix_torn_reordered"][1], 0, "{text}");
    // A finding replays from its folder with one command, and still fails.
    if let Some(folder) = s["findings"].as_array().unwrap().first() {
        let o = Command::new(env!("CARGO_BIN_EXE_nilref"))
            .args(["campaign", "crash", "--replay", folder.as_str().unwrap()])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success() && err.contains("skipped-log"), "{err}");
    }
}

#[test]
fn the_kernels_crash_states_short_tier() {
    if nilfs_conformance::peers::require(
        "the_kernels_crash_states_short_tier",
        &["qemu-system-x86_64", "mkfs.nilfs2", "dmsetup", "xz"],
    )
    .is_none()
    {
        return;
    }
    let out = scratch("kernel");
    let (s, text) = campaign(
        &out,
        &[
            "--seeds",
            "1..3",
            "--len",
            "5",
            "--no-shrink",
            "--kernel-sample",
            "2",
        ],
    );
    eprintln!("{text}");
    only_the_known_finding(&s, &text, 40);
    assert_eq!(s["workloads"], 3, "{text}");
    // The kernel recovered the samples, and agreed with ours on each.
    assert!(s["kernel_states"].as_u64().unwrap() >= 3, "{text}");
    assert!(
        !text.contains("crash-kernel-disagrees"),
        "the recoveries disagree:\n{text}"
    );
}
