//! The concurrent campaign's short tier: a few concurrent histories on
//! `nilref mount` (three writers of 50 operations each, at once), judged
//! for linearizability, must all be linearizable and leave clean images;
//! the same seeds on the known-bad mount that answers a write before it
//! stores it (`--known-bad late-writes`), and on the one whose stats go on
//! showing what they published before a write (`--known-bad
//! stale-attrs`) or whose reads go on planning from the clean blocks
//! they noted before a write (`--known-bad stale-blocks`), must be
//! rejected (these two with one writer: see below). Skipped
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
    // A stale stat or a stale read shows only where it follows a write to
    // the file with no name change between (any name change drops all
    // that was published). With several writers, whether another worker's
    // rename falls between is the timing's choice: three of six histories
    // of `stale-blocks` were rejected here, none of the same six in a CI
    // run. With one writer the history is a sequence and the seed decides:
    // of seeds 1..6, `stale-blocks` rejects 4 and 5, `stale-attrs` five or
    // six (a construction on the log writer's timer asks the stats again,
    // which can only hide a stale one). A stale read or stat needs no
    // second thread to show; the several-writer rates are the long run's.
    let one_writer = ["--writers", "1", "--ops", "150", "--known-bad"];
    for variant in ["stale-attrs", "stale-blocks"] {
        let extra: Vec<&str> = one_writer.iter().copied().chain([variant]).collect();
        let out = campaign(&dir.join(variant), "1..6", &extra);
        assert!(!out.contains("rejected 0,"), "{out}");
        assert!(out.contains("replay: nilref oracle check"), "{out}");
    }
}
