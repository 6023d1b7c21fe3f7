//! The manifest of a namespace, byte for byte as
//! tests/guest/manifest.sh prints it:
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
//! sorted as `LC_ALL=C sort -k3` sorts: by the bytes from the third
//! blank-separated field to the end of the line, then by the whole line.

use crate::fs::{Kind, Namespace, PAGE};
use crate::pattern::hex;
use sha2::{Digest, Sha256};

/// sha256 of a file's whole contents, streamed page by page (holes hashed
/// as zeros without being stored).
pub fn file_sha256(f: &crate::fs::FileData) -> String {
    let mut h = Sha256::new();
    let zeros = vec![0u8; PAGE as usize];
    let mut pos = 0;
    while pos < f.size {
        let idx = pos / PAGE;
        let take = (f.size - pos).min(PAGE) as usize;
        match f.pages.get(&idx) {
            Some(p) => h.update(&p[..take]),
            None => h.update(&zeros[..take]),
        }
        pos += take as u64;
    }
    hex(&h.finalize())
}

/// The page digest of a file's contents (the abstraction function's
/// digest; the harness compares it with the implementation's, which
/// computes the same definition from what it reads): cut the contents
/// (`size` bytes, holes as zeros) into 4096-byte pages from offset 0;
/// SHA-256 over, for each page holding a non-zero byte, in order, its
/// index (u64, little-endian) and its bytes (the last page cut at `size`);
/// then `size` (u64, little-endian). Contents that differ differ in some
/// non-zero page or in the size, so the digests differ as SHA-256's do;
/// pages of zeros, written or not, cost nothing to hash.
pub fn file_page_digest(f: &crate::fs::FileData) -> String {
    let mut h = Sha256::new();
    for (&idx, page) in f.pages.iter() {
        let start = idx * PAGE;
        if start >= f.size {
            break;
        }
        let take = (f.size - start).min(PAGE) as usize;
        let bytes = &page[..take.min(page.len())];
        if bytes.iter().any(|&b| b != 0) {
            h.update(idx.to_le_bytes());
            h.update(bytes);
            // A page stored shorter than the file needs reads as zeros.
            h.update(vec![0u8; take - bytes.len()]);
        }
    }
    h.update(f.size.to_le_bytes());
    hex(&h.finalize())
}

/// The manifest lines of `ns`.
pub fn manifest(ns: &Namespace) -> Vec<String> {
    manifest_by(ns, file_sha256)
}

/// The manifest lines of `ns` with each regular file's digest made by
/// [`file_page_digest`] instead of SHA-256 of the contents: what the
/// lockstep harness compares (the text manifest, compared with the
/// kernel's and GRUB's, stays [`manifest`]).
pub fn page_manifest(ns: &Namespace) -> Vec<String> {
    manifest_by(ns, file_page_digest)
}

fn manifest_by(ns: &Namespace, digest: fn(&crate::fs::FileData) -> String) -> Vec<String> {
    let mut lines: Vec<(String, String)> = ns
        .walk_all()
        .into_iter()
        .map(|(path, id)| {
            let line = match &ns.get(id).kind {
                Kind::File(f) => format!("{}  {}  {}", digest(f), f.size, path),
                Kind::Dir { .. } => format!("DIR  -  {path}/"),
                Kind::Symlink(t) => format!("LNK  -  {path} -> {t}"),
                Kind::Special { file_type, rdev } => special_line(*file_type, *rdev, &path),
            };
            (sort_key(&line), line)
        })
        .collect();
    lines.sort();
    lines.into_iter().map(|(_, l)| l).collect()
}

/// The line of a FIFO, socket or device.
pub fn special_line(t: crate::fs::FileType, rdev: [u32; 2], path: &str) -> String {
    use crate::fs::FileType as T;
    let [major, minor] = rdev;
    match t {
        T::Fifo => format!("FIFO  -  {path}"),
        T::Socket => format!("SOCK  -  {path}"),
        T::CharDevice => format!("CHR  {major}:{minor}  {path}"),
        T::BlockDevice => format!("BLK  {major}:{minor}  {path}"),
        T::File | T::Dir | T::Symlink => unreachable!("not a special file"),
    }
}

/// Lines in manifest.sh's order (`LC_ALL=C sort -k3`), for a listing made
/// elsewhere (a runner walking a mounted tree).
pub fn sort_lines(lines: Vec<String>) -> Vec<String> {
    let mut keyed: Vec<(String, String)> = lines.into_iter().map(|l| (sort_key(&l), l)).collect();
    keyed.sort();
    keyed.into_iter().map(|(_, l)| l).collect()
}

/// `sort -k3` key: the line from the start of the third field, the blanks
/// before it included (no `-b`).
fn sort_key(line: &str) -> String {
    let b = line.as_bytes();
    let mut i = 0;
    for _ in 0..2 {
        while i < b.len() && b[i] == b' ' {
            i += 1;
        }
        while i < b.len() && b[i] != b' ' {
            i += 1;
        }
    }
    line[i..].to_string()
}
