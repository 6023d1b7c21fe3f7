//! What a campaign found wrong, in one shape for every campaign: the
//! check that failed, the key shrinking keeps constant, the story.

use nilfs_model::Rejection;
use serde_json::Value;

/// What went wrong, in a form that shrinking can keep constant.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problem {
    /// Which check: kernel-rejected, kernel-unknown (the oracle could not
    /// decide), read-path, ours-rejected, ours-unknown, runner,
    /// ours-runner, guest, grub.
    pub class: &'static str,
    /// What must stay the same while shrinking (the rejected operation's
    /// kind and the observed outcome, say).
    pub key: String,
    /// The whole story, for the finding's folder.
    pub detail: String,
}

impl Problem {
    /// The key of a rejection: the operation's kind and the observed
    /// outcome's shape (the errno, or which kind of answer), which stay the
    /// same while shrinking changes the numbers around them.
    fn rejected(class: &'static str, r: &Rejection, trace: &str) -> Problem {
        let op: Value = serde_json::from_str(&r.op).unwrap_or(Value::Null);
        let kind = op.get("op").and_then(Value::as_str).unwrap_or("?");
        let observed: Value = serde_json::from_str(&r.observed).unwrap_or(Value::Null);
        let shape = match &observed {
            Value::String(s) => s.clone(),
            Value::Object(o) => match o.iter().next() {
                Some((k, Value::String(e))) if k == "err" => format!("err {e}"),
                Some((k, _)) => k.clone(),
                None => "?".into(),
            },
            _ => r.observed.chars().take(40).collect(),
        };
        Problem {
            class,
            key: format!("{kind} -> {shape}"),
            detail: format!("{r}\n\ntrace:\n{trace}"),
        }
    }
    /// The kernel's trace was rejected, or (`kernel-unknown`) the checker
    /// could not decide it: a bound of the oracle's, not the kernel's fault.
    pub fn kernel_rejected(r: &Rejection, trace: &str) -> Problem {
        let class = if r.is_unknown() {
            "kernel-unknown"
        } else {
            "kernel-rejected"
        };
        Problem::rejected(class, r, trace)
    }
    /// nilfs-ref's own trace was rejected (or `ours-unknown`).
    pub fn ours_rejected(r: &Rejection, trace: &str) -> Problem {
        let class = if r.is_unknown() {
            "ours-unknown"
        } else {
            "ours-rejected"
        };
        Problem::rejected(class, r, trace)
    }
    pub fn read_path(detail: impl Into<String>) -> Problem {
        let detail = detail.into();
        Problem {
            class: "read-path",
            key: detail.split(':').next().unwrap_or("").to_string(),
            detail,
        }
    }
    pub fn runner(detail: impl Into<String>) -> Problem {
        Problem {
            class: "runner",
            key: String::new(),
            detail: detail.into(),
        }
    }
    pub fn ours_runner(detail: impl Into<String>) -> Problem {
        Problem {
            class: "ours-runner",
            key: String::new(),
            detail: detail.into(),
        }
    }
    pub fn guest(detail: impl Into<String>) -> Problem {
        Problem {
            class: "guest",
            key: String::new(),
            detail: detail.into(),
        }
    }
    /// A dm-log-writes log that cannot be read (the crash campaign).
    pub fn crash_log(e: &impl std::fmt::Display) -> Problem {
        Problem {
            class: "crash-log",
            key: String::new(),
            detail: e.to_string(),
        }
    }
    /// One line for tables.
    pub fn headline(&self) -> String {
        let first = self.detail.lines().next().unwrap_or("");
        if self.key.is_empty() {
            format!("{}: {first}", self.class)
        } else {
            format!("{}: {}", self.class, self.key)
        }
    }
}

/// `class: key` (or the class alone).
pub fn problem_name(p: &Problem) -> String {
    if p.key.is_empty() {
        p.class.to_string()
    } else {
        format!("{}: {}", p.class, p.key)
    }
}

/// Problems as a verdict file has them: a headline, then the story.
pub fn verdict_text(problems: &[Problem]) -> String {
    let mut verdict = String::new();
    for p in problems {
        verdict.push_str(&format!("== {}\n{}\n\n", p.headline(), p.detail));
    }
    verdict
}

/// Where two listings part: the first line that differs, as
/// `{what} N: {want_name} "…", {got_name} "…"` (`<end>` past the end).
pub fn first_difference<S: AsRef<str>>(
    want: &[S],
    got: &[S],
    what: &str,
    (want_name, got_name): (&str, &str),
) -> String {
    let k = want
        .iter()
        .zip(got)
        .take_while(|(a, b)| a.as_ref() == b.as_ref())
        .count();
    format!(
        "{what} {}: {want_name} {:?}, {got_name} {:?}",
        k + 1,
        want.get(k).map_or("<end>", AsRef::as_ref),
        got.get(k).map_or("<end>", AsRef::as_ref)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn problem(class: &'static str, key: &str, detail: &str) -> Problem {
        Problem {
            class,
            key: key.to_string(),
            detail: detail.to_string(),
        }
    }

    /// A finding's verdict.txt: each problem's headline, then its whole
    /// story, in order.
    #[test]
    fn a_verdict_file_tells_each_problem_whole() {
        let text = verdict_text(&[
            problem("crash-envelope", "live", "state 3: outside\nnearest: /a"),
            problem("crash-recovery", "", "our recovery fails: EIO"),
        ]);
        assert_eq!(
            text,
            "== crash-envelope: live\nstate 3: outside\nnearest: /a\n\n\
             == crash-recovery: our recovery fails: EIO\nour recovery fails: EIO\n\n"
        );
    }

    /// A problem's name keys the campaigns' per-problem tables and their
    /// shrinking once per problem: problems that differ in class or key
    /// have different names, and the name reads `class: key`.
    #[test]
    fn a_problem_is_named_by_its_class_and_key() {
        let p = |class, key| problem(class, key, "the story");
        assert_eq!(
            problem_name(&p("crash-envelope", "live")),
            "crash-envelope: live"
        );
        assert_eq!(problem_name(&p("crash-recovery", "")), "crash-recovery");
        assert_ne!(
            problem_name(&p("crash-envelope", "live")),
            problem_name(&p("crash-envelope", "snapshot"))
        );
    }

    fn rejection(op: &str, observed: &str) -> Rejection {
        Rejection {
            line: 3,
            op: op.to_string(),
            allowed: vec![],
            observed: observed.to_string(),
            states: vec![],
            unknown: None,
        }
    }

    /// A problem's one line for tables: its class and key, or its class
    /// and the story's first line when it has no key.
    #[test]
    fn a_headline_is_the_class_and_the_key_or_the_first_line() {
        let p = Problem {
            class: "grub",
            key: "differs".into(),
            detail: "differs: /a\nmore".into(),
        };
        assert_eq!(p.headline(), "grub: differs");
        assert_eq!(
            Problem::runner("it broke\nbadly").headline(),
            "runner: it broke"
        );
    }

    /// Where two listings part: the first line that differs, numbered
    /// from 1, and `<end>` past the shorter one.
    #[test]
    fn first_difference_names_the_first_line_that_differs() {
        let names = ("model", "recovered");
        assert_eq!(
            first_difference(&["a", "b"], &["a", "c"], "line", names),
            r#"line 2: model "b", recovered "c""#
        );
        assert_eq!(
            first_difference(&["a"], &["a", "b"], "line", names),
            r#"line 2: model "<end>", recovered "b""#
        );
    }

    /// A rejection's key is the operation's kind and the observed answer's
    /// shape: the errno of an error, the kind of any other answer.
    #[test]
    fn a_rejections_key_is_the_operation_and_the_answers_shape() {
        let key =
            |op: &str, observed: &str| Problem::kernel_rejected(&rejection(op, observed), "").key;
        assert_eq!(
            key(r#"{"op":"unlink"}"#, r#"{"err":"ENOENT"}"#),
            "unlink -> err ENOENT"
        );
        assert_eq!(
            key(r#"{"op":"readlink"}"#, r#"{"target":"/x"}"#),
            "readlink -> target"
        );
        assert_eq!(
            key(r#"{"op":"write"}"#, r#"{"written":3}"#),
            "write -> written"
        );
        assert_eq!(key(r#"{"op":"sync"}"#, r#""ok""#), "sync -> ok");
        assert_eq!(
            Problem::kernel_rejected(&rejection("{}", "{}"), "").class,
            "kernel-rejected"
        );
    }
}
