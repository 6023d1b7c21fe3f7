//! A small CPU data-cache model: set-associative LRU caches stacked into a
//! hierarchy, counting hits and misses of byte-range accesses.
//!
//! # What is modelled
//!
//! One level ([`SetAssocCache`]) has `size_bytes / (line_bytes × ways)` sets.
//! A byte address belongs to line `addr / line_bytes`; the line lives in set
//! `line % sets` and may occupy any of that set's `ways` slots. A lookup that
//! finds the line is a hit and makes it the set's most recently used line; a
//! miss fills the line, evicting the set's least recently used one when the
//! set is full (true LRU). [`SetAssocCache::invalidate_line`] drops a line.
//!
//! A [`Hierarchy`] stacks levels (L1 first). An access looks in L1; each miss
//! goes on to the next level, and the line is filled into every level that
//! missed. Levels are otherwise independent: an eviction in L2 does not
//! remove the line from L1 (non-inclusive, as Nehalem's L1 and L2 are), and
//! there is no prefetcher, no write-back traffic (the experiments here only
//! read) and no timing: the model counts, it does not charge cycles. Every
//! level must use the same line size.
//!
//! # Default: an Intel Nehalem core (Xeon 5500 / Core i7, 2008–2010)
//!
//! [`Hierarchy::nehalem_2010`] models one core of Intel's Nehalem
//! microarchitecture, the server core of early 2010 when seed 002 was
//! discussed (Shaohua Li posted from Intel; Jens Axboe measured on "a higher
//! throughput system" reading 2.5 GB/s). The *Intel 64 and IA-32
//! Architectures Optimization Reference Manual* (§2.2, "Intel
//! microarchitecture code name Nehalem") gives per core a 32 KiB 8-way L1
//! data cache and a 256 KiB 8-way unified L2, and an 8 MiB 16-way inclusive
//! L3 shared by the four cores of a socket; all with 64-byte lines. The L3 is
//! here because `perf stat`'s generic `cache-misses` event — the figure in
//! the seed's thread — counts last-level-cache misses on Intel
//! (architectural event `LLC Misses`, 0x2E/0x41). We model the L3 as if one
//! core had it to itself.
//!
//! # Determinism
//!
//! Plain arrays and a counter; no clock, no randomness, no hashing.

use std::fmt;

/// Geometry of one cache level.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CacheConfig {
    /// Name used in reports ("L1d", "L2", ...).
    pub name: String,
    /// Capacity in bytes.
    pub size_bytes: u64,
    /// Associativity: lines per set.
    pub ways: u32,
    /// Line size in bytes.
    pub line_bytes: u32,
}

impl CacheConfig {
    /// A level named `name` of `size_bytes`, `ways`-way, with `line_bytes` lines.
    pub fn new(name: &str, size_bytes: u64, ways: u32, line_bytes: u32) -> Self {
        CacheConfig {
            name: name.to_string(),
            size_bytes,
            ways,
            line_bytes,
        }
    }

    /// Number of sets, or an error when the geometry does not divide evenly.
    pub fn sets(&self) -> Result<u64, String> {
        let way_bytes = u64::from(self.ways) * u64::from(self.line_bytes);
        if self.ways == 0 || self.line_bytes == 0 || self.size_bytes == 0 {
            return Err(format!(
                "{}: size, ways and line size must be non-zero",
                self.name
            ));
        }
        if !self.size_bytes.is_multiple_of(way_bytes) {
            return Err(format!(
                "{}: {} bytes is not a whole number of {}-way sets of {}-byte lines",
                self.name, self.size_bytes, self.ways, self.line_bytes
            ));
        }
        Ok(self.size_bytes / way_bytes)
    }
}

impl fmt::Display for CacheConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {} KiB {}-way {} B lines",
            self.name,
            self.size_bytes / 1024,
            self.ways,
            self.line_bytes
        )
    }
}

/// Hit and miss counts of one level.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CacheStats {
    /// Lookups that found their line.
    pub hits: u64,
    /// Lookups that did not (and filled the line).
    pub misses: u64,
}

/// Marks an empty slot. Line numbers are byte addresses / line size, so
/// they never reach it.
const EMPTY: u64 = u64::MAX;

/// One set-associative LRU cache.
#[derive(Clone, Debug)]
pub struct SetAssocCache {
    config: CacheConfig,
    sets: u64,
    ways: usize,
    /// `sets × ways` slots, one run of `ways` per set, each run ordered from
    /// most to least recently used, with [`EMPTY`] slots at its end.
    lines: Vec<u64>,
    stats: CacheStats,
}

impl SetAssocCache {
    /// An empty cache of geometry `config`.
    pub fn new(config: CacheConfig) -> Result<Self, String> {
        let sets = config.sets()?;
        let ways = config.ways as usize;
        let slots = usize::try_from(sets)
            .ok()
            .and_then(|s| s.checked_mul(ways))
            .filter(|&n| n <= 1 << 26)
            .ok_or_else(|| format!("{}: too many lines to model", config.name))?;
        Ok(SetAssocCache {
            config,
            sets,
            ways,
            lines: vec![EMPTY; slots],
            stats: CacheStats::default(),
        })
    }

    /// The geometry.
    pub fn config(&self) -> &CacheConfig {
        &self.config
    }

    /// Counts so far.
    pub fn stats(&self) -> CacheStats {
        self.stats
    }

    /// The set that may hold `line`, most recently used first.
    fn set(&self, line: u64) -> &[u64] {
        let first = (line % self.sets) as usize * self.ways;
        &self.lines[first..first + self.ways]
    }

    fn set_mut(&mut self, line: u64) -> &mut [u64] {
        let first = (line % self.sets) as usize * self.ways;
        &mut self.lines[first..first + self.ways]
    }

    /// Look up `line` (a line number, not a byte address): true on a hit.
    /// Either way the line ends up most recently used in its set; a miss in
    /// a full set evicts the least recently used line.
    pub fn access_line(&mut self, line: u64) -> bool {
        let set = self.set_mut(line);
        let hit = match set.iter().position(|&l| l == line) {
            Some(i) => {
                set[..=i].rotate_right(1);
                true
            }
            None => {
                // The last slot is empty or the LRU line: it goes.
                set[set.len() - 1] = line;
                set.rotate_right(1);
                false
            }
        };
        if hit {
            self.stats.hits += 1;
        } else {
            self.stats.misses += 1;
        }
        hit
    }

    /// Whether `line` is cached. Changes nothing (not even recency).
    pub fn contains_line(&self, line: u64) -> bool {
        self.set(line).contains(&line)
    }

    /// Drop `line` if it is cached (a coherent DMA write snooping it away).
    pub fn invalidate_line(&mut self, line: u64) {
        let set = self.set_mut(line);
        if let Some(i) = set.iter().position(|&l| l == line) {
            set[i..].rotate_left(1);
            set[set.len() - 1] = EMPTY;
        }
    }
}

/// Misses of one access (or pass), per level, L1 first.
pub type LevelMisses = Vec<u64>;

/// Caches stacked L1 first; see the module documentation.
#[derive(Clone, Debug)]
pub struct Hierarchy {
    levels: Vec<SetAssocCache>,
    line_bytes: u64,
}

impl Hierarchy {
    /// A hierarchy of `configs`, L1 first. All levels must share a line size.
    pub fn new(configs: &[CacheConfig]) -> Result<Self, String> {
        let first = configs.first().ok_or("a cache hierarchy needs a level")?;
        if let Some(c) = configs.iter().find(|c| c.line_bytes != first.line_bytes) {
            return Err(format!(
                "{}: line size {} differs from {}'s {}",
                c.name, c.line_bytes, first.name, first.line_bytes
            ));
        }
        let levels = configs
            .iter()
            .cloned()
            .map(SetAssocCache::new)
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Hierarchy {
            levels,
            line_bytes: u64::from(first.line_bytes),
        })
    }

    /// The geometry of one Nehalem core (see the module documentation):
    /// L1d 32 KiB 8-way, L2 256 KiB 8-way, L3 8 MiB 16-way, 64-byte lines.
    pub fn nehalem_configs() -> Vec<CacheConfig> {
        vec![
            CacheConfig::new("L1d", 32 << 10, 8, 64),
            CacheConfig::new("L2", 256 << 10, 8, 64),
            CacheConfig::new("L3", 8 << 20, 16, 64),
        ]
    }

    /// [`Self::nehalem_configs`] as an empty hierarchy.
    pub fn nehalem_2010() -> Self {
        Self::new(&Self::nehalem_configs()).expect("Nehalem geometry is valid")
    }

    /// The levels, L1 first.
    pub fn levels(&self) -> &[SetAssocCache] {
        &self.levels
    }

    /// Line size in bytes.
    pub fn line_bytes(&self) -> u64 {
        self.line_bytes
    }

    /// The line numbers covering bytes `[addr, addr + len)`.
    fn lines(&self, addr: u64, len: u64) -> std::ops::Range<u64> {
        if len == 0 {
            return 0..0;
        }
        addr / self.line_bytes..(addr + len - 1) / self.line_bytes + 1
    }

    /// Read bytes `[addr, addr + len)`: every line they cover is looked up
    /// once. Returns this access's misses per level.
    pub fn access(&mut self, addr: u64, len: u64) -> LevelMisses {
        let mut misses = vec![0; self.levels.len()];
        for line in self.lines(addr, len) {
            for (level, m) in self.levels.iter_mut().zip(misses.iter_mut()) {
                if level.access_line(line) {
                    break;
                }
                *m += 1;
            }
        }
        misses
    }

    /// Whether level `level` (0 = L1) holds the line of byte `addr`.
    /// Changes nothing.
    pub fn contains(&self, level: usize, addr: u64) -> bool {
        self.levels
            .get(level)
            .is_some_and(|c| c.contains_line(addr / self.line_bytes))
    }

    /// Drop every line covering `[addr, addr + len)` from every level.
    pub fn invalidate(&mut self, addr: u64, len: u64) {
        for line in self.lines(addr, len) {
            for level in &mut self.levels {
                level.invalidate_line(line);
            }
        }
    }

    /// Counts so far, per level, L1 first.
    pub fn stats(&self) -> Vec<CacheStats> {
        self.levels.iter().map(SetAssocCache::stats).collect()
    }
}
