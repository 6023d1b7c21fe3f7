//! The workload generator: deterministic, and biased by the model's state
//! so that most operations mean something.
//!
//! One seed gives one workload. While it writes the workload, the generator
//! runs the model along ([`nilfs_model::step`], taking the branch the model
//! predicts, success before ENOSPC), so it knows which names exist, which
//! are directories, which files were just written, which checkpoints are
//! snapshots — and picks mostly existing names, sometimes names that do not
//! exist, are over-long or go through a file, cross-directory renames,
//! renames onto non-empty directories and into their own subtrees, links
//! that push link counts, writes that leave holes, truncates across the
//! boundary between the direct map (6 blocks) and the B-tree, checkpoint
//! churn, and writes that fill the device. The same workload runs on any
//! implementation: checkpoint numbers are references resolved by the runner
//! (see [`crate::Resolver`]).
//!
//! A workload of length n is a prefix of the one of length n + 1 with the
//! same seed and profile (before the epilogue), so shrinking by length is
//! meaningful. `nilref gen` prints one; the lockstep tests, the demo and the
//! campaigns all use this generator, never a copy of it.

use crate::to_value;
use nilfs_model::fs::{FileType, Kind, Namespace};
use nilfs_model::pattern::{splitmix64, Pattern};
use nilfs_model::state::Mount;
use nilfs_model::{step, Cno, CpEntry, Errno, Geometry, Op, Outcome, State};
use serde_json::{json, Value};
use std::str::FromStr;

/// Nanoseconds per second (the model's clock is in ns).
const NS: i64 = 1_000_000_000;
/// Pointers in a direct bmap (`NILFS_DIRECT_NBLOCKS`): a file with a block
/// past this many needs a B-tree.
const DIRECT_BLOCKS: u64 = 6;
/// How deep generated directories nest.
const MAX_DEPTH: usize = 3;

/// What a workload concentrates on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Profile {
    /// A bit of everything.
    Mixed,
    /// Names: create, mkdir, symlink, link, unlink, rmdir, rename, lookups.
    Namespace,
    /// File contents: writes with holes, truncates across the direct/B-tree
    /// boundary, reads, fsync and fdatasync.
    Data,
    /// mkcp, mkcp -s, chcp, rmcp, lscp and snapshot mounts among changes.
    Checkpoints,
    /// Large writes that fill the device, deletions, syncs, the cleaner.
    Enospc,
    /// CrashMonkey's shape: one to three operations, then an fsync-family
    /// call (and, where the implementation can be cut, a power loss).
    Crash,
    /// Attributes and special files: chmod (setuid and setgid bits
    /// included), chown and lchown, utimensat, mknod of FIFOs, sockets and
    /// devices, statfs and O_APPEND writes, among creations, links, renames
    /// and syncs.
    Attrs,
}

impl Profile {
    pub const ALL: [Profile; 7] = [
        Profile::Mixed,
        Profile::Namespace,
        Profile::Data,
        Profile::Checkpoints,
        Profile::Enospc,
        Profile::Crash,
        Profile::Attrs,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Profile::Mixed => "mixed",
            Profile::Namespace => "namespace",
            Profile::Data => "data",
            Profile::Checkpoints => "checkpoints",
            Profile::Enospc => "enospc",
            Profile::Crash => "crash",
            Profile::Attrs => "attrs",
        }
    }

    /// The geometry a profile runs on by default: 1 KiB blocks, 64-block
    /// segments, and the segments mkfs.nilfs2 makes of a 32 MiB device
    /// (511), or of a 2 MiB one (31) for `enospc`, so that it fills quickly.
    pub fn default_geometry(self) -> Geometry {
        let nsegments = match self {
            Profile::Enospc => 31,
            _ => 511,
        };
        Geometry {
            block_size: 1024,
            blocks_per_segment: 64,
            nsegments,
            r_segments_percentage: 5,
        }
    }
}

impl FromStr for Profile {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Profile::ALL
            .into_iter()
            .find(|p| p.name() == s)
            .ok_or_else(|| {
                let names: Vec<&str> = Profile::ALL.iter().map(|p| p.name()).collect();
                format!("unknown profile {s:?} (one of {})", names.join(", "))
            })
    }
}

/// Which operations the implementation under test can be given.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Features {
    /// Power loss (`crash` then `mount`): only for an implementation whose
    /// device can be cut (ours).
    pub crash: bool,
    /// Unmount and mount again, read-only remounts.
    pub remount: bool,
    /// `mount -o ro,cp=N` of snapshots with reads on them.
    pub snapshot_mounts: bool,
    /// `clock` lines (an injected clock; a kernel's clock cannot be set).
    pub clock: bool,
    /// The cleaner (`nilfs-clean -p 0`).
    pub clean: bool,
    /// chmod, chown, utimensat, mknod, statfs and O_APPEND (a reader that
    /// shows no owners or special files, GRUB's, leaves them out).
    pub attrs: bool,
    /// The checkpoint tools (mkcp, chcp, rmcp, lscp): NILFS2's ioctls,
    /// which a FUSE mount cannot carry (`NILFS_IOCTL_GET_CPINFO` passes a
    /// pointer to user memory, and FUSE's restricted ioctls copy only the
    /// argument itself).
    pub checkpoints: bool,
}

impl Features {
    /// Everything nilfs-ref's lockstep adapter runs (the cleaner not: it
    /// makes checkpoints the model cannot number, and lockstep compares
    /// numbers exactly).
    pub const ALL: Features = Features {
        crash: true,
        remount: true,
        snapshot_mounts: true,
        clock: true,
        clean: false,
        attrs: true,
        checkpoints: true,
    };
    /// A mounted file system driven by system calls and the nilfs-tools
    /// (`nilref exec` without `--device`): no mounts, no clock, no crash.
    pub const MOUNTED: Features = Features {
        crash: false,
        remount: false,
        snapshot_mounts: false,
        clock: false,
        clean: true,
        attrs: true,
        checkpoints: true,
    };
    /// `nilref mount`'s FUSE mount driven by system calls: no mounts, no
    /// clock, no crash, no checkpoint ioctls, no cleaner (its ioctls too).
    pub const FUSE: Features = Features {
        crash: false,
        remount: false,
        snapshot_mounts: false,
        clock: false,
        clean: false,
        attrs: true,
        checkpoints: false,
    };
    /// A device the runner may mount and unmount (`nilref exec --device`).
    pub const DEVICE: Features = Features {
        crash: false,
        remount: true,
        snapshot_mounts: true,
        clock: false,
        clean: true,
        attrs: true,
        checkpoints: true,
    };
}

/// What to generate.
#[derive(Clone, Debug)]
pub struct GenConfig {
    pub seed: u64,
    /// Generation steps (each is one to a few operations).
    pub len: usize,
    pub profile: Profile,
    pub geometry: Geometry,
    /// The mkfs leaves `/.nilfs` (nilfs-utils <= 2.2.x, and ours).
    pub dot_nilfs: bool,
    pub features: Features,
    /// End with `sync`, the live manifest, `lscp` and `umount`, so the
    /// final state is observed and durable.
    pub epilogue: bool,
    /// The clock at mkfs (ns): where `clock` lines start from.
    pub clock: i64,
    /// Take a snapshot (`mkcp -s`, then `sync` so that its flag is on
    /// disk) before this generation step.
    pub snapshot_at: Option<usize>,
}

impl GenConfig {
    pub fn new(seed: u64, len: usize, profile: Profile) -> GenConfig {
        GenConfig {
            seed,
            len,
            profile,
            geometry: profile.default_geometry(),
            dot_nilfs: true,
            features: Features::ALL,
            epilogue: true,
            clock: 0,
            snapshot_at: None,
        }
    }
}

/// A generated workload: JSON lines, starting with `mkfs` and `mount`.
#[derive(Clone, Debug, PartialEq)]
pub struct Workload {
    pub lines: Vec<Value>,
}

impl Workload {
    /// JSON Lines text, one operation a line.
    pub fn to_jsonl(&self) -> String {
        self.lines.iter().map(|l| l.to_string() + "\n").collect()
    }
}

/// Generates the workload `cfg` describes.
pub fn generate(cfg: &GenConfig) -> Workload {
    let mut g = Generator::new(cfg);
    let mkfs = Op::Mkfs {
        block_size: cfg.geometry.block_size,
        blocks_per_segment: cfg.geometry.blocks_per_segment,
        nsegments: cfg.geometry.nsegments,
        r_segments_percentage: cfg.geometry.r_segments_percentage,
        dot_nilfs: cfg.dot_nilfs,
        clock: cfg.clock,
    };
    g.lines.push(to_value(&mkfs));
    g.emit(Op::Mount {
        cp: None,
        ro: false,
    });
    for i in 0..cfg.len {
        if cfg.snapshot_at == Some(i) && g.mounted_rw() && cfg.features.checkpoints {
            g.emit(Op::Mkcp { snapshot: true });
            g.emit(Op::Sync);
        }
        g.step_once(i);
    }
    if cfg.epilogue {
        g.finish();
    }
    Workload { lines: g.lines }
}

/// splitmix64 in counter mode: small, seedable, the same everywhere.
#[derive(Clone, Debug)]
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        splitmix64(self.0)
    }
    fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            self.next() % n
        }
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
    fn pick<'a, T>(&mut self, items: &'a [T]) -> Option<&'a T> {
        if items.is_empty() {
            None
        } else {
            Some(&items[self.below(items.len() as u64) as usize])
        }
    }
    fn weighted<T: Copy>(&mut self, table: &[(T, u64)]) -> T {
        let total: u64 = table.iter().map(|(_, w)| w).sum();
        let mut x = self.below(total);
        for (t, w) in table {
            if x < *w {
                return *t;
            }
            x -= w;
        }
        table[0].0
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Action {
    Create,
    Mkdir,
    Symlink,
    Link,
    Unlink,
    Rmdir,
    Rename,
    Write,
    Read,
    Truncate,
    Lstat,
    Readdir,
    Readlink,
    Fsync,
    Fdatasync,
    Sync,
    Mkcp,
    Snapshot,
    Chcp,
    Rmcp,
    Lscp,
    SnapshotMount,
    Remount,
    RemountRo,
    Crash,
    Tick,
    Clean,
    Manifest,
    Fill,
    Core,
    Chmod,
    Chown,
    Utimes,
    Mknod,
    Statfs,
    Append,
    Xattr,
}

use Action as A;

/// Each profile's actions with their weights, in the order the weighted
/// pick walks them (the order is part of what a seed gives), a line
/// per kind: names, contents, attributes, lookups, syncs, checkpoints,
/// mounts and the rest.
#[rustfmt::skip]
fn table(p: Profile) -> &'static [(Action, u64)] {
    match p {
        Profile::Mixed => &[
            (A::Create, 4), (A::Mkdir, 2), (A::Symlink, 1), (A::Link, 1),
            (A::Unlink, 2), (A::Rmdir, 1), (A::Rename, 2),
            (A::Write, 8), (A::Read, 3), (A::Truncate, 2),
            (A::Lstat, 1), (A::Readdir, 1), (A::Readlink, 1),
            (A::Fsync, 1), (A::Fdatasync, 2), (A::Sync, 2),
            (A::Mkcp, 1), (A::Snapshot, 1), (A::Chcp, 1),
            (A::Rmcp, 1), (A::Lscp, 1), (A::SnapshotMount, 1),
            (A::Remount, 1), (A::RemountRo, 1), (A::Crash, 1), (A::Tick, 1),
            (A::Manifest, 1),
        ],
        Profile::Namespace => &[
            (A::Create, 6), (A::Mkdir, 4), (A::Symlink, 3), (A::Link, 3),
            (A::Unlink, 3), (A::Rmdir, 3), (A::Rename, 6),
            (A::Write, 2),
            (A::Lstat, 3), (A::Readdir, 2), (A::Readlink, 2),
            (A::Sync, 1),
            (A::Remount, 1),
            (A::Manifest, 1),
            (A::Tick, 1),
        ],
        Profile::Data => &[
            (A::Create, 2),
            (A::Write, 10), (A::Read, 5), (A::Truncate, 4),
            (A::Fsync, 2), (A::Fdatasync, 3), (A::Sync, 2),
            (A::Unlink, 1),
            (A::Remount, 1), (A::Crash, 1), (A::Tick, 1),
        ],
        Profile::Checkpoints => &[
            (A::Create, 2),
            (A::Write, 4),
            (A::Unlink, 1), (A::Rename, 1),
            (A::Sync, 2),
            (A::Mkcp, 3), (A::Snapshot, 3), (A::Chcp, 3),
            (A::Rmcp, 2), (A::Lscp, 2), (A::SnapshotMount, 3),
            (A::Remount, 1), (A::RemountRo, 1), (A::Crash, 1), (A::Tick, 2),
            (A::Clean, 1),
        ],
        Profile::Enospc => &[
            (A::Fill, 6), (A::Write, 2),
            (A::Unlink, 3),
            (A::Truncate, 1),
            (A::Sync, 3),
            (A::Mkcp, 1), (A::Snapshot, 1), (A::Rmcp, 1), (A::Clean, 2),
            (A::Remount, 1),
        ],
        Profile::Crash => &[(A::Core, 8), (A::Sync, 1), (A::Crash, 2)],
        Profile::Attrs => &[
            (A::Create, 3), (A::Mkdir, 1), (A::Symlink, 1),
            (A::Link, 1), (A::Unlink, 1), (A::Rename, 1),
            (A::Write, 2), (A::Append, 3), (A::Truncate, 1),
            (A::Chmod, 4), (A::Chown, 3), (A::Utimes, 3),
            (A::Mknod, 3),
            (A::Statfs, 2), (A::Xattr, 2),
            (A::Lstat, 4), (A::Readdir, 1),
            (A::Fsync, 1), (A::Fdatasync, 1), (A::Sync, 2),
            (A::Remount, 1), (A::Crash, 1), (A::Tick, 1),
            (A::Manifest, 1),
        ],
    }
}

const DIR_NAMES: [&str; 3] = ["d0", "d1", "d2"];
const FILE_NAMES: [&str; 5] = ["f0", "f1", "f2", "f3", "f4"];
const LINK_NAMES: [&str; 2] = ["s0", "s1"];
const SPECIAL_NAMES: [&str; 3] = ["p0", "p1", "n0"];

struct Generator<'c> {
    cfg: &'c GenConfig,
    rng: Rng,
    /// The model state the workload leads to, along the predicted branch.
    state: State,
    lines: Vec<Value>,
    /// One entry per mkcp emitted: the number the model predicts.
    mkcps: Vec<Option<Cno>>,
    /// The latest lscp the model predicts, if one was emitted.
    lscp: Option<Vec<CpEntry>>,
    /// Files written or changed lately (fsync targets), newest last.
    touched: Vec<String>,
    fills: u64,
    /// The last path chmod changed: chown often follows it there, to see
    /// the setuid and setgid bits cleared.
    chmodded: Option<String>,
}

impl<'c> Generator<'c> {
    fn new(cfg: &'c GenConfig) -> Self {
        Generator {
            cfg,
            rng: Rng(splitmix64(cfg.seed ^ 0x6e69_6c66_7367_656e)),
            state: State::mkfs(cfg.geometry.clone(), cfg.dot_nilfs, cfg.clock),
            lines: Vec::new(),
            mkcps: Vec::new(),
            lscp: None,
            touched: Vec::new(),
            fills: 0,
            chmodded: None,
        }
    }

    // ------------------------------------------------------------ emitting

    /// Emits `op` as it is.
    fn emit(&mut self, op: Op) -> Option<Outcome> {
        let v = to_value(&op);
        self.emit_as(op, v)
    }

    /// Emits the JSON `line` (which may hold checkpoint references) for the
    /// concrete `op` it stands for, and moves the model along the branch it
    /// predicts. Returns that outcome; an operation the model calls invalid
    /// is not emitted (`None`).
    fn emit_as(&mut self, op: Op, line: Value) -> Option<Outcome> {
        let branches = step(&self.state, &op);
        let predicted: Vec<(Outcome, State)> =
            branches.iter().filter_map(|b| b.predicted()).collect();
        let (out, next) = predicted
            .iter()
            .find(|(o, _)| *o != Outcome::Err(Errno::ENOSPC))
            .or(predicted.first())
            .cloned()?;
        self.lines.push(line);
        self.state = next;
        match (&op, &out) {
            (Op::Mkcp { .. }, Outcome::Cno(c)) => self.mkcps.push(Some(*c)),
            (Op::Mkcp { .. }, _) => self.mkcps.push(None),
            (Op::Lscp, Outcome::Checkpoints(l)) => self.lscp = Some(l.clone()),
            _ => {}
        }
        Some(out)
    }

    fn touch(&mut self, path: &str) {
        self.touched.retain(|p| p != path);
        self.touched.push(path.to_string());
        if self.touched.len() > 4 {
            self.touched.remove(0);
        }
    }

    // -------------------------------------------------------------- names

    fn live(&self) -> &Namespace {
        &self.state.live
    }

    fn mounted_rw(&self) -> bool {
        self.state.mount == Some(Mount::ReadWrite)
    }

    /// Existing paths whose inode satisfies `want`, root excluded.
    fn existing(&self, want: fn(&Kind) -> bool) -> Vec<String> {
        self.live()
            .walk_all()
            .into_iter()
            .filter(|(_, id)| want(&self.live().get(*id).kind))
            .map(|(p, _)| p)
            .filter(|p| p != "/.nilfs")
            .collect()
    }

    fn dirs(&self) -> Vec<String> {
        let mut d = vec!["/".to_string()];
        d.extend(self.existing(|k| matches!(k, Kind::Dir { .. })));
        d
    }

    /// A name in a directory: an existing directory (mostly shallow) and a
    /// name from `pool`, which may or may not exist there.
    fn name_in_dir(&mut self, pool: &[&str]) -> String {
        let dirs: Vec<String> = self
            .dirs()
            .into_iter()
            .filter(|d| d.matches('/').count() <= MAX_DEPTH || d == "/")
            .collect();
        let dir = self.rng.pick(&dirs).cloned().unwrap_or_else(|| "/".into());
        let name = self.rng.pick(pool).copied().unwrap_or("f0");
        if dir == "/" {
            format!("/{name}")
        } else {
            format!("{dir}/{name}")
        }
    }

    /// A path that the kernel refuses for a reason of its own.
    fn odd_path(&mut self) -> String {
        let files = self.existing(|k| matches!(k, Kind::File(_)));
        match self.rng.below(6) {
            0 => format!("/{}", "n".repeat(256)),
            1 => format!("/{}", "m".repeat(255)),
            2 => "/nodir/f0".into(),
            3 => match self.rng.pick(&files) {
                Some(f) => format!("{f}/x"),
                None => "/nodir/x".into(),
            },
            4 => "/d0/../f1".into(),
            _ => "/".into(),
        }
    }

    /// A path for an operation on something that should exist: mostly an
    /// existing one satisfying `want`, sometimes a fresh name, sometimes odd.
    fn target(&mut self, want: fn(&Kind) -> bool, pool: &[&str]) -> String {
        let have = self.existing(want);
        let r = self.rng.below(100);
        if r < 75 && !have.is_empty() {
            self.rng.pick(&have).cloned().expect("non-empty")
        } else if r < 92 {
            self.name_in_dir(pool)
        } else {
            self.odd_path()
        }
    }

    /// A path for something to be created: mostly fresh, sometimes taken.
    fn fresh(&mut self, pool: &[&str]) -> String {
        if self.rng.chance(8) {
            return self.odd_path();
        }
        for _ in 0..4 {
            let p = self.name_in_dir(pool);
            if self.live().lookup(&p, false).is_err() {
                return p;
            }
        }
        self.name_in_dir(pool)
    }

    fn any_file(&mut self) -> String {
        self.target(|k| matches!(k, Kind::File(_)), &FILE_NAMES)
    }

    fn size_of(&self, path: &str) -> u64 {
        match self
            .live()
            .lookup(path, true)
            .map(|id| &self.live().get(id).kind)
        {
            Ok(Kind::File(f)) => f.size,
            _ => 0,
        }
    }

    // --------------------------------------------------------------- data

    fn bs(&self) -> u64 {
        self.cfg.geometry.block_size as u64
    }

    /// Offsets that matter: the start, around block boundaries, at the end
    /// of the file, at the direct map's end, in B-tree territory, far out.
    fn offset(&mut self, path: &str) -> u64 {
        let bs = self.bs();
        let size = self.size_of(path);
        match self.rng.below(8) {
            0 => 0,
            1 => size,
            2 => (1 + self.rng.below(12)) * bs + self.rng.below(3) - 1,
            3 => DIRECT_BLOCKS * bs + self.rng.below(3) - 1,
            4 => self.rng.below(80 * bs),
            5 => size.saturating_add(self.rng.below(20 * bs)),
            6 => (64 + self.rng.below(2000)) * bs,
            _ => self.rng.below(4 * bs),
        }
    }

    fn data(&mut self) -> Pattern {
        let bs = self.bs();
        let len = match self.rng.below(10) {
            0 => 0,
            1..=5 => 1 + self.rng.below(3000),
            6..=8 => bs * (1 + self.rng.below(12)) + self.rng.below(bs),
            _ => bs * (16 + self.rng.below(48)),
        };
        if len > 0 && self.rng.chance(5) {
            Pattern::Zeros(len)
        } else {
            Pattern::Seeded {
                seed: self.rng.next(),
                len,
            }
        }
    }

    fn truncate_size(&mut self, path: &str) -> u64 {
        let bs = self.bs();
        let size = self.size_of(path);
        match self.rng.below(6) {
            0 => 0,
            1 => DIRECT_BLOCKS * bs + self.rng.below(3) - 1,
            2 => (DIRECT_BLOCKS - 1) * bs + self.rng.below(bs),
            3 => size / 2,
            4 => size.saturating_add(self.rng.below(30 * bs)),
            _ => self.rng.below(20 * bs),
        }
    }

    // ------------------------------------------------------------ actions

    fn step_once(&mut self, index: usize) {
        // The crash profile starts with a few files and a sync to work on.
        if self.cfg.profile == Profile::Crash && index == 0 {
            self.emit(Op::Mkdir {
                path: "/d0".into(),
                perm: 0o755,
                at: None,
            });
            for p in ["/f0", "/d0/f1", "/f2"] {
                {
                    self.emit(Op::Create {
                        path: p.into(),
                        perm: 0o644,
                        excl: true,
                        at: None,
                    });
                    let data = Pattern::Seeded {
                        seed: self.rng.next(),
                        len: self.bs() * 3 + 5,
                    };
                    self.emit(Op::Write {
                        append: false,
                        path: p.into(),
                        offset: 0,
                        data,
                        at: None,
                    });
                }
            }
            self.emit(Op::Sync);
        }
        // A read-only mount lasts a few steps, then goes back to read-write.
        if self.state.mount == Some(Mount::ReadOnly) && self.rng.chance(40) {
            self.emit(Op::Umount { cp: None });
            self.emit(Op::Mount {
                cp: None,
                ro: false,
            });
            return;
        }
        let f = self.cfg.features;
        let action = loop {
            let a = self.rng.weighted(table(self.cfg.profile));
            let allowed = match a {
                A::Crash => f.crash,
                A::Remount | A::RemountRo => f.remount,
                A::SnapshotMount => f.snapshot_mounts,
                A::Tick => f.clock,
                A::Clean => f.clean,
                A::Chmod | A::Chown | A::Utimes | A::Mknod | A::Statfs | A::Append | A::Xattr => {
                    f.attrs
                }
                A::Mkcp | A::Snapshot | A::Chcp | A::Rmcp | A::Lscp => f.checkpoints,
                _ => true,
            };
            if allowed {
                break a;
            }
        };
        self.act(action);
    }

    fn act(&mut self, a: Action) {
        match a {
            A::Create => {
                let path = self.fresh(&FILE_NAMES);
                let excl = self.rng.chance(50);
                let perm = *self.rng.pick(&[0o644u32, 0o600, 0o755]).expect("non-empty");
                self.emit(Op::Create {
                    path,
                    perm,
                    excl,
                    at: None,
                });
            }
            A::Mkdir => {
                let path = self.fresh(&DIR_NAMES);
                self.emit(Op::Mkdir {
                    path,
                    perm: 0o755,
                    at: None,
                });
            }
            A::Symlink => {
                let targets = ["f0", "/d0/f1", "d1/../f2", "..", "/nowhere", "s0"];
                let target = self.rng.pick(&targets).copied().unwrap_or("f0").to_string();
                let path = self.fresh(&LINK_NAMES);
                self.emit(Op::Symlink {
                    target,
                    path,
                    at: None,
                });
            }
            A::Link => {
                let old = self.target(|k| !matches!(k, Kind::Dir { .. }), &FILE_NAMES);
                let new = self.fresh(&FILE_NAMES);
                self.emit(Op::Link { old, new, at: None });
            }
            A::Unlink => {
                let path = self.target(|k| !matches!(k, Kind::Dir { .. }), &FILE_NAMES);
                self.emit(Op::Unlink { path, at: None });
            }
            A::Rmdir => {
                // Mostly empty directories, so that some rmdirs succeed.
                let empty =
                    self.existing(|k| matches!(k, Kind::Dir { entries, .. } if entries.is_empty()));
                let path = match self.rng.pick(&empty) {
                    Some(p) if self.rng.chance(60) => p.clone(),
                    _ => self.target(|k| matches!(k, Kind::Dir { .. }), &DIR_NAMES),
                };
                self.emit(Op::Rmdir { path, at: None });
            }
            A::Rename => self.rename(),
            A::Write => {
                let path = self.any_file();
                let offset = self.offset(&path);
                let data = self.data();
                if self
                    .emit(Op::Write {
                        append: false,
                        path: path.clone(),
                        offset,
                        data,
                        at: None,
                    })
                    .is_some_and(|o| matches!(o, Outcome::Written(_)))
                {
                    self.touch(&path);
                }
            }
            A::Read => {
                let path = self.any_file();
                let offset = self.offset(&path);
                let len = *self
                    .rng
                    .pick(&[1u64, 100, 4096, 20_000, 1 << 20])
                    .expect("non-empty");
                self.emit(Op::Read {
                    path,
                    offset,
                    len,
                    at: None,
                });
            }
            A::Truncate => {
                let path = self.any_file();
                let size = self.truncate_size(&path);
                if self.emit(Op::Truncate {
                    path: path.clone(),
                    size,
                    at: None,
                }) == Some(Outcome::Ok)
                {
                    self.touch(&path);
                }
            }
            A::Lstat => {
                let path = self.target(|_| true, &FILE_NAMES);
                self.emit(Op::Lstat { path, at: None });
            }
            A::Readdir => {
                let mut dirs = self.dirs();
                dirs.push(self.any_file());
                let path = self.rng.pick(&dirs).cloned().unwrap_or_else(|| "/".into());
                self.emit(Op::Readdir { path, at: None });
            }
            A::Readlink => {
                let path = self.target(|k| matches!(k, Kind::Symlink(_)), &LINK_NAMES);
                self.emit(Op::Readlink { path, at: None });
            }
            A::Fsync | A::Fdatasync => {
                let path = match self.touched.last() {
                    Some(p) if self.rng.chance(80) => p.clone(),
                    _ => self.any_file(),
                };
                self.emit(if a == A::Fsync {
                    Op::Fsync { path, at: None }
                } else {
                    Op::Fdatasync { path, at: None }
                });
            }
            A::Sync => {
                self.emit(Op::Sync);
            }
            A::Mkcp => {
                self.emit(Op::Mkcp { snapshot: false });
            }
            A::Snapshot => {
                self.emit(Op::Mkcp { snapshot: true });
            }
            A::Chcp | A::Rmcp => self.cp_change(a == A::Rmcp),
            A::Lscp => {
                self.emit(Op::Lscp);
            }
            A::SnapshotMount => self.snapshot_session(),
            A::Remount => {
                self.emit(Op::Umount { cp: None });
                self.emit(Op::Mount {
                    cp: None,
                    ro: false,
                });
            }
            A::RemountRo => {
                if self.mounted_rw() {
                    self.emit(Op::Umount { cp: None });
                    self.emit(Op::Mount { cp: None, ro: true });
                }
            }
            A::Crash => {
                if self.state.snapshot_mounts.is_empty() {
                    self.emit(Op::Crash);
                    self.emit(Op::Mount {
                        cp: None,
                        ro: false,
                    });
                }
            }
            A::Tick => {
                let now = self.state.clock + (1 + self.rng.below(5) as i64) * NS;
                self.emit(Op::Clock { now });
            }
            A::Clean => {
                self.emit(Op::Clean { protection_s: 0 });
            }
            A::Manifest => {
                self.emit(Op::Manifest { at: None });
            }
            A::Fill => self.fill(),
            A::Core => self.core(),
            A::Chmod => {
                let path = self.target(|_| true, &FILE_NAMES);
                // Setuid, setgid and sticky bits too, so that chown's
                // clearing of them is seen.
                let perm = *self
                    .rng
                    .pick(&[
                        0o600u32, 0o644, 0o755, 0o000, 0o4755, 0o2755, 0o2645, 0o6711, 0o1777,
                    ])
                    .expect("non-empty");
                self.emit(Op::Chmod {
                    path: path.clone(),
                    perm,
                    at: None,
                });
                self.chmodded = Some(path.clone());
                self.look_at(path);
                // A set-id file given away: chown clears the bits.
                if perm & 0o6000 != 0 && self.rng.chance(50) {
                    self.act(A::Chown);
                }
            }
            A::Chown => {
                let path = match self.chmodded.take() {
                    Some(p) if self.rng.chance(80) => p,
                    _ => self.target(|_| true, &FILE_NAMES),
                };
                let id = |g: &mut Self| *g.rng.pick(&[0u32, 1, 1000, 65534]).expect("non-empty");
                let (uid, gid) = match self.rng.below(4) {
                    0 => (Some(id(self)), None),
                    1 => (None, Some(id(self))),
                    2 => (None, None),
                    _ => (Some(id(self)), Some(id(self))),
                };
                let follow = self.rng.chance(70);
                self.emit(Op::Chown {
                    path: path.clone(),
                    uid,
                    gid,
                    follow,
                    at: None,
                });
                self.look_at(path);
            }
            A::Utimes => {
                let path = self.target(|_| true, &FILE_NAMES);
                // A time of its own, with nanoseconds (nilfs2 keeps them),
                // or the clock (UTIME_NOW).
                let mtime = self.rng.chance(70).then(|| {
                    (self.rng.below(2_000_000_000) as i64) * NS + self.rng.below(NS as u64) as i64
                });
                let follow = self.rng.chance(80);
                self.emit(Op::Utimes {
                    path: path.clone(),
                    mtime,
                    follow,
                    at: None,
                });
                self.look_at(path);
            }
            A::Mknod => {
                use FileType as T;
                let path = self.fresh(&SPECIAL_NAMES);
                let file_type = *self
                    .rng
                    .pick(&[
                        T::Fifo,
                        T::Socket,
                        T::CharDevice,
                        T::BlockDevice,
                        T::Fifo,
                        T::Dir,
                    ])
                    .expect("non-empty");
                let rdev = [
                    self.rng.below(1 << 12) as u32,
                    *self
                        .rng
                        .pick(&[0u32, 3, 255, 256, (1 << 20) - 1])
                        .expect("non-empty"),
                ];
                let perm = *self.rng.pick(&[0o644u32, 0o600, 0o666]).expect("non-empty");
                self.emit(Op::Mknod {
                    path,
                    file_type,
                    perm,
                    rdev,
                    at: None,
                });
            }
            A::Statfs => {
                self.emit(Op::Statfs { at: None });
            }
            A::Xattr => {
                let path = self.target(|_| true, &FILE_NAMES);
                let long = "x".repeat(256);
                let name = self
                    .rng
                    .pick(&[
                        "user.a",
                        "user.b",
                        "trusted.t",
                        "security.s",
                        "",
                        long.as_str(),
                    ])
                    .expect("non-empty")
                    .to_string();
                let follow = self.rng.chance(70);
                let op = match self.rng.below(4) {
                    0 => Op::Setxattr {
                        path,
                        name,
                        value: "v".into(),
                        follow,
                        at: None,
                    },
                    1 => Op::Getxattr {
                        path,
                        name,
                        follow,
                        at: None,
                    },
                    2 => Op::Listxattr {
                        path,
                        follow,
                        at: None,
                    },
                    _ => Op::Removexattr {
                        path,
                        name,
                        follow,
                        at: None,
                    },
                };
                self.emit(op);
            }
            A::Append => {
                let path = self.any_file();
                let data = self.data();
                if self
                    .emit(Op::Write {
                        append: true,
                        path: path.clone(),
                        offset: 0,
                        data,
                        at: None,
                    })
                    .is_some_and(|o| matches!(o, Outcome::Written(_)))
                {
                    self.touch(&path);
                }
            }
        }
    }

    /// Half the time, an lstat of `path` right after a change to its
    /// attributes, so that what the change did is observed before later
    /// operations change it again.
    fn look_at(&mut self, path: String) {
        if self.rng.chance(50) {
            self.emit(Op::Lstat { path, at: None });
        }
    }

    fn rename(&mut self) {
        let dirs = self.existing(|k| matches!(k, Kind::Dir { .. }));
        let (old, new) = match self.rng.below(6) {
            // A file to a name in another (or the same) directory.
            0 | 1 => (self.any_file(), self.fresh(&FILE_NAMES)),
            // Onto an existing file: it replaces the target.
            2 => (self.any_file(), self.any_file()),
            // A directory somewhere else, or onto another directory.
            3 => (
                self.target(|k| matches!(k, Kind::Dir { .. }), &DIR_NAMES),
                self.target(|k| matches!(k, Kind::Dir { .. }), &DIR_NAMES),
            ),
            // A directory into its own subtree (EINVAL).
            4 => match self.rng.pick(&dirs).cloned() {
                Some(d) => (d.clone(), format!("{d}/d2")),
                None => (self.any_file(), self.fresh(&FILE_NAMES)),
            },
            // Anything onto anything, odd names included.
            _ => (
                self.target(|_| true, &FILE_NAMES),
                self.target(|_| true, &DIR_NAMES),
            ),
        };
        // renameat2's flags, in the attributes profile only (the other
        // profiles' workloads stay as they were).
        let (noreplace, exchange) = if self.cfg.profile == Profile::Attrs && self.cfg.features.attrs
        {
            match self.rng.below(8) {
                0 | 1 => (true, false),
                2 | 3 => (false, true),
                4 => (true, true),
                _ => (false, false),
            }
        } else {
            (false, false)
        };
        self.emit(Op::Rename {
            old,
            new,
            noreplace,
            exchange,
            at: None,
        });
    }

    /// chcp (ss or cp) or rmcp of a listed checkpoint, named as an entry
    /// of the latest lscp (emitted first when there is none yet).
    fn cp_change(&mut self, rmcp: bool) {
        if self.lscp.is_none() || self.rng.chance(30) {
            self.emit(Op::Lscp);
        }
        let Some(list) = self.lscp.clone() else {
            return;
        };
        // rmcp never names the last listed checkpoint: the model leaves
        // removing the latest checkpoint undefined (docs/model.md), and the
        // latest can only be at or after the last one listed.
        let n = if rmcp {
            list.len().saturating_sub(1)
        } else {
            list.len()
        };
        if n == 0 {
            return;
        }
        // Counted from the end, rmcp's choice stays off the latest when the
        // implementation lists more checkpoints than the model (timer ones).
        let from_end = rmcp || self.rng.chance(50);
        let i = self.rng.below(n as u64) as usize;
        let (cno, r) = if from_end {
            let back = i + if rmcp { 2 } else { 1 };
            (
                list[list.len() - back].cno,
                json!({ "$lscp": -(back as i64) }),
            )
        } else {
            (list[i].cno, json!({ "$lscp": i }))
        };
        if rmcp {
            let mut v = to_value(&Op::Rmcp { cno });
            v["cno"] = r;
            self.emit_as(Op::Rmcp { cno }, v);
        } else {
            let snapshot = self.rng.chance(60);
            let mut v = to_value(&Op::Chcp { cno, snapshot });
            v["cno"] = r;
            self.emit_as(Op::Chcp { cno, snapshot }, v);
        }
    }

    /// `mount -o ro,cp=N` of a checkpoint some mkcp made (usually a
    /// snapshot), reads on it, unmount.
    fn snapshot_session(&mut self) {
        let made: Vec<(usize, Cno)> = self
            .mkcps
            .iter()
            .enumerate()
            .filter_map(|(k, c)| c.map(|c| (k, c)))
            .collect();
        let snaps: Vec<(usize, Cno)> = made
            .iter()
            .copied()
            .filter(|(_, c)| self.state.checkpoints.get(c).is_some_and(|cp| cp.snapshot))
            .collect();
        let pick = if !snaps.is_empty() && self.rng.chance(85) {
            self.rng.pick(&snaps).copied()
        } else {
            self.rng.pick(&made).copied()
        };
        let Some((k, cno)) = pick else {
            self.emit(Op::Mkcp { snapshot: true });
            return;
        };
        let r = json!({ "$mkcp": k });
        let op = Op::Mount {
            cp: Some(cno),
            ro: true,
        };
        let mut v = to_value(&op);
        v["cp"] = r.clone();
        if self.emit_as(op, v) != Some(Outcome::Ok) {
            return;
        }
        let paths: Vec<String> = self
            .state
            .checkpoints
            .get(&cno)
            .and_then(|cp| cp.ns.as_ref())
            .map(|ns| ns.walk_all().into_iter().map(|(p, _)| p).collect())
            .unwrap_or_default();
        for _ in 0..1 + self.rng.below(3) {
            let path = self
                .rng
                .pick(&paths)
                .cloned()
                .unwrap_or_else(|| "/f0".into());
            let at = Some(cno);
            let op = match self.rng.below(5) {
                0 => Op::Lstat { path, at },
                1 => Op::Readdir { path, at },
                2 => Op::Readlink { path, at },
                3 => Op::Manifest { at },
                _ => Op::Read {
                    path,
                    offset: 0,
                    len: 1 << 20,
                    at,
                },
            };
            let mut v = to_value(&op);
            v["at"] = r.clone();
            self.emit_as(op, v);
        }
        let op = Op::Umount { cp: Some(cno) };
        let mut v = to_value(&op);
        v["cp"] = r;
        self.emit_as(op, v);
    }

    /// A large write into a new or existing big file: segments' worth.
    fn fill(&mut self) {
        self.fills += 1;
        let path = if self.rng.chance(60) {
            format!("/big{}", self.fills % 6)
        } else {
            self.any_file()
        };
        self.emit(Op::Create {
            path: path.clone(),
            perm: 0o644,
            excl: false,
            at: None,
        });
        let g = &self.cfg.geometry;
        let seg = g.blocks_per_segment as u64 * g.block_size as u64;
        let len = seg * (1 + self.rng.below(3)) + self.rng.below(seg);
        let offset = if self.rng.chance(70) {
            0
        } else {
            self.size_of(&path)
        };
        let data = Pattern::Seeded {
            seed: self.rng.next(),
            len,
        };
        self.emit(Op::Write {
            append: false,
            path: path.clone(),
            offset,
            data,
            at: None,
        });
        self.touch(&path);
    }

    /// One to three changes to a few files, then an fsync-family call on
    /// one of them (CrashMonkey/ACE: most crash-consistency bugs need no
    /// more).
    fn core(&mut self) {
        for _ in 0..1 + self.rng.below(3) {
            let a = self.rng.weighted(&[
                (A::Write, 5),
                (A::Truncate, 2),
                (A::Rename, 2),
                (A::Link, 1),
                (A::Unlink, 1),
                (A::Create, 2),
                (A::Mkdir, 1),
                (A::Symlink, 1),
            ]);
            self.act(a);
        }
        let path = match self.touched.last() {
            Some(p) if self.rng.chance(80) => p.clone(),
            _ => self.any_file(),
        };
        match self.rng.below(3) {
            0 => self.emit(Op::Fsync { path, at: None }),
            1 => self.emit(Op::Fdatasync { path, at: None }),
            _ => self.emit(Op::Sync),
        };
    }

    fn finish(&mut self) {
        for c in self.state.snapshot_mounts.clone() {
            self.emit(Op::Umount { cp: Some(c) });
        }
        if self.state.mount.is_none() {
            self.emit(Op::Mount {
                cp: None,
                ro: false,
            });
        }
        self.emit(Op::Sync);
        self.emit(Op::Manifest { at: None });
        if self.cfg.features.checkpoints {
            self.emit(Op::Lscp);
        }
        self.emit(Op::Umount { cp: None });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Resolver;

    fn ops(w: &Workload) -> Vec<String> {
        w.lines
            .iter()
            .map(|l| l["op"].as_str().unwrap().to_string())
            .collect()
    }

    #[test]
    fn the_same_seed_gives_the_same_workload() {
        for p in Profile::ALL {
            let a = generate(&GenConfig::new(7, 40, p));
            let b = generate(&GenConfig::new(7, 40, p));
            assert_eq!(a, b, "{}", p.name());
            let c = generate(&GenConfig::new(8, 40, p));
            assert_ne!(a, c, "{}", p.name());
        }
    }

    #[test]
    fn a_shorter_workload_is_a_prefix() {
        for p in Profile::ALL {
            let mut cfg = GenConfig::new(3, 30, p);
            cfg.epilogue = false;
            let long = generate(&cfg);
            cfg.len = 12;
            let short = generate(&cfg);
            assert_eq!(
                long.lines[..short.lines.len()],
                short.lines[..],
                "{}",
                p.name()
            );
        }
    }

    /// Most generated operations do something: fewer than half fail.
    #[test]
    fn most_operations_are_meaningful() {
        for p in Profile::ALL {
            let w = generate(&GenConfig::new(11, 200, p));
            let (mut states, mut failed, mut total) = (None::<State>, 0, 0);
            let mut r = Resolver::default();
            for line in &w.lines {
                let op = r.resolve(line).expect("references resolve along the model");
                let Some(s) = &states else {
                    let Op::Mkfs { .. } = op else {
                        panic!("mkfs first")
                    };
                    states = Some(State::mkfs(p.default_geometry(), true, 0));
                    continue;
                };
                let b = step(s, &op);
                let (out, next) = b
                    .iter()
                    .filter_map(|b| b.predicted())
                    .find(|(o, _)| *o != Outcome::Err(Errno::ENOSPC))
                    .or_else(|| b.iter().find_map(|b| b.predicted()))
                    .unwrap_or_else(|| panic!("{}: the model calls {line} invalid", p.name()));
                r.observe(&op, &out);
                total += 1;
                if matches!(out, Outcome::Err(_)) {
                    failed += 1;
                }
                states = Some(next);
            }
            assert!(
                failed * 2 < total,
                "{}: {failed} of {total} failed",
                p.name()
            );
        }
    }

    #[test]
    fn profiles_concentrate_on_their_operations() {
        let count = |p: Profile, names: &[&str]| {
            let w = generate(&GenConfig::new(5, 150, p));
            let o = ops(&w);
            o.iter().filter(|n| names.contains(&n.as_str())).count() * 100 / o.len()
        };
        assert!(
            count(
                Profile::Namespace,
                &["create", "mkdir", "rename", "link", "unlink", "rmdir", "symlink"]
            ) > 50
        );
        assert!(count(Profile::Data, &["write", "read", "truncate"]) > 50);
        assert!(
            count(
                Profile::Checkpoints,
                &["mkcp", "chcp", "rmcp", "lscp", "mount"]
            ) > 25
        );
        assert!(count(Profile::Crash, &["fsync", "fdatasync", "sync"]) > 15);
    }

    #[test]
    fn features_leave_out_what_the_implementation_cannot_do() {
        for p in Profile::ALL {
            let mut cfg = GenConfig::new(2, 150, p);
            cfg.features = Features::MOUNTED;
            let o = ops(&generate(&cfg));
            assert!(
                !o.iter().any(|n| n == "crash" || n == "clock"),
                "{}",
                p.name()
            );
            // The only mount/umount are the first and the last.
            let m = o.iter().filter(|n| *n == "mount" || *n == "umount").count();
            assert_eq!(m, 2, "{}: {o:?}", p.name());
        }
    }
}
