//! nilfs-ref as a `nilfs_oracle::Implementation`: what the oracle's
//! lockstep, shrinking and crash check run it through, the same two traits
//! any other implementation implements.

use nilfs::device::{BlockDevice, MemDevice};
use nilfs::fs::Fs;
use nilfs::mkfs::{self, MkfsOptions};
use nilfs::the_nilfs::Nilfs;
use nilfs_model::Geometry;
use nilfs_oracle::{ImageSpec, Implementation, Sut, WriteLog};

use crate::ImplUnderTest;

/// Makes the file system on `dev` as `spec` says (mkfs.nilfs2's defaults
/// otherwise) and returns the model's geometry of it, read back from the
/// super block so that both sides agree on it.
pub fn format(dev: &dyn BlockDevice, spec: &ImageSpec) -> Result<Geometry, nilfs::Error> {
    mkfs::mkfs(
        dev,
        &MkfsOptions {
            block_size: spec.block_size,
            blocks_per_segment: spec.blocks_per_segment,
            ctime: spec.ctime,
            ..MkfsOptions::from_seed(spec.block_size)
        },
    )?;
    let nilfs = Nilfs::open(dev)?;
    Ok(Geometry {
        block_size: nilfs.block_size(),
        blocks_per_segment: nilfs.sb.blocks_per_segment,
        nsegments: nilfs.sb.nsegments,
        r_segments_percentage: nilfs.sb.r_segments_percentage,
    })
}

/// nilfs-ref on an in-memory device: each case a fresh `MemDevice`, run by
/// [`ImplUnderTest`].
#[derive(Default)]
pub struct Ours {
    dev: Option<Box<dyn BlockDevice>>,
    /// The clock of the last image made, seconds (a crash state is opened
    /// at it).
    now: u64,
    on_mount: Option<for<'d> fn(&mut Fs<'d>)>,
}

impl Ours {
    /// Call `f` on every read-write mount's `Fs` before its first
    /// operation (a tuning, or a known-bad switch): see
    /// [`ImplUnderTest::on_mount`].
    pub fn on_mount(mut self, f: for<'d> fn(&mut Fs<'d>)) -> Self {
        self.on_mount = Some(f);
        self
    }

    fn sut(&self) -> Box<dyn Sut + '_> {
        let dev = self.dev.as_deref().expect("a device was just made");
        let sut = ImplUnderTest::from_device(dev, self.now);
        Box::new(match self.on_mount {
            Some(f) => sut.on_mount(f),
            None => sut,
        })
    }
}

impl Implementation for Ours {
    fn format(
        &mut self,
        spec: &ImageSpec,
        log: Option<&WriteLog>,
    ) -> Result<(Geometry, Box<dyn Sut + '_>), String> {
        let mem = MemDevice::new(spec.device_bytes);
        let dev: Box<dyn BlockDevice> = match log {
            Some(log) => Box::new(Logged {
                inner: mem,
                log: log.clone(),
            }),
            None => Box::new(mem),
        };
        let g = format(&*dev, spec).map_err(|e| format!("mkfs: {e}"))?;
        self.dev = Some(dev);
        self.now = spec.ctime;
        Ok((g, self.sut()))
    }

    fn open(&mut self, image: &[u8]) -> Result<Box<dyn Sut + '_>, String> {
        let mem = MemDevice::new(image.len() as u64);
        mem.write_at(0, image).map_err(|e| e.to_string())?;
        self.dev = Some(Box::new(mem));
        Ok(self.sut())
    }
}

/// A device that gives every write to a [`WriteLog`] as well.
struct Logged {
    inner: MemDevice,
    log: WriteLog,
}

impl BlockDevice for Logged {
    fn size_bytes(&self) -> u64 {
        self.inner.size_bytes()
    }
    fn read_at(&self, off: u64, buf: &mut [u8]) -> nilfs::Result<()> {
        self.inner.read_at(off, buf)
    }
    fn write_at(&self, off: u64, buf: &[u8]) -> nilfs::Result<()> {
        self.inner.write_at(off, buf)?;
        self.log.write(off, buf);
        Ok(())
    }
    fn flush(&self) -> nilfs::Result<()> {
        self.inner.flush()
    }
    fn write_generation(&self) -> Option<u64> {
        self.inner.write_generation()
    }
    fn last_change(&self, off: u64, len: u64) -> Option<u64> {
        self.inner.last_change(off, len)
    }
}
