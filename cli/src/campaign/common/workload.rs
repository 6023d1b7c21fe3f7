//! The workloads a campaign runs: generated from a seed or read from a
//! file, the seed ranges and shards that name them, and the device each
//! one's mkfs line asks for.

use std::path::Path;

use nilfs_model::{Geometry, Op};
use nilfs_workload::gen::{generate, Features, GenConfig, Profile};
use serde_json::Value;

/// A workload to run: its lines and where it came from.
#[derive(Clone, Debug)]
pub struct Workload {
    pub label: String,
    pub lines: Vec<Value>,
    pub geometry: Geometry,
}

impl Workload {
    /// The workload of `seed` (the profile from the seed unless given).
    pub fn generated(
        seed: u64,
        len: usize,
        profile: Option<Profile>,
        features: Features,
    ) -> Workload {
        let p = profile_for(seed, profile);
        let mut cfg = GenConfig::new(seed, len, p);
        cfg.features = features;
        let lines = generate(&cfg).lines;
        Workload {
            label: format!("seed {seed} profile {} len {len}", p.name()),
            geometry: geometry_of(&lines),
            lines,
        }
    }

    /// A workload read from a file.
    pub fn from_file(path: &Path) -> Result<Workload, String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
        let lines: Vec<Value> = nilfs_workload::parse(&text)
            .map_err(|(n, m)| format!("{} line {n}: {m}", path.display()))?
            .into_iter()
            .map(|(_, v)| v)
            .collect();
        if lines
            .first()
            .and_then(|l| l.get("op"))
            .and_then(Value::as_str)
            != Some("mkfs")
        {
            return Err(format!(
                "{}: a campaign workload starts with mkfs",
                path.display()
            ));
        }
        Ok(Workload {
            label: path.display().to_string(),
            geometry: geometry_of(&lines),
            lines,
        })
    }

    pub fn with_lines(&self, lines: Vec<Value>) -> Workload {
        Workload {
            label: self.label.clone(),
            geometry: self.geometry.clone(),
            lines,
        }
    }

    /// The lines numbered from 1, as `apply::apply_lines` takes them.
    pub fn numbered_lines(&self) -> Vec<(usize, Value)> {
        self.lines
            .iter()
            .cloned()
            .enumerate()
            .map(|(i, v)| (i + 1, v))
            .collect()
    }

    pub fn to_jsonl(&self) -> String {
        self.lines.iter().map(|l| l.to_string() + "\n").collect()
    }

    /// The device mkfs gives this geometry on.
    pub fn device_bytes(&self) -> u64 {
        device_bytes_for(&self.lines)
    }
}

/// The geometry of a workload's mkfs line (defaults for a missing one).
pub fn geometry_of(lines: &[Value]) -> Geometry {
    match lines
        .first()
        .and_then(|l| serde_json::from_value::<Op>(l.clone()).ok())
    {
        Some(Op::Mkfs {
            block_size,
            blocks_per_segment,
            nsegments,
            r_segments_percentage,
            ..
        }) => Geometry {
            block_size,
            blocks_per_segment,
            nsegments,
            r_segments_percentage,
        },
        _ => Profile::Mixed.default_geometry(),
    }
}

/// `A..B` (both included) or a single seed.
pub fn parse_seeds(s: &str) -> Result<Vec<u64>, String> {
    let bad = || format!("seeds: {s:?} is not A..B or N");
    match s.split_once("..") {
        Some((a, b)) => {
            let a: u64 = a.trim().parse().map_err(|_| bad())?;
            let b: u64 = b.trim().parse().map_err(|_| bad())?;
            if b < a {
                return Err(bad());
            }
            Ok((a..=b).collect())
        }
        None => Ok(vec![s.trim().parse().map_err(|_| bad())?]),
    }
}

/// The `I/N` shard of a seed list (every N-th seed from the I-th).
pub fn shard(seeds: Vec<u64>, shard: Option<&str>) -> Result<Vec<u64>, String> {
    let Some(s) = shard else { return Ok(seeds) };
    let bad = || format!("shard: {s:?} is not I/N with 1 <= I <= N");
    let (i, n) = s.split_once('/').ok_or_else(bad)?;
    let (i, n): (usize, usize) = (i.parse().map_err(|_| bad())?, n.parse().map_err(|_| bad())?);
    if i == 0 || i > n {
        return Err(bad());
    }
    Ok(seeds
        .into_iter()
        .enumerate()
        .filter(|(k, _)| k % n == i - 1)
        .map(|(_, s)| s)
        .collect())
}

/// The geometry and size of the device a workload's mkfs line asks for.
pub fn device_bytes_for(lines: &[Value]) -> u64 {
    let g = geometry_of(lines);
    // mkfs.nilfs2 and ours give nsegments = the device's whole segments
    // less one (the super block area), so one more segment fits them all.
    (g.nsegments + 1) * g.blocks_per_segment as u64 * g.block_size as u64
}

/// Profiles of the default mix, by seed.
pub fn profile_for(seed: u64, profile: Option<Profile>) -> Profile {
    profile.unwrap_or(Profile::ALL[(seed % Profile::ALL.len() as u64) as usize])
}
