//! Replays every committed fuzz corpus input (fuzz/corpus/TARGET/*) through
//! its target's entry point, so plain `cargo test` checks the corpus and
//! every past crash input stays fixed. To replay one input by hand:
//! `cargo test -p nilfs-conformance --test fuzz_corpus -- --nocapture`
//! prints each file as it runs; a panic names the file that caused it.
//!
//! Regressions (`regress-NNN-what`), with their postmortems:
//! - image/regress-001-dumpseg-allocates-corrupt-segment-size: dumpseg
//!   takes its geometry from the primary super block without a CRC check,
//!   as libnilfs does; a patched `s_blocks_per_segment` made it allocate
//!   48 GiB for one segment. The read is now bounded by the device first.
//! - image/regress-002-cursor-before-the-first-data-block: found by the
//!   campaign's corpus replayed here with overflow checks on (the fuzz
//!   build had them off): `s_last_pseg` inside segment 0 but before
//!   `s_first_data_block`, with a sound log resealed there, made the
//!   scan's log offset (pseg + nblocks - seg_start) wrap. The kernel checks
//!   only the segment number; the scan now refuses such a cursor.
//! - image/regress-003-fallback-takes-the-spare-geometry: found by the
//!   fork-mode run as an allocation past 3 GiB (four inputs, one bug): the
//!   chosen copy's logs were not found, the mount fell back to the spare,
//!   and ours took the spare's whole geometry unchecked, a damaged
//!   `s_nsegments` among it, which `check` then walked segment by segment.
//!   The kernel keeps the disk layout of the copy it chose first
//!   (`load_nilfs` does not rerun `nilfs_store_disk_layout`) and checks
//!   the spare's cursor against it; so does ours now
//!   (`SuperBlock::fallen_back_from`; test
//!   `sb_fallback::a_fallback_keeps_the_disk_layout_of_the_first_copy`).
//! - image/regress-004-spare-scanned-with-its-own-geometry: found by the
//!   10-million run after regress-003's fix: `check`'s super block pass
//!   scanned the spare copy's logs with the spare's own unchecked
//!   geometry, and its `s_blocks_per_segment` of 0 divided by zero. The
//!   pass now scans the spare as the mount falls back to it (the chosen
//!   copy's layout), and `SegGeometry::new` refuses fewer than 16 blocks
//!   a segment for every caller.
//! - image_ops/regress-001-secondary-reserves-no-segments: the secondary
//!   copy, resealed with `s_r_segments_percentage` 0, was not the one in
//!   use, and `check` compared only a few fields of the two copies, so it
//!   called the image clean; after a workload the copies' turns made the
//!   secondary the newer one and the image no longer opened (as in the
//!   kernel, whose nilfs_store_disk_layout refuses 0). `check` now compares
//!   every field the kernel never changes in one copy alone.
//! - image_ops/regress-002-dropped-secondary-differs: a secondary whose own
//!   geometry puts it inside its segment area is dropped by the load
//!   (nilfs_sb2_bad_offset) and was then not compared at all; once a write
//!   made the primary the newer copy, the load kept the secondary and
//!   `check` reported what it had missed. A copy with a good checksum is
//!   now compared whether or not the load kept it.
//! - image_ops/regress-003-recovery-seals-over-the-other-copys-size: the
//!   primary copy resealed with `s_bytes` 282 (the secondary has 280) on an
//!   image needing roll-forward; the salvage's commit swapped the copies,
//!   one was copied over the other and both were sealed over 282 bytes,
//!   so neither verified afterwards. Linux 6.1 does the same (finding K14);
//!   our writer now seals each copy over its own `s_bytes`.
//! - image_ops/regress-004-free-blocks-overflow: `sh_ncleansegs`
//!   0x7301000000000000 overflowed `ncleansegs * blocks_per_segment` in
//!   the free block count the unmount writes (a panic under overflow
//!   checks). The kernel's `nilfs_count_free_blocks` multiplies in
//!   unsigned arithmetic, and so do we now; `check` reports the count.
//! - image_ops/regress-005-directory-size-loads-every-block: the root's
//!   `i_size` set to 5 * 10^17 made the mount's first lookup load every
//!   block below it, holes as zeros, into memory (past 3 GiB). A directory
//!   now loads block by block, each checked as it arrives (`DirFile::load`);
//!   the first hole fails the directory checks, as the kernel's
//!   `nilfs_check_folio` fails a zeroed page.
//! - image_ops/regress-006-first-data-block-past-segment-0: the secondary
//!   copy (in use) says `s_first_data_block` 0x6d with 32-block segments,
//!   which the kernel mounts; `check`'s length of segment 0 underflowed
//!   (a panic under overflow checks). Segment 0 now holds no block then,
//!   in `check` and in the layout of a construction.
//! - image_ops/regress-007-inodes-count-overflow: `cp_inodes_count` of the
//!   latest checkpoint set to 2^64 - 1; the first create overflowed the
//!   mount's count (a panic under overflow checks). The kernel's
//!   `atomic64_inc` wraps, and so does ours (and the block count).
//! - image_ops/regress-008-group-free-count-overflow,
//!   regress-009-last-cno-overflow, regress-010-i-blocks-overflow: the
//!   DAT group's `pg_nfrees` at 2^32 - 1, the super block's `s_last_cno`
//!   at 2^64 - 1 and the cpfile's `i_blocks` at 2^64 - 1 overflowed the
//!   next free, the scan's next checkpoint number and the block count
//!   (panics under overflow checks); the kernel's `le32_add_cpu`, u64
//!   `cno++` and `inode_add_bytes` wrap, and so do ours.
//! - image_ops/regress-011-next-cno-overflow,
//!   regress-012-next-cno-overflow-after-roll-forward: the copy in use
//!   with `s_last_cno` 2^64 - 1 (and 2^64 - 2 on the base awaiting
//!   roll-forward) overflowed `ns_cno = cno + 1`; the kernel's u64 wraps,
//!   and so does ours. Found by the fork-mode run with five inputs of the
//!   one bug.
//! - image_ops/regress-013-free-with-an-unreadable-descriptor: the DAT
//!   B-tree's pointer to block 0 (the group descriptor) pointed past the
//!   device; freeing an entry checked only the bitmap in its prepare, and
//!   the commit, which must not fail, panicked reading the descriptor.
//!   The kernel's `nilfs_palloc_prepare_free_entry` reads both blocks
//!   (create = 0) and fails there; so does ours now. Found by the
//!   3.4-million run of this round.
//! - lockstep/regress-001-chcp-of-a-mounted-snapshot: found by the first
//!   run of the structure-aware lockstep target (issue 35) after 250 s: a
//!   snapshot mounted with `mount -o ro,cp=N` beside the read-write mount
//!   was turned into a plain checkpoint; the model (as the kernel's
//!   `nilfs_checkpoint_is_mounted`) answers EBUSY. `Fs::chcp` never heard
//!   of the adapter's snapshot mounts; `Fs::chcp_with_mounted` now takes
//!   them (test `lockstep::regress_chcp_of_a_mounted_snapshot_is_ebusy`).
//! - lockstep/regress-002-setattr-of-nothing-before-fdatasync (and -2):
//!   the run of 2026-12-06 night (at e2e3e8e). A `chown(-1, -1)` (and a
//!   `utimensat` to the time the clock already showed) changed no value,
//!   then an fdatasync of the file: nilfs-ref made a checkpoint, the
//!   model allowed none. The kernel's `nilfs_setattr` ends in
//!   `mark_inode_dirty` (I_DIRTY, so NILFS_I_INODE_SYNC) whatever changed,
//!   and such an fdatasync is a full construction: the model's fault. Its
//!   setattr now marks the inode for an inode sync always
//!   (model/src/step/attr.rs).
//! - image_mutate/regress-001-directory-cycle-in-the-live-manifest: found
//!   by the first run of the structure-aware image_mutate target (issue
//!   35) as an allocation past 3 GiB: `dirent[/small].inode` set to 2
//!   made `/small` the root itself, and the generated workload's
//!   `manifest` (`inspect::manifest::live_manifest`, the mounted tree)
//!   walked `/small/small/...` without end. The read path's
//!   `CheckpointView::walk_tree` already refused a directory reachable
//!   twice; the live walk now refuses it the same way.
//! - image_mutate/regress-002-logs-past-a-clean-super-root (and -2 to -5,
//!   one bug): the roll-forward base with `NILFS_VALID_FS` set in the
//!   primary's `s_state` mounts at its first super root, and `check`
//!   called it clean; a mount (which clears the mark) then a crash made
//!   the next mount recover the later logs, damaged ones among them, and
//!   `check` reported them. The image was not clean before: `check` now
//!   reports valid logs past the latest super root of a file system
//!   marked clean (`log-after-clean`;
//!   docs/findings/fuzz-image-mutate-001).
//! - image_mutate/regress-003-lscp-that-does-not-move-on (and -2): found by the
//!   20-minute fork-mode run of 2026-12-06 as an allocation of 6 GiB: the
//!   primary's `s_checkpoint_size` resealed as 237 (the kernel accepts
//!   192 to the block size), so the cpfile's entries were read at the
//!   wrong size, and the last one of a batch carried a `cp_cno` behind the
//!   batch's start. `Fs::lscp` continues after that number, as the
//!   kernel's `nilfs_cpfile_do_get_cpinfo` and nilfs-utils' lscp do, and
//!   asked for the same batch for ever. A cursor that does not move on is
//!   EIO now.
//! - image_mutate/regress-004-damage-in-a-plain-checkpoint: the same run:
//!   `cp_inodes_count` of plain checkpoint 1 damaged. `check` by default
//!   walks what can be mounted (the latest and the snapshots), so it
//!   called the image clean; the workload's `chcp ss 1` made checkpoint 1
//!   a snapshot, and `check` then found the count. The target's "clean
//!   before" now checks every checkpoint (`Checkpoints::All`), as a
//!   workload may turn any of them into a snapshot.
//! - image_mutate/regress-005-a-stale-log-revived (and -2 to -6): the
//!   same run (-1 to -4) and the run of 2026-12-06 afternoon (-5, -6). The
//!   roll-forward base with a broken log after its latest super root and
//!   a valid data-sync log of the same sequence behind it; the
//!   workload's sync ended exactly where that log begins, and `check`
//!   then reported it (`log-after-clean`). Not a bug of ours: Linux 6.1
//!   writes the same logs and, after a crash following the next mount,
//!   replays the stale block into the new file that has its inode number
//!   (K20, docs/findings/fuzz-image-mutate-002). The image was not clean
//!   before: `check` now reports such a log (`log-revivable`).
//! - image_mutate/regress-006-an-unreadable-next-past-a-clean-super-root (and
//!   -2, -3, the same run):
//!   the run of 2026-12-06 evening. Fuzz base 1 (a newer super root and
//!   two stale data-sync logs past mkfs's) with the clean mark set and the
//!   newer super root's `ss_next` resealed as a segment past the device.
//!   `check` called it clean: its search on past the clean super root
//!   failed with EIO at that segment, and `log-after-clean` gave up on a
//!   failed search. The workload's sync rewrote that log (as the kernel's
//!   writer does, going on after the first super root), which made the
//!   stale logs reachable, and `check` then reported them. The image was
//!   not clean before: a crash after the next mount fails the mount's
//!   search. `log-after-clean` now also reports valid logs past the clean
//!   super root that lead the search into an unreadable log (check corpus
//!   `log-after-clean-unreadable`).
//! - image_mutate/regress-007-a-super-block-too-short-for-its-cursor: the
//!   same run (it was docs/findings/fuzz-image-mutate-003). Fuzz base 1
//!   (it needs roll-forward), the secondary's `s_sum` damaged and the
//!   primary's `s_bytes` resealed as 61, inside `s_last_cno`. `check`
//!   called it clean; after the workload's mount, sync and unmount our
//!   primary named checkpoint 3 beside mkfs's log, and the next mount
//!   failed. Our writer copied one copy over the other as far as
//!   `s_bytes`, as the kernel's `nilfs_setup_super` does; Linux 6.1, 6.12
//!   and 7.3 tear the cursor the same way when both copies are short
//!   (K22). Ours now always carries the cursor, and `check` reports the
//!   short copy (`sb-bytes-short`).
//! - image_mutate/regress-008-a-stale-log-behind-a-later-sequence: the
//!   run of 2026-12-07 (it was docs/findings/fuzz-image-mutate-004). Fuzz
//!   base 1 with the super root's log resealed into sequence 469 and the
//!   next segment's first log without its magic: the search stops at
//!   block 16, the mount takes checkpoint 1, and the base's second
//!   data-sync log (block 34, sequence 1) stays behind. The workload's
//!   logs ended exactly there, and `check` then reported it
//!   (`log-after-clean`). The image was not clean before: K20's hazard,
//!   which `log-revivable` looked for only behind a torn log of the
//!   expected sequence. It now looks past whatever stops the search.

use std::path::PathBuf;

use nilfs_conformance::fuzz::TARGETS;

fn corpus_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join("fuzz")
        .join("corpus")
}

#[test]
fn every_target_has_a_corpus_and_it_replays() {
    for (name, entry) in TARGETS {
        let dir = corpus_dir().join(name);
        let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .map(|e| e.unwrap().path())
            .collect();
        files.sort();
        assert!(!files.is_empty(), "no corpus for fuzz target {name}");
        for f in files {
            let data = std::fs::read(&f).unwrap();
            println!("{name}: {}", f.display());
            entry(&data);
        }
    }
}

#[test]
fn every_target_has_a_fuzz_binary() {
    let targets = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join("fuzz")
        .join("fuzz_targets");
    for (name, _) in TARGETS {
        assert!(
            targets.join(format!("{name}.rs")).is_file(),
            "fuzz/fuzz_targets/{name}.rs missing"
        );
    }
}
