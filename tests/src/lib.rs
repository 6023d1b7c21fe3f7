//! nilfs-conformance: the harness that checks nilfs-ref against real NILFS2
//! peers — Debian's nilfs-tools, GRUB's reader, the Linux kernel in a qemu
//! guest — and against the kernel-written fixtures in ../shared/fixtures.
//!
//! Peer tests are a tier of their own: plain `cargo test` stays hermetic and
//! fast, and runs them only when `NILFS_PEERS=1` is set (the README's test
//! command sets it and installs the peers). With the variable set, a missing
//! peer is a failure, never a silent skip.

pub mod fuzz;
pub mod lockstep;
pub mod peers;

use std::path::PathBuf;

/// The shared/ folder beside the project (read-only in CI).
pub fn shared_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("NILFS_SHARED_DIR") {
        return PathBuf::from(d);
    }
    let beside = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join("..")
        .join("shared");
    if beside.exists() {
        beside
    } else {
        // A clone made elsewhere (say /tmp/fresh) on this machine.
        PathBuf::from("/work/shared")
    }
}

/// The kernel-written fixture image (xz-compressed) and its manifest.
pub fn kernel_fixture() -> (PathBuf, PathBuf) {
    let d = shared_dir().join("fixtures").join("kernel-6.1");
    (
        d.join("scenario-gc-128M.img.xz"),
        d.join("scenario-gc-128M.manifest"),
    )
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

/// Lowercase hex sha256, as sha256sum prints it.
pub fn sha256_hex(data: &[u8]) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(data)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}
