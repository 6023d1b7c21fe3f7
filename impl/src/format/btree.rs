//! B-tree nodes (`struct nilfs_btree_node`): the root kept in an inode's
//! `i_bmap`, and the node blocks below it (digest §6.2, §6.3).
//!
//! A node is an 8-byte header followed by a key array and a pointer array.
//! Both arrays have a fixed capacity (3 in the root, `ncmax` in a block), and
//! their positions depend on that capacity, not on `nchildren`. We keep every
//! capacity slot, valid or not: the kernel's sibling read-ahead in
//! `__nilfs_btree_get_block` reads pointer slots past `nchildren`, so a
//! faithful model must be able to show what is there.
//!
//! Which checks happen when:
//! - [`BtreeNode::decode_block`] applies exactly the kernel's read-time test
//!   of a node block, `nilfs_btree_node_broken` (via
//!   `nilfs_btree_broken_node_block`, for lookups and for GC reads alike).
//! - [`BtreeNode::decode_root`] applies exactly `nilfs_btree_root_broken`,
//!   which the kernel runs when it loads an inode (`nilfs_btree_init`).
//! - The level a node must have while descending (`nilfs_btree_bad_node`) is
//!   the walker's check, since only it knows the expected level.
//! - [`BtreeNode::check_keys_sorted`] is ours: the kernel never tests key
//!   order when reading, but an unsorted node makes its binary search miss
//!   blocks, so our checker reports it as corruption.

use super::le::{layout, need, put_u64, u64_at};
use super::{BTREE_LEVEL_MAX, BTREE_LEVEL_NODE_MIN, INODE_BMAP_SIZE};
use crate::{Error, Result};

/// `NILFS_BTREE_NODE_ROOT`: set in `bn_flags` of the root only. It is the
/// same bit as `NILFS_BMAP_LARGE`, which is how `i_bmap` says "B-tree".
pub const NODE_ROOT: u8 = 0x01;

/// `NILFS_BTREE_ROOT_NCHILDREN_MAX`: (56 - 8) / 16 entries fit in `i_bmap`.
pub const ROOT_NCHILDREN_MAX: usize = 3;

/// Size of the node header (`struct nilfs_btree_node`).
const HEADER_SIZE: usize = 8;
/// Header plus `NILFS_BTREE_NODE_EXTRA_PAD_SIZE`: where a block node's keys start.
pub const BLOCK_KEYS_OFFSET: usize = 16;

/// Where a block node of capacity `ncmax` keeps its pointers: after the
/// `ncmax` keys.
pub fn block_ptrs_offset(ncmax: usize) -> usize {
    BLOCK_KEYS_OFFSET + 8 * ncmax
}

/// `NILFS_BTREE_NODE_NCHILDREN_MAX(bs)`: entries in a node block of `block_size`
/// bytes, `(bs - 16) / 16` (0 for a size too small to hold a header).
pub fn node_ncmax(block_size: u32) -> usize {
    (block_size as usize).saturating_sub(BLOCK_KEYS_OFFSET) / 16
}

/// One B-tree node, root or block.
///
/// Invariant expected by the encoders: `keys` and `ptrs` both hold exactly the
/// node's capacity (`ROOT_NCHILDREN_MAX` for the root, [`node_ncmax`] for a
/// block); the decoders always produce that. Slots at `nchildren` and beyond
/// are stale or zero and carry no meaning.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BtreeNode {
    /// `bn_flags`: [`NODE_ROOT`] in the root, 0 in a block.
    pub flags: u8,
    /// `bn_level`: 1 for nodes whose pointers address data blocks.
    pub level: u8,
    /// `bn_nchildren`: how many leading slots are valid.
    pub nchildren: u16,
    /// `bn_pad` (written as 0).
    pub pad: u32,
    /// The 8 bytes after the header of a block node (always 0 for the root,
    /// which has no such padding).
    pub extra_pad: u64,
    /// Every key slot.
    pub keys: Vec<u64>,
    /// Every pointer slot.
    pub ptrs: Vec<u64>,
}

impl BtreeNode {
    /// An empty block node of the given level, with zeroed slots.
    pub fn new_block(block_size: u32, level: u8) -> Self {
        let ncmax = node_ncmax(block_size);
        BtreeNode {
            level,
            keys: vec![0; ncmax],
            ptrs: vec![0; ncmax],
            ..Default::default()
        }
    }

    /// An empty root of the given level, with zeroed slots.
    pub fn new_root(level: u8) -> Self {
        BtreeNode {
            flags: NODE_ROOT,
            level,
            keys: vec![0; ROOT_NCHILDREN_MAX],
            ptrs: vec![0; ROOT_NCHILDREN_MAX],
            ..Default::default()
        }
    }

    /// Decode a node block and apply the kernel's read-time checks
    /// (`nilfs_btree_node_broken`): the level must be in `1..14`, the ROOT
    /// flag must be clear, and `nchildren` must be in `1..=ncmax`.
    ///
    /// `block_size` must be a valid NILFS block size (else `Error::Invalid`);
    /// `buf` must hold at least that many bytes.
    pub fn decode_block(buf: &[u8], block_size: u32) -> Result<Self> {
        super::check_block_size(block_size)?;
        need(buf, block_size as usize, "btree node")?;
        let ncmax = node_ncmax(block_size);
        let flags = Self::bn_flags.u8(buf);
        let level = Self::bn_level.u8(buf);
        let nchildren = Self::bn_nchildren.u16(buf);
        if !(BTREE_LEVEL_NODE_MIN..BTREE_LEVEL_MAX).contains(&level) {
            return Err(Error::corrupt("btree node", format!("bad level {level}")));
        }
        if flags & NODE_ROOT != 0 {
            return Err(Error::corrupt(
                "btree node",
                format!("root flag in a node block (flags {flags:#x})"),
            ));
        }
        if nchildren == 0 || usize::from(nchildren) > ncmax {
            return Err(Error::corrupt(
                "btree node",
                format!("bad nchildren {nchildren} (capacity {ncmax})"),
            ));
        }
        Ok(Self::read_block(buf, ncmax, nchildren))
    }

    /// The fields of a node block of capacity `ncmax`, with `nchildren`
    /// as the caller checked or clamped it.
    fn read_block(buf: &[u8], ncmax: usize, nchildren: u16) -> Self {
        let ptrs_offset = block_ptrs_offset(ncmax);
        BtreeNode {
            flags: Self::bn_flags.u8(buf),
            level: Self::bn_level.u8(buf),
            nchildren,
            pad: Self::bn_pad.u32(buf),
            extra_pad: u64_at(buf, HEADER_SIZE),
            keys: (0..ncmax)
                .map(|i| u64_at(buf, BLOCK_KEYS_OFFSET + 8 * i))
                .collect(),
            ptrs: (0..ncmax)
                .map(|i| u64_at(buf, ptrs_offset + 8 * i))
                .collect(),
        }
    }

    /// Decode a node block **without** the broken-node checks, as code that
    /// forgot to verify would read it: `nchildren` is clamped to the block's
    /// capacity only so the decoded value stays in bounds. Used by the
    /// known-bad read path variant that skips verification, never by a
    /// correct one.
    pub fn decode_block_unchecked(buf: &[u8], block_size: u32) -> Result<Self> {
        super::check_block_size(block_size)?;
        need(buf, block_size as usize, "btree node")?;
        let ncmax = node_ncmax(block_size);
        let nchildren = Self::bn_nchildren.u16(buf).min(ncmax as u16);
        Ok(Self::read_block(buf, ncmax, nchildren))
    }

    /// Decode the root held in `i_bmap` and apply `nilfs_btree_root_broken`:
    /// the level must be in `1..14`, `nchildren` at most 3, and an empty
    /// root is allowed only at level 1. Like the kernel, this does not test
    /// the ROOT flag: [`super::bmap::BmapRoot::decode`] already chose the
    /// B-tree because of it.
    pub fn decode_root(bmap: &[u64; INODE_BMAP_SIZE]) -> Result<Self> {
        let header = bmap[0].to_le_bytes();
        let level = Self::bn_level.u8(&header);
        let nchildren = Self::bn_nchildren.u16(&header);
        if !(BTREE_LEVEL_NODE_MIN..BTREE_LEVEL_MAX).contains(&level) {
            return Err(Error::corrupt("btree root", format!("bad level {level}")));
        }
        if usize::from(nchildren) > ROOT_NCHILDREN_MAX {
            return Err(Error::corrupt(
                "btree root",
                format!("bad nchildren {nchildren}"),
            ));
        }
        if nchildren == 0 && level > BTREE_LEVEL_NODE_MIN {
            return Err(Error::corrupt(
                "btree root",
                format!("empty root at level {level}"),
            ));
        }
        Ok(BtreeNode {
            flags: Self::bn_flags.u8(&header),
            level,
            nchildren,
            pad: Self::bn_pad.u32(&header),
            extra_pad: 0,
            keys: bmap[1..1 + ROOT_NCHILDREN_MAX].to_vec(),
            ptrs: bmap[1 + ROOT_NCHILDREN_MAX..].to_vec(),
        })
    }

    /// Encode as a node block of `block_size` bytes, every field verbatim.
    /// Slots missing from `keys`/`ptrs` are written as 0 and slots beyond
    /// the capacity are dropped (neither happens under the type's invariant).
    ///
    /// # Panics
    /// If `block_size` is below 16, which no NILFS block size is.
    pub fn encode_block(&self, block_size: u32) -> Vec<u8> {
        let ncmax = node_ncmax(block_size);
        let mut out = vec![0u8; block_size as usize];
        Self::bn_flags.put_u8(&mut out, self.flags);
        Self::bn_level.put_u8(&mut out, self.level);
        Self::bn_nchildren.put_u16(&mut out, self.nchildren);
        Self::bn_pad.put_u32(&mut out, self.pad);
        put_u64(&mut out, HEADER_SIZE, self.extra_pad);
        let ptrs_offset = block_ptrs_offset(ncmax);
        for (i, k) in self.keys.iter().take(ncmax).enumerate() {
            put_u64(&mut out, BLOCK_KEYS_OFFSET + 8 * i, *k);
        }
        for (i, p) in self.ptrs.iter().take(ncmax).enumerate() {
            put_u64(&mut out, ptrs_offset + 8 * i, *p);
        }
        out
    }

    /// Encode as the root in `i_bmap`: the header is slot 0, keys slots 1..4,
    /// pointers slots 4..7 (no extra padding; `extra_pad` is not stored).
    pub fn encode_root(&self) -> [u64; INODE_BMAP_SIZE] {
        let mut header = [0u8; HEADER_SIZE];
        Self::bn_flags.put_u8(&mut header, self.flags);
        Self::bn_level.put_u8(&mut header, self.level);
        Self::bn_nchildren.put_u16(&mut header, self.nchildren);
        Self::bn_pad.put_u32(&mut header, self.pad);
        let mut bmap = [0u64; INODE_BMAP_SIZE];
        bmap[0] = u64::from_le_bytes(header);
        for i in 0..ROOT_NCHILDREN_MAX {
            bmap[1 + i] = self.key(i).unwrap_or(0);
            bmap[1 + ROOT_NCHILDREN_MAX + i] = self.ptr(i).unwrap_or(0);
        }
        bmap
    }

    /// Whether this is the root (`nilfs_btree_node_root`).
    pub fn is_root(&self) -> bool {
        self.flags & NODE_ROOT != 0
    }

    /// Number of slots in each array.
    pub fn capacity(&self) -> usize {
        self.keys.len().min(self.ptrs.len())
    }

    /// Key slot `i`, valid or stale; `None` past the capacity.
    pub fn key(&self, i: usize) -> Option<u64> {
        self.keys.get(i).copied()
    }

    /// Pointer slot `i`, valid or stale; `None` past the capacity. The
    /// kernel's read-ahead reads slots up to `ncmax`, not `nchildren`.
    pub fn ptr(&self, i: usize) -> Option<u64> {
        self.ptrs.get(i).copied()
    }

    /// The valid keys, `keys[..nchildren]` (clamped to the capacity).
    pub fn valid_keys(&self) -> &[u64] {
        &self.keys[..self.valid_len()]
    }

    /// The valid pointers, `ptrs[..nchildren]` (clamped to the capacity).
    pub fn valid_ptrs(&self) -> &[u64] {
        &self.ptrs[..self.valid_len()]
    }

    fn valid_len(&self) -> usize {
        usize::from(self.nchildren).min(self.capacity())
    }

    /// Binary search for `key`, as `nilfs_btree_node_lookup` does, probing
    /// the same slots in the same order so that it agrees with the kernel
    /// even on an unsorted (corrupt) node. Returns `(index, found)`:
    /// - on an exact match, its index and `true`;
    /// - otherwise, at levels > 1, the child to descend into (the last key
    ///   below `key`, or 0 if every key is above it);
    /// - otherwise, at level 1, where `key` would be inserted (which may equal
    ///   `nchildren`).
    ///
    /// One deliberate difference: for an empty node the kernel reports
    /// "found" at index 0; its callers never act on that (the lookup bails
    /// out on an empty root first), and we report `(0, false)`.
    pub fn lookup(&self, key: u64) -> (usize, bool) {
        let keys = self.valid_keys();
        if keys.is_empty() {
            return (0, false);
        }
        // `hi` is exclusive; the midpoint equals the kernel's (low + high) / 2
        // with its inclusive `high = hi - 1`.
        let (mut lo, mut hi) = (0usize, keys.len());
        let mut index = 0;
        let mut last = std::cmp::Ordering::Equal;
        while lo < hi {
            index = lo + (hi - lo - 1) / 2;
            last = keys[index].cmp(&key);
            match last {
                std::cmp::Ordering::Equal => return (index, true),
                std::cmp::Ordering::Less => lo = index + 1,
                std::cmp::Ordering::Greater => hi = index,
            }
        }
        if self.level > BTREE_LEVEL_NODE_MIN {
            if last == std::cmp::Ordering::Greater && index > 0 {
                index -= 1;
            }
        } else if last == std::cmp::Ordering::Less {
            index += 1;
        }
        (index, false)
    }

    /// Our own consistency check (the kernel does not make it when reading):
    /// the valid keys must be strictly ascending, since each is a distinct
    /// file block offset and lookups binary-search them.
    pub fn check_keys_sorted(&self) -> Result<()> {
        let what = if self.is_root() {
            "btree root"
        } else {
            "btree node"
        };
        match self.valid_keys().windows(2).position(|w| w[0] >= w[1]) {
            None => Ok(()),
            Some(i) => Err(Error::corrupt(
                what,
                format!(
                    "keys out of order at index {}: {} then {}",
                    i + 1,
                    self.keys[i],
                    self.keys[i + 1]
                ),
            )),
        }
    }
}

layout!(BtreeNode {
    bn_flags: 0, 1;
    bn_level: 1, 1;
    bn_nchildren: 2, 2;
    bn_pad: 4, 4;
});
