//! Byte-exact text output of the nilfs-tools 2.2.9 programs (Debian 12):
//! `lscp`, `lssu`, `dumpseg` and `nilfs-tune -l`.
//!
//! This is the pure printing layer. The inputs mirror what the programs get:
//! [`CpInfo`]/[`CpStat`] and [`SuInfo`]/[`SuStat`] are what the kernel's
//! `GET_CPINFO`/`GET_CPSTAT` and `GET_SUINFO`/`GET_SUSTAT` ioctls return,
//! [`DumpSegment`] is what dumpseg finds when it walks the raw segment, and
//! [`TuneSuperBlock`] is the super block nilfs-tune reads. Whoever fills these
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

use std::collections::BTreeMap;
use std::fmt::Write as _;

// ---------------------------------------------------------------------------
// Calendar
// ---------------------------------------------------------------------------

/// A broken-down UTC time (what `gmtime()` fills in).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CivilTime {
    /// Proleptic Gregorian year (astronomical: year 0 exists, -1 before it).
    pub year: i64,
    /// 1..=12.
    pub month: u32,
    /// 1..=31.
    pub day: u32,
    /// 0..=23.
    pub hour: u32,
    /// 0..=59.
    pub minute: u32,
    /// 0..=59.
    pub second: u32,
    /// 0 = Sunday .. 6 = Saturday.
    pub weekday: u32,
}

/// Days since 1970-01-01 of the given proleptic Gregorian date.
pub fn days_from_civil(year: i64, month: u32, day: u32) -> i64 {
    // Count years from March so that the leap day is the last day of a year.
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let year_of_era = y - era * 400; // 0..=399
    let month_from_march = (i64::from(month) + 9) % 12; // Mar = 0 .. Feb = 11
    let day_of_year = (153 * month_from_march + 2) / 5 + i64::from(day) - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

/// The proleptic Gregorian date of a day count since 1970-01-01.
pub fn civil_from_days(days: i64) -> (i64, u32, u32) {
    // Shift the epoch to 0000-03-01, the start of a 400-year era.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let day_of_era = z - era * 146_097; // 0..=146096
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_from_march = (5 * day_of_year + 2) / 153; // 0..=11
    let day = (day_of_year - (153 * month_from_march + 2) / 5 + 1) as u32;
    let month = (if month_from_march < 10 {
        month_from_march + 3
    } else {
        month_from_march - 9
    }) as u32;
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// Break a `time_t` down in UTC. Defined for every `i64`.
pub fn civil_from_unix(t: i64) -> CivilTime {
    let days = t.div_euclid(86_400);
    let secs = t.rem_euclid(86_400) as u32;
    let (year, month, day) = civil_from_days(days);
    CivilTime {
        year,
        month,
        day,
        hour: secs / 3600,
        minute: secs / 60 % 60,
        second: secs % 60,
        // 1970-01-01 was a Thursday.
        weekday: (days + 4).rem_euclid(7) as u32,
    }
}

/// glibc's `localtime_r` fails (EOVERFLOW) unless `tm_year = year - 1900`
/// fits in an `int`.
fn glibc_tm(t: i64) -> Option<CivilTime> {
    let c = civil_from_unix(t);
    i32::try_from(c.year - 1900).ok().map(|_| c)
}

/// What the tools print through `strftime(buf, .., "%F %T", localtime(t))`
/// for an on-disk time `t` (cast to `time_t`, so values of 2^63 and above
/// are negative times), in UTC. glibc prints `%Y` as `tm_year + 1900` in
/// `int` arithmetic, without zero padding ("1-01-01", "10000-01-01").
///
/// Where glibc's `localtime_r` fails (|year| beyond about 2^31) the tools
/// format an uninitialised `struct tm`; this prints `????-??-?? ??:??:??`.
pub fn format_date_time(t: u64) -> String {
    let t = t as i64;
    match glibc_tm(t) {
        Some(c) => {
            let year = ((c.year - 1900) as i32).wrapping_add(1900);
            format!(
                "{}-{:02}-{:02} {:02}:{:02}:{:02}",
                year, c.month, c.day, c.hour, c.minute, c.second
            )
        }
        None => "????-??-?? ??:??:??".to_string(),
    }
}

const WEEKDAYS: [&str; 7] = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"];
const MONTHS: [&str; 12] = [
    "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
];

/// glibc `ctime(&t)` in UTC, trailing newline included:
/// `"Sun Nov 29 18:57:34 2026\n"` (day of month space-padded to 2).
/// Where glibc returns NULL (the year does not fit an `int`), nilfs-tune's
/// `printf("%s", NULL)` prints `(null)` with no newline; so does this.
pub fn format_ctime(t: u64) -> String {
    let t = t as i64;
    match glibc_tm(t) {
        Some(c) if c.year <= i64::from(i32::MAX) => format!(
            "{} {}{:3} {:02}:{:02}:{:02} {}\n",
            WEEKDAYS[c.weekday as usize],
            MONTHS[(c.month - 1) as usize],
            c.day,
            c.hour,
            c.minute,
            c.second,
            c.year
        ),
        _ => "(null)".to_string(),
    }
}

/// The DATE/TIME column of lssu: `format_date_time`, except that a `lastmod`
/// of exactly 0 prints as `---------- --:--:--`.
pub fn format_lastmod(lastmod: u64) -> String {
    if lastmod == 0 {
        "---------- --:--:--".to_string()
    } else {
        format_date_time(lastmod)
    }
}

/// `lines` of `-n` bounds a count the tools take from the kernel (`cs_ncps`,
/// `cs_nsss`, `ss_nsegs`): `-n 0` (or no `-n`) means the whole count.
fn cap_lines(lines: u64, count: u64) -> u64 {
    if lines != 0 && lines < count {
        lines
    } else {
        count
    }
}

// ---------------------------------------------------------------------------
// lscp
// ---------------------------------------------------------------------------

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

// ---------------------------------------------------------------------------
// lssu
// ---------------------------------------------------------------------------

/// `struct nilfs_suinfo` (`NILFS_IOCTL_GET_SUINFO`) with its segment number.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SuInfo {
    pub segnum: u64,
    /// `su_lastmod` (seconds); 0 prints as `---------- --:--:--`.
    pub lastmod: u64,
    /// `su_nblocks` verbatim.
    pub nblocks: u32,
    /// As the kernel reports them: on-disk `su_flags` with ACTIVE replaced
    /// by "is the current or the next segment". See the `FLAG_*` constants.
    pub flags: u32,
}

impl SuInfo {
    /// `NILFS_SEGMENT_USAGE_ACTIVE`: letter `a`.
    pub const FLAG_ACTIVE: u32 = 1 << 0;
    /// `NILFS_SEGMENT_USAGE_DIRTY`: letter `d`.
    pub const FLAG_DIRTY: u32 = 1 << 1;
    /// `NILFS_SEGMENT_USAGE_ERROR`: letter `e`.
    pub const FLAG_ERROR: u32 = 1 << 2;

    /// The kernel's answer for one sufile entry: the on-disk flags without
    /// their ACTIVE bit, plus ACTIVE iff `segnum` is the current segment
    /// (`ns_segnum`) or the next one (`ns_nextnum`).
    pub fn from_disk(
        segnum: u64,
        lastmod: u64,
        nblocks: u32,
        su_flags: u32,
        current: u64,
        next: u64,
    ) -> SuInfo {
        let mut flags = su_flags & !Self::FLAG_ACTIVE;
        if segnum == current || segnum == next {
            flags |= Self::FLAG_ACTIVE;
        }
        SuInfo {
            segnum,
            lastmod,
            nblocks,
            flags,
        }
    }

    pub fn is_active(&self) -> bool {
        self.flags & Self::FLAG_ACTIVE != 0
    }

    pub fn is_dirty(&self) -> bool {
        self.flags & Self::FLAG_DIRTY != 0
    }

    pub fn is_error(&self) -> bool {
        self.flags & Self::FLAG_ERROR != 0
    }

    /// lssu's "clean": no flag bit at all (any bit, including unknown ones,
    /// makes the segment listed).
    pub fn is_clean(&self) -> bool {
        self.flags == 0
    }

    /// The STAT column: `a`/`-`, `d`/`-`, `e`/`-`, in that order.
    pub fn stat_letters(&self) -> String {
        let mut s = String::with_capacity(3);
        s.push(if self.is_active() { 'a' } else { '-' });
        s.push(if self.is_dirty() { 'd' } else { '-' });
        s.push(if self.is_error() { 'e' } else { '-' });
        s
    }
}

/// `struct nilfs_sustat` (`NILFS_IOCTL_GET_SUSTAT`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SuStat {
    /// `ss_nsegs`: `s_nsegments`; lssu lists segments `0..nsegs`.
    pub nsegs: u64,
    pub ncleansegs: u64,
    pub ndirtysegs: u64,
    pub ctime: u64,
    pub nongc_ctime: u64,
    pub prot_seq: u64,
}

impl SuStat {
    /// A stat whose `nsegs` covers every segment in `sus` (the other fields
    /// are counted from them; times are 0). Enough for the printers, which
    /// only use `nsegs`.
    pub fn derive(sus: &[SuInfo]) -> SuStat {
        SuStat {
            nsegs: sus
                .iter()
                .map(|s| s.segnum)
                .max()
                .map_or(0, |m| m.saturating_add(1)),
            ncleansegs: sus.iter().filter(|s| s.is_clean()).count() as u64,
            ndirtysegs: sus.iter().filter(|s| s.is_dirty()).count() as u64,
            ..SuStat::default()
        }
    }
}

/// lssu's command line (`-a -i N -n N`; `-l`/`-p` are [`LatestUsage`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LssuOptions {
    /// `-a`: also list clean segments (flags == 0).
    pub all: bool,
    /// `-i N`: start at segment N. 0 = not given.
    pub index: u64,
    /// `-n N`: print at most N rows. 0 = not given.
    pub lines: u64,
}

const LSSU_HEADER: &str = "              SEGNUM        DATE     TIME STAT     NBLOCKS\n";
const LSSU_LATEST_HEADER: &str =
    "           SEGNUM        DATE     TIME STAT     NBLOCKS       NLIVEBLOCKS\n";

/// One default-mode lssu row, newline included.
pub fn lssu_row(si: &SuInfo) -> String {
    format!(
        "{:>20}  {}  {}  {:>10}\n",
        si.segnum,
        format_lastmod(si.lastmod),
        si.stat_letters(),
        si.nblocks
    )
}

/// The segments lssu prints, in order: segnums `index..nsegs`, clean ones
/// skipped unless `-a`, at most `min(-n, nsegs)` rows. A segment missing
/// from `sus` reads as all-zero (a sufile hole), i.e. clean.
fn lssu_rows(sus: &[SuInfo], stat: &SuStat, opts: &LssuOptions) -> Vec<SuInfo> {
    let by_segnum: BTreeMap<u64, &SuInfo> = sus.iter().map(|s| (s.segnum, s)).collect();
    let rest = cap_lines(opts.lines, stat.nsegs);
    let mut rows = Vec::new();
    let mut segnum = opts.index;
    while (rows.len() as u64) < rest && segnum < stat.nsegs {
        // Segments absent from `sus` are clean: jump over them unless `-a`.
        let si = match by_segnum.get(&segnum) {
            Some(si) => **si,
            None if !opts.all => match by_segnum.range(segnum..stat.nsegs).next() {
                Some((&s, _)) => {
                    segnum = s;
                    continue;
                }
                None => break,
            },
            None => SuInfo {
                segnum,
                ..SuInfo::default()
            },
        };
        if opts.all || !si.is_clean() {
            rows.push(si);
        }
        segnum += 1;
    }
    rows
}

/// `lssu [-a] [-i N] [-n N]` with `nsegs` = highest segnum in `sus` + 1.
pub fn lssu(sus: &[SuInfo], opts: &LssuOptions) -> String {
    lssu_with_stat(sus, &SuStat::derive(sus), opts)
}

/// The standard output of `lssu [-a] [-i N] [-n N]`: the header, then one
/// row per segment from `index` to `nsegs - 1` whose reported flags are not
/// all zero (`-a`: every segment), stopping after `-n` rows. Rows show the
/// segment number, `lastmod` (0 as dashes), `a`/`d`/`e` and `nblocks`.
///
/// `a` is the kernel's ACTIVE: current or next segment, not the on-disk bit
/// (see [`SuInfo::from_disk`]). A freshly allocated next segment therefore
/// prints as `ad-` with nblocks 0 and the dashed date.
pub fn lssu_with_stat(sus: &[SuInfo], stat: &SuStat, opts: &LssuOptions) -> String {
    let mut out = String::from(LSSU_HEADER);
    for si in lssu_rows(sus, stat, opts) {
        out.push_str(&lssu_row(&si));
    }
    out
}

/// What nilfs_assess_segment() found for one segment (`lssu -l`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LiveUsage {
    /// This many live blocks.
    Live(u64),
    /// The segment is protected (the assessment counted a protected
    /// segment): printed with its `nblocks` as live, 100% and `p`.
    Protected,
}

/// The `-l` (`--latest-usage`) mode and its `-p` period.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LatestUsage {
    /// `s_blocks_per_segment`, the divisor of the percentage.
    pub blocks_per_segment: u64,
    /// The time lssu started (`gettimeofday`).
    pub now: i64,
    /// `-p` in seconds; `None` = not given (then only a segment whose lastmod
    /// equals `now` is protected by time).
    pub protection_period: Option<u64>,
}

/// The standard output of `lssu -l [-p P] [-a] [-i N] [-n N]`. Rows are
/// chosen as in [`lssu_with_stat`]. `assess` is called, in row order, only
/// for segments that are dirty and not erroneous; the others print 0 live
/// blocks and 0%. `p` is printed if the lastmod lies within
/// `[now - period, now]` or the assessment says [`LiveUsage::Protected`].
pub fn lssu_latest_usage(
    sus: &[SuInfo],
    stat: &SuStat,
    opts: &LssuOptions,
    usage: &LatestUsage,
    assess: &mut dyn FnMut(&SuInfo) -> LiveUsage,
) -> String {
    let prottime = match usage.protection_period {
        Some(p) => usage.now.wrapping_sub(p as i64),
        None => usage.now,
    };
    let mut out = String::from(LSSU_LATEST_HEADER);
    for si in lssu_rows(sus, stat, opts) {
        let t = si.lastmod as i64;
        let mut protected = t >= prottime && t <= usage.now;
        let (live, ratio) = if !si.is_dirty() || si.is_error() {
            (0u64, 0u64)
        } else {
            match assess(&si) {
                LiveUsage::Live(n) => {
                    let ratio = n
                        .wrapping_mul(100)
                        .wrapping_add(99)
                        .checked_div(usage.blocks_per_segment)
                        .unwrap_or(0);
                    (n, ratio)
                }
                LiveUsage::Protected => {
                    protected = true;
                    (u64::from(si.nblocks), 100)
                }
            }
        };
        let _ = writeln!(
            out,
            "{:>17}  {} {}{}  {:>10} {:>10} ({:>3}%)",
            si.segnum,
            format_lastmod(si.lastmod),
            si.stat_letters(),
            if protected { 'p' } else { '-' },
            si.nblocks,
            live as u32,
            ratio as i32 as u32
        );
    }
    out
}

// ---------------------------------------------------------------------------
// dumpseg
// ---------------------------------------------------------------------------

/// One block record of a finfo, with the block's physical address.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DumpBlock {
    /// Physical block number: the file's first block (after the summary
    /// blocks and the blocks of earlier finfos) plus the record's index.
    pub blocknr: u64,
    pub binfo: DumpBinfo,
}

/// A binfo as dumpseg decodes it. Which kind a record is follows from the
/// finfo alone: ino 3 (DAT) or not, and index `< ndatablk` (data) or not.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DumpBinfo {
    /// Non-DAT data block: `vblocknr = V, blkoff = O, blocknr = B`.
    Data { vblocknr: u64, blkoff: u64 },
    /// Non-DAT node block: `vblocknr = V, blocknr = B`.
    Node { vblocknr: u64 },
    /// DAT data block: `blkoff = O, blocknr = B`.
    DatData { blkoff: u64 },
    /// DAT node block: `blkoff = O, level = L, blocknr = B`.
    DatNode { blkoff: u64, level: u8 },
}

/// One finfo with the binfos dumpseg reached.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DumpFile {
    pub ino: u64,
    pub cno: u64,
    /// `fi_nblocks`; printed as a signed 32-bit number.
    pub nblocks: u32,
    /// `fi_ndatablk`; printed as a signed 32-bit number.
    pub ndatablk: u32,
    pub blocks: Vec<DumpBlock>,
}

/// One log (partial segment) as dumpseg prints it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DumpLog {
    /// Physical block number of the log's first (summary) block.
    pub blocknr: u64,
    /// `ss_seq` (printed only for the first log of the segment).
    pub seq: u64,
    /// `ss_next`, a block number (printed divided by blocks per segment,
    /// only for the first log).
    pub next: u64,
    /// `ss_create`.
    pub create: u64,
    /// `ss_nblocks`.
    pub nblocks: u32,
    /// `ss_nfinfo` as recorded, even if fewer finfos were valid; printed as a
    /// signed 32-bit number.
    pub nfinfo: u32,
    /// The finfos dumpseg reached (it stops at the first invalid one).
    pub files: Vec<DumpFile>,
}

/// A segment as dumpseg sees it: the valid logs from its start.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DumpSegment {
    pub segnum: u64,
    /// Empty if the first log is not valid (a clean or never-written
    /// segment): dumpseg then prints only the `segment:` line.
    pub logs: Vec<DumpLog>,
}

/// The standard output of `dumpseg DEV SEGNUM` for one segment.
/// `blocks_per_segment` is the super block's, the divisor of `next segnum`
/// (0 would crash dumpseg; here it prints `next segnum = 0`).
pub fn dumpseg(seg: &DumpSegment, blocks_per_segment: u32) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "segment: segnum = {}", seg.segnum);
    let Some(first) = seg.logs.first() else {
        return out;
    };
    let next_segnum = first
        .next
        .checked_div(u64::from(blocks_per_segment))
        .unwrap_or(0);
    let _ = writeln!(
        out,
        "  sequence number = {}, next segnum = {}",
        first.seq, next_segnum
    );
    for log in &seg.logs {
        let _ = writeln!(
            out,
            "  partial segment: blocknr = {}, nblocks = {}",
            log.blocknr, log.nblocks
        );
        let _ = writeln!(out, "    creation time = {}", format_date_time(log.create));
        let _ = writeln!(out, "    nfinfo = {}", log.nfinfo as i32);
        for file in &log.files {
            out.push_str("    finfo\n");
            let _ = writeln!(
                out,
                "      ino = {}, cno = {}, nblocks = {}, ndatblk = {}",
                file.ino, file.cno, file.nblocks as i32, file.ndatablk as i32
            );
            for blk in &file.blocks {
                let b = blk.blocknr;
                let _ = match blk.binfo {
                    DumpBinfo::Data { vblocknr, blkoff } => {
                        writeln!(
                            out,
                            "        vblocknr = {vblocknr}, blkoff = {blkoff}, blocknr = {b}"
                        )
                    }
                    DumpBinfo::Node { vblocknr } => {
                        writeln!(out, "        vblocknr = {vblocknr}, blocknr = {b}")
                    }
                    DumpBinfo::DatData { blkoff } => {
                        writeln!(out, "        blkoff = {blkoff}, blocknr = {b}")
                    }
                    DumpBinfo::DatNode { blkoff, level } => {
                        writeln!(
                            out,
                            "        blkoff = {blkoff}, level = {level}, blocknr = {b}"
                        )
                    }
                };
            }
        }
    }
    out
}

/// The super block values dumpseg's segment walk depends on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SegmentGeometry {
    /// `1024 << s_log_block_size`.
    pub block_size: u32,
    pub blocks_per_segment: u32,
    pub first_data_block: u64,
    pub crc_seed: u32,
}

const SEGSUM_MAGIC: u32 = 0x1EAF_FA11;
const FINFO_LEN: u64 = 24;
const PSEG_MIN_BLOCKS: u64 = 2;
const DAT_INO: u64 = 3;

fn rd_u8(b: &[u8], off: u64) -> u8 {
    usize::try_from(off)
        .ok()
        .and_then(|o| b.get(o))
        .copied()
        .unwrap_or(0)
}

fn rd_le(b: &[u8], off: u64, len: u64) -> u64 {
    (0..len).rev().fold(0u64, |acc, i| {
        acc << 8 | u64::from(rd_u8(b, off.saturating_add(i)))
    })
}

fn rd_u16(b: &[u8], off: u64) -> u16 {
    rd_le(b, off, 2) as u16
}

fn rd_u32(b: &[u8], off: u64) -> u32 {
    rd_le(b, off, 4) as u32
}

fn rd_u64(b: &[u8], off: u64) -> u64 {
    rd_le(b, off, 8)
}

/// Bytes that `count` records of `size` bytes take from byte `offset` of a
/// summary, given that a record never straddles a block boundary (the tail
/// of a block too short for a record is skipped).
fn binfo_span(offset: u64, block_size: u64, size: u64, count: u64) -> u64 {
    let room = block_size - offset % block_size;
    if size * count <= room {
        return size * count;
    }
    let left = count - room / size;
    let per_block = block_size / size;
    room + left / per_block * block_size + left % per_block * size
}

/// Where the record of `size` bytes wanted at `offset` really starts.
fn record_start(offset: u64, block_size: u64, size: u64) -> u64 {
    let room = block_size - offset % block_size;
    if size > room {
        offset + room
    } else {
        offset
    }
}

fn binfo_sizes(ino: u64) -> (u64, u64) {
    // (data, node) record sizes.
    if ino == DAT_INO {
        (8, 16)
    } else {
        (16, 8)
    }
}

/// Decode a segment the way dumpseg (libnilfs 2.2.9) walks it.
///
/// `segment` holds the raw bytes of the whole segment, i.e. the device from
/// byte `segnum * blocks_per_segment * block_size` on, `blocks_per_segment *
/// block_size` bytes (missing bytes read as zero). The walk:
///
/// - starts at block `min(first_data_block, bps)` of segment 0, block 0 of
///   any other; a log is taken while at least 2 blocks remain in the segment
///   and its summary is valid: magic, `8 <= ss_sumbytes <= bytes left in the
///   segment`, `ss_sumsum` = crc32_le(seed) over summary bytes `8..sumbytes`,
///   and `ss_bytes <= ss_sumbytes`. Then it jumps `ss_nblocks` blocks. The
///   data CRC and `ss_seq` are **not** checked, so a stale older log after
///   the newest one is printed too. (An `ss_nblocks` of 0 makes the real
///   dumpseg loop forever; this stops after printing that log once.)
/// - finfos start at byte `ss_bytes`; records never straddle a block (a
///   finfo or binfo that does not fit in the rest of a summary block starts
///   at the next block). A finfo is taken while fewer than `ss_nfinfo` were
///   taken and it is sane: it lies within `ss_sumbytes`, its blocks stay
///   within the log (32-bit sum), `ndatablk <= nblocks`, and all its binfos
///   lie within `ss_sumbytes`; the first insane finfo ends the log's list.
/// - the blocks of the first finfo start right after the summary blocks
///   (`ceil(ss_sumbytes / block_size)`), each finfo's after the previous
///   one's `fi_nblocks`.
pub fn dumpseg_read_segment(segment: &[u8], segnum: u64, geo: &SegmentGeometry) -> DumpSegment {
    read_segment_logs(segment, segnum, geo, u64::from(geo.blocks_per_segment))
}

/// The same walk bounded to the first `blkcnt` blocks of the segment, as
/// `nilfs_psegment_for_each(pseg, segment, blkcnt)` is: dumpseg passes the
/// whole segment, the cleaner (`nilfs_acc_blocks_segment`) the segment's
/// `su_nblocks`.
pub fn read_segment_logs(
    segment: &[u8],
    segnum: u64,
    geo: &SegmentGeometry,
    blkcnt: u64,
) -> DumpSegment {
    let mut seg = DumpSegment {
        segnum,
        logs: Vec::new(),
    };
    let bs = u64::from(geo.block_size);
    let bps = u64::from(geo.blocks_per_segment);
    if bs == 0 {
        return seg;
    }
    let skip = if segnum == 0 {
        geo.first_data_block.min(bps)
    } else {
        0
    };
    let seg_start = bps.wrapping_mul(segnum).wrapping_add(skip);
    let max_blocks = bps - skip;
    // The iterator's bound: `blkcnt`, at most the blocks the segment
    // buffer holds from `seg_start`.
    let bound = blkcnt.min(max_blocks);
    let mut blocknr = seg_start;
    loop {
        let rel = blocknr - seg_start;
        if bound < rel.saturating_add(PSEG_MIN_BLOCKS) {
            break;
        }
        let base = (skip + rel) * bs;
        let Some(log) = read_log(segment, base, blocknr, max_blocks - rel, geo) else {
            break;
        };
        let step = u64::from(log.nblocks);
        seg.logs.push(log);
        if step == 0 {
            break;
        }
        blocknr += step;
    }
    seg
}

/// One log at byte `base` of the segment, or `None` if its summary is not
/// valid. `blocks_left` counts the blocks from this log to the segment end.
fn read_log(
    segment: &[u8],
    base: u64,
    blocknr: u64,
    blocks_left: u64,
    geo: &SegmentGeometry,
) -> Option<DumpLog> {
    let bs = u64::from(geo.block_size);
    let at = |off: u64| base + off;
    if rd_u32(segment, at(8)) != SEGSUM_MAGIC {
        return None;
    }
    let sumbytes = u64::from(rd_u32(segment, at(48)));
    // `restblocks` is a 32-bit quantity in libnilfs.
    let rest_bytes = u64::from(blocks_left as u32) * bs;
    if sumbytes < 8 || sumbytes > rest_bytes {
        return None;
    }
    let lo = usize::try_from(at(8)).ok()?;
    let hi = usize::try_from(at(sumbytes)).ok()?;
    let summed = segment.get(lo..hi)?;
    if rd_u32(segment, at(4)) != crate::format::crc::crc32_le(geo.crc_seed, summed) {
        return None;
    }
    let hdr_bytes = u64::from(rd_u16(segment, at(12)));
    if hdr_bytes > sumbytes {
        return None;
    }
    let log_nblocks = rd_u32(segment, at(40));
    let nfinfo = rd_u32(segment, at(44));
    let mut log = DumpLog {
        blocknr,
        seq: rd_u64(segment, at(16)),
        next: rd_u64(segment, at(32)),
        create: rd_u64(segment, at(24)),
        nblocks: log_nblocks,
        nfinfo,
        files: Vec::new(),
    };

    let mut offset = record_start(hdr_bytes, bs, FINFO_LEN);
    let mut file_blocknr = blocknr + sumbytes.div_ceil(bs);
    for _ in 0..nfinfo {
        if offset + FINFO_LEN > sumbytes {
            break;
        }
        let ino = rd_u64(segment, at(offset));
        let cno = rd_u64(segment, at(offset + 8));
        let nblocks = rd_u32(segment, at(offset + 16));
        let ndatablk = rd_u32(segment, at(offset + 20));
        let blkoff = (file_blocknr - blocknr) as u32;
        if blkoff.wrapping_add(nblocks) > log_nblocks || ndatablk > nblocks {
            break;
        }
        let (dsize, nsize) = binfo_sizes(ino);
        let data_span = binfo_span(offset + FINFO_LEN, bs, dsize, u64::from(ndatablk));
        let node_span = binfo_span(
            offset + FINFO_LEN + data_span,
            bs,
            nsize,
            u64::from(nblocks - ndatablk),
        );
        let info_len = FINFO_LEN + data_span + node_span;
        if offset + info_len > sumbytes {
            break;
        }

        let mut file = DumpFile {
            ino,
            cno,
            nblocks,
            ndatablk,
            blocks: Vec::new(),
        };
        let mut rec = offset + FINFO_LEN;
        for index in 0..u64::from(nblocks) {
            let is_data = index < u64::from(ndatablk);
            let size = if is_data { dsize } else { nsize };
            rec = record_start(rec, bs, size);
            let w0 = rd_u64(segment, at(rec));
            let binfo = match (ino == DAT_INO, is_data) {
                (false, true) => DumpBinfo::Data {
                    vblocknr: w0,
                    blkoff: rd_u64(segment, at(rec + 8)),
                },
                (false, false) => DumpBinfo::Node { vblocknr: w0 },
                (true, true) => DumpBinfo::DatData { blkoff: w0 },
                (true, false) => DumpBinfo::DatNode {
                    blkoff: w0,
                    level: rd_u8(segment, at(rec + 8)),
                },
            };
            file.blocks.push(DumpBlock {
                blocknr: file_blocknr + index,
                binfo,
            });
            rec += size;
        }
        log.files.push(file);

        file_blocknr += u64::from(nblocks);
        offset = record_start(offset + info_len, bs, FINFO_LEN);
    }
    Some(log)
}

// ---------------------------------------------------------------------------
// nilfs-tune -l
// ---------------------------------------------------------------------------

/// The super block fields `nilfs-tune -l` prints (plus the few it reads to
/// choose a copy), named after the on-disk fields without `s_`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TuneSuperBlock {
    pub rev_level: u32,
    pub minor_rev_level: u16,
    pub magic: u16,
    pub bytes: u16,
    pub flags: u16,
    pub crc_seed: u32,
    pub sum: u32,
    pub log_block_size: u32,
    pub nsegments: u64,
    pub dev_size: u64,
    pub first_data_block: u64,
    pub blocks_per_segment: u32,
    pub r_segments_percentage: u32,
    pub last_cno: u64,
    pub last_pseg: u64,
    pub last_seq: u64,
    pub free_blocks_count: u64,
    pub ctime: u64,
    pub mtime: u64,
    pub wtime: u64,
    pub mnt_count: u16,
    pub max_mnt_count: u16,
    pub state: u16,
    pub errors: u16,
    pub lastcheck: u64,
    pub checkinterval: u32,
    pub creator_os: u32,
    pub def_resuid: u16,
    pub def_resgid: u16,
    pub first_ino: u32,
    pub inode_size: u16,
    pub dat_entry_size: u16,
    pub checkpoint_size: u16,
    pub segment_usage_size: u16,
    pub uuid: [u8; 16],
    pub volume_name: [u8; 80],
    pub c_interval: u32,
    pub c_block_max: u32,
    pub feature_compat: u64,
    pub feature_compat_ro: u64,
    pub feature_incompat: u64,
}

impl TuneSuperBlock {
    /// Decode the 1024-byte super block (short input reads as zeros). No
    /// check at all: see [`tune_select_super_block`] for nilfs-tune's.
    pub fn decode(b: &[u8]) -> TuneSuperBlock {
        let mut uuid = [0u8; 16];
        let mut volume_name = [0u8; 80];
        for (i, x) in uuid.iter_mut().enumerate() {
            *x = rd_u8(b, 0x98 + i as u64);
        }
        for (i, x) in volume_name.iter_mut().enumerate() {
            *x = rd_u8(b, 0xA8 + i as u64);
        }
        TuneSuperBlock {
            rev_level: rd_u32(b, 0x00),
            minor_rev_level: rd_u16(b, 0x04),
            magic: rd_u16(b, 0x06),
            bytes: rd_u16(b, 0x08),
            flags: rd_u16(b, 0x0A),
            crc_seed: rd_u32(b, 0x0C),
            sum: rd_u32(b, 0x10),
            log_block_size: rd_u32(b, 0x14),
            nsegments: rd_u64(b, 0x18),
            dev_size: rd_u64(b, 0x20),
            first_data_block: rd_u64(b, 0x28),
            blocks_per_segment: rd_u32(b, 0x30),
            r_segments_percentage: rd_u32(b, 0x34),
            last_cno: rd_u64(b, 0x38),
            last_pseg: rd_u64(b, 0x40),
            last_seq: rd_u64(b, 0x48),
            free_blocks_count: rd_u64(b, 0x50),
            ctime: rd_u64(b, 0x58),
            mtime: rd_u64(b, 0x60),
            wtime: rd_u64(b, 0x68),
            mnt_count: rd_u16(b, 0x70),
            max_mnt_count: rd_u16(b, 0x72),
            state: rd_u16(b, 0x74),
            errors: rd_u16(b, 0x76),
            lastcheck: rd_u64(b, 0x78),
            checkinterval: rd_u32(b, 0x80),
            creator_os: rd_u32(b, 0x84),
            def_resuid: rd_u16(b, 0x88),
            def_resgid: rd_u16(b, 0x8A),
            first_ino: rd_u32(b, 0x8C),
            inode_size: rd_u16(b, 0x90),
            dat_entry_size: rd_u16(b, 0x92),
            checkpoint_size: rd_u16(b, 0x94),
            segment_usage_size: rd_u16(b, 0x96),
            uuid,
            volume_name,
            c_interval: rd_u32(b, 0xF8),
            c_block_max: rd_u32(b, 0xFC),
            feature_compat: rd_u64(b, 0x100),
            feature_compat_ro: rd_u64(b, 0x108),
            feature_incompat: rd_u64(b, 0x110),
        }
    }

    /// The geometry dumpseg walks segments with (it reads the same copy).
    pub fn segment_geometry(&self) -> SegmentGeometry {
        SegmentGeometry {
            block_size: 1u32.wrapping_shl(self.log_block_size.wrapping_add(10)),
            blocks_per_segment: self.blocks_per_segment,
            first_data_block: self.first_data_block,
            crc_seed: self.crc_seed,
        }
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
) -> Option<TuneSuperBlock> {
    let plausible = |sb: &TuneSuperBlock| sb.magic == 0x3434 && sb.bytes <= 1024;
    if let Some(sb) = primary.map(TuneSuperBlock::decode).filter(plausible) {
        return Some(sb);
    }
    secondary
        .map(TuneSuperBlock::decode)
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

/// First line of every nilfs-tune run (2.2.9 prints it unconditionally).
pub const NILFS_TUNE_VERSION_LINE: &str = "nilfs-tune 2.2.9\n";

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
pub fn nilfs_tune_list(sb: &TuneSuperBlock) -> String {
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
    sb: &TuneSuperBlock,
    user: &dyn Fn(u32) -> Option<String>,
    group: &dyn Fn(u32) -> Option<String>,
) -> String {
    let mut o = String::from(NILFS_TUNE_VERSION_LINE);
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
    let _ = writeln!(o, "CRC check data size:\t  0x{:08x}", sb.bytes);
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn binfo_span_matches_record_by_record_placement() {
        for bs in [1024u64, 4096] {
            for (size, start) in [(8u64, 24u64), (16, 24), (16, 1000), (8, 1016), (16, 1020)] {
                for count in 0..600u64 {
                    let mut rec = start;
                    for _ in 0..count {
                        rec = record_start(rec, bs, size) + size;
                    }
                    assert_eq!(
                        start + binfo_span(start, bs, size, count),
                        rec,
                        "bs {bs} size {size} start {start} n {count}"
                    );
                }
            }
        }
    }
}
