//! The concurrent campaign's short tier: a few concurrent histories on
//! `nilref mount` (three writers of 50 operations each, at once), judged
//! for linearizability, must all be linearizable and leave clean images;
//! the same seeds on the known-bad mount that answers a write before it
//! stores it (`--known-bad late-writes`) must all be rejected. Skipped
//! where FUSE cannot be used (set NILFS_FUSE=1 to require it). The long
//! run: `nilref campaign concurrent --seeds 1..1000`.

mod common;

use common::fuse::fuse_or_skip;

fn campaign(dir: &std::path::Path, extra: &[&str]) -> String {
    let out = dir.to_str().unwrap();
    let mut args = vec!["campaign", "concurrent", "--seeds", "1..3", "--out", out];
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
    let good = campaign(&dir.join("good"), &[]);
    assert!(
        good.contains("linearizable 3, rejected 0, unknown 0; images not clean: []"),
        "{good}"
    );
    let bad = campaign(&dir.join("bad"), &["--known-bad", "late-writes"]);
    assert!(bad.contains("linearizable 0, rejected 3"), "{bad}");
    assert!(bad.contains("replay: nilref oracle check"), "{bad}");
}
