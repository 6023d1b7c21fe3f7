//! Time stamps, as a trace lets the model know them.
//!
//! The kernel stamps an inode with `current_time()`: the coarse real-time
//! clock (`ktime_get_coarse_real_ts64`), read somewhere inside the system
//! call, truncated to the file system's granularity (nilfs2's is 1 ns,
//! `s_time_gran`'s default). A trace line records the clock just before
//! its call and just after it (`Line::t`, see `trace`), so the model knows
//! each stamp an operation sets only as the interval `[lo, hi]` that call
//! ran in. A stamp becomes exact when it is observed (the first `lstat`
//! that reports it) or when it is given (`utimensat` with a time).
//!
//! Stamps of one call are independent: `nilfs_rename`, for one, reads the
//! clock once for each directory it changes and again for the moved inode,
//! and a clock tick may fall between two reads. The model binds each field
//! of each inode apart, which never rejects what the kernel may do.

/// An instant the model knows to lie in `[lo, hi]` (ns of the real-time
/// clock). `lo == hi` when it is known exactly.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Stamp {
    pub lo: i64,
    pub hi: i64,
}

impl Stamp {
    /// A stamp known exactly.
    pub const fn exact(t: i64) -> Stamp {
        Stamp { lo: t, hi: t }
    }

    /// The stamp of a call that ran while the clock read `lo` to `hi`.
    /// An interval given backwards is read as the instant `lo`.
    pub fn between(lo: i64, hi: i64) -> Stamp {
        Stamp { lo, hi: hi.max(lo) }
    }

    /// Could the stamp be `t`?
    pub fn contains(self, t: i64) -> bool {
        self.lo <= t && t <= self.hi
    }

    /// Could the two stamps be the same instant?
    pub fn may_equal(self, other: Stamp) -> bool {
        self.lo <= other.hi && other.lo <= self.hi
    }

    /// Are the two stamps surely the same instant (both known exactly)?
    pub fn surely_equal(self, other: Stamp) -> bool {
        self.is_exact() && self == other
    }

    pub fn is_exact(self) -> bool {
        self.lo == self.hi
    }
}

impl std::fmt::Display for Stamp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.is_exact() {
            write!(f, "{}", self.lo)
        } else {
            write!(f, "{}..={}", self.lo, self.hi)
        }
    }
}

/// How wide a stamp is when its line records no interval, in a trace whose
/// first line records none either: a trace written before lines carried
/// their intervals, by a runner that wrote a `clock` line at most every
/// 100 ms. Its operations stamp inodes up to this long after the clock
/// line before them (the old, one-second rule; docs/model.md, "Times").
pub const LEGACY_WINDOW_NS: i64 = 1_000_000_000;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn containment_and_overlap() {
        let s = Stamp::between(10, 20);
        assert!(s.contains(10) && s.contains(20) && !s.contains(21) && !s.contains(9));
        assert!(s.may_equal(Stamp::exact(20)));
        assert!(!s.may_equal(Stamp::exact(21)));
        assert!(Stamp::exact(5).is_exact() && !s.is_exact());
        assert_eq!(Stamp::between(7, 3), Stamp::exact(7));
        assert_eq!(format!("{s} {}", Stamp::exact(4)), "10..=20 4");
    }

    /// Two stamps are surely the same instant only when both are the one
    /// exact instant; an interval never is, even against itself.
    #[test]
    fn surely_equal_needs_one_exact_instant() {
        assert!(Stamp::exact(5).surely_equal(Stamp::exact(5)));
        assert!(!Stamp::exact(5).surely_equal(Stamp::exact(6)));
        assert!(!Stamp::between(5, 6).surely_equal(Stamp::between(5, 6)));
        assert!(Stamp::between(5, 6).may_equal(Stamp::exact(6)));
    }
}
