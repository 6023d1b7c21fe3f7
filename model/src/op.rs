//! The operations a user can perform and what each returns: the trace
//! format's vocabulary. No rule lives here; `step` states what each
//! operation may do and `accept` which outcomes it allows.

use crate::fs::{Errno, FileType, StatInfo};
use crate::pattern::Pattern;
use crate::state::Cno;
use serde::{Deserialize, Serialize};

/// Operations: the user-visible interface (system calls on paths, the
/// nilfs-utils checkpoint tools, mounts, crash, the cleaner).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Op {
    /// mkfs.nilfs2; valid only as a trace's first line.
    Mkfs {
        block_size: u32,
        blocks_per_segment: u32,
        nsegments: u64,
        #[serde(default = "default_rsv")]
        r_segments_percentage: u32,
        /// nilfs-utils <= 2.2.x also creates `/.nilfs`.
        #[serde(default)]
        dot_nilfs: bool,
        /// The clock (ns) at mkfs: the root's and `/.nilfs`'s times. A
        /// runner on a real file system reads it from the fresh root.
        #[serde(default, skip_serializing_if = "is_zero")]
        clock: i64,
        /// The kernel a runner ran on (`uname -r`): the checker judges the
        /// trace against its [`Variant`](crate::Variant).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        kernel: Option<String>,
    },
    /// Sets the injected clock (ns); it never goes back.
    Clock {
        now: i64,
    },
    Create {
        path: String,
        #[serde(default = "default_file_perm")]
        perm: u32,
        #[serde(default)]
        excl: bool,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        at: Option<Cno>,
    },
    Mkdir {
        path: String,
        #[serde(default = "default_dir_perm")]
        perm: u32,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        at: Option<Cno>,
    },
    Symlink {
        target: String,
        path: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        at: Option<Cno>,
    },
    Link {
        old: String,
        new: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        at: Option<Cno>,
    },
    Unlink {
        path: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        at: Option<Cno>,
    },
    Rmdir {
        path: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        at: Option<Cno>,
    },
    /// `renameat2(old, new, flags)`: `noreplace` is RENAME_NOREPLACE,
    /// `exchange` RENAME_EXCHANGE.
    Rename {
        old: String,
        new: String,
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        noreplace: bool,
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        exchange: bool,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        at: Option<Cno>,
    },
    /// `pwrite(path, data, offset)`; with `append`, a file opened
    /// `O_APPEND` and written with `write(2)`: every write goes to the end
    /// (`generic_write_checks` moves `ki_pos` to `i_size`) and `offset` is
    /// ignored.
    Write {
        path: String,
        offset: u64,
        data: Pattern,
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        append: bool,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        at: Option<Cno>,
    },
    Read {
        path: String,
        offset: u64,
        len: u64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        at: Option<Cno>,
    },
    Truncate {
        path: String,
        size: u64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        at: Option<Cno>,
    },
    Lstat {
        path: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        at: Option<Cno>,
    },
    /// `chmod(path, perm)` (follows symlinks).
    Chmod {
        path: String,
        perm: u32,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        at: Option<Cno>,
    },
    /// `fchownat(AT_FDCWD, path, uid, gid, follow ? 0 :
    /// AT_SYMLINK_NOFOLLOW)`; an absent id is -1 (left as it is).
    Chown {
        path: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        uid: Option<u32>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        gid: Option<u32>,
        #[serde(default = "yes", skip_serializing_if = "is_true")]
        follow: bool,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        at: Option<Cno>,
    },
    /// `utimensat(AT_FDCWD, path, {UTIME_OMIT, mtime}, flags)`: the
    /// modification time set to `mtime` (ns since the epoch), or to the
    /// current time when absent (UTIME_NOW); the access time left alone.
    Utimes {
        path: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        mtime: Option<i64>,
        #[serde(default = "yes", skip_serializing_if = "is_true")]
        follow: bool,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        at: Option<Cno>,
    },
    /// `mknod(path, type | perm, makedev(rdev[0], rdev[1]))`.
    Mknod {
        path: String,
        #[serde(rename = "type")]
        file_type: FileType,
        #[serde(default = "default_file_perm")]
        perm: u32,
        #[serde(default, skip_serializing_if = "is_no_dev")]
        rdev: [u32; 2],
        #[serde(default, skip_serializing_if = "Option::is_none")]
        at: Option<Cno>,
    },
    /// `setxattr(path, name, value, 0)`, `lsetxattr` unless `follow`.
    Setxattr {
        path: String,
        name: String,
        #[serde(default)]
        value: String,
        #[serde(default = "yes", skip_serializing_if = "is_true")]
        follow: bool,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        at: Option<Cno>,
    },
    /// `getxattr` (`lgetxattr` unless `follow`).
    Getxattr {
        path: String,
        name: String,
        #[serde(default = "yes", skip_serializing_if = "is_true")]
        follow: bool,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        at: Option<Cno>,
    },
    /// `listxattr` (`llistxattr` unless `follow`): the names.
    Listxattr {
        path: String,
        #[serde(default = "yes", skip_serializing_if = "is_true")]
        follow: bool,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        at: Option<Cno>,
    },
    /// `removexattr` (`lremovexattr` unless `follow`).
    Removexattr {
        path: String,
        name: String,
        #[serde(default = "yes", skip_serializing_if = "is_true")]
        follow: bool,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        at: Option<Cno>,
    },
    /// `statfs` of a mounted view.
    Statfs {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        at: Option<Cno>,
    },
    Readdir {
        path: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        at: Option<Cno>,
    },
    Readlink {
        path: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        at: Option<Cno>,
    },
    Fsync {
        path: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        at: Option<Cno>,
    },
    Fdatasync {
        path: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        at: Option<Cno>,
    },
    Sync,
    /// `mkcp [-s] -p`: prints the checkpoint number.
    Mkcp {
        #[serde(default)]
        snapshot: bool,
    },
    /// `chcp ss|cp CNO`.
    Chcp {
        cno: Cno,
        snapshot: bool,
    },
    /// `rmcp CNO`.
    Rmcp {
        cno: Cno,
    },
    Lscp,
    /// `mount [-o ro] [-o cp=CNO]` (cp= requires ro and a snapshot).
    Mount {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cp: Option<Cno>,
        #[serde(default)]
        ro: bool,
    },
    Umount {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cp: Option<Cno>,
    },
    /// `mount -o remount,ro|rw` of the latest.
    Remount {
        #[serde(default)]
        ro: bool,
    },
    /// Power loss: every mount is gone; the recovered state is one of the
    /// envelope's (mount again to look at it).
    Crash,
    /// `nilfs-clean -p PROTECTION_S` run to completion.
    Clean {
        #[serde(default)]
        protection_s: u64,
    },
    /// tests/guest/manifest.sh of a mounted view.
    Manifest {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        at: Option<Cno>,
    },
}

impl Op {
    /// The snapshot view (`mount -o ro,cp=N`) the operation works on, if
    /// any: a runner sends it only while that view is mounted.
    pub fn at(&self) -> Option<Cno> {
        match self {
            Op::Create { at, .. }
            | Op::Mkdir { at, .. }
            | Op::Symlink { at, .. }
            | Op::Link { at, .. }
            | Op::Unlink { at, .. }
            | Op::Rmdir { at, .. }
            | Op::Rename { at, .. }
            | Op::Write { at, .. }
            | Op::Read { at, .. }
            | Op::Truncate { at, .. }
            | Op::Lstat { at, .. }
            | Op::Chmod { at, .. }
            | Op::Chown { at, .. }
            | Op::Utimes { at, .. }
            | Op::Mknod { at, .. }
            | Op::Statfs { at }
            | Op::Setxattr { at, .. }
            | Op::Getxattr { at, .. }
            | Op::Listxattr { at, .. }
            | Op::Removexattr { at, .. }
            | Op::Readdir { at, .. }
            | Op::Readlink { at, .. }
            | Op::Fsync { at, .. }
            | Op::Fdatasync { at, .. }
            | Op::Manifest { at } => *at,
            _ => None,
        }
    }

    /// A path operation that changes what its view shows, when it
    /// succeeds: what a read-only mount must refuse.
    pub fn is_change(&self) -> bool {
        matches!(
            self,
            Op::Create { .. }
                | Op::Mkdir { .. }
                | Op::Symlink { .. }
                | Op::Link { .. }
                | Op::Unlink { .. }
                | Op::Rmdir { .. }
                | Op::Rename { .. }
                | Op::Write { .. }
                | Op::Truncate { .. }
                | Op::Chmod { .. }
                | Op::Chown { .. }
                | Op::Utimes { .. }
                | Op::Mknod { .. }
        )
    }
}

fn is_zero(x: &i64) -> bool {
    *x == 0
}

fn yes() -> bool {
    true
}

fn is_true(x: &bool) -> bool {
    *x
}

fn is_no_dev(x: &[u32; 2]) -> bool {
    *x == [0, 0]
}

fn default_rsv() -> u32 {
    5
}
fn default_file_perm() -> u32 {
    0o644
}
fn default_dir_perm() -> u32 {
    0o755
}

/// One lscp line: number and mode (minor checkpoints are hidden by lscp
/// without -a, so they never appear).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CpEntry {
    pub cno: Cno,
    #[serde(default)]
    pub ss: bool,
}

/// What an operation returned.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    Ok,
    Err(Errno),
    Written(u64),
    /// Read result: the number of bytes and their sha256.
    Data {
        len: u64,
        sha256: String,
    },
    Stat(StatInfo),
    /// readdir: names without "." and "..", in any order.
    Names(Vec<String>),
    Target(String),
    Cno(Cno),
    Checkpoints(Vec<CpEntry>),
    Manifest(Vec<String>),
    Statfs(StatfsInfo),
}

/// What `statfs` reports (`nilfs_statfs`), less `f_type` and `f_fsid`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StatfsInfo {
    pub bsize: u64,
    pub blocks: u64,
    pub bfree: u64,
    pub bavail: u64,
    pub files: u64,
    pub ffree: u64,
    pub namelen: u64,
}

#[cfg(test)]
mod tests {
    use super::Op;

    /// A mknod line carries its device numbers only when there are
    /// some (a fifo or socket has none), as the traces recorded before
    /// they were kept read. Postmortem (model shard 4/16, re-run:
    /// `is_no_dev` answering false wrote `"rdev":[0,0]` on every fifo).
    #[test]
    fn a_mknod_line_names_a_device_only_when_it_has_one() {
        let mknod = |file_type, rdev| Op::Mknod {
            path: "/n".into(),
            file_type,
            perm: 0o644,
            rdev,
            at: None,
        };
        use crate::fs::FileType;
        let fifo = serde_json::to_string(&mknod(FileType::Fifo, [0, 0])).unwrap();
        assert!(!fifo.contains("rdev"), "{fifo}");
        let chr = serde_json::to_string(&mknod(FileType::CharDevice, [1, 3])).unwrap();
        assert!(chr.contains(r#""rdev":[1,3]"#), "{chr}");
        for line in [fifo, chr] {
            let back: Op = serde_json::from_str(&line).unwrap();
            assert_eq!(serde_json::to_string(&back).unwrap(), line);
        }
    }

    /// A mkfs line keeps its clock through the trace format, and one at
    /// clock 0 (a trace recorded before mkfs carried it) writes none.
    /// Postmortem (model shard 4/16: `is_zero` answering true dropped
    /// every clock from the traces the model writes).
    #[test]
    fn a_mkfs_line_keeps_its_clock() {
        let mkfs = |clock| Op::Mkfs {
            block_size: 4096,
            blocks_per_segment: 512,
            nsegments: 64,
            r_segments_percentage: 5,
            dot_nilfs: false,
            clock,
            kernel: None,
        };
        let line = serde_json::to_string(&mkfs(1_000_000_000_000)).unwrap();
        assert!(line.contains(r#""clock":1000000000000"#), "{line}");
        let back: Op = serde_json::from_str(&line).unwrap();
        assert_eq!(back, mkfs(1_000_000_000_000));
        let line = serde_json::to_string(&mkfs(0)).unwrap();
        assert!(!line.contains("clock"), "{line}");
    }
}
