//! `nilref mkfs`: a fresh file system in an image file, exactly as
//! mkfs.nilfs2 writes it (`nilfs::mkfs`), with its sizes, UUIDs and
//! features parsed as the tool parses them.

use nilfs::inspect::nilfs_utils::tune::NilfsUtils;
use std::path::PathBuf;

use nilfs::device::FileDevice;
use nilfs::mkfs::{self, MkfsOptions};

/// Arguments of `nilref mkfs`.
#[derive(clap::Args)]
pub struct MkfsArgs {
    /// Image file (created if --size is given).
    pub image: PathBuf,
    /// Image size (bytes, or with K/M/G/T suffix); default: the existing file's size.
    #[arg(long)]
    pub size: Option<String>,
    /// Block size in bytes.
    #[arg(short = 'b', default_value_t = 4096)]
    pub block_size: u64,
    /// Blocks per segment.
    #[arg(short = 'B', default_value_t = 2048)]
    pub blocks_per_segment: u64,
    /// Volume label.
    #[arg(short = 'L', default_value = "")]
    pub label: String,
    /// Reserved segments percentage.
    #[arg(short = 'm', default_value_t = 5)]
    pub reserved_percentage: u64,
    /// Seed for the CRC seed and UUID (mkfs.nilfs2 draws them at random).
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Creation time, seconds since the epoch (mkfs.nilfs2 -P).
    #[arg(long)]
    pub ctime: Option<u64>,
    /// Explicit CRC seed (overrides --seed).
    #[arg(long, value_parser = parse_u32)]
    pub crc_seed: Option<u32>,
    /// Explicit UUID, 8-4-4-4-12 hex (overrides --seed).
    #[arg(long)]
    pub uuid: Option<String>,
    /// Do not create the .nilfs file (the nilfs-utils 2.2.10 and later
    /// layout).
    #[arg(long)]
    pub no_dot_nilfs: bool,
    /// Write what this nilfs-utils version's mkfs.nilfs2 writes: 2.2.9
    /// (the default) or 2.2.11 (no .nilfs file).
    #[arg(long, value_parser = crate::listings::parse_nilfs_utils)]
    pub like: Option<NilfsUtils>,
    /// Features: `block_count` or `^block_count` (comma-separated).
    #[arg(short = 'O')]
    pub features: Option<String>,
}

/// `nilref mkfs`.
pub fn run(a: MkfsArgs) -> Result<String, String> {
    let e = |e: nilfs::Error| e.to_string();
    let MkfsArgs {
        image,
        size,
        block_size,
        blocks_per_segment,
        label,
        reserved_percentage,
        seed,
        ctime,
        crc_seed,
        uuid,
        no_dot_nilfs,
        like,
        features,
    } = a;
    let mut o = MkfsOptions::from_seed(seed);
    o.block_size = block_size;
    o.blocks_per_segment = blocks_per_segment;
    o.reserved_percentage = reserved_percentage;
    o.label = label.into_bytes();
    o.dot_nilfs = !no_dot_nilfs && like.unwrap_or_default().makes_dot_nilfs();
    if let Some(t) = ctime {
        o.ctime = t;
    }
    if let Some(s) = crc_seed {
        o.crc_seed = s;
    }
    if let Some(u) = uuid {
        o.uuid = parse_uuid(&u)?;
    }
    for f in features.iter().flat_map(|f| f.split(',')) {
        match f {
            "block_count" => o.feature_compat_ro |= mkfs::FEATURE_COMPAT_RO_BLOCK_COUNT,
            "^block_count" => o.feature_compat_ro &= !mkfs::FEATURE_COMPAT_RO_BLOCK_COUNT,
            other => return Err(format!("Error: invalid feature set option: {other}")),
        }
    }
    // Refuse a bad geometry before touching the file.
    mkfs::check_options(&o).map_err(|m| m.to_string())?;
    if let Some(size) = size {
        let size = parse_size(&size)?;
        let f = std::fs::OpenOptions::new()
            .create(true)
            .truncate(true)
            .write(true)
            .open(&image)
            .map_err(|err| format!("{}: {err}", image.display()))?;
        f.set_len(size)
            .map_err(|err| format!("{}: {err}", image.display()))?;
    }
    let dev = FileDevice::open_read_write(&image).map_err(e)?;
    let l = mkfs::mkfs(&dev, &o).map_err(e)?;
    Ok(format!(
        "{}: NILFS2, block size {}, {} blocks per segment, {} segments\n",
        image.display(),
        l.block_size,
        l.blocks_per_segment,
        l.nsegments
    ))
}

fn parse_u32(s: &str) -> Result<u32, String> {
    let r = match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(h) => u32::from_str_radix(h, 16),
        None => s.parse(),
    };
    r.map_err(|e| e.to_string())
}

/// Parse "134217728", "128M", "128MiB", "1G": binary multiples, as truncate(1) does.
fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim().trim_end_matches("iB").trim_end_matches('B');
    let (num, mult) = match t.chars().last() {
        Some(c @ ('K' | 'k' | 'M' | 'm' | 'G' | 'g' | 'T' | 't')) => {
            let shift = match c.to_ascii_uppercase() {
                'K' => 10,
                'M' => 20,
                'G' => 30,
                _ => 40,
            };
            (&t[..t.len() - 1], 1u64 << shift)
        }
        _ => (t, 1),
    };
    let n: u64 = num.parse().map_err(|_| format!("invalid size: {s}"))?;
    n.checked_mul(mult)
        .ok_or_else(|| format!("size too large: {s}"))
}

fn parse_uuid(s: &str) -> Result<[u8; 16], String> {
    let hex: String = s.chars().filter(|c| *c != '-').collect();
    if hex.len() != 32 {
        return Err(format!("invalid uuid: {s}"));
    }
    let mut u = [0u8; 16];
    for (i, b) in u.iter_mut().enumerate() {
        *b = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16)
            .map_err(|_| format!("invalid uuid: {s}"))?;
    }
    Ok(u)
}
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_like_truncate() {
        assert_eq!(parse_size("128M"), Ok(128 << 20));
        assert_eq!(parse_size("128MiB"), Ok(128 << 20));
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size("1G"), Ok(1 << 30));
        assert!(parse_size("12Q").is_err());
        assert!(parse_size("99999999999T").is_err());
    }

    #[test]
    fn uuid_parses() {
        let u = parse_uuid("01234567-89ab-cdef-0123-456789abcdef").unwrap();
        assert_eq!(u[0], 0x01);
        assert_eq!(u[15], 0xef);
        assert!(parse_uuid("0123").is_err());
    }
}
