//! ls, cat, manifest and export of a checkpoint.

use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use nilfs::device::BlockDevice;
use nilfs::format::inode::{S_IFDIR, S_IFLNK};
use nilfs::format::Cno;
use nilfs::posix::{CheckpointView, Piece};
use nilfs::the_nilfs::Nilfs;
use nilfs::{Error, Result};

use crate::image::open_image;

fn with_view<T>(
    dev: &dyn BlockDevice,
    cp: Option<u64>,
    f: impl FnOnce(&CheckpointView<'_, '_>) -> Result<T>,
) -> Result<T> {
    let fs = Nilfs::open(dev)?;
    let view = CheckpointView::open(&fs, cp.map(Cno))?;
    f(&view)
}

/// `ls -l`-like listing of a directory (or one line for a non-directory).
pub fn ls(dev: &dyn BlockDevice, path: &str, cp: Option<u64>) -> Result<String> {
    with_view(dev, cp, |v| {
        let (ino, inode) = v.resolve(path.as_bytes(), false)?;
        let line = |name: &[u8], ino: u64, i: &nilfs::format::inode::Inode| {
            format!(
                "{:>8} {:06o} {:>3} {:>12} {}\n",
                ino,
                i.mode,
                i.links_count,
                i.size,
                String::from_utf8_lossy(name)
            )
        };
        if inode.file_type() != S_IFDIR {
            return Ok(line(path.as_bytes(), ino.0, &inode));
        }
        let mut out = String::new();
        for e in v.readdir(&inode)? {
            let child = v.inode(e.ino)?;
            out.push_str(&line(&e.name, e.ino.0, &child));
        }
        Ok(out)
    })
}

/// Write the bytes of a file (symlinks followed) to `out`, streamed in
/// bounded pieces (holes as zeros), whatever the file's size.
pub fn cat(
    dev: &dyn BlockDevice,
    path: &str,
    cp: Option<u64>,
    out: &mut dyn std::io::Write,
) -> Result<()> {
    let host = |e: std::io::Error| Error::Host {
        path: "stdout".into(),
        detail: e.to_string(),
    };
    with_view(dev, cp, |v| {
        let (_, inode) = v.resolve(path.as_bytes(), true)?;
        if inode.file_type() == S_IFDIR {
            return Err(Error::errno(nilfs::Errno::EISDIR, path));
        }
        let zeros = [0u8; 1 << 16];
        v.read_pieces(&inode, &mut |p| {
            match p {
                Piece::Data(d) => out.write_all(d).map_err(host)?,
                Piece::Hole(mut n) => {
                    while n > 0 {
                        let k = n.min(zeros.len() as u64) as usize;
                        out.write_all(&zeros[..k]).map_err(host)?;
                        n -= k as u64;
                    }
                }
            }
            Ok(())
        })?;
        out.flush().map_err(host)
    })
}

/// The manifest.sh-format manifest.
pub fn manifest(dev: &dyn BlockDevice, cp: Option<u64>) -> Result<String> {
    with_view(dev, cp, nilfs::inspect::manifest::manifest)
}

/// Copy the checkpoint's tree into `dir`: directories, files (with their
/// permission bits), symlinks. Hard links become copies.
///
/// Nothing is ever written outside `dir`. Every entry is created relative
/// to its parent's directory handle (`mkdirat`, `openat`, `symlinkat`) by
/// its one name, never by a joined path; directories are re-opened with
/// `O_NOFOLLOW | O_DIRECTORY` and files with `O_NOFOLLOW`, so a symlink
/// exported earlier (or already in `dir`) is never followed, whatever the
/// names in the image. Names no path can carry are refused by the view's
/// readdir ([`nilfs::posix::name_fault`]) with a typed corruption naming the
/// directory inode and block; export stops there rather than skip the
/// entry, because a partial copy reported as a success is lost data.
pub fn export(dev: &dyn BlockDevice, dir: &Path, cp: Option<u64>) -> Result<String> {
    use rustix::fs::{mkdirat, openat, symlinkat, Mode, OFlags};
    use std::ffi::OsStr;
    use std::os::fd::OwnedFd;

    let host = |p: &[u8], e: std::io::Error| Error::Host {
        path: dir.join(OsStr::from_bytes(p)).display().to_string(),
        detail: e.to_string(),
    };
    std::fs::create_dir_all(dir).map_err(|e| host(b"", e))?;
    let dir_flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    // The destination itself may be a symlink the user chose; nothing below it.
    let root_flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
    let root =
        openat(rustix::fs::CWD, dir, root_flags, Mode::empty()).map_err(|e| host(b"", e.into()))?;
    // The open directories from the root down to the last one visited.
    let mut stack: Vec<(Vec<u8>, OwnedFd)> = vec![(Vec::new(), root)];
    let mut count = 0u64;
    with_view(dev, cp, |v| {
        v.walk_tree(&mut |path, _ino, inode| {
            let rel = &path[1..];
            let (parent, name) = match rel.iter().rposition(|&c| c == b'/') {
                Some(i) => (&rel[..i], &rel[i + 1..]),
                None => (&rel[..0], rel),
            };
            if nilfs::posix::name_fault(name, None).is_some() || name == b"." || name == b".." {
                // The view refuses these; never let one become a component.
                return Err(Error::corrupt(
                    "directory entry",
                    format!("unsafe name {:?}", String::from_utf8_lossy(name)),
                ));
            }
            while stack.last().is_some_and(|(p, _)| p.as_slice() != parent) {
                stack.pop();
            }
            let Some((_, at)) = stack.last() else {
                return Err(Error::Invalid(format!(
                    "export: {} visited before its directory",
                    String::from_utf8_lossy(path)
                )));
            };
            let name_os = OsStr::from_bytes(name);
            match inode.file_type() {
                S_IFDIR => {
                    match mkdirat(at, name_os, Mode::from_raw_mode(0o777)) {
                        Ok(()) | Err(rustix::io::Errno::EXIST) => {}
                        Err(e) => return Err(host(rel, e.into())),
                    }
                    let fd = openat(at, name_os, dir_flags, Mode::empty())
                        .map_err(|e| host(rel, e.into()))?;
                    stack.push((rel.to_vec(), fd));
                }
                S_IFLNK => {
                    let target = v.readlink(inode)?;
                    symlinkat(OsStr::from_bytes(&target), at, name_os)
                        .map_err(|e| host(rel, e.into()))?
                }
                _ => {
                    let fd = openat(
                        at,
                        name_os,
                        OFlags::WRONLY
                            | OFlags::CREATE
                            | OFlags::TRUNC
                            | OFlags::NOFOLLOW
                            | OFlags::CLOEXEC,
                        Mode::from_raw_mode(0o600),
                    )
                    .map_err(|e| host(rel, e.into()))?;
                    // Streamed, and sparse: holes are skipped, not written.
                    let mut file = std::fs::File::from(fd);
                    let mut at_end = 0u64;
                    v.read_pieces(inode, &mut |p| {
                        match p {
                            Piece::Data(d) => {
                                std::io::Write::write_all(&mut file, d)
                                    .map_err(|e| host(rel, e))?;
                                at_end += d.len() as u64;
                            }
                            Piece::Hole(n) => {
                                at_end += n;
                                std::io::Seek::seek(&mut file, std::io::SeekFrom::Start(at_end))
                                    .map_err(|e| host(rel, e))?;
                            }
                        }
                        Ok(())
                    })?;
                    file.set_len(inode.size).map_err(|e| host(rel, e))?;
                    use std::os::unix::fs::PermissionsExt;
                    let perm = std::fs::Permissions::from_mode(u32::from(inode.mode & 0o7777));
                    file.set_permissions(perm).map_err(|e| host(rel, e))?;
                }
            }
            count += 1;
            Ok(())
        })
    })?;
    Ok(format!("{count} entries exported to {}\n", dir.display()))
}

/// Arguments of `nilref ls`.
#[derive(clap::Args)]
pub struct LsArgs {
    /// Image file.
    pub image: PathBuf,
    /// Path inside the filesystem.
    #[arg(default_value = "/")]
    pub path: String,
    /// Checkpoint number.
    #[arg(long)]
    pub cp: Option<u64>,
}

/// Arguments of `nilref cat`.
#[derive(clap::Args)]
pub struct CatArgs {
    /// Image file.
    pub image: PathBuf,
    /// Path inside the filesystem.
    pub path: String,
    /// Checkpoint number.
    #[arg(long)]
    pub cp: Option<u64>,
}

/// Arguments of `nilref manifest`.
#[derive(clap::Args)]
pub struct ManifestArgs {
    /// Image file.
    pub image: PathBuf,
    /// Checkpoint number.
    #[arg(long)]
    pub cp: Option<u64>,
    /// The most file bytes to hash, holes included (manifest.sh's format
    /// hashes every byte a file's size declares): a bigger checkpoint is
    /// refused before any hashing, naming its largest file. Suffixes K,
    /// M, G, T (binary). Past 256 MiB, a progress bar shows the bytes
    /// hashed (on a terminal).
    #[arg(long, default_value = "64G", value_parser = parse_bytes)]
    pub max_bytes: u64,
}

/// `64G`, `512M`, `1T` or a plain number of bytes.
fn parse_bytes(s: &str) -> std::result::Result<u64, String> {
    let (num, shift) = match s.as_bytes().last() {
        Some(b'K' | b'k') => (&s[..s.len() - 1], 10),
        Some(b'M' | b'm') => (&s[..s.len() - 1], 20),
        Some(b'G' | b'g') => (&s[..s.len() - 1], 30),
        Some(b'T' | b't') => (&s[..s.len() - 1], 40),
        _ => (s, 0),
    };
    num.parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(1u64 << shift))
        .ok_or_else(|| format!("`{s}` is not a byte count (e.g. 64G)"))
}

/// Arguments of `nilref export`.
#[derive(clap::Args)]
pub struct ExportArgs {
    /// Image file.
    pub image: PathBuf,
    /// Destination directory (created).
    pub dir: PathBuf,
    /// Checkpoint number.
    #[arg(long)]
    pub cp: Option<u64>,
}

fn e(e: Error) -> String {
    e.to_string()
}

/// `nilref ls`.
pub fn run_ls(a: LsArgs) -> std::result::Result<String, String> {
    ls(open_image(&a.image).map_err(e)?.as_ref(), &a.path, a.cp).map_err(e)
}

/// `nilref cat`: the file goes straight to stdout.
pub fn run_cat(a: CatArgs) -> std::result::Result<String, String> {
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    cat(
        open_image(&a.image).map_err(e)?.as_ref(),
        &a.path,
        a.cp,
        &mut out,
    )
    .map_err(e)?;
    Ok(String::new())
}

/// `nilref manifest`.
pub fn run_manifest(a: ManifestArgs) -> std::result::Result<String, String> {
    let dev = open_image(&a.image).map_err(e)?;
    // What hashing will read, summed first: a sparse file that declares a
    // terabyte is a valid file, and hashing it would look like a hang.
    let (total, largest) = with_view(dev.as_ref(), a.cp, |v| {
        let mut total = 0u64;
        let mut largest: (u64, Vec<u8>) = (0, Vec::new());
        v.walk_tree(&mut |path, _, inode| {
            if inode.file_type() == nilfs::format::inode::S_IFREG {
                total = total.saturating_add(inode.size);
                if inode.size > largest.0 {
                    largest = (inode.size, path.to_vec());
                }
            }
            Ok(())
        })?;
        Ok((total, largest))
    })
    .map_err(e)?;
    if total > a.max_bytes {
        return Err(format!(
            "the checkpoint's files declare {total} bytes (the largest, {}, {} bytes), and \
             the manifest hashes every byte, holes as zeros; that is more than --max-bytes \
             {} (raise it to hash them all)",
            String::from_utf8_lossy(&largest.1),
            largest.0,
            a.max_bytes
        ));
    }
    if total < 256 << 20 {
        return manifest(dev.as_ref(), a.cp).map_err(e);
    }
    // A long hash shows its progress (on a terminal; indicatif draws
    // nothing elsewhere), bytes hashed of the total the files declare.
    let bar = indicatif::ProgressBar::new(total);
    bar.set_style(
        indicatif::ProgressStyle::with_template(
            "{spinner} manifest: hashing, holes as zeros [{bar:30}] {bytes}/{total_bytes} \
             {bytes_per_sec} eta {eta}",
        )
        .expect("a valid template")
        .progress_chars("=> "),
    );
    let mut pending = 0u64;
    let out = with_view(dev.as_ref(), a.cp, |v| {
        nilfs::inspect::manifest::manifest_progress(v, &mut |n| {
            pending += n;
            if pending >= 16 << 20 {
                bar.inc(pending);
                pending = 0;
            }
        })
    })
    .map_err(e);
    bar.finish_and_clear();
    out
}

/// `nilref export`.
pub fn run_export(a: ExportArgs) -> std::result::Result<String, String> {
    export(open_image(&a.image).map_err(e)?.as_ref(), &a.dir, a.cp).map_err(e)
}
