//! A read error at every read position (issue 13, "fault injection at every
//! I/O"): a workload runs on a cold mount of an image with files,
//! directories, B-trees, a snapshot and dead blocks for the cleaner, while
//! the device fails its k-th read once, for every k the undisturbed run
//! makes. The operation that meets the error must fail with a typed I/O
//! error and change nothing (the live tree and the checkpoint list read as
//! before) — or, for a write past its first page, stop short as the
//! kernel's does; run again, it must do what it did in the undisturbed
//! run; and the image left at the end must be the undisturbed run's, byte
//! for byte.

use nilfs_testkit::image::fresh;
use nilfs_testkit::pattern;

use nilfs::device::{BlockDevice, CutDevice, MemDevice};
use nilfs::fs::Fs;
use nilfs::inspect::manifest::live_manifest;
use nilfs::the_nilfs::Nilfs;
use nilfs::Error;

const NOW: u64 = 1_800_000_000;
const BS: u64 = 1024;

/// The image the workload starts from: synced, unmounted.
fn base_image() -> MemDevice {
    let dev = fresh(16 << 20, BS, 64);
    {
        let nilfs = Nilfs::open(&dev).unwrap();
        let mut fs = Fs::mount(&nilfs, NOW).unwrap();
        let p = &mut fs.paths();
        p.mkdir(b"/d", 0o755).unwrap();
        p.mkdir(b"/d/e", 0o755).unwrap();
        for n in 0..5u64 {
            let name = format!("/d/f{n}");
            p.create(name.as_bytes(), 0o644, true).unwrap();
            p.write(name.as_bytes(), 0, &pattern(n, 2000 + 30_000 * n as usize))
                .unwrap();
        }
        fs.sync().unwrap();
        fs.mkcp(true).unwrap();
        // Dead blocks for the cleaner: most of the data rewritten.
        for n in 1..5u64 {
            let name = format!("/d/f{n}");
            fs.paths()
                .write(name.as_bytes(), 0, &pattern(50 + n, 20_000))
                .unwrap();
        }
        fs.sync().unwrap();
        fs.unmount().unwrap();
    }
    dev
}

/// One step of the workload; `Ok` carries what it returned, for the
/// comparison with the undisturbed run.
type Step = fn(&mut Fs<'_>) -> nilfs::Result<String>;

fn steps() -> Vec<(&'static str, Step)> {
    vec![
        ("stat", |fs| {
            Ok(format!("{:?}", fs.paths().lstat(b"/d/f3")?.size))
        }),
        ("read", |fs| {
            Ok(nilfs_testkit::sha256_hex(
                &fs.paths().read(b"/d/f4", 1000, 50_000)?,
            ))
        }),
        // A write that meets the error after its first page stops short
        // (generic_perform_write); the program writes the rest, as
        // programs do.
        ("overwrite", |fs| {
            let d = pattern(90, 9000);
            let mut done = 0;
            while done < d.len() {
                let at = 70_001 + done as u64;
                done += fs.paths().write(b"/d/f4", at, &d[done..])? as usize;
            }
            Ok(done.to_string())
        }),
        ("create", |fs| {
            fs.paths()
                .create(b"/d/e/new", 0o600, true)
                .map(|i| i.to_string())
        }),
        ("rename across", |fs| {
            fs.paths()
                .rename(b"/d/f1", b"/d/e/f1")
                .map(|()| String::new())
        }),
        ("unlink", |fs| {
            fs.paths().unlink(b"/d/f2").map(|()| String::new())
        }),
        ("truncate", |fs| {
            fs.paths().truncate(b"/d/f3", 1500).map(|()| String::new())
        }),
        ("readdir", |fs| {
            Ok(format!("{:?}", fs.paths().readdir(b"/d")?))
        }),
        ("sync", |fs| fs.sync().map(|c| format!("{c:?}"))),
        ("lscp", |fs| Ok(format!("{:?}", fs.lscp()?.len()))),
        ("clean", |fs| {
            fs.set_time(NOW + 7200);
            nilfs::cleaner::clean(fs, 0, 2).map(|r| format!("{r:?}"))
        }),
        ("write after", |fs| {
            fs.paths()
                .write(b"/d/e/new", 0, b"after the cleaner\n")
                .map(|n| n.to_string())
        }),
        ("sync again", |fs| fs.sync().map(|c| format!("{c:?}"))),
    ]
}

/// What the mount reads as now: the live tree and the checkpoint list
/// (read again if the reading itself met the injected error).
fn state(fs: &mut Fs<'_>) -> String {
    let mut read = || -> nilfs::Result<String> {
        let tree = live_manifest(fs)?;
        let cps = fs.lscp()?;
        Ok(format!("{tree}{cps:?}"))
    };
    match read() {
        Ok(s) => s,
        Err(Error::Io { .. }) => read().expect("the state, read again"),
        Err(e) => panic!("reading the state: {e}"),
    }
}

fn image(dev: &MemDevice) -> Vec<u8> {
    let mut b = vec![0u8; dev.size_bytes() as usize];
    dev.read_at(0, &mut b).unwrap();
    b
}

/// Runs the workload on `cut`; returns each step's answer, and whether the
/// mount met the injected error. A step (or the mount) that meets it is
/// checked and run again.
fn run(cut: &CutDevice, ctx: &str, known_bad: bool) -> (Vec<String>, bool) {
    let open = || {
        let nilfs = Nilfs::open(cut)?;
        let fs = Fs::mount(&nilfs, NOW)?;
        Ok::<_, Error>((nilfs, fs))
    };
    // The mount's reads may meet the error: a typed refusal, then the
    // retry works (the error does not repeat).
    let before_mount = cut.reads();
    let (_nilfs, mut fs) = match open() {
        Ok(v) => v,
        Err(e) => {
            assert!(matches!(e, Error::Io { .. }), "{ctx}: mount: {e}");
            open().unwrap_or_else(|e| panic!("{ctx}: the mount again: {e}"))
        }
    };
    if known_bad {
        fs.known_bad_keep_failed_operations();
    }
    let mount_met_it = cut
        .fails_at()
        .is_some_and(|k| k >= before_mount && k < cut.reads());
    let mut answers = Vec::new();
    for (what, step) in steps() {
        let before = state(&mut fs);
        let answer = match step(&mut fs) {
            Ok(a) => a,
            Err(e @ Error::Io { .. }) => {
                assert_eq!(
                    state(&mut fs),
                    before,
                    "{ctx}: {what} failed ({e}) and changed the mount"
                );
                step(&mut fs).unwrap_or_else(|e| panic!("{ctx}: {what} again: {e}"))
            }
            Err(e) => format!("{what}: {e}"),
        };
        answers.push(format!("{what}: {answer}"));
    }
    fs.unmount()
        .unwrap_or_else(|e| panic!("{ctx}: unmount: {e}"));
    (answers, mount_met_it)
}

#[test]
fn a_read_error_anywhere_fails_one_step_and_changes_nothing() {
    let reference_dev = CutDevice::new(base_image(), BS, u64::MAX);
    let (want, _) = run(&reference_dev, "undisturbed", false);
    let nreads = reference_dev.reads();
    let want_image = image(&reference_dev.inner);
    let want_tree = latest_manifest(&reference_dev.inner);
    assert!(nreads > 20, "the workload made only {nreads} reads");
    // Every read position with NILFS_FAULT_ALL=1; otherwise every read of
    // the mount and every 5th after it (the default test run's tier).
    let all = std::env::var_os("NILFS_FAULT_ALL").is_some();
    for k in (0..nreads).filter(|k| all || k % 5 == 0 || *k < 40) {
        let ctx = format!(
            "read {k} of {nreads} failing (replay: cargo test -p nilfs-impl --test read_faults, NILFS_FAULT_ALL=1 for every k)"
        );
        let cut = CutDevice::new(base_image(), BS, u64::MAX).failing_read(k);
        let (got, at_mount) = run(&cut, &ctx, false);
        assert_eq!(got, want, "{ctx}: the steps answered differently");
        if at_mount {
            // A super block copy that cannot be read is left out of the
            // mount, as nilfs_load_super_block does ("unable to read
            // primary superblock"), and is not written again: the image
            // differs in that copy only, and reads the same.
            let r = nilfs::check::check_device(&cut.inner, &Default::default());
            assert!(r.is_clean(), "{ctx}: nilref check:\n{r}");
            assert_eq!(latest_manifest(&cut.inner), want_tree, "{ctx}");
        } else {
            assert!(
                image(&cut.inner) == want_image,
                "{ctx}: the image differs from the undisturbed run's"
            );
        }
    }
}

fn latest_manifest(dev: &dyn BlockDevice) -> String {
    let nilfs = Nilfs::open(dev).unwrap();
    let view = nilfs::posix::CheckpointView::open(&nilfs, None).unwrap();
    nilfs::inspect::manifest::manifest(&view).unwrap()
}

/// The known-bad variant the test above exists to catch: operations that
/// keep what they changed before a read error (a directory entry gone, a
/// file's blocks half released) fail it at some read position.
#[test]
fn without_the_journal_a_read_error_is_caught() {
    let reference_dev = CutDevice::new(base_image(), BS, u64::MAX);
    let (want, _) = run(&reference_dev, "undisturbed", false);
    let nreads = reference_dev.reads();
    let caught = (0..nreads).step_by(3).any(|k| {
        let cut = CutDevice::new(base_image(), BS, u64::MAX).failing_read(k);
        let ctx = format!("known-bad, read {k}");
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let (got, _) = run(&cut, &ctx, true);
            assert_eq!(got, want);
        }))
        .is_err()
    });
    assert!(
        caught,
        "the known-bad variant passed at every read position: the test no longer tells the two apart"
    );
}

/// An image that needs roll-forward: a synced file, then two fdatasyncs of
/// overwrites and extensions inside its size, then power off.
fn unrecovered_image() -> MemDevice {
    let dev = base_image();
    {
        let nilfs = Nilfs::open(&dev).unwrap();
        let mut fs = Fs::mount(&nilfs, NOW + 10).unwrap();
        let i = fs.resolve(b"/d/f4").unwrap();
        fs.write(i, 100, &pattern(90, 7000)).unwrap();
        fs.fdatasync(i).unwrap();
        fs.write(i, 15_000, &pattern(91, 3000)).unwrap();
        fs.fdatasync(i).unwrap();
        // Dropped without unmounting.
    }
    dev
}

// postmortem: a read error inside a log (past its summary block) made the
// log's data checksum "mismatch", so the scan took the log for the end of
// the chain: the mount succeeded and the data-sync logs after it were
// silently not replayed. The kernel's nilfs_validate_log answers
// NILFS_SEG_FAIL_IO there and the mount fails with EIO; so does ours.
/// Recovery under read errors (issue 13: "including ... during recovery"):
/// the mount that must roll the data-sync logs forward meets a read error
/// at each of its reads in turn. It fails with a typed I/O error or
/// succeeds (a super block copy it could not read is left out); either
/// way the next mount recovers the salvaged data, and the unmounted image
/// checks clean and reads as the undisturbed recovery's.
#[test]
fn a_read_error_anywhere_in_recovery_loses_nothing() {
    let recover = |dev: &dyn BlockDevice| -> nilfs::Result<()> {
        let nilfs = Nilfs::open(dev)?;
        Fs::mount(&nilfs, NOW + 20)?.unmount()
    };
    let reference = CutDevice::new(unrecovered_image(), BS, u64::MAX);
    recover(&reference).unwrap();
    let nreads = reference.reads();
    let want = latest_manifest(&reference.inner);
    assert!(want.contains("/d/f4"), "{want}");
    assert!(nreads > 10, "recovery made only {nreads} reads");
    let mut failed = 0;
    for k in 0..nreads {
        let ctx = format!("recovery, read {k} of {nreads} failing");
        let cut = CutDevice::new(unrecovered_image(), BS, u64::MAX).failing_read(k);
        let first = recover(&cut);
        let ctx = format!("{ctx} (the mount gave {first:?})");
        match first {
            Ok(()) => {}
            Err(Error::Io { .. }) => {
                failed += 1;
                recover(&cut.inner).unwrap_or_else(|e| panic!("{ctx}: the next mount: {e}"));
            }
            Err(e) => panic!("{ctx}: not an I/O error: {e}"),
        }
        let r = nilfs::check::check_device(&cut.inner, &Default::default());
        assert!(r.is_clean(), "{ctx}: nilref check:\n{r}");
        assert_eq!(latest_manifest(&cut.inner), want, "{ctx}");
    }
    assert!(
        failed > nreads / 2,
        "only {failed} of {nreads} read errors reached the mount"
    );
}

/// `nilref check` meets a read error at every read position of its run
/// over the same image: it reports an operational error (fsck's exit
/// status 8), or checks clean where a later read brought the block after
/// all (the log pass reads a segment ahead and falls back to single
/// logs), which the test sees in where the reads went: another read
/// of the run brought those bytes; never a finding the image does not have (before, a DAT block
/// that failed to read was reported as a hole), and never a panic. Postmortem
/// (issue 37, judge-check 6/40: the count of lost mappings taken down,
/// not up, at a node block that cannot be read survived, since no test
/// failed a read inside the check).
#[test]
fn a_read_error_anywhere_in_check_is_an_operational_error() {
    let reference = CutDevice::new(base_image(), BS, u64::MAX);
    let clean = nilfs::check::check_device(&reference, &Default::default());
    assert!(clean.is_clean(), "{clean}");
    let nreads = reference.reads();
    assert!(nreads > 20, "the check made only {nreads} reads");
    let mut operational = 0;
    for k in 0..nreads {
        let cut = CutDevice::new(base_image(), BS, u64::MAX)
            .failing_read(k)
            .recording_reads();
        let r = nilfs::check::check_device(&cut, &Default::default());
        let ctx = format!("read {k} of {nreads} failing");
        assert_eq!(
            r.errors(),
            0,
            "{ctx}: a finding the image does not have: {:?}",
            r.findings
        );
        if r.exit_code() == 8 {
            operational += 1;
        } else {
            // Only where another read of the run brought those bytes (a
            // read-ahead the log pass then made log by log; a super block
            // copy the check judged before the mount read it) may it go
            // on: a clean image still checks clean. Bytes no read brought
            // are a question left open, and "clean" would claim an answer.
            assert!(r.is_clean(), "{ctx}:\n{r}");
            let spans = cut.read_spans();
            let (off, len) = spans[k as usize];
            assert!(
                (spans.iter().enumerate())
                    .any(|(j, &(o, l))| j != k as usize && o < off + len && off < o + l),
                "{ctx}: bytes {off}..{} read only by the read that failed, yet the check went on",
                off + len
            );
        }
    }
    assert!(operational > 0, "no read error reached the report");
}

/// A copy of the super block that cannot be read cannot be judged: the
/// check is undecided (exit 8), although the kernel mounts without an
/// unreadable secondary copy. The first read of each copy fails once, in
/// turn. Postmortem: the check skipped an unreadable secondary and called
/// the image clean, while the read-fault test above accepted that, since
/// the mount read the copy again.
#[test]
fn a_super_block_copy_that_cannot_be_read_leaves_the_check_undecided() {
    let size = base_image().size_bytes();
    let reference = CutDevice::new(base_image(), BS, u64::MAX).recording_reads();
    assert!(nilfs::check::check_device(&reference, &Default::default()).is_clean());
    let spans = reference.read_spans();
    let copies = [
        nilfs::format::SB_OFFSET_BYTES,
        nilfs::format::superblock::sb2_offset_bytes(size).unwrap(),
    ];
    for at in copies {
        let k = spans
            .iter()
            .position(|&(o, l)| o <= at && at < o + l)
            .expect("the check reads both copies") as u64;
        let cut = CutDevice::new(base_image(), BS, u64::MAX).failing_read(k);
        let r = nilfs::check::check_device(&cut, &Default::default());
        assert_eq!(r.exit_code(), 8, "the copy at byte {at} unreadable:\n{r}");
        assert!(r.findings.is_empty(), "{r}");
    }
}

/// A block that no read brings back (a bad sector for good), for every
/// block the check reads in turn: the check cannot read what it needs, so
/// it is undecided (exit 8) and names nothing the image does not have.
/// The one-read faults above allow a retry to bring a block back; this
/// one does not, so no block the check reads may be one it can do
/// without.
#[test]
fn a_block_the_check_reads_that_stays_unreadable_leaves_it_undecided() {
    let reference = CutDevice::new(base_image(), BS, u64::MAX).recording_reads();
    assert!(nilfs::check::check_device(&reference, &Default::default()).is_clean());
    let mut blocks: Vec<u64> = reference
        .read_spans()
        .iter()
        .flat_map(|&(off, len)| off / BS..(off + len).div_ceil(BS))
        .collect();
    blocks.sort_unstable();
    blocks.dedup();
    assert!(blocks.len() > 50, "the check read {} blocks", blocks.len());
    for b in blocks {
        let bad = CutDevice::new(base_image(), BS, u64::MAX).bad_block(b);
        let r = nilfs::check::check_device(&bad, &Default::default());
        assert_eq!(r.exit_code(), 8, "block {b} unreadable:\n{r}");
        assert_eq!(r.errors(), 0, "block {b} unreadable:\n{r}");
    }
}
