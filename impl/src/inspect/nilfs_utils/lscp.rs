//! `lscp` (nilfs-tools 2.2.9): the checkpoint listing, in checkpoint and
//! snapshot mode, forward and reverse, with `-n`.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use super::cap_lines;
use super::time::format_date_time;

/// `struct nilfs_cpinfo`, one entry of `NILFS_IOCTL_GET_CPINFO`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CpInfo {
    /// `cp_flags` verbatim: see the `FLAG_*` constants.
    pub flags: u32,
    pub cno: u64,
    /// Creation time (seconds), `cp_create`.
    pub create: u64,
    pub nblk_inc: u64,
    pub inodes_count: u64,
    pub blocks_count: u64,
    /// Next snapshot in the snapshot list (`ssl_next`), 0 at the end.
    pub next: u64,
}

impl CpInfo {
    /// `NILFS_CHECKPOINT_SNAPSHOT`: printed as mode `ss`.
    pub const FLAG_SNAPSHOT: u32 = 1 << 0;
    /// `NILFS_CHECKPOINT_INVALID`: the kernel never reports such an entry.
    pub const FLAG_INVALID: u32 = 1 << 1;
    /// `NILFS_CHECKPOINT_SKETCH` (unused).
    pub const FLAG_SKETCH: u32 = 1 << 2;
    /// `NILFS_CHECKPOINT_MINOR`: printed as flag `i`, hidden without `-a`
    /// unless the checkpoint is a snapshot.
    pub const FLAG_MINOR: u32 = 1 << 3;

    pub fn is_snapshot(&self) -> bool {
        self.flags & Self::FLAG_SNAPSHOT != 0
    }

    pub fn is_minor(&self) -> bool {
        self.flags & Self::FLAG_MINOR != 0
    }

    pub fn is_invalid(&self) -> bool {
        self.flags & Self::FLAG_INVALID != 0
    }
}

/// `struct nilfs_cpstat` (`NILFS_IOCTL_GET_CPSTAT`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CpStat {
    /// `cs_cno`: the **next** checkpoint number (`ns_cno`), one above the
    /// latest checkpoint.
    pub cno: u64,
    /// `cs_ncps`: the cpfile header's `ch_ncheckpoints`.
    pub ncps: u64,
    /// `cs_nsss`: the cpfile header's `ch_nsnapshots`.
    pub nsss: u64,
}

impl CpStat {
    /// The stat a consistent cpfile holding exactly `cps` reports.
    pub fn derive(cps: &[CpInfo]) -> CpStat {
        let valid = cps.iter().filter(|c| !c.is_invalid());
        CpStat {
            cno: valid
                .clone()
                .map(|c| c.cno)
                .max()
                .map_or(1, |m| m.saturating_add(1)),
            ncps: valid.clone().count() as u64,
            nsss: valid.filter(|c| c.is_snapshot()).count() as u64,
        }
    }
}

/// lscp's command line (`-a -b -g -r -s -i N -n N`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LscpOptions {
    /// `-s`: list only snapshots (walks the snapshot list).
    pub snapshots: bool,
    /// `-a`: also list minor checkpoints. No effect with `-s`.
    pub all: bool,
    /// `-g`: print `NBLKINC` (blocks written) instead of `BLKCNT` (`-b`,
    /// the default).
    pub show_increment: bool,
    /// `-r`: newest first.
    pub reverse: bool,
    /// `-i N`: start at checkpoint N (forward: cno >= N; reverse: cno <= N).
    /// 0 = not given.
    pub index: u64,
    /// `-n N`: print at most N rows. 0 = not given.
    pub lines: u64,
}

const LSCP_BATCH: u64 = 512;

/// The checkpoints as the kernel holds them: valid entries by cno, plus the
/// snapshot list head.
struct CpTable<'a> {
    by_cno: BTreeMap<u64, &'a CpInfo>,
    stat: CpStat,
}

impl<'a> CpTable<'a> {
    fn new(cps: &'a [CpInfo], stat: CpStat) -> Self {
        let by_cno = cps
            .iter()
            .filter(|c| !c.is_invalid() && c.cno != 0)
            .map(|c| (c.cno, c))
            .collect();
        CpTable { by_cno, stat }
    }

    /// `GET_CPINFO` in checkpoint mode, unbounded: every valid checkpoint
    /// with `start <= cno < cs_cno`, ascending.
    fn valid_from(&self, start: u64) -> impl DoubleEndedIterator<Item = &'a CpInfo> + '_ {
        let end = self.stat.cno;
        let range = if start.max(1) < end {
            start.max(1)..end
        } else {
            0..0
        };
        self.by_cno.range(range).map(|(_, c)| *c)
    }

    /// The header's `ssl_next`. A consistent cpfile keeps the list sorted, so
    /// this is the lowest snapshot.
    fn snapshot_head(&self) -> u64 {
        self.by_cno
            .values()
            .find(|c| c.is_snapshot())
            .map_or(0, |c| c.cno)
    }

    /// `GET_CPINFO` in snapshot mode: follow the list from `start` (0 = the
    /// head) for at most `count` entries; stop at an entry that is missing,
    /// invalid or not a snapshot, and after the entry whose `next` is 0.
    fn snapshot_walk(&self, start: u64, count: u64) -> Vec<&'a CpInfo> {
        let mut out = Vec::new();
        let mut curr = if start == 0 {
            self.snapshot_head()
        } else {
            start
        };
        if curr == 0 || curr == u64::MAX {
            return out;
        }
        while (out.len() as u64) < count {
            let Some(cp) = self.by_cno.get(&curr).copied() else {
                break;
            };
            if !cp.is_snapshot() {
                break;
            }
            out.push(cp);
            if cp.next == 0 {
                break;
            }
            curr = cp.next;
        }
        out
    }
}

fn lscp_header(out: &mut String, opts: &LscpOptions) {
    let col = if opts.show_increment {
        "NBLKINC"
    } else {
        " BLKCNT"
    };
    let _ = writeln!(
        out,
        "                 CNO        DATE     TIME  MODE  FLG     {col}       ICNT"
    );
}

/// One lscp row, newline included.
pub fn lscp_row(cp: &CpInfo, show_increment: bool) -> String {
    format!(
        "{:>20}  {}   {}    {} {:>12} {:>10}\n",
        cp.cno,
        format_date_time(cp.create),
        if cp.is_snapshot() { "ss" } else { "cp" },
        if cp.is_minor() { "i" } else { "-" },
        if show_increment {
            cp.nblk_inc
        } else {
            cp.blocks_count
        },
        cp.inodes_count
    )
}

/// `lscp [options]` with the stat derived from `cps` ([`CpStat::derive`]):
/// right for any consistent cpfile. See [`lscp_with_stat`].
pub fn lscp(cps: &[CpInfo], opts: &LscpOptions) -> String {
    lscp_with_stat(cps, &CpStat::derive(cps), opts)
}

/// The standard output of `lscp [options]`.
///
/// `cps` is every checkpoint `GET_CPINFO` would report (entries flagged
/// INVALID are ignored, as the kernel skips them; order does not matter).
/// The header is always printed. Rows:
///
/// - default: ascending cno, all checkpoints **except minor ones** (MINOR
///   flag set, e.g. the checkpoint a GC pass or a metadata-only write makes)
///   that are not snapshots; `-a` shows those too.
/// - `-i N`: from cno N (reverse: up to cno N); `-n N`: the first N rows
///   printed. The row count is also capped by `cs_ncps` (`-s`: `cs_nsss`).
/// - `-r`: the same rows, newest first.
/// - `-s`: the snapshots, in snapshot-list order (ascending in a consistent
///   cpfile; list walked from the header's head, taken here as the lowest
///   snapshot; with `-i N` from the first snapshot with cno >= N). Minor
///   snapshots are listed (flag `i`). `-s -r` lists the snapshots below
///   `min(N+1, cs_cno)` newest first.
pub fn lscp_with_stat(cps: &[CpInfo], stat: &CpStat, opts: &LscpOptions) -> String {
    let table = CpTable::new(cps, *stat);
    let mut out = String::new();
    lscp_header(&mut out, opts);
    let rows = match (opts.snapshots, opts.reverse) {
        (false, false) => lscp_forward(&table, opts),
        (false, true) => lscp_backward(&table, opts),
        (true, false) => lscp_forward_snapshots(&table, opts),
        (true, true) => lscp_backward_snapshots(&table, opts),
    };
    for cp in rows {
        out.push_str(&lscp_row(cp, opts.show_increment));
    }
    out
}

fn lscp_shown(cp: &CpInfo, opts: &LscpOptions) -> bool {
    opts.all || cp.is_snapshot() || !cp.is_minor()
}

/// The end (exclusive) of a reverse listing: `-i N` gives N + 1 unless N is
/// past the latest checkpoint.
fn lscp_reverse_end(table: &CpTable, opts: &LscpOptions) -> u64 {
    if opts.index != 0 && opts.index < table.stat.cno {
        opts.index + 1
    } else {
        table.stat.cno
    }
}

fn lscp_forward<'a>(table: &CpTable<'a>, opts: &LscpOptions) -> Vec<&'a CpInfo> {
    // lscp asks for batches of at most `rest` checkpoints starting after the
    // last one seen and counts only the rows it prints: the first `rest`
    // shown checkpoints from the start index.
    let rest = cap_lines(opts.lines, table.stat.ncps);
    let start = if opts.index != 0 { opts.index } else { 1 };
    table
        .valid_from(start)
        .filter(|c| lscp_shown(c, opts))
        .take(usize::try_from(rest).unwrap_or(usize::MAX))
        .collect()
}

fn lscp_backward<'a>(table: &CpTable<'a>, opts: &LscpOptions) -> Vec<&'a CpInfo> {
    // lscp probes backwards in windows of up to 512 checkpoint numbers
    // (widening over empty ranges, narrowing again before printing); every
    // window is read whole, so the result is every shown checkpoint below
    // the end, newest first, up to `rest` rows.
    let rest = cap_lines(opts.lines, table.stat.ncps);
    let end = lscp_reverse_end(table, opts);
    table
        .valid_from(1)
        .rev()
        .filter(|c| c.cno < end && lscp_shown(c, opts))
        .take(usize::try_from(rest).unwrap_or(usize::MAX))
        .collect()
}

fn lscp_forward_snapshots<'a>(table: &CpTable<'a>, opts: &LscpOptions) -> Vec<&'a CpInfo> {
    let mut rows = Vec::new();
    let mut rest = cap_lines(opts.lines, table.stat.nsss);
    let mut start = opts.index;
    if rest == 0 || start >= table.stat.cno {
        return rows;
    }
    if start > 0 {
        // The first snapshot at or after the index, found by scanning the
        // checkpoints (not the list).
        match table.valid_from(start).find(|c| c.is_snapshot()) {
            Some(c) => start = c.cno,
            None => return rows,
        }
    }
    while rest > 0 && start < table.stat.cno {
        let batch = table.snapshot_walk(start, rest.min(LSCP_BATCH));
        let Some(last) = batch.last() else { break };
        start = last.next;
        rest -= batch.len() as u64;
        rows.extend(batch);
        if start == 0 {
            break;
        }
    }
    rows
}

fn lscp_backward_snapshots<'a>(table: &CpTable<'a>, opts: &LscpOptions) -> Vec<&'a CpInfo> {
    let mut rows = Vec::new();
    // `remaining` tracks how many snapshots lscp believes are left below
    // `end`; it decides between scanning checkpoints and reading the list.
    let mut remaining = table.stat.nsss;
    let mut rest = cap_lines(opts.lines, remaining);
    let mut end = lscp_reverse_end(table, opts);
    while rest > 0 && end > 1 {
        if remaining <= LSCP_BATCH || end <= 1 + LSCP_BATCH {
            // Few enough: read the list from its head and print, newest
            // first, the entries below `end`.
            let list = table.snapshot_walk(0, remaining.min(LSCP_BATCH));
            for cp in list.into_iter().rev().filter(|c| c.cno < end) {
                if rest == 0 {
                    break;
                }
                rows.push(cp);
                rest -= 1;
            }
            return rows;
        }
        // Scan the 512 checkpoint numbers below `end` for snapshot flags.
        let start = end - LSCP_BATCH;
        let batch: Vec<&CpInfo> = table.valid_from(start).take(LSCP_BATCH as usize).collect();
        if batch.is_empty() {
            break;
        }
        for cp in batch.into_iter().rev() {
            if rest == 0 {
                break;
            }
            if cp.cno >= end || !cp.is_snapshot() {
                continue;
            }
            rows.push(cp);
            rest -= 1;
            remaining -= 1;
        }
        end = start;
    }
    rows
}
