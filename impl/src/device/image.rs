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
/// is decompressed first (streamed, kept sparse: runs of zeros take no
/// memory), without a size limit: for the project's own fixtures. Images
/// from elsewhere go through [`import_image_limited`].
pub fn import_image(path: &Path) -> Result<MemDevice> {
    import_image_limited(path, &|_| Ok(u64::MAX))
}

/// [`import_image`] refusing, with a typed error, an xz image that inflates
/// beyond the size `declared` gives for its first [`DECLARED_PREFIX`]
/// bytes (the caller knows where a size is declared: for NILFS2, the super
/// block's `s_dev_size`). Memory stays within the declared size however far
/// the stream would inflate (a 0.9 MB xz of 6 GiB is refused at the limit).
pub fn import_image_limited(path: &Path, declared: &DeclaredSize<'_>) -> Result<MemDevice> {
    let mut f = File::open(path).map_err(|e| host(path, e))?;
    let mut magic = [0u8; 6];
    let n = f.read(&mut magic).map_err(|e| host(path, e))?;
    f.seek(SeekFrom::Start(0)).map_err(|e| host(path, e))?;
    let r = if n == magic.len() && magic == XZ_MAGIC {
        import_xz(&mut std::io::BufReader::new(f), declared)
    } else {
        // Streamed like the xz stream: only the non-zero chunks are kept,
        // so a sparse raw image costs what it holds, not its length.
        let mut sink = SparseSink::new(declared);
        let copied = std::io::copy(&mut std::io::BufReader::new(f), &mut sink);
        match sink.refused.take() {
            Some(e) => Err(e),
            None => copied
                .map_err(|e| host(path, e))
                .and_then(|_| sink.finish()),
        }
    };
    r.map_err(|e| match e {
        Error::Invalid(d) => host(path, d),
        other => other,
    })
}

/// How many leading bytes [`DeclaredSize`] sees.
pub const DECLARED_PREFIX: usize = 4096;

/// From an image's first bytes, the largest size it may inflate to.
pub type DeclaredSize<'a> = dyn Fn(&[u8]) -> Result<u64> + 'a;

/// Load an in-memory image (raw or xz) into a [`MemDevice`].
pub fn import_image_bytes(data: &[u8]) -> Result<MemDevice> {
    if data.starts_with(&XZ_MAGIC) {
        return import_xz(&mut std::io::Cursor::new(data), &|_| Ok(u64::MAX));
    }
    let mut sink = SparseSink::new(&|_| Ok(u64::MAX));
    sink.write_all(data)
        .map_err(|e| Error::Invalid(format!("image: {e}")))?;
    sink.finish()
}

fn import_xz<R: std::io::BufRead>(r: &mut R, declared: &DeclaredSize<'_>) -> Result<MemDevice> {
    let mut sink = SparseSink::new(declared);
    let res = lzma_rs::xz_decompress(r, &mut sink);
    if let Some(e) = sink.refused.take() {
        return Err(e);
    }
    res.map_err(|e| Error::Invalid(format!("xz: {e}")))?;
    sink.finish()
}

/// Decompressed bytes gathered into [`MemDevice`]-sized chunks, keeping
/// only the non-zero ones, with the declared limit checked as they come.
struct SparseSink<'a> {
    declared: &'a DeclaredSize<'a>,
    limit: Option<u64>,
    chunks: Vec<(u64, Vec<u8>)>,
    cur: Vec<u8>,
    total: u64,
    refused: Option<Error>,
}

impl<'a> SparseSink<'a> {
    fn new(declared: &'a DeclaredSize<'a>) -> Self {
        SparseSink {
            declared,
            limit: None,
            chunks: Vec::new(),
            cur: Vec::new(),
            total: 0,
            refused: None,
        }
    }

    fn flush_chunk(&mut self) -> Result<()> {
        if self.limit.is_none() {
            let prefix = &self.cur[..self.cur.len().min(DECLARED_PREFIX)];
            self.limit = Some((self.declared)(prefix)?);
        }
        let start = self.total - self.cur.len() as u64;
        if self.cur.iter().any(|&b| b != 0) {
            self.chunks.push((start, std::mem::take(&mut self.cur)));
        } else {
            self.cur.clear();
        }
        Ok(())
    }

    fn finish(mut self) -> Result<MemDevice> {
        if !self.cur.is_empty() || self.limit.is_none() {
            self.flush_chunk()?;
        }
        let size = self.total;
        if let Some(limit) = self.limit.filter(|&l| size > l) {
            return Err(Error::Invalid(format!(
                "image inflates beyond its declared size of {limit} bytes"
            )));
        }
        let dev = MemDevice::new(size);
        // Whole sectors only: a trailing partial sector is unreachable anyway.
        let whole = size - size % SECTOR_SIZE;
        for (off, data) in &self.chunks {
            let n = whole.saturating_sub(*off).min(data.len() as u64) as usize;
            if n > 0 {
                dev.write_at(*off, &data[..n])?;
            }
        }
        Ok(dev)
    }
}

impl Write for SparseSink<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let chunk = MemDevice::chunk_size() as usize;
        let room = chunk - self.cur.len();
        let n = buf.len().min(room);
        self.cur.extend_from_slice(&buf[..n]);
        self.total += n as u64;
        let mut fail = None;
        if self.cur.len() == chunk {
            if let Err(e) = self.flush_chunk() {
                fail = Some(e);
            }
        }
        if fail.is_none() {
            if let Some(limit) = self.limit.filter(|&l| self.total > l) {
                fail = Some(Error::Invalid(format!(
                    "image inflates beyond its declared size of {limit} bytes"
                )));
            }
        }
        if let Some(e) = fail {
            let msg = e.to_string();
            self.refused = Some(e);
            return Err(std::io::Error::other(msg));
        }
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
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
