//! The persistent object allocator's bookkeeping, shared by the DAT and the
//! ifile (`nilfs_palloc_*` in alloc.c): each group descriptor's `pg_nfrees`
//! must equal the clear bits of its group's bitmap, and every allocated
//! entry must have its entry block. Only the blocks the file maps are
//! visited, so the walk is bounded by the file, not by the entry numbers a
//! hostile image can name.

use super::codes::Code;
use super::ctx::{map_get, BlockMap, Ck};
use crate::format::palloc::{self, PallocGeometry};

/// One block of a palloc file, by what its offset makes it.
enum Kind {
    Desc { first_group: u64 },
    Bitmap { group: u64 },
    Entry,
}

fn kind(g: &PallocGeometry, blkoff: u64) -> Kind {
    let per_desc = g.blocks_per_desc_block();
    let (d, r) = (blkoff / per_desc, blkoff % per_desc);
    if r == 0 {
        return Kind::Desc {
            first_group: d.saturating_mul(g.groups_per_desc_block()),
        };
    }
    let (gi, rr) = (
        (r - 1) / g.blocks_per_group(),
        (r - 1) % g.blocks_per_group(),
    );
    if rr == 0 {
        Kind::Bitmap {
            group: d
                .saturating_mul(g.groups_per_desc_block())
                .saturating_add(gi),
        }
    } else {
        Kind::Entry
    }
}

/// The numbers of the set bits of `bytes`, in order: bit `i` is bit
/// `i % 8` of byte `i / 8`, as `nilfs_palloc_*` number them. A word of
/// eight bytes at a time, so a bitmap costs a step per eight bytes and one
/// per set bit, not one per byte.
fn set_bits(bytes: &[u8]) -> impl Iterator<Item = u64> + '_ {
    bytes.chunks(8).enumerate().flat_map(|(w, chunk)| {
        let mut word = [0u8; 8];
        word[..chunk.len()].copy_from_slice(chunk);
        let mut bits = u64::from_le_bytes(word);
        std::iter::from_fn(move || {
            (bits != 0).then(|| {
                let b = bits.trailing_zeros();
                bits &= bits - 1;
                w as u64 * 64 + u64::from(b)
            })
        })
    })
}

/// Called for every allocated entry: its number and its bytes (`None` if
/// its block is a hole).
pub(crate) type EntryFn<'f, 'a, 'd> = dyn FnMut(&mut Ck<'a, 'd>, u64, Option<&[u8]>) + 'f;

impl<'a, 'd> Ck<'a, 'd> {
    /// Check the counts of the palloc file `who` (mapped by `map`, read by
    /// `read`) and call `entry(ck, nr, entry block)` for every allocated
    /// entry, in order (`None` for an entry whose block is a hole).
    pub fn palloc_scan(
        &mut self,
        who: &str,
        geo: PallocGeometry,
        map: &BlockMap,
        read: &mut dyn FnMut(&mut Self, u64) -> Option<Vec<u8>>,
        entry: &mut EntryFn<'_, 'a, 'd>,
    ) {
        let epg = geo.entries_per_group();
        let epb = geo.entries_per_block();
        let mut desc: Option<(u64, Vec<u32>)> = None;
        for &(blkoff, _) in map {
            if self.stopped() {
                return;
            }
            let group = match kind(&geo, blkoff) {
                Kind::Desc { first_group } => {
                    let descs = read(self, blkoff)
                        .and_then(|b| palloc::decode_group_descs(&b, self.bs).ok());
                    desc = descs.map(|d| (first_group, d));
                    continue;
                }
                Kind::Entry => continue,
                Kind::Bitmap { group } => group,
            };
            let Some(bitmap) = read(self, blkoff) else {
                continue;
            };
            let used = palloc::count_set_bits(&bitmap, epg);
            let nfrees = desc.as_ref().and_then(|(first, d)| {
                let i = group.checked_sub(*first)?;
                d.get(usize::try_from(i).ok()?).copied()
            });
            match nfrees {
                Some(n) if u64::from(n) != epg - used => self.find(
                    Code::PallocNfrees,
                    format!("{who}: group descriptor of group {group}"),
                    None,
                    format!("pg_nfrees {n}, its bitmap has {used} entries in use"),
                    format!("{}", epg - used),
                ),
                None if used > 0 => self.find(
                    Code::PallocNfrees,
                    format!("{who}: group descriptor of group {group}"),
                    None,
                    format!("its descriptor block is a hole, the bitmap has {used} entries in use"),
                    "a descriptor counting them",
                ),
                _ => {}
            }
            // The allocated entries, block by block of the group.
            let Some(first_entry_blk) = geo.bitmap_blkoff(group).and_then(|b| b.checked_add(1))
            else {
                continue;
            };
            let mut cur: Option<(u64, Option<Vec<u8>>)> = None;
            let bytes = &bitmap[..bitmap.len().min((epg as usize).div_ceil(8))];
            for off in set_bits(bytes) {
                let nr = group.saturating_mul(epg).saturating_add(off);
                let eblk = first_entry_blk.saturating_add(off / epb);
                if cur.as_ref().map(|c| c.0) != Some(eblk) {
                    let data = if map_get(map, eblk).is_some() {
                        read(self, eblk)
                    } else {
                        None
                    };
                    cur = Some((eblk, data));
                }
                let data = cur.as_ref().and_then(|c| c.1.as_deref());
                let start = geo.entry_offset_in_block(nr);
                entry(self, nr, data.and_then(|d| d.get(start..)));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::set_bits;
    use proptest::prelude::*;

    proptest! {
        /// The word-at-a-time walk names exactly the bits a bit-by-bit
        /// walk finds set, in the same order, whatever the length (a
        /// last word shorter than eight bytes included).
        #[test]
        fn set_bits_names_every_set_bit_in_order(bytes in proptest::collection::vec(
            prop_oneof![Just(0u8), Just(0xffu8), any::<u8>()], 0..80)) {
            let want: Vec<u64> = (0..bytes.len() as u64 * 8)
                .filter(|&i| bytes[(i / 8) as usize] & (1 << (i % 8)) != 0)
                .collect();
            prop_assert_eq!(set_bits(&bytes).collect::<Vec<_>>(), want);
        }
    }
}
