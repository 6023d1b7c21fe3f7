//! The oracle's third answer: when the harness cannot observe the
//! implementation (a runner that died, an image it could not open), the
//! run is *undecided*, never a divergence. Each test also runs the same
//! harness failure unreported (the known-bad harness of before: an EIO
//! answer, or an abstraction function that fails, with no word that the
//! harness failed) and sees the oracle call it a divergence, so the
//! tests tell the two apart. The last one checks `check`'s shrinking of
//! a real divergence (a planted bug of the implementation itself).

use nilfs_model::{step, Errno, FileType, Geometry, Op, Outcome, State};
use nilfs_oracle::{
    check, check_crashes, divergence_kind, model_durable, proptest, run, Config, CrashFailure,
    Drawn, Durable, ImageSpec, Implementation, Stop, Sut, WriteLog, NS,
};
use nilfs_workload::gen::{Choices, Profile};

/// Where the harness fails.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum Breaks {
    /// Never.
    #[default]
    Never,
    /// The `n`-th call to `apply` (from 0) gets no answer.
    Apply(usize),
    /// Every read of the durable state fails.
    Durable,
    /// Every read of the durable state of an image opened after a crash
    /// fails.
    DurableAfterCrash,
}

/// The model itself as an implementation (each operation takes an outcome
/// the model predicts), behind a harness that fails as `breaks` says and
/// says so through `Sut::undecided` when `reports`.
struct Harnessed {
    state: State,
    breaks: Breaks,
    reports: bool,
    calls: usize,
    cannot: Option<String>,
    /// Made by `Implementation::open`, from a crash state.
    opened: bool,
    /// A planted bug of the implementation itself (not the harness):
    /// every write is answered as done and stores nothing.
    drops_writes: bool,
}

impl Sut for Harnessed {
    fn apply(&mut self, op: &Op) -> Outcome {
        self.cannot = None;
        let n = self.calls;
        self.calls += 1;
        if self.breaks == Breaks::Apply(n) {
            self.cannot = Some("the runner ended without an answer".into());
            return Outcome::Err(Errno::EIO);
        }
        if let (true, Op::Write { data, .. }) = (self.drops_writes, op) {
            return Outcome::Written(data.len());
        }
        let predicted: Vec<(Outcome, State)> = step(&self.state, op)
            .iter()
            .filter_map(|b| b.predicted())
            .collect();
        let Some((out, next)) = predicted
            .iter()
            .find(|(o, _)| *o != Outcome::Err(Errno::ENOSPC))
            .or(predicted.first())
            .cloned()
        else {
            return Outcome::Err(Errno::EINVAL);
        };
        self.state = next;
        match out {
            Outcome::Stat(mut st) if st.file_type == FileType::Dir => {
                st.size = st.size.max(u64::from(self.state.geometry.block_size));
                Outcome::Stat(st)
            }
            out => out,
        }
    }

    fn durable(&mut self) -> Result<Durable, String> {
        self.cannot = None;
        if self.breaks == Breaks::Durable
            || (self.breaks == Breaks::DurableAfterCrash && self.opened)
        {
            let why = "image.img: No such file or directory".to_string();
            self.cannot = Some(why.clone());
            return Err(why);
        }
        Ok(model_durable(&self.state))
    }

    fn undecided(&self) -> Option<String> {
        if self.reports {
            self.cannot.clone()
        } else {
            None
        }
    }
}

#[derive(Default)]
struct Imp {
    breaks: Breaks,
    reports: bool,
    drops_writes: bool,
    /// Fresh runs made so far.
    formats: usize,
    /// Fresh runs it can make at all (the harness's guest gone after).
    max_formats: Option<usize>,
}

fn geometry(spec: &ImageSpec) -> Geometry {
    Geometry {
        block_size: spec.block_size as u32,
        blocks_per_segment: spec.blocks_per_segment as u32,
        nsegments: spec.device_bytes / (spec.block_size * spec.blocks_per_segment),
        r_segments_percentage: 5,
    }
}

impl Imp {
    fn sut(&mut self, spec: &ImageSpec, opened: bool) -> Box<dyn Sut> {
        self.formats += 1;
        Box::new(Harnessed {
            state: State::mkfs(geometry(spec), true, spec.ctime as i64 * NS),
            breaks: self.breaks,
            reports: self.reports,
            calls: 0,
            cannot: None,
            opened,
            drops_writes: self.drops_writes,
        })
    }
}

/// The model keeps no device: it writes nothing to a log, so a crash
/// check has one cut, and what `open` shows there is a fresh file system
/// (here only the harness's failure at that cut matters).
impl Implementation for Imp {
    fn format(
        &mut self,
        spec: &ImageSpec,
        _log: Option<&WriteLog>,
    ) -> Result<(Geometry, Box<dyn Sut + '_>), String> {
        if self.max_formats.is_some_and(|n| self.formats >= n) {
            return Err("the guest is gone".into());
        }
        Ok((geometry(spec), self.sut(spec, false)))
    }

    fn open(&mut self, _image: &[u8]) -> Result<Box<dyn Sut + '_>, String> {
        Ok(self.sut(&ImageSpec::default(), true))
    }
}

fn create(path: &str) -> Op {
    Op::Create {
        path: path.into(),
        perm: 0o644,
        excl: false,
        at: None,
    }
}

fn ops() -> Vec<Op> {
    vec![
        Op::Mount {
            cp: None,
            ro: false,
        },
        create("/a"),
        Op::Sync,
        create("/b"),
        Op::Sync,
    ]
}

fn run_with(breaks: Breaks, reports: bool) -> Result<Vec<nilfs_oracle::Step>, Stop> {
    let spec = ImageSpec::default();
    let mut imp = Imp {
        breaks,
        reports,
        ..Imp::default()
    };
    let (g, mut sut) = imp.format(&spec, None).expect("formats");
    run(
        &mut *sut,
        State::mkfs(g, true, spec.ctime as i64 * NS),
        &ops(),
    )
}

#[test]
fn the_harness_working_is_decided() {
    assert_eq!(run_with(Breaks::Apply(99), true).expect("passes").len(), 5);
}

#[test]
fn an_operation_the_harness_could_not_run_is_undecided() {
    match run_with(Breaks::Apply(3), true) {
        Err(Stop::Undecided(u)) => {
            assert_eq!(u.op, Some(create("/b")), "{u}");
            assert_eq!(u.steps.len(), 3, "{u}");
            assert!(u.why.contains("without an answer"), "{u}");
            let text = u.to_string();
            assert!(text.starts_with("undecided after 3 operations"), "{text}");
            assert!(text.contains("not a divergence"), "{text}");
            assert_eq!(Stop::Undecided(u).to_string(), text);
        }
        other => panic!("not undecided: {other:?}"),
    }
    // The known-bad harness, which does not say it failed: its EIO is the
    // implementation's answer, one the model does not allow.
    match run_with(Breaks::Apply(3), false) {
        Err(Stop::Diverged(d)) => {
            assert!(d.what.contains("EIO"), "{d}");
            let text = d.to_string();
            assert!(text.starts_with("divergence after 4 operations"), "{text}");
            assert_eq!(Stop::Diverged(d).to_string(), text);
        }
        other => panic!("the unreported failure was not a divergence: {other:?}"),
    }
}

#[test]
fn a_durable_state_the_harness_could_not_read_is_undecided() {
    match run_with(Breaks::Durable, true) {
        Err(Stop::Undecided(u)) => {
            // The first read is after the mount.
            assert_eq!(u.op, None, "{u}");
            assert_eq!(u.steps.len(), 1, "{u}");
            assert!(
                u.to_string()
                    .contains("could not observe the durable state"),
                "{u}"
            );
        }
        other => panic!("not undecided: {other:?}"),
    }
    // Unreported, a failed read is the implementation's image not reading
    // back.
    match run_with(Breaks::Durable, false) {
        Err(Stop::Diverged(d)) => {
            assert!(
                d.what.starts_with("the durable state does not read back"),
                "{d}"
            )
        }
        other => panic!("the unreported failure was not a divergence: {other:?}"),
    }
}

fn drawn() -> Drawn {
    Drawn {
        profile: Profile::Data,
        len: 12,
        choices: Choices::Seed(3),
    }
}

/// `check` neither shrinks an undecided run (a harness failure is not the
/// implementation's behaviour) nor calls it a divergence.
#[test]
fn check_returns_an_undecided_run_whole() {
    let cfg = Config::default();
    let check_with = |reports| {
        let mut imp = Imp {
            breaks: Breaks::Apply(2),
            reports,
            ..Imp::default()
        };
        check(&mut imp, &cfg, &drawn()).expect_err("the harness failed")
    };
    let failure = check_with(true);
    assert!(failure.divergence().is_none(), "{failure}");
    assert!(matches!(failure.stop, Stop::Undecided(_)), "{failure}");
    let text = failure.to_string();
    assert!(text.contains("workload (not shrunk)"), "{text}");
    assert!(!text.contains("minimal workload"), "{text}");
    // Unreported: the EIO is a divergence, shrunk.
    let failure = check_with(false);
    assert!(failure.divergence().is_some(), "{failure}");
    // A harness that cannot even make a fresh run after it failed: still
    // undecided, the drawn choices naming the workload.
    let mut gone = Imp {
        breaks: Breaks::Apply(2),
        reports: true,
        max_formats: Some(2),
        ..Imp::default()
    };
    let failure = check(&mut gone, &cfg, &drawn()).expect_err("the harness failed");
    assert!(matches!(failure.stop, Stop::Undecided(_)), "{failure}");
    assert!(failure.minimal.is_empty(), "{failure}");
}

/// The proptest front end fails on the first undecided case, saying the
/// oracle could not decide, and calls nothing a divergence.
#[test]
fn proptest_says_it_could_not_decide() {
    let cfg = Config {
        cases: 4,
        max_len: 12,
        ..Config::default()
    };
    let mut imp = Imp {
        breaks: Breaks::Apply(1),
        reports: true,
        ..Imp::default()
    };
    let panicked =
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| proptest(&mut imp, &cfg)))
            .expect_err("an undecided case fails the test");
    // One case only (`lockstep` makes two fresh runs of it): a harness
    // that failed once is not given the next.
    assert_eq!(imp.formats, 2);
    let text = panicked
        .downcast_ref::<String>()
        .cloned()
        .unwrap_or_default();
    assert!(
        text.starts_with("no divergence, but the oracle could not decide every case"),
        "{text}"
    );
    assert!(!text.contains("divergence after"), "{text}");
    assert!(
        text.contains("the runner ended without an answer"),
        "{text}"
    );
}

/// A crash state whose durable state the harness could not read is
/// undecided; unreported, it is a state outside the envelope.
#[test]
fn a_crash_state_the_harness_could_not_read_is_undecided() {
    let spec = ImageSpec::default();
    let mut imp = Imp {
        breaks: Breaks::DurableAfterCrash,
        reports: true,
        ..Imp::default()
    };
    match *check_crashes(&mut imp, &spec, &ops()).expect_err("the harness failed") {
        CrashFailure::Undecided(u) => {
            assert!(u.why.starts_with("after a power cut at write 0"), "{u}");
            assert!(u.to_string().contains("not a divergence"), "{u}");
        }
        other => panic!("not undecided: {other}"),
    }
    imp.reports = false;
    match *check_crashes(&mut imp, &spec, &ops()).expect_err("unreadable") {
        CrashFailure::Outside { got: Err(why), .. } => {
            assert!(why.contains("No such file"), "{why}")
        }
        other => panic!("the unreported failure was not outside the envelope: {other}"),
    }
}

/// `check` shrinks a divergence by delta debugging to the lines that
/// diverge the same way, and reports the minimal workload's own
/// divergence (shorter than the first).
#[test]
fn check_shrinks_a_divergence_to_one_of_the_same_kind() {
    let cfg = Config::default();
    let mut imp = Imp {
        drops_writes: true,
        ..Imp::default()
    };
    let (drawn, first) = (0..32)
        .find_map(|seed| {
            let drawn = Drawn {
                profile: Profile::Data,
                len: 30,
                choices: Choices::Seed(seed),
            };
            let stop = nilfs_oracle::lockstep(&mut imp, &cfg, &drawn).err()?;
            Some((drawn, stop.divergence().expect("diverged")))
        })
        .expect("a dropped write is found");
    let failure = check(&mut imp, &cfg, &drawn).expect_err("diverges");
    let d = failure.divergence().expect("diverged");
    assert_eq!(divergence_kind(d), divergence_kind(&first), "{failure}");
    assert!(
        d.steps.len() < first.steps.len(),
        "not the minimal run's: {failure}"
    );
    let (g, _) = imp.format(&cfg.spec, None).unwrap();
    let full = nilfs_oracle::workload(&cfg, &g, &drawn);
    assert!(failure.minimal.len() < full.len(), "not shrunk: {failure}");
}
