//! Block devices: the only seam between the filesystem and storage.
//!
//! [`BlockDevice`] is deliberately narrow (size, read, write, flush) and
//! sector-addressed like the Linux block layer: offsets and lengths are
//! multiples of [`SECTOR_SIZE`]. The filesystem block size is not the
//! device's business: the super block lives at byte 1024 whatever it is.

mod cut;
mod file;
mod image;
mod mem;
pub mod sim;

pub use cut::CutDevice;
pub use file::FileDevice;
pub use image::{
    export_image, import_image, import_image_bytes, import_image_limited, DeclaredSize,
    DECLARED_PREFIX,
};
pub use mem::MemDevice;
pub use sim::{Bio, BioHandle, CompletionOrder, DeviceModel, SimConfig, SimDevice, Submitted};

use crate::{Error, Result};

/// The device addressing unit, in bytes.
pub const SECTOR_SIZE: u64 = 512;

/// A block device. Implementations must be usable from several threads: all
/// methods take `&self`.
pub trait BlockDevice: Send + Sync {
    /// Device size in bytes. Usually a multiple of [`SECTOR_SIZE`]; an image
    /// file may end in a partial sector, which no request can reach.
    fn size_bytes(&self) -> u64;
    /// Fill `buf` from byte offset `off`.
    fn read_at(&self, off: u64, buf: &mut [u8]) -> Result<()>;
    /// Write `buf` at byte offset `off`.
    fn write_at(&self, off: u64, buf: &[u8]) -> Result<()>;
    /// Write `bufs` one after another from byte offset `off`, as one
    /// request: exactly what [`BlockDevice::write_at`] of their
    /// concatenation does, which is the default. A device that can copy
    /// each piece straight into place overrides it, so that a log's
    /// payload is copied once, from the dirty pages into the device,
    /// rather than twice (the kernel's `bio` of page segments). Wrappers
    /// that count, cut or reorder requests keep the default, so a log is
    /// still one request to them.
    fn write_vectored_at(&self, off: u64, bufs: &[&[u8]]) -> Result<()> {
        self.write_at(off, &bufs.concat())
    }
    /// Make every completed write durable.
    fn flush(&self) -> Result<()>;
    /// A count of the write requests the contents have received, for a
    /// device that keeps one; `None` (the default) for one that does not.
    /// Two equal `Some` answers mean that no write came between them, so
    /// whatever was computed from the contents alone in between still
    /// holds (lockstep's abstraction function reuses its last answer).
    /// A wrapper that writes around its inner device keeps the default.
    fn write_generation(&self) -> Option<u64> {
        None
    }
    /// The [`BlockDevice::write_generation`] of the last write request
    /// that may have changed a byte of `[off, off + len)` (0 if none ever
    /// did), for a device that keeps one; `None` (the default) for one that
    /// does not. An answer of at most `g` means those bytes are what they
    /// were at generation `g`, so whatever was computed from them alone
    /// then still holds (lockstep's abstraction function skips the
    /// read-back of a checkpoint none of whose blocks changed). It may
    /// name a later write than the last real change, never an earlier one.
    /// A wrapper that writes around its inner device keeps the default.
    fn last_change(&self, off: u64, len: u64) -> Option<u64> {
        let _ = (off, len);
        None
    }
}

/// Whether every byte of `b` is 0: a sparse device keeps written zeros as
/// holes, a page digest skips pages of zeros. Compared a page at a time
/// against a page of zeros, which is one `bcmp` call per page: vectorised
/// by the C library, and left alone by coverage instrumentation, which
/// would otherwise trace every word compared (a fuzz target's mkfs zeroes
/// 2 MiB per execution).
pub fn is_zero(b: &[u8]) -> bool {
    static ZEROS: [u8; 4096] = [0; 4096];
    b.chunks(ZEROS.len()).all(|c| c == &ZEROS[..c.len()])
}

/// Check that `[off, off+len)` is sector-aligned and inside a device of `size` bytes.
pub fn check_range(size: u64, off: u64, len: usize) -> Result<()> {
    let len = len as u64;
    if !off.is_multiple_of(SECTOR_SIZE) || !len.is_multiple_of(SECTOR_SIZE) {
        return Err(Error::Io {
            blocknr: off / SECTOR_SIZE,
            detail: format!("unaligned request: offset {off}, length {len}"),
        });
    }
    match off.checked_add(len) {
        Some(end) if end <= size => Ok(()),
        _ => Err(Error::Io {
            blocknr: off / SECTOR_SIZE,
            detail: format!("request [{off}, +{len}) beyond device end {size}"),
        }),
    }
}

/// Read filesystem block `blocknr` of `block_size` bytes.
pub fn read_block(dev: &dyn BlockDevice, block_size: u32, blocknr: u64) -> Result<Vec<u8>> {
    let mut buf = vec![0u8; block_size as usize];
    read_blocks_into(dev, block_size, blocknr, &mut buf)?;
    Ok(buf)
}

/// Read `buf.len()` bytes (whole blocks) from filesystem block `blocknr`
/// on; an I/O error names the first block.
pub fn read_blocks_into(
    dev: &dyn BlockDevice,
    block_size: u32,
    blocknr: u64,
    buf: &mut [u8],
) -> Result<()> {
    let off = blocknr
        .checked_mul(u64::from(block_size))
        .ok_or_else(|| Error::Io {
            blocknr,
            detail: "block number overflows the byte offset".into(),
        })?;
    dev.read_at(off, buf).map_err(|e| match e {
        Error::Io { detail, .. } => Error::Io { blocknr, detail },
        other => other,
    })
}
