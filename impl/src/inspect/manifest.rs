//! The manifest of a checkpoint, in exactly the format of
//! tests/guest/manifest.sh (and grub-check.sh), so our view,
//! the kernel's and GRUB's can be diffed line for line:
//!
//! ```text
//! <sha256>  <size>  <path>      regular file
//! DIR  -  <path>/               directory
//! LNK  -  <path> -> <target>    symlink
//! FIFO  -  <path>               FIFO
//! SOCK  -  <path>               socket
//! CHR  <major>:<minor>  <path>  character device
//! BLK  <major>:<minor>  <path>  block device
//! ```
//!
//! Lines are sorted as `LC_ALL=C sort -k3` sorts them: bytewise by the text
//! from the third field to the end of the line.

use sha2::{Digest, Sha256};

use crate::format::ino;
use crate::format::inode::{Inode, S_IFBLK, S_IFCHR, S_IFDIR, S_IFIFO, S_IFLNK, S_IFSOCK};
use crate::fs::Fs;
use crate::posix::{CheckpointView, Piece};
use crate::Result;

/// One manifest line and the key it sorts by (`sort -k3`: the text from
/// the path on).
type Line = (Vec<u8>, Vec<u8>);

/// What a closure that streams an entry's bytes feeds them to.
type Sink<'a> = &'a mut dyn FnMut(&[u8]);

/// The line of the entry at `path` whose inode is `inode`; `contents`
/// streams a symlink's target or a regular file's data into the sink it is
/// given, holes as zeros (not called for a directory, a FIFO, a socket or
/// a device). A regular file is hashed as it streams, so memory stays one
/// piece whatever `i_size` says.
fn line_of(
    path: &[u8],
    inode: &Inode,
    contents: impl FnOnce(Sink<'_>) -> Result<()>,
) -> Result<Line> {
    let size = inode.size;
    let special = |tag: String| {
        let mut line = tag.into_bytes();
        line.extend_from_slice(path);
        (path.to_vec(), line)
    };
    let [major, minor] = inode.rdev().unwrap_or_default();
    Ok(match inode.file_type() {
        S_IFIFO => special("FIFO  -  ".into()),
        S_IFSOCK => special("SOCK  -  ".into()),
        S_IFCHR => special(format!("CHR  {major}:{minor}  ")),
        S_IFBLK => special(format!("BLK  {major}:{minor}  ")),
        S_IFDIR => {
            let mut key = path.to_vec();
            key.push(b'/');
            let mut line = b"DIR  -  ".to_vec();
            line.extend_from_slice(&key);
            (key, line)
        }
        S_IFLNK => {
            let mut key = path.to_vec();
            key.extend_from_slice(b" -> ");
            contents(&mut |b| key.extend_from_slice(b))?;
            let mut line = b"LNK  -  ".to_vec();
            line.extend_from_slice(&key);
            (key, line)
        }
        _ => {
            let mut h = Sha256::new();
            contents(&mut |b| h.update(b))?;
            regular_line(path, size, &h.finalize().into())
        }
    })
}

/// A regular file's line, from its digest.
fn regular_line(path: &[u8], size: u64, digest: &[u8; 32]) -> Line {
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    let mut line = format!("{hex}  {size}  ").into_bytes();
    line.extend_from_slice(path);
    (path.to_vec(), line)
}

/// Whether `line_of` hashes this type's contents (a regular file, or an
/// inode of no known type, which reads as one).
fn is_hashed(inode: &Inode) -> bool {
    !matches!(
        inode.file_type(),
        S_IFIFO | S_IFSOCK | S_IFCHR | S_IFBLK | S_IFDIR | S_IFLNK
    )
}

/// How much of a file `live_manifest` reads at a time.
const LIVE_PIECE: u64 = 1 << 20;

/// Feeds `n` zero bytes to `sink`, a bounded buffer at a time.
fn feed_zeros(sink: Sink<'_>, mut n: u64) {
    let zeros = [0u8; 1 << 16];
    while n > 0 {
        let k = n.min(zeros.len() as u64) as usize;
        sink(&zeros[..k]);
        n -= k as u64;
    }
}

/// The sorted lines, as text.
fn finish(mut lines: Vec<Line>) -> String {
    lines.sort();
    let mut out = Vec::new();
    for (_, l) in lines {
        out.extend_from_slice(&l);
        out.push(b'\n');
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// How a regular file's contents are digested in a manifest line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ContentDigest {
    /// SHA-256 of the contents, holes as zeros: manifest.sh's, the one the
    /// kernel's and GRUB's manifests are compared with.
    Sha256,
    /// The page digest (see [`PageDigest`]): what lockstep's abstraction
    /// function compares, where hashing holes as zeros was most of the
    /// time.
    Pages,
}

/// The page digest, streamed: cut the contents (`size` bytes, holes as
/// zeros) into 4096-byte pages from offset 0; SHA-256 over, for each page
/// holding a non-zero byte, in order, its index (u64, little-endian) and
/// its bytes (the last page cut at the size); then the size (u64,
/// little-endian). Holes and pages of zeros are skipped, not hashed. The
/// model computes the same definition from its own pages
/// (`nilfs_model::manifest::file_page_digest`).
pub struct PageDigest {
    h: Sha256,
    /// Bytes fed so far.
    pos: u64,
    /// The page being filled (`pos % 4096` bytes of it).
    page: Vec<u8>,
}

const DIGEST_PAGE: u64 = 4096;

impl Default for PageDigest {
    fn default() -> Self {
        PageDigest {
            h: Sha256::new(),
            pos: 0,
            page: Vec::with_capacity(DIGEST_PAGE as usize),
        }
    }
}

impl PageDigest {
    /// Bytes of data, in order.
    pub fn data(&mut self, mut d: &[u8]) {
        while !d.is_empty() {
            let room = DIGEST_PAGE as usize - self.page.len();
            let n = room.min(d.len());
            self.page.extend_from_slice(&d[..n]);
            self.pos += n as u64;
            d = &d[n..];
            if self.page.len() == DIGEST_PAGE as usize {
                self.flush();
            }
        }
    }

    /// `n` bytes of a hole (zeros).
    pub fn hole(&mut self, mut n: u64) {
        if !self.page.is_empty() {
            let k = (DIGEST_PAGE - self.page.len() as u64).min(n);
            self.page.resize(self.page.len() + k as usize, 0);
            self.pos += k;
            n -= k;
            if self.page.len() == DIGEST_PAGE as usize {
                self.flush();
            }
        }
        if n == 0 {
            return;
        }
        // The page is empty here: whole pages of zeros are skipped, the
        // rest starts the next page.
        let whole = n / DIGEST_PAGE * DIGEST_PAGE;
        self.pos += whole + (n - whole);
        self.page.resize((n - whole) as usize, 0);
    }

    /// The page just filled (or the last, partial one): hashed unless it
    /// is all zeros.
    fn flush(&mut self) {
        if self.page.iter().any(|&b| b != 0) {
            let start = self.pos - self.page.len() as u64;
            self.h.update((start / DIGEST_PAGE).to_le_bytes());
            self.h.update(&self.page);
        }
        self.page.clear();
    }

    /// The digest of the contents fed, which must be exactly `size` bytes.
    pub fn finish(mut self) -> [u8; 32] {
        self.flush();
        self.h.update(self.pos.to_le_bytes());
        self.h.finalize().into()
    }
}

/// The manifest of every entry of the checkpoint. A file's digest is
/// computed once per image (`Nilfs::file_digest`): the manifests of many
/// checkpoints of one image hash each unchanged file once.
pub fn manifest(view: &CheckpointView<'_, '_>) -> Result<String> {
    manifest_with(view, ContentDigest::Sha256)
}

/// [`manifest`] with regular files digested by `digest`.
pub fn manifest_with(view: &CheckpointView<'_, '_>, digest: ContentDigest) -> Result<String> {
    let mut lines: Vec<Line> = Vec::new();
    view.walk_tree(&mut |path, _ino, inode| {
        if is_hashed(inode) {
            let kind = digest as u8;
            let digest =
                view.image()
                    .file_digest(inode.bmap, inode.size, kind, || match digest {
                        ContentDigest::Sha256 => {
                            let mut h = Sha256::new();
                            view.read_pieces(inode, &mut |piece| {
                                match piece {
                                    Piece::Data(d) => h.update(d),
                                    Piece::Hole(n) => feed_zeros(&mut |b| h.update(b), n),
                                }
                                Ok(())
                            })?;
                            Ok(h.finalize().into())
                        }
                        ContentDigest::Pages => {
                            let mut p = PageDigest::default();
                            view.read_pieces(inode, &mut |piece| {
                                match piece {
                                    Piece::Data(d) => p.data(d),
                                    Piece::Hole(n) => p.hole(n),
                                }
                                Ok(())
                            })?;
                            Ok(p.finish())
                        }
                    })?;
            lines.push(regular_line(path, inode.size, &digest));
            return Ok(());
        }
        let contents = |sink: Sink<'_>| match inode.file_type() {
            S_IFLNK => view.readlink(inode).map(|t| sink(&t)),
            _ => view.read_pieces(inode, &mut |piece| {
                match piece {
                    Piece::Data(d) => sink(d),
                    Piece::Hole(n) => feed_zeros(sink, n),
                }
                Ok(())
            }),
        };
        lines.push(line_of(path, inode, contents)?);
        Ok(())
    })?;
    Ok(finish(lines))
}

/// The manifest of a mounted file system's live tree as it stands now,
/// changes not yet written included (read through the write path's own
/// view: `Fs::readdir`, `Fs::stat`, `Fs::read`).
pub fn live_manifest(fs: &mut Fs<'_>) -> Result<String> {
    let mut lines: Vec<Line> = Vec::new();
    let mut stack = vec![(Vec::new(), ino::ROOT)];
    while let Some((prefix, dir)) = stack.pop() {
        for (name, i, _) in fs.readdir(dir)? {
            if name == b"." || name == b".." {
                continue;
            }
            let mut path = prefix.clone();
            path.push(b'/');
            path.extend_from_slice(&name);
            let raw = fs.stat(i)?;
            if raw.file_type() == S_IFDIR {
                stack.push((path.clone(), i));
            }
            // A symlink's target is its first page (`page_get_link`); a
            // file is read in pieces, so a huge sparse one costs one piece
            // of memory.
            let contents = |sink: Sink<'_>| {
                if raw.file_type() == S_IFLNK {
                    sink(&fs.symlink_target(i)?);
                    return Ok(());
                }
                let mut off = 0;
                while off < raw.size {
                    let n = (raw.size - off).min(LIVE_PIECE);
                    sink(&fs.read(i, off, n)?);
                    off += n;
                }
                Ok(())
            };
            lines.push(line_of(&path, &raw, contents)?);
        }
    }
    Ok(finish(lines))
}

#[cfg(test)]
mod page_digest_tests {
    use super::PageDigest;
    use proptest::prelude::*;
    use sha2::{Digest, Sha256};

    /// The page digest's definition, over the whole contents at once.
    fn defined(content: &[u8]) -> [u8; 32] {
        let mut h = Sha256::new();
        for (i, page) in content.chunks(4096).enumerate() {
            if page.iter().any(|&b| b != 0) {
                h.update((i as u64).to_le_bytes());
                h.update(page);
            }
        }
        h.update((content.len() as u64).to_le_bytes());
        h.finalize().into()
    }

    proptest! {
        /// Fed as any mix of data pieces and holes, the streamed digest is
        /// the definition's.
        #[test]
        fn streamed_equals_defined(
            pieces in prop::collection::vec(
                (any::<bool>(), 0usize..9000, any::<u8>(), any::<bool>()),
                0..12,
            )
        ) {
            let mut content = Vec::new();
            let mut d = PageDigest::default();
            for (is_hole, len, fill, zero_data) in pieces {
                if is_hole {
                    content.resize(content.len() + len, 0);
                    d.hole(len as u64);
                } else {
                    let byte = if zero_data { 0 } else { fill | 1 };
                    let data: Vec<u8> = (0..len).map(|k| if k % 7 == 0 { byte } else { 0 }).collect();
                    content.extend_from_slice(&data);
                    d.data(&data);
                }
            }
            prop_assert_eq!(d.finish(), defined(&content));
        }
    }
}
