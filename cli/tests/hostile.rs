//! Hostile images through the command line (issue 13): damage made by the
//! project's corruption generator (`nilfs_conformance::corrupt`) on images
//! our write path builds, then the read commands run on them as a user
//! would. Each test says what it caught in its `// postmortem:` comment.

use std::path::Path;
use std::process::Command;

use nilfs::device::{export_image, BlockDevice, MemDevice};
use nilfs::format::ino::ROOT;
use nilfs::fs::Fs;
use nilfs::mkfs::{mkfs, MkfsOptions};
use nilfs::the_nilfs::Nilfs;
use nilfs_conformance::corrupt;

mod common;
use common::nilref;

fn scratch(name: &str) -> common::Scratch {
    common::scratch("hostile", name)
}

/// A fresh 8 MiB image (1 KiB blocks) with what `build` makes in it,
/// unmounted.
fn image(build: impl FnOnce(&mut Fs<'_>)) -> MemDevice {
    let dev = MemDevice::new(8 << 20);
    mkfs(
        &dev,
        &MkfsOptions {
            block_size: 1024,
            blocks_per_segment: 128,
            ..Default::default()
        },
    )
    .unwrap();
    {
        let nilfs = Nilfs::open(&dev).unwrap();
        let mut fs = Fs::mount(&nilfs, 1_800_000_000).unwrap();
        build(&mut fs);
        fs.unmount().unwrap();
    }
    dev
}

fn save(dev: &MemDevice, d: &Path) -> String {
    let img = d.join("img");
    export_image(dev, &img).unwrap();
    img.to_str().unwrap().to_string()
}

/// Every path below `d`, sorted (symlinks not followed).
fn tree(d: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut todo = vec![d.to_path_buf()];
    while let Some(p) = todo.pop() {
        for e in std::fs::read_dir(&p).unwrap() {
            let e = e.unwrap();
            out.push(e.path().strip_prefix(d).unwrap().display().to_string());
            if e.file_type().unwrap().is_dir() {
                todo.push(e.path());
            }
        }
    }
    out.sort();
    out
}

/// A root entry renamed in place to `bad` (same length), then export and
/// manifest: both must refuse with a corruption naming directory 2 and a
/// block, and nothing may appear outside the destination.
fn refused_everywhere(case: &str, made: &str, bad: &[u8]) {
    let d = scratch(case);
    let outside = d.join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    let target = outside.to_str().unwrap().as_bytes().to_vec();
    let dev = image(|fs| {
        fs.symlink(ROOT, b"lnk", &target).unwrap();
        let f = fs.create(ROOT, made.as_bytes(), 0o644).unwrap();
        fs.write(f, 0, b"payload\n").unwrap();
    });
    corrupt::rename_entry(&dev, &format!("/{made}"), bad).unwrap();
    let img = save(&dev, &d);
    let dest = d.join("a").join("b").join("dest");
    let (ok, out, err) = nilref(&["export", &img, dest.to_str().unwrap()]);
    assert!(!ok, "{case}: export accepted the name: {out}");
    assert!(
        err.contains("corrupt directory entry at block") && err.contains("directory 2"),
        "{case}: {err}"
    );
    assert_eq!(
        tree(&d),
        ["a", "a/b", "a/b/dest", "img", "outside"],
        "{case}: export wrote outside its destination"
    );
    let (ok, out, err) = nilref(&["manifest", &img]);
    assert!(!ok, "{case}: manifest printed a bogus path: {out}");
    assert!(err.contains("corrupt directory entry"), "{case}: {err}");
}

// postmortem: export joined entry names onto the destination unchecked, so
// an entry named `../../escape` wrote two levels above it (issue 13.1).
#[test]
fn export_refuses_a_dotdot_slash_name() {
    refused_everywhere("dotdot", "AAAAAAescape", b"../../escape");
}

// postmortem: an entry `lnk/x` after a symlink `lnk` wrote through the
// symlink to wherever it pointed (issue 13.1).
#[test]
fn export_refuses_a_name_through_a_symlink() {
    refused_everywhere("through", "lnkAx", b"lnk/x");
}

// postmortem: a NUL in a name reached the host's path calls, and manifest
// printed it (issue 13.1); no system call can name such an entry.
#[test]
fn export_refuses_a_name_with_nul() {
    refused_everywhere("nul", "qNq", b"q\0q");
}

// postmortem: a `..` record after the first two was skipped silently by the
// tree walk (a partial export reported as success), and would make any
// walker that trusts names leave the tree (issue 13.1).
#[test]
fn export_refuses_a_late_dotdot() {
    refused_everywhere("late-dotdot", "qq", b"..");
    refused_everywhere("late-dot", "q", b".");
}

// postmortem: an empty name (name_len 0) printed as its parent directory in
// the manifest (issue 13.1); the VFS's verify_dirent_name fails it with EIO.
#[test]
fn export_refuses_an_empty_name() {
    let d = scratch("empty");
    let dev = image(|fs| {
        let f = fs.create(ROOT, b"e", 0o644).unwrap();
        fs.write(f, 0, b"x").unwrap();
    });
    corrupt::apply(
        &dev,
        &corrupt::Recipe::parse("dirent[/e].name_len = 0").unwrap(),
    )
    .unwrap();
    let img = save(&dev, &d);
    let (ok, out, err) = nilref(&["manifest", &img]);
    assert!(!ok, "{out}");
    assert!(
        err.contains("is empty") && err.contains("directory 2"),
        "{err}"
    );
    let dest = d.join("dest");
    let (ok, _, err) = nilref(&["export", &img, dest.to_str().unwrap()]);
    assert!(!ok && err.contains("is empty"), "{err}");
}

// postmortem: two entries with the same name, a symlink `a` to a host
// directory and then a directory `a`: export's create_dir_all followed the
// symlink it had just made and wrote `a/x` outside the destination. No name
// is bad here; only no-follow creation relative to the parent's handle
// stops it (issue 13.1).
#[test]
fn export_never_follows_a_symlink_it_made() {
    let d = scratch("dup");
    let outside = d.join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    let target = outside.to_str().unwrap().as_bytes().to_vec();
    let dev = image(|fs| {
        fs.symlink(ROOT, b"a", &target).unwrap();
        let b = fs.mkdir(ROOT, b"b", 0o755).unwrap();
        let x = fs.create(b, b"x", 0o644).unwrap();
        fs.write(x, 0, b"escaped\n").unwrap();
    });
    corrupt::rename_entry(&dev, "/b", b"a").unwrap();
    let img = save(&dev, &d);
    let dest = d.join("dest");
    let (ok, out, err) = nilref(&["export", &img, dest.to_str().unwrap()]);
    assert!(!ok, "{out}");
    assert!(err.contains("dest/a"), "{err}");
    assert!(
        std::fs::read_dir(&outside).unwrap().next().is_none(),
        "export wrote through the symlink"
    );
}

// The good case still works: a valid tree exports in full, symlinks as
// symlinks, and again into the same destination.
#[test]
fn export_of_a_valid_tree_twice() {
    let d = scratch("valid");
    let dev = image(|fs| {
        let sub = fs.mkdir(ROOT, b"sub", 0o755).unwrap();
        let f = fs.create(sub, b"f", 0o640).unwrap();
        fs.write(f, 0, b"hello\n").unwrap();
        fs.symlink(ROOT, b"l", b"sub/f").unwrap();
    });
    let img = save(&dev, &d);
    let dest = d.join("dest");
    let (ok, out, err) = nilref(&["export", &img, dest.to_str().unwrap()]);
    assert!(ok, "{err}");
    assert!(out.contains(" entries exported"), "{out}");
    assert_eq!(std::fs::read(dest.join("l")).unwrap(), b"hello\n");
    assert!(dest.join("l").is_symlink());
    std::fs::remove_file(dest.join("l")).unwrap();
    let (ok, _, err) = nilref(&["export", &img, dest.to_str().unwrap()]);
    assert!(ok, "{err}");
}

// postmortem: with s_first_data_block >= s_blocks_per_segment in both super
// block copies (accepted by every reader, as by the kernel), `nilref clean`
// panicked slicing segment 0's summary past the segment's end in
// cleaner::read_segment (issue 13.5). Now a typed corruption, exit 1, and
// the image still reads.
#[test]
fn clean_refuses_a_first_data_block_past_segment_zero() {
    let d = scratch("fdb");
    let dev = image(|fs| {
        let f = fs.create(ROOT, b"f", 0o644).unwrap();
        fs.write(f, 0, &vec![0x5A; 300 << 10]).unwrap();
        fs.sync().unwrap();
        fs.unlink(ROOT, b"f").unwrap();
    });
    {
        // A later log, so the first segments are older than nongc_ctime
        // and the timestamp policy selects them.
        let nilfs = Nilfs::open(&dev).unwrap();
        let mut fs = Fs::mount(&nilfs, 1_800_000_050).unwrap();
        let g = fs.create(ROOT, b"g", 0o644).unwrap();
        fs.write(g, 0, b"later\n").unwrap();
        fs.unmount().unwrap();
    }
    for copy in ["sb0", "sb1"] {
        let r = format!("{copy}.s_first_data_block = 200");
        corrupt::apply(&dev, &corrupt::Recipe::parse(&r).unwrap()).unwrap();
    }
    let img = save(&dev, &d);
    let (ok, _, err) = nilref(&["ls", &img, "/"]);
    assert!(ok, "readers accept this super block: {err}");
    let (ok, out, err) = nilref(&["clean", &img, "--time", "1800000100"]);
    assert!(!ok, "{out}");
    assert!(!err.contains("panicked"), "{err}");
    assert!(
        err.contains("corrupt super block") && err.contains("s_first_data_block 200"),
        "{err}"
    );
    // The mount's own super block update is all that was written.
    let (ok, out, err) = nilref(&["cat", &img, "/g"]);
    assert!(ok && out == "later\n", "{err}");
}

/// Run `sh -c script` (the image path is `$1`) under a 2 GiB address-space
/// limit, with a 60 s timeout.
fn bounded(script: &str, img: &str) -> (i32, String, String) {
    let out = Command::new("timeout")
        .args(["60", "sh", "-c"])
        .arg(format!("ulimit -v 2097152; {script}"))
        .args(["sh", img])
        .env("NILREF", env!("CARGO_BIN_EXE_nilref"))
        .output()
        .expect("run sh");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

// postmortem: read_pieces is what keeps cat/export/manifest bounded; a
// valid sparse file of 2^44 + 1 bytes is one hole and one byte, not a
// buffer of 16 TiB (issue 13.4).
#[test]
fn read_pieces_of_a_huge_sparse_file_is_two_pieces() {
    let dev = image(|fs| {
        let f = fs.create(ROOT, b"sparse", 0o644).unwrap();
        fs.write(f, 1 << 44, b"Z").unwrap();
    });
    let nilfs = Nilfs::open(&dev).unwrap();
    let view = nilfs::posix::CheckpointView::open(&nilfs, None).unwrap();
    let (_, inode) = view.resolve(b"/sparse", true).unwrap();
    let mut pieces = Vec::new();
    view.read_pieces(&inode, &mut |p| {
        pieces.push(match p {
            nilfs::posix::Piece::Data(d) => format!("data {:?}", d),
            nilfs::posix::Piece::Hole(n) => format!("hole {n}"),
        });
        Ok(())
    })
    .unwrap();
    assert_eq!(pieces, [format!("hole {}", 1u64 << 44), "data [90]".into()]);
}

// postmortem: cat read the whole file into memory, so a valid sparse file
// of 2^33 bytes aborted the process on a failed 8 GiB allocation (issue
// 13.4). Under a 2 GiB limit it now streams; `head` takes the first MiB.
#[test]
fn cat_of_a_big_sparse_file_streams() {
    let d = scratch("cat-big");
    let dev = image(|fs| {
        let f = fs.create(ROOT, b"big", 0o644).unwrap();
        fs.write(f, 1 << 33, b"Z").unwrap();
    });
    let img = save(&dev, &d);
    let (_, out, err) = bounded(
        "\"$NILREF\" cat \"$1\" /big | head -c 1048576 | wc -c",
        &img,
    );
    assert_eq!(out.trim(), "1048576", "{err}");
    assert!(!err.contains("memory allocation"), "{err}");
}

// postmortem: export wrote each file from one buffer of i_size bytes (an
// abort for 2^40 + 1); it now streams and leaves holes as holes (issue
// 13.4).
#[test]
fn export_of_a_big_sparse_file_is_sparse() {
    let d = scratch("export-big");
    let dev = image(|fs| {
        let f = fs.create(ROOT, b"big", 0o644).unwrap();
        fs.write(f, 1 << 40, b"Z").unwrap();
    });
    let img = save(&dev, &d);
    let dest = d.join("dest");
    let (code, _, err) = bounded(
        &format!("\"$NILREF\" export \"$1\" {}", dest.display()),
        &img,
    );
    assert_eq!(code, 0, "{err}");
    use std::io::{Read, Seek, SeekFrom};
    let mut f = std::fs::File::open(dest.join("big")).unwrap();
    assert_eq!(f.metadata().unwrap().len(), (1 << 40) + 1);
    f.seek(SeekFrom::Start(1 << 40)).unwrap();
    let mut last = Vec::new();
    f.read_to_end(&mut last).unwrap();
    assert_eq!(last, b"Z");
}

// postmortem: a symlink whose i_size says 2^40 made manifest allocate it
// all; the kernel reads one page of a link (page_get_link), so do we
// (issue 13.4).
#[test]
fn manifest_reads_one_page_of_a_huge_symlink() {
    let d = scratch("link-big");
    let dev = image(|fs| {
        fs.symlink(ROOT, b"l", b"target").unwrap();
    });
    corrupt::apply(
        &dev,
        &corrupt::Recipe::parse("inode[/l].i_size = 0x10000000000").unwrap(),
    )
    .unwrap();
    let img = save(&dev, &d);
    let (code, out, err) = bounded("\"$NILREF\" manifest \"$1\"", &img);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("LNK  -  /l -> target"), "{out}");
}

/// An image holding one file `name` with `data`, damaged by `recipe` and
/// saved in `d`.
fn one_file_damaged(d: &Path, name: &[u8], data: &[u8], recipe: &str) -> String {
    let dev = image(|fs| {
        let f = fs.create(ROOT, name, 0o644).unwrap();
        fs.write(f, 0, data).unwrap();
    });
    corrupt::apply(&dev, &corrupt::Recipe::parse(recipe).unwrap()).unwrap();
    save(&dev, d)
}

// postmortem: a regular file whose i_size says 2^40 (a valid, sparse
// 1 TiB file) made manifest hash a terabyte of zeros for minutes, as
// manifest.sh's format asks, with nothing on the screen (issue 34.4). The
// sizes are summed first: past --max-bytes (64 GiB by default) manifest
// refuses at once, naming the file and the option; under it, it hashes.
#[test]
fn manifest_of_a_terabyte_sparse_file_stops_at_its_limit() {
    let d = scratch("file-big");
    let img = one_file_damaged(&d, b"big", b"head", "inode[/big].i_size = 0x10000000000");
    let (code, out, err) = bounded("\"$NILREF\" manifest \"$1\"", &img);
    assert_eq!(code, 1, "{out}{err}");
    assert!(
        err.contains("1099511627776 bytes") && err.contains("/big") && err.contains("--max-bytes"),
        "{err}"
    );
    // The same limit lets a small image through, and a lower one stops it.
    let d_small = scratch("file-small");
    let small = save(
        &image(|fs| {
            let f = fs.create(ROOT, b"f", 0o644).unwrap();
            fs.write(f, 0, &[7u8; 5000]).unwrap();
        }),
        &d_small,
    );
    let (code, out, err) = bounded("\"$NILREF\" manifest \"$1\"", &small);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("  5000  /f"), "{out}");
    let (code, _, err) = bounded("\"$NILREF\" manifest --max-bytes 4K \"$1\"", &small);
    assert_eq!(code, 1, "{err}");
}

// postmortem: under its limit, a long manifest hashed on with nothing on
// the screen (issue 34.3). Past 256 MiB it draws a progress bar (on a
// terminal) while it hashes; the lines are those of the library's
// manifest, byte for byte.
#[test]
fn manifest_with_progress_prints_the_same_lines() {
    let d = scratch("file-300m");
    let img = one_file_damaged(&d, b"big", b"head", "inode[/big].i_size = 0x12c00000");
    let (code, out, err) = bounded("\"$NILREF\" manifest \"$1\"", &img);
    assert_eq!(code, 0, "{err}");
    let dev = nilfs::device::import_image(Path::new(&img)).unwrap();
    let nilfs = Nilfs::open(&dev).unwrap();
    let view = nilfs::posix::CheckpointView::open(&nilfs, None).unwrap();
    let want = nilfs::inspect::manifest::manifest(&view).unwrap();
    assert_eq!(out, want);
    assert!(out.contains("314572800  /big"), "{out}");
}

// postmortem: readdir looped over 0..i_size/block_size, so a root with
// i_size 2^63 made manifest spin 2^53 times (issue 13.4); it now visits the
// directory's mapped blocks only. (A size past i64::MAX is now refused at
// iget, so the test uses 2^62, which is a size a file may have.)
#[test]
fn manifest_of_a_root_with_a_huge_size_ends() {
    let d = scratch("dir-big");
    let img = one_file_damaged(&d, b"f", b"f\n", "inode[/].i_size = 0x4000000000000000");
    let (code, out, err) = bounded("\"$NILREF\" manifest \"$1\"", &img);
    assert_ne!(code, 124, "manifest did not end within 60 s");
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("  /f\n"), "{out}");
}

// postmortem: lscp visited every checkpoint number below ns_cno, holes
// included, so an s_last_cno of 2^40 in both copies ran for a time linear
// in it (issue 13.4); holes are now skipped to the next mapped cpfile
// block, as nilfs_cpfile_find_checkpoint_block does.
#[test]
fn lscp_with_a_huge_last_cno_ends() {
    let d = scratch("lscp");
    let dev = image(|fs| {
        fs.mkcp(true).unwrap();
    });
    for copy in ["sb0", "sb1"] {
        let r = format!("{copy}.s_last_cno = 0x10000000000");
        corrupt::apply(&dev, &corrupt::Recipe::parse(&r).unwrap()).unwrap();
    }
    let img = save(&dev, &d);
    let (code, out, err) = bounded("\"$NILREF\" lscp \"$1\"", &img);
    assert_ne!(code, 124, "lscp did not end within 60 s");
    assert_eq!(code, 0, "{err}");
    assert!(out.lines().count() >= 2, "{out}");
}

fn xz(raw: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    lzma_rs::xz_compress(&mut std::io::Cursor::new(raw), &mut out).unwrap();
    out
}

// postmortem: an .xz image was inflated whole into memory, so a small xz
// of gigabytes aborted `inspect` (issue 13.4). It now streams into a sparse
// device and stops, with a typed error, past the size the image declares
// (the primary super block's s_dev_size); without a super block there is
// no declared size and the image is refused at the first 4 KiB.
#[test]
fn xz_import_stops_at_the_declared_size() {
    let d = scratch("xz");
    let dev = MemDevice::new(1 << 20);
    mkfs(
        &dev,
        &MkfsOptions {
            block_size: 1024,
            blocks_per_segment: 16,
            ..Default::default()
        },
    )
    .unwrap();
    let mut raw = vec![0u8; 1 << 20];
    dev.read_at(0, &mut raw).unwrap();
    let fits = d.join("fits.img.xz");
    std::fs::write(&fits, xz(&raw)).unwrap();
    let (ok, _, err) = nilref(&["inspect", fits.to_str().unwrap()]);
    assert!(ok, "{err}");
    raw.resize(2 << 20, 0);
    let padded = d.join("padded.img.xz");
    std::fs::write(&padded, xz(&raw)).unwrap();
    let (ok, out, err) = nilref(&["inspect", padded.to_str().unwrap()]);
    assert!(!ok, "{out}");
    assert!(
        err.contains("inflates beyond its declared size of 1048576 bytes"),
        "{err}"
    );
    let zeros = d.join("zeros.img.xz");
    std::fs::write(&zeros, xz(&vec![0u8; 1 << 20])).unwrap();
    let (ok, _, err) = nilref(&["inspect", zeros.to_str().unwrap()]);
    assert!(!ok && err.contains("no NILFS2 super block magic"), "{err}");
}

fn apply_trace(d: &Path, img: &str, trace: &str) -> (bool, String, String) {
    let t = d.join("trace.jsonl");
    std::fs::write(&t, trace).unwrap();
    let o = d.join("observed.jsonl");
    nilref(&["apply", img, t.to_str().unwrap(), "-o", o.to_str().unwrap()])
}

// postmortem: apply wrote an image whose super block has an unknown
// feature_compat_ro bit, which mkcp/chcp/rmcp/clean refuse with EROFS
// (issue 13.6).
#[test]
fn apply_refuses_an_unknown_compat_ro_feature() {
    let d = scratch("apply-ro");
    let dev = image(|_| {});
    for copy in ["sb0", "sb1"] {
        let r = format!("{copy}.s_feature_compat_ro |= 0x100");
        corrupt::apply(&dev, &corrupt::Recipe::parse(&r).unwrap()).unwrap();
    }
    let img = save(&dev, &d);
    let before = std::fs::read(&img).unwrap();
    let (ok, out, err) = apply_trace(
        &d,
        &img,
        "{\"op\":\"mount\"}\n{\"op\":\"create\",\"path\":\"/a\"}\n{\"op\":\"umount\"}\n",
    );
    assert!(!ok, "{out}");
    assert!(
        err.contains("EROFS") && err.contains("nothing was written"),
        "{err}"
    );
    assert!(
        std::fs::read(&img).unwrap() == before,
        "apply wrote the image"
    );
}

// postmortem: apply created a name containing a NUL byte, which no system
// call can pass (issue 13.6).
#[test]
fn apply_refuses_a_path_with_nul() {
    let d = scratch("apply-nul");
    let img = save(&image(|_| {}), &d);
    let before = std::fs::read(&img).unwrap();
    let (ok, out, err) = apply_trace(
        &d,
        &img,
        "{\"op\":\"mount\"}\n{\"op\":\"create\",\"path\":\"/a\\u0000b\"}\n{\"op\":\"umount\"}\n",
    );
    assert!(!ok, "{out}");
    assert!(err.contains("line 2: a path contains a NUL byte"), "{err}");
    assert!(std::fs::read(&img).unwrap() == before);
}

// postmortem: apply reported success for a write at offset 2^63 - 1 (the
// VFS's generic_write_check_limits gives EFBIG there) and at 2^63 (a
// negative loff_t: EINVAL in ksys_pwrite64); the oracle accepts both now
// (issue 13.6).
#[test]
fn apply_gives_the_kernels_errors_for_huge_offsets() {
    let d = scratch("apply-big");
    let img = save(&image(|_| {}), &d);
    let trace = format!(
        "{{\"op\":\"mount\"}}\n{{\"op\":\"create\",\"path\":\"/a\"}}\n\
         {{\"op\":\"write\",\"path\":\"/a\",\"offset\":{},\"data\":{{\"text\":\"x\"}}}}\n\
         {{\"op\":\"write\",\"path\":\"/a\",\"offset\":{},\"data\":{{\"text\":\"x\"}}}}\n\
         {{\"op\":\"truncate\",\"path\":\"/a\",\"size\":{}}}\n{{\"op\":\"umount\"}}\n",
        i64::MAX,
        1u64 << 63,
        1u64 << 63
    );
    let (ok, _, err) = apply_trace(&d, &img, &trace);
    assert!(ok, "{err}");
    let observed = std::fs::read_to_string(d.join("observed.jsonl")).unwrap();
    let outs: Vec<&str> = observed
        .lines()
        .filter(|l| l.contains("\"write\"") || l.contains("\"truncate\""))
        .collect();
    assert!(outs[0].contains("EFBIG"), "{observed}");
    assert!(
        outs[1].contains("EINVAL") && outs[2].contains("EINVAL"),
        "{observed}"
    );
    let (ok, out, err) = nilref(&[
        "oracle",
        "check",
        d.join("observed.jsonl").to_str().unwrap(),
    ]);
    assert!(ok, "{out}{err}");
}

/// A 1 MiB image (1 KiB blocks, 16-block segments) that a 2 MB write
/// fills, saved in `d`, with its bytes as saved.
fn one_mib_image(d: &Path) -> (String, Vec<u8>) {
    let dev = MemDevice::new(1 << 20);
    mkfs(
        &dev,
        &MkfsOptions {
            block_size: 1024,
            blocks_per_segment: 16,
            ..Default::default()
        },
    )
    .unwrap();
    let img = save(&dev, d);
    let before = std::fs::read(&img).unwrap();
    (img, before)
}

// postmortem: apply exited 0 and wrote the image back after a sync that
// failed (issue 13.6); now the observed trace is kept for the oracle and
// the image is left as it was.
#[test]
fn apply_does_not_write_back_after_a_failed_sync() {
    let d = scratch("apply-enospc");
    let (img, before) = one_mib_image(&d);
    let (ok, out, err) = apply_trace(
        &d,
        &img,
        "{\"op\":\"mount\"}\n{\"op\":\"create\",\"path\":\"/a\"}\n\
         {\"op\":\"write\",\"path\":\"/a\",\"offset\":0,\"data\":{\"seeded\":{\"seed\":1,\"len\":2000000}}}\n\
         {\"op\":\"sync\"}\n",
    );
    let observed = std::fs::read_to_string(d.join("observed.jsonl")).unwrap_or_default();
    assert!(
        observed.contains("ENOSPC"),
        "the workload did not fill the image: {observed}"
    );
    assert!(!ok, "{out}");
    assert!(err.contains("the image was not written"), "{err}");
    assert!(
        std::fs::read(&img).unwrap() == before,
        "apply wrote the image"
    );
}

// postmortem: apply refused to write the image back whenever any sync of
// the workload had failed, so a workload that ran into ENOSPC, freed the
// space and then synced and unmounted cleanly lost its final state with
// exit 1 (issue 34.4). The last durability point decides; the earlier
// failure stays an outcome in the observed trace.
#[test]
fn apply_writes_back_when_the_last_sync_succeeds_after_an_enospc() {
    let d = scratch("apply-enospc-recovered");
    let (img, before) = one_mib_image(&d);
    let (ok, out, err) = apply_trace(
        &d,
        &img,
        "{\"op\":\"mount\"}\n{\"op\":\"create\",\"path\":\"/a\"}\n\
         {\"op\":\"write\",\"path\":\"/a\",\"offset\":0,\"data\":{\"seeded\":{\"seed\":1,\"len\":2000000}}}\n\
         {\"op\":\"sync\"}\n{\"op\":\"unlink\",\"path\":\"/a\"}\n\
         {\"op\":\"create\",\"path\":\"/kept\"}\n{\"op\":\"sync\"}\n{\"op\":\"umount\"}\n",
    );
    let observed = std::fs::read_to_string(d.join("observed.jsonl")).unwrap_or_default();
    let syncs: Vec<&str> = observed
        .lines()
        .filter(|l| l.contains("\"sync\""))
        .collect();
    assert!(
        syncs.len() == 2 && !syncs[0].contains("\"ok\"") && syncs[1].contains("\"ok\""),
        "the workload must fail its first sync and pass its second: {observed}"
    );
    assert!(ok, "{out}{err}");
    assert!(out.contains("1 earlier sync or unmount failed"), "{out}");
    assert!(
        std::fs::read(&img).unwrap() != before,
        "apply did not write the image"
    );
    let (ok, listing, err) = nilref(&["ls", &img, "/"]);
    assert!(
        ok && listing.contains("kept") && !listing.contains("\na\n"),
        "{listing}{err}"
    );
}

// postmortem: apply expanded a write's whole pattern before writing it, so
// a pattern of 2^40 blocks asked for 4 PiB at once and aborted the process
// (issue 13.4); the adapter now writes in 1 MiB pieces, as `nilref exec`
// does on a kernel, and an 8 MiB device stops the write at ENOSPC.
#[test]
fn apply_writes_a_huge_pattern_in_pieces() {
    let d = scratch("apply-huge-pattern");
    let img = save(&image(|_| {}), &d);
    let trace = "{\"op\":\"mount\"}\n{\"op\":\"create\",\"path\":\"/a\"}\n\
         {\"op\":\"write\",\"path\":\"/a\",\"offset\":0,\"data\":{\"blk\":{\"tag\":\"h\",\"first\":0,\"count\":1099511627776}}}\n\
         {\"op\":\"read\",\"path\":\"/a\",\"offset\":0,\"len\":1099511627776}\n";
    let observed = apply_bounded(&d, &img, trace);
    let written = observed
        .lines()
        .find(|l| l.contains("\"write\""))
        .expect("the write line");
    assert!(written.contains("\"written\""), "{written}");
    assert!(
        observed
            .lines()
            .any(|l| l.contains("\"read\"") && l.contains("sha256")),
        "{observed}"
    );
}

// postmortem: the write path's readlink and path walk read a symlink's
// whole i_size, so a damaged symlink claiming 2^62 bytes made `apply`
// spin through holes for ever (issue 13.4); a symlink is its first page,
// as page_get_link reads it.
#[test]
fn apply_reads_a_symlink_as_one_page() {
    let d = scratch("apply-huge-link");
    let dev = image(|fs| {
        fs.symlink(ROOT, b"l", b"target").unwrap();
    });
    corrupt::apply(
        &dev,
        &corrupt::Recipe::parse("inode[/l].i_size = 0x4000000000000000").unwrap(),
    )
    .unwrap();
    let img = save(&dev, &d);
    let trace = "{\"op\":\"mount\"}\n{\"op\":\"readlink\",\"path\":\"/l\"}\n\
                 {\"op\":\"lstat\",\"path\":\"/l/x\"}\n{\"op\":\"umount\"}\n";
    let observed = apply_bounded(&d, &img, trace);
    assert!(observed.contains("\"target\":\"target\""), "{observed}");
}

/// `nilref apply --dry-run` of `trace` on `img` under [`bounded`]'s limits;
/// the observed trace.
fn apply_bounded(d: &Path, img: &str, trace: &str) -> String {
    let t = d.join("trace.jsonl");
    std::fs::write(&t, trace).unwrap();
    let o = d.join("observed.jsonl");
    let script = format!(
        "\"$NILREF\" apply --dry-run \"$1\" {} -o {}",
        t.display(),
        o.display()
    );
    let (code, _, err) = bounded(&script, img);
    assert_ne!(code, 124, "apply did not end within 60 s");
    assert_eq!(code, 0, "{err}");
    std::fs::read_to_string(&o).unwrap()
}

// postmortem: the hostile campaign's first run (issue 34): a log whose
// ss_seq is 2^64-1 made `nilref inspect` overflow while it walked back the
// chain of segments (a panic where arithmetic is checked). The campaign
// replays the recipe through every tool of ours, on its own base image.
#[test]
fn hostile_campaign_recipe_with_a_maximal_seq_is_no_panic() {
    let d = scratch("seq-overflow");
    let recipe = d.join("recipe.txt");
    std::fs::write(
        &recipe,
        "base ours-4k\nss@#64.ss_seq = 0xffffffffffffffff\n",
    )
    .unwrap();
    let (ok, out, err) = nilref(&[
        "campaign",
        "hostile",
        "--ours-only",
        "--out",
        d.to_str().unwrap(),
        "--replay",
        recipe.to_str().unwrap(),
    ]);
    assert!(ok, "{out}{err}");
    assert!(out.contains("| all | 1 |"), "{out}");
}

// postmortem: K18's shape (docs/findings.md). On Linux, appending to a
// file whose i_size is 2^64-1 writes at position -1 and the segment
// constructor then BUGs. Our write path must refuse that inode as
// corrupt, with EIO, and keep the rest of the file system usable.
#[test]
fn apply_refuses_to_append_to_a_file_whose_size_is_minus_one() {
    let d = scratch("apply-size-minus-one");
    let img = one_file_damaged(
        &d,
        b"big",
        b"hello",
        "inode[/big].i_size = 0xffffffffffffffff",
    );
    let (ok, _, err) = apply_trace(
        &d,
        &img,
        "{\"op\":\"mount\"}\n\
         {\"op\":\"write\",\"path\":\"/big\",\"offset\":0,\"append\":true,\"data\":{\"text\":\"appended\"}}\n\
         {\"op\":\"create\",\"path\":\"/other\"}\n\
         {\"op\":\"fsync\",\"path\":\"/other\"}\n\
         {\"op\":\"umount\"}\n",
    );
    assert!(ok, "{err}");
    let observed = std::fs::read_to_string(d.join("observed.jsonl")).unwrap();
    let lines: Vec<&str> = observed.lines().collect();
    assert!(lines[2].contains("\"err\":\"EIO\""), "{observed}");
    assert!(
        lines[3].contains("\"out\":\"ok\"") && lines[4].contains("\"out\":\"ok\""),
        "{observed}"
    );
}
