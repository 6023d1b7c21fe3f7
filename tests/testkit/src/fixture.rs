//! The kernel-written fixture: tests/fixtures/kernel-6.1, made by
//! tests/fixtures/make-kernel-fixture.sh (Linux 6.1 running
//! tests/guest/scenario-gc.sh) and committed, so always there.

use std::path::PathBuf;

/// The folder of the fixture's files; `NILFS_FIXTURES_DIR` points the
/// tests at another run's output.
pub fn dir() -> PathBuf {
    std::env::var_os("NILFS_FIXTURES_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../fixtures/kernel-6.1"))
}

/// The image, xz-compressed (128 MiB raw).
pub fn image_xz() -> PathBuf {
    dir().join("scenario-gc-128M.img.xz")
}

/// The manifest the guest printed of the image's checkpoints.
pub fn manifest() -> PathBuf {
    dir().join("scenario-gc-128M.manifest")
}

/// The scenario's own log (snapshot numbers, lscp listings).
pub fn scenario_log() -> PathBuf {
    dir().join("scenario-gc-128M.scenario.log")
}

/// The contents of one of the fixture's files, failing the test with the
/// path when it cannot be read.
pub fn read(path: PathBuf) -> String {
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}
