//! Fuzz entry points, one per decoder family. The cargo-fuzz targets in
//! fuzz/ call these, and `tests/fuzz_corpus.rs` replays every committed
//! corpus input through them under plain `cargo test`, so CI checks the
//! corpus without libFuzzer.
//!
//! Each entry feeds arbitrary bytes to decoders (which must answer Ok or a
//! typed error, never panic) and, where decoding succeeds, checks that
//! encoding gives back what was decoded.

use nilfs::device::{BlockDevice, MemDevice};
use nilfs::format::btree::BtreeNode;
use nilfs::format::cpfile::{Checkpoint, CpfileHeader};
use nilfs::format::dat::DatEntry;
use nilfs::format::dir;
use nilfs::format::inode::Inode;
use nilfs::format::palloc;
use nilfs::format::segsum::{SegmentSummary, Summary};
use nilfs::format::sufile::{SegmentUsage, SufileHeader};
use nilfs::format::super_root::SuperRoot;
use nilfs::format::superblock::SuperBlock;
use nilfs::format::{bmap::BmapRoot, le};

/// A fuzz target: its name and entry point.
pub type Target = (&'static str, fn(&[u8]));

/// The fuzz targets, by name (the names of fuzz/fuzz_targets/*.rs and of
/// the corpus folders).
pub const TARGETS: &[Target] = &[
    ("superblock", superblock),
    ("segsum", segsum),
    ("btree", btree),
    ("dir", dir_block),
    ("mdt_entries", mdt_entries),
    ("image", image),
];

/// A block size chosen by one input byte (1 KiB .. 64 KiB).
fn block_size(b: u8) -> u32 {
    1024 << (b % 7)
}

/// Super block: decode, the kernel's validity and geometry checks, round trip.
pub fn superblock(data: &[u8]) {
    if let Ok(sb) = SuperBlock::decode(data) {
        let _ = sb.check_valid();
        let _ = sb.check_geometry(u64::from_le_bytes(le::bytes_at(data, 1024)));
        let _ = sb.block_size();
        let _ = (sb.volume_label(), sb.uuid_string());
        assert_eq!(SuperBlock::decode(&sb.encode()).as_ref(), Ok(&sb));
    }
}

/// Segment summary: the header alone, then the whole summary at the block
/// size of the first byte; a decoded summary re-encodes to one that decodes
/// the same.
pub fn segsum(data: &[u8]) {
    let Some((&sel, rest)) = data.split_first() else {
        return;
    };
    let _ = SegmentSummary::decode(rest);
    let bs = block_size(sel);
    if let Ok(s) = Summary::decode(rest, bs) {
        let again =
            Summary::decode(&s.encode(bs), bs).expect("a decoded summary re-encodes validly");
        assert_eq!(again.files, s.files);
        let _ = s.block_entries(bs).count();
    }
}

/// B-tree nodes: a block node at the block size of the first byte, and a
/// root from the first 56 bytes; lookups on whatever decodes.
pub fn btree(data: &[u8]) {
    let Some((&sel, rest)) = data.split_first() else {
        return;
    };
    let bs = block_size(sel);
    if let Ok(n) = BtreeNode::decode_block(rest, bs) {
        let _ = n.check_keys_sorted();
        let _ = n.lookup(le::u64_at(rest, 8));
        assert_eq!(
            BtreeNode::decode_block(&n.encode_block(bs), bs).as_ref(),
            Ok(&n)
        );
    }
    let mut slots = [0u64; 7];
    for (i, s) in slots.iter_mut().enumerate() {
        *s = le::u64_at(rest, 8 * i);
    }
    if let Ok(root) = BmapRoot::decode(&slots) {
        let _ = root.encode();
    }
    if let Ok(n) = BtreeNode::decode_root(&slots) {
        let _ = n.lookup(le::u64_at(rest, 56));
    }
}

/// Directory blocks at the block size of the first byte.
pub fn dir_block(data: &[u8]) {
    let Some((&sel, rest)) = data.split_first() else {
        return;
    };
    let bs = block_size(sel);
    if let Ok(entries) = dir::parse_block(rest, bs) {
        let enc = dir::encode_block(&entries, bs).expect("parsed entries re-encode");
        assert_eq!(dir::parse_block(&enc, bs).as_ref(), Ok(&entries));
    }
}

/// Metadata-file entries and the structures embedded in them.
pub fn mdt_entries(data: &[u8]) {
    let _ = DatEntry::decode(data);
    let _ = Inode::decode(data);
    let _ = CpfileHeader::decode(data);
    let _ = SufileHeader::decode(data);
    let _ = SegmentUsage::decode(data);
    if let Ok(cp) = Checkpoint::decode(data) {
        let _ = (cp.is_snapshot(), cp.is_invalid(), cp.is_minor());
    }
    if let Some((&sel, rest)) = data.split_first() {
        let bs = block_size(sel);
        let _ = palloc::decode_group_descs(rest, bs);
        let _ = SuperRoot::decode(rest, 128 + u16::from(sel));
        let _ = nilfs::format::super_root::check_valid(rest, bs, le::u32_at(rest, 0));
    }
}

/// A whole image, corrupted in structured ways: the input chooses a small
/// mkfs geometry and a list of byte patches, optionally resealing every
/// checksum afterwards so that the corruption reaches the deeper decoders.
/// Opening, inspecting, listing and checking it must never panic.
pub fn image(data: &[u8]) {
    let Some((head, patches)) = data.split_first_chunk::<3>() else {
        return;
    };
    let bs = 1024u64 << (head[0] % 3);
    let bps = 16u64 << (head[1] % 3);
    let dev = MemDevice::new(bs * bps * 20 + 8192);
    let o = nilfs::mkfs::MkfsOptions {
        block_size: bs,
        blocks_per_segment: bps,
        ..Default::default()
    };
    if nilfs::mkfs::mkfs(&dev, &o).is_err() {
        return;
    }
    // Patches land in the first two segments, where mkfs wrote.
    let span = 2 * bps * bs;
    for p in patches.chunks_exact(4) {
        let off = u64::from(u32::from_le_bytes([p[0], p[1], p[2], 0])) % span;
        let sector = off - off % 512;
        let mut s = [0u8; 512];
        if dev.read_at(sector, &mut s).is_ok() {
            s[(off - sector) as usize] ^= p[3];
            let _ = dev.write_at(sector, &s);
        }
    }
    if head[2] & 1 == 1 {
        reseal(&dev, bs);
    }
    let _ = nilfs::inspect::report::inspect(&dev);
    let _ = nilfs::check::verify_checksums(&dev);
    let all = nilfs::check::Options {
        checkpoints: nilfs::check::Checkpoints::All,
        ..Default::default()
    };
    let _ = nilfs::check::check_device(&dev, &all);
    let _ = nilfs::inspect::tools::lscp(&dev, &Default::default());
    let _ = nilfs::inspect::tools::lssu(&dev, &Default::default());
    let _ = nilfs::inspect::tools::dumpseg(&dev, &[0, 1]);
    let _ = nilfs::inspect::tools::tune_list(&dev);
}

/// Recompute the primary super block's CRC and the first log's checksums,
/// whatever the patches did to them (best effort: fields the patches made
/// nonsensical are left as they are).
fn reseal(dev: &MemDevice, bs: u64) {
    let mut raw = vec![0u8; 1024];
    if dev.read_at(1024, &mut raw).is_err() {
        return;
    }
    let Ok(mut sb) = SuperBlock::decode(&raw) else {
        return;
    };
    let log_start = sb.last_pseg.0.min(64);
    let mut head = vec![0u8; bs as usize];
    if dev.read_at(log_start * bs, &mut head).is_ok() {
        if let Ok(h) = SegmentSummary::decode(&head) {
            let n = u64::from(h.nblocks).clamp(1, 64);
            let mut log = vec![0u8; (n * bs) as usize];
            if dev.read_at(log_start * bs, &mut log).is_ok() {
                if h.has_super_root() {
                    let sr = &mut log[((n - 1) * bs) as usize..];
                    nilfs::format::super_root::seal_block(sr, sb.crc_seed);
                }
                if u64::from(h.sumbytes) <= n * bs {
                    nilfs::format::segsum::seal_log(&mut log, sb.crc_seed);
                }
                let _ = dev.write_at(log_start * bs, &log);
            }
        }
    }
    sb.seal();
    let _ = dev.write_at(1024, &sb.encode());
}
