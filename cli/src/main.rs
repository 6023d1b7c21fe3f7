//! nilref: the nilfs-ref command-line tool.
//!
//! `mkfs` writes a fresh filesystem the way mkfs.nilfs2 does; `inspect`
//! explains what a mount would decide; `lscp`, `lssu`, `dumpseg` and
//! `tune -l` print exactly what the nilfs-tools programs of the same names
//! print; `demo` runs all of it on an in-memory device.

//!
//! This file only parses the command line and dispatches: each command's
//! module owns its arguments (a clap `Args` struct, or a `Cmd` for the
//! commands with subcommands) and its `run`.

mod apply;
mod campaign;
mod check;
mod demo;
mod edit;
mod exec;
mod gen;
mod guest;
mod image;
mod ioctl;
mod listings;
mod mkfs;
mod mount;
mod oracle;
mod oracle_cli;
mod peers;
mod sim;
mod sim_gc_latency;
mod sim_readahead;
mod sim_streams;
mod svg;
mod tree;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "nilref",
    version,
    about = "nilfs-ref: a reference implementation of NILFS2"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Make a NILFS2 filesystem in an image file, as mkfs.nilfs2 does.
    Mkfs(mkfs::MkfsArgs),
    /// Explain what a mount would decide: super blocks, log scan, super root.
    Inspect(listings::InspectArgs),
    /// List checkpoints as lscp does.
    Lscp(listings::LscpArgs),
    /// List segment usage as lssu does.
    Lssu(listings::LssuArgs),
    /// Print segment summaries as dumpseg does.
    Dumpseg(listings::DumpsegArgs),
    /// Print the super block as `nilfs-tune -l` does.
    Tune(listings::TuneArgs),
    /// List a directory of a checkpoint (the latest by default).
    Ls(tree::LsArgs),
    /// Print a file of a checkpoint (the latest by default).
    Cat(tree::CatArgs),
    /// Print the manifest of a checkpoint in the format of the kernel guest's manifest.sh (tests/guest).
    Manifest(tree::ManifestArgs),
    /// Copy a checkpoint out as a directory tree.
    Export(tree::ExportArgs),
    /// Make a checkpoint (or snapshot) of the image, as mkcp does on a mounted filesystem.
    Mkcp(edit::MkcpArgs),
    /// Change checkpoints to snapshots or back, as chcp does.
    Chcp(edit::ChcpArgs),
    /// Remove checkpoints, as rmcp does for single numbers.
    Rmcp(edit::RmcpArgs),
    /// Reclaim segments as `nilfs-clean -p PROTECTION` does (timestamp
    /// policy), printing what was cleaned.
    Clean(edit::CleanArgs),
    /// Mount an image through FUSE, served by nilfs-ref's own file system
    /// (its log writer on the kernel's schedule, a clean unmount); runs
    /// until the mount point is unmounted (`fusermount3 -u MOUNTPOINT`).
    Mount(mount::MountArgs),
    /// Issue one of nilfs2's ioctls on a file or directory of a mounted
    /// file system (the kernel's or `nilref mount`'s) and print its
    /// answer: `sync`, `cpstat`, `sustat`, `chcp cp|ss CNO`, `rmcp CNO`,
    /// `alloc-range START END`, `version`, `lscp` (GET_CPINFO: every
    /// checkpoint's number; ENOTTY through FUSE).
    Ioctl(ioctl::IoctlArgs),
    /// Run a workload in the model's trace format against an image and
    /// record the observed outcomes (for `nilref oracle check`).
    Apply(apply::ApplyArgs),
    /// Campaigns: generated workloads against another implementation,
    /// judged by the model; failures shrunk to minimal findings.
    Campaign {
        #[command(subcommand)]
        cmd: campaign::Cmd,
    },
    /// Run a workload through system calls on a mounted file system (any
    /// implementation) and record what it observed (for `nilref oracle check`).
    Exec(exec::ExecArgs),
    /// One worker of `exec`'s concurrent run (internal).
    #[command(hide = true)]
    ExecWorker(exec::concurrent::WorkerArgs),
    /// The kernel guest as a stream runner for the oracle's traits
    /// (internal: `nilfs_adapter::KernelGuest`).
    #[command(hide = true)]
    Guest {
        #[command(subcommand)]
        cmd: guest::Cmd,
    },
    /// Generate a workload (a trace without outcomes) from a seed, biased
    /// by the model's state; run it with `apply` or `exec`.
    Gen(gen::GenArgs),
    /// Experiments on the simulated device (the seeds' figures).
    Sim {
        #[command(subcommand)]
        cmd: sim::Cmd,
    },
    /// The pinned NILFS2 peers (tests/peers.toml): list what is fetched
    /// here and what is missing (default), fetch them, print one's
    /// environment for the harness scripts.
    Peers {
        #[command(subcommand)]
        cmd: Option<peers::Cmd>,
    },
    /// The conformance oracle: check a trace against the model.
    Oracle {
        #[command(subcommand)]
        cmd: oracle_cli::Cmd,
    },
    /// Check the whole image, read-only, as fsck would (exit 0 clean, 4
    /// errors, 8 operational error).
    Check(check::CheckArgs),
    /// The main job on an embedded default, in memory: a generated
    /// workload with a snapshot, a power cut at a random write, recovery,
    /// the cleaner, each step judged by the model, and the image checked.
    Demo(demo::DemoArgs),
}

fn run(cmd: Cmd) -> Result<String, String> {
    match cmd {
        Cmd::Mkfs(a) => mkfs::run(a),
        Cmd::Inspect(a) => listings::run_inspect(a),
        Cmd::Lscp(a) => listings::run_lscp(a),
        Cmd::Lssu(a) => listings::run_lssu(a),
        Cmd::Dumpseg(a) => listings::run_dumpseg(a),
        Cmd::Tune(a) => listings::run_tune(a),
        Cmd::Ls(a) => tree::run_ls(a),
        Cmd::Cat(a) => tree::run_cat(a),
        Cmd::Manifest(a) => tree::run_manifest(a),
        Cmd::Export(a) => tree::run_export(a),
        Cmd::Mkcp(a) => edit::run_mkcp(a),
        Cmd::Chcp(a) => edit::run_chcp(a),
        Cmd::Rmcp(a) => edit::run_rmcp(a),
        Cmd::Clean(a) => edit::run_clean(a),
        Cmd::Mount(a) => mount::run(a),
        Cmd::Ioctl(a) => ioctl::run(a),
        Cmd::Apply(a) => apply::run(a),
        Cmd::Campaign { cmd } => campaign::run(&cmd),
        Cmd::Exec(a) => exec::run(a),
        Cmd::ExecWorker(a) => exec::concurrent::worker(a),
        Cmd::Guest { cmd } => guest::run(cmd),
        Cmd::Gen(a) => gen::run(a),
        Cmd::Sim { cmd } => sim::run(cmd),
        Cmd::Oracle { .. } => unreachable!("handled in main"),
        Cmd::Peers { cmd } => peers::run(cmd),
        Cmd::Demo(a) => demo::run(a),
        Cmd::Check(_) => unreachable!("handled in main"),
    }
}

/// Writes `s` to stdout. A reader that went away (`nilref check IMG |
/// head -1`) is no error of ours: the rest is dropped quietly, where
/// `print!` would panic on EPIPE (a Rust program ignores SIGPIPE).
pub(crate) fn print_out(s: &str) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    if let Err(e) = out.write_all(s.as_bytes()).and_then(|()| out.flush()) {
        if e.kind() != std::io::ErrorKind::BrokenPipe {
            eprintln!("nilref: stdout: {e}");
        }
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if let Cmd::Check(a) = &cli.cmd {
        return check::run(a);
    }
    if let Cmd::Oracle { cmd } = &cli.cmd {
        let judged = oracle_cli::run(cmd);
        let code = judged.exit_code();
        match judged.into_result() {
            Ok(out) => print_out(&out),
            Err(msg) => eprintln!("nilref: {msg}"),
        }
        return ExitCode::from(code);
    }
    match run(cli.cmd) {
        Ok(out) => {
            print_out(&out);
            ExitCode::SUCCESS
        }
        Err(msg) if msg.starts_with("dumpseg:") || msg.starts_with("Error:") => {
            eprintln!("{msg}");
            ExitCode::FAILURE
        }
        Err(msg) => {
            eprintln!("nilref: {msg}");
            ExitCode::FAILURE
        }
    }
}
