//! The super block write policy (nilfs::sb_write) against the kernel's rules
//! and against our own mount-time choice (`load_super_block`), on a fresh
//! mkfs image.

use nilfs::device::{BlockDevice, MemDevice};
use nilfs::format::superblock::{sb2_offset_bytes, SuperBlock, STATE_VALID_FS};
use nilfs::format::{BlockNr, Cno, Seq, SB_OFFSET_BYTES};
use nilfs::mkfs::{self, MkfsOptions, DEFAULT_CTIME};
use nilfs::recovery::{load_super_block, SbChoice};
use nilfs::sb_write::{Commit, SbWrite, SbWriter, Variant};
use nilfs::{Error, Result};
use proptest::prelude::*;

const DEV_SIZE: u64 = 4 << 20;
const BPS: u64 = 64;

/// A fresh 1 KiB-block image, the writer state its mount gives, and the
/// history of committed cursors the checks compare against.
struct Rig {
    dev: MemDevice,
    w: SbWriter,
    sb2: u64,
    /// `s_last_cno` of `sbp[0]` after every commit, oldest first (the rw
    /// mount's write is entry 0).
    committed: Vec<u64>,
    /// The cursor the log writer has reached.
    seq: u64,
    cno: u64,
}

impl Rig {
    fn new(variant: Variant) -> Rig {
        let dev = MemDevice::new(DEV_SIZE);
        let o = MkfsOptions {
            block_size: 1024,
            blocks_per_segment: BPS,
            ..Default::default()
        };
        mkfs::mkfs(&dev, &o).unwrap();
        let choice = load_super_block(&dev).unwrap();
        let w = SbWriter::from_mount(&choice, DEV_SIZE)
            .unwrap()
            .with_variant(variant);
        let (_, seq, cno) = w.log_cursor();
        Rig {
            dev,
            w,
            sb2: sb2_offset_bytes(DEV_SIZE).unwrap(),
            committed: Vec::new(),
            seq: seq.0,
            cno: cno.0,
        }
    }

    /// Put `writes` on the device; every buffer must be a valid super block
    /// at one of the two locations.
    fn apply(&self, writes: &[SbWrite]) {
        for (off, buf) in writes {
            assert!(*off == SB_OFFSET_BYTES || *off == self.sb2, "offset {off}");
            assert_eq!(buf.len(), SuperBlock::SIZE);
            SuperBlock::decode_valid(buf).expect("every written copy is valid");
            self.dev.write_at(*off, buf).unwrap();
        }
    }

    fn copy_at(&self, off: u64) -> SuperBlock {
        let mut raw = vec![0u8; SuperBlock::SIZE];
        self.dev.read_at(off, &mut raw).unwrap();
        SuperBlock::decode(&raw).unwrap()
    }

    /// The log writer wrote a log with a super root: in a new full segment
    /// if `new_segment`, else later in the same one.
    fn log_written(&mut self, new_segment: bool) {
        if new_segment {
            self.seq += 1;
        }
        self.cno += 1;
        let pseg = (self.seq % 40) * BPS + self.cno % BPS;
        self.w
            .set_log_cursor(BlockNr(pseg), Seq(self.seq), Cno(self.cno), 1000 + self.cno);
    }

    fn commit(&mut self, flag: Commit, now: u64) -> Vec<SbWrite> {
        let writes = self.w.commit(flag, now);
        self.after_commit(&writes);
        writes
    }

    fn after_commit(&mut self, writes: &[SbWrite]) {
        self.apply(writes);
        self.committed.push(self.w.current().sb.last_cno.0);
    }

    /// What a mount now sees, and the point of alternation: the copy chosen
    /// has the greatest `s_last_cno` (the primary on a tie), the other copy is
    /// valid, and it is not older than the cursor committed two commits ago
    /// (the kernel never writes the same copy three times running, so a torn
    /// latest write loses at most the last two commits).
    fn check_disk(&self) -> std::result::Result<SbChoice, String> {
        let choice = load_super_block(&self.dev).map_err(|e| e.to_string())?;
        let copy = |i: usize| {
            let c = choice.copies[i].as_ref().ok_or("copy missing")?;
            c.valid.clone()?;
            Ok::<_, String>(c.sb.clone().ok_or("copy unreadable")?)
        };
        let (p, s) = (copy(0)?, copy(1)?);
        let newest = p.last_cno.max(s.last_cno);
        let chosen = choice.sb();
        if chosen.last_cno != newest || (p.last_cno == s.last_cno && choice.chosen != 0) {
            return Err(format!(
                "chose copy {} with cno {}, newest is {}",
                choice.chosen, chosen.last_cno, newest
            ));
        }
        let other = choice.spare().ok_or("other copy not valid")?;
        // nilfs_load_super_block: the secondary's s_last_seq when valid.
        if choice.prot_seq != s.last_seq {
            return Err(format!(
                "prot_seq {} is not the secondary's s_last_seq {}",
                choice.prot_seq, s.last_seq
            ));
        }
        if let Some(&last) = self.committed.last() {
            if chosen.last_cno.0 != last {
                return Err(format!(
                    "chosen cno {} is not the last committed {last}",
                    chosen.last_cno
                ));
            }
        }
        let k = self.committed.len();
        if k >= 3 && other.last_cno.0 < self.committed[k - 3] {
            return Err(format!(
                "older copy's cno {} is staler than two commits ago ({})",
                other.last_cno,
                self.committed[k - 3]
            ));
        }
        Ok(choice)
    }

    /// Mount read-write at `now` and check what that writes.
    fn mount(&mut self, now: u64) {
        let writes = self.w.setup_rw_mount(now);
        let offs: Vec<u64> = writes.iter().map(|w| w.0).collect();
        assert_eq!(
            offs,
            vec![SB_OFFSET_BYTES, self.sb2],
            "both copies, primary first"
        );
        for (_, buf) in &writes {
            let sb = SuperBlock::decode_valid(buf).unwrap();
            assert_eq!(sb.state & STATE_VALID_FS, 0);
            assert_eq!(sb.mnt_count, 1);
            assert_eq!(sb.max_mnt_count, 50);
            assert_eq!((sb.mtime, sb.wtime), (now, now));
        }
        self.after_commit(&writes);
        assert_eq!(self.w.sbwcount(), 1);
    }
}

/// On a fresh image (identical copies) the state is the one the kernel's
/// nilfs_load_super_block leaves: primary in use, counters from the copy.
#[test]
fn from_mount_matches_load_super_block() {
    let r = Rig::new(Variant::Kernel);
    assert_eq!(r.w.current().offset, SB_OFFSET_BYTES, "tie: primary in use");
    assert_eq!(r.w.other().unwrap().offset, r.sb2);
    assert_eq!(r.w.sbwcount(), 0);
    assert_eq!(r.w.sbwtime(), DEFAULT_CTIME, "mkfs sets s_wtime = ctime");
    assert_eq!(r.w.mount_state() & STATE_VALID_FS, STATE_VALID_FS);
    assert!(!r.w.is_dirty() && !r.w.is_discontinued());
}

/// Remount after the secondary became the newer copy: the roles are swapped
/// (sbp[0] is the secondary) and ns_prot_seq uses the kernel's index
/// `valid[1] ^ swp` = 0, i.e. the *newer* copy's s_last_seq, which is what
/// `load_super_block` reports too.
#[test]
fn from_mount_after_secondary_is_newer() {
    let mut r = Rig::new(Variant::Kernel);
    r.mount(DEFAULT_CTIME + 5);
    r.log_written(true);
    let writes = r.commit(Commit::One, DEFAULT_CTIME + 20);
    assert_eq!(writes[0].0, r.sb2);
    let choice = load_super_block(&r.dev).unwrap();
    assert_eq!(choice.chosen, 1);
    let w = SbWriter::from_mount(&choice, DEV_SIZE).unwrap();
    assert_eq!(w.current().offset, r.sb2);
    assert_eq!(w.other().unwrap().offset, SB_OFFSET_BYTES);
    assert_eq!(w.log_cursor().1 .0, r.seq);
    assert_eq!(w.sbwtime(), DEFAULT_CTIME + 20);
    assert_eq!(w.prot_seq(), choice.sb().last_seq, "kernel: newer copy");
    assert_eq!(choice.prot_seq, w.prot_seq());
}

/// A rw mount writes both copies with VALID_FS cleared and mnt_count 1; N
/// commits alternate except when `sbwcount & 0xF` is 8 or 15; after each,
/// the mount choice picks the newest copy and the other holds a recent valid
/// cursor; a torn latest write falls back to the previous commit; unmount
/// restores VALID_FS.
#[test]
fn mount_commits_alternate_and_unmount_restores_valid_fs() {
    let mut r = Rig::new(Variant::Kernel);
    let mut now = DEFAULT_CTIME + 100;
    r.mount(now);
    r.check_disk().unwrap();

    let mut trace = String::new();
    let mut at = SB_OFFSET_BYTES;
    for k in 1..=40u32 {
        now += 11;
        r.log_written(true);
        assert!(
            r.w.is_dirty(),
            "a new segment sequence number dirties the super block"
        );
        assert_eq!(r.w.sbwcount(), k, "mount write + k-1 commits");
        let flips = !matches!(k % 16, 8 | 15);
        assert_eq!(r.w.will_flip(), flips);
        let writes = r.commit(Commit::One, now);
        assert_eq!(writes.len(), 1);
        let expect = if flips {
            if at == SB_OFFSET_BYTES {
                r.sb2
            } else {
                SB_OFFSET_BYTES
            }
        } else {
            at
        };
        assert_eq!(writes[0].0, expect, "commit {k}");
        at = expect;
        if k <= 17 {
            trace.push(if at == SB_OFFSET_BYTES { 'P' } else { 'S' });
        }
        let sb = SuperBlock::decode_valid(&writes[0].1).unwrap();
        assert_eq!((sb.wtime, sb.last_cno.0), (now, r.cno));
        let choice = r.check_disk().unwrap();
        assert_eq!(choice.sb().last_cno.0, r.cno);
        assert_eq!(
            choice.spare().unwrap().last_cno.0,
            if flips { r.cno - 1 } else { r.cno - 2 }
        );
        assert_eq!(r.w.prot_seq(), choice.spare().unwrap().last_seq);

        // Tear the write just made: the mount falls back to the other copy,
        // at most two commits old. Then put it back.
        let good = writes[0].1.clone();
        r.dev.write_at(at, &[0xA5; 512]).unwrap();
        let fallback = load_super_block(&r.dev).unwrap();
        assert!(fallback.sb().last_cno.0 >= r.cno - 2);
        r.dev.write_at(at, &good).unwrap();
    }
    assert_eq!(trace, "SPSPSPSSPSPSPSSPS");

    // Unmount with different cursors in the two copies: only sbp[0].
    now += 1;
    let writes = r.w.cleanup_at_unmount(now);
    assert_eq!(writes.len(), 1);
    assert_eq!(writes[0].0, r.w.current().offset);
    r.apply(&writes);
    let choice = load_super_block(&r.dev).unwrap();
    assert_eq!(choice.sb().state & STATE_VALID_FS, STATE_VALID_FS);
    assert_eq!(choice.spare().unwrap().state & STATE_VALID_FS, 0);
}

/// Unmount right after mount: both copies point at the same checkpoint, so
/// nilfs_cleanup_super writes both with VALID_FS.
#[test]
fn unmount_with_equal_cursors_writes_both() {
    let mut r = Rig::new(Variant::Kernel);
    r.mount(DEFAULT_CTIME + 5);
    let writes = r.w.cleanup_at_unmount(DEFAULT_CTIME + 6);
    assert_eq!(writes.len(), 2);
    r.apply(&writes);
    for off in [SB_OFFSET_BYTES, r.sb2] {
        assert_eq!(r.copy_at(off).state & STATE_VALID_FS, STATE_VALID_FS);
    }
}

/// nilfs_set_last_segment: a log in the same full segment moves the cursor
/// but does not dirty the super block; a new sequence number does.
#[test]
fn only_a_new_segment_dirties() {
    let mut r = Rig::new(Variant::Kernel);
    r.mount(DEFAULT_CTIME + 5);
    r.log_written(false);
    assert!(!r.w.is_dirty());
    assert_eq!(r.w.log_cursor().2 .0, r.cno);
    assert!(
        r.w.sync_fs(DEFAULT_CTIME + 50).is_empty(),
        "sync_fs skips a clean super block"
    );
    r.log_written(true);
    assert!(r.w.is_dirty());
    r.log_written(false);
    assert!(r.w.is_dirty(), "stays dirty until committed");
}

/// nilfs_sb_need_update and the "discontinued" rule: the log writer sets
/// it only for a dirty super block more than 10 s after the last write, and
/// the next log with a super root then commits one copy.
#[test]
fn discontinued_after_ten_seconds() {
    let mut r = Rig::new(Variant::Kernel);
    let t0 = DEFAULT_CTIME + 5;
    r.mount(t0);
    assert!(!r.w.need_update(t0 + 10));
    assert!(r.w.need_update(t0 + 11));
    assert!(r.w.need_update(t0 - 1), "a clock that went back counts too");
    r.w.log_writer_wakeup(t0 + 20);
    assert!(
        !r.w.is_discontinued(),
        "clean: the log writer leaves it alone"
    );
    r.log_written(true);
    r.w.log_writer_wakeup(t0 + 10);
    assert!(!r.w.is_discontinued());
    assert!(r.w.after_super_root_log(t0 + 10).is_empty());
    r.w.log_writer_wakeup(t0 + 11);
    assert!(r.w.is_discontinued());
    let writes = r.w.after_super_root_log(t0 + 11);
    assert_eq!(writes.len(), 1);
    r.after_commit(&writes);
    assert!(!r.w.is_discontinued() && !r.w.is_dirty());
    r.check_disk().unwrap();
}

/// nilfs_sync_super: a failed write of sbp[0] copies it over sbp[1], drops
/// the failed copy and retries; later commits write only the survivor.
#[test]
fn write_error_falls_back_to_the_other_copy() {
    let mut r = Rig::new(Variant::Kernel);
    r.mount(DEFAULT_CTIME + 5);
    r.log_written(true);
    let bad = r.sb2; // the first commit after mount flips to the secondary
    let mut writes = Vec::new();
    let mut io = |off: u64, buf: &[u8]| -> Result<()> {
        if off == bad {
            return Err(Error::Io {
                blocknr: off / 1024,
                detail: "injected".into(),
            });
        }
        writes.push((off, buf.to_vec()));
        Ok(())
    };
    r.w.commit_with(Commit::One, DEFAULT_CTIME + 20, &mut io)
        .unwrap();
    assert_eq!(writes.len(), 1);
    assert_eq!(writes[0].0, SB_OFFSET_BYTES);
    assert_eq!(
        SuperBlock::decode_valid(&writes[0].1).unwrap().last_cno.0,
        r.cno
    );
    assert!(r.w.other().is_none());
    r.log_written(true);
    let w2 = r.w.commit(Commit::One, DEFAULT_CTIME + 40);
    assert_eq!(
        w2.iter().map(|w| w.0).collect::<Vec<_>>(),
        vec![SB_OFFSET_BYTES]
    );
}

/// The known-bad policy that always rewrites the same copy keeps every
/// write valid and the choice right, but the other copy goes stale: the
/// older-but-recent check catches it.
#[test]
fn no_flip_variant_is_caught() {
    let mut r = Rig::new(Variant::NoFlip);
    let mut now = DEFAULT_CTIME + 5;
    r.mount(now);
    let mut caught = None;
    for k in 1..=5 {
        now += 11;
        r.log_written(true);
        r.commit(Commit::One, now);
        if let Err(e) = r.check_disk() {
            caught = Some((k, e));
            break;
        }
    }
    let (k, e) = caught.expect("NoFlip must be caught");
    // Commit 3 is the first where the kernel's other copy would hold commit
    // 1 or 2 while NoFlip's still holds the mount-time cursor.
    assert_eq!(k, 3, "{e}");
    assert!(e.contains("staler than two commits ago"), "{e}");
}

#[derive(Clone, Debug)]
enum Op {
    /// A log with a super root, in a new segment or not.
    Log { new_segment: bool },
    /// A regular commit.
    Commit { all: bool },
    /// The log writer's wake-up check, then a log with a super root.
    WriterLog,
    /// `sync_fs`.
    SyncFs,
    /// `nilfs_sb_need_update` / `nilfs_sb_will_flip` (pure).
    Query,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        any::<bool>().prop_map(|new_segment| Op::Log { new_segment }),
        any::<bool>().prop_map(|all| Op::Commit { all }),
        Just(Op::WriterLog),
        Just(Op::SyncFs),
        Just(Op::Query),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// Random sequences with an increasing clock: every write is a valid
    /// super block, the mount choice is the copy with the greatest
    /// s_last_cno, its prot_seq is the older copy's s_last_seq, and the
    /// older copy is never staler than two commits; unmount ends valid.
    #[test]
    fn random_sequences_keep_a_recent_valid_spare(
        ops in proptest::collection::vec((op(), 0u64..25), 1..60)
    ) {
        let mut r = Rig::new(Variant::Kernel);
        let mut now = DEFAULT_CTIME + 1;
        r.mount(now);
        for (op, dt) in ops {
            now += dt;
            let writes = match op {
                Op::Log { new_segment } => {
                    r.log_written(new_segment);
                    Vec::new()
                }
                Op::Commit { all } => {
                    let flag = if all { Commit::All } else { Commit::One };
                    let before = r.w.will_flip();
                    let was = r.w.current().offset;
                    let w = r.w.commit(flag, now);
                    prop_assert_eq!(r.w.current().offset != was, before);
                    w
                }
                Op::WriterLog => {
                    r.w.log_writer_wakeup(now);
                    r.log_written(true);
                    r.w.after_super_root_log(now)
                }
                Op::SyncFs => r.w.sync_fs(now),
                Op::Query => {
                    let n = r.w.need_update(now);
                    prop_assert_eq!(n, now > r.w.sbwtime() + 10);
                    prop_assert_eq!(r.w.will_flip(), !matches!(r.w.sbwcount() & 0xF, 8 | 15));
                    Vec::new()
                }
            };
            let written = !writes.is_empty();
            if written {
                r.after_commit(&writes);
                prop_assert_eq!(r.w.sbwtime(), now);
            }
            let choice = r.check_disk();
            prop_assert!(choice.is_ok(), "{:?}", choice.err());
            if written {
                // nilfs_sync_super's ns_prot_seq: the older copy's s_last_seq.
                let spare = choice.unwrap().spare().unwrap().last_seq;
                prop_assert_eq!(r.w.prot_seq(), spare);
            }
        }
        let writes = r.w.cleanup_at_unmount(now + 1);
        r.apply(&writes);
        let choice = load_super_block(&r.dev).unwrap();
        prop_assert_eq!(choice.sb().state & STATE_VALID_FS, STATE_VALID_FS);
        prop_assert_eq!(choice.sb().last_cno.0, r.cno);
        prop_assert!(choice.spare().is_some());
    }
}
