//! `nilref oracle check TRACE`: runs a JSON Lines trace from any NILFS2
//! implementation through the model (nilfs-model) and says whether the model
//! allows it. On the first divergence the message names the line, the
//! operation, the outcomes the model allows there and the observed one.
//! A trace the checker could not decide (a search bound was hit) is
//! reported as unknown, never as rejected.

use std::path::Path;

/// A verdict in words, and which of the three it is.
#[derive(Debug, PartialEq, Eq)]
pub enum Judged {
    Accepted(String),
    Rejected(String),
    Unknown(String),
}

impl Judged {
    /// `Ok` for an accepted trace, `Err` with the report otherwise.
    pub fn into_result(self) -> Result<String, String> {
        match self {
            Judged::Accepted(s) => Ok(s),
            Judged::Rejected(s) | Judged::Unknown(s) => Err(s),
        }
    }

    /// For a shrinker: a rejection is the result wanted (exit 0, with
    /// `what` and the verdict); anything else is not.
    pub fn flip_rejection(self, what: &str) -> Judged {
        match self {
            Judged::Rejected(v) => Judged::Accepted(format!("{what}\n{v}\n")),
            Judged::Accepted(v) | Judged::Unknown(v) => {
                Judged::Rejected(format!("{what}: no longer rejected: {v}"))
            }
        }
    }

    /// `nilref oracle check`'s exit status: 0 accepted, 1 rejected, 3
    /// unknown (2 is clap's, for a bad command line).
    pub fn exit_code(&self) -> u8 {
        match self {
            Judged::Accepted(_) => 0,
            Judged::Rejected(_) => 1,
            Judged::Unknown(_) => 3,
        }
    }
}

/// The three-valued verdict on the trace at `path`: a one-thread trace,
/// or a concurrent history (some line names a worker), judged for
/// linearizability.
pub fn judge(path: &Path, opts: nilfs_model::Options) -> Judged {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) => return Judged::Rejected(format!("{}: cannot read: {e}", path.display())),
    };
    if nilfs_model::is_history(&text) {
        return judge_history(path, &text, opts);
    }
    let verdict = nilfs_model::check_trace_with(&text, opts);
    match verdict {
        Ok(v) => Judged::Accepted(format!(
            "{}: accepted: {} lines, {} model state(s) consistent with it at the end\n",
            path.display(),
            v.lines,
            v.states
        )),
        Err(r) if r.is_unknown() => Judged::Unknown(format!("{}: {r}", path.display())),
        Err(r) => Judged::Rejected(format!("{}: {r}", path.display())),
    }
}

/// A concurrent history's verdict, with what the search cost.
pub fn judge_history(path: &Path, text: &str, opts: nilfs_model::Options) -> Judged {
    match nilfs_model::check_history(text, opts) {
        Ok(v) => Judged::Accepted(format!(
            "{}: linearizable: {} lines, {} operations of {} workers; search: {} nodes, at most {} orders and {} model states at once{}\n",
            path.display(),
            v.lines,
            v.ops,
            v.workers,
            v.nodes,
            v.widest,
            v.most_states,
            if v.searched() {
                ""
            } else {
                " (real time alone ordered it)"
            }
        )),
        Err(r) if r.is_unknown() => Judged::Unknown(format!("{}: {r}", path.display())),
        Err(r) => Judged::Rejected(format!("{}: {r}", path.display())),
    }
}
