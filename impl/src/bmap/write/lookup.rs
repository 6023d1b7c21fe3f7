//! Lookups: the kernel's `nilfs_btree_do_lookup` path walk, exact and
//! at-level lookups, the in-memory lookup of prepared blocks, the last key,
//! and whole-tree walks.

use super::*;

impl Bmap {
    /// `nilfs_btree_do_lookup`: fill `path` from the root down to
    /// `minlevel`; returns whether `key` matched exactly. Every level's
    /// `index` starts at 0 (`nilfs_btree_alloc_path`).
    pub(super) fn do_lookup(
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

    /// The path to data block `key` in a B-tree, down to its level-1 node;
    /// ENOENT if `key` is not mapped.
    pub(super) fn data_path(&mut self, key: u64, src: &mut dyn NodeSource) -> Result<Path> {
        let mut path = Path::default();
        if !self.do_lookup(key, 1, src, &mut path)? {
            return Err(Error::errno(
                Errno::ENOENT,
                format!("bmap: no block at key {key}"),
            ));
        }
        Ok(path)
    }

    /// `nilfs_bmap_set_target_v`: data block `key` was just inserted with
    /// virtual number `ptr` (`nilfs_direct_insert`,
    /// `nilfs_btree_commit_insert`, `nilfs_btree_commit_convert_and_insert`).
    pub fn set_last_allocated(&mut self, key: u64, ptr: u64) {
        self.last_allocated = Some((key, ptr));
    }

    /// The last `(key, ptr)` given to [`Bmap::set_last_allocated`] since
    /// the mapping was loaded.
    pub fn last_allocated(&self) -> Option<(u64, u64)> {
        self.last_allocated
    }

    /// `nilfs_btree_find_near` on the path an insert of `key` walks: the
    /// pointer left of the insertion point in the level-1 node, else the
    /// level-2 node's pointer to that level-1 node. `None` for a direct
    /// map (whose insert has no path: `nilfs_direct_find_target_v`, and a
    /// conversion to a B-tree passes none either), for an empty tree, or
    /// where the pointer found is 0 or a node not yet given its number (a
    /// temporary pointer: the kernel numbers new nodes when it creates
    /// them, this module at assignment).
    pub fn near_ptr(&mut self, key: u64, src: &mut dyn NodeSource) -> Result<Option<u64>> {
        if !self.is_btree() {
            return Ok(None);
        }
        let mut path = Path::default();
        let root_level = self.root_level();
        if root_level < 1 || self.root_node().nchildren == 0 {
            return Ok(None);
        }
        self.do_lookup(key, 1, src, &mut path)?;
        Ok(self.near_in_path(&path))
    }

    /// [`Bmap::near_ptr`]'s answer from the path of an insert's descent
    /// (a B-tree's; `None` for an empty or damaged root, as there).
    pub(super) fn near_in_path(&self, path: &Path) -> Option<u64> {
        let root_level = self.root_level();
        if root_level < 1 || self.root_node().nchildren == 0 {
            return None;
        }
        let near = if path[1].index > 0 {
            let loc = self.loc_at(path, 1);
            self.bt(loc).ptr(path[1].index - 1)
        } else if root_level >= 2 {
            let loc = self.loc_at(path, 2);
            self.bt(loc).ptr(path[2].index)
        } else {
            None
        };
        near.filter(|&p| p != 0 && p & TEMP_PTR_BIT == 0)
    }

    /// The pointer mapped at `key`, `None` for a hole (`nilfs_bmap_lookup`).
    pub fn lookup(&mut self, key: u64, src: &mut dyn NodeSource) -> Result<Option<u64>> {
        match &self.root {
            Root::Direct { ptrs, .. } => Ok(usize::try_from(key)
                .ok()
                .and_then(|i| ptrs.get(i).copied())
                .filter(|&p| p != 0)),
            Root::Btree(_) => Ok(self.descend(key, src)?.0),
        }
    }

    /// A B-tree's data pointer for `key` from a descent from the root, and
    /// the level-1 node the descent ended in (`None` when that is the root).
    fn descend(
        &mut self,
        key: u64,
        src: &mut dyn NodeSource,
    ) -> Result<(Option<u64>, Option<NodeId>)> {
        let mut path = Path::default();
        let found = self.do_lookup(key, 1, src, &mut path)?;
        let leaf = path[1].node;
        if !found {
            return Ok((None, leaf));
        }
        let loc = self.loc_at(&path, 1);
        Ok((self.bt(loc).ptr(path[1].index).filter(|&p| p != 0), leaf))
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

    /// [`Bmap::lookup_in_memory`] for a run of keys (the segment
    /// constructor's, one file's blocks at a time, ascending). When
    /// `key` lies between the first and last keys of the level-1 node the
    /// last call of the run ended in, that node alone is searched: in a
    /// B-tree no other level-1 node can map such a key. Otherwise it
    /// descends from the root as `lookup_in_memory` does, and `hint`
    /// remembers the node it ends in. The answer is `lookup_in_memory`'s.
    /// The tree must not change during the run.
    pub fn lookup_in_memory_from(&mut self, key: u64, hint: &mut LeafHint) -> Result<Option<u64>> {
        if let Root::Direct { .. } = self.root {
            return self.lookup_in_memory(key);
        }
        if let Some(bt) = hint
            .0
            .and_then(|id| self.nodes.arena.get(id.0 as usize))
            .and_then(|n| n.as_deref())
            .map(|n| &n.bt)
        {
            let keys = bt.valid_keys();
            if usize::from(bt.level) == 1
                && keys.first().is_some_and(|&first| first <= key)
                && keys.last().is_some_and(|&last| key <= last)
            {
                let (i, found) = bt.lookup(key);
                return Ok(found.then(|| bt.ptr(i)).flatten().filter(|&p| p != 0));
            }
        }
        let (ptr, leaf) = self.descend(key, &mut InMemoryOnly)?;
        hint.0 = leaf;
        Ok(ptr)
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
    pub(super) fn walk(&mut self, src: &mut dyn NodeSource, f: &mut WalkFn<'_>) -> Result<()> {
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

    pub(super) fn loc_at(&self, path: &Path, level: usize) -> Loc {
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
}
