//! dm-log-writes logs: the block writes a file system made, in the order a
//! disk could have made them durable, and the crash states they allow.
//!
//! The format is Linux's (drivers/md/dm-log-writes.c; Documentation/
//! admin-guide/device-mapper/log-writes.rst). Sector 0 of the log device
//! holds the super (`magic`, `version`, `nr_entries`, `sectorsize`, little
//! endian); entries follow from byte `sectorsize`, each one sector of
//! header (`sector`, `nr_sectors`, `flags`, `data_len`; a mark's text right
//! after it) and then, unless it is a discard, its `nr_sectors` sectors of
//! data. Sector numbers and counts are in units of `sectorsize`.
//!
//! What the order means (`log_writes_map`, `normal_end_io`, `log_mark`): a
//! plain write is held back when it completes and logged only when a flush
//! that was issued after it completes, immediately before that flush; a FUA
//! write is logged when it completes; a mark is logged when it is asked
//! for. So any prefix of the log is a state the disk may have been in when
//! power failed: every write in it had been made durable by a flush (or
//! FUA) that completed, and every write after it either completed later or
//! was still in a volatile cache. Between two flushes the cache may have
//! written back any subset of the completed writes, in any order, and a
//! write may have stopped partway (only whole sectors land) — the torn and
//! reordered states, sampled with a seed.
//!
//! [`Log::parse`] refuses a malformed log with a typed [`LogError`] (never
//! a panic); [`crash_states`] replays a log onto a base image and hands
//! every state to a visitor; [`Recorder`] writes a log of any
//! [`BlockDevice`]'s writes, for our own write path and for tests.

use std::fmt;
use std::sync::Mutex;

use nilfs::device::sim::SplitMix64;
use nilfs::device::{BlockDevice, MemDevice};

/// `WRITE_LOG_MAGIC`.
pub const MAGIC: u64 = 0x006a_7366_7773_6872;
/// `WRITE_LOG_VERSION`.
pub const VERSION: u64 = 1;
/// `LOG_FLUSH_FLAG`: a REQ_PREFLUSH bio (every write logged before it is durable).
pub const FLUSH: u64 = 1 << 0;
/// `LOG_FUA_FLAG`: a REQ_FUA bio (durable when it completed).
pub const FUA: u64 = 1 << 1;
/// `LOG_DISCARD_FLAG`.
pub const DISCARD: u64 = 1 << 2;
/// `LOG_MARK_FLAG`: a `dmsetup message DEV 0 mark TEXT`.
pub const MARK: u64 = 1 << 3;
/// `LOG_METADATA_FLAG`: a REQ_META bio (no meaning for the replay).
pub const METADATA: u64 = 1 << 4;
const KNOWN_FLAGS: u64 = FLUSH | FUA | DISCARD | MARK | METADATA;

/// The mark `log_writes_dtr` logs when the target is removed: a log that
/// ends without it was cut short (the log device filled up, or the target
/// was never removed).
pub const END_MARK: &str = "dm-log-writes-end";

/// `struct log_write_super` and `struct log_write_entry` are 28 and 32
/// bytes at the start of their sectors.
const SUPER_LEN: usize = 28;
const ENTRY_LEN: usize = 32;

/// One logged entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    /// First sector written (units of the log's sector size).
    pub sector: u64,
    pub nr_sectors: u64,
    pub flags: u64,
    /// A write's data (`nr_sectors` sectors); a mark's text; else empty.
    pub data: Vec<u8>,
}

impl Entry {
    /// A plain write of `data` at `sector`.
    pub fn write(sector: u64, sector_size: u32, data: Vec<u8>) -> Entry {
        Entry {
            sector,
            nr_sectors: data.len() as u64 / u64::from(sector_size),
            flags: 0,
            data,
        }
    }
    /// An empty flush.
    pub fn flush() -> Entry {
        Entry {
            sector: 0,
            nr_sectors: 0,
            flags: FLUSH,
            data: Vec::new(),
        }
    }
    /// A mark.
    pub fn mark(text: &str) -> Entry {
        Entry {
            sector: 0,
            nr_sectors: 0,
            flags: MARK,
            data: text.as_bytes().to_vec(),
        }
    }
    /// The mark's text, if this is a mark.
    pub fn mark_text(&self) -> Option<&str> {
        if self.flags & MARK == 0 {
            return None;
        }
        std::str::from_utf8(&self.data).ok()
    }
    /// Changes the device: a write with data, or a discard.
    pub fn changes_device(&self) -> bool {
        self.flags & MARK == 0 && self.nr_sectors > 0
    }
    /// Ends an epoch: what came before it is durable once it is logged.
    pub fn is_durable_point(&self) -> bool {
        self.flags & (FLUSH | FUA) != 0
    }
}

/// A whole log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Log {
    /// `sectorsize`: the logged device's logical block size.
    pub sector_size: u32,
    pub entries: Vec<Entry>,
}

/// Why a log cannot be read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LogError {
    /// Shorter than the super.
    TooShort {
        len: u64,
    },
    BadMagic(u64),
    BadVersion(u64),
    /// Not a power of two from 512 to 64 KiB.
    BadSectorSize(u32),
    /// Entry `entry` (0-based) at byte `offset` needs `need` bytes the log
    /// does not have.
    Truncated {
        entry: u64,
        offset: u64,
        need: u64,
    },
    /// Entry `entry` is not one dm-log-writes writes.
    BadEntry {
        entry: u64,
        offset: u64,
        why: String,
    },
    /// The last entry is not the end mark: the log stopped early.
    Unterminated {
        entries: u64,
        last: String,
    },
    /// Entry `entry` writes beyond the end of the device it is replayed on.
    BeyondDevice {
        entry: u64,
        end_byte: u64,
        device_bytes: u64,
    },
    /// The device refused a replayed write.
    Device {
        entry: u64,
        detail: String,
    },
}

impl fmt::Display for LogError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LogError::TooShort { len } => {
                write!(f, "dm-log-writes log of {len} bytes: shorter than its super")
            }
            LogError::BadMagic(m) => write!(f, "not a dm-log-writes log: magic {m:#x}"),
            LogError::BadVersion(v) => write!(f, "dm-log-writes log version {v} (known: 1)"),
            LogError::BadSectorSize(s) => write!(f, "dm-log-writes log sector size {s}"),
            LogError::Truncated {
                entry,
                offset,
                need,
            } => write!(
                f,
                "dm-log-writes log truncated: entry {entry} at byte {offset} needs {need} bytes more"
            ),
            LogError::BadEntry { entry, offset, why } => {
                write!(f, "dm-log-writes entry {entry} at byte {offset}: {why}")
            }
            LogError::Unterminated { entries, last } => write!(
                f,
                "dm-log-writes log of {entries} entries does not end with the mark {END_MARK:?} \
                 (last entry: {last}): logging stopped early (log device full?)"
            ),
            LogError::BeyondDevice {
                entry,
                end_byte,
                device_bytes,
            } => write!(
                f,
                "dm-log-writes entry {entry} writes up to byte {end_byte} of a {device_bytes}-byte device"
            ),
            LogError::Device { entry, detail } => {
                write!(f, "replaying dm-log-writes entry {entry}: {detail}")
            }
        }
    }
}

impl std::error::Error for LogError {}

fn le64(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

impl Log {
    /// Reads a log device's contents (any trailing bytes past the last
    /// entry are ignored: the device is larger than its log).
    pub fn parse(bytes: &[u8]) -> Result<Log, LogError> {
        if bytes.len() < SUPER_LEN {
            return Err(LogError::TooShort {
                len: bytes.len() as u64,
            });
        }
        let magic = le64(bytes, 0);
        if magic != MAGIC {
            return Err(LogError::BadMagic(magic));
        }
        let version = le64(bytes, 8);
        if version != VERSION {
            return Err(LogError::BadVersion(version));
        }
        let nr_entries = le64(bytes, 16);
        let sector_size = u32::from_le_bytes(bytes[24..28].try_into().expect("4 bytes"));
        if !sector_size.is_power_of_two() || !(512..=65536).contains(&sector_size) {
            return Err(LogError::BadSectorSize(sector_size));
        }
        let ss = u64::from(sector_size);
        let len = bytes.len() as u64;
        let mut entries = Vec::new();
        let mut off = ss;
        for entry in 0..nr_entries {
            let at = off;
            let bad = |why: &str| LogError::BadEntry {
                entry,
                offset: at,
                why: why.to_string(),
            };
            if len < off || len - off < ss {
                return Err(LogError::Truncated {
                    entry,
                    offset: off,
                    need: ss - len.saturating_sub(off).min(ss),
                });
            }
            let head = &bytes[off as usize..(off + ss) as usize];
            let (sector, nr_sectors, flags, data_len) =
                (le64(head, 0), le64(head, 8), le64(head, 16), le64(head, 24));
            if flags & !KNOWN_FLAGS != 0 {
                return Err(bad(&format!("unknown flags {flags:#x}")));
            }
            let next = off + ss;
            let data = if flags & MARK != 0 {
                if flags & !MARK != 0 || nr_sectors != 0 {
                    return Err(bad("a mark with other flags or sectors"));
                }
                // log_mark keeps at most sectorsize - entry - 1 bytes.
                if data_len >= ss - ENTRY_LEN as u64 {
                    return Err(bad(&format!("a mark of {data_len} bytes")));
                }
                let text = &head[ENTRY_LEN..ENTRY_LEN + data_len as usize];
                if std::str::from_utf8(text).is_err() {
                    return Err(bad("a mark that is not UTF-8"));
                }
                off = next;
                text.to_vec()
            } else if data_len != 0 {
                // Inline data: only DAX logging ever wrote it, and only
                // with a mark-free entry of its own; we never see it.
                return Err(bad(&format!("inline data of {data_len} bytes")));
            } else if flags & DISCARD != 0 {
                if flags & (FLUSH | FUA) != 0 {
                    return Err(bad("a discard with FLUSH or FUA"));
                }
                off = next;
                Vec::new()
            } else {
                let need = nr_sectors
                    .checked_mul(ss)
                    .ok_or_else(|| bad(&format!("{nr_sectors} sectors overflow a byte count")))?;
                if len < next || len - next < need {
                    return Err(LogError::Truncated {
                        entry,
                        offset: off,
                        need: need - len.saturating_sub(next).min(need),
                    });
                }
                off = next + need;
                bytes[next as usize..(next + need) as usize].to_vec()
            };
            if sector.checked_add(nr_sectors).is_none() {
                return Err(bad("sector + nr_sectors overflows"));
            }
            entries.push(Entry {
                sector,
                nr_sectors,
                flags,
                data,
            });
        }
        Ok(Log {
            sector_size,
            entries,
        })
    }

    /// [`Log::parse`], and the log must end with [`END_MARK`].
    pub fn parse_complete(bytes: &[u8]) -> Result<Log, LogError> {
        let log = Log::parse(bytes)?;
        match log.entries.last() {
            Some(e) if e.mark_text() == Some(END_MARK) => Ok(log),
            last => Err(LogError::Unterminated {
                entries: log.entries.len() as u64,
                last: last.map_or("none".to_string(), describe_entry),
            }),
        }
    }

    /// The log as dm-log-writes writes it.
    pub fn encode(&self) -> Vec<u8> {
        let ss = self.sector_size as usize;
        let mut out = vec![0u8; ss];
        out[0..8].copy_from_slice(&MAGIC.to_le_bytes());
        out[8..16].copy_from_slice(&VERSION.to_le_bytes());
        out[16..24].copy_from_slice(&(self.entries.len() as u64).to_le_bytes());
        out[24..28].copy_from_slice(&self.sector_size.to_le_bytes());
        for e in &self.entries {
            let mut head = vec![0u8; ss];
            head[0..8].copy_from_slice(&e.sector.to_le_bytes());
            head[8..16].copy_from_slice(&e.nr_sectors.to_le_bytes());
            head[16..24].copy_from_slice(&e.flags.to_le_bytes());
            let is_mark = e.flags & MARK != 0;
            let data_len = if is_mark { e.data.len() as u64 } else { 0 };
            head[24..32].copy_from_slice(&data_len.to_le_bytes());
            if is_mark {
                head[ENTRY_LEN..ENTRY_LEN + e.data.len()].copy_from_slice(&e.data);
            }
            out.extend_from_slice(&head);
            if !is_mark && e.flags & DISCARD == 0 {
                out.extend_from_slice(&e.data);
            }
        }
        out
    }

    /// Entries that change the device.
    pub fn writes(&self) -> usize {
        self.entries.iter().filter(|e| e.changes_device()).count()
    }
}

/// One line about an entry (for messages).
pub fn describe_entry(e: &Entry) -> String {
    if let Some(t) = e.mark_text() {
        return format!("mark {t:?}");
    }
    let mut f = Vec::new();
    for (bit, name) in [
        (FLUSH, "FLUSH"),
        (FUA, "FUA"),
        (DISCARD, "DISCARD"),
        (METADATA, "META"),
    ] {
        if e.flags & bit != 0 {
            f.push(name);
        }
    }
    format!(
        "{} sectors at {}{}",
        e.nr_sectors,
        e.sector,
        if f.is_empty() {
            String::new()
        } else {
            format!(" [{}]", f.join("|"))
        }
    )
}

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
                let dev = cur.duplicate();
                for &i in &kept {
                    apply(&dev, log, i, None, dropped)?;
                }
                visit(CrashState {
                    kind: StateKind::Reordered { end, kept },
                    marks: epoch_marks.clone(),
                    device: dev,
                });
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
                let dev = cur.duplicate();
                for &i in &kept {
                    apply(&dev, log, i, None, dropped)?;
                }
                visit(CrashState {
                    kind: StateKind::Reordered { end, kept },
                    marks: epoch_marks.clone(),
                    device: dev,
                });
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

/// A block device that logs every write the way dm-log-writes does, with
/// 512-byte sectors: writes are held until the next [`BlockDevice::flush`]
/// and logged just before it; [`Recorder::mark`] logs a mark. Recording
/// starts with [`Recorder::start`] (writes before it are the base image).
pub struct Recorder {
    inner: MemDevice,
    state: Mutex<RecState>,
}

#[derive(Default)]
struct RecState {
    base: Option<MemDevice>,
    entries: Vec<Entry>,
    unflushed: Vec<Entry>,
}

impl Recorder {
    pub fn new(inner: MemDevice) -> Recorder {
        Recorder {
            inner,
            state: Mutex::new(RecState::default()),
        }
    }
    fn lock(&self) -> std::sync::MutexGuard<'_, RecState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
    /// Takes the base image and starts logging (once; later calls do nothing).
    pub fn start(&self) {
        let mut s = self.lock();
        if s.base.is_none() {
            s.base = Some(self.inner.duplicate());
        }
    }
    /// Logs a mark (starting the recording if it had not started).
    pub fn mark(&self, text: &str) {
        self.start();
        self.lock().entries.push(Entry::mark(text));
    }
    /// Ends the recording as the target's removal does: the writes never
    /// flushed, then the end mark. Returns the base image and the log.
    pub fn finish(self) -> (MemDevice, Log) {
        self.start();
        let mut s = self.state.into_inner().unwrap_or_else(|p| p.into_inner());
        let tail = std::mem::take(&mut s.unflushed);
        s.entries.extend(tail);
        s.entries.push(Entry::mark(END_MARK));
        (
            s.base.expect("started"),
            Log {
                sector_size: 512,
                entries: s.entries,
            },
        )
    }
    /// The device as it is now.
    pub fn device(&self) -> &MemDevice {
        &self.inner
    }
}

impl BlockDevice for Recorder {
    fn size_bytes(&self) -> u64 {
        self.inner.size_bytes()
    }
    fn read_at(&self, off: u64, buf: &mut [u8]) -> nilfs::Result<()> {
        self.inner.read_at(off, buf)
    }
    fn write_at(&self, off: u64, buf: &[u8]) -> nilfs::Result<()> {
        self.inner.write_at(off, buf)?;
        let mut s = self.lock();
        if s.base.is_some() && !buf.is_empty() {
            s.unflushed.push(Entry::write(off / 512, 512, buf.to_vec()));
        }
        Ok(())
    }
    fn flush(&self) -> nilfs::Result<()> {
        self.inner.flush()?;
        let mut s = self.lock();
        if s.base.is_some() {
            let held = std::mem::take(&mut s.unflushed);
            s.entries.extend(held);
            s.entries.push(Entry::flush());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample_log() -> Log {
        Log {
            sector_size: 512,
            entries: vec![
                Entry {
                    flags: FLUSH | FUA,
                    ..Entry::flush()
                },
                Entry {
                    flags: FUA,
                    ..Entry::write(2, 512, vec![0x11; 1024])
                },
                Entry::mark("op-2"),
                Entry::write(8, 512, vec![0x22; 512]),
                Entry {
                    flags: METADATA,
                    ..Entry::write(16, 512, vec![0x33; 1536])
                },
                Entry::flush(),
                Entry::mark("op-3"),
                Entry {
                    sector: 4,
                    nr_sectors: 2,
                    flags: DISCARD,
                    data: vec![],
                },
                Entry::write(24, 512, vec![0x44; 512]),
                Entry::mark(END_MARK),
            ],
        }
    }

    #[test]
    fn a_log_round_trips_through_its_encoding() {
        let log = sample_log();
        let bytes = log.encode();
        assert_eq!(Log::parse(&bytes).unwrap(), log);
        assert_eq!(Log::parse_complete(&bytes).unwrap(), log);
        // Trailing space on the log device is not part of the log.
        let mut padded = bytes.clone();
        padded.resize(bytes.len() + 4096, 0);
        assert_eq!(Log::parse(&padded).unwrap(), log);
        assert_eq!(log.writes(), 5);
    }

    /// The layout as the kernel's own log of a mount, a write and sync,
    /// an unmount (seen in the guest: an empty FLUSH|FUA entry, then the
    /// super block as a FUA write, a mark, two plain writes and a flush).
    #[test]
    fn the_kernels_layout_parses() {
        let mut b = vec![0u8; 512];
        b[0..8].copy_from_slice(&MAGIC.to_le_bytes());
        b[8..16].copy_from_slice(&1u64.to_le_bytes());
        b[16..24].copy_from_slice(&3u64.to_le_bytes());
        b[24..28].copy_from_slice(&512u32.to_le_bytes());
        let head = |sector: u64, n: u64, flags: u64, dl: u64| {
            let mut h = vec![0u8; 512];
            for (k, v) in [sector, n, flags, dl].iter().enumerate() {
                h[k * 8..k * 8 + 8].copy_from_slice(&v.to_le_bytes());
            }
            h
        };
        b.extend(head(2, 0, 3, 0));
        b.extend(head(2, 2, 2, 0));
        b.extend(vec![0xAB; 1024]);
        let mut m = head(0, 0, 8, 4);
        m[32..36].copy_from_slice(b"op-1");
        b.extend(m);
        let log = Log::parse(&b).unwrap();
        assert_eq!(log.entries.len(), 3);
        assert!(log.entries[0].is_durable_point() && !log.entries[0].changes_device());
        assert_eq!(log.entries[1].data, vec![0xAB; 1024]);
        assert_eq!(log.entries[2].mark_text(), Some("op-1"));
        // Without the end mark, the campaign refuses it.
        assert!(matches!(
            Log::parse_complete(&b),
            Err(LogError::Unterminated { entries: 3, .. })
        ));
    }

    #[test]
    fn malformed_logs_are_typed_errors_never_panics() {
        let good = sample_log().encode();
        assert_eq!(Log::parse(&good[..10]), Err(LogError::TooShort { len: 10 }));
        let mut b = good.clone();
        b[0] ^= 1;
        assert!(matches!(Log::parse(&b), Err(LogError::BadMagic(_))));
        let mut b = good.clone();
        b[8] = 2;
        assert_eq!(Log::parse(&b), Err(LogError::BadVersion(2)));
        let mut b = good.clone();
        b[24..28].copy_from_slice(&500u32.to_le_bytes());
        assert_eq!(Log::parse(&b), Err(LogError::BadSectorSize(500)));
        // More entries claimed than written.
        let mut b = good.clone();
        b[16..24].copy_from_slice(&11u64.to_le_bytes());
        assert!(matches!(
            Log::parse(&b),
            Err(LogError::Truncated { entry: 10, .. })
        ));
        // A write whose data is cut off.
        let mut b = good.clone();
        b[16..24].copy_from_slice(&2u64.to_le_bytes());
        assert!(Log::parse(&b[..512 * 3]).is_err());
        // An unknown flag bit, a mark with sectors, a huge sector count.
        let entry1 = 512 * 2; // entry 0 is one header sector
        for (field, value) in [(16, 1u64 << 9), (8, u64::MAX / 8)] {
            let mut b = good.clone();
            b[entry1 + field..entry1 + field + 8].copy_from_slice(&value.to_le_bytes());
            let r = Log::parse(&b);
            assert!(
                matches!(
                    r,
                    Err(LogError::BadEntry { entry: 1, .. }) | Err(LogError::Truncated { .. })
                ),
                "{r:?}"
            );
        }
        // Every truncation and every single-byte corruption of the header
        // area is an error or a log, never a panic.
        for cut in 0..good.len() {
            let _ = Log::parse(&good[..cut]);
        }
        for at in 0..1536 {
            let mut b = good.clone();
            b[at] ^= 0xFF;
            let _ = Log::parse(&b);
        }
    }

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

    #[test]
    fn the_recorder_logs_writes_at_their_flush() {
        let rec = Recorder::new(MemDevice::new(64 * 512));
        rec.write_at(0, &[9; 512]).unwrap(); // before start: the base
        rec.start();
        rec.write_at(512, &[1; 512]).unwrap();
        rec.mark("op-1");
        rec.write_at(1024, &[2; 1024]).unwrap();
        rec.flush().unwrap();
        rec.write_at(4096, &[3; 512]).unwrap();
        let (base, log) = rec.finish();
        assert_eq!(read(&base, 0, 512), vec![9; 512]);
        assert_eq!(read(&base, 1, 512), vec![0; 512]);
        let slugs: Vec<String> = log.entries.iter().map(describe_entry).collect();
        assert_eq!(
            slugs,
            [
                "mark \"op-1\"",
                "1 sectors at 1",
                "2 sectors at 2",
                "0 sectors at 0 [FLUSH]",
                "1 sectors at 8",
                "mark \"dm-log-writes-end\""
            ]
        );
        assert_eq!(Log::parse_complete(&log.encode()).unwrap(), log);
    }
}
