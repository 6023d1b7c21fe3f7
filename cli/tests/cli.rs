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

/// `nilref oracle check` on the kernel's scenario-gc trace: accepted; with
/// its first rename's outcome changed to EXDEV, rejected, and the message
/// names the line, the errno and the operation. (This was a model test
/// that compiled cli/src/oracle.rs into itself; the binary is the contract.)
#[test]
fn oracle_check_names_the_rejected_line_errno_and_operation() {
    use nilfs_model::{Op, Outcome};
    let good = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../model/traces/scenario-gc.jsonl"
    );
    let (ok, out, err) = nilref(&["oracle", "check", good]);
    assert!(ok, "{err}");
    assert!(out.contains("accepted"), "{out}");

    let text = std::fs::read_to_string(good).unwrap();
    let mut lines: Vec<nilfs_model::Line> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let i = lines
        .iter()
        .position(|l| matches!(l.op, Op::Rename { .. }))
        .expect("the trace renames");
    lines[i].out = Outcome::Err(nilfs_model::Errno::EXDEV);
    let d = scratch("oracle");
    let bad = d.join("bad.jsonl");
    let bad_text: String = lines.iter().map(|l| l.to_json() + "\n").collect();
    std::fs::write(&bad, bad_text).unwrap();
    let (ok, _, err) = nilref(&["oracle", "check", bad.to_str().unwrap()]);
    assert!(!ok);
    let n = i + 1;
    assert!(
        err.contains(&format!("line {n}")) && err.contains("EXDEV") && err.contains("rename"),
        "{err}"
    );
}
