//! The model's crash envelopes along an observed trace: which states a
//! crash may leave, given how far the workload had got (the dm-log-writes
//! mark in force). It knows nothing of recoveries or images.

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;

use nilfs_model::{Rejection, State};

use crate::campaign::log_writes::END_MARK;

/// How far the workload had got when the disk was in a state, from the
/// mark in force.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Progress {
    /// Before the first mark: the lines the runner had before its first
    /// operation (`mkfs`, `mount`) were complete, nothing else had begun.
    Start,
    /// Mark `op-K`: lines 0..K complete, line K may be in flight.
    Op(usize),
    /// The end mark: every line complete.
    End,
}

impl Progress {
    pub fn of(mark: Option<&str>) -> Result<Progress, String> {
        match mark {
            None => Ok(Progress::Start),
            Some(END_MARK) => Ok(Progress::End),
            Some(m) => m
                .strip_prefix("op-")
                .and_then(|k| k.parse().ok())
                .map(Progress::Op)
                .ok_or_else(|| format!("a mark the runner does not write: {m:?}")),
        }
    }
}

/// A crashed model state with its live manifest (computed once).
pub struct Allowed {
    pub state: State,
    pub live: Vec<String>,
}

/// The model's crash envelopes along one observed trace.
pub struct Envelope {
    /// `prefix[k]`: the states after the first k lines.
    prefix: Vec<Vec<State>>,
    /// The trace's lines, for messages.
    lines: Vec<String>,
    /// Line of the first operation the runner marked (Start's prefix).
    first_marked: usize,
    crashed: RefCell<HashMap<usize, Rc<Vec<Allowed>>>>,
}

impl Envelope {
    /// From the observed trace, and the marks its log holds (the smallest
    /// `op-K` is where the runner began).
    pub fn new(trace: &str, marks: &[usize]) -> Result<Envelope, Rejection> {
        let prefix = nilfs_model::trace::trace_states(trace)?;
        let lines: Vec<String> = trace
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(str::to_string)
            .collect();
        let n = lines.len();
        Ok(Envelope {
            prefix,
            first_marked: marks.iter().copied().min().unwrap_or(n).min(n),
            lines,
            crashed: RefCell::new(HashMap::new()),
        })
    }

    /// Lines in the trace.
    pub fn len(&self) -> usize {
        self.lines.len()
    }

    /// The crash envelope after the first `k` lines (cached).
    pub fn crashed(&self, k: usize) -> Rc<Vec<Allowed>> {
        if let Some(c) = self.crashed.borrow().get(&k) {
            return c.clone();
        }
        let mut out: Vec<Allowed> = Vec::new();
        for s in &self.prefix[k] {
            for c in nilfs_model::crash(s) {
                if !out.iter().any(|a| a.state == c) {
                    let live = nilfs_model::manifest::manifest(&c.live);
                    out.push(Allowed { state: c, live });
                }
            }
        }
        let rc = Rc::new(out);
        self.crashed.borrow_mut().insert(k, rc.clone());
        rc
    }

    /// The prefixes whose crash envelope a state under `p` may be in.
    pub fn prefixes(&self, p: Progress) -> Result<Vec<usize>, String> {
        let n = self.len();
        match p {
            Progress::Start => Ok(vec![self.first_marked]),
            Progress::End => Ok(vec![n]),
            Progress::Op(k) if k < n => Ok(vec![k, k + 1]),
            Progress::Op(k) => Err(format!(
                "mark op-{k} names a line past the observed trace's {n}"
            )),
        }
    }

    /// Words for a mark: which line was in flight.
    pub fn describe(&self, p: Progress) -> String {
        match p {
            Progress::Start => format!(
                "before the first mark (lines 1..={} complete)",
                self.first_marked
            ),
            Progress::End => "after the end mark (every line complete)".into(),
            Progress::Op(k) => format!(
                "under mark op-{k}: lines 1..={k} complete, line {} in flight: {}",
                k + 1,
                self.lines.get(k).map_or("?", String::as_str)
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A trace of a fresh 1 KiB file system, mounted, then `lines`.
    fn trace(lines: &[&str]) -> String {
        let mut t = concat!(
            r#"{"op":"mkfs","block_size":1024,"blocks_per_segment":256,"nsegments":64,"out":"ok"}"#,
            "\n",
            r#"{"op":"mount","ro":false,"out":"ok"}"#,
            "\n",
        )
        .to_string();
        for l in lines {
            t.push_str(l);
            t.push('\n');
        }
        t
    }

    /// The envelope after k lines is every state a crash there may leave,
    /// each once: a file written and left pending may be lost or kept.
    #[test]
    fn the_envelope_holds_each_crash_state_once() {
        let trace = trace(&[
            r#"{"op":"create","path":"/f","out":"ok"}"#,
            r#"{"op":"clock","now":6000000000,"out":"ok"}"#,
            r#"{"op":"mkdir","path":"/d","perm":493,"out":"ok"}"#,
        ]);
        let env = Envelope::new(&trace, &[]).expect("the model accepts it");
        let all = env.crashed(env.len());
        let lives: std::collections::BTreeSet<&Vec<String>> = all.iter().map(|a| &a.live).collect();
        // Neither change, the create alone (the timer's), or both.
        assert_eq!(lives.len(), 3, "{lives:?}");
        for (i, a) in all.iter().enumerate() {
            assert!(
                all[..i].iter().all(|b| b.state != a.state),
                "state {i} twice"
            );
        }
    }

    /// A mark's words say which line was in flight.
    #[test]
    fn a_mark_is_described_by_the_line_in_flight() {
        let trace = trace(&[]);
        let env = Envelope::new(&trace, &[1]).unwrap();
        let d = env.describe(Progress::Op(1));
        assert!(
            d.contains("line 2 in flight") && d.contains(r#""op":"mount""#),
            "{d}"
        );
        assert!(env
            .describe(Progress::Start)
            .contains("lines 1..=1 complete"));
    }

    /// A mark past the trace's last line is the runner's error.
    #[test]
    fn a_mark_past_the_trace_is_an_error() {
        let trace = trace(&[]);
        let env = Envelope::new(&trace, &[]).unwrap();
        assert_eq!(env.prefixes(Progress::Op(1)), Ok(vec![1, 2]));
        assert!(env.prefixes(Progress::Op(2)).is_err());
        assert_eq!(env.prefixes(Progress::End), Ok(vec![2]));
    }

    #[test]
    fn progress_reads_the_runners_marks() {
        assert_eq!(Progress::of(None), Ok(Progress::Start));
        assert_eq!(Progress::of(Some("op-7")), Ok(Progress::Op(7)));
        assert_eq!(Progress::of(Some(END_MARK)), Ok(Progress::End));
        assert!(Progress::of(Some("op-x")).is_err());
        assert!(Progress::of(Some("mymark")).is_err());
    }
}
