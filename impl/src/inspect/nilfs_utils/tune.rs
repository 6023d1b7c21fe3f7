//! `nilfs-tune -l` (nilfs-tools 2.2.9): which super block copy libnilfs
//! reads, and the listing.

use std::fmt::Write as _;

use super::time::format_ctime;
use crate::format::superblock::SuperBlock;
use crate::format::SUPER_MAGIC;
use crate::psegment::SegmentGeometry;

/// The super block as libnilfs reads it, decoded with the one super block
/// decoder ([`SuperBlock::decode`]) and no check at all: a short buffer
/// reads as if zero-filled to 1024 bytes. See [`tune_select_super_block`]
/// for the plausibility test nilfs-tune applies on top.
pub fn tune_decode_super_block(b: &[u8]) -> SuperBlock {
    let mut raw = b[..b.len().min(SuperBlock::SIZE)].to_vec();
    raw.resize(SuperBlock::SIZE, 0);
    SuperBlock::decode(&raw).expect("a 1024-byte buffer decodes")
}

/// The geometry dumpseg walks segments with, from the copy it reads (no
/// check: `1 << (s_log_block_size + 10)` wraps as libnilfs's does).
pub fn dumpseg_geometry(sb: &SuperBlock) -> SegmentGeometry {
    SegmentGeometry {
        block_size: 1u32.wrapping_shl(sb.log_block_size.wrapping_add(10)),
        blocks_per_segment: sb.blocks_per_segment,
        first_data_block: sb.first_data_block,
        crc_seed: sb.crc_seed,
    }
}

/// The copy libnilfs's `nilfs_sb_read()` returns (nilfs-tune, and the
/// geometry of dumpseg): the primary (bytes at offset 1024) if its magic is
/// 0x3434 and `s_bytes <= 1024`, **without** a CRC check; else the secondary
/// (at `sb2_offset` = `((devsize >> 12) - 1) << 12`) if it passes the same
/// test and `sb2_offset` is not inside the segment area
/// (`nsegments * bps * block_size <= sb2_offset`); else none.
pub fn tune_select_super_block(
    primary: Option<&[u8]>,
    secondary: Option<&[u8]>,
    sb2_offset: u64,
) -> Option<SuperBlock> {
    let plausible = |sb: &SuperBlock| sb.magic == SUPER_MAGIC && sb.bytes <= 1024;
    if let Some(sb) = primary.map(tune_decode_super_block).filter(plausible) {
        return Some(sb);
    }
    secondary
        .map(tune_decode_super_block)
        .filter(plausible)
        .filter(|sb| {
            let shift = sb.log_block_size.wrapping_add(10);
            let area = sb
                .nsegments
                .wrapping_mul(u64::from(sb.blocks_per_segment))
                .wrapping_shl(shift);
            sb2_offset >= area
        })
}

/// First line of every nilfs-tune 2.2.9 run (it prints it
/// unconditionally; 2.2.10 dropped it).
pub const NILFS_TUNE_VERSION_LINE: &str = "nilfs-tune 2.2.9\n";

/// The nilfs-utils releases whose printed output differs, as pinned in
/// tests/peers.toml. 2.2.10 changed nilfs-tune: no version banner, and
/// `s_bytes` (a 16-bit field) printed as `0x%04x` instead of `0x%08x`;
/// mkfs.nilfs2 stopped making /.nilfs. lscp, lssu and dumpseg print the
/// same in both.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum NilfsUtils {
    /// Debian 12's nilfs-tools.
    #[default]
    V2_2_9,
    /// Debian 13's nilfs-tools (and 2.2.10's behaviour).
    V2_2_11,
}

impl NilfsUtils {
    /// `2.2.9`, `2.2.11` (and `2.2.10`, which prints as 2.2.11 does).
    pub fn parse(s: &str) -> Option<NilfsUtils> {
        match s {
            "2.2.9" => Some(NilfsUtils::V2_2_9),
            "2.2.10" | "2.2.11" => Some(NilfsUtils::V2_2_11),
            _ => None,
        }
    }

    /// Whether its mkfs.nilfs2 makes the `.nilfs` file.
    pub fn makes_dot_nilfs(self) -> bool {
        self == NilfsUtils::V2_2_9
    }
}

/// Name of one feature bit, as `nilfs_feature2string()`: `block_count` for
/// compat_ro bit 0, otherwise `FEATURE_<C|R|I><bit>`.
fn feature_name(kind: usize, bit: u32) -> String {
    if kind == 1 && bit == 0 {
        return "block_count".to_string();
    }
    let letter = ["C", "R", "I"][kind];
    format!("FEATURE_{letter}{bit}")
}

fn state_name(state: u16) -> String {
    let mut s = String::from(if state & 0x1 != 0 {
        "valid"
    } else {
        "invalid or mounted"
    });
    if state & 0x2 != 0 {
        s.push_str(",error");
    }
    if state & 0x4 != 0 {
        s.push_str(",resize");
    }
    s
}

/// The standard output of `nilfs-tune -l DEVICE` (version line included)
/// with uid/gid names as on a base Debian system for 0 (`root`) and
/// `unknown` for every other id. See [`nilfs_tune_list_with_names`].
pub fn nilfs_tune_list(sb: &SuperBlock) -> String {
    let user = |uid: u32| (uid == 0).then(|| "root".to_string());
    let group = |gid: u32| (gid == 0).then(|| "root".to_string());
    nilfs_tune_list_with_names(sb, &user, &group)
}

/// The standard output of `nilfs-tune -l DEVICE`, with `user`/`group`
/// standing for `getpwuid`/`getgrgid` (None prints `unknown`).
///
/// The volume name is printed up to its first NUL (all 80 bytes if none),
/// `(none)` if empty; non-UTF-8 bytes become U+FFFD here. Times are
/// `ctime()` in UTC ([`format_ctime`]).
pub fn nilfs_tune_list_with_names(
    sb: &SuperBlock,
    user: &dyn Fn(u32) -> Option<String>,
    group: &dyn Fn(u32) -> Option<String>,
) -> String {
    nilfs_tune_list_as(sb, NilfsUtils::V2_2_9, user, group)
}

/// The standard output of `nilfs-tune -l DEVICE` as `version` prints it.
pub fn nilfs_tune_list_as(
    sb: &SuperBlock,
    version: NilfsUtils,
    user: &dyn Fn(u32) -> Option<String>,
    group: &dyn Fn(u32) -> Option<String>,
) -> String {
    let mut o = match version {
        NilfsUtils::V2_2_9 => String::from(NILFS_TUNE_VERSION_LINE),
        NilfsUtils::V2_2_11 => String::new(),
    };
    let name_len = sb
        .volume_name
        .iter()
        .position(|&c| c == 0)
        .unwrap_or(sb.volume_name.len());
    let label = if name_len == 0 {
        "(none)".to_string()
    } else {
        String::from_utf8_lossy(&sb.volume_name[..name_len]).into_owned()
    };
    let u = &sb.uuid;
    let _ = writeln!(o, "Filesystem volume name:\t  {label}");
    let _ = writeln!(
        o,
        "Filesystem UUID:\t  {:02x}{:02x}{:02x}{:02x}-{:02x}{:02x}-{:02x}{:02x}-{:02x}{:02x}-{:02x}{:02x}{:02x}{:02x}{:02x}{:02x}",
        u[0], u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13], u[14], u[15]
    );
    let _ = writeln!(o, "Filesystem magic number:  0x{:04x}", sb.magic);
    let _ = writeln!(
        o,
        "Filesystem revision #:\t  {}.{}",
        sb.rev_level as i32, sb.minor_rev_level
    );
    o.push_str("Filesystem features:     ");
    let mut any = false;
    for (kind, mask) in [sb.feature_compat, sb.feature_compat_ro, sb.feature_incompat]
        .into_iter()
        .enumerate()
    {
        for bit in 0..64 {
            if mask & (1u64 << bit) != 0 {
                o.push(' ');
                o.push_str(&feature_name(kind, bit));
                any = true;
            }
        }
    }
    if !any {
        o.push_str(" (none)");
    }
    o.push('\n');
    let _ = writeln!(o, "Filesystem state:\t  {}", state_name(sb.state));
    let _ = writeln!(
        o,
        "Filesystem OS type:\t  {}",
        if sb.creator_os == 0 {
            "Linux"
        } else {
            "Unknown"
        }
    );
    let _ = writeln!(
        o,
        "Block size:\t\t  {}",
        1u32.wrapping_shl(sb.log_block_size.wrapping_add(10))
    );
    let _ = write!(o, "Filesystem created:\t  {}", format_ctime(sb.ctime));
    let _ = write!(o, "Last mount time:\t  {}", format_ctime(sb.mtime));
    let _ = write!(o, "Last write time:\t  {}", format_ctime(sb.wtime));
    let _ = writeln!(o, "Mount count:\t\t  {}", sb.mnt_count);
    let _ = writeln!(o, "Maximum mount count:\t  {}", sb.max_mnt_count);
    let uid = u32::from(sb.def_resuid);
    let gid = u32::from(sb.def_resgid);
    let _ = writeln!(
        o,
        "Reserve blocks uid:\t  {uid} (user {})",
        user(uid).unwrap_or_else(|| "unknown".into())
    );
    let _ = writeln!(
        o,
        "Reserve blocks gid:\t  {gid} (group {})",
        group(gid).unwrap_or_else(|| "unknown".into())
    );
    let _ = writeln!(o, "First inode:\t\t  {}", sb.first_ino);
    let _ = writeln!(o, "Inode size:\t\t  {}", sb.inode_size);
    let _ = writeln!(o, "DAT entry size:\t\t  {}", sb.dat_entry_size);
    let _ = writeln!(o, "Checkpoint size:\t  {}", sb.checkpoint_size);
    let _ = writeln!(o, "Segment usage size:\t  {}", sb.segment_usage_size);
    let _ = writeln!(o, "Number of segments:\t  {}", sb.nsegments);
    let _ = writeln!(o, "Device size:\t\t  {}", sb.dev_size);
    let _ = writeln!(o, "First data block:\t  {}", sb.first_data_block);
    let _ = writeln!(o, "# of blocks per segment:  {}", sb.blocks_per_segment);
    let _ = writeln!(o, "Reserved segments %:\t  {}", sb.r_segments_percentage);
    let _ = writeln!(o, "Last checkpoint #:\t  {}", sb.last_cno);
    let _ = writeln!(o, "Last block address:\t  {}", sb.last_pseg);
    let _ = writeln!(o, "Last sequence #:\t  {}", sb.last_seq);
    let _ = writeln!(o, "Free blocks count:\t  {}", sb.free_blocks_count);
    let _ = writeln!(o, "Commit interval:\t  {}", sb.c_interval);
    let _ = writeln!(o, "# of blks to create seg:  {}", sb.c_block_max);
    let _ = writeln!(o, "CRC seed:\t\t  0x{:08x}", sb.crc_seed);
    let _ = writeln!(o, "CRC check sum:\t\t  0x{:08x}", sb.sum);
    match version {
        NilfsUtils::V2_2_9 => {
            let _ = writeln!(o, "CRC check data size:\t  0x{:08x}", sb.bytes);
        }
        NilfsUtils::V2_2_11 => {
            let _ = writeln!(o, "CRC check data size:\t  0x{:04x}", sb.bytes);
        }
    }
    o
}
