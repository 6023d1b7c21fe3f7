//! nilfs-conformance: the harness that checks nilfs-ref against real NILFS2
//! peers — Debian's nilfs-tools, GRUB's reader, the Linux kernel in a qemu
//! guest — and against the kernel-written fixtures in tests/fixtures.
//!
//! Peer tests are a tier of their own: plain `cargo test` stays hermetic and
//! fast, and runs them only when `NILFS_PEERS=1` is set (the README's test
//! command sets it and installs the peers). With the variable set, a missing
//! peer is a failure, never a silent skip.

pub mod corrupt;
pub mod crash_envelope;
pub mod fuzz;
pub mod lockstep;
pub mod peers;

use std::path::PathBuf;

/// This crate's folder in the repository (`tests/`): the kernel-guest
/// harness is in `guest/`, the kernel-written images in `fixtures/`.
pub fn harness_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The section of a fixture manifest that follows the line `== NAME`, up to
/// the next `== ` line, with a trailing newline on each line.
pub fn manifest_section(manifest: &str, name: &str) -> Option<String> {
    let mut lines = manifest.lines().skip_while(|l| *l != format!("== {name}"));
    lines.next()?;
    let mut out = String::new();
    for l in lines.take_while(|l| !l.starts_with("== ")) {
        out.push_str(l);
        out.push('\n');
    }
    Some(out)
}

/// Lowercase hex sha256, as sha256sum prints it (the model's).
pub use nilfs_model::pattern::sha256_hex;

/// `nilref check` on `dev`, every checkpoint: panics with the report (and
/// `ctx`) unless the image is clean. Every image the kernel or our write
/// path leaves in the tests goes through it.
pub fn assert_checks_clean(dev: &dyn nilfs::device::BlockDevice, ctx: &str) {
    let opts = nilfs::check::Options {
        checkpoints: nilfs::check::Checkpoints::All,
        ..Default::default()
    };
    let r = nilfs::check::check_device(dev, &opts);
    assert!(r.is_clean(), "{ctx}: nilref check:\n{r}");
}
