//! Log layout and writing, checked against the format's own rules and
//! against the mount-time scan: constructions of any size laid out after
//! a fresh mkfs log, written, and found again by `nilfs_search_super_root`.

use nilfs_testkit::image::fresh;
use std::collections::BTreeMap;

use nilfs::device::{BlockDevice, MemDevice};
use nilfs::format::segsum::{summary_bytes, Binfo, Summary, SS_LOGBGN, SS_LOGEND, SS_SR};
use nilfs::format::superblock::SuperBlock;
use nilfs::format::{BlockNr, Cno, FileBlk, Ino, SegNum, Seq, VBlockNr};
use nilfs::recovery::{search_super_root, SegGeometry};
use nilfs::segctor::layout::{Cursor, FileTag, Full, Layout, LogPlan, SegmentSource};
use nilfs::segctor::write::{assemble, check_log, write};
use nilfs::Result;
use proptest::prelude::*;

/// Segments handed out in order, as a fresh sufile does after mkfs.
struct Segs {
    next: u64,
    nsegments: u64,
    freed: Vec<SegNum>,
    dirtied: Vec<SegNum>,
}

impl SegmentSource for Segs {
    fn alloc(&mut self) -> Result<SegNum> {
        if self.next >= self.nsegments {
            return Err(nilfs::Error::errno(
                nilfs::Errno::ENOSPC,
                "no clean segment",
            ));
        }
        self.next += 1;
        Ok(SegNum(self.next - 1))
    }
    fn free(&mut self, s: SegNum) -> Result<()> {
        self.freed.push(s);
        Ok(())
    }
    fn mark_dirty(&mut self, s: SegNum) -> Result<()> {
        self.dirtied.push(s);
        Ok(())
    }
}

/// A file's worth of blocks: `ndata` data blocks then `nnode` node blocks.
#[derive(Clone, Debug)]
struct FileSpec {
    ino: u64,
    ndata: u32,
    nnode: u32,
}

fn binfos(f: &FileSpec) -> Vec<Binfo> {
    let dat = f.ino == 3;
    (0..f.ndata)
        .map(|i| {
            if dat {
                Binfo::DataDat {
                    blkoff: FileBlk(u64::from(i)),
                }
            } else {
                Binfo::DataV {
                    vblocknr: VBlockNr(1000 + u64::from(i)),
                    blkoff: FileBlk(u64::from(i)),
                }
            }
        })
        .chain((0..f.nnode).map(|i| {
            if dat {
                Binfo::NodeDat {
                    blkoff: FileBlk(u64::from(i) * 100),
                    level: 1,
                }
            } else {
                Binfo::NodeV {
                    vblocknr: VBlockNr(5000 + u64::from(i)),
                }
            }
        }))
        .collect()
}

/// Lay out `files` + a super root as one construction at `cursor`,
/// extending as nilfs_segctor_collect does (1, 2, 4... more segments).
fn construct(
    geo: SegGeometry,
    cursor: &mut Cursor,
    segs: &mut Segs,
    files: &[FileSpec],
    cno: Cno,
) -> (Vec<LogPlan>, Cursor) {
    let mut layout = Layout::begin(geo, cursor, segs, 1_800_000_000, cno, false, true).unwrap();
    let mut nadd = 1;
    loop {
        let mut tag = 0u64;
        let attempt = (|| -> std::result::Result<(), Full> {
            for f in files {
                let file = FileTag {
                    ino: Ino(f.ino),
                    cno: if f.ino <= 5 && f.ino >= 3 {
                        Cno(0)
                    } else {
                        cno
                    },
                };
                for b in binfos(f) {
                    layout.add_block(file, b, tag)?;
                    tag += 1;
                }
                layout.end_file(file);
            }
            layout.add_super_root()
        })();
        match attempt {
            Ok(()) => break,
            Err(Full) => {
                layout.extend(segs, nadd).unwrap();
                nadd = (nadd * 2).min(64);
                layout.restart(true);
            }
        }
    }
    layout.finish(segs).unwrap()
}

fn check_plans(geo: SegGeometry, plans: &[LogPlan], files: &[FileSpec]) {
    let bs = geo.block_size;
    assert!(plans[0].header.flags & SS_LOGBGN != 0);
    let last = plans.last().unwrap();
    assert_eq!(last.header.flags & (SS_SR | SS_LOGEND), SS_SR | SS_LOGEND);
    let mut total = 0u64;
    for (i, p) in plans.iter().enumerate() {
        let s = Summary {
            header: p.header,
            files: p.files.clone(),
        };
        // The layout's running ss_sumbytes equals the packing rule's.
        assert_eq!(p.header.sumbytes, summary_bytes(&p.files, bs), "log {i}");
        let nsum = u64::from(p.header.sumbytes).div_ceil(u64::from(bs));
        assert_eq!(s.encode(bs).len() as u64, nsum * u64::from(bs));
        let sr = u64::from(p.super_root.is_some());
        assert_eq!(
            u64::from(p.header.nblocks),
            nsum + p.payload.len() as u64 + sr,
            "log {i}"
        );
        // Payload blocks follow the summary, in order, inside the segment.
        for (j, (_, b)) in p.payload.iter().enumerate() {
            assert_eq!(b.0, p.start.0 + nsum + j as u64);
        }
        let (_, seg_end) = geo.range(p.segnum);
        assert!(
            p.start.0 + u64::from(p.header.nblocks) - 1 <= seg_end.0,
            "log {i} crosses its segment end"
        );
        assert_eq!(p.header.nfinfo as usize, p.files.len());
        for r in &p.files {
            assert_eq!(r.finfo.nblocks as usize, r.binfos.len());
            assert!(r.binfos[..r.finfo.ndatablk as usize]
                .iter()
                .all(|b| b.is_data()));
            assert!(r.binfos[r.finfo.ndatablk as usize..]
                .iter()
                .all(|b| !b.is_data()));
        }
        if i > 0 {
            // Each further log is the head of the segment the previous names.
            assert_eq!(p.start, plans[i - 1].header.next);
            assert_eq!(p.header.seq, Seq(plans[i - 1].header.seq.0 + 1));
            assert_eq!(p.header.flags & SS_LOGBGN, 0);
        }
        if i + 1 < plans.len() {
            assert_eq!(p.header.flags & (SS_SR | SS_LOGEND), 0);
        }
        total += p.payload.len() as u64;
    }
    let expect: u64 = files.iter().map(|f| u64::from(f.ndata + f.nnode)).sum();
    assert_eq!(total, expect);
}

/// A fresh 1 KiB image with small segments, and the state a mount gives.
fn fresh_mount(bps: u64) -> (MemDevice, SuperBlock, SegGeometry, Cursor, Segs, Vec<u8>) {
    let dev = fresh(bps * 1024 * 400 + 8192, 1024, bps);
    let mut raw = vec![0u8; 1024];
    dev.read_at(1024, &mut raw).unwrap();
    let sb = SuperBlock::decode_valid(&raw).unwrap();
    let geo = SegGeometry::new(&sb).unwrap();
    let scan = search_super_root(&dev, &sb, true).unwrap();
    let cursor = Cursor {
        segnum: scan.segnum,
        pseg_offset: scan.pseg_offset,
        seq: scan.seq,
        nextnum: scan.nextnum,
    };
    let mut sr = vec![0u8; 1024];
    dev.read_at(scan.super_root.0 * 1024, &mut sr).unwrap();
    let nsegments = geo.nsegments;
    (
        dev,
        sb,
        geo,
        cursor,
        Segs {
            next: 2,
            nsegments,
            freed: vec![],
            dirtied: vec![],
        },
        sr,
    )
}

fn write_plans(dev: &MemDevice, plans: &[LogPlan], sr: &[u8], seed: u32) {
    for p in plans {
        let payload: BTreeMap<u64, Vec<u8>> = p
            .payload
            .iter()
            .map(|(t, _)| (*t, vec![(*t % 251) as u8; 1024]))
            .collect();
        let log = assemble(p, &payload, p.super_root.map(|_| sr), 1024, seed).unwrap();
        check_log(p, &log, 1024, seed).unwrap();
        write(dev, p, &log, 1024).unwrap();
    }
}

/// Any construction: the plans obey the format's rules, and after writing
/// them the kernel's scan (of an uncleanly unmounted image) walks the chain
/// to the new super root as the next checkpoint.
fn constructions_round_trip(
    bps_sel: u32,
    specs: &[(u64, u32, u32)],
    rounds: usize,
) -> std::result::Result<(), TestCaseError> {
    let bps = 32u64 << bps_sel;
    let files: Vec<FileSpec> = specs
        .iter()
        .map(|&(ino, ndata, nnode)| FileSpec {
            ino,
            ndata: ndata.max(1),
            nnode,
        })
        .collect();
    let (dev, sb, geo, mut cursor, mut segs, sr) = fresh_mount(bps);
    let mut last_sr = None;
    for round in 0..rounds {
        let cno = Cno(2 + round as u64);
        let (plans, next) = construct(geo, &mut cursor, &mut segs, &files, cno);
        check_plans(geo, &plans, &files);
        write_plans(&dev, &plans, &sr, sb.crc_seed);
        last_sr = plans.last().unwrap().super_root;
        cursor = next;
    }
    // The super block still names the mkfs log; an unclean mount scans on.
    let scan = search_super_root(&dev, &sb, false).unwrap();
    prop_assert_eq!(Some(scan.super_root), last_sr);
    prop_assert_eq!(scan.cno, Cno(1 + rounds as u64));
    prop_assert_eq!(
        (scan.segnum, scan.pseg_offset, scan.seq, scan.nextnum),
        (
            cursor.segnum,
            cursor.pseg_offset,
            cursor.seq,
            cursor.nextnum
        )
    );
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, .. ProptestConfig::default() })]

    #[test]
    fn constructions_are_well_formed_and_found_by_the_scan(
        bps_sel in 0u32..3,
        specs in proptest::collection::vec((prop_oneof![Just(3u64), Just(4), Just(5), Just(6), 11u64..200], 0u32..120, 0u32..6), 1..8),
        rounds in 1usize..4,
    ) {
        constructions_round_trip(bps_sel, &specs, rounds)?;
    }
}

// postmortem: three rounds of a 240-block construction at 32 blocks per
// segment need more segments than the first version of `fresh_mount` gave its
// image; the test's own allocator answered ENOSPC mid-extension and the
// test panicked. The layout was right: the image now has 400 segments.
// (Shrunk by proptest; was impl/tests/segctor_layout.proptest-regressions.)
#[test]
fn regress_000_three_big_constructions_at_32_blocks_per_segment() {
    constructions_round_trip(0, &[(3, 6, 3), (3, 109, 5), (3, 119, 0)], 3).unwrap();
}

/// The first construction after mkfs is appended in segment 0 right after
/// the mkfs log, with sequence 0, as the kernel does (digest §3.8).
#[test]
fn first_log_after_mkfs_is_appended_in_segment_zero() {
    let (_dev, _sb, geo, mut cursor, mut segs, _) = fresh_mount(64);
    let files = [FileSpec {
        ino: 12,
        ndata: 3,
        nnode: 0,
    }];
    let (plans, _) = construct(geo, &mut cursor, &mut segs, &files, Cno(2));
    assert_eq!(plans.len(), 1);
    assert_eq!(plans[0].start, BlockNr(4 + 12)); // first data block 4 at 1 KiB, mkfs log of 12
    assert_eq!(plans[0].header.seq, Seq(0));
    assert_eq!(plans[0].header.next, BlockNr(64));
    assert!(segs.freed.is_empty());
}

/// A file that does not fit is split: its record closes in one log and
/// continues under the same inode number in the next.
#[test]
fn a_large_file_is_split_across_logs() {
    let (_dev, _sb, geo, mut cursor, mut segs, _) = fresh_mount(32);
    let files = [FileSpec {
        ino: 20,
        ndata: 100,
        nnode: 2,
    }];
    let (plans, _) = construct(geo, &mut cursor, &mut segs, &files, Cno(2));
    assert!(plans.len() >= 4, "{}", plans.len());
    assert!(plans
        .iter()
        .all(|p| p.files.iter().all(|r| r.finfo.ino == Ino(20))));
    check_plans(geo, &plans, &files);
}

/// The check every log passes before the constructor writes it
/// (`segctor::write::check_log`) refuses a log that is not what its plan
/// says: a header field changed after assembly, a flipped summary byte,
/// block records that describe other blocks than the plan writes, a super
/// root the plan does not place or places elsewhere. Each is an
/// `Error::Invalid`, not a panic.
#[test]
fn the_pre_write_check_refuses_logs_that_differ_from_their_plan() {
    let (_dev, sb, geo, mut cursor, mut segs, sr) = fresh_mount(64);
    let files = [
        FileSpec {
            ino: 12,
            ndata: 5,
            nnode: 1,
        },
        FileSpec {
            ino: 6,
            ndata: 2,
            nnode: 0,
        },
    ];
    let (plans, _) = construct(geo, &mut cursor, &mut segs, &files, Cno(2));
    let p = &plans[0];
    let payload: BTreeMap<u64, Vec<u8>> = p
        .payload
        .iter()
        .map(|(t, _)| (*t, vec![(*t % 251) as u8; 1024]))
        .collect();
    let seed = sb.crc_seed;
    let log = assemble(p, &payload, p.super_root.map(|_| &sr[..]), 1024, seed).unwrap();
    check_log(p, &log, 1024, seed).unwrap();
    let refused = |plan: &LogPlan, log: &[u8], what: &str| {
        let r = check_log(plan, log, 1024, seed);
        assert!(matches!(r, Err(nilfs::Error::Invalid(_))), "{what}: {r:?}");
    };
    let mut other = p.clone();
    other.header.create += 1;
    refused(&other, &log, "a header field");
    let mut other = p.clone();
    other.files[0].binfos.swap(0, 1);
    refused(&other, &log, "the file records");
    let mut other = p.clone();
    other.payload.swap(0, 1);
    other.payload[0].1 = BlockNr(other.payload[0].1 .0 + 100);
    refused(&other, &log, "the payload's places");
    let mut other = p.clone();
    other.super_root = None;
    refused(&other, &log, "the super root");
    // The plan places it a block before where the summary says it is.
    let mut other = p.clone();
    other.super_root = p.super_root.map(|b| BlockNr(b.0 - 1));
    assert!(other.super_root.is_some(), "the first log has a super root");
    refused(&other, &log, "the super root's place");
    let mut bad = log.clone();
    // A byte of the first file record (past the 64-byte header).
    bad[64 + 4] ^= 0x40;
    refused(p, &bad, "a summary byte");
    let mut bad = log.clone();
    let last = bad.len() - 1;
    bad[last - 1024] ^= 1;
    refused(p, &bad, "a payload byte (the data checksum)");
}

/// The flags of each log's summary (`nilfs_segbuf_reset`): an fdatasync's
/// data-only log says SYNDT and has no super root; a cleaning step's logs
/// say GC.
#[test]
fn a_data_only_log_says_syndt_and_a_cleaners_log_says_gc() {
    use nilfs::format::ino::ROOT;
    use nilfs::format::segsum::{SS_GC, SS_SYNDT};
    use nilfs::fs::Fs;
    use nilfs::the_nilfs::Nilfs;
    // The flags of every valid log from the super block's on.
    let flags = |dev: &MemDevice| -> Vec<u16> {
        let mut raw = vec![0u8; 1024];
        dev.read_at(1024, &mut raw).unwrap();
        let sb = SuperBlock::decode_valid(&raw).unwrap();
        search_super_root(dev, &sb, false)
            .unwrap()
            .visits
            .iter()
            .filter(|v| v.verdict.is_ok())
            .filter_map(|v| v.header.map(|h| h.flags))
            .collect()
    };
    let dev = fresh(16 << 20, 1024, 64);
    let nilfs = Nilfs::open(&dev).unwrap();
    let mut fs = Fs::mount(&nilfs, 1_800_000_000).unwrap();
    let f = fs.create(ROOT, b"f", 0o644).unwrap();
    fs.write(f, 0, &[1; 3000]).unwrap();
    fs.sync().unwrap();
    fs.write(f, 0, &[2; 3000]).unwrap();
    fs.fdatasync(f).unwrap();
    let last = *flags(&dev).last().unwrap();
    assert_eq!(last, SS_LOGBGN | SS_LOGEND | SS_SYNDT, "{last:#x}");
    // Overwritten twice over, the first segment's blocks are mostly dead:
    // the cleaner moves the rest.
    for i in 0..4u8 {
        fs.write(f, 0, &[i; 200 << 10]).unwrap();
        fs.sync().unwrap();
    }
    fs.unmount().unwrap();
    drop(nilfs);
    assert!(flags(&dev).iter().all(|f| f & SS_GC == 0));
    // A later construction makes the old segments the cleaner's
    // candidates (older than the last one not the cleaner's).
    let nilfs = Nilfs::open(&dev).unwrap();
    let mut fs = Fs::mount(&nilfs, 1_800_000_100).unwrap();
    let g = fs.create(ROOT, b"g", 0o644).unwrap();
    fs.write(g, 0, &[3; 100]).unwrap();
    fs.sync().unwrap();
    let r = nilfs::cleaner::clean(&mut fs, 0, 2).unwrap();
    assert!(r.moved_blocks > 0, "{r:?}");
    let after = flags(&dev);
    assert!(
        after.iter().any(|f| f & SS_GC != 0),
        "no log of the cleaning says GC: {after:x?}"
    );
    fs.unmount().unwrap();
}

/// A device whose file `/f` of 300 KiB was synced as zeros, then written
/// whole with a pattern and fdatasynced: a data-only run over several 64
/// KiB segments. Unmounted after, or not (a crash). Returns the pattern.
fn data_only_run_over_segments(dev: &MemDevice, unmount: bool) -> Vec<u8> {
    use nilfs::format::ino::ROOT;
    use nilfs::fs::Fs;
    use nilfs::the_nilfs::Nilfs;
    let data: Vec<u8> = (0..300 << 10).map(|i: u32| (i % 251) as u8).collect();
    let nilfs = Nilfs::open(dev).unwrap();
    let mut fs = Fs::mount(&nilfs, 1_800_000_000).unwrap();
    let f = fs.create(ROOT, b"f", 0o644).unwrap();
    fs.write(f, 0, &vec![0; data.len()]).unwrap();
    fs.sync().unwrap();
    // Inside the size: a data-only log, no checkpoint.
    fs.write(f, 0, &data).unwrap();
    fs.fdatasync(f).unwrap();
    if unmount {
        fs.unmount().unwrap();
    }
    data
}

/// `/f` of `dev` after a remount reads `data`.
fn f_reads(dev: &MemDevice, data: &[u8]) {
    use nilfs::format::ino::ROOT;
    use nilfs::fs::Fs;
    use nilfs::the_nilfs::Nilfs;
    let nilfs = Nilfs::open(dev).unwrap();
    let mut fs = Fs::mount(&nilfs, 1_800_000_010).unwrap();
    let f = fs.lookup(ROOT, b"f").unwrap().expect("f is there");
    assert!(fs.read(f, 0, data.len() as u64).unwrap() == data);
}

/// An fdatasync whose data-only logs need more segments than the first
/// extension gives: the layout extends by 1, 2, 4... as
/// `nilfs_segctor_collect`'s retry does (issue 37: with the doubling as a
/// halving, the second retry asked for no segment and the construction
/// never ended). 300 KiB on 64 KiB segments, then a remount reads it.
#[test]
fn a_data_only_construction_over_several_segments_extends_and_ends() {
    let dev = fresh(16 << 20, 1024, 64);
    let data = data_only_run_over_segments(&dev, true);
    f_reads(&dev, &data);
}

/// The same fdatasync over several segments, and then a crash (no
/// unmount): every log of the data-only run says `SS_SYNDT`, not only the
/// last, since roll-forward gives up at a log of the run without it
/// (`nilfs_do_roll_forward`: "confused"); the remount finds the data.
/// Issue 37 (core-segctor 7/25: `Layout::set_base_flags` as a no-op left
/// the flag on the run's last log alone, which `end_logical_segment`
/// sets).
#[test]
fn every_log_of_a_data_only_run_over_several_segments_says_syndt() {
    use nilfs::format::segsum::{SS_SR, SS_SYNDT};
    let dev = fresh(16 << 20, 1024, 64);
    let data = data_only_run_over_segments(&dev, false);
    let mut raw = vec![0u8; 1024];
    dev.read_at(1024, &mut raw).unwrap();
    let sb = SuperBlock::decode_valid(&raw).unwrap();
    let scan = search_super_root(&dev, &sb, false).unwrap();
    let flags: Vec<u16> = scan
        .visits
        .iter()
        .filter(|v| v.verdict.is_ok())
        .filter_map(|v| v.header.map(|h| h.flags))
        .collect();
    // The run: every log after the last super root.
    let last_sr = flags.iter().rposition(|f| f & SS_SR != 0).unwrap();
    let logs = &flags[last_sr + 1..];
    assert!(logs.len() > 1, "the run took {} logs", logs.len());
    assert!(
        logs.iter().all(|f| f & SS_SYNDT != 0),
        "logs of the data-only run: {logs:x?}"
    );
    f_reads(&dev, &data);
}

/// Segment numbers and log boundaries as dumpseg prints them: one line per
/// segment, its logs' first blocks and lengths.
fn log_boundaries(dev: &MemDevice, segs: std::ops::RangeInclusive<u64>) -> Vec<String> {
    let segs: Vec<u64> = segs.collect();
    let out = nilfs::inspect::tools::dumpseg(dev, &segs).unwrap().stdout;
    let mut lines: Vec<String> = Vec::new();
    for l in out.lines() {
        if let Some(n) = l.strip_prefix("segment: segnum = ") {
            lines.push(format!("{n}:"));
        } else if let Some(p) = l.trim().strip_prefix("partial segment: ") {
            let last = lines.last_mut().expect("a log inside a segment");
            last.push(' ');
            last.push_str(&p.replace("blocknr = ", "").replace(", nblocks = ", "+"));
        }
    }
    lines
}

/// What a workload left behind on `dev`: the segments in use (number,
/// current or not, blocks), and the sufile's `sh_last_alloc`.
fn usage(dev: &MemDevice) -> (Vec<(u64, bool, u32)>, u64) {
    let nilfs = nilfs::the_nilfs::Nilfs::open(dev).unwrap();
    let used = nilfs
        .segment_usages()
        .unwrap()
        .iter()
        .enumerate()
        .filter(|(_, u)| u.is_dirty() || u.is_active())
        .map(|(s, u)| (s as u64, u.is_active(), u.nblocks))
        .collect();
    (used, nilfs.sufile_header().unwrap().last_alloc.0)
}

/// Segments `0..=current` dirty and full (`first` blocks in segment 0,
/// past its super block area), `current` holding `last` blocks, and the
/// next one taken.
fn filled(first: u32, full: u32, current: u64, last: u32) -> Vec<(u64, bool, u32)> {
    let mut v: Vec<(u64, bool, u32)> = (0..current).map(|s| (s, false, full)).collect();
    v[0].2 = first;
    v.extend([(current, true, last), (current + 1, true, 0)]);
    v
}

// Issue 37 (the allocation-policy survivors of `estimate_blocks`, and a
// departure they hid): a construction took up front the segments a
// generous estimate of its size asked for, and freed those it did not use
// (as `nilfs_segctor_truncate_segments` frees the kernel's). The frees are
// right, but `sh_last_alloc` had moved past them: after a 300 KiB write
// and a sync, ours left segment 7 out, and every later segment number
// differed from the kernel's. `nilfs_segctor_collect` extends only for the
// stages from the checkpoint file on, by 1, 2, 4, ... segments; a fill-up
// before them ends a log and goes on in the next segment. Ours now takes
// no segment the kernel would not take (docs/findings.md, L6).
//
// The expected layouts are Linux 6.1's (Debian 6.1.176), on the same
// images made by `nilref mkfs --size 16M -b 1024 -B N`, in the guest
// (tests/guest/kernel-run.sh), then `nilref dumpseg IMAGE 0 1 ...`,
// `nilref lssu IMAGE` and `nilref inspect IMAGE` (its "last allocated").
// The virtual block numbers differ (L3); the logs and the segments do not.

// `-B 64`: `mount`, `dd if=/dev/urandom of=/mnt/f bs=1024 count=300`,
// `sync`, the same for `/g` with `count=200`, `sync`, and for `/h` with
// `count=1`, `sync`, `umount`. The last construction fits in its segment
// and takes none.
#[test]
fn segments_are_taken_in_the_kernels_order() {
    use nilfs::format::ino;
    let dev = fresh(16 << 20, 1024, 64);
    {
        let nilfs = nilfs::the_nilfs::Nilfs::open(&dev).unwrap();
        let mut fs = nilfs::fs::Fs::mount(&nilfs, 1_800_000_000).unwrap();
        for (name, kib, seed) in [(&b"f"[..], 300, 1), (&b"g"[..], 200, 2), (&b"h"[..], 1, 3)] {
            let f = fs.create(ino::ROOT, name, 0o644).unwrap();
            fs.write(f, 0, &nilfs_testkit::pattern(seed, kib << 10))
                .unwrap();
            fs.sync().unwrap();
        }
        fs.unmount().unwrap();
    }
    let kernel_6_1 = [
        "0: 4+12 16+48",
        "1: 64+64",
        "2: 128+64",
        "3: 192+64",
        "4: 256+64",
        "5: 320+34 354+30",
        "6: 384+64",
        "7: 448+64",
        "8: 512+64",
        "9: 576+10 586+15",
        "10:",
    ];
    assert_eq!(log_boundaries(&dev, 0..=10), kernel_6_1);
    assert_eq!(usage(&dev), (filled(60, 64, 9, 25), 10));
}

// `-B 16` (the smallest segment): 300 files of one byte each (`printf x >
// /mnt/fN`), one `sync`, `umount`. The construction's data blocks fill 19
// segments for certain; its summaries and metadata need 6 more, which the
// file stage's fill-ups take one by one. Doubling them (1, 2, 4) took one
// too many, and `sh_last_alloc` was 28 where the kernel's is 26.
#[test]
fn fill_ups_before_the_checkpoint_file_take_one_segment_each() {
    use nilfs::format::ino;
    let dev = fresh(16 << 20, 1024, 16);
    {
        let nilfs = nilfs::the_nilfs::Nilfs::open(&dev).unwrap();
        let mut fs = nilfs::fs::Fs::mount(&nilfs, 1_800_000_000).unwrap();
        for i in 1..=300 {
            let f = fs
                .create(ino::ROOT, format!("f{i}").as_bytes(), 0o644)
                .unwrap();
            fs.write(f, 0, b"x").unwrap();
        }
        fs.sync().unwrap();
        fs.unmount().unwrap();
    }
    let mut kernel_6_1: Vec<String> = vec!["0: 4+12".into()];
    kernel_6_1.extend((1..25).map(|s| format!("{s}: {}+16", s * 16)));
    kernel_6_1.extend(["25: 400+11".into(), "26:".into()]);
    assert_eq!(log_boundaries(&dev, 0..=26), kernel_6_1);
    assert_eq!(usage(&dev), (filled(12, 16, 25, 11), 26));
}

// Issue 37 (five survivors of the collection's tail: the stage test `<`
// as `<=`, the doubling `nadd * 2` as `nadd + 2`, and `stage_of`'s
// CPFILE, SUFILE and DAT arms deleted): they differ only where a
// construction's stages from the checkpoint file on fill up twice. On
// `-B 16`, a single file's DAT blocks take more than a segment, so a
// large enough write has two fill-ups at the tail; its size decides in
// which stage the first falls. Linux 6.1, same images and commands as
// above, `dd if=/dev/urandom of=/mnt/f bs=1024 count=N`, `sync`,
// `umount`:
// - 613 KiB: the first fill-up is in the segment usage file's stage;
// - 614 KiB: in the checkpoint file's;
// - 800 KiB: both in the DAT's.
// Each time the kernel extends by 1, then by 2, and frees the segment the
// second extension did not use: `sh_last_alloc` is one past the next
// segment.
#[test]
fn tail_fill_ups_double_from_the_checkpoint_file_on() {
    use nilfs::format::ino;
    for (kib, current, last_blocks, last_alloc) in
        [(613, 44, 12, 46), (614, 44, 13, 46), (800, 57, 13, 59)]
    {
        let dev = fresh(16 << 20, 1024, 16);
        {
            let nilfs = nilfs::the_nilfs::Nilfs::open(&dev).unwrap();
            let mut fs = nilfs::fs::Fs::mount(&nilfs, 1_800_000_000).unwrap();
            let f = fs.create(ino::ROOT, b"f", 0o644).unwrap();
            fs.write(f, 0, &nilfs_testkit::pattern(1, kib << 10))
                .unwrap();
            fs.sync().unwrap();
            fs.unmount().unwrap();
        }
        let mut kernel_6_1: Vec<String> = vec!["0: 4+12".into()];
        kernel_6_1.extend((1..current).map(|s| format!("{s}: {}+16", s * 16)));
        kernel_6_1.extend([
            format!("{current}: {}+{last_blocks}", current * 16),
            format!("{}:", current + 1),
            format!("{}:", current + 2),
        ]);
        assert_eq!(
            log_boundaries(&dev, 0..=current + 2),
            kernel_6_1,
            "{kib} KiB"
        );
        assert_eq!(
            usage(&dev),
            (filled(12, 16, current, last_blocks), last_alloc),
            "{kib} KiB"
        );
    }
}

// Issue 37 (core-segctor 4/25: `nilfs_shift_to_next_segment`'s test `<
// NILFS_PSEG_MIN_BLOCKS` as `<=`): a construction starts in the rest of
// its segment while two blocks are left (a summary and one block), and
// moves to the next segment only when fewer are
// (`nilfs_segctor_begin_construction`).
#[test]
fn a_log_begins_in_the_last_two_blocks_of_a_segment() {
    let (_dev, _sb, geo, cursor, mut segs, _) = fresh_mount(16);
    let (start, end) = geo.range(cursor.segnum);
    let len = end.0 - start.0 + 1;
    for (rest, shifts) in [(2, false), (1, true)] {
        let mut c = cursor;
        c.pseg_offset = len - rest;
        let l = Layout::begin(geo, &mut c, &mut segs, 1_800_000_000, Cno(2), false, true).unwrap();
        let b = &l.bufs()[0];
        if shifts {
            assert_eq!(b.segnum, cursor.nextnum, "{rest} blocks left");
            assert_eq!(b.pseg_start, geo.range(cursor.nextnum).0);
        } else {
            assert_eq!(b.segnum, cursor.segnum, "{rest} blocks left");
            assert_eq!(b.rest_blocks, 2);
        }
    }
}
