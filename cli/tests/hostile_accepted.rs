//! Damage the commands used to accept without a word (issue 13.7), each
//! made by the project's corruption generator on a base image our write
//! path builds, then met as a user would meet it. Each test fails on the
//! code before its fix; its `// postmortem:` says what happened then.
//!
//! What the kernel also accepts and reads on regardless (a metadata file's
//! inode with a directory mode, a DAT entry naming another file's block, a
//! segment holding live blocks but marked clean) stays readable here too,
//! and `nilref check` reports it: those cases are at the end.

mod common;

use common::{run, Run};
use nilfs::device::{export_image, MemDevice};
use nilfs_conformance::corrupt;

/// Base image `base` with `recipes` applied, saved as an image file.
fn damaged(name: &str, base: &str, recipes: &[&str]) -> (common::Scratch, String) {
    let d = common::scratch("accepted", name);
    let dev: MemDevice = corrupt::base(base).unwrap();
    for r in recipes {
        corrupt::apply(&dev, &corrupt::Recipe::parse(r).unwrap())
            .unwrap_or_else(|e| panic!("{name}: {r}: {e}"));
    }
    let img = d.join("img");
    export_image(&dev, &img).unwrap();
    let img = img.to_str().unwrap().to_string();
    (d, img)
}

fn refused(r: &Run, wants: &[&str]) {
    assert!(!r.ok(), "accepted: {}", r.out);
    assert!(!r.err.contains("panicked"), "{}", r.err);
    for w in wants {
        assert!(r.err.contains(w), "{:?} not in: {}", w, r.err);
    }
}

// postmortem: the snapshot list was walked as the kernel's GET_CPINFO does,
// so a list whose ssl_next named its own checkpoint printed that snapshot
// once per `ch_nsnapshots`, and chcp relinked around the loop, writing a
// list worse than before. Every walk now requires each step to go up
// (down for ssl_prev), as the sorted list always does.
#[test]
fn a_snapshot_list_that_loops_is_refused() {
    let (_d, img) = damaged(
        "ssloop",
        "ours",
        &["cp[2].ssl_next = 2", "cphdr.ch_nsnapshots = 5"],
    );
    let findings = |img: &str| -> Vec<String> {
        let r = run(&["check", img]);
        r.out
            .lines()
            .filter(|l| !l.starts_with("note:"))
            .map(String::from)
            .collect()
    };
    let before = findings(&img);
    assert!(
        before.iter().any(|l| l.starts_with("cp-snapshot-list")),
        "{before:?}"
    );
    refused(
        &run(&["lscp", "-s", &img]),
        &["corrupt snapshot list", "at checkpoint 2: ssl_next 2"],
    );
    refused(&run(&["chcp", &img, "ss", "3"]), &["corrupt snapshot list"]);
    refused(&run(&["chcp", &img, "cp", "2"]), &["corrupt snapshot list"]);
    // The mount's super block update is all a refused chcp wrote.
    assert_eq!(findings(&img), before, "a refused chcp changed the cpfile");
    // The plain listing does not walk the list.
    assert!(run(&["lscp", &img]).ok());
}

// postmortem: chcp walked back from the header's ssl_prev for at most
// ns_cno steps and said only "snapshot list does not end".
#[test]
fn a_back_link_that_does_not_go_down_is_refused_naming_the_checkpoint() {
    let (_d, img) = damaged(
        "ssprev",
        "ours",
        &["cphdr.ssl_prev = 3", "cp[3].ssl_prev = 3"],
    );
    refused(
        &run(&["chcp", &img, "ss", "1"]),
        &["corrupt snapshot list", "at checkpoint 3: ssl_prev 3"],
    );
}

// postmortem: an i_mode of 0 or 0o177777 read as a regular file (`ls`
// showed mode 000000, `cat` printed the data). Linux 6.1 gives such an
// inode no file operations; it is refused now, naming the inode, by the
// iget of the read path and of the mount alike.
#[test]
fn a_mode_outside_the_seven_file_types_is_refused() {
    for (name, mode) in [("mode0", "0"), ("modeff", "0xffff")] {
        let (_d, img) = damaged(name, "ours", &[&format!("inode[/small].i_mode = {mode}")]);
        for cmd in [
            &["cat", &img, "/small"][..],
            &["ls", &img, "/"],
            &["manifest", &img],
        ] {
            refused(&run(cmd), &["corrupt inode", "inode 12", "is no file type"]);
        }
        let r = run(&["apply", &img, "/dev/null"]);
        assert!(!r.err.contains("panicked"), "{}", r.err);
    }
}

// postmortem: a node block whose keys were out of order was binary-searched
// as the kernel does, so `cat` printed the wrong blocks of the file.
#[test]
fn btree_keys_out_of_order_are_refused_naming_the_block() {
    let (_d, img) = damaged("keys", "ours", &["node[/big:1:0].key[1] = 1000"]);
    refused(
        &run(&["cat", &img, "/big"]),
        &["corrupt btree node at block", "keys out of order"],
    );
}

// postmortem: a DAT entry pointing at block 1 (the super block's area)
// translated, so `cat` printed super block bytes as the file.
#[test]
fn a_dat_entry_outside_the_segment_area_is_refused() {
    let (_d, img) = damaged("dat1", "ours", &["dat[/small:0].de_blocknr = 1"]);
    refused(
        &run(&["cat", &img, "/small"]),
        &[
            "corrupt DAT entry",
            "de_blocknr 1 is outside the segment area",
        ],
    );
}

// postmortem: these refusals named neither the block nor the inode.
#[test]
fn refusals_name_the_block_or_the_inode() {
    let cases: [(&str, &str, &str, &[&str]); 3] = [
        (
            "root",
            "inode[/big].i_bmap[0] = 0x0e01",
            "/big",
            &["btree root", "inode 13", "bad level 14"],
        ),
        (
            "level",
            "node[/big:1:0].bn_level = 2",
            "/big",
            &["btree node at block", "level mismatch"],
        ),
        (
            "nodisk",
            "dat[/small:0].de_blocknr = 0",
            "/small",
            &["DAT entry", "virtual block", "no disk block"],
        ),
    ];
    for (name, recipe, path, wants) in cases {
        let (_d, img) = damaged(name, "ours", &[recipe]);
        refused(&run(&["cat", &img, path]), wants);
    }
}

// postmortem: a data-sync log naming the DAT's inode was skipped by
// roll-forward (its block records read as the DAT's kind), and mkcp went on
// as if nothing was there. The kernel's roll-forward fails on it (the iget
// of a metadata file's number in nilfs_recover_dsync_blocks), and so does
// our mount now, naming the log, without writing.
#[test]
fn roll_forward_of_a_metadata_inode_fails_the_mount() {
    // Where the base's data-sync log lies, as check reports it undamaged.
    let (_d, base) = damaged("rfbase", "rollforward", &[]);
    let note = run(&["check", &base]).out;
    let at = note
        .split("needs roll-forward recovery: 1 logs from block ")
        .nth(1)
        .and_then(|s| s.split(' ').next())
        .unwrap_or_else(|| panic!("no roll-forward log in:\n{note}"))
        .to_string();
    let summary_at = format!("corrupt segment summary at block {at}");
    let (_d, img) = damaged("rfino", "rollforward", &["finfo@rf:0.fi_ino = 3"]);
    let before = std::fs::read(&img).unwrap();
    refused(
        &run(&["mkcp", &img]),
        &[&summary_at, "inode 3, a metadata file"],
    );
    assert!(
        std::fs::read(&img).unwrap() == before,
        "a failed mount wrote"
    );
    let (_d, img) = damaged("rfhole", "rollforward", &["finfo@rf:0.fi_ino = 500"]);
    refused(
        &run(&["mkcp", &img]),
        &[&summary_at, "roll-forward", "inode 500"],
    );
}

// postmortem: `check` called an image clean whose data-sync log held a
// block far past its file's size, which roll-forward then dropped without
// a word.
#[test]
fn check_reports_a_data_sync_block_past_the_file_size() {
    let (_d, img) = damaged(
        "rfoff",
        "rollforward",
        &["binfo@rf:0:0.bi_blkoff = 0x7fffffffffff"],
    );
    let r = run(&["check", &img]);
    assert_eq!(r.code, 4, "{}", r.out);
    assert!(
        r.out.contains("log-dsync") && r.out.contains("past its size 10000"),
        "{}",
        r.out
    );
}

/// What the kernel reads on regardless: readable here too, reported by
/// `check` with the invariant it breaks.
#[test]
fn what_the_kernel_reads_regardless_check_reports() {
    let leaf = "@dat[/d/sub/leaf:0].de_blocknr";
    let shared = format!("dat[/small:0].de_blocknr = {leaf}");
    let cases: [(&str, &[&str], &str); 4] = [
        ("datdir", &["sr.dat.i_mode = 0o40644"], "mdt-inode"),
        ("ifilelnk", &["cp[3].ifile.i_mode = 0o120777"], "mdt-inode"),
        ("shared", &[&shared], "dat-block-shared"),
        (
            "liveclean",
            &[
                "su[1].su_flags = 0",
                "suhdr.sh_ncleansegs += 1",
                "suhdr.sh_ndirtysegs -= 1",
            ],
            "su-live-in-clean",
        ),
    ];
    for (name, recipes, code) in cases {
        let (_d, img) = damaged(name, "ours", recipes);
        assert!(run(&["ls", &img, "/"]).ok(), "{name}: the tree reads");
        let r = run(&["check", &img]);
        assert_eq!(r.code, 4, "{name}: {}", r.out);
        assert!(r.out.contains(code), "{name}: no {code}:\n{}", r.out);
    }
}

// A write that would reuse a clean segment still holding live blocks is
// refused: impl/tests/construction_abort.rs
// (`a_write_never_reuses_a_clean_segment_that_holds_live_blocks`).

// postmortem: found by the hostile sweep: an i_size with the top bit set
// (2^63 + 18) made `cat` and `manifest` stream 2^63 bytes, for ever. The
// kernel's signed loff_t reads such a file as empty; we refuse it at iget.
#[test]
fn a_size_past_the_largest_file_is_refused() {
    let (_d, img) = damaged(
        "size",
        "ours",
        &["inode[/small].i_size |= 0x8000000000000000"],
    );
    for cmd in [&["cat", &img, "/small"][..], &["manifest", &img]] {
        refused(
            &run(cmd),
            &["corrupt inode", "inode 12", "past the largest file size"],
        );
    }
}
