//! The system calls of `nilref exec`, by area, each run in the view the
//! runner has entered (its root is the file system's): the namespace,
//! attributes and extended attributes, file data, and the queries; and
//! their answers in the trace format. Each area answers `None` for an
//! operation that is not its own. They know nothing of mounts,
//! chroots or the workload's order.

use nilfs_model::{CpEntry, Errno, FileType, Op, Outcome, Pattern, StatInfo};
use rustix::fd::OwnedFd;
use rustix::fs::{AtFlags, Mode, OFlags, Timestamps, CWD};
use rustix::io::Errno as SysErrno;
use rustix::time::Timespec;
use sha2::{Digest, Sha256};

use crate::exec::nilfs_ioctl;

/// Bytes moved per read/write system call.
const CHUNK: usize = 1 << 20;
/// getdents64's buffer (see `readdir`).
const READDIR_BUFFER: usize = 1 << 20;

type R<T> = Result<T, Errno>;

pub fn errno(e: SysErrno) -> Errno {
    Errno::from_linux(e.raw_os_error())
}

/// Why an operation has no outcome of its own: the errno it failed with,
/// or why the runner cannot run it at all.
#[derive(Debug)]
pub enum Stop {
    Errno(Errno),
    Cannot(String),
}

impl From<Errno> for Stop {
    fn from(e: Errno) -> Self {
        Stop::Errno(e)
    }
}

impl From<SysErrno> for Stop {
    fn from(e: SysErrno) -> Self {
        Stop::Errno(errno(e))
    }
}

/// The system calls of one area: `Ok(None)` for an operation of another.
pub type Area = fn(&Op) -> Result<Option<Outcome>, Stop>;

/// The areas, in the order the runner asks them.
pub const AREAS: [Area; 4] = [namespace, attributes, data, queries];

/// `AT_SYMLINK_NOFOLLOW` unless the operation follows a final symlink.
fn at_flags(follow: bool) -> AtFlags {
    if follow {
        AtFlags::empty()
    } else {
        AtFlags::SYMLINK_NOFOLLOW
    }
}

/// Names: create, mkdir, symlink, link, unlink, rmdir, rename, mknod.
pub fn namespace(op: &Op) -> Result<Option<Outcome>, Stop> {
    let ok = |_| Outcome::Ok;
    let out = match op {
        Op::Create {
            path, perm, excl, ..
        } => {
            let mut flags = OFlags::CREATE | OFlags::WRONLY | OFlags::CLOEXEC;
            if *excl {
                flags |= OFlags::EXCL;
            }
            rustix::fs::open(path.as_str(), flags, Mode::from_raw_mode(*perm))?;
            Ok(Outcome::Ok)
        }
        Op::Mkdir { path, perm, .. } => {
            Ok(rustix::fs::mkdir(path.as_str(), Mode::from_raw_mode(*perm)).map(ok)?)
        }
        Op::Symlink { target, path, .. } => {
            Ok(rustix::fs::symlink(target.as_str(), path.as_str()).map(ok)?)
        }
        Op::Link { old, new, .. } => Ok(rustix::fs::link(old.as_str(), new.as_str()).map(ok)?),
        Op::Unlink { path, .. } => Ok(rustix::fs::unlink(path.as_str()).map(ok)?),
        Op::Rmdir { path, .. } => Ok(rustix::fs::rmdir(path.as_str()).map(ok)?),
        Op::Rename {
            old,
            new,
            noreplace,
            exchange,
            ..
        } => {
            let mut flags = rustix::fs::RenameFlags::empty();
            if *noreplace {
                flags |= rustix::fs::RenameFlags::NOREPLACE;
            }
            if *exchange {
                flags |= rustix::fs::RenameFlags::EXCHANGE;
            }
            Ok(rustix::fs::renameat_with(CWD, old.as_str(), CWD, new.as_str(), flags).map(ok)?)
        }
        Op::Mknod {
            path,
            file_type,
            perm,
            rdev,
            ..
        } => {
            let kind = match file_type {
                FileType::File => rustix::fs::FileType::RegularFile,
                FileType::Dir => rustix::fs::FileType::Directory,
                FileType::Symlink => rustix::fs::FileType::Symlink,
                FileType::Fifo => rustix::fs::FileType::Fifo,
                FileType::Socket => rustix::fs::FileType::Socket,
                FileType::CharDevice => rustix::fs::FileType::CharacterDevice,
                FileType::BlockDevice => rustix::fs::FileType::BlockDevice,
            };
            let dev = rustix::fs::makedev(rdev[0], rdev[1]);
            Ok(
                rustix::fs::mknodat(CWD, path.as_str(), kind, Mode::from_raw_mode(*perm), dev)
                    .map(ok)?,
            )
        }
        _ => return Ok(None),
    };
    out.map(Some)
}

/// Attributes and extended attributes: chmod, chown, utimes, and the
/// xattr calls.
pub fn attributes(op: &Op) -> Result<Option<Outcome>, Stop> {
    let ok = |_| Outcome::Ok;
    let out = match op {
        Op::Chmod { path, perm, .. } => {
            Ok(rustix::fs::chmod(path.as_str(), Mode::from_raw_mode(*perm)).map(ok)?)
        }
        Op::Chown {
            path,
            uid,
            gid,
            follow,
            ..
        } => {
            let flags = at_flags(*follow);
            let uid = uid.map(rustix::process::Uid::from_raw);
            let gid = gid.map(rustix::process::Gid::from_raw);
            Ok(rustix::fs::chownat(CWD, path.as_str(), uid, gid, flags).map(ok)?)
        }
        Op::Utimes {
            path,
            mtime,
            follow,
            ..
        } => {
            let flags = at_flags(*follow);
            let omit = Timespec {
                tv_sec: 0,
                tv_nsec: rustix::fs::UTIME_OMIT,
            };
            let modified = match mtime {
                Some(t) => Timespec {
                    tv_sec: t.div_euclid(1_000_000_000),
                    tv_nsec: t.rem_euclid(1_000_000_000) as _,
                },
                None => Timespec {
                    tv_sec: 0,
                    tv_nsec: rustix::fs::UTIME_NOW,
                },
            };
            let times = Timestamps {
                last_access: omit,
                last_modification: modified,
            };
            Ok(rustix::fs::utimensat(CWD, path.as_str(), &times, flags).map(ok)?)
        }
        Op::Setxattr {
            path,
            name,
            value,
            follow,
            ..
        } => {
            let flags = rustix::fs::XattrFlags::empty();
            let r = if *follow {
                rustix::fs::setxattr(path.as_str(), name.as_str(), value.as_bytes(), flags)
            } else {
                rustix::fs::lsetxattr(path.as_str(), name.as_str(), value.as_bytes(), flags)
            };
            Ok(r.map(ok)?)
        }
        Op::Removexattr {
            path, name, follow, ..
        } => {
            let r = if *follow {
                rustix::fs::removexattr(path.as_str(), name.as_str())
            } else {
                rustix::fs::lremovexattr(path.as_str(), name.as_str())
            };
            Ok(r.map(ok)?)
        }
        Op::Getxattr {
            path, name, follow, ..
        } => {
            let mut buf = vec![0u8; 1 << 16];
            let n = if *follow {
                rustix::fs::getxattr(path.as_str(), name.as_str(), &mut buf[..])
            } else {
                rustix::fs::lgetxattr(path.as_str(), name.as_str(), &mut buf[..])
            }?;
            Ok(Outcome::Data {
                len: n as u64,
                sha256: hex(&Sha256::digest(&buf[..n])),
            })
        }
        Op::Listxattr { path, follow, .. } => {
            let mut buf = vec![0u8; 1 << 16];
            let n = if *follow {
                rustix::fs::listxattr(path.as_str(), &mut buf[..])
            } else {
                rustix::fs::llistxattr(path.as_str(), &mut buf[..])
            }?;
            Ok(Outcome::Names(
                buf[..n]
                    .split(|&c| c == 0)
                    .filter(|n| !n.is_empty())
                    .map(|n| String::from_utf8_lossy(n).into_owned())
                    .collect(),
            ))
        }
        _ => return Ok(None),
    };
    out.map(Some)
}

/// File data: write, read, truncate, fsync and fdatasync.
pub fn data(op: &Op) -> Result<Option<Outcome>, Stop> {
    let ok = |_| Outcome::Ok;
    let out = match op {
        Op::Write {
            path,
            offset,
            data,
            append,
            ..
        } => Ok(write(path, (!*append).then_some(*offset), data)?),
        Op::Read {
            path, offset, len, ..
        } => Ok(read(path, *offset, *len)?),
        Op::Truncate { path, size, .. } => {
            let fd = rustix::fs::open(
                path.as_str(),
                OFlags::WRONLY | OFlags::CLOEXEC,
                Mode::empty(),
            )?;
            Ok(rustix::fs::ftruncate(&fd, *size).map(ok)?)
        }
        Op::Fsync { path, .. } | Op::Fdatasync { path, .. } => {
            let fd = rustix::fs::open(
                path.as_str(),
                OFlags::RDONLY | OFlags::CLOEXEC,
                Mode::empty(),
            )?;
            if matches!(op, Op::Fsync { .. }) {
                rustix::fs::fsync(&fd)?;
            } else {
                rustix::fs::fdatasync(&fd)?;
            }
            Ok(Outcome::Ok)
        }
        _ => return Ok(None),
    };
    out.map(Some)
}

/// What the view shows: statfs, lstat, readdir, readlink, the manifest.
pub fn queries(op: &Op) -> Result<Option<Outcome>, Stop> {
    let out = match op {
        Op::Statfs { .. } => {
            let st = rustix::fs::statfs("/")?;
            Ok(Outcome::Statfs(nilfs_model::StatfsInfo {
                bsize: st.f_bsize as u64,
                blocks: st.f_blocks as u64,
                bfree: st.f_bfree as u64,
                bavail: st.f_bavail as u64,
                files: st.f_files as u64,
                ffree: st.f_ffree as u64,
                namelen: st.f_namelen as u64,
            }))
        }
        Op::Lstat { path, .. } => Ok(Outcome::Stat(lstat(path)?)),
        Op::Readdir { path, .. } => Ok(Outcome::Names(readdir(path)?)),
        Op::Readlink { path, .. } => {
            let t = rustix::fs::readlink(path.as_str(), Vec::new())?;
            Ok(Outcome::Target(
                String::from_utf8_lossy(t.as_bytes()).into_owned(),
            ))
        }
        Op::Manifest { .. } => Ok(Outcome::Manifest(manifest()?)),
        _ => return Ok(None),
    };
    out.map(Some)
}

/// `pwrite` at `offset`, or, with no offset, `write` on a file opened
/// `O_APPEND`.
fn write(path: &str, offset: Option<u64>, data: &Pattern) -> R<Outcome> {
    let flags = match offset {
        Some(_) => OFlags::WRONLY | OFlags::CLOEXEC,
        None => OFlags::WRONLY | OFlags::APPEND | OFlags::CLOEXEC,
    };
    let fd = rustix::fs::open(path, flags, Mode::empty()).map_err(errno)?;
    let total = data.len();
    let mut done = 0u64;
    let mut buf = vec![0u8; CHUNK.min(total as usize)];
    while done < total {
        let n = ((total - done) as usize).min(CHUNK);
        data.fill(done, &mut buf[..n]);
        let wrote = match offset {
            Some(o) => rustix::io::pwrite(&fd, &buf[..n], o + done),
            None => rustix::io::write(&fd, &buf[..n]),
        };
        match wrote {
            Ok(0) => break,
            Ok(k) => done += k as u64,
            Err(e) if done == 0 => return Err(errno(e)),
            // A short write: the bytes that made it are the answer.
            Err(_) => break,
        }
    }
    Ok(Outcome::Written(done))
}

fn read(path: &str, offset: u64, len: u64) -> R<Outcome> {
    let fd =
        rustix::fs::open(path, OFlags::RDONLY | OFlags::CLOEXEC, Mode::empty()).map_err(errno)?;
    let mut h = Sha256::new();
    let mut buf = vec![0u8; CHUNK];
    let mut got = 0u64;
    while got < len {
        let want = ((len - got) as usize).min(CHUNK);
        let n = rustix::io::pread(&fd, &mut buf[..want], offset + got).map_err(errno)?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
        got += n as u64;
        // A short read of a regular file is its end: reading on would
        // join what a concurrent write appended to what was read before
        // it (seen in a concurrent history), two states in one outcome.
        if n < want {
            break;
        }
    }
    Ok(Outcome::Data {
        len: got,
        sha256: hex(&h.finalize()),
    })
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn lstat(path: &str) -> R<StatInfo> {
    let st = rustix::fs::lstat(path).map_err(errno)?;
    let kind = rustix::fs::FileType::from_raw_mode(st.st_mode);
    use rustix::fs::FileType as T;
    let file_type = match kind {
        T::Directory => FileType::Dir,
        T::Symlink => FileType::Symlink,
        T::Fifo => FileType::Fifo,
        T::Socket => FileType::Socket,
        T::CharacterDevice => FileType::CharDevice,
        T::BlockDevice => FileType::BlockDevice,
        _ => FileType::File,
    };
    let rdev = matches!(kind, T::CharacterDevice | T::BlockDevice)
        .then(|| [rustix::fs::major(st.st_rdev), rustix::fs::minor(st.st_rdev)]);
    Ok(StatInfo {
        file_type,
        size: st.st_size as u64,
        nlink: st.st_nlink as u32,
        perm: st.st_mode & 0o7777,
        mtime: Some(st.st_mtime * 1_000_000_000 + st.st_mtime_nsec as i64),
        ctime: Some(st.st_ctime * 1_000_000_000 + st.st_ctime_nsec as i64),
        uid: Some(st.st_uid),
        gid: Some(st.st_gid),
        rdev,
    })
}

fn readdir(path: &str) -> R<Vec<String>> {
    let fd = rustix::fs::open(
        path,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(errno)?;
    // One getdents64 call where the listing fits its buffer: a call runs
    // under the directory's lock, so it is one step against a concurrent
    // rename or create, while a second call (even the one that finds the
    // end) may add what was made in between: a concurrent history showed
    // a name listed twice. Bigger directories take more calls.
    let mut buf = vec![std::mem::MaybeUninit::<u8>::uninit(); READDIR_BUFFER];
    let mut dir = rustix::fs::RawDir::new(&fd, &mut buf);
    let mut names = Vec::new();
    let mut bytes = 0usize;
    while let Some(e) = dir.next() {
        let e = e.map_err(errno)?;
        let n = e.file_name().to_bytes();
        // linux_dirent64: 19 bytes, the name and its NUL, 8-aligned.
        bytes += (19 + n.len() + 1).div_ceil(8) * 8;
        if n != b"." && n != b".." {
            names.push(String::from_utf8_lossy(n).into_owned());
        }
        if dir.is_buffer_empty() && bytes + 4096 < READDIR_BUFFER {
            break;
        }
    }
    Ok(names)
}

/// lscp without -a: every checkpoint, minor ones hidden unless snapshots.
pub fn lscp(fd: &OwnedFd) -> R<Vec<CpEntry>> {
    Ok(nilfs_ioctl::all_cpinfo(fd)
        .map_err(errno)?
        .iter()
        .filter(|ci| !ci.is_minor() || ci.is_snapshot())
        .map(|ci| CpEntry {
            cno: ci.ci_cno,
            ss: ci.is_snapshot(),
        })
        .collect())
}

/// tests/guest/manifest.sh of the current root.
fn manifest() -> R<Vec<String>> {
    let mut lines = Vec::new();
    let mut stack = vec![String::new()];
    while let Some(dir) = stack.pop() {
        let at = if dir.is_empty() {
            "/".to_string()
        } else {
            dir.clone()
        };
        for name in readdir(&at)? {
            let path = format!("{dir}/{name}");
            let st = lstat(&path)?;
            lines.push(match st.file_type {
                FileType::Dir => {
                    stack.push(path.clone());
                    format!("DIR  -  {path}/")
                }
                FileType::Symlink => {
                    let t = rustix::fs::readlink(path.as_str(), Vec::new()).map_err(errno)?;
                    format!(
                        "LNK  -  {path} -> {}",
                        String::from_utf8_lossy(t.as_bytes())
                    )
                }
                FileType::File => match read(&path, 0, st.size)? {
                    Outcome::Data { sha256, len } => format!("{sha256}  {len}  {path}"),
                    _ => unreachable!("read returns data"),
                },
                t => nilfs_model::manifest::special_line(t, st.rdev.unwrap_or_default(), &path),
            });
        }
    }
    Ok(nilfs_model::manifest::sort_lines(lines))
}
