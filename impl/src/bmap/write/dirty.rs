//! Dirtiness and assignment: propagation of a dirty data block to its
//! ancestors, dirty nodes in the kernel's collection order, assignment of
//! new pointers (`nilfs_btree_assign`), and encoding what is to be written.

use super::*;

impl Bmap {
    /// Mark `id` dirty (`mark_buffer_dirty`).
    pub(super) fn set_dirty(&mut self, id: NodeId) {
        self.node_mut(id).dirty = true;
    }

    /// Mark the path's nodes from `level` up to (not including) the root
    /// dirty: the closure `nilfs_btree_propagate` reaches.
    pub(super) fn dirty_path(&mut self, path: &Path, level: usize) {
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
            let path = self.data_path(key, src)?;
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
                let path = self.data_path(key, src)?;
                Ok(self.set_data_ptr(&path, new_ptr))
            }
        }
    }

    /// Write `new_ptr` into the level-1 slot `path` ends at and mark the
    /// path dirty; returns the pointer it replaces.
    fn set_data_ptr(&mut self, path: &Path, new_ptr: u64) -> u64 {
        let loc = self.loc_at(path, 1);
        let index = path[1].index;
        let old = std::mem::replace(&mut self.bt_mut(loc).ptrs[index], new_ptr);
        self.dirty_path(path, 1);
        old
    }

    /// The pointer of the data block at `key` (`None` if it is not mapped,
    /// as [`Bmap::lookup`] answers) with where it lies, for
    /// [`Bmap::update_slot`] to replace without a second descent:
    /// `nilfs_btree_propagate` keeps the path of its one
    /// `nilfs_btree_do_lookup` for `nilfs_btree_commit_update_v`.
    pub fn lookup_slot(
        &mut self,
        key: u64,
        src: &mut dyn NodeSource,
    ) -> Result<Option<(u64, DataSlot)>> {
        Ok(match self.find_slot(key, src)? {
            KeySlot::Mapped(p, slot) => Some((p, slot)),
            KeySlot::Vacant(_) => None,
        })
    }

    /// [`Bmap::lookup_slot`] that keeps the descent's path for an insert
    /// too: a mapped key's pointer and slot, or where an insert of the
    /// unmapped key goes ([`Vacancy::insert`], [`Vacancy::near`]).
    /// Propagation then descends once per block, new or rewritten, as the
    /// kernel does at write time (`nilfs_btree_insert`'s one lookup, whose
    /// path `nilfs_btree_find_target_v` also reads).
    pub fn find_slot(&mut self, key: u64, src: &mut dyn NodeSource) -> Result<KeySlot<'_>> {
        if !self.is_btree() {
            return Ok(match self.lookup(key, src)? {
                Some(p) => KeySlot::Mapped(p, DataSlot { key, path: None }),
                None => KeySlot::Vacant(Vacancy {
                    bmap: self,
                    key,
                    path: None,
                    matched: false,
                }),
            });
        }
        let mut path = Path::default();
        let found = self.do_lookup(key, 1, src, &mut path)?;
        let ptr = found
            .then(|| {
                let loc = self.loc_at(&path, 1);
                self.bt(loc).ptr(path[1].index)
            })
            .flatten()
            .filter(|&p| p != 0);
        Ok(match ptr {
            Some(p) => KeySlot::Mapped(
                p,
                DataSlot {
                    key,
                    path: Some(path),
                },
            ),
            None => KeySlot::Vacant(Vacancy {
                bmap: self,
                key,
                path: Some(path),
                matched: found,
            }),
        })
    }

    /// [`Bmap::update_ptr`] at a slot [`Bmap::lookup_slot`] found: replace
    /// the pointer and mark the path dirty. The mapping must not have
    /// changed since (no insert, delete or conversion); a slot that no
    /// longer holds its key is refused.
    pub fn update_slot(&mut self, slot: DataSlot, new_ptr: u64) -> Result<u64> {
        if new_ptr == 0 {
            return Err(Error::Invalid("bmap: pointer 0 is not a block".into()));
        }
        let key = slot.key;
        let stale = || Error::Invalid(format!("bmap: the slot of key {key} moved"));
        match (&mut self.root, slot.path) {
            (Root::Direct { ptrs, .. }, None) => {
                let p = usize::try_from(key)
                    .ok()
                    .and_then(|i| ptrs.get_mut(i))
                    .ok_or_else(stale)?;
                let old = std::mem::replace(p, new_ptr);
                self.bmap_dirty = true;
                Ok(old)
            }
            (Root::Btree(_), Some(path)) => {
                // The level-1 node is the root exactly when the path has
                // no node there; it must still be held and hold the key.
                let level1 = match (self.root_level() > 1, path[1].node) {
                    (false, None) => Loc::Root,
                    (true, Some(id)) if self.is_held(id) => Loc::Node(id),
                    _ => return Err(stale()),
                };
                let (node, i) = (self.bt(level1), path[1].index);
                if i >= usize::from(node.nchildren) || node.keys[i] != key {
                    return Err(stale());
                }
                Ok(self.set_data_ptr(&path, new_ptr))
            }
            _ => Err(stale()),
        }
    }

    /// The dirty node blocks in the kernel's collection order
    /// (`nilfs_btree_lookup_dirty_buffers` with `nilfs_btree_add_dirty_buffer`:
    /// one list per level, each sorted by first key; levels ascending).
    pub fn dirty_nodes(&self) -> Vec<DirtyNode> {
        let mut out: Vec<DirtyNode> = self
            .nodes
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
            .nodes
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
        if new_ptr == 0 || new_ptr & TEMP_PTR_BIT != 0 || self.nodes.by_ptr.contains_key(&new_ptr) {
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
        let nodes = self.nodes_mut();
        nodes.by_ptr.remove(&slot);
        nodes.by_ptr.insert(new_ptr, id);
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
        // A mapping with nothing dirty leaves a shared node table shared.
        let marked = |n: &Node| n.dirty || n.assigned;
        if self.nodes.arena.iter().flatten().any(|n| marked(n)) {
            for node in self.nodes_mut().arena.iter_mut().flatten() {
                if marked(node) {
                    let node = StdArc::make_mut(node);
                    node.dirty = false;
                    node.assigned = false;
                }
            }
        }
        self.assigning = false;
        self.bmap_dirty = false;
        Ok(())
    }

    /// The bytes of node `id`'s block. Valid slots must hold real pointers;
    /// stale slots holding a temporary pointer are written as 0.
    pub fn encode_node(&self, id: NodeId) -> Result<Vec<u8>> {
        let node = self
            .nodes
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

    pub(super) fn scrub(bt: &BtreeNode) -> Result<BtreeNode> {
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
        let n = self.nodes.arena.get(id.0 as usize)?.as_ref()?;
        Some((n.bt.level, n.bt.keys[0], n.slot))
    }
}

impl Vacancy<'_> {
    /// The mapping, to read (its last allocated key, for the target).
    pub fn bmap(&self) -> &Bmap {
        self.bmap
    }

    /// [`Bmap::near_ptr`] of the key, read from the path: the pointer left
    /// of the insertion point, or the level-1 node's own (`None` in a
    /// direct map).
    pub fn near(&self) -> Option<u64> {
        match &self.path {
            Some(path) => self.bmap.near_in_path(path),
            None => None,
        }
    }

    /// [`Bmap::insert`] of the key from the path of the descent that found
    /// it vacant: the same result, without descending again.
    ///
    /// Every node the insert edits, and so the whole path to the key's
    /// level-1 node, is dirty afterwards (see the module's "Dirtiness"), so
    /// [`Bmap::mark_data_dirty`] of the key would change nothing.
    pub fn insert(self, ptr: u64, src: &mut dyn NodeSource) -> Result<InsertOutcome> {
        let (bmap, key) = (self.bmap, self.key);
        match self.path {
            Some(mut path) if ptr != 0 && !self.matched => {
                bmap.insert_on_path(&mut path, key, ptr, src)
            }
            // A direct map (its insert has no descent to save), a pointer
            // the insert refuses, or a key a damaged tree maps to 0
            // (EEXIST): the insert's own answer.
            _ => bmap.insert(key, ptr, src),
        }
    }
}
