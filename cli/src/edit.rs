//! The commands that change an image offline, each through one
//! read-write mount of nilfs-ref's file system (`with_rw`): `mkcp`,
//! `chcp`, `rmcp` and `clean`.

use std::path::{Path, PathBuf};

use nilfs::device::FileDevice;

/// Arguments of `nilref mkcp`.
#[derive(clap::Args)]
pub struct MkcpArgs {
    /// Image file (modified).
    pub image: PathBuf,
    /// Make it a snapshot.
    #[arg(short = 's')]
    pub snapshot: bool,
    /// Print the checkpoint number.
    #[arg(short = 'p')]
    pub print: bool,
    /// Time to stamp, seconds since the epoch (default: now).
    #[arg(long)]
    pub time: Option<u64>,
}

/// Arguments of `nilref chcp`.
#[derive(clap::Args)]
pub struct ChcpArgs {
    /// Image file (modified).
    pub image: PathBuf,
    /// `cp` or `ss`.
    pub mode: String,
    /// Checkpoint numbers.
    #[arg(required = true)]
    pub cnos: Vec<u64>,
    /// Time to stamp, seconds since the epoch (default: now).
    #[arg(long)]
    pub time: Option<u64>,
}

/// Arguments of `nilref rmcp`.
#[derive(clap::Args)]
pub struct RmcpArgs {
    /// Image file (modified).
    pub image: PathBuf,
    /// Checkpoint numbers.
    #[arg(required = true)]
    pub cnos: Vec<u64>,
    /// Time to stamp, seconds since the epoch (default: now).
    #[arg(long)]
    pub time: Option<u64>,
}

/// Arguments of `nilref clean`.
#[derive(clap::Args)]
pub struct CleanArgs {
    /// Image file (modified).
    pub image: PathBuf,
    /// Protection period in seconds: segments and checkpoints newer
    /// than this are kept.
    #[arg(short = 'p', long, default_value_t = 0)]
    pub protection: u64,
    /// Segments per cleaning step (`nsegments_per_clean`).
    #[arg(long, default_value_t = 2)]
    pub nsegs: usize,
    /// Time to stamp, seconds since the epoch (default: now).
    #[arg(long)]
    pub time: Option<u64>,
}

/// `nilref mkcp`.
pub fn run_mkcp(a: MkcpArgs) -> Result<String, String> {
    with_rw(&a.image, a.time, |fs| {
        let cno = fs.mkcp(a.snapshot)?;
        Ok(if a.print {
            format!("{cno}\n")
        } else {
            String::new()
        })
    })
}

/// `nilref chcp`.
pub fn run_chcp(a: ChcpArgs) -> Result<String, String> {
    let snapshot = match a.mode.as_str() {
        "ss" => true,
        "cp" => false,
        other => return Err(format!("chcp: invalid mode: {other}")),
    };
    with_rw(&a.image, a.time, |fs| {
        for c in &a.cnos {
            fs.chcp(nilfs::format::Cno(*c), snapshot)?;
        }
        Ok(String::new())
    })
}

/// `nilref rmcp`.
pub fn run_rmcp(a: RmcpArgs) -> Result<String, String> {
    with_rw(&a.image, a.time, |fs| {
        for c in &a.cnos {
            fs.rmcp(nilfs::format::Cno(*c))?;
        }
        Ok(String::new())
    })
}

/// `nilref clean`.
pub fn run_clean(a: CleanArgs) -> Result<String, String> {
    with_rw(&a.image, a.time, |fs| {
        let before = fs.sustat()?.ncleansegs;
        let r = nilfs::cleaner::clean(fs, a.protection, a.nsegs.max(1))?;
        let after = fs.sustat()?.ncleansegs;
        Ok(format!(
            "{} segments cleaned in {} steps: {} live blocks moved, {} virtual blocks freed; clean segments {} -> {}\n",
            r.cleaned_segs, r.steps, r.moved_blocks, r.freed_vblks, before, after
        ))
    })
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
