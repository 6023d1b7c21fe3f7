//! The command line, end to end: mkfs into an image file, then inspect and
//! list it; refusals exit non-zero with mkfs.nilfs2's message.

mod common;
use common::nilref;

fn scratch(name: &str) -> common::Scratch {
    common::scratch("cli", name)
}

#[test]
fn mkfs_then_inspect_lscp_lssu() {
    let d = scratch("mkfs");
    let img = d.join("a.img");
    let img_s = img.to_str().unwrap();
    let (ok, out, err) = nilref(&[
        "mkfs", img_s, "--size", "64M", "-b", "2048", "-B", "256", "-L", "cli",
    ]);
    assert!(ok, "{err}");
    assert!(
        out.contains("block size 2048, 256 blocks per segment"),
        "{out}"
    );

    let (ok, out, err) = nilref(&["inspect", img_s]);
    assert!(ok, "{err}");
    assert!(
        out.contains("chosen: primary") && out.contains("label \"cli\""),
        "{out}"
    );

    let (ok, out, _) = nilref(&["lscp", img_s]);
    assert!(ok);
    let rows: Vec<&str> = out.lines().collect();
    assert_eq!(rows.len(), 2, "{out}");
    assert!(
        rows[0].contains("CNO") && rows[1].trim_start().starts_with("1 "),
        "{out}"
    );

    let (ok, out, _) = nilref(&["lssu", img_s]);
    assert!(ok);
    // Segments 0 (the log) and 1 (next): the writer's current and next.
    assert_eq!(out.lines().count(), 3, "{out}");
    assert!(out.lines().nth(1).unwrap().contains("ad-"), "{out}");

    let (ok, out, _) = nilref(&["dumpseg", img_s, "0"]);
    assert!(ok);
    assert!(out.contains("segment: segnum = 0"), "{out}");

    let (ok, _, err) = nilref(&["dumpseg", img_s, "100000"]);
    assert!(!ok);
    assert_eq!(err.trim(), "dumpseg: Invalid argument");

    let (ok, out, _) = nilref(&["tune", "-l", img_s]);
    assert!(ok);
    assert!(
        out.contains("Filesystem volume name:") && out.contains("cli"),
        "{out}"
    );
}

#[test]
fn mkfs_refusals_exit_nonzero_with_mkfs_messages() {
    let d = scratch("refuse");
    let img = d.join("b.img");
    let img_s = img.to_str().unwrap();
    let (ok, _, err) = nilref(&["mkfs", img_s, "--size", "64M", "-b", "3000"]);
    assert!(!ok);
    assert_eq!(err.trim(), "Error: invalid blocksize: 3000");
    let (ok, _, err) = nilref(&["mkfs", img_s, "--size", "4M"]);
    assert!(!ok);
    assert!(err.starts_with("Error: too small device."), "{err}");
}

#[test]
fn same_seed_same_image_other_seed_other_image() {
    let d = scratch("seed");
    let mk = |name: &str, seed: &str| {
        let p = d.join(name);
        let (ok, _, err) = nilref(&[
            "mkfs",
            p.to_str().unwrap(),
            "--size",
            "32M",
            "-b",
            "1024",
            "-B",
            "128",
            "--seed",
            seed,
        ]);
        assert!(ok, "{err}");
        std::fs::read(p).unwrap()
    };
    let (a, b, c) = (mk("a", "7"), mk("b", "7"), mk("c", "8"));
    assert!(a == b, "same seed, different bytes");
    assert!(a != c, "different seeds, same bytes");
}
