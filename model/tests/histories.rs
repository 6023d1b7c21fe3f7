//! Concurrent histories recorded by `nilref campaign concurrent` (on
//! `nilref mount`, and on Linux 6.1 in the guest), kept as regression
//! tests of the linearizability checker. Each of the first six was
//! rejected once; in each, Linux (or FUSE) carried out an operation in two
//! steps with other calls between them, which the model took as one:
//! - `lstat` looks the name up, then reads the inode (a rename between
//!   shows the old name with the rename's ctime);
//! - `link` looks the old name up, then makes the new one (a rename
//!   between lets `link y y` succeed, or frees the inode: ENOENT);
//! - `truncate` (`nilfs_setattr`) sets the size, then the times;
//! - `write` sets the times (`file_modified`), then the bytes and the size.
//!
//! The checker now gives those operations two points (`history`,
//! `two_steps`).

use nilfs_model::check_history;
use nilfs_model::trace::Options;

fn history(name: &str) -> String {
    let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("traces/concurrent")
        .join(name);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

#[test]
fn recorded_histories_are_linearizable() {
    for name in [
        "mount-lstat-during-rename.jsonl",
        "mount-lstat-nlink-during-renames.jsonl",
        "mount-link-onto-a-name-being-renamed.jsonl",
        "mount-link-of-an-inode-losing-its-name.jsonl",
        "linux-6.1-lstat-during-truncate.jsonl",
        "linux-6.1-lstat-during-write.jsonl",
        "linux-6.1-writers-and-cleaner.jsonl",
    ] {
        let v = check_history(&history(name), Options::default())
            .unwrap_or_else(|r| panic!("{name}: {r}"));
        assert!(v.ops >= 150 && v.workers >= 3, "{name}: {v:?}");
    }
}

// postmortem: recorded while `nilref exec` listed a directory with as many
// getdents64 calls as it took, the last one finding the end; a create
// between two calls listed `b` twice. No order shows a name twice, so the
// rejection is right; the runner now lists a directory in one call.
#[test]
fn a_listing_with_a_name_twice_is_rejected() {
    let r = check_history(
        &history("mount-readdir-in-two-calls.jsonl"),
        Options::default(),
    )
    .expect_err("b listed twice");
    assert!(!r.is_unknown(), "{r}");
    assert!(r.stuck.iter().any(|s| s.op.contains("readdir")), "{r}");
}

#[test]
fn a_recorded_history_with_one_time_moved_is_rejected() {
    // Known-bad, from a real history: the lstat that overlapped a rename
    // reports a ctime after every call of the phase had returned.
    let text = history("mount-lstat-during-rename.jsonl");
    let edited: String = text
        .lines()
        .map(|l| {
            let mut v: serde_json::Value = serde_json::from_str(l).unwrap();
            if v["op"] == "lstat" && v["path"] == "/s/d" && v["out"]["stat"].is_object() {
                v["out"]["stat"]["ctime"] = serde_json::json!(i64::MAX / 2);
            }
            v.to_string() + "\n"
        })
        .collect();
    let r = check_history(&edited, Options::default()).expect_err("no call set that time");
    assert!(!r.is_unknown(), "{r}");
}

// Finding F2 (docs/findings.md): on Linux 6.1 a 16 KiB read of /s/f saw a
// worker's later write (at 7486) but not its earlier one (at 5254, in the
// same page), which had returned before the later one was called. No
// order of whole operations gives those bytes: the read copied the page
// while the writes went into it (`generic_file_read_iter` takes neither
// the inode lock nor the page lock of an up-to-date page). The checker
// now gives a read two points and accepts a splice of the bytes at the
// two (`history::torn_reads`). This is the recording cut to its three
// operations, the read's bytes recomputed for them; the whole recording
// is accepted too.
#[test]
fn a_read_torn_by_two_writes_is_accepted() {
    let v = check_history(
        &history("linux-6.1-read-torn-by-a-write.jsonl"),
        Options::default(),
    )
    .unwrap_or_else(|r| panic!("{r}"));
    assert_eq!(v.workers, 2);
}

// Known-bad: the same writes the other way round, the earlier at 7486 and
// the later at 5254, and a read that shows the later but not the earlier.
// A read copies in offset order, so it cannot have read 5254 after the
// later write and 7486 before the earlier one: no splice gives it.
#[test]
fn a_read_torn_against_its_copy_order_is_rejected() {
    let r = check_history(
        &history("known-bad-read-torn-backwards.jsonl"),
        Options::default(),
    )
    .expect_err("time would run backwards along the read");
    assert!(!r.is_unknown(), "{r}");
    assert!(r.stuck.iter().any(|s| s.op.contains("\"read\"")), "{r}");
}

// Three writers, the cleaner and a checkpoint worker (mkcp, mkcp -s,
// chcp, rmcp, lscp) on Linux 6.1, snapshot 4 read back at the end. The
// search used to pass its bound here (one state per order of the writers
// around each mkcp, in what the checkpoints hold): it now forgets what
// checkpoints no line reads hold (`history::forget_unread`).
#[test]
fn a_history_with_the_checkpoint_worker_is_decided() {
    let text = history("linux-6.1-writers-cleaner-and-checkpoints.jsonl");
    let v = check_history(&text, Options::default()).unwrap_or_else(|r| panic!("{r}"));
    assert!(v.workers == 5 && v.ops >= 170, "{v:?}");
    // Known-bad: snapshot 4 read back with /s/f's bytes changed. What the
    // read checkpoint holds is kept, so this must be rejected.
    let edited: String = text
        .lines()
        .map(|l| {
            let mut v: serde_json::Value = serde_json::from_str(l).unwrap();
            if v["op"] == "manifest" && v["at"] == 4 {
                let m = v["out"]["manifest"].as_array_mut().unwrap();
                let f = m
                    .iter_mut()
                    .find(|e| e.as_str().unwrap().ends_with("/s/f"))
                    .unwrap();
                *f = serde_json::json!(f.as_str().unwrap().replacen("fbc4", "0bc4", 1));
            }
            v.to_string() + "\n"
        })
        .collect();
    assert_ne!(edited, text);
    let r = check_history(&edited, Options::default()).expect_err("snapshot 4 changed");
    assert!(!r.is_unknown(), "{r}");
}
