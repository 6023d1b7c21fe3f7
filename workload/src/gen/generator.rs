//! The generator's state and its pickers: the model state the workload
//! leads to, the lines emitted so far, and the choices of names, offsets,
//! sizes and data biased by that state.

use super::*;

pub(super) struct Generator<'c> {
    pub(super) cfg: &'c GenConfig,
    pub(super) rng: Rng,
    /// The model state the workload leads to, along the predicted branch.
    pub(super) state: State,
    pub(super) lines: Vec<Value>,
    /// One entry per mkcp emitted: the number the model predicts.
    pub(super) mkcps: Vec<Option<Cno>>,
    /// The latest lscp the model predicts, if one was emitted.
    pub(super) lscp: Option<Vec<CpEntry>>,
    /// Files written or changed lately (fsync targets), newest last.
    pub(super) touched: Vec<String>,
    pub(super) fills: u64,
    /// The last path chmod changed: chown often follows it there, to see
    /// the setuid and setgid bits cleared.
    pub(super) chmodded: Option<String>,
}

impl<'c> Generator<'c> {
    pub(super) fn new(cfg: &'c GenConfig, rng: Rng) -> Self {
        Generator {
            cfg,
            rng,
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
    pub(super) fn emit(&mut self, op: Op) -> Option<Outcome> {
        let v = to_value(&op);
        self.emit_as(op, v)
    }

    /// Emits the JSON `line` (which may hold checkpoint references) for the
    /// concrete `op` it stands for, and moves the model along the branch it
    /// predicts. Returns that outcome; an operation the model calls invalid
    /// is not emitted (`None`).
    pub(super) fn emit_as(&mut self, op: Op, line: Value) -> Option<Outcome> {
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

    pub(super) fn touch(&mut self, path: &str) {
        self.touched.retain(|p| p != path);
        self.touched.push(path.to_string());
        if self.touched.len() > 4 {
            self.touched.remove(0);
        }
    }

    // -------------------------------------------------------------- names

    pub(super) fn live(&self) -> &Namespace {
        &self.state.live
    }

    pub(super) fn mounted_rw(&self) -> bool {
        self.state.mount == Some(Mount::ReadWrite)
    }

    /// Existing paths whose inode satisfies `want`, root excluded.
    pub(super) fn existing(&self, want: fn(&Kind) -> bool) -> Vec<String> {
        self.live()
            .walk_all()
            .into_iter()
            .filter(|(_, id)| want(&self.live().get(*id).kind))
            .map(|(p, _)| p)
            .filter(|p| p != "/.nilfs")
            .collect()
    }

    pub(super) fn dirs(&self) -> Vec<String> {
        let mut d = vec!["/".to_string()];
        d.extend(self.existing(|k| matches!(k, Kind::Dir { .. })));
        d
    }

    /// A name in a directory: an existing directory (mostly shallow) and a
    /// name from `pool`, which may or may not exist there.
    pub(super) fn name_in_dir(&mut self, pool: &[&str]) -> String {
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
    pub(super) fn odd_path(&mut self) -> String {
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
    pub(super) fn target(&mut self, want: fn(&Kind) -> bool, pool: &[&str]) -> String {
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
    pub(super) fn fresh(&mut self, pool: &[&str]) -> String {
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

    pub(super) fn any_file(&mut self) -> String {
        self.target(|k| matches!(k, Kind::File(_)), &FILE_NAMES)
    }

    pub(super) fn size_of(&self, path: &str) -> u64 {
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

    pub(super) fn bs(&self) -> u64 {
        self.cfg.geometry.block_size as u64
    }

    /// Offsets that matter: the start, around block boundaries, at the end
    /// of the file, at the direct map's end, in B-tree territory, far out.
    pub(super) fn offset(&mut self, path: &str) -> u64 {
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

    pub(super) fn data(&mut self) -> Pattern {
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

    pub(super) fn truncate_size(&mut self, path: &str) -> u64 {
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
}
