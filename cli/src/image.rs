//! Opening an image file for reading, raw or xz-compressed: what the
//! read-only commands (listings, trees, `check`) share.

use std::path::Path;

use nilfs::device::{BlockDevice, FileDevice};

/// Open an image for reading: xz-compressed images are decompressed into memory.
pub(crate) fn open_image(path: &Path) -> Result<Box<dyn BlockDevice>, nilfs::Error> {
    let mut magic = [0u8; 6];
    let is_xz = std::fs::File::open(path)
        .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut magic))
        .is_ok()
        && magic == [0xFD, b'7', b'z', b'X', b'Z', 0];
    if is_xz {
        // Bounded by the image's own declared size (s_dev_size).
        Ok(Box::new(nilfs::device::import_image_limited(
            path,
            &nilfs::format::superblock::declared_dev_size,
        )?))
    } else {
        Ok(Box::new(FileDevice::open_read_only(path)?))
    }
}
