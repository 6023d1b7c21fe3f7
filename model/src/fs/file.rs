//! File contents: pwrite with its limits, pread, truncate (file.c,
//! inode.c's `nilfs_truncate`, the VFS's `generic_write_check_limits`,
//! `do_sys_truncate`).

use super::{Errno, FileData, Id, Kind, Namespace, MAX_FILE_SIZE, PAGE, R};
use crate::pattern::Pattern;
use crate::time::Stamp;
use std::sync::Arc;

impl Namespace {
    fn file(&self, path: &str) -> R<(Id, &FileData)> {
        let id = self.lookup(path, true)?;
        match &self.get(id).kind {
            Kind::File(f) => Ok((id, f)),
            Kind::Dir { .. } => Err(Errno::EISDIR),
            // truncate(2) of a FIFO or device: do_sys_truncate's
            // `!S_ISREG` (reads and writes of one are not meaningful to
            // the model: `step` refuses them before they get here).
            Kind::Special { .. } => Err(Errno::EINVAL),
            Kind::Symlink(_) => unreachable!("lookup followed the link"),
        }
    }

    /// The path names a FIFO, socket or device (after symlinks): opening
    /// one blocks or reaches a driver, which the model does not describe.
    pub fn is_special(&self, path: &str) -> bool {
        self.lookup(path, true)
            .is_ok_and(|id| matches!(self.get(id).kind, Kind::Special { .. }))
    }

    /// `pwrite(path, data, offset)` on a file opened `O_WRONLY` (no
    /// `O_TRUNC`; `dd conv=notrunc`). Returns the bytes written. The VFS's
    /// `generic_write_check_limits` gives EFBIG at or past the maximum size
    /// and shortens a write that would cross it. A write past EOF leaves a
    /// hole that reads as zeros.
    pub fn write(
        &self,
        path: &str,
        offset: u64,
        data: &Pattern,
        now: Stamp,
    ) -> R<(Namespace, u64)> {
        self.write_prefix(path, offset, data, data.len(), now)
    }

    /// A write of the first `want` bytes of `data` only (what a write that
    /// stopped early left).
    pub fn write_prefix(
        &self,
        path: &str,
        offset: u64,
        data: &Pattern,
        want: u64,
        now: Stamp,
    ) -> R<(Namespace, u64)> {
        let (id, f) = self.file(path)?;
        // pwrite64 takes a signed loff_t: one below 0 is EINVAL before
        // anything else (ksys_pwrite64).
        if offset > i64::MAX as u64 {
            return Err(Errno::EINVAL);
        }
        let want = want.min(data.len());
        if want == 0 {
            return Ok((self.clone(), 0));
        }
        if offset >= MAX_FILE_SIZE {
            return Err(Errno::EFBIG);
        }
        let n = want.min(MAX_FILE_SIZE - offset);
        let mut f = f.clone();
        let mut pos = offset;
        let end = offset + n;
        while pos < end {
            let idx = pos / PAGE;
            let within = (pos % PAGE) as usize;
            let take = ((PAGE as usize - within) as u64).min(end - pos) as usize;
            let mut page = match f.pages.get(&idx) {
                Some(p) => (**p).clone(),
                None => vec![0; PAGE as usize],
            };
            data.fill(pos - offset, &mut page[within..within + take]);
            f.pages.insert(idx, Arc::new(page));
            pos += take as u64;
        }
        f.size = f.size.max(end);
        let mut ns = self.clone();
        let ino = ns.get_mut(id);
        ino.kind = Kind::File(f);
        ino.mtime = now;
        ino.ctime = now;
        Ok((ns, n))
    }

    /// The file's mtime and ctime set to `now`, nothing else: what
    /// `file_update_time` leaves when the write after it fails.
    pub fn touch_times(&self, id: Id, now: Stamp) -> Namespace {
        let mut ns = self.clone();
        let ino = ns.get_mut(id);
        ino.mtime = now;
        ino.ctime = now;
        ns
    }

    /// Could setting inode `id`'s times to `now` leave them as they were
    /// (`inode_needs_update_time` finds nothing to do when the clock has
    /// not moved since they were set)?
    pub fn times_may_stay(&self, id: Id, now: Stamp) -> bool {
        let ino = self.get(id);
        ino.mtime.may_equal(now) && ino.ctime.may_equal(now)
    }

    /// Does setting inode `id`'s times to `now` surely leave them as they
    /// were (an injected clock that has not moved)?
    pub fn times_surely_stay(&self, id: Id, now: Stamp) -> bool {
        let ino = self.get(id);
        ino.mtime.surely_equal(now) && ino.ctime.surely_equal(now)
    }

    /// `pread(path, len, offset)`: the bytes in `[offset, min(size,
    /// offset+len))`; holes read as zeros; nothing at or past EOF.
    pub fn read(&self, path: &str, offset: u64, len: u64) -> R<Vec<u8>> {
        let (_, f) = self.file(path)?;
        Ok(read_data(f, offset, len))
    }

    /// `truncate(path, size)`: shrinking discards the bytes past `size`
    /// (so growing again reads zeros, `nilfs_truncate` +
    /// `block_truncate_page`); growing adds a hole. A length past the
    /// maximum is a negative `loff_t` (the maximum is `i64::MAX`), which
    /// `do_sys_truncate` refuses with EINVAL before `inode_newsize_ok`'s
    /// EFBIG could apply.
    pub fn truncate(&self, path: &str, size: u64, now: Stamp) -> R<Namespace> {
        let (id, f) = self.file(path)?;
        // The largest length is nilfs2's `s_maxbytes` too
        // (`MAX_FILE_SIZE`), so `inode_newsize_ok`'s EFBIG never applies.
        if size > i64::MAX as u64 {
            return Err(Errno::EINVAL);
        }
        let mut f = f.clone();
        if size < f.size {
            let keep = size.div_ceil(PAGE);
            let drop: Vec<u64> = f.pages.range(keep..).map(|(k, _)| *k).collect();
            for k in drop {
                f.pages.remove(&k);
            }
            let tail = (size % PAGE) as usize;
            if tail > 0 {
                if let Some(p) = f.pages.get(&(size / PAGE)) {
                    let mut p = (**p).clone();
                    p[tail..].fill(0);
                    f.pages.insert(size / PAGE, Arc::new(p));
                }
            }
        }
        f.size = size;
        let mut ns = self.clone();
        let ino = ns.get_mut(id);
        ino.kind = Kind::File(f);
        ino.mtime = now;
        ino.ctime = now;
        Ok(ns)
    }
}

/// The bytes of `f` in `[offset, offset + len)`, cut at EOF.
pub fn read_data(f: &FileData, offset: u64, len: u64) -> Vec<u8> {
    if offset >= f.size {
        return Vec::new();
    }
    let end = f.size.min(offset.saturating_add(len));
    let mut out = vec![0u8; (end - offset) as usize];
    let mut pos = offset;
    while pos < end {
        let idx = pos / PAGE;
        let within = (pos % PAGE) as usize;
        let take = ((PAGE as usize - within) as u64).min(end - pos) as usize;
        if let Some(p) = f.pages.get(&idx) {
            let at = (pos - offset) as usize;
            out[at..at + take].copy_from_slice(&p[within..within + take]);
        }
        pos += take as u64;
    }
    out
}
