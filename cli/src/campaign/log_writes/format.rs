//! The dm-log-writes format: the log's super and entries, parsed with
//! typed errors and encoded back. It knows nothing of crash states.

use std::fmt;

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

/// A small log for the tests: writes, a mark and flushes.
#[cfg(test)]
pub(crate) fn sample_log() -> Log {
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
