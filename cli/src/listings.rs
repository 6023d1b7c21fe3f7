//! The nilfs-tools-compatible listings, as the CLI prints them.
//! `nilref inspect`, `lscp`, `lssu`, `dumpseg` and `tune -l`: each
//! command's arguments and its `run`.

use std::path::PathBuf;

use nilfs::device::BlockDevice;
use nilfs::inspect::nilfs_utils::{LscpOptions, LssuOptions};
use nilfs::inspect::tools;

use crate::image::open_image;

/// `lscp` with the flags the CLI exposes.
pub fn lscp(
    dev: &dyn BlockDevice,
    snapshots: bool,
    all: bool,
    reverse: bool,
) -> nilfs::Result<String> {
    let opts = LscpOptions {
        snapshots,
        all,
        reverse,
        ..LscpOptions::default()
    };
    tools::lscp(dev, &opts)
}

/// `lssu` with the flags the CLI exposes.
pub fn lssu(dev: &dyn BlockDevice, all: bool) -> nilfs::Result<String> {
    tools::lssu(
        dev,
        &LssuOptions {
            all,
            ..LssuOptions::default()
        },
    )
}

/// `dumpseg`: what it prints on stdout; an out-of-range segment number is
/// an error after the segments before it were printed.
pub fn dumpseg(dev: &dyn BlockDevice, segnums: &[u64]) -> Result<String, String> {
    let out = tools::dumpseg(dev, segnums).map_err(|e| e.to_string())?;
    match out.error {
        None => Ok(out.stdout),
        Some(e) => {
            crate::print_out(&out.stdout);
            Err(e)
        }
    }
}

/// `nilfs-tune -l`.
pub fn tune_list(
    dev: &dyn BlockDevice,
    version: nilfs::inspect::nilfs_utils::tune::NilfsUtils,
) -> nilfs::Result<String> {
    tools::tune_list(dev, version)
}

/// Arguments of `nilref inspect`.
#[derive(clap::Args)]
pub struct InspectArgs {
    /// Image file (raw, or .xz-compressed).
    pub image: PathBuf,
}

/// Arguments of `nilref lscp`.
#[derive(clap::Args)]
pub struct LscpArgs {
    /// Image file.
    pub image: PathBuf,
    /// Snapshots only.
    #[arg(short = 's')]
    pub snapshots: bool,
    /// Show all checkpoints, minor ones included.
    #[arg(short = 'a')]
    pub all: bool,
    /// Reverse order.
    #[arg(short = 'r')]
    pub reverse: bool,
}

/// Arguments of `nilref lssu`.
#[derive(clap::Args)]
pub struct LssuArgs {
    /// Image file.
    pub image: PathBuf,
    /// Show every segment, clean ones included.
    #[arg(short = 'a')]
    pub all: bool,
}

/// Arguments of `nilref dumpseg`.
#[derive(clap::Args)]
pub struct DumpsegArgs {
    /// Image file.
    pub image: PathBuf,
    /// Segment numbers.
    #[arg(required = true)]
    pub segnums: Vec<u64>,
}

/// Arguments of `nilref tune`.
#[derive(clap::Args)]
pub struct TuneArgs {
    /// Image file.
    pub image: PathBuf,
    /// List the super block contents.
    #[arg(short = 'l', required = true)]
    pub list: bool,
    /// Print as this nilfs-utils version's nilfs-tune: 2.2.9 (the
    /// default) or 2.2.11.
    #[arg(long, value_parser = parse_nilfs_utils)]
    pub like: Option<nilfs::inspect::nilfs_utils::tune::NilfsUtils>,
}

/// A nilfs-utils version whose printed output nilref reproduces.
pub fn parse_nilfs_utils(s: &str) -> Result<nilfs::inspect::nilfs_utils::tune::NilfsUtils, String> {
    nilfs::inspect::nilfs_utils::tune::NilfsUtils::parse(s)
        .ok_or_else(|| format!("unknown nilfs-utils version `{s}` (2.2.9, 2.2.11)"))
}

fn e(e: nilfs::Error) -> String {
    e.to_string()
}

/// `nilref inspect`.
pub fn run_inspect(a: InspectArgs) -> Result<String, String> {
    nilfs::inspect::report::inspect(open_image(&a.image).map_err(e)?.as_ref()).map_err(e)
}

/// `nilref lscp`.
pub fn run_lscp(a: LscpArgs) -> Result<String, String> {
    lscp(
        open_image(&a.image).map_err(e)?.as_ref(),
        a.snapshots,
        a.all,
        a.reverse,
    )
    .map_err(e)
}

/// `nilref lssu`.
pub fn run_lssu(a: LssuArgs) -> Result<String, String> {
    lssu(open_image(&a.image).map_err(e)?.as_ref(), a.all).map_err(e)
}

/// `nilref dumpseg`.
pub fn run_dumpseg(a: DumpsegArgs) -> Result<String, String> {
    dumpseg(open_image(&a.image).map_err(e)?.as_ref(), &a.segnums)
}

/// `nilref tune -l` (`-l` is required: the only thing it does).
pub fn run_tune(a: TuneArgs) -> Result<String, String> {
    tune_list(
        open_image(&a.image).map_err(e)?.as_ref(),
        a.like.unwrap_or_default(),
    )
    .map_err(e)
}
