//! `nilref mount IMAGE MOUNTPOINT`: an image mounted through FUSE (fuser),
//! served by nilfs-ref's own read-write mount (`nilfs::fs::Fs`), so that
//! real programs, and `nilref exec`, run on our implementation.
//!
//! What the kernel's mount has, this has:
//! - the log writer's own schedule (`nilfs_segctor_thread`): a construction
//!   once changes have waited `sc_interval` (5 s, `NILFS_SC_DEFAULT_TIMEOUT`)
//!   or the dirty data blocks pass the watermark (3600 blocks,
//!   `NILFS_SC_DEFAULT_WATERMARK`);
//! - fsync, fdatasync and syncfs through `Fs::fsync`, `Fs::fdatasync` and
//!   `Fs::sync`;
//! - a clean unmount (`Fs::unmount`) when the file system is unmounted;
//! - with `--cleaner`, nilfs_cleanerd's policy in the background: every
//!   `cleaning_interval` (5 s), when the clean segments fall below
//!   `min_clean_segments` (10 %), `nsegments_per_clean` (2) segments a
//!   step with the `protection_period` (3600 s), until `max_clean_segments`
//!   (20 %) are clean (nilfs_cleanerd.conf's defaults).
//!
//! Locking: FUSE serves requests on several threads and `Filesystem`
//! takes `&self`; every request takes the one mutex around `Fs`, so file
//! operations and constructions never overlap (stricter than the kernel's
//! transaction lock, `crate::txn`'s shared side, which lets file
//! operations run together).
//!
//! Inode numbers: FUSE's root is 1 and nilfs2's is 2 (`NILFS_ROOT_INO`);
//! the root is reported as 1 and every other inode by its own number
//! (nilfs2 never gives a file number 1).

mod published;
mod served;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use fuser::FopenFlags;
use nilfs::fs::Fs;
use nilfs::the_nilfs::Nilfs;

use crate::mount::served::{now_s, Mounted, Served, State};

/// How to mount.
#[derive(Clone, Debug, Default)]
pub struct Options {
    /// `-o ro`: no change is allowed and nothing is written.
    pub read_only: bool,
    /// `-o ro,cp=N`: snapshot N instead of the latest checkpoint.
    pub snapshot: Option<u64>,
    /// Run nilfs_cleanerd's policy in the background.
    pub cleaner: bool,
    /// `-o direct_io`: every open file bypasses the kernel's page cache
    /// (FOPEN_DIRECT_IO), so each read and write reaches nilfs-ref; what
    /// the data checkers (fsx) want, and what libfuse's option of the same
    /// name does. mmap of such a file is refused by FUSE (ENODEV).
    pub direct_io: bool,
    /// No construction on the log writer's schedule (its timer or the
    /// dirty-block watermark): only sync, fsync and the unmount write logs,
    /// so every checkpoint is one the model numbers (lockstep over the
    /// mount, `nilfs_adapter::FuseMount`).
    pub no_log_writer: bool,
    /// Known-bad: chmod answers success and changes nothing (what the
    /// FUSE tier's judging must catch).
    pub known_bad_ignore_chmod: bool,
    /// Known-bad: a write answers success for all its bytes but stores
    /// only the whole blocks it covers (what fsx must catch).
    pub known_bad_drop_partial_writes: bool,
    /// Known-bad: a write answers at once and is stored 50 ms later by
    /// another thread (what the concurrent campaign must catch).
    pub known_bad_late_writes: bool,
    /// Known-bad: a write leaves its inode's published attributes in
    /// place (what the concurrent campaign must catch).
    pub known_bad_stale_attrs: bool,
    /// Known-bad: a change to a file leaves the clean blocks its reads
    /// noted in place (what the concurrent campaign must catch).
    pub known_bad_stale_blocks: bool,
}

/// Arguments of `nilref mount`.
#[derive(clap::Args)]
pub struct MountArgs {
    /// Image file (written in place unless `-o ro`).
    pub image: PathBuf,
    pub mountpoint: PathBuf,
    /// Comma-separated: `ro` (read-only: nothing is written), `rw`,
    /// `cp=N` with `ro` (snapshot N, as the kernel mounts it),
    /// `direct_io` (no page cache: every read and write reaches
    /// nilfs-ref; mmap is refused).
    #[arg(short = 'o')]
    pub options: Option<String>,
    /// Run nilfs_cleanerd's policy in the background.
    #[arg(long)]
    pub cleaner: bool,
    /// Logs only when asked (sync, fsync, unmount): no construction on
    /// the log writer's timer or watermark, so that the model can number
    /// every checkpoint (lockstep over the mount).
    #[arg(long, conflicts_with = "cleaner")]
    pub no_log_writer: bool,
    /// A known-bad variant for the tests: `ignore-chmod`,
    /// `drop-partial-writes`, `late-writes`, `stale-attrs`,
    /// `stale-blocks`.
    #[arg(long, hide = true)]
    pub known_bad: Option<String>,
}

/// `nilref mount`: the options parsed as the kernel's mount parses them.
pub fn run(a: MountArgs) -> Result<String, String> {
    let mut opts = Options {
        cleaner: a.cleaner,
        no_log_writer: a.no_log_writer,
        ..Options::default()
    };
    match a.known_bad.as_deref() {
        None => {}
        Some("ignore-chmod") => opts.known_bad_ignore_chmod = true,
        Some("drop-partial-writes") => opts.known_bad_drop_partial_writes = true,
        Some("late-writes") => opts.known_bad_late_writes = true,
        Some("stale-attrs") => opts.known_bad_stale_attrs = true,
        Some("stale-blocks") => opts.known_bad_stale_blocks = true,
        Some(k) => {
            return Err(format!(
                "unknown known-bad variant {k:?} (ignore-chmod, drop-partial-writes, late-writes, stale-attrs, stale-blocks)"
            ))
        }
    }
    for o in a.options.iter().flat_map(|o| o.split(',')) {
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
    if opts.read_only && a.cleaner {
        return Err("--cleaner needs a read-write mount".into());
    }
    mount(&a.image, &a.mountpoint, &opts).map(|()| String::new())
}

/// Mounts `image` at `mountpoint` and serves it until it is unmounted
/// (`fusermount3 -u MOUNTPOINT` or `umount`); then unmounts the file
/// system cleanly and returns.
pub fn mount(image: &Path, mountpoint: &Path, opts: &Options) -> Result<(), String> {
    let dev: &'static nilfs::device::FileDevice = Box::leak(Box::new(
        if opts.read_only {
            nilfs::device::FileDevice::open_read_only(image)
        } else {
            nilfs::device::FileDevice::open_read_write(image)
        }
        .map_err(|e| format!("{}: {e}", image.display()))?,
    ));
    let nilfs: &'static Nilfs<'static> = Box::leak(Box::new(
        Nilfs::open(dev).map_err(|e| format!("{}: {e}", image.display()))?,
    ));
    let fs = if let Some(cno) = opts.snapshot {
        Fs::mount_snapshot(nilfs, nilfs::format::Cno(cno), now_s())
    } else if opts.read_only {
        Fs::mount_read_only(nilfs, now_s())
    } else {
        Fs::mount(nilfs, now_s())
    }
    .map_err(|e| format!("{}: {e}", image.display()))?;
    let reclaims = fs.reclaims_watch();
    let mounted = Arc::new(Mounted {
        state: Mutex::new(State {
            fs: Some(fs),
            dirty_since: None,
            last_error: None,
        }),
        dev,
        block_size: nilfs.block_size(),
        open_flags: if opts.direct_io {
            FopenFlags::FOPEN_DIRECT_IO
        } else {
            FopenFlags::empty()
        },
        ignore_chmod: opts.known_bad_ignore_chmod,
        drop_partial_writes: opts.known_bad_drop_partial_writes,
        late_writes: opts.known_bad_late_writes,
        stale_attrs: opts.known_bad_stale_attrs,
        stale_blocks: opts.known_bad_stale_blocks,
        published: Default::default(),
        reclaims,
    });
    let mut cfg = fuser::Config::default();
    cfg.mount_options = vec![
        fuser::MountOption::FSName(image.display().to_string()),
        fuser::MountOption::Subtype("nilfs2".into()),
        fuser::MountOption::DefaultPermissions,
        fuser::MountOption::Dev,
        fuser::MountOption::Suid,
        if opts.read_only {
            fuser::MountOption::RO
        } else {
            fuser::MountOption::RW
        },
    ];
    cfg.acl = fuser::SessionACL::All;
    cfg.n_threads = Some(2);
    // The log writer and the cleaner, until the session ends.
    let stop = Arc::new(AtomicBool::new(false));
    let worker = (!opts.no_log_writer).then(|| {
        let (m, stop, cleaner) = (mounted.clone(), stop.clone(), opts.cleaner);
        std::thread::spawn(move || {
            let mut last_clean = Instant::now();
            while !stop.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(200));
                m.background(cleaner, &mut last_clean);
            }
        })
    });
    let served = fuser::mount(Served(mounted.clone()), mountpoint, &cfg)
        .map_err(|e| format!("FUSE mount at {}: {e}", mountpoint.display()));
    stop.store(true, Ordering::Relaxed);
    if let Some(w) = worker {
        let _ = w.join();
    }
    // If the session ended without `destroy` (the kernel went away),
    // unmount here so the image is left clean.
    let mut st = mounted.state.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(fs) = st.fs.take() {
        fs.unmount().map_err(|e| format!("unmount: {e}"))?;
    }
    if let Some(e) = st.last_error.take() {
        eprintln!("nilref mount: background work failed at least once; the last time: {e}");
    }
    served
}
