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

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::Arc;

use crate::fs::{FileData, Kind, Namespace, PAGE};
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
    thread_local! {
        /// `file_sha256` of files met before: a manifest taken after a few
        /// changes is mostly of files the last one hashed.
        static SHA256: RefCell<FileMemo> = RefCell::new(FileMemo::new(file_sha256));
    }
    SHA256.with(|memo| manifest_by(ns, &mut |f| memo.borrow_mut().digest(f)))
}

/// A file digest remembered by the file it was computed from, for callers
/// that digest the same files again and again (every manifest of a
/// namespace that changed a little). The digest is a function of the
/// file alone, so a file equal to one remembered has the remembered
/// digest. Files are looked up by their size and the addresses of their
/// pages; the remembered file keeps those pages alive, so no other page
/// can take one of those addresses meanwhile, and a hit is still confirmed
/// by comparing the files (pages by pointer first, then by contents).
/// Bounded: past [`FileMemo::KEEP_PAGES`] pages held, it starts again.
pub struct FileMemo {
    digest: fn(&FileData) -> String,
    seen: HashMap<PagesAt, (FileData, String)>,
    pages: usize,
}

/// A file's size, and the index and address of each of its pages.
type PagesAt = (u64, Vec<(u64, usize)>);

impl FileMemo {
    /// Pages held at most (64 MiB).
    pub const KEEP_PAGES: usize = 16 << 10;

    /// A memo of `digest`, which must be a function of the file alone.
    pub fn new(digest: fn(&FileData) -> String) -> Self {
        FileMemo {
            digest,
            seen: HashMap::new(),
            pages: 0,
        }
    }

    /// `digest(f)`.
    pub fn digest(&mut self, f: &FileData) -> String {
        let key = (
            f.size,
            f.pages
                .iter()
                .map(|(i, p)| (*i, Arc::as_ptr(p) as usize))
                .collect::<Vec<_>>(),
        );
        if let Some((_, d)) = self.seen.get(&key).filter(|(seen, _)| seen == f) {
            return d.clone();
        }
        let d = (self.digest)(f);
        if self.pages + f.pages.len() > Self::KEEP_PAGES {
            self.seen.clear();
            self.pages = 0;
        }
        self.pages += f.pages.len();
        self.seen.insert(key, (f.clone(), d.clone()));
        d
    }
}

/// The manifest lines of `ns` with each regular file's digest made by
/// [`file_page_digest`] instead of SHA-256 of the contents: what the
/// lockstep harness compares (the text manifest, compared with the
/// kernel's and GRUB's, stays [`manifest`]).
pub fn page_manifest(ns: &Namespace) -> Vec<String> {
    manifest_by(ns, &mut file_page_digest)
}

/// The manifest lines of `ns` with each regular file's digest made by
/// `digest`, which must be one of the two above (a caller that remembers
/// digests it computed passes its own way to them).
pub fn manifest_by(
    ns: &Namespace,
    digest: &mut dyn FnMut(&crate::fs::FileData) -> String,
) -> Vec<String> {
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

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A change to a file, as the model makes them: a page replaced (a new
    /// `Arc`), a page added or dropped, the size moved.
    #[derive(Clone, Debug)]
    enum Change {
        Page { idx: u64, byte: u8 },
        Drop { idx: u64 },
        Size(u64),
    }

    fn change() -> impl Strategy<Value = Change> {
        prop_oneof![
            (0u64..4, any::<u8>()).prop_map(|(idx, byte)| Change::Page { idx, byte }),
            (0u64..4).prop_map(|idx| Change::Drop { idx }),
            (0u64..5 * PAGE).prop_map(Change::Size),
        ]
    }

    /// The page manifest is the text manifest with each regular file's
    /// digest made by pages: the same lines, in the same order, but for
    /// that field.
    /// A listing made elsewhere comes out in `LC_ALL=C sort -k3`'s order
    /// (this expectation is that command's output on the same lines): by
    /// the path field on, a space before a slash. Postmortem (model
    /// shard 7/16: `sort_lines` as `vec![]` survived; only the command
    /// line's runner calls it).
    #[test]
    fn a_listing_sorts_as_sort_k3_does() {
        let lines = [
            "e3b0  12  /b",
            "DIR  -  /a/",
            "LNK  -  /c -> /a",
            "DIR  -  //",
            "CHR  1:3  /a/dev",
            "FIFO  -  /a b",
            "ab  7  /a/b",
        ];
        let sorted = sort_lines(lines.iter().map(|l| l.to_string()).collect());
        assert_eq!(
            sorted,
            [
                "DIR  -  //",
                "FIFO  -  /a b",
                "DIR  -  /a/",
                "ab  7  /a/b",
                "CHR  1:3  /a/dev",
                "e3b0  12  /b",
                "LNK  -  /c -> /a",
            ]
        );
    }

    #[test]
    fn the_page_manifest_differs_from_the_text_one_only_in_file_digests() {
        let t = crate::time::Stamp::exact(1);
        let ns = Namespace::mkfs(false, 0)
            .create("/f", 0o644, true, t)
            .and_then(|ns| ns.mkdir("/d", 0o755, t))
            .and_then(|ns| ns.write("/f", 0, &crate::Pattern::Text("abc".into()), t))
            .map(|(ns, _)| ns)
            .expect("a fresh namespace takes them");
        let (text, pages) = (manifest(&ns), page_manifest(&ns));
        assert_eq!(text.len(), 2, "{text:?}");
        assert_eq!(pages.len(), text.len());
        let tail = |l: &str| l.split_once(' ').map(|(_, t)| t.to_string());
        for (a, b) in text.iter().zip(&pages) {
            assert_eq!(tail(a), tail(b));
        }
        assert_ne!(text, pages, "the file's digest is another");
    }

    /// The memo holds at most `KEEP_PAGES` pages: past them it starts
    /// afresh, so a long run's memory stays bounded. Postmortem (model
    /// shard 4/16, re-run: the page count's `+=` as `*=` kept it at 0, and
    /// every file ever digested stayed in the memo).
    #[test]
    fn the_memo_keeps_a_bounded_number_of_pages() {
        let page = Arc::new(vec![7u8; PAGE as usize]);
        let mut memo = FileMemo::new(|f| f.size.to_string());
        let files = 2 * FileMemo::KEEP_PAGES / 1024 + 1;
        for k in 0..files as u64 {
            let mut f = FileData {
                size: (1024 + k) * PAGE,
                ..FileData::default()
            };
            for i in 0..1024 {
                f.pages.insert(i, page.clone());
            }
            assert_eq!(memo.digest(&f), f.size.to_string());
            assert!(memo.pages <= FileMemo::KEEP_PAGES, "{} pages", memo.pages);
        }
        assert!(memo.seen.len() <= FileMemo::KEEP_PAGES / 1024);
        assert!(!memo.seen.is_empty());
    }

    proptest! {
        /// Through the memo, each version of a file changing step by step
        /// (every version kept, and each asked for again later) has the
        /// digest computed afresh.
        #[test]
        fn the_memo_answers_what_the_digest_answers(
            changes in prop::collection::vec(change(), 1..40),
            again in prop::collection::vec(any::<prop::sample::Index>(), 0..20),
        ) {
            let mut memo = FileMemo::new(file_sha256);
            let mut pages_memo = FileMemo::new(file_page_digest);
            let mut f = FileData { size: 3 * PAGE, ..FileData::default() };
            let mut versions = Vec::new();
            for c in changes {
                match c {
                    Change::Page { idx, byte } => {
                        f.pages.insert(idx, Arc::new(vec![byte; PAGE as usize]));
                        f.size = f.size.max((idx + 1) * PAGE);
                    }
                    Change::Drop { idx } => {
                        f.pages.remove(&idx);
                    }
                    Change::Size(size) => {
                        f.size = size;
                        // The invariant: nothing stored at or past the size.
                        let keep = size.div_ceil(PAGE);
                        let past: Vec<u64> = f.pages.keys().copied().filter(|i| *i >= keep).collect();
                        for i in past {
                            f.pages.remove(&i);
                        }
                        if let Some(p) = f.pages.get_mut(&(size / PAGE)) {
                            let mut cut = (**p).clone();
                            cut[(size % PAGE) as usize..].fill(0);
                            *p = Arc::new(cut);
                        }
                    }
                }
                prop_assert_eq!(memo.digest(&f), file_sha256(&f));
                prop_assert_eq!(pages_memo.digest(&f), file_page_digest(&f));
                versions.push(f.clone());
            }
            for i in again {
                let v = &versions[i.index(versions.len())];
                prop_assert_eq!(memo.digest(v), file_sha256(v));
            }
        }
    }
}
