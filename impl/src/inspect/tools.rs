//! The nilfs-tools listings of an image: gather from the image what the
//! kernel's ioctls (or the tool's own device reads) would give each program,
//! then print it with [`super::nilfs_utils`].
//!
//! - lscp: `GET_CPINFO` lists every valid checkpoint below `ns_cno`;
//!   `GET_CPSTAT` gives `ns_cno` and the cpfile header's counts.
//! - lssu: `GET_SUINFO` reports the sufile as stored but with the ACTIVE bit
//!   meaning "the writer's current or next segment"; `GET_SUSTAT` adds the
//!   sufile header's counts, `ns_ctime`, `ns_nongc_ctime` and `ns_prot_seq`.
//! - dumpseg and nilfs-tune read the device themselves, through the super
//!   block libnilfs picks (the primary when its magic is right, no CRC check).

use crate::device::BlockDevice;
use crate::format::superblock::sb2_offset_bytes;
use crate::format::{Cno, SB_OFFSET_BYTES};
use crate::the_nilfs::Nilfs;
use crate::{Error, Result};

use super::nilfs_utils::{
    dumpseg_geometry, dumpseg_read_segment, lscp_with_stat, lssu_with_stat, nilfs_tune_list_as,
    tune_select_super_block, CpInfo, CpStat, LscpOptions, LssuOptions, NilfsUtils, SuInfo, SuStat,
};
use crate::format::superblock::SuperBlock;

/// `lscp [-s] [-a] [-r]` of the filesystem on `dev`.
pub fn lscp(dev: &dyn BlockDevice, opts: &LscpOptions) -> Result<String> {
    let fs = Nilfs::open(dev)?;
    let cps = if opts.snapshots {
        fs.snapshots()?
    } else {
        fs.checkpoints(Cno(1))?
    };
    let infos: Vec<CpInfo> = cps
        .iter()
        .map(|cp| CpInfo {
            flags: cp.flags,
            cno: cp.cno.0,
            create: cp.create,
            nblk_inc: cp.nblk_inc,
            inodes_count: cp.inodes_count,
            blocks_count: cp.blocks_count,
            next: cp.snapshot_next.0,
        })
        .collect();
    let h = fs.cpfile_header()?;
    let stat = CpStat {
        cno: fs.next_cno().0,
        ncps: h.ncheckpoints,
        nsss: h.nsnapshots,
    };
    Ok(lscp_with_stat(&infos, &stat, opts))
}

/// `lssu [-a]` of the filesystem on `dev`.
pub fn lssu(dev: &dyn BlockDevice, opts: &LssuOptions) -> Result<String> {
    let fs = Nilfs::open(dev)?;
    let infos: Vec<SuInfo> = fs
        .segment_usages()?
        .iter()
        .enumerate()
        .map(|(s, su)| SuInfo {
            segnum: s as u64,
            lastmod: su.lastmod,
            nblocks: su.nblocks,
            flags: su.flags,
        })
        .collect();
    let h = fs.sufile_header()?;
    let stat = SuStat {
        nsegs: fs.geo.nsegments,
        ncleansegs: h.ncleansegs,
        ndirtysegs: h.ndirtysegs,
        ctime: fs.scan.ctime,
        nongc_ctime: fs.super_root.nongc_ctime,
        prot_seq: fs.sb_choice.prot_seq.0,
    };
    Ok(lssu_with_stat(&infos, &stat, opts))
}

/// The super block libnilfs would use for `dev` (see [`tune_select_super_block`]).
fn libnilfs_super_block(dev: &dyn BlockDevice) -> Result<SuperBlock> {
    let read = |off: u64| {
        let mut b = vec![0u8; 1024];
        dev.read_at(off, &mut b).ok().map(|()| b)
    };
    let primary = read(SB_OFFSET_BYTES);
    let sb2 = sb2_offset_bytes(dev.size_bytes()).unwrap_or(0);
    let secondary = if sb2 > 0 { read(sb2) } else { None };
    tune_select_super_block(primary.as_deref(), secondary.as_deref(), sb2)
        .ok_or_else(|| Error::corrupt("super block", "no NILFS2 super block found"))
}

/// What dumpseg prints: its standard output, and the error that stopped it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DumpsegOutput {
    /// Standard output.
    pub stdout: String,
    /// Standard error, when a segment number was out of range: dumpseg
    /// prints "dumpseg: Invalid argument" there and stops.
    pub error: Option<String>,
}

/// `dumpseg SEGNUM...` of `dev`.
pub fn dumpseg(dev: &dyn BlockDevice, segnums: &[u64]) -> Result<DumpsegOutput> {
    let sb = libnilfs_super_block(dev)?;
    let geo = dumpseg_geometry(&sb);
    let bs = u64::from(geo.block_size);
    let bps = u64::from(geo.blocks_per_segment);
    let mut out = String::new();
    for &s in segnums {
        if s >= sb.nsegments {
            return Ok(DumpsegOutput {
                stdout: out,
                error: Some("dumpseg: Invalid argument".into()),
            });
        }
        // The geometry comes from an unchecked super block: bound the read by
        // the device before allocating (a corrupt s_blocks_per_segment asked
        // for 48 GiB here; found by the `image` fuzz target).
        let len = bps.checked_mul(bs);
        let off = len.and_then(|l| l.checked_mul(s));
        let (Some(len), Some(off)) = (len, off) else {
            return Err(Error::OutOfRange(format!(
                "segment {s} lies beyond any device"
            )));
        };
        if off
            .checked_add(len)
            .is_none_or(|end| end > dev.size_bytes())
        {
            return Err(Error::Io {
                blocknr: off / bs.max(1),
                detail: format!("segment {s} lies beyond the device end"),
            });
        }
        let mut seg = vec![0u8; len as usize];
        dev.read_at(off, &mut seg)?;
        out.push_str(&super::nilfs_utils::dumpseg(
            &dumpseg_read_segment(&seg, s, &geo),
            geo.blocks_per_segment,
        ));
    }
    Ok(DumpsegOutput {
        stdout: out,
        error: None,
    })
}

/// `nilfs-tune -l` of `dev`, as `version` prints it (uid and gid 0 named
/// `root`, every other `unknown`, as on a base Debian system).
pub fn tune_list(dev: &dyn BlockDevice, version: NilfsUtils) -> Result<String> {
    let user = |uid: u32| (uid == 0).then(|| "root".to_string());
    let group = |gid: u32| (gid == 0).then(|| "root".to_string());
    Ok(nilfs_tune_list_as(
        &libnilfs_super_block(dev)?,
        version,
        &user,
        &group,
    ))
}
