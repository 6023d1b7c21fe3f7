//! Helpers shared by the peer tests that boot the kernel guest or write
//! images for a peer (every peer_kernel_*.rs, peer_grub_reads_our_writes.rs): a
//! deterministic byte pattern (the model's), one guest boot over several
//! images, the `@@NAME` sections a guest script prints, and the dmesg
//! lines to complain about.

#![allow(dead_code)] // each test file uses its own subset

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Command;

use nilfs::device::{export_image, BlockDevice, MemDevice};
use nilfs::inspect::nilfs_utils::{LscpOptions, LssuOptions};
use nilfs::inspect::tools;
use nilfs_conformance::peers::{self, Scratch};
use nilfs_model::Pattern;

/// What the peer tests import, in one place: `use peer_common::prelude::*`.
#[allow(unused_imports)] // each test file uses its own subset
pub mod prelude {
    pub use super::{
        assert_dmesg_clean, export_to, guest, kernel_run, kernel_run_with, listings, pattern,
        script_per_image, sections, sized_file, Boot, DEVS, GUEST,
    };
    pub use nilfs::device::{export_image, FileDevice, MemDevice};
    pub use nilfs::format::ino;
    pub use nilfs::fs::Fs;
    pub use nilfs::inspect::manifest::manifest;
    pub use nilfs::inspect::nilfs_utils::{LscpOptions, LssuOptions};
    pub use nilfs::inspect::tools;
    pub use nilfs::mkfs::{self, MkfsOptions};
    pub use nilfs::posix::CheckpointView;
    pub use nilfs::the_nilfs::Nilfs;
    pub use nilfs_conformance::peers::{self, Scratch};
}

/// The programs a kernel guest boot needs (`peers::require`).
pub const GUEST: &[&str] = &["qemu-system-x86_64", "busybox", "cpio"];

/// Guest device names for the first, second, ... image of one boot.
pub const DEVS: &[&str] = &["vda", "vdb", "vdc", "vdd", "vde", "vdf", "vdg", "vdh"];

/// Deterministic file contents: the model's seeded pattern.
pub fn pattern(seed: u64, len: usize) -> Vec<u8> {
    Pattern::Seeded {
        seed,
        len: len as u64,
    }
    .to_bytes()
}

/// Split guest output into sections: a line `@@NAME` starts section NAME.
pub fn sections(out: &str) -> BTreeMap<String, String> {
    let mut map = BTreeMap::new();
    let mut cur: Option<String> = None;
    for l in out.lines() {
        if let Some(h) = l.strip_prefix("@@") {
            cur = Some(h.to_string());
            map.insert(h.to_string(), String::new());
        } else if let Some(c) = &cur {
            let s = map.get_mut(c).expect("section exists");
            s.push_str(l);
            s.push('\n');
        }
    }
    map
}

/// How [`kernel_run_with`] boots the guest.
#[derive(Clone, Copy, Debug, Default)]
pub struct Boot {
    /// The disks are attached read-only (`RO=1`).
    pub read_only: bool,
    /// The guest's time limit, seconds (600 when 0).
    pub timeout_s: u32,
}

/// Boot the guest once with `images` as /dev/vda, /dev/vdb, ... (read-write)
/// and run `script`; returns its output, failing the test if it fails.
pub fn kernel_run(images: &[PathBuf], script: &str, dir: &Scratch, name: &str) -> String {
    kernel_run_with(images, script, dir, name, Boot::default())
}

/// [`kernel_run`] with the disks and the time limit as `boot` says.
pub fn kernel_run_with(
    images: &[PathBuf],
    script: &str,
    dir: &Scratch,
    name: &str,
    boot: Boot,
) -> String {
    assert!(images.len() <= DEVS.len(), "too many disks for one boot");
    let path = dir.file(name);
    std::fs::write(&path, script).unwrap();
    let disks: Vec<String> = images[1..]
        .iter()
        .map(|p| p.display().to_string())
        .collect();
    let timeout = if boot.timeout_s == 0 {
        600
    } else {
        boot.timeout_s
    };
    let mut cmd = Command::new(peers::oracle_dir().join("kernel-run.sh"));
    cmd.arg(&images[0])
        .arg(&path)
        .env("DISKS", disks.join(" "))
        .env("TIMEOUT", timeout.to_string());
    if boot.read_only {
        cmd.env("RO", "1");
    }
    let out = peers::run(&mut cmd);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "kernel-run.sh {name} exited {}:\n{stdout}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// Fails the test on any nilfs line of the guest's dmesg that is not in
/// `accepted` (each an allowed substring, case-insensitive).
#[track_caller]
pub fn assert_dmesg_clean(dmesg: &str, accepted: &[&str]) {
    let bad: Vec<&str> = dmesg
        .lines()
        .filter(|l| l.to_lowercase().contains("nilfs"))
        .filter(|l| {
            let lower = l.to_lowercase();
            !accepted.iter().any(|a| lower.contains(&a.to_lowercase()))
        })
        .collect();
    assert!(
        bad.is_empty(),
        "unexpected nilfs2 messages: {bad:#?}\n{dmesg}"
    );
}

/// The start of a kernel-tier test: the guest's programs
/// (`peers::require`: off without NILFS_PEERS, a failure with it when
/// one is missing), then the test's scratch folder.
pub fn guest(test: &str, scratch: &str) -> Option<Scratch> {
    peers::require(test, GUEST)?;
    Some(Scratch::new(scratch))
}

/// Exports `dev` as `name` in `dir` and adds it to the guest's `images`.
pub fn export_to(dir: &Scratch, name: &str, dev: &MemDevice, images: &mut Vec<PathBuf>) {
    let img = dir.file(name);
    export_image(dev, &img).unwrap();
    images.push(img);
}

/// An empty (sparse) image file of `size` bytes, `name` in `dir`.
pub fn sized_file(dir: &Scratch, name: &str, size: u64) -> PathBuf {
    let img = dir.file(name);
    std::fs::File::create(&img).unwrap().set_len(size).unwrap();
    img
}

/// A guest script: `head`, then `each(d)` for the guest device `d` of each
/// of the `n` images, then the nilfs lines of dmesg as section DMESG.
pub fn script_per_image(head: &str, n: usize, each: impl Fn(&str) -> String) -> String {
    let mut script = String::from(head);
    for d in &DEVS[..n] {
        script.push_str(&each(d));
    }
    script.push_str("echo @@DMESG; dmesg | grep -i nilfs || true\n");
    script
}

/// What our tools show of an image: the latest checkpoint's manifest,
/// lscp and lssu, as the guest prints them.
pub fn listings(dev: &dyn BlockDevice) -> (String, String, String) {
    (
        nilfs_testkit::image::latest_manifest(dev),
        tools::lscp(dev, &LscpOptions::default()).unwrap(),
        tools::lssu(dev, &LssuOptions::default()).unwrap(),
    )
}
