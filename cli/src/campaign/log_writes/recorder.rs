//! `Recorder`: a block device that logs its writes as the dm-log-writes
//! target does, for our own write path and the tests.

use std::sync::Mutex;

use nilfs::device::{BlockDevice, MemDevice};

use crate::campaign::log_writes::format::{Entry, Log, END_MARK};

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
    use crate::campaign::log_writes::format::describe_entry;

    fn read(dev: &MemDevice, sector: u64, n: usize) -> Vec<u8> {
        let mut b = vec![0u8; n];
        dev.read_at(sector * 512, &mut b).unwrap();
        b
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
