//! What the generator does at each step: one action of the profile's
//! table, emitted as one to a few operations, and the epilogue.

use super::generator::Generator;
use super::*;

impl Generator<'_> {
    pub(super) fn step_once(&mut self, index: usize) {
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
        let mut rejected = 0;
        let action = loop {
            // A tape may ask for a left-out action forever: after 64
            // refusals in a row (from a seed, as likely as none ever) the
            // pick is made among the allowed ones.
            rejected += 1;
            if rejected > 64 {
                let allowed: Vec<(Action, u64)> = table(self.cfg.profile)
                    .iter()
                    .copied()
                    .filter(|(a, _)| f.allows(*a))
                    .collect();
                break self.rng.weighted(&allowed);
            }
            let a = self.rng.weighted(table(self.cfg.profile));
            if f.allows(a) {
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

    pub(super) fn finish(&mut self) {
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
