//! Concurrent histories: several workers' operations on one mount, judged
//! for linearizability against the model.
//!
//! A history is a trace (module `trace`) whose operation lines also say
//! which worker ran them and when, on one monotonic clock shared by every
//! worker, the call was made (`call`) and its response came back (`ret`):
//!
//! ```text
//! {"op":"mkfs",...,"out":"ok","t":[..]}
//! {"op":"mount","out":"ok"}
//! {"w":0,"call":1000,"ret":1900,"op":"write","path":"/s/f",...,"out":{"written":8},"t":[..]}
//! {"w":1,"call":1200,"ret":1500,"op":"lstat","path":"/s/f","out":{"stat":{..}},"t":[..]}
//! {"op":"sync","out":"ok","t":[..]}
//! ```
//!
//! Lines without `w` are sequential: each begins after every line before
//! it returned and returns before any line after it is called (the
//! set-up, a barrier, the read-back after the workers have stopped).
//! Between two of them the worker lines form a *phase*. A line with `w`
//! and without `ret` never returned (the run stopped while the worker was
//! waiting): it may have taken effect, with any outcome the model allows,
//! or not at all.
//!
//! A phase is **linearizable** when some total order of its operations
//! respects real time (an operation that returned before another was
//! called comes first) and the sequential model accepts, step by step,
//! every observed outcome in that order. Each worker is sequential, so the
//! operations placed so far are always a prefix of each worker's list: the
//! search's "set of operations already placed" is a vector of prefix
//! lengths. The search is Wing and Gong's with Lowe's memo (each pair of a
//! placed set and a model state is explored once, as Porcupine does), run
//! breadth first: level `k` holds, for every placed set of `k` operations
//! reachable in a real-time order, the set of model states some such order
//! leaves, merged as the sequential checker merges them
//! ([`crate::merge::merge_untimed`]). The phase is linearizable exactly
//! when the last level is not empty; its states are where the history
//! goes on from, so a crash or a remount after the phase must show a state
//! that some linearization allows (durability is judged as it is for one
//! thread).
//!
//! The search never guesses. When a level holds more model states than
//! [`Options::max_states`], the verdict is unknown, with the level and the
//! number of states it reached.
//!
//! Times: every operation read the clock somewhere inside its own `t`
//! interval, but operations placed in a linearization order need not have
//! read it in that order, so each is bounded by its own interval alone
//! ([`crate::state::State::at_interval`]).
//!
//! No history is split into independent parts here: docs/model.md
//! ("Concurrent histories") says why the model's state is not a product
//! of per-path parts that no operation spans.

use crate::op::{Op, Outcome};
use crate::state::{Cno, State};
use crate::trace::{describe, describe_state, first_state, step_op, Bound, Clocks, Line, Options};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

/// One line of a history.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Event {
    /// The worker that ran it; `None` for a sequential line.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub w: Option<u32>,
    /// When it was called (ns, monotonic; worker lines only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call: Option<u64>,
    /// When its response came back; `None` for a worker line: never.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ret: Option<u64>,
    #[serde(flatten)]
    pub op: Op,
    /// What came back; `None` only when nothing did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub out: Option<Outcome>,
    /// The real-time clock interval the call ran in, as in a trace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub t: Option<[i64; 2]>,
}

impl Event {
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("an event always serialises")
    }

    /// The outcome the search must accept: `None` if the call never
    /// returned (any outcome, or no effect).
    fn observed(&self) -> Option<&Outcome> {
        match (self.w, self.ret) {
            (Some(_), None) => None,
            _ => self.out.as_ref(),
        }
    }

    fn pending(&self) -> bool {
        self.w.is_some() && self.ret.is_none()
    }
}

/// Whether `text` is a concurrent history (some line names a worker)
/// rather than a one-thread trace.
pub fn is_history(text: &str) -> bool {
    text.lines().any(|l| {
        serde_json::from_str::<serde_json::Value>(l)
            .ok()
            .is_some_and(|v| v.get("w").is_some())
    })
}

/// An accepted history, with what the search cost.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HistoryVerdict {
    /// Lines checked.
    pub lines: usize,
    /// Worker operations among them.
    pub ops: usize,
    /// Workers seen.
    pub workers: usize,
    /// Model states consistent with the history at its end.
    pub states: usize,
    /// Search size: (placed set, state set) nodes expanded, over every
    /// phase.
    pub nodes: u64,
    /// The most placed sets one level held: 1 means real time alone
    /// ordered the history, or every order but one died at once; more
    /// means the search had to keep several orders alive.
    pub widest: usize,
    /// The most model states one level held.
    pub most_states: usize,
    /// Nodes at which real time let more than one operation come next
    /// (the orders the search had to try).
    pub choices: u64,
}

impl HistoryVerdict {
    /// Whether real time alone did not order the history: the search
    /// had to try more than one operation next somewhere.
    pub fn searched(&self) -> bool {
        self.choices > 0
    }
}

/// One operation that could come next in real time, and what the model
/// allowed for it there.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stuck {
    /// 1-based line number in the history.
    pub line: usize,
    pub worker: u32,
    /// The operation, as JSON.
    pub op: String,
    pub observed: String,
    pub allowed: Vec<String>,
}

/// Why a history was not accepted, or why it was not decided.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HistoryRejection {
    /// A sequential line that no state allows (0: none; see `stuck`).
    pub line: usize,
    /// How many worker operations of the failing phase the longest real
    /// time order placed.
    pub placed: usize,
    /// The operations that could come next after such an order, none of
    /// which the model accepts there (at most 8), or the sequential line.
    pub stuck: Vec<Stuck>,
    /// Model states before that point, at most 4 (`describe_state`).
    pub states: Vec<String>,
    /// Set when nothing wrong was seen but the search hit its bound:
    /// **unknown**, not rejected.
    pub unknown: Option<Bound>,
    /// Set when the history could not be read.
    pub unreadable: Option<String>,
}

impl HistoryRejection {
    fn unreadable(line: usize, why: String) -> HistoryRejection {
        HistoryRejection {
            line,
            placed: 0,
            stuck: vec![],
            states: vec![],
            unknown: None,
            unreadable: Some(why),
        }
    }

    /// The search could not decide: not a divergence.
    pub fn is_unknown(&self) -> bool {
        self.unknown.is_some()
    }
}

impl fmt::Display for HistoryRejection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(why) = &self.unreadable {
            return write!(f, "history unreadable at line {}: {why}", self.line);
        }
        if let Some(b) = self.unknown {
            return write!(
                f,
                "history unknown after {} operations of a phase: not decided, nothing wrong seen so far\n  the search's level holds {} model states; it tracks at most {} (raise it: --max-states N, or NILFS_ORACLE_MAX_STATES=N)",
                self.placed, b.reached, b.max_states
            );
        }
        if self.line > 0 {
            writeln!(f, "history rejected at line {} (sequential)", self.line)?;
        } else {
            writeln!(
                f,
                "history not linearizable: every real-time order stops after {} operations of a phase",
                self.placed
            )?;
        }
        for s in &self.stuck {
            writeln!(f, "  line {} (worker {}): {}", s.line, s.worker, s.op)?;
            writeln!(f, "    observed: {}", s.observed)?;
            writeln!(f, "    allowed:")?;
            for a in &s.allowed {
                writeln!(f, "      {a}")?;
            }
        }
        write!(f, "  model states there:")?;
        for s in &self.states {
            write!(f, "\n    {s}")?;
        }
        Ok(())
    }
}

/// Checks a history given as text.
pub fn check_history(text: &str, opts: Options) -> Result<HistoryVerdict, HistoryRejection> {
    let mut events: Vec<(usize, Event)> = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        if raw.trim().is_empty() {
            continue;
        }
        let e: Event = serde_json::from_str(raw)
            .map_err(|e| HistoryRejection::unreadable(i + 1, format!("unparsable: {e}")))?;
        events.push((i + 1, e));
    }
    let past = unobserved_past(&events);
    let budget = space_budget(&events);
    let named = named_checkpoints(&events);
    let ageless = events
        .iter()
        .all(|(_, e)| !matches!(e.op, Op::Clean { protection_s } if protection_s > 0));
    // Set with the first state (the mkfs line): whether the whole
    // history fits ([`never_full`]).
    let mut fits = false;
    let mut verdict = HistoryVerdict {
        lines: events.len(),
        ..HistoryVerdict::default()
    };
    let mut workers: Vec<u32> = Vec::new();
    let mut states: Vec<State> = Vec::new();
    let mut phase: Vec<(usize, Event)> = Vec::new();
    for (lineno, e) in events {
        if let Some(w) = e.w {
            if !workers.contains(&w) {
                workers.push(w);
            }
            if states.is_empty() {
                return Err(HistoryRejection::unreadable(
                    lineno,
                    "the first line must be mkfs".into(),
                ));
            }
            verdict.ops += 1;
            phase.push((lineno, e));
            continue;
        }
        if !phase.is_empty() {
            states = linearize(
                &states,
                &std::mem::take(&mut phase),
                opts,
                Forget {
                    past,
                    fits,
                    ageless,
                    named: &named,
                },
                &mut verdict,
            )?;
        }
        let Some(out) = e.out.clone() else {
            return Err(HistoryRejection::unreadable(
                lineno,
                "a sequential line must record its outcome".into(),
            ));
        };
        let line = Line {
            op: e.op.clone(),
            out,
            t: e.t,
        };
        let rejected = |allowed: Vec<String>, states: &[State]| HistoryRejection {
            line: lineno,
            placed: 0,
            stuck: vec![Stuck {
                line: lineno,
                worker: 0,
                op: serde_json::to_string(&line.op).expect("serialises"),
                observed: describe(&line.out),
                allowed,
            }],
            states: states.iter().take(4).map(describe_state).collect(),
            unknown: None,
            unreadable: None,
        };
        if states.is_empty() {
            let first = first_state(&line, opts).map_err(|a| rejected(a, &[]))?;
            fits = never_full(&first, budget);
            states.push(first);
            continue;
        }
        let (next, allowed) = step_op(&states, &line.op, Some(&line.out), line.t, Clocks::Own);
        if next.is_empty() {
            return Err(rejected(allowed, &states));
        }
        if next.len() > opts.max_states {
            return Err(HistoryRejection {
                unknown: Some(bound(opts, next.len())),
                ..rejected(vec![], &states)
            });
        }
        states = next;
    }
    if !phase.is_empty() {
        let forget = Forget {
            past,
            fits,
            ageless,
            named: &named,
        };
        states = linearize(&states, &phase, opts, forget, &mut verdict)?;
    }
    if states.is_empty() {
        return Err(HistoryRejection::unreadable(0, "empty history".into()));
    }
    verdict.workers = workers.len();
    verdict.states = states.len();
    Ok(verdict)
}

fn bound(opts: Options, reached: usize) -> Bound {
    Bound {
        max_states: opts.max_states.min(u32::MAX as usize) as u32,
        reached: reached.min(u32::MAX as usize) as u32,
    }
}

/// The states every real-time order of `phase` that the model accepts
/// leaves, from `init`: the breadth-first search of the module docs.
fn linearize(
    init: &[State],
    phase: &[(usize, Event)],
    opts: Options,
    forget: Forget,
    verdict: &mut HistoryVerdict,
) -> Result<Vec<State>, HistoryRejection> {
    let Forget {
        past,
        fits,
        ageless,
        named,
    } = forget;
    // Each worker's operations, in the order it ran them.
    let mut ids: Vec<u32> = phase.iter().filter_map(|(_, e)| e.w).collect();
    ids.sort_unstable();
    ids.dedup();
    let mut events: Vec<Vec<&(usize, Event)>> = vec![Vec::new(); ids.len()];
    for le in phase {
        let w = ids
            .binary_search(&le.1.w.expect("worker lines"))
            .expect("listed");
        events[w].push(le);
    }
    for seq in &events {
        for (k, (lineno, e)) in seq.iter().enumerate() {
            let Some(call) = e.call else {
                return Err(HistoryRejection::unreadable(
                    *lineno,
                    "a worker line needs its call time".into(),
                ));
            };
            let well_formed = match (e.ret, &e.out) {
                (Some(r), Some(_)) => r >= call,
                (None, _) => k + 1 == seq.len(),
                (Some(_), None) => false,
            };
            let follows = k == 0 || seq[k - 1].1.ret.is_some_and(|r| r <= call);
            if !well_formed || !follows {
                return Err(HistoryRejection::unreadable(
                    *lineno,
                    "a worker's lines must each return (with an outcome) before its next is called; only its last may lack a response".into(),
                ));
            }
        }
    }
    // Each worker's steps: one per operation, two for those Linux carries
    // out in two (`Part`).
    let seqs: Vec<Vec<StepRef>> = events
        .iter()
        .map(|seq| {
            seq.iter()
                .flat_map(|(lineno, e)| {
                    let parts: &[Part] = if two_steps(e) {
                        &[Part::First, Part::Second]
                    } else {
                        &[Part::Whole]
                    };
                    parts.iter().map(move |&part| StepRef {
                        lineno: *lineno,
                        e,
                        part,
                    })
                })
                .collect()
        })
        .collect();
    let total: usize = seqs.iter().map(Vec::len).sum();
    // Every operation brings its own interval (else the clock a line
    // without one reads is the state's, and must be kept).
    let timed = phase.iter().all(|(_, e)| e.t.is_some());
    let mut level: BTreeMap<Key, Vec<State>> = BTreeMap::new();
    level.insert(
        (vec![0; seqs.len()], vec![Pin::None; seqs.len()]),
        init.to_vec(),
    );
    for placed in 0..total {
        let mut next: BTreeMap<Key, Vec<State>> = BTreeMap::new();
        let mut stuck: Vec<Stuck> = Vec::new();
        for ((at, pins), states) in &level {
            verdict.nodes += 1;
            let mut tried = 0;
            for (w, seq) in seqs.iter().enumerate() {
                let Some(step) = seq.get(at[w] as usize) else {
                    continue;
                };
                let e = step.e;
                // Real time: no other worker's next operation returned
                // before this one was called (that one must come first).
                let call = e.call.expect("checked");
                let blocked = seqs.iter().enumerate().any(|(v, other)| {
                    v != w
                        && other
                            .get(at[v] as usize)
                            .and_then(|f| f.e.ret)
                            .is_some_and(|r| r < call)
                });
                if blocked {
                    continue;
                }
                tried += 1;
                if tried == 2 {
                    verdict.choices += 1;
                }
                let (results, allowed) = take_step(states, step, pins[w].clone());
                if results.iter().all(|(_, after)| after.is_empty()) {
                    if stuck.len() < 8 && !stuck.iter().any(|s| s.line == step.lineno) {
                        stuck.push(Stuck {
                            line: step.lineno,
                            worker: e.w.expect("worker line"),
                            op: describe_event(e),
                            observed: e.out.as_ref().map_or("nothing".into(), describe),
                            allowed,
                        });
                    }
                    continue;
                }
                for (pin, after) in results {
                    let mut k = (at.clone(), pins.clone());
                    k.0[w] += 1;
                    k.1[w] = pin;
                    for mut s in after {
                        if timed {
                            forget_clock(&mut s);
                        }
                        if fits {
                            if past {
                                forget_past(&mut s);
                            }
                            forget_unread(&mut s, named);
                            // Far from full, no outcome depends on the
                            // estimate ([`never_full`]): states that differ
                            // only in the order their operations were
                            // charged merge.
                            s.consumed_blocks = 0;
                        }
                        if ageless {
                            forget_ages(&mut s);
                        }
                        // An inode a step holds that has no name left is
                        // gone for good (its id may be given again).
                        let mut k = k.clone();
                        for p in &mut k.1 {
                            if let Pin::Inode(id) = *p {
                                if !s.live.inodes.contains_key(&id) {
                                    *p = Pin::Gone;
                                }
                            }
                        }
                        // Renumbered, with the inodes the steps hold.
                        let map = canonical_ids(&mut s);
                        for p in &mut k.1 {
                            if let Pin::Inode(id) | Pin::Read(id, _) = p {
                                *id = map.get(id).copied().unwrap_or(*id);
                            }
                        }
                        let slot = next.entry(k).or_default();
                        if !slot.contains(&s) {
                            slot.push(s);
                        }
                    }
                }
            }
        }
        if next.is_empty() {
            return Err(HistoryRejection {
                line: 0,
                placed,
                stuck,
                states: level
                    .values()
                    .flatten()
                    .take(4)
                    .map(describe_state)
                    .collect(),
                unknown: None,
                unreadable: None,
            });
        }
        let mut held = 0;
        next.retain(|_, slot| !slot.is_empty());
        for slot in next.values_mut() {
            *slot = crate::merge::drop_subsumed(crate::merge::merge_untimed(std::mem::take(slot)));
            held += slot.len();
        }
        verdict.widest = verdict.widest.max(next.len());
        verdict.most_states = verdict.most_states.max(held);
        if held > opts.max_states {
            return Err(HistoryRejection {
                line: 0,
                placed: placed + 1,
                stuck: vec![],
                states: vec![],
                unknown: Some(bound(opts, held)),
                unreadable: None,
            });
        }
        level = next;
    }
    let mut states: Vec<State> = Vec::new();
    for s in level.into_values().flatten() {
        if !states.contains(&s) {
            states.push(s);
        }
    }
    // A later line without an interval of its own runs after the phase.
    let end = phase.iter().filter_map(|(_, e)| e.t.map(|t| t[1])).max();
    if let Some(end) = end {
        for s in &mut states {
            s.clock = end;
            s.clock_hi = end;
        }
    }
    Ok(crate::merge::merge_untimed(states))
}

/// A search node: how many steps of each worker are placed, and what each
/// worker's operation in progress holds between its two steps.
type Key = (Vec<u32>, Vec<Pin>);

/// One step of a worker.
#[derive(Clone, Copy)]
struct StepRef<'a> {
    lineno: usize,
    e: &'a Event,
    part: Part,
}

/// Which part of its operation a step is.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Part {
    /// The whole operation, at one point.
    Whole,
    /// The first of two steps (see [`two_steps`]).
    First,
    /// The second.
    Second,
}

/// What a worker's operation holds between its two steps.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Debug)]
enum Pin {
    /// Nothing: no operation in progress.
    None,
    /// The operation took effect whole at its first step; the second does
    /// nothing.
    Done,
    /// The inode the first step found (or changed), which the second acts
    /// on.
    Inode(crate::fs::Id),
    /// That inode lost its last name in between (`vfs_link`'s ENOENT).
    Gone,
    /// A read's open file and the bytes it would have read at its first
    /// step: its second step may splice them with the bytes there
    /// ([`torn_reads`]).
    Read(crate::fs::Id, std::sync::Arc<Vec<u8>>),
}

/// Whether Linux carries out `e` in two steps with other calls free to
/// run between them, where the model's operation is one:
/// - `lstat`: `vfs_statx` looks the path up (`filename_lookup`), then
///   reads the inode's attributes (`vfs_getattr`, no lock); a rename in
///   between shows the old name with the attributes the rename gave;
/// - `link`: `do_linkat` looks the old path up, then creates the new name
///   (`filename_create`), and `vfs_link` refuses an inode whose last link
///   went in between (ENOENT);
/// - `truncate`: `nilfs_setattr` changes the size (`truncate_setsize`,
///   `nilfs_truncate`), then the times (`setattr_copy`); a stat in between
///   sees the new size with the old times;
/// - `write`: `__generic_file_write_iter` sets the times first
///   (`file_modified`), then copies the bytes and moves the size
///   (`generic_perform_write`); a stat in between sees the new times with
///   the old size;
/// - `read` that returned data: `generic_file_read_iter` copies byte
///   after byte without a lock, so its bytes are those at its start up to
///   some offset and those at its end from there on ([`torn_reads`]).
///
/// Each may also take effect whole at its first step.
///
/// A write or a truncate that never returned is two steps as well, and
/// may have stopped after its first: a write waits in
/// `nilfs_transaction_begin` (from `nilfs_write_begin`) after
/// `file_modified` while the cleaner holds the write freeze, and a run may
/// end there. A stat or a link that never returned showed nothing, and a
/// read that never returned read nothing, so they stay one step.
fn two_steps(e: &Event) -> bool {
    match (&e.op, &e.out) {
        (Op::Truncate { at: None, .. } | Op::Write { at: None, .. }, _) => true,
        (Op::Lstat { at: None, .. } | Op::Link { at: None, .. }, Some(_)) => true,
        (Op::Read { at: None, .. }, Some(Outcome::Data { len, .. })) => *len > 0,
        _ => false,
    }
}

/// A read's first step: the open file and the bytes the read would return
/// there.
fn read_start(s: &State, e: &Event) -> Option<(crate::fs::Id, std::sync::Arc<Vec<u8>>)> {
    let Op::Read {
        path, offset, len, ..
    } = &e.op
    else {
        return None;
    };
    let id = s.live.lookup(path, true).ok()?;
    let bytes = read_open(&s.live, id, *offset, *len)?;
    Some((id, std::sync::Arc::new(bytes)))
}

/// The bytes a read of open file `id` returns in `ns`.
fn read_open(
    ns: &crate::fs::Namespace,
    id: crate::fs::Id,
    offset: u64,
    len: u64,
) -> Option<Vec<u8>> {
    match &ns.inodes.get(&id)?.kind {
        crate::fs::Kind::File(f) => Some(crate::fs::read_data(f, offset, len)),
        _ => None,
    }
}

/// Whether the read's observed bytes are those at its first step
/// (`before`) up to some offset and those in `s` from there on: a read
/// torn by writes that landed while it copied (finding F2).
/// `generic_file_read_iter` copies page after page, and within a page
/// byte after byte, with neither the inode lock nor the lock of an
/// up-to-date page, reading `i_size` anew for each batch of pages; so each
/// byte is read at its own moment, in offset order, and the length is
/// the size at one of them. With two points, the bytes read at the first
/// and those read at the second, that is one cut: the splice is checked
/// at every offset where the two differ (cuts between two such offsets
/// give the same bytes), with the length of either. Three or more
/// distinct moments are not described (a read torn by three writes in
/// turn is rejected).
fn torn_reads(s: &State, e: &Event, id: crate::fs::Id, before: &[u8]) -> bool {
    let (Op::Read { offset, len, .. }, Some(Outcome::Data { len: got, sha256 })) = (&e.op, &e.out)
    else {
        return false;
    };
    let Some(after) = read_open(&s.live, id, *offset, *len) else {
        return false;
    };
    let got = *got as usize;
    if got != before.len() && got != after.len() {
        return false;
    }
    // Every offset where the two differ: a cut at any other gives the
    // bytes of the cut at the next of these, or at `got`.
    let n = got.max(before.len()).max(after.len());
    let byte = |v: &[u8], i: usize| v.get(i).copied();
    let mut cuts = vec![0, got];
    cuts.extend(
        (0..n)
            .filter(|&i| byte(before, i) != byte(&after, i))
            .map(|i| i.min(got)),
    );
    cuts.sort_unstable();
    cuts.dedup();
    // Bytes [0, cut) as at the first step, [cut, got) as now.
    cuts.iter().any(|&cut| {
        if cut > before.len() || (cut < got && got > after.len()) {
            return false;
        }
        let mut spliced = before[..cut].to_vec();
        if cut < got {
            spliced.extend_from_slice(&after[cut..got]);
        }
        crate::pattern::sha256_hex(&spliced) == *sha256
    })
}

/// The states one step leaves, by what its worker holds after it, and
/// what the model allowed where the observation did not fit.
fn take_step(states: &[State], step: &StepRef, pin: Pin) -> (Vec<(Pin, Vec<State>)>, Vec<String>) {
    let e = step.e;
    let whole = |states: &[State]| {
        let (mut after, allowed) = step_op(states, &e.op, e.observed(), e.t, Clocks::Own);
        if e.pending() {
            // Or it never took effect.
            for s in states {
                if !after.contains(s) {
                    after.push(s.clone());
                }
            }
        }
        (after, allowed)
    };
    match step.part {
        Part::Whole => {
            let (after, allowed) = whole(states);
            (vec![(Pin::None, after)], allowed)
        }
        Part::First => {
            // Whole here, or its first half.
            let (done, allowed) = whole(states);
            let mut out = vec![(Pin::Done, done)];
            let mut halves: BTreeMap<Pin, Vec<State>> = BTreeMap::new();
            for s in states {
                if let Some((id, n)) = first_half(s, e) {
                    halves.entry(Pin::Inode(id)).or_default().push(n);
                }
                if let Some((id, bytes)) = read_start(s, e) {
                    halves
                        .entry(Pin::Read(id, bytes))
                        .or_default()
                        .push(s.clone());
                }
            }
            out.extend(halves);
            (out, allowed)
        }
        Part::Second => match pin {
            Pin::Done => (vec![(Pin::None, states.to_vec())], vec![]),
            Pin::None => (vec![], vec![]),
            Pin::Gone => {
                let enoent = Outcome::Err(crate::fs::Errno::ENOENT);
                match (&e.op, &e.out) {
                    (Op::Link { .. }, Some(o)) if *o == enoent => {
                        (vec![(Pin::None, states.to_vec())], vec![])
                    }
                    // A truncate's times on an inode nobody can name.
                    (Op::Truncate { .. }, _) => (vec![(Pin::None, states.to_vec())], vec![]),
                    _ => (vec![], vec!["an inode with a name left".into()]),
                }
            }
            Pin::Read(id, before) => {
                let after: Vec<State> = states
                    .iter()
                    .filter(|s| torn_reads(s, e, id, &before))
                    .cloned()
                    .collect();
                let why = if after.is_empty() {
                    vec!["no splice of the bytes at its start and later".into()]
                } else {
                    vec![]
                };
                (vec![(Pin::None, after)], why)
            }
            Pin::Inode(id) => {
                let mut after = Vec::new();
                let mut allowed = Vec::new();
                for s in states {
                    let (a, why) = second_half(s, e, id);
                    after.extend(a);
                    allowed.extend(why);
                    // Never returned: it may have stopped between its
                    // steps for good.
                    if e.pending() && !after.contains(s) {
                        after.push(s.clone());
                    }
                }
                (vec![(Pin::None, after)], allowed)
            }
        },
    }
}

/// The first half of a two-step operation in `s`: the inode its path
/// names (no effect yet), or for a truncate the state with the new size
/// and the old times. `None` when the path names nothing (then only the
/// whole operation, at the first step, can have been observed).
fn first_half(s: &State, e: &Event) -> Option<(crate::fs::Id, State)> {
    match &e.op {
        Op::Lstat { path, .. } => Some((s.live.lookup(path, false).ok()?, s.clone())),
        Op::Link { old, .. } => Some((s.live.lookup(old, false).ok()?, s.clone())),
        Op::Truncate { path, .. } => {
            if !matches!(e.out, None | Some(Outcome::Ok)) {
                return None;
            }
            // The new size, the old times.
            let (id, whole) = whole_changing_times(s, e, path)?;
            Some((id, with_times_of(&whole, s, id)?))
        }
        Op::Write { path, .. } => {
            // The new times alone.
            let (id, whole) = whole_changing_times(s, e, path)?;
            Some((id, with_times_of(s, &whole, id)?))
        }
        _ => None,
    }
}

/// The inode `path` names in `s`, and the state the whole operation `e`
/// leaves, when that operation changes the inode's times (`None` when it
/// does not: one step then says it all).
fn whole_changing_times(s: &State, e: &Event, path: &str) -> Option<(crate::fs::Id, State)> {
    let id = s.live.lookup(path, true).ok()?;
    let (after, _) = step_op(
        std::slice::from_ref(s),
        &e.op,
        e.observed(),
        e.t,
        Clocks::Own,
    );
    let whole = after.into_iter().next()?;
    let (old, new) = (s.live.inodes.get(&id)?, whole.live.inodes.get(&id)?);
    ((old.mtime, old.ctime) != (new.mtime, new.ctime)).then_some((id, whole))
}

/// `into` with inode `id`'s mtime and ctime taken from `from`.
fn with_times_of(into: &State, from: &State, id: crate::fs::Id) -> Option<State> {
    let times = from.live.inodes.get(&id)?;
    let mut ino = into.live.inodes.get(&id)?.clone();
    ino.mtime = times.mtime;
    ino.ctime = times.ctime;
    let mut n = into.clone();
    n.live.inodes.insert(id, ino);
    Some(n)
}

/// The second half, on the inode the first found, with what the model
/// allowed there if the observation does not fit.
fn second_half(s: &State, e: &Event, id: crate::fs::Id) -> (Vec<State>, Vec<String>) {
    let at = |op: Op| step_op(std::slice::from_ref(s), &op, e.observed(), e.t, Clocks::Own);
    match &e.op {
        // The attributes of that inode now, under any of its names.
        Op::Lstat { .. } => match path_of(&s.live, id) {
            Some(path) => at(Op::Lstat { path, at: None }),
            None => (vec![], vec!["an inode with a name left".into()]),
        },
        Op::Link { new, .. } => match path_of(&s.live, id) {
            Some(old) => at(Op::Link {
                old,
                new: new.clone(),
                at: None,
            }),
            // Its last name went: vfs_link's ENOENT.
            None if e.out == Some(Outcome::Err(crate::fs::Errno::ENOENT)) => {
                (vec![s.clone()], vec![])
            }
            None => (
                vec![],
                vec![describe(&Outcome::Err(crate::fs::Errno::ENOENT))],
            ),
        },
        // The bytes and the size (the times again, in the same interval).
        Op::Write { .. } => at(e.op.clone()),
        // The times, set in the call's interval.
        Op::Truncate { .. } => {
            let mut n = s.clone();
            let Some(mut ino) = n.live.inodes.get(&id).cloned() else {
                return (vec![s.clone()], vec![]);
            };
            let [lo, hi] = e.t.unwrap_or([s.clock, s.clock_hi]);
            ino.mtime = crate::time::Stamp::between(lo, hi);
            ino.ctime = crate::time::Stamp::between(lo, hi);
            n.live.inodes.insert(id, ino);
            (vec![n], vec![])
        }
        _ => (vec![], vec![]),
    }
}

/// A path naming inode `id` in `ns` (the first by name, depth first).
fn path_of(ns: &crate::fs::Namespace, id: crate::fs::Id) -> Option<String> {
    use crate::fs::{Kind, ROOT};
    if id == ROOT {
        return Some("/".into());
    }
    let mut stack: Vec<(crate::fs::Id, String)> = vec![(ROOT, String::new())];
    while let Some((d, prefix)) = stack.pop() {
        let Some(Kind::Dir { entries, .. }) = ns.inodes.get(&d).map(|i| &i.kind) else {
            continue;
        };
        for (name, child) in entries.iter() {
            let p = format!("{prefix}/{name}");
            if *child == id {
                return Some(p);
            }
            stack.push((*child, p));
        }
    }
    None
}

/// Whether nothing in the history can observe the past: no line lists,
/// makes, changes or removes checkpoints, reads a snapshot, asks statfs or
/// crashes. (A cleaner pass may run: what it removes and moves shows only
/// in those, and in the space it uses, which [`space_budget`] counts.)
fn unobserved_past(events: &[(usize, Event)]) -> bool {
    !events.iter().any(|(_, e)| {
        matches!(
            e.op,
            Op::Crash
                | Op::Lscp
                | Op::Mkcp { .. }
                | Op::Chcp { .. }
                | Op::Rmcp { .. }
                | Op::Statfs { .. }
                | Op::Mount { cp: Some(_), .. }
                | Op::Umount { cp: Some(_) }
        ) || e.op.at().is_some()
    })
}

/// What the search may forget of each state it reaches, because no line
/// of the history can observe it (each piece argued at its function).
#[derive(Clone, Copy)]
struct Forget<'a> {
    /// Nothing observes durability at all ([`unobserved_past`]).
    past: bool,
    /// The whole history fits on the device ([`never_full`]).
    fits: bool,
    /// No cleaner pass protects checkpoints by age ([`forget_ages`]).
    ageless: bool,
    /// The checkpoint numbers the lines name ([`named_checkpoints`]).
    named: &'a Named,
}

/// When checkpoints were made, forgotten. A checkpoint's creation time
/// decides only whether a cleaner pass with a protection period may
/// remove it (`step::checkpoint::clean`; `-p 0` may remove every plain
/// checkpoint but the latest, whatever its age) and, through the nearest
/// bound checkpoint, the time given to one learned from a listing, which
/// again only such a pass reads. With no such pass in the history no
/// outcome depends on it, and orders that made the same checkpoints at
/// different moments leave one state.
fn forget_ages(s: &mut State) {
    let ageless = |t: &imbl::OrdMap<Cno, crate::state::Checkpoint>| {
        t.iter()
            .map(|(c, cp)| {
                let mut cp = cp.clone();
                cp.created = 0;
                (*c, cp)
            })
            .collect()
    };
    if s.checkpoints.values().any(|cp| cp.created != 0) {
        s.checkpoints = ageless(&s.checkpoints);
    }
    if let Some(t) = &s.pending.table_at_construction {
        if t.values().any(|cp| cp.created != 0) {
            s.pending.table_at_construction = Some(ageless(t));
        }
    }
}

/// The checkpoint numbers the history's lines name, by what they do.
#[derive(Default)]
struct Named {
    /// Mounted, unmounted or read in: the only checkpoints whose contents
    /// an outcome can show. (`lscp`, `chcp`, `rmcp` and the cleaner see a
    /// checkpoint's number, mode and age, never what it holds; a crash and
    /// a mount of the latest show the latest alone.)
    read: BTreeSet<Cno>,
    /// Made snapshots by `chcp ss`.
    to_snapshot: BTreeSet<Cno>,
    /// Made plain by `chcp cp`.
    to_plain: BTreeSet<Cno>,
}

fn named_checkpoints(events: &[(usize, Event)]) -> Named {
    let mut n = Named::default();
    for (_, e) in events {
        match e.op {
            Op::Mount { cp: Some(c), .. } | Op::Umount { cp: Some(c) } => {
                n.read.insert(c);
            }
            Op::Chcp {
                cno,
                snapshot: true,
            } => {
                n.to_snapshot.insert(cno);
            }
            Op::Chcp {
                cno,
                snapshot: false,
            } => {
                n.to_plain.insert(cno);
            }
            _ => n.read.extend(e.op.at()),
        }
    }
    n
}

/// What no line can observe of the checkpoints, forgotten.
///
/// The contents. The model keeps what every checkpoint holds so that a
/// snapshot mounted later reads back exactly; but a checkpoint other than
/// the latest shows its contents only through a mount of its number
/// (a crash returns to the latest alone), and only while it is a
/// snapshot (`mount -o cp=` of a plain checkpoint is EINVAL). So one
/// whose number no line reads, or that is plain and that no `chcp ss`
/// names, becomes one of unknown contents, as if learned from a listing,
/// which the model treats as allowing any reading (and never reads).
///
/// The MINOR flag of a snapshot. `lscp` hides a minor checkpoint only
/// while it is plain, so a snapshot's flag is read only after a `chcp cp`
/// of its number; with none in the history it is cleared.
///
/// A checkpoint whose number is not yet bound may turn out to be any
/// number at or above its own (the kernel's timer makes checkpoints the
/// model does not count) and below the next bound one's (a listing binds
/// checkpoints in order); each test above asks whether a named number
/// lies in that range. This is done in the live table and in the one a
/// crash may restore. The contents also count towards what a cleaner
/// pass may move (the space estimate), so the caller does this only when
/// the history fits ([`never_full`]), where no outcome depends on the
/// estimate. Two workers' operations placed in either order around a
/// `mkcp` leave checkpoints that differ in what they hold; forgotten, the
/// states merge.
fn forget_unread(s: &mut State, named: &Named) {
    let blank = |table: &mut imbl::OrdMap<Cno, crate::state::Checkpoint>| {
        let Some((latest, _)) = table.get_max().map(|(c, cp)| (*c, cp.clone())) else {
            return;
        };
        let mut changes: Vec<(Cno, bool, bool)> = Vec::new();
        for (c, cp) in table.iter() {
            let end = if cp.bound {
                c + 1
            } else {
                table
                    .range(c + 1..)
                    .find(|(_, o)| o.bound)
                    .map_or(Cno::MAX, |(b, _)| *b)
            };
            let names = |set: &BTreeSet<Cno>| set.range(*c..end).next().is_some();
            let readable = names(&named.read) && (cp.snapshot || names(&named.to_snapshot));
            let blank = *c != latest && cp.ns.is_some() && !readable;
            let unminor = cp.snapshot && cp.minor && !names(&named.to_plain);
            if blank || unminor {
                changes.push((*c, blank, unminor));
            }
        }
        for (c, blank, unminor) in changes {
            if let Some(cp) = table.get_mut(&c) {
                if blank {
                    cp.ns = None;
                }
                if unminor {
                    cp.minor = false;
                }
            }
        }
    };
    blank(&mut s.checkpoints);
    if let Some(t) = &mut s.pending.table_at_construction {
        blank(t);
    }
}

/// An upper bound on the blocks the model can charge the whole history
/// (`consumed_blocks`), in whatever order its operations are placed:
/// - each line what the model charges a change (`State::modified`): a
///   write's blocks (`Geometry::blocks_for`, at the smallest block size,
///   512 bytes), a truncate's one page, or a namespace operation's
///   metadata (`META_OP_BLOCKS`). A truncate is charged one block, but a
///   cut inside a page makes a new page that every cleaner pass moves,
///   so the line counts that page;
/// - each line that may construct two checkpoints (`CHECKPOINT_BLOCKS`):
///   its own construction and one the log writer's timer may have made
///   before it (`sync_file`'s timer branch). Only lines that change
///   names, data or attributes, or only read, never construct; every
///   other line (sync, fsync, mkcp, chcp, rmcp, unmount, remount, the
///   cleaner, and any added later) is counted as one that does;
/// - each `lscp` a checkpoint for every entry it lists (checkpoints the
///   model learns from a listing, which a cleaner pass counts);
/// - each cleaner pass what it may move (`cleaner_moves`): every page,
///   inode and checkpoint that exists, at most all of the above, so the
///   sum is multiplied by one more than the number of passes.
fn space_budget(events: &[(usize, Event)]) -> u64 {
    use crate::space::{CHECKPOINT_BLOCKS, META_OP_BLOCKS};
    let mut budget = 0u64;
    let mut cleaner_passes = 0u64;
    for (_, e) in events {
        if matches!(e.op, Op::Clean { .. }) {
            cleaner_passes += 1;
        }
        let data = match &e.op {
            Op::Write { data, .. } => data.len(),
            // At most one new page: the tail a cut zeroes. Growing
            // makes none, so the new size does not count.
            Op::Truncate { .. } => crate::fs::PAGE,
            _ => 0,
        };
        let blocks = data.div_ceil(512);
        let constructs = match (&e.op, &e.out) {
            (Op::Lscp, Some(Outcome::Checkpoints(list))) => list.len() as u64,
            (Op::Lscp, _) => 0,
            (op, _) if never_constructs(op) => 0,
            _ => 2,
        };
        budget = budget
            .saturating_add(blocks + blocks.div_ceil(32) + 1 + META_OP_BLOCKS)
            .saturating_add(constructs.saturating_mul(CHECKPOINT_BLOCKS));
    }
    budget.saturating_mul(1 + cleaner_passes)
}

/// The lines that change names, data or attributes, or only read: none
/// makes a construction (`State::modified` only marks the change pending).
fn never_constructs(op: &Op) -> bool {
    op.is_change()
        || matches!(
            op,
            Op::Read { .. }
                | Op::Lstat { .. }
                | Op::Setxattr { .. }
                | Op::Getxattr { .. }
                | Op::Listxattr { .. }
                | Op::Removexattr { .. }
                | Op::Statfs { .. }
                | Op::Readdir { .. }
                | Op::Readlink { .. }
                | Op::Manifest { .. }
                | Op::Clock { .. }
        )
}

/// Whether no line of the history can meet ENOSPC, in any order and
/// however the model charges it: every state the history reaches has an
/// estimate of at most the first state's plus the whole budget
/// ([`space_budget`]), and the model allows ENOSPC only past the usable
/// blocks (`Geometry::may_enospc`). When it holds, the estimate decides no
/// outcome, and neither does anything it is computed from; the search may
/// then forget it ([`forget_past`], [`forget_unread`], and the estimate
/// itself). The estimates it forgets are only ever lower than the true
/// ones, which stay under the usable blocks by this bound.
fn never_full(first: &State, budget: u64) -> bool {
    first.consumed_blocks.saturating_add(budget) < first.geometry.usable_blocks()
}

/// The past no later line can observe, forgotten. With no crash and no
/// look at checkpoints, snapshots or free space, what a state says about
/// durability (the checkpoint table, what is pending since the latest
/// construction, the space estimate) decides no outcome: the operations
/// left (names, data, attributes, fsync, sync, a clean unmount and a
/// mount of the latest, which shows the live namespace) answer from the
/// live namespace and the mount alone, and the model allows ENOSPC only
/// near a full device. So when the history fits ([`never_full`]) a state
/// becomes the state with the same live namespace just after a
/// construction: one checkpoint, number 1, showing the live namespace;
/// nothing pending; no blocks counted. States that differ only in their
/// pasts then merge, and the search keeps one state per live namespace
/// instead of one per sequence of constructions. A history that may fill
/// the device keeps every past.
fn forget_past(s: &mut State) {
    if s.mount != Some(crate::state::Mount::ReadWrite) || !s.snapshot_mounts.is_empty() {
        return;
    }
    let latest = crate::state::Checkpoint {
        ns: Some(s.live.clone()),
        snapshot: false,
        created: 0,
        bound: false,
        may_be_gone: false,
        minor: false,
        removed: false,
    };
    s.checkpoints = imbl::OrdMap::unit(1, latest);
    s.next_cno = 2;
    s.pending = crate::state::Pending::default();
    s.consumed_blocks = 0;
}

/// The state with its inodes renumbered in one order fixed by names
/// alone. The model's inode ids are the order in which inodes were made,
/// which no outcome shows (a stat reports no inode number), so two
/// workers' creations in either order leave states that differ only in
/// their ids; renumbered, they are equal. The order: the live namespace
/// walked from the root, depth first by name; then each checkpoint's
/// namespace, in checkpoint order; then the namespaces pending since the
/// latest construction; then any id left, in its old order. One map is
/// applied everywhere an id appears (every namespace, the pending sets,
/// the data-only logs), so the renumbered state is the same state under
/// other names.
fn canonical_ids(s: &mut State) -> BTreeMap<crate::fs::Id, crate::fs::Id> {
    use crate::fs::{Id, Kind, Namespace, ROOT};
    let mut order: Vec<Id> = Vec::new();
    let mut seen = std::collections::BTreeSet::new();
    let mut walk = |ns: &Namespace, order: &mut Vec<Id>| {
        let mut stack = vec![ROOT];
        while let Some(id) = stack.pop() {
            if !seen.insert(id) {
                continue;
            }
            order.push(id);
            if let Some(Kind::Dir { entries, .. }) = ns.inodes.get(&id).map(|i| &i.kind) {
                // Reversed, so the smallest name is walked first.
                stack.extend(entries.values().rev().copied());
            }
        }
        for id in ns.inodes.keys() {
            if seen.insert(*id) {
                order.push(*id);
            }
        }
    };
    walk(&s.live, &mut order);
    for cp in s.checkpoints.values() {
        if let Some(ns) = &cp.ns {
            walk(ns, &mut order);
        }
    }
    for ns in s.pending.history.iter() {
        walk(ns, &mut order);
    }
    // The file system's own ids (the root and mkfs's) keep their numbers.
    let fixed = |id: Id| id <= ROOT;
    let mut next = ROOT;
    let mut map: BTreeMap<Id, Id> = BTreeMap::new();
    for id in order {
        if fixed(id) {
            map.insert(id, id);
        } else {
            next += 1;
            map.insert(id, next);
        }
    }
    let identity = map.iter().all(|(a, b)| a == b);
    let renamed: BTreeMap<Id, Id> = if identity {
        BTreeMap::new()
    } else {
        map.clone()
    };
    let m = |id: Id| map.get(&id).copied().unwrap_or(id);
    let renumber = |ns: &Namespace| -> Namespace {
        if identity {
            return ns.clone();
        }
        let mut out = Namespace {
            inodes: imbl::OrdMap::new(),
            next_id: ns.next_id,
        };
        for (id, ino) in ns.inodes.iter() {
            let mut ino = ino.clone();
            if let Kind::Dir { entries, parent } = &ino.kind {
                ino.kind = Kind::Dir {
                    entries: entries.iter().map(|(n, e)| (n.clone(), m(*e))).collect(),
                    parent: m(*parent),
                };
            }
            out.inodes.insert(m(*id), ino);
        }
        out
    };
    // Fresh ids stay fresh: past every id any namespace holds (and the
    // same in every namespace, whichever order made them).
    let fresh = next + 1;
    let with_next = |mut ns: Namespace| {
        ns.next_id = fresh;
        ns
    };
    s.live = with_next(renumber(&s.live));
    s.checkpoints = s
        .checkpoints
        .iter()
        .map(|(c, cp)| {
            let mut cp = cp.clone();
            cp.ns = cp.ns.as_ref().map(|ns| with_next(renumber(ns)));
            (*c, cp)
        })
        .collect();
    s.pending.history = s
        .pending
        .history
        .iter()
        .map(|ns| with_next(renumber(ns)))
        .collect();
    s.pending.dirty_inodes = s.pending.dirty_inodes.iter().map(|i| m(*i)).collect();
    s.pending.inode_sync = s.pending.inode_sync.iter().map(|i| m(*i)).collect();
    s.pending.dsync = s
        .pending
        .dsync
        .iter()
        .map(|d| {
            let mut d = d.clone();
            d.id = m(d.id);
            d
        })
        .collect();
    renamed
}

/// Each operation of a history reads the clock in its own interval
/// (`State::at_interval` sets both ends), so the clock an operation
/// leaves is never read again: cleared, it no longer keeps apart states
/// that differ only in which operation came last.
fn forget_clock(s: &mut State) {
    s.clock = 0;
    s.clock_hi = 0;
}

/// An event's operation with its times, as JSON.
fn describe_event(e: &Event) -> String {
    let mut v = serde_json::to_value(&e.op).expect("serialises");
    if let Some(t) = e.t {
        v["t"] = serde_json::json!(t);
    }
    v["call"] = serde_json::json!(e.call);
    v["ret"] = serde_json::json!(e.ret);
    v.to_string()
}

#[cfg(test)]
mod tests {
    use super::{space_budget, Event};
    use crate::trace::{first_state, step_op, Clocks, Line, Options};

    /// An lscp constructs nothing: one whose listing was never seen (a
    /// worker's call that did not return) is charged like a read, and
    /// one that listed checkpoints a checkpoint for each (postmortem:
    /// model shard 10/16, the `(Op::Lscp, _)` arm deleted, charged the
    /// first two constructions; only the search's state count would
    /// show it, on a device small enough).
    #[test]
    fn an_lscp_is_charged_what_it_lists_and_no_construction() {
        let budget = |line: &str| {
            let e: Event = serde_json::from_str(line).expect("a line parses");
            space_budget(&[(1, e)])
        };
        let read = budget(r#"{"op":"readdir","path":"/","out":{"names":[]}}"#);
        assert_eq!(budget(r#"{"w":0,"call":1,"op":"lscp"}"#), read);
        let listed = budget(
            r#"{"op":"lscp","out":{"checkpoints":[{"cno":1,"ss":false},{"cno":2,"ss":false}]}}"#,
        );
        assert_eq!(listed, read + 2 * crate::space::CHECKPOINT_BLOCKS);
    }

    /// The budget's promise ([`space_budget`]): no state the history
    /// reaches, by any branch, has an estimate past the first state's
    /// plus the budget. The history makes the most pages a line can make
    /// for the least it is charged: each truncate cuts one byte off a
    /// page, which makes a new page (the zeroed tail) that the sync after
    /// it keeps in a checkpoint, and every cleaner pass at the end moves
    /// all of them again. At 1 KiB blocks a page is four blocks a pass.
    #[test]
    fn no_state_a_history_reaches_has_spent_past_its_budget() {
        const FILES: usize = 200;
        const ROUNDS: u64 = 30;
        const PASSES: usize = 16;
        let mut lines = vec![
            r#"{"op":"mkfs","block_size":1024,"blocks_per_segment":2048,"nsegments":4096,"r_segments_percentage":5,"dot_nilfs":false,"clock":0,"out":"ok"}"#.to_string(),
            r#"{"op":"mount","ro":false,"out":"ok"}"#.to_string(),
        ];
        for f in 0..FILES {
            lines.push(format!(
                r#"{{"op":"create","path":"/f{f}","perm":420,"excl":false,"out":"ok"}}"#
            ));
            lines.push(format!(
                r#"{{"op":"write","path":"/f{f}","offset":0,"data":{{"zeros":4096}},"out":{{"written":4096}}}}"#
            ));
        }
        for r in 1..=ROUNDS {
            for f in 0..FILES {
                lines.push(format!(
                    r#"{{"op":"truncate","path":"/f{f}","size":{},"out":"ok"}}"#,
                    4096 - r
                ));
            }
            lines.push(r#"{"op":"sync","out":"ok"}"#.to_string());
        }
        for _ in 0..PASSES {
            lines.push(r#"{"op":"clean","protection_s":0,"out":"ok"}"#.to_string());
        }
        let events: Vec<(usize, Event)> = lines
            .iter()
            .enumerate()
            .map(|(i, l)| (i + 1, serde_json::from_str(l).expect("a line parses")))
            .collect();
        let budget = space_budget(&events);
        let (_, mkfs) = &events[0];
        let line = Line {
            op: mkfs.op.clone(),
            out: mkfs.out.clone().expect("mkfs has an outcome"),
            t: None,
        };
        let first = first_state(&line, Options::default()).expect("mkfs");
        let limit = first.consumed_blocks + budget;
        assert!(
            !first.geometry.may_enospc(limit, 0),
            "the device must hold the budget, or ENOSPC branches stop the walk"
        );
        let mut states = vec![first];
        let mut most = 0;
        for (n, e) in &events[1..] {
            let (next, _) = step_op(&states, &e.op, None, None, Clocks::Own);
            assert!(!next.is_empty(), "line {n} leaves no state");
            most = next
                .iter()
                .map(|s| s.consumed_blocks)
                .max()
                .unwrap_or(0)
                .max(most);
            states = next;
        }
        assert!(
            most <= limit,
            "a state spent {most} blocks, past the first state's and the budget's {limit}"
        );
    }
}
