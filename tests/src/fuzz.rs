//! Fuzz entry points, one per decoder family. The cargo-fuzz targets in
//! fuzz/ call these, and `tests/fuzz_corpus.rs` replays every committed
//! corpus input through them under plain `cargo test`, so CI checks the
//! corpus without libFuzzer.
//!
//! Each decoder entry feeds arbitrary bytes to decoders (which must answer
//! Ok or a typed error, never panic) and, where decoding succeeds, checks
//! that encoding gives back what was decoded. The structure-aware ones
//! read their input through `arbitrary` (issue 35): `lockstep` as the
//! choices of the one workload generator, run against the model;
//! `image_mutate` as named fields of named structures to damage, then a
//! generated workload.

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
    ("image_ops", image_ops),
    ("lockstep", lockstep),
    ("image_mutate", image_mutate),
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
    let Some(dev) = image_device(data) else {
        return;
    };
    image_judged(&dev);
}

/// The image [`image`] makes of `data` (the fuzz corpus's images, for the
/// hostile-image campaign: `cargo run -p nilfs-conformance --example
/// fuzz_images -- DIR`).
pub fn image_device(data: &[u8]) -> Option<MemDevice> {
    let (head, patches) = data.split_first_chunk::<3>()?;
    let bs = 1024u64 << (head[0] % 3);
    let bps = 16u64 << (head[1] % 3);
    let dev = mkfs_image(bs, bps)?;
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
    Some(dev)
}

fn image_judged(dev: &MemDevice) {
    let dev = dev.duplicate();
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
    for v in [
        nilfs::inspect::nilfs_utils::tune::NilfsUtils::V2_2_9,
        nilfs::inspect::nilfs_utils::tune::NilfsUtils::V2_2_11,
    ] {
        let _ = nilfs::inspect::tools::tune_list(&dev, v);
    }
}

/// A fresh mkfs image of this geometry (20 segments), made once per process
/// and copied: mkfs is deterministic, and making it was half of each run.
fn mkfs_image(bs: u64, bps: u64) -> Option<MemDevice> {
    type Cache = std::collections::BTreeMap<(u64, u64), Option<MemDevice>>;
    static CACHE: std::sync::Mutex<Cache> =
        std::sync::Mutex::new(std::collections::BTreeMap::new());
    let mut cache = CACHE.lock().unwrap_or_else(|p| p.into_inner());
    cache
        .entry((bs, bps))
        .or_insert_with(|| {
            let dev = MemDevice::new(bs * bps * 20 + 8192);
            let o = nilfs::mkfs::MkfsOptions {
                block_size: bs,
                blocks_per_segment: bps,
                ..Default::default()
            };
            nilfs::mkfs::mkfs(&dev, &o).ok().map(|_| dev)
        })
        .as_ref()
        .map(MemDevice::duplicate)
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

// --- the structure-aware image fuzzer --------------------------------------

/// A small image built once per process, with the catalog's fields located
/// on it.
struct FuzzBase {
    dev: MemDevice,
    fields: Vec<(String, crate::corrupt::Field)>,
}

/// The mount time of the bases' writers, and of the fuzzer's workload after.
const FUZZ_T0: u64 = 1_800_000_000;

/// The named fields the fuzzer damages (those a base lacks are left out):
/// every field of the corruption generator's tables on the structures of a
/// small tree.
fn fuzz_catalog() -> Vec<String> {
    let mut out = Vec::new();
    let sb = [
        "s_rev_level",
        "s_minor_rev_level",
        "s_magic",
        "s_bytes",
        "s_flags",
        "s_crc_seed",
        "s_log_block_size",
        "s_nsegments",
        "s_dev_size",
        "s_first_data_block",
        "s_blocks_per_segment",
        "s_r_segments_percentage",
        "s_last_cno",
        "s_last_pseg",
        "s_last_seq",
        "s_free_blocks_count",
        "s_ctime",
        "s_mtime",
        "s_wtime",
        "s_mnt_count",
        "s_max_mnt_count",
        "s_state",
        "s_first_ino",
        "s_inode_size",
        "s_dat_entry_size",
        "s_checkpoint_size",
        "s_segment_usage_size",
        "s_feature_compat_ro",
        "s_feature_incompat",
    ];
    for f in sb {
        out.push(format!("sb0.{f}"));
        out.push(format!("sb1.{f}"));
    }
    let ss = [
        "ss_datasum",
        "ss_sumsum",
        "ss_magic",
        "ss_bytes",
        "ss_flags",
        "ss_seq",
        "ss_create",
        "ss_next",
        "ss_nblocks",
        "ss_nfinfo",
        "ss_sumbytes",
        "ss_cno",
    ];
    for f in ss {
        out.push(format!("ss@sr.{f}"));
        out.push(format!("ss@rf.{f}"));
    }
    for f in ["fi_ino", "fi_cno", "fi_nblocks", "fi_ndatablk"] {
        for log in ["sr:0", "sr:1", "rf:0"] {
            out.push(format!("finfo@{log}.{f}"));
        }
    }
    for f in ["bi_vblocknr", "bi_blkoff"] {
        out.push(format!("binfo@rf:0:0.{f}"));
        out.push(format!("binfo@sr:0:0.{f}"));
    }
    for f in ["sr_bytes", "sr_flags", "sr_nongc_ctime"] {
        out.push(format!("sr.{f}"));
    }
    let inode = [
        "i_blocks",
        "i_size",
        "i_mode",
        "i_links_count",
        "i_flags",
        "i_bmap[0]",
        "i_bmap[1]",
        "i_bmap[2]",
        "i_bmap[3]",
        "i_bmap[6]",
    ];
    let holders = [
        "sr.dat",
        "sr.cpfile",
        "sr.sufile",
        "cp[2].ifile",
        "inode[/]",
        "inode[/small]",
        "inode[/big]",
        "inode[/d]",
        "inode[/d/sub]",
        "inode[/link]",
        "inode[/small@1]",
    ];
    for h in holders {
        for f in inode {
            out.push(format!("{h}.{f}"));
        }
    }
    for n in ["node[/big:1:0]", "node[dat:1:0]", "node[/big:2:0]"] {
        for f in [
            "bn_flags",
            "bn_level",
            "bn_nchildren",
            "key[0]",
            "key[1]",
            "ptr[0]",
            "ptr[1]",
        ] {
            out.push(format!("{n}.{f}"));
        }
    }
    for d in [
        "dat[/small:0]",
        "dat[/big:0]",
        "dat[/big:20]",
        "dat[/d:0]",
        "dat[/small@1:0]",
    ] {
        for f in ["de_blocknr", "de_start", "de_end"] {
            out.push(format!("{d}.{f}"));
        }
    }
    for e in [
        "dirent[/small]",
        "dirent[/d/f1]",
        "dirent[/d/sub]",
        "dirent[/link]",
    ] {
        for f in ["inode", "rec_len", "name_len", "file_type"] {
            out.push(format!("{e}.{f}"));
        }
    }
    for f in ["ch_ncheckpoints", "ch_nsnapshots", "ssl_next", "ssl_prev"] {
        out.push(format!("cphdr.{f}"));
    }
    for c in ["cp[1]", "cp[2]"] {
        for f in [
            "cp_flags",
            "ssl_next",
            "ssl_prev",
            "cp_cno",
            "cp_create",
            "cp_inodes_count",
            "cp_blocks_count",
        ] {
            out.push(format!("{c}.{f}"));
        }
    }
    for f in ["sh_ncleansegs", "sh_ndirtysegs", "sh_last_alloc"] {
        out.push(format!("suhdr.{f}"));
    }
    for seg in ["su[0]", "su[1]", "su[2]", "su[cur]"] {
        for f in ["su_lastmod", "su_nblocks", "su_flags"] {
            out.push(format!("{seg}.{f}"));
        }
    }
    for (g, f) in [("datdesc[0]", "pg_nfrees"), ("ifiledesc[0]", "pg_nfrees")] {
        out.push(format!("{g}.{f}"));
    }
    out.push("datbitmap[0].bit".into());
    out.push("ifilebitmap[12].bit".into());
    for k in (0..1024).step_by(61) {
        out.push(format!("block[/:0].byte[{k}]"));
        out.push(format!("block[/d:0].byte[{k}]"));
    }
    out
}

/// The bases: `tree` (a snapshot, then changes: B-trees, hard links, a
/// symlink, a subdirectory) and `rollforward` (data-sync logs after the
/// latest super root, never replayed). 1 KiB blocks, 32-block segments.
fn fuzz_bases() -> &'static [FuzzBase] {
    static BASES: std::sync::OnceLock<Vec<FuzzBase>> = std::sync::OnceLock::new();
    BASES.get_or_init(|| {
        let catalog = fuzz_catalog();
        let build = |rollforward: bool| -> MemDevice {
            use nilfs::format::ino::ROOT;
            let dev = MemDevice::new(48 * 32 * 1024);
            nilfs::mkfs::mkfs(
                &dev,
                &nilfs::mkfs::MkfsOptions {
                    block_size: 1024,
                    blocks_per_segment: 32,
                    ..Default::default()
                },
            )
            .expect("mkfs of a fuzz base");
            {
                let nilfs = nilfs::the_nilfs::Nilfs::open(&dev).expect("open a fuzz base");
                let mut fs = nilfs::fs::Fs::mount(&nilfs, FUZZ_T0).expect("mount a fuzz base");
                let small = fs.create(ROOT, b"small", 0o644).unwrap();
                fs.write(small, 0, b"hello, nilfs\n").unwrap();
                if rollforward {
                    fs.sync().unwrap();
                    fs.write(small, 0, b"HELLO").unwrap();
                    fs.fdatasync(small).unwrap();
                    fs.write(small, 6, b"NILFS").unwrap();
                    fs.fdatasync(small).unwrap();
                    drop(fs); // dropped without unmounting
                    return dev;
                }
                fs.sync().unwrap();
                fs.mkcp(true).unwrap();
                fs.set_time(FUZZ_T0 + 100);
                let big = fs.create(ROOT, b"big", 0o644).unwrap();
                let data: Vec<u8> = (0..24 * 1024u32).map(|i| (i * 7 % 251) as u8).collect();
                fs.write(big, 0, &data).unwrap();
                let d = fs.mkdir(ROOT, b"d", 0o755).unwrap();
                let sub = fs.mkdir(d, b"sub", 0o700).unwrap();
                for n in 0..4 {
                    let f = fs.create(d, format!("f{n}").as_bytes(), 0o644).unwrap();
                    fs.write(f, 0, format!("file {n}\n").as_bytes()).unwrap();
                }
                let leaf = fs.create(sub, b"leaf", 0o600).unwrap();
                fs.write(leaf, 0, b"leaf\n").unwrap();
                fs.link(small, d, b"hard").unwrap();
                fs.symlink(ROOT, b"link", b"small").unwrap();
                fs.write(small, 13, b"more\n").unwrap();
                fs.unmount().unwrap();
            }
            dev
        };
        [false, true]
            .into_iter()
            .map(|rf| {
                let dev = build(rf);
                let fields = catalog
                    .iter()
                    .filter_map(|t| Some((t.clone(), crate::corrupt::prepare(&dev, t).ok()?)))
                    .collect();
                FuzzBase { dev, fields }
            })
            .collect()
    })
}

/// Everything of the latest checkpoint, read: the tree walked, every file
/// read in pieces, every symlink's target.
fn read_everything(dev: &MemDevice) -> nilfs::Result<()> {
    let fs = nilfs::the_nilfs::Nilfs::open(dev)?;
    let view = nilfs::posix::CheckpointView::open(&fs, None)?;
    view.walk_tree(&mut |_, _, inode| {
        if nilfs::posix::is_reg(inode) {
            view.read_pieces(inode, &mut |_| Ok(()))?;
        } else if inode.file_type() == nilfs::format::inode::S_IFLNK {
            view.readlink(inode)?;
        }
        Ok(())
    })
}

/// A small read-write workload on the mount, then the cleaner, then the
/// unmount: what a user's first commands on an image would do.
fn fuzz_workload(dev: &MemDevice, seed: u8) -> nilfs::Result<()> {
    use nilfs::format::ino::ROOT;
    let nilfs = nilfs::the_nilfs::Nilfs::open(dev)?;
    let mut fs = nilfs::fs::Fs::mount(&nilfs, FUZZ_T0 + 1000)?;
    let f = fs.create(ROOT, b"fz", 0o644)?;
    fs.write(f, u64::from(seed) * 100, &[seed; 5000])?;
    let d = fs.mkdir(ROOT, b"fzd", 0o755)?;
    if let Some(_small) = fs.lookup(ROOT, b"small")? {
        fs.rename(ROOT, b"small", d, b"s")?;
    }
    if let Some(dd) = fs.lookup(ROOT, b"d")? {
        if fs.lookup(dd, b"f1")?.is_some() {
            fs.unlink(dd, b"f1")?;
        }
    }
    if let Some(big) = fs.lookup(ROOT, b"big")? {
        fs.truncate(big, 3000)?;
    }
    fs.sync()?;
    if seed & 1 == 1 {
        fs.mkcp(true)?;
    }
    fs.set_time(FUZZ_T0 + 2000);
    nilfs::cleaner::clean(&mut fs, 0, 2)?;
    fs.write(f, 0, b"after the cleaner")?;
    fs.unmount()
}

/// Structure-aware image fuzzing (issue 13): the input picks a base, then
/// up to eight (named field, operation, value) damages and whether to
/// reseal the checksums; the damaged image is inspected, listed, checked,
/// read in full, mounted read-write for a small workload and the cleaner,
/// and unmounted. Nothing may panic or hang, and a write path that
/// succeeded on an image `check` found clean must leave one that is still
/// clean and reads in full (no write turns a good image bad).
pub fn image_ops(data: &[u8]) {
    let Some((dev, what)) = image_ops_device(data) else {
        return;
    };
    let head = data[0];
    image_ops_judged(&dev, head, &what);
}

/// The damaged image [`image_ops`] makes of `data`, and what was done
/// to it (the fuzz corpus's images, for the hostile-image campaign).
pub fn image_ops_device(data: &[u8]) -> Option<(MemDevice, String)> {
    use crate::corrupt::{Op, Reseal};
    let (&head, mut rest) = data.split_first()?;
    let bases = fuzz_bases();
    let base = &bases[usize::from(head & 1) % bases.len()];
    let reseal = match (head >> 1) & 3 {
        0 => Reseal::None,
        1 => Reseal::Data,
        _ => Reseal::All,
    };
    let dev = base.dev.duplicate();
    let mut damage = Vec::new();
    let mut n = 0;
    while let Some((chunk, more)) = rest.split_first_chunk::<12>() {
        rest = more;
        n += 1;
        if n > 8 {
            break;
        }
        let idx = usize::from(u16::from_le_bytes([chunk[0], chunk[1]])) % base.fields.len();
        let op = [Op::Set, Op::Add, Op::Sub, Op::Or, Op::And, Op::Xor][usize::from(chunk[2] % 6)];
        let raw = u64::from_le_bytes(chunk[4..12].try_into().unwrap());
        const SPECIAL: [u64; 8] = [
            0,
            1,
            2,
            u64::MAX,
            1 << 31,
            1 << 32,
            1 << 63,
            i64::MAX as u64,
        ];
        let v = match chunk[3] % 4 {
            0 => raw,
            1 => raw & 0xff,
            2 => SPECIAL[(raw % 8) as usize],
            _ => raw % 4096,
        };
        let (name, field) = &base.fields[idx];
        if let Ok(a) = crate::corrupt::apply_at(&dev, field, op, v, reseal) {
            damage.push(format!("{name}: {:#x} -> {:#x}", a.old, a.new));
        }
    }
    // Printed by every failure below, with the base and the reseal mode.
    let what = format!("base {}, {reseal:?}, damage {damage:?}", head & 1);
    Some((dev, what))
}

fn image_ops_judged(dev: &MemDevice, head: u8, what: &str) {
    let dev = dev.duplicate();
    let _ = nilfs::inspect::report::inspect(&dev);
    let _ = nilfs::inspect::tools::lscp(&dev, &Default::default());
    let snapshots = nilfs::inspect::nilfs_utils::lscp::LscpOptions {
        snapshots: true,
        ..Default::default()
    };
    let _ = nilfs::inspect::tools::lscp(&dev, &snapshots);
    let _ = nilfs::inspect::tools::lssu(&dev, &Default::default());
    let _ = nilfs::inspect::tools::dumpseg(&dev, &[0, 1, 2]);
    let before = nilfs::check::check_device(&dev, &Default::default());
    if std::env::var_os("NILFS_FUZZ_DEBUG").is_some() {
        // Replay aid: `NILFS_FUZZ_DEBUG=1 fuzz/target/.../image_ops FILE`.
        eprintln!("{what}\nbefore:\n{before}");
    }
    let clean = before.is_clean();
    let readable = read_everything(&dev).is_ok();
    let wrote = fuzz_workload(&dev, head).is_ok();
    if clean && readable && wrote {
        if let Err(e) = read_everything(&dev) {
            panic!("{what}: a clean image no longer reads after a successful workload: {e}");
        }
        let after = nilfs::check::check_device(&dev, &Default::default());
        assert!(
            after.is_clean(),
            "{what}: a clean image is no longer clean after a successful workload:\n{after}"
        );
    }
}

// --- structure-aware through arbitrary (issue 35) ---------------------------

/// The image the `lockstep` target's workloads run on: 16 MiB, so that a
/// run's mkfs and reads stay small.
fn lockstep_config() -> nilfs_oracle::Config {
    nilfs_oracle::Config {
        spec: nilfs_oracle::ImageSpec {
            device_bytes: 16 << 20,
            ..Default::default()
        },
        ..Default::default()
    }
}

/// Differential fuzzing against the model: the input, read by
/// `arbitrary`, is the choices of the workload generator (`Drawn`: a
/// profile, a length, the generator's numbers), so every input is a
/// valid workload; it runs on nilfs-ref in lockstep with the model.
/// A panic and a divergence are both failures (the divergence is printed
/// with its trace; `nilfs_oracle::minimize` shrinks it).
pub fn lockstep(data: &[u8]) {
    lockstep_on(&mut nilfs_adapter::Ours::default(), data);
}

/// [`lockstep`] on any implementation (its known-bad test gives it one
/// with a planted bug).
pub fn lockstep_on(imp: &mut dyn nilfs_oracle::Implementation, data: &[u8]) {
    use arbitrary::Arbitrary;
    let drawn = nilfs_oracle::Drawn::arbitrary_take_rest(arbitrary::Unstructured::new(data))
        .expect("any input is a workload");
    if let Err(d) = nilfs_oracle::lockstep(imp, &lockstep_config(), &drawn) {
        panic!("{drawn:?}: {d}");
    }
}

/// The structures `image_mutate` damages: a target of the corruption
/// generator's (`corrupt`, which finds it on the image through the read
/// path) and the layout its fields come from, the one its encoder and
/// decoder use (`FIELDS`).
fn mutate_structures() -> &'static [(&'static str, &'static [nilfs::format::le::Field])] {
    use nilfs::format::btree::BtreeNode;
    use nilfs::format::segsum::{BinfoV, Finfo};
    const SB: &[nilfs::format::le::Field] = SuperBlock::FIELDS;
    const INODE: &[nilfs::format::le::Field] = Inode::FIELDS;
    &[
        ("sb0", SB),
        ("sb1", SB),
        ("ss@sr", SegmentSummary::FIELDS),
        ("ss@rf", SegmentSummary::FIELDS),
        ("finfo@sr:0", Finfo::FIELDS),
        ("finfo@sr:1", Finfo::FIELDS),
        ("finfo@rf:0", Finfo::FIELDS),
        ("binfo@sr:0:0", BinfoV::FIELDS),
        ("binfo@rf:0:0", BinfoV::FIELDS),
        ("sr", SuperRoot::FIELDS),
        ("sr.dat", INODE),
        ("sr.cpfile", INODE),
        ("sr.sufile", INODE),
        ("cp[2].ifile", INODE),
        ("inode[/]", INODE),
        ("inode[/small]", INODE),
        ("inode[/big]", INODE),
        ("inode[/d]", INODE),
        ("inode[/d/sub]", INODE),
        ("inode[/link]", INODE),
        ("inode[/small@1]", INODE),
        ("node[/big:1:0]", BtreeNode::FIELDS),
        ("node[dat:1:0]", BtreeNode::FIELDS),
        ("dat[/small:0]", DatEntry::FIELDS),
        ("dat[/big:0]", DatEntry::FIELDS),
        ("dat[/d:0]", DatEntry::FIELDS),
        ("dirent[/small]", dir::DirEntry::FIELDS),
        ("dirent[/d/f1]", dir::DirEntry::FIELDS),
        ("dirent[/d/sub]", dir::DirEntry::FIELDS),
        ("cphdr", CpfileHeader::FIELDS),
        ("cp[1]", Checkpoint::FIELDS),
        ("cp[2]", Checkpoint::FIELDS),
        ("suhdr", SufileHeader::FIELDS),
        ("su[0]", SegmentUsage::FIELDS),
        ("su[cur]", SegmentUsage::FIELDS),
    ]
}

/// A named field of base `base`, located once per process (`None` if the
/// base has no such structure).
fn mutate_field(base: usize, target: &str) -> Option<crate::corrupt::Field> {
    type Cache = std::collections::HashMap<(usize, String), Option<crate::corrupt::Field>>;
    static CACHE: std::sync::OnceLock<std::sync::Mutex<Cache>> = std::sync::OnceLock::new();
    let cache = CACHE.get_or_init(Default::default);
    let mut cache = cache.lock().unwrap_or_else(|p| p.into_inner());
    *cache
        .entry((base, target.to_string()))
        .or_insert_with(|| crate::corrupt::prepare(&fuzz_bases()[base].dev, target).ok())
}

/// One damage `image_mutate` reads from its input: a structure, one of
/// its fields (a word of a wide one), an operation and a value.
fn mutation(
    u: &mut arbitrary::Unstructured<'_>,
) -> arbitrary::Result<(String, crate::corrupt::Op, u64)> {
    use crate::corrupt::Op;
    let (structure, fields) = u.choose(mutate_structures())?;
    let f = u.choose(fields)?;
    let name = if f.width > 8 {
        format!("{}[{}]", f.name, u.choose_index(f.width / 8)?)
    } else {
        f.name.to_string()
    };
    let op = *u.choose(&[Op::Set, Op::Add, Op::Sub, Op::Or, Op::And, Op::Xor])?;
    const SPECIAL: [u64; 8] = [
        0,
        1,
        2,
        u64::MAX,
        1 << 31,
        1 << 32,
        1 << 63,
        i64::MAX as u64,
    ];
    let v = match u.choose_index(4)? {
        0 => u.arbitrary::<u64>()?,
        1 => u64::from(u.arbitrary::<u8>()?),
        2 => *u.choose(&SPECIAL)?,
        _ => u.int_in_range(0..=4095)?,
    };
    Ok((format!("{structure}.{name}"), op, v))
}

/// Structure-aware image mutation through arbitrary (issue 35): the
/// input names a base image, one to four damages (a named field of a
/// named structure — the layouts are the format's own `FIELDS` — an
/// operation and a value) and whether to reseal the checksums, then the
/// choices of a short generated workload. The damaged image is checked,
/// mounted and given the workload through the adapter (`ImplUnderTest`,
/// each outcome whatever it is); nothing may panic or hang, and an image
/// `check` found clean on which every operation and the unmount
/// succeeded must still be clean. The workload's `manifest` lines are
/// left out (see below).
pub fn image_mutate(data: &[u8]) {
    image_mutate_with(data, None);
}

/// What an [`image_mutate`] input makes before anything runs on it: the
/// damaged image, what was done to it, and the workload's lines (a
/// generated workload for an empty image of the image's geometry, the
/// `mkfs` and `manifest` lines left out). `examples/fuzz_images.rs`
/// writes them out, for the hostile campaign and for a reproducer on
/// another implementation (`nilref exec --device` runs the lines).
pub struct MutateCase {
    /// The damaged image.
    pub dev: MemDevice,
    /// The base, the resealing and each damage, for a report.
    pub what: String,
    /// The workload, one JSON object a line.
    pub lines: Vec<serde_json::Value>,
}

/// The [`MutateCase`] of an `image_mutate` input (`None` when the input
/// is too short to name a base).
pub fn image_mutate_case(data: &[u8]) -> Option<MutateCase> {
    use crate::corrupt::Reseal;
    use arbitrary::Arbitrary;
    let mut u = arbitrary::Unstructured::new(data);
    let bases = fuzz_bases();
    let base = u.choose_index(bases.len()).ok()?;
    let reseal = match u.choose_index(4).unwrap_or(0) {
        0 => Reseal::None,
        1 => Reseal::Data,
        _ => Reseal::All,
    };
    let dev = bases[base].dev.duplicate();
    let mut damage = Vec::new();
    let n = u.int_in_range(1..=4u8).unwrap_or(1);
    for _ in 0..n {
        let Ok((target, op, v)) = mutation(&mut u) else {
            break;
        };
        if let Some(field) = mutate_field(base, &target) {
            if let Ok(a) = crate::corrupt::apply_at(&dev, &field, op, v, reseal) {
                damage.push(format!("{target}: {:#x} -> {:#x}", a.old, a.new));
            }
        }
    }
    let drawn = nilfs_oracle::Drawn::arbitrary_take_rest(u).expect("any input is a workload");
    let what = format!("base {base}, {reseal:?}, damage {damage:?}, workload {drawn:?}");
    // The workload the generator makes for an empty image of this
    // geometry: on the base its names meet the base's own files.
    let geometry = match nilfs::the_nilfs::Nilfs::open(&dev) {
        Ok(n) => nilfs_model::Geometry {
            block_size: n.block_size(),
            blocks_per_segment: n.sb.blocks_per_segment,
            nsegments: n.sb.nsegments,
            r_segments_percentage: n.sb.r_segments_percentage,
        },
        Err(_) => nilfs_workload::gen::Profile::Mixed.default_geometry(),
    };
    // A short workload: the point is the damaged image.
    let drawn = nilfs_oracle::Drawn {
        len: drawn.len.min(12),
        ..drawn
    };
    let cfg = nilfs_oracle::Config::default();
    let lines = drawn
        .workload(&cfg.gen_config(&geometry))
        .lines
        .into_iter()
        // The image is made already. The manifest digests every byte of
        // every file, holes as zeros: on a file whose damaged size is
        // exabytes (a legal sparse size) no implementation finishes it,
        // manifest.sh on the kernel neither. Left out; the walk it makes
        // is tested on a damaged tree of its own (fuzz_structured.rs).
        .filter(|l| {
            !matches!(
                l.get("op").and_then(|o| o.as_str()),
                Some("mkfs" | "manifest")
            )
        })
        .collect();
    Some(MutateCase { dev, what, lines })
}

/// [`image_mutate`] with `on_mount` called on every read-write mount (its
/// known-bad test plants a write path bug there).
pub fn image_mutate_with(data: &[u8], on_mount: Option<for<'d> fn(&mut nilfs::fs::Fs<'d>)>) {
    use nilfs_model::{Errno, Outcome};
    let Some(MutateCase { dev, what, lines }) = image_mutate_case(data) else {
        return;
    };
    // Every checkpoint, not just what can be mounted now: the workload's
    // chcp can make any plain checkpoint a snapshot (regress-004).
    let every = nilfs::check::Options {
        checkpoints: nilfs::check::Checkpoints::All,
        ..Default::default()
    };
    let clean = nilfs::check::check_device(&dev, &every).is_clean();
    if std::env::var_os("NILFS_FUZZ_DEBUG").is_some() {
        // Replay aid: `NILFS_FUZZ_DEBUG=1 fuzz/target/.../image_mutate FILE`.
        eprintln!("{what}\nclean before: {clean}");
    }
    let mut sut = nilfs_adapter::ImplUnderTest::from_device(&dev, FUZZ_T0 + 1000);
    if let Some(f) = on_mount {
        sut = sut.on_mount(f);
    }
    let mut resolver = nilfs_workload::Resolver::default();
    let mut all_ok = true;
    for line in &lines {
        let op = match resolver.resolve(line) {
            Ok(op) => op,
            Err(_) => {
                resolver.skipped(line);
                continue;
            }
        };
        match sut.try_apply(&op) {
            Ok(out) => {
                all_ok &= out != Outcome::Err(Errno::EIO);
                resolver.observe(&op, &out);
            }
            // An operation the adapter does not run: not sent.
            Err(_) => resolver.skipped(line),
        }
    }
    drop(sut);
    if std::env::var_os("NILFS_FUZZ_DEBUG").is_some() {
        eprintln!("every operation without EIO: {all_ok}");
    }
    if clean && all_ok {
        let after = nilfs::check::check_device(&dev, &Default::default());
        assert!(
            after.is_clean(),
            "{what}: a clean image is no longer clean after a workload that succeeded:\n{after}"
        );
    }
}
