//! Lockstep: an implementation ([`Sut`]) against the model, operation by
//! operation.
//!
//! [`run`] keeps every model state the observations so far allow (a crash
//! leaves several), steps each with the model's `step` and keeps the
//! branches whose `Branch::accept` takes the observed outcome, checks the
//! model's laws on every accepted transition, and after every
//! construction or mount compares the implementation's [`Sut::durable`]
//! with each surviving model state's ([`model_durable`]). It stops at the
//! first divergence.
//!
//! Both sides digest a file's contents by the page digest (SHA-256 of its
//! non-zero 4 KiB pages with their indexes, then the size), each computed
//! by its own code from what it holds. An implementation that makes a
//! checkpoint only when asked must show exactly the model's checkpoint
//! numbers: the sets of numbers are compared exactly.

use std::fmt;

use nilfs_model::laws::{check_transition, Promises};
use nilfs_model::manifest::FileMemo;
use nilfs_model::state::Mount;
use nilfs_model::{step, Op, Outcome, State};

use crate::sut::{Durable, Sut};

/// The model's side of the abstraction: what [`Sut::durable`] must show
/// for model state `s`.
pub fn model_durable(s: &State) -> Durable {
    Durable {
        live: nilfs_model::manifest::page_manifest(&s.live),
        checkpoints: s
            .checkpoints
            .iter()
            .map(|(c, cp)| (*c, cp.ns.as_ref().map(nilfs_model::manifest::page_manifest)))
            .collect(),
    }
}

/// [`model_durable`] with the manifests it already made remembered, by
/// namespace. `manifest::page_manifest` is a function of the namespace alone,
/// so a namespace equal to one seen before has the same lines; a
/// checkpoint's namespace is frozen, and the latest one is the live tree
/// it was made from, so nearly every namespace of a comparison has been
/// seen at the one before. Hashing every file of every checkpoint again at
/// each comparison was most of the harness's time (issue 15). Namespaces
/// that share structure (clones of one another, as the model's states
/// are) compare in time independent of their size: imbl's maps skip
/// shared nodes and `Arc`'d pages compare by pointer first.
#[derive(Default)]
pub struct ModelManifests {
    /// Most recent last.
    seen: Vec<(nilfs_model::Namespace, Vec<String>)>,
    /// Page digests of the files of namespaces not seen before.
    files: Option<FileMemo>,
}

impl ModelManifests {
    /// Namespaces remembered (a comparison needs the live tree and each
    /// checkpoint of each state followed).
    const KEEP: usize = 64;

    /// The manifest lines of `ns`.
    pub fn manifest(&mut self, ns: &nilfs_model::Namespace) -> Vec<String> {
        if let Some(i) = self.seen.iter().rposition(|(n, _)| n == ns) {
            let hit = self.seen.remove(i);
            let lines = hit.1.clone();
            self.seen.push(hit);
            return lines;
        }
        let files = self
            .files
            .get_or_insert_with(|| FileMemo::new(nilfs_model::manifest::file_page_digest));
        let lines = nilfs_model::manifest::manifest_by(ns, &mut |f| files.digest(f));
        if self.seen.len() == Self::KEEP {
            self.seen.remove(0);
        }
        self.seen.push((ns.clone(), lines.clone()));
        lines
    }

    /// [`model_durable`] of `s`.
    pub fn durable(&mut self, s: &State) -> Durable {
        Durable {
            live: self.manifest(&s.live),
            checkpoints: s
                .checkpoints
                .iter()
                .map(|(c, cp)| (*c, cp.ns.as_ref().map(|ns| self.manifest(ns))))
                .collect(),
        }
    }
}

// ------------------------------------------------------------------ harness

/// One executed step: the operation and what the implementation answered.
#[derive(Clone, Debug)]
pub struct Step {
    pub op: Op,
    pub out: Outcome,
}

/// The first place the implementation left the model's envelope.
#[derive(Clone, Debug)]
pub struct Divergence {
    /// The steps up to and including the divergent one.
    pub steps: Vec<Step>,
    /// What went wrong, in words.
    pub what: String,
    /// What the model allowed there.
    pub allowed: Vec<String>,
    /// The implementation's own account of its last error, or the durable
    /// view it showed, if any.
    pub detail: Option<String>,
}

impl fmt::Display for Divergence {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "divergence after {} operations: {}",
            self.steps.len(),
            self.what
        )?;
        writeln!(f, "trace (model trace format, observed outcomes):")?;
        for s in &self.steps {
            let line = nilfs_model::Line::new(s.op.clone(), s.out.clone());
            writeln!(f, "  {}", line.to_json())?;
        }
        writeln!(f, "the model allowed:")?;
        for a in &self.allowed {
            writeln!(f, "  {a}")?;
        }
        if let Some(d) = &self.detail {
            writeln!(f, "the implementation: {d}")?;
        }
        Ok(())
    }
}

/// A run the oracle could not judge: the harness failed to observe the
/// implementation ([`Sut::undecided`]). Nothing is known about the
/// implementation past `steps`.
#[derive(Clone, Debug)]
pub struct Undecided {
    /// The steps judged so far (all within the model's envelope).
    pub steps: Vec<Step>,
    /// The operation that could not be observed, or `None` for the
    /// durable state after the last step.
    pub op: Option<Op>,
    /// Why, in the harness's words.
    pub why: String,
}

impl fmt::Display for Undecided {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let what = match &self.op {
            Some(op) => serde_json::to_string(op).expect("an operation serialises"),
            None => "the durable state".into(),
        };
        writeln!(
            f,
            "undecided after {} operations: the harness could not observe {what}: {}",
            self.steps.len(),
            self.why
        )?;
        writeln!(
            f,
            "(not a divergence: nothing is known of the implementation from here on)"
        )?;
        writeln!(f, "trace so far (model trace format, observed outcomes):")?;
        for s in &self.steps {
            let line = nilfs_model::Line::new(s.op.clone(), s.out.clone());
            writeln!(f, "  {}", line.to_json())?;
        }
        Ok(())
    }
}

/// Why a lockstep run stopped before its end.
#[derive(Clone, Debug)]
pub enum Stop {
    /// The implementation left the model's envelope.
    Diverged(Divergence),
    /// The harness could not observe the implementation: no verdict.
    Undecided(Box<Undecided>),
}

impl Stop {
    /// The divergence, or the undecided run as an error.
    pub fn divergence(self) -> Result<Divergence, Box<Undecided>> {
        match self {
            Stop::Diverged(d) => Ok(d),
            Stop::Undecided(u) => Err(u),
        }
    }

    /// The divergence, if the run diverged.
    pub fn as_divergence(&self) -> Option<&Divergence> {
        match self {
            Stop::Diverged(d) => Some(d),
            Stop::Undecided(_) => None,
        }
    }
}

impl From<Divergence> for Stop {
    fn from(d: Divergence) -> Self {
        Stop::Diverged(d)
    }
}

impl fmt::Display for Stop {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Stop::Diverged(d) => d.fmt(f),
            Stop::Undecided(u) => u.fmt(f),
        }
    }
}

/// Most model states followed at once (a crash's envelope is at most one
/// per change since the last checkpoint, times two checkpoint tables).
const MAX_STATES: usize = 256;

/// Whether `op` leaves nothing pending, so the durable state is the whole
/// state and the abstraction can be compared.
fn settles(op: &Op) -> bool {
    matches!(op, Op::Sync | Op::Mkcp { .. } | Op::Mount { cp: None, .. })
}

fn show(o: &Outcome) -> String {
    match o {
        Outcome::Manifest(l) => format!("manifest {l:#?}"),
        _ => serde_json::to_string(o).expect("an outcome serialises"),
    }
}

/// The first differing line of two durable views, in words.
fn durable_diff(want: &Durable, got: &Durable) -> String {
    let lines = |what: &str, w: &[String], g: &[String]| -> Option<String> {
        if w == g {
            return None;
        }
        let k = w.iter().zip(g).take_while(|(a, b)| a == b).count();
        Some(format!(
            "{what}: {} lines in the model, {} observed; first difference at line {}: model {:?}, observed {:?}",
            w.len(),
            g.len(),
            k + 1,
            w.get(k),
            g.get(k)
        ))
    };
    if let Some(d) = lines("live tree", &want.live, &got.live) {
        return d;
    }
    let (wk, gk): (Vec<_>, Vec<_>) = (
        want.checkpoints.keys().collect(),
        got.checkpoints.keys().collect(),
    );
    if wk != gk {
        return format!("checkpoints: model {wk:?}, observed {gk:?}");
    }
    // A checkpoint whose contents the model does not know matches any.
    for (c, w) in want
        .checkpoints
        .iter()
        .filter_map(|(c, w)| Some((c, w.as_ref()?)))
    {
        let g = got.checkpoints[c].as_deref().unwrap_or_default();
        if let Some(d) = lines(&format!("checkpoint {c}"), w, g) {
            return d;
        }
    }
    "equal".into()
}

/// Runs `ops` against `sut` in lockstep with the model, starting from
/// `initial` (the model state after mkfs). Returns the executed steps, or
/// why the run stopped: the first divergence, or where the harness could
/// not observe the implementation.
pub fn run(sut: &mut dyn Sut, initial: State, ops: &[Op]) -> Result<Vec<Step>, Stop> {
    let mut l = Lockstep::new(initial, OnInvalid::Panic);
    for op in ops {
        l.step(sut, op)?;
    }
    Ok(l.steps)
}

/// Runs a workload (`nilfs_workload` lines, checkpoint references
/// resolved from what `sut` answers) in lockstep with the model; its
/// `mkfs` line, if any, is skipped (the device is formatted already).
pub fn run_workload(
    sut: &mut dyn Sut,
    initial: State,
    lines: &[serde_json::Value],
    on_invalid: OnInvalid,
) -> Result<Vec<Step>, Stop> {
    use nilfs_workload::{Resolver, Unresolved};
    let mut l = Lockstep::new(initial, on_invalid);
    let mut r = Resolver::default();
    for line in lines {
        let op = match r.resolve(line) {
            Ok(Op::Mkfs { .. }) => continue,
            Ok(op) => op,
            Err(Unresolved::Reference(_)) => {
                r.skipped(line);
                continue;
            }
            Err(e @ Unresolved::Malformed(_)) => panic!("a malformed workload line {line}: {e}"),
        };
        if let Some(out) = l.step(sut, &op)? {
            r.observe(&op, &out);
        }
    }
    Ok(l.steps)
}

/// What to do with an operation the model calls invalid (on a view that
/// is not mounted, say).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OnInvalid {
    /// A generated workload never has one: the generator is wrong.
    Panic,
    /// A workload cut down by shrinking may have one: leave it out.
    Skip,
}

/// The model states the observations so far allow, with their promises.
pub(crate) struct Lockstep {
    pub(crate) states: Vec<(State, Promises)>,
    pub(crate) steps: Vec<Step>,
    on_invalid: OnInvalid,
    manifests: ModelManifests,
}

impl Lockstep {
    pub(crate) fn new(initial: State, on_invalid: OnInvalid) -> Self {
        Lockstep {
            states: vec![(initial, Promises::default())],
            steps: Vec::new(),
            on_invalid,
            manifests: ModelManifests::default(),
        }
    }

    /// Sends `op` (unless no state allows sending it) and checks the
    /// outcome; returns it, or `None` if the operation was not sent.
    pub(crate) fn step(&mut self, sut: &mut dyn Sut, op: &Op) -> Result<Option<Outcome>, Stop> {
        // rmcp of the latest checkpoint: the kernel's ioctl deletes it, the
        // model refuses it (a model rule, docs/model.md). Outside the
        // model, so not sent.
        if let Op::Rmcp { cno } = op {
            if self.states.iter().any(|(s, _)| s.latest().0 == *cno) {
                return Ok(None);
            }
        }
        // An operation on a snapshot mount is sent only while it is mounted
        // (a generated `mount -o cp=` may have failed): elsewhere the model
        // calls it invalid, a shell would have no such path.
        if let Some(c) = op.at() {
            if !self
                .states
                .iter()
                .all(|(s, _)| s.snapshot_mounts.contains(&c))
            {
                return Ok(None);
            }
        }
        if self.on_invalid == OnInvalid::Skip
            && self.states.iter().all(|(s, _)| {
                step(s, op)
                    .iter()
                    .all(|b| matches!(b.expect, nilfs_model::Expect::Invalid(_)))
            })
        {
            return Ok(None);
        }
        let out = sut.apply(op);
        if let Some(why) = sut.undecided() {
            return Err(Stop::Undecided(Box::new(Undecided {
                steps: self.steps.clone(),
                op: Some(op.clone()),
                why,
            })));
        }
        self.steps.push(Step {
            op: op.clone(),
            out: out.clone(),
        });
        // A real clock: the operation read it inside its interval, which
        // never starts before an earlier operation's did.
        if let Some([lo, hi]) = sut.clock_interval() {
            let clock = self.states.first().map_or(0, |(s, _)| s.clock);
            let timed: Vec<(State, Promises)> = self
                .states
                .iter()
                .filter_map(|(s, p)| Some((s.at_time(lo, hi)?, p.clone())))
                .collect();
            if timed.is_empty() {
                return Err(Stop::Diverged(Divergence {
                    what: format!("the clock went back: the call began at {lo} ns, after {clock}"),
                    steps: self.steps.clone(),
                    allowed: vec![format!("a clock interval from {clock} ns on")],
                    detail: sut.detail(),
                }));
            }
            self.states = timed;
        }
        let mut next: Vec<(State, Promises)> = Vec::new();
        let mut allowed: Vec<String> = Vec::new();
        for (s, promises) in &self.states {
            for b in step(s, op) {
                if let nilfs_model::Expect::Invalid(why) = &b.expect {
                    panic!("the generator produced an operation the model calls invalid ({why}): {op:?}");
                }
                let accepted = b.accept_all(&out);
                if accepted.is_empty() {
                    allowed.push(match &b.expect {
                        nilfs_model::Expect::Exact(o) => show(o),
                        e => format!("{e:?}"),
                    });
                }
                for n in accepted {
                    let mut p = promises.clone();
                    if let Err(law) = check_transition(s, op, &out, &n, &mut p) {
                        panic!("the model broke its own {law} on {op:?}");
                    }
                    if !next.iter().any(|(m, _)| *m == n) {
                        next.push((n, p));
                    }
                }
            }
        }
        if next.is_empty() {
            allowed.dedup();
            return Err(Stop::Diverged(Divergence {
                what: format!("observed {}", show(&out)),
                steps: self.steps.clone(),
                allowed,
                detail: sut.detail(),
            }));
        }
        assert!(
            next.len() <= MAX_STATES,
            "envelope too large: {}",
            next.len()
        );
        self.states = next;
        let mounted = self
            .states
            .iter()
            .any(|(s, _)| s.mount == Some(Mount::ReadWrite));
        if settles(op) && mounted && matches!(out, Outcome::Ok | Outcome::Cno(_)) {
            let got = match sut.durable() {
                Ok(got) => got,
                Err(why) => {
                    return Err(match sut.undecided() {
                        Some(why) => Stop::Undecided(Box::new(Undecided {
                            steps: self.steps.clone(),
                            op: None,
                            why,
                        })),
                        None => Stop::Diverged(Divergence {
                            what: format!("the durable state does not read back: {why}"),
                            steps: self.steps.clone(),
                            allowed: vec!["a readable image".into()],
                            detail: sut.detail(),
                        }),
                    })
                }
            };
            // Each state's view once (the first kept for the report).
            let manifests = &mut self.manifests;
            let want: Vec<Durable> = self
                .states
                .iter()
                .map(|(s, _)| manifests.durable(s))
                .collect();
            let mut keep = want.iter().map(|d| d.admits(&got));
            self.states.retain(|_| keep.next() == Some(true));
            if self.states.is_empty() {
                let first = &want[0];
                return Err(Stop::Diverged(Divergence {
                    what: format!(
                        "the durable state read through the read path differs: {}",
                        durable_diff(first, &got)
                    ),
                    steps: self.steps.clone(),
                    allowed: vec![format!("{first:#?}")],
                    detail: Some(format!("{got:#?}")),
                }));
            }
        }
        Ok(Some(out))
    }
}
