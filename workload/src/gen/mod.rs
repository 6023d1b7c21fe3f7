//! The workload generator: deterministic, and biased by the model's state
//! so that most operations mean something.
//!
//! One seed gives one workload. While it writes the workload, the generator
//! runs the model along ([`nilfs_model::step()`], taking the branch the model
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
//!
//! This file has the profiles, the features, the configuration, the seeded
//! generator of numbers and the profiles' weight tables; `generator` the
//! generator's state and its pickers (names, offsets, sizes, data); `act`
//! what each action emits, and the epilogue.

mod act;
mod generator;

use crate::to_value;
use generator::Generator;
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

impl Features {
    /// Whether an action may be emitted with these features.
    fn allows(self, a: Action) -> bool {
        match a {
            A::Crash => self.crash,
            A::Remount | A::RemountRo => self.remount,
            A::SnapshotMount => self.snapshot_mounts,
            A::Tick => self.clock,
            A::Clean => self.clean,
            A::Chmod | A::Chown | A::Utimes | A::Mknod | A::Statfs | A::Append | A::Xattr => {
                self.attrs
            }
            A::Mkcp | A::Snapshot | A::Chcp | A::Rmcp | A::Lscp => self.checkpoints,
            _ => true,
        }
    }
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

/// Generates the workload `cfg` describes: its choices drawn from
/// `cfg.seed`.
pub fn generate(cfg: &GenConfig) -> Workload {
    generate_with(cfg, &Choices::Seed(cfg.seed)).0
}

/// Where the generator's choices come from. Every choice the generator
/// makes (an action of the profile's table, a name, an offset, a size, a
/// data seed) is one 64-bit number drawn from here and reduced by the
/// pick that asked for it, so a workload is a function of the numbers
/// drawn. The front ends are sources of those numbers and nothing more:
/// `nilref gen` and the campaigns a seed, proptest a seed it shrinks,
/// quickcheck and the fuzzers a tape ([`crate::front`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Choices {
    /// splitmix64 in counter mode from this seed (as `nilref gen --seed`).
    Seed(u64),
    /// These numbers in order, then zeros: a recorded run replayed, or
    /// numbers made by quickcheck or by a fuzzer. Zero is every pick's
    /// first option, so shrinking numbers towards zero simplifies the
    /// workload and never makes it invalid.
    Tape(Vec<u64>),
}

impl Choices {
    /// A tape from bytes, eight little-endian bytes a number (the last
    /// one padded with zeros): how a fuzzer's input becomes choices.
    pub fn from_bytes(bytes: &[u8]) -> Choices {
        Choices::Tape(
            bytes
                .chunks(8)
                .map(|c| {
                    let mut b = [0u8; 8];
                    b[..c.len()].copy_from_slice(c);
                    u64::from_le_bytes(b)
                })
                .collect(),
        )
    }
}

/// Generates the workload `cfg` describes with its choices drawn from
/// `choices` (`cfg.seed` is not used), and returns it with the numbers it
/// drew, in order: replayed as [`Choices::Tape`] they give the same
/// workload again.
pub fn generate_with(cfg: &GenConfig, choices: &Choices) -> (Workload, Vec<u64>) {
    let mut g = Generator::new(cfg, Rng::new(choices));
    let mkfs = Op::Mkfs {
        block_size: cfg.geometry.block_size,
        blocks_per_segment: cfg.geometry.blocks_per_segment,
        nsegments: cfg.geometry.nsegments,
        r_segments_percentage: cfg.geometry.r_segments_percentage,
        dot_nilfs: cfg.dot_nilfs,
        clock: cfg.clock,
        kernel: None,
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
    let drawn = std::mem::take(&mut g.rng.drawn);
    (Workload { lines: g.lines }, drawn)
}

/// The generator's numbers: splitmix64 in counter mode (small, seedable,
/// the same everywhere) or a tape, each number drawn recorded.
#[derive(Clone, Debug)]
struct Rng {
    source: Source,
    drawn: Vec<u64>,
}

#[derive(Clone, Debug)]
enum Source {
    Counter(u64),
    Tape(Vec<u64>),
}

impl Rng {
    fn new(choices: &Choices) -> Rng {
        let source = match choices {
            Choices::Seed(seed) => Source::Counter(splitmix64(seed ^ 0x6e69_6c66_7367_656e)),
            Choices::Tape(t) => Source::Tape(t.clone()),
        };
        Rng {
            source,
            drawn: Vec::new(),
        }
    }
    fn next(&mut self) -> u64 {
        let v = match &mut self.source {
            Source::Counter(c) => {
                *c = c.wrapping_add(0x9E37_79B9_7F4A_7C15);
                splitmix64(*c)
            }
            Source::Tape(t) => t.get(self.drawn.len()).copied().unwrap_or(0),
        };
        self.drawn.push(v);
        v
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
