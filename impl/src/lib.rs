//! nilfs-impl: a reference implementation of the NILFS2 log-structured
//! filesystem on its real on-disk format.
//!
//! The module layout follows the kernel's nouns (fs/nilfs2) so that a NILFS2
//! developer finds their way; docs/ARCHITECTURE.md states what each module owns
//! and what it must not know.

pub mod alloc;
pub mod bmap;
pub mod cache;
pub mod check;
pub mod cleaner;
pub mod corrupt;
pub mod cpfile;
pub mod dat;
pub mod device;
pub mod dir;
pub mod error;
pub mod format;
pub mod fs;
pub mod gc;
pub mod ifile;
pub mod inspect;
pub mod mdt;
pub mod metafile;
pub mod mkfs;
pub mod posix;
pub mod psegment;
pub mod recovery;
pub mod rng;
pub mod sb_write;
pub mod segctor;
pub mod sim;
pub mod sufile;
pub mod sync;
pub mod the_nilfs;
pub mod txn;

pub use error::{Errno, Error, Result};
