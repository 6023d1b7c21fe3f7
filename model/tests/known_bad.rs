//! What the model must reject. Each test states one rule as the kernel
//! has it, through the trace checker: a trace the kernel would write is
//! accepted, and the same trace with the outcome a wrong rule would give
//! is rejected at that line. They came from mutation testing
//! (`scripts/mutants.sh`, docs/TESTING.md "Mutation testing"): each kills
//! mutants of the model that no other test told apart from the kernel.

use nilfs_model::check_trace_str;

/// A 1 KiB file system, mounted read-write.
const MKFS: &str = r#"{"op":"mkfs","block_size":1024,"blocks_per_segment":256,"nsegments":64,"out":"ok"}
{"op":"mount","ro":false,"out":"ok"}
"#;

/// `lines` after [`MKFS`], each a JSON line without its newline.
fn trace(lines: &[String]) -> String {
    let mut t = MKFS.to_string();
    for l in lines {
        t.push_str(l);
        t.push('\n');
    }
    t
}

/// The 1-based trace line of `lines[i]` (after the two of [`MKFS`]).
fn line_of(i: usize) -> usize {
    i + 3
}

/// `lines` is accepted; with line `i`'s outcome replaced by `wrong` it is
/// rejected there.
fn accepted_and_rejected_with(lines: &[String], i: usize, wrong: &str) {
    let t = trace(lines);
    check_trace_str(&t).unwrap_or_else(|r| panic!("the kernel's behaviour is rejected:\n{r}\n{t}"));
    let mut bad = lines.to_vec();
    let (op, _) = bad[i]
        .rsplit_once(r#","out":"#)
        .expect("a line ends in its outcome");
    bad[i] = format!(r#"{op},"out":{wrong}}}"#);
    let t = trace(&bad);
    let r = check_trace_str(&t).expect_err(&format!("the wrong outcome is accepted:\n{t}"));
    assert_eq!(r.line, line_of(i), "{r}");
}

/// `good` is accepted and `bad`, the same operations at another clock,
/// is rejected at line `i` of `bad` (as [`line_of`] counts).
fn accepted_and_rejected_at(good: &[String], bad: &[String], i: usize) {
    check_trace_str(&trace(good)).unwrap_or_else(|r| panic!("{r}"));
    let r = check_trace_str(&trace(bad)).expect_err("the other clock is accepted too");
    assert_eq!(r.line, line_of(i), "{r}");
}

fn op(json: &str, out: &str) -> String {
    format!(r#"{{{json},"out":{out}}}"#)
}

/// A clock line's operation at `s` seconds of the trace's clock.
fn secs(s: u64) -> String {
    format!(r#""op":"clock","now":{}"#, s * 1_000_000_000)
}

fn err(e: &str) -> String {
    format!(r#"{{"err":"{e}"}}"#)
}

/// Every state the model's predictions reach from a fresh file system of
/// 4 KiB blocks after `ops`, following each branch, and the checkpoint
/// numbers of each.
fn states_after(ops: &[nilfs_model::Op]) -> (Vec<nilfs_model::State>, Vec<Vec<u64>>) {
    let g = nilfs_model::Geometry {
        block_size: 4096,
        blocks_per_segment: 64,
        nsegments: 256,
        r_segments_percentage: 5,
    };
    let mut states = vec![nilfs_model::State::mkfs(g, true, 0)];
    for op in ops {
        states = states
            .iter()
            .flat_map(|s| nilfs_model::step(s, op))
            .filter_map(|b| b.predicted().map(|(_, n)| n))
            .collect();
    }
    let numbers = states
        .iter()
        .map(|s| s.checkpoints.keys().copied().collect())
        .collect();
    (states, numbers)
}

/// lscp's answer listing plain checkpoints `cnos`.
fn lscp(cnos: &[u64]) -> String {
    let plain: Vec<(u64, bool)> = cnos.iter().map(|&c| (c, false)).collect();
    listed(&plain)
}

/// lscp's answer listing checkpoints `(cno, snapshot)`.
fn listed(cnos: &[(u64, bool)]) -> String {
    let cps: Vec<String> = cnos
        .iter()
        .map(|(c, ss)| format!(r#"{{"cno":{c},"ss":{ss}}}"#))
        .collect();
    format!(r#"{{"checkpoints":[{}]}}"#, cps.join(","))
}

fn stat_dir(nlink: u32) -> String {
    format!(r#"{{"stat":{{"type":"dir","size":1024,"nlink":{nlink},"perm":493}}}}"#)
}

/// `nilfs_rmdir` drops the parent's link count (`inode_dec_link_count(dir)`
/// for the removed directory's ".."); a model where it rises or stays is
/// rejected at the parent's next lstat.
#[test]
fn rmdir_drops_the_parents_link_count() {
    let lines = [
        op(r#""op":"mkdir","path":"/d","perm":493"#, r#""ok""#),
        op(r#""op":"mkdir","path":"/d/s","perm":493"#, r#""ok""#),
        op(r#""op":"lstat","path":"/d""#, &stat_dir(3)),
        op(r#""op":"rmdir","path":"/d/s""#, r#""ok""#),
        op(r#""op":"lstat","path":"/d""#, &stat_dir(2)),
    ];
    accepted_and_rejected_with(&lines, 4, &stat_dir(4));
    accepted_and_rejected_with(&lines, 4, &stat_dir(3));
}

/// `do_rmdir`'s answers for a last component that is not a name: the
/// root (LAST_ROOT) is EBUSY, "." EINVAL, ".." ENOTEMPTY — on a writable
/// mount (`rmdir`) and, before write access is asked for, on a read-only
/// one (`rmdir_precheck`), where a wrong answer would be EROFS or ENOENT.
#[test]
fn rmdir_of_the_root_dot_and_dotdot() {
    for ro in [false, true] {
        let mut lines = vec![op(r#""op":"mkdir","path":"/d","perm":493"#, r#""ok""#)];
        if ro {
            lines.push(op(r#""op":"umount""#, r#""ok""#));
            lines.push(op(r#""op":"mount","ro":true"#, r#""ok""#));
        }
        for (path, e, wrong) in [
            ("/", "EBUSY", "ENOENT"),
            ("/d/.", "EINVAL", "ENOENT"),
            ("/d/..", "ENOTEMPTY", "ENOENT"),
        ] {
            let mut l = lines.clone();
            l.push(op(&format!(r#""op":"rmdir","path":"{path}""#), &err(e)));
            let wrong = if ro { "EROFS" } else { wrong };
            accepted_and_rejected_with(&l, l.len() - 1, &err(wrong));
        }
    }
}

/// `do_renameat2` refuses "." or ".." as either last component with
/// EBUSY before it asks for write access: on a read-only mount a rename
/// whose source alone, or target alone, is ".." is EBUSY, not EROFS.
#[test]
fn rename_of_dot_or_dotdot_on_either_side_is_ebusy_before_erofs() {
    for (old, new) in [("/d/..", "/e"), ("/d", "/e/..")] {
        let lines = [
            op(r#""op":"mkdir","path":"/d","perm":493"#, r#""ok""#),
            op(r#""op":"mkdir","path":"/e","perm":493"#, r#""ok""#),
            op(r#""op":"umount""#, r#""ok""#),
            op(r#""op":"mount","ro":true"#, r#""ok""#),
            op(
                &format!(r#""op":"rename","old":"{old}","new":"{new}""#),
                &err("EBUSY"),
            ),
        ];
        accepted_and_rejected_with(&lines, 4, &err("EROFS"));
    }
}

/// `nilfs_symlink`: ENAMETOOLONG when `strlen(symname) + 1` exceeds the
/// block size; on 1 KiB blocks a 1023-byte target fits and a 1024-byte
/// one (or longer) does not.
#[test]
fn a_symlink_target_fits_in_one_block_with_its_nul() {
    for (len, fits) in [
        (1, true),
        (1022, true),
        (1023, true),
        (1024, false),
        (1025, false),
    ] {
        let target = "t".repeat(len);
        let path = format!("/l{len}");
        let (right, wrong) = if fits {
            (r#""ok""#.to_string(), err("ENAMETOOLONG"))
        } else {
            (err("ENAMETOOLONG"), r#""ok""#.to_string())
        };
        let lines = [op(
            &format!(r#""op":"symlink","target":"{target}","path":"{path}""#),
            &right,
        )];
        accepted_and_rejected_with(&lines, 0, &wrong);
    }
}

/// A directory's size is whole blocks, never none (`nilfs_make_empty`
/// starts it at one block; `nilfs_add_link` grows it a block at a time):
/// the judge allows any non-zero multiple of the block size, and neither
/// an empty directory nor a part of a block.
#[test]
fn a_directory_size_is_a_non_zero_number_of_blocks() {
    let dir =
        |size: u64| format!(r#"{{"stat":{{"type":"dir","size":{size},"nlink":2,"perm":493}}}}"#);
    let lines = [
        op(r#""op":"mkdir","path":"/d","perm":493"#, r#""ok""#),
        op(r#""op":"lstat","path":"/d""#, &dir(1024)),
    ];
    accepted_and_rejected_with(&lines, 1, &dir(0));
    accepted_and_rejected_with(&lines, 1, &dir(1000));
    accepted_and_rejected_with(&lines, 1, &dir(1536));
    // Two blocks is a size the kernel may show (the judge does not count
    // entries).
    check_trace_str(&trace(&[
        lines[0].clone(),
        op(r#""op":"lstat","path":"/d""#, &dir(2048)),
    ]))
    .unwrap_or_else(|r| panic!("{r}"));
}

/// The model's own prediction of `statfs` (`Branch::predicted`, what the
/// model-only runs and proofs follow) is one its judge accepts: a fresh
/// 1 KiB file system of 64 segments of 256 blocks has one descriptor
/// block of inodes (`nilfs_palloc_count_max_entries`: 8192 entries a
/// group, 256 groups a descriptor block), two of them used.
#[test]
fn the_models_statfs_prediction_is_exact() {
    use nilfs_model::{step, Geometry, Op, Outcome, State};
    let g = Geometry {
        block_size: 1024,
        blocks_per_segment: 256,
        nsegments: 64,
        r_segments_percentage: 5,
    };
    let s = step(
        &State::mkfs(g.clone(), true, 0),
        &Op::Mount {
            cp: None,
            ro: false,
        },
    )[0]
    .predicted()
    .expect("mount")
    .1;
    let (o, _) = step(&s, &Op::Statfs { at: None })[0]
        .predicted()
        .expect("the model predicts its own statfs");
    let Outcome::Statfs(got) = o else {
        panic!("{o:?}");
    };
    assert_eq!((got.files, got.ffree), (8192 * 256, 8192 * 256 - 2));
    // Every block but the 4 KiB before the first data block; every
    // segment free but the two the log writer holds; less the 8 reserved
    // segments (`nilfs_nrsvsegs`: at least NILFS_MIN_NRSVSEGS). Linux
    // 6.1's statfs-counts-a-removed-dirty-inode trace shows the same on
    // 511 segments of 64 blocks: bfree 509 * 64, bavail 26 segments less.
    assert_eq!(
        (got.blocks, got.bfree, got.bavail),
        (64 * 256 - 4, 62 * 256, 54 * 256)
    );
    assert!(nilfs_model::accept::statfs_accepts(&g, 2, 0, &got));
    // f_files counts whole descriptor blocks of entries: 8,192 * 256 on
    // 1 KiB blocks, so twice that is a count Linux can give, and 32,768
    // (a 128th, which the capacity's `bs * 8` as `bs / 8` allowed, issue
    // 37 judge-trace 6/8) is not.
    use nilfs_model::StatfsInfo;
    let files = |n: u64| StatfsInfo {
        files: n,
        ffree: n - 2,
        ..got.clone()
    };
    assert!(nilfs_model::accept::statfs_accepts(
        &g,
        2,
        0,
        &files(2 * 8192 * 256)
    ));
    assert!(!nilfs_model::accept::statfs_accepts(
        &g,
        2,
        0,
        &files(32_768)
    ));
}

/// `trace_states`, which the crash campaign builds its envelopes from:
/// one entry per prefix of the trace, the first empty, then the states
/// after mkfs, after the mount, and after each line; a file created is in
/// the last. Postmortem (issue 37, judge-trace 4/8: `trace_states` as
/// `Ok(vec![])` passed the model's tests; only nilref's crash judge used
/// it).
#[test]
fn trace_states_holds_the_states_after_each_prefix() {
    let lines = [
        op(r#""op":"create","path":"/a""#, r#""ok""#),
        op(r#""op":"sync""#, r#""ok""#),
    ];
    let all = nilfs_model::trace::trace_states(&trace(&lines)).expect("accepted");
    assert_eq!(all.len(), 5, "mkfs, mount and two lines, after nothing");
    assert!(all[0].is_empty());
    assert!(all[1..].iter().all(|states| !states.is_empty()));
    let has_a = |s: &nilfs_model::State| s.live.lookup("/a", false).is_ok();
    assert!(!all[2].iter().any(has_a), "no /a after the mount");
    assert!(all[4].iter().all(has_a), "/a after its create");
}

/// A rejected manifest is described by its length, not printed in full
/// (`nilref oracle check` prints what was observed).
#[test]
fn a_rejected_manifest_is_summarised() {
    let lines = [op(
        r#""op":"manifest""#,
        r#"{"manifest":["e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855  0  /nothing"]}"#,
    )];
    let r = check_trace_str(&trace(&lines)).expect_err("the tree is empty");
    assert_eq!(r.line, line_of(0), "{r}");
    assert_eq!(r.observed, "manifest of 1 lines", "{r}");
}

/// lscp binds the model's latest checkpoint to the number the kernel
/// listed, which is larger when the log writer's timer made checkpoints
/// of its own (finding M1); the next checkpoint then takes the number
/// after it, and the one bound keeps its contents: a snapshot of it,
/// mounted, shows the tree as it was at that sync.
#[test]
fn a_checkpoint_bound_to_a_larger_number_keeps_its_contents() {
    let file = r#"{"stat":{"type":"file","size":0,"nlink":1,"perm":420}}"#;
    let lscp = |n: u64| lscp(&(1..=n).collect::<Vec<_>>());
    let lines = [
        op(r#""op":"create","path":"/f""#, r#""ok""#),
        // Long enough for the timer: the kernel may have made checkpoint 2.
        op(r#""op":"clock","now":30000000000"#, r#""ok""#),
        op(r#""op":"create","path":"/g""#, r#""ok""#),
        op(r#""op":"sync""#, r#""ok""#),
        op(r#""op":"lscp""#, &lscp(3)),
        op(r#""op":"create","path":"/h""#, r#""ok""#),
        op(r#""op":"sync""#, r#""ok""#),
        op(r#""op":"lscp""#, &lscp(4)),
        op(r#""op":"chcp","cno":3,"snapshot":true"#, r#""ok""#),
        op(r#""op":"mount","cp":3,"ro":true"#, r#""ok""#),
        op(r#""op":"lstat","path":"/g","at":3"#, file),
        op(r#""op":"lstat","path":"/h","at":3"#, &err("ENOENT")),
    ];
    accepted_and_rejected_with(&lines, 11, file);
    accepted_and_rejected_with(&lines, 10, &err("ENOENT"));
}

/// The ENOSPC bound (finding M4, `Geometry::usable_blocks`): on 1 KiB
/// blocks, 64 segments of 256 with 5% reserved, `nilfs_sufile_*`'s
/// reserve is 8 segments (`NILFS_MIN_NRSVSEGS`), three more are held
/// (the log writer's two and the one a construction starts), and what no
/// block uses is mkfs's 4096 bytes (4 blocks) and 2 blocks a segment:
/// (64 - 8 - 3) * 256 - (4 + 2 * 64) = 13436.
#[test]
fn the_space_bound_of_a_small_file_system() {
    let g = nilfs_model::Geometry {
        block_size: 1024,
        blocks_per_segment: 256,
        nsegments: 64,
        r_segments_percentage: 5,
    };
    assert_eq!(g.reserved_segments(), 8);
    assert_eq!(g.usable_blocks(), 13436);
}

/// `nilfs_rename` of a directory to another parent moves its ".." link:
/// the old parent loses one (`drop_nlink(old_dir)`), the new one gains
/// one (`inode_inc_link_count(new_dir)`).
#[test]
fn a_directory_renamed_to_another_parent_moves_a_link() {
    let lines = [
        op(r#""op":"mkdir","path":"/d","perm":493"#, r#""ok""#),
        op(r#""op":"mkdir","path":"/e","perm":493"#, r#""ok""#),
        op(r#""op":"mkdir","path":"/d/s","perm":493"#, r#""ok""#),
        op(r#""op":"rename","old":"/d/s","new":"/e/s""#, r#""ok""#),
        op(r#""op":"lstat","path":"/d""#, &stat_dir(2)),
        op(r#""op":"lstat","path":"/e""#, &stat_dir(3)),
    ];
    accepted_and_rejected_with(&lines, 4, &stat_dir(3));
    accepted_and_rejected_with(&lines, 5, &stat_dir(2));
}

/// The log writer's timer (`NILFS_SC_DEFAULT_TIMEOUT`, 5 s after the first
/// change) may have written a checkpoint before an fsync, which then has
/// nothing left to write: a change made after the timer's checkpoint is
/// not durable, and a crash loses it. One second after the first change
/// the timer cannot have fired, and fsync's checkpoint holds every change.
#[test]
fn a_crash_after_fsync_loses_a_later_change_only_if_the_timer_can_have_run() {
    let lines = |clock: u64| {
        [
            op(r#""op":"create","path":"/f""#, r#""ok""#),
            op(
                r#""op":"write","path":"/f","offset":0,"data":{"text":"x"}"#,
                r#"{"written":1}"#,
            ),
            op(&format!(r#""op":"clock","now":{clock}"#), r#""ok""#),
            op(r#""op":"create","path":"/g""#, r#""ok""#),
            op(r#""op":"fsync","path":"/f""#, r#""ok""#),
            op(r#""op":"crash""#, r#""ok""#),
            op(r#""op":"mount","ro":false"#, r#""ok""#),
            op(r#""op":"lstat","path":"/g""#, &err("ENOENT")),
        ]
    };
    // No timer within 1 s.
    accepted_and_rejected_at(&lines(6_000_000_000), &lines(1_000_000_000), 7);
}

/// A crash after the log writer's timer may have written a checkpoint of
/// the changes (`segctord`, 5 s): recovery finds it, a plain checkpoint
/// that lscp lists like any other (its cp_flags have no MINOR: it holds a
/// file change).
#[test]
fn a_checkpoint_the_timer_wrote_before_a_crash_is_listed() {
    let file = r#"{"stat":{"type":"file","size":0,"nlink":1,"perm":420}}"#;
    let lines = [
        op(r#""op":"create","path":"/f""#, r#""ok""#),
        op(r#""op":"clock","now":6000000000"#, r#""ok""#),
        op(r#""op":"crash""#, r#""ok""#),
        op(r#""op":"mount","ro":false"#, r#""ok""#),
        op(r#""op":"lstat","path":"/f""#, file),
        op(r#""op":"lscp""#, r#"{"checkpoints":[{"cno":1},{"cno":2}]}"#),
    ];
    accepted_and_rejected_with(&lines, 5, r#"{"checkpoints":[{"cno":1}]}"#);
}

/// A write and its read-back: `text` at `offset`, then the whole file
/// read as `content`.
fn write(path: &str, offset: u64, text: &str) -> String {
    op(
        &format!(r#""op":"write","path":"{path}","offset":{offset},"data":{{"text":"{text}"}}"#),
        &format!(r#"{{"written":{}}}"#, text.len()),
    )
}

fn read(path: &str, content: &[u8]) -> String {
    op(
        &format!(r#""op":"read","path":"{path}","offset":0,"len":4096"#),
        &data(content),
    )
}

fn data(content: &[u8]) -> String {
    format!(
        r#"{{"data":{{"len":{},"sha256":"{}"}}}}"#,
        content.len(),
        nilfs_model::pattern::sha256_hex(content)
    )
}

/// An fdatasync's data-only log outlives a checkpoint the log writer's
/// timer wrote before it: recovery rolls the log forward onto that
/// checkpoint (`nilfs_do_roll_forward`), so the synced data is never
/// lost. Here the timer may have written a checkpoint after the first
/// change (mkdir /g, 6 s before fsync /g); /f's later "bbbb" was
/// fdatasync'ed, and "aaaa", the timer's checkpoint alone, is rejected.
#[test]
fn an_fdatasync_after_the_timers_checkpoint_survives_a_crash() {
    let lines = [
        op(r#""op":"create","path":"/f""#, r#""ok""#),
        write("/f", 0, "aaaa"),
        op(r#""op":"fsync","path":"/f""#, r#""ok""#),
        op(r#""op":"mkdir","path":"/g","perm":493"#, r#""ok""#),
        write("/f", 0, "bbbb"),
        op(r#""op":"fdatasync","path":"/f""#, r#""ok""#),
        op(r#""op":"clock","now":6000000000"#, r#""ok""#),
        op(r#""op":"mkdir","path":"/h","perm":493"#, r#""ok""#),
        op(r#""op":"fsync","path":"/g""#, r#""ok""#),
        op(r#""op":"crash""#, r#""ok""#),
        op(r#""op":"mount","ro":false"#, r#""ok""#),
        read("/f", b"bbbb"),
    ];
    accepted_and_rejected_with(&lines, 11, &data(b"aaaa"));
}

/// The timer's checkpoint leaves an fdatasync's log in place: it is
/// rolled forward onto the timer's checkpoint only, never onto a later
/// change's namespace. The timer may have run after mkdir /h (the last
/// change fsync /h must write, two changes in); /f was overwritten with
/// "bbbb", fdatasync'ed, then grown by "cccc". A crash may leave /f as
/// "bbbb" (the log over the timer's checkpoint) or "bbbbcccc", never the
/// log's page laid over the grown file ("bbbb" and four zeros).
#[test]
fn an_fdatasync_log_is_replayed_onto_the_timers_checkpoint_only() {
    let lines = [
        op(r#""op":"create","path":"/f""#, r#""ok""#),
        write("/f", 0, "aaaa"),
        op(r#""op":"fsync","path":"/f""#, r#""ok""#),
        op(r#""op":"mkdir","path":"/g","perm":493"#, r#""ok""#),
        op(r#""op":"mkdir","path":"/h","perm":493"#, r#""ok""#),
        write("/f", 0, "bbbb"),
        op(r#""op":"fdatasync","path":"/f""#, r#""ok""#),
        write("/f", 4, "cccc"),
        op(r#""op":"clock","now":6000000000"#, r#""ok""#),
        op(r#""op":"fsync","path":"/h""#, r#""ok""#),
        op(r#""op":"crash""#, r#""ok""#),
        op(r#""op":"mount","ro":false"#, r#""ok""#),
        read("/f", b"bbbbcccc"),
    ];
    accepted_and_rejected_with(&lines, 12, &data(b"bbbb\0\0\0\0"));
    let mut short = lines.to_vec();
    short[12] = read("/f", b"bbbb");
    check_trace_str(&trace(&short)).unwrap_or_else(|r| panic!("{r}"));
}

/// An fdatasync of a file whose size changed since the last checkpoint
/// must write its inode: a full checkpoint (NILFS_I_INODE_SYNC). When
/// the log writer's timer has already written that size (it ran after
/// the first write, 6 s before the second), the fdatasync writes only the
/// data since, in a data-only log that recovery rolls forward without
/// the inode: after a crash /f holds "bbbb" with the first write's times
/// (before the clock reached 6 s), as the timer wrote them. A model that
/// misses the size change never takes this path and allows only the
/// full checkpoint's times (6 s or later).
#[test]
fn an_fdatasync_after_the_timer_wrote_the_size_is_data_only() {
    let stat = |t: u64| {
        format!(
            r#"{{"stat":{{"type":"file","size":4,"nlink":1,"perm":420,"mtime":{t},"ctime":{t}}}}}"#
        )
    };
    let lines = |t: u64| {
        [
            op(r#""op":"create","path":"/f""#, r#""ok""#),
            op(r#""op":"sync""#, r#""ok""#),
            write("/f", 0, "aaaa"),
            op(r#""op":"clock","now":6000000000"#, r#""ok""#),
            write("/f", 0, "bbbb"),
            op(r#""op":"fdatasync","path":"/f""#, r#""ok""#),
            op(r#""op":"crash""#, r#""ok""#),
            op(r#""op":"mount","ro":false"#, r#""ok""#),
            read("/f", b"bbbb"),
            op(r#""op":"lstat","path":"/f""#, &stat(t)),
        ]
    };
    for t in [1_000_000_000, 7_000_000_000] {
        check_trace_str(&trace(&lines(t))).unwrap_or_else(|r| panic!("mtime {t}: {r}"));
    }
    accepted_and_rejected_with(&lines(1_000_000_000), 8, &data(b"aaaa"));
}

/// A sync after the log writer's timer wrote a checkpoint of the first
/// change still writes the changes the timer left pending: after fsync
/// /g (the timer may have run 6 s after mkdir /g, before mkdir /h), a
/// sync makes /h durable, and a crash cannot lose it.
#[test]
fn a_sync_writes_what_the_timers_checkpoint_left_pending() {
    let lines = [
        op(r#""op":"mkdir","path":"/g","perm":493"#, r#""ok""#),
        op(r#""op":"mkdir","path":"/h","perm":493"#, r#""ok""#),
        op(r#""op":"clock","now":6000000000"#, r#""ok""#),
        op(r#""op":"fsync","path":"/g""#, r#""ok""#),
        op(r#""op":"sync""#, r#""ok""#),
        op(r#""op":"crash""#, r#""ok""#),
        op(r#""op":"mount","ro":false"#, r#""ok""#),
        op(r#""op":"lstat","path":"/h""#, &stat_dir(2)),
    ];
    accepted_and_rejected_with(&lines, 7, &err("ENOENT"));
}

/// The log writer's timer is re-armed by the first change after its
/// checkpoint, and fires 5 s after that change. Here the timer may have
/// written mkdir /g (made at 0) at 5 s; mkdir /h, at 5.5 s, then arms it
/// again, so by 10.5 s it may have written /h and /z, and an fsync of /z
/// then finds nothing to write: a crash may lose /y. Had the first
/// timer not run, fsync /g would have written /h too, and the timer's
/// next interval would start at /z (6 s): too late for it to have run
/// by the fsync of /z (at most 10.7 s, the window of a trace without
/// intervals), which would then write /y. With /y made 0.7 s earlier,
/// no timer can have run and the crash cannot lose it.
#[test]
fn the_timers_interval_starts_at_the_first_change_it_left_pending() {
    let lines = |y_at: u64| {
        [
            op(r#""op":"mkdir","path":"/g","perm":493"#, r#""ok""#),
            op(r#""op":"clock","now":5500000000"#, r#""ok""#),
            op(r#""op":"mkdir","path":"/h","perm":493"#, r#""ok""#),
            op(r#""op":"fsync","path":"/g""#, r#""ok""#),
            op(r#""op":"clock","now":6000000000"#, r#""ok""#),
            op(r#""op":"mkdir","path":"/z","perm":493"#, r#""ok""#),
            op(&format!(r#""op":"clock","now":{y_at}"#), r#""ok""#),
            op(r#""op":"mkdir","path":"/y","perm":493"#, r#""ok""#),
            op(r#""op":"fsync","path":"/z""#, r#""ok""#),
            op(r#""op":"crash""#, r#""ok""#),
            op(r#""op":"mount","ro":false"#, r#""ok""#),
            op(r#""op":"lstat","path":"/y""#, &err("ENOENT")),
        ]
    };
    // No timer by 10 s.
    accepted_and_rejected_at(&lines(9_700_000_000), &lines(9_000_000_000), 11);
}

/// Linux 6.1's device filled (model/traces/kernel-6.1/enospc-in-whole-segments.jsonl,
/// up to the refused create of /big2, 46 lines): /big1 holds 227,364 bytes.
fn full_device() -> String {
    let full: String = include_str!("../traces/kernel-6.1/enospc-in-whole-segments.jsonl")
        .lines()
        .take(46)
        .map(|l| format!("{l}\n"))
        .collect();
    assert!(full.ends_with("\"out\":{\"err\":\"ENOSPC\"}}\n"), "{full}");
    full
}

/// unlink and rmdir pass `vacancy_check = 0` to `nilfs_transaction_begin`:
/// on a full device, where a create is refused (ENOSPC), removing a file
/// still succeeds — it is how a user makes room. The device is Linux
/// 6.1's, filled (model/traces/kernel-6.1/enospc-in-whole-segments.jsonl,
/// up to the refused create of /big2).
#[test]
fn a_removal_on_a_full_device_is_never_refused() {
    let full = full_device();
    let with = |out: &str| format!("{full}{}\n", op(r#""op":"unlink","path":"/big1""#, out));
    check_trace_str(&with(r#""ok""#)).unwrap_or_else(|r| panic!("{r}"));
    let r = check_trace_str(&with(&err("ENOSPC"))).expect_err("unlink refused for space");
    assert_eq!(r.line, 47, "{r}");
}

/// `open(O_CREAT)` follows a trailing symlink chain, counting every link
/// against MAXSYMLINKS (40, `nd->total_link_count`): a chain of 40 links
/// to a missing name creates it; one of 41 is ELOOP.
#[test]
fn create_follows_at_most_forty_links() {
    let chain = |n: usize, out: &str| {
        let mut lines: Vec<String> = (1..n)
            .map(|i| {
                op(
                    &format!(r#""op":"symlink","target":"l{}","path":"/l{i}""#, i + 1),
                    r#""ok""#,
                )
            })
            .collect();
        lines.push(op(
            &format!(r#""op":"symlink","target":"t","path":"/l{n}""#),
            r#""ok""#,
        ));
        lines.push(op(r#""op":"create","path":"/l1""#, out));
        lines
    };
    accepted_and_rejected_with(&chain(40, r#""ok""#), 40, &err("ELOOP"));
    accepted_and_rejected_with(&chain(41, &err("ELOOP")), 41, r#""ok""#);
    // A loop: the 41st link is ELOOP too.
    let mut looped = chain(41, &err("ELOOP"));
    looped[40] = op(r#""op":"symlink","target":"l1","path":"/l41""#, r#""ok""#);
    accepted_and_rejected_with(&looped, 41, r#""ok""#);
}

/// `may_mknod` refuses a symlink type (EINVAL) and a directory (EPERM)
/// before it looks at the path: mknod makes neither.
#[test]
fn mknod_makes_no_symlink_and_no_directory() {
    for (t, e) in [("symlink", "EINVAL"), ("dir", "EPERM")] {
        let lines = [op(
            &format!(r#""op":"mknod","path":"/x","type":"{t}","perm":420"#),
            &err(e),
        )];
        accepted_and_rejected_with(&lines, 0, r#""ok""#);
    }
}

/// statfs's inode counts: `files` is whole descriptor blocks of inodes
/// (`nilfs_palloc_count_max_entries`), unless the count overflowed, when
/// the kernel reports no free inodes at all (-ERANGE): a count off the
/// descriptor size with free inodes left is rejected.
#[test]
fn statfs_files_are_whole_descriptor_blocks() {
    use nilfs_model::{step, Op, Outcome, StatfsInfo};
    let s = step(
        &nilfs_model::State::mkfs(
            nilfs_model::Geometry {
                block_size: 1024,
                blocks_per_segment: 256,
                nsegments: 64,
                r_segments_percentage: 5,
            },
            false,
            0,
        ),
        &Op::Mount {
            cp: None,
            ro: false,
        },
    )[0]
    .predicted()
    .expect("mount")
    .1;
    let (o, _) = step(&s, &Op::Statfs { at: None })[0]
        .predicted()
        .expect("the model predicts its own statfs");
    let Outcome::Statfs(good) = o else {
        panic!("{o:?}")
    };
    let out = |st: &StatfsInfo| serde_json::to_string(&Outcome::Statfs(st.clone())).unwrap();
    let lines = [op(r#""op":"statfs""#, &out(&good))];
    let off = StatfsInfo {
        files: good.files + 1,
        ffree: good.ffree + 1,
        ..good.clone()
    };
    accepted_and_rejected_with(&lines, 0, &out(&off));
    // Postmortem (issue 37, `statfs_accepts`' descriptor size with `*` as
    // `/`: 32 entries, not 2,097,152): a count 32 off is as wrong.
    let off = StatfsInfo {
        files: good.files + 32,
        ffree: good.ffree + 32,
        ..good.clone()
    };
    accepted_and_rejected_with(&lines, 0, &out(&off));
}

/// Finding M1, a checkpoint before the latest: lscp binds each unbound
/// checkpoint to the first listed entry that can be it, a larger number
/// when the kernel used numbers the model did not see (here the cleaner's
/// hidden MINOR checkpoints). It keeps its contents only when no other
/// unclaimed entry could be it: with one more plain entry between it and
/// the latest (a checkpoint the kernel's timer may have made), which
/// checkpoint holds what is unknown, and a snapshot of it shows anything.
/// An entry a numbered checkpoint already holds (mkcp's, of a later
/// change) is no such alternative.
#[test]
fn a_checkpoint_bound_to_a_larger_number_keeps_its_contents_unless_another_could_be_it() {
    let stat =
        |size: u64| format!(r#"{{"stat":{{"type":"file","size":{size},"nlink":1,"perm":420}}}}"#);
    let lines = |mkcp: bool, listed: &[u64], size: u64| {
        let mut l = vec![
            op(r#""op":"create","path":"/x""#, r#""ok""#),
            op(r#""op":"sync""#, r#""ok""#),
            op(r#""op":"clean","protection_s":0"#, r#""ok""#),
            op(r#""op":"create","path":"/f""#, r#""ok""#),
            write("/f", 0, "data"),
            op(r#""op":"sync""#, r#""ok""#),
        ];
        if mkcp {
            l.push(op(r#""op":"create","path":"/h""#, r#""ok""#));
            l.push(op(r#""op":"mkcp","snapshot":false"#, r#"{"cno":6}"#));
        }
        l.extend([
            op(r#""op":"create","path":"/g""#, r#""ok""#),
            op(r#""op":"sync""#, r#""ok""#),
            op(r#""op":"lscp""#, &lscp(listed)),
            op(r#""op":"chcp","cno":5,"snapshot":true"#, r#""ok""#),
            op(r#""op":"mount","cp":5,"ro":true"#, r#""ok""#),
            op(r#""op":"lstat","path":"/f","at":5"#, &stat(size)),
        ]);
        l
    };
    // The first sync after the cleaner is 5, and nothing else can be.
    let one = lines(false, &[1, 2, 5, 6], 4);
    accepted_and_rejected_with(&one, one.len() - 1, &stat(0));
    // 5 or 6: the snapshot of 5 may show anything.
    for size in [0, 4] {
        check_trace_str(&trace(&lines(false, &[1, 2, 5, 6, 7], size)))
            .unwrap_or_else(|r| panic!("size {size}: {r}"));
    }
    // 6 is mkcp's: 5 is the sync's again.
    let taken = lines(true, &[1, 2, 5, 6, 7], 4);
    accepted_and_rejected_with(&taken, taken.len() - 1, &stat(0));
}

/// The timer's checkpoint renumbers the data-only logs after it by the
/// changes it wrote: here it may have run after mkdir /h (two changes in),
/// and /f's "bbbb", fdatasync'ed three changes later, is rolled forward
/// onto every crash point before it was written, so no crash leaves /f as
/// "aaaa" beside /j, a change made before the fdatasync.
#[test]
fn the_timers_checkpoint_renumbers_the_data_only_logs_after_it() {
    let lines = |content: &[u8]| {
        [
            op(r#""op":"create","path":"/f""#, r#""ok""#),
            write("/f", 0, "aaaa"),
            op(r#""op":"fsync","path":"/f""#, r#""ok""#),
            op(r#""op":"mkdir","path":"/g","perm":493"#, r#""ok""#),
            op(r#""op":"mkdir","path":"/h","perm":493"#, r#""ok""#),
            op(r#""op":"mkdir","path":"/i","perm":493"#, r#""ok""#),
            op(r#""op":"mkdir","path":"/j","perm":493"#, r#""ok""#),
            write("/f", 0, "bbbb"),
            op(r#""op":"fdatasync","path":"/f""#, r#""ok""#),
            op(r#""op":"clock","now":6000000000"#, r#""ok""#),
            op(r#""op":"fsync","path":"/h""#, r#""ok""#),
            op(r#""op":"crash""#, r#""ok""#),
            op(r#""op":"mount","ro":false"#, r#""ok""#),
            op(r#""op":"lstat","path":"/j""#, &stat_dir(2)),
            read("/f", content),
        ]
    };
    accepted_and_rejected_with(&lines(b"bbbb"), 14, &data(b"aaaa"));
}

/// mknod of a regular file (`S_IFREG`, what `may_mknod` lets through)
/// makes an empty file like create: it can be written and read.
#[test]
fn mknod_of_a_regular_file_makes_a_file() {
    let lines = [
        op(
            r#""op":"mknod","path":"/r","type":"file","perm":420"#,
            r#""ok""#,
        ),
        write("/r", 0, "x"),
        read("/r", b"x"),
    ];
    accepted_and_rejected_with(&lines, 2, &data(b""));
}

/// A trace that records no intervals is judged by the older rule: an
/// operation stamps its inode up to one second after the clock line
/// before it, from the mkfs line's clock on (`LEGACY_WINDOW_NS`).
#[test]
fn without_intervals_a_stamp_lies_within_a_second_of_the_clock() {
    let t0 = 1_000_000_000_000i64;
    let mkfs = format!(
        r#"{{"op":"mkfs","block_size":1024,"blocks_per_segment":256,"nsegments":64,"clock":{t0},"out":"ok"}}
{{"op":"mount","ro":false,"out":"ok"}}
"#
    );
    let stat = |t: i64| {
        format!(
            r#"{{"stat":{{"type":"file","size":0,"nlink":1,"perm":420,"mtime":{t},"ctime":{t}}}}}"#
        )
    };
    let lines = |t: i64| {
        [
            op(r#""op":"create","path":"/f""#, r#""ok""#),
            op(r#""op":"lstat","path":"/f""#, &stat(t)),
        ]
        .iter()
        .map(|l| format!("{l}\n"))
        .collect::<String>()
    };
    for t in [t0, t0 + 500_000_000, t0 + 1_000_000_000] {
        check_trace_str(&(mkfs.clone() + &lines(t))).unwrap_or_else(|r| panic!("{t}: {r}"));
    }
    for t in [t0 - 1, t0 + 1_000_000_001] {
        let r = check_trace_str(&(mkfs.clone() + &lines(t))).expect_err("outside the second");
        assert_eq!(r.line, 4, "{r}");
    }
}

/// postmortem (mutant of `xattr_refusal`, model shard 3/16): a bad
/// attribute name (empty, or over `XATTR_NAME_MAX`) on a file that exists
/// is ERANGE on every release: whichever comes first, the path lookup
/// finds the file and the copy of the name from user space
/// (`strncpy_from_user` in getxattr/setxattr/removexattr) refuses it. The
/// releases differ only when the path fails too (the xattr-name-order
/// kernel traces). With the name test's `||` turned into `&&`, Linux 6.1
/// (path first) answered EOPNOTSUPP, `xattr_resolve_name`'s refusal of a
/// name with no handler; the default variant, which allows either order,
/// could not tell.
#[test]
fn a_bad_attribute_name_on_a_file_that_exists_is_erange_on_every_release() {
    use nilfs_model::{check_trace_as, Variant};
    let long = "user.".to_string() + &"n".repeat(251);
    for name in ["", long.as_str()] {
        for call in ["getxattr", "removexattr"] {
            let lines = |e: &str| {
                trace(&[
                    op(r#""op":"create","path":"/f""#, r#""ok""#),
                    op(
                        &format!(r#""op":"{call}","path":"/f","name":"{name}""#),
                        &err(e),
                    ),
                ])
            };
            for v in Variant::ALL {
                check_trace_as(&lines("ERANGE"), v)
                    .unwrap_or_else(|r| panic!("{call} {name:?} as {}: {r}", v.name()));
                let r = check_trace_as(&lines("EOPNOTSUPP"), v)
                    .expect_err(&format!("{call} {name:?} as {}: EOPNOTSUPP", v.name()));
                assert_eq!(r.line, line_of(1), "{r}");
            }
        }
    }
    // XATTR_NAME_MAX (255) itself fits: a user.* name of 255 bytes on a
    // file reaches `xattr_resolve_name`, which finds no handler
    // (EOPNOTSUPP), never ERANGE. Postmortem (model shard 7/16: the
    // bound's `>` as `>=` survived).
    let longest = "user.".to_string() + &"n".repeat(250);
    let lines = |e: &str| {
        [
            op(r#""op":"create","path":"/f""#, r#""ok""#),
            op(
                &format!(r#""op":"getxattr","path":"/f","name":"{longest}""#),
                &err(e),
            ),
        ]
    };
    accepted_and_rejected_with(&lines("EOPNOTSUPP"), 1, &err("ERANGE"));
}

/// A new entry dirties its directory's pages (`nilfs_add_link` commits
/// the block with `nilfs_commit_chunk`, which marks the directory dirty),
/// so an fsync of that directory makes a checkpoint (`nilfs_sync_file`
/// returns at once only for a clean inode). Postmortem (model shard
/// 3/16): with `pages_dirtied`'s "entries or `..` differ" as "entries and
/// `..` differ", a directory that gained an entry stayed clean, its fsync
/// did nothing, and the checkpoint it made was rejected at the listing.
#[test]
fn an_fsync_of_a_directory_that_gained_an_entry_makes_a_checkpoint() {
    let lines = [
        op(r#""op":"mkdir","path":"/d","perm":493"#, r#""ok""#),
        op(r#""op":"sync""#, r#""ok""#),
        op(r#""op":"create","path":"/d/f""#, r#""ok""#),
        op(r#""op":"fsync","path":"/d""#, r#""ok""#),
        op(r#""op":"lscp""#, &lscp(&[1, 2, 3])),
    ];
    accepted_and_rejected_with(&lines, 4, &lscp(&[1, 2]));
}

/// The checkpoint the log writer's timer makes of a cpfile change alone
/// (a chcp since the last construction, nothing else dirty) is MINOR:
/// `nilfs_segctor_do_construct` finalizes it without HAVE_DELTA, and lscp
/// hides it. A crash after the chcp may keep it: lscp then lists the
/// snapshot but not the checkpoint, which a chcp of its number still
/// finds. Postmortem (model shard, the second samples: `crash`'s MINOR
/// flag `!(k > 0 || salvaged)` with `k >= 0`): the recovered timer
/// checkpoint came out plain, which lscp must list, so a hidden one that
/// chcp finds was rejected.
#[test]
fn a_timer_checkpoint_of_a_chcp_alone_is_minor_after_a_crash() {
    let lines = [
        op(r#""op":"create","path":"/f""#, r#""ok""#),
        op(r#""op":"sync""#, r#""ok""#),
        op(r#""op":"chcp","cno":2,"snapshot":true"#, r#""ok""#),
        op(r#""op":"crash""#, r#""ok""#),
        op(r#""op":"mount","ro":false"#, r#""ok""#),
        op(r#""op":"lscp""#, &listed(&[(1, false), (2, true)])),
        op(r#""op":"chcp","cno":3,"snapshot":true"#, r#""ok""#),
        op(
            r#""op":"lscp""#,
            &listed(&[(1, false), (2, true), (3, true)]),
        ),
    ];
    check_trace_str(&trace(&lines)).unwrap_or_else(|r| panic!("{r}"));
}

/// `renameat2(RENAME_EXCHANGE)` between two existing names reaches
/// `nilfs_rename`, which refuses every flag but RENAME_NOREPLACE
/// (EINVAL); between two names of one inode `vfs_rename` returns 0 first
/// (`source == target`). Only NOREPLACE answers EEXIST. Postmortem (model
/// shard 4/16: `rename_flags`' guard `if noreplace` made `true`): every
/// exchange onto an existing name answered EEXIST.
#[test]
fn an_exchange_is_einval_or_nothing_never_eexist() {
    let lines = [
        op(r#""op":"create","path":"/a""#, r#""ok""#),
        op(r#""op":"create","path":"/b""#, r#""ok""#),
        op(r#""op":"link","old":"/a","new":"/c""#, r#""ok""#),
        op(
            r#""op":"rename","old":"/a","new":"/b","exchange":true"#,
            &err("EINVAL"),
        ),
        op(
            r#""op":"rename","old":"/a","new":"/c","exchange":true"#,
            r#""ok""#,
        ),
    ];
    accepted_and_rejected_with(&lines, 3, &err("EEXIST"));
    accepted_and_rejected_with(&lines, 4, &err("EEXIST"));
}

/// postmortem (found working out the mutation survivors of
/// `learn_unpredicted`, which no trace reached): a listing whose latest
/// entry is numbered past a hidden checkpoint the model made after it
/// learnt nothing, so the model went on with the wrong numbers. Here the
/// timer may have made checkpoint 2 (the clock moved 30 s), so the sync
/// makes 3; `rmcp 1` and a sync make a MINOR checkpoint, 4, which lscp
/// hides. The model held the sync's as `2?` and the minor one as `3?`:
/// listed [2, 3], it could not move `2?` to 3 past `3?`, left entry 2 as
/// its own checkpoint, and after `rmcp 2` rejected the listing [3]. The
/// hidden checkpoints after the listed latest, whose numbers are not yet
/// observed, now move past it.
#[test]
fn a_listed_latest_numbered_past_a_hidden_checkpoint_moves_it_on() {
    let lines = [
        op(r#""op":"create","path":"/f""#, r#""ok""#),
        op(r#""op":"clock","now":30000000000"#, r#""ok""#),
        op(r#""op":"create","path":"/g""#, r#""ok""#),
        op(r#""op":"sync""#, r#""ok""#),
        op(r#""op":"rmcp","cno":1"#, r#""ok""#),
        op(r#""op":"sync""#, r#""ok""#),
        op(r#""op":"lscp""#, &lscp(&[2, 3])),
        op(r#""op":"rmcp","cno":2"#, r#""ok""#),
        op(r#""op":"lscp""#, &lscp(&[3])),
        op(r#""op":"create","path":"/h""#, r#""ok""#),
        op(r#""op":"sync""#, r#""ok""#),
        op(r#""op":"lscp""#, &lscp(&[3, 5])),
    ];
    // The hidden checkpoint is 4 now, so the next one is 5, not 4.
    accepted_and_rejected_with(&lines, 11, &lscp(&[3, 4]));
}

/// Postmortem (issue 37, `finish_lscp`'s `last.cno + 1 + k` as `- k`):
/// two hidden checkpoints after a listed latest numbered past the
/// model's both move past it, in order. `mkcp` makes 2; the timer may
/// make 3 (the clock moved 30 s); the sync makes 4; each chcp of 2 and a
/// sync make a MINOR checkpoint, 5 and 6, which lscp hides. Listed
/// [1, 2, 3, 4], the model's sync moves from 3 to 4 and the hidden ones
/// to 5 and 6, so `/h`'s sync is 7. The mutant put the second hidden one
/// on 4, where the latest then overwrote it, and took 6 for `/h`'s.
#[test]
fn two_hidden_checkpoints_after_a_renumbered_latest_both_move_on() {
    let lines = [
        op(r#""op":"mkcp","snapshot":false"#, r#"{"cno":2}"#),
        op(r#""op":"create","path":"/f""#, r#""ok""#),
        op(r#""op":"clock","now":30000000000"#, r#""ok""#),
        op(r#""op":"create","path":"/g""#, r#""ok""#),
        op(r#""op":"sync""#, r#""ok""#),
        op(r#""op":"chcp","cno":2,"snapshot":true"#, r#""ok""#),
        op(r#""op":"sync""#, r#""ok""#),
        op(r#""op":"chcp","cno":2,"snapshot":false"#, r#""ok""#),
        op(r#""op":"sync""#, r#""ok""#),
        op(r#""op":"lscp""#, &lscp(&[1, 2, 3, 4])),
        op(r#""op":"create","path":"/h""#, r#""ok""#),
        op(r#""op":"sync""#, r#""ok""#),
        op(r#""op":"lscp""#, &lscp(&[1, 2, 3, 4, 7])),
    ];
    accepted_and_rejected_with(&lines, 12, &lscp(&[1, 2, 3, 4, 6]));
    accepted_and_rejected_with(&lines, 12, &lscp(&[1, 2, 3, 4, 5]));
}

/// Postmortem (issue 37, `bind_matched`'s filter): an unbound checkpoint
/// matched to the entry of its own provisional number was left unbound
/// with its contents, even when the match was a choice. Here the sync's
/// `2?` met lscp [1, 2, 3, 4]: the first entry it could take is 2, but
/// the timer (30 s after `/f`) made 2, the sync 3, and `/h`'s sync 4 (no
/// clock passes between those two syncs, so 3 cannot be the timer's).
/// The model kept `/g` in checkpoint 2 and rejected the kernel's snapshot
/// of it without `/g`. A choice now makes the contents unknown whatever
/// the numbers, and the checkpoint's number is bound.
#[test]
fn a_choice_of_entries_at_the_checkpoints_own_number_forgets_its_contents() {
    let file = r#"{"stat":{"type":"file","size":0,"nlink":1,"perm":420}}"#;
    let lines = [
        op(r#""op":"create","path":"/f""#, r#""ok""#),
        op(r#""op":"clock","now":30000000000"#, r#""ok""#),
        op(r#""op":"create","path":"/g""#, r#""ok""#),
        op(r#""op":"sync""#, r#""ok""#),
        op(r#""op":"create","path":"/h""#, r#""ok""#),
        op(r#""op":"sync""#, r#""ok""#),
        op(r#""op":"lscp""#, &lscp(&[1, 2, 3, 4])),
        op(r#""op":"chcp","cno":2,"snapshot":true"#, r#""ok""#),
        op(r#""op":"mount","cp":2,"ro":true"#, r#""ok""#),
        op(r#""op":"lstat","path":"/f","at":2"#, file),
        op(r#""op":"lstat","path":"/g","at":2"#, &err("ENOENT")),
        // The snapshot is listed as one: a plain entry 2 is wrong.
        op(
            r#""op":"lscp""#,
            &listed(&[(1, false), (2, true), (3, false), (4, false)]),
        ),
    ];
    accepted_and_rejected_with(&lines, 11, &lscp(&[1, 2, 3, 4]));
}

/// Postmortem (issue 37, `learn_unpredicted`'s guard, then the open
/// finding it led to): a hidden checkpoint kept a number the listing gave
/// to another. The timer made 2, the sync 3, `rmcp 1` and a sync the
/// hidden MINOR 4 (the model's `3?m`), `/h`'s sync 5; lscp lists
/// [2, 3, 5]. The model kept `3?m` at 3, learnt nothing of entry 3, and
/// rejected `chcp 4`. A hidden checkpoint now takes the free unlisted
/// number between its neighbours (4, the only one, so it is bound) with
/// its tree, and entry 3 is learned.
#[test]
fn a_hidden_checkpoint_moves_off_a_listed_number_between_its_neighbours() {
    let file = r#"{"stat":{"type":"file","size":0,"nlink":1,"perm":420}}"#;
    let lines = [
        op(r#""op":"create","path":"/f""#, r#""ok""#),
        op(r#""op":"clock","now":30000000000"#, r#""ok""#),
        op(r#""op":"create","path":"/g""#, r#""ok""#),
        op(r#""op":"sync""#, r#""ok""#),
        op(r#""op":"rmcp","cno":1"#, r#""ok""#),
        op(r#""op":"sync""#, r#""ok""#),
        op(r#""op":"create","path":"/h""#, r#""ok""#),
        op(r#""op":"sync""#, r#""ok""#),
        op(r#""op":"lscp""#, &lscp(&[2, 3, 5])),
        op(r#""op":"chcp","cno":4,"snapshot":true"#, r#""ok""#),
        op(r#""op":"mount","cp":4,"ro":true"#, r#""ok""#),
        op(r#""op":"lstat","path":"/g","at":4"#, file),
        op(r#""op":"lstat","path":"/h","at":4"#, &err("ENOENT")),
        op(r#""op":"chcp","cno":3,"snapshot":true"#, r#""ok""#),
        op(r#""op":"chcp","cno":6,"snapshot":true"#, &err("ENOENT")),
    ];
    accepted_and_rejected_with(&lines, 9, &err("ENOENT"));
    accepted_and_rejected_with(&lines, 11, &err("ENOENT"));
    accepted_and_rejected_with(&lines, 12, file);
    accepted_and_rejected_with(&lines, 13, &err("ENOENT"));
}

/// Postmortem (issue 37, the mutants of `place_hidden`): a hidden
/// checkpoint was put on the number of a checkpoint removed before it.
/// `rmcp 1` of the latest and a sync make the MINOR 2 (hidden), `/h`'s
/// sync 3; lscp lists [3]. Number 1 is neither listed nor held, and
/// `place_hidden` took it for the hidden one, so `chcp 2` was ENOENT. A
/// number the model gave is a lower bound: 2 is the only room.
#[test]
fn a_hidden_checkpoint_never_moves_below_its_own_number() {
    let lines = [
        op(r#""op":"rmcp","cno":1"#, r#""ok""#),
        op(r#""op":"sync""#, r#""ok""#),
        op(r#""op":"create","path":"/h""#, r#""ok""#),
        op(r#""op":"sync""#, r#""ok""#),
        op(r#""op":"lscp""#, &lscp(&[3])),
        op(r#""op":"chcp","cno":2,"snapshot":true"#, r#""ok""#),
        op(r#""op":"chcp","cno":1,"snapshot":true"#, &err("ENOENT")),
    ];
    accepted_and_rejected_with(&lines, 5, &err("ENOENT"));
    accepted_and_rejected_with(&lines, 6, r#""ok""#);
}

/// Postmortem (issue 37, `place_hidden`'s `exact` as `!=`): a hidden
/// checkpoint whose room is exactly its own number is bound there, and
/// that binding is what later listings learn from. The timer made 2, the
/// sync 3; `rmcp 1` and a sync at 60 s make the hidden MINOR 4; the timer
/// made 5 between `/h` (60 s) and 90 s, and `/i`'s sync 6. Listed
/// [2, 3, 5, 6], the hidden one can only be 4, and the unpredicted 5 is
/// learned as made no earlier than 4, at 60 s. A cleaner pass at 100 s
/// protecting 45 s may remove what was made before 55 s (2 and 3), never
/// 5. Left unbound, the hidden checkpoint gave 5 the creation time of 3
/// (30 s), and a listing without 5 was accepted.
#[test]
fn a_hidden_checkpoint_in_a_room_of_its_own_is_bound_there() {
    let lines = [
        op(r#""op":"create","path":"/f""#, r#""ok""#),
        op(&secs(30), r#""ok""#),
        op(r#""op":"create","path":"/g""#, r#""ok""#),
        op(r#""op":"sync""#, r#""ok""#),
        op(&secs(60), r#""ok""#),
        op(r#""op":"rmcp","cno":1"#, r#""ok""#),
        op(r#""op":"sync""#, r#""ok""#),
        op(r#""op":"create","path":"/h""#, r#""ok""#),
        op(&secs(90), r#""ok""#),
        op(r#""op":"create","path":"/i""#, r#""ok""#),
        op(r#""op":"sync""#, r#""ok""#),
        op(r#""op":"lscp""#, &lscp(&[2, 3, 5, 6])),
        op(&secs(100), r#""ok""#),
        op(r#""op":"clean","protection_s":45"#, r#""ok""#),
        op(r#""op":"lscp""#, &lscp(&[5, 6])),
    ];
    accepted_and_rejected_with(&lines, 14, &lscp(&[6]));
    accepted_and_rejected_with(&lines, 14, &lscp(&[2, 3, 6]));
}

/// Issue 37 (judge-trace 4/8, `learn_unpredicted`'s guard `e.ss || e.cno
/// >= latest` as `&&`): a listing whose latest the model cannot bind — a
/// MINOR checkpoint whose number `mkcp -p` printed lies after the model's
/// latest shown one, and the listing goes past it — leaves the entries
/// past the model's latest unlearned in that reading. Learning one would
/// make a checkpoint of unknown contents the model's latest, which every
/// later sync and fsync reads. (The other reading, where the log writer's
/// timer wrote `/g` as 4 or 5 (M6), is the one a kernel would give.)
#[test]
fn entries_past_a_latest_that_cannot_be_bound_stay_unlearned() {
    let lines = [
        op(r#""op":"create","path":"/f""#, r#""ok""#),
        op(r#""op":"sync""#, r#""ok""#),
        op(r#""op":"rmcp","cno":1"#, r#""ok""#),
        op(r#""op":"mkcp","snapshot":false"#, r#"{"cno":3}"#),
        op(r#""op":"create","path":"/g""#, r#""ok""#),
        op(r#""op":"clock","now":60000000000"#, r#""ok""#),
        op(r#""op":"lscp""#, &lscp(&[2, 4, 5])),
        op(r#""op":"fsync","path":"/g""#, r#""ok""#),
        op(r#""op":"sync""#, r#""ok""#),
        op(r#""op":"lscp""#, &lscp(&[2, 4, 5])),
    ];
    let v = check_trace_str(&trace(&lines)).unwrap_or_else(|r| panic!("{r}"));
    assert_eq!(v.states, 2, "{v:?}");
}

/// Issue 37 (judge-trace 6/8, `bind_matched`'s filter `*c != latest &&
/// list[*i].cno < latest` as `||`, open since the second day's samples):
/// the cpfile hands out numbers in order (`nilfs_cpfile_get_checkpoint`
/// takes `ns_cno`), so a checkpoint whose number was not observed lies
/// below any later one whose number was. The matching of a listing
/// ignored that: a sync's `2?` made before the MINOR checkpoint that
/// `mkcp -p` printed as 4 was matched to a listed 5, and a sync's `2?`
/// made before the checkpoint `mkcp` printed as 3 to a listed 5. Both
/// listings were accepted (the first, when the latest could not be bound,
/// by learning nothing), and the survivor's filter was the only thing
/// between such a match and the table's order; with the bound, no match
/// reaches it and the filter is gone. Postmortem: found by building the
/// trace that reaches the survivor, which no kernel trace did.
#[test]
fn a_checkpoint_made_before_an_observed_number_is_listed_below_it() {
    let minor_after = [
        op(r#""op":"create","path":"/f""#, r#""ok""#),
        op(r#""op":"sync""#, r#""ok""#),
        op(r#""op":"rmcp","cno":1"#, r#""ok""#),
        op(r#""op":"create","path":"/g""#, r#""ok""#),
        op(r#""op":"sync""#, r#""ok""#),
        op(r#""op":"mkcp","snapshot":false"#, r#"{"cno":4}"#),
        op(r#""op":"lscp""#, &lscp(&[2, 3])),
    ];
    accepted_and_rejected_with(&minor_after, 6, &lscp(&[5, 6]));
    let shown_between = [
        op(r#""op":"create","path":"/f""#, r#""ok""#),
        op(r#""op":"sync""#, r#""ok""#),
        op(r#""op":"create","path":"/g""#, r#""ok""#),
        op(r#""op":"mkcp","snapshot":false"#, r#"{"cno":3}"#),
        op(r#""op":"create","path":"/h""#, r#""ok""#),
        op(r#""op":"sync""#, r#""ok""#),
        op(r#""op":"lscp""#, &lscp(&[1, 2, 3, 4])),
    ];
    accepted_and_rejected_with(&shown_between, 6, &lscp(&[1, 3, 5, 6]));
}

/// Finding M7 (issue 37, the model's 4/16 survivor `sync_file`'s `k <
/// history.len()` as `<=`): when the log writer's timer has already
/// written every pending change, an fsync finds its file clean and writes
/// nothing, so the latest checkpoint is the timer's, made 5 s after the
/// first change, not at the fsync (Linux 6.1: a file written, fsync'd
/// 12 s later; `lscp -a` dates checkpoint 2 five seconds after the
/// write). Only the cleaner's protection period reads that time: a pass
/// whose horizon lies between the two may remove checkpoint 2; one whose
/// horizon lies before the timer could fire may not.
#[test]
fn an_fsync_after_the_timer_wrote_everything_leaves_the_timers_checkpoint() {
    let with_protection = |p: u64| {
        [
            op(r#""op":"rmcp","cno":1"#, r#""ok""#),
            op(r#""op":"create","path":"/f""#, r#""ok""#),
            op(
                r#""op":"write","path":"/f","offset":0,"data":{"seeded":{"seed":7,"len":4096}}"#,
                r#"{"written":4096}"#,
            ),
            op(&secs(12), r#""ok""#),
            op(r#""op":"fsync","path":"/f""#, r#""ok""#),
            op(&secs(20), r#""ok""#),
            op(r#""op":"create","path":"/g""#, r#""ok""#),
            op(r#""op":"sync""#, r#""ok""#),
            op(&secs(30), r#""ok""#),
            op(&format!(r#""op":"clean","protection_s":{p}"#), r#""ok""#),
            op(r#""op":"lscp""#, &lscp(&[3])),
        ]
    };
    // The clean's clock is at most 31 s (a clock line's one-second
    // window): protected from 11 s on, after the timer (5 s) and before
    // the fsync (12 s).
    accepted_and_rejected_at(&with_protection(20), &with_protection(27), 10);
}

/// Issue 37 (model shard 4/16, re-run: `timer`'s `history_ends` deleted
/// from the pending changes it leaves): the timer can fire again after it
/// wrote a checkpoint, and its second checkpoint must hold every change
/// made before that firing could come. Here the first firing (at 5 s)
/// wrote `/a`, `/b` (8 s) stayed pending, and `/c` followed within a
/// second; the second firing comes 5 s after `/b`, so its checkpoint
/// holds `/c` too. Without the changes' end times carried past the first
/// firing, the model let the second leave `/c` out.
#[test]
fn a_second_timer_checkpoint_holds_what_was_made_before_it_could_fire() {
    let lines = [
        op(r#""op":"create","path":"/a""#, r#""ok""#),
        op(&secs(8), r#""ok""#),
        op(r#""op":"create","path":"/b""#, r#""ok""#),
        op(r#""op":"lscp""#, &lscp(&[1, 2])),
        op(r#""op":"create","path":"/c""#, r#""ok""#),
        op(&secs(20), r#""ok""#),
        op(r#""op":"lscp""#, &lscp(&[1, 2, 3])),
        op(r#""op":"chcp","cno":3,"snapshot":true"#, r#""ok""#),
        op(r#""op":"mount","cp":3,"ro":true"#, r#""ok""#),
        op(
            r#""op":"readdir","path":"/","at":3"#,
            r#"{"names":["a","b","c"]}"#,
        ),
    ];
    accepted_and_rejected_with(&lines, 9, r#"{"names":["a","b"]}"#);
}

/// Issue 37 (judge-trace 5/8, `accept_all`'s `*c > mcno && !must_be_new`
/// as `>=`): a `mkcp -p` that prints the model's own latest made no
/// checkpoint, so nothing there is MINOR; the latest stays shown, and a
/// listing without it is rejected. (A larger number with nothing dirty is
/// the MINOR checkpoint of K2.)
#[test]
fn a_mkcp_that_prints_the_latest_leaves_it_shown() {
    let lines = [
        op(r#""op":"create","path":"/f""#, r#""ok""#),
        op(r#""op":"sync""#, r#""ok""#),
        op(r#""op":"mkcp","snapshot":false"#, r#"{"cno":2}"#),
        op(r#""op":"lscp""#, &lscp(&[1, 2])),
    ];
    accepted_and_rejected_with(&lines, 3, &lscp(&[1]));
}

/// Finding K11, second part (seen through the kernel guest in lockstep,
/// `cli/tests/peer_kernel_lockstep.rs`): after files are created, written
/// and unlinked, a sync(2) or an unmount writes their evictions itself —
/// the writeback pass constructs holding the removed inodes, then each
/// later construction in the call may write evictions. One file left
/// checkpoints 2 and 3 (6.1, 7.3); two left 2, 3 and 4, or 2 and 3 with
/// both evictions in 3 (6.1). The model's readings after each include
/// those, and nilfs-ref's (which evicts at once: 2 alone).
#[test]
fn sync_and_umount_write_held_evictions_themselves() {
    use nilfs_model::{Op, Pattern};
    let removed = |name: &str| {
        let path = format!("/{name}");
        [
            Op::Create {
                path: path.clone(),
                perm: 0o644,
                excl: false,
                at: None,
            },
            Op::Write {
                path: path.clone(),
                offset: 0,
                data: Pattern::Zeros(40_000),
                append: false,
                at: None,
            },
            Op::Unlink { path, at: None },
        ]
    };
    for files in [vec!["f"], vec!["f", "g"]] {
        for last in [Op::Sync, Op::Umount { cp: None }] {
            let mut ops = vec![Op::Mount {
                cp: None,
                ro: false,
            }];
            for f in &files {
                ops.extend(removed(f));
            }
            ops.push(last.clone());
            let (states, numbers) = states_after(&ops);
            let all: Vec<u64> = (1..=2 + files.len() as u64).collect();
            for want in [vec![1, 2], all] {
                assert!(
                    numbers.contains(&want),
                    "{last:?} after {files:?}: {numbers:?}"
                );
            }
            // Both evictions in one checkpoint, nothing left for the
            // unmount (6.1: a symlink and a directory).
            if files.len() == 2 && last == Op::Sync {
                assert!(
                    states
                        .iter()
                        .any(|s| { s.checkpoints.keys().eq([1, 2, 3].iter()) && !s.pending.dirty }),
                    "{numbers:?}"
                );
            }
        }
    }
}

/// Postmortem (the kernel guest in lockstep, Linux 6.1 and 7.3, seed
/// 20261206): the model cleared every inode's NILFS_I_INODE_SYNC at each
/// construction, but the kernel clears it only for the inodes the
/// construction collected (`nilfs_drop_collected_inodes`: those on its
/// dirty-file list). A link leaves `/a` needing an inode sync with no
/// dirty page, an fsync of another file constructs without collecting
/// it, and a later fdatasync of a write to `/a` still makes a full
/// checkpoint; the model had predicted a data-only log.
#[test]
fn an_inode_sync_outlives_a_construction_that_did_not_collect_the_inode() {
    use nilfs_model::{Op, Pattern};
    let create = |p: &str| Op::Create {
        path: p.into(),
        perm: 0o644,
        excl: false,
        at: None,
    };
    let write = |p: &str| Op::Write {
        path: p.into(),
        offset: 0,
        data: Pattern::Text("x".into()),
        append: false,
        at: None,
    };
    let ops = [
        Op::Mount {
            cp: None,
            ro: false,
        },
        create("/a"),
        write("/a"),
        Op::Sync,
        Op::Link {
            old: "/a".into(),
            new: "/b".into(),
            at: None,
        },
        create("/c"),
        write("/c"),
        Op::Fsync {
            path: "/c".into(),
            at: None,
        },
        write("/a"),
        Op::Fdatasync {
            path: "/a".into(),
            at: None,
        },
    ];
    let (_, numbers) = states_after(&ops);
    assert!(
        numbers.iter().all(|n| *n == [1, 2, 3, 4]),
        "the fdatasync made no checkpoint: {numbers:?}"
    );
}

/// A write the vacancy check refuses after some pages went in is short
/// (`generic_perform_write` returns what it copied): a positive count
/// that ends on a page boundary, less than asked. None at all is ENOSPC,
/// never a write of 0 bytes. The device is Linux 6.1's, filled (as in
/// `a_removal_on_a_full_device_is_never_refused`); the model cannot tell
/// whether the whole write still fits, so that is accepted too.
#[test]
fn a_short_write_on_a_full_device_wrote_some_whole_pages() {
    let full = full_device();
    let with = |out: &str| {
        let w = r#""op":"write","path":"/big1","offset":0,"data":{"seeded":{"seed":7,"len":8192}}"#;
        format!("{full}{}\n", op(w, out))
    };
    check_trace_str(&with(r#"{"written":4096}"#)).unwrap_or_else(|r| panic!("{r}"));
    check_trace_str(&with(&err("ENOSPC"))).unwrap_or_else(|r| panic!("{r}"));
    check_trace_str(&with(r#"{"written":8192}"#)).unwrap_or_else(|r| panic!("{r}"));
    for wrong in [
        r#"{"written":0}"#,
        r#"{"written":100}"#,
        r#"{"written":6000}"#,
    ] {
        let r = check_trace_str(&with(wrong)).expect_err(wrong);
        assert_eq!(r.line, 47, "{wrong}: {r}");
    }
}

/// A short write that grows its file changes `i_size` (the pages it
/// copied end past the old size), so its inode is marked for sync, and
/// the fdatasync after it is a full construction: a checkpoint, where a
/// data-only log would make none. The device is Linux 6.1's, filled, with
/// /big1 of 227,364 bytes; after a sync, a write at the file's end stops
/// at the next page boundary.
#[test]
fn an_fdatasync_after_a_short_write_that_grew_the_file_makes_a_checkpoint() {
    let full = full_device();
    let w = format!(
        r#""op":"write","path":"/big1","offset":227364,"data":{{"text":"{}"}}"#,
        "a".repeat(8192)
    );
    let lines = |cnos: &[u64]| {
        [
            op(r#""op":"sync""#, r#""ok""#),
            op(&w, r#"{"written":2012}"#),
            op(r#""op":"fdatasync","path":"/big1""#, r#""ok""#),
            op(r#""op":"lscp""#, &lscp(cnos)),
        ]
        .iter()
        .fold(full.clone(), |t, l| format!("{t}{l}\n"))
    };
    check_trace_str(&lines(&[4, 5, 6])).unwrap_or_else(|r| panic!("{r}"));
    let r = check_trace_str(&lines(&[4, 5])).expect_err("a data-only log");
    assert_eq!(r.line, 50, "{r}");
}

/// A cleaner pass removes the plain checkpoints older than its
/// protection period (`nilfs_cleanerd`'s `protection_period`): 90 s
/// after /a's sync, a pass protecting 10 s may have removed checkpoints
/// 1 and 2, and lscp may list the latest alone. Postmortem (model shard
/// 7/16: the age test's `<` as `==` removed only a checkpoint made at
/// the horizon's very nanosecond, and no test passed a protection
/// period other than 0).
#[test]
fn a_cleaner_pass_removes_the_checkpoints_older_than_its_protection() {
    let lines = |protection: u64| {
        [
            op(r#""op":"create","path":"/a""#, r#""ok""#),
            op(r#""op":"sync""#, r#""ok""#),
            op(r#""op":"clock","now":100000000000"#, r#""ok""#),
            op(r#""op":"create","path":"/b""#, r#""ok""#),
            op(r#""op":"sync""#, r#""ok""#),
            op(
                &format!(r#""op":"clean","protection_s":{protection}"#),
                r#""ok""#,
            ),
            op(r#""op":"lscp""#, &lscp(&[3])),
        ]
    };
    check_trace_str(&trace(&lines(10))).unwrap_or_else(|r| panic!("{r}"));
    // Protecting 200 s, it removes nothing.
    let r = check_trace_str(&trace(&lines(200))).expect_err("a protected checkpoint removed");
    assert_eq!(r.line, line_of(6), "{r}");
}

/// Issue 37 (judge-trace, `place_hidden`'s fallback: `!n.checkpoints
/// .contains_key` with the `!` deleted, open since the second day's
/// samples): a listing whose earliest matching leaves a hidden run no
/// room. The model makes an unbound 2 (`/f`'s sync), a hidden MINOR 3
/// (`rmcp 1`, then a sync), an unbound 4 (`/g`) and the latest 5 (`/h`).
/// Listed [2, 3, 4, 6, 7], the kernel made two checkpoints of its own
/// (extra plain entries, M1) and the numbers could be 2, the kernel's 3
/// and 4, the hidden 5, `/g` 6 and `/h` 7. The matching takes the
/// earliest entries (`/g` as 4), which leaves the hidden checkpoint no
/// unlisted number between 2 and 4; it keeps its own number, and the
/// entry left over (6) is learned. The mutant refused the hidden run its
/// own free number, and so the whole listing.
#[test]
fn a_hidden_run_the_matching_leaves_no_room_keeps_its_own_number() {
    let lines = [
        op(r#""op":"create","path":"/f""#, r#""ok""#),
        op(r#""op":"sync""#, r#""ok""#),
        op(r#""op":"rmcp","cno":1"#, r#""ok""#),
        op(r#""op":"sync""#, r#""ok""#),
        op(r#""op":"create","path":"/g""#, r#""ok""#),
        op(r#""op":"sync""#, r#""ok""#),
        op(r#""op":"create","path":"/h""#, r#""ok""#),
        op(r#""op":"sync""#, r#""ok""#),
        op(r#""op":"lscp""#, &lscp(&[2, 3, 4, 6, 7])),
        op(r#""op":"rmcp","cno":6"#, r#""ok""#),
    ];
    accepted_and_rejected_with(&lines, 9, &err("ENOENT"));
}

/// Finding M7 again, for a file whose change needs no inode sync (issue
/// 37: `sync_file`'s `!data_only` with the `!` deleted, open since the
/// second day's samples). An overwrite that keeps the size dirties the
/// file's pages only; the timer writes it 5 s later all the same, and an
/// fsync after that writes nothing. Linux 6.1
/// (docs/findings/m7-fsync-after-the-timer-wrote-an-overwrite.workload.jsonl,
/// `nilref exec --sleep-on-clock`, then `lscp -a`): the sync at 0 s made
/// checkpoint 2, the overwrite at 10 s was written as 3 at 15 s, the
/// fsync at 22 s made none, and `/g`'s sync at 30 s made 4. The mutant
/// took the timer's branches for an fsync only when the file needed an
/// inode sync, and dated 3 at the fsync.
#[test]
fn an_fsync_after_the_timer_wrote_an_overwrite_leaves_the_timers_checkpoint() {
    let with_protection = |p: u64| {
        [
            op(r#""op":"rmcp","cno":1"#, r#""ok""#),
            op(r#""op":"create","path":"/f""#, r#""ok""#),
            op(
                r#""op":"write","path":"/f","offset":0,"data":{"seeded":{"seed":7,"len":4096}}"#,
                r#"{"written":4096}"#,
            ),
            op(r#""op":"sync""#, r#""ok""#),
            op(&secs(10), r#""ok""#),
            op(
                r#""op":"write","path":"/f","offset":0,"data":{"seeded":{"seed":8,"len":4096}}"#,
                r#"{"written":4096}"#,
            ),
            op(&secs(22), r#""ok""#),
            op(r#""op":"fsync","path":"/f""#, r#""ok""#),
            op(&secs(30), r#""ok""#),
            op(r#""op":"create","path":"/g""#, r#""ok""#),
            op(r#""op":"sync""#, r#""ok""#),
            op(&secs(40), r#""ok""#),
            op(&format!(r#""op":"clean","protection_s":{p}"#), r#""ok""#),
            op(r#""op":"lscp""#, &lscp(&[4])),
        ]
    };
    // The clean's clock is at most 41 s: protected from 21 s on, after
    // the timer (15 s) and before the fsync (22 s); from 14 s on, before
    // the timer could fire.
    accepted_and_rejected_at(&with_protection(20), &with_protection(27), 13);
}

/// The injected clock moves forward or stays, never back: a `clock` line
/// at the time of the one before is accepted, one earlier is not.
/// Postmortem (model shard 10/16: `clock`'s `now < s.clock` as `==`,
/// which refused a clock that stayed and took one that went back).
#[test]
fn the_clock_may_stay_but_never_goes_back() {
    let stays = [op(&secs(10), r#""ok""#), op(&secs(10), r#""ok""#)];
    let back = [op(&secs(10), r#""ok""#), op(&secs(5), r#""ok""#)];
    accepted_and_rejected_at(&stays, &back, 1);
}
