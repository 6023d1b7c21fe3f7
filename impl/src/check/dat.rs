//! Pass 4: the DAT. Its own mapping holds disk block numbers and is walked
//! first (pass 3 rules, physical pointers); every virtual block number a
//! checkpoint reaches is then translated through it with the checks of
//! [`Ck::translate`]; at the end every allocated entry is judged on its
//! own: a disk block, a lifetime within the checkpoints made so far, and,
//! if alive in the current tree, reached by the latest checkpoint (a leak
//! otherwise). The palloc counts are checked on the way.

use super::bits::SparseBits;
use super::btree::Ptrs;
use super::codes::Code;
use super::ctx::Ck;
use crate::format::dat::DatEntry;
use crate::format::Cno;

impl Ck<'_, '_> {
    /// Walk the DAT's mapping (its inode is in the super root).
    pub fn load_dat(&mut self) {
        let inode = self.fs.super_root.dat.clone();
        let map = self.walk_mdt(
            "DAT",
            "DAT inode in the super root",
            &inode,
            crate::format::ino::DAT,
            Ptrs::Physical,
        );
        self.dat_map = map;
    }

    /// Every allocated DAT entry, after every checked checkpoint was walked;
    /// `latest` holds the virtual blocks the latest checkpoint reaches.
    pub fn dat_entries(&mut self, latest: &SparseBits) {
        let map = self.dat_map.clone();
        let geo = self.dat_geo;
        let last = self.latest();
        let mut leaks: Vec<(u64, u64)> = Vec::new();
        let mut read = |ck: &mut Self, blkoff: u64| ck.dat_block(blkoff).map(|b| b.to_vec());
        let mut entry = |ck: &mut Self, v: u64, data: Option<&[u8]>| {
            if v == 0 {
                return; // reserved by mkfs, never used
            }
            let structure = || format!("DAT entry of virtual block {v}");
            let Some(e) = data.and_then(|d| DatEntry::decode(d).ok()) else {
                ck.find(
                    Code::PallocEntryHole,
                    structure(),
                    None,
                    "allocated, but its entry block is a hole",
                    "an entry block for every allocated entry",
                );
                return;
            };
            if e.blocknr.0 == 0 {
                ck.find(
                    Code::DatBlocknrZero,
                    structure(),
                    None,
                    "an allocated entry with de_blocknr 0",
                    "a disk block",
                );
            }
            let end_ok = e.end == Cno::MAX || e.end <= last;
            if e.start > e.end || e.start > last || !end_ok {
                let end = if e.end == Cno::MAX {
                    "max".to_string()
                } else {
                    e.end.to_string()
                };
                ck.find(
                    Code::DatEntryRange,
                    structure(),
                    None,
                    format!("lifetime [{}, {end})", e.start),
                    format!("de_start <= de_end, both at most the latest checkpoint {last}"),
                );
            } else if e.end == Cno::MAX && !latest.contains(v) {
                leaks.push((v, e.blocknr.0));
            }
        };
        self.palloc_scan("DAT", geo, &map, &mut read, &mut entry);
        if let Some(&(v, b)) = leaks.first() {
            let more = match leaks.len() {
                1 => String::new(),
                n => format!(" and {} more", n - 1),
            };
            self.find(
                Code::DatLeak,
                "DAT",
                None,
                format!(
                    "virtual block {v} (block {b}){more} alive in the current tree (de_end max) but not reached by checkpoint {last}"
                ),
                "de_end set when a block leaves the tree",
            );
        }
    }
}
