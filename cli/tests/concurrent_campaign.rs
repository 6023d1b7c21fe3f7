//! The concurrent campaign's short tier: a few concurrent histories on
//! `nilref mount` (three writers of 50 operations each, at once), judged
//! for linearizability, must all be linearizable and leave clean images;
//! the same seeds on the known-bad mount that answers a write before it
//! stores it (`--known-bad late-writes`), and on the one whose stats go on
//! showing what they published before a write (`--known-bad
//! stale-attrs`) or whose reads go on planning from the clean blocks
//! they noted before a write (`--known-bad stale-blocks`), must be
//! rejected. Skipped
//! where FUSE cannot be used (set NILFS_FUSE=1 to require it). The long
//! run: `nilref campaign concurrent --seeds 1..1000`.

mod common;

use common::fuse::fuse_or_skip;

fn campaign(dir: &std::path::Path, seeds: &str, extra: &[&str]) -> String {
    let out = dir.to_str().unwrap();
    let mut args = vec!["campaign", "concurrent", "--seeds", seeds, "--out", out];
    args.extend_from_slice(extra);
    let r = common::run(&args);
    assert!(
        r.ok(),
        "nilref campaign concurrent {extra:?}: {}\n{}",
        r.out,
        r.err
    );
    r.out
}

#[test]
fn concurrent_histories_on_our_mount_are_linearizable_and_the_known_bad_is_not() {
    let dir = common::scratch("concurrent", "campaign");
    if !fuse_or_skip(&dir) {
        return;
    }
    let good = campaign(&dir.join("good"), "1..3", &[]);
    assert!(
        good.contains("linearizable 3, rejected 0, unknown 0; images not clean: []"),
        "{good}"
    );
    let bad = campaign(&dir.join("late"), "1..3", &["--known-bad", "late-writes"]);
    assert!(bad.contains("linearizable 0, rejected 3"), "{bad}");
    assert!(bad.contains("replay: nilref oracle check"), "{bad}");
    // A stale stat shows only where a stat of the file follows another
    // worker's write to it, which the timing decides: of six histories,
    // some must be rejected (six of six, then two of three, in the first
    // runs).
    let stale = campaign(&dir.join("stale"), "1..6", &["--known-bad", "stale-attrs"]);
    assert!(!stale.contains("rejected 0,"), "{stale}");
    assert!(stale.contains("replay: nilref oracle check"), "{stale}");
    // The same for a read planned from blocks noted before another
    // worker's write (three of six in the first two runs).
    let blocks = campaign(
        &dir.join("blocks"),
        "1..6",
        &["--known-bad", "stale-blocks"],
    );
    assert!(!blocks.contains("rejected 0,"), "{blocks}");
    assert!(blocks.contains("replay: nilref oracle check"), "{blocks}");
}
