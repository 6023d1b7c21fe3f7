//! A block device backed by a host file (an image file or a block device
//! node), for the command-line tools. Reads and writes go straight to the
//! file at their offsets.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::Path;

use super::{check_range, BlockDevice};
use crate::{Error, Result};

/// An image file opened as a device.
pub struct FileDevice {
    file: File,
    size: u64,
    path: String,
}

impl FileDevice {
    /// Open `path` read-only.
    pub fn open_read_only(path: &Path) -> Result<Self> {
        Self::open(path, false)
    }

    /// Open `path` for reading and writing.
    pub fn open_read_write(path: &Path) -> Result<Self> {
        Self::open(path, true)
    }

    fn open(path: &Path, write: bool) -> Result<Self> {
        let host = |e: std::io::Error| Error::Host {
            path: path.display().to_string(),
            detail: e.to_string(),
        };
        let file = OpenOptions::new()
            .read(true)
            .write(write)
            .open(path)
            .map_err(host)?;
        let meta = file.metadata().map_err(host)?;
        let size = if meta.is_file() {
            meta.len()
        } else {
            // A block device reports its size by seeking to the end.
            use std::io::{Seek, SeekFrom};
            (&file).seek(SeekFrom::End(0)).map_err(host)?
        };
        // The exact size: mkfs.nilfs2 records st_size in s_dev_size even when
        // it is not a whole number of sectors.
        Ok(FileDevice {
            file,
            size,
            path: path.display().to_string(),
        })
    }

    fn io(&self, off: u64, e: std::io::Error) -> Error {
        Error::Io {
            blocknr: off / super::SECTOR_SIZE,
            detail: format!("{}: {e}", self.path),
        }
    }
}

impl BlockDevice for FileDevice {
    fn size_bytes(&self) -> u64 {
        self.size
    }

    fn read_at(&self, off: u64, buf: &mut [u8]) -> Result<()> {
        check_range(self.size, off, buf.len())?;
        self.file
            .read_exact_at(buf, off)
            .map_err(|e| self.io(off, e))
    }

    fn write_at(&self, off: u64, buf: &[u8]) -> Result<()> {
        check_range(self.size, off, buf.len())?;
        self.file
            .write_all_at(buf, off)
            .map_err(|e| self.io(off, e))
    }

    fn flush(&self) -> Result<()> {
        self.file.sync_data().map_err(|e| self.io(0, e))
    }
}
