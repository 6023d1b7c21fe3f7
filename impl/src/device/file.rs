//! A block device backed by a host file (an image file or a block device
//! node), for the command-line tools. Reads and writes go straight to the
//! file at their offsets.

use std::fs::{File, OpenOptions};
use std::io::IoSlice;
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

    fn write_vectored_at(&self, off: u64, bufs: &[&[u8]]) -> Result<()> {
        let len = bufs.iter().map(|b| b.len()).sum();
        check_range(self.size, off, len)?;
        // pwritev, at most IOV_MAX (1024) pieces a call, resumed after a
        // short write.
        let mut slices: Vec<IoSlice<'_>> = bufs.iter().map(|b| IoSlice::new(b)).collect();
        let mut rest = &mut slices[..];
        let mut at = off;
        while !rest.is_empty() {
            let batch = rest.len().min(1024);
            let n = match rustix::io::pwritev(&self.file, &rest[..batch], at) {
                Ok(0) => {
                    let e =
                        std::io::Error::new(std::io::ErrorKind::WriteZero, "pwritev wrote 0 bytes");
                    return Err(self.io(at, e));
                }
                Ok(n) => n,
                Err(rustix::io::Errno::INTR) => continue,
                Err(e) => return Err(self.io(at, e.into())),
            };
            at += n as u64;
            IoSlice::advance_slices(&mut rest, n);
        }
        Ok(())
    }

    fn flush(&self) -> Result<()> {
        self.file.sync_data().map_err(|e| self.io(0, e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// More pieces than one pwritev takes (IOV_MAX is 1024), of mixed
    /// sizes: the file holds their concatenation.
    #[test]
    fn a_vectored_write_of_many_pieces_lands_whole() {
        let path = std::env::temp_dir().join(format!("nilfs-ref-vec-{}.img", std::process::id()));
        std::fs::write(&path, vec![0u8; 4 << 20]).unwrap();
        let dev = FileDevice::open_read_write(&path).unwrap();
        let pieces: Vec<Vec<u8>> = (0..2500u32)
            .map(|i| vec![(i % 251) as u8; if i % 3 == 0 { 1024 } else { 512 }])
            .collect();
        let slices: Vec<&[u8]> = pieces.iter().map(|p| &p[..]).collect();
        dev.write_vectored_at(4096, &slices).unwrap();
        let want = slices.concat();
        let mut got = vec![0u8; want.len()];
        dev.read_at(4096, &mut got).unwrap();
        assert!(got == want);
        assert!(dev.write_vectored_at((4 << 20) - 512, &slices).is_err());
        drop(dev);
        std::fs::remove_file(&path).unwrap();
    }
}
