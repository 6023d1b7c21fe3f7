//! `nilref gen`: a workload (a trace without outcomes) generated from a
//! seed by the model's generator, for `apply` or `exec`.

use nilfs_workload::concurrent::{generate_concurrent, ConcurrentConfig};
use nilfs_workload::gen::{generate, Features, GenConfig, Profile};

/// Arguments of `nilref gen`.
#[derive(clap::Args)]
pub struct GenArgs {
    /// The seed: the same seed, length and profile give the same workload.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Generation steps (each is one to a few operations).
    #[arg(long, default_value_t = 50)]
    pub len: usize,
    /// mixed, namespace, data, checkpoints, enospc, crash or attrs.
    #[arg(long, default_value = "mixed")]
    pub profile: String,
    /// What the implementation under test can be given: `all` (nilfs-ref:
    /// crashes, remounts, snapshot mounts, an injected clock), `device`
    /// (`exec --device`: mounts, no crash or clock), `mounted` (`exec`
    /// on a mounted file system: system calls and the nilfs-tools only)
    /// or `fuse` (`exec` on `nilref mount`: system calls only).
    #[arg(long, default_value = "all")]
    pub features: String,
    /// Block size (default: the profile's, 1024).
    #[arg(short = 'b')]
    pub block_size: Option<u32>,
    /// Blocks per segment (default: the profile's, 64).
    #[arg(short = 'B')]
    pub blocks_per_segment: Option<u32>,
    /// Segments (default: the profile's: 511 = a 32 MiB device, or 31 = 2 MiB for enospc).
    #[arg(long)]
    pub nsegments: Option<u64>,
    /// Leave out the closing sync, manifest, lscp and umount.
    #[arg(long)]
    pub no_epilogue: bool,
    /// A concurrent workload of this many writers (plus a checkpoint
    /// worker and a cleaner worker where the features allow them), each
    /// running `--len` operations at once (`nilfs_workload::concurrent`);
    /// `--profile` does not apply.
    #[arg(long)]
    pub workers: Option<usize>,
}

/// `nilref gen`.
pub fn run(a: GenArgs) -> Result<String, String> {
    let GenArgs {
        seed,
        len,
        profile,
        features,
        block_size,
        blocks_per_segment,
        nsegments,
        no_epilogue,
        workers,
    } = a;
    let profile: Profile = profile.parse()?;
    let mut cfg = GenConfig::new(seed, len, profile);
    cfg.features = match features.as_str() {
        "all" => Features::ALL,
        "device" => Features::DEVICE,
        "mounted" => Features::MOUNTED,
        "fuse" => Features::FUSE,
        other => {
            return Err(format!(
                "unknown feature set {other:?} (all, device, mounted, fuse)"
            ))
        }
    };
    if let Some(b) = block_size {
        cfg.geometry.block_size = b;
    }
    if let Some(b) = blocks_per_segment {
        cfg.geometry.blocks_per_segment = b;
    }
    if let Some(n) = nsegments {
        cfg.geometry.nsegments = n;
    }
    cfg.epilogue = !no_epilogue;
    if let Some(writers) = workers {
        let c = ConcurrentConfig {
            geometry: cfg.geometry,
            dot_nilfs: cfg.dot_nilfs,
            features: cfg.features,
            ..ConcurrentConfig::new(seed, writers, len)
        };
        return Ok(generate_concurrent(&c)
            .iter()
            .map(|v| v.to_string() + "\n")
            .collect());
    }
    Ok(generate(&cfg).to_jsonl())
}
