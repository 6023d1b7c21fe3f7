//! Little-endian field access for decoders and encoders.
//!
//! Decoders first check the buffer length with [`need`]; after that the
//! getters index within bounds. The getters still never panic on a short
//! buffer (they read missing bytes as zero), so a forgotten `need` is a wrong
//! answer caught by tests, not a crash on hostile input.

use crate::{Error, Result};

/// Fail with a corruption error unless `buf` holds at least `len` bytes.
pub fn need(buf: &[u8], len: usize, what: &'static str) -> Result<()> {
    if buf.len() < len {
        Err(Error::corrupt(
            what,
            format!("truncated: {} bytes, need {}", buf.len(), len),
        ))
    } else {
        Ok(())
    }
}

fn get<const N: usize>(b: &[u8], off: usize) -> [u8; N] {
    let mut a = [0u8; N];
    if let Some(s) = off.checked_add(N).and_then(|end| b.get(off..end)) {
        a.copy_from_slice(s);
    }
    a
}

/// Read a u8.
pub fn u8_at(b: &[u8], off: usize) -> u8 {
    b.get(off).copied().unwrap_or(0)
}
/// Read a little-endian u16.
pub fn u16_at(b: &[u8], off: usize) -> u16 {
    u16::from_le_bytes(get(b, off))
}
/// Read a little-endian u32.
pub fn u32_at(b: &[u8], off: usize) -> u32 {
    u32::from_le_bytes(get(b, off))
}
/// Read a little-endian u64.
pub fn u64_at(b: &[u8], off: usize) -> u64 {
    u64::from_le_bytes(get(b, off))
}
/// Copy `N` bytes.
pub fn bytes_at<const N: usize>(b: &[u8], off: usize) -> [u8; N] {
    get(b, off)
}

/// Write a u8. Encoders are given buffers of the right size; writing out of
/// bounds is a broken internal invariant and panics.
pub fn put_u8(b: &mut [u8], off: usize, v: u8) {
    b[off] = v;
}
/// Write a little-endian u16.
pub fn put_u16(b: &mut [u8], off: usize, v: u16) {
    b[off..off + 2].copy_from_slice(&v.to_le_bytes());
}
/// Write a little-endian u32.
pub fn put_u32(b: &mut [u8], off: usize, v: u32) {
    b[off..off + 4].copy_from_slice(&v.to_le_bytes());
}
/// Write a little-endian u64.
pub fn put_u64(b: &mut [u8], off: usize, v: u64) {
    b[off..off + 8].copy_from_slice(&v.to_le_bytes());
}
/// Write raw bytes.
pub fn put_bytes(b: &mut [u8], off: usize, v: &[u8]) {
    b[off..off + v.len()].copy_from_slice(v);
}
