//! nilfs-model: the executable specification of NILFS2 (what a user can
//! observe: namespace, file bytes, checkpoints, snapshots, errors, what
//! survives a crash). It depends on no other crate of this workspace.
//!
//! The specification itself is issue 3; until it lands this crate holds only
//! the vocabulary both sides agree on: the limits NILFS2 imposes on users.

/// `NILFS_NAME_LEN`: the longest file name, in bytes.
pub const NAME_LEN_MAX: usize = 255;
/// `NILFS_LINK_MAX`: the most hard links an inode may have.
pub const LINK_MAX: u32 = 32000;
