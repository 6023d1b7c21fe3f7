//! Round trips, robustness and checksum tests for the super block, the log
//! summary and the super root (format::superblock, format::segsum,
//! format::super_root), plus decodes of the verified mkfs image of
//! nilfs2-format.md §17.4.

use nilfs::format::inode::Inode;
use nilfs::format::segsum::{
    compute_datasum, compute_sumsum, seal_log, summary_bytes, verify_log, Binfo, FileRecord, Finfo,
    SegmentSummary, Summary, SS_LOGBGN, SS_LOGEND, SS_SR,
};
use nilfs::format::super_root::{self, SuperRoot};
use nilfs::format::superblock::{self, SuperBlock, FEATURE_COMPAT_RO_BLOCK_COUNT, STATE_VALID_FS};
use nilfs::format::{ino, BlockNr, Cno, FileBlk, Ino, Seq, VBlockNr, SEGSUM_MAGIC, SUPER_MAGIC};
use nilfs::Error;
use proptest::prelude::*;

// ---------------------------------------------------------------- helpers

fn hex(s: &str) -> Vec<u8> {
    let s: String = s.split_whitespace().collect();
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

fn is_corrupt<T: std::fmt::Debug>(r: nilfs::Result<T>) -> bool {
    matches!(r, Err(Error::Corrupt { .. }))
}

/// The super block of §17.4 (Debian mkfs.nilfs2 2.2.9, 256 MiB, 4 KiB
/// blocks). The uuid is not in the dump, and the bytes from 0xA8 on are
/// reconstructed from 2.2.9's defaults: no label and every feature word 0
/// (BLOCK_COUNT became the default only in nilfs-utils 2.3).
fn mkfs_sb_bytes() -> Vec<u8> {
    let mut b = hex("02000000 0000 3434 1801 0000 4e1900e0
         b7340d50 02000000 1f00000000000000
         0000001000000000 0100000000000000
         00080000 05000000 0100000000000000
         0100000000000000 0000000000000000
         00f0000000000000 00f1536500000000
         0000000000000000 00f1536500000000
         0000 3200 0100 0100 00f1536500000000
         004eed00 00000000 0000 0000 0b000000
         8000 2000 c000 1000");
    assert_eq!(b.len(), 0x98);
    b.resize(SuperBlock::SIZE, 0);
    b
}

const MKFS_SEED: u32 = 0xE000_194E;
const MKFS_CTIME: u64 = 0x6553_F100;
const MIB: u64 = 1 << 20;

fn v(vblocknr: u64, blkoff: u64) -> Binfo {
    Binfo::DataV {
        vblocknr: VBlockNr(vblocknr),
        blkoff: FileBlk(blkoff),
    }
}

/// The five file records of the mkfs log; `ifile_blocks` is 3 at 4 KiB and
/// 4 at 1 KiB, which shifts the later virtual block numbers.
fn mkfs_records(ifile_blocks: u64) -> Vec<FileRecord> {
    let cno = Cno(1);
    let mut vb = 1..;
    let mut next = || vb.next().unwrap();
    let root = vec![v(next(), 0)];
    let ifile = (0..ifile_blocks).map(|k| v(next(), k)).collect();
    let cp = vec![v(next(), 0)];
    let su = vec![v(next(), 0)];
    let dat = (0..3)
        .map(|k| Binfo::DataDat { blkoff: FileBlk(k) })
        .collect();
    vec![
        FileRecord::new(ino::ROOT, cno, root),
        FileRecord::new(ino::IFILE, cno, ifile),
        FileRecord::new(ino::CPFILE, cno, cp),
        FileRecord::new(ino::SUFILE, cno, su),
        FileRecord::new(ino::DAT, cno, dat),
    ]
}

fn header_for(files: &[FileRecord], bs: u32, sr: bool, extra_blocks: u32) -> SegmentSummary {
    let sumbytes = summary_bytes(files, bs);
    let payload: u32 = files.iter().map(|f| f.finfo.nblocks).sum();
    SegmentSummary {
        magic: SEGSUM_MAGIC,
        bytes: SegmentSummary::SIZE as u16,
        flags: SS_LOGBGN | SS_LOGEND | if sr { SS_SR } else { 0 },
        nblocks: sumbytes.div_ceil(bs) + payload + u32::from(sr) + extra_blocks,
        nfinfo: files.len() as u32,
        sumbytes,
        ..SegmentSummary::default()
    }
}

// ---------------------------------------------------------------- strategies

fn arb_bs() -> impl Strategy<Value = u32> {
    prop_oneof![Just(1024u32), Just(2048), Just(4096), Just(65536)]
}

/// A file record obeying the form rules: data binfos first, DAT forms iff ino 3.
fn arb_record(max_data: usize) -> impl Strategy<Value = FileRecord> {
    let ino = prop_oneof![Just(3u64), Just(2), Just(6), any::<u64>()];
    (ino, any::<u64>(), 0usize..max_data, 0usize..5).prop_flat_map(|(ino, cno, nd, nn)| {
        let dat = ino == 3;
        let data = prop::collection::vec((any::<u64>(), any::<u64>()), nd);
        let node = prop::collection::vec((any::<u64>(), 1u8..14), nn);
        (data, node).prop_map(move |(data, node)| {
            let mut binfos: Vec<Binfo> = data
                .into_iter()
                .map(|(a, b)| {
                    if dat {
                        Binfo::DataDat { blkoff: FileBlk(a) }
                    } else {
                        v(a, b)
                    }
                })
                .collect();
            binfos.extend(node.into_iter().map(|(a, level)| {
                if dat {
                    Binfo::NodeDat {
                        blkoff: FileBlk(a),
                        level,
                    }
                } else {
                    Binfo::NodeV {
                        vblocknr: VBlockNr(a),
                    }
                }
            }));
            FileRecord::new(Ino(ino), Cno(cno), binfos)
        })
    })
}

/// A consistent summary and its block size; the header's other fields are
/// random, and `sumbytes`/`nblocks` may carry slack beyond what is needed.
fn arb_summary() -> impl Strategy<Value = (Summary, u32)> {
    arb_summary_with(arb_bs(), 16, 70)
}

/// [`arb_summary`] with a chosen block size strategy and record limits.
fn arb_summary_with(
    bs: impl Strategy<Value = u32>,
    max_files: usize,
    max_data: usize,
) -> impl Strategy<Value = (Summary, u32)> {
    (
        bs,
        prop::collection::vec(arb_record(max_data), 0..max_files),
        any::<bool>(),
        0u32..3,
        0u32..200,
        any::<[u64; 5]>(),
        any::<u16>(),
    )
        .prop_map(|(bs, files, sr, extra_blocks, slack, r, flags)| {
            let mut header = header_for(&files, bs, sr, extra_blocks);
            // Slack after the last record, kept within the summary blocks' count.
            header.sumbytes += slack.min(header.sumbytes.div_ceil(bs) * bs - header.sumbytes);
            header.datasum = r[0] as u32;
            header.sumsum = (r[0] >> 32) as u32;
            header.flags = (flags & !SS_SR) | (header.flags & SS_SR);
            header.seq = Seq(r[1]);
            header.create = r[2];
            header.next = BlockNr(r[3]);
            header.cno = Cno(r[4]);
            header.pad = (r[1] >> 7) as u32;
            (Summary { header, files }, bs)
        })
}

fn arb_inode() -> impl Strategy<Value = Inode> {
    prop::collection::vec(any::<u8>(), Inode::SIZE).prop_map(|b| Inode::decode(&b).unwrap())
}

fn arb_super_root() -> impl Strategy<Value = SuperRoot> {
    (
        any::<(u32, u16, u16, u64)>(),
        arb_inode(),
        arb_inode(),
        arb_inode(),
    )
        .prop_map(
            |((sum, bytes, flags, nongc_ctime), dat, cpfile, sufile)| SuperRoot {
                sum,
                bytes,
                flags,
                nongc_ctime,
                dat,
                cpfile,
                sufile,
            },
        )
}

/// A whole log for `s`: summary blocks, random payload, a sealed super root.
fn assemble_log(s: &Summary, bs: u32, payload_seed: u8, seed: u32) -> Vec<u8> {
    let mut log = s.encode(bs);
    let nblocks = s.header.nblocks as usize;
    let mut fill = payload_seed;
    log.resize_with(nblocks * bs as usize, || {
        fill = fill.wrapping_mul(31).wrapping_add(7);
        fill
    });
    if let Some(i) = s.super_root_index() {
        let sr = SuperRoot {
            bytes: super_root::super_root_bytes(128),
            nongc_ctime: 5,
            ..SuperRoot::default()
        };
        let mut blk = sr.encode(bs, 128);
        super_root::seal_block(&mut blk, seed);
        let at = i as usize * bs as usize;
        log[at..at + bs as usize].copy_from_slice(&blk);
    }
    log
}

// ---------------------------------------------------------------- round trips

proptest! {
    #[test]
    fn superblock_round_trip(raw in prop::collection::vec(any::<u8>(), SuperBlock::SIZE)) {
        let sb = SuperBlock::decode(&raw).unwrap();
        let enc = sb.encode();
        prop_assert_eq!(&enc, &raw);
        prop_assert_eq!(SuperBlock::decode(&enc).unwrap(), sb);
    }

    #[test]
    fn segment_summary_round_trip(raw in any::<[u8; 64]>()) {
        let h = SegmentSummary::decode(&raw).unwrap();
        prop_assert_eq!(h.to_bytes(), raw);
        prop_assert_eq!(SegmentSummary::decode(&h.to_bytes()).unwrap(), h);
    }

    #[test]
    fn finfo_round_trip(raw in any::<[u8; 24]>()) {
        let f = Finfo::decode(&raw).unwrap();
        prop_assert_eq!(f.to_bytes(), raw);
        prop_assert_eq!(Finfo::decode(&f.to_bytes()).unwrap(), f);
    }

    #[test]
    fn summary_round_trip((s, bs) in arb_summary()) {
        for f in &s.files {
            prop_assert!(f.check().is_ok());
        }
        let enc = s.encode(bs);
        prop_assert_eq!(enc.len(), s.nsumblk(bs) as usize * bs as usize);
        let d = Summary::decode(&enc, bs).unwrap();
        prop_assert_eq!(&d, &s);
        // Trailing bytes beyond the summary are ignored.
        let mut longer = enc.clone();
        longer.extend_from_slice(&[0xAB; 100]);
        prop_assert_eq!(Summary::decode(&longer, bs).unwrap(), s.clone());
        // The payload follows the summary blocks, one block per binfo.
        let entries: Vec<_> = s.block_entries(bs).collect();
        let total: usize = s.files.iter().map(|f| f.binfos.len()).sum();
        prop_assert_eq!(entries.len(), total);
        for (k, e) in entries.iter().enumerate() {
            prop_assert_eq!(e.index, u64::from(s.nsumblk(bs)) + k as u64);
            prop_assert_eq!(e.ino, s.files[e.file].finfo.ino);
        }
        if let Some(last) = entries.last() {
            prop_assert!(last.index < u64::from(s.header.nblocks) - u64::from(s.header.has_super_root()));
        }
    }

    #[test]
    fn super_root_round_trip(sr in arb_super_root(), big in any::<bool>(), bs in arb_bs()) {
        let isz: u16 = if big { 256 } else { 128 };
        let enc = sr.encode(bs, isz);
        prop_assert_eq!(enc.len(), bs as usize);
        prop_assert_eq!(SuperRoot::decode(&enc, isz).unwrap(), sr);
    }
}

// ---------------------------------------------------------------- hostile input

proptest! {
    #[test]
    fn decoders_never_panic(
        raw in prop::collection::vec(any::<u8>(), 0..2100),
        bs in prop_oneof![arb_bs(), any::<u32>()],
        isz in any::<u16>(),
        seed in any::<u32>(),
        n in any::<u32>(),
        dev in any::<u64>(),
    ) {
        if let Ok(sb) = SuperBlock::decode(&raw) {
            let _ = sb.check_valid();
            let _ = sb.check_geometry(dev);
            let _ = sb.block_size();
            let _ = sb.compute_sum();
            let _ = (sb.volume_label(), sb.uuid_string(), sb.requires_read_only());
            let _ = superblock::secondary_is_inside_segments(&sb, dev);
        }
        let _ = SuperBlock::decode_valid(&raw);
        let _ = superblock::sb2_offset_bytes(dev);
        let _ = SegmentSummary::decode(&raw);
        let _ = Finfo::decode(&raw);
        let _ = Summary::decode(&raw, bs);
        let _ = SuperRoot::decode(&raw, isz);
        let _ = super_root::check_valid(&raw, bs, seed);
        let _ = super_root::compute_sum(&raw, seed);
        let _ = verify_log(&raw, seed);
        let _ = compute_sumsum(&raw, seed, n);
        let _ = compute_datasum(&raw, seed);
    }

    /// Random damage to a valid summary: Ok or Err, never a panic, and an Ok
    /// result still satisfies the record invariants.
    #[test]
    fn damaged_summary_never_panics(
        (s, bs) in arb_summary(),
        edits in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..8),
        cut in any::<prop::sample::Index>(),
    ) {
        let mut enc = s.encode(bs);
        for (i, b) in edits {
            let i = i.index(enc.len());
            enc[i] = b;
        }
        let cut = cut.index(enc.len() + 1);
        for buf in [&enc[..], &enc[..cut]] {
            if let Ok(d) = Summary::decode(buf, bs) {
                prop_assert_eq!(d.files.len(), d.header.nfinfo as usize);
                let payload: u64 = d.files.iter().map(|f| f.binfos.len() as u64).sum();
                let room = u64::from(d.header.nblocks)
                    - u64::from(d.nsumblk(bs))
                    - u64::from(d.header.has_super_root());
                prop_assert!(payload <= room);
                for f in &d.files {
                    prop_assert!(f.check().is_ok());
                }
            }
        }
    }
}

// ---------------------------------------------------------------- checksums

proptest! {
    #[test]
    fn superblock_seal_and_damage(
        raw in prop::collection::vec(any::<u8>(), SuperBlock::SIZE),
        bytes in prop_oneof![Just(SuperBlock::DEFAULT_BYTES), 20u16..=1024],
        pos in any::<prop::sample::Index>(),
        outside in any::<prop::sample::Index>(),
        x in 1u8..=255,
    ) {
        let mut sb = SuperBlock::decode(&raw).unwrap();
        sb.magic = SUPER_MAGIC;
        sb.bytes = bytes;
        sb.seal();
        prop_assert!(sb.check_valid().is_ok());
        let enc = sb.encode();
        prop_assert!(SuperBlock::decode_valid(&enc).is_ok());

        let mut bad = enc.clone();
        bad[pos.index(usize::from(bytes))] ^= x;
        prop_assert!(is_corrupt(SuperBlock::decode_valid(&bad)));

        if usize::from(bytes) < SuperBlock::SIZE {
            let mut ok = enc;
            ok[usize::from(bytes) + outside.index(SuperBlock::SIZE - usize::from(bytes))] ^= x;
            prop_assert!(SuperBlock::decode_valid(&ok).is_ok());
        }
    }

    #[test]
    fn log_seal_and_damage(
        // Whole logs are built here, so keep them to a few hundred KiB.
        (s, bs) in arb_summary_with(prop_oneof![Just(1024u32), Just(2048), Just(4096)], 6, 20),
        seed in any::<u32>(),
        fill in any::<u8>(),
        pos in any::<prop::sample::Index>(),
        x in 1u8..=255,
    ) {
        let mut log = assemble_log(&s, bs, fill, seed);
        seal_log(&mut log, seed);
        prop_assert!(verify_log(&log, seed).is_ok());
        if let Some(i) = s.super_root_index() {
            let at = i as usize * bs as usize;
            prop_assert!(super_root::check_valid(&log[at..at + bs as usize], bs, seed).is_ok());
        }
        let d = Summary::decode(&log, bs).unwrap();
        prop_assert_eq!(&d.files, &s.files);

        // Every byte of the log is covered by one checksum or the other.
        let mut bad = log.clone();
        let i = pos.index(bad.len());
        bad[i] ^= x;
        prop_assert!(is_corrupt(verify_log(&bad, seed)));

        // A byte after ss_sumbytes in the summary is covered by the data
        // checksum only, and the error says so.
        let sumbytes = s.header.sumbytes as usize;
        if sumbytes < bs as usize * s.nsumblk(bs) as usize {
            let mut pad = log;
            pad[sumbytes] ^= x;
            match verify_log(&pad, seed) {
                Err(Error::Corrupt { detail, .. }) => {
                    prop_assert!(detail.contains("data checksum"));
                    prop_assert!(!detail.contains("summary checksum"));
                }
                other => prop_assert!(false, "expected a data checksum error, got {:?}", other),
            }
        }
    }

    #[test]
    fn super_root_seal_and_damage(
        sr in arb_super_root(),
        bs in arb_bs(),
        big in any::<bool>(),
        seed in any::<u32>(),
        pos in any::<prop::sample::Index>(),
        outside in any::<prop::sample::Index>(),
        x in 1u8..=255,
    ) {
        let isz: u16 = if big { 256 } else { 128 };
        let srb = super_root::super_root_bytes(isz);
        let mut sr = sr;
        sr.bytes = srb;
        let mut blk = sr.encode(bs, isz);
        super_root::seal_block(&mut blk, seed);
        prop_assert!(super_root::check_valid(&blk, bs, seed).is_ok());
        let sealed = SuperRoot::decode(&blk, isz).unwrap();
        prop_assert_eq!(sealed.sum, super_root::compute_sum(&blk, seed));

        let mut bad = blk.clone();
        bad[pos.index(usize::from(srb))] ^= x;
        prop_assert!(is_corrupt(super_root::check_valid(&bad, bs, seed)));

        let mut ok = blk;
        ok[usize::from(srb) + outside.index(bs as usize - usize::from(srb))] ^= x;
        prop_assert!(super_root::check_valid(&ok, bs, seed).is_ok());
    }
}

// ---------------------------------------------------------------- §17.4 image

#[test]
fn mkfs_super_block_decodes() {
    let raw = mkfs_sb_bytes();
    let sb = SuperBlock::decode(&raw).unwrap();
    assert_eq!(sb.rev_level, 2);
    assert_eq!(sb.minor_rev_level, 0);
    assert_eq!(sb.magic, SUPER_MAGIC);
    assert_eq!(sb.bytes, SuperBlock::DEFAULT_BYTES);
    assert_eq!(sb.bytes, 280);
    assert_eq!(sb.crc_seed, MKFS_SEED);
    assert_eq!(sb.sum, 0x500D_34B7);
    assert_eq!(sb.block_size().unwrap(), 4096);
    assert_eq!(sb.nsegments, 31);
    assert_eq!(sb.dev_size, 256 * MIB);
    assert_eq!(sb.first_data_block, 1);
    assert_eq!(sb.blocks_per_segment, 2048);
    assert_eq!(sb.r_segments_percentage, 5);
    assert_eq!(
        (sb.last_cno, sb.last_pseg, sb.last_seq),
        (Cno(1), BlockNr(1), Seq(0))
    );
    assert_eq!(sb.free_blocks_count, 61440);
    assert_eq!(
        (sb.ctime, sb.mtime, sb.wtime, sb.lastcheck),
        (MKFS_CTIME, 0, MKFS_CTIME, MKFS_CTIME)
    );
    assert_eq!(
        (sb.mnt_count, sb.max_mnt_count, sb.state, sb.errors),
        (0, 50, STATE_VALID_FS, 1)
    );
    assert_eq!(
        (sb.checkinterval, sb.creator_os, sb.first_ino),
        (15_552_000, 0, 11)
    );
    assert_eq!(
        (
            sb.inode_size,
            sb.dat_entry_size,
            sb.checkpoint_size,
            sb.segment_usage_size
        ),
        (128, 32, 192, 16)
    );
    assert_eq!(sb.feature_compat_ro, 0);
    assert_eq!(sb.reserved.len(), 744);
    assert_eq!(sb.volume_label(), "");
    assert_eq!(sb.encode(), raw);

    // The device checks pass on the 256 MiB image; the secondary copy sits
    // in the last 4 KiB, beyond segment 30.
    sb.check_geometry(256 * MIB).unwrap();
    assert!(!sb.requires_read_only());
    assert_eq!(
        superblock::sb2_offset_bytes(256 * MIB),
        Some(256 * MIB - 4096)
    );
    assert!(!superblock::secondary_is_inside_segments(&sb, 256 * MIB));
    // On a device 8 MiB smaller the secondary copy would land in segment 30.
    assert!(superblock::secondary_is_inside_segments(&sb, 248 * MIB));

    // The uuid is not in the dump, so the stored CRC cannot match; sealing
    // with our uuid gives a valid copy.
    let mut sealed = sb.clone();
    sealed.seal();
    sealed.check_valid().unwrap();
}

#[test]
fn mkfs_summary_4k() {
    let files = mkfs_records(3);
    assert_eq!(summary_bytes(&files, 4096), 304);
    let header = SegmentSummary {
        datasum: 0xC0D6_896A,
        sumsum: 0xF6B1_783E,
        magic: SEGSUM_MAGIC,
        bytes: 64,
        flags: SS_LOGBGN | SS_LOGEND | SS_SR,
        seq: Seq(0),
        create: MKFS_CTIME,
        next: BlockNr(2048),
        nblocks: 11,
        nfinfo: 5,
        sumbytes: 304,
        pad: 0,
        cno: Cno(1),
    };
    let s = Summary { header, files };
    let enc = s.encode(4096);
    assert_eq!(enc.len(), 4096);
    assert_eq!(
        &enc[..64],
        &hex("6a89d6c0 3e78b1f6 11faaf1e 4000 0700
              0000000000000000 00f1536500000000
              0008000000000000 0b000000 05000000
              30010000 00000000 0100000000000000")[..]
    );
    // The summary checksum covers bytes 8..304, all known from the dump:
    // this reproduces the real mkfs value.
    assert_eq!(compute_sumsum(&enc, MKFS_SEED, 304), 0xF6B1_783E);
    assert_eq!(Summary::decode(&enc, 4096).unwrap(), s);

    // Payload: root at log block 1, ifile 2..4, cpfile 5, sufile 6, DAT 7..9,
    // super root 10 (PBN = 1 + index).
    let inos: Vec<(u64, u64)> = s.block_entries(4096).map(|e| (e.ino.0, e.index)).collect();
    assert_eq!(
        inos,
        [
            (2, 1),
            (6, 2),
            (6, 3),
            (6, 4),
            (4, 5),
            (5, 6),
            (3, 7),
            (3, 8),
            (3, 9)
        ]
    );
    assert_eq!(s.super_root_index(), Some(10));
}

#[test]
fn mkfs_summary_1k() {
    let files = mkfs_records(4);
    assert_eq!(summary_bytes(&files, 1024), 320);
    let s = Summary {
        header: header_for(&files, 1024, true, 0),
        files,
    };
    assert_eq!(s.header.nblocks, 12);
    assert_eq!(s.nsumblk(1024), 1);
    assert_eq!(Summary::decode(&s.encode(1024), 1024).unwrap(), s);
}

// ---------------------------------------------------------------- packing

/// Hand-computed packing at 1 KiB. The header ends at 64 and a finfo at 88,
/// so 58 binfo_v fit in block 0 (88 + 58·16 = 1016), leaving 8 bytes.
#[test]
fn packing_rule_by_hand() {
    let data = |n: u64| (0..n).map(|k| v(100 + k, k)).collect::<Vec<_>>();
    let a = |n| FileRecord::new(Ino(12), Cno(2), data(n));

    // The 59th binfo_v does not fit in the 8 bytes left: it starts block 1.
    let one = [a(60)];
    assert_eq!(summary_bytes(&one, 1024), 1024 + 2 * 16);

    // A finfo does not fit in 8 bytes either: the second file starts block 1.
    let two = [a(58), a(1)];
    assert_eq!(summary_bytes(&two, 1024), 1024 + 24 + 16);
    let s = Summary {
        header: header_for(&two, 1024, true, 0),
        files: two.to_vec(),
    };
    let enc = s.encode(1024);
    assert_eq!(enc.len(), 2048);
    assert!(enc[1016..1024].iter().all(|&b| b == 0));
    assert_eq!(Finfo::decode(&enc[1024..]).unwrap(), two[1].finfo);
    assert_eq!(Summary::decode(&enc, 1024).unwrap(), s);

    // An 8-byte node record exactly fills those 8 bytes, and the next finfo
    // starts at 1024 without any padding.
    let mut b = data(58);
    b.push(Binfo::NodeV {
        vblocknr: VBlockNr(999),
    });
    let three = [FileRecord::new(Ino(12), Cno(2), b), a(1)];
    assert_eq!(summary_bytes(&three[..1], 1024), 1024);
    assert_eq!(summary_bytes(&three, 1024), 1024 + 24 + 16);
    let s = Summary {
        header: header_for(&three, 1024, false, 0),
        files: three.to_vec(),
    };
    assert_eq!(s.nsumblk(1024), 2);
    let enc = s.encode(1024);
    assert_eq!(&enc[1016..1024], &999u64.to_le_bytes());
    assert_eq!(Summary::decode(&enc, 1024).unwrap(), s);

    // DAT records: 8-byte data, 16-byte node (key + level + 7 zero bytes).
    let dat = FileRecord::new(
        ino::DAT,
        Cno(0),
        vec![
            Binfo::DataDat { blkoff: FileBlk(7) },
            Binfo::NodeDat {
                blkoff: FileBlk(9),
                level: 2,
            },
        ],
    );
    assert_eq!(
        summary_bytes(std::slice::from_ref(&dat), 4096),
        64 + 24 + 8 + 16
    );
    let s = Summary {
        header: header_for(std::slice::from_ref(&dat), 4096, true, 0),
        files: vec![dat],
    };
    let enc = s.encode(4096);
    assert_eq!(
        &enc[96..112],
        &hex("0900000000000000 02 00000000000000")[..]
    );
    assert_eq!(Summary::decode(&enc, 4096).unwrap(), s);
}

/// A header longer than 64 bytes moves the first record (the kernel and
/// nilfs-utils both start reading at `ss_bytes`).
#[test]
fn records_start_at_ss_bytes() {
    let files = vec![FileRecord::new(Ino(20), Cno(3), vec![v(1, 0)])];
    let mut header = header_for(&files, 4096, false, 0);
    header.bytes = 128;
    header.sumbytes = 128 + 24 + 16;
    let s = Summary { header, files };
    let enc = s.encode(4096);
    assert_eq!(Finfo::decode(&enc[128..]).unwrap().ino, Ino(20));
    assert_eq!(Summary::decode(&enc, 4096).unwrap(), s);
}

// ---------------------------------------------------------------- rejections

#[test]
fn summary_rejections() {
    let files = mkfs_records(3);
    let good = Summary {
        header: header_for(&files, 4096, true, 0),
        files,
    };
    assert!(Summary::decode(&good.encode(4096), 4096).is_ok());
    let with = |f: &dyn Fn(&mut Summary)| {
        let mut s = good.clone();
        f(&mut s);
        Summary::decode(&s.encode(4096), 4096)
    };
    assert!(is_corrupt(with(&|s| s.header.magic ^= 1)));
    assert!(is_corrupt(with(&|s| s.header.bytes = 56)));
    assert!(is_corrupt(with(&|s| s.header.bytes = 68)));
    assert!(is_corrupt(with(&|s| s.header.sumbytes = 60)));
    // One block short for the payload, or no room left for the super root.
    assert!(is_corrupt(with(&|s| s.header.nblocks -= 1)));
    assert!(with(&|s| s.header.flags &= !SS_SR).is_ok());
    assert!(with(&|s| {
        s.header.flags &= !SS_SR;
        s.header.nblocks -= 1;
    })
    .is_ok());
    // ss_sumbytes beyond the log.
    assert!(is_corrupt(with(&|s| {
        s.header.nblocks = 1;
        s.header.sumbytes = 4097;
    })));
    // More finfos claimed than fit in ss_sumbytes.
    assert!(is_corrupt(with(&|s| s.header.nfinfo = 6)));
    // ndatablk > nblocks.
    let mut enc = good.encode(4096);
    enc[64 + 20] = 2;
    assert!(is_corrupt(Summary::decode(&enc, 4096)));
    // A buffer shorter than ss_sumbytes.
    assert!(is_corrupt(Summary::decode(&good.encode(4096)[..303], 4096)));
    assert!(Summary::decode(&good.encode(4096)[..304], 4096).is_ok());
    // Not a block size.
    assert!(matches!(
        Summary::decode(&good.encode(4096), 3000),
        Err(Error::Invalid(_))
    ));
}

#[test]
fn verify_log_needs_whole_blocks() {
    let files = mkfs_records(3);
    let s = Summary {
        header: header_for(&files, 4096, true, 0),
        files,
    };
    let mut log = assemble_log(&s, 4096, 1, MKFS_SEED);
    seal_log(&mut log, MKFS_SEED);
    verify_log(&log, MKFS_SEED).unwrap();
    assert!(is_corrupt(verify_log(&log[..log.len() - 4096], MKFS_SEED)));
    assert!(is_corrupt(verify_log(&log, MKFS_SEED ^ 1)));
}

#[test]
fn geometry_rejections() {
    let good = SuperBlock::decode(&mkfs_sb_bytes()).unwrap();
    let dev = 256 * MIB;
    good.check_geometry(dev).unwrap();
    type Edit = fn(&mut SuperBlock);
    let cases: Vec<(&str, Edit)> = vec![
        ("rev 1", |s| s.rev_level = 1),
        ("log block size 7", |s| s.log_block_size = 7),
        ("inode 127", |s| s.inode_size = 127),
        ("inode > bs", |s| s.inode_size = 8192),
        ("first ino 10", |s| s.first_ino = 10),
        ("bps 15", |s| s.blocks_per_segment = 15),
        ("r% 0", |s| s.r_segments_percentage = 0),
        ("r% 100", |s| s.r_segments_percentage = 100),
        ("nsegments overflow", |s| s.nsegments = u64::MAX / 1024),
        ("nsegments > device", |s| s.nsegments = 33),
        ("incompat", |s| s.feature_incompat = 1 << 40),
        ("dat entry 31", |s| s.dat_entry_size = 31),
        ("checkpoint 191", |s| s.checkpoint_size = 191),
        ("segment usage 8192", |s| s.segment_usage_size = 8192),
        ("log cursor beyond segments", |s| {
            s.last_pseg = BlockNr(31 * 2048)
        }),
    ];
    for (name, f) in cases {
        let mut sb = good.clone();
        f(&mut sb);
        assert!(
            is_corrupt(sb.check_geometry(dev)),
            "{name} should be refused"
        );
    }
    assert!(is_corrupt(
        good.check_geometry(superblock::MIN_DEVICE_BYTES - 1)
    ));
    // 32 segments still fit in 256 MiB (the secondary copy is not counted).
    let mut sb = good.clone();
    sb.nsegments = 32;
    sb.check_geometry(dev).unwrap();
    // BLOCK_COUNT is supported; unknown compat_ro bits only force read-only.
    sb.feature_compat_ro = FEATURE_COMPAT_RO_BLOCK_COUNT;
    assert!(!sb.requires_read_only());
    sb.feature_compat_ro |= 1 << 5;
    sb.check_geometry(dev).unwrap();
    assert!(sb.requires_read_only());
}

#[test]
fn super_block_misc() {
    assert_eq!(
        superblock::sb2_offset_bytes(superblock::MIN_DEVICE_BYTES - 1),
        None
    );
    assert_eq!(superblock::sb2_offset_bytes(20480), Some(16384));
    assert_eq!(superblock::sb2_offset_bytes(20480 + 4095), Some(16384));

    let mut sb = SuperBlock::default();
    assert_eq!(SuperBlock::decode(&sb.encode()).unwrap(), sb);
    sb.uuid = [
        0x12, 0x34, 0x56, 0x78, 0x9a, 0xbc, 0xde, 0xf0, 0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd,
        0xef,
    ];
    assert_eq!(sb.uuid_string(), "12345678-9abc-def0-0123-456789abcdef");
    sb.volume_name[..5].copy_from_slice(b"data\0");
    sb.volume_name[5] = b'x';
    assert_eq!(sb.volume_label(), "data");
    sb.volume_name = [b'a'; 80];
    assert_eq!(sb.volume_label().len(), 80);

    // s_bytes below 0x14 or above 1024 is never valid, whatever the CRC.
    sb.magic = SUPER_MAGIC;
    for bytes in [0, 19, 1025] {
        sb.bytes = bytes;
        sb.seal();
        assert!(is_corrupt(sb.check_valid()), "s_bytes {bytes}");
    }
    sb.bytes = 20;
    sb.seal();
    sb.check_valid().unwrap();
    assert!(is_corrupt(SuperBlock::decode(&[0u8; 1023])));
}

#[test]
fn super_root_misc() {
    assert_eq!(super_root::super_root_bytes(128), 400);
    assert_eq!(super_root::super_root_bytes(256), 784);
    assert!(SuperRoot::decode(&[0u8; 4096], 127).is_err());
    assert!(is_corrupt(SuperRoot::decode(&[0u8; 399], 128)));
    assert!(SuperRoot::decode(&[0u8; 400], 128).is_ok());

    let mut blk = SuperRoot {
        bytes: 400,
        ..SuperRoot::default()
    }
    .encode(4096, 128);
    super_root::seal_block(&mut blk, 7);
    super_root::check_valid(&blk, 4096, 7).unwrap();
    // The whole block is needed; sr_bytes must be in 1..=bs.
    assert!(is_corrupt(super_root::check_valid(&blk[..4095], 4096, 7)));
    for bytes in [0u16, 4097] {
        let mut b = blk.clone();
        b[4..6].copy_from_slice(&bytes.to_le_bytes());
        super_root::seal_block(&mut b, 7);
        assert!(
            is_corrupt(super_root::check_valid(&b, 4096, 7)),
            "sr_bytes {bytes}"
        );
    }
    // sr_bytes 1..=3: the kernel's unsigned arithmetic covers the rest of the block.
    let mut b = blk.clone();
    b[4..6].copy_from_slice(&2u16.to_le_bytes());
    super_root::seal_block(&mut b, 7);
    super_root::check_valid(&b, 4096, 7).unwrap();
    b[4095] ^= 1;
    assert!(is_corrupt(super_root::check_valid(&b, 4096, 7)));
}
