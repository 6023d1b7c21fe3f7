//! The repository stands alone: no file in it names an absolute path of the
//! machine it was written on, so a clone made anywhere finds everything it
//! needs inside itself (the kernel-guest harness in tests/guest, the
//! kernel-written fixtures in tests/fixtures).
//!
//! The paths looked for are the folder the clone sits in (whatever it is
//! where the test runs: a clone in /tmp/x must not name /tmp/x/…'s parent),
//! and the folders of the machine this project grew up on, which a file
//! copied from there would carry. The strings are assembled at run time so
//! that this file does not match itself.

use std::path::{Path, PathBuf};
use std::process::Command;

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ sits in the repository")
        .to_path_buf()
}

/// Absolute paths that must not appear in the repository.
fn forbidden(root: &Path) -> Vec<String> {
    let mut v: Vec<String> = ["work", "root"].iter().map(|d| format!("/{d}/")).collect();
    if let Some(parent) = root
        .canonicalize()
        .ok()
        .and_then(|r| r.parent().map(Path::to_path_buf))
    {
        let p = parent.display().to_string();
        // "/" or a folder as short as "/tmp" would match ordinary text.
        if p.len() > 4 {
            v.push(format!("{p}/"));
        }
    }
    v.sort();
    v.dedup();
    v
}

/// The repository's files: `git ls-files` in a checkout, else every file
/// outside build output and version-control folders.
fn files(root: &Path) -> Vec<PathBuf> {
    if let Ok(out) = Command::new("git")
        .arg("-C")
        .arg(root)
        .args([
            "ls-files",
            "-z",
            "--cached",
            "--others",
            "--exclude-standard",
        ])
        .output()
    {
        if out.status.success() && !out.stdout.is_empty() {
            return out
                .stdout
                .split(|b| *b == 0)
                .filter(|p| !p.is_empty())
                .map(|p| root.join(String::from_utf8_lossy(p).as_ref()))
                .collect();
        }
    }
    let mut found = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir)
            .expect("readable repository")
            .flatten()
        {
            let p = e.path();
            let name = e.file_name().to_string_lossy().into_owned();
            if p.is_dir() {
                if !name.starts_with("target") && name != ".git" {
                    stack.push(p);
                }
            } else {
                found.push(p);
            }
        }
    }
    found
}

/// Lines of `text` that name one of `paths`: (1-based line, the path).
fn hits<'a>(text: &str, paths: &'a [String]) -> Vec<(usize, &'a str)> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        for p in paths {
            if line.contains(p.as_str()) {
                out.push((i + 1, p.as_str()));
            }
        }
    }
    out
}

#[test]
fn no_file_names_an_absolute_path_of_this_machine() {
    let root = repo_root();
    let paths = forbidden(&root);
    let mut bad = Vec::new();
    let mut scanned = 0;
    for f in files(&root) {
        let Ok(bytes) = std::fs::read(&f) else {
            continue; // deleted in the work tree but still in the index
        };
        if bytes.contains(&0) {
            continue; // binary (the xz fixtures): no paths in there
        }
        scanned += 1;
        let text = String::from_utf8_lossy(&bytes);
        for (line, p) in hits(&text, &paths) {
            bad.push(format!(
                "{}:{line}: names {p}",
                f.strip_prefix(&root).unwrap_or(&f).display()
            ));
        }
    }
    assert!(
        scanned > 50,
        "only {scanned} files scanned: is this the repository?"
    );
    assert!(
        bad.is_empty(),
        "the repository must stand alone; these lines name absolute paths of a machine:\n{}",
        bad.join("\n")
    );
}

/// The checker finds a path it exists to catch (and ignores a lookalike).
#[test]
fn the_path_check_can_fail() {
    let paths = forbidden(&repo_root());
    let bad = format!("let p = \"{}shared/fixtures/x.img\";\nok\n", paths[0]);
    // One line names the path; where the clone sits under a folder that is
    // itself forbidden (a CI checkout under a folder named like one of
    // ours), that line matches twice.
    let found = hits(&bad, &paths);
    assert!(!found.is_empty(), "the planted path was not found");
    assert!(found.iter().all(|(line, _)| *line == 1), "{found:?}");
    assert!(hits("relative ../shared and work/ are fine\n", &paths).is_empty());
}

/// Everything the peer tier runs is in the repository.
#[test]
fn the_kernel_guest_harness_and_the_fixtures_are_here() {
    let root = repo_root();
    for f in [
        "tests/guest/kernel-run.sh",
        "tests/guest/build-initramfs.sh",
        "tests/guest/init.sh",
        "tests/guest/manifest.sh",
        "tests/guest/grub-check.sh",
        "tests/guest/scenario-gc.sh",
        "tests/guest/read-only.sh",
        "tests/fixtures/make-kernel-fixture.sh",
        "tests/fixtures/kernel-6.1/scenario-gc-128M.img.xz",
        "tests/fixtures/kernel-6.1/scenario-gc-128M.manifest",
        "tests/fixtures/kernel-6.1/scenario-gc-128M.scenario.log",
    ] {
        assert!(root.join(f).is_file(), "{f} is missing from the repository");
    }
}
