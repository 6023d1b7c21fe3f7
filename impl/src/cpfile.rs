//! The checkpoint file's write side (cpfile.c, `nilfs_cpfile_*`; digest
//! §8): creating and finalizing checkpoints, deleting them, the snapshot
//! list, and the listings of `NILFS_IOCTL_GET_CPINFO`.
//!
//! `cno` here (the kernel's `nilfs_mdt_cno(cpfile)`, `ns_cno`) is the
//! number the next construction will create; every valid checkpoint is
//! below it, and the latest one is `cno - 1` (`ns_last_cno`). The segment
//! constructor calls [`Cpfile::create_checkpoint`]`(cno)` when the log
//! moves past the ifile, [`Cpfile::finalize_checkpoint`] after block
//! addresses are known, and [`Cpfile::set_next_cno`] once the log is safe.
//!
//! What nilfs-tools users see (ioctl.c, cpfile.c, super.c):
//! - `rmcp CNO` (`NILFS_IOCTL_DELETE_CHECKPOINT` → [`Cpfile::delete_checkpoint`]):
//!   ENOENT if there is no such valid checkpoint, EBUSY for a snapshot.
//!   The kernel does **not** refuse the latest checkpoint: it is deleted
//!   like any other (the next construction creates a new latest one). It is
//!   `rmcp` itself that, for a *range*, trims the end to `cs_cno - 2`
//!   (bin/rmcp.c), so a range never includes the latest checkpoint; a
//!   single number is passed through.
//! - `chcp cp CNO` ([`Cpfile::change_mode`] with [`CpMode::Checkpoint`]):
//!   EBUSY if `nilfs_checkpoint_is_mounted`: `cno <= ns_cno` and either
//!   `cno >= ns_last_cno` (the latest checkpoint and the one being built
//!   are always "mounted") or a mounted snapshot's tree is busy; otherwise
//!   ENOENT for checkpoint 0, a hole or an invalid slot; a plain checkpoint
//!   is left alone (success).
//! - `chcp ss CNO`: ENOENT for 0, a hole or an invalid slot; already a
//!   snapshot is success.

use crate::format::cpfile::{
    check_snapshot_step, Checkpoint, CpfileGeometry, CpfileHeader, CP_INVALID, CP_MINOR,
    CP_SNAPSHOT,
};
use crate::format::inode::Inode;
use crate::format::le::{put_u32, put_u64, u32_at, u64_at};
use crate::format::Cno;
use crate::mdt::Mdt;
use crate::{Errno, Error, Result};

crate::metafile::meta_store!(Cpfile, field mdt);

/// Offsets inside `struct nilfs_checkpoint`.
const CP_FLAGS: usize = 0;
const CP_COUNT: usize = 4;
const CP_SS_NEXT: usize = 8;
const CP_SS_PREV: usize = 16;
const CP_CNO: usize = 24;
const CP_CREATE: usize = 32;
const CP_NBLK_INC: usize = 40;
const CP_INODES: usize = 48;
const CP_BLOCKS: usize = 56;
const CP_IFILE: usize = 64;
/// Offsets inside `struct nilfs_cpfile_header`.
const CH_NCPS: usize = 0;
const CH_NSS: usize = 8;
const CH_SS_NEXT: usize = 16;

/// `NILFS_CHECKPOINT` / `NILFS_SNAPSHOT` of `struct nilfs_cpmode`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CpMode {
    /// A plain checkpoint (the cleaner may reclaim it).
    Checkpoint,
    /// A snapshot (kept until changed back).
    Snapshot,
}

/// The fields [`Cpfile::finalize_checkpoint`] writes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CheckpointFinal {
    /// `cp_inodes_count`.
    pub inodes_count: u64,
    /// `cp_blocks_count`.
    pub blocks_count: u64,
    /// `cp_nblk_inc`: blocks of all logs of the construction.
    pub nblk_inc: u64,
    /// `cp_create`: the log's ctime.
    pub create: u64,
    /// MINOR: no user-file or ifile block was written.
    pub minor: bool,
    /// The ifile inode with its bmap.
    pub ifile_inode: Inode,
}

/// `struct nilfs_cpstat`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CpStat {
    /// `cs_cno`: the next checkpoint number.
    pub cno: Cno,
    /// `cs_ncps`: valid checkpoints.
    pub ncps: u64,
    /// `cs_nsss`: snapshots.
    pub nsss: u64,
}

/// The checkpoint file.
#[derive(Clone, Debug)]
pub struct Cpfile<'a> {
    /// The file's blocks.
    mdt: Mdt<'a>,
    geo: CpfileGeometry,
    cno: Cno,
}

impl<'a> Cpfile<'a> {
    /// The cpfile stored in `mdt`, whose next checkpoint number is
    /// `next_cno` (`Nilfs::next_cno` for an image).
    pub fn new(mdt: Mdt<'a>, entry_size: u16, next_cno: Cno) -> Result<Self> {
        let geo = CpfileGeometry::new(mdt.block_size(), entry_size)?;
        Ok(Cpfile {
            mdt,
            geo,
            cno: next_cno,
        })
    }

    /// `ns_cno`: the number the next construction creates.
    pub fn next_cno(&self) -> Cno {
        self.cno
    }

    /// The construction that made checkpoint `next_cno - 1` is complete
    /// (the kernel's `ns_cno++` in `nilfs_segctor_complete_write`).
    pub fn set_next_cno(&mut self, next_cno: Cno) {
        self.cno = next_cno;
    }

    /// The layout.
    pub fn geometry(&self) -> CpfileGeometry {
        self.geo
    }

    fn per_block(&self) -> u64 {
        self.geo.checkpoints_per_block()
    }

    /// (block, byte offset) of checkpoint `cno` (> 0).
    fn locate(&self, cno: u64) -> Result<(u64, usize)> {
        self.geo
            .locate(cno)
            .map(|(b, off)| (b.0, off))
            .ok_or_else(|| Error::errno(Errno::ENOENT, format!("checkpoint number {cno}")))
    }

    /// The slot index of `cno` in its block.
    fn slot(&self, cno: u64) -> u64 {
        (cno + self.geo.first_entry_offset() - 1) % self.per_block()
    }

    /// `nilfs_cpfile_checkpoints_in_block`: from `curr`, how many
    /// checkpoint numbers below `max` share `curr`'s block.
    fn in_block(&self, curr: u64, max: u64) -> u64 {
        (self.per_block() - self.slot(curr)).min(max.saturating_sub(curr))
    }

    /// `nilfs_cpfile_first_checkpoint_in_block`.
    fn first_in_block(&self, blk: u64) -> u64 {
        self.per_block() * blk + 1 - self.geo.first_entry_offset()
    }

    fn header_block(&mut self) -> Result<&mut [u8]> {
        self.mdt
            .need_block(0, Errno::EIO, "missing header block in checkpoint metadata")
    }

    /// The header.
    pub fn header(&mut self) -> Result<CpfileHeader> {
        CpfileHeader::decode(self.header_block()?)
    }

    /// `nilfs_cpfile_get_stat`.
    pub fn stat(&mut self) -> Result<CpStat> {
        let h = self.header()?;
        Ok(CpStat {
            cno: self.cno,
            ncps: h.ncheckpoints,
            nsss: h.nsnapshots,
        })
    }

    /// Checkpoint `cno`'s entry as stored, `None` if its block is a hole.
    pub fn entry(&mut self, cno: Cno) -> Result<Option<Checkpoint>> {
        let (blk, off) = self.locate(cno.0)?;
        match self.mdt.get_block(blk, false)? {
            Some(b) => Checkpoint::decode(&b[off..]).map(Some),
            None => Ok(None),
        }
    }

    /// `cp_flags` of `cno`; ENOENT for a hole.
    fn flags(&mut self, cno: u64) -> Result<u32> {
        let (blk, off) = self.locate(cno)?;
        let b = self.mdt.need_block(blk, Errno::ENOENT, "checkpoint")?;
        Ok(u32_at(b, off + CP_FLAGS))
    }

    /// `nilfs_cpfile_create_checkpoint`: make the slot of `cno` a valid
    /// checkpoint (creating its block, all slots INVALID, if needed); a
    /// slot that was INVALID counts in `ch_ncheckpoints` and, outside
    /// block 0, in the block's `cp_checkpoints_count`. An already valid
    /// slot is left as it is. The block becomes dirty.
    pub fn create_checkpoint(&mut self, cno: Cno) -> Result<()> {
        if cno.0 < 1 {
            return Err(Error::errno(Errno::EIO, "create checkpoint 0"));
        }
        self.header_block()?;
        let (blk, off) = self.locate(cno.0)?;
        let geo = self.geo;
        let b = self.mdt.get_block_init(blk, |b| block_init(geo, b))?;
        let flags = u32_at(b, off + CP_FLAGS);
        if flags & CP_INVALID != 0 {
            put_u32(b, off + CP_FLAGS, flags & !CP_INVALID);
            if blk != 0 {
                let n = u32_at(b, CP_COUNT);
                put_u32(b, CP_COUNT, n.wrapping_add(1));
            }
            let h = self.header_block()?;
            let n = u64_at(h, CH_NCPS);
            put_u64(h, CH_NCPS, n.wrapping_add(1));
            self.mdt.mark_dirty(0);
        }
        self.mdt.mark_dirty(blk);
        Ok(())
    }

    /// `nilfs_cpfile_finalize_checkpoint`: write the snapshot links (0, 0),
    /// counts, `cp_nblk_inc`, `cp_create`, `cp_cno`, the MINOR flag and the
    /// ifile inode into valid checkpoint `cno`; other fields (including a
    /// block's `cp_checkpoints_count`) stay. EIO if the slot is a hole or
    /// invalid (the kernel's "checkpoint finalization failed due to
    /// metadata corruption"). The block is (still) dirty.
    pub fn finalize_checkpoint(&mut self, cno: Cno, fin: &CheckpointFinal) -> Result<()> {
        if cno.0 < 1 {
            return Err(Error::errno(Errno::EIO, "finalize checkpoint 0"));
        }
        let (blk, off) = self.locate(cno.0)?;
        let b = self.mdt.need_block(
            blk,
            Errno::EIO,
            "checkpoint finalization failed due to metadata corruption",
        )?;
        let flags = u32_at(b, off + CP_FLAGS);
        if flags & CP_INVALID != 0 {
            return Err(Error::errno(
                Errno::EIO,
                format!("checkpoint finalization failed: checkpoint {cno} is invalid"),
            ));
        }
        put_u64(b, off + CP_SS_NEXT, 0);
        put_u64(b, off + CP_SS_PREV, 0);
        put_u64(b, off + CP_INODES, fin.inodes_count);
        put_u64(b, off + CP_BLOCKS, fin.blocks_count);
        put_u64(b, off + CP_NBLK_INC, fin.nblk_inc);
        put_u64(b, off + CP_CREATE, fin.create);
        put_u64(b, off + CP_CNO, cno.0);
        let flags = if fin.minor {
            flags | CP_MINOR
        } else {
            flags & !CP_MINOR
        };
        put_u32(b, off + CP_FLAGS, flags);
        fin.ifile_inode.encode(&mut b[off + CP_IFILE..]);
        self.mdt.mark_dirty(blk);
        Ok(())
    }

    /// `nilfs_cpfile_read_checkpoint`: valid checkpoint `cno`. EINVAL if
    /// `cno` is 0 or above `ns_cno`, its block is a hole or the slot is
    /// invalid.
    pub fn get_checkpoint(&mut self, cno: Cno) -> Result<Checkpoint> {
        let bad = || Error::errno(Errno::EINVAL, format!("no valid checkpoint {cno}"));
        if cno.0 < 1 || cno > self.cno {
            return Err(bad());
        }
        match self.entry(cno)? {
            Some(cp) if !cp.is_invalid() => Ok(cp),
            _ => Err(bad()),
        }
    }

    /// `nilfs_cpfile_delete_checkpoints`: invalidate every valid
    /// checkpoint in `[start, end)` except snapshots. Per block outside
    /// block 0, `cp_checkpoints_count` drops and a block left with none is
    /// deleted (a hole); `ch_ncheckpoints` drops by the number deleted.
    /// EINVAL for `start == 0` or `start > end`. If the range held a
    /// snapshot the result is EBUSY, **after** the other checkpoints were
    /// deleted (as in the kernel). Numbers at or above `ns_cno + 1` hold
    /// nothing and are not visited. Returns the number deleted.
    pub fn delete_checkpoints(&mut self, start: Cno, end: Cno) -> Result<u64> {
        if start.0 == 0 || start > end {
            return Err(Error::errno(
                Errno::EINVAL,
                format!("cannot delete checkpoints: invalid range [{start}, {end})"),
            ));
        }
        self.header_block()?;
        let end = end.0.min(self.cno.0.saturating_add(1));
        let esz = usize::from(self.geo.entry_size);
        let (mut total, mut nss) = (0u64, 0u64);
        let mut cno = start.0;
        while cno < end {
            let ncps = self.in_block(cno, end);
            let (blk, off) = self.locate(cno)?;
            let Some(b) = self.mdt.get_block(blk, false)? else {
                cno += ncps;
                continue;
            };
            let mut nicps = 0u32;
            for i in 0..ncps as usize {
                let at = off + i * esz + CP_FLAGS;
                let flags = u32_at(b, at);
                if flags & CP_SNAPSHOT != 0 {
                    nss += 1;
                } else if flags & CP_INVALID == 0 {
                    put_u32(b, at, flags | CP_INVALID);
                    nicps += 1;
                }
            }
            cno += ncps;
            if nicps == 0 {
                continue;
            }
            total += u64::from(nicps);
            if blk != 0 {
                let count = u32_at(b, CP_COUNT).saturating_sub(nicps);
                put_u32(b, CP_COUNT, count);
                if count == 0 {
                    self.mdt.delete_block(blk)?;
                    continue;
                }
            }
            self.mdt.mark_dirty(blk);
        }
        if total > 0 {
            let h = self.header_block()?;
            let n = u64_at(h, CH_NCPS);
            put_u64(h, CH_NCPS, n.wrapping_sub(total));
            self.mdt.mark_dirty(0);
        }
        if nss > 0 {
            return Err(Error::errno(
                Errno::EBUSY,
                format!("{nss} snapshot(s) in [{start}, {end}) not deleted"),
            ));
        }
        Ok(total)
    }

    /// `nilfs_cpfile_delete_checkpoint` (`rmcp CNO`): ENOENT unless `cno`
    /// is a valid checkpoint (found by the GET_CPINFO scan), EBUSY for a
    /// snapshot; otherwise delete it. See the module notes on the latest
    /// checkpoint.
    pub fn delete_checkpoint(&mut self, cno: Cno) -> Result<()> {
        let (found, _) = self.cpinfos(cno, 1)?;
        match found.first() {
            Some(cp) if cp.cno == cno => {
                if cp.is_snapshot() {
                    Err(Error::errno(
                        Errno::EBUSY,
                        format!("checkpoint {cno} is a snapshot"),
                    ))
                } else {
                    self.delete_checkpoints(cno, Cno(cno.0 + 1)).map(|_| ())
                }
            }
            _ => Err(Error::errno(Errno::ENOENT, format!("no checkpoint {cno}"))),
        }
    }

    /// `nilfs_cpfile_do_get_cpinfo` (GET_CPINFO, `NILFS_CHECKPOINT` mode):
    /// up to `max` valid checkpoints from `from` up to `ns_cno - 1`, in
    /// order, skipping hole blocks; and the number to continue from (the
    /// last one's stored `cp_cno + 1`, or `from` if none). ENOENT for
    /// `from == 0`.
    pub fn cpinfos(&mut self, from: Cno, max: usize) -> Result<(Vec<Checkpoint>, Cno)> {
        if from.0 == 0 {
            return Err(Error::errno(
                Errno::ENOENT,
                "checkpoint number 0 is invalid",
            ));
        }
        let cur = self.cno.0;
        let esz = usize::from(self.geo.entry_size);
        let mut out = Vec::new();
        let mut cno = from.0;
        while out.len() < max && cno < cur {
            // nilfs_cpfile_find_checkpoint_block: the first existing block
            // holding a number in [cno, cur - 1].
            let (blk, _) = self.locate(cno)?;
            let (last_blk, _) = self.locate(cur - 1)?;
            if !self.mdt.exists(blk)? {
                let mut next = blk + 1;
                while next <= last_blk && !self.mdt.exists(next)? {
                    next += 1;
                }
                if next > last_blk {
                    break;
                }
                cno = self.first_in_block(next);
                continue;
            }
            let ncps = self.in_block(cno, cur);
            let (_, off) = self.locate(cno)?;
            let b = self
                .mdt
                .get_block(blk, false)?
                .expect("cpfile: block exists");
            for i in 0..ncps as usize {
                if out.len() >= max {
                    break;
                }
                let cp = Checkpoint::decode(&b[off + i * esz..])?;
                if !cp.is_invalid() {
                    out.push(cp);
                }
            }
            cno += ncps;
        }
        let next = out.last().map_or(from, |cp| Cno(cp.cno.0.wrapping_add(1)));
        Ok((out, next))
    }

    /// `nilfs_cpfile_do_get_ssinfo` (GET_CPINFO, `NILFS_SNAPSHOT` mode):
    /// up to `max` snapshots following the list from `from` (0 = from the
    /// header), stopping at an entry that is not a valid snapshot; and the
    /// number to continue from (`u64::MAX` once the list ended).
    pub fn ssinfos(&mut self, from: Cno, max: usize) -> Result<(Vec<Checkpoint>, Cno)> {
        let mut curr = from.0;
        if curr == 0 {
            curr = self.header()?.snapshot_next.0;
            if curr == 0 {
                return Ok((Vec::new(), from));
            }
        } else if curr == u64::MAX {
            return Ok((Vec::new(), from));
        }
        let mut out = Vec::new();
        let Some(mut cp) = self.entry(Cno(curr))? else {
            return Ok((out, from));
        };
        while out.len() < max {
            let at = curr;
            curr = u64::MAX;
            if cp.is_invalid() || !cp.is_snapshot() {
                break;
            }
            let next = cp.snapshot_next.0;
            check_snapshot_step(at, next, true)?;
            out.push(cp);
            if next == 0 {
                break;
            }
            cp = self.entry(Cno(next))?.ok_or_else(|| {
                Error::errno(Errno::ENOENT, format!("snapshot {next} in a hole block"))
            })?;
            curr = next;
        }
        Ok((out, Cno(curr)))
    }

    /// Every snapshot, in list order (bounded by `ns_cno` entries, so a
    /// cyclic list on a corrupt image ends).
    pub fn snapshots(&mut self) -> Result<Vec<Checkpoint>> {
        let bound = usize::try_from(self.cno.0).unwrap_or(usize::MAX);
        Ok(self.ssinfos(Cno(0), bound)?.0)
    }

    /// Where the snapshot list node of `cno` lives: (block, offset of
    /// `ssl_next`); `ssl_prev` follows it. Checkpoint 0 is the header.
    fn list_pos(&self, cno: u64) -> Result<(u64, usize)> {
        if cno == 0 {
            return Ok((0, CH_SS_NEXT));
        }
        let (blk, off) = self.locate(cno)?;
        Ok((blk, off + CP_SS_NEXT))
    }

    fn list_get(&mut self, cno: u64) -> Result<(u64, u64)> {
        let (blk, off) = self.list_pos(cno)?;
        let b = self.mdt.need_block(blk, Errno::ENOENT, "snapshot list")?;
        Ok((u64_at(b, off), u64_at(b, off + 8)))
    }

    fn list_set(&mut self, cno: u64, next: Option<u64>, prev: Option<u64>) -> Result<()> {
        let (blk, off) = self.list_pos(cno)?;
        let b = self.mdt.need_block(blk, Errno::ENOENT, "snapshot list")?;
        if let Some(n) = next {
            put_u64(b, off, n);
        }
        if let Some(p) = prev {
            put_u64(b, off + 8, p);
        }
        self.mdt.mark_dirty(blk);
        Ok(())
    }

    /// Check `cno` for a mode change: ENOENT for 0, a hole or an invalid
    /// slot; `Ok(flags)` otherwise.
    fn valid_flags(&mut self, cno: Cno) -> Result<u32> {
        if cno.0 == 0 {
            return Err(Error::errno(
                Errno::ENOENT,
                "checkpoint number 0 is invalid",
            ));
        }
        self.header_block()?;
        let flags = self.flags(cno.0)?;
        if flags & CP_INVALID != 0 {
            return Err(Error::errno(
                Errno::ENOENT,
                format!("checkpoint {cno} is invalid"),
            ));
        }
        Ok(flags)
    }

    fn add_nsnapshots(&mut self, delta: i64) -> Result<()> {
        let h = self.header_block()?;
        let n = u64_at(h, CH_NSS);
        put_u64(h, CH_NSS, n.wrapping_add_signed(delta));
        self.mdt.mark_dirty(0);
        Ok(())
    }

    /// `nilfs_cpfile_set_snapshot`: make valid checkpoint `cno` a snapshot,
    /// linked into the list after the largest snapshot below it (found by
    /// walking back from the header's `ssl_prev`), and count it. Already a
    /// snapshot: nothing to do. ENOENT as in [`CpMode`]'s notes.
    pub fn set_snapshot(&mut self, cno: Cno) -> Result<()> {
        let flags = self.valid_flags(cno)?;
        if flags & CP_SNAPSHOT != 0 {
            return Ok(());
        }
        // curr: the first snapshot above cno (0 = the header); prev: the
        // last one below it (0 = the header).
        let mut curr = 0u64;
        let mut prev = self.header()?.snapshot_prev.0;
        while prev > cno.0 {
            curr = prev;
            prev = self.list_get(curr)?.1;
            check_snapshot_step(curr, prev, false)?;
        }
        // The neighbours must point at each other, or linking cno in
        // between would cut the list.
        let (after_prev, _) = self.list_get(prev)?;
        if after_prev != curr {
            return Err(Error::corrupt(
                "snapshot list",
                format!(
                    "ssl_next of {} is {after_prev}, but {curr}'s ssl_prev names it; expected {curr}",
                    list_name(prev)
                ),
            ));
        }
        // Every block involved must be readable before anything changes.
        self.list_get(prev)?;
        self.list_get(curr)?;
        self.list_set(curr, None, Some(cno.0))?;
        self.list_set(cno.0, Some(curr), Some(prev))?;
        self.list_set(prev, Some(cno.0), None)?;
        self.set_flags(cno.0, flags | CP_SNAPSHOT)?;
        self.add_nsnapshots(1)
    }

    fn set_flags(&mut self, cno: u64, flags: u32) -> Result<()> {
        let (blk, off) = self.locate(cno)?;
        let b = self.mdt.need_block(blk, Errno::ENOENT, "checkpoint")?;
        put_u32(b, off + CP_FLAGS, flags);
        self.mdt.mark_dirty(blk);
        Ok(())
    }

    /// `nilfs_cpfile_clear_snapshot`: make snapshot `cno` a plain
    /// checkpoint again, unlinking it. Not a snapshot: nothing to do.
    pub fn clear_snapshot(&mut self, cno: Cno) -> Result<()> {
        let flags = self.valid_flags(cno)?;
        if flags & CP_SNAPSHOT == 0 {
            return Ok(());
        }
        let (next, prev) = self.list_get(cno.0)?;
        check_snapshot_step(cno.0, next, true)?;
        check_snapshot_step(cno.0, prev, false)?;
        // Unlinking cno joins its neighbours; they must name it, or the
        // join would lose part of the list.
        let back = self.list_get(next)?.1;
        let fwd = self.list_get(prev)?.0;
        if back != cno.0 || fwd != cno.0 {
            return Err(Error::corrupt(
                "snapshot list",
                format!(
                    "snapshot {cno} lies between {} and {}, whose links name {fwd} and {back}; expected {cno} both",
                    list_name(prev),
                    list_name(next)
                ),
            ));
        }
        self.list_set(next, None, Some(prev))?;
        self.list_set(prev, Some(next), None)?;
        self.list_set(cno.0, Some(0), Some(0))?;
        self.set_flags(cno.0, flags & !CP_SNAPSHOT)?;
        self.add_nsnapshots(-1)
    }

    /// `nilfs_checkpoint_is_mounted`, given the snapshots whose mounted
    /// trees are busy: `cno <= ns_cno` and (`cno >= ns_last_cno` or
    /// `cno` in `busy`).
    pub fn is_mounted(&self, cno: Cno, busy: &[Cno]) -> bool {
        if cno > self.cno {
            return false;
        }
        cno.0 >= self.cno.0.saturating_sub(1) || busy.contains(&cno)
    }

    /// `nilfs_cpfile_change_cpmode` (`chcp`): to a checkpoint, EBUSY if
    /// [`Cpfile::is_mounted`], else [`Cpfile::clear_snapshot`]; to a
    /// snapshot, [`Cpfile::set_snapshot`]. `busy` lists the mounted
    /// snapshots in use.
    pub fn change_mode(&mut self, cno: Cno, mode: CpMode, busy: &[Cno]) -> Result<()> {
        match mode {
            CpMode::Checkpoint if self.is_mounted(cno, busy) => Err(Error::errno(
                Errno::EBUSY,
                format!("checkpoint {cno} is mounted or the latest"),
            )),
            CpMode::Checkpoint => self.clear_snapshot(cno),
            CpMode::Snapshot => self.set_snapshot(cno),
        }
    }
}

/// `nilfs_cpfile_block_init`: every slot of a new block INVALID.
pub fn block_init(geo: CpfileGeometry, b: &mut [u8]) {
    let esz = usize::from(geo.entry_size);
    for i in 0..geo.checkpoints_per_block() as usize {
        put_u32(b, i * esz + CP_FLAGS, CP_INVALID);
    }
}

/// A snapshot list node in messages: 0 is the cpfile header.
fn list_name(cno: u64) -> String {
    if cno == 0 {
        "the cpfile header".to_string()
    } else {
        format!("checkpoint {cno}")
    }
}
