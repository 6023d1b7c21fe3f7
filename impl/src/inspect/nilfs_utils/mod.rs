//! Byte-exact text output of the nilfs-tools 2.2.9 programs (Debian 12):
//! `lscp`, `lssu`, `dumpseg` and `nilfs-tune -l`.
//!
//! This is the pure printing layer. The inputs mirror what the programs get:
//! [`CpInfo`]/[`CpStat`] and [`SuInfo`]/[`SuStat`] are what the kernel's
//! `GET_CPINFO`/`GET_CPSTAT` and `GET_SUINFO`/`GET_SUSTAT` ioctls return,
//! [`DumpSegment`] is what dumpseg finds when it walks the raw segment, and
//! the [`SuperBlock`](crate::format::superblock::SuperBlock) nilfs-tune reads
//! comes from [`tune_select_super_block`]. Whoever fills these
//! structs from an image must follow the kernel's rules, summarised here:
//!
//! - **Checkpoints** (`GET_CPINFO`, checkpoint mode): every cpfile entry with
//!   `1 <= cno < CpStat::cno` (the *next* checkpoint number, `ns_cno`) whose
//!   INVALID flag is clear, ascending, with `cp_flags` copied verbatim.
//!   `CpStat::ncps`/`nsss` are the cpfile header's `ch_ncheckpoints` and
//!   `ch_nsnapshots`. Snapshot mode walks the snapshot list
//!   (`cp_snapshot_list.ssl_next`, reported as [`CpInfo::next`]).
//! - **Segment usage** (`GET_SUINFO`): `lastmod`, `nblocks` verbatim from the
//!   sufile (a hole reads as all-zero); `flags` is the on-disk `su_flags` with
//!   the ACTIVE bit *cleared*, then ACTIVE *set* for exactly two segments: the
//!   kernel's current segment (`ns_segnum`) and the next one (`ns_nextnum`).
//!   mkfs writes ACTIVE on disk for segments 0 and 1; the kernel never does.
//! - **dumpseg** walks the raw segment itself and never asks the kernel: see
//!   [`dumpseg_read_segment`], which reproduces libnilfs 2.2.9's iterators
//!   (no sequence-number check, no data CRC, so stale logs of an earlier use
//!   of a segment are printed too, and so are logs of clean segments).
//! - **nilfs-tune** prints the primary super block (offset 1024) if its magic
//!   is right and `s_bytes <= 1024`, without checking the CRC; otherwise the
//!   secondary one: see [`tune_select_super_block`].
//!
//! Times: the programs format with `localtime()`; this module always formats
//! in UTC, which is what they print with `TZ` unset on a UTC system (the
//! kernel fixtures). Dates follow glibc: `strftime("%F %T")` (the year is not
//! zero-padded) and `ctime()`; see [`format_date_time`] and [`format_ctime`].
//!
//! One file per program: [`lscp`](mod@lscp), [`lssu`](mod@lssu),
//! [`dumpseg`](mod@dumpseg), [`tune`](mod@tune) (`nilfs-tune -l`), and the
//! glibc date formats they share ([`time`](mod@time)).
//! dumpseg's segment walk is libnilfs's, shared with the cleaner: it lives
//! in [`crate::psegment`].

pub mod dumpseg;
pub mod lscp;
pub mod lssu;
pub mod time;
pub mod tune;

pub use crate::psegment::{
    read_segment_logs, DumpBinfo, DumpBlock, DumpFile, DumpLog, DumpSegment, SegmentGeometry,
};
pub use dumpseg::*;
pub use lscp::*;
pub use lssu::*;
pub use time::*;
pub use tune::*;

/// `lines` of `-n` bounds a count the tools take from the kernel (`cs_ncps`,
/// `cs_nsss`, `ss_nsegs`): `-n 0` (or no `-n`) means the whole count.
fn cap_lines(lines: u64, count: u64) -> u64 {
    if lines != 0 && lines < count {
        lines
    } else {
        count
    }
}
