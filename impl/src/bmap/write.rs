//! The write side of one file's block mapping: the kernel's bmap.c,
//! direct.c and btree.c insert, delete, truncate, propagate and assign,
//! over an in-memory copy of the root and of the node blocks it has touched.
//!
//! [`Bmap`] is what the segment constructor drives. It holds the root (a
//! direct map of six slots, or a B-tree root of at most three entries) and
//! an arena of node blocks, loaded lazily through a [`NodeSource`] (the
//! read side's trait: for ordinary files a pointer is a virtual block
//! number, for the DAT a physical one — this module never cares which).
//!
//! # Shape
//!
//! Every structural choice follows the kernel, so the images have the
//! kernel's shape: which entries live in which node after any sequence of
//! operations is what `fs/nilfs2` would produce. Node edits are the
//! kernel's `memmove`s: slots past `nchildren` keep stale values as the
//! kernel's do, and a fresh node block is zeroed (`nilfs_btnode_create_block`).
//! The direct/B-tree conversions write over the previous `i_bmap` contents
//! exactly as the kernel's union does (see [`Bmap::insert`], [`Bmap::delete`]).
//!
//! # Pointers, and one deliberate difference in timing
//!
//! The kernel allocates a new node's virtual block number when it creates
//! the node (`nilfs_bmap_prepare_alloc_ptr` in `nilfs_btree_prepare_insert`)
//! and a rewritten node's new number when it propagates dirtiness
//! (`nilfs_btree_prepare_update_v`). Here both are deferred to
//! [`Bmap::assign`], which the segment constructor calls with the pointer it
//! chose; until then a new node's parent slot holds a *temporary pointer*
//! (bit 63 set, like the kernel's `NILFS_BMAP_NEW_PTR_INIT` values for the
//! DAT) and a rewritten node's slot keeps its old pointer. Temporary
//! pointers never reach the disk: encoding refuses one in a valid slot and
//! writes 0 for one in a stale slot.
//!
//! # Dirtiness
//!
//! Every node an operation edits is marked dirty together with all its
//! ancestors, which is the closure the kernel reaches when the segment
//! constructor calls `nilfs_bmap_propagate` on every dirty buffer. So the
//! invariant "a dirty node's parent is dirty or the root" always holds.
//!
//! # Bounds
//!
//! Descents are bounded by the root level (at most 13): every node loaded
//! must carry exactly its parent's level minus one. Whole-tree walks are
//! iterative and refuse a node reachable twice. Nothing here recurses.

use std::collections::{BTreeMap, BTreeSet};

use super::NodeSource;
use crate::format::bmap::{BMAP_LARGE, DIRECT_NBLOCKS};
use crate::format::btree::{node_ncmax, BtreeNode, NODE_ROOT, ROOT_NCHILDREN_MAX};
use crate::format::{
    BTREE_LEVEL_MAX, BTREE_LEVEL_NODE_MIN, INODE_BMAP_SIZE, MAX_BLOCK_SIZE, MIN_BLOCK_SIZE,
};
use crate::{Errno, Error, Result};

/// `NILFS_DIRECT_KEY_MAX`: the largest key a direct map holds.
pub const DIRECT_KEY_MAX: u64 = DIRECT_NBLOCKS as u64 - 1;

/// `NILFS_BMAP_LARGE_LOW` (= `NILFS_BTREE_ROOT_NCHILDREN_MAX`): a B-tree
/// converts back to a direct map only when every remaining key is below it
/// (`nilfs_btree_check_delete`).
pub const LARGE_LOW: u64 = ROOT_NCHILDREN_MAX as u64;

/// Bit 63 marks a temporary in-memory pointer (`NILFS_BMAP_NEW_PTR_INIT`).
pub const TEMP_PTR_BIT: u64 = 1 << 63;

/// `NILFS_BTREE_NODE_NCHILDREN_MIN`: the fill the kernel keeps in a node
/// block that has a sibling, `(ncmax - 1) / 2 + 1`.
pub fn node_ncmin(ncmax: usize) -> usize {
    (ncmax.saturating_sub(1)) / 2 + 1
}

/// One slot in a path has this many levels: 0 (data) to 13, plus the level
/// a grow creates before it is refused.
const PATH_LEN: usize = BTREE_LEVEL_MAX as usize + 1;

/// A handle to a node block held in memory. Valid until the node is
/// removed from the tree (by a delete) or the mapping converts to direct.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct NodeId(u32);

/// A dirty node block as [`Bmap::dirty_nodes`] reports it: what the segment
/// constructor needs for the node's binfo (`{first key, level}` for the DAT,
/// `{vblocknr}` otherwise) and for ending its old DAT entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DirtyNode {
    /// The node.
    pub id: NodeId,
    /// Its level (1 for nodes whose pointers address data blocks).
    pub level: u8,
    /// Its first key (`nilfs_btree_node_get_key(node, 0)`).
    pub first_key: u64,
    /// Where it was last written, `None` for a node never written (or
    /// already assigned in this log).
    pub old_ptr: Option<u64>,
    /// Already given its new address in this log ([`Bmap::assign`]).
    pub assigned: bool,
}

/// What an insert changed in block counts. The kernel adds
/// `1 + nodes_added` blocks to `i_blocks` (`nilfs_inode_add_blocks` with
/// `bs_nblocks`: the data block plus every node block created).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct InsertOutcome {
    /// Node blocks created (splits, a grow, a direct→B-tree conversion).
    pub nodes_added: u32,
}

/// What a delete removed. The kernel subtracts `1 + nodes_removed` blocks
/// from `i_blocks` (`nilfs_inode_sub_blocks` with `bs_nblocks`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DeleteOutcome {
    /// The deleted data block's pointer (the caller ends it in the DAT).
    pub ptr: u64,
    /// Node blocks removed (concatenations, a shrink).
    pub nodes_removed: u32,
    /// Pointers of removed node blocks that had been written; the caller
    /// ends them in the DAT (`nilfs_bmap_commit_end_ptr`). Removed nodes
    /// never written have nothing to end.
    pub freed_nodes: Vec<u64>,
}

/// Everything a truncate deleted, in deletion order (last key first).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TruncateOutcome {
    /// `(key, ptr)` of every data block deleted.
    pub deleted: Vec<(u64, u64)>,
    /// Node blocks removed in total.
    pub nodes_removed: u32,
    /// Written node pointers freed in total.
    pub freed_nodes: Vec<u64>,
}

/// The shape of a mapping, as [`Bmap::check_invariants`] measured it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TreeStats {
    /// 0 for a direct map, else the root level + 1 (`nilfs_btree_height`).
    pub height: u8,
    /// Node blocks in the tree (the root is not a block).
    pub nodes: usize,
    /// Mapped data blocks.
    pub entries: usize,
    /// Child counts of the level-1 node blocks, left to right.
    pub level1_fill: Vec<usize>,
}

#[derive(Clone, Debug)]
enum Root {
    /// `i_bmap[0]` verbatim and the six pointers.
    Direct {
        header: u64,
        ptrs: [u64; DIRECT_NBLOCKS],
    },
    /// The in-inode root (capacity 3).
    Btree(BtreeNode),
}

#[derive(Clone, Debug)]
struct Node {
    bt: BtreeNode,
    /// The value the parent's slot holds for this node: the on-disk pointer,
    /// or a temporary pointer for a node never assigned.
    slot: u64,
    /// Where the node was last written (or loaded from); `None` if never.
    disk: Option<u64>,
    dirty: bool,
    /// Assigned a new pointer in the log being built.
    assigned: bool,
}

/// Where a node lives: in the inode or in the arena.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Loc {
    Root,
    Node(NodeId),
}

/// What commit does at one level (the kernel's `bp_op`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum Op {
    #[default]
    None,
    Insert,
    CarryLeft,
    CarryRight,
    Split,
    Grow,
    Delete,
    BorrowLeft,
    BorrowRight,
    ConcatLeft,
    ConcatRight,
    Shrink,
    Nop,
}

/// One level of a `struct nilfs_btree_path`.
#[derive(Clone, Copy, Debug, Default)]
struct PathLevel {
    /// `bp_bh`: the node at this level (`None` at the root's level).
    node: Option<NodeId>,
    /// `bp_index`.
    index: usize,
    /// `bp_sib_bh`: a sibling, or the new node of a split or grow.
    sib: Option<NodeId>,
    /// `bp_op`.
    op: Op,
}

type Path = [PathLevel; PATH_LEN];

/// A whole-tree visitor: `(location, node, Some((parent, index in parent)))`.
type WalkFn<'a> = dyn FnMut(Loc, &BtreeNode, Option<(&BtreeNode, usize)>) -> Result<()> + 'a;

/// A source for operations that must find everything already in memory
/// (the ancestors of a dirty node always are).
struct InMemoryOnly;

impl NodeSource for InMemoryOnly {
    fn node(&mut self, ptr: u64, _level: u8) -> Result<BtreeNode> {
        Err(Error::Invalid(format!(
            "bmap: node {ptr:#x} is not in memory (an ancestor of a dirty node must be)"
        )))
    }
}

/// A mutable block mapping for one file (see the module documentation).
#[derive(Clone, Debug)]
pub struct Bmap {
    block_size: u32,
    ncmax: usize,
    root: Root,
    arena: Vec<Option<Node>>,
    free_ids: Vec<u32>,
    /// Slot value → node, for every node in memory (the btnode cache's key).
    by_ptr: BTreeMap<u64, NodeId>,
    next_temp: u64,
    /// `nilfs_bmap_dirty`: the root (`i_bmap`) must be written back.
    bmap_dirty: bool,
    /// Some node was assigned since the last [`Bmap::mark_clean`].
    assigning: bool,
}

// ---------------------------------------------------------------------------
// Node primitives: the kernel's memmove-based edits, on any node (root or
// block). Their preconditions are internal invariants, guaranteed by the
// callers' counts; violating one is a bug, not bad input.

/// `nilfs_btree_node_insert`.
fn node_insert(node: &mut BtreeNode, index: usize, key: u64, ptr: u64) {
    let n = usize::from(node.nchildren);
    assert!(
        index <= n && n < node.capacity(),
        "bmap: insert at {index} into a node of {n}/{}",
        node.capacity()
    );
    node.keys.copy_within(index..n, index + 1);
    node.ptrs.copy_within(index..n, index + 1);
    node.keys[index] = key;
    node.ptrs[index] = ptr;
    node.nchildren += 1;
}

/// `nilfs_btree_node_delete`: remove entry `index`, returning it.
fn node_delete(node: &mut BtreeNode, index: usize) -> (u64, u64) {
    let n = usize::from(node.nchildren);
    assert!(index < n, "bmap: delete at {index} from a node of {n}");
    let out = (node.keys[index], node.ptrs[index]);
    node.keys.copy_within(index + 1..n, index);
    node.ptrs.copy_within(index + 1..n, index);
    node.nchildren -= 1;
    out
}

/// `nilfs_btree_node_move_left`: the first `n` entries of `right` go to the
/// end of `left`.
fn move_left(left: &mut BtreeNode, right: &mut BtreeNode, n: usize) {
    let (ln, rn) = (usize::from(left.nchildren), usize::from(right.nchildren));
    assert!(
        n <= rn && ln + n <= left.capacity(),
        "bmap: move_left {n} from {rn} onto {ln}/{}",
        left.capacity()
    );
    left.keys[ln..ln + n].copy_from_slice(&right.keys[..n]);
    left.ptrs[ln..ln + n].copy_from_slice(&right.ptrs[..n]);
    right.keys.copy_within(n..rn, 0);
    right.ptrs.copy_within(n..rn, 0);
    left.nchildren += n as u16;
    right.nchildren -= n as u16;
}

/// `nilfs_btree_node_move_right`: the last `n` entries of `left` go to the
/// front of `right`.
fn move_right(left: &mut BtreeNode, right: &mut BtreeNode, n: usize) {
    let (ln, rn) = (usize::from(left.nchildren), usize::from(right.nchildren));
    assert!(
        n <= ln && rn + n <= right.capacity(),
        "bmap: move_right {n} from {ln} onto {rn}/{}",
        right.capacity()
    );
    right.keys.copy_within(0..rn, n);
    right.ptrs.copy_within(0..rn, n);
    right.keys[..n].copy_from_slice(&left.keys[ln - n..ln]);
    right.ptrs[..n].copy_from_slice(&left.ptrs[ln - n..ln]);
    left.nchildren -= n as u16;
    right.nchildren += n as u16;
}

/// `a - b` for the kernel's `int` arithmetic on child counts, which its
/// preconditions keep non-negative.
fn count_diff(a: usize, b: usize) -> usize {
    a.checked_sub(b)
        .unwrap_or_else(|| panic!("bmap: negative move count {a} - {b}"))
}

fn corrupt(detail: impl Into<String>) -> Error {
    Error::corrupt("btree node", detail)
}

fn violation(detail: impl Into<String>) -> Error {
    Error::corrupt("btree invariant", detail)
}

impl Bmap {
    /// An empty mapping (an all-zero direct map), for a new file.
    pub fn new_empty(block_size: u32) -> Result<Self> {
        Self::open(&[0; INODE_BMAP_SIZE], block_size)
    }

    /// The mapping whose `i_bmap` is `bmap`, checked as the kernel checks it
    /// at inode load (`nilfs_bmap_read`: `nilfs_btree_root_broken` for a
    /// B-tree, nothing for a direct map). Nodes load lazily later.
    pub fn open(bmap: &[u64; INODE_BMAP_SIZE], block_size: u32) -> Result<Self> {
        if !(MIN_BLOCK_SIZE..=MAX_BLOCK_SIZE).contains(&block_size) || !block_size.is_power_of_two()
        {
            return Err(Error::Invalid(format!("invalid block size {block_size}")));
        }
        let root = if bmap[0] as u8 & BMAP_LARGE != 0 {
            Root::Btree(BtreeNode::decode_root(bmap)?)
        } else {
            let mut ptrs = [0; DIRECT_NBLOCKS];
            ptrs.copy_from_slice(&bmap[1..]);
            Root::Direct {
                header: bmap[0],
                ptrs,
            }
        };
        Ok(Bmap {
            block_size,
            ncmax: node_ncmax(block_size),
            root,
            arena: Vec::new(),
            free_ids: Vec::new(),
            by_ptr: BTreeMap::new(),
            next_temp: 0,
            bmap_dirty: false,
            assigning: false,
        })
    }

    /// The node block size.
    pub fn block_size(&self) -> u32 {
        self.block_size
    }

    /// Whether the mapping is a B-tree (`NILFS_BMAP_LARGE`).
    pub fn is_btree(&self) -> bool {
        matches!(self.root, Root::Btree(_))
    }

    /// `nilfs_bmap_dirty`: `i_bmap` changed since the last
    /// [`Bmap::mark_clean`] and the inode must be written back.
    pub fn is_bmap_dirty(&self) -> bool {
        self.bmap_dirty
    }

    /// Node blocks currently held in memory.
    pub fn nodes_in_memory(&self) -> usize {
        self.by_ptr.len()
    }

    // -----------------------------------------------------------------------
    // Arena

    fn node(&self, id: NodeId) -> &Node {
        self.arena[id.0 as usize]
            .as_ref()
            .unwrap_or_else(|| panic!("bmap: node {id:?} was released"))
    }

    fn node_mut(&mut self, id: NodeId) -> &mut Node {
        self.arena[id.0 as usize]
            .as_mut()
            .unwrap_or_else(|| panic!("bmap: node {id:?} was released"))
    }

    fn root_node(&self) -> &BtreeNode {
        match &self.root {
            Root::Btree(r) => r,
            Root::Direct { .. } => panic!("bmap: B-tree operation on a direct map"),
        }
    }

    fn root_node_mut(&mut self) -> &mut BtreeNode {
        match &mut self.root {
            Root::Btree(r) => r,
            Root::Direct { .. } => panic!("bmap: B-tree operation on a direct map"),
        }
    }

    fn root_level(&self) -> usize {
        usize::from(self.root_node().level)
    }

    fn bt(&self, loc: Loc) -> &BtreeNode {
        match loc {
            Loc::Root => self.root_node(),
            Loc::Node(id) => &self.node(id).bt,
        }
    }

    fn bt_mut(&mut self, loc: Loc) -> &mut BtreeNode {
        match loc {
            Loc::Root => self.root_node_mut(),
            Loc::Node(id) => &mut self.node_mut(id).bt,
        }
    }

    /// Two distinct nodes, mutably (a move between siblings, or root/child).
    fn two_mut(&mut self, a: Loc, b: Loc) -> (&mut BtreeNode, &mut BtreeNode) {
        match (a, b) {
            (Loc::Root, Loc::Node(id)) | (Loc::Node(id), Loc::Root) => {
                let node = self.arena[id.0 as usize]
                    .as_mut()
                    .unwrap_or_else(|| panic!("bmap: node {id:?} was released"));
                let Root::Btree(root) = &mut self.root else {
                    panic!("bmap: B-tree operation on a direct map")
                };
                if a == Loc::Root {
                    (root, &mut node.bt)
                } else {
                    (&mut node.bt, root)
                }
            }
            (Loc::Node(x), Loc::Node(y)) => {
                let (i, j) = (x.0 as usize, y.0 as usize);
                assert!(i != j, "bmap: a node moved onto itself");
                let (lo, hi) = self.arena.split_at_mut(i.max(j));
                let (p, q) = (lo[i.min(j)].as_mut(), hi[0].as_mut());
                let (p, q) = (
                    &mut p.expect("bmap: released node").bt,
                    &mut q.expect("bmap: released node").bt,
                );
                if i < j {
                    (p, q)
                } else {
                    (q, p)
                }
            }
            (Loc::Root, Loc::Root) => panic!("bmap: the root moved onto itself"),
        }
    }

    fn alloc_id(&mut self, node: Node) -> NodeId {
        if let Some(i) = self.free_ids.pop() {
            self.arena[i as usize] = Some(node);
            NodeId(i)
        } else {
            self.arena.push(Some(node));
            NodeId((self.arena.len() - 1) as u32)
        }
    }

    /// A new, zeroed node block (`nilfs_btree_get_new_block` +
    /// `nilfs_btree_node_init(sib, 0, level, 0, ...)`), with a temporary
    /// pointer until [`Bmap::assign`].
    fn new_node(&mut self, level: usize) -> NodeId {
        let slot = TEMP_PTR_BIT | self.next_temp;
        self.next_temp += 1;
        let id = self.alloc_id(Node {
            bt: BtreeNode::new_block(self.block_size, level as u8),
            slot,
            disk: None,
            dirty: true,
            assigned: false,
        });
        self.by_ptr.insert(slot, id);
        id
    }

    /// Drop a node removed from the tree (`nilfs_btnode_delete`); returns
    /// where it had been written, if anywhere.
    fn release(&mut self, id: NodeId) -> Option<u64> {
        let node = self.arena[id.0 as usize]
            .take()
            .unwrap_or_else(|| panic!("bmap: node {id:?} released twice"));
        self.by_ptr.remove(&node.slot);
        self.free_ids.push(id.0);
        node.disk
    }

    /// The child at `ptr`, which must be a level-`level` node block: from
    /// memory, else loaded through `src` and checked (`nilfs_btree_get_block`
    /// with `nilfs_btree_broken_node_block`, then `nilfs_btree_bad_node`).
    fn get_child(&mut self, ptr: u64, level: usize, src: &mut dyn NodeSource) -> Result<NodeId> {
        if let Some(&id) = self.by_ptr.get(&ptr) {
            let have = self.node(id).bt.level;
            if usize::from(have) != level {
                return Err(corrupt(format!(
                    "level mismatch at {ptr:#x}: expected {level}, found {have}"
                )));
            }
            return Ok(id);
        }
        if ptr == 0 || ptr & TEMP_PTR_BIT != 0 {
            return Err(corrupt(format!("invalid child pointer {ptr:#x}")));
        }
        let bt = src.node(ptr, level as u8)?;
        if usize::from(bt.level) != level {
            return Err(corrupt(format!(
                "level mismatch at {ptr:#x}: expected {level}, found {}",
                bt.level
            )));
        }
        let n = usize::from(bt.nchildren);
        if bt.flags & NODE_ROOT != 0
            || n == 0
            || n > self.ncmax
            || bt.keys.len() != self.ncmax
            || bt.ptrs.len() != self.ncmax
        {
            return Err(corrupt(format!(
                "broken node at {ptr:#x}: flags {:#x}, nchildren {n}, capacity {}",
                bt.flags,
                bt.keys.len()
            )));
        }
        let id = self.alloc_id(Node {
            bt,
            slot: ptr,
            disk: Some(ptr),
            dirty: false,
            assigned: false,
        });
        self.by_ptr.insert(ptr, id);
        Ok(id)
    }

    // -----------------------------------------------------------------------
    // Lookups

    /// `nilfs_btree_do_lookup`: fill `path` from the root down to
    /// `minlevel`; returns whether `key` matched exactly. Every level's
    /// `index` starts at 0 (`nilfs_btree_alloc_path`).
    fn do_lookup(
        &mut self,
        key: u64,
        minlevel: usize,
        src: &mut dyn NodeSource,
        path: &mut Path,
    ) -> Result<bool> {
        let root = self.root_node();
        let mut level = usize::from(root.level);
        if level < minlevel || root.nchildren == 0 {
            return Ok(false);
        }
        let (mut index, mut found) = root.lookup(key);
        let mut ptr = root.ptr(index).unwrap_or(0);
        path[level].node = None;
        path[level].index = index;
        while level > minlevel {
            level -= 1;
            let id = self.get_child(ptr, level, src)?;
            let bt = &self.node(id).bt;
            if bt.nchildren == 0 {
                return Err(corrupt(format!("empty node at level {level}")));
            }
            if !found {
                (index, found) = bt.lookup(key);
            } else {
                index = 0;
            }
            ptr = bt.ptr(index).unwrap_or(0);
            path[level].node = Some(id);
            path[level].index = index;
        }
        Ok(found)
    }

    /// The pointer mapped at `key`, `None` for a hole (`nilfs_bmap_lookup`).
    pub fn lookup(&mut self, key: u64, src: &mut dyn NodeSource) -> Result<Option<u64>> {
        match &self.root {
            Root::Direct { ptrs, .. } => Ok(usize::try_from(key)
                .ok()
                .and_then(|i| ptrs.get(i).copied())
                .filter(|&p| p != 0)),
            Root::Btree(_) => {
                let mut path = Path::default();
                if !self.do_lookup(key, 1, src, &mut path)? {
                    return Ok(None);
                }
                let loc = self.loc_at(&path, 1);
                Ok(self.bt(loc).ptr(path[1].index).filter(|&p| p != 0))
            }
        }
    }

    /// `nilfs_bmap_lookup_at_level(bmap, key, level + 1)` as the cleaner's
    /// ioctls use it: the pointer to the block at `level` (0: the data
    /// block, n: the level-n node) on `key`'s path, `None` if `key` is not
    /// mapped there exactly. A direct map has data blocks only.
    pub fn lookup_at_level(
        &mut self,
        key: u64,
        level: u8,
        src: &mut dyn NodeSource,
    ) -> Result<Option<u64>> {
        match &self.root {
            Root::Direct { .. } if level == 0 => self.lookup(key, src),
            Root::Direct { .. } => Ok(None),
            Root::Btree(_) => {
                let minlevel = usize::from(level) + 1;
                let mut path = Path::default();
                if minlevel >= PATH_LEN || !self.do_lookup(key, minlevel, src, &mut path)? {
                    return Ok(None);
                }
                let loc = self.loc_at(&path, minlevel);
                Ok(self.bt(loc).ptr(path[minlevel].index).filter(|&p| p != 0))
            }
        }
    }

    /// `nilfs_btree_mark` (the cleaner's `NILFS_IOCTL_MARK_BLOCKS_DIRTY`
    /// for a DAT node): the level-`level` node whose first key is `key`
    /// becomes dirty, with its ancestors (what `nilfs_btree_propagate_p`
    /// does when the constructor collects it). ENOENT if there is none.
    pub fn mark_node_dirty(&mut self, key: u64, level: u8, src: &mut dyn NodeSource) -> Result<()> {
        let minlevel = usize::from(level) + 1;
        let mut path = Path::default();
        let found = level > 0
            && minlevel < PATH_LEN
            && matches!(self.root, Root::Btree(_))
            && self.do_lookup(key, minlevel, src, &mut path)?;
        let ptr = found
            .then(|| {
                let loc = self.loc_at(&path, minlevel);
                self.bt(loc).ptr(path[minlevel].index).filter(|&p| p != 0)
            })
            .flatten()
            .ok_or_else(|| {
                Error::errno(
                    Errno::ENOENT,
                    format!("bmap: no level-{level} node at key {key}"),
                )
            })?;
        let id = self.get_child(ptr, usize::from(level), src)?;
        self.set_dirty(id);
        self.dirty_path(&path, minlevel);
        Ok(())
    }

    /// Look `key` up using only the nodes already in memory: after a
    /// construction prepared a block (updated its pointer and marked its
    /// path dirty), every node on its path is loaded. A node that would
    /// have to be read is an error, not a read.
    pub fn lookup_in_memory(&mut self, key: u64) -> Result<Option<u64>> {
        self.lookup(key, &mut InMemoryOnly)
    }

    /// The largest mapped key, `None` if nothing is mapped
    /// (`nilfs_direct_last_key`, `nilfs_btree_do_lookup_last`).
    pub fn last_key(&mut self, src: &mut dyn NodeSource) -> Result<Option<u64>> {
        let root = match &self.root {
            Root::Direct { ptrs, .. } => {
                return Ok(ptrs.iter().rposition(|&p| p != 0).map(|k| k as u64));
            }
            Root::Btree(r) => r,
        };
        let n = usize::from(root.nchildren);
        if n == 0 {
            return Ok(None);
        }
        let mut level = usize::from(root.level);
        let mut key = root.keys[n - 1];
        let mut ptr = root.ptrs[n - 1];
        while level > 1 {
            level -= 1;
            let id = self.get_child(ptr, level, src)?;
            let bt = &self.node(id).bt;
            let n = usize::from(bt.nchildren);
            if n == 0 {
                return Err(corrupt(format!("empty node at level {level}")));
            }
            key = bt.keys[n - 1];
            ptr = bt.ptrs[n - 1];
        }
        Ok(Some(key))
    }

    /// Every `(key, ptr)` mapped, in tree order (an iterative walk; a node
    /// reachable twice is corruption).
    pub fn entries(&mut self, src: &mut dyn NodeSource) -> Result<Vec<(u64, u64)>> {
        let mut out = Vec::new();
        match &self.root {
            Root::Direct { ptrs, .. } => {
                for (k, &p) in ptrs.iter().enumerate() {
                    if p != 0 {
                        out.push((k as u64, p));
                    }
                }
            }
            Root::Btree(_) => {
                self.walk(src, &mut |_, bt, _| {
                    if bt.level == BTREE_LEVEL_NODE_MIN {
                        out.extend(
                            bt.valid_keys()
                                .iter()
                                .copied()
                                .zip(bt.valid_ptrs().iter().copied()),
                        );
                    }
                    Ok(())
                })?;
            }
        }
        Ok(out)
    }

    /// Visit every node, root first, depth first left to right, calling
    /// `f(loc, node, parent)` where `parent` is `(parent's node, index in it)`.
    fn walk(&mut self, src: &mut dyn NodeSource, f: &mut WalkFn<'_>) -> Result<()> {
        // Stack of (parent location, next child index), bounded by the height.
        let mut stack: Vec<(Loc, usize)> = Vec::new();
        let mut seen = BTreeSet::new();
        f(Loc::Root, self.root_node(), None)?;
        if self.root_node().level > BTREE_LEVEL_NODE_MIN {
            stack.push((Loc::Root, 0));
        }
        while let Some(&(parent, i)) = stack.last() {
            let pbt = self.bt(parent);
            if i >= usize::from(pbt.nchildren) {
                stack.pop();
                continue;
            }
            stack.last_mut().expect("non-empty").1 += 1;
            let (ptr, level) = (pbt.ptrs[i], usize::from(pbt.level) - 1);
            let id = self.get_child(ptr, level, src)?;
            if !seen.insert(id) {
                return Err(corrupt(format!("node {ptr:#x} reachable twice")));
            }
            f(Loc::Node(id), &self.node(id).bt, Some((self.bt(parent), i)))?;
            if level > 1 {
                if stack.len() >= PATH_LEN {
                    return Err(corrupt("tree deeper than the maximum level"));
                }
                stack.push((Loc::Node(id), 0));
            }
        }
        Ok(())
    }

    fn loc_at(&self, path: &Path, level: usize) -> Loc {
        if level >= self.root_level() {
            Loc::Root
        } else {
            Loc::Node(
                path[level]
                    .node
                    .unwrap_or_else(|| panic!("bmap: no node on the path at level {level}")),
            )
        }
    }

    // -----------------------------------------------------------------------
    // Dirtiness

    /// Mark `id` dirty (`mark_buffer_dirty`).
    fn set_dirty(&mut self, id: NodeId) {
        self.node_mut(id).dirty = true;
    }

    /// Mark the path's nodes from `level` up to (not including) the root
    /// dirty: the closure `nilfs_btree_propagate` reaches.
    fn dirty_path(&mut self, path: &Path, level: usize) {
        let top = self.root_level();
        for pl in path.iter().take(top).skip(level) {
            if let Some(id) = pl.node {
                self.set_dirty(id);
            }
        }
        self.bmap_dirty = true;
    }

    /// `nilfs_bmap_propagate` for a data block: the level-1 node holding
    /// `key` and all its ancestors become dirty (and so does `i_bmap`, whose
    /// slot changes when they are reassigned).
    pub fn mark_data_dirty(&mut self, key: u64, src: &mut dyn NodeSource) -> Result<()> {
        if let Root::Btree(_) = self.root {
            let mut path = Path::default();
            if !self.do_lookup(key, 1, src, &mut path)? {
                return Err(Error::errno(
                    Errno::ENOENT,
                    format!("bmap: no block at key {key}"),
                ));
            }
            self.dirty_path(&path, 1);
        }
        self.bmap_dirty = true;
        Ok(())
    }

    /// Replace the pointer of the data block at `key` (a rewritten block's
    /// new virtual number, or for the DAT its physical address), marking
    /// the path dirty. Returns the old pointer.
    pub fn update_ptr(&mut self, key: u64, new_ptr: u64, src: &mut dyn NodeSource) -> Result<u64> {
        if new_ptr == 0 {
            return Err(Error::Invalid("bmap: pointer 0 is not a block".into()));
        }
        match &mut self.root {
            Root::Direct { ptrs, .. } => {
                let slot = usize::try_from(key)
                    .ok()
                    .and_then(|i| ptrs.get_mut(i))
                    .filter(|p| **p != 0)
                    .ok_or_else(|| {
                        Error::errno(Errno::ENOENT, format!("bmap: no block at key {key}"))
                    })?;
                let old = std::mem::replace(slot, new_ptr);
                self.bmap_dirty = true;
                Ok(old)
            }
            Root::Btree(_) => {
                let mut path = Path::default();
                if !self.do_lookup(key, 1, src, &mut path)? {
                    return Err(Error::errno(
                        Errno::ENOENT,
                        format!("bmap: no block at key {key}"),
                    ));
                }
                let loc = self.loc_at(&path, 1);
                let index = path[1].index;
                let old = std::mem::replace(&mut self.bt_mut(loc).ptrs[index], new_ptr);
                self.dirty_path(&path, 1);
                Ok(old)
            }
        }
    }

    /// The dirty node blocks in the kernel's collection order
    /// (`nilfs_btree_lookup_dirty_buffers` with `nilfs_btree_add_dirty_buffer`:
    /// one list per level, each sorted by first key; levels ascending).
    pub fn dirty_nodes(&self) -> Vec<DirtyNode> {
        let mut out: Vec<DirtyNode> = self
            .by_ptr
            .values()
            .map(|&id| (id, self.node(id)))
            .filter(|(_, n)| n.dirty)
            .map(|(id, n)| DirtyNode {
                id,
                level: n.bt.level,
                first_key: n.bt.keys[0],
                old_ptr: if n.assigned { None } else { n.disk },
                assigned: n.assigned,
            })
            .collect();
        out.sort_by_key(|d| (d.level, d.first_key, d.id));
        out
    }

    /// Record that dirty node `id` will be written at `new_ptr`, and store
    /// `new_ptr` in its parent's slot. Returns the pointer it was last
    /// written at (the caller ends that DAT entry; `None` for a node never
    /// written). Assign children before parents: [`Bmap::dirty_nodes`]
    /// order does that.
    ///
    /// Follows `nilfs_btree_assign` — the parent is found by looking up the
    /// node's first key at `level + 1` — with `nilfs_btree_assign_p`'s direct
    /// slot update for the DAT, and for virtual pointers the slot change
    /// `nilfs_btree_commit_update_v` makes at propagation time.
    pub fn assign(&mut self, id: NodeId, new_ptr: u64) -> Result<Option<u64>> {
        let node = self
            .arena
            .get(id.0 as usize)
            .and_then(Option::as_ref)
            .ok_or_else(|| Error::Invalid(format!("bmap: no node {id:?}")))?;
        if !node.dirty || node.assigned {
            return Err(Error::Invalid(format!(
                "bmap: node {id:?} is {} (assign once per log, dirty nodes only)",
                if node.assigned {
                    "already assigned"
                } else {
                    "clean"
                }
            )));
        }
        if new_ptr == 0 || new_ptr & TEMP_PTR_BIT != 0 || self.by_ptr.contains_key(&new_ptr) {
            return Err(Error::Invalid(format!(
                "bmap: cannot assign pointer {new_ptr:#x}"
            )));
        }
        let (key, level, slot) = (node.bt.keys[0], usize::from(node.bt.level), node.slot);
        let mut path = Path::default();
        self.do_lookup(key, level + 1, &mut InMemoryOnly, &mut path)?;
        let ploc = self.loc_at(&path, level + 1);
        let pindex = path[level + 1].index;
        if self.bt(ploc).ptr(pindex) != Some(slot) || pindex >= usize::from(self.bt(ploc).nchildren)
        {
            return Err(violation(format!(
                "node {slot:#x} (level {level}, first key {key}) not found in its parent"
            )));
        }
        self.bt_mut(ploc).ptrs[pindex] = new_ptr;
        if ploc == Loc::Root {
            self.bmap_dirty = true;
        }
        self.by_ptr.remove(&slot);
        self.by_ptr.insert(new_ptr, id);
        let node = self.node_mut(id);
        node.slot = new_ptr;
        node.assigned = true;
        let old = node.disk.replace(new_ptr);
        self.assigning = true;
        Ok(old)
    }

    /// After a log is written: every node becomes clean. Refused (with no
    /// change) while a dirty node has not been assigned.
    pub fn mark_clean(&mut self) -> Result<()> {
        if let Some(d) = self
            .dirty_nodes()
            .iter()
            .find(|d| !self.node(d.id).assigned)
        {
            return Err(Error::Invalid(format!(
                "bmap: dirty node at level {} (first key {}) was never assigned",
                d.level, d.first_key
            )));
        }
        for node in self.arena.iter_mut().flatten() {
            node.dirty = false;
            node.assigned = false;
        }
        self.assigning = false;
        self.bmap_dirty = false;
        Ok(())
    }

    /// The bytes of node `id`'s block. Valid slots must hold real pointers;
    /// stale slots holding a temporary pointer are written as 0.
    pub fn encode_node(&self, id: NodeId) -> Result<Vec<u8>> {
        let node = self
            .arena
            .get(id.0 as usize)
            .and_then(Option::as_ref)
            .ok_or_else(|| Error::Invalid(format!("bmap: no node {id:?}")))?;
        Ok(Self::scrub(&node.bt)?.encode_block(self.block_size))
    }

    /// The 7 slots of `i_bmap` to store in the inode (`nilfs_bmap_write`).
    pub fn root_bmap(&self) -> Result<[u64; INODE_BMAP_SIZE]> {
        match &self.root {
            Root::Direct { header, ptrs } => {
                if let Some(p) = ptrs.iter().find(|&&p| p & TEMP_PTR_BIT != 0) {
                    return Err(Error::Invalid(format!(
                        "bmap: temporary pointer {p:#x} in i_bmap"
                    )));
                }
                let mut out = [0; INODE_BMAP_SIZE];
                out[0] = *header;
                out[1..].copy_from_slice(ptrs);
                Ok(out)
            }
            Root::Btree(r) => Ok(Self::scrub(r)?.encode_root()),
        }
    }

    fn scrub(bt: &BtreeNode) -> Result<BtreeNode> {
        let n = usize::from(bt.nchildren);
        if let Some(p) = bt.valid_ptrs().iter().find(|&&p| p & TEMP_PTR_BIT != 0) {
            return Err(Error::Invalid(format!(
                "bmap: unassigned pointer {p:#x} in a level-{} node",
                bt.level
            )));
        }
        let mut out = bt.clone();
        for p in out.ptrs.iter_mut().skip(n) {
            if *p & TEMP_PTR_BIT != 0 {
                *p = 0;
            }
        }
        Ok(out)
    }

    /// The node's level, first key and current slot pointer (for tests and
    /// the segment constructor's binfo).
    pub fn node_info(&self, id: NodeId) -> Option<(u8, u64, u64)> {
        let n = self.arena.get(id.0 as usize)?.as_ref()?;
        Some((n.bt.level, n.bt.keys[0], n.slot))
    }

    // -----------------------------------------------------------------------
    // Insert

    /// Map `key` to `ptr` (`nilfs_bmap_insert`). `EEXIST` if `key` is
    /// mapped. A direct map takes keys up to 5; a larger key converts it to
    /// a B-tree (`nilfs_btree_convert_and_insert`): with all entries fitting
    /// in the root (n + 1 ≤ 3) the root becomes level 1, else a new level-1
    /// node holds them under a level-2 root keyed by the smallest key. The
    /// root is written over the old `i_bmap` slots, so slots it does not
    /// set keep the direct map's values, as in the kernel's union.
    pub fn insert(
        &mut self,
        key: u64,
        ptr: u64,
        src: &mut dyn NodeSource,
    ) -> Result<InsertOutcome> {
        // An insert may come after some nodes were assigned in this log (a
        // construction that extends into a new sufile block inserts it on
        // its retry, as nilfs_sufile_alloc does mid-collection): nodes it
        // splits off or dirties are new or unassigned and are assigned in
        // turn; assigned ones keep their new addresses.
        if ptr == 0 {
            return Err(Error::Invalid("bmap: pointer 0 is not a block".into()));
        }
        let exists = || Error::errno(Errno::EEXIST, format!("bmap: key {key} is mapped"));
        match &mut self.root {
            Root::Direct { ptrs, .. } if key <= DIRECT_KEY_MAX => {
                // nilfs_direct_insert
                let slot = &mut ptrs[key as usize];
                if *slot != 0 {
                    return Err(exists());
                }
                *slot = ptr;
                self.bmap_dirty = true;
                Ok(InsertOutcome::default())
            }
            Root::Direct { .. } => Ok(self.convert_and_insert(key, ptr)),
            Root::Btree(_) => {
                // nilfs_btree_insert
                let mut path = Path::default();
                if self.do_lookup(key, 1, src, &mut path)? {
                    return Err(exists());
                }
                let (maxlevel, nodes_added) = match self.prepare_insert(&mut path, src) {
                    Ok(r) => r,
                    Err(e) => {
                        self.abort_insert(&path);
                        return Err(e);
                    }
                };
                self.commit_insert(&mut path, maxlevel, key, ptr);
                Ok(InsertOutcome { nodes_added })
            }
        }
    }

    /// `nilfs_btree_convert_and_insert` (gather by `nilfs_direct_gather_data`).
    fn convert_and_insert(&mut self, key: u64, ptr: u64) -> InsertOutcome {
        let old = match self.root {
            Root::Direct { header, ptrs } => {
                let mut bmap = [0; INODE_BMAP_SIZE];
                bmap[0] = header;
                bmap[1..].copy_from_slice(&ptrs);
                bmap
            }
            Root::Btree(_) => panic!("bmap: converting a B-tree"),
        };
        let entries: Vec<(u64, u64)> = old[1..]
            .iter()
            .enumerate()
            .filter(|(_, &p)| p != 0)
            .map(|(k, &p)| (k as u64, p))
            .collect();
        let n = entries.len();
        // The root overlays the old i_bmap: header bytes 4..8 (bn_pad) and
        // every slot the kernel does not write keep their values.
        let mut root = BtreeNode {
            flags: NODE_ROOT,
            level: 1,
            nchildren: 0,
            pad: (old[0] >> 32) as u32,
            extra_pad: 0,
            keys: old[1..1 + ROOT_NCHILDREN_MAX].to_vec(),
            ptrs: old[1 + ROOT_NCHILDREN_MAX..].to_vec(),
        };
        let nodes_added;
        if n < ROOT_NCHILDREN_MAX {
            for (i, &(k, p)) in entries.iter().enumerate() {
                root.keys[i] = k;
                root.ptrs[i] = p;
            }
            root.nchildren = n as u16;
            node_insert(&mut root, n, key, ptr);
            nodes_added = 0;
        } else {
            let id = self.new_node(1);
            let bt = &mut self.node_mut(id).bt;
            for (i, &(k, p)) in entries.iter().enumerate() {
                bt.keys[i] = k;
                bt.ptrs[i] = p;
            }
            bt.nchildren = n as u16;
            node_insert(bt, n, key, ptr);
            root.level = 2;
            root.keys[0] = entries[0].0;
            root.ptrs[0] = self.node(id).slot;
            root.nchildren = 1;
            nodes_added = 1;
        }
        self.root = Root::Btree(root);
        self.bmap_dirty = true;
        InsertOutcome { nodes_added }
    }

    /// `nilfs_btree_prepare_insert`: choose each level's operation, loading
    /// siblings and creating new nodes; no existing node changes.
    fn prepare_insert(
        &mut self,
        path: &mut Path,
        src: &mut dyn NodeSource,
    ) -> Result<(usize, u32)> {
        let ncblk = self.ncmax;
        let mut nodes_added = 0;
        let mut level = usize::from(BTREE_LEVEL_NODE_MIN);
        while level < self.root_level() {
            let id = path[level].node.expect("bmap: path node below the root");
            if usize::from(self.node(id).bt.nchildren) < ncblk {
                path[level].op = Op::Insert;
                return Ok((level, nodes_added));
            }
            let ploc = self.loc_at(path, level + 1);
            let pindex = path[level + 1].index;
            let pn = usize::from(self.bt(ploc).nchildren);
            // left sibling
            if pindex > 0 {
                let sib = self.get_sibling(ploc, pindex - 1, level, id, src)?;
                if usize::from(self.node(sib).bt.nchildren) < ncblk {
                    path[level].sib = Some(sib);
                    path[level].op = Op::CarryLeft;
                    return Ok((level, nodes_added));
                }
            }
            // right sibling
            if pindex + 1 < pn {
                let sib = self.get_sibling(ploc, pindex + 1, level, id, src)?;
                if usize::from(self.node(sib).bt.nchildren) < ncblk {
                    path[level].sib = Some(sib);
                    path[level].op = Op::CarryRight;
                    return Ok((level, nodes_added));
                }
            }
            // split
            path[level].sib = Some(self.new_node(level));
            path[level].op = Op::Split;
            nodes_added += 1;
            level += 1;
        }
        // root
        if usize::from(self.root_node().nchildren) < ROOT_NCHILDREN_MAX {
            path[level].op = Op::Insert;
            return Ok((level, nodes_added));
        }
        // grow
        if level + 1 >= usize::from(BTREE_LEVEL_MAX) {
            return Err(Error::OutOfRange(format!(
                "bmap: B-tree cannot grow past level {level}"
            )));
        }
        path[level].sib = Some(self.new_node(level));
        path[level].op = Op::Grow;
        nodes_added += 1;
        level += 1;
        path[level].op = Op::Insert;
        Ok((level, nodes_added))
    }

    /// The child of `ploc` at `index`, at `level`, which must not be `node`.
    fn get_sibling(
        &mut self,
        ploc: Loc,
        index: usize,
        level: usize,
        node: NodeId,
        src: &mut dyn NodeSource,
    ) -> Result<NodeId> {
        let ptr = self.bt(ploc).ptrs[index];
        let sib = self.get_child(ptr, level, src)?;
        if sib == node {
            return Err(corrupt(format!("node {ptr:#x} is its own sibling")));
        }
        Ok(sib)
    }

    /// The error path of `nilfs_btree_prepare_insert`: drop the new nodes.
    fn abort_insert(&mut self, path: &Path) {
        for pl in path.iter() {
            if matches!(pl.op, Op::Split | Op::Grow) {
                if let Some(id) = pl.sib {
                    self.release(id);
                }
            }
        }
    }

    /// `nilfs_btree_commit_insert`: run each level's operation bottom-up.
    fn commit_insert(&mut self, path: &mut Path, maxlevel: usize, key: u64, ptr: u64) {
        let (mut k, mut p) = (key, ptr);
        for level in usize::from(BTREE_LEVEL_NODE_MIN)..=maxlevel {
            match path[level].op {
                Op::Insert => self.do_insert(path, level, &mut k, &mut p),
                Op::CarryLeft => self.carry_left(path, level, &mut k, &mut p),
                Op::CarryRight => self.carry_right(path, level, &mut k, &mut p),
                Op::Split => self.split(path, level, &mut k, &mut p),
                Op::Grow => self.grow(path, level, &mut k, &mut p),
                op => panic!("bmap: {op:?} in an insert"),
            }
        }
        self.bmap_dirty = true;
    }

    /// `nilfs_btree_promote_key`: set the key of the path's entry at
    /// `level`, and above while the entry is its node's first.
    fn promote_key(&mut self, path: &Path, mut level: usize, key: u64) {
        let top = self.root_level();
        if level < top {
            loop {
                let id = path[level].node.expect("bmap: path node below the root");
                self.node_mut(id).bt.keys[path[level].index] = key;
                self.dirty_path(path, level);
                if path[level].index != 0 {
                    break;
                }
                level += 1;
                if level >= top {
                    break;
                }
            }
        }
        if level == top {
            let index = path[level].index;
            self.root_node_mut().keys[index] = key;
        }
    }

    /// `nilfs_btree_do_insert`.
    fn do_insert(&mut self, path: &Path, level: usize, k: &mut u64, p: &mut u64) {
        let index = path[level].index;
        if level < self.root_level() {
            let id = path[level].node.expect("bmap: path node below the root");
            node_insert(&mut self.node_mut(id).bt, index, *k, *p);
            self.dirty_path(path, level);
            if index == 0 {
                let first = self.node(id).bt.keys[0];
                self.promote_key(path, level + 1, first);
            }
        } else {
            node_insert(self.root_node_mut(), index, *k, *p);
        }
    }

    fn mark_sib_dirty(&mut self, path: &Path, level: usize, sib: NodeId) {
        self.set_dirty(sib);
        self.dirty_path(path, level);
    }

    /// `nilfs_btree_carry_left`: balance with the left sibling, then insert.
    fn carry_left(&mut self, path: &mut Path, level: usize, k: &mut u64, p: &mut u64) {
        let node = path[level].node.expect("bmap: carry without a node");
        let left = path[level].sib.expect("bmap: carry without a sibling");
        let nch = usize::from(self.node(node).bt.nchildren);
        let lnch = usize::from(self.node(left).bt.nchildren);
        let mut n = count_diff((nch + lnch).div_ceil(2), lnch);
        let mut mv = false;
        if n > path[level].index {
            n -= 1;
            mv = true;
        }
        let (l, r) = self.two_mut(Loc::Node(left), Loc::Node(node));
        move_left(l, r, n);
        self.mark_sib_dirty(path, level, left);
        let first = self.node(node).bt.keys[0];
        self.promote_key(path, level + 1, first);
        if mv {
            path[level].node = Some(left);
            path[level].index += lnch;
            path[level + 1].index -= 1;
        } else {
            path[level].index -= n;
        }
        path[level].sib = None;
        self.do_insert(path, level, k, p);
    }

    /// `nilfs_btree_carry_right`: balance with the right sibling, then insert.
    fn carry_right(&mut self, path: &mut Path, level: usize, k: &mut u64, p: &mut u64) {
        let node = path[level].node.expect("bmap: carry without a node");
        let right = path[level].sib.expect("bmap: carry without a sibling");
        let nch = usize::from(self.node(node).bt.nchildren);
        let rnch = usize::from(self.node(right).bt.nchildren);
        let mut n = count_diff((nch + rnch).div_ceil(2), rnch);
        let mut mv = false;
        if n > nch - path[level].index {
            n -= 1;
            mv = true;
        }
        let (l, r) = self.two_mut(Loc::Node(node), Loc::Node(right));
        move_right(l, r, n);
        self.mark_sib_dirty(path, level, right);
        path[level + 1].index += 1;
        let first = self.node(right).bt.keys[0];
        self.promote_key(path, level + 1, first);
        path[level + 1].index -= 1;
        if mv {
            path[level].node = Some(right);
            path[level].index -= usize::from(self.node(node).bt.nchildren);
            path[level + 1].index += 1;
        }
        path[level].sib = None;
        self.do_insert(path, level, k, p);
    }

    /// `nilfs_btree_split`: move the upper half to the new right node,
    /// insert, and pass the new node's entry up.
    fn split(&mut self, path: &mut Path, level: usize, k: &mut u64, p: &mut u64) {
        let node = path[level].node.expect("bmap: split without a node");
        let right = path[level].sib.expect("bmap: split without a new node");
        let nch = usize::from(self.node(node).bt.nchildren);
        let mut n = nch.div_ceil(2);
        let mut mv = false;
        if n > nch - path[level].index {
            n -= 1;
            mv = true;
        }
        let (l, r) = self.two_mut(Loc::Node(node), Loc::Node(right));
        move_right(l, r, n);
        self.mark_sib_dirty(path, level, right);
        if mv {
            path[level].index -= usize::from(self.node(node).bt.nchildren);
            node_insert(&mut self.node_mut(right).bt, path[level].index, *k, *p);
            path[level].node = Some(right);
        } else {
            self.do_insert(path, level, k, p);
        }
        *k = self.node(right).bt.keys[0];
        *p = self.node(right).slot;
        path[level].sib = None;
        path[level + 1].index += 1;
    }

    /// `nilfs_btree_grow`: the root's entries move into the new node, the
    /// root rises one level, and the insert continues in the new node.
    fn grow(&mut self, path: &mut Path, level: usize, k: &mut u64, p: &mut u64) {
        let child = path[level].sib.expect("bmap: grow without a new node");
        let n = usize::from(self.root_node().nchildren);
        let (root, c) = self.two_mut(Loc::Root, Loc::Node(child));
        move_right(root, c, n);
        root.level = (level + 1) as u8;
        self.set_dirty(child);
        path[level].node = Some(child);
        path[level].sib = None;
        self.do_insert(path, level, k, p);
        *k = self.node(child).bt.keys[0];
        *p = self.node(child).slot;
    }

    // -----------------------------------------------------------------------
    // Delete

    /// Unmap `key` (`nilfs_bmap_delete`). `ENOENT` if it is not mapped.
    ///
    /// A B-tree converts back to a direct map when `nilfs_btree_check_delete`
    /// says so: the tree has height 2, or height 3 with a single level-1
    /// child; `key` is its largest key; and the second-largest key (0 if
    /// there is none) is below 3. The B-tree delete runs first, then the
    /// remaining keys (gathered before it, at most 4) fill the direct slots
    /// (`nilfs_direct_delete_and_convert`). Only the LARGE bit of
    /// `i_bmap[0]` is cleared, so the root's level and child count stay in
    /// the header bytes, as in the kernel.
    pub fn delete(&mut self, key: u64, src: &mut dyn NodeSource) -> Result<DeleteOutcome> {
        if self.assigning {
            return Err(Error::Invalid(
                "bmap: delete while a log is being assigned".into(),
            ));
        }
        let missing = || Error::errno(Errno::ENOENT, format!("bmap: no block at key {key}"));
        match &mut self.root {
            Root::Direct { ptrs, .. } => {
                // nilfs_direct_delete
                let slot = usize::try_from(key)
                    .ok()
                    .and_then(|i| ptrs.get_mut(i))
                    .filter(|p| **p != 0)
                    .ok_or_else(missing)?;
                let ptr = std::mem::take(slot);
                self.bmap_dirty = true;
                Ok(DeleteOutcome {
                    ptr,
                    ..Default::default()
                })
            }
            Root::Btree(_) => {
                if !self.check_delete(key, src)? {
                    return self.btree_delete(key, src);
                }
                let gathered = self.gather_data(src)?;
                let out = self.btree_delete(key, src)?;
                let root = self.root_node();
                if root.level != BTREE_LEVEL_NODE_MIN {
                    return Err(violation(
                        "B-tree did not shrink to its root before converting",
                    ));
                }
                let header = root.encode_root()[0] & !u64::from(BMAP_LARGE);
                let mut ptrs = [0; DIRECT_NBLOCKS];
                let mut j = 0;
                for (i, slot) in ptrs.iter_mut().enumerate() {
                    if j < gathered.len() && i as u64 == gathered[j].0 {
                        *slot = if i as u64 != key { gathered[j].1 } else { 0 };
                        j += 1;
                    }
                }
                // bop_clear: nothing of the tree remains in memory.
                self.arena.clear();
                self.free_ids.clear();
                self.by_ptr.clear();
                self.root = Root::Direct { header, ptrs };
                Ok(out)
            }
        }
    }

    /// `nilfs_btree_check_delete`.
    fn check_delete(&mut self, key: u64, src: &mut dyn NodeSource) -> Result<bool> {
        let root = self.root_node();
        let n = usize::from(root.nchildren);
        if n == 0 {
            return Ok(false);
        }
        let loc = match root.level {
            1 => Loc::Root,
            2 if n == 1 => {
                let ptr = root.ptrs[0];
                Loc::Node(self.get_child(ptr, 1, src)?)
            }
            _ => return Ok(false),
        };
        let bt = self.bt(loc);
        let n = usize::from(bt.nchildren);
        if n == 0 {
            return Ok(false);
        }
        let maxkey = bt.keys[n - 1];
        let nextmaxkey = if n > 1 { bt.keys[n - 2] } else { 0 };
        Ok(maxkey == key && nextmaxkey < LARGE_LOW)
    }

    /// `nilfs_btree_gather_data` with `NILFS_BMAP_LARGE_LOW + 1` items. A
    /// node with more entries cannot pass `check_delete` unless its keys are
    /// out of order; refuse that instead of dropping entries.
    fn gather_data(&mut self, src: &mut dyn NodeSource) -> Result<Vec<(u64, u64)>> {
        let root = self.root_node();
        let loc = if root.level == 1 {
            Loc::Root
        } else {
            let ptr = root.ptrs[0];
            Loc::Node(self.get_child(ptr, 1, src)?)
        };
        let bt = self.bt(loc);
        if usize::from(bt.nchildren) > ROOT_NCHILDREN_MAX + 1 {
            return Err(corrupt(
                "keys out of order in the last node before a conversion",
            ));
        }
        Ok(bt
            .valid_keys()
            .iter()
            .copied()
            .zip(bt.valid_ptrs().iter().copied())
            .collect())
    }

    /// `nilfs_btree_delete`.
    fn btree_delete(&mut self, key: u64, src: &mut dyn NodeSource) -> Result<DeleteOutcome> {
        let mut path = Path::default();
        if !self.do_lookup(key, 1, src, &mut path)? {
            return Err(Error::errno(
                Errno::ENOENT,
                format!("bmap: no block at key {key}"),
            ));
        }
        let (maxlevel, nodes_removed) = self.prepare_delete(&mut path, src)?;
        let (ptr, freed_nodes) = self.commit_delete(&mut path, maxlevel);
        Ok(DeleteOutcome {
            ptr,
            nodes_removed,
            freed_nodes,
        })
    }

    /// `nilfs_btree_prepare_delete`: choose each level's operation, loading
    /// siblings; nothing changes, so an error needs no undo.
    fn prepare_delete(
        &mut self,
        path: &mut Path,
        src: &mut dyn NodeSource,
    ) -> Result<(usize, u32)> {
        let ncmin = node_ncmin(self.ncmax);
        let mut removed = 0;
        let mut level = usize::from(BTREE_LEVEL_NODE_MIN);
        while level < self.root_level() {
            let id = path[level].node.expect("bmap: path node below the root");
            let nch = usize::from(self.node(id).bt.nchildren);
            if nch > ncmin {
                path[level].op = Op::Delete;
                return Ok((level, removed));
            }
            let ploc = self.loc_at(path, level + 1);
            let pindex = path[level + 1].index;
            let pn = usize::from(self.bt(ploc).nchildren);
            if pindex > 0 {
                let sib = self.get_sibling(ploc, pindex - 1, level, id, src)?;
                path[level].sib = Some(sib);
                if usize::from(self.node(sib).bt.nchildren) > ncmin {
                    path[level].op = Op::BorrowLeft;
                    return Ok((level, removed));
                }
                path[level].op = Op::ConcatLeft;
                removed += 1;
            } else if pindex + 1 < pn {
                let sib = self.get_sibling(ploc, pindex + 1, level, id, src)?;
                path[level].sib = Some(sib);
                if usize::from(self.node(sib).bt.nchildren) > ncmin {
                    path[level].op = Op::BorrowRight;
                    return Ok((level, removed));
                }
                path[level].op = Op::ConcatRight;
                removed += 1;
            } else {
                // The only child of the root (the kernel WARNs otherwise).
                if level + 1 != self.root_level() {
                    return Err(corrupt(format!(
                        "non-root node with a single child above level {level}"
                    )));
                }
                if nch - 1 <= ROOT_NCHILDREN_MAX {
                    path[level].op = Op::Shrink;
                    removed += 1;
                    level += 1;
                    path[level].op = Op::Nop;
                } else {
                    path[level].op = Op::Delete;
                }
                return Ok((level, removed));
            }
            level += 1;
        }
        path[level].op = Op::Delete;
        Ok((level, removed))
    }

    /// `nilfs_btree_commit_delete`: returns the data pointer and the written
    /// pointers of the node blocks removed.
    fn commit_delete(&mut self, path: &mut Path, maxlevel: usize) -> (u64, Vec<u64>) {
        let mut data_ptr = 0;
        let mut freed = Vec::new();
        for level in usize::from(BTREE_LEVEL_NODE_MIN)..=maxlevel {
            let (_, ptr) = match path[level].op {
                Op::Delete => self.do_delete(path, level),
                Op::BorrowLeft => self.borrow_left(path, level),
                Op::BorrowRight => self.borrow_right(path, level),
                Op::ConcatLeft => self.concat_left(path, level, &mut freed),
                Op::ConcatRight => self.concat_right(path, level, &mut freed),
                Op::Shrink => self.shrink(path, level, &mut freed),
                Op::Nop => (0, 0),
                op => panic!("bmap: {op:?} in a delete"),
            };
            if level == usize::from(BTREE_LEVEL_NODE_MIN) {
                data_ptr = ptr;
            }
        }
        self.bmap_dirty = true;
        (data_ptr, freed)
    }

    /// `nilfs_btree_do_delete`.
    fn do_delete(&mut self, path: &Path, level: usize) -> (u64, u64) {
        let index = path[level].index;
        if level < self.root_level() {
            let id = path[level].node.expect("bmap: path node below the root");
            let out = node_delete(&mut self.node_mut(id).bt, index);
            self.dirty_path(path, level);
            if index == 0 {
                let first = self.node(id).bt.keys[0];
                self.promote_key(path, level + 1, first);
            }
            out
        } else {
            node_delete(self.root_node_mut(), index)
        }
    }

    /// `nilfs_btree_borrow_left`.
    fn borrow_left(&mut self, path: &mut Path, level: usize) -> (u64, u64) {
        let out = self.do_delete(path, level);
        let node = path[level].node.expect("bmap: borrow without a node");
        let left = path[level].sib.expect("bmap: borrow without a sibling");
        let nch = usize::from(self.node(node).bt.nchildren);
        let lnch = usize::from(self.node(left).bt.nchildren);
        let n = count_diff((nch + lnch) / 2, nch);
        let (l, r) = self.two_mut(Loc::Node(left), Loc::Node(node));
        move_right(l, r, n);
        self.mark_sib_dirty(path, level, left);
        let first = self.node(node).bt.keys[0];
        self.promote_key(path, level + 1, first);
        path[level].sib = None;
        path[level].index += n;
        out
    }

    /// `nilfs_btree_borrow_right`.
    fn borrow_right(&mut self, path: &mut Path, level: usize) -> (u64, u64) {
        let out = self.do_delete(path, level);
        let node = path[level].node.expect("bmap: borrow without a node");
        let right = path[level].sib.expect("bmap: borrow without a sibling");
        let nch = usize::from(self.node(node).bt.nchildren);
        let rnch = usize::from(self.node(right).bt.nchildren);
        let n = count_diff((nch + rnch) / 2, nch);
        let (l, r) = self.two_mut(Loc::Node(node), Loc::Node(right));
        move_left(l, r, n);
        self.mark_sib_dirty(path, level, right);
        path[level + 1].index += 1;
        let first = self.node(right).bt.keys[0];
        self.promote_key(path, level + 1, first);
        path[level + 1].index -= 1;
        path[level].sib = None;
        out
    }

    /// `nilfs_btree_concat_left`: the node empties into its left sibling
    /// and is removed.
    fn concat_left(&mut self, path: &mut Path, level: usize, freed: &mut Vec<u64>) -> (u64, u64) {
        let out = self.do_delete(path, level);
        let node = path[level].node.expect("bmap: concat without a node");
        let left = path[level].sib.expect("bmap: concat without a sibling");
        let n = usize::from(self.node(node).bt.nchildren);
        let (l, r) = self.two_mut(Loc::Node(left), Loc::Node(node));
        move_left(l, r, n);
        self.mark_sib_dirty(path, level, left);
        freed.extend(self.release(node));
        path[level].node = Some(left);
        path[level].sib = None;
        path[level].index += usize::from(self.node(left).bt.nchildren);
        out
    }

    /// `nilfs_btree_concat_right`: the right sibling empties into the node
    /// and is removed; the parent then deletes the sibling's entry.
    fn concat_right(&mut self, path: &mut Path, level: usize, freed: &mut Vec<u64>) -> (u64, u64) {
        let out = self.do_delete(path, level);
        let node = path[level].node.expect("bmap: concat without a node");
        let right = path[level].sib.expect("bmap: concat without a sibling");
        let n = usize::from(self.node(right).bt.nchildren);
        let (l, r) = self.two_mut(Loc::Node(node), Loc::Node(right));
        move_left(l, r, n);
        self.dirty_path(path, level);
        freed.extend(self.release(right));
        path[level].sib = None;
        path[level + 1].index += 1;
        out
    }

    /// `nilfs_btree_shrink`: the root's only child moves into the root,
    /// which drops one level.
    fn shrink(&mut self, path: &mut Path, level: usize, freed: &mut Vec<u64>) -> (u64, u64) {
        let out = self.do_delete(path, level);
        let child = path[level].node.expect("bmap: shrink without a child");
        let root = self.root_node_mut();
        node_delete(root, 0);
        root.level = level as u8;
        let n = usize::from(self.node(child).bt.nchildren);
        let (root, c) = self.two_mut(Loc::Root, Loc::Node(child));
        move_left(root, c, n);
        freed.extend(self.release(child));
        path[level].node = None;
        out
    }

    /// Unmap every key ≥ `from` (`nilfs_bmap_truncate`: delete the last key
    /// while it is ≥ `from`). Each round removes one mapped block, so the
    /// loop ends; a last key that cannot be deleted is corruption.
    pub fn truncate(&mut self, from: u64, src: &mut dyn NodeSource) -> Result<TruncateOutcome> {
        let mut out = TruncateOutcome::default();
        while let Some(last) = self.last_key(src)? {
            if last < from {
                break;
            }
            let d = match self.delete(last, src) {
                Err(Error::Errno {
                    errno: Errno::ENOENT,
                    ..
                }) => {
                    return Err(corrupt(format!("last key {last} cannot be found")));
                }
                r => r?,
            };
            out.deleted.push((last, d.ptr));
            out.nodes_removed += d.nodes_removed;
            out.freed_nodes.extend(d.freed_nodes);
        }
        Ok(out)
    }

    // -----------------------------------------------------------------------
    // Invariants

    /// Walk the whole mapping (loading what is not in memory) and check the
    /// invariants the kernel's algorithm keeps; the first violation is an
    /// `Error::Corrupt`. They are:
    /// - the root holds at most 3 entries, at a level in `1..14`, and at
    ///   least one entry (an empty B-tree converts back to direct);
    /// - each node's level is its parent's minus one (so every level-1
    ///   node is at the same depth), and it has `1..=ncmax` entries;
    /// - keys strictly ascend within each node and stay inside the range
    ///   the parent gives the subtree; each internal key equals its child's
    ///   first key;
    /// - fill: a node block with a sibling holds at least
    ///   `(ncmax - 1) / 2 + 1` entries; the root's only child holds at least
    ///   4 (conversion creates it with 4..7, a grow with 4, and a delete
    ///   shrinks it into the root when it would drop to 3);
    /// - a dirty node's parent is dirty (or the root); a temporary pointer
    ///   appears only for a node in memory that was never written.
    pub fn check_invariants(&mut self, src: &mut dyn NodeSource) -> Result<TreeStats> {
        let mut stats = TreeStats::default();
        let Root::Btree(root) = &self.root else {
            if let Root::Direct { ptrs, .. } = &self.root {
                stats.entries = ptrs.iter().filter(|&&p| p != 0).count();
            }
            return Ok(stats);
        };
        let rn = usize::from(root.nchildren);
        if rn == 0 || rn > ROOT_NCHILDREN_MAX || root.level < 1 || root.level >= BTREE_LEVEL_MAX {
            return Err(violation(format!(
                "root level {} with {rn} entries",
                root.level
            )));
        }
        stats.height = root.level + 1;
        let (ncmax, ncmin) = (self.ncmax, node_ncmin(self.ncmax));
        // Per-node upper bounds of the subtree's keys, indexed by level:
        // the bound of the node being visited at that level.
        let mut hi: [Option<u64>; PATH_LEN] = [None; PATH_LEN];
        let mut lo: [u64; PATH_LEN] = [0; PATH_LEN];
        // (dirty, written at) of every node in memory before the walk; nodes
        // the walk loads are clean and written.
        let mem: BTreeMap<NodeId, (bool, Option<u64>)> = self
            .by_ptr
            .values()
            .map(|&id| (id, (self.node(id).dirty, self.node(id).disk)))
            .collect();
        let state = |id: &NodeId| mem.get(id).copied().unwrap_or((false, Some(0)));
        let by_ptr = self.by_ptr.clone();
        self.walk(src, &mut |loc, bt, parent| {
            let level = usize::from(bt.level);
            let n = usize::from(bt.nchildren);
            let keys = bt.valid_keys();
            if let Some((pbt, i)) = parent {
                stats.nodes += 1;
                if level + 1 != usize::from(pbt.level) {
                    return Err(violation(format!(
                        "level {level} under level {}",
                        pbt.level
                    )));
                }
                if n == 0 || n > ncmax {
                    return Err(violation(format!("level-{level} node with {n} entries")));
                }
                let min = if pbt.nchildren >= 2 {
                    ncmin
                } else {
                    ROOT_NCHILDREN_MAX + 1
                };
                if n < min {
                    return Err(violation(format!(
                        "level-{level} node (first key {}) holds {n} < {min} entries",
                        keys[0]
                    )));
                }
                if pbt.keys[i] != keys[0] {
                    return Err(violation(format!(
                        "parent key {} differs from its level-{level} child's first key {}",
                        pbt.keys[i], keys[0]
                    )));
                }
                let plevel = level + 1;
                lo[level] = pbt.keys[i];
                hi[level] = if i + 1 < usize::from(pbt.nchildren) {
                    Some(pbt.keys[i + 1])
                } else {
                    hi[plevel]
                };
            } else {
                lo[level] = 0;
                hi[level] = None;
            }
            if let Some(w) = keys.windows(2).position(|w| w[0] >= w[1]) {
                return Err(violation(format!(
                    "level-{level} keys out of order at {}: {} then {}",
                    w + 1,
                    keys[w],
                    keys[w + 1]
                )));
            }
            if let Some(&k) = keys
                .iter()
                .find(|&&k| k < lo[level] || hi[level].is_some_and(|h| k >= h))
            {
                return Err(violation(format!(
                    "level-{level} key {k} outside its subtree's range [{}, {:?})",
                    lo[level], hi[level]
                )));
            }
            if level == 1 {
                stats.entries += n;
                if parent.is_some() {
                    stats.level1_fill.push(n);
                }
            } else {
                for &p in bt.valid_ptrs() {
                    let child = by_ptr.get(&p).map(state);
                    if p & TEMP_PTR_BIT != 0 && !matches!(child, Some((_, None))) {
                        return Err(violation(format!(
                            "temporary pointer {p:#x} of no new node"
                        )));
                    }
                    let parent_dirty = match loc {
                        Loc::Root => true,
                        Loc::Node(id) => state(&id).0,
                    };
                    if matches!(child, Some((true, _))) && !parent_dirty {
                        return Err(violation(format!("dirty node {p:#x} under a clean parent")));
                    }
                }
            }
            Ok(())
        })?;
        Ok(stats)
    }
}
