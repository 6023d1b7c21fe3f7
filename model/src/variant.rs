//! Where Linux releases differ in what a user can observe, the model
//! names the release it describes, as SibylFS's platform variants do. A
//! trace from `nilref exec` records the kernel's `uname -r` on its first
//! line; the checker judges it against that release's variant. A trace
//! that names none is judged against [`Variant::Any`], the union: every
//! behaviour some described release shows.
//!
//! Every rule that differs cites the kernel commit that changed it.

use serde::{Deserialize, Serialize};

/// The Linux releases the model tells apart.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Variant {
    /// Linux 6.1 up to 6.11 (Debian 12's 6.1).
    #[serde(rename = "linux-6.1")]
    Linux6_1,
    /// Linux 6.12 and 6.13 (Debian 13's 6.12): as 6.1 where the model can
    /// see so far.
    #[serde(rename = "linux-6.12")]
    Linux6_12,
    /// Linux 6.14 to 6.19: as 7.x but for user xattrs on sockets.
    #[serde(rename = "linux-6.14")]
    Linux6_14,
    /// Linux 7.0 and later (Debian's 7.3).
    #[serde(rename = "linux-7")]
    Linux7,
    /// The union of the above.
    #[default]
    #[serde(rename = "any")]
    Any,
}

impl Variant {
    pub const ALL: [Variant; 5] = [
        Variant::Linux6_1,
        Variant::Linux6_12,
        Variant::Linux6_14,
        Variant::Linux7,
        Variant::Any,
    ];

    /// The variant of a kernel release string (`uname -r`: `6.1.0-50-amd64`,
    /// `6.12.117+deb13-amd64`, `7.3.4+deb13-amd64`); `Any` for one the
    /// model does not describe.
    pub fn from_release(release: &str) -> Variant {
        let mut nums = release
            .split(|c: char| !c.is_ascii_digit())
            .map(|p| p.parse::<u32>().unwrap_or(0));
        let (major, minor) = (nums.next().unwrap_or(0), nums.next().unwrap_or(0));
        match (major, minor) {
            (6, 1..=11) => Variant::Linux6_1,
            (6, 12..=13) => Variant::Linux6_12,
            (6, 14..) => Variant::Linux6_14,
            (7..=9, _) => Variant::Linux7,
            _ => Variant::Any,
        }
    }

    /// The name a trace or `--variant` uses.
    pub fn name(self) -> &'static str {
        match self {
            Variant::Linux6_1 => "linux-6.1",
            Variant::Linux6_12 => "linux-6.12",
            Variant::Linux6_14 => "linux-6.14",
            Variant::Linux7 => "linux-7",
            Variant::Any => "any",
        }
    }

    /// The variant named `s` (`linux-6.1`, `linux-6.12`, `linux-6.14`,
    /// `linux-7`, `any`).
    pub fn parse(s: &str) -> Option<Variant> {
        Variant::ALL.into_iter().find(|v| v.name() == s)
    }

    /// Whether `rename` sets a directory's mtime, as its allowed choices.
    /// `nilfs_rename` rewrites the moved directory's ".." entry with
    /// `nilfs_set_link`, which sets that directory's mtime and ctime. Up to
    /// 6.13 it did so for every renamed directory; "nilfs2: do not update
    /// mtime of renamed directory that is not moved" (6.14) does it only
    /// when the parent changes. Seen on Debian's 6.1.176, 6.12.117 (mtime
    /// set within one parent) and 7.3.4 (kept).
    pub fn renamed_dir_mtime(self, moved: bool) -> &'static [bool] {
        if moved {
            return &[true];
        }
        match self {
            Variant::Linux6_1 | Variant::Linux6_12 => &[true],
            Variant::Linux6_14 | Variant::Linux7 => &[false],
            Variant::Any => &[true, false],
        }
    }

    /// Whether `xattr_permission` lets a `user.*` attribute through on a
    /// socket, as the allowed choices. Up to 6.19 only regular files and
    /// directories may have them (EPERM to set or remove, ENODATA to get);
    /// Linux 7.0 lets sockets have them too (the series "xattr: rework
    /// simple xattrs and support user.* xattrs on sockets"; LTP's
    /// setxattr02 names commit dc0876b9846d), and on nilfs2, which has no
    /// xattr handler, the call then ends in EOPNOTSUPP. Seen on Debian's
    /// 6.1.176 and 6.12.117 (EPERM, ENODATA, EPERM) and 7.3.4
    /// (EOPNOTSUPP for all three; FIFOs and devices still EPERM), found by
    /// the exact-time campaign on 7.3 (seed 258).
    pub fn user_xattrs_on_sockets(self) -> &'static [bool] {
        match self {
            Variant::Linux6_1 | Variant::Linux6_12 | Variant::Linux6_14 => &[false],
            Variant::Linux7 => &[true],
            Variant::Any => &[false, true],
        }
    }
}

/// The extended-attribute calls whose checks' order changed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum XattrCall {
    Set,
    Get,
    Remove,
}

impl Variant {
    /// Whether the attribute's name is copied from user space (ERANGE for
    /// an empty one or one over 255 bytes) before the path is looked up,
    /// as the allowed choices. Linux 6.1 looks the path up first
    /// (`path_getxattr`, `path_removexattr`: `user_path_at` then the name),
    /// so a missing path or a symlink loop wins over a bad name. The xattr
    /// system calls' rework copies the name first: removexattr from 6.12
    /// on, getxattr from 6.13 on (with the `*xattrat` calls). Seen on
    /// Debian's 6.1.176, 6.12.117 and 7.3.4 (model/traces/kernel-*,
    /// `xattr-name-order.jsonl`, found by the version matrix on generated
    /// workloads). setxattr was not seen to differ: both orders stay
    /// allowed.
    pub fn xattr_name_first(self, call: XattrCall) -> &'static [bool] {
        match (self, call) {
            (_, XattrCall::Set) | (Variant::Any, _) => &[false, true],
            (Variant::Linux6_1, _) => &[false],
            (Variant::Linux6_12, XattrCall::Remove) => &[true],
            (Variant::Linux6_12, XattrCall::Get) => &[false],
            (Variant::Linux6_14 | Variant::Linux7, _) => &[true],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn releases_map_to_their_variant() {
        for (r, v) in [
            ("6.1.0-50-amd64", Variant::Linux6_1),
            ("6.12.117+deb13-amd64", Variant::Linux6_12),
            ("6.13.2", Variant::Linux6_12),
            ("6.14.0", Variant::Linux6_14),
            ("6.19.3", Variant::Linux6_14),
            ("7.0.1", Variant::Linux7),
            ("7.3.4+deb13-amd64", Variant::Linux7),
            ("5.10.0-28-amd64", Variant::Any),
            ("", Variant::Any),
        ] {
            assert_eq!(Variant::from_release(r), v, "{r}");
        }
        for v in Variant::ALL {
            assert_eq!(Variant::parse(v.name()), Some(v));
        }
    }
}
