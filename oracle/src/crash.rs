//! The crash envelope over a device that records writes.
//!
//! [`check_crashes`] runs a workload once in lockstep on a fresh image whose
//! device gives every block write to a [`WriteLog`]; then, for every prefix
//! of the writes after the format (a power cut after the k-th write, the
//! device completing writes in order), it builds that image, has the
//! implementation open and mount it ([`Implementation::open`]), and
//! requires the durable state it shows to be one the model's crash
//! envelope allows: the states after the operations that completed, and
//! each outcome of the one in flight, each through a crash and a mount
//! ([`envelope`]). Nothing synced or fsync'd may be lost, nothing
//! half-done may show.

use std::fmt;
use std::sync::{Arc, Mutex};

use nilfs_model::{step, Op, Outcome, State};

use crate::lockstep::{Divergence, Lockstep, ModelManifests, OnInvalid, Stop, Undecided};
use crate::sut::{Durable, ImageSpec, Implementation, NS};

/// The block writes a device received, in order. Cloning shares the log:
/// give a clone to the device and keep one.
#[derive(Clone, Debug, Default)]
pub struct WriteLog(Arc<Mutex<Writes>>);

/// Each write's byte offset and data.
type Writes = Vec<(u64, Vec<u8>)>;

impl WriteLog {
    /// Record a write of `data` at byte offset `offset`.
    pub fn write(&self, offset: u64, data: &[u8]) {
        self.lock().push((offset, data.to_vec()));
    }

    /// The number of writes recorded.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// Whether no write has been recorded.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Writes> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Apply write `k` (counted from 0) to `image`; a write past the end
    /// is cut at it.
    fn apply(&self, k: usize, image: &mut [u8]) {
        let log = self.lock();
        let (off, data) = &log[k];
        let start = (*off).min(image.len() as u64) as usize;
        let end = start.saturating_add(data.len()).min(image.len());
        image[start..end].copy_from_slice(&data[..end - start]);
    }
}

/// The durable states the model allows after a crash at this point and a
/// mount: from the states after the completed operations, and (the one
/// in flight may have taken effect) from each of its outcomes; `durable`
/// makes the model's durable view of a state.
pub fn envelope(
    model: &[State],
    in_flight: Option<&Op>,
    durable: &mut dyn FnMut(&State) -> Durable,
) -> Vec<Durable> {
    let mut before: Vec<State> = model.to_vec();
    if let Some(op) = in_flight {
        for s in model {
            for b in step(s, op) {
                if !before.contains(&b.next) {
                    before.push(b.next);
                }
            }
        }
    }
    let mount = Op::Mount {
        cp: None,
        ro: false,
    };
    let mut out = Vec::new();
    for s in &before {
        for c in step(s, &Op::Crash) {
            for m in step(&c.next, &mount) {
                if m.accept(&Outcome::Ok).is_some() {
                    let d = durable(&m.next);
                    if !out.contains(&d) {
                        out.push(d);
                    }
                }
            }
        }
    }
    out
}

/// What [`check_crashes`] judged.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CrashReport {
    /// Block writes after the format: one crash state each, and the one
    /// with none.
    pub writes: usize,
    /// Distinct durable states the crash states showed.
    pub distinct: usize,
}

/// Why [`check_crashes`] failed.
#[derive(Clone, Debug)]
pub enum CrashFailure {
    /// The implementation could not make or open an image.
    Setup(String),
    /// The workload diverged before any crash.
    Lockstep(Divergence),
    /// The harness could not observe the implementation (before a cut,
    /// or in the state after one): no verdict.
    Undecided(Box<Undecided>),
    /// The state after a cut is outside the envelope.
    Outside {
        /// Writes after the format that reached the device.
        writes: usize,
        /// Operations that had completed; the next one was in flight.
        completed: usize,
        /// The workload.
        ops: Vec<Op>,
        /// What the implementation showed (or why it showed nothing).
        got: Result<Durable, String>,
        /// The first durable state the model allowed.
        allowed: Option<Durable>,
    },
}

impl fmt::Display for CrashFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CrashFailure::Setup(e) => write!(f, "crash check: {e}"),
            CrashFailure::Lockstep(d) => write!(f, "crash check, before any cut: {d}"),
            CrashFailure::Undecided(u) => write!(f, "crash check: {u}"),
            CrashFailure::Outside {
                writes,
                completed,
                ops,
                got,
                allowed,
            } => {
                writeln!(
                    f,
                    "a power cut after {writes} block writes of the workload ({completed} operations completed) left a state outside the model's crash envelope"
                )?;
                writeln!(f, "workload (JSON Lines):")?;
                for (i, op) in ops.iter().enumerate() {
                    let mark = if i == *completed {
                        "  <- in flight"
                    } else {
                        ""
                    };
                    let line = serde_json::to_string(op).expect("an operation serialises");
                    writeln!(f, "  {line}{mark}")?;
                }
                match got {
                    Ok(d) => writeln!(f, "after the crash and a mount: {d:#?}")?,
                    Err(e) => writeln!(f, "after the crash, no durable state: {e}")?,
                }
                if let Some(a) = allowed {
                    writeln!(f, "the model allowed, among others: {a:#?}")?;
                }
                Ok(())
            }
        }
    }
}

/// Runs `ops` (mounting first is up to them) on a fresh image of `spec`
/// whose writes are recorded, then judges the state after every power cut
/// between two writes, as the module documentation says.
pub fn check_crashes(
    imp: &mut dyn Implementation,
    spec: &ImageSpec,
    ops: &[Op],
) -> Result<CrashReport, Box<CrashFailure>> {
    let log = WriteLog::default();
    let (geometry, mut sut) = imp
        .format(spec, Some(&log))
        .map_err(|e| Box::new(CrashFailure::Setup(e)))?;
    let formatted = log.len();
    let initial = State::mkfs(geometry, true, spec.ctime as i64 * NS);
    let mut l = Lockstep::new(initial.clone(), OnInvalid::Skip);
    // After operation i: the writes so far and the model's states.
    let mut after: Vec<(usize, Vec<State>)> = Vec::new();
    for op in ops {
        l.step(&mut *sut, op).map_err(|stop| {
            Box::new(match stop {
                Stop::Diverged(d) => CrashFailure::Lockstep(d),
                Stop::Undecided(u) => CrashFailure::Undecided(u),
            })
        })?;
        after.push((log.len(), l.states.iter().map(|(s, _)| s.clone()).collect()));
    }
    drop(sut);
    let total = log.len();
    let mut image = vec![0u8; spec.device_bytes as usize];
    for k in 0..formatted {
        log.apply(k, &mut image);
    }
    let mut manifests = ModelManifests::default();
    let mut seen: Vec<Durable> = Vec::new();
    for k in formatted..=total {
        if k > formatted {
            log.apply(k - 1, &mut image);
        }
        let completed = after.iter().take_while(|(w, _)| *w <= k).count();
        let model = match completed {
            0 => vec![initial.clone()],
            n => after[n - 1].1.clone(),
        };
        let allowed = envelope(&model, ops.get(completed), &mut |s| manifests.durable(s));
        let got = match recover(imp, &image) {
            Recovered::Durable(d) => Ok(d),
            Recovered::Refused(why) => Err(why),
            Recovered::Undecided(why) => {
                return Err(Box::new(CrashFailure::Undecided(Box::new(Undecided {
                    steps: Vec::new(),
                    op: Some(Op::Mount {
                        cp: None,
                        ro: false,
                    }),
                    why: format!(
                        "after a power cut at write {} of the workload: {why}",
                        k - formatted
                    ),
                }))))
            }
        };
        let inside = got
            .as_ref()
            .is_ok_and(|g| allowed.iter().any(|a| a.admits(g)));
        if !inside {
            return Err(Box::new(CrashFailure::Outside {
                writes: k - formatted,
                completed,
                ops: ops.to_vec(),
                got,
                allowed: allowed.into_iter().next(),
            }));
        }
        let got = got.expect("inside");
        if !seen.contains(&got) {
            seen.push(got);
        }
    }
    Ok(CrashReport {
        writes: total - formatted,
        distinct: seen.len(),
    })
}

/// What an implementation showed of a crash state.
enum Recovered {
    /// Its durable state after a mount.
    Durable(Durable),
    /// It did not mount the image, or its durable state does not read
    /// back: outside every envelope.
    Refused(String),
    /// The harness could not observe it ([`crate::Sut::undecided`]).
    Undecided(String),
}

/// The implementation's durable state of `image` after a mount.
fn recover(imp: &mut dyn Implementation, image: &[u8]) -> Recovered {
    let mut sut = match imp.open(image) {
        Ok(sut) => sut,
        Err(why) => return Recovered::Refused(why),
    };
    let mount = Op::Mount {
        cp: None,
        ro: false,
    };
    let out = sut.apply(&mount);
    if let Some(why) = sut.undecided() {
        return Recovered::Undecided(why);
    }
    if out != Outcome::Ok {
        return Recovered::Refused(format!(
            "mount answered {out:?}{}",
            sut.detail().map(|d| format!(" ({d})")).unwrap_or_default()
        ));
    }
    match sut.durable() {
        Ok(d) => Recovered::Durable(d),
        Err(why) => match sut.undecided() {
            Some(why) => Recovered::Undecided(why),
            None => Recovered::Refused(why),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::{envelope, WriteLog};
    use crate::lockstep::model_durable;
    use nilfs_model::{step, Geometry, Op, State};

    /// The operation in flight at the cut may have reached the disk: the
    /// envelope holds what it leaves too. Here an `rmcp` of an old
    /// checkpoint, which no crash of the state before it can lose.
    /// Postmortem (judge-oracle 2/4: `!before.contains` as
    /// `before.contains`, which took none of the in-flight operation's
    /// states).
    #[test]
    fn the_envelope_holds_what_the_operation_in_flight_leaves() {
        let g = Geometry {
            block_size: 4096,
            blocks_per_segment: 512,
            nsegments: 64,
            r_segments_percentage: 5,
        };
        let create = |p: &str| Op::Create {
            path: p.into(),
            perm: 0o644,
            excl: false,
            at: None,
        };
        let mut s = State::mkfs(g, false, 0);
        for op in [
            Op::Mount {
                cp: None,
                ro: false,
            },
            create("/f"),
            Op::Sync,
            create("/g"),
            Op::Sync,
        ] {
            s = step(&s, &op)[0].predicted().expect("predicted").1;
        }
        assert!(s.checkpoints.contains_key(&2));
        let before = envelope(std::slice::from_ref(&s), None, &mut model_durable);
        let rmcp = Op::Rmcp { cno: 2 };
        let during = envelope(std::slice::from_ref(&s), Some(&rmcp), &mut model_durable);
        assert!(before.iter().all(|d| during.contains(d)));
        assert!(before.iter().all(|d| d.checkpoints.contains_key(&2)));
        assert!(
            during.iter().any(|d| !d.checkpoints.contains_key(&2)),
            "{during:?}"
        );
    }

    /// A clone shares the log: what the device's copy records, the kept
    /// one counts.
    #[test]
    fn a_write_log_counts_the_writes_of_its_clones() {
        let log = WriteLog::default();
        assert!(log.is_empty());
        log.clone().write(512, &[1, 2, 3]);
        assert_eq!(log.len(), 1);
        assert!(!log.is_empty());
        let mut image = [0u8; 516];
        log.apply(0, &mut image);
        assert_eq!(&image[511..516], &[0, 1, 2, 3, 0]);
    }
}
