//! Bounded-exhaustive check of the model's laws (nilfs_model::laws).
//!
//! Every operation sequence of length <= 4 over a small alphabet — two
//! names and one directory, small writes (one crossing a page), sync,
//! fsync/fdatasync, checkpoint, snapshot, rmcp/chcp, the cleaner, a
//! read-only snapshot mount with a write attempt, crash (+ remount) — is
//! run through the model from a freshly mounted file system, following
//! every branch the model allows, and every law is checked on every
//! transition. A mutant run shows that each law catches a broken model.

use nilfs_model::laws::{check_transition, Promises};
use nilfs_model::{step, Op, Outcome, State};
use nilfs_model::{Geometry, Pattern};

const DEPTH: usize = 4;

fn alphabet() -> Vec<Vec<Op>> {
    let p = |s: &str| s.to_string();
    let write = |path: &str, offset: u64, data: Pattern| Op::Write {
        append: false,
        path: p(path),
        offset,
        data,
        at: None,
    };
    vec![
        vec![Op::Mkdir {
            path: p("/d"),
            perm: 0o755,
            at: None,
        }],
        vec![Op::Create {
            path: p("/a"),
            perm: 0o644,
            excl: false,
            at: None,
        }],
        vec![Op::Create {
            path: p("/d/b"),
            perm: 0o644,
            excl: true,
            at: None,
        }],
        vec![write("/a", 0, Pattern::Text(p("xy")))],
        vec![write("/a", 0, Pattern::Text(p("zw")))],
        vec![write("/a", 4090, Pattern::Seeded { seed: 1, len: 12 })],
        vec![Op::Truncate {
            path: p("/a"),
            size: 1,
            at: None,
        }],
        vec![Op::Rename {
            noreplace: false,
            exchange: false,
            old: p("/a"),
            new: p("/d/b"),
            at: None,
        }],
        vec![Op::Rename {
            noreplace: false,
            exchange: false,
            old: p("/d"),
            new: p("/d/b"),
            at: None,
        }],
        vec![Op::Link {
            old: p("/a"),
            new: p("/d/b"),
            at: None,
        }],
        vec![Op::Unlink {
            path: p("/a"),
            at: None,
        }],
        vec![Op::Rmdir {
            path: p("/d"),
            at: None,
        }],
        vec![Op::Fsync {
            path: p("/a"),
            at: None,
        }],
        vec![Op::Fdatasync {
            path: p("/a"),
            at: None,
        }],
        vec![Op::Sync],
        vec![Op::Mkcp { snapshot: false }],
        vec![Op::Mkcp { snapshot: true }],
        vec![Op::Rmcp { cno: 2 }],
        vec![Op::Chcp {
            cno: 2,
            snapshot: false,
        }],
        vec![Op::Clean { protection_s: 0 }],
        vec![
            Op::Mount {
                cp: Some(2),
                ro: true,
            },
            Op::Write {
                append: false,
                path: p("/a"),
                offset: 0,
                data: Pattern::Text(p("z")),
                at: Some(2),
            },
        ],
        vec![
            Op::Crash,
            Op::Mount {
                cp: None,
                ro: false,
            },
        ],
    ]
}

/// A deliberately broken model: each variant breaks one law.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mutant {
    None,
    /// A new checkpoint's namespace is shared with later changes.
    CheckpointFollowsLive,
    /// rmcp removes snapshots.
    SnapshotRemovable,
    /// Writes to a read-only snapshot mount succeed.
    RoWritable,
    /// The cleaner drops the newest file.
    CleanLosesFile,
    /// Writes land one byte off.
    WriteOffByOne,
    /// Crash recovery ignores the SYNDT logs (fdatasync'd data lost).
    NoRollForward,
}

/// `step`, then the mutant's damage, as (outcome, next) pairs.
fn run(m: Mutant, s: &State, op: &Op) -> Vec<(Outcome, State)> {
    let mut s_in = s.clone();
    if m == Mutant::NoRollForward && matches!(op, Op::Crash) {
        s_in.pending.dsync = Default::default();
    }
    let mut out: Vec<(Outcome, State)> = step(&s_in, op)
        .iter()
        .filter_map(|b| b.predicted())
        .collect();
    for (o, n) in out.iter_mut() {
        match (m, op) {
            (Mutant::CheckpointFollowsLive, Op::Write { .. })
                if matches!(o, Outcome::Written(_)) =>
            {
                let (c, _) = n.latest();
                if c > 1 {
                    n.checkpoints.get_mut(&c).unwrap().ns = Some(n.live.clone());
                }
            }
            (Mutant::SnapshotRemovable, Op::Rmcp { cno })
                if s.checkpoints.get(cno).is_some_and(|c| c.snapshot) =>
            {
                n.checkpoints.remove(cno);
                *o = Outcome::Ok;
            }
            (Mutant::RoWritable, Op::Write { at: Some(_), .. }) => *o = Outcome::Written(1),
            (Mutant::CleanLosesFile, Op::Clean { .. }) => {
                if let Ok(ns) = n.live.unlink("/a", n.now()) {
                    n.live = ns;
                }
            }
            (
                Mutant::WriteOffByOne,
                Op::Write {
                    path,
                    offset,
                    data,
                    append: false,
                    at: None,
                },
            ) if matches!(o, Outcome::Written(_)) => {
                if let Ok((ns, _)) = s.live.write(path, offset + 1, data, s.now()) {
                    n.live = ns;
                }
            }
            _ => {}
        }
    }
    out
}

/// Explores every sequence up to DEPTH; returns (transitions checked, first
/// law violation with its sequence).
fn explore(m: Mutant) -> (u64, Option<String>) {
    let g = Geometry {
        block_size: 4096,
        blocks_per_segment: 512,
        nsegments: 64,
        r_segments_percentage: 5,
    };
    let first = |s: &State, op: Op| step(s, &op)[0].predicted().unwrap().1;
    // Two roots: a fresh file system, and one whose checkpoint already
    // holds /a = "xy" and /d (so overwrites in place, fdatasync's data-only
    // logs and their roll-forward are within reach of 4 operations).
    let fresh = first(
        &State::mkfs(g, false, 0),
        Op::Mount {
            cp: None,
            ro: false,
        },
    );
    let mut populated = first(
        &fresh,
        Op::Create {
            path: "/a".into(),
            perm: 0o644,
            excl: false,
            at: None,
        },
    );
    let xy = Pattern::Text("xy".into());
    populated = first(
        &populated,
        Op::Write {
            append: false,
            path: "/a".into(),
            offset: 0,
            data: xy,
            at: None,
        },
    );
    populated = first(
        &populated,
        Op::Mkdir {
            path: "/d".into(),
            perm: 0o755,
            at: None,
        },
    );
    populated = first(&populated, Op::Sync);
    let letters = alphabet();
    let mut count = 0;
    let mut stack: Vec<(State, Promises, Vec<usize>)> = vec![
        (fresh, Promises::default(), vec![]),
        (populated, Promises::default(), vec![]),
    ];
    while let Some((s, promises, seq)) = stack.pop() {
        if seq.len() == DEPTH {
            continue;
        }
        for (li, letter) in letters.iter().enumerate() {
            let mut frontier = vec![(s.clone(), promises.clone())];
            for op in letter {
                let mut next = Vec::new();
                for (st, pr) in &frontier {
                    for (o, n) in run(m, st, op) {
                        let mut pr2 = pr.clone();
                        count += 1;
                        if let Err(e) = check_transition(st, op, &o, &n, &mut pr2) {
                            let mut path = seq.clone();
                            path.push(li);
                            return (count, Some(format!("{e}\n  letters {path:?}")));
                        }
                        next.push((n, pr2));
                    }
                }
                frontier = next;
            }
            let mut path = seq.clone();
            path.push(li);
            for (n, pr) in frontier {
                stack.push((n, pr, path.clone()));
            }
        }
    }
    (count, None)
}

#[test]
fn every_law_holds_on_every_sequence_up_to_length_4() {
    let t = std::time::Instant::now();
    let (n, bad) = explore(Mutant::None);
    assert!(bad.is_none(), "{}", bad.unwrap());
    assert!(n > 100_000, "explored only {n} transitions");
    eprintln!("model_exhaustive: {n} transitions in {:?}", t.elapsed());
}

#[test]
fn each_law_catches_its_mutant() {
    for (m, law) in [
        (Mutant::CheckpointFollowsLive, "law 1"),
        (Mutant::SnapshotRemovable, "law 2"),
        (Mutant::RoWritable, "law 4"),
        (Mutant::CleanLosesFile, "law 5"),
        (Mutant::WriteOffByOne, "law 6"),
        (Mutant::NoRollForward, "law 7"),
    ] {
        let (_, bad) = explore(m);
        let bad = bad.unwrap_or_else(|| panic!("{m:?} was not caught"));
        assert!(bad.starts_with(law), "{m:?} caught by the wrong law: {bad}");
    }
}
