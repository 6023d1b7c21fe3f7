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

/// One field of an on-disk structure: its name in the kernel's struct, its
/// byte offset from the structure's start and its width in bytes.
///
/// Each structure writes its layout down once, as associated constants
/// named as the kernel names the fields and a `FIELDS` table of them
/// ([`layout!`]); its decoder and encoder read and write through those
/// constants, and the tests' corruption generator finds fields there by
/// name. The accessors check the width in debug builds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Field {
    /// The kernel's name (`s_magic`, `ss_nblocks`, `i_bmap`, ...).
    pub name: &'static str,
    /// Bytes from the start of the structure.
    pub offset: usize,
    /// Bytes the field occupies.
    pub width: usize,
}

impl Field {
    fn expect(self, width: usize) {
        debug_assert_eq!(
            self.width, width,
            "field {} is {} bytes",
            self.name, self.width
        );
    }
    /// The same field of a structure that starts `base` bytes into the
    /// buffer (a record inside a block).
    pub fn at(self, base: usize) -> Field {
        Field {
            offset: base + self.offset,
            ..self
        }
    }
    /// The byte range the field occupies in its structure.
    pub fn range(self) -> std::ops::Range<usize> {
        self.offset..self.offset + self.width
    }
    /// Read the field as a u8.
    pub fn u8(self, b: &[u8]) -> u8 {
        self.expect(1);
        u8_at(b, self.offset)
    }
    /// Read the field as a little-endian u16.
    pub fn u16(self, b: &[u8]) -> u16 {
        self.expect(2);
        u16_at(b, self.offset)
    }
    /// Read the field as a little-endian u32.
    pub fn u32(self, b: &[u8]) -> u32 {
        self.expect(4);
        u32_at(b, self.offset)
    }
    /// Read the field as a little-endian u64.
    pub fn u64(self, b: &[u8]) -> u64 {
        self.expect(8);
        u64_at(b, self.offset)
    }
    /// Copy the field's bytes.
    pub fn bytes<const N: usize>(self, b: &[u8]) -> [u8; N] {
        self.expect(N);
        bytes_at(b, self.offset)
    }
    /// Write the field as a u8.
    pub fn put_u8(self, b: &mut [u8], v: u8) {
        self.expect(1);
        put_u8(b, self.offset, v);
    }
    /// Write the field as a little-endian u16.
    pub fn put_u16(self, b: &mut [u8], v: u16) {
        self.expect(2);
        put_u16(b, self.offset, v);
    }
    /// Write the field as a little-endian u32.
    pub fn put_u32(self, b: &mut [u8], v: u32) {
        self.expect(4);
        put_u32(b, self.offset, v);
    }
    /// Write the field as a little-endian u64.
    pub fn put_u64(self, b: &mut [u8], v: u64) {
        self.expect(8);
        put_u64(b, self.offset, v);
    }
    /// Write the field's bytes.
    pub fn put_bytes(self, b: &mut [u8], v: &[u8]) {
        self.expect(v.len());
        put_bytes(b, self.offset, v);
    }
}

/// The `N` bytes `encode` writes into a zeroed buffer: a fixed-size
/// structure's `to_bytes`.
pub fn encoded<const N: usize>(encode: impl FnOnce(&mut [u8])) -> [u8; N] {
    let mut b = [0u8; N];
    encode(&mut b);
    b
}

/// The field of `fields` called `name`.
pub fn field(fields: &[Field], name: &str) -> Option<Field> {
    fields.iter().copied().find(|f| f.name == name)
}

/// A structure's layout: `layout!(Type { name: offset, width; ... })`
/// gives `Type::name` (a [`Field`]) for each field and `Type::FIELDS`,
/// all of them in the order given (the on-disk order).
macro_rules! layout {
    ($ty:ident { $($name:ident: $offset:expr, $width:expr;)* }) => {
        #[allow(non_upper_case_globals)]
        impl $ty {
            $(
                #[doc = concat!("`", stringify!($name), "`.")]
                pub const $name: $crate::format::le::Field = $crate::format::le::Field {
                    name: stringify!($name),
                    offset: $offset,
                    width: $width,
                };
            )*
            /// Every field, in on-disk order, under the kernel's names.
            pub const FIELDS: &'static [$crate::format::le::Field] = &[$(Self::$name),*];
        }
    };
}
pub(crate) use layout;

#[cfg(test)]
mod tests {
    use super::Field;

    /// Each table in disk order, without overlaps, inside its structure.
    fn check(fields: &[Field], size: usize) {
        for w in fields.windows(2) {
            assert!(w[0].offset + w[0].width <= w[1].offset, "{w:?}");
        }
        let last = fields.last().unwrap();
        assert!(last.offset + last.width <= size, "{last:?}");
    }

    #[test]
    fn layouts_are_ordered_disjoint_and_inside_their_structure() {
        use crate::format::{
            btree, cpfile, dat, dir, inode, segsum, sufile, super_root, superblock,
        };
        check(superblock::SuperBlock::FIELDS, superblock::SuperBlock::SIZE);
        check(segsum::SegmentSummary::FIELDS, segsum::SegmentSummary::SIZE);
        check(segsum::Finfo::FIELDS, segsum::Finfo::SIZE);
        check(segsum::BinfoV::FIELDS, 16);
        check(segsum::BinfoDat::FIELDS, 16);
        check(btree::BtreeNode::FIELDS, btree::BLOCK_KEYS_OFFSET);
        check(super_root::SuperRoot::FIELDS, super_root::HEADER_SIZE);
        check(inode::Inode::FIELDS, inode::Inode::SIZE);
        check(dat::DatEntry::FIELDS, dat::DatEntry::SIZE);
        check(dir::DirEntry::FIELDS, dir::NAME_OFFSET);
        check(cpfile::CpfileHeader::FIELDS, cpfile::CpfileHeader::SIZE);
        check(cpfile::Checkpoint::FIELDS, cpfile::Checkpoint::SIZE);
        check(sufile::SufileHeader::FIELDS, sufile::SufileHeader::SIZE);
        check(sufile::SegmentUsage::FIELDS, sufile::SegmentUsage::SIZE);
    }
}
