//! The crate's one error type. Every decoder reports corruption as
//! [`Error::Corrupt`], naming the on-disk structure and, when the caller knows
//! it, the block it came from; nothing in this crate panics on bad input.

use std::fmt;

/// Result alias used throughout the crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong, as a typed value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// An on-disk structure failed a validity check.
    #[error("corrupt {what}{}: {detail}", BlockSuffix(*.blocknr))]
    Corrupt {
        /// The structure, in the kernel's words (`"super block"`, `"btree node"`, ...).
        what: &'static str,
        /// The physical block it was read from, when known.
        blocknr: Option<u64>,
        /// What was wrong with it.
        detail: String,
    },
    /// A block device operation failed.
    #[error("I/O error at block {blocknr}: {detail}")]
    Io {
        /// The block the operation addressed.
        blocknr: u64,
        /// What failed.
        detail: String,
    },
    /// A request was out of the range the geometry allows.
    #[error("out of range: {0}")]
    OutOfRange(String),
    /// Invalid arguments (for example an impossible mkfs geometry).
    #[error("{0}")]
    Invalid(String),
    /// A file operation failed the way the kernel fails it, with its errno.
    #[error("{detail}: {errno}")]
    Errno {
        /// The errno the kernel returns for this case.
        errno: Errno,
        /// The path or object concerned.
        detail: String,
    },
    /// A host file operation failed (image import/export).
    #[error("{path}: {detail}")]
    Host {
        /// The host path involved.
        path: String,
        /// The operating system's message.
        detail: String,
    },
}

impl Error {
    /// A corruption report without a block number.
    pub fn corrupt(what: &'static str, detail: impl Into<String>) -> Self {
        Error::Corrupt {
            what,
            blocknr: None,
            detail: detail.into(),
        }
    }

    /// Attach the physical block number to a corruption report that lacks one.
    #[must_use]
    pub fn at_block(self, block: u64) -> Self {
        match self {
            Error::Corrupt {
                what,
                blocknr: None,
                detail,
            } => Error::Corrupt {
                what,
                blocknr: Some(block),
                detail,
            },
            other => other,
        }
    }
}

impl Error {
    /// Say which block of a file a corruption report is about.
    #[must_use]
    pub fn of_inode_block(self, k: u64) -> Self {
        match self {
            Error::Corrupt {
                what,
                blocknr,
                detail,
            } => Error::Corrupt {
                what,
                blocknr,
                detail: format!("file block {k}: {detail}"),
            },
            other => other,
        }
    }

    /// Name the file a corruption report is about, when it does not yet.
    #[must_use]
    pub fn of_inode(self, ino: u64) -> Self {
        match self {
            Error::Corrupt {
                what,
                blocknr,
                detail,
            } if !detail.starts_with("inode ") => Error::Corrupt {
                what,
                blocknr,
                detail: format!("inode {ino}: {detail}"),
            },
            other => other,
        }
    }
}

struct BlockSuffix(Option<u64>);

impl fmt::Display for BlockSuffix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Some(b) => write!(f, " at block {b}"),
            None => Ok(()),
        }
    }
}

/// The errno values NILFS2 file operations return, by their Linux names.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[allow(clippy::upper_case_acronyms, missing_docs)]
pub enum Errno {
    EPERM = 1,
    ENOENT = 2,
    EIO = 5,
    EBUSY = 16,
    EEXIST = 17,
    EXDEV = 18,
    ENOTDIR = 20,
    EISDIR = 21,
    EINVAL = 22,
    ENOTTY = 25,
    EFBIG = 27,
    ENOSPC = 28,
    EROFS = 30,
    EMLINK = 31,
    ERANGE = 34,
    ENAMETOOLONG = 36,
    ENOTEMPTY = 39,
    ELOOP = 40,
    ENODATA = 61,
    EOPNOTSUPP = 95,
    ESTALE = 116,
}

impl fmt::Display for Errno {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{self:?}")
    }
}

impl Error {
    /// An errno failure about `detail`.
    pub fn errno(errno: Errno, detail: impl Into<String>) -> Self {
        Error::Errno {
            errno,
            detail: detail.into(),
        }
    }
}
