//! Structure-aware damage, for `nilref check`'s corpus, the fuzzers and the
//! hostile-image campaign: damage one named field of one on-disk structure
//! of a valid image (ours or the kernel's), and reseal the checksums that
//! the damage broke (the log's `sr_sum`, `ss_sumsum` and `ss_datasum`, or
//! the super block's `s_sum`) so that the damage reaches the check it is
//! meant for. The base images and the seeded random damage of the tests
//! live in the harness (tests/src/corrupt.rs).
//!
//! A recipe is one line, `TARGET OP VALUE [noreseal]`:
//!
//! - `TARGET` is `STRUCT.FIELD`, the structure found on the image through
//!   the read path: `sb0`, `sb1` (super block copies); `ss@sr`, `ss@SEG:K`
//!   (the header of the latest super root's log, or of the K-th log of
//!   segment SEG), `ss@#PBN` (the log starting at block PBN); `finfo@LOG:I`, `binfo@LOG:I:J`; `sr` (the latest super
//!   root; `sr.dat.i_mode` reaches its inodes), `sr@LOG` (the super root
//!   of log LOG, an older one); `inode[PATH]`,
//!   `inode[#INO]`, with `@CNO` for another checkpoint; `node[FILE:LEVEL:N]`
//!   (the N-th node block at LEVEL of FILE's B-tree, FILE a path, `#INO`,
//!   `dat`, `cpfile`, `sufile` or `ifile`); `dat[FILE:K]` (the DAT entry of
//!   FILE's block K), `dat[#V]`; `datdesc[G]`, `ifiledesc[G]`,
//!   `datbitmap[V]`, `ifilebitmap[INO]`; `dirent[DIR/NAME]`; `cphdr`,
//!   `cp[CNO]` (`cp[5].ifile.i_mode`); `suhdr`, `su[SEG]` (`cur`, `next`);
//!   `block[FILE:K]` (a data block, field `byte[OFF]`).
//! - `OP` is `=`, `+=`, `-=`, `|=`, `&=` or `^=` (wrapping, at the field's
//!   width); `VALUE` is decimal, `0x` hex or `0o` octal.
//! - `noreseal` leaves the checksums as the damage left them.

use crate::bmap::{self, NodeSource};
use crate::device::BlockDevice;
use crate::format::btree::{block_ptrs_offset, node_ncmax, BtreeNode, BLOCK_KEYS_OFFSET};
use crate::format::cpfile::{Checkpoint, CpfileGeometry, CpfileHeader};
use crate::format::dat::DatEntry;
use crate::format::dir::{DirEntry, NAME_OFFSET};
use crate::format::inode::Inode;
use crate::format::le;
use crate::format::palloc::PallocGeometry;
use crate::format::segsum::{self, BinfoDat, BinfoV, Finfo, SegmentSummary};
use crate::format::sufile::{SegmentUsage, SufileGeometry, SufileHeader};
use crate::format::superblock::{self, SuperBlock};
use crate::format::{super_root, BlockNr, Cno, Ino, SegNum, VBlockNr, SB_OFFSET_BYTES};
use crate::posix::CheckpointView;
use crate::the_nilfs::Nilfs;

type R<T> = std::result::Result<T, String>;

fn s<E: std::fmt::Display>(e: E) -> String {
    e.to_string()
}

/// Where a field lives: a device byte offset and a width in bytes (a width
/// of 0 is one bit, `bit` of the byte).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Site {
    /// Byte offset on the device.
    pub byte: u64,
    /// Bytes (1, 2, 4, 8), or 0 for a single bit.
    pub width: usize,
    /// The bit, when `width` is 0.
    pub bit: u8,
    /// The super block copy the field is in, if it is in one (its offset).
    pub super_block: Option<u64>,
}

/// An operation on a field.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    /// `=`
    Set,
    /// `+=`
    Add,
    /// `-=`
    Sub,
    /// `|=`
    Or,
    /// `&=`
    And,
    /// `^=`
    Xor,
}

/// A parsed recipe.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Recipe {
    /// The `STRUCT.FIELD` target.
    pub target: String,
    /// What to do.
    pub op: Op,
    /// With what.
    pub value: Value,
    /// Which checksums to recompute afterwards.
    pub reseal: Reseal,
}

/// A recipe's operand.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Value {
    /// A number.
    Num(u64),
    /// The current value of another target (`@TARGET`).
    Of(String),
}

/// Which checksums a recipe recomputes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reseal {
    /// Every checksum the damage broke (the default).
    All,
    /// None (`noreseal`).
    None,
    /// Only the log's `ss_datasum` (`resealdata`): leaves a wrong
    /// `ss_sumsum` the kernel's own check does not see.
    Data,
}

fn parse_num(v: &str) -> R<u64> {
    let r = if let Some(h) = v.strip_prefix("0x") {
        u64::from_str_radix(h, 16)
    } else if let Some(o) = v.strip_prefix("0o") {
        u64::from_str_radix(o, 8)
    } else {
        v.parse()
    };
    r.map_err(|e| format!("bad number {v}: {e}"))
}

impl Recipe {
    /// Parse `TARGET OP VALUE [noreseal]`.
    pub fn parse(line: &str) -> R<Recipe> {
        let w: Vec<&str> = line.split_whitespace().collect();
        let (target, op, value, rest) = match w.as_slice() {
            [t, o, v, rest @ ..] => (*t, *o, *v, rest),
            _ => return Err(format!("recipe needs TARGET OP VALUE: {line}")),
        };
        let op = match op {
            "=" => Op::Set,
            "+=" => Op::Add,
            "-=" => Op::Sub,
            "|=" => Op::Or,
            "&=" => Op::And,
            "^=" => Op::Xor,
            o => return Err(format!("unknown operator {o}")),
        };
        let reseal = match rest {
            [] => Reseal::All,
            ["noreseal"] => Reseal::None,
            ["resealdata"] => Reseal::Data,
            r => return Err(format!("unexpected {r:?}")),
        };
        let value = match value.strip_prefix('@') {
            Some(t) => Value::Of(t.to_string()),
            None => Value::Num(parse_num(value)?),
        };
        Ok(Recipe {
            target: target.to_string(),
            op,
            value,
            reseal,
        })
    }
}

/// What an applied recipe changed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Applied {
    /// The field's place.
    pub site: Site,
    /// Its value before and after.
    pub old: u64,
    /// The new value.
    pub new: u64,
}

/// Damage `dev` as `recipe` says.
pub fn apply(dev: &dyn BlockDevice, recipe: &Recipe) -> R<Applied> {
    let field = prepare(dev, &recipe.target)?;
    let v = match &recipe.value {
        Value::Num(n) => *n,
        Value::Of(t) => read_site(dev, &locate(dev, t)?)?,
    };
    apply_at(dev, &field, recipe.op, v, recipe.reseal)
}

/// A located field and the log that holds it, found once and applied many
/// times (the structure-aware image fuzzer damages fields of a base image
/// it located when it built it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Field {
    /// Where the field is.
    pub site: Site,
    /// The log holding it (first block, blocks), if it is in one.
    pub log: Option<(u64, u64)>,
}

/// Locate `target` on `dev` (see the module documentation) with the log a
/// reseal must recompute.
pub fn prepare(dev: &dyn BlockDevice, target: &str) -> R<Field> {
    let site = locate(dev, target)?;
    // A super block field needs neither (and a damaged super block may
    // already keep the image from opening).
    if site.super_block.is_some() {
        return Ok(Field { site, log: None });
    }
    let bs = block_size(dev)?;
    let pbn = site.byte / bs;
    let log = log_ranges(dev)?
        .into_iter()
        .find(|&(p, n)| p <= pbn && pbn < p + n);
    Ok(Field { site, log })
}

/// Apply `op v` to a prepared field, then reseal as `reseal` says.
pub fn apply_at(
    dev: &dyn BlockDevice,
    field: &Field,
    op: Op,
    v: u64,
    reseal: Reseal,
) -> R<Applied> {
    let site = field.site;
    let (sector, within, mut buf, old_word) = read_word(dev, &site)?;
    let width = site.width.max(1);
    let old = site_value(&site, old_word);
    let mut new = match op {
        Op::Set => v,
        Op::Add => old.wrapping_add(v),
        Op::Sub => old.wrapping_sub(v),
        Op::Or => old | v,
        Op::And => old & v,
        Op::Xor => old ^ v,
    };
    let word = if site.width == 0 {
        new &= 1;
        (old_word & !(1 << site.bit)) | (new << site.bit)
    } else {
        if width < 8 {
            new &= (1u64 << (8 * width)) - 1;
        }
        new
    };
    buf[within..within + width].copy_from_slice(&word.to_le_bytes()[..width]);
    dev.write_at(sector, &buf).map_err(s)?;
    if reseal != Reseal::None {
        match (site.super_block, field.log) {
            (Some(off), _) => reseal_super_block(dev, off)?,
            (None, Some((p, n))) => reseal_log(dev, p, n, reseal == Reseal::Data)?,
            (None, None) => {}
        }
    }
    Ok(Applied { site, old, new })
}

/// Overwrite the name of the entry at `path` (`/DIR/NAME`) with `new`, of
/// the same length, and reseal the log holding the directory block: the
/// names no recipe can spell (with `/`, NUL, `.`, `..`), for the hostile-name
/// tests of export and manifest. One locate, then raw bytes, because once
/// a name is bad the read path refuses the directory.
pub fn rename_entry(dev: &dyn BlockDevice, path: &str, new: &[u8]) -> R<()> {
    let old = path.rsplit('/').next().unwrap_or_default();
    if old.len() != new.len() {
        return Err(format!(
            "rename_entry: {old:?} and {new:?} differ in length"
        ));
    }
    let site = locate(dev, &format!("dirent[{path}].name[0]"))?;
    let logs = log_ranges(dev)?;
    let bs = block_size(dev)?;
    let start = site.byte - site.byte % 512;
    let end = (site.byte + new.len() as u64).div_ceil(512) * 512;
    let mut buf = vec![0u8; (end - start) as usize];
    dev.read_at(start, &mut buf).map_err(s)?;
    let within = (site.byte - start) as usize;
    buf[within..within + new.len()].copy_from_slice(new);
    dev.write_at(start, &buf).map_err(s)?;
    let pbn = site.byte / bs;
    if let Some(&(p, n)) = logs.iter().find(|(p, n)| *p <= pbn && pbn < p + n) {
        reseal_log(dev, p, n, false)?;
    }
    Ok(())
}

/// The value a site holds now.
pub fn read_site(dev: &dyn BlockDevice, site: &Site) -> R<u64> {
    let (_, _, _, word) = read_word(dev, site)?;
    Ok(site_value(site, word))
}

/// The two sectors around a site: where they start, the site's offset in
/// them, their bytes, and the little-endian word at the site (its width's
/// bytes, at least one).
fn read_word(dev: &dyn BlockDevice, site: &Site) -> R<(u64, usize, Vec<u8>, u64)> {
    let sector = site.byte - site.byte % 512;
    let within = (site.byte - sector) as usize;
    let mut buf = vec![0u8; 1024];
    dev.read_at(sector, &mut buf).map_err(s)?;
    let width = site.width.max(1);
    let mut raw = [0u8; 8];
    raw[..width].copy_from_slice(&buf[within..within + width]);
    Ok((sector, within, buf, u64::from_le_bytes(raw)))
}

/// A site's value in its word: the word, or the site's bit.
fn site_value(site: &Site, word: u64) -> u64 {
    if site.width == 0 {
        (word >> site.bit) & 1
    } else {
        word
    }
}

pub fn block_size(dev: &dyn BlockDevice) -> R<u64> {
    let nilfs = Nilfs::open(dev).map_err(s)?;
    Ok(u64::from(nilfs.block_size()))
}

fn reseal_super_block(dev: &dyn BlockDevice, off: u64) -> R<()> {
    let mut raw = vec![0u8; 1024];
    dev.read_at(off, &mut raw).map_err(s)?;
    let mut sb = SuperBlock::decode(&raw).map_err(s)?;
    sb.seal();
    dev.write_at(off, &sb.encode()).map_err(s)
}

pub fn reseal_log(dev: &dyn BlockDevice, pseg: u64, n: u64, data_only: bool) -> R<()> {
    let mut raw = vec![0u8; 1024];
    dev.read_at(SB_OFFSET_BYTES, &mut raw).map_err(s)?;
    let sb = SuperBlock::decode(&raw).map_err(s)?;
    let bs = u64::from(sb.block_size().map_err(s)?);
    let seed = sb.crc_seed;
    let mut log = vec![0u8; (n * bs) as usize];
    dev.read_at(pseg * bs, &mut log).map_err(s)?;
    let h = SegmentSummary::decode(&log).map_err(s)?;
    if data_only {
        let sum = segsum::compute_datasum(&log, seed);
        log[..4].copy_from_slice(&sum.to_le_bytes());
    } else {
        if h.has_super_root() {
            super_root::seal_block(&mut log[((n - 1) * bs) as usize..], seed);
        }
        segsum::seal_log(&mut log, seed);
    }
    dev.write_at(pseg * bs, &log).map_err(s)
}

/// Every log of the image as (first block, blocks): each used segment's
/// logs up to `su_nblocks`, and the logs the scan found after the latest
/// super root.
pub fn log_ranges(dev: &dyn BlockDevice) -> R<Vec<(u64, u64)>> {
    let nilfs = Nilfs::open(dev).map_err(s)?;
    let mut out = Vec::new();
    for (seg, su) in nilfs.segment_usages().map_err(s)?.iter().enumerate() {
        let (start, end) = nilfs.geo.range(SegNum(seg as u64));
        let limit = start.0 + u64::from(su.nblocks).min(end.0 + 1 - start.0);
        let mut p = start.0;
        while p < limit {
            let b = nilfs.read_block(BlockNr(p)).map_err(s)?;
            let h = SegmentSummary::decode(&b).map_err(s)?;
            let n = u64::from(h.nblocks);
            if n == 0 || p + n > end.0 + 1 {
                break;
            }
            out.push((p, n));
            p += n;
        }
    }
    for v in &nilfs.scan.visits {
        if let (Ok(()), Some(h)) = (&v.verdict, v.header) {
            let e = (v.pseg.0, u64::from(h.nblocks));
            if !out.contains(&e) {
                out.push(e);
            }
        }
    }
    Ok(out)
}

// --- field tables ------------------------------------------------------

// The layouts are impl/src/format's own: each structure's `FIELDS`, which
// its decoder and encoder read and write through.

type Table = &'static [le::Field];

const SB: Table = SuperBlock::FIELDS;
const SS: Table = SegmentSummary::FIELDS;
const FINFO: Table = Finfo::FIELDS;
const SR: Table = super_root::SuperRoot::FIELDS;
const INODE: Table = Inode::FIELDS;
const DAT: Table = DatEntry::FIELDS;
const DIRENT: Table = DirEntry::FIELDS;
const CPHDR: Table = CpfileHeader::FIELDS;
const CP: Table = Checkpoint::FIELDS;
const SUHDR: Table = SufileHeader::FIELDS;
const SU: Table = SegmentUsage::FIELDS;

/// Every field name of a structure's table (`sb`, `ss`, `finfo`,
/// `binfo-dat`, `binfo`, `sr`, `inode`, `dat`, `dirent`, `cphdr`, `cp`,
/// `suhdr`, `su`, `node`), a field wider than 8 bytes as its words
/// (`i_bmap[0]` ... `i_bmap[6]`): the names a recipe's `.FIELD` takes.
pub fn field_names(structure: &str) -> Vec<String> {
    let t: Table = match structure {
        "sb" => SB,
        "ss" => SS,
        "finfo" => FINFO,
        "binfo-dat" => BinfoDat::FIELDS,
        "binfo" => BinfoV::FIELDS,
        "sr" => SR,
        "inode" => INODE,
        "dat" => DAT,
        "dirent" => DIRENT,
        "cphdr" => CPHDR,
        "cp" => CP,
        "suhdr" => SUHDR,
        "su" => SU,
        "node" => BtreeNode::FIELDS,
        _ => return Vec::new(),
    };
    let mut out = Vec::new();
    for f in t {
        if f.width > 8 {
            out.extend((0..f.width / 8).map(|k| format!("{}[{k}]", f.name)));
        } else {
            out.push(f.name.to_string());
        }
    }
    out
}

/// Where field `name` of a structure lies: (offset, width). A field wider
/// than a word is damaged in its first 8 bytes (`s_uuid`), and `NAME[K]`
/// names its K-th 8-byte word (`i_bmap[3]`).
fn field(t: Table, name: &str) -> R<(usize, usize)> {
    let (base, k) = match name.strip_suffix(']').and_then(|n| n.split_once('[')) {
        Some((base, k)) => (base, Some(parse_num(k)? as usize)),
        None => (name, None),
    };
    let f = le::field(t, base).ok_or_else(|| {
        let names: Vec<&str> = t.iter().map(|f| f.name).collect();
        format!("no field {name}; fields: {}", names.join(" "))
    })?;
    match k {
        None => Ok((f.offset, f.width.min(8))),
        Some(k) if f.width > 8 && 8 * (k + 1) <= f.width => Ok((f.offset + 8 * k, 8)),
        Some(_) => Err(format!(
            "no field {name} in {} of {} bytes",
            f.name, f.width
        )),
    }
}

// --- locating structures -------------------------------------------------

/// Split `STRUCT.FIELD` at the first '.' outside brackets.
fn split_target(t: &str) -> R<(&str, &str)> {
    let mut depth = 0;
    for (i, c) in t.char_indices() {
        match c {
            '[' => depth += 1,
            ']' => depth -= 1,
            '.' if depth == 0 => return Ok((&t[..i], &t[i + 1..])),
            _ => {}
        }
    }
    Err(format!("target {t} has no .FIELD"))
}

/// `name[ARG]` -> (name, Some(ARG)); `name@ARG` -> (name, Some(ARG)).
fn split_arg(head: &str) -> (&str, Option<&str>) {
    if let Some(i) = head.find('[') {
        let arg = head[i + 1..].strip_suffix(']').unwrap_or(&head[i + 1..]);
        (&head[..i], Some(arg))
    } else if let Some(i) = head.find('@') {
        (&head[..i], Some(&head[i + 1..]))
    } else {
        (head, None)
    }
}

struct Img<'d> {
    nilfs: Nilfs<'d>,
    bs: u64,
}

impl Img<'_> {
    fn at(&self, pbn: u64, off: usize, (fo, w): (usize, usize)) -> Site {
        Site {
            byte: pbn * self.bs + (off + fo) as u64,
            width: w,
            bit: 0,
            super_block: None,
        }
    }

    /// The view of checkpoint `cno` (the latest if `None`).
    fn view(&self, cno: Option<u64>) -> R<CheckpointView<'_, '_>> {
        CheckpointView::open(&self.nilfs, cno.map(Cno)).map_err(s)
    }

    /// A file spec `PATH`, `#INO`, with optional `@CNO`: its inode.
    fn file(&self, spec: &str) -> R<(Ino, Inode, Option<u64>)> {
        let (spec, cno) = match spec.rsplit_once('@') {
            Some((a, c)) => (a, Some(parse_num(c)?)),
            None => (spec, None),
        };
        let view = self.view(cno)?;
        let (i, inode) = if let Some(n) = spec.strip_prefix('#') {
            let i = Ino(parse_num(n)?);
            let cp = view.checkpoint().clone();
            let inode = self
                .nilfs
                .ifile_inode(&cp.ifile_inode, i)
                .map_err(s)?
                .ok_or("inode in a hole")?;
            (i, inode)
        } else {
            view.resolve(spec.as_bytes(), false).map_err(s)?
        };
        Ok((i, inode, cno))
    }

    /// A metadata file or user file by name: (its bmap root, physical?).
    fn mapping(&self, name: &str) -> R<(Inode, bool)> {
        Ok(match name {
            "dat" => (self.nilfs.super_root.dat.clone(), true),
            "cpfile" => (self.nilfs.super_root.cpfile.clone(), false),
            "sufile" => (self.nilfs.super_root.sufile.clone(), false),
            "ifile" => (self.view(None)?.checkpoint().ifile_inode.clone(), false),
            spec => (self.file(spec)?.1, false),
        })
    }

    fn to_pbn(&self, ptr: u64, physical: bool) -> R<u64> {
        if physical {
            Ok(ptr)
        } else {
            Ok(self.nilfs.dat_translate(VBlockNr(ptr)).map_err(s)?.0)
        }
    }

    /// The pointer stored for block `k` of a mapping, and its disk block.
    fn block_of(&self, inode: &Inode, physical: bool, k: u64) -> R<(u64, u64)> {
        let mut src = Src {
            img: self,
            physical,
        };
        let ptr = bmap::lookup(&inode.bmap, k, &mut src)
            .map_err(s)?
            .ok_or_else(|| format!("block {k} is a hole"))?;
        Ok((ptr, self.to_pbn(ptr, physical)?))
    }

    /// Disk block of block `k` of a metadata file.
    fn mdt_pbn(&self, name: &str, k: u64) -> R<u64> {
        let (inode, physical) = self.mapping(name)?;
        Ok(self.block_of(&inode, physical, k)?.1)
    }

    /// The N-th node block at `level` of a mapping (breadth first, left to
    /// right): its disk block.
    fn node(&self, inode: &Inode, physical: bool, level: u8, n: usize) -> R<u64> {
        let root = BtreeNode::decode_root(&inode.bmap).map_err(s)?;
        let mut layer = vec![root];
        loop {
            let cur = layer[0].level;
            if cur <= level {
                return Err(format!("no level {level} below the root's {cur}"));
            }
            let mut next = Vec::new();
            let mut pbns = Vec::new();
            for node in &layer {
                for &p in node.valid_ptrs() {
                    let pbn = self.to_pbn(p, physical)?;
                    let data = self.nilfs.read_block(BlockNr(pbn)).map_err(s)?;
                    next.push(BtreeNode::decode_block(&data, self.bs as u32).map_err(s)?);
                    pbns.push(pbn);
                }
            }
            if cur - 1 == level {
                return pbns
                    .get(n)
                    .copied()
                    .ok_or_else(|| format!("level {level} has {} nodes", pbns.len()));
            }
            layer = next;
        }
    }

    /// The byte offset of record `i` (finfo) or its `j`-th binfo in the
    /// summary of the log at `pseg`, by the packing rule.
    fn record(&self, pseg: u64, i: usize, j: Option<usize>) -> R<(usize, bool)> {
        let bs = self.bs as usize;
        let h =
            SegmentSummary::decode(&self.nilfs.read_block(BlockNr(pseg)).map_err(s)?).map_err(s)?;
        let nsum = h.nsumblk(self.bs as u32) as u64;
        let mut sum = Vec::new();
        for b in 0..nsum {
            sum.extend(self.nilfs.read_block(BlockNr(pseg + b)).map_err(s)?);
        }
        let place = |off: usize, size: usize| {
            if off % bs + size > bs {
                off - off % bs + bs
            } else {
                off
            }
        };
        let mut off = usize::from(h.bytes);
        for fi in 0..h.nfinfo as usize {
            let at = place(off, Finfo::SIZE);
            let f = Finfo::decode(sum.get(at..).unwrap_or(&[])).map_err(s)?;
            off = at + Finfo::SIZE;
            if fi == i && j.is_none() {
                return Ok((at, f.is_dat()));
            }
            for k in 0..f.nblocks as usize {
                let size = segsum::Binfo::size_for(f.is_dat(), (k as u32) < f.ndatablk);
                let at = place(off, size);
                off = at + size;
                if fi == i && j == Some(k) {
                    return Ok((at, f.is_dat()));
                }
            }
        }
        Err(format!("no such record in the log at {pseg}"))
    }

    /// `sr`, `SEG:K` or `cur:K`: the first block of a log.
    fn log(&self, spec: &str) -> R<u64> {
        if let Some(pbn) = spec.strip_prefix('#') {
            return parse_num(pbn);
        }
        if spec == "sr" {
            return Ok(self.nilfs.scan.sr_pseg.0);
        }
        if spec == "rf" {
            let v = &self.nilfs.scan.visits;
            let sr = v
                .iter()
                .rposition(|x| x.super_root_cno.is_some())
                .ok_or("no super root")?;
            return v[sr + 1..]
                .iter()
                .find(|x| x.verdict.is_ok())
                .map(|x| x.pseg.0)
                .ok_or_else(|| "no log after the latest super root".into());
        }
        let (seg, k) = spec.split_once(':').ok_or("log is sr or SEG:K")?;
        let seg = self.seg(seg)?;
        let k = parse_num(k)?;
        let (start, _) = self.nilfs.geo.range(SegNum(seg));
        let mut p = start.0;
        for _ in 0..k {
            let h = SegmentSummary::decode(&self.nilfs.read_block(BlockNr(p)).map_err(s)?)
                .map_err(s)?;
            p += u64::from(h.nblocks.max(1));
        }
        Ok(p)
    }

    fn seg(&self, spec: &str) -> R<u64> {
        Ok(match spec {
            "cur" => self.nilfs.scan.segnum.0,
            "next" => self.nilfs.scan.nextnum.0,
            n => parse_num(n)?,
        })
    }

    fn inode_field(&self, pbn: u64, off: usize, f: &str) -> R<Site> {
        Ok(self.at(pbn, off, field(INODE, f)?))
    }

    /// Inode `i` of the ifile `ifile`: its block and offset.
    fn inode_site(&self, ifile: &Inode, i: Ino) -> R<(u64, usize)> {
        let g = PallocGeometry {
            block_size: self.bs as u32,
            entry_size: u32::from(self.nilfs.sb.inode_size),
        };
        let blk = g.entry_blkoff(i.0).ok_or("inode number out of range")?;
        Ok((
            self.block_of(ifile, false, blk)?.1,
            g.entry_offset_in_block(i.0),
        ))
    }
}

struct Src<'a, 'd> {
    img: &'a Img<'d>,
    physical: bool,
}

impl NodeSource for Src<'_, '_> {
    fn node(&mut self, ptr: u64, _level: u8) -> crate::Result<BtreeNode> {
        let pbn = if self.physical {
            ptr
        } else {
            self.img.nilfs.dat_translate(VBlockNr(ptr))?.0
        };
        let data = self.img.nilfs.read_block(BlockNr(pbn))?;
        BtreeNode::decode_block(&data, self.img.bs as u32)
    }
}

/// Where `target` lives on `dev`.
pub fn locate(dev: &dyn BlockDevice, target: &str) -> R<Site> {
    let (head, fname) = split_target(target)?;
    let (name, arg) = split_arg(head);
    if name == "sb0" || name == "sb1" {
        let off = if name == "sb0" {
            SB_OFFSET_BYTES
        } else {
            superblock::sb2_offset_bytes(dev.size_bytes()).ok_or("no secondary copy")?
        };
        let (fo, w) = field(SB, fname)?;
        return Ok(Site {
            byte: off + fo as u64,
            width: w,
            bit: 0,
            super_block: Some(off),
        });
    }
    let nilfs = Nilfs::open(dev).map_err(s)?;
    let bs = u64::from(nilfs.block_size());
    let img = Img { nilfs, bs };
    let given = arg;
    let arg = || arg.ok_or_else(|| format!("{name} needs an argument"));
    match name {
        "ss" => Ok(img.at(img.log(arg()?)?, 0, field(SS, fname)?)),
        "finfo" | "binfo" => {
            let a = arg()?;
            let parts: Vec<&str> = a
                .rsplitn(if name == "finfo" { 2 } else { 3 }, ':')
                .collect();
            let (log, i, j) = if name == "finfo" {
                (parts[1], parse_num(parts[0])? as usize, None)
            } else {
                let log = parts.get(2).ok_or("binfo@LOG:I:J")?;
                (
                    *log,
                    parse_num(parts[1])? as usize,
                    Some(parse_num(parts[0])? as usize),
                )
            };
            let pseg = img.log(log)?;
            let (at, dat) = img.record(pseg, i, j)?;
            let f = if j.is_none() {
                field(FINFO, fname)?
            } else {
                let t = if dat {
                    BinfoDat::FIELDS
                } else {
                    BinfoV::FIELDS
                };
                field(t, fname).map_err(|_| format!("no binfo field {fname}"))?
            };
            Ok(img.at(pseg + (at / bs as usize) as u64, at % bs as usize, f))
        }
        "sr" => {
            let pbn = match given {
                None => img.nilfs.scan.super_root.0,
                // `sr@LOG`: the super root of another log (an older one).
                Some(log) => {
                    let p = img.log(log)?;
                    let h = SegmentSummary::decode(&img.nilfs.read_block(BlockNr(p)).map_err(s)?)
                        .map_err(s)?;
                    if !h.has_super_root() {
                        return Err(format!("the log at {p} has no super root"));
                    }
                    p + u64::from(h.nblocks) - 1
                }
            };
            if let Some((k, f)) = fname.split_once('.') {
                let idx = ["dat", "cpfile", "sufile"]
                    .iter()
                    .position(|n| *n == k)
                    .ok_or("sr.dat, sr.cpfile or sr.sufile")?;
                return img.inode_field(
                    pbn,
                    super_root::inode_offset(img.nilfs.sb.inode_size, idx),
                    f,
                );
            }
            Ok(img.at(pbn, 0, field(SR, fname)?))
        }
        "inode" => {
            let (i, _, cno) = img.file(arg()?)?;
            let cp = img.view(cno)?.checkpoint().clone();
            let (pbn, off) = img.inode_site(&cp.ifile_inode, i)?;
            img.inode_field(pbn, off, fname)
        }
        "node" => {
            let a = arg()?;
            let mut it = a.rsplitn(3, ':');
            let n = parse_num(it.next().ok_or("node[FILE:LEVEL:N]")?)? as usize;
            let level = parse_num(it.next().ok_or("node[FILE:LEVEL:N]")?)? as u8;
            let file = it.next().ok_or("node[FILE:LEVEL:N]")?;
            let (inode, physical) = img.mapping(file)?;
            let pbn = img.node(&inode, physical, level, n)?;
            let ncmax = node_ncmax(bs as u32);
            let f = match fname {
                k if k.starts_with("key[") || k.starts_with("ptr[") => {
                    let i = parse_num(&k[4..k.len() - 1])? as usize;
                    let base = if k.starts_with("key") {
                        BLOCK_KEYS_OFFSET
                    } else {
                        block_ptrs_offset(ncmax)
                    };
                    (base + 8 * i, 8)
                }
                _ => {
                    field(BtreeNode::FIELDS, fname).map_err(|_| format!("no node field {fname}"))?
                }
            };
            Ok(img.at(pbn, 0, f))
        }
        "dat" => {
            let a = arg()?;
            let v = if let Some(v) = a.strip_prefix('#') {
                parse_num(v)?
            } else {
                let (file, k) = a.rsplit_once(':').ok_or("dat[FILE:K]")?;
                let (inode, physical) = img.mapping(file)?;
                if physical {
                    return Err("the DAT's blocks have no DAT entry".into());
                }
                img.block_of(&inode, false, parse_num(k)?)?.0
            };
            let g = PallocGeometry {
                block_size: bs as u32,
                entry_size: u32::from(img.nilfs.sb.dat_entry_size),
            };
            let blk = g.entry_blkoff(v).ok_or("vblocknr out of range")?;
            Ok(img.at(
                img.mdt_pbn("dat", blk)?,
                g.entry_offset_in_block(v),
                field(DAT, fname)?,
            ))
        }
        "datdesc" | "ifiledesc" | "datbitmap" | "ifilebitmap" => {
            let (file, esz) = if name.starts_with("dat") {
                ("dat", img.nilfs.sb.dat_entry_size)
            } else {
                ("ifile", img.nilfs.sb.inode_size)
            };
            let g = PallocGeometry {
                block_size: bs as u32,
                entry_size: u32::from(esz),
            };
            let a = arg()?;
            let n = match a.rsplit_once(':') {
                Some((file, k)) => {
                    let (inode, _) = img.mapping(file)?;
                    img.block_of(&inode, false, parse_num(k)?)?.0
                }
                None => parse_num(a)?,
            };
            if name.ends_with("desc") {
                let blk = g.desc_blkoff(n).ok_or("group out of range")?;
                let off = 4 * (n % g.groups_per_desc_block()) as usize;
                if fname != "pg_nfrees" {
                    return Err("field pg_nfrees".into());
                }
                return Ok(img.at(img.mdt_pbn(file, blk)?, off, (0, 4)));
            }
            let (group, bit) = g.group(n);
            let blk = g.bitmap_blkoff(group).ok_or("out of range")?;
            if fname != "bit" {
                return Err("field bit".into());
            }
            let mut site = img.at(img.mdt_pbn(file, blk)?, (bit / 8) as usize, (0, 0));
            site.bit = (bit % 8) as u8;
            Ok(site)
        }
        "dirent" => {
            let a = arg()?;
            let (dir, ename) = a.rsplit_once('/').ok_or("dirent[DIR/NAME]")?;
            let dir = if dir.is_empty() { "/" } else { dir };
            let (_, inode, _) = img.file(dir)?;
            let view = img.view(None)?;
            for (k, pbn) in view.block_map(&inode).map_err(s)? {
                let data = img.nilfs.read_block(pbn).map_err(s)?;
                let mut off = 0usize;
                while off + NAME_OFFSET <= data.len() {
                    let rec = usize::from(DirEntry::rec_len.at(off).u16(&data));
                    let nl = usize::from(DirEntry::name_len.at(off).u8(&data));
                    let name = off + NAME_OFFSET;
                    if data.get(name..name + nl) == Some(ename.as_bytes()) {
                        let f = match fname
                            .strip_prefix("name[")
                            .and_then(|x| x.strip_suffix(']'))
                        {
                            Some(i) => (NAME_OFFSET + parse_num(i)? as usize, 1),
                            None => field(DIRENT, fname)?,
                        };
                        return Ok(img.at(pbn.0, off, f));
                    }
                    if rec == 0 {
                        break;
                    }
                    off += rec;
                }
                let _ = k;
            }
            Err(format!("no entry {ename} in {dir}"))
        }
        "cphdr" => Ok(img.at(img.mdt_pbn("cpfile", 0)?, 0, field(CPHDR, fname)?)),
        "cp" => {
            let cno = parse_num(arg()?)?;
            let g = CpfileGeometry {
                block_size: bs as u32,
                entry_size: img.nilfs.sb.checkpoint_size,
            };
            let (blk, off) = g.locate(cno).ok_or("checkpoint 0")?;
            let pbn = img.mdt_pbn("cpfile", blk.0)?;
            if let Some(f) = fname.strip_prefix("ifile.") {
                return img.inode_field(pbn, off + Checkpoint::cp_ifile_inode.offset, f);
            }
            Ok(img.at(pbn, off, field(CP, fname)?))
        }
        "suhdr" => Ok(img.at(img.mdt_pbn("sufile", 0)?, 0, field(SUHDR, fname)?)),
        "su" => {
            let seg = img.seg(arg()?)?;
            let g = SufileGeometry {
                block_size: bs as u32,
                entry_size: img.nilfs.sb.segment_usage_size,
            };
            let (blk, off) = g.locate(seg);
            Ok(img.at(img.mdt_pbn("sufile", blk.0)?, off, field(SU, fname)?))
        }
        "block" => {
            let (file, k) = arg()?.rsplit_once(':').ok_or("block[FILE:K]")?;
            let (inode, physical) = img.mapping(file)?;
            let pbn = img.block_of(&inode, physical, parse_num(k)?)?.1;
            let off = fname
                .strip_prefix("byte[")
                .and_then(|x| x.strip_suffix(']'))
                .ok_or("field byte[OFF]")?;
            Ok(img.at(pbn, parse_num(off)? as usize, (0, 1)))
        }
        other => Err(format!("unknown structure {other}")),
    }
}
