//! `lssu` (nilfs-tools 2.2.9): the segment usage listing, with `-a`,
//! `-l` (the latest usage) and `-n`.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use super::cap_lines;
use super::time::format_lastmod;

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
