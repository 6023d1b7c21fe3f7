//! `nilref ioctl PATH REQUEST [ARG...]`: one of nilfs2's ioctls, issued on
//! a file or directory of a mounted file system — the kernel's nilfs2 or
//! `nilref mount` — and what it answered, one line. The FUSE tier and the
//! kernel guest run the same binary, so their answers compare line by line.
//!
//! Requests (nilfs2_api.h; the codes are `nilfs::fs::ioctl::request`):
//! `sync` (NILFS_IOCTL_SYNC: the latest checkpoint), `cpstat`, `sustat`
//! (the time fields are left out: they differ between any two runs),
//! `chcp cp|ss CNO` (CHANGE_CPMODE), `rmcp CNO` (DELETE_CHECKPOINT),
//! `alloc-range START END` (SET_ALLOC_RANGE, byte offsets),
//! `version` (FS_IOC_GETVERSION: the inode's generation) and `lscp`
//! (GET_CPINFO with an empty `nilfs_argv`, to see whether the request is
//! served at all: the kernel answers EINVAL for its zero member size, a
//! front end that cannot reach the argument ENOTTY).
//!
//! An ioctl that fails prints its errno's name; the command fails only when
//! the path cannot be opened or the request is not one of these.

// The ioctl system call itself: rustix's typed patterns, each with the
// size the request code names (checked against the codes below).
#![allow(unsafe_code)]

use std::path::Path;

use nilfs::fs::ioctl::request;
use nilfs_model::fs::Errno;
use rustix::fs::{open, Mode, OFlags};
use rustix::ioctl::{ioctl, Getter, Setter};

/// `struct nilfs_cpmode`.
#[repr(C)]
struct CpMode {
    cno: u64,
    mode: u32,
    pad: u32,
}

/// `struct nilfs_argv`.
#[repr(C)]
#[derive(Default)]
struct Argv {
    base: u64,
    nmembs: u32,
    size: u16,
    flags: u16,
    index: u64,
}

// The request codes carry the sizes of these types.
const _: () = assert!(std::mem::size_of::<CpMode>() == 16);
const _: () = assert!(std::mem::size_of::<Argv>() == request::ARGV_SIZE);

fn answer<T>(r: rustix::io::Result<T>, ok: impl FnOnce(T) -> String) -> String {
    match r {
        Ok(v) => ok(v),
        Err(e) => format!("{:?}", Errno::from_linux(e.raw_os_error())),
    }
}

fn number(args: &[String], k: usize) -> Result<u64, String> {
    args.get(k)
        .and_then(|a| a.parse().ok())
        .ok_or_else(|| format!("expected a number at argument {}", k + 1))
}

/// Runs one request on `path`; the line it prints.
pub fn run(path: &Path, args: &[String]) -> Result<String, String> {
    let fd = open(path, OFlags::RDONLY | OFlags::CLOEXEC, Mode::empty())
        .map_err(|e| format!("{}: {e}", path.display()))?;
    let what = args.join(" ");
    let Some(req) = args.first() else {
        return Err(
            "no request (sync, cpstat, sustat, chcp, rmcp, alloc-range, version, lscp)".into(),
        );
    };
    // SAFETY, each call: the pattern's type has the size and direction
    // the request code declares, and the kernel writes only that much.
    let out = match req.as_str() {
        "sync" => answer(
            unsafe { ioctl(&fd, Getter::<{ request::SYNC }, u64>::new()) },
            |cno| format!("cno {cno}"),
        ),
        "cpstat" => answer(
            unsafe { ioctl(&fd, Getter::<{ request::GET_CPSTAT }, [u64; 3]>::new()) },
            |[cno, ncps, nsss]| format!("cno {cno} ncps {ncps} nsss {nsss}"),
        ),
        "sustat" => answer(
            unsafe { ioctl(&fd, Getter::<{ request::GET_SUSTAT }, [u64; 6]>::new()) },
            |s| format!("nsegs {} clean {} dirty {}", s[0], s[1], s[2]),
        ),
        "chcp" => {
            let mode = match args.get(1).map(String::as_str) {
                Some("cp") => 0,
                Some("ss") => 1,
                Some(m) => m.parse().map_err(|_| format!("unknown mode {m:?}"))?,
                None => return Err("chcp needs cp|ss and a checkpoint number".into()),
            };
            let arg = CpMode {
                cno: number(args, 2)?,
                mode,
                pad: 0,
            };
            answer(
                unsafe { ioctl(&fd, Setter::<{ request::CHANGE_CPMODE }, CpMode>::new(arg)) },
                |()| "ok".into(),
            )
        }
        "rmcp" => answer(
            unsafe {
                ioctl(
                    &fd,
                    Setter::<{ request::DELETE_CHECKPOINT }, u64>::new(number(args, 1)?),
                )
            },
            |()| "ok".into(),
        ),
        "alloc-range" => {
            let range = [number(args, 1)?, number(args, 2)?];
            answer(
                unsafe {
                    ioctl(
                        &fd,
                        Setter::<{ request::SET_ALLOC_RANGE }, [u64; 2]>::new(range),
                    )
                },
                |()| "ok".into(),
            )
        }
        "version" => answer(
            unsafe {
                ioctl(
                    &fd,
                    Getter::<{ request::FS_IOC_GETVERSION }, [u32; 2]>::new(),
                )
            },
            |[g, _]| format!("generation {g}"),
        ),
        "lscp" => answer(
            unsafe { ioctl(&fd, Getter::<{ request::GET_CPINFO }, Argv>::new()) },
            |a| format!("nmembs {}", a.nmembs),
        ),
        r => return Err(format!("unknown request {r:?}")),
    };
    Ok(format!("{what}: {out}\n"))
}
