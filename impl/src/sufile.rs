//! The segment usage file's write side (sufile.c, `nilfs_sufile_*`;
//! digest §9): segment allocation for logs, usage updates, release by the
//! cleaner, scrapping by recovery, error marking, and the listings of
//! `NILFS_IOCTL_GET_SUINFO`.
//!
//! A segment is clean iff its `su_flags` is 0 (the on-disk ACTIVE bit,
//! which only mkfs writes, counts as "not clean" like any other flag).
//! Header counters change exactly as the kernel's `*_do_*` callbacks change
//! them; a caller that breaks the rules (freeing a clean segment...) gets
//! the kernel's answer: nothing happens.

use crate::format::le::{put_u32, put_u64, u32_at, u64_at};
use crate::format::sufile::{SegmentUsage, SufileGeometry, SufileHeader, SU_DIRTY, SU_ERROR};
use crate::format::SegNum;
use crate::format::MIN_NRSVSEGS;
use crate::mdt::Mdt;
use crate::{Errno, Error, Result};

crate::metafile::meta_store!(Sufile, field mdt);

/// Offsets inside the header and a usage entry.
const SH_NCLEAN: usize = 0;
const SH_NDIRTY: usize = 8;
const SH_LAST_ALLOC: usize = 16;
const SU_LASTMOD: usize = 0;
const SU_NBLOCKS: usize = 8;
const SU_FLAGS: usize = 12;

/// `nilfs_nrsvsegs`: segments kept back from users,
/// `max(NILFS_MIN_NRSVSEGS = 8, ceil(nsegments * r_percentage / 100))`.
pub fn nrsvsegs(nsegments: u64, r_segments_percentage: u64) -> u64 {
    MIN_NRSVSEGS.max(
        nsegments
            .saturating_mul(r_segments_percentage)
            .div_ceil(100),
    )
}

/// `nilfs_near_disk_full`: the segment constructor's test (it wakes the
/// cleaner early): `ncleansegs <= nrsvsegs + (ndirtyblks / blocks_per_segment + 1)`,
/// where `ndirtyblks` counts the dirty blocks waiting to be written.
pub fn near_disk_full(
    ncleansegs: u64,
    nrsvsegs: u64,
    ndirtyblks: u64,
    blocks_per_segment: u64,
) -> bool {
    let nincsegs = ndirtyblks / blocks_per_segment.max(1) + 1;
    ncleansegs <= nrsvsegs.saturating_add(nincsegs)
}

/// The segment usage file.
#[derive(Clone, Debug)]
pub struct Sufile<'a> {
    /// The file's blocks.
    mdt: Mdt<'a>,
    geo: SufileGeometry,
    nsegments: u64,
    allocmin: u64,
    allocmax: u64,
}

impl<'a> Sufile<'a> {
    /// The sufile stored in `mdt`, for a device of `nsegments` segments,
    /// with `entry_size`-byte entries (`s_segment_usage_size`).
    /// Allocation may use every segment.
    pub fn new(mdt: Mdt<'a>, entry_size: u16, nsegments: u64) -> Result<Self> {
        let geo = SufileGeometry::new(mdt.block_size(), entry_size)?;
        if nsegments == 0 {
            return Err(Error::Invalid("sufile with no segments".into()));
        }
        Ok(Sufile {
            mdt,
            geo,
            nsegments,
            allocmin: 0,
            allocmax: nsegments - 1,
        })
    }

    /// `nilfs_sufile_get_nsegments`.
    pub fn nsegments(&self) -> u64 {
        self.nsegments
    }

    /// `nilfs_sufile_set_alloc_range`: allocate only in `[start, end]`
    /// (ERANGE unless `start <= end < nsegments`).
    pub fn set_alloc_range(&mut self, start: SegNum, end: SegNum) -> Result<()> {
        if start > end || end.0 >= self.nsegments {
            return Err(Error::errno(
                Errno::ERANGE,
                format!("allocation range [{start}, {end}] out of range"),
            ));
        }
        self.allocmin = start.0;
        self.allocmax = end.0;
        Ok(())
    }

    fn check_seg(&self, seg: SegNum) -> Result<()> {
        if seg.0 >= self.nsegments {
            return Err(Error::errno(
                Errno::EINVAL,
                format!("invalid segment number: {seg}"),
            ));
        }
        Ok(())
    }

    fn header_block(&mut self) -> Result<&mut [u8]> {
        self.mdt.need_block(
            0,
            Errno::EIO,
            "missing header block in segment usage metadata",
        )
    }

    /// The header.
    pub fn header(&mut self) -> Result<SufileHeader> {
        SufileHeader::decode(self.header_block()?)
    }

    /// `nilfs_sufile_get_ncleansegs` (the header's count).
    pub fn ncleansegs(&mut self) -> Result<u64> {
        Ok(self.header()?.ncleansegs)
    }

    /// The same count if the header block is in memory already, read
    /// without `&mut` (see `Fs::ncleansegs`).
    pub fn cached_ncleansegs(&self) -> Option<u64> {
        let h = self.mdt.cached(0)?;
        Some(SufileHeader::decode(h).ok()?.ncleansegs)
    }

    /// Add to the header's counters and dirty it
    /// (`nilfs_sufile_mod_counter`).
    fn mod_counter(&mut self, nclean: i64, ndirty: i64) -> Result<()> {
        let h = self.header_block()?;
        let c = u64_at(h, SH_NCLEAN).wrapping_add_signed(nclean);
        let d = u64_at(h, SH_NDIRTY).wrapping_add_signed(ndirty);
        put_u64(h, SH_NCLEAN, c);
        put_u64(h, SH_NDIRTY, d);
        self.mdt.mark_dirty(0);
        Ok(())
    }

    /// The usage entry of `seg` as stored (a hole reads as all zero).
    pub fn usage(&mut self, seg: SegNum) -> Result<SegmentUsage> {
        self.check_seg(seg)?;
        let (blk, off) = self.geo.locate(seg);
        match self.mdt.get_block(blk.0, false)? {
            Some(b) => SegmentUsage::decode(&b[off..]),
            None => Ok(SegmentUsage::default()),
        }
    }

    /// Run `f` on the usage entry of `seg` (the kernel's
    /// `nilfs_sufile_update` with a `do_*` callback): EINVAL for a number
    /// out of range, EIO for a missing header, ENOENT for a hole unless
    /// `create`. `f` returns whether it changed the entry (which then
    /// dirties its block) and the counter deltas.
    fn update(
        &mut self,
        seg: SegNum,
        create: bool,
        f: impl FnOnce(&mut SegmentUsage) -> Option<(i64, i64)>,
    ) -> Result<()> {
        self.check_seg(seg)?;
        self.header_block()?;
        let (blk, off) = self.geo.locate(seg);
        let b = match self.mdt.get_block(blk.0, create)? {
            Some(b) => b,
            None => {
                return Err(Error::errno(
                    Errno::ENOENT,
                    format!("segment usage of {seg} is in a hole block"),
                ))
            }
        };
        let mut su = SegmentUsage::decode(&b[off..])?;
        let Some((dc, dd)) = f(&mut su) else {
            return Ok(());
        };
        su.encode(&mut b[off..]);
        self.mdt.mark_dirty(blk.0);
        if (dc, dd) != (0, 0) {
            self.mod_counter(dc, dd)?;
        }
        Ok(())
    }

    /// `nilfs_sufile_alloc`: the first clean segment after `sh_last_alloc`,
    /// wrapping around (within the allocation range first); it becomes
    /// DIRTY, `ncleansegs--`, `ndirtysegs++`, `last_alloc = segnum`.
    /// Segments with any flag (ERROR, the on-disk ACTIVE...) are never
    /// taken. ENOSPC if no segment is clean.
    pub fn alloc(&mut self) -> Result<SegNum> {
        let last_alloc = u64_at(self.header_block()?, SH_LAST_ALLOC);
        let (allocmin, allocmax, nsegments) = (self.allocmin, self.allocmax, self.nsegments);
        let per = self.geo.segment_usages_per_block();
        let esz = usize::from(self.geo.entry_size);
        let mut maxsegnum = allocmax;
        let mut segnum = last_alloc.wrapping_add(1);
        if segnum < allocmin || segnum > allocmax {
            segnum = allocmin;
        }
        let mut cnt = 0u64;
        while cnt < nsegments {
            if segnum > maxsegnum {
                if cnt < allocmax - allocmin + 1 {
                    // Wrap around in the allocation range.
                    segnum = allocmin;
                    maxsegnum = last_alloc;
                } else if segnum > allocmin && allocmax + 1 < nsegments {
                    segnum = allocmax + 1;
                    maxsegnum = nsegments - 1;
                } else if allocmin > 0 {
                    segnum = 0;
                    maxsegnum = allocmin - 1;
                } else {
                    break;
                }
            }
            let (blk, off) = self.geo.locate(SegNum(segnum));
            let in_block =
                (per - (segnum + self.geo.first_entry_offset()) % per).min(maxsegnum - segnum + 1);
            let b = self.mdt.get_block_init(blk.0, |_| {})?;
            for j in 0..in_block as usize {
                let at = off + j * esz;
                if u32_at(b, at + SU_FLAGS) != 0 {
                    continue;
                }
                put_u32(b, at + SU_FLAGS, SU_DIRTY);
                let found = segnum + j as u64;
                self.mdt.mark_dirty(blk.0);
                self.mod_counter(-1, 1)?;
                put_u64(self.header_block()?, SH_LAST_ALLOC, found);
                return Ok(SegNum(found));
            }
            // Nothing here: a block created by the scan goes back to a hole.
            let zero = vec![0u8; self.mdt.block_size() as usize];
            self.mdt.discard_if_pristine(blk.0, &zero);
            segnum += in_block;
            cnt += in_block;
        }
        Err(Error::errno(Errno::ENOSPC, "no clean segment left"))
    }

    /// `nilfs_sufile_set_segment_usage`: after a log, `su_nblocks` and
    /// (unless 0, as for a cancellation) `su_lastmod`. ENOENT for a hole.
    pub fn set_segment_usage(&mut self, seg: SegNum, nblocks: u32, lastmod: u64) -> Result<()> {
        self.check_seg(seg)?;
        let (blk, off) = self.geo.locate(seg);
        let b = self.mdt.need_block(blk.0, Errno::ENOENT, "segment usage")?;
        if lastmod != 0 {
            put_u64(b, off + SU_LASTMOD, lastmod);
        }
        put_u32(b, off + SU_NBLOCKS, nblocks);
        self.mdt.mark_dirty(blk.0);
        Ok(())
    }

    /// `nilfs_sufile_mark_dirty`: set DIRTY on the segment being written
    /// (counters untouched: it was allocated already). EIO for a hole or a
    /// segment marked ERROR.
    pub fn mark_dirty(&mut self, seg: SegNum) -> Result<()> {
        self.check_seg(seg)?;
        let (blk, off) = self.geo.locate(seg);
        let b = self.mdt.need_block(blk.0, Errno::EIO, "segment usage")?;
        let flags = u32_at(b, off + SU_FLAGS);
        if flags & SU_ERROR != 0 {
            return Err(Error::errno(
                Errno::EIO,
                format!("segment {seg} is erroneous"),
            ));
        }
        put_u32(b, off + SU_FLAGS, flags | SU_DIRTY);
        self.mdt.mark_dirty(blk.0);
        Ok(())
    }

    /// `nilfs_sufile_free` (`nilfs_sufile_do_free`, the cleaner): the entry
    /// becomes all zero; `ncleansegs++`, and `ndirtysegs--` if it was
    /// DIRTY. A clean segment is left alone (the kernel warns "already
    /// clean").
    pub fn free(&mut self, seg: SegNum) -> Result<()> {
        self.update(seg, false, |su| {
            if su.is_clean() {
                return None;
            }
            let dirty = su.is_dirty();
            *su = SegmentUsage::default();
            Some((1, if dirty { -1 } else { 0 }))
        })
    }

    /// `nilfs_sufile_freev`: [`Sufile::free`] on each; every number is
    /// checked first (EINVAL, nothing changed).
    pub fn free_segments(&mut self, segs: &[SegNum]) -> Result<()> {
        for &s in segs {
            self.check_seg(s)?;
        }
        segs.iter().try_for_each(|&s| self.free(s))
    }

    /// `nilfs_sufile_do_cancel_free`: a clean segment becomes DIRTY again
    /// (`ncleansegs--`, `ndirtysegs++`); one that is not clean is left alone.
    pub fn cancel_free(&mut self, seg: SegNum) -> Result<()> {
        self.update(seg, false, |su| {
            if !su.is_clean() {
                return None;
            }
            su.flags |= SU_DIRTY;
            Some((-1, 1))
        })
    }

    /// `nilfs_sufile_scrap` (recovery): make the segment garbage,
    /// {lastmod 0, nblocks 0, flags DIRTY}, creating its block if needed;
    /// `ncleansegs--` if it was clean, `ndirtysegs++` if it was not dirty.
    /// Already in that state: nothing.
    pub fn scrap(&mut self, seg: SegNum) -> Result<()> {
        self.update(seg, true, |su| {
            if su.flags == SU_DIRTY && su.nblocks == 0 {
                return None;
            }
            let (clean, dirty) = (su.is_clean(), su.is_dirty());
            *su = SegmentUsage {
                lastmod: 0,
                nblocks: 0,
                flags: SU_DIRTY,
            };
            Some((if clean { -1 } else { 0 }, if dirty { 0 } else { 1 }))
        })
    }

    /// `nilfs_sufile_set_error`: add ERROR (other flags kept);
    /// `ncleansegs--` if it was clean. Already ERROR: nothing.
    pub fn set_error(&mut self, seg: SegNum) -> Result<()> {
        self.update(seg, false, |su| {
            if su.is_error() {
                return None;
            }
            let clean = su.is_clean();
            su.flags |= SU_ERROR;
            Some((if clean { -1 } else { 0 }, 0))
        })
    }

    /// `nilfs_sufile_get_suinfo`: up to `max` entries from `from`, holes as
    /// zero, with the on-disk ACTIVE bit replaced by the kernel's notion:
    /// ACTIVE for the writer's current and next segments (`active`, the
    /// `ns_segnum` and `ns_nextnum` of `nilfs_segment_is_active`).
    pub fn suinfo(
        &mut self,
        from: SegNum,
        max: usize,
        active: [SegNum; 2],
    ) -> Result<Vec<SegmentUsage>> {
        let n = self.nsegments.saturating_sub(from.0).min(max as u64);
        let mut out = Vec::with_capacity(n.min(1 << 16) as usize);
        for s in from.0..from.0 + n {
            out.push(self.usage(SegNum(s))?.as_reported(SegNum(s), active));
        }
        Ok(out)
    }
}
