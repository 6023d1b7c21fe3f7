//! scenario-gc.sh as a trace, and the model's agreement with the kernel.
//!
//! `scenario_trace()` below is the program that writes
//! model/traces/scenario-gc.jsonl: it follows
//! tests/guest/scenario-gc.sh command by command (same
//! names, sizes, awk `blk` blocks, LCG offsets) and records as outcomes what
//! the Linux 6.1 kernel showed in tests/fixtures/kernel-6.1
//! (scenario-gc-128M.manifest and .scenario.log): the snapshot's cno, the
//! lscp listings, the manifests, and whole-file reads whose sha256 the
//! manifests give. Everything else succeeded (the script runs under
//! `set -e`). Regenerate the committed file with
//! `NILFS_MODEL_BLESS=1 cargo test -p nilfs-model --test scenario_gc`.

use nilfs_model::{check_trace_str, manifest::manifest, Geometry, Line, Pattern};
use nilfs_model::{step, CpEntry, Op, Outcome, State};
use std::path::PathBuf;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The kernel-written fixture's manifest (tests/fixtures/kernel-6.1).
fn fixture() -> String {
    nilfs_testkit::fixture::read(nilfs_testkit::fixture::manifest())
}

/// The kernel-written fixture's scenario log.
fn scenario_log() -> String {
    nilfs_testkit::fixture::read(nilfs_testkit::fixture::scenario_log())
}

/// The lines of the fixture section that starts with `header`.
fn section(text: &str, header: &str) -> Vec<String> {
    text.lines()
        .skip_while(|l| !l.starts_with(header))
        .skip(1)
        .take_while(|l| !l.starts_with("=="))
        .map(str::to_string)
        .collect()
}

/// An lscp table (after its header line) as entries.
fn lscp_entries(lines: &[String]) -> Vec<CpEntry> {
    lines
        .iter()
        .skip(1)
        .map_while(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let cno = f.first()?.parse().ok()?;
            Some(CpEntry {
                cno,
                ss: f.get(3) == Some(&"ss"),
            })
        })
        .collect()
}

fn latest_manifest() -> Vec<String> {
    section(&fixture(), "== manifest (latest checkpoint)")
}
fn snapshot_manifest() -> Vec<String> {
    section(&fixture(), "== manifest (snapshot cno=4)")
}

fn blk(tag: &str, first: u64, count: u64) -> Pattern {
    Pattern::Blk {
        tag: tag.into(),
        first,
        count,
        len: None,
    }
}

/// Whole-file reads of every regular file of a manifest: length and sha256
/// as the kernel's manifest.sh saw them.
fn reads(m: &[String], at: Option<u64>, t: &mut Vec<Line>) {
    for l in m {
        let f: Vec<&str> = l.splitn(3, "  ").collect();
        if f[0].len() == 64 {
            let len: u64 = f[1].parse().unwrap();
            let op = Op::Read {
                path: f[2].to_string(),
                offset: 0,
                len,
                at,
            };
            t.push(Line {
                op,
                out: Outcome::Data {
                    len,
                    sha256: f[0].to_string(),
                },
                t: None,
            });
        }
    }
}

/// scenario-gc.sh, command by command.
pub fn scenario_trace() -> Vec<Line> {
    let mut t: Vec<Line> = Vec::new();
    let ok = |t: &mut Vec<Line>, op: Op| {
        t.push(Line {
            op,
            out: Outcome::Ok,
            t: None,
        })
    };
    let create = |t: &mut Vec<Line>, p: &str| {
        t.push(Line {
            op: Op::Create {
                path: p.into(),
                perm: 0o644,
                excl: false,
                at: None,
            },
            out: Outcome::Ok,
            t: None,
        })
    };
    let write = |t: &mut Vec<Line>, p: &str, offset: u64, data: Pattern| {
        let n = data.len();
        t.push(Line {
            op: Op::Write {
                append: false,
                path: p.into(),
                offset,
                data,
                at: None,
            },
            out: Outcome::Written(n),
            t: None,
        })
    };
    // mkimage.sh x.img 128M -B 512 (mkfs.nilfs2 -b 4096 -B 512, nilfs-utils 2.2.9)
    ok(
        &mut t,
        Op::Mkfs {
            block_size: 4096,
            blocks_per_segment: 512,
            nsegments: 64,
            r_segments_percentage: 5,
            dot_nilfs: true,
            clock: 0,
            kernel: None,
        },
    );
    ok(
        &mut t,
        Op::Mount {
            cp: None,
            ro: false,
        },
    );
    // --- populate
    for d in ["/d1", "/d1/d2", "/d1/d2/d3", "/many", "/empty-dir"] {
        ok(
            &mut t,
            Op::Mkdir {
                path: d.into(),
                perm: 0o755,
                at: None,
            },
        );
    }
    create(&mut t, "/zero");
    create(&mut t, "/one");
    write(&mut t, "/one", 0, Pattern::Text("x".into()));
    for n in [4095u64, 4096, 4097, 28672, 28673, 32768, 65539, 1048576] {
        let p = format!("/size-{n}");
        create(&mut t, &p);
        write(
            &mut t,
            &p,
            0,
            Pattern::Blk {
                tag: format!("s{n}"),
                first: 0,
                count: n.div_ceil(4096),
                len: Some(n),
            },
        );
    }
    create(&mut t, "/big");
    write(&mut t, "/big", 0, blk("big", 0, 8192));
    create(&mut t, "/big2");
    write(&mut t, "/big2", 0, blk("big2", 0, 3072));
    create(&mut t, "/d1/d2/d3/leaf");
    write(
        &mut t,
        "/d1/d2/d3/leaf",
        0,
        Pattern::Text("nested file\n".into()),
    );
    for i in 0..300 {
        let p = format!("/many/file-{i}");
        create(&mut t, &p);
        write(&mut t, &p, 0, Pattern::Text(format!("entry {i}\n")));
    }
    ok(
        &mut t,
        Op::Symlink {
            target: "d1/d2/d3/leaf".into(),
            path: "/symlink".into(),
            at: None,
        },
    );
    ok(
        &mut t,
        Op::Symlink {
            target: "size-4096".into(),
            path: "/good-link".into(),
            at: None,
        },
    );
    ok(
        &mut t,
        Op::Link {
            old: "/size-4097".into(),
            new: "/hardlink".into(),
            at: None,
        },
    );
    create(&mut t, &format!("/{}", "L".repeat(255)));
    let mut s: u64 = 12345;
    for i in 0..200 {
        s = (s * 1103515245 + 12345) % 2147483648;
        let off = s % 4096;
        create(&mut t, "/rand"); // dd opens without O_TRUNC
        write(&mut t, "/rand", off * 4096, blk(&format!("rnd{i}"), off, 1));
    }
    for i in 0..20u64 {
        create(&mut t, "/rand");
        write(
            &mut t,
            "/rand",
            i * 40961 + 7,
            Pattern::Text(format!("unaligned-{i}")),
        );
    }
    ok(&mut t, Op::Sync);
    t.push(Line {
        op: Op::Mkcp { snapshot: true },
        out: Outcome::Cno(4),
        t: None,
    });
    t.push(Line {
        op: Op::Manifest { at: None },
        out: Outcome::Manifest(snapshot_manifest()),
        t: None,
    });
    // --- churn
    ok(
        &mut t,
        Op::Unlink {
            path: "/big2".into(),
            at: None,
        },
    );
    ok(
        &mut t,
        Op::Unlink {
            path: "/size-1048576".into(),
            at: None,
        },
    );
    for i in 0..300 {
        ok(
            &mut t,
            Op::Unlink {
                path: format!("/many/file-{i}"),
                at: None,
            },
        );
    }
    ok(
        &mut t,
        Op::Rmdir {
            path: "/many".into(),
            at: None,
        },
    );
    create(&mut t, "/new");
    write(&mut t, "/new", 0, blk("new", 0, 2048));
    create(&mut t, "/rand");
    write(&mut t, "/rand", 100 * 4096, blk("ovw", 100, 50));
    ok(
        &mut t,
        Op::Truncate {
            path: "/size-65539".into(),
            size: 5000,
            at: None,
        },
    );
    ok(
        &mut t,
        Op::Rename {
            noreplace: false,
            exchange: false,
            old: "/d1/d2/d3/leaf".into(),
            new: "/d1/moved-leaf".into(),
            at: None,
        },
    );
    ok(&mut t, Op::Sync);
    ok(&mut t, Op::Mkcp { snapshot: false });
    ok(
        &mut t,
        Op::Unlink {
            path: "/new".into(),
            at: None,
        },
    );
    ok(&mut t, Op::Sync);
    ok(&mut t, Op::Mkcp { snapshot: false });
    for i in 0..16u64 {
        for name in ["keep", "drop"] {
            let p = format!("/{name}");
            create(&mut t, &p); // >> appends: the offset is the size so far
            write(&mut t, &p, i * 64 * 4096, blk(name, i * 64, 64));
        }
        ok(&mut t, Op::Sync);
    }
    ok(
        &mut t,
        Op::Unlink {
            path: "/drop".into(),
            at: None,
        },
    );
    ok(&mut t, Op::Sync);
    ok(&mut t, Op::Mkcp { snapshot: false });
    let log = scenario_log();
    let before: Vec<String> = section(&log, "== before GC");
    t.push(Line {
        op: Op::Lscp,
        out: Outcome::Checkpoints(lscp_entries(&before)),
        t: None,
    });
    t.push(Line {
        op: Op::Manifest { at: None },
        out: Outcome::Manifest(latest_manifest()),
        t: None,
    });
    // --- garbage collection (nilfs_cleanerd -p 0; nilfs-clean -p 0)
    ok(&mut t, Op::Clean { protection_s: 0 });
    ok(&mut t, Op::Sync);
    let after = section(&fixture(), "== lscp");
    t.push(Line {
        op: Op::Lscp,
        out: Outcome::Checkpoints(lscp_entries(&after)),
        t: None,
    });
    t.push(Line {
        op: Op::Manifest { at: None },
        out: Outcome::Manifest(latest_manifest()),
        t: None,
    });
    reads(&latest_manifest(), None, &mut t);
    ok(
        &mut t,
        Op::Mount {
            cp: Some(4),
            ro: true,
        },
    );
    t.push(Line {
        op: Op::Manifest { at: Some(4) },
        out: Outcome::Manifest(snapshot_manifest()),
        t: None,
    });
    reads(&snapshot_manifest()[..3], Some(4), &mut t);
    ok(&mut t, Op::Umount { cp: Some(4) });
    ok(&mut t, Op::Umount { cp: None });
    t
}

fn render(t: &[Line]) -> String {
    t.iter().map(|l| l.to_json() + "\n").collect()
}

fn committed() -> String {
    std::fs::read_to_string(root().join("traces/scenario-gc.jsonl"))
        .expect("model/traces/scenario-gc.jsonl")
}

#[test]
fn committed_trace_is_what_the_program_writes() {
    let text = render(&scenario_trace());
    if std::env::var_os("NILFS_MODEL_BLESS").is_some() {
        std::fs::write(root().join("traces/scenario-gc.jsonl"), &text).unwrap();
    }
    assert!(
        committed() == text,
        "model/traces/scenario-gc.jsonl is stale: rerun with NILFS_MODEL_BLESS=1"
    );
}

/// Runs the operations through the model alone (its own predictions) and
/// compares its manifests with the kernel's, line for line.
#[test]
fn model_manifests_equal_the_kernels() {
    let trace = scenario_trace();
    let Op::Mkfs {
        block_size,
        blocks_per_segment,
        nsegments,
        r_segments_percentage,
        dot_nilfs,
        ..
    } = trace[0].op.clone()
    else {
        panic!("first line is mkfs")
    };
    let g = Geometry {
        block_size,
        blocks_per_segment,
        nsegments,
        r_segments_percentage,
    };
    let mut s = State::mkfs(g, dot_nilfs, 0);
    let mut snap = None;
    for line in &trace[1..] {
        if let Op::Mount { cp: Some(_), .. } = line.op {
            break; // the rest only looks at the snapshot
        }
        if let Op::Manifest { .. } | Op::Lscp | Op::Read { .. } = line.op {
            continue;
        }
        let branches = step(&s, &line.op);
        if let Op::Mkcp { .. } = line.op {
            // Bind only the number the kernel printed (mkcp -s -p).
            if let Outcome::Cno(c) = line.out {
                snap = Some(c);
            }
            s = branches[0]
                .accept(&line.out)
                .expect("mkcp accepts the printed number");
            continue;
        }
        s = branches[0].predicted().expect("valid op").1;
    }
    let same = |a: &[String], b: &[String], what: &str| {
        for (i, (x, y)) in a.iter().zip(b).enumerate() {
            assert!(
                x == y,
                "{what}: manifest line {}: model {x:?}, kernel {y:?}",
                i + 1
            );
        }
        assert!(
            a.len() == b.len(),
            "{what}: model {} lines, kernel {}",
            a.len(),
            b.len()
        );
    };
    let latest = manifest(s.latest_ns());
    same(&latest, &manifest(&s.live), "live vs latest checkpoint");
    same(&latest, &latest_manifest(), "latest checkpoint");
    let snap = snap.expect("mkcp -s");
    assert_eq!(
        snap, 4,
        "the model binds the snapshot to the number mkcp -s -p printed"
    );
    same(
        &manifest(s.checkpoints[&snap].ns.as_ref().expect("the model made it")),
        &snapshot_manifest(),
        "snapshot",
    );
    // The lscp shape after the cleaner (-p 0): exactly one snapshot (cno 4);
    // the latest is a plain checkpoint; every other plain checkpoint (the
    // mkfs one included) may have been removed by the cleaner. The kernel
    // kept 1 and 2 (their segments were not chosen) and shows 26 as latest.
    let kernel = lscp_entries(&section(&fixture(), "== lscp"));
    let ss: Vec<u64> = s
        .checkpoints
        .iter()
        .filter(|(_, c)| c.snapshot)
        .map(|(n, _)| *n)
        .collect();
    let kss: Vec<u64> = kernel.iter().filter(|e| e.ss).map(|e| e.cno).collect();
    assert_eq!(ss, kss);
    let (lcno, lcp) = s.latest();
    assert!(!lcp.snapshot && !kernel.last().unwrap().ss && lcno <= kernel.last().unwrap().cno);
    for (c, cp) in s.checkpoints.iter() {
        assert!(
            cp.snapshot || *c == lcno || cp.may_be_gone,
            "cp {c} must survive in the model"
        );
    }
    // and the checker's rule accepts exactly the kernel's listing:
    let b = &step(&s, &Op::Lscp)[0];
    assert!(b.accept(&Outcome::Checkpoints(kernel.clone())).is_some());
    let mut no_snapshot = kernel.clone();
    no_snapshot.retain(|e| !e.ss);
    assert!(b.accept(&Outcome::Checkpoints(no_snapshot)).is_none());
}

#[test]
fn checker_accepts_the_kernels_trace() {
    let v = check_trace_str(&committed()).unwrap_or_else(|r| panic!("{r}"));
    // A few readings survive: checkpoints the cleaner may have removed and
    // whose numbers were never observed can be either an lscp entry or a
    // timer checkpoint's (model::state::lscp_accept keeps both), and a
    // construction that held a removed file may or may not leave its
    // eviction to the next one (K11, `step::held_evictions`).
    assert!((1..=8).contains(&v.states), "{} states", v.states);
}

/// Replaces line `n` (1-based) of the committed trace.
fn altered(n: usize, f: impl FnOnce(&mut Line)) -> String {
    let mut lines: Vec<Line> = committed()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    f(&mut lines[n - 1]);
    render(&lines)
}

fn line_of(pred: impl Fn(&Line) -> bool) -> usize {
    committed()
        .lines()
        .map(|l| serde_json::from_str::<Line>(l).unwrap())
        .position(|l| pred(&l))
        .unwrap()
        + 1
}

#[test]
fn checker_rejects_one_wrong_byte_in_a_read() {
    let n = line_of(|l| matches!(&l.op, Op::Read { path, .. } if path == "/rand"));
    let text = committed();
    // The sha256 of /rand with its first non-zero byte altered.
    let mut bytes = {
        let trace = scenario_trace();
        let mut s = State::mkfs(
            Geometry {
                block_size: 4096,
                blocks_per_segment: 512,
                nsegments: 64,
                r_segments_percentage: 5,
            },
            true,
            0,
        );
        for line in &trace[1..n - 1] {
            s = step(&s, &line.op)[0].predicted().unwrap().1;
        }
        s.live.read("/rand", 0, u64::MAX).unwrap()
    };
    let i = bytes.iter().position(|&b| b != 0).unwrap();
    bytes[i] ^= 1;
    let wrong = nilfs_model::pattern::sha256_hex(&bytes);
    let text2 = {
        let mut lines: Vec<Line> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        if let Outcome::Data { sha256, .. } = &mut lines[n - 1].out {
            *sha256 = wrong.clone();
        }
        render(&lines)
    };
    let r = check_trace_str(&text2).unwrap_err();
    assert_eq!(r.line, n);
    assert!(r.observed.contains(&wrong), "{r}");
    assert!(r.to_string().contains(&format!("line {n}")));
}

#[test]
fn checker_rejects_one_wrong_errno() {
    let n = line_of(|l| matches!(&l.op, Op::Rename { .. }));
    let r = check_trace_str(&altered(n, |l| {
        l.out = Outcome::Err(nilfs_model::Errno::ENOENT)
    }))
    .unwrap_err();
    assert_eq!(r.line, n);
    assert!(r.allowed.iter().any(|a| a == "\"ok\""), "{r}");
    assert!(r.observed.contains("ENOENT"));
}

#[test]
fn checker_rejects_a_file_missing_from_the_snapshot() {
    let n = line_of(|l| matches!(&l.op, Op::Manifest { at: Some(_) }));
    let r = check_trace_str(&altered(n, |l| {
        if let Outcome::Manifest(m) = &mut l.out {
            m.retain(|x| !x.ends_with("/big2"));
        }
    }))
    .unwrap_err();
    assert_eq!(r.line, n);
    assert!(r.allowed[0].contains("/big2"), "{r}");
}

#[test]
fn checker_rejects_a_removed_snapshot_in_lscp() {
    let n = line_of(|l| matches!(&l.op, Op::Lscp));
    let r = check_trace_str(&altered(n, |l| {
        if let Outcome::Checkpoints(c) = &mut l.out {
            c.retain(|e| !e.ss);
        }
    }))
    .unwrap_err();
    assert_eq!(r.line, n);
}
