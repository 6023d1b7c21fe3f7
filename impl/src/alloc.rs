//! The persistent object allocator (alloc.c, `nilfs_palloc_*`; digest §5):
//! entry allocation and release in a palloc file (the DAT and the ifile),
//! over an [`Mdt`].
//!
//! Layout: [`PallocGeometry`]. Each group has a bitmap block (bit set =
//! allocated) and a `pg_nfrees` counter in its descriptor block; a hole
//! reads as "nothing allocated" (a hole descriptor block as all groups free).
//!
//! Protocol, as in the kernel: [`Palloc::prepare_alloc`] already sets the
//! bit and decrements `pg_nfrees` (so a second prepare cannot pick the same
//! entry), [`Palloc::commit_alloc`] marks the blocks dirty and
//! [`Palloc::abort_alloc`] clears the bit and gives the count back.
//! [`Palloc::prepare_free`] only checks; [`Palloc::commit_free`] clears the
//! bit. Each prepare returns a token that exactly one commit or abort consumes.
//!
//! Stricter than the kernel (which warns "entry number N already freed" and
//! goes on): freeing an entry that is not allocated is an
//! [`Errno::EINVAL`] error, reported before anything changes.

use crate::format::palloc::{self, PallocGeometry};
use crate::mdt::Mdt;
use crate::{Errno, Error, Result};

crate::metafile::meta_store!(Palloc, field mdt);

/// Size of `struct nilfs_palloc_group_desc`.
const DESC_SIZE: usize = 4;

/// Behaviour variants. Only [`Variant::Kernel`] is correct; the other
/// exists so tests can show that the prepare/abort checks catch it
/// (direction.md rule 6: known-bad variants are first-class).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Variant {
    /// The kernel's behaviour.
    #[default]
    Kernel,
    /// Known bad: `abort_alloc` clears the bit but forgets to give the
    /// group's `pg_nfrees` back.
    AbortForgetsNfrees,
}

/// A prepared allocation: the entry is reserved (bit set, count taken).
/// Consume it with [`Palloc::commit_alloc`] or [`Palloc::abort_alloc`].
#[derive(Debug)]
#[must_use = "a prepared allocation must be committed or aborted"]
pub struct AllocReq {
    nr: u64,
}

impl AllocReq {
    /// The reserved entry number.
    pub fn entry_nr(&self) -> u64 {
        self.nr
    }
}

/// A prepared release: the entry was checked to be allocated.
/// Consume it with [`Palloc::commit_free`] or [`Palloc::abort_free`].
#[derive(Debug)]
#[must_use = "a prepared free must be committed or aborted"]
pub struct FreeReq {
    nr: u64,
}

/// The allocator of one palloc file.
#[derive(Clone, Debug)]
pub struct Palloc<'a> {
    /// The file's blocks.
    mdt: Mdt<'a>,
    geo: PallocGeometry,
    ngroups: u64,
    variant: Variant,
}

impl<'a> Palloc<'a> {
    /// An allocator over `mdt` with the kernel's group limit
    /// (`nilfs_palloc_groups_count`: `2^(64 - log2(bs) - 3)` on 64-bit).
    pub fn new(mdt: Mdt<'a>, geo: PallocGeometry) -> Self {
        let bits = 64 - (geo.entries_per_group().trailing_zeros() as u64);
        let ngroups = 1u64.checked_shl(bits as u32).unwrap_or(u64::MAX);
        Palloc {
            mdt,
            geo,
            ngroups,
            variant: Variant::Kernel,
        }
    }

    /// Limit the file to `ngroups` groups (at least 1), so that a test can
    /// fill it. The kernel's limit is astronomically large.
    pub fn with_max_groups(mut self, ngroups: u64) -> Self {
        self.ngroups = ngroups.max(1);
        self
    }

    /// Select a behaviour variant (tests only; see [`Variant`]).
    pub fn with_variant(mut self, variant: Variant) -> Self {
        self.variant = variant;
        self
    }

    /// The layout.
    pub fn geometry(&self) -> PallocGeometry {
        self.geo
    }

    /// The first entry number past the last group.
    pub fn max_entries(&self) -> u64 {
        self.ngroups.saturating_mul(self.geo.entries_per_group())
    }

    fn blkoff_err(what: &str, n: u64) -> Error {
        Error::OutOfRange(format!("palloc {what} {n}: file offset overflows"))
    }

    fn desc_blk(&self, group: u64) -> Result<u64> {
        self.geo
            .desc_blkoff(group)
            .ok_or_else(|| Self::blkoff_err("group", group))
    }

    fn bitmap_blk(&self, group: u64) -> Result<u64> {
        self.geo
            .bitmap_blkoff(group)
            .ok_or_else(|| Self::blkoff_err("group", group))
    }

    /// The file block holding entry `nr`.
    pub fn entry_blk(&self, nr: u64) -> Result<u64> {
        self.geo
            .entry_blkoff(nr)
            .ok_or_else(|| Self::blkoff_err("entry", nr))
    }

    /// Byte offset of `pg_nfrees` of `group` in its descriptor block.
    fn desc_off(&self, group: u64) -> usize {
        (group % self.geo.groups_per_desc_block()) as usize * DESC_SIZE
    }

    /// `nilfs_palloc_desc_block_init`: every group all free.
    fn desc_init(&self) -> Vec<u8> {
        desc_init_of(&self.geo)
    }

    fn check_nr(&self, nr: u64) -> Result<()> {
        if nr >= self.max_entries() {
            return Err(Error::errno(
                Errno::EINVAL,
                format!(
                    "palloc entry {nr} beyond the file's {} groups",
                    self.ngroups
                ),
            ));
        }
        Ok(())
    }

    /// `pg_nfrees` of `group` (a hole descriptor block reads as all free).
    pub fn group_nfrees(&mut self, group: u64) -> Result<u32> {
        let blk = self.desc_blk(group)?;
        let off = self.desc_off(group);
        Ok(match self.mdt.get_block(blk, false)? {
            Some(d) => le32(d, off),
            None => u32::try_from(self.geo.entries_per_group()).unwrap_or(u32::MAX),
        })
    }

    /// Number of set bits in `group`'s bitmap (0 for a hole).
    pub fn group_allocated(&mut self, group: u64) -> Result<u64> {
        let blk = self.bitmap_blk(group)?;
        let epg = self.geo.entries_per_group();
        Ok(match self.mdt.get_block(blk, false)? {
            Some(b) => palloc::count_set_bits(b, epg),
            None => 0,
        })
    }

    /// Whether entry `nr` is allocated (its bit is set).
    pub fn is_allocated(&mut self, nr: u64) -> Result<bool> {
        let (group, off) = self.geo.group(nr);
        let blk = self.bitmap_blk(group)?;
        Ok(match self.mdt.get_block(blk, false)? {
            Some(b) => palloc::bit_is_set(b, off),
            None => false,
        })
    }

    /// `nilfs_palloc_prepare_alloc_entry`: reserve the first free entry at
    /// or after `target`, in the kernel's order:
    /// 1. the target's group from the target's offset to the group's end,
    ///    then (only with `wrap`) from the group's start up to the target;
    /// 2. the following groups from bit 0, skipping groups whose
    ///    `pg_nfrees` is 0;
    /// 3. with `wrap`, after the last group, groups 0 up to the target's.
    ///
    /// The DAT allocates with `wrap`, the ifile without. ENOSPC if nothing
    /// is free in that range. Descriptor and bitmap blocks that are holes are
    /// created (pristine; dirtied only by the commit).
    pub fn prepare_alloc(&mut self, target: u64, wrap: bool) -> Result<AllocReq> {
        let epg = self.geo.entries_per_group();
        let (tgroup, toff) = self.geo.group(target);
        let (mut group, mut off) = (tgroup, toff);
        let mut maxgroup = self.ngroups - 1;
        if tgroup >= self.ngroups {
            if !wrap {
                return Err(nospc(target));
            }
            (group, off) = (0, 0);
        }
        let mut visited = 0u64;
        while visited < self.ngroups {
            if group > maxgroup {
                if !wrap || group < self.ngroups || tgroup == 0 || tgroup >= self.ngroups {
                    break;
                }
                // Wrap around: the groups before the target's.
                group = 0;
                maxgroup = tgroup - 1;
            }
            let full = self.full_groups(group, maxgroup)?;
            if full > 0 {
                visited += full;
                group += full;
                off = 0;
                continue;
            }
            if let Some(pos) = self.try_group(group, off, wrap && group == tgroup)? {
                return Ok(AllocReq {
                    nr: group * epg + pos,
                });
            }
            visited += 1;
            group += 1;
            off = 0;
        }
        Err(nospc(target))
    }

    /// How many groups from `group` on (none past `maxgroup`, so none the
    /// search visited already) are full by a descriptor block the store
    /// holds already: the groups [`Palloc::try_group`] would pass over,
    /// found without a lookup, a load or a journal entry per group. The
    /// kernel reads a descriptor block once and walks its groups
    /// (`nilfs_palloc_prepare_alloc_entry`); a file of a million entries
    /// has thirty full groups before its first free one. (Speed only: a
    /// search that never skips finds the same entries.)
    fn full_groups(&self, group: u64, maxgroup: u64) -> Result<u64> {
        let Some(desc) = self.mdt.cached(self.desc_blk(group)?) else {
            return Ok(0);
        };
        let per_block = self.geo.groups_per_desc_block();
        let last = maxgroup.min(group - group % per_block + per_block - 1);
        Ok((group..=last)
            .take_while(|&g| le32(desc, self.desc_off(g)) == 0)
            .count() as u64)
    }

    /// Look for a free entry in `group` from `off` (and below it if
    /// `wrap`); on success set its bit and take one from `pg_nfrees`.
    fn try_group(&mut self, group: u64, off: u64, wrap: bool) -> Result<Option<u64>> {
        let epg = self.geo.entries_per_group();
        let dblk = self.desc_blk(group)?;
        let doff = self.desc_off(group);
        // The pristine descriptor block is built only for a hole.
        let geo = &self.geo;
        let nfrees = le32(
            self.mdt
                .get_block_init(dblk, |b| b.copy_from_slice(&desc_init_of(geo)))?,
            doff,
        );
        if nfrees == 0 {
            return Ok(None);
        }
        let bblk = self.bitmap_blk(group)?;
        let bitmap = self.mdt.get_block_init(bblk, |_| {})?;
        let found = find_zero(bitmap, off, epg).or_else(|| {
            if wrap {
                find_zero(bitmap, 0, off.min(epg))
            } else {
                None
            }
        });
        let Some(pos) = found else {
            // The counter says free, the bitmap says full (the kernel moves on).
            return Ok(None);
        };
        palloc::set_bit(bitmap, pos);
        let desc = self
            .mdt
            .get_block(dblk, false)?
            .expect("palloc: descriptor block created above");
        put_le32(desc, doff, nfrees - 1);
        Ok(Some(pos))
    }

    /// `nilfs_palloc_commit_alloc_entry`: the descriptor and bitmap blocks
    /// become dirty. Returns the entry number.
    pub fn commit_alloc(&mut self, req: AllocReq) -> u64 {
        let (group, _) = self.geo.group(req.nr);
        let dblk = self
            .desc_blk(group)
            .expect("palloc: prepared group has a block");
        let bblk = self
            .bitmap_blk(group)
            .expect("palloc: prepared group has a block");
        self.mdt.mark_dirty(bblk);
        self.mdt.mark_dirty(dblk);
        req.nr
    }

    /// `nilfs_palloc_abort_alloc_entry`: clear the bit and give the entry
    /// back to `pg_nfrees`; blocks the prepare created and nobody else used
    /// become holes again.
    pub fn abort_alloc(&mut self, req: AllocReq) {
        let (group, off) = self.geo.group(req.nr);
        let dblk = self
            .desc_blk(group)
            .expect("palloc: prepared group has a block");
        let bblk = self
            .bitmap_blk(group)
            .expect("palloc: prepared group has a block");
        let doff = self.desc_off(group);
        let bitmap = self
            .mdt
            .get_block(bblk, false)
            .ok()
            .flatten()
            .expect("palloc: bitmap of a prepared entry is cached");
        let was_set = palloc::clear_bit(bitmap, off) == Some(true);
        assert!(
            was_set,
            "palloc: aborting entry {} whose bit is clear",
            req.nr
        );
        if self.variant != Variant::AbortForgetsNfrees {
            let desc = self
                .mdt
                .get_block(dblk, false)
                .ok()
                .flatten()
                .expect("palloc: descriptor of a prepared entry is cached");
            let n = le32(desc, doff);
            put_le32(desc, doff, n.wrapping_add(1)); // le32_add_cpu wraps
        }
        let zero = vec![0u8; self.geo.block_size as usize];
        self.mdt.discard_if_pristine(bblk, &zero);
        let init = self.desc_init();
        self.mdt.discard_if_pristine(dblk, &init);
    }

    /// `nilfs_palloc_prepare_free_entry`: check that `nr` is allocated
    /// (its bitmap block read), then read the group's descriptor block
    /// without creating it (a hole is ENOENT, an unreadable block its
    /// error), as the kernel's prepare does, so that the commit cannot fail.
    pub fn prepare_free(&mut self, nr: u64) -> Result<FreeReq> {
        self.check_nr(nr)?;
        if !self.is_allocated(nr)? {
            return Err(not_allocated(nr));
        }
        let (group, _) = self.geo.group(nr);
        let dblk = self.desc_blk(group)?;
        if self.mdt.get_block(dblk, false)?.is_none() {
            return Err(Error::errno(
                Errno::ENOENT,
                format!("palloc: the descriptor block {dblk} of entry {nr} is a hole"),
            ));
        }
        Ok(FreeReq { nr })
    }

    /// `nilfs_palloc_commit_free_entry`: clear the bit, count the entry
    /// free, dirty the descriptor and bitmap blocks. The entry block is
    /// kept (only the batch free deletes blocks).
    pub fn commit_free(&mut self, req: FreeReq) {
        let (group, off) = self.geo.group(req.nr);
        let dblk = self.desc_blk(group).expect("palloc: checked entry");
        let bblk = self.bitmap_blk(group).expect("palloc: checked entry");
        let doff = self.desc_off(group);
        let bitmap = self
            .mdt
            .get_block(bblk, false)
            .ok()
            .flatten()
            .expect("palloc: bitmap of a checked entry is cached");
        let was_set = palloc::clear_bit(bitmap, off) == Some(true);
        assert!(
            was_set,
            "palloc: entry {} freed twice between prepare and commit",
            req.nr
        );
        let geo = &self.geo;
        let desc = self
            .mdt
            .get_block_init(dblk, |b| b.copy_from_slice(&desc_init_of(geo)))
            .expect("palloc: descriptor block of a cached bitmap");
        let n = le32(desc, doff);
        put_le32(desc, doff, n.wrapping_add(1)); // le32_add_cpu wraps
        self.mdt.mark_dirty(dblk);
        self.mdt.mark_dirty(bblk);
    }

    /// `nilfs_palloc_abort_free_entry`: nothing was changed.
    pub fn abort_free(&mut self, req: FreeReq) {
        let _ = req;
    }

    /// Prepare and commit the release of one entry.
    pub fn free_entry(&mut self, nr: u64) -> Result<()> {
        let req = self.prepare_free(nr)?;
        self.commit_free(req);
        Ok(())
    }

    /// `nilfs_palloc_freev`: release a batch (the cleaner's dead virtual
    /// block numbers). Every entry block left without an allocated entry is
    /// deleted (becomes a hole), and so is the bitmap block of every group
    /// left completely free; descriptor blocks stay.
    ///
    /// Checked first, changing nothing on error: every entry must be
    /// allocated, once (the kernel warns and skips such entries instead).
    pub fn free_entries(&mut self, nrs: &[u64]) -> Result<()> {
        let mut seen = std::collections::BTreeSet::new();
        for &nr in nrs {
            self.check_nr(nr)?;
            if !seen.insert(nr) || !self.is_allocated(nr)? {
                return Err(not_allocated(nr));
            }
        }
        let epb = self.geo.entries_per_block();
        let epg = self.geo.entries_per_group();
        let mut groups = std::collections::BTreeSet::new();
        let mut entry_blocks = std::collections::BTreeSet::new();
        for &nr in nrs {
            self.commit_free(FreeReq { nr });
            let (group, off) = self.geo.group(nr);
            groups.insert(group);
            entry_blocks.insert((group, off - off % epb));
        }
        // Runs in the kernel check emptiness when a run of entries in one
        // block ends; as a batch only clears bits, checking at the end
        // deletes the same blocks.
        for (group, start) in entry_blocks {
            let bblk = self.bitmap_blk(group)?;
            let bitmap = self
                .mdt
                .get_block(bblk, false)?
                .expect("palloc: freed bitmap");
            let end = (start + epb).min(epg);
            if palloc::count_set_bits(bitmap, end) == palloc::count_set_bits(bitmap, start) {
                self.mdt
                    .delete_block(self.entry_blk(group * epg + start)?)?;
            }
        }
        for group in groups {
            if u64::from(self.group_nfrees(group)?) == epg {
                self.mdt.delete_block(self.bitmap_blk(group)?)?;
            }
        }
        Ok(())
    }

    /// The bytes of entry `nr` (`entry_size` of them); `None` if its block
    /// is a hole.
    pub fn entry(&mut self, nr: u64) -> Result<Option<&mut [u8]>> {
        self.check_nr(nr)?;
        let blk = self.entry_blk(nr)?;
        let off = self.geo.entry_offset_in_block(nr);
        let esz = self.geo.entry_size as usize;
        Ok(self
            .mdt
            .get_block(blk, false)?
            .map(|b| &mut b[off..off + esz]))
    }

    /// `nilfs_palloc_get_entry_block(create = 1)`: the bytes of entry `nr`,
    /// creating its (zero-filled) block if it is a hole.
    pub fn entry_create(&mut self, nr: u64) -> Result<&mut [u8]> {
        self.check_nr(nr)?;
        let blk = self.entry_blk(nr)?;
        let off = self.geo.entry_offset_in_block(nr);
        let esz = self.geo.entry_size as usize;
        Ok(&mut self.mdt.get_block_init(blk, |_| {})?[off..off + esz])
    }

    /// Dirty the block holding entry `nr` (which must be present).
    pub fn mark_entry_dirty(&mut self, nr: u64) -> Result<()> {
        let blk = self.entry_blk(nr)?;
        self.mdt.mark_dirty(blk);
        Ok(())
    }

    /// Forget entry `nr`'s block if a prepare created it and it is still
    /// all zero (used by the DAT's and the ifile's aborts).
    pub fn discard_entry_block_if_pristine(&mut self, nr: u64) {
        if let Ok(blk) = self.entry_blk(nr) {
            let zero = vec![0u8; self.geo.block_size as usize];
            self.mdt.discard_if_pristine(blk, &zero);
        }
    }

    /// Check the allocator's invariant on every group whose descriptor or
    /// bitmap block exists among `groups`: `pg_nfrees + popcount == epg`.
    /// Returns the first group that breaks it.
    pub fn check_groups(&mut self, groups: impl IntoIterator<Item = u64>) -> Result<Option<u64>> {
        let epg = self.geo.entries_per_group();
        for g in groups {
            if u64::from(self.group_nfrees(g)?) + self.group_allocated(g)? != epg {
                return Ok(Some(g));
            }
        }
        Ok(None)
    }
}

/// The descriptor block a hole reads as: every group's `pg_nfrees` full.
fn desc_init_of(geo: &PallocGeometry) -> Vec<u8> {
    let n = geo.groups_per_desc_block() as usize;
    let epg = u32::try_from(geo.entries_per_group()).unwrap_or(u32::MAX);
    palloc::encode_group_descs(&vec![epg; n], geo.block_size)
}

/// The first clear bit in `[from, to)`.
fn find_zero(bitmap: &[u8], from: u64, to: u64) -> Option<u64> {
    // nilfs_palloc_find_available_slot's find_next_zero_bit, a 64-bit
    // word at a time (bit k of the group is bit k%8 of byte k/8, so a
    // little-endian word holds bits 64w..64w+63 in order).
    let to = to.min(bitmap.len() as u64 * 8);
    if from >= to {
        return None;
    }
    let word = |w: usize| match bitmap.get(w * 8..w * 8 + 8) {
        Some(b) => u64::from_le_bytes(b.try_into().expect("8 bytes")),
        None => {
            // A tail shorter than a word (never for whole blocks).
            let mut b = [0xFFu8; 8];
            let tail = &bitmap[w * 8..];
            b[..tail.len()].copy_from_slice(tail);
            u64::from_le_bytes(b)
        }
    };
    let (first, last) = ((from / 64) as usize, ((to - 1) / 64) as usize);
    let (mut w, mut free) = (first, !word(first) & (u64::MAX << (from % 64)));
    if free == 0 && w < last {
        // A group fills from its start, so the search from the target
        // crosses the full words first: four at a time.
        let span = &bitmap[(first + 1) * 8..((last + 1) * 8).min(bitmap.len())];
        let full = span
            .chunks_exact(32)
            .take_while(|c| {
                let w = |k: usize| u64::from_le_bytes(c[k..k + 8].try_into().expect("8 bytes"));
                w(0) & w(8) & w(16) & w(24) == u64::MAX
            })
            .count();
        w += full * 4;
    }
    while free == 0 && w < last {
        w += 1;
        free = !word(w);
    }
    let found = w as u64 * 64 + u64::from(free.trailing_zeros());
    (free != 0 && found < to).then_some(found)
}

fn le32(b: &[u8], off: usize) -> u32 {
    crate::format::le::u32_at(b, off)
}

fn put_le32(b: &mut [u8], off: usize, v: u32) {
    crate::format::le::put_u32(b, off, v);
}

fn nospc(target: u64) -> Error {
    Error::errno(
        Errno::ENOSPC,
        format!("palloc: no free entry (target {target})"),
    )
}

fn not_allocated(nr: u64) -> Error {
    Error::errno(
        Errno::EINVAL,
        format!("palloc: entry {nr} is not allocated (double free?)"),
    )
}

#[cfg(test)]
mod tests {
    use super::find_zero;
    use proptest::prelude::*;

    /// `check_groups` names the first group whose descriptor and bitmap
    /// disagree. Postmortem (issue 37, core-meta 7/40): it answering
    /// "none" always survived, since every test asked it of a healthy
    /// allocator.
    #[test]
    fn check_groups_names_a_group_whose_counts_disagree() {
        use crate::format::palloc::PallocGeometry;
        use crate::mdt::Mdt;
        let epg = 8192;
        let mut p = super::Palloc::new(Mdt::empty(1024), PallocGeometry::new(1024, 32).unwrap())
            .with_max_groups(3);
        for target in [0, epg + 5, 2 * epg + 9] {
            let r = p.prepare_alloc(target, true).unwrap();
            p.commit_alloc(r);
        }
        assert_eq!(p.check_groups(0..3).unwrap(), None);
        // One more bit set in group 1's bitmap, its descriptor unchanged.
        let blk = p.bitmap_blk(1).unwrap();
        p.mdt.get_block(blk, false).unwrap().unwrap()[100] |= 1;
        assert_eq!(p.check_groups(0..3).unwrap(), Some(1));
    }

    /// The bit-by-bit scan the word-wise one replaced.
    fn find_zero_bitwise(bitmap: &[u8], from: u64, to: u64) -> Option<u64> {
        (from..to).find(|&p| {
            bitmap
                .get((p / 8) as usize)
                .is_some_and(|b| b & (1 << (p % 8)) == 0)
        })
    }

    proptest! {
        #[test]
        fn the_word_scan_finds_what_the_bit_scan_finds(
            bitmap in prop::collection::vec(prop_oneof![Just(0xFFu8), any::<u8>()], 0..80),
            from in 0u64..700,
            len in 0u64..700,
        ) {
            let to = from + len;
            prop_assert_eq!(find_zero(&bitmap, from, to), find_zero_bitwise(&bitmap, from, to));
        }

        /// A group fills from its start: a run of full bytes (long enough
        /// for the four-word skip) and then anything, searched from inside
        /// or before the run.
        #[test]
        fn the_skip_over_full_words_finds_what_the_bit_scan_finds(
            full in 0usize..200,
            tail in prop::collection::vec(any::<u8>(), 0..40),
            from in 0u64..1700,
            len in 0u64..1900,
        ) {
            let mut bitmap = vec![0xFFu8; full];
            bitmap.extend(tail);
            let to = from + len;
            prop_assert_eq!(find_zero(&bitmap, from, to), find_zero_bitwise(&bitmap, from, to));
        }
    }
}

#[cfg(test)]
mod group_search_tests {
    use super::Palloc;
    use crate::format::palloc::PallocGeometry;
    use crate::mdt::Mdt;

    /// Allocate every entry of `group`.
    fn fill(p: &mut Palloc<'_>, group: u64) {
        let epg = p.geometry().entries_per_group();
        for nr in group * epg..(group + 1) * epg {
            let req = p.prepare_alloc(nr, false).expect("room in the group");
            assert_eq!(p.commit_alloc(req), nr);
        }
    }

    /// The full groups passed over in one look stop at the end of their
    /// descriptor block: the next block's groups have descriptors of
    /// their own. Groups 0 and 255 full, 256 empty, with 1 KiB blocks
    /// (256 groups a descriptor block): from group 255 the search lands
    /// on group 256's first entry. Reading on past the block would take
    /// group 0's descriptor (full) for group 256's and skip it.
    #[test]
    fn the_search_passes_over_full_groups_one_descriptor_block_at_a_time() {
        let geo = PallocGeometry::new(1024, 32).expect("geometry");
        assert_eq!(geo.groups_per_desc_block(), 256);
        let epg = geo.entries_per_group();
        let mut p = Palloc::new(Mdt::empty(1024), geo).with_max_groups(300);
        fill(&mut p, 0);
        fill(&mut p, 255);
        let req = p
            .prepare_alloc(255 * epg, false)
            .expect("group 256 is free");
        assert_eq!(req.entry_nr(), 256 * epg);
        let _ = p.commit_alloc(req);
        // And from group 254 (free, in the first block): its own entry.
        let req = p
            .prepare_alloc(254 * epg + 7, false)
            .expect("group 254 is free");
        assert_eq!(req.entry_nr(), 254 * epg + 7);
        let _ = p.commit_alloc(req);
    }
}
