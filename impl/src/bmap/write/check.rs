//! The invariants the kernel's algorithms keep, checked over the whole
//! mapping (for tests and the whole-image checks).

use super::*;

impl Bmap {
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
            .nodes
            .by_ptr
            .values()
            .map(|&id| (id, (self.node(id).dirty, self.node(id).disk)))
            .collect();
        let state = |id: &NodeId| mem.get(id).copied().unwrap_or((false, Some(0)));
        let by_ptr = self.nodes.by_ptr.clone();
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
