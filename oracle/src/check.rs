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

use crate::lockstep::{run_workload, Divergence, OnInvalid, Step};
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
) -> Result<Vec<Step>, Divergence> {
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
) -> Result<Vec<Step>, Divergence> {
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
/// operation, the same kind of difference). Returns `lines` if they do
/// not fail.
pub fn minimize(imp: &mut dyn Implementation, spec: &ImageSpec, lines: &[Value]) -> Vec<Value> {
    let Err(first) = run_lines(imp, spec, lines, OnInvalid::Skip) else {
        return lines.to_vec();
    };
    let want = divergence_kind(&first);
    ddmin(
        lines,
        |cands| {
            cands
                .iter()
                .map(|c| {
                    run_lines(imp, spec, c, OnInvalid::Skip)
                        .is_err_and(|d| divergence_kind(&d) == want)
                })
                .collect()
        },
        2000,
    )
}

/// A failure, shrunk: what was drawn, the minimal workload and its
/// divergence.
#[derive(Clone, Debug)]
pub struct Failure {
    /// What the front end drew (after its own shrinking).
    pub drawn: Drawn,
    /// The minimal workload, JSON Lines of the workload format.
    pub minimal: Vec<Value>,
    /// The divergence of the minimal workload.
    pub divergence: Divergence,
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "{}", self.divergence)?;
        writeln!(f, "drawn: {:?}", self.drawn)?;
        writeln!(
            f,
            "minimal workload (delta debugging; keep it as a test with nilfs_oracle::replay):"
        )?;
        for l in &self.minimal {
            writeln!(f, "{l}")?;
        }
        Ok(())
    }
}

/// [`lockstep`] and, on a divergence, [`minimize`]: the divergence with
/// its minimal workload.
pub fn check(
    imp: &mut dyn Implementation,
    cfg: &Config,
    drawn: &Drawn,
) -> Result<(), Box<Failure>> {
    let Err(d) = lockstep(imp, cfg, drawn) else {
        return Ok(());
    };
    let (g, sut) = imp.format(&cfg.spec, None).expect("formatted before");
    drop(sut);
    let minimal = minimize(imp, &cfg.spec, &workload(cfg, &g, drawn));
    let divergence = run_lines(imp, &cfg.spec, &minimal, OnInvalid::Skip)
        .err()
        .unwrap_or(d);
    Err(Box::new(Failure {
        drawn: drawn.clone(),
        minimal,
        divergence,
    }))
}

/// Runs a workload kept from a failure (JSON Lines, as [`Failure`] prints
/// it) in lockstep on a fresh image: a regression test's body.
pub fn replay(
    imp: &mut dyn Implementation,
    spec: &ImageSpec,
    jsonl: &str,
) -> Result<Vec<Step>, Divergence> {
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
        ..base
    };
    let imp = RefCell::new(imp);
    let mut runner = TestRunner::new(config);
    let result = runner.run(&strategy(cfg.max_len), |drawn| {
        let mut imp = imp.borrow_mut();
        match lockstep(&mut **imp, cfg, &drawn) {
            Ok(_) => Ok(()),
            Err(d) => Err(TestCaseError::fail(d.to_string())),
        }
    });
    match result {
        Ok(()) => {}
        Err(TestError::Fail(reason, drawn)) => {
            let mut imp = imp.borrow_mut();
            let Err(failure) = check(&mut **imp, cfg, &drawn) else {
                // The divergence did not repeat: the implementation (or
                // its clock, or its timing) is not deterministic. Still a
                // failure, shown as proptest saw it.
                panic!(
                    "{reason}\ndrawn: {drawn:?}\nthe same case then passed: the divergence does not repeat (proptest seed {:#x})",
                    cfg.seed
                );
            };
            panic!(
                "{failure}\nreplay: the same test (proptest seed {:#x} unless PROPTEST_RNG_SEED is set{})",
                cfg.seed,
                cfg.regressions
                    .map(|p| format!("; the case is kept in {p}"))
                    .unwrap_or_default()
            );
        }
        Err(TestError::Abort(why)) => panic!("proptest gave up: {why}"),
    }
}

#[cfg(test)]
mod tests {
    use super::divergence_kind;
    use crate::lockstep::{Divergence, Step};
    use nilfs_model::{Op, Outcome};

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
