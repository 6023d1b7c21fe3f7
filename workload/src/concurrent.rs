//! Concurrent workloads: several workers' operation lists on one mount,
//! made to collide.
//!
//! A concurrent workload is a workload (module `format`) whose worker
//! lines carry `"w": K`. A runner runs the lines without `w` in order, one
//! at a time; between two of them it runs every worker's lines at once,
//! each worker its own lines in order (`nilref exec`). The observed
//! history is judged by the model's linearizability checker
//! (`nilfs_model::history`).
//!
//! The generator does not run the model along, as the one-thread
//! generator does: which operation comes first is the point of the run.
//! Instead it makes the workers meet, by construction:
//! - every writer works in one shared directory `/s` (a small pool of
//!   names, so creates, renames, links and unlinks of the same names
//!   race) and in its own `/wK`, with renames between its own directory,
//!   the shared one and the other writers' directories;
//! - one file, `/s/f`, is written, truncated, read, linked, fsynced and
//!   stat'ed by every writer;
//! - a checkpoint worker takes checkpoints and snapshots, turns them into
//!   plain checkpoints and back, removes them and lists them; where the
//!   runner can mount snapshots, it reads each snapshot it takes at once
//!   (mount, manifest, unmount), so what the snapshot holds is known while
//!   the writers run, not only at the end (the checker keeps one state per
//!   content a snapshot may hold until it is read);
//! - a cleaner worker runs the cleaner (`nilfs-clean -p 0`, seed 001's
//!   scenario) while the others write.
//!
//! Writes, reads, fsyncs and fdatasyncs go only to the data files
//! (`/s/f` and each writer's `/wK/data`), whose names nothing renames,
//! unlinks or replaces: each is open + call + close, so its path is
//! resolved at the open and the call lands later; a rename of the path in
//! between (seen on the first campaign: a write whose open came before a
//! rename and whose bytes came after it) is not one step of the model's
//! path-named write. Names in the pools are renamed, linked, unlinked and
//! truncated (`truncate(2)` is one call on a path).
//!
//! Writes stay inside one 4 KiB page: a write(2) that spans pages is not
//! atomic in Linux, neither for a concurrent read (`filemap_read` copies
//! page by page without the inode lock) nor for a checkpoint (each page is
//! its own `nilfs_transaction_begin` .. `commit` in `nilfs_write_begin` /
//! `nilfs_write_end`), and the model's write is one step. A page-sized
//! write is one transaction under the page lock.
//!
//! The epilogue syncs, reads the shared file, lists the directories, lists
//! the checkpoints, unmounts and mounts again where the runner can (what
//! is durable must be what some linearization allows) and, where the
//! runner can mount them, mounts every
//! snapshot taken during the run and reads its manifest: what a snapshot
//! shows after the cleaner ran must be what some linearization allows at
//! the point it was taken ("no live or snapshot block is lost").

use crate::gen::Features;
use crate::to_value;
use nilfs_model::pattern::splitmix64;
use nilfs_model::{Geometry, Op};
use serde_json::{json, Value};

/// What to generate.
#[derive(Clone, Debug)]
pub struct ConcurrentConfig {
    pub seed: u64,
    /// Workers that change the namespace and the data.
    pub writers: usize,
    /// Operations each writer runs.
    pub ops: usize,
    pub geometry: Geometry,
    /// The mkfs leaves `/.nilfs`.
    pub dot_nilfs: bool,
    /// `checkpoints`: a checkpoint worker; `clean`: a cleaner worker;
    /// `snapshot_mounts`: the epilogue reads the snapshots back.
    pub features: Features,
}

impl ConcurrentConfig {
    /// `writers` writers of `ops` operations each, on the mixed profile's
    /// geometry (1 KiB blocks, 64-block segments, 511 segments).
    pub fn new(seed: u64, writers: usize, ops: usize) -> ConcurrentConfig {
        ConcurrentConfig {
            seed,
            writers,
            ops,
            geometry: crate::gen::Profile::Mixed.default_geometry(),
            dot_nilfs: true,
            features: Features::DEVICE,
        }
    }

    /// The number of workers, checkpoint and cleaner workers included.
    pub fn workers(&self) -> usize {
        self.writers + usize::from(self.features.checkpoints) + usize::from(self.features.clean)
    }
}

/// splitmix64 in counter mode from the seed.
struct Rng {
    seed: u64,
    k: u64,
}

impl Rng {
    fn next(&mut self) -> u64 {
        self.k += 1;
        splitmix64(self.seed ^ self.k.wrapping_mul(0x9e37_79b9_7f4a_7c15))
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    fn pick<'a, T>(&mut self, xs: &'a [T]) -> &'a T {
        &xs[self.below(xs.len() as u64) as usize]
    }
}

/// The names writers meet on in `/s`.
const SHARED: [&str; 4] = ["a", "b", "c", "d"];
/// The names of each writer's own directory.
const OWN: [&str; 3] = ["x", "y", "z"];
/// The shared file.
const FILE: &str = "/s/f";

/// Generates a concurrent workload: prologue, the workers' lines, then
/// the epilogue.
pub fn generate_concurrent(cfg: &ConcurrentConfig) -> Vec<Value> {
    let mut r = Rng {
        seed: cfg.seed,
        k: 0,
    };
    let mut lines: Vec<Value> = Vec::new();
    let g = &cfg.geometry;
    lines.push(to_value(&Op::Mkfs {
        block_size: g.block_size,
        blocks_per_segment: g.blocks_per_segment,
        nsegments: g.nsegments,
        r_segments_percentage: g.r_segments_percentage,
        dot_nilfs: cfg.dot_nilfs,
        clock: 0,
        kernel: None,
    }));
    lines.push(json!({"op": "mount", "ro": false}));
    lines.push(json!({"op": "mkdir", "path": "/s", "perm": 0o755}));
    for w in 0..cfg.writers {
        lines.push(json!({"op": "mkdir", "path": format!("/w{w}"), "perm": 0o755}));
    }
    lines.push(json!({"op": "create", "path": FILE, "perm": 0o644, "excl": false}));
    for w in 0..cfg.writers {
        lines.push(
            json!({"op": "create", "path": format!("/w{w}/data"), "perm": 0o644, "excl": false}),
        );
    }
    lines.push(json!({"op": "write", "path": FILE, "offset": 0,
        "data": {"seeded": {"seed": r.next(), "len": 6000}}}));
    lines.push(json!({"op": "sync"}));
    for w in 0..cfg.writers {
        for _ in 0..cfg.ops {
            let mut v = writer_op(&mut r, w, cfg.writers, cfg.features);
            v["w"] = json!(w);
            lines.push(v);
        }
    }
    let mut next = cfg.writers;
    let mut snapshots = Vec::new();
    if cfg.features.checkpoints {
        let mut mkcps = 0u64;
        for _ in 0..cfg.ops.div_ceil(2) {
            let mut v = match r.below(10) {
                0..=2 => {
                    let snapshot = r.below(2) == 0;
                    let k = mkcps;
                    mkcps += 1;
                    if snapshot {
                        snapshots.push(k);
                        if cfg.features.snapshot_mounts {
                            let cp = json!({"$mkcp": k});
                            lines.push(json!({"op": "mkcp", "snapshot": true, "w": next}));
                            lines.push(json!({"op": "mount", "cp": cp, "ro": true, "w": next}));
                            lines.push(json!({"op": "manifest", "at": cp, "w": next}));
                            json!({"op": "umount", "cp": cp})
                        } else {
                            json!({"op": "mkcp", "snapshot": true})
                        }
                    } else {
                        json!({"op": "mkcp", "snapshot": false})
                    }
                }
                3 | 4 if mkcps > 0 => json!({"op": "chcp",
                    "cno": {"$mkcp": r.below(mkcps)}, "snapshot": r.below(2) == 0}),
                5 if mkcps > 0 => json!({"op": "rmcp", "cno": {"$mkcp": r.below(mkcps)}}),
                6 | 7 => json!({"op": "lscp"}),
                _ => json!({"op": "lstat", "path": FILE}),
            };
            v["w"] = json!(next);
            lines.push(v);
        }
        next += 1;
    }
    if cfg.features.clean {
        // One pass: it starts with the writers and, under a slow guest,
        // outlasts them (a pass is a cleanerd started, a request, and a
        // wait until it is idle).
        lines.push(json!({"op": "clean", "protection_s": 0, "w": next}));
    }
    // The epilogue: everything durable, then observed.
    lines.push(json!({"op": "sync"}));
    lines.push(json!({"op": "read", "path": FILE, "offset": 0, "len": 16384}));
    lines.push(json!({"op": "readdir", "path": "/s"}));
    for w in 0..cfg.writers {
        lines.push(json!({"op": "readdir", "path": format!("/w{w}")}));
    }
    lines.push(json!({"op": "manifest"}));
    if cfg.features.checkpoints {
        lines.push(json!({"op": "lscp"}));
    }
    if cfg.features.remount {
        // Durability: what an unmount leaves is what some linearization
        // allows.
        lines.push(json!({"op": "umount"}));
        lines.push(json!({"op": "mount", "ro": false}));
        lines.push(json!({"op": "manifest"}));
    }
    if cfg.features.snapshot_mounts {
        for k in snapshots {
            lines.push(json!({"op": "mount", "cp": {"$mkcp": k}, "ro": true}));
            lines.push(json!({"op": "manifest", "at": {"$mkcp": k}}));
            lines.push(json!({"op": "umount", "cp": {"$mkcp": k}}));
        }
    }
    lines
}

/// A name of the pools: mostly the shared one, then the writer's own
/// directory, sometimes another writer's.
fn name(r: &mut Rng, w: usize, writers: usize) -> String {
    match r.below(9) {
        0..=4 => format!("/s/{}", r.pick(&SHARED)),
        5..=7 => format!("/w{w}/{}", r.pick(&OWN)),
        _ => format!("/w{}/{}", r.below(writers as u64), r.pick(&OWN)),
    }
}

/// A data file (see the module docs): the shared one two times in three,
/// else a writer's own (sometimes another writer's).
fn file(r: &mut Rng, w: usize, writers: usize) -> String {
    match r.below(6) {
        0..=3 => FILE.to_string(),
        4 => format!("/w{w}/data"),
        _ => format!("/w{}/data", r.below(writers as u64)),
    }
}

/// A file to truncate, link or chmod: a data file or a pool name.
fn any(r: &mut Rng, w: usize, writers: usize) -> String {
    if r.below(2) == 0 {
        file(r, w, writers)
    } else {
        name(r, w, writers)
    }
}

/// One writer operation.
fn writer_op(r: &mut Rng, w: usize, writers: usize, f: Features) -> Value {
    let n = writers;
    loop {
        let v = match r.below(22) {
            0..=3 => {
                // Inside one page: see the module docs.
                let page = r.below(4);
                let off = r.below(4096 - 64);
                let len = 1 + r.below((4096 - off).min(1024));
                json!({"op": "write", "path": file(r, w, n), "offset": page * 4096 + off,
                    "data": {"seeded": {"seed": r.next(), "len": len}}})
            }
            4 => json!({"op": "truncate", "path": any(r, w, n),
                "size": *r.pick(&[0u64, 100, 4096, 8199, 12288])}),
            5 | 6 => json!({"op": "read", "path": file(r, w, n), "offset": 0, "len": 16384}),
            7 | 8 => json!({"op": "lstat", "path": any(r, w, n)}),
            9 => {
                json!({"op": "create", "path": name(r, w, n), "perm": 0o644, "excl": r.below(2) == 0})
            }
            10 => json!({"op": "mkdir", "path": name(r, w, n), "perm": 0o755}),
            11 => json!({"op": "unlink", "path": name(r, w, n)}),
            12 => json!({"op": "rmdir", "path": name(r, w, n)}),
            13 | 14 => json!({"op": "rename", "old": name(r, w, n), "new": name(r, w, n)}),
            15 => json!({"op": "link", "old": any(r, w, n), "new": name(r, w, n)}),
            16 => json!({"op": "symlink", "target": "f", "path": name(r, w, n)}),
            17 => json!({"op": "readdir", "path": *r.pick(&["/s".to_string(), format!("/w{w}")])}),
            18 => json!({"op": "fsync", "path": file(r, w, n)}),
            19 => json!({"op": "fdatasync", "path": file(r, w, n)}),
            20 if f.attrs => json!({"op": "chmod", "path": any(r, w, n),
                "perm": *r.pick(&[0o600u32, 0o644, 0o755])}),
            21 => json!({"op": "sync"}),
            _ => continue,
        };
        return v;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_seed_gives_the_same_workload_and_every_line_parses() {
        let cfg = ConcurrentConfig::new(7, 3, 50);
        let a = generate_concurrent(&cfg);
        assert_eq!(a, generate_concurrent(&cfg));
        assert_ne!(
            a,
            generate_concurrent(&ConcurrentConfig {
                seed: 8,
                ..cfg.clone()
            })
        );
        let text: String = a.iter().map(|v| v.to_string() + "\n").collect();
        let parsed = crate::parse(&text).expect("parses");
        let resolver = crate::Resolver::default();
        for (n, v) in parsed {
            match resolver.resolve(&v) {
                Ok(_) | Err(crate::Unresolved::Reference(_)) => {}
                Err(e) => panic!("line {n}: {e}"),
            }
        }
        for w in 0..cfg.workers() {
            let k = a.iter().filter(|v| v["w"] == json!(w)).count();
            assert!(k >= 1, "worker {w} has {k} lines");
        }
    }

    #[test]
    fn the_checkpoint_worker_reads_each_snapshot_it_takes_at_once() {
        let cfg = ConcurrentConfig::new(3, 3, 50);
        assert!(cfg.features.checkpoints && cfg.features.snapshot_mounts);
        let a = generate_concurrent(&cfg);
        let mine: Vec<&Value> = a.iter().filter(|v| v["w"] == json!(3)).collect();
        let mut taken = 0;
        for (i, v) in mine.iter().enumerate() {
            if v["op"] == "mkcp" && v["snapshot"] == json!(true) {
                taken += 1;
                let ops: Vec<&Value> = mine[i + 1..i + 4].iter().map(|v| &v["op"]).collect();
                assert_eq!(ops, [&json!("mount"), &json!("manifest"), &json!("umount")]);
                assert_eq!(mine[i + 2]["at"], mine[i + 1]["cp"]);
            }
        }
        assert!(taken > 0);
    }

    #[test]
    fn writers_meet_on_the_shared_names() {
        let a = generate_concurrent(&ConcurrentConfig::new(1, 3, 50));
        let touches = |w: usize| {
            a.iter()
                .filter(|v| v["w"] == json!(w))
                .filter(|v| v.to_string().contains("\"/s/"))
                .count()
        };
        for w in 0..3 {
            assert!(
                touches(w) > 10,
                "writer {w} touches /s {} times",
                touches(w)
            );
        }
        assert!(a.iter().any(|v| v["op"] == "rename"
            && v.to_string().contains("/w")
            && v.to_string().contains("/s/")));
    }
}
