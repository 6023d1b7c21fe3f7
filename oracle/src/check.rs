//! Generated workloads in lockstep, shrunk, with regression files: the
//! entry points a test suite calls.

use std::cell::RefCell;
use std::fmt;

use nilfs_model::{Geometry, Op, State};
use nilfs_workload::front::{strategy, Drawn};
use nilfs_workload::gen::{Features, GenConfig};
use nilfs_workload::shrink::ddmin;
use proptest::test_runner::{
    Config as ProptestConfig, FileFailurePersistence, RngSeed, TestCaseError, TestError, TestRunner,
};
use serde_json::Value;

use crate::lockstep::{run_workload, Divergence, OnInvalid, Step, Stop, Undecided};
use crate::sut::{ImageSpec, Implementation, NS};

/// How an implementation is checked.
#[derive(Clone, Debug)]
pub struct Config {
    /// The image each case starts from.
    pub spec: ImageSpec,
    /// The operations the implementation can be given (the generator
    /// leaves the others out): `Features::ALL` for an implementation in
    /// the test's process with an injected clock, `Features::FUSE`,
    /// `Features::MOUNTED` for a mounted file system.
    pub features: Features,
    /// Cases [`proptest()`] runs (`PROPTEST_CASES` overrides it).
    pub cases: u32,
    /// The seed of [`proptest()`]'s draws (`PROPTEST_RNG_SEED` overrides
    /// it): the same seed, the same cases.
    pub seed: u64,
    /// The longest workload, in generation steps.
    pub max_len: usize,
    /// The regression file [`proptest()`] reads first and adds each new
    /// failure to, in proptest's format (`cc <hash> # ...` lines), relative
    /// to the package's folder; commit it. `None`: no file.
    pub regressions: Option<&'static str>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            spec: ImageSpec::default(),
            features: Features::ALL,
            cases: 32,
            seed: 0x4e49_4c46_5335_0035,
            max_len: 40,
            regressions: None,
        }
    }
}

impl Config {
    /// The generator's configuration for an image of `geometry`.
    pub fn gen_config(&self, geometry: &Geometry) -> GenConfig {
        let mut g = GenConfig::new(0, 0, nilfs_workload::gen::Profile::Mixed);
        g.geometry = geometry.clone();
        g.features = self.features;
        g.clock = self.spec.ctime as i64 * NS;
        g
    }
}

/// The workload `drawn` gives on an image of `geometry`: the generator's
/// lines, then a mount (the epilogue unmounts) so that the last state is
/// compared through the implementation's durable view.
pub fn workload(cfg: &Config, geometry: &Geometry, drawn: &Drawn) -> Vec<Value> {
    let mut lines = drawn.workload(&cfg.gen_config(geometry)).lines;
    lines.push(
        serde_json::to_value(Op::Mount {
            cp: None,
            ro: false,
        })
        .expect("serialises"),
    );
    lines
}

/// Runs workload `lines` (its `mkfs` line skipped) on a fresh image of
/// `imp`, in lockstep with the model.
pub fn run_lines(
    imp: &mut dyn Implementation,
    spec: &ImageSpec,
    lines: &[Value],
    on_invalid: OnInvalid,
) -> Result<Vec<Step>, Stop> {
    let (g, mut sut) = imp.format(spec, None).unwrap_or_else(|e| {
        panic!("the implementation could not make a fresh image of {spec:?}: {e}")
    });
    let initial = State::mkfs(g, true, spec.ctime as i64 * NS);
    run_workload(&mut *sut, initial, lines, on_invalid)
}

/// One generated case in lockstep: the workload `drawn` gives, on a fresh
/// image. Unshrunk: a quickcheck property calls this and lets quickcheck
/// shrink `drawn`; [`minimize`] shrinks the workload's lines after.
pub fn lockstep(
    imp: &mut dyn Implementation,
    cfg: &Config,
    drawn: &Drawn,
) -> Result<Vec<Step>, Stop> {
    let (g, sut) = imp
        .format(&cfg.spec, None)
        .unwrap_or_else(|e| panic!("the implementation could not make a fresh image: {e}"));
    drop(sut);
    let lines = workload(cfg, &g, drawn);
    run_lines(imp, &cfg.spec, &lines, OnInvalid::Panic)
}

/// What kind of divergence `d` is: the last operation's kind and the
/// first words of what went wrong (kept constant while shrinking).
pub fn divergence_kind(d: &Divergence) -> String {
    let op = d
        .steps
        .last()
        .map(|s| serde_json::to_value(&s.op).expect("serialises")["op"].to_string())
        .unwrap_or_default();
    let what: String = d.what.split(':').next().unwrap_or("").to_string();
    format!("{op} {what}")
}

/// Delta debugging of a failing workload down to the lines that matter:
/// a candidate counts if it diverges the same way (the same kind of
/// operation, the same kind of difference); one the harness could not
/// decide does not count. Returns `lines` if they do not diverge.
pub fn minimize(imp: &mut dyn Implementation, spec: &ImageSpec, lines: &[Value]) -> Vec<Value> {
    let Err(Stop::Diverged(first)) = run_lines(imp, spec, lines, OnInvalid::Skip) else {
        return lines.to_vec();
    };
    let want = divergence_kind(&first);
    ddmin(
        lines,
        |cands| {
            cands
                .iter()
                .map(|c| {
                    run_lines(imp, spec, c, OnInvalid::Skip).is_err_and(|stop| {
                        stop.as_divergence()
                            .is_some_and(|d| divergence_kind(d) == want)
                    })
                })
                .collect()
        },
        2000,
    )
}

/// A failure: what was drawn, the workload (shrunk to the lines that
/// matter when it diverged) and why it stopped.
#[derive(Clone, Debug)]
pub struct Failure {
    /// What the front end drew (after its own shrinking).
    pub drawn: Drawn,
    /// The workload, JSON Lines of the workload format: minimal (delta
    /// debugging) for a divergence, whole for an undecided run.
    pub minimal: Vec<Value>,
    /// The divergence of the minimal workload, or where the harness could
    /// not observe the implementation (not shrunk: a harness failure is
    /// not the implementation's behaviour).
    pub stop: Stop,
}

impl Failure {
    /// The divergence, unless the run was undecided.
    pub fn divergence(&self) -> Option<&Divergence> {
        self.stop.as_divergence()
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "{}", self.stop)?;
        writeln!(f, "drawn: {:?}", self.drawn)?;
        match self.stop {
            Stop::Diverged(_) => writeln!(
                f,
                "minimal workload (delta debugging; keep it as a test with nilfs_oracle::replay):"
            )?,
            Stop::Undecided(_) => writeln!(f, "workload (not shrunk):")?,
        }
        for l in &self.minimal {
            writeln!(f, "{l}")?;
        }
        Ok(())
    }
}

/// [`lockstep`] and, on a divergence, [`minimize`]: the divergence with
/// its minimal workload. An undecided run is returned as it came.
pub fn check(
    imp: &mut dyn Implementation,
    cfg: &Config,
    drawn: &Drawn,
) -> Result<(), Box<Failure>> {
    let Err(stop) = lockstep(imp, cfg, drawn) else {
        return Ok(());
    };
    let geometry = imp.format(&cfg.spec, None).map(|(g, sut)| {
        drop(sut);
        g
    });
    let lines = match (&stop, geometry) {
        (_, Ok(g)) => workload(cfg, &g, drawn),
        // A harness that failed may not even format now; `drawn` still
        // names the workload.
        (Stop::Undecided(_), Err(_)) => Vec::new(),
        (Stop::Diverged(_), Err(e)) => panic!("formatted before, not now: {e}"),
    };
    if let Stop::Undecided(_) = stop {
        return Err(Box::new(Failure {
            drawn: drawn.clone(),
            minimal: lines,
            stop,
        }));
    }
    let minimal = minimize(imp, &cfg.spec, &lines);
    let stop = match run_lines(imp, &cfg.spec, &minimal, OnInvalid::Skip) {
        Err(d @ Stop::Diverged(_)) => d,
        _ => stop,
    };
    Err(Box::new(Failure {
        drawn: drawn.clone(),
        minimal,
        stop,
    }))
}

/// Runs a workload kept from a failure (JSON Lines, as [`Failure`] prints
/// it) in lockstep on a fresh image: a regression test's body.
pub fn replay(
    imp: &mut dyn Implementation,
    spec: &ImageSpec,
    jsonl: &str,
) -> Result<Vec<Step>, Stop> {
    let lines: Vec<Value> = jsonl
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("a workload line {l}: {e}")))
        .collect();
    run_lines(imp, spec, &lines, OnInvalid::Skip)
}

/// The proptest front end as a test: `cfg.cases` generated workloads in
/// lockstep, from `cfg.seed`, after the cases kept in `cfg.regressions`.
/// A failure is shrunk by proptest (a shorter workload, a smaller seed),
/// kept in the regression file, then shrunk by delta debugging over its
/// lines; it panics with the divergence, the minimal workload and how to
/// replay it.
pub fn proptest(imp: &mut dyn Implementation, cfg: &Config) {
    let base = ProptestConfig::default();
    let config = ProptestConfig {
        cases: if std::env::var_os("PROPTEST_CASES").is_some() {
            base.cases
        } else {
            cfg.cases
        },
        rng_seed: match base.rng_seed {
            RngSeed::Random => RngSeed::Fixed(cfg.seed),
            fixed => fixed,
        },
        failure_persistence: cfg
            .regressions
            .map(|p| Box::new(FileFailurePersistence::Direct(p)) as Box<_>),
        // The cases run in this process: the implementation is borrowed.
        fork: false,
        timeout: 0,
        // The first case the harness cannot decide ends the run (below):
        // a harness that failed once is not trusted with the next case.
        max_global_rejects: 0,
        ..base
    };
    let imp = RefCell::new(imp);
    // A case the harness could not decide neither passed nor diverged: it
    // is rejected (not shrunk), which ends the run, and the test fails
    // saying so.
    let undecided: RefCell<Vec<(Drawn, Undecided)>> = RefCell::default();
    let mut runner = TestRunner::new(config);
    let result = runner.run(&strategy(cfg.max_len), |drawn| {
        let mut imp = imp.borrow_mut();
        match lockstep(&mut **imp, cfg, &drawn) {
            Ok(_) => Ok(()),
            Err(Stop::Diverged(d)) => Err(TestCaseError::fail(d.to_string())),
            Err(Stop::Undecided(u)) => {
                let why = u.why.clone();
                undecided.borrow_mut().push((drawn, *u));
                Err(TestCaseError::reject(why))
            }
        }
    });
    let undecided = undecided.into_inner();
    let undecided_note = match undecided.first() {
        None => String::new(),
        Some((drawn, u)) => format!(
            "\n{} case(s) could not be decided by the harness; the first, drawn {drawn:?}:\n{u}",
            undecided.len()
        ),
    };
    // The first undecided case ends the run (`max_global_rejects` 0), as
    // proptest's abort; rejections while a failure is shrunk do not.
    match result {
        Ok(()) => {}
        Err(TestError::Abort(why)) if undecided.is_empty() => panic!("proptest gave up: {why}"),
        Err(TestError::Abort(_)) => panic!(
            "no divergence, but the oracle could not decide every case (proptest seed {:#x}){undecided_note}",
            cfg.seed
        ),
        Err(TestError::Fail(reason, drawn)) => {
            let again = check(&mut **imp.borrow_mut(), cfg, &drawn);
            panic!(
                "{}{undecided_note}",
                failure_report(cfg, &reason, &drawn, again)
            );
        }
    }
}

/// What [`proptest()`] says of a failing case `drawn` (proptest's
/// `reason`), given what [`check`] made of it again: the shrunk
/// divergence and how to replay it, or, when it passed or was undecided
/// the second time, that the divergence does not repeat.
fn failure_report(
    cfg: &Config,
    reason: &impl fmt::Display,
    drawn: &Drawn,
    again: Result<(), Box<Failure>>,
) -> String {
    match again {
        Err(failure) if matches!(failure.stop, Stop::Diverged(_)) => format!(
            "{failure}\nreplay: the same test (proptest seed {:#x} unless PROPTEST_RNG_SEED is set{})",
            cfg.seed,
            cfg.regressions
                .map(|p| format!("; the case is kept in {p}"))
                .unwrap_or_default()
        ),
        // The implementation (or its clock, or its timing) is not
        // deterministic, or the harness failed the second time. Still a
        // failure, shown as proptest saw it.
        again => format!(
            "{reason}\ndrawn: {drawn:?}\nthe same case then {}: the divergence does not repeat (proptest seed {:#x})",
            match again {
                Ok(()) => "passed".to_string(),
                Err(f) => format!("was undecided: {}", f.stop),
            },
            cfg.seed
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::{divergence_kind, failure_report, Config, Failure};
    use crate::lockstep::{Divergence, Step, Stop, Undecided};
    use nilfs_model::{Op, Outcome};
    use nilfs_workload::front::Drawn;
    use nilfs_workload::gen::{Choices, Profile};

    /// A failing case is reported as its shrunk divergence only if it
    /// diverged again; passing or undecided the second time, it is
    /// reported as a divergence that does not repeat.
    #[test]
    fn a_failure_is_reported_by_what_its_second_run_did() {
        let cfg = Config::default();
        let drawn = Drawn {
            profile: Profile::Data,
            len: 3,
            choices: Choices::Seed(1),
        };
        let failure = |stop| {
            Err(Box::new(Failure {
                drawn: drawn.clone(),
                minimal: vec![],
                stop,
            }))
        };
        let again = failure(Stop::Diverged(diverged(Op::Sync, "observed EIO")));
        let text = failure_report(&cfg, &"first", &drawn, again);
        assert!(text.starts_with("divergence after 1 operations"), "{text}");
        assert!(text.contains("replay: the same test"), "{text}");
        let undecided = Undecided {
            steps: vec![],
            op: Some(Op::Sync),
            why: "the runner ended".into(),
        };
        let again = failure(Stop::Undecided(Box::new(undecided)));
        let text = failure_report(&cfg, &"first", &drawn, again);
        assert!(text.starts_with("first\ndrawn:"), "{text}");
        assert!(
            text.contains("then was undecided: undecided after 0 operations"),
            "{text}"
        );
        assert!(text.contains("the divergence does not repeat"), "{text}");
        let text = failure_report(&cfg, &"first", &drawn, Ok(()));
        assert!(
            text.contains("then passed: the divergence does not repeat"),
            "{text}"
        );
    }

    fn diverged(op: Op, what: &str) -> Divergence {
        Divergence {
            steps: vec![Step {
                op,
                out: Outcome::Ok,
            }],
            what: what.into(),
            allowed: vec![],
            detail: None,
        }
    }

    /// Delta debugging keeps a candidate only if it diverges the same way:
    /// the last operation's kind and the words before the first colon.
    #[test]
    fn a_divergence_kind_is_its_operation_and_first_words() {
        let sync = diverged(Op::Sync, "durable view differs: live tree");
        assert_eq!(divergence_kind(&sync), "\"sync\" durable view differs");
        let other = diverged(Op::Sync, "outcome not allowed: x");
        let lscp = diverged(Op::Lscp, "durable view differs: checkpoints");
        assert_ne!(divergence_kind(&sync), divergence_kind(&other));
        assert_ne!(divergence_kind(&sync), divergence_kind(&lscp));
    }
}
