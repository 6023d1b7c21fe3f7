//! Pass 3: the block mapping of every file and metadata file, walked whole.
//!
//! Each node block gets the kernel's read-time test (`nilfs_btree_node_broken`)
//! and the level its parent implies (`nilfs_btree_bad_node`); beyond what the
//! kernel tests on read, keys must be strictly increasing and nested in the
//! parent's range (the binary search of `nilfs_btree_node_lookup` assumes
//! both), no slot may hold pointer 0, and no node or data block may be
//! reached twice within a checkpoint. The walk never descends into a node
//! reached before, and the level falls by one at every step, so it ends on
//! any image and visits each node at most once.

use super::codes::Code;
use super::ctx::{file_tag, BlockMap, Ck, Name, Owner};
use crate::format::bmap::BmapRoot;
use crate::format::btree::BtreeNode;
use crate::format::{Cno, BTREE_LEVEL_NODE_MIN, INODE_BMAP_SIZE};

/// What a file's pointers are.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Ptrs {
    /// Disk block numbers: the DAT.
    Physical,
    /// Virtual block numbers, translated at this checkpoint.
    Virtual(Cno),
}

impl Ck<'_, '_> {
    /// Walk the mapping `bmap` of `who`; return its data blocks as
    /// (file block offset, disk block), sorted by offset. Blocks that could
    /// not be resolved are left out (a finding says why).
    pub fn walk_bmap(
        &mut self,
        who: Name<'_>,
        bmap: &[u64; INODE_BMAP_SIZE],
        ptrs: Ptrs,
    ) -> BlockMap {
        let mut out = Vec::new();
        match BmapRoot::decode(bmap) {
            Err(e) => {
                self.lost += 1;
                self.find(
                    Code::BtreeRoot,
                    format!("{}: B-tree root", who()),
                    None,
                    detail(&e),
                    "level 1..13, at most 3 children, empty only at level 1",
                );
            }
            Ok(BmapRoot::Direct(d)) => {
                for (k, &p) in d.ptrs.iter().enumerate() {
                    if p != 0 {
                        self.data_block(who, k as u64, p, ptrs, &mut out);
                    }
                }
            }
            Ok(BmapRoot::Btree(root)) => {
                self.check_node_keys(&|| format!("{}: B-tree root", who()), None, &root);
                self.walk_node(who, &root, 0, None, ptrs, &mut out);
            }
        }
        out.sort_unstable_by_key(|e| e.0);
        out.dedup_by_key(|e| e.0);
        out
    }

    fn check_node_keys(&mut self, name: Name<'_>, block: Option<u64>, node: &BtreeNode) {
        let keys = node.valid_keys();
        if let Some(i) = keys.windows(2).position(|w| w[0] >= w[1]) {
            self.find(
                Code::BtreeKeyOrder,
                name(),
                block,
                format!(
                    "key[{}] = {} follows key[{i}] = {}",
                    i + 1,
                    keys[i + 1],
                    keys[i]
                ),
                "strictly increasing keys",
            );
            self.lost += 1;
        }
    }

    fn walk_node(
        &mut self,
        who: Name<'_>,
        node: &BtreeNode,
        lo: u64,
        hi: Option<u64>,
        ptrs: Ptrs,
        out: &mut BlockMap,
    ) {
        let n = node.valid_keys().len().min(node.valid_ptrs().len());
        for i in 0..n {
            if self.stopped() {
                return;
            }
            let (key, ptr) = (node.keys[i], node.ptrs[i]);
            let child_hi = if i + 1 < n {
                Some(node.keys[i + 1])
            } else {
                hi
            };
            if key < lo || hi.is_some_and(|h| key >= h) {
                self.lost += 1;
                self.find(
                    Code::BtreeKeyRange,
                    format!("{}: level {} node", who(), node.level),
                    None,
                    format!("key {key} at index {i}"),
                    match hi {
                        Some(h) => format!("a key in its parent's range [{lo}, {h})"),
                        None => format!("a key of at least {lo} (its parent's)"),
                    },
                );
            }
            if ptr == 0 {
                self.find(
                    Code::BtreePtrZero,
                    format!("{}: level {} node, key {key}", who(), node.level),
                    None,
                    format!("pointer 0 at index {i}"),
                    "a block pointer",
                );
                self.lost += 1;
                continue;
            }
            if node.level == BTREE_LEVEL_NODE_MIN {
                self.data_block(who, key, ptr, ptrs, out);
                continue;
            }
            let level = node.level - 1;
            let name = || format!("{}: level {level} node, key {key}", who());
            let pbn = match ptrs {
                Ptrs::Physical => self.claim_physical(&name, ptr, Owner::DatNode(key)),
                Ptrs::Virtual(cno) => {
                    self.next_file = self.cur_ino.map(|i| file_tag(i, None));
                    let p = self.translate(ptr, cno, &name);
                    self.next_file = None;
                    p
                }
            };
            let Some(pbn) = pbn else {
                self.lost += 1;
                continue;
            };
            let Some(data) = self.read(pbn, 1) else {
                self.lost += 1;
                continue;
            };
            self.report.stats.nodes += 1;
            let child = match BtreeNode::decode_block(&data, self.bs) {
                Ok(c) => c,
                Err(e) => {
                    let empty = detail(&e).starts_with("bad nchildren 0 ");
                    let (code, want) = if empty {
                        (Code::BtreeNodeEmpty, "at least one child")
                    } else {
                        (
                            Code::BtreeNode,
                            "level 1..13, no ROOT flag, 1..ncmax children",
                        )
                    };
                    self.find(code, name(), Some(pbn), detail(&e), want);
                    self.lost += 1;
                    continue;
                }
            };
            if child.level != level {
                self.find(
                    Code::BtreeLevel,
                    name(),
                    Some(pbn),
                    format!("level {}", child.level),
                    format!("level {level}, one below its parent"),
                );
                self.lost += 1;
                continue;
            }
            // The kernel makes every node block with flags 0
            // (nilfs_btree_node_init) and reads only the ROOT bit (refused
            // above); any other bit is damage it would not see.
            if child.flags != 0 {
                self.find(
                    Code::BtreeNode,
                    name(),
                    Some(pbn),
                    format!("bn_flags {:#x}", child.flags),
                    "0 in a node block",
                );
            }
            self.check_node_keys(&name, Some(pbn), &child);
            self.walk_node(who, &child, key, child_hi, ptrs, out);
        }
    }

    fn data_block(&mut self, who: Name<'_>, key: u64, ptr: u64, ptrs: Ptrs, out: &mut BlockMap) {
        let name = || format!("{}: block {key}", who());
        let pbn = match ptrs {
            Ptrs::Physical => self.claim_physical(&name, ptr, Owner::DatData(key)),
            Ptrs::Virtual(cno) => {
                self.next_file = self.cur_ino.map(|i| file_tag(i, Some(key)));
                let p = self.translate(ptr, cno, &name);
                self.next_file = None;
                p
            }
        };
        match pbn {
            Some(p) => out.push((key, p)),
            None => self.lost += 1,
        }
    }

    /// A disk block named by the DAT's own mapping: inside the segment
    /// area, claimed once, and described by its log as `owner`.
    fn claim_physical(&mut self, who: Name<'_>, pbn: u64, owner: Owner) -> Option<u64> {
        if !self.in_segments(pbn) {
            self.find(
                Code::BtreePtrRange,
                who(),
                None,
                format!("pointer {pbn} is outside the segment area"),
                format!(
                    "a block in [{}, {})",
                    self.geo.first_data_block,
                    self.geo.nsegments * self.geo.blocks_per_segment
                ),
            );
            return None;
        }
        if !self.phys.insert(pbn) {
            self.find(
                Code::BtreeShared,
                who(),
                Some(pbn),
                "the block is reached a second time",
                "each block reached once",
            );
            return None;
        }
        self.place(pbn, owner, who, Code::BtreeDatBlock);
        Some(pbn)
    }
}

/// The detail of a decoder's error, without the structure name it repeats.
pub(crate) fn detail(e: &crate::Error) -> String {
    match e {
        crate::Error::Corrupt { detail, .. } => detail.clone(),
        other => other.to_string(),
    }
}
