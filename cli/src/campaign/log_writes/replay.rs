//! Replaying a dm-log-writes log onto a base image as crash states: every
//! flush/FUA boundary with the marks in force, and, sampled with a seed,
//! torn, reordered and all-but-one states within an epoch; the known-bad
//! replay that drops a write. It knows nothing of what the blocks mean.

use std::fmt;

use nilfs::device::sim::SplitMix64;
use nilfs::device::{BlockDevice, MemDevice};

use crate::campaign::log_writes::format::{Log, LogError, DISCARD, FLUSH};

/// How a crash state came about.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StateKind {
    /// Every write of the log up to and including entry `upto` (`None`: the
    /// base image) reached the disk, none after.
    Prefix { upto: Option<usize> },
    /// The writes of the epoch ending at entry `end` up to its `sectors`-th
    /// sector (in log order) reached the disk; the last one partly.
    Torn { end: usize, sectors: u64 },
    /// Only these writes of the epoch ending at entry `end` reached the disk.
    Reordered { end: usize, kept: Vec<usize> },
    /// A crash image stored earlier (a finding's), by name.
    Stored { name: String },
}

impl fmt::Display for StateKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StateKind::Prefix { upto: None } => write!(f, "the base image"),
            StateKind::Prefix { upto: Some(i) } => write!(f, "log entries 0..={i}"),
            StateKind::Torn { end, sectors } => write!(
                f,
                "torn: the epoch ending at entry {end} cut after {sectors} sectors"
            ),
            StateKind::Reordered { end, kept } => write!(
                f,
                "reordered: of the epoch ending at entry {end}, only entries {kept:?}"
            ),
            StateKind::Stored { name } => write!(f, "the stored crash image {name}"),
        }
    }
}

impl StateKind {
    /// A short stable name (file names, replay arguments).
    pub fn slug(&self) -> String {
        match self {
            StateKind::Prefix { upto: None } => "base".into(),
            StateKind::Prefix { upto: Some(i) } => format!("p{i}"),
            StateKind::Torn { end, sectors } => format!("t{end}-{sectors}"),
            StateKind::Reordered { end, kept } => format!(
                "r{end}-{}",
                kept.iter()
                    .map(|k| k.to_string())
                    .collect::<Vec<_>>()
                    .join(".")
            ),
            StateKind::Stored { name } => name.clone(),
        }
    }
}

/// One state a power cut could leave.
pub struct CrashState {
    pub kind: StateKind,
    /// The marks under which the disk may be found in this state: `None`
    /// stands for "before the first mark". The last mark logged before the
    /// state arose, then every mark logged while it stood (before the next
    /// flush or FUA write).
    pub marks: Vec<Option<String>>,
    pub device: MemDevice,
}

/// Which torn and reordered states to sample.
#[derive(Clone, Debug)]
pub struct Sampling {
    pub seed: u64,
    /// Torn states per epoch with at least two sectors of writes.
    pub torn: usize,
    /// Reordered states per epoch with at least two reorderable writes.
    pub reordered: usize,
    /// Also, systematically, the states with one write of the epoch
    /// missing (each of its first `all_but_one` writes in turn): a cache
    /// that wrote back everything but one write.
    pub all_but_one: usize,
    /// The known-bad replay, for the checkers' own tests: the `k`-th
    /// device-changing entry of the log (0-based) is silently left out of
    /// every state.
    pub drop_write: Option<usize>,
}

impl Sampling {
    pub fn new(seed: u64) -> Sampling {
        Sampling {
            seed,
            torn: 1,
            reordered: 1,
            all_but_one: 8,
            drop_write: None,
        }
    }
}

/// What [`crash_states`] produced.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReplayStats {
    pub prefixes: usize,
    pub torn: usize,
    pub reordered: usize,
    pub epochs: usize,
}

/// Applies every entry of `log` to `dev`, in order: the device as the
/// recorded run left it (the judges' tests).
#[cfg(test)]
pub fn replay_all(log: &Log, dev: &MemDevice) -> Result<(), LogError> {
    (0..log.entries.len()).try_for_each(|i| apply(dev, log, i, None, None))
}

/// Applies entry `i` (or its first `sectors` sectors) to `dev`.
fn apply(
    dev: &MemDevice,
    log: &Log,
    i: usize,
    sectors: Option<u64>,
    dropped: Option<usize>,
) -> Result<(), LogError> {
    if dropped == Some(i) {
        return Ok(());
    }
    let e = &log.entries[i];
    if !e.changes_device() {
        return Ok(());
    }
    let ss = u64::from(log.sector_size);
    let n = sectors.unwrap_or(e.nr_sectors).min(e.nr_sectors);
    let start = e.sector * ss;
    let end = start + e.nr_sectors * ss;
    if end > dev.size_bytes() {
        return Err(LogError::BeyondDevice {
            entry: i as u64,
            end_byte: end,
            device_bytes: dev.size_bytes(),
        });
    }
    let len = (n * ss) as usize;
    let zeros;
    let data: &[u8] = if e.flags & DISCARD != 0 {
        // A discarded range reads back as zeros here (replay-log's
        // --discard-zeroes behaviour); NILFS2 discards only when mounted
        // with -o discard or asked by FITRIM.
        zeros = vec![0u8; len];
        &zeros
    } else {
        &e.data[..len]
    };
    dev.write_at(start, data).map_err(|err| LogError::Device {
        entry: i as u64,
        detail: err.to_string(),
    })
}

/// The reordered state in which, of the epoch ending at `end`, only the
/// writes `kept` reached the disk over `cur`.
fn reordered(
    cur: &MemDevice,
    log: &Log,
    end: usize,
    kept: Vec<usize>,
    marks: &[Option<String>],
    dropped: Option<usize>,
) -> Result<CrashState, LogError> {
    let dev = cur.duplicate();
    for &i in &kept {
        apply(&dev, log, i, None, dropped)?;
    }
    Ok(CrashState {
        kind: StateKind::Reordered { end, kept },
        marks: marks.to_vec(),
        device: dev,
    })
}

/// Replays `log` onto a copy of `base` and calls `visit` with every crash
/// state: the base, the prefix ending at each flush or FUA entry and at the
/// log's end (the states the disk was certainly in), and per epoch (the
/// writes up to a flush or FUA entry) the sampled torn and reordered ones.
pub fn crash_states(
    log: &Log,
    base: &MemDevice,
    sampling: &Sampling,
    visit: &mut dyn FnMut(CrashState),
) -> Result<ReplayStats, LogError> {
    let entries = &log.entries;
    // The index of the k-th device-changing entry, for the known-bad replay.
    let dropped = sampling.drop_write.and_then(|k| {
        entries
            .iter()
            .enumerate()
            .filter(|(_, e)| e.changes_device())
            .nth(k)
            .map(|(i, _)| i)
    });
    // Durable points: the flush/FUA entries, and the end.
    let mut ends: Vec<usize> = (0..entries.len())
        .filter(|&i| entries[i].is_durable_point())
        .collect();
    if let Some(last) = entries.len().checked_sub(1) {
        if ends.last() != Some(&last) {
            ends.push(last);
        }
    }
    let last_mark_upto = |i: Option<usize>| -> Option<String> {
        let upto = i?;
        entries[..=upto]
            .iter()
            .rev()
            .find_map(|e| e.mark_text().map(str::to_string))
    };
    // Marks logged strictly between two positions.
    let marks_between = |from: Option<usize>, to: usize| -> Vec<Option<String>> {
        let start = from.map_or(0, |f| f + 1);
        entries[start..to]
            .iter()
            .filter_map(|e| e.mark_text().map(|t| Some(t.to_string())))
            .collect()
    };
    let mut stats = ReplayStats::default();
    let mut rng = SplitMix64::new(sampling.seed ^ 0x6c6f_672d_7772_6974);
    let cur = base.duplicate();
    let mut prev: Option<usize> = None;
    // The state before the log's first entry.
    let first_end = ends.first().copied().unwrap_or(entries.len());
    let mut marks = vec![None];
    marks.extend(marks_between(None, first_end));
    visit(CrashState {
        kind: StateKind::Prefix { upto: None },
        marks,
        device: cur.duplicate(),
    });
    stats.prefixes += 1;
    for (j, &end) in ends.iter().enumerate() {
        let start = prev.map_or(0, |p| p + 1);
        let e_end = &entries[end];
        // The epoch's writes in log order; a write carrying PREFLUSH lands
        // only after all of them (it cannot be reordered before them).
        let plain: Vec<usize> = (start..end)
            .filter(|&i| entries[i].changes_device() && Some(i) != dropped)
            .collect();
        let closing = (e_end.changes_device() && Some(end) != dropped).then_some(end);
        let mut reorderable = plain.clone();
        if let Some(c) = closing {
            if e_end.flags & FLUSH == 0 {
                reorderable.push(c);
            }
        }
        let mut ordered = plain.clone();
        ordered.extend(closing);
        if !ordered.is_empty() {
            stats.epochs += 1;
        }
        let epoch_marks = vec![last_mark_upto(Some(end))];
        let total: u64 = ordered.iter().map(|&i| entries[i].nr_sectors).sum();
        if total >= 2 {
            for _ in 0..sampling.torn {
                let cut = 1 + rng.next_u64() % (total - 1);
                let dev = cur.duplicate();
                let mut left = cut;
                for &i in &ordered {
                    if left == 0 {
                        break;
                    }
                    let n = entries[i].nr_sectors.min(left);
                    apply(&dev, log, i, Some(n), dropped)?;
                    left -= n;
                }
                visit(CrashState {
                    kind: StateKind::Torn { end, sectors: cut },
                    marks: epoch_marks.clone(),
                    device: dev,
                });
                stats.torn += 1;
            }
        }
        if reorderable.len() >= 2 {
            for _ in 0..sampling.reordered {
                // A non-empty proper subset, each write kept with odds 1/2.
                let n = reorderable.len();
                let mut kept: Vec<usize>;
                loop {
                    kept = reorderable
                        .iter()
                        .copied()
                        .filter(|_| rng.next_u64() & 1 == 1)
                        .collect();
                    if !kept.is_empty() && kept.len() < n {
                        break;
                    }
                }
                visit(reordered(&cur, log, end, kept, &epoch_marks, dropped)?);
                stats.reordered += 1;
            }
        }
        if reorderable.len() >= 2 {
            for &missing in reorderable.iter().take(sampling.all_but_one) {
                let kept: Vec<usize> = reorderable
                    .iter()
                    .copied()
                    .filter(|&i| i != missing)
                    .collect();
                visit(reordered(&cur, log, end, kept, &epoch_marks, dropped)?);
                stats.reordered += 1;
            }
        }
        for &i in &ordered {
            apply(&cur, log, i, None, dropped)?;
        }
        let next_end = ends.get(j + 1).copied().unwrap_or(entries.len());
        let mut marks = vec![last_mark_upto(Some(end))];
        for m in marks_between(Some(end), next_end) {
            if !marks.contains(&m) {
                marks.push(m);
            }
        }
        visit(CrashState {
            kind: StateKind::Prefix { upto: Some(end) },
            marks,
            device: cur.duplicate(),
        });
        stats.prefixes += 1;
        prev = Some(end);
    }
    Ok(stats)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::campaign::log_writes::format::{sample_log, Entry, END_MARK, FUA};

    fn read(dev: &MemDevice, sector: u64, n: usize) -> Vec<u8> {
        let mut b = vec![0u8; n];
        dev.read_at(sector * 512, &mut b).unwrap();
        b
    }

    fn states(log: &Log, s: &Sampling) -> Vec<CrashState> {
        let base = MemDevice::new(64 * 512);
        let mut out = Vec::new();
        crash_states(log, &base, s, &mut |c| out.push(c)).unwrap();
        out
    }

    #[test]
    fn prefixes_end_at_every_flush_and_fua_and_carry_their_marks() {
        let log = sample_log();
        let s = Sampling {
            torn: 0,
            reordered: 0,
            all_but_one: 0,
            ..Sampling::new(1)
        };
        let st = states(&log, &s);
        let kinds: Vec<String> = st.iter().map(|c| c.kind.slug()).collect();
        assert_eq!(kinds, ["base", "p0", "p1", "p5", "p9"]);
        let m = |v: &[Option<&str>]| -> Vec<Option<String>> {
            v.iter().map(|x| x.map(str::to_string)).collect()
        };
        assert_eq!(st[0].marks, m(&[None]));
        assert_eq!(st[1].marks, m(&[None]));
        // The super block landed, then op-2 was marked while it stood.
        assert_eq!(st[2].marks, m(&[None, Some("op-2")]));
        assert_eq!(st[3].marks, m(&[Some("op-2"), Some("op-3")]));
        assert_eq!(st[4].marks, m(&[Some(END_MARK)]));
        assert_eq!(read(&st[1].device, 2, 512), vec![0; 512]);
        assert_eq!(read(&st[2].device, 2, 1024), vec![0x11; 1024]);
        assert_eq!(read(&st[2].device, 8, 512), vec![0; 512]);
        assert_eq!(read(&st[3].device, 8, 512), vec![0x22; 512]);
        assert_eq!(read(&st[3].device, 16, 1536), vec![0x33; 1536]);
        assert_eq!(read(&st[4].device, 24, 512), vec![0x44; 512]);
        // The discard zeroed what the FUA write had put there.
        assert_eq!(read(&st[4].device, 4, 512), vec![0; 512]);
    }

    #[test]
    fn torn_and_reordered_states_stay_inside_their_epoch() {
        let log = sample_log();
        let mut seen_torn = Vec::new();
        for seed in 0..40 {
            let s = Sampling {
                torn: 1,
                reordered: 1,
                ..Sampling::new(seed)
            };
            for c in states(&log, &s) {
                match &c.kind {
                    StateKind::Torn { end: 5, sectors } => {
                        // Epoch entries 3 (1 sector) and 4 (3 sectors).
                        assert!((1..4).contains(sectors));
                        let a = read(&c.device, 8, 512);
                        let b = read(&c.device, 16, 1536);
                        assert_eq!(a, vec![0x22; 512]);
                        let landed = (*sectors - 1) as usize * 512;
                        assert!(b[..landed].iter().all(|&x| x == 0x33));
                        assert!(b[landed..].iter().all(|&x| x == 0));
                        // Before the epoch, the FUA super block had landed.
                        assert_eq!(read(&c.device, 2, 1024), vec![0x11; 1024]);
                        assert_eq!(c.marks, vec![Some("op-2".to_string())]);
                        seen_torn.push(*sectors);
                    }
                    StateKind::Reordered { end: 5, kept } => {
                        assert_eq!(kept.len(), 1);
                        let a = read(&c.device, 8, 512) == vec![0x22; 512];
                        let b = read(&c.device, 16, 1536) == vec![0x33; 1536];
                        assert_eq!((a, b), (kept == &[3], kept == &[4]));
                    }
                    // The FUA super block alone: torn within its two sectors.
                    StateKind::Torn { end: 1, sectors } => assert_eq!(*sectors, 1),
                    StateKind::Torn { end: 9, .. } | StateKind::Reordered { end: 9, .. } => {
                        assert_eq!(c.marks, vec![Some(END_MARK.to_string())]);
                    }
                    StateKind::Prefix { .. } => {}
                    other => panic!("a sampled state outside an epoch of writes: {other}"),
                }
            }
        }
        seen_torn.sort();
        seen_torn.dedup();
        assert_eq!(seen_torn, [1, 2, 3], "the seeds reach every cut");
    }

    #[test]
    fn every_write_of_an_epoch_is_left_out_once() {
        let s = Sampling {
            torn: 0,
            reordered: 0,
            ..Sampling::new(9)
        };
        let kept: Vec<Vec<usize>> = states(&sample_log(), &s)
            .into_iter()
            .filter_map(|c| match c.kind {
                StateKind::Reordered { end: 5, kept } => Some(kept),
                _ => None,
            })
            .collect();
        assert_eq!(kept, [vec![4], vec![3]]);
    }

    /// A PREFLUSH write (NILFS2's super block) lands only after the epoch's
    /// other writes: no reordered state has it without them all.
    #[test]
    fn a_preflush_write_is_never_reordered_before_its_epoch() {
        let log = Log {
            sector_size: 512,
            entries: vec![
                Entry::write(8, 512, vec![1; 512]),
                Entry::write(9, 512, vec![2; 512]),
                Entry {
                    flags: FLUSH | FUA,
                    ..Entry::write(2, 512, vec![3; 512])
                },
                Entry::mark(END_MARK),
            ],
        };
        for seed in 0..30 {
            for c in states(&log, &Sampling::new(seed)) {
                let sb = read(&c.device, 2, 512) == vec![3; 512];
                let all = read(&c.device, 8, 1024).iter().all(|&x| x != 0);
                assert!(!sb || all, "{}: the super block without its epoch", c.kind);
            }
        }
    }

    #[test]
    fn a_write_beyond_the_device_is_an_error() {
        let log = Log {
            sector_size: 512,
            entries: vec![Entry::write(1000, 512, vec![1; 512]), Entry::flush()],
        };
        let base = MemDevice::new(64 * 512);
        let r = crash_states(&log, &base, &Sampling::new(0), &mut |_| {});
        assert!(matches!(r, Err(LogError::BeyondDevice { entry: 0, .. })));
    }

    /// The known-bad replay loses one write, and the states show it.
    #[test]
    fn the_dropping_replay_loses_a_write() {
        let log = sample_log();
        let s = Sampling {
            drop_write: Some(1),
            ..Sampling::new(3)
        };
        let last = states(&log, &s).pop().unwrap();
        assert_eq!(read(&last.device, 8, 512), vec![0; 512]);
        let good = states(&log, &Sampling::new(3)).pop().unwrap();
        assert_eq!(read(&good.device, 8, 512), vec![0x22; 512]);
    }
}
