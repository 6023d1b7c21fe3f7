//! Images to start from, and the check every image a test leaves goes
//! through.

use nilfs::device::{import_image, BlockDevice, MemDevice};
use nilfs::inspect::manifest::manifest;
use nilfs::mkfs::{mkfs, MkfsOptions};
use nilfs::posix::CheckpointView;
use nilfs::the_nilfs::Nilfs;

/// A fresh image of `size` bytes, mkfs'd with `block_size`-byte blocks
/// and `blocks_per_segment`-block segments (mkfs's other defaults).
pub fn fresh(size: u64, block_size: u64, blocks_per_segment: u64) -> MemDevice {
    fresh_with(
        size,
        &MkfsOptions::with_geometry(block_size, blocks_per_segment),
    )
}

/// A fresh image of `size` bytes mkfs'd with `options`.
pub fn fresh_with(size: u64, options: &MkfsOptions) -> MemDevice {
    let dev = MemDevice::new(size);
    mkfs(&dev, options).expect("mkfs of a fresh image");
    dev
}

/// The kernel-written fixture image ([`crate::fixture::image_xz`]),
/// decompressed into memory.
pub fn fixture() -> MemDevice {
    let path = crate::fixture::image_xz();
    import_image(&path).unwrap_or_else(|e| panic!("kernel fixture {}: {e}", path.display()))
}

/// `nilref check` of `dev` with the default options (the latest
/// checkpoint): panics with the report, after `ctx`, unless it is clean.
#[track_caller]
pub fn assert_checks_clean(dev: &dyn BlockDevice, ctx: &str) {
    let r = nilfs::check::check_device(dev, &Default::default());
    assert!(r.is_clean(), "{ctx}: nilref check:\n{r}");
}

/// The manifest of `dev`'s latest checkpoint (tests/guest/manifest.sh's
/// format), failing the test if it cannot be read.
pub fn latest_manifest(dev: &dyn BlockDevice) -> String {
    let nilfs = Nilfs::open(dev).unwrap_or_else(|e| panic!("open the image: {e}"));
    let view = CheckpointView::open(&nilfs, None).unwrap_or_else(|e| panic!("latest view: {e}"));
    manifest(&view).unwrap_or_else(|e| panic!("manifest: {e}"))
}
