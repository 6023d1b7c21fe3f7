//! Delete and truncate (`nilfs_btree_delete`, `nilfs_bmap_truncate`),
//! with the kernel's borrow, concatenate and shrink, and the B-tree ->
//! direct conversion.

use super::*;

impl Bmap {
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
                self.nodes = Nodes::none();
                self.root = Root::Direct { header, ptrs };
                Ok(out)
            }
        }
    }

    /// `nilfs_btree_check_delete`.
    pub(super) fn check_delete(&mut self, key: u64, src: &mut dyn NodeSource) -> Result<bool> {
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
    pub(super) fn gather_data(&mut self, src: &mut dyn NodeSource) -> Result<Vec<(u64, u64)>> {
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
    pub(super) fn btree_delete(
        &mut self,
        key: u64,
        src: &mut dyn NodeSource,
    ) -> Result<DeleteOutcome> {
        let mut path = self.data_path(key, src)?;
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
    pub(super) fn prepare_delete(
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
    pub(super) fn commit_delete(&mut self, path: &mut Path, maxlevel: usize) -> (u64, Vec<u64>) {
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
    pub(super) fn do_delete(&mut self, path: &Path, level: usize) -> (u64, u64) {
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
    pub(super) fn borrow_left(&mut self, path: &mut Path, level: usize) -> (u64, u64) {
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
    pub(super) fn borrow_right(&mut self, path: &mut Path, level: usize) -> (u64, u64) {
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
    pub(super) fn concat_left(
        &mut self,
        path: &mut Path,
        level: usize,
        freed: &mut Vec<u64>,
    ) -> (u64, u64) {
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
    pub(super) fn concat_right(
        &mut self,
        path: &mut Path,
        level: usize,
        freed: &mut Vec<u64>,
    ) -> (u64, u64) {
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
    pub(super) fn shrink(
        &mut self,
        path: &mut Path,
        level: usize,
        freed: &mut Vec<u64>,
    ) -> (u64, u64) {
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
}
