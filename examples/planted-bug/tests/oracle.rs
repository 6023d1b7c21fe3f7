//! The oracle in this crate's own `cargo test`: nilfs-ref passes, and the
//! planted bug (fsync does nothing) is found and shrunk by each front end.

use nilfs_model::Op;
use nilfs_oracle::{
    check_crashes, lockstep, proptest, Config, CrashFailure, Drawn, ImageSpec, Stop,
};
use nilfs_workload::gen::{Choices, Profile};
use planted_bug::PlantedBug;
use quickcheck::{QuickCheck, TestResult};

/// A few cases of every profile; the regressions file keeps any failure.
fn config() -> Config {
    Config {
        cases: 8,
        max_len: 25,
        regressions: Some("tests/oracle.proptest-regressions"),
        ..Config::default()
    }
}

/// proptest: generated workloads in lockstep; a failure would panic with
/// its minimal workload and be kept in tests/oracle.proptest-regressions.
#[test]
fn nilfs_ref_passes_the_proptest_front_end() {
    proptest(&mut PlantedBug::default(), &config());
}

/// proptest finds the planted bug and shrinks it to a handful of lines.
#[test]
fn proptest_finds_and_shrinks_the_planted_bug() {
    let cfg = Config {
        cases: 64,
        // Not kept: this failure is the point of the test.
        regressions: None,
        ..config()
    };
    let panic = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        proptest(&mut PlantedBug::buggy(), &cfg)
    }))
    .expect_err("the planted bug must be found");
    let report = panic.downcast_ref::<String>().cloned().unwrap_or_default();
    eprintln!("{report}");
    let minimal = report
        .split("minimal workload")
        .nth(1)
        .expect("a minimal workload in the report");
    assert!(minimal.contains("\"fsync\""), "{report}");
    assert!(minimal.contains("\"crash\""), "{report}");
}

/// The regression file: a failure proptest found is kept in it (proptest's
/// `cc` lines) and runs first next time, so a run that would not find the
/// bug on its own (one case, from a seed whose case passes) still fails.
#[test]
fn a_kept_failure_runs_first_next_time() {
    let path = std::env::temp_dir().join(format!(
        "planted-bug-{}.proptest-regressions",
        std::process::id()
    ));
    let _ = std::fs::remove_file(&path);
    let path: &'static str = Box::leak(path.to_string_lossy().into_owned().into_boxed_str());
    let fails = |cfg: &Config| {
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            proptest(&mut PlantedBug::buggy(), cfg)
        }))
        .is_err()
    };
    let found = Config {
        cases: 64,
        regressions: Some(path),
        ..config()
    };
    assert!(fails(&found), "the planted bug must be found");
    let kept = std::fs::read_to_string(path).expect("the regression file was written");
    assert!(kept.lines().any(|l| l.starts_with("cc ")), "{kept}");
    // One case from a seed whose own case passes...
    let one = (0..50u64)
        .map(|seed| Config {
            cases: 1,
            seed,
            regressions: None,
            ..config()
        })
        .find(|cfg| !fails(cfg))
        .expect("a seed whose first case passes");
    // ... fails with the regression file: its case runs first.
    assert!(fails(&Config {
        regressions: Some(path),
        ..one
    }));
    let _ = std::fs::remove_file(path);
}

/// The quickcheck property: one drawn workload in lockstep. A run the
/// harness could not decide is discarded, neither passed nor failed
/// (quickcheck gives up when too few are decided; nilfs-ref in-process
/// never answers undecided).
fn stays_in_the_envelope(buggy: bool, d: Drawn) -> TestResult {
    let mut imp = PlantedBug::new(buggy);
    match lockstep(&mut imp, &Config::default(), &d) {
        Ok(_) => TestResult::passed(),
        Err(Stop::Diverged(div)) => TestResult::error(div.to_string()),
        Err(Stop::Undecided(_)) => TestResult::discard(),
    }
}

fn correct(d: Drawn) -> TestResult {
    stays_in_the_envelope(false, d)
}

fn buggy(d: Drawn) -> TestResult {
    stays_in_the_envelope(true, d)
}

/// quickcheck: nilfs-ref passes; with the bug, quickcheck finds a failing
/// tape and shrinks it (shorter, towards zeros) to one that still fails.
/// Seeded (`Gen::from_size_and_seed`): the same cases every run.
#[test]
fn quickcheck_passes_nilfs_ref_and_catches_the_planted_bug() {
    let qc = || {
        QuickCheck::new()
            .tests(30)
            .max_tests(300)
            .rng(quickcheck::Gen::from_size_and_seed(25, 35))
    };
    qc().quickcheck(correct as fn(Drawn) -> TestResult);
    // Crash workloads, where a skipped fsync shows: quickcheck's own
    // profile choice would find them too, in more tests.
    fn crash_only(mut d: Drawn) -> TestResult {
        d.profile = Profile::Crash;
        buggy(d)
    }
    let found = qc()
        .quicktest(crash_only as fn(Drawn) -> TestResult)
        .expect_err("quickcheck must find the planted bug");
    assert!(found.is_failure(), "{found:?}");
}

/// The crash check: every power cut between two block writes of a short
/// fsync workload, judged by the model. nilfs-ref passes; the planted
/// bug loses what fsync should have made durable.
#[test]
fn crash_check_passes_nilfs_ref_and_catches_the_planted_bug() {
    let p = |s: &str| s.to_string();
    let ops = vec![
        Op::Mount {
            cp: None,
            ro: false,
        },
        // The root's times are mkfs's, the image's ctime: the model's
        // first state must start from that clock.
        Op::Lstat {
            path: p("/"),
            at: None,
        },
        Op::Create {
            path: p("/a"),
            perm: 0o644,
            excl: true,
            at: None,
        },
        Op::Write {
            path: p("/a"),
            offset: 0,
            data: nilfs_model::Pattern::Text("durable after fsync".into()),
            append: false,
            at: None,
        },
        Op::Fsync {
            path: p("/a"),
            at: None,
        },
        // No sync after: only a crash shows what fsync made durable.
    ];
    let spec = ImageSpec {
        device_bytes: 8 << 20,
        ..ImageSpec::default()
    };
    let report =
        check_crashes(&mut PlantedBug::default(), &spec, &ops).unwrap_or_else(|f| panic!("{f}"));
    assert!(report.writes > 2 && report.distinct >= 2, "{report:?}");
    // The cut points are the workload's writes, mkfs's not counted: the
    // same run, recorded here.
    let writes = {
        let log = nilfs_oracle::WriteLog::default();
        let mut imp = PlantedBug::default();
        let (_, mut sut) =
            nilfs_oracle::Implementation::format(&mut imp, &spec, Some(&log)).expect("formats");
        let formatted = log.len();
        for op in &ops {
            sut.apply(op);
        }
        drop(sut);
        assert_eq!(report.writes, log.len() - formatted, "{report:?}");
        report.writes
    };
    let failure = check_crashes(&mut PlantedBug::buggy(), &spec, &ops)
        .expect_err("a skipped fsync must leave a state outside the envelope");
    eprintln!("{failure}");
    assert!(
        matches!(*failure, CrashFailure::Outside { completed: 5, .. }),
        "{failure}"
    );
    // The cut it names is one of the workload's writes.
    if let CrashFailure::Outside { writes: cut, .. } = &*failure {
        assert!(*cut <= writes, "cut after write {cut} of {writes}");
    }
    // The failure says where the cut was and shows the workload.
    let text = failure.to_string();
    assert!(
        text.contains("left a state outside the model's crash envelope")
            && text.contains(r#"  {"op":"fsync","path":"/a"}"#),
        "{text}"
    );
    // Every operation completed: none is marked in flight.
    assert!(!text.contains("<- in flight"), "{text}");
}

/// The same choices give the same workload through every front end: a
/// seed's choices as the bytes a fuzzer would give.
#[test]
fn a_seed_and_its_bytes_are_the_same_case() {
    let cfg = Config::default();
    let drawn = Drawn {
        profile: Profile::Crash,
        len: 10,
        choices: Choices::Seed(3),
    };
    let geometry = nilfs_model::Geometry {
        block_size: 1024,
        blocks_per_segment: 64,
        nsegments: 511,
        r_segments_percentage: 5,
    };
    let base = cfg.gen_config(&geometry);
    let again = Drawn::from_bytes(&drawn.to_bytes(&base));
    assert_eq!(
        nilfs_oracle::workload(&cfg, &geometry, &drawn),
        nilfs_oracle::workload(&cfg, &geometry, &again)
    );
}
