//! The whole file system: the live namespace, every checkpoint with its
//! frozen namespace, mounts, what is durable, and the space estimate.
//! [`step`] is the transition function; it is pure.

use crate::fs::{Errno, FileData, FileType, Id, Kind, Namespace, StatInfo, NAME_LEN_MAX, PAGE};
use crate::manifest::manifest;
use crate::pattern::{sha256_hex, Pattern};
use imbl::{OrdMap, OrdSet, Vector};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// A checkpoint number.
pub type Cno = u64;

/// Size and layout parameters that are visible to users (mkfs options).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Geometry {
    pub block_size: u32,
    pub blocks_per_segment: u32,
    pub nsegments: u64,
    /// `s_r_segments_percentage` (mkfs default 5).
    pub r_segments_percentage: u32,
}

impl Geometry {
    /// `nilfs_nrsvsegs`: max(NILFS_MIN_NRSVSEGS = 8, ceil(nsegs * pct / 100)).
    pub fn reserved_segments(&self) -> u64 {
        (self.nsegments * self.r_segments_percentage as u64)
            .div_ceil(100)
            .max(8)
    }
    /// Blocks that user data and metadata may use before
    /// `nilfs_near_disk_full` can report the disk full: the non-reserved
    /// segments less the two the log writer holds (current and next).
    pub fn usable_blocks(&self) -> u64 {
        self.nsegments.saturating_sub(self.reserved_segments() + 2) * self.blocks_per_segment as u64
    }
}

/// One checkpoint as lscp would list it, with the namespace it shows.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Checkpoint {
    /// What it shows; `None` for a checkpoint the model knows only from an
    /// lscp listing (finding M1): the kernel made it on its own (the
    /// segment constructor's timer, a cleaner step), so it exists, is
    /// plain and has that number, but the model cannot say which state it
    /// captured. The latest checkpoint's contents are always known.
    pub ns: Option<Namespace>,
    pub snapshot: bool,
    /// Model clock when it was made (the cleaner's protection period).
    pub created: i64,
    /// The number is known to be the file system's own (mkfs's cno 1, or
    /// observed in a trace). Otherwise the real number may be larger: the
    /// kernel's segment constructor also makes checkpoints on its timer.
    pub bound: bool,
    /// A cleaner run may have removed it (plain, not the latest, older
    /// than the protection period); resolved by the next `lscp`.
    pub may_be_gone: bool,
    /// MINOR: made for metadata changes alone (chcp, rmcp, mkcp -s), no
    /// file blocks (`nilfs_cpfile_finalize_checkpoint(.., !HAVE_DELTA)`).
    /// `lscp` hides it unless it is a snapshot.
    pub minor: bool,
}

/// How the latest checkpoint is mounted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mount {
    ReadWrite,
    ReadOnly,
}

/// One fdatasync that wrote a data-only (SYNDT) logical segment instead of a
/// checkpoint: the file's pages that differed from the latest checkpoint.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DsyncLog {
    /// Number of modifications (entries of `Pending::history`) before it.
    pub after: usize,
    pub id: Id,
    pub pages: OrdMap<u64, Arc<Vec<u8>>>,
}

/// What happened since the latest checkpoint (the crash envelope's input).
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Pending {
    /// Some change is not in the latest checkpoint.
    pub dirty: bool,
    /// Inodes whose pages were dirtied since the latest checkpoint: what
    /// `nilfs_inode_dirty` tests (NILFS_I_DIRTY, set only by
    /// `nilfs_set_file_dirty`: a write, a truncate that changes the size,
    /// a directory's entry block, a new directory's or symlink's block).
    /// Metadata alone (a new empty file, a rename, a link, a same-size
    /// truncate) goes to the ifile but leaves the inode clean, so fsync and
    /// fdatasync of it write nothing (seen on Linux 6.1; docs/findings.md).
    pub dirty_inodes: OrdSet<Id>,
    /// Inodes whose metadata changed since the latest checkpoint (created,
    /// truncated, extended, linked, unlinked, renamed, parents of such
    /// changes): `nilfs_mark_inode_dirty` passes I_DIRTY, which includes
    /// I_DIRTY_DATASYNC, so `nilfs_update_inode` sets NILFS_I_INODE_SYNC,
    /// and `nilfs_construct_dsync_segment` then makes a full checkpoint.
    pub inode_sync: OrdSet<Id>,
    /// The live namespace after each modification since the checkpoint.
    pub history: Vector<Namespace>,
    /// The clock at each of those modifications.
    pub history_times: Vector<i64>,
    pub dsync: Vector<DsyncLog>,
    /// The checkpoint table as of the latest construction (chcp/rmcp made
    /// since then are lost by a crash unless a construction followed).
    pub table_at_construction: Option<OrdMap<Cno, Checkpoint>>,
}

/// The abstract state of one NILFS2 file system.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct State {
    pub geometry: Geometry,
    /// The injected clock, in nanoseconds.
    pub clock: i64,
    pub live: Namespace,
    pub checkpoints: OrdMap<Cno, Checkpoint>,
    pub next_cno: Cno,
    pub mount: Option<Mount>,
    pub snapshot_mounts: OrdSet<Cno>,
    pub pending: Pending,
    /// Upper estimate of blocks written since mkfs (never lowered: the
    /// model cannot know how much a cleaner pass reclaims).
    pub consumed_blocks: u64,
}

/// Operations: the user-visible interface (system calls on paths, the
/// nilfs-utils checkpoint tools, mounts, crash, the cleaner).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Op {
    /// mkfs.nilfs2; valid only as a trace's first line.
    Mkfs {
        block_size: u32,
        blocks_per_segment: u32,
        nsegments: u64,
        #[serde(default = "default_rsv")]
        r_segments_percentage: u32,
        /// nilfs-utils <= 2.2.x also creates `/.nilfs`.
        #[serde(default)]
        dot_nilfs: bool,
        /// The clock (ns) at mkfs: the root's and `/.nilfs`'s times. A
        /// runner on a real file system reads it from the fresh root.
        #[serde(default, skip_serializing_if = "is_zero")]
        clock: i64,
    },
    /// Sets the injected clock (ns); it never goes back.
    Clock {
        now: i64,
    },
    Create {
        path: String,
        #[serde(default = "default_file_perm")]
        perm: u32,
        #[serde(default)]
        excl: bool,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        at: Option<Cno>,
    },
    Mkdir {
        path: String,
        #[serde(default = "default_dir_perm")]
        perm: u32,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        at: Option<Cno>,
    },
    Symlink {
        target: String,
        path: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        at: Option<Cno>,
    },
    Link {
        old: String,
        new: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        at: Option<Cno>,
    },
    Unlink {
        path: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        at: Option<Cno>,
    },
    Rmdir {
        path: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        at: Option<Cno>,
    },
    /// `renameat2(old, new, flags)`: `noreplace` is RENAME_NOREPLACE,
    /// `exchange` RENAME_EXCHANGE.
    Rename {
        old: String,
        new: String,
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        noreplace: bool,
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        exchange: bool,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        at: Option<Cno>,
    },
    /// `pwrite(path, data, offset)`; with `append`, a file opened
    /// `O_APPEND` and written with `write(2)`: every write goes to the end
    /// (`generic_write_checks` moves `ki_pos` to `i_size`) and `offset` is
    /// ignored.
    Write {
        path: String,
        offset: u64,
        data: Pattern,
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        append: bool,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        at: Option<Cno>,
    },
    Read {
        path: String,
        offset: u64,
        len: u64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        at: Option<Cno>,
    },
    Truncate {
        path: String,
        size: u64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        at: Option<Cno>,
    },
    Lstat {
        path: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        at: Option<Cno>,
    },
    /// `chmod(path, perm)` (follows symlinks).
    Chmod {
        path: String,
        perm: u32,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        at: Option<Cno>,
    },
    /// `fchownat(AT_FDCWD, path, uid, gid, follow ? 0 :
    /// AT_SYMLINK_NOFOLLOW)`; an absent id is -1 (left as it is).
    Chown {
        path: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        uid: Option<u32>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        gid: Option<u32>,
        #[serde(default = "yes", skip_serializing_if = "is_true")]
        follow: bool,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        at: Option<Cno>,
    },
    /// `utimensat(AT_FDCWD, path, {UTIME_OMIT, mtime}, flags)`: the
    /// modification time set to `mtime` (ns since the epoch), or to the
    /// current time when absent (UTIME_NOW); the access time left alone.
    Utimes {
        path: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        mtime: Option<i64>,
        #[serde(default = "yes", skip_serializing_if = "is_true")]
        follow: bool,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        at: Option<Cno>,
    },
    /// `mknod(path, type | perm, makedev(rdev[0], rdev[1]))`.
    Mknod {
        path: String,
        #[serde(rename = "type")]
        file_type: FileType,
        #[serde(default = "default_file_perm")]
        perm: u32,
        #[serde(default, skip_serializing_if = "is_no_dev")]
        rdev: [u32; 2],
        #[serde(default, skip_serializing_if = "Option::is_none")]
        at: Option<Cno>,
    },
    /// `setxattr(path, name, value, 0)`, `lsetxattr` unless `follow`.
    Setxattr {
        path: String,
        name: String,
        #[serde(default)]
        value: String,
        #[serde(default = "yes", skip_serializing_if = "is_true")]
        follow: bool,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        at: Option<Cno>,
    },
    /// `getxattr` (`lgetxattr` unless `follow`).
    Getxattr {
        path: String,
        name: String,
        #[serde(default = "yes", skip_serializing_if = "is_true")]
        follow: bool,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        at: Option<Cno>,
    },
    /// `listxattr` (`llistxattr` unless `follow`): the names.
    Listxattr {
        path: String,
        #[serde(default = "yes", skip_serializing_if = "is_true")]
        follow: bool,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        at: Option<Cno>,
    },
    /// `removexattr` (`lremovexattr` unless `follow`).
    Removexattr {
        path: String,
        name: String,
        #[serde(default = "yes", skip_serializing_if = "is_true")]
        follow: bool,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        at: Option<Cno>,
    },
    /// `statfs` of a mounted view.
    Statfs {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        at: Option<Cno>,
    },
    Readdir {
        path: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        at: Option<Cno>,
    },
    Readlink {
        path: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        at: Option<Cno>,
    },
    Fsync {
        path: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        at: Option<Cno>,
    },
    Fdatasync {
        path: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        at: Option<Cno>,
    },
    Sync,
    /// `mkcp [-s] -p`: prints the checkpoint number.
    Mkcp {
        #[serde(default)]
        snapshot: bool,
    },
    /// `chcp ss|cp CNO`.
    Chcp {
        cno: Cno,
        snapshot: bool,
    },
    /// `rmcp CNO`.
    Rmcp {
        cno: Cno,
    },
    Lscp,
    /// `mount [-o ro] [-o cp=CNO]` (cp= requires ro and a snapshot).
    Mount {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cp: Option<Cno>,
        #[serde(default)]
        ro: bool,
    },
    Umount {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cp: Option<Cno>,
    },
    /// `mount -o remount,ro|rw` of the latest.
    Remount {
        #[serde(default)]
        ro: bool,
    },
    /// Power loss: every mount is gone; the recovered state is one of the
    /// envelope's (mount again to look at it).
    Crash,
    /// `nilfs-clean -p PROTECTION_S` run to completion.
    Clean {
        #[serde(default)]
        protection_s: u64,
    },
    /// tests/guest/manifest.sh of a mounted view.
    Manifest {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        at: Option<Cno>,
    },
}

impl Op {
    /// The snapshot view (`mount -o ro,cp=N`) the operation works on, if
    /// any: a runner sends it only while that view is mounted.
    pub fn at(&self) -> Option<Cno> {
        match self {
            Op::Create { at, .. }
            | Op::Mkdir { at, .. }
            | Op::Symlink { at, .. }
            | Op::Link { at, .. }
            | Op::Unlink { at, .. }
            | Op::Rmdir { at, .. }
            | Op::Rename { at, .. }
            | Op::Write { at, .. }
            | Op::Read { at, .. }
            | Op::Truncate { at, .. }
            | Op::Lstat { at, .. }
            | Op::Chmod { at, .. }
            | Op::Chown { at, .. }
            | Op::Utimes { at, .. }
            | Op::Mknod { at, .. }
            | Op::Statfs { at }
            | Op::Setxattr { at, .. }
            | Op::Getxattr { at, .. }
            | Op::Listxattr { at, .. }
            | Op::Removexattr { at, .. }
            | Op::Readdir { at, .. }
            | Op::Readlink { at, .. }
            | Op::Fsync { at, .. }
            | Op::Fdatasync { at, .. }
            | Op::Manifest { at } => *at,
            _ => None,
        }
    }
}

fn is_zero(x: &i64) -> bool {
    *x == 0
}

fn yes() -> bool {
    true
}

fn is_true(x: &bool) -> bool {
    *x
}

fn is_no_dev(x: &[u32; 2]) -> bool {
    *x == [0, 0]
}

fn default_rsv() -> u32 {
    5
}
fn default_file_perm() -> u32 {
    0o644
}
fn default_dir_perm() -> u32 {
    0o755
}

/// One lscp line: number and mode (minor checkpoints are hidden by lscp
/// without -a, so they never appear).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CpEntry {
    pub cno: Cno,
    #[serde(default)]
    pub ss: bool,
}

/// What an operation returned.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    Ok,
    Err(Errno),
    Written(u64),
    /// Read result: the number of bytes and their sha256.
    Data {
        len: u64,
        sha256: String,
    },
    Stat(StatInfo),
    /// readdir: names without "." and "..", in any order.
    Names(Vec<String>),
    Target(String),
    Cno(Cno),
    Checkpoints(Vec<CpEntry>),
    Manifest(Vec<String>),
    Statfs(StatfsInfo),
}

/// What `statfs` reports (`nilfs_statfs`), less `f_type` and `f_fsid`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StatfsInfo {
    pub bsize: u64,
    pub blocks: u64,
    pub bfree: u64,
    pub bavail: u64,
    pub files: u64,
    pub ffree: u64,
    pub namelen: u64,
}

/// Observed times may trail the model's clock by the time an operation
/// takes; they must not precede it. One second of slack.
pub const TIME_SLACK_NS: i64 = 1_000_000_000;

/// The set of outcomes one branch allows.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Expect {
    /// This outcome (readdir names compared as sets, stat times within
    /// TIME_SLACK_NS, an unobserved stat time accepted).
    Exact(Outcome),
    /// `mkcp -p`: the latest cno if nothing was dirty, else (or also) a new
    /// number above it. The checkpoint gets the observed number.
    NewCno {
        latest: Cno,
        must_be_new: bool,
        snapshot: bool,
    },
    /// `lscp`: the listing shape rule of docs/model.md.
    Lscp,
    /// `statfs`: the rule of [`statfs_accepts`]; `inodes` is the view's
    /// count of inodes in use, `held` how many removed inodes the log
    /// writer may still hold (counted until the next construction).
    Statfs { inodes: u64, held: u64 },
    /// A write that stopped early for want of space: `generic_perform_write`
    /// copies page by page, each page through `nilfs_write_begin`, whose
    /// `nilfs_transaction_begin(sb, NULL, 1)` may refuse with ENOSPC; what
    /// was copied before stays and the call returns its length. Accepts
    /// `{"written": k}` with 0 < k < the write's length and the write's end
    /// `offset + k` on a page boundary (the kernel's 4 KiB page).
    ShortWrite {
        path: String,
        offset: u64,
        data: Pattern,
    },
    /// The operation is not meaningful here (the checker rejects the trace).
    Invalid(String),
    /// Any outcome: the model cannot tell what it should be (an operation
    /// on a mounted snapshot whose contents it does not know, finding M1).
    /// The state is unchanged: a snapshot view is read-only.
    Unjudged(String),
}

/// One allowed way an operation may go.
#[derive(Clone, Debug)]
pub struct Branch {
    pub expect: Expect,
    pub next: State,
}

type R<T> = Result<T, Errno>;

fn ok(next: State) -> Vec<Branch> {
    vec![Branch {
        expect: Expect::Exact(Outcome::Ok),
        next,
    }]
}

fn fail(s: &State, e: Errno) -> Vec<Branch> {
    vec![Branch {
        expect: Expect::Exact(Outcome::Err(e)),
        next: s.clone(),
    }]
}

fn invalid(s: &State, why: &str) -> Vec<Branch> {
    vec![Branch {
        expect: Expect::Invalid(why.to_string()),
        next: s.clone(),
    }]
}

/// The kernel's page size on the machines the model speaks for (x86-64,
/// arm64 with 4 KiB pages): the step of a short write.
const KERNEL_PAGE: u64 = 4096;

/// Metadata blocks charged to one namespace operation (a directory block,
/// the inode's ifile block) and to one checkpoint (summary, super root,
/// ifile/cpfile/sufile/DAT blocks and B-tree nodes).
const META_OP_BLOCKS: u64 = 2;
const CHECKPOINT_BLOCKS: u64 = 32;

impl State {
    /// A freshly made file system, not mounted.
    pub fn mkfs(geometry: Geometry, dot_nilfs: bool, now: i64) -> State {
        let live = Namespace::mkfs(dot_nilfs, now);
        let mut checkpoints = OrdMap::new();
        checkpoints.insert(
            1,
            Checkpoint {
                ns: Some(live.clone()),
                snapshot: false,
                created: now,
                bound: true,
                may_be_gone: false,
                minor: false,
            },
        );
        State {
            geometry,
            clock: now,
            live,
            checkpoints,
            next_cno: 2,
            mount: None,
            snapshot_mounts: OrdSet::new(),
            pending: Pending::default(),
            consumed_blocks: 16,
        }
    }

    /// The latest checkpoint (there is always one).
    pub fn latest(&self) -> (Cno, &Checkpoint) {
        let (c, cp) = self
            .checkpoints
            .get_max()
            .expect("model invariant: no checkpoint");
        (*c, cp)
    }

    /// What the latest checkpoint shows (always known: the model made it,
    /// or bound one it made to the listed number).
    pub fn latest_ns(&self) -> &Namespace {
        self.latest()
            .1
            .ns
            .as_ref()
            .expect("model invariant: the latest checkpoint's contents are known")
    }

    /// The namespace a view shows: the live one, or a mounted snapshot's
    /// (`None` too for a snapshot whose contents the model does not know).
    pub fn view(&self, at: Option<Cno>) -> Option<&Namespace> {
        match at {
            None => self.mount.map(|_| &self.live),
            Some(c) if self.snapshot_mounts.contains(&c) => {
                self.checkpoints.get(&c).and_then(|cp| cp.ns.as_ref())
            }
            Some(_) => None,
        }
    }

    fn writable(&self, at: Option<Cno>) -> bool {
        at.is_none() && self.mount == Some(Mount::ReadWrite)
    }

    /// Makes the live namespace a new checkpoint, if anything is dirty
    /// (`nilfs_segctor_confirm` skips a clean construction).
    fn construct(&mut self) {
        self.pending.table_at_construction = None;
        if !self.pending.dirty {
            self.pending.history = Vector::new();
            self.pending.history_times = Vector::new();
            self.pending.dsync = Vector::new();
            return;
        }
        let cno = self.next_cno;
        self.next_cno += 1;
        let minor = self.pending.history.is_empty() && self.pending.dsync.is_empty();
        self.checkpoints.insert(
            cno,
            Checkpoint {
                ns: Some(self.live.clone()),
                snapshot: false,
                created: self.clock,
                bound: false,
                may_be_gone: false,
                minor,
            },
        );
        self.consumed_blocks += CHECKPOINT_BLOCKS;
        self.pending = Pending::default();
    }

    fn blocks_for(&self, bytes: u64) -> u64 {
        let data = bytes.div_ceil(self.geometry.block_size as u64);
        data + data.div_ceil(32) + 1
    }

    /// The space rule: ENOSPC is allowed only when the upper estimate of
    /// blocks written so far, plus this operation's, exceeds the usable
    /// blocks.
    pub fn may_enospc(&self, blocks: u64) -> bool {
        self.consumed_blocks + blocks > self.geometry.usable_blocks()
    }

    /// Records a successful modification of the live namespace.
    fn modified(mut self, ns: Namespace, blocks: u64) -> State {
        for d in self.live.inodes.diff(&ns.inodes) {
            let (id, before, after) = match d {
                imbl::ordmap::DiffItem::Add(k, v) => (*k, None, Some(v)),
                imbl::ordmap::DiffItem::Remove(k, v) => (*k, Some(v), None),
                imbl::ordmap::DiffItem::Update { old, new } => (*new.0, Some(old.1), Some(new.1)),
            };
            if pages_dirtied(before, after) {
                self.pending.dirty_inodes.insert(id);
            }
        }
        self.live = ns;
        self.pending.dirty = true;
        self.pending.history.push_back(self.live.clone());
        self.pending.history_times.push_back(self.clock);
        self.consumed_blocks += blocks;
        self
    }

    /// `NILFS_IOCTL_CHANGE_CPMODE` on an existing checkpoint (chcp, and
    /// mkcp -s after its construction): a cpfile change, durable only at
    /// the next construction, which it makes happen
    /// (`nilfs_segctor_do_construct` -> `nilfs_test_metadata_dirty`).
    /// Already in that mode: nothing changes.
    fn set_mode(&mut self, cno: Cno, snapshot: bool) {
        if self.checkpoints[&cno].snapshot == snapshot {
            return;
        }
        self.remember_table();
        self.checkpoints.get_mut(&cno).expect("present").snapshot = snapshot;
        self.pending.dirty = true;
    }

    fn remember_table(&mut self) {
        if self.pending.table_at_construction.is_none() {
            self.pending.table_at_construction = Some(self.checkpoints.clone());
        }
    }

    /// Resolves a checkpoint number named by an operation.
    fn find_cp(&self, cno: Cno) -> Option<&Checkpoint> {
        self.checkpoints.get(&cno)
    }
}

/// Path operations that change the namespace: view checks, EROFS, ENOSPC.
fn namespace_op(
    s: &State,
    at: Option<Cno>,
    blocks: u64,
    vacancy_check: bool,
    f: impl FnOnce(&Namespace) -> R<Namespace>,
) -> Vec<Branch> {
    let Some(ns) = s.view(at) else {
        return invalid(s, "operation on a view that is not mounted");
    };
    match f(ns) {
        Err(e) => fail(s, e),
        Ok(_) if !s.writable(at) => fail(s, Errno::EROFS),
        // An operation that changes nothing (a rename of a name onto itself:
        // vfs_rename returns 0 when source and target are one inode) dirties
        // nothing, so it makes no checkpoint later.
        Ok(next_ns) if next_ns == *ns => ok(s.clone()),
        Ok(next_ns) => {
            // Every inode this operation changed went through
            // nilfs_mark_inode_dirty (I_DIRTY, which includes
            // I_DIRTY_DATASYNC), so it needs an inode sync: an fdatasync
            // of it makes a full checkpoint (nilfs_update_inode sets
            // NILFS_I_INODE_SYNC). Link counts, ctime, parents' times.
            let changed: Vec<Id> = next_ns
                .inodes
                .iter()
                .filter(|(id, ino)| ns.inodes.get(*id) != Some(*ino))
                .map(|(id, _)| *id)
                .collect();
            let mut next = s.clone().modified(next_ns, blocks);
            next.pending.inode_sync.extend(changed);
            let mut out = ok(next);
            if vacancy_check && s.may_enospc(blocks) {
                out.push(Branch {
                    expect: Expect::Exact(Outcome::Err(Errno::ENOSPC)),
                    next: s.clone(),
                });
            }
            out
        }
    }
}

/// Removals and renames on a read-only view: `do_unlinkat`, `do_rmdir`
/// and `do_renameat2` take write access to the mount (`mnt_want_write`,
/// EROFS) right after walking to the parent directories, before they look
/// the last component up — so a missing name is EROFS there, not ENOENT.
/// `None` when the view is writable (or not mounted).
fn read_only_first(
    s: &State,
    at: Option<Cno>,
    precheck: impl FnOnce(&Namespace) -> R<()>,
) -> Option<Vec<Branch>> {
    let ns = s.view(at)?;
    if s.writable(at) {
        return None;
    }
    Some(fail(s, precheck(ns).err().unwrap_or(Errno::EROFS)))
}

fn read_op(s: &State, at: Option<Cno>, f: impl FnOnce(&Namespace) -> R<Outcome>) -> Vec<Branch> {
    let Some(ns) = s.view(at) else {
        return invalid(s, "operation on a view that is not mounted");
    };
    let outcome = f(ns).unwrap_or_else(Outcome::Err);
    vec![Branch {
        expect: Expect::Exact(outcome),
        next: s.clone(),
    }]
}

/// chmod, chown and utimensat: `notify_change` -> `nilfs_setattr`, which
/// ends with `nilfs_mark_inode_dirty` whether or not anything changed, so
/// even a change to the same values at the same clock dirties the inode
/// (the next construction makes a checkpoint) and needs an inode sync. No
/// page is dirtied: an fsync of the file afterwards writes nothing (the
/// model's rule for metadata alone, see `Pending::dirty_inodes`). The
/// path is looked up before `mnt_want_write` (EROFS) is taken.
fn setattr(s: &State, at: Option<Cno>, f: impl Fn(&Namespace) -> R<Namespace>) -> Vec<Branch> {
    let mut out = namespace_op(s, at, 0, false, &f);
    for b in out.iter_mut() {
        if b.expect != Expect::Exact(Outcome::Ok) {
            continue;
        }
        if b.next == *s {
            b.next = s.clone().modified(s.live.clone(), 0);
        }
        // The inode it changed: the one whose ctime is now the clock's and
        // differs, or, when nothing differs, none to add (its sync state
        // is the model's already or the change is invisible).
        let before = s.live.clone();
        let after = b.next.live.clone();
        for (id, ino) in after.inodes.iter() {
            if before.inodes.get(id) != Some(ino) {
                b.next.pending.inode_sync.insert(*id);
            }
        }
    }
    out
}

/// An extended attribute call refused with `e`. Linux 6.1 looks the path
/// up (and takes write access) before it copies the name from user space
/// (`path_setxattr`, `path_getxattr`), so a bad path or a read-only mount
/// wins over a bad name; later kernels copy the name first
/// (`import_xattr_name`, seen on 6.18 under the FUSE tier), so ERANGE wins.
/// Both orders are Linux's.
fn xattr_name_first(s: &State, name: &str, e: Errno) -> Vec<Branch> {
    let mut out = fail(s, e);
    if (name.is_empty() || name.len() > 255) && e != Errno::ERANGE {
        out.extend(fail(s, Errno::ERANGE));
    }
    out
}

/// `statfs`'s rule (`nilfs_statfs`). Exact: the block size, the name
/// length (`NILFS_NAME_LEN`), `f_blocks` (every segment's blocks less the
/// ones before the first data block: `ns_first_data_block`, which is
/// mkfs.nilfs2's `NILFS_DISKHDR_SIZE` = 4096 bytes rounded up to blocks),
/// `f_files - f_ffree` (the root's `inodes_count`) and `f_bavail`
/// (`f_bfree` less the reserved segments' blocks, `ns_nrsvsegs`). Free
/// blocks are whole clean segments (`nilfs_count_free_blocks`), never the
/// two the log writer holds; how many is the file system's (the model
/// does not know how a cleaner pass ends). `f_files` is the ifile's
/// capacity (`nilfs_palloc_count_max_entries`): whole descriptor blocks
/// of entries, `entries_per_group * groups_per_desc_block` each.
pub fn statfs_accepts(g: &Geometry, inodes: u64, held: u64, got: &StatfsInfo) -> bool {
    let bs = u64::from(g.block_size.max(1));
    let bps = u64::from(g.blocks_per_segment.max(1));
    let first_data_block = 4096u64.div_ceil(bs);
    let blocks = (g.nsegments * bps).saturating_sub(first_data_block);
    let rsv = g.reserved_segments() * bps;
    let per_desc = (bs * 8) * (bs / 4);
    got.bsize == bs
        && got.namelen == NAME_LEN_MAX as u64
        && got.blocks == blocks
        && got.bfree.is_multiple_of(bps)
        && got.bfree <= g.nsegments.saturating_sub(2) * bps
        && got.bavail == got.bfree.saturating_sub(rsv)
        && got.ffree <= got.files
        && {
            let used = got.files - got.ffree;
            (inodes..=inodes + held).contains(&used)
                && ((got.files > 0 && got.files.is_multiple_of(per_desc))
                    // nilfs_palloc_count_max_entries' -ERANGE.
                    || got.ffree == 0)
        }
}

/// The transition function: every way `op` may go from `s`.
pub fn step(s: &State, op: &Op) -> Vec<Branch> {
    let now = s.clock;
    let bs = s.geometry.block_size;
    if let Some(c) = op.at() {
        let unknown = s.snapshot_mounts.contains(&c)
            && s.checkpoints.get(&c).is_some_and(|cp| cp.ns.is_none());
        if unknown {
            return vec![Branch {
                expect: Expect::Unjudged(format!(
                    "snapshot {c} is known only from an lscp listing, not what it holds"
                )),
                next: s.clone(),
            }];
        }
    }
    match op {
        // Opening a FIFO blocks until a writer or reader comes, a device
        // reaches its driver: not what the model describes. A runner's
        // truncate opens the file too (open, then ftruncate).
        Op::Read { path, at, .. }
        | Op::Truncate { path, at, .. }
        | Op::Fsync { path, at }
        | Op::Fdatasync { path, at }
        | Op::Create { path, at, .. }
            if s.view(*at).is_some_and(|ns| ns.is_special(path)) =>
        {
            invalid(s, "opening a FIFO, socket or device")
        }
        Op::Mkfs { .. } => invalid(s, "mkfs is only valid as the first line"),
        Op::Clock { now: t } => {
            if *t < s.clock {
                return invalid(s, "the clock went back");
            }
            let mut n = s.clone();
            n.clock = *t;
            ok(n)
        }
        // nilfs_transaction_begin(sb, &ti, 1) (vacancy check) in
        // nilfs_create/mkdir/symlink/link/rename and nilfs_write_begin:
        // these may fail with ENOSPC; unlink/rmdir/setattr pass 0.
        Op::Create {
            path,
            perm,
            excl,
            at,
        } => {
            let existed = s.view(*at).is_some_and(|ns| ns.lookup(path, true).is_ok());
            let mut out = namespace_op(s, *at, META_OP_BLOCKS, true, |ns| {
                ns.create(path, *perm, *excl, now)
            });
            if !existed {
                for b in out.iter_mut() {
                    if b.expect == Expect::Exact(Outcome::Ok) {
                        if let Ok(id) = b.next.live.lookup(path, true) {
                            b.next.pending.inode_sync.insert(id);
                        }
                    }
                }
            } else if let Some(b) = out.first_mut() {
                // Opening an existing file changes nothing.
                if b.expect == Expect::Exact(Outcome::Ok) {
                    b.next = s.clone();
                }
            }
            out
        }
        Op::Mkdir { path, perm, at } => namespace_op(s, *at, META_OP_BLOCKS, true, |ns| {
            ns.mkdir(path, *perm, now)
        }),
        Op::Symlink { target, path, at } => namespace_op(s, *at, META_OP_BLOCKS, true, |ns| {
            ns.symlink(target, path, bs, now)
        }),
        Op::Link { old, new, at } => read_only_first(s, *at, |ns| ns.link_precheck(old, new))
            .unwrap_or_else(|| {
                namespace_op(s, *at, META_OP_BLOCKS, true, |ns| ns.link(old, new, now))
            }),
        Op::Unlink { path, at } => read_only_first(s, *at, |ns| ns.unlink_precheck(path))
            .unwrap_or_else(|| {
                namespace_op(s, *at, META_OP_BLOCKS, false, |ns| ns.unlink(path, now))
            }),
        Op::Rmdir { path, at } => read_only_first(s, *at, |ns| ns.rmdir_precheck(path))
            .unwrap_or_else(|| {
                namespace_op(s, *at, META_OP_BLOCKS, false, |ns| ns.rmdir(path, now))
            }),
        // do_renameat2 refuses the pair of flags before any lookup.
        Op::Rename {
            noreplace: true,
            exchange: true,
            ..
        } => fail(s, Errno::EINVAL),
        Op::Rename {
            old,
            new,
            noreplace,
            exchange,
            at,
        } if *noreplace || *exchange => read_only_first(s, *at, |ns| ns.rename_precheck(old, new))
            .unwrap_or_else(|| {
                namespace_op(s, *at, META_OP_BLOCKS, true, |ns| {
                    ns.rename_flags(old, new, *noreplace, *exchange, now)
                })
            }),
        Op::Setxattr {
            path,
            name,
            follow,
            at,
            ..
        }
        | Op::Removexattr {
            path,
            name,
            follow,
            at,
        } => match s.view(*at) {
            None => invalid(s, "operation on a view that is not mounted"),
            Some(ns) => xattr_name_first(
                s,
                name,
                match ns.lookup(path, *follow) {
                    Err(e) => e,
                    Ok(_) if !s.writable(*at) => Errno::EROFS,
                    Ok(id) => ns.xattr_refusal(id, name, true),
                },
            ),
        },
        Op::Getxattr {
            path,
            name,
            follow,
            at,
        } => match s.view(*at) {
            None => invalid(s, "operation on a view that is not mounted"),
            Some(ns) => xattr_name_first(
                s,
                name,
                match ns.lookup(path, *follow) {
                    Err(e) => e,
                    Ok(id) => ns.xattr_refusal(id, name, false),
                },
            ),
        },
        Op::Listxattr { path, follow, at } => read_op(s, *at, |ns| {
            ns.lookup(path, *follow)?;
            Ok(Outcome::Names(Vec::new()))
        }),
        Op::Rename { old, new, at, .. } => {
            read_only_first(s, *at, |ns| ns.rename_precheck(old, new)).unwrap_or_else(|| {
                // nilfs_rename marks the moved inode dirty (its ctime) even when
                // the clock has not moved: it needs an inode sync as well.
                let moved = s.view(*at).and_then(|ns| ns.lookup(old, false).ok());
                let mut out =
                    namespace_op(s, *at, META_OP_BLOCKS, true, |ns| ns.rename(old, new, now));
                if let Some(id) = moved {
                    // A moved directory's ".." is rewritten by nilfs_set_link
                    // even within one parent (nilfs_rename takes dir_de for
                    // every directory), so its pages are dirty too and an
                    // fsync of it constructs.
                    let is_dir = s
                        .view(*at)
                        .is_some_and(|ns| matches!(ns.get(id).kind, Kind::Dir { .. }));
                    for b in &mut out {
                        if matches!(b.expect, Expect::Exact(Outcome::Ok)) && b.next.live != s.live {
                            b.next.pending.inode_sync.insert(id);
                            if is_dir {
                                b.next.pending.dirty_inodes.insert(id);
                            }
                        }
                    }
                }
                out
            })
        }
        Op::Write {
            path,
            offset,
            data,
            append,
            at,
        } => {
            let Some(ns) = s.view(*at) else {
                return invalid(s, "operation on a view that is not mounted");
            };
            if ns.is_special(path) {
                return invalid(s, "opening a FIFO, socket or device for writing");
            }
            // O_APPEND: the write starts at the size when it is made.
            let offset = &if *append {
                ns.lookup(path, true)
                    .ok()
                    .and_then(|id| size_of(ns, id))
                    .unwrap_or(0)
            } else {
                *offset
            };
            let blocks = s.blocks_for(data.len());
            match ns.write(path, *offset, data, now) {
                Err(e) => fail(s, e),
                Ok(_) if !s.writable(*at) => fail(s, Errno::EROFS),
                // A zero-length write never reaches the filesystem:
                // generic_write_checks returns 0 before any change, mtime
                // included, so nothing becomes dirty.
                Ok((_, 0)) => vec![Branch {
                    expect: Expect::Exact(Outcome::Written(0)),
                    next: s.clone(),
                }],
                Ok((next_ns, n)) => {
                    let id = ns.lookup(path, true).expect("write resolved it");
                    let grew = size_of(&next_ns, id) != size_of(ns, id);
                    let mut next = s.clone().modified(next_ns, blocks);
                    // generic_perform_write dirties every page it copies
                    // into (nilfs_write_end -> nilfs_set_file_dirty), even
                    // when the bytes and the times come out as they were,
                    // which the namespace comparison in `modified` cannot
                    // see (lockstep regress_013).
                    next.pending.dirty_inodes.insert(id);
                    if grew {
                        next.pending.inode_sync.insert(id);
                    }
                    let mut out = vec![Branch {
                        expect: Expect::Exact(Outcome::Written(n)),
                        next,
                    }];
                    if s.may_enospc(blocks) {
                        // __generic_file_write_iter calls file_update_time
                        // before generic_perform_write, so a write whose
                        // first page nilfs_write_begin refuses has already
                        // set mtime and ctime if the clock moved since they
                        // were last set; nilfs_dirty_inode then marks the
                        // inode for the ifile (not its pages), and the next
                        // sync makes a checkpoint (seen on Linux 6.1,
                        // docs/findings.md K7). When the model's clock has
                        // moved since the times were set, the kernel's has
                        // too: they change. When it has not, the kernel's
                        // finer clock may still have moved: the inode may
                        // or may not be dirty.
                        // (generic_update_time passes I_DIRTY_SYNC alone,
                        // so NILFS_I_INODE_SYNC stays as it was.)
                        let touched = ns.touch_times(id, now);
                        let unchanged = touched == *ns;
                        let mut refused = vec![s.clone().modified(touched, 0)];
                        if unchanged {
                            refused.push(s.clone());
                        }
                        for next in refused {
                            out.push(Branch {
                                expect: Expect::Exact(Outcome::Err(Errno::ENOSPC)),
                                next,
                            });
                        }
                        if n > KERNEL_PAGE {
                            out.push(Branch {
                                expect: Expect::ShortWrite {
                                    path: path.clone(),
                                    offset: *offset,
                                    data: data.clone(),
                                },
                                next: s.clone(),
                            });
                        }
                    }
                    out
                }
            }
        }
        Op::Truncate { path, size, at } => {
            let mut out = namespace_op(s, *at, 1, false, |ns| ns.truncate(path, *size, now));
            for b in out.iter_mut() {
                if b.expect == Expect::Exact(Outcome::Ok) {
                    let id = b
                        .next
                        .live
                        .lookup(path, true)
                        .expect("truncate resolved it");
                    // nilfs_setattr ends with mark_inode_dirty whether or not
                    // the size or the times changed, so even a truncate to
                    // the same size at the same clock dirties the inode and
                    // the next construction makes a checkpoint.
                    if b.next == *s && s.writable(*at) {
                        b.next = s.clone().modified(s.live.clone(), 1);
                    }
                    b.next.pending.inode_sync.insert(id);
                }
            }
            out
        }
        Op::Read {
            path,
            offset,
            len,
            at,
        } => read_op(s, *at, |ns| {
            let d = ns.read(path, *offset, *len)?;
            Ok(Outcome::Data {
                len: d.len() as u64,
                sha256: sha256_hex(&d),
            })
        }),
        Op::Lstat { path, at } => read_op(s, *at, |ns| ns.lstat(path).map(Outcome::Stat)),
        Op::Chmod { path, perm, at } => setattr(s, *at, |ns| ns.chmod(path, *perm, now)),
        Op::Chown {
            path,
            uid,
            gid,
            follow,
            at,
        } => setattr(s, *at, |ns| ns.chown(path, *uid, *gid, *follow, now)),
        Op::Utimes {
            path,
            mtime,
            follow,
            at,
        } => setattr(s, *at, |ns| ns.utimes(path, *mtime, *follow, now)),
        Op::Mknod {
            path,
            file_type,
            perm,
            rdev,
            at,
        } => namespace_op(s, *at, META_OP_BLOCKS, true, |ns| {
            ns.mknod(path, *file_type, *perm, *rdev, now)
        }),
        Op::Statfs { at } => match s.view(*at) {
            None => invalid(s, "operation on a view that is not mounted"),
            Some(ns) => {
                // An inode whose pages were dirtied is held by the log
                // writer's dirty list (nilfs_set_file_dirty takes igrab)
                // until a full construction writes it and lets it go
                // (nilfs_dispose_list): removed since, it is evicted only
                // then, and counted till then (nilfs_evict_inode drops
                // inodes_count). Seen on Linux 6.1 (campaign kernel seeds
                // 17 and 21, profile attrs).
                let held = if at.is_none() {
                    s.pending
                        .dirty_inodes
                        .iter()
                        .filter(|id| !ns.inodes.contains_key(*id))
                        .count() as u64
                } else {
                    0
                };
                vec![Branch {
                    expect: Expect::Statfs {
                        inodes: ns.inodes_used(),
                        held,
                    },
                    next: s.clone(),
                }]
            }
        },
        Op::Readdir { path, at } => read_op(s, *at, |ns| ns.readdir(path).map(Outcome::Names)),
        Op::Readlink { path, at } => read_op(s, *at, |ns| ns.readlink(path).map(Outcome::Target)),
        Op::Manifest { at } => read_op(s, *at, |ns| Ok(Outcome::Manifest(manifest(ns)))),
        Op::Fsync { path, at } | Op::Fdatasync { path, at } => {
            let data_only = matches!(op, Op::Fdatasync { .. });
            let Some(ns) = s.view(*at) else {
                return invalid(s, "operation on a view that is not mounted");
            };
            let id = match ns.lookup(path, true) {
                Ok(id) => id,
                Err(e) => return fail(s, e),
            };
            if !s.writable(*at) {
                return ok(s.clone()); // nothing can be dirty on a read-only view
            }
            sync_file(s, id, data_only)
        }
        Op::Sync => {
            if s.mount != Some(Mount::ReadWrite) {
                return ok(s.clone());
            }
            construct_branches(s, Outcome::Ok)
        }
        Op::Mkcp { snapshot } => {
            match s.mount {
                None => return invalid(s, "mkcp needs a mounted file system"),
                Some(Mount::ReadOnly) => return fail(s, Errno::EROFS),
                Some(Mount::ReadWrite) => {}
            }
            let (latest, _) = s.latest();
            let mut next = s.clone();
            next.construct();
            let mut out = vec![Branch {
                expect: Expect::NewCno {
                    latest,
                    must_be_new: s.pending.dirty,
                    snapshot: *snapshot,
                },
                next,
            }];
            if s.pending.dirty && s.may_enospc(CHECKPOINT_BLOCKS) {
                out.push(Branch {
                    expect: Expect::Exact(Outcome::Err(Errno::ENOSPC)),
                    next: s.clone(),
                });
            }
            out
        }
        Op::Chcp { cno, snapshot } => {
            match s.mount {
                None => return invalid(s, "chcp needs a mounted file system"),
                Some(Mount::ReadOnly) => return fail(s, Errno::EROFS),
                Some(Mount::ReadWrite) => {}
            }
            // nilfs_cpfile_change_cpmode -> nilfs_checkpoint_is_mounted:
            // the latest checkpoint and `ns_cno` are "mounted" (EBUSY to
            // make a checkpoint) before the number is even looked up.
            let (latest, _) = s.latest();
            if !*snapshot && (*cno == latest || *cno == latest + 1) {
                return fail(s, Errno::EBUSY);
            }
            cp_op(s, *cno, |next, cno| {
                // Clearing a mounted snapshot is EBUSY; setting or clearing
                // twice is a no-op that dirties nothing.
                if !*snapshot && next.snapshot_mounts.contains(&cno) {
                    return Err(Errno::EBUSY);
                }
                next.set_mode(cno, *snapshot);
                Ok(())
            })
        }
        Op::Rmcp { cno } => {
            match s.mount {
                None => return invalid(s, "rmcp needs a mounted file system"),
                Some(Mount::ReadOnly) => return fail(s, Errno::EROFS),
                Some(Mount::ReadWrite) => {}
            }
            let (latest, _) = s.latest();
            cp_op(s, *cno, |next, cno| {
                // nilfs_cpfile_delete_checkpoint: EBUSY for a snapshot. The
                // latest is refused too (rmcp never passes it for a range,
                // and s_last_cno must keep naming a valid checkpoint).
                if next.checkpoints[&cno].snapshot || cno == latest {
                    return Err(Errno::EBUSY);
                }
                next.checkpoints.remove(&cno);
                next.pending.dirty = true; // a dirty cpfile, as for chcp
                Ok(())
            })
        }
        Op::Lscp => match s.mount {
            None => invalid(s, "lscp needs a mounted file system"),
            Some(_) => vec![Branch {
                expect: Expect::Lscp,
                next: s.clone(),
            }],
        },
        Op::Mount { cp, ro } => mount(s, *cp, *ro),
        Op::Umount { cp } => match cp {
            Some(c) => {
                if !s.snapshot_mounts.contains(c) {
                    return fail(s, Errno::EINVAL);
                }
                let mut n = s.clone();
                n.snapshot_mounts.remove(c);
                ok(n)
            }
            None => {
                if s.mount.is_none() {
                    return fail(s, Errno::EINVAL);
                }
                // nilfs_put_super -> nilfs_detach_log_writer: a final
                // construction makes everything durable.
                let mut n = s.clone();
                n.construct();
                n.mount = None;
                ok(n)
            }
        },
        Op::Remount { ro } => {
            let Some(m) = s.mount else {
                return fail(s, Errno::EINVAL);
            };
            let mut n = s.clone();
            if m == Mount::ReadWrite && *ro {
                n.construct(); // nilfs_remount -> nilfs_detach_log_writer
            }
            n.mount = Some(if *ro {
                Mount::ReadOnly
            } else {
                Mount::ReadWrite
            });
            ok(n)
        }
        Op::Crash => crash(s)
            .into_iter()
            .map(|next| Branch {
                expect: Expect::Exact(Outcome::Ok),
                next,
            })
            .collect(),
        Op::Clean { protection_s } => {
            match s.mount {
                None => return invalid(s, "the cleaner needs a mounted file system"),
                Some(Mount::ReadOnly) => return fail(s, Errno::EROFS),
                Some(Mount::ReadWrite) => {}
            }
            // nilfs_xreclaim_segment hands the cleaned segments' dead
            // periods to nilfs_ioctl_delete_checkpoints: plain checkpoints
            // older than the protection period, never snapshots (EBUSY) and
            // never the latest (its blocks are live). Which ones go depends
            // on the segments chosen, so each only "may be gone". No view
            // of a surviving checkpoint changes (only blocks move).
            let mut n = s.clone();
            let (latest, _) = s.latest();
            let horizon = s
                .clock
                .saturating_sub((*protection_s as i64).saturating_mul(1_000_000_000));
            let cnos: Vec<Cno> = n.checkpoints.keys().copied().collect();
            for c in cnos {
                let cp = n.checkpoints.get_mut(&c).expect("listed");
                if !cp.snapshot && c != latest && (cp.created < horizon || *protection_s == 0) {
                    cp.may_be_gone = true;
                }
            }
            // A cleaning step is a construction of its own
            // (nilfs_clean_segments -> nilfs_segctor_construct): if
            // anything is pending, the first step that moves blocks writes
            // it as a new checkpoint; the later steps' checkpoints are MINOR
            // and hidden. Whether any step ran depends on the segments
            // chosen, so both ways are allowed.
            let mut out = ok(n.clone());
            if s.pending.dirty {
                let mut c = n;
                c.construct();
                // The checkpoint that was the latest is an ordinary one now,
                // and the pass's later steps may delete it like the others
                // (seen on Linux 6.1: campaign kernel seed 28).
                if let Some(cp) = c.checkpoints.get_mut(&latest) {
                    if !cp.snapshot && (cp.created < horizon || *protection_s == 0) {
                        cp.may_be_gone = true;
                    }
                }
                out.push(Branch {
                    expect: Expect::Exact(Outcome::Ok),
                    next: c,
                });
            }
            out
        }
    }
}

fn size_of(ns: &Namespace, id: Id) -> Option<u64> {
    match ns.inodes.get(&id).map(|i| &i.kind) {
        Some(Kind::File(f)) => Some(f.size),
        _ => None,
    }
}

/// A full construction, or ENOSPC when the space rule allows it.
fn construct_branches(s: &State, outcome: Outcome) -> Vec<Branch> {
    let mut n = s.clone();
    n.construct();
    let mut out = vec![Branch {
        expect: Expect::Exact(outcome),
        next: n,
    }];
    if s.pending.dirty && s.may_enospc(CHECKPOINT_BLOCKS) {
        out.push(Branch {
            expect: Expect::Exact(Outcome::Err(Errno::ENOSPC)),
            next: s.clone(),
        });
    }
    out
}

/// `nilfs_sync_file`: nothing if the inode is clean; fsync makes a full
/// checkpoint (`nilfs_construct_segment`); fdatasync writes a data-only
/// SYNDT segment (`nilfs_construct_dsync_segment`) unless the inode needs
/// its metadata synced (NILFS_I_INODE_SYNC: created, truncated or grown),
/// which escalates to a full checkpoint.
///
/// The kernel's log writer also constructs on its own timer (`segctord`,
/// every 5 s while anything is dirty), which the model does not see: if it
/// ran after the last change that made the inode need this sync, the sync
/// finds less to do — fsync nothing, fdatasync a data-only log of what was
/// written since. Those branches are allowed too, once the clock says the
/// timer can have fired.
fn sync_file(s: &State, id: Id, data_only: bool) -> Vec<Branch> {
    let mut out = sync_file_now(s, id, data_only);
    let full = !data_only || s.pending.inode_sync.contains(&id);
    if s.pending.dirty_inodes.contains(&id) && full && timer_may_have_run(s) {
        if let Some(k) = last_change(s, id, data_only) {
            if k < s.pending.history.len() {
                let t = timer(s, k);
                for b in sync_file_now(&t, id, data_only) {
                    if !out.iter().any(|o| o.next == b.next && o.expect == b.expect) {
                        out.push(b);
                    }
                }
            }
        }
    }
    out
}

/// The log writer's timer interval (`NILFS_SC_DEFAULT_TIMEOUT`, 5 s): the
/// first change after a construction arms it (`nilfs_segctor_start_timer`
/// from `nilfs_transaction_commit`), and it fires that long after.
const TIMER_NS: i64 = 5_000_000_000;

/// Whether the timer can have fired since the first pending change, by the
/// clock the trace gives (with the slack observed times are allowed).
fn timer_may_have_run(s: &State) -> bool {
    s.pending
        .history_times
        .front()
        .is_some_and(|t0| s.clock.saturating_sub(*t0) >= TIMER_NS - TIME_SLACK_NS)
}

/// The position in `pending.history` just after the last change to `id`
/// that a sync of it must write: any change for fsync, a metadata change
/// (the inode is new, or its kind, size, link count or permissions
/// differ) for fdatasync.
fn last_change(s: &State, id: Id, data_only: bool) -> Option<usize> {
    let latest = s.latest_ns();
    let h = &s.pending.history;
    (0..h.len()).rev().find_map(|i| {
        let before = if i == 0 { latest } else { &h[i - 1] };
        let (a, b) = (before.inodes.get(&id), h[i].inodes.get(&id));
        let changed = if data_only {
            metadata_differs(a, b)
        } else {
            pages_dirtied(a, b)
        };
        changed.then_some(i + 1)
    })
}

/// Whether a change from `before` to `after` dirtied pages of the inode
/// (`nilfs_set_file_dirty`): a file's data or size (`nilfs_write_end`,
/// `nilfs_truncate` — which `nilfs_setattr` calls only when the size
/// changes), a directory's entries or its ".." (`nilfs_commit_chunk`,
/// `nilfs_set_link`), a new directory (`nilfs_make_empty`) or symlink
/// (`page_symlink`). A new regular file is not dirty until written.
fn pages_dirtied(before: Option<&crate::fs::Inode>, after: Option<&crate::fs::Inode>) -> bool {
    let Some(a) = after else { return false };
    let Some(b) = before else {
        return !matches!(a.kind, Kind::File(_));
    };
    match (&b.kind, &a.kind) {
        (Kind::File(x), Kind::File(y)) => {
            x.size != y.size
                || x.pages.len() != y.pages.len()
                || x.pages
                    .iter()
                    .zip(y.pages.iter())
                    .any(|((i, p), (j, q))| i != j || !Arc::ptr_eq(p, q))
        }
        (
            Kind::Dir {
                entries: e1,
                parent: p1,
            },
            Kind::Dir {
                entries: e2,
                parent: p2,
            },
        ) => e1 != e2 || p1 != p2,
        (Kind::Symlink(x), Kind::Symlink(y)) => x != y,
        _ => true,
    }
}

fn metadata_differs(a: Option<&crate::fs::Inode>, b: Option<&crate::fs::Inode>) -> bool {
    match (a, b) {
        (Some(a), Some(b)) => {
            let size = |i: &crate::fs::Inode| match &i.kind {
                Kind::File(f) => Some(f.size),
                _ => None,
            };
            std::mem::discriminant(&a.kind) != std::mem::discriminant(&b.kind)
                || size(a) != size(b)
                || a.nlink != b.nlink
                || a.perm != b.perm
        }
        (None, None) => false,
        _ => true,
    }
}

/// The state after the log writer's timer wrote a checkpoint of the
/// namespace as it was after the k-th change since the latest checkpoint
/// (1 <= k <= the number of changes): that checkpoint's number is not
/// observed; the changes after it stay pending, and so do the SYNDT logs
/// written after it.
fn timer(s: &State, k: usize) -> State {
    let mut n = s.clone();
    let h = &s.pending.history;
    let base = h[k - 1].clone();
    let cno = n.next_cno;
    n.next_cno += 1;
    n.checkpoints.insert(
        cno,
        Checkpoint {
            ns: Some(base.clone()),
            snapshot: false,
            created: s.clock,
            bound: false,
            may_be_gone: false,
            minor: false,
        },
    );
    n.consumed_blocks += CHECKPOINT_BLOCKS;
    let rest: Vector<Namespace> = h.iter().skip(k).cloned().collect();
    let mut p = Pending {
        dirty: !rest.is_empty(),
        history: rest,
        history_times: s.pending.history_times.iter().skip(k).copied().collect(),
        ..Pending::default()
    };
    for d in base.inodes.diff(&s.live.inodes) {
        let (id, a, b) = match d {
            imbl::ordmap::DiffItem::Add(k, v) => (*k, None, Some(v)),
            imbl::ordmap::DiffItem::Remove(k, v) => (*k, Some(v), None),
            imbl::ordmap::DiffItem::Update { old, new } => (*new.0, Some(old.1), Some(new.1)),
        };
        if pages_dirtied(a, b) {
            p.dirty_inodes.insert(id);
        }
        if metadata_differs(a, b) {
            p.inode_sync.insert(id);
        }
    }
    p.dsync = s
        .pending
        .dsync
        .iter()
        .filter(|l| l.after > k)
        .map(|l| DsyncLog {
            after: l.after - k,
            ..l.clone()
        })
        .collect();
    n.pending = p;
    n
}

/// `nilfs_sync_file` on the state as the model has it.
fn sync_file_now(s: &State, id: Id, data_only: bool) -> Vec<Branch> {
    let latest = s.latest_ns();
    let live_ino = s.live.inodes.get(&id);
    if !s.pending.dirty_inodes.contains(&id) {
        return ok(s.clone());
    }
    if !data_only || s.pending.inode_sync.contains(&id) {
        return construct_branches(s, Outcome::Ok);
    }
    let (Some(Kind::File(now_f)), Some(Kind::File(old_f))) = (
        live_ino.map(|i| &i.kind),
        latest.inodes.get(&id).map(|i| &i.kind),
    ) else {
        return construct_branches(s, Outcome::Ok);
    };
    let mut pages = OrdMap::new();
    let max_page = now_f.size.div_ceil(PAGE);
    for (idx, p) in now_f.pages.iter() {
        // Dirty pages: written since the checkpoint (a new page object),
        // whatever their contents.
        if !old_f.pages.get(idx).is_some_and(|o| Arc::ptr_eq(o, p)) {
            pages.insert(*idx, p.clone());
        }
    }
    for idx in old_f.pages.keys() {
        if *idx < max_page && !now_f.pages.contains_key(idx) {
            pages.insert(*idx, Arc::new(vec![0; PAGE as usize]));
        }
    }
    let mut n = s.clone();
    n.pending.dsync.push_back(DsyncLog {
        after: s.pending.history.len(),
        id,
        pages,
    });
    ok(n)
}

fn cp_op(s: &State, cno: Cno, f: impl Fn(&mut State, Cno) -> R<()>) -> Vec<Branch> {
    let Some(cp) = s.find_cp(cno) else {
        return fail(s, Errno::ENOENT);
    };
    let mut branches = Vec::new();
    if cp.may_be_gone {
        // The cleaner may have deleted it.
        let mut gone = s.clone();
        gone.checkpoints.remove(&cno);
        branches.push(Branch {
            expect: Expect::Exact(Outcome::Err(Errno::ENOENT)),
            next: gone,
        });
    }
    let mut n = s.clone();
    n.remember_table();
    if let Some(c) = n.checkpoints.get_mut(&cno) {
        c.may_be_gone = false;
    }
    match f(&mut n, cno) {
        Ok(()) => branches.push(Branch {
            expect: Expect::Exact(Outcome::Ok),
            next: n,
        }),
        Err(e) => {
            let mut kept = s.clone();
            if let Some(c) = kept.checkpoints.get_mut(&cno) {
                c.may_be_gone = false;
            }
            branches.push(Branch {
                expect: Expect::Exact(Outcome::Err(e)),
                next: kept,
            })
        }
    }
    branches
}

fn mount(s: &State, cp: Option<Cno>, ro: bool) -> Vec<Branch> {
    match cp {
        None => {
            if s.mount.is_some() {
                return fail(s, Errno::EBUSY);
            }
            let mut n = s.clone();
            n.mount = Some(if ro {
                Mount::ReadOnly
            } else {
                Mount::ReadWrite
            });
            ok(n)
        }
        Some(c) => {
            // nilfs_attach_snapshot: "The specified checkpoint is not a
            // snapshot" -> EINVAL; cp= needs a read-only mount.
            if !ro {
                return fail(s, Errno::EINVAL);
            }
            if s.snapshot_mounts.contains(&c) {
                return fail(s, Errno::EBUSY);
            }
            match s.checkpoints.get(&c) {
                Some(cp) if cp.snapshot => {
                    let mut n = s.clone();
                    n.snapshot_mounts.insert(c);
                    ok(n)
                }
                _ => fail(s, Errno::EINVAL),
            }
        }
    }
}

/// The crash envelope (docs/model.md, "Crash"): every state recovery may
/// leave. For each point k since the latest checkpoint (k = 0: none; k > 0:
/// the segment constructor's timer made a checkpoint of the namespace after
/// the k-th modification), the SYNDT logs written after k are replayed
/// (`nilfs_do_roll_forward` -> `nilfs_recover_dsync_blocks`: the blocks are
/// copied into the file as of that checkpoint, its size is unchanged). A
/// timer checkpoint or a salvage makes one more checkpoint. chcp/rmcp since
/// the last construction may be lost. Nothing is mounted afterwards.
pub fn crash(s: &State) -> Vec<State> {
    let p = &s.pending;
    let mut tables = vec![s.checkpoints.clone()];
    if let Some(t) = &p.table_at_construction {
        tables.push(t.clone());
    }
    let mut out: Vec<State> = Vec::new();
    for k in 0..=p.history.len() {
        let base = if k == 0 {
            s.latest_ns().clone()
        } else {
            p.history[k - 1].clone()
        };
        let mut ns = base;
        let mut salvaged = false;
        for log in p.dsync.iter().filter(|l| l.after > k) {
            if let Some(ino) = ns.inodes.get(&log.id) {
                if let Kind::File(f) = &ino.kind {
                    let mut f: FileData = f.clone();
                    for (idx, page) in log.pages.iter() {
                        if *idx * PAGE >= f.size {
                            continue;
                        }
                        let mut page = (**page).clone();
                        let keep = (f.size - *idx * PAGE).min(PAGE) as usize;
                        page[keep..].fill(0);
                        f.pages.insert(*idx, Arc::new(page));
                        salvaged = true;
                    }
                    let mut ino = ino.clone();
                    ino.kind = Kind::File(f);
                    ns.inodes.insert(log.id, ino);
                }
            }
        }
        for table in &tables {
            let mut n = s.clone();
            n.checkpoints = table.clone();
            n.mount = None;
            n.snapshot_mounts = OrdSet::new();
            n.pending = Pending::default();
            n.live = ns.clone();
            // k = 0 with chcp/rmcp since the last construction: the timer
            // may have written the dirty cpfile as a checkpoint of the
            // unchanged namespace.
            let timer_cp = k == 0 && p.dirty && p.table_at_construction.is_some();
            let made: &[bool] = if k > 0 || salvaged {
                &[true]
            } else if timer_cp {
                &[false, true]
            } else {
                &[false]
            };
            for &made in made {
                let mut n = n.clone();
                if made {
                    let cno = n.next_cno;
                    n.next_cno += 1;
                    n.checkpoints.insert(
                        cno,
                        Checkpoint {
                            ns: Some(ns.clone()),
                            snapshot: false,
                            created: s.clock,
                            bound: false,
                            may_be_gone: false,
                            minor: !(k > 0 || salvaged),
                        },
                    );
                }
                if !out.contains(&n) {
                    out.push(n);
                }
            }
        }
    }
    out
}

impl Branch {
    /// Does this branch allow `observed`? If so, the state after it.
    /// Every state in which `observed` leaves the file system along this
    /// branch: one for most outcomes, two when a printed checkpoint number
    /// can be read two ways (see the `mkcp` case).
    pub fn accept_all(&self, observed: &Outcome) -> Vec<State> {
        let (
            Expect::NewCno {
                must_be_new,
                snapshot,
                ..
            },
            Outcome::Cno(c),
        ) = (&self.expect, observed)
        else {
            if let (Expect::Lscp, Outcome::Checkpoints(list)) = (&self.expect, observed) {
                return lscp_accept(&self.next, list);
            }
            return self.accept(observed).into_iter().collect();
        };
        let (mcno, mcp) = self.next.latest();
        let mcp = mcp.clone();
        let mut ways: Vec<State> = Vec::new();
        let mut place = |f: &dyn Fn(&mut State)| {
            let mut n = self.next.clone();
            f(&mut n);
            n.next_cno = n.next_cno.max(c + 1);
            n.checkpoints.get_mut(c).expect("just placed").bound = true;
            if *snapshot {
                n.set_mode(*c, true);
            }
            ways.push(n);
        };
        if *c == mcno {
            // The model's own number.
            place(&|_| {});
        }
        if *c > mcno && !mcp.bound {
            // The model's latest (new or not) has an unobserved number; the
            // kernel's timer made checkpoints the model does not count, so
            // its real number is `c`.
            place(&|n| {
                n.checkpoints.remove(&mcno);
                n.checkpoints.insert(*c, mcp.clone());
            });
        }
        if *c > mcno && !*must_be_new {
            // Nothing was dirty for the model, yet a checkpoint was made
            // (seen on Linux 6.1 after a sync that followed `mkcp -s`): it
            // shows the latest and, made without a change to any file, is
            // MINOR (hidden by lscp).
            place(&|n| {
                n.checkpoints.insert(
                    *c,
                    Checkpoint {
                        minor: true,
                        ..mcp.clone()
                    },
                );
            });
        }
        ways
    }

    pub fn accept(&self, observed: &Outcome) -> Option<State> {
        match (&self.expect, observed) {
            (Expect::Exact(want), got) => {
                outcome_matches(want, got, self.next.geometry.block_size).then(|| self.next.clone())
            }
            (Expect::NewCno { snapshot, .. }, Outcome::Ok) => {
                // `mkcp` without -p: the number is not observed.
                let mut n = self.next.clone();
                let (c, _) = n.latest();
                if *snapshot {
                    n.set_mode(c, true);
                }
                Some(n)
            }
            (Expect::NewCno { .. }, Outcome::Cno(_)) => {
                self.accept_all(observed).into_iter().next()
            }
            (Expect::Lscp, Outcome::Checkpoints(list)) => {
                lscp_accept(&self.next, list).into_iter().next()
            }
            (Expect::Statfs { inodes, held }, Outcome::Statfs(got)) => {
                statfs_accepts(&self.next.geometry, *inodes, *held, got).then(|| self.next.clone())
            }
            (Expect::Unjudged(_), _) => Some(self.next.clone()),
            (Expect::ShortWrite { path, offset, data }, Outcome::Written(k)) => {
                let s = &self.next;
                if *k == 0 || *k >= data.len() || (offset + k) % KERNEL_PAGE != 0 {
                    return None;
                }
                let ns = s.live.clone();
                let id = ns.lookup(path, true).ok()?;
                let (next_ns, _) = ns.write_prefix(path, *offset, data, *k, s.clock).ok()?;
                let grew = size_of(&next_ns, id) != size_of(&ns, id);
                let blocks = s.blocks_for(*k);
                let mut n = s.clone().modified(next_ns, blocks);
                if grew {
                    n.pending.inode_sync.insert(id);
                }
                Some(n)
            }
            _ => None,
        }
    }

    /// The model's own prediction (for tests that run the model alone).
    pub fn predicted(&self) -> Option<(Outcome, State)> {
        match &self.expect {
            Expect::Exact(o) => Some((o.clone(), self.next.clone())),
            Expect::NewCno {
                latest,
                must_be_new,
                ..
            } => {
                let c = if *must_be_new {
                    self.next.latest().0
                } else {
                    *latest
                };
                let o = Outcome::Cno(c);
                self.accept(&o).map(|n| (o, n))
            }
            Expect::Lscp => {
                let list: Vec<CpEntry> = self
                    .next
                    .checkpoints
                    .iter()
                    .filter(|(_, cp)| !cp.minor || cp.snapshot)
                    .map(|(c, cp)| CpEntry {
                        cno: *c,
                        ss: cp.snapshot,
                    })
                    .collect();
                let o = Outcome::Checkpoints(list);
                self.accept(&o).map(|n| (o, n))
            }
            Expect::Statfs { inodes, .. } => {
                let g = &self.next.geometry;
                let bs = u64::from(g.block_size);
                let bps = u64::from(g.blocks_per_segment);
                let per_desc = (bs * 8) * (bs / 4);
                let bfree = g.nsegments.saturating_sub(2) * bps;
                let files = inodes.div_ceil(per_desc).max(1) * per_desc;
                let o = Outcome::Statfs(StatfsInfo {
                    bsize: bs,
                    blocks: (g.nsegments * bps).saturating_sub(4096u64.div_ceil(bs)),
                    bfree,
                    bavail: bfree.saturating_sub(g.reserved_segments() * bps),
                    files,
                    ffree: files - inodes,
                    namelen: NAME_LEN_MAX as u64,
                });
                self.accept(&o).map(|n| (o, n))
            }
            // The model's own runs never stop a write early, and know every
            // checkpoint they made.
            Expect::ShortWrite { .. } | Expect::Invalid(_) | Expect::Unjudged(_) => None,
        }
    }
}

/// Exact outcome comparison with the two allowed freedoms.
/// Exact outcome comparison with the allowed freedoms: readdir order, stat
/// times within [`TIME_SLACK_NS`] after the model's, and a directory's size,
/// which is whole blocks (`nilfs_make_empty` starts it at one block, and it
/// grows a block at a time: `nilfs_add_link`), as many as its entries' layout
/// needs — the model states only that it is a non-zero multiple of
/// `block_size`.
pub fn outcome_matches(want: &Outcome, got: &Outcome, block_size: u32) -> bool {
    match (want, got) {
        (Outcome::Names(a), Outcome::Names(b)) => {
            let (mut a, mut b) = (a.clone(), b.clone());
            a.sort();
            b.sort();
            a == b
        }
        (Outcome::Stat(a), Outcome::Stat(b)) => {
            let time_ok = |m: Option<i64>, o: Option<i64>| match (m, o) {
                (Some(m), Some(o)) => o >= m && o - m <= TIME_SLACK_NS,
                _ => true,
            };
            // An id or device number is compared when both sides report it
            // (traces recorded before they were reported have none).
            fn same<T: PartialEq>(m: Option<T>, o: Option<T>) -> bool {
                m.is_none() || o.is_none() || m == o
            }
            let times_ok = time_ok(a.mtime, b.mtime)
                && time_ok(a.ctime, b.ctime)
                && same(a.uid, b.uid)
                && same(a.gid, b.gid)
                && same(a.rdev, b.rdev);
            let size_ok = if a.file_type == FileType::Dir {
                b.size > 0 && b.size % u64::from(block_size.max(1)) == 0
            } else {
                a.size == b.size
            };
            times_ok
                && size_ok
                && StatInfo {
                    mtime: None,
                    ctime: None,
                    uid: None,
                    gid: None,
                    rdev: None,
                    size: 0,
                    ..a.clone()
                } == StatInfo {
                    mtime: None,
                    ctime: None,
                    uid: None,
                    gid: None,
                    rdev: None,
                    size: 0,
                    ..b.clone()
                }
        }
        _ => want == got,
    }
}

/// The lscp shape rule (docs/model.md): cnos strictly increase; every bound
/// checkpoint is listed with its mode unless a cleaner may have removed it;
/// no snapshot is listed that the model does not know; every unbound
/// checkpoint is matched, in order, by a distinct plain entry with a cno at
/// least its own; the last entry is the model's latest. Extra plain entries
/// are the segment constructor's timer checkpoints. Returns the state with
/// the cleaner's removals resolved and the latest bound to the listed cno.
/// One unbound checkpoint to find in an lscp listing.
struct Unbound {
    cno: Cno,
    ss: bool,
    /// The cleaner may have removed it: it may have no entry.
    optional: bool,
}

/// Entries for `items`, in order: each a distinct unused entry of its mode
/// with a number at least its own, strictly after the previous one. With
/// `keep_optional`, an optional item takes an entry whenever the mandatory
/// ones after it still fit; without, optional items take none. `None` if a
/// mandatory item finds no entry. Greedy earliest matching is optimal for
/// the mandatory items (numbers and entries both increase).
fn match_unbound(
    list: &[CpEntry],
    used: &[bool],
    items: &[Unbound],
    keep_optional: bool,
) -> Option<Vec<Option<usize>>> {
    let eligible =
        |i: usize, it: &Unbound| !used[i] && list[i].ss == it.ss && list[i].cno >= it.cno;
    let mandatory_fit = |rest: &[Unbound], mut from: usize| {
        rest.iter().filter(|it| !it.optional).all(|it| {
            match (from..list.len()).find(|&i| eligible(i, it)) {
                Some(i) => {
                    from = i + 1;
                    true
                }
                None => false,
            }
        })
    };
    let mut from = 0;
    let mut out = Vec::with_capacity(items.len());
    for (k, it) in items.iter().enumerate() {
        let e = (from..list.len()).find(|&i| eligible(i, it));
        let take = match (it.optional, e) {
            (false, None) => return None,
            (false, Some(i)) => Some(i),
            (true, Some(i)) if keep_optional && mandatory_fit(&items[k + 1..], i + 1) => Some(i),
            (true, _) => None,
        };
        if let Some(i) = take {
            from = i + 1;
        }
        out.push(take);
    }
    Some(out)
}

/// The states an lscp listing leaves (the shape rule of docs/model.md). A
/// checkpoint the cleaner may have removed and whose number was never
/// observed cannot always be told from a timer checkpoint, so up to two
/// readings come back: it survived where an entry allows, or it is gone.
fn lscp_accept(s: &State, list: &[CpEntry]) -> Vec<State> {
    if list.windows(2).any(|w| w[0].cno >= w[1].cno) {
        return Vec::new();
    }
    // lscp without -a hides MINOR checkpoints that are not snapshots.
    let shown = |cp: &Checkpoint| !cp.minor || cp.snapshot;
    let Some((latest_cno, latest_cp)) = s
        .checkpoints
        .iter()
        .rev()
        .find(|(_, cp)| shown(cp))
        .map(|(c, cp)| (*c, cp))
    else {
        return if list.is_empty() {
            vec![s.clone()]
        } else {
            Vec::new()
        };
    };
    let Some(last) = list.last() else {
        return Vec::new();
    };
    if last.ss != latest_cp.snapshot || last.cno < latest_cno {
        return Vec::new();
    }
    if latest_cp.bound && last.cno != latest_cno {
        return Vec::new();
    }
    let mut base = s.clone();
    let mut used = vec![false; list.len()];
    for (c, cp) in s.checkpoints.iter() {
        if !cp.bound || *c == latest_cno || !shown(cp) {
            continue;
        }
        match list.iter().position(|e| e.cno == *c) {
            Some(i) if list[i].ss == cp.snapshot => used[i] = true,
            Some(_) => return Vec::new(),
            None if cp.may_be_gone => {
                base.checkpoints.remove(c);
            }
            None => return Vec::new(),
        }
    }
    *used.last_mut().expect("non-empty") = true;
    let unbound: Vec<(Cno, Unbound)> = s
        .checkpoints
        .iter()
        .filter(|(c, cp)| !cp.bound && **c != latest_cno && shown(cp))
        .map(|(c, cp)| {
            (
                *c,
                Unbound {
                    cno: *c,
                    ss: cp.snapshot,
                    optional: cp.may_be_gone,
                },
            )
        })
        .collect();
    let items: Vec<Unbound> = unbound.iter().map(|(_, u)| Unbound { ..*u }).collect();
    let mut out: Vec<State> = Vec::new();
    for keep_optional in [true, false] {
        let Some(assign) = match_unbound(list, &used, &items, keep_optional) else {
            continue;
        };
        let mut n = base.clone();
        let mut taken = used.clone();
        for ((c, _), a) in unbound.iter().zip(&assign) {
            match a {
                Some(i) => {
                    taken[*i] = true;
                    if let Some(x) = n.checkpoints.get_mut(c) {
                        x.may_be_gone = false;
                    }
                }
                None => {
                    n.checkpoints.remove(c);
                }
            }
        }
        // Every listed snapshot is one the model knows.
        if list.iter().zip(&taken).any(|(e, t)| e.ss && !t) {
            continue;
        }
        let mut n = finish_lscp(n, latest_cno, last, shown);
        learn_unpredicted(&mut n, list, &taken);
        if !out.contains(&n) {
            out.push(n);
        }
    }
    out
}

/// Finding M1: listed plain entries that no checkpoint of the model's took
/// are checkpoints the kernel made on its own (the segment constructor's
/// timer, a cleaner step). They exist, so a later `rmcp` or `chcp` of one
/// must succeed: each is learned as a plain checkpoint with that number
/// and unknown contents. Its creation time is that of the nearest bound
/// checkpoint below it (a lower bound, so the cleaner's protection period
/// only ever allows more removals, never fewer). Numbers the model still
/// holds (an unbound checkpoint's provisional number) and numbers above
/// the model's latest (when the latest could not be bound) are left alone.
fn learn_unpredicted(n: &mut State, list: &[CpEntry], taken: &[bool]) {
    let (latest, _) = n.latest();
    for (e, _) in list.iter().zip(taken).filter(|(_, t)| !**t) {
        if e.ss || e.cno >= latest || n.checkpoints.contains_key(&e.cno) {
            continue;
        }
        let created = n
            .checkpoints
            .range(..e.cno)
            .rev()
            .find(|(_, cp)| cp.bound)
            .map_or(0, |(_, cp)| cp.created);
        n.checkpoints.insert(
            e.cno,
            Checkpoint {
                ns: None,
                snapshot: false,
                created,
                bound: true,
                may_be_gone: false,
                minor: false,
            },
        );
    }
}

/// The common end of an accepted lscp: what is shown can no longer be gone,
/// and the latest is bound to the listed number.
fn finish_lscp(
    mut n: State,
    latest_cno: Cno,
    last: &CpEntry,
    shown: impl Fn(&Checkpoint) -> bool,
) -> State {
    let cnos: Vec<Cno> = n.checkpoints.keys().copied().collect();
    for c in cnos {
        let cp = n.checkpoints.get_mut(&c).expect("listed");
        if shown(cp) {
            cp.may_be_gone = false;
        }
    }
    if last.cno != latest_cno {
        // A hidden checkpoint after the listed latest has an unknown
        // number too: if the observed one does not fit below it, nothing
        // is learnt.
        if n.checkpoints
            .range(latest_cno + 1..)
            .next()
            .is_some_and(|(c, _)| last.cno >= *c)
        {
            return n;
        }
        let cp = n.checkpoints.remove(&latest_cno).expect("latest");
        n.checkpoints.insert(last.cno, cp);
        n.next_cno = n.next_cno.max(last.cno + 1);
    }
    n.checkpoints.get_mut(&last.cno).expect("latest").bound = true;
    n
}
