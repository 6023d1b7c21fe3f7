//! nilref check's corruption corpus, e2fsck-style: each case in
//! tests/check-corpus/NAME.case is a recipe (a base image and one damaged
//! field, see `nilfs_conformance::corrupt`) and the expected output of
//! `nilref check` on the result, diffed. Every case must report the
//! invariant it names, never panic, and read no more than a few passes over
//! the device. Every invariant has a case. `NILFS_BLESS=1` rewrites the
//! expected outputs (review the diff).

use std::collections::BTreeMap;
use std::path::PathBuf;

use nilfs::check::{check_device, check_opened, check_opened_memo, Code, Memo, Options, Severity};
use nilfs::device::{BlockDevice, MemDevice};
use nilfs::the_nilfs::Nilfs;
use nilfs_conformance::corrupt::{self, Recipe};

struct Case {
    name: String,
    path: PathBuf,
    head: String,
    base: String,
    recipes: Vec<Recipe>,
    expect: Vec<Code>,
    output: String,
}

const OUTPUT: &str = "--- output\n";

/// A copy of base image `name`, each built once per test binary.
fn base(name: &str) -> MemDevice {
    static BASES: std::sync::Mutex<BTreeMap<String, MemDevice>> =
        std::sync::Mutex::new(BTreeMap::new());
    let mut bases = BASES.lock().unwrap_or_else(|p| p.into_inner());
    bases
        .entry(name.to_string())
        .or_insert_with(|| {
            let dev = corrupt::base(name).unwrap();
            let r = check_device(&dev, &Options::default());
            assert!(r.is_clean(), "base image {name} is not clean:\n{r}");
            // Every inode of every checkpoint is counted: the root and
            // `.nilfs` at least.
            assert!(r.stats.inodes >= 2, "base image {name}: {:?}", r.stats);
            dev
        })
        .duplicate()
}

fn cases() -> Vec<Case> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("check-corpus");
    let mut out = Vec::new();
    let mut paths: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("tests/check-corpus")
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "case"))
        .collect();
    paths.sort();
    for path in paths {
        let text = std::fs::read_to_string(&path).unwrap();
        let name = path.file_stem().unwrap().to_string_lossy().into_owned();
        let (head, output) = match text.split_once(OUTPUT) {
            Some((h, o)) => (h.to_string(), o.to_string()),
            None => (text.clone(), String::new()),
        };
        let (mut base, mut recipes, mut expect) = (None, Vec::new(), Vec::new());
        for line in head.lines() {
            if let Some(b) = line.strip_prefix("base: ") {
                base = Some(b.trim().to_string());
            } else if let Some(r) = line.strip_prefix("corrupt: ") {
                recipes.push(Recipe::parse(r).unwrap_or_else(|e| panic!("{name}: {e}")));
            } else if let Some(c) = line.strip_prefix("expect: ") {
                for id in c.split_whitespace() {
                    expect.push(
                        Code::from_id(id).unwrap_or_else(|| panic!("{name}: unknown code {id}")),
                    );
                }
            }
        }
        out.push(Case {
            name: name.clone(),
            path,
            head,
            base: base.unwrap_or_else(|| panic!("{name}: no base")),
            recipes,
            expect,
            output,
        });
    }
    out
}

#[test]
fn every_case_reports_its_invariant_and_its_expected_output() {
    let bless = std::env::var_os("NILFS_BLESS").is_some();
    let mut failures = Vec::new();
    // Damaged images that still open whose report has a super block
    // finding: `check_opened` must not skip the pass that reads the copies.
    let mut opened_with_sb_findings = 0;
    for case in cases() {
        let dev = base(&case.base);
        // A memo of the undamaged image's check, for the damaged one's.
        let mut memo = Memo::default();
        check_opened_memo(&Nilfs::open(&dev).unwrap(), &Options::default(), &mut memo);
        for r in &case.recipes {
            corrupt::apply(&dev, r).unwrap_or_else(|e| panic!("{}: {}: {e}", case.name, r.target));
        }
        let report = check_device(&dev, &Options::default());
        let text = report.to_string();
        // A caller that opened the image gets the same report.
        if let Ok(fs) = Nilfs::open(&dev) {
            let again = check_opened(&fs, &Options::default()).to_string();
            if again != text {
                failures.push(format!(
                    "{}: check_opened differs from check_device\n--- check_device\n{text}--- check_opened\n{again}",
                    case.name
                ));
            }
            // And one who checked it before the damage, through the memo:
            // the same findings (a skipped pass's shared checks name the
            // checkpoint, not the structure, so the names may differ).
            let memoed = check_opened_memo(&fs, &Options::default(), &mut memo);
            let key = |r: &nilfs::check::Report| {
                let mut k: Vec<_> = r.findings.iter().map(|f| (f.code, f.block)).collect();
                k.sort();
                (k, r.exit_code())
            };
            if key(&memoed) != key(&report) {
                failures.push(format!(
                    "{}: the memo of the undamaged image's check changes the report\n--- check_device\n{text}--- check_opened_memo\n{memoed}",
                    case.name
                ));
            }
            // And again, through the memo of the damaged image's check:
            // a pass that found something is not remembered as clean.
            let again = check_opened_memo(&fs, &Options::default(), &mut memo);
            if key(&again) != key(&report) {
                failures.push(format!(
                    "{}: a second check through the memo changes the report\n--- check_device\n{text}--- again\n{again}",
                    case.name
                ));
            }
            if report.findings.iter().any(|f| f.code.pass() == 1) {
                opened_with_sb_findings += 1;
            }
        }
        for c in &case.expect {
            if !report.has(*c) {
                failures.push(format!("{}: {} not reported:\n{text}", case.name, c.id()));
            }
        }
        if !case
            .expect
            .iter()
            .all(|c| c.severity() == Severity::Warning)
            && report.exit_code() != 4
        {
            failures.push(format!(
                "{}: exit {} where 4 was expected",
                case.name,
                report.exit_code()
            ));
        }
        assert!(
            report.stats.bytes_read <= 4 * dev.size_bytes(),
            "{}: read {} bytes of a {}-byte device",
            case.name,
            report.stats.bytes_read,
            dev.size_bytes()
        );
        if bless {
            std::fs::write(&case.path, format!("{}{OUTPUT}{text}", case.head)).unwrap();
        } else if text != case.output {
            failures.push(format!(
                "{}: output differs\n--- expected\n{}--- got\n{text}",
                case.name, case.output
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
    assert!(
        opened_with_sb_findings > 0,
        "no case both opens and has a super block finding"
    );
}

/// Every invariant has at least one case that makes it fail.
#[test]
fn every_invariant_has_a_case() {
    let all = cases();
    let missing: Vec<&str> = Code::ALL
        .iter()
        .filter(|c| !all.iter().any(|k| k.expect.contains(c)))
        .map(|c| c.id())
        .collect();
    assert!(
        missing.is_empty(),
        "invariants without a corruption case: {missing:?}"
    );
}

/// docs/check.md lists every invariant with its kernel function and cases.
#[test]
fn the_docs_list_every_invariant_and_its_cases() {
    let doc =
        std::fs::read_to_string(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../docs/check.md"))
            .expect("docs/check.md");
    let all = cases();
    for c in Code::ALL {
        let row = doc
            .lines()
            .find(|l| l.starts_with(&format!("| `{}` ", c.id())))
            .unwrap_or_else(|| panic!("docs/check.md has no row for {}", c.id()));
        assert!(
            row.contains(&format!("`{}`", c.kernel())),
            "{row}: kernel function"
        );
        for k in all.iter().filter(|k| k.expect.first() == Some(c)) {
            assert!(row.contains(&k.name), "{row}: case {}", k.name);
        }
    }
}

/// Hostile images that pass every checksum: random bytes flipped inside
/// the logs of our image and of the kernel's, every touched log resealed.
/// The checker must answer (no panic, no hang), read a bounded amount, and
/// never call a damaged image clean unless the damage missed everything it
/// looks at. Seeded: a failure names its seed.
#[test]
fn random_damage_is_reported_never_a_panic() {
    let opts = Options {
        checkpoints: nilfs::check::Checkpoints::All,
        ..Default::default()
    };
    for (base, cases) in [("ours", 150u64), ("kernel", 30)] {
        for seed in 0..cases {
            let dev = crate::base(base);
            let hit = corrupt::damage_random(&dev, seed, 1 + (seed % 4) as usize).unwrap();
            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                check_device(&dev, &opts)
            }))
            .unwrap_or_else(|_| {
                panic!("{base} seed {seed}: nilref check panicked (blocks {hit:?})")
            });
            assert!(
                r.stats.bytes_read <= 8 * dev.size_bytes(),
                "{base} seed {seed}: read {} bytes",
                r.stats.bytes_read
            );
            if std::env::var_os("NILFS_CHECK_VERBOSE").is_some() {
                eprintln!("{base} seed {seed}: {:?} {:?}", hit, r.codes());
            }
        }
    }
}

/// The figures a check reports: one log verified for mkfs's, one more for
/// each sync's; B-tree node blocks counted (a 1 MiB file needs some, and
/// the count is also what a mapping's `i_blocks` is checked against:
/// postmortem, judge-check 5/40's `nodes += 1` as `*=` survived when no
/// image here had a node); and a re-check through the memo, which skips
/// the snapshot's unchanged passes, reports the inodes, nodes and
/// directory entries a full check counts.
#[test]
fn the_checks_figures_and_the_memos_replay() {
    use nilfs::format::ino::ROOT;
    use nilfs::fs::Fs;
    let dev = nilfs_testkit::image::fresh(64 << 20, 4096, 512);
    assert_eq!(check_device(&dev, &Options::default()).stats.logs, 1);
    {
        let nilfs = Nilfs::open(&dev).unwrap();
        let mut fs = Fs::mount(&nilfs, 1_800_000_000).unwrap();
        let d = fs.mkdir(ROOT, b"d", 0o755).unwrap();
        for i in 0..20u8 {
            let f = fs.create(d, &[b'f', b'a' + i], 0o644).unwrap();
            fs.write(f, 0, &[i; 5000]).unwrap();
        }
        let big = fs.create(ROOT, b"big", 0o644).unwrap();
        fs.write(big, 0, &vec![9; 1 << 20]).unwrap();
        fs.sync().unwrap();
        fs.mkcp(true).unwrap();
        fs.create(ROOT, b"late", 0o644).unwrap();
        fs.sync().unwrap();
        fs.unmount().unwrap();
    }
    let nilfs = Nilfs::open(&dev).unwrap();
    let full = check_opened(&nilfs, &Options::default());
    assert!(full.is_clean(), "{full}");
    assert!(full.stats.logs >= 3, "{:?}", full.stats);
    assert!(
        full.stats.nodes >= 2,
        "the big file's nodes: {:?}",
        full.stats
    );
    let mut memo = Memo::default();
    let first = check_opened_memo(&nilfs, &Options::default(), &mut memo);
    let again = check_opened_memo(&nilfs, &Options::default(), &mut memo);
    // Every figure but the bytes read, which the memo exists to save.
    let figures = |r: &nilfs::check::Report| nilfs::check::Stats {
        bytes_read: 0,
        ..r.stats.clone()
    };
    assert_eq!(figures(&first), figures(&full));
    assert_eq!(
        figures(&again),
        figures(&full),
        "the replayed passes' figures"
    );
    assert!(full.stats.checkpoints >= 2, "{:?}", full.stats);
    assert!(again.stats.bytes_read < full.stats.bytes_read);
    // The second check skipped the snapshot's passes, and says so
    // (lockstep reuses the read-back of the checkpoints on this list;
    // judge-check 26/40: `skipped` as an empty list survived the check's
    // own tests).
    let skipped: Vec<u64> = memo.skipped().iter().map(|c| c.0).collect();
    assert!(!skipped.is_empty(), "nothing skipped");
    assert!(skipped
        .iter()
        .all(|c| memo.was_skipped(nilfs::format::Cno(*c))));
}

/// `log-after-clean` names only logs a crash after the next mount would
/// bring back. On an image cleanly unmounted, then mounted again for one
/// fdatasync and left (its super blocks still name the clean unmount's
/// super root) and marked clean: the data-sync log is a whole logical
/// segment that recovery would roll forward, and is reported. With its
/// LOGEND cleared (resealed) the logical segment is unfinished, which
/// recovery never replays (`nilfs_salvage_orphan_logs` needs its end) and
/// a crash during an fdatasync followed by a clean unmount can leave:
/// not reported, and the image checks clean.
#[test]
fn only_logs_recovery_would_replay_are_reported_after_a_clean_mark() {
    use nilfs::format::ino;
    use nilfs::fs::Fs;
    let dev = MemDevice::new(8 << 20);
    nilfs::mkfs::mkfs(&dev, &nilfs::mkfs::MkfsOptions::with_geometry(1024, 64)).unwrap();
    {
        let nilfs = Nilfs::open(&dev).unwrap();
        let mut fs = Fs::mount(&nilfs, 1_800_000_000).unwrap();
        let f = fs.create(ino::ROOT, b"f", 0o644).unwrap();
        fs.write(f, 0, &[7; 3000]).unwrap();
        fs.unmount().unwrap();
    }
    {
        let nilfs = Nilfs::open(&dev).unwrap();
        let mut fs = Fs::mount(&nilfs, 1_800_000_010).unwrap();
        let f = fs.lookup(ino::ROOT, b"f").unwrap().unwrap();
        fs.write(f, 100, &[9; 500]).unwrap();
        fs.fdatasync(f).unwrap();
        // Left without unmounting.
    }
    let codes = |dev: &MemDevice| -> Vec<Code> {
        let r = check_device(dev, &Options::default());
        r.findings.iter().map(|f| f.code).collect()
    };
    assert!(codes(&dev).is_empty(), "before the mark: {:?}", codes(&dev));
    let apply = |dev: &MemDevice, r: &str| {
        corrupt::apply(dev, &Recipe::parse(r).unwrap()).unwrap_or_else(|e| panic!("{r}: {e}"));
    };
    let unfinished = dev.duplicate();
    let end = nilfs::format::segsum::SS_LOGEND;
    apply(&unfinished, &format!("ss@rf.ss_flags &= {:#x}", !end));
    for dev in [&dev, &unfinished] {
        apply(dev, "sb0.s_state |= 1");
        apply(dev, "sb1.s_state |= 1");
    }
    assert_eq!(codes(&dev), vec![Code::LogAfterClean]);
    assert!(codes(&unfinished).is_empty(), "{:?}", codes(&unfinished));
}

/// An 8 MiB image of 1 KiB blocks and `bps`-block segments with one file
/// `f`: `len` bytes written and synced, then 1,000 bytes rewritten at its
/// start and fdatasynced, then `second` (offset, length) written and
/// fdatasynced; unmounted cleanly or left as a crash leaves it.
fn two_fdatasyncs(bps: u64, len: usize, second: (u64, usize), unmount: bool) -> MemDevice {
    use nilfs::format::ino;
    use nilfs::fs::Fs;
    let dev = MemDevice::new(8 << 20);
    nilfs::mkfs::mkfs(&dev, &nilfs::mkfs::MkfsOptions::with_geometry(1024, bps)).unwrap();
    let nilfs = Nilfs::open(&dev).unwrap();
    let mut fs = Fs::mount(&nilfs, 1_800_000_000).unwrap();
    let f = fs.create(ino::ROOT, b"f", 0o644).unwrap();
    fs.write(f, 0, &vec![7; len]).unwrap();
    fs.sync().unwrap();
    fs.write(f, 0, &[8; 1000]).unwrap();
    fs.fdatasync(f).unwrap();
    fs.write(f, second.0, &vec![9; second.1]).unwrap();
    fs.fdatasync(f).unwrap();
    if unmount {
        fs.unmount().unwrap();
    } else {
        drop(fs); // as a crash leaves it
    }
    drop(nilfs);
    dev
}

// Issue 37 (judge-check 4/40: `logs_revivable`'s bound `at + nblocks <= to
// + 1` as `<= to`): a stale log that ends on its segment's last block is
// revivable like any other. On 16-block segments: a sync's log, then the
// logs of two fdatasyncs of one file in segment 2, the second ending on
// block 47, the segment's last; the first damaged (its data checksum, not
// resealed), so the search stops there and the second lies past it, of
// the writer's sequence. (Here the second grows the file, so it is a whole
// construction with a super root; the check does not ask which kind a
// stale log is.)
#[test]
fn a_revivable_log_that_ends_its_segment_is_reported() {
    let dev = two_fdatasyncs(16, 1000, (1024, 4 << 10), false);
    // The layout this test is about: segment 2 (blocks 32 to 47) holds
    // the two logs, the second ending on the segment's last block.
    let out = nilfs::inspect::tools::dumpseg(&dev, &[2]).unwrap().stdout;
    assert!(
        out.contains("blocknr = 32, nblocks = 2") && out.contains("blocknr = 34, nblocks = 14"),
        "{out}"
    );
    corrupt::apply(
        &dev,
        &Recipe::parse("ss@2:0.ss_datasum ^= 1 noreseal").unwrap(),
    )
    .unwrap();
    let r = check_device(&dev, &Options::default());
    assert!(
        r.findings
            .iter()
            .any(|f| f.code == Code::LogRevivable && f.block == Some(34)),
        "{r}"
    );
}

/// One construction that spans segments writes one logical segment as
/// several logs, one a segment: the first begins it (LOGBGN), the middle
/// ones carry neither flag, the last ends it (LOGEND, with the super
/// root). That is healthy, and checks clean.
#[test]
fn a_logical_segment_across_segments_checks_clean() {
    use nilfs::format::ino;
    use nilfs::fs::Fs;
    let dev = nilfs_testkit::image::fresh(8 << 20, 1024, 64);
    {
        let nilfs = Nilfs::open(&dev).unwrap();
        let mut fs = Fs::mount(&nilfs, 1_800_000_000).unwrap();
        let f = fs.create(ino::ROOT, b"f", 0o644).unwrap();
        fs.write(f, 0, &[7; 200_000]).unwrap();
        fs.unmount().unwrap();
    }
    let r = check_device(&dev, &Options::default());
    assert!(r.is_clean(), "{r}");
    assert!(
        r.stats.logs >= 4,
        "one construction over several segments: {:?}",
        r.stats
    );
}

// Issue 37 (judge-check 9/40: `check_lseg`'s `flags & SS_LOGBGN` as `|`
// where the previous logical segment is open): a log without LOGBGN after
// an open one continues that logical segment, in the same segment as in
// the next. The kernel's constructor writes a continuation only at the
// start of a segment, but recovery (`nilfs_search_super_root`,
// `nilfs_do_roll_forward`) reads a logical segment by its flags alone, not
// by where its logs lie, so the check has nothing to report. Two data-sync
// logs of one file between two super roots, in one segment, made one
// logical segment (the first's LOGEND and the second's LOGBGN cleared,
// resealed): clean.
#[test]
fn a_logical_segment_of_two_logs_in_one_segment_checks_clean() {
    use nilfs::format::segsum::{SS_LOGBGN, SS_LOGEND};
    let dev = two_fdatasyncs(64, 3000, (2048, 500), true);
    // The layout this test is about: segment 0 holds mkfs's log, the
    // sync's, the two data-sync logs (blocks 33 and 35, two blocks each)
    // and the unmount's.
    let out = nilfs::inspect::tools::dumpseg(&dev, &[0]).unwrap().stdout;
    assert!(
        out.contains("blocknr = 33, nblocks = 2") && out.contains("blocknr = 35, nblocks = 2"),
        "{out}"
    );
    let check = |dev: &MemDevice| check_device(dev, &Options::default());
    let apply = |r: &str| {
        corrupt::apply(&dev, &Recipe::parse(r).unwrap()).unwrap_or_else(|e| panic!("{r}: {e}"));
    };
    let r = check(&dev);
    assert!(r.is_clean(), "as written: {r}");
    apply(&format!("ss@0:2.ss_flags &= {:#x}", !SS_LOGEND));
    apply(&format!("ss@0:3.ss_flags &= {:#x}", !SS_LOGBGN));
    let r = check(&dev);
    assert!(r.is_clean(), "one logical segment of two logs: {r}");
    assert!(r.stats.logs >= 5, "{:?}", r.stats);
    // The known-bad beside it: the second log beginning a logical segment
    // of its own while the first is open.
    apply(&format!("ss@0:3.ss_flags |= {SS_LOGBGN:#x}"));
    let r = check(&dev);
    assert_eq!(
        r.findings
            .iter()
            .map(|f| (f.code, f.block))
            .collect::<Vec<_>>(),
        vec![(Code::LogLogicalSegment, Some(35))],
        "{r}"
    );
}

/// A read that fails while `check` works out why the mount failed is the
/// device's error, not the image's: the report is an operational error and
/// names nothing the image does not have. The image is one the mount
/// refuses (its latest super root claims no bytes) and that needs
/// recovery, so the explaining scan walks on past the super block's log
/// as the kernel's does; every read of the check fails once, in turn.
#[test]
fn a_read_error_while_explaining_a_failed_mount_is_an_operational_error() {
    use nilfs::device::CutDevice;
    let damaged = || {
        let dev = base("rollforward");
        corrupt::apply(&dev, &Recipe::parse("sr.sr_bytes = 0").unwrap()).unwrap();
        dev
    };
    let reference = CutDevice::new(damaged(), 1024, u64::MAX);
    let undisturbed = check_device(&reference, &Options::default());
    let codes = |r: &nilfs::check::Report| r.findings.iter().map(|f| f.code).collect::<Vec<_>>();
    assert_eq!(
        codes(&undisturbed),
        vec![Code::LogSuperRoot],
        "{undisturbed}"
    );
    let nreads = reference.reads();
    let mut operational = 0;
    for k in 0..nreads {
        let cut = CutDevice::new(damaged(), 1024, u64::MAX).failing_read(k);
        let r = check_device(&cut, &Options::default());
        let ctx = format!("read {k} of {nreads} failing");
        if r.operational.is_some() {
            operational += 1;
            assert!(r.findings.is_empty(), "{ctx}: {r}");
        } else {
            assert_eq!(codes(&r), codes(&undisturbed), "{ctx}: {r}");
        }
    }
    assert!(operational > 0, "no read error reached the report");
}

/// The searches `check` makes past a clean mark (for logs recovery would
/// replay, `log-after-clean`, and for revivable ones, `log-revivable`)
/// read where the mount did not: a read that fails there leaves the check
/// unable to say whether such a log exists, an operational error, never
/// a clean report. On a cleanly unmounted image, the block after the
/// latest super root's log is read first by the one search, last by the
/// other; each read fails once, in turn.
#[test]
fn a_read_error_in_the_searches_past_a_clean_mark_is_an_operational_error() {
    use nilfs::device::CutDevice;
    let dev = base("ours");
    let next = {
        let nilfs = Nilfs::open(&dev).unwrap();
        nilfs.scan.super_root.0 + 1
    };
    let reference = CutDevice::new(dev.duplicate(), 1024, u64::MAX).recording_reads();
    let r = check_device(&reference, &Options::default());
    assert!(r.is_clean(), "{r}");
    let reads: Vec<u64> = (reference.read_spans().into_iter().enumerate())
        .filter(|(_, (off, len))| (*off..off + len).contains(&(next * 1024)))
        .map(|(k, _)| k as u64)
        .collect();
    assert!(reads.len() >= 2, "block {next} read by {reads:?}");
    for k in [reads[0], reads[reads.len() - 1]] {
        let cut = CutDevice::new(dev.duplicate(), 1024, u64::MAX).failing_read(k);
        let r = check_device(&cut, &Options::default());
        assert!(
            r.operational.is_some() && r.findings.is_empty(),
            "read {k} (block {next}, read by {reads:?}) failing:\n{r}"
        );
    }
}

/// A caller's progress callback (the CLI's bar) hears the log pass block
/// by block: within it `done` only grows, never past `total`, and on a
/// healthy image ends at `total`, every used block read. Postmortem
/// (issue 37, judge-check 17/40): `Ck::progress` doing nothing survived,
/// since no test gave the check a callback.
#[test]
fn progress_reaches_the_callers_callback() {
    use std::sync::{Arc, Mutex};
    let seen: Arc<Mutex<Vec<nilfs::check::Progress>>> = Arc::default();
    let sink = seen.clone();
    let opts = Options {
        progress: Some(Arc::new(move |p| sink.lock().unwrap().push(p))),
        ..Options::default()
    };
    let r = check_device(&base("ours"), &opts);
    assert!(r.is_clean(), "{r}");
    let seen = seen.lock().unwrap();
    let logs: Vec<_> = seen.iter().filter(|p| p.phase == "logs").collect();
    assert!(logs.len() >= 3, "{seen:?}");
    assert!(logs.windows(2).all(|w| w[0].done <= w[1].done), "{logs:?}");
    assert!(logs.iter().all(|p| p.done <= p.total), "{logs:?}");
    let last = logs.last().unwrap();
    assert_eq!(last.done, last.total, "{logs:?}");
}
