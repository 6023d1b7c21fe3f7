//! The arena of node blocks held in memory: access by id, the root, two
//! nodes at once, creation of fresh nodes, release, and loading a child
//! through the caller's [`NodeSource`] with the kernel's broken-node checks.

use super::*;

impl Bmap {
    pub(super) fn node(&self, id: NodeId) -> &Node {
        self.nodes.arena[id.0 as usize]
            .as_deref()
            .unwrap_or_else(|| panic!("bmap: node {id:?} was released"))
    }

    /// Whether `id` names a node the arena holds (not released).
    pub(super) fn is_held(&self, id: NodeId) -> bool {
        self.nodes
            .arena
            .get(id.0 as usize)
            .is_some_and(Option::is_some)
    }

    /// The node table, to change it: copied first if a copy of the
    /// mapping (a savepoint) still shares it.
    pub(super) fn nodes_mut(&mut self) -> &mut Nodes {
        StdArc::make_mut(&mut self.nodes)
    }

    pub(super) fn node_mut(&mut self, id: NodeId) -> &mut Node {
        self.nodes_mut().arena[id.0 as usize]
            .as_mut()
            .map(StdArc::make_mut)
            .unwrap_or_else(|| panic!("bmap: node {id:?} was released"))
    }

    pub(super) fn root_node(&self) -> &BtreeNode {
        match &self.root {
            Root::Btree(r) => r,
            Root::Direct { .. } => panic!("bmap: B-tree operation on a direct map"),
        }
    }

    pub(super) fn root_node_mut(&mut self) -> &mut BtreeNode {
        match &mut self.root {
            Root::Btree(r) => r,
            Root::Direct { .. } => panic!("bmap: B-tree operation on a direct map"),
        }
    }

    pub(super) fn root_level(&self) -> usize {
        usize::from(self.root_node().level)
    }

    pub(super) fn bt(&self, loc: Loc) -> &BtreeNode {
        match loc {
            Loc::Root => self.root_node(),
            Loc::Node(id) => &self.node(id).bt,
        }
    }

    pub(super) fn bt_mut(&mut self, loc: Loc) -> &mut BtreeNode {
        match loc {
            Loc::Root => self.root_node_mut(),
            Loc::Node(id) => &mut self.node_mut(id).bt,
        }
    }

    /// Two distinct nodes, mutably (a move between siblings, or root/child).
    pub(super) fn two_mut(&mut self, a: Loc, b: Loc) -> (&mut BtreeNode, &mut BtreeNode) {
        match (a, b) {
            (Loc::Root, Loc::Node(id)) | (Loc::Node(id), Loc::Root) => {
                let node = StdArc::make_mut(&mut self.nodes).arena[id.0 as usize]
                    .as_mut()
                    .map(StdArc::make_mut)
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
                let (lo, hi) = self.nodes_mut().arena.split_at_mut(i.max(j));
                let (p, q) = (
                    lo[i.min(j)].as_mut().map(StdArc::make_mut),
                    hi[0].as_mut().map(StdArc::make_mut),
                );
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

    pub(super) fn alloc_id(&mut self, node: Node) -> NodeId {
        let nodes = self.nodes_mut();
        if let Some(i) = nodes.free_ids.pop() {
            nodes.arena[i as usize] = Some(StdArc::new(node));
            NodeId(i)
        } else {
            nodes.arena.push(Some(StdArc::new(node)));
            NodeId((nodes.arena.len() - 1) as u32)
        }
    }

    /// A new, zeroed node block (`nilfs_btree_get_new_block` +
    /// `nilfs_btree_node_init(sib, 0, level, 0, ...)`), with a temporary
    /// pointer until [`Bmap::assign`].
    pub(super) fn new_node(&mut self, level: usize) -> NodeId {
        let slot = TEMP_PTR_BIT | self.next_temp;
        self.next_temp += 1;
        let id = self.alloc_id(Node {
            bt: BtreeNode::new_block(self.block_size, level as u8),
            slot,
            disk: None,
            dirty: true,
            assigned: false,
        });
        self.nodes_mut().by_ptr.insert(slot, id);
        id
    }

    /// Drop a node removed from the tree (`nilfs_btnode_delete`); returns
    /// where it had been written, if anywhere.
    pub(super) fn release(&mut self, id: NodeId) -> Option<u64> {
        let nodes = self.nodes_mut();
        let node = nodes.arena[id.0 as usize]
            .take()
            .unwrap_or_else(|| panic!("bmap: node {id:?} released twice"));
        nodes.by_ptr.remove(&node.slot);
        nodes.free_ids.push(id.0);
        node.disk
    }

    /// The child at `ptr`, which must be a level-`level` node block: from
    /// memory, else loaded through `src` and checked (`nilfs_btree_get_block`
    /// with `nilfs_btree_broken_node_block`, then `nilfs_btree_bad_node`).
    pub(super) fn get_child(
        &mut self,
        ptr: u64,
        level: usize,
        src: &mut dyn NodeSource,
    ) -> Result<NodeId> {
        if let Some(&id) = self.nodes.by_ptr.get(&ptr) {
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
        self.nodes_mut().by_ptr.insert(ptr, id);
        Ok(id)
    }
}
