//! The kernel's super block write policy as a small state machine (digest
//! §2.4), with an injected clock: every time is an argument, in seconds, as
//! `ktime_get_real_seconds()` would return it.
//!
//! The state is what `struct the_nilfs` holds for the purpose:
//! - `ns_sbp[0]`, the copy in use, and `ns_sbp[1]`, the other one (absent when
//!   the device has no usable secondary location), each with the byte offset
//!   it lives at. "Primary" and "secondary" are locations; `sbp[0]`/`sbp[1]`
//!   are roles, which [`SbWriter::commit`] swaps (`nilfs_swap_super_block`);
//! - `ns_sbwcount` and `ns_sbwtime` (count and time of super block writes);
//! - the log cursor (`ns_last_pseg`, `ns_last_seq`, `ns_last_cno`) and
//!   `ns_prev_seq`, the free block count, `ns_mount_state`, the `SB_DIRTY`
//!   and `DISCONTINUED` flags and `ns_prot_seq`.
//!
//! Writes are returned (or handed to an injected writer) as
//! `(byte offset, 1024 bytes)`, in the kernel's order. The kernel writes the
//! whole buffer head holding the copy; only these 1024 bytes of it change.
//!
//! Kernel sources: fs/nilfs2/super.c (`nilfs_setup_super`,
//! `nilfs_prepare_super`, `nilfs_commit_super`, `nilfs_sync_super`,
//! `nilfs_set_log_cursor`, `nilfs_cleanup_super`, `nilfs_sync_fs`),
//! the_nilfs.c (`nilfs_load_super_block`, `nilfs_set_last_segment`,
//! `nilfs_swap_super_block`, `nilfs_fall_back_super_block`), the_nilfs.h
//! (`nilfs_sb_need_update`, `nilfs_sb_will_flip`, `NILFS_SB_FREQ`),
//! segment.c (`nilfs_segctor_construct`, `nilfs_segctor_thread`) and
//! ioctl.c (`nilfs_ioctl_clean_segments`).

use crate::format::crc::crc32_le;
use crate::format::superblock::{
    secondary_is_inside_segments, SuperBlock, CURSOR_END, STATE_VALID_FS,
};
use crate::format::{BlockNr, Cno, Seq, SUPER_MAGIC};
use crate::recovery::SbChoice;
use crate::{Error, Result};

/// `NILFS_SB_FREQ`: the minimum interval, in seconds, between periodic super
/// block updates (the_nilfs.h; the default of `ns_sb_update_freq`).
pub const NILFS_SB_FREQ: u64 = 10;

/// `NILFS_DFL_MAX_MNT_COUNT`: what `nilfs_setup_super` stores in a zero
/// `s_max_mnt_count`.
pub const DFL_MAX_MNT_COUNT: u16 = 50;

/// Which copies a commit writes: `NILFS_SB_COMMIT` (only `sbp[0]`) or
/// `NILFS_SB_COMMIT_ALL` (`sbp[0]`, then `sbp[1]` if present).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Commit {
    /// `NILFS_SB_COMMIT`.
    One,
    /// `NILFS_SB_COMMIT_ALL`.
    All,
}

/// Which policy to run. Only [`Variant::Kernel`] is correct; the other exists
/// so that tests can show they catch its defect.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Variant {
    /// The kernel's policy.
    Kernel,
    /// Known bad: never swaps roles, so every commit rewrites the same copy
    /// and the other one keeps a stale cursor forever.
    NoFlip,
}

/// One write: byte offset on the device and the 1024 bytes to put there.
pub type SbWrite = (u64, Vec<u8>);

/// One in-memory copy (`ns_sbp[i]`) and the location it is written to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SbSlot {
    /// Byte offset on the device (1024 or the secondary offset).
    pub offset: u64,
    /// The copy as held in memory (its `sum` is the one last sealed or read).
    pub sb: SuperBlock,
}

/// The super block writer state of one mounted file system.
#[derive(Clone, Debug)]
pub struct SbWriter {
    /// `ns_sbp[0]` (in use) and `ns_sbp[1]` (the other, maybe dropped).
    sbp: [Option<SbSlot>; 2],
    /// `ns_crc_seed`, from the chosen copy at mount.
    crc_seed: u32,
    /// `ns_sbsize` = `s_bytes` of the chosen copy: how much the CRC covers
    /// and how much the kernel's `memcpy`s between copies move.
    sbsize: usize,
    /// `ns_sbwcount` (an `unsigned int`).
    sbwcount: u32,
    /// `ns_sbwtime`.
    sbwtime: u64,
    /// `ns_sb_update_freq`.
    sb_update_freq: u64,
    /// `ns_last_pseg`, `ns_last_seq`, `ns_last_cno`.
    last_pseg: BlockNr,
    last_seq: Seq,
    last_cno: Cno,
    /// `ns_prev_seq`: the sequence number last seen by
    /// `nilfs_set_last_segment` while it marked (or kept) the block dirty.
    prev_seq: Seq,
    /// What `nilfs_count_free_blocks` would return now.
    free_blocks: u64,
    /// `ns_mount_state`.
    mount_state: u16,
    /// `THE_NILFS_SB_DIRTY`.
    sb_dirty: bool,
    /// `THE_NILFS_DISCONTINUED`.
    discontinued: bool,
    /// `ns_prot_seq`.
    prot_seq: Seq,
    variant: Variant,
}

impl SbWriter {
    /// The state right after `nilfs_load_super_block` and `init_nilfs` on a
    /// device of `dev_size` bytes, recomputed from the raw copies in `choice`:
    /// - a copy is valid as `nilfs_valid_sb` says; the secondary is used when
    ///   valid and the primary is invalid or has a smaller `s_last_cno`;
    /// - if the chosen copy places the secondary inside the segment area
    ///   (`nilfs_sb2_bad_offset`), the secondary is dropped and the primary used;
    /// - when the secondary is used the roles are swapped
    ///   (`nilfs_swap_super_block`), so `sbp[0]` is always the copy in use; an
    ///   unreadable copy is absent, a readable but invalid one is kept (the
    ///   kernel keeps its buffer and `nilfs_prepare_super` repairs it);
    /// - `ns_sbwcount = 0`, `ns_sbwtime = sbp[0].s_wtime`, and `ns_prot_seq`
    ///   from `sbp[valid[1] ^ swp]`, the kernel's "older" index. Note that when
    ///   both copies are valid and the secondary is newer this index is 0, the
    ///   newer copy (see the table in `nilfs_load_super_block`);
    /// - `init_nilfs`: `ns_mount_state = s_state`, `ns_crc_seed`, `ns_sbsize`;
    ///   `nilfs_store_log_cursor`: the cursor, and `ns_prev_seq = ns_last_seq`.
    ///
    /// Fails if no copy is valid, or if the result disagrees with
    /// `choice.chosen` (the choice was not made for this device size).
    pub fn from_mount(choice: &SbChoice, dev_size: u64) -> Result<Self> {
        let slot = |i: usize| {
            choice.copies[i].as_ref().and_then(|c| {
                c.sb.as_ref().map(|sb| SbSlot {
                    offset: c.offset,
                    sb: sb.clone(),
                })
            })
        };
        let mut sbp = [slot(0), slot(1)];
        let is_valid = |s: &Option<SbSlot>| s.as_ref().is_some_and(|s| s.sb.check_valid().is_ok());
        let mut valid = [is_valid(&sbp[0]), is_valid(&sbp[1])];
        let cno = |s: &Option<SbSlot>| s.as_ref().map_or(0, |s| s.sb.last_cno.0);
        let mut swp = valid[1] && (!valid[0] || cno(&sbp[1]) > cno(&sbp[0]));
        let idx = usize::from(swp);
        let bad_offset = sbp[idx]
            .as_ref()
            .is_some_and(|s| secondary_is_inside_segments(&s.sb, dev_size));
        if valid[idx] && bad_offset {
            sbp[1] = None;
            valid[1] = false;
            swp = false;
        }
        if !valid[usize::from(swp)] {
            return Err(Error::corrupt("super block", "no valid super block copy"));
        }
        if usize::from(swp) != choice.chosen {
            return Err(Error::Invalid(format!(
                "super block choice {} disagrees with nilfs_load_super_block's {}",
                choice.chosen,
                usize::from(swp)
            )));
        }
        if swp {
            sbp.swap(0, 1);
        }
        let older = usize::from(valid[1] ^ swp);
        let prot_seq = sbp[older].as_ref().map_or(Seq(0), |s| s.sb.last_seq);
        let sb0 = &sbp[0].as_ref().expect("sbp[0] is the valid chosen copy").sb;
        Ok(SbWriter {
            crc_seed: sb0.crc_seed,
            sbsize: usize::from(sb0.bytes),
            sbwcount: 0,
            sbwtime: sb0.wtime,
            sb_update_freq: NILFS_SB_FREQ,
            last_pseg: sb0.last_pseg,
            last_seq: sb0.last_seq,
            last_cno: sb0.last_cno,
            prev_seq: sb0.last_seq,
            free_blocks: sb0.free_blocks_count,
            mount_state: sb0.state,
            sb_dirty: false,
            discontinued: false,
            prot_seq,
            variant: Variant::Kernel,
            sbp,
        })
    }

    /// Run `variant` instead of the kernel's policy (for tests).
    #[must_use]
    pub fn with_variant(mut self, variant: Variant) -> Self {
        self.variant = variant;
        self
    }

    // ---- observers -------------------------------------------------------

    /// `ns_sbp[0]`, the copy in use.
    pub fn current(&self) -> &SbSlot {
        self.sbp[0].as_ref().expect("sbp[0] always exists")
    }

    /// `ns_sbp[1]`, the other copy, if the kernel keeps one.
    pub fn other(&self) -> Option<&SbSlot> {
        self.sbp[1].as_ref()
    }

    /// `ns_sbwcount`.
    pub fn sbwcount(&self) -> u32 {
        self.sbwcount
    }

    /// `ns_sbwtime`.
    pub fn sbwtime(&self) -> u64 {
        self.sbwtime
    }

    /// `ns_prot_seq`: GC protects segments with this sequence number or later.
    pub fn prot_seq(&self) -> Seq {
        self.prot_seq
    }

    /// `ns_mount_state`.
    pub fn mount_state(&self) -> u16 {
        self.mount_state
    }

    /// `nilfs_sb_dirty`.
    pub fn is_dirty(&self) -> bool {
        self.sb_dirty
    }

    /// `nilfs_discontinued`.
    pub fn is_discontinued(&self) -> bool {
        self.discontinued
    }

    /// The in-memory log cursor (`ns_last_pseg`, `ns_last_seq`, `ns_last_cno`).
    pub fn log_cursor(&self) -> (BlockNr, Seq, Cno) {
        (self.last_pseg, self.last_seq, self.last_cno)
    }

    // ---- the rules -------------------------------------------------------

    /// `nilfs_sb_need_update`: true when the clock went backwards past the
    /// last write or more than `NILFS_SB_FREQ` seconds have passed since it
    /// (`t < ns_sbwtime || t > ns_sbwtime + ns_sb_update_freq`).
    pub fn need_update(&self, now: u64) -> bool {
        now < self.sbwtime || now > self.sbwtime.saturating_add(self.sb_update_freq)
    }

    /// `nilfs_sb_will_flip`: the next commit swaps roles unless
    /// `ns_sbwcount & 0xF` is 8 or 15.
    pub fn will_flip(&self) -> bool {
        match self.variant {
            Variant::Kernel => !matches!(self.sbwcount & 0xF, 0x8 | 0xF),
            Variant::NoFlip => false,
        }
    }

    /// A log carrying a super root was written at `last_pseg` in the segment
    /// of sequence `last_seq`, for checkpoint `last_cno`; `free_blocks` is
    /// what `nilfs_count_free_blocks` gives now.
    ///
    /// `nilfs_set_last_segment` (called from `nilfs_segctor_complete_write`):
    /// the cursor always moves, but the super block becomes dirty only when
    /// `last_seq` differs from `ns_prev_seq`, i.e. when the log is in another
    /// full segment than the one last recorded. While clean and in the same segment, `ns_prev_seq`
    /// is left alone; otherwise it takes `last_seq`.
    /// The cursor reaches `sbp[0]` only at the next commit
    /// (`nilfs_set_log_cursor`).
    pub fn set_log_cursor(
        &mut self,
        last_pseg: BlockNr,
        last_seq: Seq,
        last_cno: Cno,
        free_blocks: u64,
    ) {
        self.last_pseg = last_pseg;
        self.last_seq = last_seq;
        self.last_cno = last_cno;
        self.free_blocks = free_blocks;
        if !self.sb_dirty {
            if self.prev_seq == self.last_seq {
                return;
            }
            self.sb_dirty = true;
        }
        self.prev_seq = self.last_seq;
    }

    /// The end of `nilfs_search_super_root` at mount: the cursor becomes the
    /// latest super root found by the scan, which may be newer than the
    /// super block's. `ns_prev_seq` and the dirty flag are left alone.
    pub fn store_recovered_cursor(&mut self, last_pseg: BlockNr, last_seq: Seq, last_cno: Cno) {
        self.last_pseg = last_pseg;
        self.last_seq = last_seq;
        self.last_cno = last_cno;
    }

    /// `load_nilfs` when the log scan from `sbp[0]` failed and the spare
    /// is tried ("trying rollback from an earlier position"): `sbp[1]` is
    /// copied over `sbp[0]` (`memcpy(sbp[0], sbp[1], ns_sbsize)`; each
    /// keeps its location), `ns_crc_seed` and `ns_sbwtime` come from it,
    /// `nilfs_store_log_cursor` reads the cursor from it, and
    /// `NILFS_VALID_FS` leaves the mount state so that recovery runs. Every
    /// later write starts from the spare, never from the copy whose logs
    /// could not be found. Fails if there is no spare.
    pub fn fall_back_to_spare(&mut self) -> Result<()> {
        let spare = self.sbp[1]
            .as_ref()
            .map(|s| s.sb.clone())
            .ok_or_else(|| Error::corrupt("super block", "no spare super block to fall back to"))?;
        let s0 = self.sbp[0].as_mut().expect("sbp[0] always exists");
        s0.sb = spare.clone();
        self.crc_seed = spare.crc_seed;
        self.sbwtime = spare.wtime;
        self.last_pseg = spare.last_pseg;
        self.last_seq = spare.last_seq;
        self.last_cno = spare.last_cno;
        self.prev_seq = spare.last_seq;
        self.free_blocks = spare.free_blocks_count;
        self.mount_state &= !STATE_VALID_FS;
        Ok(())
    }

    /// `nilfs->ns_mount_state |= NILFS_VALID_FS`, as `load_nilfs` does after
    /// recovering an uncleanly unmounted file system (the next
    /// [`SbWriter::cleanup_at_unmount`] then records it as clean).
    pub fn set_mount_state_valid(&mut self) {
        self.mount_state |= STATE_VALID_FS;
    }

    /// Update the free block count without moving the cursor (segments were
    /// freed or allocated); it reaches disk at the next commit.
    pub fn set_free_blocks(&mut self, free_blocks: u64) {
        self.free_blocks = free_blocks;
    }

    /// `set_nilfs_discontinued`, as recovery (`nilfs_salvage_orphan_logs`
    /// path) and a failed write to a new full segment
    /// (`nilfs_free_incomplete_logs`) do.
    pub fn set_discontinued(&mut self) {
        self.discontinued = true;
    }

    /// The log writer thread woke up (`nilfs_segctor_thread`): if the super
    /// block is dirty and needs an update, set "discontinued", so that the
    /// next log with a super root commits the super block.
    pub fn log_writer_wakeup(&mut self, now: u64) {
        if self.sb_dirty && self.need_update(now) {
            self.discontinued = true;
        }
    }

    /// GC is about to write (`nilfs_ioctl_clean_segments`): set
    /// "discontinued" if the super block needs an update, dirty or not.
    pub fn gc_clean_segments(&mut self, now: u64) {
        if self.need_update(now) {
            self.discontinued = true;
        }
    }

    /// The end of `nilfs_segctor_construct` after a log with a super root:
    /// if "discontinued" is set, commit one copy with the usual flip.
    /// Returns the writes (none if nothing was committed).
    pub fn after_super_root_log(&mut self, now: u64) -> Vec<SbWrite> {
        if self.discontinued {
            self.commit(Commit::One, now)
        } else {
            Vec::new()
        }
    }

    /// `nilfs_sync_fs` after its segment construction: commit one copy, with
    /// the usual flip, only if the super block is dirty.
    pub fn sync_fs(&mut self, now: u64) -> Vec<SbWrite> {
        if self.sb_dirty {
            self.commit(Commit::One, now)
        } else {
            Vec::new()
        }
    }

    /// A regular commit, as `nilfs_sync_fs` and `nilfs_segctor_construct` do:
    /// `nilfs_prepare_super(sb, nilfs_sb_will_flip(nilfs))`, then
    /// `nilfs_set_log_cursor(sbp[0])`, then `nilfs_commit_super(sb, flag)`.
    /// The kernel's callers of this sequence pass [`Commit::One`]; with
    /// [`Commit::All`] the other copy is re-sealed with the new `s_wtime` and
    /// written with its own (older) cursor. Returns the writes in order.
    pub fn commit(&mut self, flag: Commit, now: u64) -> Vec<SbWrite> {
        collect(|io| self.commit_with(flag, now, io))
    }

    /// [`commit`](Self::commit) through an injected writer, which may fail:
    /// a failed write of `sbp[0]` falls back to the other copy as
    /// `nilfs_sync_super` does (every error counts as `-EIO`).
    pub fn commit_with(
        &mut self,
        flag: Commit,
        now: u64,
        io: &mut dyn FnMut(u64, &[u8]) -> Result<()>,
    ) -> Result<()> {
        let flip = self.will_flip();
        self.prepare_super(flip)?;
        self.set_log_cursor_into_sbp0();
        self.commit_super(flag, now, io)
    }

    /// `nilfs_setup_super(sb, is_mount = 1)` at a read-write mount: on
    /// `sbp[0]`, a zero `s_max_mnt_count` becomes 50, `s_mnt_count` + 1
    /// (wrapping at 16 bits), `s_mtime = now`, `VALID_FS` cleared from its
    /// `s_state`; `sbp[0]` is then copied over `sbp[1]` and both are written
    /// (`NILFS_SB_COMMIT_ALL`), without a flip and without touching the cursor.
    pub fn setup_rw_mount(&mut self, now: u64) -> Vec<SbWrite> {
        collect(|io| self.setup_super(true, now, io))
    }

    /// `nilfs_setup_super(sb, is_mount = 0)` at a remount read-write: only
    /// `VALID_FS` is cleared, then both copies are written.
    pub fn remount_rw(&mut self, now: u64) -> Vec<SbWrite> {
        collect(|io| self.setup_super(false, now, io))
    }

    /// `nilfs_cleanup_super` at unmount or remount read-only: `sbp[0]` gets
    /// `s_state = ns_mount_state` (normally with `VALID_FS`) and the current
    /// cursor and free block count (`nilfs_set_log_cursor`); if `sbp[1]`
    /// points at the same `s_last_cno`, it gets the same state and both are
    /// written, otherwise only `sbp[0]`. No flip.
    pub fn cleanup_at_unmount(&mut self, now: u64) -> Vec<SbWrite> {
        collect(|io| self.cleanup_super(now, io))
    }

    // ---- the kernel functions ---------------------------------------------

    fn sbp0(&mut self) -> &mut SuperBlock {
        &mut self.sbp[0].as_mut().expect("sbp[0] always exists").sb
    }

    /// `nilfs_setup_super`.
    fn setup_super(
        &mut self,
        is_mount: bool,
        now: u64,
        io: &mut dyn FnMut(u64, &[u8]) -> Result<()>,
    ) -> Result<()> {
        self.prepare_super(false)?;
        let sb = self.sbp0();
        if is_mount {
            if sb.max_mnt_count == 0 {
                sb.max_mnt_count = DFL_MAX_MNT_COUNT;
            }
            sb.mnt_count = sb.mnt_count.wrapping_add(1);
            sb.mtime = now;
        }
        sb.state &= !STATE_VALID_FS;
        self.sync_sbp1_with_sbp0();
        self.commit_super(Commit::All, now, io)
    }

    /// `nilfs_cleanup_super`.
    fn cleanup_super(
        &mut self,
        now: u64,
        io: &mut dyn FnMut(u64, &[u8]) -> Result<()>,
    ) -> Result<()> {
        self.prepare_super(false)?;
        let state = self.mount_state;
        self.sbp0().state = state;
        self.set_log_cursor_into_sbp0();
        let mut flag = Commit::One;
        let cno0 = self.current().sb.last_cno;
        if let Some(s1) = self.sbp[1].as_mut() {
            if s1.sb.last_cno == cno0 {
                s1.sb.state = state;
                flag = Commit::All;
            }
        }
        self.commit_super(flag, now, io)
    }

    /// `nilfs_prepare_super`: repair a copy whose magic is wrong from the
    /// other (the first `ns_sbsize` bytes), then swap roles if `flip` and
    /// there are two copies. The failure ("superblock broke") cannot happen
    /// here, since `sbp[0]` starts valid and nothing changes a magic.
    fn prepare_super(&mut self, flip: bool) -> Result<()> {
        let n = self.sbsize;
        let [s0, s1] = &mut self.sbp;
        let s0 = s0.as_mut().expect("sbp[0] always exists");
        if s0.sb.magic != SUPER_MAGIC {
            match s1.as_ref() {
                Some(s1) if s1.sb.magic == SUPER_MAGIC => copy_head(&mut s0.sb, &s1.sb, n),
                _ => return Err(Error::corrupt("super block", "superblock broke")),
            }
        } else if let Some(s1) = s1.as_mut() {
            if s1.sb.magic != SUPER_MAGIC {
                copy_head(&mut s1.sb, &s0.sb, n);
            }
        }
        if flip && self.sbp[1].is_some() {
            self.sbp.swap(0, 1); // nilfs_swap_super_block
        }
        Ok(())
    }

    /// `nilfs_set_log_cursor(sbp[0], nilfs)`.
    fn set_log_cursor_into_sbp0(&mut self) {
        let (pseg, seq, cno, free) = (
            self.last_pseg,
            self.last_seq,
            self.last_cno,
            self.free_blocks,
        );
        let sb = self.sbp0();
        sb.free_blocks_count = free;
        sb.last_seq = seq;
        sb.last_pseg = pseg;
        sb.last_cno = cno;
    }

    /// `memcpy(sbp[1], sbp[0], ns_sbsize)` in `nilfs_setup_super`.
    fn sync_sbp1_with_sbp0(&mut self) {
        let n = self.sbsize;
        let [s0, s1] = &mut self.sbp;
        if let (Some(s0), Some(s1)) = (s0.as_ref(), s1.as_mut()) {
            copy_head(&mut s1.sb, &s0.sb, n);
        }
    }

    /// `nilfs_commit_super`: `ns_sbwtime = s_wtime = now` and a fresh `s_sum`
    /// on `sbp[0]` (and on `sbp[1]` for [`Commit::All`]), computed with
    /// `ns_crc_seed` over each copy's `s_bytes` ([`seal`]); clear `SB_DIRTY`;
    /// write.
    fn commit_super(
        &mut self,
        flag: Commit,
        now: u64,
        io: &mut dyn FnMut(u64, &[u8]) -> Result<()>,
    ) -> Result<()> {
        let seed = self.crc_seed;
        self.sbwtime = now;
        let s0 = self.sbp0();
        s0.wtime = now;
        seal(s0, seed);
        if flag == Commit::All {
            if let Some(s1) = self.sbp[1].as_mut() {
                s1.sb.wtime = now;
                seal(&mut s1.sb, seed);
            }
        }
        self.sb_dirty = false;
        self.sync_super(flag, io)
    }

    /// `nilfs_sync_super`: write `sbp[0]`; on failure, if there is another
    /// copy, copy `sbp[0]` over it, drop the failed one
    /// (`nilfs_fall_back_super_block`) and retry. On success: `ns_sbwcount`
    /// incremented, "discontinued" cleared, `sbp[1]` written too for
    /// [`Commit::All`], and `ns_prot_seq` taken from `sbp[1]` if its
    /// `s_last_cno` is smaller than `sbp[0]`'s, else from `sbp[0]`. As in the
    /// kernel, a failed `sbp[1]` write skips the `ns_prot_seq` update but
    /// reports success.
    fn sync_super(
        &mut self,
        flag: Commit,
        io: &mut dyn FnMut(u64, &[u8]) -> Result<()>,
    ) -> Result<()> {
        loop {
            let s0 = self.current();
            let res = io(s0.offset, &s0.sb.encode());
            if let Err(e) = res {
                if self.sbp[1].is_none() {
                    return Err(e);
                }
                let n = self.sbsize;
                let [s0, s1] = &mut self.sbp;
                let (s0, s1) = (s0.as_ref().expect("sbp[0]"), s1.as_mut().expect("sbp[1]"));
                copy_head(&mut s1.sb, &s0.sb, n);
                self.sbp[0] = self.sbp[1].take();
                continue;
            }
            self.sbwcount = self.sbwcount.wrapping_add(1);
            self.discontinued = false;
            let mut prot = self.current().sb.last_seq;
            if let Some(s1) = self.sbp[1].as_ref() {
                if flag == Commit::All && io(s1.offset, &s1.sb.encode()).is_err() {
                    return Ok(());
                }
                if s1.sb.last_cno < self.current().sb.last_cno {
                    prot = s1.sb.last_seq;
                }
            }
            self.prot_seq = prot;
            return Ok(());
        }
    }
}

/// Run `f` with a writer that records every write and never fails.
fn collect(f: impl FnOnce(&mut dyn FnMut(u64, &[u8]) -> Result<()>) -> Result<()>) -> Vec<SbWrite> {
    let mut out = Vec::new();
    let mut rec = |off: u64, buf: &[u8]| -> Result<()> {
        out.push((off, buf.to_vec()));
        Ok(())
    };
    // With a writer that cannot fail, and sbp[0] always carrying the magic,
    // no step of the policy can fail.
    f(&mut rec).expect("super block commit with an infallible writer");
    out
}

/// `memcpy(dst, src, n)` on the on-disk images: the first `n` bytes of `src`
/// over `dst`, the rest of `dst` kept — except that the log cursor is
/// always carried. The kernel copies `ns_sbsize` bytes, and where `s_bytes`
/// ends inside the cursor (hostile: every mkfs writes 280) the copy keeps
/// its old `s_last_pseg` and `s_last_seq` beside the new `s_last_cno`; on
/// Linux 6.1, 6.12 and 7.3 the next mount then fails ("Invalid
/// checkpoint"): finding K22 (docs/findings.md,
/// tests/tests/peer_kernel_k22_sb_cursor.rs). We do not copy that. On every
/// image whose `s_bytes` covers the cursor the two agree.
fn copy_head(dst: &mut SuperBlock, src: &SuperBlock, n: usize) {
    let n = n.clamp(CURSOR_END, SuperBlock::SIZE);
    let mut d = dst.encode();
    d[..n].copy_from_slice(&src.encode()[..n]);
    *dst = SuperBlock::decode(&d).expect("a 1024-byte buffer decodes");
}

/// `s_sum = crc32_le(ns_crc_seed, sbp, ns_sbsize)` with `s_sum` zeroed —
/// except that the length is the copy's own `s_bytes`, where the kernel
/// uses `ns_sbsize` (the chosen copy's at mount) for both. The two agree on
/// every consistent image. When the copies disagree (damage), the kernel's
/// choice writes a checksum the copy's own `s_bytes` cannot verify, and a
/// recovery mount on Linux 6.1, whose salvage commit swaps the copies
/// before `nilfs_setup_super` copies one over the other, leaves both
/// unreadable: finding K14 (docs/findings.md,
/// tests/tests/peer_kernel_k14_sb_bytes.rs). We do not copy that.
fn seal(sb: &mut SuperBlock, seed: u32) {
    sb.sum = 0;
    let b = sb.encode();
    let n = usize::from(sb.bytes).min(SuperBlock::SIZE);
    sb.sum = crc32_le(seed, &b[..n]);
}
