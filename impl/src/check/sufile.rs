//! Pass 5: segment usage. The sufile's header counts must equal its
//! entries (`nilfs_sufile_mod_counter`), a clean entry is all zero
//! (`nilfs_segment_usage_set_clean`), the writer's current and next
//! segments are allocated and not in error (`nilfs_sufile_alloc`,
//! `nilfs_sufile_mark_dirty`), and `su_nblocks` agrees with the logs (in the
//! log pass). That no live block lies in a clean segment or past
//! `su_nblocks` is checked where each live block is placed
//! ([`Ck::place`]).

use super::btree::Ptrs;
use super::codes::Code;
use super::ctx::map_get;
use super::ctx::Ck;
use crate::format::sufile::{
    SegmentUsage, SufileGeometry, SufileHeader, SU_ACTIVE, SU_DIRTY, SU_ERROR,
};
use crate::format::SegNum;

impl Ck<'_, '_> {
    /// Walk the sufile's mapping (latest checkpoint) and read every usage
    /// entry as stored; check the header.
    pub fn load_sufile(&mut self) {
        let inode = self.fs.super_root.sufile.clone();
        let map = self.walk_mdt(
            "sufile",
            "sufile inode in the super root",
            &inode,
            crate::format::ino::SUFILE,
            Ptrs::Virtual(self.latest()),
        );
        let geo = SufileGeometry {
            block_size: self.bs,
            entry_size: self.fs.sb.segment_usage_size,
        };
        let header = match map_get(&map, 0).and_then(|p| self.read(p, 1)) {
            Some(b) => SufileHeader::decode(&b).ok(),
            None => {
                self.find(
                    Code::SuHeaderMissing,
                    "sufile",
                    None,
                    "block 0 is a hole",
                    "the header block",
                );
                None
            }
        };
        let nsegs = self.geo.nsegments;
        let mut su = Vec::with_capacity(nsegs.min(1 << 24) as usize);
        let mut cached: Option<(u64, Option<Vec<u8>>)> = None;
        for s in 0..nsegs {
            if self.stopped() {
                return;
            }
            let (blk, off) = geo.locate(s);
            if cached.as_ref().map(|c| c.0) != Some(blk.0) {
                let data = map_get(&map, blk.0).and_then(|p| self.read(p, 1));
                cached = Some((blk.0, data));
            }
            let u = match cached.as_ref().and_then(|c| c.1.as_deref()) {
                Some(d) => SegmentUsage::decode(d.get(off..).unwrap_or(&[])).unwrap_or_default(),
                None => {
                    self.su_hole.insert(s);
                    SegmentUsage::default()
                }
            };
            su.push(u);
        }
        self.report.stats.used_blocks = su
            .iter()
            .filter(|u| !u.is_clean())
            .map(|u| u64::from(u.nblocks))
            .sum();
        self.su = su;
        if let Some(h) = header {
            self.sufile_header(&h);
        }
    }

    fn sufile_header(&mut self, h: &SufileHeader) {
        let clean = self.su.iter().filter(|u| u.is_clean()).count() as u64;
        let dirty = self.su.iter().filter(|u| u.flags & SU_DIRTY != 0).count() as u64;
        if h.ncleansegs != clean {
            self.find(
                Code::SuCleanCount,
                "sufile header",
                None,
                format!("sh_ncleansegs {}", h.ncleansegs),
                format!("{clean}, the clean entries"),
            );
        }
        if h.ndirtysegs != dirty {
            self.find(
                Code::SuDirtyCount,
                "sufile header",
                None,
                format!("sh_ndirtysegs {}", h.ndirtysegs),
                format!("{dirty}, the dirty entries"),
            );
        }
        if h.last_alloc.0 >= self.geo.nsegments {
            self.find(
                Code::SuLastAlloc,
                "sufile header",
                None,
                format!("sh_last_alloc {}", h.last_alloc),
                format!("a segment number below {}", self.geo.nsegments),
            );
        }
    }

    /// The per-segment rules.
    pub fn sufile_entries(&mut self) {
        for s in 0..self.su.len() {
            let u = self.su[s];
            let unknown = u.flags & !(SU_ACTIVE | SU_DIRTY | SU_ERROR);
            if unknown != 0 {
                self.find(
                    Code::SuFlags,
                    format!("segment usage of segment {s}"),
                    None,
                    format!("su_flags {:#x}: undefined bits {unknown:#x}", u.flags),
                    "ACTIVE, DIRTY and ERROR only",
                );
            }
            if u.is_clean() && (u.nblocks != 0 || u.lastmod != 0) {
                self.find(
                    Code::SuCleanNonzero,
                    format!("segment usage of segment {s}"),
                    None,
                    format!(
                        "clean with su_nblocks {} and su_lastmod {}",
                        u.nblocks, u.lastmod
                    ),
                    "an all-zero entry",
                );
            }
        }
        let scan = &self.fs.scan;
        for (what, seg) in [("current", scan.segnum), ("next", scan.nextnum)] {
            let SegNum(s) = seg;
            let Some(u) = self.su.get(s as usize).copied() else {
                continue;
            };
            let structure = format!("segment usage of segment {s} (the writer's {what})");
            if self.su_hole.contains(s) {
                self.find(
                    Code::SuHole,
                    structure.clone(),
                    None,
                    "its sufile block is a hole",
                    "a usage entry",
                );
            }
            if u.flags & SU_DIRTY == 0 {
                self.find(
                    Code::SuActiveNotDirty,
                    structure.clone(),
                    None,
                    format!("su_flags {:#x}", u.flags),
                    "the DIRTY flag",
                );
            }
            if u.flags & SU_ERROR != 0 {
                self.find(
                    Code::SuErrorActive,
                    structure,
                    None,
                    format!("su_flags {:#x}", u.flags),
                    "no ERROR flag on an active segment",
                );
            }
        }
    }
}
