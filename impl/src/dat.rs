//! The DAT's write side (dat.c, `nilfs_dat_*`; digest §7): the life cycle
//! of virtual block numbers over the persistent object allocator.
//!
//! | step | call | entry afterwards |
//! |---|---|---|
//! | new block or new version | [`Dat::prepare_alloc`] + [`Dat::commit_alloc`] | bit set; start 1, end `CNO_MAX`, blocknr 0 |
//! | the log assigns an address | [`Dat::start`] | blocknr = pbn, start = cno |
//! | version superseded or deleted | [`Dat::prepare_end`] + [`Dat::commit_end`] | end = cno (VM), end = start (VS, "dead") |
//! | ended before ever written | same | freed: start = end = 1, blocknr 0, bit clear |
//! | superseded and replaced | [`Dat::prepare_update`] + [`Dat::commit_update`] | end of the old + alloc of the new |
//! | GC moves a live block | [`Dat::move_block`] | blocknr = new pbn |
//! | GC frees dead numbers | [`Dat::free_vblocknrs`] | bits clear, contents kept, empty blocks deleted |
//!
//! `cno` is always the checkpoint being built (the kernel's
//! `nilfs_mdt_cno(dat)`, i.e. `ns_cno`); the caller passes it.
//!
//! Not done: the kernel's shadow map ("frozen" copies of DAT blocks changed
//! by `nilfs_dat_move`, so that `nilfs_dat_translate` keeps answering with
//! the old address until the GC's log is written). Here
//! [`Dat::translate`] answers from the current contents.

use crate::alloc::{AllocReq, FreeReq, Palloc};
use crate::format::dat::DatEntry;
use crate::format::geometry::SegGeometry;
use crate::format::palloc::PallocGeometry;
use crate::format::{BlockNr, Cno, Ino, VBlockNr};
use crate::mdt::Mdt;
use crate::metafile::{MetaStore, CRATE};
use crate::{Errno, Error, Result};

crate::metafile::meta_store!(Dat, via palloc);

/// `NILFS_BMAP_GROUP_DIV`: a group is split into this many target areas,
/// chosen by inode number.
const BMAP_GROUP_DIV: u64 = 8;

/// `nilfs_bmap_find_target_in_group`: the default target for a file's new
/// virtual block numbers, `group * epg + (ino % 8) * (epg / 8)` with
/// `group = ino / epg`. At 4 KiB, ino 12 gives 16384.
pub fn target_in_group(ino: Ino, geo: &PallocGeometry) -> VBlockNr {
    let epg = geo.entries_per_group();
    let group = ino.0 / epg;
    VBlockNr(
        group
            .saturating_mul(epg)
            .saturating_add((ino.0 % BMAP_GROUP_DIV) * (epg / BMAP_GROUP_DIV)),
    )
}

/// `nilfs_bmap_find_target_seq`: for sequential writes, the pointer that
/// continues the last allocation (`last_ptr + (key - last_key)` when
/// `|key - last_key| < 7`, the last pointer is valid and the result is
/// positive); `None` otherwise.
pub fn target_seq(last_key: u64, last_ptr: VBlockNr, key: u64) -> Option<VBlockNr> {
    let diff = key.wrapping_sub(last_key) as i64;
    let target = last_ptr.0.wrapping_add(diff as u64) as i64;
    (diff.unsigned_abs() < crate::format::INODE_BMAP_SIZE as u64 && last_ptr.0 != 0 && target > 0)
        .then_some(VBlockNr(target as u64))
}

/// A prepared allocation of a virtual block number.
#[derive(Debug)]
#[must_use = "a prepared DAT allocation must be committed or aborted"]
pub struct DatAllocReq {
    req: AllocReq,
}

impl DatAllocReq {
    /// The virtual block number that the commit will hand out.
    pub fn vblocknr(&self) -> VBlockNr {
        VBlockNr(self.req.entry_nr())
    }
}

/// A prepared end of a block version.
#[derive(Debug)]
#[must_use = "a prepared DAT end must be committed or aborted"]
pub struct DatEndReq {
    v: u64,
    cno: Cno,
    /// Set when the entry was never written: the commit frees it.
    free: Option<FreeReq>,
}

/// A prepared update: the end of the old version and the allocation of the
/// new one.
#[derive(Debug)]
#[must_use = "a prepared DAT update must be committed or aborted"]
pub struct DatUpdateReq {
    old: DatEndReq,
    new: DatAllocReq,
}

/// The DAT.
#[derive(Clone, Debug)]
pub struct Dat<'a> {
    /// The allocator (and through it the file's blocks).
    palloc: Palloc<'a>,
    /// Where entries may point, once the mount knows it
    /// ([`Dat::limit_to`]).
    area: Option<SegGeometry>,
}

impl<'a> Dat<'a> {
    /// The DAT stored in `mdt`, with entries of `entry_size` bytes
    /// (`s_dat_entry_size`).
    pub fn new(mdt: Mdt<'a>, entry_size: u32) -> Result<Self> {
        let geo = PallocGeometry::new(mdt.block_size(), entry_size)?;
        if (entry_size as usize) < DatEntry::SIZE {
            return Err(Error::Invalid(format!(
                "DAT entry size {entry_size} below 32"
            )));
        }
        Ok(Dat {
            palloc: Palloc::new(mdt, geo),
            area: None,
        })
    }

    /// The allocator (read-only).
    pub fn palloc(&self) -> &Palloc<'a> {
        &self.palloc
    }

    /// Read-modify-write the entry of `v`; `None` if its block is a hole.
    fn entry_bytes(&mut self, v: u64) -> Result<Option<&mut [u8]>> {
        self.palloc.entry(v)
    }

    /// The entry of `v` as stored (`nilfs_dat_get_vinfo` for one number).
    /// A hole reads as the kernel's `nilfs_dat_prepare_entry` reports it:
    /// EINVAL ("DAT doesn't have a block to manage vblocknr").
    pub fn entry(&mut self, v: VBlockNr) -> Result<DatEntry> {
        match self.entry_bytes(v.0)? {
            Some(b) => DatEntry::decode(b),
            None => Err(no_block(v.0)),
        }
    }

    fn put_entry(&mut self, v: u64, e: &DatEntry) -> Result<()> {
        let b = self.entry_bytes(v)?.ok_or_else(|| no_block(v))?;
        e.encode(b);
        self.palloc.mark_entry_dirty(v)
    }

    /// `nilfs_dat_prepare_alloc`: reserve a virtual block number at or
    /// after `target`, with wrap-around, and make sure its entry block
    /// exists.
    pub fn prepare_alloc(&mut self, target: VBlockNr) -> Result<DatAllocReq> {
        let req = self.palloc.prepare_alloc(target.0, true)?;
        if let Err(e) = self.palloc.entry_create(req.entry_nr()) {
            self.palloc.abort_alloc(req);
            return Err(e);
        }
        Ok(DatAllocReq { req })
    }

    /// `nilfs_dat_commit_alloc`: the entry becomes {blocknr 0, start
    /// `CNO_MIN`, end `CNO_MAX`} (`de_rsv` untouched); its block, the
    /// bitmap and the descriptor become dirty.
    pub fn commit_alloc(&mut self, req: DatAllocReq) -> VBlockNr {
        let v = req.req.entry_nr();
        let b = self
            .palloc
            .entry(v)
            .ok()
            .flatten()
            .expect("dat: entry block created by prepare_alloc");
        let mut e = DatEntry::decode(b).expect("dat: entry fits its block");
        e.blocknr = BlockNr(0);
        e.start = Cno::MIN;
        e.end = Cno::MAX;
        e.encode(b);
        self.palloc.commit_alloc(req.req);
        self.palloc
            .mark_entry_dirty(v)
            .expect("dat: entry block exists");
        VBlockNr(v)
    }

    /// `nilfs_dat_abort_alloc`: give the number back; an entry block the
    /// prepare created is forgotten again.
    pub fn abort_alloc(&mut self, req: DatAllocReq) {
        let v = req.req.entry_nr();
        self.palloc.abort_alloc(req.req);
        self.palloc.discard_entry_block_if_pristine(v);
    }

    /// Allocate a number at once (prepare + commit).
    pub fn alloc(&mut self, target: VBlockNr) -> Result<VBlockNr> {
        let req = self.prepare_alloc(target)?;
        Ok(self.commit_alloc(req))
    }

    /// `nilfs_dat_prepare_start` + `nilfs_dat_commit_start`: the log put
    /// the block of `v` at `pbn` for checkpoint `cno`: `de_blocknr = pbn`,
    /// `de_start = cno`. Stricter than the kernel: `v` must be allocated
    /// and `pbn` non-zero (EINVAL).
    pub fn start(&mut self, v: VBlockNr, cno: Cno, pbn: BlockNr) -> Result<()> {
        self.check_allocated(v.0)?;
        if pbn.0 == 0 {
            return Err(Error::errno(
                Errno::EINVAL,
                format!("DAT start of {v} at block 0"),
            ));
        }
        // Read, changed and written back in place: one lookup of the
        // entry block, not one to read and another to write.
        let b = self.entry_bytes(v.0)?.ok_or_else(|| no_block(v.0))?;
        let mut e = DatEntry::decode(b)?;
        e.blocknr = pbn;
        e.start = cno;
        e.encode(b);
        self.palloc.mark_entry_dirty(v.0)
    }

    /// Whether `v` is allocated (its bitmap bit is set).
    pub fn is_allocated(&mut self, v: VBlockNr) -> Result<bool> {
        self.palloc.is_allocated(v.0)
    }

    fn check_allocated(&mut self, v: u64) -> Result<()> {
        if self.palloc.is_allocated(v)? {
            Ok(())
        } else {
            Err(Error::errno(
                Errno::EINVAL,
                format!("virtual block number {v} is not allocated"),
            ))
        }
    }

    /// `nilfs_dat_prepare_end`: check that `v` can be ended in checkpoint
    /// `cno` (EINVAL if its entry block is a hole or `de_start > cno`, the
    /// kernel's "abnormal lifetime"); if it was never written
    /// (`de_blocknr == 0`) prepare to free it. Changes nothing.
    pub fn prepare_end(&mut self, v: VBlockNr, cno: Cno) -> Result<DatEndReq> {
        self.check_allocated(v.0)?;
        let e = self.entry(v)?;
        if e.start > cno {
            return Err(Error::errno(
                Errno::EINVAL,
                format!(
                    "vblocknr = {v} has abnormal lifetime: start cno (= {}) > current cno (= {cno})",
                    e.start
                ),
            ));
        }
        let free = if e.blocknr.0 == 0 {
            Some(self.palloc.prepare_free(v.0)?)
        } else {
            None
        };
        Ok(DatEndReq { v: v.0, cno, free })
    }

    /// `nilfs_dat_commit_end`: `de_end = cno`, or `de_end = de_start` if
    /// `dead` (single-version files: the cpfile and the sufile, whose old
    /// versions nothing can reach). An entry that was never written is
    /// freed instead (`nilfs_dat_commit_free`: start = end = 1, blocknr 0,
    /// bit cleared).
    pub fn commit_end(&mut self, req: DatEndReq, dead: bool) {
        let v = req.v;
        let mut e = self
            .entry(VBlockNr(v))
            .expect("dat: prepared entry is readable");
        e.end = if dead { e.start } else { req.cno };
        match (e.blocknr.0, req.free) {
            (0, Some(free)) => {
                e.start = Cno::MIN;
                e.end = Cno::MIN;
                self.put_entry(v, &e)
                    .expect("dat: prepared entry block exists");
                self.palloc.commit_free(free);
            }
            (0, None) => panic!("dat: vblocknr {v} lost its block number after prepare_end"),
            (_, free) => {
                // Written since the prepare: a plain end. (A prepared free
                // needs no undo: prepare_free changes nothing.)
                if let Some(f) = free {
                    self.palloc.abort_free(f);
                }
                self.put_entry(v, &e)
                    .expect("dat: prepared entry block exists");
            }
        }
    }

    /// `nilfs_dat_abort_end`: nothing was changed.
    pub fn abort_end(&mut self, req: DatEndReq) {
        if let Some(f) = req.free {
            self.palloc.abort_free(f);
        }
    }

    /// End `v` at once (prepare + commit); `is_vs` as `dead` of
    /// [`Dat::commit_end`].
    pub fn end(&mut self, v: VBlockNr, cno: Cno, is_vs: bool) -> Result<()> {
        let req = self.prepare_end(v, cno)?;
        self.commit_end(req, is_vs);
        Ok(())
    }

    /// `nilfs_dat_prepare_update`: prepare the end of `old` and the
    /// allocation of its replacement near `target`.
    pub fn prepare_update(
        &mut self,
        old: VBlockNr,
        cno: Cno,
        target: VBlockNr,
    ) -> Result<DatUpdateReq> {
        let old = self.prepare_end(old, cno)?;
        match self.prepare_alloc(target) {
            Ok(new) => Ok(DatUpdateReq { old, new }),
            Err(e) => {
                self.abort_end(old);
                Err(e)
            }
        }
    }

    /// `nilfs_dat_commit_update`: end the old version, allocate the new;
    /// returns the new number.
    pub fn commit_update(&mut self, req: DatUpdateReq, dead: bool) -> VBlockNr {
        self.commit_end(req.old, dead);
        self.commit_alloc(req.new)
    }

    /// `nilfs_dat_abort_update`.
    pub fn abort_update(&mut self, req: DatUpdateReq) {
        self.abort_end(req.old);
        self.abort_alloc(req.new);
    }

    /// `nilfs_dat_mark_dirty`: the entry block of `v` must be written by
    /// this log (EINVAL for a hole).
    pub fn mark_dirty(&mut self, v: VBlockNr) -> Result<()> {
        if self.entry_bytes(v.0)?.is_none() {
            return Err(no_block(v.0));
        }
        self.palloc.mark_entry_dirty(v.0)
    }

    /// `NILFS_IOCTL_MARK_BLOCKS_DIRTY` for a DAT data block (the cleaner
    /// found it live): block `blkoff` must be written by the next log.
    /// ENOENT for a hole.
    pub fn mark_block_dirty(&mut self, blkoff: u64) -> Result<()> {
        let mdt = self.palloc.mdt_mut(CRATE);
        if !mdt.exists(blkoff)? {
            return Err(Error::errno(
                Errno::ENOENT,
                format!("GC: DAT block {blkoff} is a hole"),
            ));
        }
        mdt.mark_dirty(blkoff);
        Ok(())
    }

    /// `nilfs_dat_move` (GC): the live block of `v` now lives at `pbn`.
    /// EINVAL if `v` has no block (`de_blocknr == 0`, the kernel's
    /// "invalid vblocknr") or `pbn` is 0.
    pub fn move_block(&mut self, v: VBlockNr, pbn: BlockNr) -> Result<()> {
        let mut e = self.entry(v)?;
        if e.blocknr.0 == 0 || pbn.0 == 0 {
            return Err(Error::errno(
                Errno::EINVAL,
                format!(
                    "invalid vblocknr = {v}, [{}, {}) to move to {pbn}",
                    e.start, e.end
                ),
            ));
        }
        e.blocknr = pbn;
        self.put_entry(v.0, &e)
    }

    /// Refuse translations to blocks outside `geo`'s segment area
    /// ([`SegGeometry::dat_block`]).
    pub fn limit_to(&mut self, geo: SegGeometry) {
        self.area = Some(geo);
    }

    /// `nilfs_dat_translate`: the disk block of `v`; ENOENT if its entry
    /// block is a hole or it has none (`de_blocknr == 0`); corruption if it
    /// names a block outside the segment area ([`Dat::limit_to`]).
    pub fn translate(&mut self, v: VBlockNr) -> Result<BlockNr> {
        let e = match self.entry_bytes(v.0)? {
            Some(b) => DatEntry::decode(b)?,
            None => return Err(Error::errno(Errno::ENOENT, format!("vblocknr {v}: hole"))),
        };
        if e.blocknr.0 == 0 {
            return Err(Error::errno(
                Errno::ENOENT,
                format!("vblocknr {v}: no block"),
            ));
        }
        match &self.area {
            Some(area) => area.dat_block(v.0, e.blocknr),
            None => Ok(e.blocknr),
        }
    }

    /// `nilfs_dat_freev` (GC): release dead numbers in a batch; entry
    /// contents stay, emptied entry blocks and fully free bitmap blocks
    /// are deleted ([`Palloc::free_entries`]).
    pub fn free_vblocknrs(&mut self, vs: &[VBlockNr]) -> Result<()> {
        let nrs: Vec<u64> = vs.iter().map(|v| v.0).collect();
        self.palloc.free_entries(&nrs)
    }

    /// The default allocation target for a file's blocks
    /// ([`target_in_group`] with this DAT's geometry).
    pub fn target_for_ino(&self, ino: Ino) -> VBlockNr {
        target_in_group(ino, &self.palloc.geometry())
    }
}

/// The mounted DAT translates virtual numbers for node reads
/// ([`crate::bmap::DiskNodes`]).
impl crate::bmap::Translate for Dat<'_> {
    fn translate(&mut self, v: VBlockNr) -> Result<BlockNr> {
        Dat::translate(self, v)
    }
}

fn no_block(v: u64) -> Error {
    Error::errno(
        Errno::EINVAL,
        format!("DAT doesn't have a block to manage vblocknr = {v}"),
    )
}

#[cfg(test)]
mod tests {
    use super::target_seq;
    use crate::format::VBlockNr;

    /// `nilfs_bmap_find_target_seq`: the last pointer moved by the key's
    /// distance from the last key, when that distance is under the
    /// inode's bmap size (7), the last pointer is valid and the result is
    /// positive.
    #[test]
    fn the_sequential_target_follows_the_last_allocation() {
        let t = |last_key, last_ptr, key| target_seq(last_key, VBlockNr(last_ptr), key);
        assert_eq!(t(10, 100, 11), Some(VBlockNr(101)));
        assert_eq!(t(10, 100, 16), Some(VBlockNr(106)));
        assert_eq!(t(10, 100, 17), None, "7 keys away");
        assert_eq!(t(10, 100, 4), Some(VBlockNr(94)));
        assert_eq!(t(10, 100, 3), None, "7 keys back");
        assert_eq!(t(10, 0, 11), None, "no last pointer");
        assert_eq!(t(10, 3, 8), Some(VBlockNr(1)));
        assert_eq!(t(10, 3, 7), None, "a target of 0 is none");
    }
}
