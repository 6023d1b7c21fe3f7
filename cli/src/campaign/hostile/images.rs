//! The hostile images: valid base images (our write path's, the kernel's),
//! the catalog of every field of every on-disk structure found on each,
//! and the seeded damage that turns a seed into one corrupted image with
//! its checksums resealed (`nilfs::corrupt`).

use std::path::Path;

use nilfs::corrupt::{self, Field, Op, Reseal};
use nilfs::device::{BlockDevice, MemDevice};
use nilfs::format::segsum::SegmentSummary;
use nilfs::format::{BlockNr, Cno};
use nilfs::posix::CheckpointView;
use nilfs::rng::SplitMix64;
use nilfs::the_nilfs::Nilfs;

/// The mount time of our bases' writers.
const T0: u64 = 1_800_000_000;

/// A valid image and the fields located on it.
pub struct Base {
    pub name: String,
    pub dev: MemDevice,
    pub targets: Vec<Target>,
    /// check's warnings on the undamaged base (a damaged image's count as
    /// the damage's only when the base has not got them).
    pub warnings: Vec<String>,
}

/// One field of one structure of a base.
#[derive(Clone)]
pub struct Target {
    /// The recipe's `STRUCT.FIELD` (`inode[/d].i_size`).
    pub name: String,
    pub field: Field,
    /// The structure class the figures count by (`sb`, `ss`, `inode`, ...).
    pub class: &'static str,
    /// In the live log or the latest checkpoint's structures (false: an
    /// older log's summary, an older checkpoint's inodes and entries).
    pub live: bool,
}

/// One field set to one value (`TARGET = VALUE`, as a recipe writes it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Damage {
    pub target: String,
    pub value: u64,
}

/// One hostile image: where it came from and what was changed.
pub struct Case {
    /// `seed N` or the image file's name.
    pub label: String,
    /// The base's name (`file` for an image given with `--images`).
    pub base: String,
    pub damages: Vec<Damage>,
    pub dev: MemDevice,
    /// The figures' class: the damaged structure's (several fields: `multi`;
    /// a given image: `file`).
    pub class: String,
    /// One field of a live structure.
    pub live_one_field: bool,
}

impl Case {
    /// The case's recipe file: its base, then one `TARGET = VALUE` a line
    /// (`--replay` rebuilds the image from it).
    pub fn recipe(&self) -> String {
        let mut s = format!("base {}\n", self.base);
        for d in &self.damages {
            s.push_str(&format!("{} = {:#x}\n", d.target, d.value));
        }
        s
    }
}

/// The names of our write path's bases.
pub const OURS: [&str; 3] = ["ours", "ours-rf", "ours-4k"];

/// Base `name` made by our write path: `ours` (a tree with B-trees, a
/// snapshot, then changes: old logs and an old checkpoint), `ours-rf`
/// (data-only logs after the latest super root), `ours-4k` (4 KiB blocks).
pub fn ours(name: &str) -> Result<MemDevice, String> {
    use nilfs::fs::Fs;
    use nilfs::mkfs::{mkfs, MkfsOptions};
    let e = |e: nilfs::Error| e.to_string();
    let (size, bs, bps) = match name {
        "ours" | "ours-rf" => (8u64 << 20, 1024, 64),
        "ours-4k" => (16 << 20, 4096, 32),
        other => return Err(format!("no base {other}")),
    };
    let dev = MemDevice::new(size);
    mkfs(
        &dev,
        &MkfsOptions {
            block_size: bs,
            blocks_per_segment: bps,
            ..Default::default()
        },
    )
    .map_err(e)?;
    let root = nilfs::format::ino::ROOT;
    {
        let nilfs = Nilfs::open(&dev).map_err(e)?;
        let mut fs = Fs::mount(&nilfs, T0).map_err(e)?;
        let small = fs.create(root, b"small", 0o644).map_err(e)?;
        fs.write(small, 0, b"hello, nilfs\n").map_err(e)?;
        if name == "ours-rf" {
            fs.sync().map_err(e)?;
            fs.write(small, 0, b"HELLO").map_err(e)?;
            fs.fdatasync(small).map_err(e)?;
            let f = fs.create(root, b"f", 0o644).map_err(e)?;
            fs.write(f, 0, &[0x5a; 9000]).map_err(e)?;
            fs.fdatasync(f).map_err(e)?;
            // A crash: dropped without unmounting.
            drop(fs);
            drop(nilfs);
            return Ok(dev);
        }
        let big = fs.create(root, b"big", 0o644).map_err(e)?;
        let data: Vec<u8> = (0..150 * bs as u32).map(|i| (i * 7 % 251) as u8).collect();
        fs.write(big, 0, &data).map_err(e)?;
        let d = fs.mkdir(root, b"d", 0o755).map_err(e)?;
        let sub = fs.mkdir(d, b"sub", 0o755).map_err(e)?;
        for n in 0..24 {
            let f = fs
                .create(d, format!("file-{n:02}").as_bytes(), 0o644)
                .map_err(e)?;
            fs.write(f, 0, format!("entry {n}\n").as_bytes())
                .map_err(e)?;
        }
        let leaf = fs.create(sub, b"leaf", 0o600).map_err(e)?;
        fs.write(leaf, 0, b"leaf\n").map_err(e)?;
        fs.link(small, d, b"hard").map_err(e)?;
        fs.symlink(root, b"link", b"small").map_err(e)?;
        fs.sync().map_err(e)?;
        fs.mkcp(true).map_err(e)?;
        fs.set_time(T0 + 100);
        fs.write(big, 40 * bs, b"OVERWRITE").map_err(e)?;
        fs.unlink(d, b"file-07").map_err(e)?;
        fs.write(small, 13, b"more\n").map_err(e)?;
        fs.unmount().map_err(e)?;
    }
    Ok(dev)
}

/// The guest commands that make the kernel's bases, `kernel` (1 KiB
/// blocks) on /dev/vda and `kernel-4k` on /dev/vdb: the same tree as
/// [`ours`]' `ours`, made by mkfs.nilfs2 and Linux.
pub const KERNEL_BASES: [(&str, u64); 2] = [("kernel", 8 << 20), ("kernel-4k", 16 << 20)];

/// The script of the boot that makes [`KERNEL_BASES`].
pub fn kernel_bases_script() -> String {
    let mut s = String::from("set -e\n");
    for (i, (dev, opts, bs)) in [
        ("vda", "-b 1024 -B 64", 1024),
        ("vdb", "-b 4096 -B 32", 4096),
    ]
    .into_iter()
    .enumerate()
    {
        s.push_str(&format!(
            r#"mkfs.nilfs2 -q -f {opts} -L base{i} /dev/{dev}
mount -t nilfs2 /dev/{dev} /mnt
printf 'hello, nilfs\n' > /mnt/small
yes 0123456789abcdef | head -c {big} > /mnt/big
mkdir -p /mnt/d/sub
for n in $(seq -w 0 23); do echo "entry $n" > /mnt/d/file-$n; done
echo leaf > /mnt/d/sub/leaf
ln /mnt/small /mnt/d/hard
ln -s small /mnt/link
sync
mkcp -s /dev/{dev}
echo more >> /mnt/small
dd if=/dev/zero of=/mnt/big bs=1 seek={seek} count=9 conv=notrunc 2>/dev/null
rm /mnt/d/file-07
umount /mnt
"#,
            big = 150 * bs,
            seek = 40 * bs,
        ));
    }
    s
}

/// Every field the campaign damages on `dev`: every field of the super
/// block copies, of every log's summary header, file and block records,
/// of the super root and its three inodes, of every inode and directory
/// entry of the latest checkpoint and of the older ones, of the B-tree
/// nodes, DAT entries, group descriptors and bitmaps, of the checkpoint
/// file and of the segment usage file; each located once, on the base.
pub fn catalog(dev: &MemDevice) -> Result<Vec<Target>, String> {
    let nilfs = Nilfs::open(dev).map_err(|e| e.to_string())?;
    let mut want: Want = Vec::new();
    add(&mut want, "sb0", "sb", "sb", true);
    add(&mut want, "sb1", "sb", "sb", true);
    // Logs: those up to and after the latest super root.
    let sr_pseg = nilfs.scan.sr_pseg.0;
    let logs = corrupt::log_ranges(dev)?;
    let bs = u64::from(nilfs.block_size());
    for &(p, _) in &logs {
        let live = p >= sr_pseg;
        add(&mut want, &format!("ss@#{p}"), "ss", "ss", live);
        let Ok(h) = SegmentSummary::decode(&nilfs.read_block(BlockNr(p)).map_err(s)?) else {
            continue;
        };
        for i in 0..u64::from(h.nfinfo) {
            add(
                &mut want,
                &format!("finfo@#{p}:{i}"),
                "finfo",
                "finfo",
                live,
            );
            for j in [0, 1] {
                add(
                    &mut want,
                    &format!("binfo@#{p}:{i}:{j}"),
                    "binfo",
                    "binfo",
                    live,
                );
                add(
                    &mut want,
                    &format!("binfo@#{p}:{i}:{j}"),
                    "binfo-dat",
                    "binfo",
                    live,
                );
            }
        }
    }
    let _ = bs;
    add(&mut want, "sr", "sr", "sr", true);
    for m in ["dat", "cpfile", "sufile"] {
        add(&mut want, &format!("sr.{m}"), "inode", "sr-inode", true);
    }
    // Checkpoints: the latest, and every older one still in the cpfile.
    let latest = nilfs.scan.cno.0;
    let mut cnos = Vec::new();
    if let Ok(cps) = nilfs.checkpoints(Cno(1)) {
        cnos.extend(cps.iter().map(|c| c.cno.0));
    }
    for &cno in &cnos {
        let live = cno >= latest;
        add(&mut want, &format!("cp[{cno}]"), "cp", "cp", live);
        add(&mut want, &format!("cp[{cno}].ifile"), "inode", "cp", live);
    }
    add(&mut want, "cphdr", "cphdr", "cp", true);
    add(&mut want, "suhdr", "suhdr", "su", true);
    for seg in 0..nilfs.sb.nsegments.min(64) {
        add(&mut want, &format!("su[{seg}]"), "su", "su", true);
    }
    for (g, f) in [("datdesc[0]", "pg_nfrees"), ("ifiledesc[0]", "pg_nfrees")] {
        want.push((format!("{g}.{f}"), "palloc", true));
    }
    for v in [0u64, 1, 3, 7, 20, 60] {
        want.push((format!("datbitmap[{v}].bit"), "palloc", true));
    }
    for m in ["dat", "ifile", "cpfile", "sufile"] {
        for (l, n) in [(1, 0), (1, 1), (2, 0)] {
            add(
                &mut want,
                &format!("node[{m}:{l}:{n}]"),
                "node",
                "node",
                true,
            );
        }
    }
    // The trees: the latest checkpoint (live) and the others.
    for cno in std::iter::once(None).chain(cnos.iter().copied().filter(|&c| c < latest).map(Some)) {
        let Ok(view) = CheckpointView::open(&nilfs, cno.map(Cno)) else {
            continue;
        };
        let live = cno.is_none();
        let at = cno.map(|c| format!("@{c}")).unwrap_or_default();
        let mut paths: Vec<(String, u64, bool, bool)> = vec![("/".into(), 2, true, false)];
        let _ = view.walk_tree(&mut |path, ino, inode| {
            paths.push((
                String::from_utf8_lossy(path).into_owned(),
                ino.0,
                inode.file_type() == nilfs::format::inode::S_IFDIR,
                inode.bmap[0] as u8 & nilfs::format::bmap::BMAP_LARGE != 0,
            ));
            Ok(())
        });
        for (path, ino, dir, btree) in paths {
            add(
                &mut want,
                &format!("inode[{path}{at}]"),
                "inode",
                "inode",
                live,
            );
            if !live {
                continue;
            }
            want.push((format!("ifilebitmap[{ino}].bit"), "palloc", true));
            if path != "/" {
                add(
                    &mut want,
                    &format!("dirent[{path}]"),
                    "dirent",
                    "dirent",
                    true,
                );
                for k in [0, 1, 2] {
                    want.push((format!("dirent[{path}].name[{k}]"), "dirent", true));
                }
            }
            if dir {
                let d = if path == "/" {
                    String::new()
                } else {
                    path.clone()
                };
                add(
                    &mut want,
                    &format!("dirent[{d}/.]"),
                    "dirent",
                    "dirent",
                    true,
                );
                add(
                    &mut want,
                    &format!("dirent[{d}/..]"),
                    "dirent",
                    "dirent",
                    true,
                );
            }
            if btree {
                for (l, n) in [(1, 0), (1, 1), (1, 2)] {
                    add(
                        &mut want,
                        &format!("node[{path}:{l}:{n}]"),
                        "node",
                        "node",
                        true,
                    );
                }
            }
            for k in [0, 1, 40] {
                add(&mut want, &format!("dat[{path}:{k}]"), "dat", "dat", true);
            }
        }
    }
    // Located once on the base; what does not exist there is left out.
    let mut out = Vec::new();
    let mut seen = std::collections::BTreeSet::new();
    for (name, class, live) in want {
        if !seen.insert(name.clone()) {
            continue;
        }
        if let Ok(field) = corrupt::prepare(dev, &name) {
            out.push(Target {
                name,
                field,
                class,
                live,
            });
        }
    }
    Ok(out)
}

type Want = Vec<(String, &'static str, bool)>;

/// Every field of `structure` at `prefix`.
fn add(want: &mut Want, prefix: &str, structure: &str, class: &'static str, live: bool) {
    // A checkpoint's ifile inode is reached field by field (`cp[N].ifile`).
    for f in corrupt::field_names(structure)
        .into_iter()
        .filter(|f| !f.starts_with("cp_ifile_inode"))
    {
        want.push((format!("{prefix}.{f}"), class, live));
    }
}

fn s<E: std::fmt::Display>(e: E) -> String {
    e.to_string()
}

/// Values worth trying on any field.
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

/// The new value of a field holding `old` (width bytes, 0 for a bit).
fn pick_value(rng: &mut SplitMix64, old: u64, width: usize) -> u64 {
    let bits = if width == 0 { 1 } else { 8 * width as u32 };
    let mask = if bits >= 64 {
        u64::MAX
    } else {
        (1 << bits) - 1
    };
    let r = rng.next_u64();
    let v = match rng.next_u64() % 9 {
        0 => 0,
        1 | 2 => old ^ (1 << (r % u64::from(bits))),
        3 => old.wrapping_add(1),
        4 => old.wrapping_sub(1),
        5 => u64::MAX,
        6 => r,
        7 => r % 4096,
        _ => SPECIAL[(r % 8) as usize],
    } & mask;
    if v == old {
        (old ^ 1) & mask
    } else {
        v
    }
}

/// Apply `damages` to a copy of `base` (each field located on the base,
/// then set; every checksum resealed).
pub fn damaged(base: &Base, damages: &[Damage]) -> Result<MemDevice, String> {
    let dev = base.dev.duplicate();
    // A checksum field is the damage itself: set last, and not resealed
    // (resealing would write the right sum back).
    let is_sum = |d: &&Damage| {
        ["s_sum", "ss_datasum", "ss_sumsum", "sr_sum"]
            .iter()
            .any(|f| d.target.ends_with(&format!(".{f}")))
    };
    // Resealing a log reads the super block: logs first, then the super
    // blocks, then the checksums.
    let rank = |d: &&Damage| {
        if is_sum(d) {
            2
        } else if d.target.starts_with("sb") {
            1
        } else {
            0
        }
    };
    let mut order: Vec<&Damage> = damages.iter().collect();
    order.sort_by_key(rank);
    for d in order {
        let t = base
            .targets
            .iter()
            .find(|t| t.name == d.target)
            .ok_or_else(|| format!("base {} has no field {}", base.name, d.target))?;
        let reseal = if is_sum(&d) {
            Reseal::None
        } else {
            Reseal::All
        };
        // A reseal the earlier damage made impossible (a super block that
        // no longer decodes): the damage stays, unsealed.
        if corrupt::apply_at(&dev, &t.field, Op::Set, d.value, reseal).is_err() {
            corrupt::apply_at(&dev, &t.field, Op::Set, d.value, Reseal::None)?;
        }
    }
    Ok(dev)
}

/// The hostile image of `seed`: a base (the seed's turn), then one field
/// (three seeds in four, walking each base's catalog in a seeded order so
/// that every field comes up) or two to four fields at once, each set to
/// a seeded value.
pub fn case(bases: &[Base], seed: u64) -> Result<Case, String> {
    let base = &bases[(seed % bases.len() as u64) as usize];
    let n = base.targets.len() as u64;
    if n == 0 {
        return Err(format!("base {} has no fields", base.name));
    }
    let mut rng = SplitMix64::new(seed ^ 0x6e69_6c66_7334);
    let round = seed / bases.len() as u64;
    let several = round % 4 == 3;
    let picks: Vec<&Target> = if several {
        let k = 2 + rng.next_u64() % 3;
        (0..k)
            .map(|_| &base.targets[(rng.next_u64() % n) as usize])
            .collect()
    } else {
        // A fixed permutation of the catalog: a prime stride that does
        // not divide its size is coprime with it (else a step of 1).
        let stride = [7919u64, 104_729, 1_299_709]
            .into_iter()
            .find(|p| !n.is_multiple_of(*p))
            .unwrap_or(1);
        let k = round - round / 4;
        vec![&base.targets[((k * stride) % n) as usize]]
    };
    let mut damages = Vec::new();
    for t in &picks {
        let old = corrupt::read_site(&base.dev, &t.field.site)?;
        damages.push(Damage {
            target: t.name.clone(),
            value: pick_value(&mut rng, old, t.field.site.width),
        });
    }
    let dev = damaged(base, &damages)?;
    Ok(Case {
        label: format!("seed {seed}"),
        base: base.name.clone(),
        class: if several {
            "multi".into()
        } else {
            picks[0].class.to_string()
        },
        live_one_field: !several && picks[0].live,
        damages,
        dev,
    })
}

/// A case from a recipe file (`base NAME` then `TARGET = VALUE` lines).
pub fn from_recipe(bases: &[Base], text: &str, label: &str) -> Result<Case, String> {
    let mut base = None;
    let mut damages = Vec::new();
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
        if let Some(b) = line.strip_prefix("base ") {
            base = Some(b.trim().to_string());
            continue;
        }
        let r = corrupt::Recipe::parse(line)?;
        let value = match r.value {
            corrupt::Value::Num(v) if r.op == Op::Set => v,
            _ => return Err(format!("{label}: a hostile recipe sets a number: {line}")),
        };
        damages.push(Damage {
            target: r.target,
            value,
        });
    }
    let name = base.ok_or_else(|| format!("{label}: no `base NAME` line"))?;
    let b = bases
        .iter()
        .find(|b| b.name == name)
        .ok_or_else(|| format!("{label}: no base {name}"))?;
    let class = match damages.as_slice() {
        [one] => b
            .targets
            .iter()
            .find(|t| t.name == one.target)
            .map_or("?", |t| t.class)
            .to_string(),
        _ => "multi".into(),
    };
    Ok(Case {
        label: label.to_string(),
        base: name,
        dev: damaged(b, &damages)?,
        damages,
        class,
        live_one_field: false,
    })
}

/// An image file (raw, or `.xz`) as a case of class `file`.
pub fn from_file(path: &Path) -> Result<Case, String> {
    let dev = nilfs::device::import_image(path).map_err(|e| format!("{}: {e}", path.display()))?;
    if dev.size_bytes() > 1 << 30 {
        return Err(format!("{}: larger than 1 GiB", path.display()));
    }
    Ok(Case {
        label: path.display().to_string(),
        base: "file".into(),
        damages: Vec::new(),
        dev,
        class: "file".into(),
        live_one_field: false,
    })
}
