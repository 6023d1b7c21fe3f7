//! `nilref ioctl PATH REQUEST [ARG...]`: one of nilfs2's ioctls, issued on
//! a file or directory of a mounted file system — the kernel's nilfs2 or
//! `nilref mount` — and what it answered, one line. The FUSE tier and the
//! kernel guest run the same binary, so their answers compare line by line.
//! The system calls themselves are `exec::nilfs_ioctl`'s.
//!
//! Requests (nilfs2_api.h): `sync` (NILFS_IOCTL_SYNC: the latest
//! checkpoint), `cpstat`, `sustat` (the time fields are left out: they
//! differ between any two runs), `chcp cp|ss CNO` (CHANGE_CPMODE; a number
//! instead of cp|ss is passed as the mode), `rmcp CNO` (DELETE_CHECKPOINT),
//! `alloc-range START END` (SET_ALLOC_RANGE, byte offsets), `version`
//! (FS_IOC_GETVERSION: the inode's generation), `flags` (FS_IOC_GETFLAGS,
//! what lsattr reads) and `lscp` (GET_CPINFO: the
//! numbers of every checkpoint, minor ones included; a front end that
//! cannot reach the argument's buffer answers ENOTTY).
//!
//! An ioctl that fails prints its errno's name; the command fails only when
//! the path cannot be opened or the request is not one of these.

use std::path::{Path, PathBuf};

use nilfs_model::fs::Errno;
use rustix::fs::{open, Mode, OFlags};

use crate::exec::nilfs_ioctl as nio;

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
pub fn request(path: &Path, args: &[String]) -> Result<String, String> {
    let fd = open(path, OFlags::RDONLY | OFlags::CLOEXEC, Mode::empty())
        .map_err(|e| format!("{}: {e}", path.display()))?;
    let what = args.join(" ");
    let Some(req) = args.first() else {
        return Err(
            "no request (sync, cpstat, sustat, chcp, rmcp, alloc-range, version, flags, lscp)"
                .into(),
        );
    };
    let ok = |()| "ok".to_string();
    let out = match req.as_str() {
        "sync" => answer(nio::sync(&fd), |cno| format!("cno {cno}")),
        "cpstat" => answer(nio::get_cpstat(&fd), |[cno, ncps, nsss]| {
            format!("cno {cno} ncps {ncps} nsss {nsss}")
        }),
        "sustat" => answer(nio::get_sustat(&fd), |s| {
            format!("nsegs {} clean {} dirty {}", s[0], s[1], s[2])
        }),
        "chcp" => {
            let mode = match args.get(1).map(String::as_str) {
                Some("cp") => 0,
                Some("ss") => 1,
                Some(m) => m.parse().map_err(|_| format!("unknown mode {m:?}"))?,
                None => return Err("chcp needs cp|ss and a checkpoint number".into()),
            };
            answer(nio::change_cpmode_raw(&fd, number(args, 2)?, mode), ok)
        }
        "rmcp" => answer(nio::delete_checkpoint(&fd, number(args, 1)?), ok),
        "alloc-range" => answer(
            nio::set_alloc_range(&fd, number(args, 1)?, number(args, 2)?),
            ok,
        ),
        "version" => answer(nio::get_version(&fd), |g| format!("generation {g}")),
        "flags" => answer(nio::get_flags(&fd), |f| format!("flags {f:#x}")),
        "lscp" => answer(nio::all_cpinfo(&fd), |cps| {
            let cnos: Vec<String> = cps.iter().map(|c| c.ci_cno.to_string()).collect();
            format!("checkpoints {}", cnos.join(" "))
        }),
        r => return Err(format!("unknown request {r:?}")),
    };
    Ok(format!("{what}: {out}\n"))
}

/// Arguments of `nilref ioctl`.
#[derive(clap::Args)]
pub struct IoctlArgs {
    pub path: PathBuf,
    #[arg(required = true, num_args = 1..)]
    pub request: Vec<String>,
}

/// `nilref ioctl`.
pub fn run(a: IoctlArgs) -> Result<String, String> {
    request(&a.path, &a.request)
}
