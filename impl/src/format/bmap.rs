//! The `i_bmap` field of an inode: a direct map of up to six blocks, or the
//! root of a B-tree (digest §6, §6.1).
//!
//! The kernel chooses by bit 0 of the first byte (`NILFS_BMAP_LARGE`, the
//! same bit as the root's `NILFS_BTREE_NODE_ROOT`) in `nilfs_bmap_read`, then
//! runs `nilfs_btree_init` (which checks the root) or `nilfs_direct_init`
//! (which checks nothing).

use super::btree::BtreeNode;
use super::INODE_BMAP_SIZE;
use crate::Result;

/// `NILFS_BMAP_LARGE`: set in the low byte of `i_bmap[0]` for a B-tree.
pub const BMAP_LARGE: u8 = 0x01;

/// `NILFS_DIRECT_NBLOCKS`: `i_bmap` slots 1..7 map file blocks 0..5, so
/// `NILFS_DIRECT_KEY_MAX` is 5.
pub const DIRECT_NBLOCKS: usize = INODE_BMAP_SIZE - 1;

/// A direct map: slot 0 is a header (`struct nilfs_direct_node`, flags 0
/// and padding), slot `1 + k` the pointer for file block `k`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DirectMap {
    /// `i_bmap[0]` verbatim. Writers store 0; the kernel never reads it back
    /// beyond the LARGE bit.
    pub header: u64,
    /// Pointers for file blocks 0..=5; 0 (`NILFS_BMAP_INVALID_PTR`) is a hole.
    pub ptrs: [u64; DIRECT_NBLOCKS],
}

impl DirectMap {
    /// The pointer for file block `key`, as `nilfs_direct_lookup` finds it:
    /// `None` for keys past `NILFS_DIRECT_KEY_MAX` and for holes.
    pub fn lookup(&self, key: u64) -> Option<u64> {
        let i = usize::try_from(key).ok()?;
        self.ptrs.get(i).copied().filter(|&p| p != 0)
    }
}

/// What `i_bmap` holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BmapRoot {
    /// A direct map.
    Direct(DirectMap),
    /// A B-tree root (checked by [`BtreeNode::decode_root`]).
    Btree(BtreeNode),
}

impl BmapRoot {
    /// Interpret `i_bmap` the way `nilfs_bmap_read` does. Only a B-tree root
    /// can be corrupt; any direct map is accepted.
    pub fn decode(bmap: &[u64; INODE_BMAP_SIZE]) -> Result<Self> {
        if bmap[0] as u8 & BMAP_LARGE != 0 {
            return BtreeNode::decode_root(bmap).map(BmapRoot::Btree);
        }
        let mut ptrs = [0u64; DIRECT_NBLOCKS];
        ptrs.copy_from_slice(&bmap[1..]);
        Ok(BmapRoot::Direct(DirectMap {
            header: bmap[0],
            ptrs,
        }))
    }

    /// The `i_bmap` slots, every field verbatim. The LARGE bit is not
    /// forced: a `Direct` header with it set, or a `Btree` root with the ROOT
    /// flag clear, reads back as the other variant (neither is a valid value).
    pub fn encode(&self) -> [u64; INODE_BMAP_SIZE] {
        match self {
            BmapRoot::Direct(d) => {
                let mut bmap = [0u64; INODE_BMAP_SIZE];
                bmap[0] = d.header;
                bmap[1..].copy_from_slice(&d.ptrs);
                bmap
            }
            BmapRoot::Btree(root) => root.encode_root(),
        }
    }
}
