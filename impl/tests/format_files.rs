//! Tests for the metadata-file formats: B-tree nodes, `i_bmap`, DAT,
//! cpfile, sufile, directory blocks and the palloc layout.
//!
//! Each structure round-trips through encode/decode; every decoder survives
//! arbitrary bytes; each kernel rejection rule has its own test built from a
//! valid value with exactly one thing wrong; the geometry matches the
//! digest's tables (§8, §9, §17.2).

use nilfs::format::bmap::{BmapRoot, DirectMap, BMAP_LARGE, DIRECT_NBLOCKS};
use nilfs::format::btree::{node_ncmax, BtreeNode, NODE_ROOT, ROOT_NCHILDREN_MAX};
use nilfs::format::cpfile::{
    Checkpoint, CpfileGeometry, CpfileHeader, CP_INVALID, CP_MINOR, CP_SKETCH, CP_SNAPSHOT,
};
use nilfs::format::dat::DatEntry;
use nilfs::format::dir::{self, DirEntry, FT_DIR, FT_REG_FILE, FT_SYMLINK, FT_UNKNOWN};
use nilfs::format::inode::{Inode, S_IFDIR, S_IFLNK, S_IFREG};
use nilfs::format::palloc::{self, PallocGeometry};
use nilfs::format::sufile::{SegmentUsage, SufileGeometry, SufileHeader, SU_ACTIVE, SU_DIRTY};
use nilfs::format::{BlockNr, Cno, FileBlk, Ino, SegNum};
use nilfs::Error;
use proptest::prelude::*;

// ---------------------------------------------------------------- strategies

fn block_size() -> impl Strategy<Value = u32> {
    (0u32..7).prop_map(|log| 1024 << log)
}

/// A block node that passes `nilfs_btree_node_broken`.
fn valid_block_node() -> impl Strategy<Value = (u32, BtreeNode)> {
    block_size().prop_flat_map(|bs| {
        let ncmax = node_ncmax(bs);
        (
            any::<u8>().prop_map(|f| f & !NODE_ROOT),
            1u8..14,
            1..=ncmax as u16,
            any::<u32>(),
            any::<u64>(),
            prop::collection::vec(any::<u64>(), ncmax),
            prop::collection::vec(any::<u64>(), ncmax),
        )
            .prop_map(
                move |(flags, level, nchildren, pad, extra_pad, keys, ptrs)| {
                    (
                        bs,
                        BtreeNode {
                            flags,
                            level,
                            nchildren,
                            pad,
                            extra_pad,
                            keys,
                            ptrs,
                        },
                    )
                },
            )
    })
}

/// A root that passes `nilfs_btree_root_broken` and carries the ROOT flag.
fn valid_root() -> impl Strategy<Value = BtreeNode> {
    (1u8..14, 0..=ROOT_NCHILDREN_MAX as u16)
        .prop_filter("empty root only at level 1", |(level, n)| {
            *n > 0 || *level == 1
        })
        .prop_flat_map(|(level, nchildren)| {
            (
                any::<u8>().prop_map(|f| f | NODE_ROOT),
                any::<u32>(),
                prop::collection::vec(any::<u64>(), ROOT_NCHILDREN_MAX),
                prop::collection::vec(any::<u64>(), ROOT_NCHILDREN_MAX),
            )
                .prop_map(move |(flags, pad, keys, ptrs)| BtreeNode {
                    flags,
                    level,
                    nchildren,
                    pad,
                    extra_pad: 0,
                    keys,
                    ptrs,
                })
        })
}

fn inode() -> impl Strategy<Value = Inode> {
    prop::collection::vec(any::<u8>(), Inode::SIZE).prop_map(|b| Inode::decode(&b).unwrap())
}

fn checkpoint() -> impl Strategy<Value = Checkpoint> {
    (any::<[u64; 7]>(), any::<[u32; 2]>(), inode()).prop_map(|(w, h, ifile_inode)| Checkpoint {
        flags: h[0],
        checkpoints_count: h[1],
        snapshot_next: Cno(w[0]),
        snapshot_prev: Cno(w[1]),
        cno: Cno(w[2]),
        create: w[3],
        nblk_inc: w[4],
        inodes_count: w[5],
        blocks_count: w[6],
        ifile_inode,
    })
}

/// Inode numbers a directory may name (0 = unused record).
fn dir_ino() -> impl Strategy<Value = Ino> {
    prop_oneof![Just(0u64), Just(2), Just(10), 11u64..].prop_map(Ino)
}

/// Records that tile a block: each takes its minimal length plus some
/// slack, and the last one is stretched to the block end.
fn valid_dir_block() -> impl Strategy<Value = (u32, Vec<DirEntry>)> {
    let record = (
        dir_ino(),
        0u8..8,
        prop::collection::vec(any::<u8>(), 0..=255),
        0usize..4,
    );
    (block_size(), prop::collection::vec(record, 1..40)).prop_map(|(bs, records)| {
        let bs_len = bs as usize;
        let mut entries: Vec<DirEntry> = Vec::new();
        let mut offs = 0;
        for (ino, file_type, name, slack) in records {
            let rec_len = dir::rec_len_for(name.len()) + 4 * slack;
            if offs + rec_len > bs_len {
                break;
            }
            offs += rec_len;
            entries.push(DirEntry {
                ino,
                rec_len: rec_len as u32,
                name_len: name.len() as u8,
                file_type,
                name,
            });
        }
        entries.last_mut().unwrap().rec_len += (bs_len - offs) as u32;
        (bs, entries)
    })
}

// ---------------------------------------------------------------- round trips

proptest! {
    #[test]
    fn btree_block_roundtrip((bs, node) in valid_block_node()) {
        let buf = node.encode_block(bs);
        prop_assert_eq!(buf.len(), bs as usize);
        prop_assert_eq!(BtreeNode::decode_block(&buf, bs).unwrap(), node);
    }

    #[test]
    fn btree_root_roundtrip(root in valid_root()) {
        prop_assert_eq!(BtreeNode::decode_root(&root.encode_root()).unwrap(), root.clone());
        prop_assert_eq!(BmapRoot::decode(&root.encode_root()).unwrap(), BmapRoot::Btree(root));
    }

    #[test]
    fn direct_map_roundtrip(header in any::<u64>(), ptrs in any::<[u64; DIRECT_NBLOCKS]>()) {
        let header = header & !u64::from(BMAP_LARGE);
        let map = BmapRoot::Direct(DirectMap { header, ptrs });
        prop_assert_eq!(BmapRoot::decode(&map.encode()).unwrap(), map);
    }

    #[test]
    fn dat_entry_roundtrip(w in any::<[u64; 4]>()) {
        let e = DatEntry { blocknr: BlockNr(w[0]), start: Cno(w[1]), end: Cno(w[2]), rsv: w[3] };
        prop_assert_eq!(DatEntry::decode(&e.to_bytes()).unwrap(), e);
    }

    #[test]
    fn cpfile_header_roundtrip(w in any::<[u64; 4]>()) {
        let h = CpfileHeader {
            ncheckpoints: w[0],
            nsnapshots: w[1],
            snapshot_next: Cno(w[2]),
            snapshot_prev: Cno(w[3]),
        };
        prop_assert_eq!(CpfileHeader::decode(&h.to_bytes()).unwrap(), h);
    }

    #[test]
    fn checkpoint_roundtrip(cp in checkpoint()) {
        prop_assert_eq!(Checkpoint::decode(&cp.to_bytes()).unwrap(), cp);
    }

    #[test]
    fn checkpoint_in_larger_stride(cp in checkpoint(), fill in any::<u8>()) {
        let mut slot = vec![fill; 256];
        cp.encode(&mut slot);
        prop_assert!(slot[Checkpoint::SIZE..].iter().all(|&b| b == fill));
        prop_assert_eq!(Checkpoint::decode(&slot).unwrap(), cp);
    }

    #[test]
    fn sufile_header_roundtrip(w in any::<[u64; 3]>()) {
        let h = SufileHeader { ncleansegs: w[0], ndirtysegs: w[1], last_alloc: SegNum(w[2]) };
        prop_assert_eq!(SufileHeader::decode(&h.to_bytes()).unwrap(), h);
    }

    #[test]
    fn segment_usage_roundtrip(lastmod in any::<u64>(), nblocks in any::<u32>(), flags in any::<u32>()) {
        let su = SegmentUsage { lastmod, nblocks, flags };
        prop_assert_eq!(SegmentUsage::decode(&su.to_bytes()).unwrap(), su);
    }

    #[test]
    fn dir_block_roundtrip((bs, entries) in valid_dir_block()) {
        let buf = dir::encode_block(&entries, bs).unwrap();
        prop_assert_eq!(buf.len(), bs as usize);
        prop_assert_eq!(dir::parse_block(&buf, bs).unwrap(), entries);
    }

    #[test]
    fn group_descs_roundtrip(bs in block_size(), seed in any::<u32>()) {
        let descs: Vec<u32> =
            (0..bs / 4).map(|i| seed.wrapping_mul(i.wrapping_add(1)).rotate_left(i)).collect();
        let buf = palloc::encode_group_descs(&descs, bs);
        prop_assert_eq!(buf.len(), bs as usize);
        prop_assert_eq!(palloc::decode_group_descs(&buf, bs).unwrap(), descs);
    }
}

// ---------------------------------------------------------------- hostile input

proptest! {
    #[test]
    fn decoders_survive_arbitrary_bytes(bytes in prop::collection::vec(any::<u8>(), 0..300)) {
        let _ = DatEntry::decode(&bytes);
        let _ = CpfileHeader::decode(&bytes);
        let _ = Checkpoint::decode(&bytes);
        let _ = SufileHeader::decode(&bytes);
        let _ = SegmentUsage::decode(&bytes);
        let _ = palloc::decode_group_descs(&bytes, 1024);
        let _ = BtreeNode::decode_block(&bytes, 1024);
        let _ = dir::parse_block(&bytes, 1024);
    }

    #[test]
    fn short_buffers_are_errors(bytes in prop::collection::vec(any::<u8>(), 0..16)) {
        prop_assert!(DatEntry::decode(&bytes).is_err());
        prop_assert!(SegmentUsage::decode(&bytes).is_err());
        prop_assert!(BtreeNode::decode_block(&bytes, 1024).is_err());
        prop_assert!(dir::parse_block(&bytes, 1024).is_err());
    }

    #[test]
    fn block_decoders_survive_arbitrary_blocks(
        bs in block_size(),
        seed in prop::collection::vec(any::<u8>(), 64),
        header in any::<[u8; 4]>(),
    ) {
        let mut buf: Vec<u8> = seed.iter().cycle().take(bs as usize).copied().collect();
        // Often give the node a plausible header so decoding gets past it.
        buf[..4].copy_from_slice(&header);
        buf[1] %= 16;
        if let Ok(node) = BtreeNode::decode_block(&buf, bs) {
            prop_assert_eq!(node.keys.len(), node_ncmax(bs));
            let _ = node.check_keys_sorted();
            let _ = node.lookup(u64::from_le_bytes(buf[8..16].try_into().unwrap()));
        }
        let _ = dir::parse_block(&buf, bs);
        let _ = palloc::decode_group_descs(&buf, bs);
        prop_assert_eq!(palloc::count_set_bits(&buf, u64::MAX),
                        buf.iter().map(|b| u64::from(b.count_ones())).sum::<u64>());
    }

    #[test]
    fn root_decoders_survive_arbitrary_bmap(bmap in any::<[u64; 7]>(), key in any::<u64>()) {
        if let Ok(root) = BmapRoot::decode(&bmap) {
            // Whatever was accepted is stored back verbatim.
            prop_assert_eq!(root.encode(), bmap);
            match root {
                BmapRoot::Direct(d) => { let _ = d.lookup(key); }
                BmapRoot::Btree(r) => { let _ = r.lookup(key); let _ = r.check_keys_sorted(); }
            }
        }
        let _ = BtreeNode::decode_root(&bmap);
    }

    #[test]
    fn mutated_dir_blocks_parse_or_fail_cleanly(
        (bs, entries) in valid_dir_block(),
        flips in prop::collection::vec((any::<usize>(), any::<u8>()), 1..8),
    ) {
        let mut buf = dir::encode_block(&entries, bs).unwrap();
        for (at, v) in flips {
            let i = at % buf.len();
            buf[i] = v;
        }
        if let Ok(parsed) = dir::parse_block(&buf, bs) {
            let total: u64 = parsed.iter().map(|e| u64::from(e.rec_len)).sum();
            prop_assert_eq!(total, u64::from(bs));
            // Whatever parses re-encodes to a block that parses the same.
            let again = dir::encode_block(&parsed, bs).unwrap();
            prop_assert_eq!(dir::parse_block(&again, bs).unwrap(), parsed);
        }
    }

    #[test]
    fn geometry_never_panics(
        bs in block_size(),
        entry_size in any::<u32>(),
        nr in any::<u64>(),
        small_entry in any::<u16>(),
    ) {
        let es = 1 + entry_size % bs;
        let g = PallocGeometry::new(bs, es).unwrap();
        let (group, offset) = g.group(nr);
        let _ = g.desc_blkoff(group);
        let _ = g.bitmap_blkoff(group);
        if let Some(blk) = g.entry_blkoff(nr) {
            prop_assert!(blk > g.bitmap_blkoff(group).unwrap());
        }
        prop_assert!(offset < g.entries_per_group());
        prop_assert!(g.entry_offset_in_block(nr) + es as usize <= bs as usize);
        if let Ok(cg) = CpfileGeometry::new(bs, small_entry) {
            if let Some((_, off)) = cg.locate(Cno(nr)) {
                prop_assert!(off + usize::from(small_entry) <= bs as usize);
            }
        }
        if let Ok(sg) = SufileGeometry::new(bs, small_entry) {
            let (_, off) = sg.locate(SegNum(nr));
            prop_assert!(off + usize::from(small_entry) <= bs as usize);
        }
    }

    #[test]
    fn unchecked_geometry_never_panics(bs in any::<u32>(), es in any::<u32>(), es16 in any::<u16>(), nr in any::<u64>()) {
        let g = PallocGeometry { block_size: bs, entry_size: es };
        let (group, _) = g.group(nr);
        let _ = (g.blocks_per_desc_block(), g.desc_blkoff(group), g.bitmap_blkoff(group));
        let _ = (g.entry_blkoff(nr), g.entry_offset_in_block(nr));
        let _ = CpfileGeometry { block_size: bs, entry_size: es16 }.locate(nr);
        let _ = SufileGeometry { block_size: bs, entry_size: es16 }.locate(nr);
    }

    #[test]
    fn bit_helpers_agree(bytes in prop::collection::vec(any::<u8>(), 0..64), bit in 0u64..600) {
        let mut buf = bytes.clone();
        let before = palloc::bit_is_set(&buf, bit);
        match palloc::set_bit(&mut buf, bit) {
            None => {
                prop_assert!(bit >= bytes.len() as u64 * 8);
                prop_assert_eq!(&buf, &bytes);
            }
            Some(was) => {
                prop_assert_eq!(was, before);
                prop_assert!(palloc::bit_is_set(&buf, bit));
                prop_assert_eq!(buf[bit as usize / 8] >> (bit % 8) & 1, 1);
                prop_assert_eq!(palloc::clear_bit(&mut buf, bit), Some(true));
                prop_assert!(!palloc::bit_is_set(&buf, bit));
                let set_before = palloc::count_set_bits(&bytes, bytes.len() as u64 * 8);
                let set_after = palloc::count_set_bits(&buf, buf.len() as u64 * 8);
                prop_assert_eq!(set_after + u64::from(before), set_before);
            }
        }
    }
}

// ---------------------------------------------------------------- B-tree rules

/// A small valid level-1 node block at 1 KiB: keys 10, 20, 30.
fn good_block() -> Vec<u8> {
    let mut node = BtreeNode::new_block(1024, 1);
    node.nchildren = 3;
    node.keys[..3].copy_from_slice(&[10, 20, 30]);
    node.ptrs[..3].copy_from_slice(&[100, 200, 300]);
    node.encode_block(1024)
}

fn assert_corrupt<T: std::fmt::Debug>(r: Result<T, Error>, what: &str) {
    match r {
        Err(Error::Corrupt { what: w, .. }) => assert_eq!(w, what),
        other => panic!("expected corrupt {what}, got {other:?}"),
    }
}

#[test]
fn good_block_is_accepted() {
    let node = BtreeNode::decode_block(&good_block(), 1024).unwrap();
    assert_eq!(node.valid_keys(), &[10, 20, 30]);
    assert_eq!(node.valid_ptrs(), &[100, 200, 300]);
    assert_eq!(node.ptr(62), Some(0));
    assert_eq!(node.ptr(63), None);
    node.check_keys_sorted().unwrap();
    // Layout: keys at 16, pointers at 16 + 8 * ncmax = 520 (digest §6.2).
    let buf = good_block();
    assert_eq!(buf[16], 10);
    assert_eq!(u64::from_le_bytes(buf[520..528].try_into().unwrap()), 100);
}

#[test]
fn block_rule_level_zero() {
    let mut buf = good_block();
    buf[1] = 0;
    assert_corrupt(BtreeNode::decode_block(&buf, 1024), "btree node");
}

#[test]
fn block_rule_level_too_high() {
    let mut buf = good_block();
    buf[1] = 13;
    BtreeNode::decode_block(&buf, 1024).unwrap();
    buf[1] = 14;
    assert_corrupt(BtreeNode::decode_block(&buf, 1024), "btree node");
}

#[test]
fn block_rule_root_flag() {
    let mut buf = good_block();
    buf[0] = NODE_ROOT;
    assert_corrupt(BtreeNode::decode_block(&buf, 1024), "btree node");
}

#[test]
fn block_rule_no_children() {
    let mut buf = good_block();
    buf[2..4].copy_from_slice(&0u16.to_le_bytes());
    assert_corrupt(BtreeNode::decode_block(&buf, 1024), "btree node");
}

#[test]
fn block_rule_too_many_children() {
    let mut buf = good_block();
    buf[2..4].copy_from_slice(&63u16.to_le_bytes());
    BtreeNode::decode_block(&buf, 1024).unwrap();
    buf[2..4].copy_from_slice(&64u16.to_le_bytes());
    assert_corrupt(BtreeNode::decode_block(&buf, 1024), "btree node");
}

#[test]
fn block_rule_short_buffer() {
    let buf = good_block();
    assert_corrupt(BtreeNode::decode_block(&buf[..1023], 1024), "btree node");
}

#[test]
fn block_rule_bad_block_size_is_invalid_argument() {
    assert!(matches!(
        BtreeNode::decode_block(&good_block(), 1000),
        Err(Error::Invalid(_))
    ));
}

fn good_root() -> [u64; 7] {
    let mut root = BtreeNode::new_root(1);
    root.nchildren = 2;
    root.keys[..2].copy_from_slice(&[6, 9]);
    root.ptrs[..2].copy_from_slice(&[60, 90]);
    root.encode_root()
}

#[test]
fn root_layout_matches_digest() {
    // i_bmap[0] = 0x01 | level << 8 | nchildren << 16 (digest §6.2).
    let bmap = good_root();
    assert_eq!(bmap, [0x01 | 1 << 8 | 2 << 16, 6, 9, 0, 60, 90, 0]);
    let root = BtreeNode::decode_root(&bmap).unwrap();
    assert!(root.is_root());
    assert_eq!(root.lookup(9), (1, true));
}

#[test]
fn root_rule_level_zero() {
    let mut bmap = good_root();
    bmap[0] &= !0xff00;
    assert_corrupt(BtreeNode::decode_root(&bmap), "btree root");
}

#[test]
fn root_rule_level_too_high() {
    let mut bmap = good_root();
    bmap[0] = (bmap[0] & !0xff00) | 14 << 8;
    assert_corrupt(BtreeNode::decode_root(&bmap), "btree root");
}

#[test]
fn root_rule_too_many_children() {
    let mut bmap = good_root();
    bmap[0] = (bmap[0] & !0xffff_0000) | 4 << 16;
    assert_corrupt(BtreeNode::decode_root(&bmap), "btree root");
}

#[test]
fn root_rule_empty_above_level_one() {
    let empty_l1 = 0x01 | 1 << 8;
    let root = BtreeNode::decode_root(&[empty_l1, 0, 0, 0, 0, 0, 0]).unwrap();
    assert_eq!(root.lookup(0), (0, false));
    let empty_l2 = 0x01 | 2 << 8;
    assert_corrupt(
        BtreeNode::decode_root(&[empty_l2, 0, 0, 0, 0, 0, 0]),
        "btree root",
    );
    assert_corrupt(
        BmapRoot::decode(&[empty_l2, 0, 0, 0, 0, 0, 0]),
        "btree root",
    );
}

#[test]
fn key_order_is_our_check() {
    let mut buf = good_block();
    buf[24..32].copy_from_slice(&5u64.to_le_bytes()); // keys 10, 5, 30
    let node = BtreeNode::decode_block(&buf, 1024).unwrap(); // the kernel accepts it
    assert_corrupt(node.check_keys_sorted(), "btree node");
    buf[24..32].copy_from_slice(&10u64.to_le_bytes()); // keys 10, 10, 30
    let node = BtreeNode::decode_block(&buf, 1024).unwrap();
    assert_corrupt(node.check_keys_sorted(), "btree node");
}

/// `nilfs_btree_node_lookup` written the kernel's way, with signed
/// inclusive bounds, to compare against.
fn kernel_lookup(keys: &[u64], level: u8, key: u64) -> (usize, bool) {
    let (mut low, mut high) = (0i64, keys.len() as i64 - 1);
    let (mut index, mut s) = (0i64, 0);
    while low <= high {
        index = (low + high) / 2;
        let k = keys[index as usize];
        if k == key {
            return (index as usize, true);
        } else if k < key {
            low = index + 1;
            s = -1;
        } else {
            high = index - 1;
            s = 1;
        }
    }
    if level > 1 {
        if s > 0 && index > 0 {
            index -= 1;
        }
    } else if s < 0 {
        index += 1;
    }
    (index as usize, s == 0)
}

proptest! {
    #[test]
    fn lookup_matches_kernel(
        keys in prop::collection::vec(0u64..64, 1..20),
        level in 1u8..4,
        key in 0u64..70,
        sort in any::<bool>(),
    ) {
        let mut keys = keys;
        if sort {
            keys.sort_unstable();
            keys.dedup();
        }
        let mut node = BtreeNode::new_root(level);
        node.nchildren = keys.len() as u16;
        node.keys = keys.clone();
        node.ptrs = vec![0; keys.len()];
        prop_assert_eq!(node.lookup(key), kernel_lookup(&keys, level, key));
        if sort {
            // On sorted keys: descend into the last key <= key, or insert
            // before the first key > key at level 1.
            let got = node.lookup(key);
            match keys.binary_search(&key) {
                Ok(i) => prop_assert_eq!(got, (i, true)),
                Err(i) if level > 1 => prop_assert_eq!(got, (i.saturating_sub(1), false)),
                Err(i) => prop_assert_eq!(got, (i, false)),
            }
        }
    }
}

#[test]
fn ncmax_matches_digest() {
    for (bs, ncmax) in [
        (1024, 63),
        (2048, 127),
        (4096, 255),
        (8192, 511),
        (65536, 4095),
    ] {
        assert_eq!(node_ncmax(bs), ncmax);
    }
}

// ---------------------------------------------------------------- bmap

#[test]
fn direct_map_lookup() {
    let bmap = [0, 11, 0, 33, 0, 0, 66];
    let BmapRoot::Direct(d) = BmapRoot::decode(&bmap).unwrap() else {
        panic!("not direct")
    };
    assert_eq!(d.lookup(0), Some(11));
    assert_eq!(d.lookup(1), None);
    assert_eq!(d.lookup(5), Some(66));
    assert_eq!(d.lookup(6), None);
    assert_eq!(d.lookup(u64::MAX), None);
    // An all-zero i_bmap is an empty direct map.
    assert_eq!(
        BmapRoot::decode(&[0; 7]).unwrap(),
        BmapRoot::Direct(DirectMap::default())
    );
}

// ---------------------------------------------------------------- DAT, cpfile, sufile

#[test]
fn dat_entry_liveness() {
    let e = DatEntry {
        blocknr: BlockNr(99),
        start: Cno(3),
        end: Cno(7),
        rsv: 0,
    };
    assert!(!e.is_live_at(Cno(2)));
    assert!(e.is_live_at(Cno(3)));
    assert!(e.is_live_at(Cno(6)));
    assert!(!e.is_live_at(Cno(7)));
    let live = DatEntry { end: Cno::MAX, ..e };
    assert!(live.is_live_at(Cno(u64::MAX - 1)));
}

#[test]
fn checkpoint_flags() {
    let mut cp = Checkpoint {
        flags: CP_INVALID,
        ..Default::default()
    };
    assert!(cp.is_invalid() && !cp.is_snapshot() && !cp.is_minor() && !cp.is_sketch());
    cp.set_flag(CP_INVALID, false);
    cp.set_flag(CP_SNAPSHOT | CP_MINOR, true);
    assert_eq!(cp.flags, 0b1001);
    assert!(cp.is_snapshot() && cp.is_minor() && !cp.is_invalid());
    cp.set_flag(CP_SKETCH, true);
    assert!(cp.is_sketch());
    // The ifile inode starts at byte 64.
    cp.ifile_inode.mode = 0o100000;
    assert_eq!(&cp.to_bytes()[64 + 48..64 + 50], &0o100000u16.to_le_bytes());
}

#[test]
fn cpfile_locate_4k() {
    let g = CpfileGeometry::new(4096, 192).unwrap();
    assert_eq!(g.checkpoints_per_block(), 21);
    assert_eq!(g.first_entry_offset(), 1);
    assert_eq!(g.locate(Cno(0)), None);
    for cno in 1..=20u64 {
        assert_eq!(g.locate(Cno(cno)), Some((FileBlk(0), cno as usize * 192)));
    }
    assert_eq!(g.locate(Cno(21)), Some((FileBlk(1), 0)));
    assert_eq!(g.locate(Cno(41)), Some((FileBlk(1), 20 * 192)));
    assert_eq!(g.locate(Cno(42)), Some((FileBlk(2), 0)));
}

#[test]
fn cpfile_per_block_table() {
    for (bs, per) in [(1024, 5), (2048, 10), (4096, 21), (8192, 42)] {
        let g = CpfileGeometry::new(bs, 192).unwrap();
        assert_eq!(g.checkpoints_per_block(), per);
        // The last checkpoint of block 0 is cno per - 1; block 1 starts at per.
        assert_eq!(
            g.locate(Cno(per - 1)),
            Some((FileBlk(0), (per as usize - 1) * 192))
        );
        assert_eq!(g.locate(Cno(per)), Some((FileBlk(1), 0)));
    }
    assert!(CpfileGeometry::new(4096, 191).is_err());
    assert!(CpfileGeometry::new(1024, 1025).is_err());
}

#[test]
fn sufile_locate_4k() {
    let g = SufileGeometry::new(4096, 16).unwrap();
    assert_eq!(g.segment_usages_per_block(), 256);
    assert_eq!(g.first_entry_offset(), 2);
    // No "- 1": segment 0 sits right after the 24-byte header's two slots.
    assert_eq!(g.locate(SegNum(0)), (FileBlk(0), 32));
    assert_eq!(g.locate(SegNum(253)), (FileBlk(0), 255 * 16));
    assert_eq!(g.locate(SegNum(254)), (FileBlk(1), 0));
    assert_eq!(g.locate(SegNum(254 + 256)), (FileBlk(2), 0));
    // A wider stride leaves one header slot.
    let wide = SufileGeometry::new(1024, 32).unwrap();
    assert_eq!(wide.first_entry_offset(), 1);
    assert_eq!(wide.locate(SegNum(0)), (FileBlk(0), 32));
    assert_eq!(wide.locate(SegNum(31)), (FileBlk(1), 0));
    // Overflow is reported, not a panic.
    let one = SufileGeometry::new(1024, 1024).unwrap();
    assert_eq!(one.locate(SegNum(u64::MAX)), (FileBlk(u64::MAX), 0));
    assert!(SufileGeometry::new(4096, 15).is_err());
}

#[test]
fn segment_usage_flags() {
    let mut su = SegmentUsage::default();
    assert!(su.is_clean());
    su.flags = SU_ACTIVE;
    assert!(
        su.is_active() && !su.is_clean(),
        "ACTIVE alone is not clean"
    );
    su.flags = SU_ACTIVE | SU_DIRTY;
    assert!(su.is_dirty() && !su.is_error());
}

// ---------------------------------------------------------------- directories

/// A 1 KiB block: "." then ".." then "hello" stretched to the end.
fn good_dir_block() -> Vec<u8> {
    let entries = vec![
        DirEntry {
            ino: Ino(12),
            rec_len: 16,
            name_len: 1,
            file_type: FT_DIR,
            name: b".".to_vec(),
        },
        DirEntry {
            ino: Ino(2),
            rec_len: 16,
            name_len: 2,
            file_type: FT_DIR,
            name: b"..".to_vec(),
        },
        DirEntry {
            ino: Ino(13),
            rec_len: 1024 - 32,
            name_len: 5,
            file_type: FT_REG_FILE,
            name: b"hello".to_vec(),
        },
    ];
    dir::encode_block(&entries, 1024).unwrap()
}

fn set_rec_len(buf: &mut [u8], offs: usize, rec_len: u16) {
    buf[offs + 8..offs + 10].copy_from_slice(&rec_len.to_le_bytes());
}

#[test]
fn good_dir_block_is_accepted() {
    let entries = dir::parse_block(&good_dir_block(), 1024).unwrap();
    assert_eq!(entries.len(), 3);
    assert_eq!(entries[2].name, b"hello");
}

#[test]
fn dir_rule_rec_len_below_minimum() {
    let mut buf = good_dir_block();
    set_rec_len(&mut buf, 16, 12);
    assert_corrupt(dir::parse_block(&buf, 1024), "directory entry");
}

#[test]
fn dir_rule_rec_len_unaligned() {
    let mut buf = good_dir_block();
    set_rec_len(&mut buf, 16, 18);
    assert_corrupt(dir::parse_block(&buf, 1024), "directory entry");
}

#[test]
fn dir_rule_rec_len_too_small_for_name() {
    let mut buf = good_dir_block();
    buf[16 + 10] = 5; // ".." claims a 5-byte name in a 16-byte record
    assert_corrupt(dir::parse_block(&buf, 1024), "directory entry");
}

#[test]
fn dir_rule_record_crosses_block_end() {
    let mut buf = good_dir_block();
    set_rec_len(&mut buf, 32, 1024 - 32 + 4);
    assert_corrupt(dir::parse_block(&buf, 1024), "directory entry");
}

#[test]
fn dir_rule_records_stop_short_of_block_end() {
    let mut buf = good_dir_block();
    set_rec_len(&mut buf, 32, 1024 - 32 - 12); // leaves a 12-byte tail
    assert_corrupt(dir::parse_block(&buf, 1024), "directory entry");
}

#[test]
fn dir_rule_private_inode_number() {
    for private in [1u64, 3, 4, 5, 6, 7, 8, 9] {
        let mut buf = good_dir_block();
        buf[32..40].copy_from_slice(&private.to_le_bytes());
        assert_corrupt(dir::parse_block(&buf, 1024), "directory entry");
    }
    for allowed in [0u64, 2, 10, 11] {
        let mut buf = good_dir_block();
        buf[32..40].copy_from_slice(&allowed.to_le_bytes());
        dir::parse_block(&buf, 1024).unwrap();
    }
}

#[test]
fn dir_encode_rejects_what_parse_rejects() {
    let e = |rec_len| DirEntry {
        ino: Ino(11),
        rec_len,
        name_len: 1,
        file_type: 1,
        name: b"a".to_vec(),
    };
    assert!(dir::encode_block(&[e(1024)], 1024).is_ok());
    assert!(matches!(
        dir::encode_block(&[e(1020)], 1024),
        Err(Error::Invalid(_))
    ));
    assert!(matches!(
        dir::encode_block(&[e(1028)], 1024),
        Err(Error::Invalid(_))
    ));
    assert!(matches!(
        dir::encode_block(&[e(16), e(1000)], 1024),
        Err(Error::Invalid(_))
    ));
    assert!(matches!(
        dir::encode_block(&[e(16), e(1008), e(16)], 1024),
        Err(Error::Invalid(_))
    ));
    let mut bad_name = e(1024);
    bad_name.name_len = 2;
    assert!(matches!(
        dir::encode_block(&[bad_name], 1024),
        Err(Error::Invalid(_))
    ));
}

#[test]
fn empty_dir_block_layout() {
    for bs in [1024u32, 4096, 65536] {
        let buf = dir::empty_dir_block(Ino(12), Ino(2), bs);
        let entries = dir::parse_block(&buf, bs).unwrap();
        let want = vec![
            DirEntry {
                ino: Ino(12),
                rec_len: 16,
                name_len: 1,
                file_type: FT_DIR,
                name: b".".to_vec(),
            },
            DirEntry {
                ino: Ino(2),
                rec_len: bs - 16,
                name_len: 2,
                file_type: FT_DIR,
                name: b"..".to_vec(),
            },
        ];
        assert_eq!(entries, want);
        assert_eq!(dir::encode_block(&want, bs).unwrap(), buf);
    }
}

#[test]
fn rec_len_65536_is_stored_as_65535() {
    let whole = DirEntry {
        ino: Ino(0),
        rec_len: 65536,
        name_len: 0,
        file_type: 0,
        name: vec![],
    };
    let buf = dir::encode_block(std::slice::from_ref(&whole), 65536).unwrap();
    assert_eq!(&buf[8..10], &[0xff, 0xff]);
    assert_eq!(dir::parse_block(&buf, 65536).unwrap(), vec![whole]);
    // At smaller block sizes 65535 is simply a bad rec_len.
    let mut small = dir::empty_dir_block(Ino(12), Ino(2), 4096);
    set_rec_len(&mut small, 16, 0xffff);
    assert!(dir::parse_block(&small, 4096).is_err());
}

#[test]
fn dir_helpers() {
    assert_eq!(dir::rec_len_for(0), 16);
    assert_eq!(dir::rec_len_for(1), 16);
    assert_eq!(dir::rec_len_for(4), 16);
    assert_eq!(dir::rec_len_for(5), 24);
    assert_eq!(dir::rec_len_for(255), 272);
    assert_eq!(dir::file_type_from_mode(S_IFDIR | 0o755), FT_DIR);
    assert_eq!(dir::file_type_from_mode(S_IFREG | 0o644), FT_REG_FILE);
    assert_eq!(dir::file_type_from_mode(S_IFLNK | 0o777), FT_SYMLINK);
    assert_eq!(dir::file_type_from_mode(0o644), FT_UNKNOWN);
}

// ---------------------------------------------------------------- palloc

#[test]
fn palloc_table_17_2() {
    let table = [
        (1024, 262401, 65793),
        (2048, 524801, 131585),
        (4096, 1049601, 263169),
        (8192, 2099201, 526337),
    ];
    for (bs, ifile_blocks, dat_blocks) in table {
        let ifile = PallocGeometry::new(bs, 128).unwrap();
        let dat = PallocGeometry::new(bs, 32).unwrap();
        assert_eq!(ifile.entries_per_group(), u64::from(bs) * 8);
        assert_eq!(ifile.groups_per_desc_block(), u64::from(bs) / 4);
        assert_eq!(ifile.entries_per_block(), u64::from(bs) / 128);
        assert_eq!(dat.entries_per_block(), u64::from(bs) / 32);
        assert_eq!(ifile.blocks_per_group(), 1025);
        assert_eq!(dat.blocks_per_group(), 257);
        assert_eq!(ifile.blocks_per_desc_block(), ifile_blocks);
        assert_eq!(dat.blocks_per_desc_block(), dat_blocks);
    }
}

#[test]
fn palloc_ifile_and_dat_examples_4k() {
    let ifile = PallocGeometry::new(4096, 128).unwrap();
    let dat = PallocGeometry::new(4096, 32).unwrap();
    for n in 0..32768u64 {
        assert_eq!(ifile.entry_blkoff(n), Some(2 + n / 32));
        assert_eq!(ifile.entry_offset_in_block(n), (n % 32) as usize * 128);
        assert_eq!(dat.entry_blkoff(n), Some(2 + n / 128));
        assert_eq!(dat.entry_offset_in_block(n), (n % 128) as usize * 32);
    }
    // Group 1 follows group 0's bitmap and 1024 entry blocks.
    assert_eq!(ifile.group(32768), (1, 0));
    assert_eq!(ifile.bitmap_blkoff(1), Some(1026));
    assert_eq!(ifile.entry_blkoff(32768), Some(1027));
    // Group 1024 starts the second descriptor block.
    assert_eq!(ifile.desc_blkoff(1023), Some(0));
    assert_eq!(ifile.desc_blkoff(1024), Some(1049601));
    assert_eq!(ifile.bitmap_blkoff(1024), Some(1049602));
}

#[test]
fn palloc_overflow_is_none() {
    let g = PallocGeometry::new(1024, 1024).unwrap();
    assert_eq!(g.entry_blkoff(u64::MAX), None);
    assert_eq!(g.desc_blkoff(u64::MAX), None);
    assert!(PallocGeometry::new(1024, 0).is_err());
    assert!(PallocGeometry::new(1024, 1025).is_err());
    assert!(PallocGeometry::new(3000, 128).is_err());
}

#[test]
fn bitmap_bit_order_is_little_endian() {
    let mut buf = [0u8; 4];
    assert_eq!(palloc::set_bit(&mut buf, 0), Some(false));
    assert_eq!(palloc::set_bit(&mut buf, 9), Some(false));
    assert_eq!(palloc::set_bit(&mut buf, 9), Some(true));
    assert_eq!(buf, [0x01, 0x02, 0, 0]);
    assert_eq!(palloc::count_set_bits(&buf, 9), 1);
    assert_eq!(palloc::count_set_bits(&buf, 10), 2);
    assert_eq!(palloc::set_bit(&mut buf, 32), None);
    assert!(!palloc::bit_is_set(&buf, 32));
    assert_eq!(palloc::clear_bit(&mut buf, 0), Some(true));
    assert_eq!(palloc::clear_bit(&mut buf, 0), Some(false));
}
