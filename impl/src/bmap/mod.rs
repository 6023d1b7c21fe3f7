//! Block-mapping lookups (the read side of the kernel's bmap.c, direct.c and
//! btree.c): from a file block offset to the pointer stored for it.
//!
//! The lookup knows the two on-disk forms of `i_bmap` and how to walk a
//! B-tree of any height; it does not know what a pointer means. The caller
//! supplies a [`NodeSource`] that turns a child pointer into the node block
//! (translating a virtual number through the DAT for every file but the DAT
//! itself), so this module never reads the device. [`btree`] does the same
//! through the node cache, with the kernel's sibling read-ahead (seed 000).

use crate::format::bmap::BmapRoot;
use crate::format::btree::BtreeNode;
use crate::format::{BTREE_LEVEL_NODE_MIN, INODE_BMAP_SIZE};
use crate::{Error, Result};

pub mod btree;
pub mod write;

/// Where B-tree node blocks come from (uncached reads).
pub trait NodeSource {
    /// Read and decode the node that `ptr` points at, checked with the
    /// kernel's broken-node rules. `level` is the level the parent expects.
    fn node(&mut self, ptr: u64, level: u8) -> Result<BtreeNode>;
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
                let level = node.level - 1;
                let child = src.node(ptr, level)?;
                if child.level != level {
                    return Err(Error::corrupt(
                        "btree node",
                        format!("level mismatch: expected {level}, found {}", child.level),
                    ));
                }
                node = child;
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
            let level = node.level - 1;
            let child = src.node(ptr, level)?;
            if child.level != level {
                return Err(Error::corrupt(
                    "btree node",
                    format!("level mismatch: expected {level}, found {}", child.level),
                ));
            }
            walk(&child, src, f)?;
        }
    }
    Ok(())
}
