//! Error numbers as Linux returns them, by name and by number.

use serde::{Deserialize, Serialize};

/// Error numbers as Linux returns them: those the model can produce, a few
/// more that other implementations answer (an ioctl a file system does not
/// have, a permission check), and any other by its number (`{"err": 61}`),
/// which the model never allows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[allow(clippy::upper_case_acronyms)]
pub enum Errno {
    EPERM,
    ENOENT,
    EIO,
    EBUSY,
    EEXIST,
    EXDEV,
    ENOTDIR,
    EISDIR,
    EINVAL,
    EFBIG,
    ENOSPC,
    EROFS,
    EMLINK,
    ENAMETOOLONG,
    ENOTEMPTY,
    ELOOP,
    EACCES,
    ENOTTY,
    ENOSYS,
    EOPNOTSUPP,
    ERANGE,
    ENODATA,
    /// Any other errno, by its Linux number.
    #[serde(untagged)]
    Other(i32),
}

impl Errno {
    /// Linux's numbering (asm-generic/errno-base.h, errno.h), which every
    /// architecture the kernel's nilfs2 runs on shares for these.
    const NUMBERS: [(Errno, i32); 22] = [
        (Errno::EPERM, 1),
        (Errno::ENOENT, 2),
        (Errno::EIO, 5),
        (Errno::EACCES, 13),
        (Errno::EBUSY, 16),
        (Errno::EEXIST, 17),
        (Errno::EXDEV, 18),
        (Errno::ENOTDIR, 20),
        (Errno::EISDIR, 21),
        (Errno::EINVAL, 22),
        (Errno::ENOTTY, 25),
        (Errno::EFBIG, 27),
        (Errno::ENOSPC, 28),
        (Errno::EROFS, 30),
        (Errno::EMLINK, 31),
        (Errno::ENAMETOOLONG, 36),
        (Errno::ENOSYS, 38),
        (Errno::ENOTEMPTY, 39),
        (Errno::ELOOP, 40),
        (Errno::EOPNOTSUPP, 95),
        (Errno::ERANGE, 34),
        (Errno::ENODATA, 61),
    ];

    /// The errno a Linux system call returned.
    pub fn from_linux(n: i32) -> Errno {
        Self::NUMBERS
            .iter()
            .find(|(_, k)| *k == n)
            .map_or(Errno::Other(n), |(e, _)| *e)
    }

    /// Its Linux number.
    pub fn to_linux(self) -> i32 {
        match self {
            Errno::Other(n) => n,
            e => Self::NUMBERS
                .iter()
                .find(|(x, _)| *x == e)
                .map(|(_, n)| *n)
                .expect("every named errno has a number"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Errno;

    #[test]
    fn errnos_round_trip_by_name_and_number() {
        for n in 1..140 {
            let e = Errno::from_linux(n);
            assert_eq!(e.to_linux(), n);
            let json = serde_json::to_string(&e).unwrap();
            let back: Errno = serde_json::from_str(&json).unwrap();
            assert_eq!(back, e, "{json}");
        }
        assert_eq!(serde_json::to_string(&Errno::ENOENT).unwrap(), "\"ENOENT\"");
        assert_eq!(serde_json::to_string(&Errno::Other(61)).unwrap(), "61");
    }
}
