//! B-tree lookups through the node cache, with sibling read-ahead: the
//! kernel's `nilfs_btree_do_lookup`, `__nilfs_btree_get_block` and
//! `nilfs_btree_lookup_contig` (fs/nilfs2/btree.c) after seed 000
//! ("nilfs2: read ahead btree sibling nodes").
//!
//! While descending for `lookup_contig`, the level-1 node is read with
//! read-ahead information: after submitting it, up to [`MAX_RA_BLOCKS`]
//! right siblings (the parent's next pointers, bounded by the parent's
//! capacity, not its child count) are submitted as read-ahead. The node
//! cache submits a sibling only when its physical block directly follows the
//! previously submitted one and `trylock` succeeds, so read-ahead never
//! sleeps; it stops as soon as the wanted node's read has completed. A
//! buffer that arrived by read-ahead is checked with the broken-node rules
//! once, on first use, and then marked Checked.

use crate::cache::{BtnodeCache, BufRef, ReadMode, Submit};
use crate::format::bmap::BmapRoot;
use crate::format::btree::{node_ncmax, BtreeNode, ROOT_NCHILDREN_MAX};
use crate::format::{BlockNr, BTREE_LEVEL_NODE_MIN, INODE_BMAP_SIZE};
use crate::{Error, Result};

/// `max_ra_blocks` of the kernel's read-ahead information: siblings read
/// ahead per level-1 node.
pub const MAX_RA_BLOCKS: usize = 7;

/// Whether lookups read sibling nodes ahead (a mount-time choice, so users
/// can compare; the kernel before seed 000 is `Off`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ReadAhead {
    /// Read ahead up to 7 right siblings of a level-1 node (seed 000).
    #[default]
    On,
    /// No read-ahead.
    Off,
}

/// How node buffers are verified before use.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum NodeCheck {
    /// The kernel: every buffer is checked with the broken-node rules once,
    /// on its first use, whoever read it (`nilfs_btree_broken_node_block`
    /// and the Checked flag).
    #[default]
    OnFirstUse,
    /// Known-bad variant: check only a buffer this lookup read and waited
    /// for itself; a buffer found already up to date — for example one that
    /// arrived by read-ahead — is used unchecked.
    OnlyWhenWaited,
}

/// Configuration of a [`BtreeReader`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReaderConfig {
    /// Sibling read-ahead.
    pub readahead: ReadAhead,
    /// Node verification.
    pub check: NodeCheck,
    /// Simulated CPU time charged per read-ahead submission, in ns (the
    /// device's clock only moves when someone waits or charges CPU; without
    /// a cost the wanted node could never complete during read-ahead).
    pub ra_submit_cpu_ns: u64,
}

/// Read-ahead information for a level-1 node: its parent and its index
/// there (`struct nilfs_btree_readahead_info`).
struct RaInfo<'a> {
    parent: &'a BtreeNode,
    index: usize,
    ncmax: usize,
}

/// Reads one B-tree (one inode's mapping) through its node cache.
pub struct BtreeReader<'a> {
    cache: &'a BtnodeCache,
    /// Physical block of a node pointer: the DAT translation for ordinary
    /// files, the identity for the DAT.
    locate: &'a dyn Fn(u64) -> Result<BlockNr>,
    config: ReaderConfig,
}

impl<'a> BtreeReader<'a> {
    /// A reader of nodes in `cache`, locating node pointers with `locate`.
    pub fn new(
        cache: &'a BtnodeCache,
        locate: &'a dyn Fn(u64) -> Result<BlockNr>,
        config: ReaderConfig,
    ) -> Self {
        BtreeReader {
            cache,
            locate,
            config,
        }
    }

    fn block_size(&self) -> u32 {
        self.cache.buffers().block_size()
    }

    /// `__nilfs_btree_get_block`: the node named `ptr`, verified, with
    /// optional sibling read-ahead.
    fn get_block(&self, ptr: u64, ra: Option<RaInfo<'_>>) -> Result<(BufRef, BtreeNode)> {
        let mut submitted: Option<BlockNr> = None;
        let locate = || (self.locate)(ptr);
        let (bh, waited) =
            match self
                .cache
                .submit_block(ptr, locate, ReadMode::Read, &mut submitted)?
            {
                Submit::Exists(bh) => (bh, false),
                Submit::Busy => unreachable!("a normal read never reports busy"),
                Submit::Issued(bh) => {
                    let mut done_early = false;
                    if let (Some(ra), ReadAhead::On) = (ra, self.config.readahead) {
                        let end = (ra.index + 1 + MAX_RA_BLOCKS).min(ra.ncmax);
                        for i in ra.index + 1..end {
                            let ptr2 = ra.parent.ptrs.get(i).copied().unwrap_or(0);
                            let locate2 = || (self.locate)(ptr2);
                            match self.cache.submit_block(
                                ptr2,
                                locate2,
                                ReadMode::ReadAhead,
                                &mut submitted,
                            ) {
                                Ok(Submit::Issued(_) | Submit::Exists(_) | Submit::Busy) => {}
                                // Any other failure (a translation error for a
                                // stale or empty slot) ends the read-ahead.
                                Err(_) => break,
                            }
                            if self.config.ra_submit_cpu_ns > 0 {
                                self.cache.device().advance_by(self.config.ra_submit_cpu_ns);
                            }
                            if !bh.is_locked() {
                                done_early = true;
                                break;
                            }
                        }
                    }
                    bh.finish_read(done_early, ptr, "b-tree node")?;
                    (bh, true)
                }
            };
        let bs = self.block_size();
        // The kernel checks every buffer once, on first use, whoever read it;
        // the known-bad variant checks only what this call waited for.
        let must_check = match self.config.check {
            NodeCheck::OnFirstUse => true,
            NodeCheck::OnlyWhenWaited => waited,
        };
        let node = if must_check {
            bh.verify_once(|d| verify_node(d, bs))
                .map_err(|e| name_block(e, ptr, self.locate))?;
            bh.read_data(|d| BtreeNode::decode_block(d, bs))?
        } else {
            bh.read_data(|d| BtreeNode::decode_block_unchecked(d, bs))?
        };
        Ok((bh, node))
    }

    /// Descend from the root to level `minlevel` looking for `key`
    /// (`nilfs_btree_do_lookup`). Returns the path — the root first, then
    /// one node per level — with the index taken in each node and its
    /// capacity, and the pointer found for `key` (`None`: a hole).
    fn do_lookup(
        &self,
        root: &BtreeNode,
        key: u64,
        minlevel: u8,
        readahead: bool,
    ) -> Result<(Vec<PathStep>, Option<u64>)> {
        let (index, mut found) = root.lookup(key);
        let mut path = vec![PathStep {
            node: root.clone(),
            index,
            ncmax: ROOT_NCHILDREN_MAX,
        }];
        if root.nchildren == 0 {
            return Ok((path, None));
        }
        let mut level = root.level;
        while level > minlevel {
            level -= 1;
            let parent = path.last().expect("the root is on the path");
            let Some(ptr) = node_ptr(&parent.node, parent.index) else {
                return Ok((path, None));
            };
            let ra = (readahead && level == BTREE_LEVEL_NODE_MIN).then_some(RaInfo {
                parent: &parent.node,
                index: parent.index,
                ncmax: parent.ncmax,
            });
            let (_bh, node) = self.get_block(ptr, ra)?;
            if node.level != level {
                let e = Error::corrupt(
                    "btree node",
                    format!("level mismatch: expected {level}, found {}", node.level),
                );
                return Err(name_block(e, ptr, self.locate));
            }
            // Once an upper level matched exactly, the key is the first of
            // every node below.
            let index = if found {
                0
            } else {
                let (i, f) = node.lookup(key);
                found = f;
                i
            };
            path.push(PathStep {
                node,
                index,
                ncmax: node_ncmax(self.block_size()),
            });
        }
        let last = path.last().expect("the root is on the path");
        let ptr = if found {
            node_ptr(&last.node, last.index)
        } else {
            None
        };
        Ok((path, ptr))
    }

    /// `nilfs_btree_lookup` at level 1: the pointer stored for `key`.
    pub fn lookup(&self, bmap: &[u64; INODE_BMAP_SIZE], key: u64) -> Result<Option<u64>> {
        match BmapRoot::decode(bmap)? {
            BmapRoot::Direct(d) => Ok(d.lookup(key).filter(|&p| p != 0)),
            BmapRoot::Btree(root) => Ok(self.do_lookup(&root, key, BTREE_LEVEL_NODE_MIN, false)?.1),
        }
    }

    /// `nilfs_btree_lookup_contig`: the pointer for `key` (translated with
    /// `translate` when given, as the kernel does for virtual-pointer files)
    /// and how many following keys map to consecutive blocks, at most
    /// `maxblocks`. The run stays within the level-1 node and its right
    /// siblings under the same parent, which are read with read-ahead.
    pub fn lookup_contig(
        &self,
        bmap: &[u64; INODE_BMAP_SIZE],
        key: u64,
        maxblocks: u32,
        translate: Option<&dyn Fn(u64) -> Result<u64>>,
    ) -> Result<Option<(u64, u32)>> {
        let tr = |p: u64| -> Result<u64> {
            match translate {
                Some(t) => t(p),
                None => Ok(p),
            }
        };
        let maxblocks = maxblocks.max(1);
        let root = match BmapRoot::decode(bmap)? {
            BmapRoot::Direct(d) => {
                // nilfs_direct_lookup_contig: consecutive slots up to the last key.
                let Some(p) = d.lookup(key).filter(|&p| p != 0) else {
                    return Ok(None);
                };
                let ptr = tr(p)?;
                let mut cnt = 1u32;
                while cnt < maxblocks {
                    match d.lookup(key + u64::from(cnt)).filter(|&p| p != 0) {
                        Some(p2) if tr(p2)? == ptr + u64::from(cnt) => cnt += 1,
                        _ => break,
                    }
                }
                return Ok(Some((ptr, cnt)));
            }
            BmapRoot::Btree(root) => root,
        };
        let (mut path, found) = self.do_lookup(&root, key, BTREE_LEVEL_NODE_MIN, true)?;
        let Some(p) = found else { return Ok(None) };
        let ptr = tr(p)?;
        let mut cnt = 1u32;
        if cnt == maxblocks {
            return Ok(Some((ptr, cnt)));
        }
        let leaf = path.len() - 1;
        let mut index = path[leaf].index + 1;
        loop {
            let node = &path[leaf].node;
            while index < usize::from(node.nchildren) {
                if node.keys[index] != key + u64::from(cnt) {
                    return Ok(Some((ptr, cnt)));
                }
                if tr(node.ptrs[index])? != ptr + u64::from(cnt) {
                    return Ok(Some((ptr, cnt)));
                }
                cnt += 1;
                if cnt == maxblocks {
                    return Ok(Some((ptr, cnt)));
                }
                index += 1;
            }
            // The level-1 node is the root: no siblings.
            if leaf == 0 {
                return Ok(Some((ptr, cnt)));
            }
            // The right sibling under the same parent, if it continues the run.
            let parent = &path[leaf - 1];
            let pindex = parent.index + 1;
            if pindex >= usize::from(parent.node.nchildren)
                || parent.node.keys[pindex] != key + u64::from(cnt)
            {
                return Ok(Some((ptr, cnt)));
            }
            let ra = RaInfo {
                parent: &parent.node,
                index: pindex,
                ncmax: parent.ncmax,
            };
            let sib_ptr = parent.node.ptrs[pindex];
            let (_bh, sib) = self.get_block(sib_ptr, Some(ra))?;
            if sib.level != BTREE_LEVEL_NODE_MIN {
                let e = Error::corrupt(
                    "btree node",
                    format!("level mismatch: expected 1, found {}", sib.level),
                );
                return Err(name_block(e, sib_ptr, self.locate));
            }
            path[leaf - 1].index = pindex;
            path[leaf] = PathStep {
                node: sib,
                index: 0,
                ncmax: node_ncmax(self.block_size()),
            };
            index = 0;
        }
    }
}

/// One step of a lookup path: a node, the index taken in it, its capacity.
#[derive(Clone)]
struct PathStep {
    node: BtreeNode,
    index: usize,
    ncmax: usize,
}

/// The pointer at `index`, or `None` past the node's children (the kernel's
/// "insert point", `NILFS_BMAP_INVALID_PTR`).
fn node_ptr(node: &BtreeNode, index: usize) -> Option<u64> {
    (index < usize::from(node.nchildren))
        .then(|| node.ptrs[index])
        .filter(|&p| p != 0)
}

/// The check a node buffer passes once before use: the kernel's
/// broken-node rules (`nilfs_btree_node_broken`), plus keys in strictly
/// ascending order, which the kernel does not test at read time but which
/// every lookup relies on (a misordered node would silently misroute).
fn verify_node(data: &[u8], block_size: u32) -> Result<()> {
    BtreeNode::decode_block(data, block_size)?.check_keys_sorted()
}

/// Name the physical block in a node-check error (the cache is keyed by the
/// pointer; the block is what an administrator can inspect).
fn name_block(e: Error, ptr: u64, locate: &dyn Fn(u64) -> Result<BlockNr>) -> Error {
    match locate(ptr) {
        Ok(b) => e.at_block(b.0),
        Err(_) => e,
    }
}
