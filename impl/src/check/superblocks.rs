//! Pass 1: the super blocks. Both copies are judged as `nilfs_valid_sb`
//! judges them; the copy the kernel would choose (`nilfs_load_super_block`)
//! must have a mountable geometry (`nilfs_store_disk_layout`) and a log
//! cursor that leads to a valid log with a super root
//! (`nilfs_search_super_root`); the copies must agree on what never changes.

use super::btree::detail;
use super::codes::Code;
use super::ctx::Ck;
use super::report::Report;
use crate::device::BlockDevice;
use crate::format::segsum::SegmentSummary;
use crate::format::superblock::{
    self, SuperBlock, CURSOR_END, MIN_BYTES, STATE_ERROR_FS, STATE_VALID_FS,
};
use crate::format::{SB_OFFSET_BYTES, SUPER_MAGIC};
use crate::recovery::{load_super_block, search_super_root};
use crate::Error;

const NAMES: [&str; 2] = ["primary super block", "secondary super block"];

/// Push a finding before the checker exists (no deduplication needed: each
/// is made once).
fn push(r: &mut Report, code: Code, structure: &str, found: String, expected: &str) {
    r.findings.push(super::report::Finding {
        code,
        structure: structure.to_string(),
        block: None,
        found,
        expected: expected.to_string(),
    });
}

/// Judge both copies. `false` if neither carries the NILFS2 magic: the
/// device holds no NILFS2 (an operational error, set in `r`).
pub(super) fn copies(dev: &dyn BlockDevice, r: &mut Report) -> bool {
    let size = dev.size_bytes();
    let offsets = [Some(SB_OFFSET_BYTES), superblock::sb2_offset_bytes(size)];
    let mut magic = 0;
    let mut found = Report::default();
    for (k, off) in offsets.iter().enumerate() {
        let Some(off) = *off else { continue };
        let mut raw = vec![0u8; SuperBlock::SIZE];
        // Both copies lie inside the device (`sb2_offset_bytes`), so a
        // read that fails is a medium error: the copy cannot be judged.
        // (The kernel mounts without an unreadable secondary; the check,
        // which judges both, cannot call the image clean.)
        if let Err(e) = dev.read_at(off, &mut raw) {
            r.operational = Some(format!("reading the {}: {e}", NAMES[k]));
            return false;
        }
        let Ok(sb) = SuperBlock::decode(&raw) else {
            continue;
        };
        let name = NAMES[k];
        if sb.magic != SUPER_MAGIC {
            push(
                &mut found,
                Code::SbMagic,
                name,
                format!("magic {:#06x} at byte {off}", sb.magic),
                "0x3434",
            );
            continue;
        }
        magic += 1;
        if sb.bytes < MIN_BYTES || usize::from(sb.bytes) > SuperBlock::SIZE {
            push(
                &mut found,
                Code::SbBytes,
                name,
                format!("s_bytes {}", sb.bytes),
                &format!("{MIN_BYTES}..=1024"),
            );
            continue;
        }
        let crc = sb.compute_sum();
        if crc != sb.sum {
            push(
                &mut found,
                Code::SbCrc,
                name,
                format!("s_sum {:#010x}, computed {crc:#010x}", sb.sum),
                "the CRC of the first s_bytes bytes",
            );
        } else if usize::from(sb.bytes) < CURSOR_END {
            // The kernel mounts such a copy, but its first commit that
            // copies one copy over the other (`nilfs_setup_super`) carries
            // only `s_bytes` of it: K22, a torn cursor the next mount
            // refuses.
            push(
                &mut found,
                Code::SbBytesShort,
                name,
                format!("s_bytes {}, inside the log cursor", sb.bytes),
                &format!("at least {CURSOR_END} (every mkfs writes 280)"),
            );
        }
    }
    if magic == 0 {
        r.operational = Some("no NILFS2 super block on the device".into());
        return false;
    }
    r.findings.append(&mut found.findings);
    true
}

/// `Nilfs::open` failed although a copy carries the magic: say why, in the
/// kernel's order (no valid copy, geometry, cursor, super root).
pub(super) fn open_failed(dev: &dyn BlockDevice, err: &Error, r: &mut Report) {
    let choice = match load_super_block(dev) {
        Ok(c) => c,
        Err(_) if matches!(err, Error::Io { .. }) => {
            r.operational = Some(err.to_string());
            return;
        }
        Err(e) => {
            if !r.findings.iter().any(|f| f.code.pass() == 1) {
                push(r, Code::SbCrc, NAMES[0], detail(&e), "a valid copy");
            }
            return;
        }
    };
    let sb = choice.sb().clone();
    let name = NAMES[choice.chosen];
    // A read that failed inside the device is the device's error: the
    // check cannot say what the read would have shown. One past the
    // device's end is the image's (a log pointer out of range; the
    // kernel's read fails there too), and is explained below.
    let bs = u64::from(sb.block_size().unwrap_or(1024));
    let device_fault = |e: &Error| super::device_fault(dev, bs, e);
    if device_fault(err) {
        r.operational = Some(err.to_string());
        return;
    }
    if let Err(e) = sb.check_geometry(dev.size_bytes()) {
        push(
            r,
            Code::SbGeometry,
            name,
            detail(&e),
            "a geometry the kernel mounts",
        );
        return;
    }
    let valid_fs = sb.state & STATE_VALID_FS != 0;
    let mut any_scan = false;
    for (k, s) in [
        (choice.chosen, Some(&sb)),
        (1 - choice.chosen, choice.spare()),
    ] {
        let Some(s) = s else { continue };
        // The spare is scanned as the mount falls back to it: with the
        // chosen copy's disk layout (`SuperBlock::fallen_back_from`).
        let as_mounted = if k == choice.chosen {
            Ok(s.clone())
        } else {
            s.clone().fallen_back_from(&sb)
        };
        let scan =
            as_mounted.and_then(|m| search_super_root(dev, &m, valid_fs && k == choice.chosen));
        match scan {
            Ok(_) => any_scan = true,
            // The device's error, not the image's: the check cannot say
            // what the scan would have found.
            Err(e) if device_fault(&e) => {
                r.operational = Some(e.to_string());
                return;
            }
            Err(e) => push(
                r,
                Code::SbCursor,
                NAMES[k],
                format!(
                    "s_last_pseg {} (seq {}, cno {}): {}",
                    s.last_pseg,
                    s.last_seq,
                    s.last_cno,
                    detail(&e)
                ),
                "a valid log with a super root",
            ),
        }
    }
    if any_scan {
        let block = match err {
            Error::Corrupt { blocknr, .. } => *blocknr,
            _ => None,
        };
        r.findings.push(super::report::Finding {
            code: Code::LogSuperRoot,
            structure: "latest super root".into(),
            block,
            found: detail(err),
            expected: "0 < sr_bytes <= block size and a matching sr_sum".into(),
        });
    }
}

impl Ck<'_, '_> {
    /// The rest of pass 1, on the mounted view.
    pub fn superblocks(&mut self) {
        let fs = self.fs;
        let choice = &fs.sb_choice;
        let chosen = NAMES[choice.chosen];
        self.report
            .notes
            .push(format!("{chosen} in use: {}", choice.reason));
        if let (Some(a), Some(b)) = (
            choice.copies[0].as_ref().and_then(|c| c.sb.as_ref()),
            // A copy with a good checksum is compared even when the load
            // dropped it (its own geometry puts it inside its segment area:
            // nilfs_sb2_bad_offset), since a later mount may keep it.
            choice.copies[1]
                .as_ref()
                .and_then(|c| c.sb.as_ref())
                .filter(|sb| sb.check_valid().is_ok()),
        ) {
            // Fields the kernel never changes in one copy alone (resize
            // changes the geometry in both): a copy that differs is damaged,
            // and a later mount that picks it (the copies take turns holding
            // the newer cursor) fails or reads another file system.
            let fields: [(&str, u64, u64); 18] = [
                ("s_nsegments", a.nsegments, b.nsegments),
                ("s_dev_size", a.dev_size, b.dev_size),
                (
                    "s_r_segments_percentage",
                    a.r_segments_percentage.into(),
                    b.r_segments_percentage.into(),
                ),
                ("s_feature_compat", a.feature_compat, b.feature_compat),
                (
                    "s_feature_compat_ro",
                    a.feature_compat_ro,
                    b.feature_compat_ro,
                ),
                ("s_feature_incompat", a.feature_incompat, b.feature_incompat),
                ("s_rev_level", a.rev_level.into(), b.rev_level.into()),
                ("s_crc_seed", a.crc_seed.into(), b.crc_seed.into()),
                (
                    "s_log_block_size",
                    a.log_block_size.into(),
                    b.log_block_size.into(),
                ),
                ("s_first_data_block", a.first_data_block, b.first_data_block),
                (
                    "s_blocks_per_segment",
                    a.blocks_per_segment.into(),
                    b.blocks_per_segment.into(),
                ),
                ("s_ctime", a.ctime, b.ctime),
                ("s_first_ino", a.first_ino.into(), b.first_ino.into()),
                ("s_inode_size", a.inode_size.into(), b.inode_size.into()),
                (
                    "s_dat_entry_size",
                    a.dat_entry_size.into(),
                    b.dat_entry_size.into(),
                ),
                (
                    "s_checkpoint_size",
                    a.checkpoint_size.into(),
                    b.checkpoint_size.into(),
                ),
                (
                    "s_segment_usage_size",
                    a.segment_usage_size.into(),
                    b.segment_usage_size.into(),
                ),
                (
                    "s_minor_rev_level",
                    a.minor_rev_level.into(),
                    b.minor_rev_level.into(),
                ),
            ];
            for (name, x, y) in fields {
                if x != y {
                    self.find(
                        Code::SbCopiesDiffer,
                        "secondary super block",
                        None,
                        format!("{name} {y}, the primary's {x}"),
                        "the same value in both copies",
                    );
                }
            }
            if a.uuid != b.uuid {
                self.find(
                    Code::SbCopiesDiffer,
                    "secondary super block",
                    None,
                    format!(
                        "s_uuid {}, the primary's {}",
                        b.uuid_string(),
                        a.uuid_string()
                    ),
                    "the same value in both copies",
                );
            }
        }
        if let Some(why) = &fs.rollback_reason {
            let sb = choice.sb();
            self.find(
                Code::SbCursor,
                chosen,
                None,
                format!(
                    "s_last_pseg {} (seq {}, cno {}): {}",
                    sb.last_pseg,
                    sb.last_seq,
                    sb.last_cno,
                    detail(why)
                ),
                "a valid log with a super root (the kernel falls back to the other copy)",
            );
        }
        if fs.sb.state & STATE_ERROR_FS != 0 {
            self.find(
                Code::SbErrorState,
                chosen,
                None,
                format!("s_state {:#x}", fs.sb.state),
                "no NILFS_ERROR_FS",
            );
        }
        let unknown_ro = fs.sb.feature_compat_ro & !superblock::FEATURE_COMPAT_RO_SUPP;
        if unknown_ro != 0 {
            self.find(
                Code::SbFeatures,
                chosen,
                None,
                format!(
                    "s_feature_compat_ro {:#x}: unknown bits {unknown_ro:#x}",
                    fs.sb.feature_compat_ro
                ),
                "only block_count (0x1)",
            );
        }
        let dev_bytes = fs.device().size_bytes();
        if fs.sb.dev_size > dev_bytes {
            self.find(
                Code::SbDevSize,
                chosen,
                None,
                format!(
                    "s_dev_size {} on a device of {dev_bytes} bytes",
                    fs.sb.dev_size
                ),
                "no more than the device",
            );
        }
        // The log at s_last_pseg made checkpoint s_last_cno.
        if let Some(v) = fs.scan.visits.first() {
            if let (Some(h), Some(cno)) = (v.header, v.super_root_cno) {
                if h.cno != cno {
                    self.find(
                        Code::SbLastCno,
                        NAMES[choice.chosen],
                        Some(v.pseg.0),
                        format!("s_last_cno {cno}, but its log has ss_cno {}", h.cno),
                        "the checkpoint number of the log it points at",
                    );
                }
            }
        }
        // The latest super root's log carries the number the scan gives it.
        if let Some(h) = self
            .read(fs.scan.sr_pseg.0, 1)
            .and_then(|b| SegmentSummary::decode(&b).ok())
        {
            if fs.scan.super_root_updated && h.cno != fs.scan.cno {
                self.find(
                    Code::LogSrCno,
                    "log of the latest super root",
                    Some(fs.scan.sr_pseg.0),
                    format!("ss_cno {}", h.cno),
                    format!("checkpoint {}", fs.scan.cno),
                );
            }
        }
    }
}
