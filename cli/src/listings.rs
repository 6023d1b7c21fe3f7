//! The nilfs-tools-compatible listings, as the CLI prints them.

use nilfs::device::BlockDevice;
use nilfs::inspect::nilfs_utils::{LscpOptions, LssuOptions};
use nilfs::inspect::tools;

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
            print!("{}", out.stdout);
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
