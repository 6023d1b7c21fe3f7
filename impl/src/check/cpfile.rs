//! Pass 6: the checkpoint file. Its header counts the valid checkpoints and
//! the snapshots (`nilfs_cpfile_create_checkpoint`,
//! `nilfs_cpfile_set_snapshot`), each block's first slot counts the block's
//! valid checkpoints (`nilfs_cpfile_block_add_valid_checkpoints`), the
//! snapshot list is a sorted, doubly linked ring through the header
//! (`nilfs_cpfile_do_get_ssinfo`), and the latest checkpoint is the one the
//! latest super root made. Only mapped blocks are read, so a hostile
//! checkpoint number costs nothing.

use std::collections::{BTreeMap, HashSet};

use super::btree::Ptrs;
use super::codes::Code;
use super::ctx::{map_get, BlockMap, Ck};
use crate::format::cpfile::{Checkpoint, CpfileGeometry, CpfileHeader, CP_INVALID, CP_SNAPSHOT};
use crate::format::inode::{Inode, S_IFREG};
use crate::format::{Cno, Ino};

/// Every flag bit the format defines.
const CP_KNOWN: u32 = 0xF;

/// What the cpfile pass learnt.
pub(crate) struct Cpfile {
    pub map: BlockMap,
    pub geo: CpfileGeometry,
    /// Valid checkpoints and their flags, ascending.
    pub valid: Vec<(u64, u32)>,
}

impl Ck<'_, '_> {
    /// A metadata file's inode must be a regular file with links
    /// (`nilfs_read_inode_common`).
    pub fn mdt_inode(&mut self, who: &str, i: &Inode) {
        if i.file_type() != S_IFREG || i.links_count == 0 {
            self.find(
                Code::MdtInode,
                who.to_string(),
                None,
                format!("i_mode {:#o}, i_links_count {}", i.mode, i.links_count),
                "a regular file with links",
            );
        }
    }

    /// Check a metadata file's inode ([`Self::mdt_inode`]) and walk its
    /// mapping; then judge its `i_blocks` against the blocks walked.
    ///
    /// The kernel keeps `i_blocks` in 512-byte sectors and adds or
    /// subtracts a block's sectors whenever the file's B-tree or direct
    /// map gains or loses a data or node block (`nilfs_bmap_add_blocks`,
    /// `nilfs_inode_add_blocks`), metadata files included. mkfs.nilfs2
    /// writes the files it makes with their block count instead
    /// ([`crate::mkfs::initial_blocks`], a count of the block size alone),
    /// and the kernel only adds and subtracts from there. So with `m`
    /// blocks mapped now, `k` mkfs blocks and `p` sectors a block,
    /// `i_blocks` is `m * p - k * (p - 1)`; `m * p` is accepted too (a file
    /// system whose maker counted sectors).
    /// `who` names the file, `whose` its inode.
    pub fn walk_mdt(
        &mut self,
        who: &str,
        whose: &str,
        i: &Inode,
        ino: Ino,
        ptrs: Ptrs,
    ) -> BlockMap {
        self.mdt_inode(whose, i);
        let nodes0 = self.report.stats.nodes;
        let lost0 = self.lost;
        self.cur_ino = Some(ino.0);
        let map = self.walk_bmap(&|| who.to_string(), &i.bmap, ptrs);
        self.cur_ino = None;
        let nodes = self.report.stats.nodes - nodes0;
        // A mapping with its own damage is that damage's finding.
        if self.lost != lost0 || self.stopped() {
            return map;
        }
        let mapped = map.len() as u64 + nodes;
        let sectors = mapped.saturating_mul(u64::from(self.bs) / 512);
        let mixed = self.mkfs_blocks(ino, mapped);
        if i.blocks != sectors && i.blocks != mixed {
            let mkfs = crate::mkfs::initial_blocks(u64::from(self.bs), ino).unwrap_or(0);
            let want = if (mixed as i64) < 0 {
                // More blocks are gone than the kernel added since mkfs:
                // its count would have wrapped below zero.
                format!("{sectors}, every mapped block's sectors (fewer are mapped than the {mkfs} mkfs.nilfs2 made)")
            } else {
                format!("{mixed} (the {mkfs} made by mkfs.nilfs2 counted once each, the rest in sectors) or {sectors} (all in sectors)")
            };
            self.find(
                Code::MdtBlocks,
                whose.to_string(),
                None,
                format!(
                    "i_blocks {} ({} data and {nodes} node blocks are mapped)",
                    i.blocks,
                    map.len()
                ),
                want,
            );
        }
        map
    }

    /// The `i_blocks` the kernel keeps for file `ino` with `mapped` blocks
    /// when mkfs.nilfs2 made it ([`crate::mkfs::initial_blocks`]): those
    /// counted once each, every block since in 512-byte sectors. Wraps
    /// like the kernel's count when fewer are mapped than mkfs made.
    pub fn mkfs_blocks(&self, ino: Ino, mapped: u64) -> u64 {
        let per = u64::from(self.bs) / 512;
        let mkfs = crate::mkfs::initial_blocks(u64::from(self.bs), ino).unwrap_or(0);
        mapped
            .saturating_mul(per)
            .wrapping_sub(mkfs.saturating_mul(per - 1))
    }

    /// The checkpoint `cno` as stored, from a walked cpfile.
    pub fn cp_entry(&mut self, cp: &Cpfile, cno: u64) -> Option<Checkpoint> {
        let (blk, off) = cp.geo.locate(cno)?;
        let pbn = map_get(&cp.map, blk.0)?;
        let b = self.read(pbn, 1)?;
        Checkpoint::decode(b.get(off..)?).ok()
    }

    /// Walk and check the cpfile.
    pub fn cpfile(&mut self) -> Option<Cpfile> {
        let inode = self.fs.super_root.cpfile.clone();
        let map = self.walk_mdt(
            "cpfile",
            "cpfile inode in the super root",
            &inode,
            crate::format::ino::CPFILE,
            Ptrs::Virtual(self.latest()),
        );
        let geo = CpfileGeometry {
            block_size: self.bs,
            entry_size: self.fs.sb.checkpoint_size,
        };
        let Some(h) = map_get(&map, 0)
            .and_then(|p| self.read(p, 1))
            .and_then(|b| CpfileHeader::decode(&b).ok())
        else {
            self.find(
                Code::CpHeaderMissing,
                "cpfile",
                None,
                "block 0 is a hole",
                "the header block",
            );
            return None;
        };
        let per = geo.checkpoints_per_block();
        let first = geo.first_entry_offset();
        let last = self.latest().0;
        let mut valid = Vec::new();
        // Snapshots: cno -> (next, prev).
        let mut snaps: BTreeMap<u64, (u64, u64)> = BTreeMap::new();
        for &(blk, pbn) in &map {
            let Some(data) = self.read(pbn, 1) else {
                continue;
            };
            let mut in_block = 0u64;
            let mut count_slot = None;
            for slot in 0..per {
                if blk == 0 && slot < first {
                    continue;
                }
                // cno = blk * per + slot - first + 1.
                let Some(cno) = blk
                    .checked_mul(per)
                    .and_then(|x| x.checked_add(slot))
                    .and_then(|x| x.checked_sub(first))
                    .and_then(|x| x.checked_add(1))
                else {
                    continue;
                };
                let off = (slot * u64::from(geo.entry_size)) as usize;
                let Some(cp) = data.get(off..).and_then(|d| Checkpoint::decode(d).ok()) else {
                    continue;
                };
                if slot == 0 {
                    count_slot = Some(cp.checkpoints_count);
                }
                let here = format!("checkpoint {cno}");
                if cp.flags & !CP_KNOWN != 0 || (cp.is_invalid() && cp.is_snapshot()) {
                    self.find(
                        Code::CpFlags,
                        here.clone(),
                        Some(pbn),
                        format!("cp_flags {:#x}", cp.flags),
                        "known bits, SNAPSHOT only on a valid checkpoint",
                    );
                }
                if cp.is_invalid() {
                    continue;
                }
                in_block += 1;
                if cp.cno.0 != cno {
                    self.find(
                        Code::CpCno,
                        here.clone(),
                        Some(pbn),
                        format!("cp_cno {}", cp.cno),
                        format!("{cno}"),
                    );
                }
                if cno > last {
                    self.find(
                        Code::CpFuture,
                        here.clone(),
                        Some(pbn),
                        "a valid checkpoint",
                        format!("no checkpoint beyond the latest, {last}"),
                    );
                }
                if cp.is_snapshot() {
                    snaps.insert(cno, (cp.snapshot_next.0, cp.snapshot_prev.0));
                }
                valid.push((cno, cp.flags));
            }
            if blk > 0 {
                if let Some(n) = count_slot.filter(|&n| u64::from(n) != in_block) {
                    self.find(
                        Code::CpBlockCount,
                        format!("cpfile block {blk}"),
                        Some(pbn),
                        format!("cp_checkpoints_count {n}"),
                        format!("{in_block}, the valid checkpoints in the block"),
                    );
                }
            }
        }
        if h.ncheckpoints != valid.len() as u64 {
            self.find(
                Code::CpCount,
                "cpfile header",
                None,
                format!("ch_ncheckpoints {}", h.ncheckpoints),
                format!("{}, the valid checkpoints", valid.len()),
            );
        }
        if h.nsnapshots != snaps.len() as u64 {
            self.find(
                Code::CpSnapshotCount,
                "cpfile header",
                None,
                format!("ch_nsnapshots {}", h.nsnapshots),
                format!("{}, the snapshots", snaps.len()),
            );
        }
        self.snapshot_list(&h, &snaps);
        let cp = Cpfile { map, geo, valid };
        self.latest_checkpoint(&cp);
        Some(cp)
    }

    fn snapshot_list(&mut self, h: &CpfileHeader, snaps: &BTreeMap<u64, (u64, u64)>) {
        let mut seen = HashSet::new();
        let (mut prev, mut curr) = (0u64, h.snapshot_next.0);
        let bad = |ck: &mut Self, s: String, found: String, want: String| {
            ck.find(Code::CpSnapshotList, s, None, found, want);
        };
        while curr != 0 {
            let here = format!("snapshot list at checkpoint {curr}");
            let Some(&(next, back)) = snaps.get(&curr) else {
                bad(
                    self,
                    here,
                    format!("checkpoint {prev} links to {curr}, not a snapshot"),
                    "a link to a snapshot".into(),
                );
                return;
            };
            if !seen.insert(curr) {
                bad(
                    self,
                    here,
                    "the list comes back to it (a loop)".into(),
                    "a list ending at the header".into(),
                );
                return;
            }
            if curr <= prev {
                bad(
                    self,
                    here.clone(),
                    format!("follows {prev}"),
                    "ascending checkpoint numbers".into(),
                );
            }
            if back != prev {
                bad(
                    self,
                    here,
                    format!("ssl_prev {back}"),
                    format!("{prev}, the snapshot before it"),
                );
            }
            prev = curr;
            curr = next;
        }
        if h.snapshot_prev.0 != prev {
            bad(
                self,
                "cpfile header".into(),
                format!("ch_snapshot_list.ssl_prev {}", h.snapshot_prev),
                format!("{prev}, the last snapshot"),
            );
        }
        for &cno in snaps.keys() {
            if !seen.contains(&cno) {
                bad(
                    self,
                    format!("checkpoint {cno}"),
                    "a snapshot not on the snapshot list".into(),
                    "every snapshot on the list".into(),
                );
            }
        }
    }

    fn latest_checkpoint(&mut self, cp: &Cpfile) {
        let cno = self.latest();
        let here = format!("checkpoint {cno} (the latest super root's)");
        let found = cp.valid.binary_search_by_key(&cno.0, |e| e.0).is_ok();
        let Some(e) = self.cp_entry(cp, cno.0).filter(|_| found) else {
            self.find(
                Code::CpLatest,
                here,
                None,
                "missing or invalid",
                "a valid checkpoint",
            );
            return;
        };
        if e.create != self.fs.scan.ctime {
            self.find(
                Code::CpLatest,
                here,
                None,
                format!("cp_create {}", e.create),
                format!("{}, the ss_create of its log", self.fs.scan.ctime),
            );
        }
    }

    /// The checkpoints to check: the latest first, then the snapshots, the
    /// one asked for, or all.
    pub fn checkpoints_to_check(&self, cp: &Cpfile) -> Vec<Cno> {
        let latest = self.latest();
        let mut out = vec![latest];
        for &(cno, flags) in &cp.valid {
            if cno == latest.0 {
                continue;
            }
            let pick = match self.opts.checkpoints {
                super::Checkpoints::Default => flags & CP_SNAPSHOT != 0 && flags & CP_INVALID == 0,
                super::Checkpoints::Only(c) => c.0 == cno,
                super::Checkpoints::All => true,
            };
            if pick {
                out.push(Cno(cno));
            }
        }
        out
    }
}
