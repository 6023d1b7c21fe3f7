//! The FUSE tier: `nilref mount` serves an image through the kernel's FUSE,
//! `nilref exec` drives generated workloads through real system calls on
//! it, and the model judges the traces — the same judging the kernel's
//! nilfs2 gets. After each unmount the image must check clean and show, to
//! our read path, the tree the trace's last manifest showed.
//!
//! Needs /dev/fuse and fusermount3 (Debian: fuse3) and the right to mount.
//! Without them the tier says so and is skipped, unless NILFS_FUSE=1 asks
//! for it (then it fails). NILFS_FUSE_SEEDS sets the seeds per profile.

mod common;

use common::fuse::{fuse_available, fuse_or_skip, sh, Mount};

use std::path::{Path, PathBuf};
use std::process::Command;

use nilfs_workload::gen::{generate, Features, GenConfig, Profile};

const PROFILES: [Profile; 4] = [
    Profile::Attrs,
    Profile::Mixed,
    Profile::Namespace,
    Profile::Data,
];

fn seeds() -> u64 {
    std::env::var("NILFS_FUSE_SEEDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3)
}

/// Runs one generated workload on a fresh FUSE mount; the oracle's verdict
/// (Err with the rejection and a replay line).
fn run_one(dir: &Path, seed: u64, profile: Profile, extra: &[&str]) -> Result<(), String> {
    let name = format!("{}-{seed}", profile.name());
    let mut cfg = GenConfig::new(seed, 60, profile);
    cfg.features = Features::FUSE;
    let w = dir.join(format!("{name}.jsonl"));
    std::fs::write(&w, generate(&cfg).to_jsonl()).unwrap();
    let m = Mount::start(dir, &name, extra)?;
    let obs = dir.join(format!("{name}.out.jsonl"));
    let r = common::run(&[
        "exec",
        m.point.to_str().unwrap(),
        w.to_str().unwrap(),
        "-o",
        obs.to_str().unwrap(),
    ]);
    let image = m.stop()?;
    if !r.ok() {
        return Err(format!("nilref exec: {}", r.err));
    }
    let trace = std::fs::read_to_string(&obs).unwrap();
    let replay = format!(
        "replay: nilref gen --seed {seed} --len 60 --profile {} --features fuse > w.jsonl; nilref mount IMG MNT & nilref exec MNT w.jsonl | nilref oracle check /dev/stdin",
        profile.name()
    );
    nilfs_model::check_trace_str(&trace).map_err(|e| format!("{name}: {e}\n{replay}"))?;
    // The unmounted image: consistent, and what the trace last saw.
    let r = common::run(&["check", image.to_str().unwrap()]);
    if !r.ok() {
        return Err(format!(
            "{name}: nilref check after the unmount:\n{}{}",
            r.out, r.err
        ));
    }
    let last_manifest = trace
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .rfind(|v| v["op"] == "manifest")
        .and_then(|v| v["out"]["manifest"].as_array().cloned())
        .expect("the epilogue lists the tree");
    let r = common::run(&["manifest", image.to_str().unwrap()]);
    let ours: Vec<&str> = r.out.lines().collect();
    let seen: Vec<&str> = last_manifest.iter().filter_map(|l| l.as_str()).collect();
    if ours != seen {
        return Err(format!(
            "{name}: the image after the unmount shows\n{}\nwhere the mount showed\n{}",
            r.out,
            seen.join("\n")
        ));
    }
    Ok(())
}

#[test]
fn generated_workloads_on_the_fuse_mount_are_in_the_model_envelope() {
    let dir = common::scratch("fuse", "workloads");
    if !fuse_or_skip(&dir) {
        return;
    }
    let mut failures = Vec::new();
    let mut runs = 0;
    for profile in PROFILES {
        for seed in 1..=seeds() {
            runs += 1;
            if let Err(e) = run_one(&dir, seed, profile, &[]) {
                failures.push(e);
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {runs} workloads failed:\n{}",
        failures.len(),
        failures.join("\n\n")
    );
    eprintln!("FUSE tier: {runs} workloads accepted");
}

/// The judging can fail: a mount whose chmod does nothing is caught.
#[test]
fn a_fuse_mount_that_ignores_chmod_is_caught() {
    let dir = common::scratch("fuse", "known-bad");
    if !fuse_or_skip(&dir) {
        return;
    }
    let caught = (1..=6)
        .filter(|&seed| {
            run_one(&dir, seed, Profile::Attrs, &["--known-bad", "ignore-chmod"])
                .is_err_and(|e| e.contains("rejected"))
        })
        .count();
    assert!(
        caught > 0,
        "no attrs workload noticed a chmod that does nothing"
    );
}

/// Programs nobody here wrote: tar unpacks this repository's sources onto
/// the mount, diff finds them byte for byte, git makes a repository of
/// them and commits, rm -rf takes everything away; after the unmount the
/// image checks clean and holds only `.nilfs`.
#[test]
fn tar_git_and_rm_run_on_the_fuse_mount() {
    let dir = common::scratch("fuse", "real");
    if !fuse_or_skip(&dir) {
        return;
    }
    let ws = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let m = Mount::start(&dir, "real", &[]).unwrap();
    let p = m.point.display().to_string();
    let steps = [
        format!("tar -C {} -cf - model impl/src cli/src | tar -C {p} -xf -", ws.display()),
        format!("for d in model impl/src cli/src; do diff -r {}/$d {p}/$d || exit 1; done", ws.display()),
        format!("cd {p} && git init -q && git add -A && git -c user.name=t -c user.email=t@t commit -qm sources && git status --porcelain | wc -l"),
        format!("cd {p} && git log --oneline | wc -l"),
        format!("rm -rf {p}/model {p}/impl {p}/cli {p}/.git && ls -A {p}"),
    ];
    let mut outputs = Vec::new();
    for s in &steps {
        match sh(s) {
            Ok(o) => outputs.push(o),
            Err(e) => {
                let _ = m.stop();
                panic!("{e}");
            }
        }
    }
    let image = m.stop().unwrap();
    assert_eq!(outputs[2].trim(), "0", "git sees every file committed");
    assert_eq!(outputs[3].trim(), "1", "one commit");
    assert_eq!(outputs[4].trim(), ".nilfs", "rm -rf left only .nilfs");
    let r = common::run(&["check", image.to_str().unwrap()]);
    assert!(
        r.ok(),
        "nilref check after the unmount:\n{}{}",
        r.out,
        r.err
    );
    let r = common::run(&["manifest", image.to_str().unwrap()]);
    assert_eq!(r.out.lines().count(), 1, "{}", r.out);
}

/// A crash in the middle: the FUSE server is killed (SIGKILL) after an
/// fsync'd file and an unsynced one. The image left behind must check
/// clean, keep the fsync'd file byte for byte, and show the unsynced one
/// either not at all or whole (the log writer's timer may have written it).
#[test]
fn killing_the_fuse_server_loses_nothing_fsynced() {
    let dir = common::scratch("fuse", "kill");
    if !fuse_or_skip(&dir) {
        return;
    }
    let mut m = Mount::start(&dir, "kill", &[]).unwrap();
    let p = m.point.display().to_string();
    let data: Vec<u8> = (0..300_000u32)
        .map(|i| (i.wrapping_mul(2654435761) >> 13) as u8)
        .collect();
    let src = dir.join("a.src");
    std::fs::write(&src, &data).unwrap();
    let r = sh(&format!(
        "dd if={} of={p}/a bs=64k conv=fsync 2>/dev/null && mkdir {p}/d && echo unsynced > {p}/d/b",
        src.display()
    ));
    m.child.kill().unwrap();
    let _ = m.child.wait();
    let _ = Command::new("fusermount3")
        .arg("-u")
        .arg("-z")
        .arg(&m.point)
        .output();
    r.unwrap();
    let img = m.image.to_str().unwrap().to_string();
    let c = common::run(&["check", &img]);
    assert!(c.ok(), "nilref check after the kill:\n{}{}", c.out, c.err);
    let man = common::run(&["manifest", &img]);
    let sha = nilfs_model::pattern::sha256_hex(&data);
    assert!(
        man.out.lines().any(|l| l == format!("{sha}  300000  /a")),
        "the fsync'd file is whole:\n{}",
        man.out
    );
    let rest: Vec<&str> = man
        .out
        .lines()
        .filter(|l| !l.ends_with("  /a") && !l.ends_with("  /.nilfs"))
        .collect();
    let unsynced_sha = nilfs_model::pattern::sha256_hex(b"unsynced\n");
    let whole = [
        "DIR  -  /d/".to_string(),
        format!("{unsynced_sha}  9  /d/b"),
    ];
    assert!(
        rest.is_empty() || rest == ["DIR  -  /d/"] || rest == whole,
        "the unsynced changes are absent or whole:\n{}",
        man.out
    );
}

/// Peer tier: what `nilref mount` leaves is an image the kernel mounts, and
/// after a clean unmount the kernel's manifest of it (manifest.sh in the
/// guest: special files, owners' changes, appends and all) is ours. The
/// same for the image a killed server left, which the kernel recovers.
#[test]
fn the_kernel_mounts_what_the_fuse_mount_left() {
    let Some(()) = nilfs_conformance::peers::require(
        "the_kernel_mounts_what_the_fuse_mount_left",
        &["qemu-system-x86_64", "busybox", "cpio"],
    ) else {
        return;
    };
    let dir = common::scratch("fuse", "kernel");
    fuse_available(&dir).expect("the peer tier needs FUSE too");
    let mut images = Vec::new();
    for seed in 1..=3u64 {
        let name = format!("attrs-{seed}");
        let mut cfg = GenConfig::new(seed, 60, Profile::Attrs);
        cfg.features = Features::FUSE;
        let w = dir.join(format!("{name}.jsonl"));
        std::fs::write(&w, generate(&cfg).to_jsonl()).unwrap();
        let m = Mount::start(&dir, &name, &[]).unwrap();
        let r = common::run(&["exec", m.point.to_str().unwrap(), w.to_str().unwrap()]);
        images.push(m.stop().unwrap());
        assert!(r.ok(), "{}", r.err);
    }
    // And one left by a kill after an fsync.
    let mut m = Mount::start(&dir, "killed", &[]).unwrap();
    sh(&format!(
        "mkfifo {p}/fifo && echo data > {p}/f && chmod 4755 {p}/f && dd if={p}/f of={p}/g conv=fsync 2>/dev/null",
        p = m.point.display()
    ))
    .unwrap();
    m.child.kill().unwrap();
    let _ = m.child.wait();
    let _ = Command::new("fusermount3")
        .arg("-u")
        .arg("-z")
        .arg(&m.point)
        .output();
    images.push(m.image.clone());
    let mut script = String::new();
    for (k, dev) in ["vda", "vdb", "vdc", "vdd"].iter().enumerate() {
        script +=
            &format!("mount -t nilfs2 /dev/{dev} /mnt\necho @@M{k}\nmanifest /mnt\numount /mnt\n");
    }
    script += "echo @@END\n";
    let stdout = guest("fuse-kernel", &images, &script, &[]);
    for (k, img) in images.iter().enumerate() {
        let body = section(&stdout, &format!("M{k}"));
        // The kernel recovered the killed one; ours reads it as recovery
        // would (no data-only log was written: the fsync made a checkpoint).
        let ours = common::run(&["manifest", img.to_str().unwrap()]);
        assert_eq!(
            body,
            ours.out,
            "image {k} ({}): the kernel's manifest, then ours",
            img.display()
        );
    }
}

/// An image with a snapshot and later changes (a file rewritten, a
/// directory removed, a file added), all made through the mount; the
/// image, its mount point and the snapshot's number.
fn image_with_a_snapshot(dir: &Path) -> (PathBuf, PathBuf, u64) {
    let m = Mount::start(dir, "snap", &[]).unwrap();
    let (image, point) = (m.image.clone(), m.point.clone());
    let p = point.display();
    sh(&format!(
        "echo one > {p}/a && mkdir {p}/d && echo two > {p}/d/b && mkfifo {p}/d/fifo && ln -s d/b {p}/l"
    ))
    .unwrap();
    m.stop().unwrap();
    let r = common::run(&["mkcp", image.to_str().unwrap(), "-s"]);
    assert!(r.ok(), "{}", r.err);
    let snap = common::run(&["lscp", image.to_str().unwrap(), "-s"]);
    let cno: u64 = snap
        .out
        .lines()
        .nth(1)
        .and_then(|l| l.split_whitespace().next())
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("no snapshot in:\n{}", snap.out));
    let m = Mount::attach(image.clone(), point.clone(), &[]).unwrap();
    sh(&format!(
        "echo changed > {p}/a && rm -r {p}/d && echo new > {p}/c"
    ))
    .unwrap();
    m.stop().unwrap();
    (image, point, cno)
}

/// The manifest of a mounted tree, by tests/guest/manifest.sh itself (the
/// script the kernel guest runs).
fn manifest_of(point: &Path) -> String {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/guest/manifest.sh");
    sh(&format!("sh {} {}", script.display(), point.display())).unwrap()
}

/// `-o ro,cp=N` mounts snapshot N as it was taken: manifest.sh over the
/// mount prints what `nilref manifest --cp N` prints, changes are EROFS,
/// and the kernel's refusals hold: cp=N without ro, a checkpoint that is
/// not a snapshot, one that does not exist.
#[test]
fn a_snapshot_mount_shows_the_snapshot_read_only() {
    let dir = common::scratch("fuse", "snapshot");
    if !fuse_or_skip(&dir) {
        return;
    }
    let (image, point, cno) = image_with_a_snapshot(&dir);
    let img = image.to_str().unwrap();
    let snap = common::run(&["manifest", img, "--cp", &cno.to_string()]);
    let latest = common::run(&["manifest", img]);
    assert_ne!(snap.out, latest.out, "the changes after the snapshot show");
    let opt = format!("ro,cp={cno}");
    let m = Mount::attach(image.clone(), point.clone(), &["-o", &opt]).unwrap();
    let seen = manifest_of(&point);
    let write = sh(&format!("echo x > {}/a", point.display()));
    m.stop().unwrap();
    assert_eq!(
        seen, snap.out,
        "manifest.sh over cp={cno}, then nilref manifest --cp {cno}"
    );
    assert!(write.is_err_and(|e| e.contains("Read-only")));
    let refused = |o: &str| {
        Mount::attach(image.clone(), point.clone(), &["-o", o])
            .map(|m| m.stop())
            .expect_err(o)
    };
    assert!(refused(&format!("cp={cno}")).contains("needs the ro option"));
    let plain = refused(&format!("ro,cp={}", cno + 1));
    assert!(
        plain.contains("not a snapshot") && plain.contains("EINVAL"),
        "{plain}"
    );
    let absent = refused("ro,cp=999");
    assert!(
        absent.contains("does not exist") && absent.contains("EINVAL"),
        "{absent}"
    );
    check_image(&image);
}

fn check_image(image: &Path) {
    let r = common::run(&["check", image.to_str().unwrap()]);
    assert!(r.ok(), "nilref check:\n{}{}", r.out, r.err);
}

/// `nilref mkfs ARGS IMAGE`.
fn mkfs(image: &Path, args: &[&str]) {
    let mut mkfs = vec!["mkfs"];
    mkfs.extend_from_slice(args);
    mkfs.push(image.to_str().unwrap());
    let r = common::run(&mkfs);
    assert!(r.ok(), "nilref mkfs: {}", r.err);
}

/// Boot Linux 6.1 in the guest (tests/guest/kernel-run.sh) with `images`
/// as /dev/vda, /dev/vdb, ... and kernel-run.sh's `env` (`BINS`, `RO`),
/// run `script`; what it printed.
fn guest(name: &str, images: &[PathBuf], script: &str, env: &[(&str, &str)]) -> String {
    let sdir = nilfs_conformance::peers::Scratch::new(name);
    let path = sdir.file("run.sh");
    std::fs::write(&path, script).unwrap();
    let disks: Vec<String> = images[1..]
        .iter()
        .map(|p| p.display().to_string())
        .collect();
    let mut cmd = Command::new(nilfs_conformance::peers::oracle_dir().join("kernel-run.sh"));
    cmd.arg(&images[0]).arg(&path).env("DISKS", disks.join(" "));
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = nilfs_conformance::peers::run(&mut cmd);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "kernel-run.sh: {stdout}");
    stdout
}

/// What a guest script printed after its `@@NAME` line, up to the next
/// `@@` line.
fn section(stdout: &str, name: &str) -> String {
    stdout
        .split(&format!("@@{name}\n"))
        .nth(1)
        .and_then(|s| s.split("@@").next())
        .unwrap_or_else(|| panic!("no @@{name} in:\n{stdout}"))
        .to_string()
}

/// Peer tier: Linux 6.1 mounts the same snapshot (`mount -o ro,cp=N`) and
/// its manifest.sh prints what ours printed; it refuses a checkpoint that
/// is not a snapshot, as ours does.
#[test]
fn the_kernel_mounts_the_same_snapshot() {
    let Some(()) = nilfs_conformance::peers::require(
        "the_kernel_mounts_the_same_snapshot",
        &["qemu-system-x86_64", "busybox", "cpio"],
    ) else {
        return;
    };
    let dir = common::scratch("fuse", "snapshot-kernel");
    fuse_available(&dir).expect("the peer tier needs FUSE too");
    let (image, point, cno) = image_with_a_snapshot(&dir);
    let opt = format!("ro,cp={cno}");
    let m = Mount::attach(image.clone(), point.clone(), &["-o", &opt]).unwrap();
    let ours = manifest_of(&point);
    m.stop().unwrap();
    let script = format!(
        "mount -t nilfs2 -o ro,cp={cno} /dev/vda /mnt\necho @@M\nmanifest /mnt\numount /mnt\n\
         if mount -t nilfs2 -o ro,cp={} /dev/vda /mnt 2>/dev/null; then echo @@MOUNTED; else echo @@REFUSED; fi\necho @@END\n",
        cno + 1
    );
    let stdout = guest("fuse-snapshot", &[image], &script, &[("RO", "1")]);
    let theirs = section(&stdout, "M");
    assert_eq!(theirs, ours, "the kernel's cp={cno}, then ours");
    assert!(
        stdout.contains("@@REFUSED"),
        "the kernel mounted a plain checkpoint as a snapshot:\n{stdout}"
    );
}

/// The ioctl session both sides run, as `nilref ioctl` arguments: a
/// snapshot made and refused, checkpoints deleted and refused, the
/// statistics after each change (each `sync` first, so that the log
/// writer's timer cannot change a number), the inode generation, and
/// `lscp` (GET_CPINFO). Then, on a read-only mount, the changes refused.
const IOCTL_SESSION: &[&str] = &[
    "sync",
    "cpstat",
    "chcp ss 1",
    "chcp ss 2",
    "sync",
    "cpstat",
    "rmcp 2",
    "rmcp 3",
    "sync",
    "cpstat",
    "chcp cp 1",
    "chcp cp 4",
    "rmcp 1",
    "rmcp 99",
    "rmcp 0",
    "chcp ss 0",
    "chcp 7 2",
    "sync",
    "cpstat",
    "sustat",
    "lscp",
];
const IOCTL_SESSION_RO: &[&str] = &["sync", "chcp ss 4", "rmcp 5", "cpstat"];

/// What `nilref ioctl` printed for `session` on the mount at `point`.
fn ioctl_session(point: &Path, session: &[&str]) -> String {
    let mut out = String::new();
    for req in session {
        let mut args = vec!["ioctl", point.to_str().unwrap()];
        args.extend(req.split(' '));
        let r = common::run(&args);
        assert!(r.ok(), "nilref ioctl {req}: {}", r.err);
        out += &r.out;
    }
    out
}

/// The geometry of both sides' images: 4 KiB blocks, so that the session's
/// six checkpoints stay in the cpfile's first block. (A construction that
/// starts a new cpfile block leaves Linux 6.1 one more minor checkpoint to
/// write at the next sync or unmount: docs/findings.md K13.)
const IOCTL_MKFS: &[&str] = &["--size", "64M", "-B", "512"];

/// The FUSE side of the ioctl comparison: a fresh image, a file written
/// and the session run on the read-write mount, then the read-only one;
/// the image and the two outputs.
fn fuse_ioctl_session(dir: &Path) -> (PathBuf, String, String) {
    let m = Mount::start_with(dir, "ioctl", IOCTL_MKFS, &[]).unwrap();
    sh(&format!("echo x > {}/f", m.point.display())).unwrap();
    let mut rw = ioctl_session(&m.point, IOCTL_SESSION);
    rw += &ioctl_session(&m.point.join("f"), &["version", "flags"]);
    let point = m.point.clone();
    let image = m.stop().unwrap();
    let m = Mount::attach(image, point, &["-o", "ro"]).unwrap();
    let ro = ioctl_session(&m.point, IOCTL_SESSION_RO);
    (m.stop().unwrap(), rw, ro)
}

/// nilfs2's ioctls through FUSE (`nilref ioctl` on `nilref mount`): the
/// flat ones answer as nilfs_ioctl does — a snapshot cannot be deleted
/// (EBUSY), nor the mounted checkpoint made plain (EBUSY), a missing one is
/// ENOENT, a mode other than cp/ss EINVAL, a read-only mount EROFS, a
/// caller without CAP_SYS_ADMIN EPERM — and their changes reach the image;
/// GET_CPINFO, whose argument points into the caller's memory, is ENOTTY.
#[test]
fn nilfs_ioctls_work_through_the_fuse_mount() {
    let dir = common::scratch("fuse", "ioctl");
    if !fuse_or_skip(&dir) {
        return;
    }
    let (image, rw, ro) = fuse_ioctl_session(&dir);
    for line in [
        "sync: cno 2\n",
        "chcp ss 2: ok\n",
        "rmcp 2: EBUSY\n",
        "chcp cp 4: EBUSY\n",
        "rmcp 1: ok\n",
        "rmcp 99: ENOENT\n",
        "chcp 7 2: EINVAL\n",
        "lscp: ENOTTY\n",
        "version: generation 1\n",
        "flags: flags 0x0\n",
    ] {
        assert!(rw.contains(line), "no {line:?} in:\n{rw}");
    }
    assert_eq!(
        ro,
        "sync: EROFS\nchcp ss 4: EROFS\nrmcp 5: EROFS\ncpstat: cno 6 ncps 3 nsss 1\n"
    );
    // What the ioctls changed is on the image: 2 a snapshot, 1 and 3 gone
    // (4 and 5, which changed only the cpfile, are minor checkpoints).
    let lscp = common::run(&["lscp", "-a", image.to_str().unwrap()]);
    let modes: Vec<(String, String)> = lscp
        .out
        .lines()
        .skip(1)
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f[0].to_string(), f[3].to_string())
        })
        .collect();
    assert_eq!(
        modes,
        [("2", "ss"), ("4", "cp"), ("5", "cp")].map(|(c, m)| (c.into(), m.into())),
        "{}",
        lscp.out
    );
    check_image(&image);
    // Without CAP_SYS_ADMIN (uid 65534): EPERM before anything else.
    let m = Mount::attach(image.clone(), dir.join("ioctl.mnt"), &[]).unwrap();
    let who = sh(&format!(
        "setpriv --reuid=65534 --regid=65534 --clear-groups {} ioctl {} chcp ss 4",
        env!("CARGO_BIN_EXE_nilref"),
        m.point.display()
    ));
    m.stop().unwrap();
    assert_eq!(who.unwrap(), "chcp ss 4: EPERM\n");
}

/// Peer tier: the same session on Linux 6.1's nilfs2 in the guest, with the
/// same `nilref ioctl` binary, prints the same lines but two:
/// - GET_CPINFO, which the kernel serves (the checkpoints left: 2, a
///   snapshot, and the minor 4 and 5) and FUSE cannot (ENOTTY);
/// - the generation's value: the kernel draws each at random
///   (`get_random_u32` in `nilfs_new_inode`), nilfs-ref counts, so that a
///   run replays.
#[test]
fn nilfs_ioctls_answer_as_the_kernels() {
    let Some(()) = nilfs_conformance::peers::require(
        "nilfs_ioctls_answer_as_the_kernels",
        &["qemu-system-x86_64", "busybox", "cpio"],
    ) else {
        return;
    };
    let dir = common::scratch("fuse", "ioctl-kernel");
    fuse_available(&dir).expect("the peer tier needs FUSE too");
    let (_, rw, ro) = fuse_ioctl_session(&dir);
    let image = dir.join("kernel.img");
    mkfs(&image, IOCTL_MKFS);
    let session = |point: &str, reqs: &[&str]| {
        reqs.iter()
            .map(|r| format!("nilref ioctl {point} {r}\n"))
            .collect::<String>()
    };
    let script = format!(
        "mount -t nilfs2 /dev/vda /mnt\necho x > /mnt/f\necho @@RW\n{}{}umount /mnt\n\
         mount -t nilfs2 -o ro /dev/vda /mnt\necho @@RO\n{}umount /mnt\necho @@END\n",
        session("/mnt", IOCTL_SESSION),
        session("/mnt/f", &["version", "flags"]),
        session("/mnt", IOCTL_SESSION_RO),
    );
    let bins = [("BINS", env!("CARGO_BIN_EXE_nilref"))];
    let stdout = guest("ioctl-kernel", &[image], &script, &bins);
    let (k_rw, k_ro) = (section(&stdout, "RW"), section(&stdout, "RO"));
    assert!(k_rw.contains("lscp: checkpoints 2 4 5\n"), "{k_rw}");
    assert!(rw.contains("lscp: ENOTTY\n"), "{rw}");
    let comparable = |s: &str| {
        s.lines()
            .filter(|l| !l.starts_with("lscp: "))
            .map(|l| match l.split_once("generation ") {
                Some((head, n)) if n.parse::<u32>().is_ok() => format!("{head}generation"),
                _ => l.to_string(),
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(
        comparable(&rw),
        comparable(&k_rw),
        "nilref mount, then Linux 6.1"
    );
    assert_eq!(ro, k_ro, "read-only: nilref mount, then Linux 6.1");
}

/// What a file's access time does under reads, as a shell script over the
/// mount point `$1`: a read a second after the write (relatime would
/// update: atime is not after mtime), then a read after `touch -a` set the
/// access time years back (relatime would update: older than a day). One
/// line per step, `same` or `changed`.
const ATIME_SCRIPT: &str = r#"m=$1
echo data > $m/f
a0=$(stat -c %X $m/f)
sleep 1.1
cat $m/f > /dev/null
a1=$(stat -c %X $m/f)
[ "$a1" = "$a0" ] && echo "read after write: same" || echo "read after write: changed"
touch -a -d '2020-01-01 00:00:00' $m/f
a2=$(stat -c %X $m/f)
cat $m/f > /dev/null
a3=$(stat -c %X $m/f)
[ "$a3" = "$a2" ] && echo "read of an old atime: same" || echo "read of an old atime: changed"
[ "$a2" = "$(date -u -d '2020-01-01 00:00:00' +%s)" ] && echo "touch -a: set" || echo "touch -a: not set"
"#;

const ATIME_EXPECTED: &str = "read after write: same\nread of an old atime: same\ntouch -a: set\n";

/// nilfs2 never updates the access time on a read: nilfs.h defines
/// NILFS_ATIME_DISABLE, so nilfs_store_magic sets SB_NOATIME whatever the
/// mount options say (relatime is what /proc/mounts shows). utimensat
/// still sets it, in memory only (the disk inode has no atime). The FUSE
/// mount shows the same.
#[test]
fn reads_leave_the_access_time_alone() {
    let dir = common::scratch("fuse", "atime");
    if !fuse_or_skip(&dir) {
        return;
    }
    let m = Mount::start(&dir, "atime", &[]).unwrap();
    let script = dir.join("atime.sh");
    std::fs::write(&script, ATIME_SCRIPT).unwrap();
    let out = sh(&format!("sh {} {}", script.display(), m.point.display()));
    m.stop().unwrap();
    assert_eq!(out.unwrap(), ATIME_EXPECTED);
    // The script can tell: on tmpfs (relatime) both reads update the
    // access time.
    let tmp = dir.join("tmpfs");
    std::fs::create_dir_all(&tmp).unwrap();
    if sh(&format!(
        "mount -t tmpfs -o relatime tmpfs {}",
        tmp.display()
    ))
    .is_err()
    {
        eprintln!("reads_leave_the_access_time_alone: no tmpfs mount here; the script's own check skipped");
        return;
    }
    let out = sh(&format!("sh {} {}", script.display(), tmp.display()));
    let _ = sh(&format!("umount {}", tmp.display()));
    assert_eq!(
        out.unwrap(),
        "read after write: changed\nread of an old atime: changed\ntouch -a: set\n"
    );
}

/// Peer tier: the same script on Linux 6.1's nilfs2 prints the same.
#[test]
fn the_kernel_leaves_the_access_time_alone_too() {
    let Some(()) = nilfs_conformance::peers::require(
        "the_kernel_leaves_the_access_time_alone_too",
        &["qemu-system-x86_64", "busybox", "cpio"],
    ) else {
        return;
    };
    let dir = common::scratch("fuse", "atime-kernel");
    let image = dir.join("atime.img");
    mkfs(&image, &["--size", "32M", "-b", "1024", "-B", "64"]);
    let script = format!(
        "cat > /tmp/atime.sh <<'EOF'\n{ATIME_SCRIPT}EOF\nmount -t nilfs2 /dev/vda /mnt\necho @@OUT\nsh /tmp/atime.sh /mnt\necho @@END\numount /mnt\n"
    );
    let stdout = guest("atime-kernel", &[image], &script, &[]);
    assert_eq!(section(&stdout, "OUT"), ATIME_EXPECTED);
}

/// SET_ALLOC_RANGE's session (`nilref ioctl` arguments, byte offsets on a
/// 64 MiB image of 2 MiB segments): the kernel's ERANGE cases (past the
/// device, under 4 KiB, no whole segment before the second super block,
/// start after end), then segments 20-30 (40 MiB to the end).
const ALLOC_SESSION: &[&str] = &[
    "alloc-range 0 99999999999",
    "alloc-range 0 100",
    "alloc-range 0 8192",
    "alloc-range 62914560 47185920",
    "alloc-range 41943040 67108864",
];

/// The segments in use on `image` (`lssu`: number, flags and blocks).
fn segments_in_use(image: &Path) -> Vec<String> {
    let r = common::run(&["lssu", image.to_str().unwrap()]);
    assert!(r.ok(), "{}", r.err);
    r.out
        .lines()
        .skip(1)
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            format!("{} {} {}", f[0], f[3], f[4])
        })
        .collect()
}

/// The FUSE side: the session, then 8 MiB written and synced; the output,
/// the image.
fn fuse_alloc_session(dir: &Path) -> (String, PathBuf) {
    let m = Mount::start_with(dir, "alloc", IOCTL_MKFS, &[]).unwrap();
    let mut out = ioctl_session(&m.point, ALLOC_SESSION);
    sh(&format!(
        "dd if=/dev/zero of={}/big bs=1M count=8 2>/dev/null",
        m.point.display()
    ))
    .unwrap();
    out += &ioctl_session(&m.point, &["sync"]);
    (out, m.stop().unwrap())
}

/// SET_ALLOC_RANGE through FUSE: the refusals, and the log writer's next
/// segments come from the range (`nilfs_sufile_alloc` within
/// allocmin..allocmax).
#[test]
fn the_allocation_range_ioctl_steers_the_log_writer() {
    let dir = common::scratch("fuse", "alloc");
    if !fuse_or_skip(&dir) {
        return;
    }
    let (out, image) = fuse_alloc_session(&dir);
    assert_eq!(
        out,
        "alloc-range 0 99999999999: ERANGE\nalloc-range 0 100: ERANGE\n\
         alloc-range 0 8192: ERANGE\nalloc-range 62914560 47185920: ERANGE\n\
         alloc-range 41943040 67108864: ok\nsync: cno 2\n"
    );
    let used = segments_in_use(&image);
    let new: Vec<u64> = used
        .iter()
        .filter_map(|l| l.split(' ').next()?.parse().ok())
        .filter(|&s: &u64| s > 1)
        .collect();
    assert!(
        !new.is_empty() && new.iter().all(|s| (20..=30).contains(s)),
        "segments taken after the range was set: {used:?}"
    );
    check_image(&image);
}

/// Peer tier: Linux 6.1 answers the same session the same and its log
/// writer takes the same segments and fills them with as many blocks
/// (which found docs/findings.md L1 and L2).
#[test]
fn the_allocation_range_ioctl_matches_the_kernels() {
    let Some(()) = nilfs_conformance::peers::require(
        "the_allocation_range_ioctl_matches_the_kernels",
        &["qemu-system-x86_64", "busybox", "cpio"],
    ) else {
        return;
    };
    let dir = common::scratch("fuse", "alloc-kernel");
    fuse_available(&dir).expect("the peer tier needs FUSE too");
    let (ours, our_image) = fuse_alloc_session(&dir);
    let image = dir.join("kernel.img");
    mkfs(&image, IOCTL_MKFS);
    let mut script = String::from("mount -t nilfs2 /dev/vda /mnt\necho @@OUT\n");
    for r in ALLOC_SESSION {
        script += &format!("nilref ioctl /mnt {r}\n");
    }
    script += "dd if=/dev/zero of=/mnt/big bs=1M count=8 2>/dev/null\nnilref ioctl /mnt sync\necho @@END\numount /mnt\n";
    let bins = [("BINS", env!("CARGO_BIN_EXE_nilref"))];
    let stdout = guest("alloc-kernel", std::slice::from_ref(&image), &script, &bins);
    let theirs = section(&stdout, "OUT");
    assert_eq!(ours, theirs, "nilref mount, then Linux 6.1");
    assert_eq!(
        segments_in_use(&our_image),
        segments_in_use(&image),
        "segments in use: nilref mount's image, then the kernel's"
    );
}

/// The virtual numbers dumpseg lists for inode `ino`'s blocks in every log
/// of `image` (`vblocknr = V, ...`), sorted: which numbers the file's
/// blocks were given, whatever the order of the logs.
fn dumpseg_vblocknrs_of(image: &Path, ino: u64) -> Vec<u64> {
    let segs: Vec<String> = segments_in_use(image)
        .iter()
        .map(|l| l.split_whitespace().next().unwrap().to_string())
        .collect();
    let mut args = vec!["dumpseg", image.to_str().unwrap()];
    args.extend(segs.iter().map(String::as_str));
    let r = common::run(&args);
    assert!(r.ok(), "{}", r.err);
    let mut out = Vec::new();
    let mut current = None;
    for l in r.out.lines() {
        let l = l.trim();
        if let Some(rest) = l.strip_prefix("ino = ") {
            current = rest.split(',').next().and_then(|n| n.parse::<u64>().ok());
        } else if let Some(v) = l.strip_prefix("vblocknr = ") {
            if current == Some(ino) {
                let v = v.split(',').next().and_then(|v| v.parse().ok());
                out.push(v.unwrap_or_else(|| panic!("dumpseg line {l:?}")));
            }
        }
    }
    out.sort_unstable();
    out
}

/// Peer tier: 300 empty files created in one session give the ifile
/// blocks 3-11 (a B-tree from the eighth block on); Linux 6.1 numbers them
/// from the ifile's area of the DAT (`nilfs_bmap_find_target_in_group`
/// with `i_ino` 6, then `nilfs_bmap_find_target_seq`), and so must the
/// FUSE mount. Which block gets which number may differ where the
/// kernel numbers the new B-tree node at the conversion and we number it
/// at the construction (docs/findings.md, L3), so the numbers are
/// compared as a set.
#[test]
fn new_ifile_blocks_take_the_kernels_virtual_numbers() {
    let Some(()) = nilfs_conformance::peers::require(
        "new_ifile_blocks_take_the_kernels_virtual_numbers",
        &["qemu-system-x86_64", "busybox", "cpio"],
    ) else {
        return;
    };
    let dir = common::scratch("fuse", "ifile-kernel");
    fuse_available(&dir).expect("the peer tier needs FUSE too");
    let create =
        |mnt: &str| format!("i=0; while [ $i -lt 300 ]; do : > {mnt}/f$i; i=$((i+1)); done\n");
    let ours = {
        let m = Mount::start_with(&dir, "ifile", IOCTL_MKFS, &[]).unwrap();
        sh(&create(&m.point.display().to_string())).unwrap();
        ioctl_session(&m.point, &["sync"]);
        m.stop().unwrap()
    };
    let image = dir.join("kernel.img");
    mkfs(&image, IOCTL_MKFS);
    let script = format!(
        "mount -t nilfs2 /dev/vda /mnt\n{}nilref ioctl /mnt sync\numount /mnt\n",
        create("/mnt")
    );
    let bins = [("BINS", env!("CARGO_BIN_EXE_nilref"))];
    guest("ifile-kernel", std::slice::from_ref(&image), &script, &bins);
    let (o, k) = (
        dumpseg_vblocknrs_of(&ours, 6),
        dumpseg_vblocknrs_of(&image, 6),
    );
    assert!(
        k.iter().any(|&v| v >= 24_576),
        "the kernel's ifile blocks: {k:?}"
    );
    assert_eq!(
        o, k,
        "virtual numbers of the ifile's blocks: nilref mount, then Linux 6.1"
    );
}

/// Postmortem: `chown(f, -1, -1)` left the ctime alone on `nilref mount`
/// (the FUSE tier at `NILFS_FUSE_SEEDS=125`, attrs seed 88, judged with
/// exact times). The VFS passes ATTR_CTIME for it (`chown_common`) and
/// nilfs_setattr stamps the ctime, but the FUSE client forwards a SETATTR
/// that names nothing, and the server skipped it.
#[test]
fn regress_a_chown_that_changes_nothing_still_sets_the_ctime() {
    use std::os::unix::fs::MetadataExt;
    let dir = common::scratch("fuse", "chown-nothing");
    if !fuse_or_skip(&dir) {
        return;
    }
    let m = Mount::start(&dir, "chown-nothing", &[]).unwrap();
    let f = m.point.join("f");
    std::fs::write(&f, b"x").unwrap();
    let ctime = |f: &Path| {
        let md = std::fs::symlink_metadata(f).unwrap();
        md.ctime() as i128 * 1_000_000_000 + md.ctime_nsec() as i128
    };
    let before = ctime(&f);
    // Past the coarse clock's next tick (at most 10 ms at HZ=100).
    std::thread::sleep(std::time::Duration::from_millis(30));
    let chowned = std::os::unix::fs::chown(&f, None, None);
    let after = ctime(&f);
    m.stop().unwrap();
    chowned.unwrap();
    assert!(
        after > before,
        "chown(f, -1, -1) kept the ctime {before}; nilfs_setattr sets it"
    );
}

/// The oracle's traits over the FUSE mount (`nilfs_adapter::FuseMount`):
/// generated workloads in lockstep with the model, an operation at a time
/// through `nilref exec --stream`, unmounts and crashes (the server
/// killed) included, the image read back at every sync and mount. Times
/// are judged within each call's own clock interval.
fn fuse_config(cases: u32) -> nilfs_oracle::Config {
    nilfs_oracle::Config {
        features: Features {
            crash: true,
            ..Features::FUSE
        },
        cases,
        max_len: 30,
        regressions: None,
        ..nilfs_oracle::Config::default()
    }
}

#[test]
fn the_fuse_mount_passes_lockstep_through_the_oracles_traits() {
    let dir = common::scratch("fuse", "lockstep");
    if !fuse_or_skip(&dir) {
        return;
    }
    let cases = std::env::var("NILFS_FUSE_LOCKSTEP_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(12);
    let mut imp =
        nilfs_adapter::FuseMount::new(Path::new(env!("CARGO_BIN_EXE_nilref")), &dir.join("cases"));
    nilfs_oracle::proptest(&mut imp, &fuse_config(cases));
}

/// The same harness fails a mount whose chmod does nothing, with a
/// minimal workload that shows it.
#[test]
fn lockstep_over_the_fuse_mount_catches_an_ignored_chmod() {
    let dir = common::scratch("fuse", "lockstep-bad");
    if !fuse_or_skip(&dir) {
        return;
    }
    let mut imp =
        nilfs_adapter::FuseMount::new(Path::new(env!("CARGO_BIN_EXE_nilref")), &dir.join("cases"))
            .mount_args(&["--known-bad", "ignore-chmod"]);
    common::finds_a_dropped_chmod(&mut imp, &fuse_config(1), 40, 20);
}

/// The mount answers stats without its lock from what it published
/// (cli/src/mount/published.rs). A construction changes inodes no
/// operation named: it adds the blocks it maps to their `i_blocks`. Here
/// `b`'s stat is published before `a`'s fsync, whose construction (a new
/// inode: the whole file system) maps `b`'s blocks too; the next stat of
/// `b` must count them: the construction's settling asks `b`'s stat
/// again (`Published::refresh`). With the refresh keeping the old
/// attributes, or with no settling of constructions at all, it shows 0
/// (both checked by hand).
#[test]
fn a_stat_after_a_construction_counts_the_blocks_it_mapped() {
    let dir = common::scratch("fuse", "blocks");
    if !fuse_or_skip(&dir) {
        return;
    }
    let m = Mount::start(&dir, "blocks", &["--no-log-writer"]).unwrap();
    let out = sh(&format!(
        "cd {} && head -c 8192 /dev/zero > a && head -c 8192 /dev/zero > b && \
         stat -c %b b && sync a && stat -c %b b",
        m.point.display()
    ));
    m.stop().unwrap();
    // Eight 1 KiB data blocks and the B-tree node that maps them (more
    // than the inode's seven direct pointers): 18 sectors.
    assert_eq!(
        out.unwrap(),
        "0\n18\n",
        "i_blocks of b before and after a's fsync"
    );
}
