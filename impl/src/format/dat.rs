//! `struct nilfs_dat_entry`: one virtual block number's translation and
//! lifetime (digest §7). The DAT is a palloc file (see [`super::palloc`])
//! whose entry number is the virtual block number; the stride is
//! `s_dat_entry_size`, of which the first 32 bytes are this structure.

use super::le::{encoded, layout, need};
use super::{BlockNr, Cno};
use crate::Result;

/// A DAT entry.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct DatEntry {
    /// `de_blocknr`: where the block lives now; 0 = not written (the kernel's
    /// `nilfs_dat_translate` reports such a translation as missing).
    pub blocknr: BlockNr,
    /// `de_start`: first checkpoint in which this version exists.
    pub start: Cno,
    /// `de_end`: first checkpoint in which it no longer exists;
    /// [`Cno::MAX`] while it belongs to the current tree.
    pub end: Cno,
    /// `de_rsv` (0).
    pub rsv: u64,
}

impl DatEntry {
    /// Size of the structure; the stride may be larger (`s_dat_entry_size`).
    pub const SIZE: usize = 32;

    /// Decode the first 32 bytes of `buf`.
    pub fn decode(buf: &[u8]) -> Result<Self> {
        need(buf, Self::SIZE, "DAT entry")?;
        Ok(DatEntry {
            blocknr: BlockNr(Self::de_blocknr.u64(buf)),
            start: Cno(Self::de_start.u64(buf)),
            end: Cno(Self::de_end.u64(buf)),
            rsv: Self::de_rsv.u64(buf),
        })
    }

    /// Encode into the first 32 bytes of `out` (which must hold them);
    /// the rest of a larger stride is left alone.
    pub fn encode(&self, out: &mut [u8]) {
        Self::de_blocknr.put_u64(out, self.blocknr.0);
        Self::de_start.put_u64(out, self.start.0);
        Self::de_end.put_u64(out, self.end.0);
        Self::de_rsv.put_u64(out, self.rsv);
    }

    /// The encoded 32 bytes.
    pub fn to_bytes(&self) -> [u8; Self::SIZE] {
        encoded(|b| self.encode(b))
    }

    /// Whether this block version belongs to checkpoint `cno`:
    /// `start <= cno < end` (the half-open range the cleaner also uses).
    pub fn is_live_at(&self, cno: Cno) -> bool {
        self.start <= cno && cno < self.end
    }
}

layout!(DatEntry {
    de_blocknr: 0, 8;
    de_start: 8, 8;
    de_end: 16, 8;
    de_rsv: 24, 8;
});
