//! nilref: the nilfs-ref command-line tool.
//!
//! `mkfs` writes a fresh filesystem the way mkfs.nilfs2 does; `inspect`
//! explains what a mount would decide; `lscp`, `lssu`, `dumpseg` and
//! `tune -l` print exactly what the nilfs-tools programs of the same names
//! print; `demo` runs all of it on an in-memory device.

mod apply;
mod campaign;
mod check;
mod demo;
mod exec;
mod ioctl;
mod listings;
mod mount;
mod oracle;
mod sim;
mod sim_gc_latency;
mod sim_readahead;
mod sim_streams;
mod svg;
mod tree;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use nilfs::device::{BlockDevice, FileDevice};
use nilfs::mkfs::{self, MkfsOptions};

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
    Mkfs {
        /// Image file (created if --size is given).
        image: PathBuf,
        /// Image size (bytes, or with K/M/G/T suffix); default: the existing file's size.
        #[arg(long)]
        size: Option<String>,
        /// Block size in bytes.
        #[arg(short = 'b', default_value_t = 4096)]
        block_size: u64,
        /// Blocks per segment.
        #[arg(short = 'B', default_value_t = 2048)]
        blocks_per_segment: u64,
        /// Volume label.
        #[arg(short = 'L', default_value = "")]
        label: String,
        /// Reserved segments percentage.
        #[arg(short = 'm', default_value_t = 5)]
        reserved_percentage: u64,
        /// Seed for the CRC seed and UUID (mkfs.nilfs2 draws them at random).
        #[arg(long, default_value_t = 0)]
        seed: u64,
        /// Creation time, seconds since the epoch (mkfs.nilfs2 -P).
        #[arg(long)]
        ctime: Option<u64>,
        /// Explicit CRC seed (overrides --seed).
        #[arg(long, value_parser = parse_u32)]
        crc_seed: Option<u32>,
        /// Explicit UUID, 8-4-4-4-12 hex (overrides --seed).
        #[arg(long)]
        uuid: Option<String>,
        /// Do not create the .nilfs file (the nilfs-utils 2.3 layout).
        #[arg(long)]
        no_dot_nilfs: bool,
        /// Features: `block_count` or `^block_count` (comma-separated).
        #[arg(short = 'O')]
        features: Option<String>,
    },
    /// Explain what a mount would decide: super blocks, log scan, super root.
    Inspect {
        /// Image file (raw, or .xz-compressed).
        image: PathBuf,
    },
    /// List checkpoints as lscp does.
    Lscp {
        /// Image file.
        image: PathBuf,
        /// Snapshots only.
        #[arg(short = 's')]
        snapshots: bool,
        /// Show all checkpoints, minor ones included.
        #[arg(short = 'a')]
        all: bool,
        /// Reverse order.
        #[arg(short = 'r')]
        reverse: bool,
    },
    /// List segment usage as lssu does.
    Lssu {
        /// Image file.
        image: PathBuf,
        /// Show every segment, clean ones included.
        #[arg(short = 'a')]
        all: bool,
    },
    /// Print segment summaries as dumpseg does.
    Dumpseg {
        /// Image file.
        image: PathBuf,
        /// Segment numbers.
        #[arg(required = true)]
        segnums: Vec<u64>,
    },
    /// Print the super block as `nilfs-tune -l` does.
    Tune {
        /// Image file.
        image: PathBuf,
        /// List the super block contents.
        #[arg(short = 'l', required = true)]
        list: bool,
    },
    /// List a directory of a checkpoint (the latest by default).
    Ls {
        /// Image file.
        image: PathBuf,
        /// Path inside the filesystem.
        #[arg(default_value = "/")]
        path: String,
        /// Checkpoint number.
        #[arg(long)]
        cp: Option<u64>,
    },
    /// Print a file of a checkpoint (the latest by default).
    Cat {
        /// Image file.
        image: PathBuf,
        /// Path inside the filesystem.
        path: String,
        /// Checkpoint number.
        #[arg(long)]
        cp: Option<u64>,
    },
    /// Print the manifest of a checkpoint in the format of the kernel guest's manifest.sh (tests/guest).
    Manifest {
        /// Image file.
        image: PathBuf,
        /// Checkpoint number.
        #[arg(long)]
        cp: Option<u64>,
    },
    /// Copy a checkpoint out as a directory tree.
    Export {
        /// Image file.
        image: PathBuf,
        /// Destination directory (created).
        dir: PathBuf,
        /// Checkpoint number.
        #[arg(long)]
        cp: Option<u64>,
    },
    /// Make a checkpoint (or snapshot) of the image, as mkcp does on a mounted filesystem.
    Mkcp {
        /// Image file (modified).
        image: PathBuf,
        /// Make it a snapshot.
        #[arg(short = 's')]
        snapshot: bool,
        /// Print the checkpoint number.
        #[arg(short = 'p')]
        print: bool,
        /// Time to stamp, seconds since the epoch (default: now).
        #[arg(long)]
        time: Option<u64>,
    },
    /// Change checkpoints to snapshots or back, as chcp does.
    Chcp {
        /// Image file (modified).
        image: PathBuf,
        /// `cp` or `ss`.
        mode: String,
        /// Checkpoint numbers.
        #[arg(required = true)]
        cnos: Vec<u64>,
        /// Time to stamp, seconds since the epoch (default: now).
        #[arg(long)]
        time: Option<u64>,
    },
    /// Remove checkpoints, as rmcp does for single numbers.
    Rmcp {
        /// Image file (modified).
        image: PathBuf,
        /// Checkpoint numbers.
        #[arg(required = true)]
        cnos: Vec<u64>,
        /// Time to stamp, seconds since the epoch (default: now).
        #[arg(long)]
        time: Option<u64>,
    },
    /// Reclaim segments as `nilfs-clean -p PROTECTION` does (timestamp
    /// policy), printing what was cleaned.
    Clean {
        /// Image file (modified).
        image: PathBuf,
        /// Protection period in seconds: segments and checkpoints newer
        /// than this are kept.
        #[arg(short = 'p', long, default_value_t = 0)]
        protection: u64,
        /// Segments per cleaning step (`nsegments_per_clean`).
        #[arg(long, default_value_t = 2)]
        nsegs: usize,
        /// Time to stamp, seconds since the epoch (default: now).
        #[arg(long)]
        time: Option<u64>,
    },
    /// Mount an image through FUSE, served by nilfs-ref's own file system
    /// (its log writer on the kernel's schedule, a clean unmount); runs
    /// until the mount point is unmounted (`fusermount3 -u MOUNTPOINT`).
    Mount {
        /// Image file (written in place unless `-o ro`).
        image: PathBuf,
        mountpoint: PathBuf,
        /// Comma-separated: `ro` (read-only: nothing is written), `rw`,
        /// `cp=N` with `ro` (snapshot N, as the kernel mounts it),
        /// `direct_io` (no page cache: every read and write reaches
        /// nilfs-ref; mmap is refused).
        #[arg(short = 'o')]
        options: Option<String>,
        /// Run nilfs_cleanerd's policy in the background.
        #[arg(long)]
        cleaner: bool,
        /// A known-bad variant for the tests: `ignore-chmod`,
        /// `drop-partial-writes`.
        #[arg(long, hide = true)]
        known_bad: Option<String>,
    },
    /// Issue one of nilfs2's ioctls on a file or directory of a mounted
    /// file system (the kernel's or `nilref mount`'s) and print its
    /// answer: `sync`, `cpstat`, `sustat`, `chcp cp|ss CNO`, `rmcp CNO`,
    /// `alloc-range START END`, `version`, `lscp` (GET_CPINFO: every
    /// checkpoint's number; ENOTTY through FUSE).
    Ioctl {
        path: PathBuf,
        #[arg(required = true, num_args = 1..)]
        request: Vec<String>,
    },
    /// Run a workload in the model's trace format against an image and
    /// record the observed outcomes (for `nilref oracle check`).
    Apply {
        /// Image file (written back unless --dry-run).
        image: PathBuf,
        /// The trace (JSON Lines; `out` fields are ignored).
        trace: PathBuf,
        /// Where to write the observed trace (default: stdout).
        #[arg(short = 'o')]
        out: Option<PathBuf>,
        /// Leave the image unchanged.
        #[arg(long)]
        dry_run: bool,
    },
    /// Campaigns: generated workloads against another implementation,
    /// judged by the model; failures shrunk to minimal findings.
    Campaign {
        #[command(subcommand)]
        cmd: CampaignCmd,
    },
    /// Run a workload through system calls on a mounted file system (any
    /// implementation) and record what it observed (for `nilref oracle check`).
    Exec {
        /// The mount point (or, with --device, where to mount).
        dir: PathBuf,
        /// The workload (JSON Lines; `out` fields are ignored).
        workload: PathBuf,
        /// Where to write the observed trace (default: stdout).
        #[arg(short = 'o')]
        out: Option<PathBuf>,
        /// The block device: lets the workload mount, remount and unmount
        /// it, and mount snapshots.
        #[arg(long)]
        device: Option<PathBuf>,
        /// DIR's device is the dm-log-writes target DMNAME: put a mark
        /// `op-K` in its log before the operation of observed line K.
        #[arg(long, value_name = "DMNAME")]
        mark_log_writes: Option<String>,
    },
    /// Generate a workload (a trace without outcomes) from a seed, biased
    /// by the model's state; run it with `apply` or `exec`.
    Gen {
        /// The seed: the same seed, length and profile give the same workload.
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Generation steps (each is one to a few operations).
        #[arg(long, default_value_t = 50)]
        len: usize,
        /// mixed, namespace, data, checkpoints, enospc, crash or attrs.
        #[arg(long, default_value = "mixed")]
        profile: String,
        /// What the implementation under test can be given: `all` (nilfs-ref:
        /// crashes, remounts, snapshot mounts, an injected clock), `device`
        /// (`exec --device`: mounts, no crash or clock), `mounted` (`exec`
        /// on a mounted file system: system calls and the nilfs-tools only)
        /// or `fuse` (`exec` on `nilref mount`: system calls only).
        #[arg(long, default_value = "all")]
        features: String,
        /// Block size (default: the profile's, 1024).
        #[arg(short = 'b')]
        block_size: Option<u32>,
        /// Blocks per segment (default: the profile's, 64).
        #[arg(short = 'B')]
        blocks_per_segment: Option<u32>,
        /// Segments (default: the profile's: 511 = a 32 MiB device, or 31 = 2 MiB for enospc).
        #[arg(long)]
        nsegments: Option<u64>,
        /// Leave out the closing sync, manifest, lscp and umount.
        #[arg(long)]
        no_epilogue: bool,
    },
    /// Experiments on the simulated device (the seeds' figures).
    Sim {
        #[command(subcommand)]
        cmd: SimCmd,
    },
    /// The conformance oracle: check a trace against the model.
    Oracle {
        #[command(subcommand)]
        cmd: OracleCmd,
    },
    /// Check the whole image, read-only, as fsck would (exit 0 clean, 4
    /// errors, 8 operational error).
    Check {
        /// Image file (raw, or .xz-compressed).
        image: PathBuf,
        /// Also check this checkpoint (default: the latest and every snapshot).
        #[arg(long)]
        cp: Option<u64>,
        /// One JSON object per finding.
        #[arg(long)]
        json: bool,
        /// Check every valid checkpoint.
        #[arg(long, conflicts_with = "cp")]
        all_checkpoints: bool,
        /// No progress bar.
        #[arg(short = 'q', long)]
        quiet: bool,
    },
    /// The main job on an embedded default, in memory: a generated
    /// workload with a snapshot, a power cut at a random write, recovery,
    /// the cleaner, each step judged by the model, and the image checked.
    Demo {
        /// Changes the workload and the cut; the same seed prints the same.
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Run with a known-bad recovery (`forget-roll-forward`) to see the
        /// judgement fail.
        #[arg(long, hide = true)]
        known_bad: Option<String>,
    },
}

#[derive(Subcommand)]
enum SimCmd {
    /// Seed 002: a streaming read with per-page checksums and a CPU cache
    /// model, pages completing in submission order vs reverse order.
    CompletionOrder(sim::CompletionOrderArgs),
    /// Seed 000: dd of a file on the simulated hard disk and SSD, B-tree
    /// sibling read-ahead off vs on (see scripts/bench-readahead.sh).
    Readahead(sim_readahead::ReadaheadArgs),
    /// Seed 001: how long one cleaning request keeps writers out, with the
    /// block reads inside the lock (before the patch) and outside (after),
    /// on the simulated hard disk and SSD.
    GcFreeze {
        /// Segments per request (cleanerd's nsegments_per_clean).
        #[arg(long, default_value_t = 2)]
        nsegs: usize,
    },
    /// Seed 001's own figure: sysbench per-request write latency with
    /// nilfs_cleanerd running, before and after the patch, next to the
    /// seed's table.
    GcLatency(sim_gc_latency::GcLatencyArgs),
    /// Seed 002 in the shape of the thread's measurement: 8 concurrent
    /// streams sharing the last-level cache, beside its LLC-miss figure.
    CompletionStreams(sim_streams::StreamsArgs),
}

#[derive(clap::Args)]
struct CampaignArgs {
    /// Seeds, `A..B` (both included) or one number.
    #[arg(long, default_value = "1..12")]
    seeds: String,
    /// Generation steps per workload.
    #[arg(long, default_value_t = 60)]
    len: usize,
    /// One profile for every seed (default: the seed picks one of mixed,
    /// namespace, data, checkpoints, enospc, crash, attrs in turn).
    #[arg(long)]
    profile: Option<String>,
    /// Run only the I-th of N slices of the seeds (for a CI matrix).
    #[arg(long)]
    shard: Option<String>,
    /// Workload files to run instead of generated ones (a finding's
    /// workload.jsonl replays it).
    #[arg(long)]
    workload: Vec<PathBuf>,
    /// Where findings go.
    #[arg(long, default_value = "target/campaign")]
    out: PathBuf,
    /// Do not shrink failing workloads.
    #[arg(long)]
    no_shrink: bool,
    /// Stop after this many failing workloads (0: never).
    #[arg(long, default_value_t = 0)]
    max_findings: usize,
}

#[derive(Subcommand)]
enum CampaignCmd {
    /// Linux's nilfs2 in a qemu guest (one boot per batch of 12 workloads):
    /// the kernel's traces through the oracle, its images through our read
    /// path, and our own run of each workload.
    Kernel(CampaignArgs),
    /// GRUB's reader (grub-fstest) on images our write path makes from the
    /// workloads: every difference from our manifest classified.
    Grub(CampaignArgs),
    /// Crash consistency on Linux (CrashMonkey/ACE for NILFS2): the
    /// kernel's block writes recorded with dm-log-writes, every flush/FUA
    /// state (and sampled torn and reordered ones) recovered by nilfs-ref
    /// and judged by the model's crash envelope; a sample recovered by the
    /// kernel too, which must agree.
    Crash(CrashArgs),
}

#[derive(clap::Args)]
struct CrashArgs {
    /// Seeds, `A..B` (both included) or one number.
    #[arg(long, default_value = "1..6")]
    seeds: String,
    /// Generation steps per workload.
    #[arg(long, default_value_t = 12)]
    len: usize,
    /// The generator's profile.
    #[arg(long, default_value = "crash")]
    profile: String,
    /// Run only the I-th of N slices of the seeds (for a CI matrix).
    #[arg(long)]
    shard: Option<String>,
    /// Workload files to run instead of generated ones.
    #[arg(long)]
    workload: Vec<PathBuf>,
    /// Where findings go.
    #[arg(long, default_value = "target/campaign-crash")]
    out: PathBuf,
    /// Do not shrink failing workloads.
    #[arg(long)]
    no_shrink: bool,
    /// Stop after this many failing workloads (0: never).
    #[arg(long, default_value_t = 0)]
    max_findings: usize,
    /// Torn states sampled per epoch of writes.
    #[arg(long, default_value_t = 1)]
    torn: usize,
    /// Reordered states sampled per epoch of writes.
    #[arg(long, default_value_t = 1)]
    reordered: usize,
    /// Per epoch, the states with one of its first N writes missing.
    #[arg(long, default_value_t = 8)]
    all_but_one: usize,
    /// Crash states per workload that the kernel recovers too.
    #[arg(long, default_value_t = 2)]
    kernel_sample: usize,
    /// Record nilfs-ref's own write path instead of the kernel's (no guest).
    #[arg(long)]
    ours: bool,
    /// Judge a finding folder's kept crash images again, and nothing else.
    #[arg(long, value_name = "FINDING")]
    replay: Option<PathBuf>,
}

#[derive(Subcommand)]
enum OracleCmd {
    /// Check a JSON Lines trace from any NILFS2 implementation against the model.
    Check {
        /// The trace file.
        trace: PathBuf,
    },
}

fn parse_u32(s: &str) -> Result<u32, String> {
    let r = match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(h) => u32::from_str_radix(h, 16),
        None => s.parse(),
    };
    r.map_err(|e| e.to_string())
}

/// Parse "134217728", "128M", "128MiB", "1G": binary multiples, as truncate(1) does.
fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim().trim_end_matches("iB").trim_end_matches('B');
    let (num, mult) = match t.chars().last() {
        Some(c @ ('K' | 'k' | 'M' | 'm' | 'G' | 'g' | 'T' | 't')) => {
            let shift = match c.to_ascii_uppercase() {
                'K' => 10,
                'M' => 20,
                'G' => 30,
                _ => 40,
            };
            (&t[..t.len() - 1], 1u64 << shift)
        }
        _ => (t, 1),
    };
    let n: u64 = num.parse().map_err(|_| format!("invalid size: {s}"))?;
    n.checked_mul(mult)
        .ok_or_else(|| format!("size too large: {s}"))
}

fn parse_uuid(s: &str) -> Result<[u8; 16], String> {
    let hex: String = s.chars().filter(|c| *c != '-').collect();
    if hex.len() != 32 {
        return Err(format!("invalid uuid: {s}"));
    }
    let mut u = [0u8; 16];
    for (i, b) in u.iter_mut().enumerate() {
        *b = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16)
            .map_err(|_| format!("invalid uuid: {s}"))?;
    }
    Ok(u)
}

/// Open an image for reading: xz-compressed images are decompressed into memory.
pub(crate) fn open_image(path: &Path) -> Result<Box<dyn BlockDevice>, nilfs::Error> {
    let mut magic = [0u8; 6];
    let is_xz = std::fs::File::open(path)
        .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut magic))
        .is_ok()
        && magic == [0xFD, b'7', b'z', b'X', b'Z', 0];
    if is_xz {
        // Bounded by the image's own declared size (s_dev_size).
        Ok(Box::new(nilfs::device::import_image_limited(
            path,
            &nilfs::format::superblock::declared_dev_size,
        )?))
    } else {
        Ok(Box::new(FileDevice::open_read_only(path)?))
    }
}

fn run(cli: Cli) -> Result<String, String> {
    let e = |e: nilfs::Error| e.to_string();
    match cli.cmd {
        Cmd::Mkfs {
            image,
            size,
            block_size,
            blocks_per_segment,
            label,
            reserved_percentage,
            seed,
            ctime,
            crc_seed,
            uuid,
            no_dot_nilfs,
            features,
        } => {
            let mut o = MkfsOptions::from_seed(seed);
            o.block_size = block_size;
            o.blocks_per_segment = blocks_per_segment;
            o.reserved_percentage = reserved_percentage;
            o.label = label.into_bytes();
            o.dot_nilfs = !no_dot_nilfs;
            if let Some(t) = ctime {
                o.ctime = t;
            }
            if let Some(s) = crc_seed {
                o.crc_seed = s;
            }
            if let Some(u) = uuid {
                o.uuid = parse_uuid(&u)?;
            }
            for f in features.iter().flat_map(|f| f.split(',')) {
                match f {
                    "block_count" => o.feature_compat_ro |= mkfs::FEATURE_COMPAT_RO_BLOCK_COUNT,
                    "^block_count" => o.feature_compat_ro &= !mkfs::FEATURE_COMPAT_RO_BLOCK_COUNT,
                    other => return Err(format!("Error: invalid feature set option: {other}")),
                }
            }
            // Refuse a bad geometry before touching the file.
            mkfs::check_options(&o).map_err(|m| m.to_string())?;
            if let Some(size) = size {
                let size = parse_size(&size)?;
                let f = std::fs::OpenOptions::new()
                    .create(true)
                    .truncate(true)
                    .write(true)
                    .open(&image)
                    .map_err(|err| format!("{}: {err}", image.display()))?;
                f.set_len(size)
                    .map_err(|err| format!("{}: {err}", image.display()))?;
            }
            let dev = FileDevice::open_read_write(&image).map_err(e)?;
            let l = mkfs::mkfs(&dev, &o).map_err(e)?;
            Ok(format!(
                "{}: NILFS2, block size {}, {} blocks per segment, {} segments\n",
                image.display(),
                l.block_size,
                l.blocks_per_segment,
                l.nsegments
            ))
        }
        Cmd::Inspect { image } => {
            nilfs::inspect::report::inspect(open_image(&image).map_err(e)?.as_ref()).map_err(e)
        }
        Cmd::Lscp {
            image,
            snapshots,
            all,
            reverse,
        } => listings::lscp(
            open_image(&image).map_err(e)?.as_ref(),
            snapshots,
            all,
            reverse,
        )
        .map_err(e),
        Cmd::Lssu { image, all } => {
            listings::lssu(open_image(&image).map_err(e)?.as_ref(), all).map_err(e)
        }
        Cmd::Dumpseg { image, segnums } => {
            listings::dumpseg(open_image(&image).map_err(e)?.as_ref(), &segnums)
        }
        Cmd::Tune { image, list: _ } => {
            listings::tune_list(open_image(&image).map_err(e)?.as_ref()).map_err(e)
        }
        Cmd::Ls { image, path, cp } => {
            tree::ls(open_image(&image).map_err(e)?.as_ref(), &path, cp).map_err(e)
        }
        Cmd::Cat { image, path, cp } => {
            let mut out = std::io::BufWriter::new(std::io::stdout().lock());
            tree::cat(open_image(&image).map_err(e)?.as_ref(), &path, cp, &mut out).map_err(e)?;
            Ok(String::new())
        }
        Cmd::Manifest { image, cp } => {
            tree::manifest(open_image(&image).map_err(e)?.as_ref(), cp).map_err(e)
        }
        Cmd::Export { image, dir, cp } => {
            tree::export(open_image(&image).map_err(e)?.as_ref(), &dir, cp).map_err(e)
        }
        Cmd::Oracle {
            cmd: OracleCmd::Check { trace },
        } => oracle::check(&trace),
        Cmd::Mkcp {
            image,
            snapshot,
            print,
            time,
        } => with_rw(&image, time, |fs| {
            let cno = fs.mkcp(snapshot)?;
            Ok(if print {
                format!("{cno}\n")
            } else {
                String::new()
            })
        }),
        Cmd::Chcp {
            image,
            mode,
            cnos,
            time,
        } => {
            let snapshot = match mode.as_str() {
                "ss" => true,
                "cp" => false,
                other => return Err(format!("chcp: invalid mode: {other}")),
            };
            with_rw(&image, time, |fs| {
                for c in &cnos {
                    fs.chcp(nilfs::format::Cno(*c), snapshot)?;
                }
                Ok(String::new())
            })
        }
        Cmd::Rmcp { image, cnos, time } => with_rw(&image, time, |fs| {
            for c in &cnos {
                fs.rmcp(nilfs::format::Cno(*c))?;
            }
            Ok(String::new())
        }),
        Cmd::Clean {
            image,
            protection,
            nsegs,
            time,
        } => with_rw(&image, time, |fs| {
            let before = fs.sustat()?.ncleansegs;
            let r = nilfs::cleaner::clean(fs, protection, nsegs.max(1))?;
            let after = fs.sustat()?.ncleansegs;
            Ok(format!(
                "{} segments cleaned in {} steps: {} live blocks moved, {} virtual blocks freed; clean segments {} -> {}\n",
                r.cleaned_segs, r.steps, r.moved_blocks, r.freed_vblks, before, after
            ))
        }),
        Cmd::Apply {
            image,
            trace,
            out,
            dry_run,
        } => apply::run(&image, &trace, out.as_deref(), dry_run),
        Cmd::Ioctl { path, request } => ioctl::run(&path, &request),
        Cmd::Mount {
            image,
            mountpoint,
            options,
            cleaner,
            known_bad,
        } => {
            let mut opts = mount::Options {
                cleaner,
                ..mount::Options::default()
            };
            match known_bad.as_deref() {
                None => {}
                Some("ignore-chmod") => opts.known_bad_ignore_chmod = true,
                Some("drop-partial-writes") => opts.known_bad_drop_partial_writes = true,
                Some(k) => {
                    return Err(format!(
                        "unknown known-bad variant {k:?} (ignore-chmod, drop-partial-writes)"
                    ))
                }
            }
            for o in options.iter().flat_map(|o| o.split(',')) {
                match o {
                    "ro" => opts.read_only = true,
                    "rw" => opts.read_only = false,
                    "direct_io" => opts.direct_io = true,
                    _ => match o.strip_prefix("cp=").map(str::parse::<u64>) {
                        Some(Ok(cno)) if cno > 0 => opts.snapshot = Some(cno),
                        _ => {
                            return Err(format!(
                                "unknown mount option {o:?} (ro, rw, direct_io, cp=N with N > 0)"
                            ))
                        }
                    },
                }
            }
            // nilfs_parse_snapshot_option: a snapshot is mounted read-only.
            if opts.snapshot.is_some() && !opts.read_only {
                return Err("cp=N needs the ro option: a snapshot is mounted read-only".into());
            }
            if opts.read_only && cleaner {
                return Err("--cleaner needs a read-write mount".into());
            }
            mount::mount(&image, &mountpoint, &opts).map(|()| String::new())
        }
        Cmd::Campaign {
            cmd: CampaignCmd::Kernel(a),
        } => {
            let workloads = campaign_workloads(&a, nilfs_workload::gen::Features::DEVICE)?;
            let s = campaign::run_kernel(&campaign::Options {
                workloads,
                out: a.out.clone(),
                shrink: !a.no_shrink,
                batch: 12,
                max_findings: a.max_findings,
            })?;
            campaign_verdict(s.table(), s.findings.is_empty(), &a.out)
        }
        Cmd::Campaign {
            cmd: CampaignCmd::Grub(a),
        } => {
            // GRUB's reader shows neither owners nor special files.
            let features = nilfs_workload::gen::Features {
                crash: false,
                attrs: false,
                ..nilfs_workload::gen::Features::ALL
            };
            let workloads = campaign_workloads(&a, features)?;
            let s = campaign::run_grub(&campaign::Options {
                workloads,
                out: a.out.clone(),
                shrink: !a.no_shrink,
                batch: 1,
                max_findings: a.max_findings,
            })?;
            campaign_verdict(s.table(), s.findings.is_empty(), &a.out)
        }
        Cmd::Campaign {
            cmd: CampaignCmd::Crash(a),
        } => {
            if let Some(folder) = &a.replay {
                let (text, failing) = campaign::crash::replay(folder)?;
                return if failing { Err(text) } else { Ok(text) };
            }
            let profile: nilfs_workload::gen::Profile = a.profile.parse()?;
            let workloads = if a.workload.is_empty() {
                campaign::shard(campaign::parse_seeds(&a.seeds)?, a.shard.as_deref())?
                    .into_iter()
                    .map(|s| {
                        campaign::Workload::generated(
                            s,
                            a.len,
                            Some(profile),
                            nilfs_workload::gen::Features::DEVICE,
                        )
                    })
                    .collect()
            } else {
                a.workload
                    .iter()
                    .map(|p| campaign::Workload::from_file(p))
                    .collect::<Result<Vec<_>, _>>()?
            };
            let s = campaign::crash::run(&campaign::crash::CrashOptions {
                workloads,
                out: a.out.clone(),
                shrink: !a.no_shrink,
                max_findings: a.max_findings,
                torn: a.torn,
                reordered: a.reordered,
                all_but_one: a.all_but_one,
                kernel_sample: a.kernel_sample,
                ours: a.ours,
            })?;
            campaign_verdict(s.table(), s.findings.is_empty(), &a.out)
        }
        Cmd::Exec {
            dir,
            workload,
            out,
            device,
            mark_log_writes,
        } => exec::run(&exec::ExecOptions {
            dir: &dir,
            workload: &workload,
            out: out.as_deref(),
            device: device.as_deref(),
            mark_log_writes: mark_log_writes.as_deref(),
        }),
        Cmd::Gen {
            seed,
            len,
            profile,
            features,
            block_size,
            blocks_per_segment,
            nsegments,
            no_epilogue,
        } => {
            use nilfs_workload::gen::{generate, Features, GenConfig, Profile};
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
            Ok(generate(&cfg).to_jsonl())
        }
        Cmd::Sim {
            cmd: SimCmd::CompletionOrder(args),
        } => sim::completion_order(&args),
        Cmd::Sim {
            cmd: SimCmd::Readahead(args),
        } => sim_readahead::run(&args),
        Cmd::Sim {
            cmd: SimCmd::GcFreeze { nsegs },
        } => gc_freeze(nsegs),
        Cmd::Sim {
            cmd: SimCmd::GcLatency(args),
        } => sim_gc_latency::run(&args),
        Cmd::Sim {
            cmd: SimCmd::CompletionStreams(args),
        } => sim_streams::run_cli(&args),
        Cmd::Demo { seed, known_bad } => {
            let recovery = match known_bad.as_deref() {
                None => demo::Recovery::Kernel,
                Some("forget-roll-forward") => demo::Recovery::ForgetRollForward,
                Some(other) => return Err(format!("unknown known-bad variant {other:?}")),
            };
            demo::run(seed, recovery).map_err(|report| format!("the demo failed:\n{report}"))
        }
        Cmd::Check { .. } => unreachable!("handled in main"),
    }
}

/// The workloads a campaign's arguments name.
fn campaign_workloads(
    a: &CampaignArgs,
    features: nilfs_workload::gen::Features,
) -> Result<Vec<campaign::Workload>, String> {
    if !a.workload.is_empty() {
        return a
            .workload
            .iter()
            .map(|p| campaign::Workload::from_file(p))
            .collect();
    }
    let profile = a
        .profile
        .as_deref()
        .map(str::parse::<nilfs_workload::gen::Profile>)
        .transpose()?;
    let seeds = campaign::shard(campaign::parse_seeds(&a.seeds)?, a.shard.as_deref())?;
    Ok(seeds
        .into_iter()
        .map(|s| campaign::Workload::generated(s, a.len, profile, features))
        .collect())
}

/// Mount `image` read-write, run `f`, unmount (which writes what `f`
/// changed as a new checkpoint).
fn with_rw(
    image: &Path,
    time: Option<u64>,
    f: impl FnOnce(&mut nilfs::fs::Fs<'_>) -> nilfs::Result<String>,
) -> Result<String, String> {
    let e = |e: nilfs::Error| e.to_string();
    let now = time.unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs())
    });
    let dev = FileDevice::open_read_write(image).map_err(e)?;
    let nilfs = nilfs::the_nilfs::Nilfs::open(&dev).map_err(e)?;
    let mut fs = nilfs::fs::Fs::mount(&nilfs, now).map_err(e)?;
    let out = f(&mut fs).map_err(e)?;
    fs.unmount().map_err(e)?;
    Ok(out)
}

fn gc_freeze(nsegs: usize) -> Result<String, String> {
    use nilfs::device::SimConfig;
    let mut out = format!(
        "seed 001 on the simulated clock: one cleaning request of {nsegs} segments\n\
         | device | segments | live blocks moved | reading them | locked part | freeze before the patch | after |\n\
         |---|---|---|---|---|---|---|\n"
    );
    for (name, config) in [
        ("HDD (2010 SCSI)", SimConfig::hdd_2010()),
        ("SSD (2010 Intel)", SimConfig::ssd_2010()),
    ] {
        let f = nilfs::sim::gc_freeze::run(config, nsegs).map_err(|e| e.to_string())?;
        let ms = |ns: u64| format!("{:.1} ms", ns as f64 / 1e6);
        out.push_str(&format!(
            "| {name} | {} | {} | {} | {} | {} | {} |\n",
            f.cleaned_segs,
            f.moved_blocks,
            ms(f.read_ns),
            ms(f.locked_ns),
            ms(f.freeze_before_ns()),
            ms(f.freeze_after_ns())
        ));
    }
    Ok(out)
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if let Cmd::Check {
        image,
        cp,
        json,
        all_checkpoints,
        quiet,
    } = &cli.cmd
    {
        return check::run(image, *cp, *json, *all_checkpoints, *quiet);
    }
    match run(cli) {
        Ok(out) => {
            print!("{out}");
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

/// A campaign's table as the command's result: an error (non-zero exit)
/// when it found something, naming where the findings went.
fn campaign_verdict(table: String, clean: bool, out: &std::path::Path) -> Result<String, String> {
    if clean {
        Ok(table)
    } else {
        Err(format!(
            "{table}\nfindings are in {}",
            out.join("findings").display()
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_like_truncate() {
        assert_eq!(parse_size("128M"), Ok(128 << 20));
        assert_eq!(parse_size("128MiB"), Ok(128 << 20));
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size("1G"), Ok(1 << 30));
        assert!(parse_size("12Q").is_err());
        assert!(parse_size("99999999999T").is_err());
    }

    #[test]
    fn uuid_parses() {
        let u = parse_uuid("01234567-89ab-cdef-0123-456789abcdef").unwrap();
        assert_eq!(u[0], 0x01);
        assert_eq!(u[15], 0xef);
        assert!(parse_uuid("0123").is_err());
    }
}
