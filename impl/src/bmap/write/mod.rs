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
//! # Parts
//!
//! This file holds the types, the node-level edits and the constructors;
//! the tree's operations live beside it: [`node`](self) access to the arena
//! (`node.rs`), lookups (`lookup.rs`), dirtiness and assignment
//! (`dirty.rs`), insert (`insert.rs`), delete and truncate (`delete.rs`),
//! and the invariant check (`check.rs`).
//!
//! # Bounds
//!
//! Descents are bounded by the root level (at most 13): every node loaded
//! must carry exactly its parent's level minus one. Whole-tree walks are
//! iterative and refuse a node reachable twice. Nothing here recurses.

use rustc_hash::FxHashMap;
use std::collections::{BTreeMap, BTreeSet};

use super::NodeSource;
use crate::format::bmap::{BMAP_LARGE, DIRECT_NBLOCKS};
use crate::format::btree::{node_ncmax, BtreeNode, NODE_ROOT, ROOT_NCHILDREN_MAX};
use crate::format::{BTREE_LEVEL_MAX, BTREE_LEVEL_NODE_MIN, INODE_BMAP_SIZE};
use crate::sync::StdArc;
use crate::{Errno, Error, Result};

mod check;
mod delete;
mod dirty;
mod insert;
mod lookup;
mod node;

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

/// Where a data block's pointer lies, from [`Bmap::lookup_slot`], for
/// [`Bmap::update_slot`].
#[derive(Debug)]
pub struct DataSlot {
    key: u64,
    /// The descent's path; `None` in a direct map.
    path: Option<Path>,
}

/// What one descent found at a data block's key, from [`Bmap::find_slot`]:
/// its pointer and where it lies, or the place an insert of it goes.
#[derive(Debug)]
pub enum KeySlot<'b> {
    /// Mapped to this (non-zero) pointer, at this slot.
    Mapped(u64, DataSlot),
    /// Not mapped: [`Vacancy::insert`] inserts it from here.
    Vacant(Vacancy<'b>),
}

/// Where an insert of an unmapped key goes, from [`Bmap::find_slot`]: the
/// path of `nilfs_btree_insert`'s own `nilfs_btree_do_lookup`, kept so
/// that propagation descends once per new block. It holds the mapping
/// mutably until the insert, so nothing can change the tree under the
/// path in between (the DAT allocating the block's number is no change to
/// this mapping):
///
/// ```compile_fail
/// # use nilfs::bmap::write::{Bmap, KeySlot};
/// # fn f(m: &mut Bmap, src: &mut dyn nilfs::bmap::NodeSource) -> nilfs::Result<()> {
/// if let KeySlot::Vacant(v) = m.find_slot(7, src)? {
///     m.insert(5, 1, src)?; // the tree cannot change under the path
///     v.insert(2, src)?;
/// }
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct Vacancy<'b> {
    bmap: &'b mut Bmap,
    key: u64,
    /// The descent's path; `None` in a direct map.
    path: Option<Path>,
    /// The descent matched the key, with a pointer of 0 (a damaged tree):
    /// [`Bmap::insert`] refuses it with `EEXIST`.
    matched: bool,
}

/// The level-1 node a run of [`Bmap::lookup_in_memory_from`] calls last
/// ended in (start a run with the default).
#[derive(Clone, Copy, Debug, Default)]
pub struct LeafHint(Option<NodeId>);

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
    /// The nodes in memory, shared copy-on-write twice over: a copy of
    /// the mapping (a savepoint before every operation) costs one pointer,
    /// whatever the tree's size; its first change copies a pointer a node
    /// (`StdArc::make_mut` of the [`Nodes`]), and a node's first change
    /// copies that block.
    nodes: StdArc<Nodes>,
    next_temp: u64,
    /// `nilfs_bmap_dirty`: the root (`i_bmap`) must be written back.
    bmap_dirty: bool,
    /// Some node was assigned since the last [`Bmap::mark_clean`].
    assigning: bool,
    /// `b_last_allocated_key` and `b_last_allocated_ptr`: the last data
    /// block given a new virtual number by an insert, the base of the
    /// next one's sequential target. `None` is `NILFS_BMAP_INVALID_PTR`,
    /// which `nilfs_bmap_read` sets whenever a mapping is loaded.
    last_allocated: Option<(u64, u64)>,
}

/// The nodes a [`Bmap`] holds in memory, and how to find them.
#[derive(Clone, Debug, Default)]
struct Nodes {
    arena: Vec<Option<StdArc<Node>>>,
    free_ids: Vec<u32>,
    /// Slot value → node, for every node in memory (the btnode cache's key;
    /// hashed as that cache is, and never walked in order).
    by_ptr: FxHashMap<u64, NodeId>,
}

impl Nodes {
    /// An empty table, shared by every mapping that holds no node (most
    /// files: a direct map), so that making or dropping one allocates
    /// nothing; the first node makes a table of its own.
    fn none() -> StdArc<Nodes> {
        static NONE: std::sync::OnceLock<StdArc<Nodes>> = std::sync::OnceLock::new();
        StdArc::clone(NONE.get_or_init(StdArc::default))
    }
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
        crate::format::check_block_size(block_size)?;
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
            nodes: Nodes::none(),
            next_temp: 0,
            bmap_dirty: false,
            assigning: false,
            last_allocated: None,
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
        self.nodes.by_ptr.len()
    }
}
