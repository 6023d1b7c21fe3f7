//! An implementation behind a mount, driven an operation at a time through
//! a runner that speaks `nilref exec --stream`'s protocol: one operation
//! per line in (the model's trace format), one observed line out
//! (`{"op": …, "out": …, "t": [before, after]}`), or `{"cannot": WHY}`
//! when the runner could not run it. The runner is a child process
//! ([`Pipe::spawn`]) or anything at the other end of a pair of streams
//! ([`Pipe::over`]: the kernel guest's port, `nilfs_adapter::KernelGuest`).

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, Command, Stdio};

use nilfs_model::{Errno, Line, Op, Outcome};

/// A running stream runner: [`Pipe::call`] sends it one operation and
/// waits for what it observed.
pub struct Pipe {
    child: Option<Child>,
    to: Option<Box<dyn Write + Send>>,
    from: BufReader<Box<dyn Read + Send>>,
}

/// What the runner answered for one operation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Answer {
    /// The outcome it observed (EIO when it could not run the operation,
    /// with [`Answer::cannot`] saying why).
    pub out: Outcome,
    /// The real-time interval the call ran in, ns (see
    /// [`crate::Sut::clock_interval`]).
    pub t: Option<[i64; 2]>,
    /// Why the runner could not run it, or why its answer was unreadable:
    /// nothing was observed of the implementation. A [`crate::Sut`] over
    /// a pipe answers it from [`crate::Sut::undecided`], so that the run
    /// is undecided rather than diverged.
    pub cannot: Option<String>,
}

impl Pipe {
    /// Starts `cmd` (its stdin and stdout become the pipe; stderr is
    /// left as it is).
    pub fn spawn(mut cmd: Command) -> Result<Pipe, String> {
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .map_err(|e| format!("{cmd:?}: {e}"))?;
        let to = child.stdin.take().expect("stdin was piped");
        let from = child.stdout.take().expect("stdout was piped");
        let mut pipe = Pipe::over(from, to);
        pipe.child = Some(child);
        Ok(pipe)
    }

    /// A runner at the other end of `from` (its answers) and `to` (where
    /// the operations go). A read that times out is an answer the runner
    /// did not give.
    pub fn over(from: impl Read + Send + 'static, to: impl Write + Send + 'static) -> Pipe {
        Pipe {
            child: None,
            to: Some(Box::new(to)),
            from: BufReader::new(Box::new(from)),
        }
    }

    /// Sends one line and reads one back (without its newline).
    pub fn exchange(&mut self, request: &str) -> Result<String, String> {
        let Some(to) = self.to.as_mut() else {
            return Err("the runner's input is closed".into());
        };
        writeln!(to, "{request}")
            .and_then(|()| to.flush())
            .map_err(|e| format!("writing to the runner: {e}"))?;
        let mut reply = String::new();
        match self.from.read_line(&mut reply) {
            Ok(0) => Err("the runner ended without an answer".into()),
            Err(e) => Err(format!("reading the runner's answer: {e}")),
            Ok(_) => Ok(reply.trim_end().to_string()),
        }
    }

    /// Sends `op` and reads the runner's answer.
    pub fn call(&mut self, op: &Op) -> Answer {
        let cannot = |why: String| Answer {
            out: Outcome::Err(Errno::EIO),
            t: None,
            cannot: Some(why),
        };
        let request = serde_json::to_string(op).expect("an operation serialises");
        let reply = match self.exchange(&request) {
            Ok(r) => r,
            Err(why) => return cannot(why),
        };
        let v: serde_json::Value = match serde_json::from_str(&reply) {
            Ok(v) => v,
            Err(e) => return cannot(format!("the runner's answer {reply:?}: {e}")),
        };
        if let Some(why) = v.get("cannot") {
            return cannot(why.as_str().unwrap_or_default().to_string());
        }
        match serde_json::from_value::<Line>(v) {
            Ok(line) if line.op == *op => Answer {
                out: line.out,
                t: line.t,
                cannot: None,
            },
            Ok(line) => cannot(format!(
                "the runner answered for another operation: {}",
                line.to_json()
            )),
            Err(e) => cannot(format!("the runner's answer {reply:?}: {e}")),
        }
    }

    /// Closes the runner's input and waits for it to end (it leaves the
    /// mount, so that it can be unmounted).
    pub fn close(mut self) -> Result<(), String> {
        drop(self.to.take());
        let Some(mut child) = self.child.take() else {
            return Ok(());
        };
        let status = child.wait().map_err(|e| e.to_string())?;
        if status.success() {
            Ok(())
        } else {
            Err(format!("the stream runner ended with {status}"))
        }
    }
}

impl Drop for Pipe {
    fn drop(&mut self) {
        drop(self.to.take());
        if let Some(child) = self.child.as_mut() {
            let _ = child.wait();
        }
    }
}
