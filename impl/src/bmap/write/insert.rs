//! Insert (`nilfs_btree_insert` and the direct map's), with the kernel's
//! carry, split and grow, and the direct -> B-tree conversion.

use super::*;

impl Bmap {
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
                self.insert_on_path(&mut path, key, ptr, src)
            }
        }
    }

    /// The rest of `nilfs_btree_insert` once the lookup filled `path` and
    /// found `key` unmapped: prepare every level's operation (dropping the
    /// new nodes if that fails), then commit them.
    pub(super) fn insert_on_path(
        &mut self,
        path: &mut Path,
        key: u64,
        ptr: u64,
        src: &mut dyn NodeSource,
    ) -> Result<InsertOutcome> {
        let (maxlevel, nodes_added) = match self.prepare_insert(path, src) {
            Ok(r) => r,
            Err(e) => {
                self.abort_insert(path);
                return Err(e);
            }
        };
        self.commit_insert(path, maxlevel, key, ptr);
        Ok(InsertOutcome { nodes_added })
    }

    /// `nilfs_btree_convert_and_insert` (gather by `nilfs_direct_gather_data`).
    pub(super) fn convert_and_insert(&mut self, key: u64, ptr: u64) -> InsertOutcome {
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
    pub(super) fn prepare_insert(
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
    pub(super) fn get_sibling(
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
    pub(super) fn abort_insert(&mut self, path: &Path) {
        for pl in path.iter() {
            if matches!(pl.op, Op::Split | Op::Grow) {
                if let Some(id) = pl.sib {
                    self.release(id);
                }
            }
        }
    }

    /// `nilfs_btree_commit_insert`: run each level's operation bottom-up.
    pub(super) fn commit_insert(&mut self, path: &mut Path, maxlevel: usize, key: u64, ptr: u64) {
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
    pub(super) fn promote_key(&mut self, path: &Path, mut level: usize, key: u64) {
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
    pub(super) fn do_insert(&mut self, path: &Path, level: usize, k: &mut u64, p: &mut u64) {
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

    pub(super) fn mark_sib_dirty(&mut self, path: &Path, level: usize, sib: NodeId) {
        self.set_dirty(sib);
        self.dirty_path(path, level);
    }

    /// `nilfs_btree_carry_left`: balance with the left sibling, then insert.
    pub(super) fn carry_left(&mut self, path: &mut Path, level: usize, k: &mut u64, p: &mut u64) {
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
    pub(super) fn carry_right(&mut self, path: &mut Path, level: usize, k: &mut u64, p: &mut u64) {
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
    pub(super) fn split(&mut self, path: &mut Path, level: usize, k: &mut u64, p: &mut u64) {
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
    pub(super) fn grow(&mut self, path: &mut Path, level: usize, k: &mut u64, p: &mut u64) {
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
}
