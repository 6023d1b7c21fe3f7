//! The transaction lock: how file operations and the segment constructor
//! share a mounted filesystem (the kernel's `nilfs_transaction_begin` /
//! `_commit`, which take `ns_segctor_sem` shared, and
//! `nilfs_transaction_lock`, which the constructor takes exclusive).
//!
//! Every file operation holds the shared side for its whole duration; a
//! construction holds the exclusive side from collection to the write, so
//! no operation can dirty a block between the moment the constructor
//! collects the dirty blocks and the moment it marks them clean. Inside the
//! shared side the filesystem state itself is one mutex for now; finer
//! locks (per inode, per metadata file, as the kernel has) can replace it
//! without changing this interface.

use crate::format::Cno;
use crate::fs::Fs;
use crate::sync::{lock, read, write, Mutex, RwLock};
use crate::Result;

/// Whether constructions hold the exclusive side throughout.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum TxRule {
    /// The kernel's rule.
    #[default]
    Exclusive,
    /// Known-bad: the constructor lets file operations in between
    /// collection and the write (the state a missing exclusive lock
    /// allows). Writes made in that window are marked clean unwritten.
    OpenWindow,
}

/// A mounted filesystem shared between threads.
pub struct Shared<'a> {
    tx: RwLock<()>,
    fs: Mutex<Fs<'a>>,
    rule: TxRule,
}

impl<'a> Shared<'a> {
    /// Share `fs` under `rule`.
    pub fn new(fs: Fs<'a>, rule: TxRule) -> Self {
        Shared {
            tx: RwLock::new(()),
            fs: Mutex::new(fs),
            rule,
        }
    }

    /// Run one file operation inside a transaction (shared side).
    pub fn op<T>(&self, f: impl FnOnce(&mut Fs<'a>) -> Result<T>) -> Result<T> {
        let _tx = read(&self.tx);
        let mut fs = lock(&self.fs);
        f(&mut fs)
    }

    /// A construction (`nilfs_construct_segment`) under the exclusive side.
    pub fn sync(&self) -> Result<Option<Cno>> {
        match self.rule {
            TxRule::Exclusive => {
                let _tx = write(&self.tx);
                lock(&self.fs).sync()
            }
            TxRule::OpenWindow => {
                let c = {
                    let _tx = read(&self.tx);
                    lock(&self.fs).sync_begin()?
                };
                crate::sync::thread::yield_now();
                let _tx = read(&self.tx);
                match c {
                    Some(c) => lock(&self.fs).sync_finish(c),
                    None => Ok(None),
                }
            }
        }
    }

    /// The filesystem back, for unmounting.
    pub fn into_inner(self) -> Fs<'a> {
        match self.fs.into_inner() {
            Ok(fs) => fs,
            Err(p) => p.into_inner(),
        }
    }
}
