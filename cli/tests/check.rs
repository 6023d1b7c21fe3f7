//! `nilref check` end to end: fsck's exit codes (0 clean, 4 errors, 8 not
//! NILFS2), the text report, one JSON object per finding with `--json`.

mod common;

fn nilref(args: &[&str]) -> (i32, String) {
    let r = common::run(args);
    (r.code, r.out)
}

fn scratch() -> common::Scratch {
    common::scratch("cli", "check")
}

#[test]
fn exit_codes_text_and_json() {
    let d = scratch();
    let img = d.join("a.img");
    let img_s = img.to_str().unwrap();
    let (code, _) = nilref(&["mkfs", img_s, "--size", "32M", "-b", "1024", "-B", "256"]);
    assert_eq!(code, 0);
    let (code, out) = nilref(&["check", img_s]);
    assert_eq!(code, 0, "{out}");
    assert!(out.ends_with("clean (0 warnings)\n"), "{out}");
    let (code, out) = nilref(&["check", "--all-checkpoints", "--json", img_s]);
    assert_eq!(code, 0, "{out}");
    let verdict: serde_json::Value = serde_json::from_str(out.lines().last().unwrap()).unwrap();
    assert_eq!(verdict["verdict"], "clean");

    // Damage the sufile header's dirty count in place and reseal its log.
    let dev = nilfs::device::FileDevice::open_read_write(&img).unwrap();
    let r = nilfs_conformance::corrupt::Recipe::parse("suhdr.sh_ndirtysegs += 3").unwrap();
    nilfs_conformance::corrupt::apply(&dev, &r).unwrap();
    drop(dev);
    let (code, out) = nilref(&["check", img_s]);
    assert_eq!(code, 4, "{out}");
    assert!(out.starts_with("su-dirty-count: sufile header"), "{out}");
    let (code, out) = nilref(&["check", "--json", img_s]);
    assert_eq!(code, 4);
    let first: serde_json::Value = serde_json::from_str(out.lines().next().unwrap()).unwrap();
    assert_eq!(first["code"], "su-dirty-count");
    assert_eq!(first["kernel"], "nilfs_sufile_mod_counter");
    assert_eq!(first["pass"], 5);

    // No NILFS2 at all: an operational error.
    let junk = d.join("junk.img");
    std::fs::write(&junk, vec![0u8; 1 << 20]).unwrap();
    let (code, out) = nilref(&["check", junk.to_str().unwrap()]);
    assert_eq!(code, 8, "{out}");
    assert!(out.contains("no NILFS2 super block"), "{out}");
    let (code, _) = nilref(&["check", "--cp", "99", img_s]);
    assert_eq!(code, 8);
}

/// A reader that goes away (`nilref check IMG | head -1`) is not an error:
/// no panic on the broken pipe, and the exit code is still the verdict's.
/// (`print!` panicked on EPIPE: a Rust program ignores SIGPIPE.)
#[test]
fn a_closed_pipe_is_not_a_panic() {
    // A folder of its own: the tests of this file run at once, and each
    // folder goes when its test ends.
    let d = common::scratch("cli", "check-pipe");
    let img = d.join("p.img");
    let img_s = img.to_str().unwrap();
    let (code, _) = nilref(&["mkfs", img_s, "--size", "32M", "-b", "1024", "-B", "256"]);
    assert_eq!(code, 0);
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_nilref"))
        .args(["check", img_s])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // The read end, closed before the report is written.
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("panicked"), "{err}");
    assert_eq!(out.status.code(), Some(0), "{err}");
}
