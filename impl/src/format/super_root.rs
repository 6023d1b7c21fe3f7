//! `struct nilfs_super_root`: the last block of a log with `SS_SR`, holding
//! the inodes of the DAT, cpfile and sufile (digest §3.6).
//!
//! The inodes sit at `16 + k * isz` for k = 0, 1, 2, where `isz` is
//! `s_inode_size` (`NILFS_SR_MDT_OFFSET`), so decoding needs it.

use super::crc::crc32_le;
use super::inode::Inode;
use super::le::{layout, need};
use super::MIN_INODE_SIZE;
use crate::{Error, Result};

const WHAT: &str = "super root";

/// Bytes before the first inode: `sr_sum`, `sr_bytes`, `sr_flags`, `sr_nongc_ctime`.
pub const HEADER_SIZE: usize = 16;

/// `NILFS_SR_BYTES`: the bytes a super root uses, `16 + 3 * inode_size`
/// (400 for 128-byte inodes). Saturates at `u16::MAX` for inode sizes no
/// block could hold.
pub fn super_root_bytes(inode_size: u16) -> u16 {
    u16::try_from(HEADER_SIZE + 3 * usize::from(inode_size)).unwrap_or(u16::MAX)
}

/// `NILFS_SR_MDT_OFFSET`: byte offset of embedded inode `k` (0 = DAT,
/// 1 = cpfile, 2 = sufile).
pub fn inode_offset(inode_size: u16, k: usize) -> usize {
    HEADER_SIZE + k * usize::from(inode_size)
}

/// A decoded super root.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SuperRoot {
    /// `sr_sum`: CRC of bytes 4..`sr_bytes` ([`compute_sum`]).
    pub sum: u32,
    /// `sr_bytes`: bytes in use, [`super_root_bytes`] as written.
    pub bytes: u16,
    /// `sr_flags` (0).
    pub flags: u16,
    /// `sr_nongc_ctime`: creation time of the last log not written by GC.
    pub nongc_ctime: u64,
    /// `sr_dat`: the DAT inode (its bmap holds physical block numbers).
    pub dat: Inode,
    /// `sr_cpfile`: the checkpoint file inode.
    pub cpfile: Inode,
    /// `sr_sufile`: the segment usage file inode.
    pub sufile: Inode,
}

fn check_inode_size(inode_size: u16) -> Result<()> {
    if inode_size < MIN_INODE_SIZE {
        return Err(Error::Invalid(format!(
            "inode size {inode_size} below {MIN_INODE_SIZE}"
        )));
    }
    Ok(())
}

impl SuperRoot {
    /// Decode a super root written with `inode_size`-byte inode slots (which
    /// must be at least 128). Structural only; [`check_valid`] is the
    /// kernel's test of the raw block. Needs the bytes up to the end of the
    /// sufile inode's 128 bytes.
    pub fn decode(buf: &[u8], inode_size: u16) -> Result<Self> {
        check_inode_size(inode_size)?;
        need(buf, inode_offset(inode_size, 2) + Inode::SIZE, WHAT)?;
        let inode = |k| Inode::decode(&buf[inode_offset(inode_size, k)..]);
        Ok(SuperRoot {
            sum: Self::sr_sum.u32(buf),
            bytes: Self::sr_bytes.u16(buf),
            flags: Self::sr_flags.u16(buf),
            nongc_ctime: Self::sr_nongc_ctime.u64(buf),
            dat: inode(0)?,
            cpfile: inode(1)?,
            sufile: inode(2)?,
        })
    }

    /// The super root block: fields verbatim (`sr_sum` and `sr_bytes`
    /// included), each inode's 128 bytes at its slot, zeros elsewhere (slot
    /// tails beyond 128 bytes and the rest of the block, as the kernel's
    /// `nilfs_segctor_fill_in_super_root` leaves them). The length is
    /// `block_size`, or the bytes the three slots need if that is more (a
    /// geometry no kernel accepts, since it then rejects `sr_bytes > bs`).
    ///
    /// # Panics
    /// If `inode_size` is below 128 (the slots would overlap).
    pub fn encode(&self, block_size: u32, inode_size: u16) -> Vec<u8> {
        assert!(
            inode_size >= MIN_INODE_SIZE,
            "inode size {inode_size} below {MIN_INODE_SIZE}"
        );
        let len = (block_size as usize).max(inode_offset(inode_size, 2) + Inode::SIZE);
        let mut b = vec![0u8; len];
        Self::sr_sum.put_u32(&mut b, self.sum);
        Self::sr_bytes.put_u16(&mut b, self.bytes);
        Self::sr_flags.put_u16(&mut b, self.flags);
        Self::sr_nongc_ctime.put_u64(&mut b, self.nongc_ctime);
        for (k, inode) in [&self.dat, &self.cpfile, &self.sufile]
            .into_iter()
            .enumerate()
        {
            inode.encode(&mut b[inode_offset(inode_size, k)..]);
        }
        b
    }
}

layout!(SuperRoot {
    sr_sum: 0, 4;
    sr_bytes: 4, 2;
    sr_flags: 6, 2;
    sr_nongc_ctime: 8, 8;
});

/// The byte range `sr_sum` covers in `block`: 4..`sr_bytes`, clamped to the
/// block. For `sr_bytes` below 4 the kernel's unsigned arithmetic in
/// `nilfs_compute_checksum` wraps and covers the rest of the block, so this
/// does too (only 1..=3 matter: 0 is rejected before the CRC).
fn covered(block: &[u8]) -> &[u8] {
    let bytes = usize::from(SuperRoot::sr_bytes.u16(block));
    let end = if bytes < 4 {
        block.len()
    } else {
        bytes.min(block.len())
    };
    block.get(4..end).unwrap_or(&[])
}

/// `sr_sum` for `block` (the whole super root block): `crc32_le(seed)` over
/// bytes 4..`sr_bytes` as stored in the block. Bounded by the block.
pub fn compute_sum(block: &[u8], seed: u32) -> u32 {
    crc32_le(seed, covered(block))
}

/// Store [`compute_sum`] in `sr_sum`. Do this before sealing the log, whose
/// data checksum covers the super root.
///
/// # Panics
/// If `block` is shorter than 4 bytes.
pub fn seal_block(block: &mut [u8], seed: u32) {
    let sum = compute_sum(block, seed);
    SuperRoot::sr_sum.put_u32(block, sum);
}

/// The kernel's checks when it reads a super root to load it
/// (`nilfs_read_super_root_block` with `check` set, called from
/// `nilfs_load_super_root`): `sr_bytes` is nonzero and no more than the block
/// size, and `sr_sum` matches. `block` must hold the whole block.
pub fn check_valid(block: &[u8], block_size: u32, seed: u32) -> Result<()> {
    let bs = block_size as usize;
    need(block, bs.max(HEADER_SIZE), WHAT)?;
    let block = &block[..bs.max(HEADER_SIZE)];
    let bytes = SuperRoot::sr_bytes.u16(block);
    if bytes == 0 || u32::from(bytes) > block_size {
        return Err(Error::corrupt(
            WHAT,
            format!("sr_bytes {bytes} outside [1, {block_size}]"),
        ));
    }
    let stored = SuperRoot::sr_sum.u32(block);
    let crc = compute_sum(block, seed);
    if crc != stored {
        return Err(Error::corrupt(
            WHAT,
            format!("checksum mismatch: stored {stored:#010x}, computed {crc:#010x}"),
        ));
    }
    Ok(())
}
