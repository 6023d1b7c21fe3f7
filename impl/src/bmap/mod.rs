//! Block-mapping lookups (the read side of the kernel's bmap.c, direct.c and
//! btree.c): from a file block offset to the pointer stored for it.
//!
//! The lookup knows the two on-disk forms of `i_bmap` and how to walk a
//! B-tree of any height; it does not know what a pointer means. The caller
//! supplies a [`NodeSource`] that turns a child pointer into the node block.
//! [`DiskNodes`] is the one such source that reads the device: pointers are
//! disk blocks for the DAT ([`Pointers::Physical`]) and virtual block
//! numbers for every other file ([`Pointers::Virtual`], translated by
//! whoever holds the DAT: the read-only [`crate::the_nilfs::Nilfs`] or the
//! mounted [`crate::dat::Dat`]). [`readahead`] looks up through the node
//! cache instead, with the kernel's sibling read-ahead (seed 000); [`write`](mod@write)
//! is the write side.

use crate::device::{read_block, BlockDevice};
use crate::format::bmap::BmapRoot;
use crate::format::btree::BtreeNode;
use crate::format::{BlockNr, VBlockNr, BTREE_LEVEL_NODE_MIN, INODE_BMAP_SIZE};
use crate::{Error, Result};

pub mod readahead;
pub mod write;

/// The read-ahead lookups' old name (`bmap::btree`).
pub use self::readahead as btree;

/// Where B-tree node blocks come from (uncached reads).
pub trait NodeSource {
    /// Read and decode the node that `ptr` points at, checked with the
    /// kernel's broken-node rules. `level` is the level the parent expects.
    fn node(&mut self, ptr: u64, level: u8) -> Result<BtreeNode>;
}

/// `nilfs_dat_translate`: a virtual block number to its disk block.
pub trait Translate {
    /// The disk block of `v` now.
    fn translate(&mut self, v: VBlockNr) -> Result<BlockNr>;
}

/// What a mapping's pointers are.
pub enum Pointers<'t> {
    /// Disk block numbers (the DAT's own mapping).
    Physical,
    /// Virtual block numbers, translated through the DAT.
    Virtual(&'t mut dyn Translate),
}

/// Node blocks read from the device, uncached, checked with the kernel's
/// broken-node rules; the one device-reading [`NodeSource`].
pub struct DiskNodes<'t> {
    dev: &'t dyn BlockDevice,
    block_size: u32,
    pointers: Pointers<'t>,
}

impl<'t> DiskNodes<'t> {
    /// Nodes of a mapping whose pointers are disk blocks (the DAT).
    pub fn physical(dev: &'t dyn BlockDevice, block_size: u32) -> Self {
        DiskNodes {
            dev,
            block_size,
            pointers: Pointers::Physical,
        }
    }

    /// Nodes of a mapping whose pointers are virtual (every other file).
    pub fn translated(
        dev: &'t dyn BlockDevice,
        block_size: u32,
        dat: &'t mut dyn Translate,
    ) -> Self {
        DiskNodes {
            dev,
            block_size,
            pointers: Pointers::Virtual(dat),
        }
    }

    /// Either, by `pointers`.
    pub fn new(dev: &'t dyn BlockDevice, block_size: u32, pointers: Pointers<'t>) -> Self {
        DiskNodes {
            dev,
            block_size,
            pointers,
        }
    }
}

impl NodeSource for DiskNodes<'_> {
    /// The node block at `ptr`, checked where it was read so that a refusal
    /// names the block: its level must be `level`, the one its parent
    /// implies, and its keys ascending (our own check: the kernel
    /// binary-searches whatever is there and reads the wrong blocks).
    fn node(&mut self, ptr: u64, level: u8) -> Result<BtreeNode> {
        let pbn = match &mut self.pointers {
            Pointers::Physical => BlockNr(ptr),
            Pointers::Virtual(dat) => dat.translate(VBlockNr(ptr))?,
        };
        let b = read_block(self.dev, self.block_size, pbn.0)?;
        let node = BtreeNode::decode_block(&b, self.block_size).map_err(|e| e.at_block(pbn.0))?;
        if node.level != level {
            return Err(Error::Corrupt {
                what: "btree node",
                blocknr: Some(pbn.0),
                detail: format!("level mismatch: expected {level}, found {}", node.level),
            });
        }
        node.check_keys_sorted().map_err(|e| e.at_block(pbn.0))?;
        Ok(node)
    }
}

/// Look up `key` in the mapping rooted at `bmap`. `Ok(None)` is a hole.
///
/// Follows `nilfs_btree_do_lookup`: at each level above 1 descend into the
/// child whose key range holds `key`; at level 1 the key must match exactly.
/// Every node read must carry the level its parent implies ("btree level
/// mismatch" in the kernel).
pub fn lookup(
    bmap: &[u64; INODE_BMAP_SIZE],
    key: u64,
    src: &mut dyn NodeSource,
) -> Result<Option<u64>> {
    match BmapRoot::decode(bmap)? {
        BmapRoot::Direct(d) => Ok(d.lookup(key).filter(|&p| p != 0)),
        BmapRoot::Btree(root) => {
            let mut node = root;
            loop {
                let nchildren = usize::from(node.nchildren);
                if nchildren == 0 {
                    return Ok(None);
                }
                let (index, found) = node.lookup(key);
                if node.level == BTREE_LEVEL_NODE_MIN {
                    return Ok(if found {
                        Some(node.ptrs[index]).filter(|&p| p != 0)
                    } else {
                        None
                    });
                }
                // Above level 1 the kernel descends into index 0 when the key
                // is below every key of the node (lookup returns 0, !found).
                let index = index.min(nchildren - 1);
                let ptr = node.ptrs[index];
                node = child(src, ptr, node.level - 1)?;
            }
        }
    }
}

/// Call `f(key, ptr)` for every mapped block of the mapping, in key order.
/// Bounded by the tree itself: each node is visited once.
pub fn for_each(
    bmap: &[u64; INODE_BMAP_SIZE],
    src: &mut dyn NodeSource,
    f: &mut dyn FnMut(u64, u64) -> Result<()>,
) -> Result<()> {
    match BmapRoot::decode(bmap)? {
        BmapRoot::Direct(d) => {
            for (k, &p) in d.ptrs.iter().enumerate() {
                if p != 0 {
                    f(k as u64, p)?;
                }
            }
            Ok(())
        }
        BmapRoot::Btree(root) => walk(&root, src, f),
    }
}

/// Call `f(key, ptr)` for every mapped block with `key` in `keys`, in key
/// order, reading only the nodes whose key ranges meet `keys` (a read of
/// one part of a large file walks one path down and along, not the tree).
pub fn for_each_in(
    bmap: &[u64; INODE_BMAP_SIZE],
    keys: std::ops::Range<u64>,
    src: &mut dyn NodeSource,
    f: &mut dyn FnMut(u64, u64) -> Result<()>,
) -> Result<()> {
    match BmapRoot::decode(bmap)? {
        BmapRoot::Direct(d) => {
            for (k, &p) in d.ptrs.iter().enumerate() {
                if p != 0 && keys.contains(&(k as u64)) {
                    f(k as u64, p)?;
                }
            }
            Ok(())
        }
        BmapRoot::Btree(root) => walk_in(&root, &keys, src, f),
    }
}

/// The child at `ptr`, which must carry `level`, the level its parent
/// implies ("btree level mismatch" in the kernel).
fn child(src: &mut dyn NodeSource, ptr: u64, level: u8) -> Result<BtreeNode> {
    let child = src.node(ptr, level)?;
    if child.level != level {
        return Err(Error::corrupt(
            "btree node",
            format!("level mismatch: expected {level}, found {}", child.level),
        ));
    }
    Ok(child)
}

fn walk(
    node: &BtreeNode,
    src: &mut dyn NodeSource,
    f: &mut dyn FnMut(u64, u64) -> Result<()>,
) -> Result<()> {
    let n = usize::from(node.nchildren);
    for i in 0..n {
        let (key, ptr) = (node.keys[i], node.ptrs[i]);
        if node.level == BTREE_LEVEL_NODE_MIN {
            f(key, ptr)?;
        } else {
            walk(&child(src, ptr, node.level - 1)?, src, f)?;
        }
    }
    Ok(())
}

fn walk_in(
    node: &BtreeNode,
    keys: &std::ops::Range<u64>,
    src: &mut dyn NodeSource,
    f: &mut dyn FnMut(u64, u64) -> Result<()>,
) -> Result<()> {
    let n = usize::from(node.nchildren);
    for i in 0..n {
        let (key, ptr) = (node.keys[i], node.ptrs[i]);
        if node.level == BTREE_LEVEL_NODE_MIN {
            if key >= keys.end {
                break;
            }
            if key >= keys.start {
                f(key, ptr)?;
            }
            continue;
        }
        // The keys `lookup` sends to child i: [keys[i], keys[i + 1]), and
        // for child 0 everything below keys[1]. Only those are taken from
        // it, so that a damaged child holding keys beyond its window reads
        // as lookup reads it.
        let lo = if i == 0 {
            keys.start
        } else {
            key.max(keys.start)
        };
        let hi = match node.keys.get(i + 1) {
            Some(&next) if i + 1 < n => next.min(keys.end),
            _ => keys.end,
        };
        if lo >= keys.end {
            break;
        }
        if lo < hi {
            walk_in(&child(src, ptr, node.level - 1)?, &(lo..hi), src, f)?;
        }
    }
    Ok(())
}
