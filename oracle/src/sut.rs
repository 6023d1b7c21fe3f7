//! What an implementation provides: [`Sut`], one run of it driven by the
//! model's operations, and [`Implementation`], which makes a fresh one.

use std::collections::BTreeMap;

use nilfs_model::{Geometry, Op, Outcome};

use crate::crash::WriteLog;

/// Nanoseconds per second: the model's clock is in ns.
pub const NS: i64 = 1_000_000_000;

/// What the oracle can observe of an implementation's durable state: the
/// manifest of the live tree and of every checkpoint, in the model's
/// manifest line format (`nilfs_model::manifest`), each regular file's
/// digest the page digest (`nilfs_model::manifest::file_page_digest`:
/// SHA-256 of its non-zero 4 KiB pages with their indexes, then the size).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Durable {
    pub live: Vec<String>,
    /// Each checkpoint's manifest. `None` only on the model's side, for a
    /// checkpoint it learned from an lscp listing and whose contents it
    /// does not know; an implementation shows every one.
    pub checkpoints: BTreeMap<u64, Option<Vec<String>>>,
}

impl Durable {
    /// Whether `got`, an implementation's durable state, is this one (the
    /// model's): the same live tree, the same checkpoint numbers, and the
    /// same contents for every checkpoint whose contents are known.
    pub fn admits(&self, got: &Durable) -> bool {
        self.live == got.live
            && self.checkpoints.keys().eq(got.checkpoints.keys())
            && self
                .checkpoints
                .iter()
                .all(|(c, w)| w.is_none() || got.checkpoints.get(c) == Some(w))
    }
}

/// A system under test: one run of an implementation, driven by the
/// model's operations.
///
/// Implement it for your file system (an in-process library, a FUSE mount
/// driven by system calls, a kernel driven through a guest): the oracle
/// calls [`Sut::apply`] once per operation and compares the outcome with
/// every outcome the model allows, and after every operation that leaves
/// nothing pending (sync, mkcp, a mount) compares [`Sut::durable`] with
/// the model's durable state.
pub trait Sut {
    /// Execute `op` and report what was observed. An error is
    /// `Outcome::Err(errno)`; an implementation's own failure that has no
    /// errno is best reported as `Errno::EIO` (the model never allows it,
    /// so it is a divergence) with the reason in [`Sut::detail`].
    fn apply(&mut self, op: &Op) -> Outcome;
    /// The abstraction function: the durable state as a [`Durable`], read
    /// back from the medium. Called only when nothing is pending (after a
    /// construction or a mount).
    fn durable(&mut self) -> Result<Durable, String>;
    /// Why the last operation failed, in the implementation's words (shown
    /// in divergence reports).
    fn detail(&self) -> Option<String> {
        None
    }
    /// For an implementation whose clock cannot be injected (a mount, a
    /// kernel): the real-time interval, ns since the epoch, the last
    /// [`Sut::apply`] ran in (the clock read just before the call and just
    /// after it). The model then holds every time stamp that operation set
    /// to lie in it, as it does a trace line's `"t"`, and the workload must
    /// have no `clock` lines (`Features::clock` off). `None`, the default:
    /// the clock is the workload's own `clock` lines.
    fn clock_interval(&self) -> Option<[i64; 2]> {
        None
    }
    /// Why the last [`Sut::apply`] or [`Sut::durable`] observed nothing
    /// of the implementation: the harness failed, not the file system (a
    /// runner that ended or answered garbage, an operation this harness
    /// cannot give it, an image file it could not open). `Some` stops the
    /// run as *undecided* ([`crate::Stop::Undecided`]): the oracle says it
    /// could not decide, never that the implementation diverged. `None`,
    /// the default: every answer is the implementation's own, and an
    /// error [`Sut::durable`] returns means its image does not read back
    /// (a divergence).
    fn undecided(&self) -> Option<String> {
        None
    }
}

/// The image a run starts from.
#[derive(Clone, Debug)]
pub struct ImageSpec {
    pub block_size: u64,
    pub blocks_per_segment: u64,
    pub device_bytes: u64,
    /// mkfs's creation time, seconds; the model's clock starts there.
    pub ctime: u64,
}

impl Default for ImageSpec {
    /// 1 KiB blocks, 64-block segments, 32 MiB, made at 1,700,000,000 s.
    fn default() -> Self {
        ImageSpec {
            block_size: 1024,
            blocks_per_segment: 64,
            device_bytes: 32 << 20,
            ctime: 1_700_000_000,
        }
    }
}

/// An implementation the oracle can run: it makes a fresh [`Sut`] for each
/// case. The returned `Sut` may borrow the implementation (its device,
/// say); the oracle drops it before asking for the next.
pub trait Implementation {
    /// A fresh file system made as `spec` says (formatted, not mounted:
    /// the workload's first operation mounts it), and the model's
    /// geometry of it (read back from what was made, so both sides agree).
    ///
    /// With `log`, every block write the device receives from here on,
    /// the format's included, must also be given to it, in order
    /// ([`WriteLog::write`]): the crash check
    /// replays prefixes of them. An implementation that cannot record
    /// answers `Err` when `log` is given.
    fn format(
        &mut self,
        spec: &ImageSpec,
        log: Option<&WriteLog>,
    ) -> Result<(Geometry, Box<dyn Sut + '_>), String>;

    /// The file system on `image` (the device's bytes, as a crash left
    /// them), not mounted: the crash check mounts it and reads its
    /// durable state. The default cannot.
    fn open(&mut self, image: &[u8]) -> Result<Box<dyn Sut + '_>, String> {
        let _ = image;
        Err("this implementation does not open images".into())
    }
}
