//! ls, cat, manifest and export of a checkpoint.

use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use nilfs::device::BlockDevice;
use nilfs::format::inode::{S_IFDIR, S_IFLNK};
use nilfs::format::Cno;
use nilfs::posix::CheckpointView;
use nilfs::the_nilfs::Nilfs;
use nilfs::{Error, Result};

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

/// The bytes of a file (symlinks followed).
pub fn cat(dev: &dyn BlockDevice, path: &str, cp: Option<u64>) -> Result<Vec<u8>> {
    with_view(dev, cp, |v| {
        let (_, inode) = v.resolve(path.as_bytes(), true)?;
        if inode.file_type() == S_IFDIR {
            return Err(Error::errno(nilfs::Errno::EISDIR, path));
        }
        v.read_all(&inode)
    })
}

/// The manifest.sh-format manifest.
pub fn manifest(dev: &dyn BlockDevice, cp: Option<u64>) -> Result<String> {
    with_view(dev, cp, nilfs::inspect::manifest::manifest)
}

/// Copy the checkpoint's tree into `dir`: directories, files (with their
/// permission bits), symlinks. Hard links become copies.
pub fn export(dev: &dyn BlockDevice, dir: &Path, cp: Option<u64>) -> Result<String> {
    let host = |p: &Path, e: std::io::Error| Error::Host {
        path: p.display().to_string(),
        detail: e.to_string(),
    };
    std::fs::create_dir_all(dir).map_err(|e| host(dir, e))?;
    let mut count = 0u64;
    with_view(dev, cp, |v| {
        v.walk_tree(&mut |path, _ino, inode| {
            let dest = dir.join(std::ffi::OsStr::from_bytes(&path[1..]));
            match inode.file_type() {
                S_IFDIR => std::fs::create_dir_all(&dest).map_err(|e| host(&dest, e))?,
                S_IFLNK => {
                    let target = v.readlink(inode)?;
                    std::os::unix::fs::symlink(std::ffi::OsStr::from_bytes(&target), &dest)
                        .map_err(|e| host(&dest, e))?
                }
                _ => {
                    std::fs::write(&dest, v.read_all(inode)?).map_err(|e| host(&dest, e))?;
                    use std::os::unix::fs::PermissionsExt;
                    let perm = std::fs::Permissions::from_mode(u32::from(inode.mode & 0o7777));
                    std::fs::set_permissions(&dest, perm).map_err(|e| host(&dest, e))?;
                }
            }
            count += 1;
            Ok(())
        })
    })?;
    Ok(format!("{count} entries exported to {}\n", dir.display()))
}
