//! Replays every committed fuzz corpus input (fuzz/corpus/TARGET/*) through
//! its target's entry point, so plain `cargo test` checks the corpus and
//! every past crash input stays fixed. To replay one input by hand:
//! `cargo test -p nilfs-conformance --test fuzz_corpus -- --nocapture`
//! prints each file as it runs; a panic names the file that caused it.
//!
//! Regressions (`regress-NNN-what`), with their postmortems:
//! - image/regress-001-dumpseg-allocates-corrupt-segment-size: dumpseg
//!   takes its geometry from the primary super block without a CRC check,
//!   as libnilfs does; a patched `s_blocks_per_segment` made it allocate
//!   48 GiB for one segment. The read is now bounded by the device first.

use std::path::PathBuf;

use nilfs_conformance::fuzz::TARGETS;

fn corpus_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join("fuzz")
        .join("corpus")
}

#[test]
fn every_target_has_a_corpus_and_it_replays() {
    for (name, entry) in TARGETS {
        let dir = corpus_dir().join(name);
        let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .map(|e| e.unwrap().path())
            .collect();
        files.sort();
        assert!(!files.is_empty(), "no corpus for fuzz target {name}");
        for f in files {
            let data = std::fs::read(&f).unwrap();
            println!("{name}: {}", f.display());
            entry(&data);
        }
    }
}

#[test]
fn every_target_has_a_fuzz_binary() {
    let targets = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join("fuzz")
        .join("fuzz_targets");
    for (name, _) in TARGETS {
        assert!(
            targets.join(format!("{name}.rs")).is_file(),
            "fuzz/fuzz_targets/{name}.rs missing"
        );
    }
}
