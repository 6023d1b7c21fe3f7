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

use rustc_hash::FxHashMap;
use sha2::{Digest, Sha256};

use crate::device::is_zero;
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
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut line = Vec::with_capacity(64 + 24 + path.len());
    for b in digest {
        line.extend_from_slice(&[DIGITS[usize::from(b >> 4)], DIGITS[usize::from(b & 15)]]);
    }
    line.extend_from_slice(format!("  {size}  ").as_bytes());
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
#[derive(Default)]
pub struct PageDigest(PageCut<Sha256>);

impl PageDigest {
    /// Bytes of data, in order.
    pub fn data(&mut self, d: &[u8]) {
        self.0.data(d);
    }

    /// `n` bytes of a hole (zeros).
    pub fn hole(&mut self, n: u64) {
        self.0.hole(n);
    }

    /// The digest of the contents fed, which must be exactly `size` bytes.
    pub fn finish(self) -> [u8; 32] {
        self.0.finish().finalize().into()
    }
}

/// Where [`PageCut`] puts the page digest's input: into the hash, or into
/// a buffer that keeps it whole (for [`DigestMemo`]).
trait Feed: Default {
    fn feed(&mut self, b: &[u8]);
}

impl Feed for Sha256 {
    fn feed(&mut self, b: &[u8]) {
        self.update(b);
    }
}

impl Feed for Vec<u8> {
    fn feed(&mut self, b: &[u8]) {
        self.extend_from_slice(b);
    }
}

/// The page digest's input, cut from the contents as they stream.
struct PageCut<F> {
    out: F,
    /// Bytes fed so far.
    pos: u64,
    /// The page being filled (`pos % 4096` bytes of it).
    page: Vec<u8>,
}

const DIGEST_PAGE: u64 = 4096;

impl<F: Feed> Default for PageCut<F> {
    fn default() -> Self {
        PageCut {
            out: F::default(),
            pos: 0,
            page: Vec::with_capacity(DIGEST_PAGE as usize),
        }
    }
}

impl<F: Feed> PageCut<F> {
    fn data(&mut self, mut d: &[u8]) {
        while !d.is_empty() {
            // A whole page at a page boundary is fed (or, all zeros,
            // skipped) where it lies, without being copied first.
            if self.page.is_empty() && d.len() >= DIGEST_PAGE as usize {
                let (whole, rest) = d.split_at(DIGEST_PAGE as usize);
                if !is_zero(whole) {
                    self.out.feed(&(self.pos / DIGEST_PAGE).to_le_bytes());
                    self.out.feed(whole);
                }
                self.pos += DIGEST_PAGE;
                d = rest;
                continue;
            }
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

    fn hole(&mut self, mut n: u64) {
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

    /// The page just filled (or the last, partial one): fed unless it is
    /// all zeros.
    fn flush(&mut self) {
        if !is_zero(&self.page) {
            let start = self.pos - self.page.len() as u64;
            self.out.feed(&(start / DIGEST_PAGE).to_le_bytes());
            self.out.feed(&self.page);
        }
        self.page.clear();
    }

    /// Everything fed, the size last.
    fn finish(mut self) -> F {
        self.flush();
        let size = self.pos.to_le_bytes();
        self.out.feed(&size);
        self.out
    }
}

/// A digest input kept whole, and its digest.
type Hashed = (Box<[u8]>, [u8; 32]);

/// Page digests remembered by the exact input they hashed, for a caller
/// that digests the same contents again and again: lockstep's abstraction
/// function reads every file of every checkpoint after each sync, and
/// most are as they were at the sync before.
///
/// A file's contents are still read every time, and cut into the page
/// digest's input (its non-zero pages with their indices, then its size).
/// Only the hashing of an input already seen is skipped, and "seen" means
/// equal byte for byte to a remembered input, so the answer is the one
/// hashing would give. The lookup hashes a sample of the input and
/// compares the whole of it. What is remembered is bounded: past
/// [`DigestMemo::HOLD`] bytes of inputs the memo starts again.
#[derive(Default)]
pub struct DigestMemo {
    by_sample: FxHashMap<(usize, u64), Vec<Hashed>>,
    held: usize,
    /// The buffer the last input was cut into, kept for the next.
    spare: Vec<u8>,
    /// Digests answered from memory and computed, for reports.
    pub hits: u64,
    pub misses: u64,
}

impl DigestMemo {
    /// Bytes of inputs held at most.
    pub const HOLD: usize = 64 << 20;

    /// An empty buffer to cut the next input into.
    fn scratch(&mut self) -> Vec<u8> {
        let mut b = std::mem::take(&mut self.spare);
        b.clear();
        b
    }

    /// The page digest of the contents whose digest input is `input` (a
    /// buffer from [`DigestMemo::scratch`], which it takes back).
    fn digest(&mut self, input: Vec<u8>) -> [u8; 32] {
        let d = self.digest_of(&input);
        self.spare = input;
        d
    }

    fn digest_of(&mut self, input: &[u8]) -> [u8; 32] {
        let key = (input.len(), sample_hash(input));
        if let Some(d) = self
            .by_sample
            .get(&key)
            .and_then(|seen| seen.iter().find(|(b, _)| **b == *input))
            .map(|(_, d)| *d)
        {
            self.hits += 1;
            return d;
        }
        self.misses += 1;
        let d: [u8; 32] = Sha256::digest(input).into();
        if self.held + input.len() > Self::HOLD {
            self.by_sample.clear();
            self.held = 0;
        }
        self.held += input.len();
        self.by_sample
            .entry(key)
            .or_default()
            .push((Box::from(input), d));
        d
    }
}

/// A hash of up to 64 eight-byte words spread evenly over `b`, and its
/// last word: cheap whatever the length, and only a hint (equal inputs
/// are confirmed by comparing them whole).
fn sample_hash(b: &[u8]) -> u64 {
    use std::hash::Hasher;
    let mut h = rustc_hash::FxHasher::default();
    let words = b.len() / 8;
    let step = (words / 64).max(1);
    for w in (0..words).step_by(step).chain(words.checked_sub(1)) {
        h.write_u64(u64::from_le_bytes(
            b[w * 8..w * 8 + 8].try_into().expect("8 bytes"),
        ));
    }
    h.write(&b[words * 8..]);
    h.finish()
}

/// The manifest of every entry of the checkpoint. A file's digest is
/// computed once per image (`Nilfs::file_digest`): the manifests of many
/// checkpoints of one image hash each unchanged file once.
pub fn manifest(view: &CheckpointView<'_, '_>) -> Result<String> {
    manifest_with(view, ContentDigest::Sha256)
}

/// [`manifest`] with regular files digested by `digest`.
pub fn manifest_with(view: &CheckpointView<'_, '_>, digest: ContentDigest) -> Result<String> {
    manifest_by(view, digest, &mut |inode| match digest {
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
    })
}

/// [`manifest`], calling `hashed(n)` after every `n` bytes of a file's
/// contents it hashes (holes included): the progress of a long one.
pub fn manifest_progress(
    view: &CheckpointView<'_, '_>,
    hashed: &mut dyn FnMut(u64),
) -> Result<String> {
    manifest_by(view, ContentDigest::Sha256, &mut |inode| {
        let mut h = Sha256::new();
        view.read_pieces(inode, &mut |piece| {
            match piece {
                Piece::Data(d) => {
                    h.update(d);
                    hashed(d.len() as u64);
                }
                Piece::Hole(n) => feed_zeros(
                    &mut |b| {
                        h.update(b);
                        hashed(b.len() as u64);
                    },
                    n,
                ),
            }
            Ok(())
        })?;
        Ok(h.finalize().into())
    })
}

/// [`manifest_with`] by page digests ([`ContentDigest::Pages`]), with
/// the digests of contents already hashed taken from `memo`. The lines
/// are those of `manifest_with(view, ContentDigest::Pages)`; each file's
/// digest input (its non-zero pages) is held in memory while it is looked
/// up.
pub fn manifest_pages_memo(view: &CheckpointView<'_, '_>, memo: &mut DigestMemo) -> Result<String> {
    manifest_by(view, ContentDigest::Pages, &mut |inode| {
        let mut cut = PageCut {
            out: memo.scratch(),
            ..PageCut::default()
        };
        view.read_pieces(inode, &mut |piece| {
            match piece {
                Piece::Data(d) => cut.data(d),
                Piece::Hole(n) => cut.hole(n),
            }
            Ok(())
        })?;
        Ok(memo.digest(cut.finish()))
    })
}

/// The manifest of the checkpoint, a regular file's digest of definition
/// `kind` made by `digest_file` (once per image for each root and size:
/// `Nilfs::file_digest`).
fn manifest_by(
    view: &CheckpointView<'_, '_>,
    kind: ContentDigest,
    digest_file: &mut dyn FnMut(&Inode) -> Result<[u8; 32]>,
) -> Result<String> {
    let mut lines: Vec<Line> = Vec::new();
    view.walk_tree(&mut |path, _ino, inode| {
        if is_hashed(inode) {
            let digest = view
                .image()
                .file_digest(inode.bmap, inode.size, kind as u8, || digest_file(inode))?;
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
    // A damaged entry naming a directory already walked (the root, say)
    // would make the walk endless: refused, as `CheckpointView::walk_tree`
    // refuses it (found by the image_mutate fuzz target, issue 35).
    let mut seen = std::collections::BTreeSet::from([ino::ROOT.0]);
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
                if !seen.insert(i.0) {
                    return Err(crate::Error::corrupt(
                        "directory",
                        format!("directory {i} is reachable twice"),
                    ));
                }
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
    use super::{DigestMemo, PageCut, PageDigest};
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

        /// Through the memo, every file's digest is the streamed one,
        /// whether its input was seen before (drawn from a small pool, so
        /// most are) or not.
        #[test]
        fn the_memo_answers_what_hashing_answers(
            pool in prop::collection::vec((1usize..20_000, any::<u8>(), 1usize..10_000), 1..6),
            picks in prop::collection::vec(any::<prop::sample::Index>(), 1..30),
        ) {
            let mut memo = DigestMemo::default();
            for pick in picks {
                let (len, fill, every) = pool[pick.index(pool.len())];
                let content: Vec<u8> =
                    (0..len).map(|k| if k % every == 0 { fill } else { 0 }).collect();
                let mut d = PageDigest::default();
                d.data(&content);
                prop_assert_eq!(memo_digest(&mut memo, &content), d.finish());
            }
        }
    }

    /// The per-file path of `manifest_pages_memo`.
    fn memo_digest(memo: &mut DigestMemo, content: &[u8]) -> [u8; 32] {
        let mut cut = PageCut::<Vec<u8>>::default();
        cut.data(content);
        memo.digest(cut.finish())
    }

    /// Two inputs of one length that differ only in a word the sample
    /// skips: the memo must not answer the second with the first's digest.
    #[test]
    fn inputs_alike_in_the_sample_are_told_apart() {
        let a = vec![7u8; 64 << 10];
        let mut b = a.clone();
        b[8 * 3 + 1] = 8; // in the fourth word; the sample takes every 128th
        let mut memo = DigestMemo::default();
        let (da, db) = (memo_digest(&mut memo, &a), memo_digest(&mut memo, &b));
        assert_ne!(da, db);
        let mut want = PageDigest::default();
        want.data(&b);
        assert_eq!(db, want.finish());
        assert_eq!((memo.hits, memo.misses), (0, 2));
        assert_eq!(memo_digest(&mut memo, &a), da);
        assert_eq!(memo.hits, 1);
    }
}
