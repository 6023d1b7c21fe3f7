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
//! [`Log::parse`] (`format`) refuses a malformed log with a typed [`LogError`] (never
//! a panic); [`crash_states`] (`replay`) replays a log onto a base image and hands
//! every state to a visitor; [`Recorder`] (`recorder`) writes a log of any
//! [`BlockDevice`]'s writes, for our own write path and for tests.

mod format;
mod recorder;
mod replay;

pub use format::{Log, END_MARK};
pub use recorder::Recorder;
#[cfg(test)]
pub use replay::replay_all;
pub use replay::{crash_states, CrashState, Sampling, StateKind};
