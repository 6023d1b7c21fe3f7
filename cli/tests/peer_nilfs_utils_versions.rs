//! Every pinned nilfs-utils version (tests/peers.toml: Debian 12's 2.2.9
//! and Debian 13's 2.2.11), run from the peer cache, against `nilref ...
//! --like VERSION` (peer tier, `NILFS_PEERS=1`, after `nilref peers
//! fetch`):
//! - its mkfs.nilfs2, given back the CRC seed, UUID and time it drew, is
//!   byte-identical to `nilref mkfs --like V` (2.2.9 makes /.nilfs, 2.2.11
//!   does not);
//! - its `nilfs-tune -l` prints exactly what `nilref tune -l --like V`
//!   prints (2.2.9 opens with a version banner and prints `s_bytes` in 8
//!   hex digits, 2.2.11 neither);
//! - its dumpseg prints exactly what `nilref dumpseg` prints.
//!
//! Known-bad: each version's output judged as the other's differs, so the
//! `--like` switch is what makes these pass.

use std::path::{Path, PathBuf};
use std::process::Command;

use nilfs_conformance::peers::{self, Loop, Scratch};

const VERSIONS: [&str; 2] = ["2.2.9", "2.2.11"];

fn nilref() -> Command {
    Command::new(env!("CARGO_BIN_EXE_nilref"))
}

/// The folder of `version`'s wrapped programs in the peer cache.
fn tools(version: &str) -> PathBuf {
    let env = peers::run_ok(nilref().args(["peers", "env", "nilfs-utils", version]));
    let bin = env
        .lines()
        .find_map(|l| l.strip_prefix("NILFS_UTILS_BIN="))
        .unwrap_or_else(|| panic!("no NILFS_UTILS_BIN in {env}"));
    PathBuf::from(bin)
}

fn superblock_inputs(img: &Path) -> (u32, String) {
    let bytes = std::fs::read(img).unwrap();
    let sb = nilfs::format::superblock::SuperBlock::decode_valid(&bytes[1024..2048]).unwrap();
    let u = sb.uuid;
    let uuid = format!(
        "{:02x}{:02x}{:02x}{:02x}-{:02x}{:02x}-{:02x}{:02x}-{:02x}{:02x}-{:02x}{:02x}{:02x}{:02x}{:02x}{:02x}",
        u[0], u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13], u[14], u[15]
    );
    (sb.crc_seed, uuid)
}

#[test]
fn every_pinned_nilfs_utils_prints_as_nilref_like_it() {
    let Some(()) = peers::require(
        "every_pinned_nilfs_utils_prints_as_nilref_like_it",
        &["losetup"],
    ) else {
        return;
    };
    let dir = Scratch::new("nilfs-utils-versions");
    let mut tunes = Vec::new();
    for (i, v) in VERSIONS.iter().enumerate() {
        let bin = tools(v);
        let theirs = dir.file(&format!("theirs-{v}.img"));
        std::fs::File::create(&theirs)
            .unwrap()
            .set_len(96 << 20)
            .unwrap();
        let ctime = (1_700_000_000 + i * 86_400).to_string();
        peers::run_ok(
            Command::new(bin.join("mkfs.nilfs2"))
                .args(["-q", "-f", "-b", "2048", "-B", "512", "-L", "vers", "-P"])
                .arg(&ctime)
                .arg(&theirs),
        );
        let (seed, uuid) = superblock_inputs(&theirs);
        let ours = dir.file(&format!("ours-{v}.img"));
        peers::run_ok(
            nilref()
                .arg("mkfs")
                .arg(&ours)
                .args(["--size", "96M", "-b", "2048", "-B", "512", "-L", "vers"])
                .args(["--ctime", &ctime, "--crc-seed", &seed.to_string()])
                .args(["--uuid", &uuid, "--like", v]),
        );
        let (a, b) = (
            std::fs::read(&theirs).unwrap(),
            std::fs::read(&ours).unwrap(),
        );
        if let Some(at) = a.iter().zip(&b).position(|(x, y)| x != y) {
            panic!("mkfs.nilfs2 {v} and nilref mkfs --like {v}: first difference at byte {at}");
        }
        assert_eq!(a.len(), b.len(), "{v}: image sizes");

        let lo = Loop::attach(&theirs);
        let tune = peers::run_ok(Command::new(bin.join("nilfs-tune")).args(["-l", &lo.dev]));
        let our_tune = peers::run_ok(nilref().args(["tune", "-l", "--like", v]).arg(&theirs));
        assert_eq!(our_tune, tune, "nilfs-tune -l {v}");
        let dumpseg = peers::run_ok(Command::new(bin.join("dumpseg")).args([&lo.dev, "0", "1"]));
        let ours_ds = peers::run_ok(nilref().arg("dumpseg").arg(&theirs).args(["0", "1"]));
        assert_eq!(ours_ds, dumpseg, "dumpseg {v}");
        tunes.push((v, tune, theirs));
    }
    // Known-bad: each version's nilfs-tune judged as the other's differs.
    for (v, tune, img) in &tunes {
        let other = VERSIONS.iter().find(|o| *o != *v).unwrap();
        let wrong = peers::run_ok(nilref().args(["tune", "-l", "--like", other]).arg(img));
        assert_ne!(
            &wrong, tune,
            "{v}'s nilfs-tune is indistinguishable from {other}'s"
        );
    }
}
