//! The oracle interface: traces and their checker.
//!
//! A trace is JSON Lines: one operation and the outcome some implementation
//! observed per line, for example
//!
//! ```text
//! {"op":"mkfs","block_size":4096,"blocks_per_segment":512,"nsegments":64,"out":"ok"}
//! {"op":"write","path":"/f","offset":0,"data":{"text":"x"},"out":{"written":1}}
//! {"op":"read","path":"/f","offset":0,"len":9,"out":{"data":{"len":1,"sha256":"2d71..."}}}
//! ```
//!
//! The first line is `mkfs`; blank lines are ignored. The checker keeps the
//! set of model states consistent with the trace so far (a crash, a cleaner
//! run, ENOSPC may leave several) and rejects the trace at the first line
//! whose observed outcome no state allows.

use crate::fs::StatInfo;
use crate::op::{Op, Outcome};
use crate::space::Geometry;
use crate::state::State;
use crate::step::{step, Expect};
use crate::time::LEGACY_WINDOW_NS;
use crate::variant::Variant;
use serde::{Deserialize, Serialize};
use std::fmt;

/// One trace line.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Line {
    #[serde(flatten)]
    pub op: Op,
    pub out: Outcome,
    /// The real-time clock just before the call and just after it (ns):
    /// the interval any time stamp the call sets lies in (`time`). A
    /// trace whose first line records one is judged with exact times;
    /// one whose first line records none is judged by the older rule, a
    /// stamp up to [`LEGACY_WINDOW_NS`] after the last `clock` line.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub t: Option<[i64; 2]>,
}

impl Line {
    /// A line without a clock interval.
    pub fn new(op: Op, out: Outcome) -> Line {
        Line { op, out, t: None }
    }

    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("a line always serialises")
    }
}

/// An accepted trace.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Verdict {
    /// Lines checked (blank lines excluded).
    pub lines: usize,
    /// Model states still consistent with the trace at its end.
    pub states: usize,
}

/// Why a trace was not accepted: the first divergence, or the line where
/// the checker gave up without deciding (`unknown`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rejection {
    /// 1-based line number (0: the trace could not be read).
    pub line: usize,
    /// The operation, as JSON.
    pub op: String,
    /// The outcomes the model allows there.
    pub allowed: Vec<String>,
    /// The outcome the trace records.
    pub observed: String,
    /// The model states the trace allowed before this line, each as its
    /// checkpoint table (see [`describe_state`]), at most 4.
    pub states: Vec<String>,
    /// Set when nothing wrong was seen but the checker could not decide:
    /// the trace is **unknown**, not rejected (exit 3 of `nilref oracle
    /// check`). `None`: a real divergence.
    pub unknown: Option<Bound>,
}

/// A search bound the checker hit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Bound {
    /// The most model states it tracks at once ([`Options::max_states`]).
    pub max_states: u32,
    /// How many the line left.
    pub reached: u32,
}

impl Rejection {
    /// A trace that could not be read at all.
    pub fn unreadable(why: String) -> Rejection {
        Rejection {
            line: 0,
            op: String::new(),
            allowed: vec!["a readable trace".into()],
            observed: why,
            states: vec![],
            unknown: None,
        }
    }

    /// The checker could not decide (a bound was hit): not a divergence.
    pub fn is_unknown(&self) -> bool {
        self.unknown.is_some()
    }
}

/// How the checker judges a trace.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Options {
    /// Judge as this release rather than the one the first line names.
    pub variant: Option<Variant>,
    /// The most model states tracked at once; a line that leaves more
    /// makes the verdict unknown (never rejected).
    pub max_states: usize,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            variant: None,
            max_states: max_states_default(),
        }
    }
}

/// [`MAX_STATES`], or `NILFS_ORACLE_MAX_STATES` from the environment.
pub fn max_states_default() -> usize {
    std::env::var("NILFS_ORACLE_MAX_STATES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(MAX_STATES)
}

impl fmt::Display for Rejection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(b) = self.unknown {
            writeln!(
                f,
                "trace unknown at line {}: not decided, nothing wrong seen so far",
                self.line
            )?;
            writeln!(f, "  operation: {}", self.op)?;
            writeln!(
                f,
                "  the line leaves {} model states; the checker tracks at most {} (raise it: --max-states N, or NILFS_ORACLE_MAX_STATES=N)",
                b.reached, b.max_states
            )?;
            return write!(f, "  observed: {}", self.observed);
        }
        writeln!(f, "trace rejected at line {}", self.line)?;
        writeln!(f, "  operation: {}", self.op)?;
        writeln!(f, "  allowed:")?;
        for a in &self.allowed {
            writeln!(f, "    {a}")?;
        }
        write!(f, "  observed: {}", self.observed)?;
        if !self.states.is_empty() {
            write!(
                f,
                "\n  model states before this line (checkpoints: cno, s = snapshot, ? = number not observed, m = minor, ~ = the cleaner may have removed it, l = learned from a listing, contents unknown, x = the latest, deleted by rmcp):"
            )?;
            for s in &self.states {
                write!(f, "\n    {s}")?;
            }
        }
        Ok(())
    }
}

/// The default bound on model states tracked at once; more makes the
/// verdict unknown.
pub const MAX_STATES: usize = 1024;

/// Checks a trace file.
pub fn check_trace(path: &std::path::Path) -> Result<Verdict, Rejection> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| Rejection::unreadable(format!("cannot read {}: {e}", path.display())))?;
    check_trace_str(&text)
}

/// Checks a trace given as text.
pub fn check_trace_str(text: &str) -> Result<Verdict, Rejection> {
    check_trace_with(text, Options::default())
}

/// Checks a trace against `variant` rather than the one its first line's
/// kernel names (a trace from one release judged as another's).
pub fn check_trace_as(text: &str, variant: Variant) -> Result<Verdict, Rejection> {
    check_trace_with(
        text,
        Options {
            variant: Some(variant),
            ..Options::default()
        },
    )
}

/// Checks a trace with explicit [`Options`].
pub fn check_trace_with(text: &str, opts: Options) -> Result<Verdict, Rejection> {
    walk_trace(text, opts, &mut |_| {}).map(|(v, _)| v)
}

/// Checks a trace and returns, with the verdict, the model states still
/// consistent with it at its end (for a judge that continues from there,
/// such as a crash envelope after the trace's last completed line).
pub fn follow_trace(text: &str) -> Result<(Verdict, Vec<State>), Rejection> {
    walk_trace(text, Options::default(), &mut |_| {})
}

/// The model states after each prefix of an accepted trace: entry `k` holds
/// the states consistent with its first `k` lines (blank lines not
/// counted), so entry 0 is empty and entry 1 is the state after `mkfs`.
/// The crash campaign builds its envelopes from them.
pub fn trace_states(text: &str) -> Result<Vec<Vec<State>>, Rejection> {
    let mut all = vec![Vec::new()];
    walk_trace(text, Options::default(), &mut |states| {
        all.push(states.to_vec())
    })?;
    Ok(all)
}

/// The checker: calls `after_line` with the states after every line;
/// returns the verdict and the states at the end.
fn walk_trace(
    text: &str,
    opts: Options,
    after_line: &mut dyn FnMut(&[State]),
) -> Result<(Verdict, Vec<State>), Rejection> {
    let mut states: Vec<State> = Vec::new();
    let mut checked = 0;
    for (i, raw) in text.lines().enumerate() {
        let lineno = i + 1;
        if raw.trim().is_empty() {
            continue;
        }
        let line: Line = serde_json::from_str(raw).map_err(|e| Rejection {
            line: lineno,
            op: raw.to_string(),
            allowed: vec!["a well-formed trace line".into()],
            observed: format!("unparsable: {e}"),
            states: vec![],
            unknown: None,
        })?;
        checked += 1;
        let reject = |allowed: Vec<String>| Rejection {
            line: lineno,
            // The operation with the clock interval its call ran in.
            op: match line.t {
                None => serde_json::to_string(&line.op).expect("serialises"),
                Some(_) => {
                    let mut v = serde_json::to_value(&line.op).expect("serialises");
                    v["t"] = serde_json::json!(line.t);
                    v.to_string()
                }
            },
            allowed,
            observed: describe(&line.out),
            states: states.iter().take(4).map(describe_state).collect(),
            unknown: None,
        };
        if states.is_empty() {
            states.push(first_state(&line, opts).map_err(reject)?);
            after_line(&states);
            continue;
        }
        let (next, allowed) = step_op(&states, &line.op, Some(&line.out), line.t, Clocks::Monotone);
        if next.is_empty() {
            return Err(reject(allowed));
        }
        if next.len() > opts.max_states {
            return Err(Rejection {
                unknown: Some(Bound {
                    max_states: opts.max_states.min(u32::MAX as usize) as u32,
                    reached: next.len().min(u32::MAX as usize) as u32,
                }),
                ..reject(vec![])
            });
        }
        states = next;
        after_line(&states);
    }
    if states.is_empty() {
        return Err(Rejection {
            line: 0,
            op: String::new(),
            allowed: vec!["mkfs".into()],
            observed: "empty trace".into(),
            states: vec![],
            unknown: None,
        });
    }
    Ok((
        Verdict {
            lines: checked,
            states: states.len(),
        },
        states,
    ))
}

/// The state a trace's first line, `mkfs`, makes.
pub(crate) fn first_state(line: &Line, opts: Options) -> Result<State, Vec<String>> {
    let Op::Mkfs {
        block_size,
        blocks_per_segment,
        nsegments,
        r_segments_percentage,
        dot_nilfs,
        clock,
        kernel,
    } = &line.op
    else {
        return Err(vec!["the first line must be mkfs".into()]);
    };
    if line.out != Outcome::Ok {
        return Err(vec![describe(&Outcome::Ok)]);
    }
    let g = Geometry {
        block_size: *block_size,
        blocks_per_segment: *blocks_per_segment,
        nsegments: *nsegments,
        r_segments_percentage: *r_segments_percentage,
    };
    let mut first = State::mkfs(g, *dot_nilfs, *clock);
    if line.t.is_none() {
        first.time_window = LEGACY_WINDOW_NS;
        first.clock_hi = first.clock + LEGACY_WINDOW_NS;
    }
    first.variant = opts.variant.unwrap_or_else(|| {
        kernel
            .as_deref()
            .map_or(Variant::Any, Variant::from_release)
    });
    Ok(first)
}

/// How a line's clock interval relates to the lines before it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Clocks {
    /// One thread of calls: each interval starts no earlier than the one
    /// before (a state whose clock is later cannot take the line).
    Monotone,
    /// Concurrent calls placed in a linearization order: each operation
    /// read the clock inside its own interval, which may start before
    /// that of an operation placed earlier (`State::at_interval`).
    Own,
}

/// The states one operation leaves from `states`, with what the model
/// allowed where the observation did not fit: each state is put at the
/// operation's clock interval, stepped, and `out` accepted; the result is
/// merged (`merge_untimed`). `out: None`, an operation whose response was
/// never seen, leaves the state of every branch.
pub(crate) fn step_op(
    states: &[State],
    op: &Op,
    out: Option<&Outcome>,
    t: Option<[i64; 2]>,
    clocks: Clocks,
) -> (Vec<State>, Vec<String>) {
    let mut next: Vec<State> = Vec::new();
    let mut allowed: Vec<String> = Vec::new();
    let mut note = |d: String| {
        if !allowed.contains(&d) {
            allowed.push(d);
        }
    };
    for s in states {
        let timed;
        let s = match (t, clocks) {
            (None, _) => s,
            (Some([lo, hi]), Clocks::Own) => {
                timed = s.at_interval(lo, hi);
                &timed
            }
            (Some([lo, hi]), Clocks::Monotone) => match s.at_time(lo, hi) {
                Some(t) => {
                    timed = t;
                    &timed
                }
                None => {
                    note(format!(
                        "a clock interval from {} on: the clock never goes back",
                        s.clock
                    ));
                    continue;
                }
            },
        };
        for b in step(s, op) {
            let accepted = match (out, &b.expect) {
                (Some(o), _) => b.accept_all(o),
                (None, Expect::Invalid(_)) => vec![],
                (None, _) => vec![b.next.clone()],
            };
            if let (true, Some(o)) = (accepted.is_empty(), out) {
                note(describe_expect(&b.expect, o));
            }
            for n in accepted {
                if !next.contains(&n) {
                    next.push(n);
                }
            }
        }
    }
    (crate::merge::merge_untimed(next), allowed)
}

/// A state's checkpoint table in one line: `1 2s 3l 5? 6m~ | mounted rw`.
pub fn describe_state(s: &State) -> String {
    let cps: Vec<String> = s
        .checkpoints
        .iter()
        .map(|(c, cp)| {
            format!(
                "{c}{}{}{}{}{}",
                if cp.snapshot { "s" } else { "" },
                if cp.bound { "" } else { "?" },
                if cp.minor { "m" } else { "" },
                if cp.may_be_gone { "~" } else { "" },
                if cp.ns.is_none() { "l" } else { "" },
            ) + if cp.removed { "x" } else { "" }
        })
        .collect();
    format!(
        "{} | {}{}",
        cps.join(" "),
        match s.mount {
            None => "not mounted",
            Some(crate::state::Mount::ReadWrite) => "mounted rw",
            Some(crate::state::Mount::ReadOnly) => "mounted ro",
        },
        if s.pending.dirty {
            ", changes pending"
        } else {
            ""
        }
    )
}

pub(crate) fn describe(o: &Outcome) -> String {
    match o {
        Outcome::Manifest(lines) => format!("manifest of {} lines", lines.len()),
        _ => serde_json::to_string(o).expect("serialises"),
    }
}

/// What a branch allows, phrased against what was observed (for manifests,
/// the first line that differs).
fn describe_expect(e: &Expect, observed: &Outcome) -> String {
    match e {
        Expect::Exact(Outcome::Manifest(want)) => {
            let got: &[String] = match observed {
                Outcome::Manifest(g) => g,
                _ => &[],
            };
            let k = want.iter().zip(got).take_while(|(a, b)| a == b).count();
            let w = want
                .get(k)
                .map_or("<end>".to_string(), |l| format!("{l:?}"));
            let g = got.get(k).map_or("<end>".to_string(), |l| format!("{l:?}"));
            format!("manifest of {} lines; first difference at manifest line {}: model {w}, observed {g}", want.len(), k + 1)
        }
        Expect::Exact(o) => describe(o),
        Expect::Stat {
            info, mtime, ctime, ..
        } => {
            let untimed = StatInfo {
                mtime: None,
                ctime: None,
                ..info.clone()
            };
            format!(
                "{} with mtime in {mtime} and ctime in {ctime}",
                describe(&Outcome::Stat(untimed))
            )
        }
        Expect::NewCno {
            latest,
            must_be_new: true,
            ..
        } => format!("{{\"cno\": n}} with n > {latest}"),
        Expect::NewCno { latest, .. } => format!("{{\"cno\": n}} with n >= {latest}"),
        Expect::Lscp => "a checkpoint list of the model's shape (see docs/model.md, lscp)".into(),
        Expect::Statfs { inodes, held } => format!(
            "a statfs of the geometry's sizes with {inodes} to {} inodes in use (see docs/model.md, statfs)",
            inodes + held
        ),
        Expect::ShortWrite { offset, data, .. } => format!(
            "{{\"written\": k}}, a short write: 0 < k < {} with offset {offset} + k on a 4 KiB page boundary",
            data.len()
        ),
        Expect::Invalid(why) => format!("nothing: {why}"),
        Expect::Unjudged(why) => format!("anything: {why}"),
    }
}
