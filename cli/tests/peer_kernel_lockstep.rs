//! The kernel's nilfs2 behind the oracle's traits (peer tier,
//! `NILFS_PEERS=1`): `nilfs_adapter::KernelGuest` boots the pinned kernel
//! once and runs each generated case in lockstep with the model, an
//! operation at a time, mounts and snapshot mounts included, the image
//! read back at every sync and mount — the same harness as the in-process
//! `Fs` and the FUSE mount, with no special case. Times are judged within
//! each call's own clock interval. `NILFS_KERNEL_LOCKSTEP_CASES` sets the
//! cases per kernel (default 64); `NILFS_KERNEL` the pinned kernel
//! (default: each of 6.1, 6.12 and 7.3).

mod common;

use std::path::{Path, PathBuf};

use nilfs_model::{Geometry, Op, Outcome};
use nilfs_oracle::{Durable, ImageSpec, Implementation, Sut, WriteLog};
use nilfs_workload::gen::Features;

/// 4 KiB blocks, so that a case's checkpoints stay in the cpfile's first
/// block (20 of them): the kernel writes one more MINOR checkpoint after a
/// checkpoint opens a new cpfile block (finding K15), which the model does
/// not number.
fn config(cases: u32) -> nilfs_oracle::Config {
    nilfs_oracle::Config {
        spec: ImageSpec {
            block_size: 4096,
            blocks_per_segment: 64,
            device_bytes: 64 << 20,
            ..ImageSpec::default()
        },
        // The cleaner's checkpoints are not the workload's.
        features: Features {
            clean: false,
            ..Features::DEVICE
        },
        cases,
        max_len: 24,
        regressions: None,
        ..nilfs_oracle::Config::default()
    }
}

fn scratch(name: &str) -> PathBuf {
    let d = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("kernel-lockstep-{name}"));
    let _ = std::fs::remove_dir_all(&d);
    d
}

fn guest(dir: &Path, kernel: Option<&str>) -> nilfs_adapter::KernelGuest {
    nilfs_adapter::KernelGuest::new(Path::new(env!("CARGO_BIN_EXE_nilref")), kernel, dir)
}

/// The kernels the pass test runs: `NILFS_KERNEL`, or every pinned one.
fn kernels() -> Vec<String> {
    match std::env::var("NILFS_KERNEL") {
        Ok(k) => vec![k],
        Err(_) => vec!["6.1".into(), "6.12".into(), "7.3".into()],
    }
}

fn available(name: &str) -> bool {
    nilfs_conformance::peers::require(name, &["qemu-system-x86_64", "mkfs.nilfs2"]).is_some()
}

/// Generated cases of every profile pass in lockstep with the model.
#[test]
fn the_kernel_passes_lockstep_through_the_oracles_traits() {
    if !available("the_kernel_passes_lockstep_through_the_oracles_traits") {
        return;
    }
    let cases = std::env::var("NILFS_KERNEL_LOCKSTEP_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(64);
    for k in kernels() {
        eprintln!("Linux {k}: {cases} cases");
        let mut imp = guest(&scratch(&format!("pass-{k}")), Some(&k));
        nilfs_oracle::proptest(&mut imp, &config(cases));
    }
}

/// The known-bad: the same guest behind a wrapper that drops every chmod
/// (answers it without running it). The harness must find it and shrink
/// the case to the few lines that show it.
struct DropsChmod(nilfs_adapter::KernelGuest);

struct DropsChmodSut<'a>(Box<dyn Sut + 'a>);

impl Implementation for DropsChmod {
    fn format(
        &mut self,
        spec: &ImageSpec,
        log: Option<&WriteLog>,
    ) -> Result<(Geometry, Box<dyn Sut + '_>), String> {
        let (g, sut) = self.0.format(spec, log)?;
        Ok((g, Box::new(DropsChmodSut(sut))))
    }
}

impl Sut for DropsChmodSut<'_> {
    fn apply(&mut self, op: &Op) -> Outcome {
        match op {
            Op::Chmod { .. } => Outcome::Ok,
            op => self.0.apply(op),
        }
    }
    fn durable(&mut self) -> Result<Durable, String> {
        self.0.durable()
    }
    fn detail(&self) -> Option<String> {
        self.0.detail()
    }
    fn clock_interval(&self) -> Option<[i64; 2]> {
        self.0.clock_interval()
    }
}

#[test]
fn lockstep_through_the_kernel_guest_catches_a_dropped_chmod() {
    if !available("lockstep_through_the_kernel_guest_catches_a_dropped_chmod") {
        return;
    }
    let mut imp = DropsChmod(guest(&scratch("bad"), None));
    common::finds_a_dropped_chmod(&mut imp, &config(1), 20, 16);
}
