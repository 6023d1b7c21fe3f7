//! How an implementation of NILFS2 puts the oracle (`nilfs_oracle`) in its
//! own `cargo test`, shown on nilfs-ref with a planted bug: fsync(2)
//! answers success and writes nothing.
//!
//! Copy this crate and replace nilfs-ref with your file system: implement
//! [`nilfs_oracle::Sut`] for one run of it (apply an operation, show the
//! durable state) and [`nilfs_oracle::Implementation`] to make a fresh run
//! on a formatted image. Here both are wrappers of nilfs-ref's own
//! (`nilfs_adapter::Ours`), so the bug is the only difference; the tests in
//! `tests/` find it with proptest, quickcheck and the crash check, and
//! shrink it to a few lines.

use nilfs_model::{Geometry, Op, Outcome};
use nilfs_oracle::{Durable, ImageSpec, Implementation, Sut, WriteLog};

/// nilfs-ref, or (with `buggy`) nilfs-ref whose fsync does nothing.
#[derive(Default)]
pub struct PlantedBug {
    inner: nilfs_adapter::Ours,
    /// Plant the bug.
    pub buggy: bool,
}

impl PlantedBug {
    /// nilfs-ref, with the bug planted if `buggy`.
    pub fn new(buggy: bool) -> Self {
        PlantedBug {
            buggy,
            ..Default::default()
        }
    }

    /// nilfs-ref with the bug planted.
    pub fn buggy() -> Self {
        PlantedBug::new(true)
    }
}

/// `sut`, with the bug planted if `buggy`.
fn wrap<'a>(buggy: bool, sut: Box<dyn Sut + 'a>) -> Box<dyn Sut + 'a> {
    if buggy {
        Box::new(SkipsFsync(sut))
    } else {
        sut
    }
}

impl Implementation for PlantedBug {
    fn format(
        &mut self,
        spec: &ImageSpec,
        log: Option<&WriteLog>,
    ) -> Result<(Geometry, Box<dyn Sut + '_>), String> {
        let (g, sut) = self.inner.format(spec, log)?;
        Ok((g, wrap(self.buggy, sut)))
    }

    fn open(&mut self, image: &[u8]) -> Result<Box<dyn Sut + '_>, String> {
        let sut = self.inner.open(image)?;
        Ok(wrap(self.buggy, sut))
    }
}

/// The planted bug: `fsync` says it worked and writes nothing, so what it
/// should have made durable is lost by a power cut.
struct SkipsFsync<'a>(Box<dyn Sut + 'a>);

impl Sut for SkipsFsync<'_> {
    fn apply(&mut self, op: &Op) -> Outcome {
        match op {
            Op::Fsync { path, at: None } => {
                // Still refuse what fsync would refuse: a missing file.
                match self.0.apply(&Op::Lstat {
                    path: path.clone(),
                    at: None,
                }) {
                    Outcome::Err(e) => Outcome::Err(e),
                    _ => Outcome::Ok,
                }
            }
            op => self.0.apply(op),
        }
    }
    fn durable(&mut self) -> Result<Durable, String> {
        self.0.durable()
    }
    fn detail(&self) -> Option<String> {
        self.0.detail()
    }
}
