//! Workloads: operations to run, before anybody has run them.
//!
//! A workload is a trace without outcomes (JSON Lines, one [`Op`] a line;
//! an `out` field, if present, is ignored). One thing a workload cannot
//! know in advance is a checkpoint number: the implementation chooses it,
//! and the kernel's log writer also makes checkpoints on its own timer, so
//! `chcp ss 5` written before the run may name nothing or the wrong
//! checkpoint. A workload therefore names checkpoints by reference, and the
//! runner resolves each reference from what it has observed so far:
//!
//! - `{"$mkcp": k}`: the number the k-th `mkcp` of the workload (0-based,
//!   counting `mkcp` lines in order, failed ones included) printed;
//! - `{"$lscp": i}`: entry i of the latest `lscp` output (0 = the oldest;
//!   negative from the end, -1 = the latest listed).
//!
//! A reference can stand wherever the trace format has a checkpoint number
//! (`cno`, `cp`, `at`). A line whose reference cannot be resolved (its
//! `mkcp` failed, or no `lscp` listed that many checkpoints) is not run, and
//! the observed trace simply has no line for it. The observed trace always
//! carries plain numbers, so the oracle never sees a reference.

use nilfs_model::{Cno, Op, Outcome};
use serde_json::Value;

/// The numbers observed so far that references resolve to.
#[derive(Clone, Debug, Default)]
pub struct Resolver {
    /// One entry per `mkcp` run: the number it printed, if it succeeded.
    mkcp: Vec<Option<Cno>>,
    /// The latest successful `lscp`.
    lscp: Vec<Cno>,
}

/// Why a line was not run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Unresolved {
    /// A reference names a checkpoint nothing observed.
    Reference(String),
    /// The line is not an operation of the trace format.
    Malformed(String),
}

impl std::fmt::Display for Unresolved {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Unresolved::Reference(r) => write!(f, "unresolved checkpoint reference {r}"),
            Unresolved::Malformed(m) => write!(f, "not an operation: {m}"),
        }
    }
}

impl Resolver {
    /// The operation `line` stands for, with every reference replaced.
    pub fn resolve(&self, line: &Value) -> Result<Op, Unresolved> {
        let mut v = line.clone();
        if let Some(obj) = v.as_object_mut() {
            obj.remove("out");
        }
        self.substitute(&mut v)?;
        serde_json::from_value(v).map_err(|e| Unresolved::Malformed(e.to_string()))
    }

    fn substitute(&self, v: &mut Value) -> Result<(), Unresolved> {
        match v {
            Value::Object(obj) => {
                if obj.len() == 1 {
                    if let Some(r) = self.reference(obj)? {
                        *v = Value::from(r);
                        return Ok(());
                    }
                }
                for (_, x) in obj.iter_mut() {
                    self.substitute(x)?;
                }
                Ok(())
            }
            Value::Array(a) => a.iter_mut().try_for_each(|x| self.substitute(x)),
            _ => Ok(()),
        }
    }

    /// `Some(cno)` if `obj` is a reference, `None` if it is not one.
    fn reference(&self, obj: &serde_json::Map<String, Value>) -> Result<Option<Cno>, Unresolved> {
        let (key, val) = obj.iter().next().expect("one entry");
        let list = match key.as_str() {
            "$mkcp" => None,
            "$lscp" => Some(&self.lscp),
            _ => return Ok(None),
        };
        let shown = || Unresolved::Reference(format!("{{\"{key}\": {val}}}"));
        let k = val.as_i64().ok_or_else(shown)?;
        match list {
            None => {
                let k = usize::try_from(k).map_err(|_| shown())?;
                self.mkcp
                    .get(k)
                    .copied()
                    .flatten()
                    .map(Some)
                    .ok_or_else(shown)
            }
            Some(l) => {
                let i = if k < 0 {
                    l.len().checked_sub(k.unsigned_abs() as usize)
                } else {
                    Some(k as usize)
                };
                i.and_then(|i| l.get(i))
                    .copied()
                    .map(Some)
                    .ok_or_else(shown)
            }
        }
    }

    /// What it has observed, as JSON (for a runner that hands it to
    /// another process: a concurrent run's workers).
    pub fn to_json(&self) -> Value {
        serde_json::json!({"mkcp": self.mkcp, "lscp": self.lscp})
    }

    /// A resolver that has observed what [`Resolver::to_json`] wrote.
    pub fn from_json(v: &Value) -> Option<Resolver> {
        Some(Resolver {
            mkcp: serde_json::from_value(v.get("mkcp")?.clone()).ok()?,
            lscp: serde_json::from_value(v.get("lscp")?.clone()).ok()?,
        })
    }

    /// Records what `op` returned (call it for every operation run).
    pub fn observe(&mut self, op: &Op, out: &Outcome) {
        match (op, out) {
            (Op::Mkcp { .. }, Outcome::Cno(c)) => self.mkcp.push(Some(*c)),
            (Op::Mkcp { .. }, _) => self.mkcp.push(None),
            (Op::Lscp, Outcome::Checkpoints(list)) => {
                self.lscp = list.iter().map(|e| e.cno).collect();
            }
            _ => {}
        }
    }

    /// Counts a `mkcp` line that was not run (its own references failed),
    /// so that later `$mkcp` indices still count workload lines.
    pub fn skipped(&mut self, line: &Value) {
        if line.get("op").and_then(Value::as_str) == Some("mkcp") {
            self.mkcp.push(None);
        }
    }
}

/// Parses a workload's text: its lines as JSON values with their 1-based
/// line numbers (blank lines skipped), or the first bad line and why.
pub fn parse(text: &str) -> Result<Vec<(usize, Value)>, (usize, String)> {
    let mut out = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        if raw.trim().is_empty() {
            continue;
        }
        let v: Value = serde_json::from_str(raw).map_err(|e| (i + 1, format!("not JSON: {e}")))?;
        if v.get("op").and_then(Value::as_str).is_none() {
            return Err((i + 1, "a workload line is an object with an \"op\"".into()));
        }
        out.push((i + 1, v));
    }
    if out.is_empty() {
        return Err((0, "empty workload".into()));
    }
    Ok(out)
}

/// The JSON of an operation, for writing workloads.
pub fn to_value(op: &Op) -> Value {
    serde_json::to_value(op).expect("an operation always serialises")
}

#[cfg(test)]
mod tests {
    use super::*;
    use nilfs_model::CpEntry;
    use serde_json::json;

    #[test]
    fn references_resolve_from_what_was_observed() {
        let mut r = Resolver::default();
        let chcp = json!({"op": "chcp", "cno": {"$mkcp": 1}, "snapshot": true});
        assert!(matches!(r.resolve(&chcp), Err(Unresolved::Reference(_))));
        r.observe(&Op::Mkcp { snapshot: false }, &Outcome::Cno(3));
        r.observe(&Op::Mkcp { snapshot: true }, &Outcome::Cno(9));
        assert_eq!(
            r.resolve(&chcp).unwrap(),
            Op::Chcp {
                cno: 9,
                snapshot: true
            }
        );
        let latest = json!({"op": "rmcp", "cno": {"$lscp": -1}});
        let read = json!({"op": "lstat", "path": "/a", "at": {"$lscp": 1}});
        assert!(r.resolve(&read).is_err());
        r.observe(
            &Op::Lscp,
            &Outcome::Checkpoints(vec![
                CpEntry { cno: 1, ss: false },
                CpEntry { cno: 4, ss: true },
            ]),
        );
        assert_eq!(
            r.resolve(&read).unwrap(),
            Op::Lstat {
                path: "/a".into(),
                at: Some(4)
            }
        );
        assert_eq!(r.resolve(&latest).unwrap(), Op::Rmcp { cno: 4 });
        let before_first = json!({"op": "rmcp", "cno": {"$lscp": -3}});
        assert!(r.resolve(&before_first).is_err());
    }

    #[test]
    fn a_failed_mkcp_leaves_its_references_unresolved() {
        let mut r = Resolver::default();
        r.observe(
            &Op::Mkcp { snapshot: true },
            &Outcome::Err(nilfs_model::Errno::ENOSPC),
        );
        r.skipped(&json!({"op": "mkcp"}));
        r.observe(&Op::Mkcp { snapshot: true }, &Outcome::Cno(5));
        let mount = |k: u64| json!({"op": "mount", "cp": {"$mkcp": k}, "ro": true});
        assert!(r.resolve(&mount(0)).is_err());
        assert!(r.resolve(&mount(1)).is_err());
        assert_eq!(
            r.resolve(&mount(2)).unwrap(),
            Op::Mount {
                cp: Some(5),
                ro: true
            }
        );
    }

    #[test]
    fn plain_lines_pass_and_outcomes_are_dropped() {
        let r = Resolver::default();
        let v = json!({"op": "write", "path": "/f", "offset": 0,
                       "data": {"text": "x"}, "out": {"written": 1}});
        assert!(matches!(r.resolve(&v).unwrap(), Op::Write { .. }));
        assert!(matches!(
            r.resolve(&json!({"op": "frobnicate"})),
            Err(Unresolved::Malformed(_))
        ));
    }
}
