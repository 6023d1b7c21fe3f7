//! Import and export of raw image files (optionally xz-compressed on import,
//! as the kernel fixtures are). Exports are sparse: runs of zeros become holes.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::Path;

use super::MemDevice;
use super::{BlockDevice, SECTOR_SIZE};
use crate::{Error, Result};

fn host(path: &Path, e: impl std::fmt::Display) -> Error {
    Error::Host {
        path: path.display().to_string(),
        detail: e.to_string(),
    }
}

const XZ_MAGIC: [u8; 6] = [0xFD, b'7', b'z', b'X', b'Z', 0x00];

/// Load an image file into a [`MemDevice`]. A file starting with the xz magic
/// is decompressed first.
pub fn import_image(path: &Path) -> Result<MemDevice> {
    let mut f = File::open(path).map_err(|e| host(path, e))?;
    let mut data = Vec::new();
    f.read_to_end(&mut data).map_err(|e| host(path, e))?;
    import_image_bytes(&data).map_err(|e| match e {
        Error::Invalid(d) => host(path, d),
        other => other,
    })
}

/// Load an in-memory image (raw or xz) into a [`MemDevice`].
pub fn import_image_bytes(data: &[u8]) -> Result<MemDevice> {
    let raw;
    let data = if data.starts_with(&XZ_MAGIC) {
        let mut out = Vec::new();
        lzma_rs::xz_decompress(&mut std::io::Cursor::new(data), &mut out)
            .map_err(|e| Error::Invalid(format!("xz: {e}")))?;
        raw = out;
        &raw[..]
    } else {
        data
    };
    let size = data.len() as u64;
    let dev = MemDevice::new(size);
    let chunk = MemDevice::chunk_size() as usize;
    // Whole sectors only: a trailing partial sector is unreachable anyway.
    let whole = (size - size % SECTOR_SIZE) as usize;
    for (i, c) in data[..whole].chunks(chunk).enumerate() {
        if c.iter().any(|&b| b != 0) {
            dev.write_at((i * chunk) as u64, c)?;
        }
    }
    Ok(dev)
}

/// Write `dev` to `path` as a sparse raw image of exactly the device's size.
pub fn export_image(dev: &MemDevice, path: &Path) -> Result<()> {
    let mut f = File::create(path).map_err(|e| host(path, e))?;
    f.set_len(dev.size_bytes()).map_err(|e| host(path, e))?;
    dev.for_each_nonzero_chunk(|off, data| {
        f.seek(SeekFrom::Start(off)).map_err(|e| host(path, e))?;
        f.write_all(data).map_err(|e| host(path, e))
    })?;
    f.sync_all().map_err(|e| host(path, e))
}
