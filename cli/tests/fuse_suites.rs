//! Third-party suites on `nilref mount`, judged by their own checks and by
//! Linux's nilfs2 running the same suites:
//!
//! - pjdfstest (the Rust suite, crates.io `pjdfstest` 0.2.2: the C suite's
//!   successor, its tests regrouped into 398 cases), configured by
//!   tests/suites/pjdfstest.toml: every case must pass or be skipped for a
//!   feature nilfs2 has not got; on the peer tier, every case Linux 6.1's
//!   nilfs2 passes in the guest must pass here too;
//! - fsx (crates.io `fsx` 0.3.2, the Rust port of Apple's and FreeBSD's
//!   File System eXerciser): on a `-o direct_io` mount (every read and
//!   write reaches nilfs-ref) and with mmap on a cached mount;
//! - stress-ng's file-system stressors with `--verify` (fsstress itself is
//!   packaged by no registry this project can reach).
//!
//! After each run the image is unmounted and must check clean. Known-bad
//! mounts show the suites can fail: a chmod that does nothing fails
//! pjdfstest, a write that drops its partial blocks fails fsx.
//!
//! Needs FUSE (as fuse_mount.rs) and the suites' binaries (`cargo install
//! --locked pjdfstest@0.2.2 fsx@0.3.2`, which scripts/test.sh does; Debian's
//! stress-ng). Without them the tier says so and is skipped, unless
//! NILFS_FUSE=1. NILFS_FSX_OPS sets fsx's operations per run (default
//! 20,000); the long run is docs/TESTING.md's.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use common::fuse::{fuse_available, fuse_or_skip, Mount};
use common::Scratch;

const PJDFSTEST_TOML: &str = include_str!("../../tests/suites/pjdfstest.toml");
const FSX_DIRECT_TOML: &str = include_str!("../../tests/suites/fsx-direct.toml");
const FSX_MMAP_TOML: &str = include_str!("../../tests/suites/fsx-mmap.toml");

/// The suites run on 4 GiB sparse images: nilfs2 writes every change to a
/// new place, and nilfs_cleanerd's protection period keeps an hour of
/// logs, so fsx's 100,000 operations need room (as on the kernel).
const MKFS: [&str; 2] = ["--size", "4G"];

/// A program of the suites: on PATH or where `cargo install` puts it.
fn tool(name: &str) -> Option<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect())
        .unwrap_or_default();
    if let Some(home) = std::env::var_os("CARGO_HOME") {
        dirs.push(PathBuf::from(home).join("bin"));
    }
    if let Some(home) = std::env::var_os("HOME") {
        dirs.push(PathBuf::from(home).join(".cargo/bin"));
    }
    dirs.into_iter().map(|d| d.join(name)).find(|p| p.is_file())
}

/// The suite's program, or a skip (a failure under NILFS_FUSE=1).
fn tool_or_skip(name: &str) -> Option<PathBuf> {
    let t = tool(name);
    if t.is_none() {
        assert!(
            std::env::var_os("NILFS_FUSE").is_none(),
            "NILFS_FUSE is set but {name} is not installed (cargo install --locked pjdfstest@0.2.2 fsx@0.3.2; Debian: stress-ng)"
        );
        eprintln!("suite skipped: {name} is not installed");
    }
    t
}

/// A scratch folder every user can walk through: pjdfstest's cases run as
/// `nobody` and `daemon` too, so the mount point's parents must let them
/// pass (the cargo target folder need not). It holds 4 GiB sparse images
/// that fill up to a gigabyte each; like every test's folder, it goes
/// when its test passes.
fn open_scratch(name: &str) -> Scratch {
    use std::os::unix::fs::PermissionsExt;
    let d = Scratch::at(
        std::env::temp_dir().join(format!("nilref-suites-{name}-{}", std::process::id())),
    );
    std::fs::set_permissions(&*d, std::fs::Permissions::from_mode(0o755)).unwrap();
    d
}

/// The scratch folders went unremoved until session 15 and filled the
/// disk of a machine that ran the suites often (34 GB in /tmp), until CI
/// failed with ENOSPC: a passing test's folder is gone when it ends.
#[test]
fn a_passing_tests_scratch_folder_is_removed() {
    let dir = open_scratch("removal");
    let path = dir.to_path_buf();
    std::fs::write(dir.join("image"), b"x").unwrap();
    drop(dir);
    assert!(!path.exists(), "{} was left behind", path.display());
}

/// A test's scratch folder and its suite's program, or a skip (FUSE or
/// the program missing here).
fn prepare(name: &str, program: &str) -> Option<(Scratch, PathBuf)> {
    let dir = open_scratch(name);
    if !fuse_or_skip(&dir) {
        return None;
    }
    Some((dir, tool_or_skip(program)?))
}

fn ops() -> u64 {
    std::env::var("NILFS_FSX_OPS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20_000)
}

/// pjdfstest's verdicts, by case.
#[derive(Debug, Default)]
struct Verdicts {
    passed: BTreeSet<String>,
    /// Each failed case with the first line of its reason.
    failed: BTreeMap<String, String>,
    skipped: BTreeSet<String>,
}

/// pjdfstest's report: a line per case, `NAME  ok|FAILED|skipped`, a
/// failure's reason on the tab-indented line after it.
fn parse_pjdfstest(out: &str) -> Verdicts {
    let mut v = Verdicts::default();
    let plain = strip_ansi(out);
    let lines: Vec<&str> = plain.lines().collect();
    for (k, l) in lines.iter().enumerate() {
        let mut words = l.split_whitespace();
        let (Some(name), Some(verdict), None) = (words.next(), words.next(), words.next()) else {
            continue;
        };
        if !name.contains("::") {
            continue;
        }
        match verdict {
            "ok" => {
                v.passed.insert(name.to_string());
            }
            "FAILED" => {
                let why = lines.get(k + 1).map_or("", |w| w.trim()).to_string();
                v.failed.insert(name.to_string(), why);
            }
            "skipped" => {
                v.skipped.insert(name.to_string());
            }
            _ => {}
        }
    }
    v
}

/// `text` without ANSI escape sequences (pjdfstest colours its verdicts
/// where it takes the output for a terminal, as the guest's serial line).
fn strip_ansi(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            // CSI: ESC [ parameters, then a final byte in @..~.
            if chars.next() == Some('[') {
                for d in chars.by_ref() {
                    if ('@'..='~').contains(&d) {
                        break;
                    }
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// Runs pjdfstest on `point` (cases matching `patterns`; all if empty).
fn pjdfstest(pjd: &Path, dir: &Path, point: &Path, patterns: &[&str]) -> (Verdicts, String) {
    let cfg = dir.join("pjdfstest.toml");
    std::fs::write(&cfg, PJDFSTEST_TOML).unwrap();
    let secondary = dir.join("secondary");
    std::fs::create_dir_all(&secondary).unwrap();
    let out = Command::new(pjd)
        .arg("-c")
        .arg(&cfg)
        .arg("-p")
        .arg(point)
        .arg("-s")
        .arg(&secondary)
        .args(patterns)
        .output()
        .expect("run pjdfstest");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    (parse_pjdfstest(&text), text)
}

/// What pjdfstest may skip on nilfs2: the features it has not got
/// (fallocate), the remounts the configuration leaves off, and LINK_MAX,
/// which pathconf cannot tell for FUSE or nilfs2 (glibc knows neither).
fn skip_is_expected(case: &str) -> bool {
    case.contains("erofs")
        || case.starts_with("posix_fallocate::")
        || case == "link::link_count_max"
}

fn check_clean(image: &Path) {
    let r = common::run(&["check", image.to_str().unwrap()]);
    assert!(
        r.ok(),
        "nilref check {} after the unmount:\n{}{}",
        image.display(),
        r.out,
        r.err
    );
}

#[test]
fn pjdfstest_passes_on_the_fuse_mount() {
    let Some((dir, pjd)) = prepare("pjdfstest", "pjdfstest") else {
        return;
    };
    let m = Mount::start_with(&dir, "pjd", &MKFS, &[]).unwrap();
    let (v, text) = pjdfstest(&pjd, &dir, &m.point, &[]);
    let image = m.stop().unwrap();
    eprintln!(
        "pjdfstest on nilref mount: {} passed, {} failed, {} skipped",
        v.passed.len(),
        v.failed.len(),
        v.skipped.len()
    );
    assert!(
        !v.passed.is_empty(),
        "pjdfstest printed no verdict:\n{text}"
    );
    assert!(
        v.failed.is_empty(),
        "pjdfstest cases failed on nilref mount (replay: pjdfstest -c tests/suites/pjdfstest.toml -p MNT CASE):\n{:#?}",
        v.failed
    );
    let unexpected: Vec<_> = v.skipped.iter().filter(|c| !skip_is_expected(c)).collect();
    assert!(
        unexpected.is_empty(),
        "skipped for no known reason: {unexpected:?}"
    );
    check_clean(&image);
}

/// pjdfstest can fail: a mount whose chmod does nothing fails its chmod
/// cases.
#[test]
fn pjdfstest_catches_a_mount_that_ignores_chmod() {
    let Some((dir, pjd)) = prepare("pjdfstest-bad", "pjdfstest") else {
        return;
    };
    let m = Mount::start_with(&dir, "pjd-bad", &MKFS, &["--known-bad", "ignore-chmod"]).unwrap();
    let (v, text) = pjdfstest(&pjd, &dir, &m.point, &["chmod::"]);
    m.stop().unwrap();
    assert!(
        v.failed.keys().any(|c| c.starts_with("chmod::")),
        "no chmod case noticed a chmod that does nothing:\n{text}"
    );
}

/// Runs fsx for `ops()` operations (seed `seed`) on a fresh mount with
/// `mount_args`; Err with fsx's report.
fn fsx_run(
    fsx: &Path,
    dir: &Path,
    name: &str,
    config: &str,
    mount_args: &[&str],
    seed: u64,
) -> Result<PathBuf, String> {
    let cfg = dir.join(format!("{name}.toml"));
    std::fs::write(&cfg, config).unwrap();
    let m = Mount::start_with(dir, name, &MKFS, mount_args)?;
    let out = Command::new(fsx)
        .arg("-f")
        .arg(&cfg)
        .arg("-N")
        .arg(ops().to_string())
        .arg("-S")
        .arg(seed.to_string())
        .arg("-P")
        .arg(dir)
        .arg(m.point.join("fsxfile"))
        .output()
        .expect("run fsx");
    let image = m.stop()?;
    if out.status.success() {
        Ok(image)
    } else {
        Err(format!(
            "fsx -f {name}.toml -N {} -S {seed} on nilref mount {}: {}{}",
            ops(),
            mount_args.join(" "),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
                .lines()
                .filter(|l| l.contains("ERROR"))
                .take(40)
                .collect::<Vec<_>>()
                .join("\n")
        ))
    }
}

#[test]
fn fsx_finds_no_data_error_on_the_fuse_mount() {
    let Some((dir, fsx)) = prepare("fsx", "fsx") else {
        return;
    };
    let runs = [
        ("direct", FSX_DIRECT_TOML, &["-o", "direct_io"][..], 1),
        ("mmap", FSX_MMAP_TOML, &[][..], 2),
    ];
    for (name, cfg, args, seed) in runs {
        let image = fsx_run(&fsx, &dir, name, cfg, args, seed).unwrap_or_else(|e| panic!("{e}"));
        check_clean(&image);
        eprintln!("fsx {name}: {} operations, no data error", ops());
    }
}

/// fsx can fail: a mount that stores only the whole blocks of each write
/// (and says it stored everything) is caught.
#[test]
fn fsx_catches_a_mount_that_drops_partial_writes() {
    let Some((dir, fsx)) = prepare("fsx-bad", "fsx") else {
        return;
    };
    let e = fsx_run(
        &fsx,
        &dir,
        "direct-bad",
        FSX_DIRECT_TOML,
        &["-o", "direct_io", "--known-bad", "drop-partial-writes"],
        1,
    )
    .expect_err("fsx accepted a mount that drops partial writes");
    assert!(e.contains("miscompare"), "{e}");
}

#[test]
fn stress_ng_file_system_stressors_on_the_fuse_mount() {
    let Some((dir, stress)) = prepare("stress-ng", "stress-ng") else {
        return;
    };
    let m = Mount::start_with(&dir, "stress", &MKFS, &[]).unwrap();
    let out = Command::new(stress)
        .arg("--temp-path")
        .arg(&m.point)
        .args([
            "--dir",
            "1",
            "--dirdeep",
            "1",
            "--link",
            "1",
            "--symlink",
            "1",
            "--rename",
            "1",
            "--hdd",
            "1",
            "--hdd-bytes",
            "8M",
            "--filename",
            "1",
            "--chmod",
            "1",
            "--chown",
            "1",
            "--utime",
            "1",
            "--dentry",
            "1",
            "--verify",
            "--timeout",
            "10s",
        ])
        .output()
        .expect("run stress-ng");
    let image = m.stop().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && err.contains("successful run completed"),
        "stress-ng on nilref mount failed:\n{}{err}",
        String::from_utf8_lossy(&out.stdout)
    );
    check_clean(&image);
}

/// Peer tier: Linux 6.1's nilfs2 runs the same pjdfstest and fsx in the
/// guest; every case it passes must pass on nilref mount, and the kernel
/// must read, byte for byte, the file fsx left on our mount.
#[test]
fn the_fuse_mount_passes_every_pjdfstest_case_linux_nilfs2_passes() {
    let Some(()) = nilfs_conformance::peers::require(
        "the_fuse_mount_passes_every_pjdfstest_case_linux_nilfs2_passes",
        &["qemu-system-x86_64", "busybox", "cpio"],
    ) else {
        return;
    };
    let dir = open_scratch("suites-kernel");
    fuse_available(&dir).expect("the peer tier needs FUSE too");
    let pjd = tool("pjdfstest").expect("the peer tier needs pjdfstest");
    let fsx = tool("fsx").expect("the peer tier needs fsx");

    // Ours: pjdfstest, and the image a direct_io fsx run leaves.
    let m = Mount::start_with(&dir, "pjd", &MKFS, &[]).unwrap();
    let (ours, _) = pjdfstest(&pjd, &dir, &m.point, &[]);
    m.stop().unwrap();
    let fsx_image = fsx_run(
        &fsx,
        &dir,
        "direct",
        FSX_DIRECT_TOML,
        &["-o", "direct_io"],
        3,
    )
    .unwrap_or_else(|e| panic!("{e}"));

    // The kernel's, in the guest: nobody and daemon as on Debian.
    let kernel_ops = ops().min(10_000);
    let script = format!(
        "echo 'nobody:x:65534:65534:nobody:/:/bin/sh' >> /etc/passwd
echo 'daemon:x:1:1:daemon:/:/bin/sh' >> /etc/passwd
echo 'nogroup:x:65534:' >> /etc/group
echo 'daemon:x:1:' >> /etc/group
mkdir -p /tmp/sec /mnt2
mount -t tmpfs none /tmp/sec
cat > /tmp/pjdfstest.toml <<'EOF'
{PJDFSTEST_TOML}EOF
cat > /tmp/fsx.toml <<'EOF'
{FSX_MMAP_TOML}EOF
mkfs.nilfs2 -f -q -b 4096 /dev/vda
mount -t nilfs2 /dev/vda /mnt
echo @@PJD
NO_COLOR=1 pjdfstest -c /tmp/pjdfstest.toml -p /mnt -s /tmp/sec || true
echo @@FSX
fsx -f /tmp/fsx.toml -N {kernel_ops} -S 4 -P /tmp /mnt/fsxfile 2>&1 | grep -E 'A-OK|ERROR' | head -20
umount /mnt
mount -t nilfs2 -o ro /dev/vdb /mnt2
echo @@MANIFEST
manifest /mnt2
umount /mnt2
echo @@END
"
    );
    let disk = dir.join("kernel.img");
    std::fs::File::create(&disk)
        .unwrap()
        .set_len(1 << 30)
        .unwrap();
    let sdir = nilfs_conformance::peers::Scratch::new("suites-kernel");
    let path = sdir.file("run.sh");
    std::fs::write(&path, &script).unwrap();
    let out = nilfs_conformance::peers::run(
        Command::new(nilfs_conformance::peers::oracle_dir().join("kernel-run.sh"))
            .arg(&disk)
            .arg(&path)
            .env("DISKS", fsx_image.display().to_string())
            .env("BINS", format!("{} {}", pjd.display(), fsx.display()))
            .env("MEM", "1G")
            .env("TIMEOUT", "1200"),
    );
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "kernel-run.sh: {stdout}");
    let part = |from: &str, to: &str| {
        stdout
            .split(from)
            .nth(1)
            .and_then(|s| s.split(to).next())
            .unwrap_or_else(|| panic!("no {from} in the guest's output:\n{stdout}"))
            .to_string()
    };
    let kernel = parse_pjdfstest(&part("@@PJD\n", "@@FSX"));
    let fsx_out = part("@@FSX\n", "@@MANIFEST");
    let manifest = part("@@MANIFEST\n", "@@END");
    eprintln!(
        "pjdfstest: Linux 6.1 nilfs2 {} passed, {} failed, {} skipped; nilref mount {} passed, {} failed, {} skipped",
        kernel.passed.len(),
        kernel.failed.len(),
        kernel.skipped.len(),
        ours.passed.len(),
        ours.failed.len(),
        ours.skipped.len()
    );
    assert!(
        !kernel.passed.is_empty(),
        "the kernel's pjdfstest printed nothing:\n{stdout}"
    );
    let missed: Vec<_> = kernel
        .passed
        .iter()
        .filter(|c| !ours.passed.contains(*c))
        .collect();
    assert!(
        missed.is_empty(),
        "cases Linux nilfs2 passes and nilref mount does not: {missed:?}\nours failed: {:#?}",
        ours.failed
    );
    assert!(
        fsx_out.contains("A-OK"),
        "fsx on the kernel's nilfs2 (a finding, or the guest):\n{fsx_out}"
    );
    let r = common::run(&["manifest", fsx_image.to_str().unwrap()]);
    assert_eq!(
        manifest, r.out,
        "the kernel's manifest of the image fsx left on nilref mount, then ours"
    );
}
