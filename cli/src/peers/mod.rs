//! `nilref peers`: the real NILFS2 implementations this oracle judges,
//! pinned in tests/peers.toml (compiled in) to Debian packages by exact
//! version and SHA-256, fetched into a cache of our own and unpacked with
//! `dpkg-deb -x`, never installed over the host's /boot, /lib/modules or
//! /usr. A campaign or test names the version it judges (`--kernel 6.12`);
//! when it names none it gets the entry marked `default`, never "whatever
//! the host happens to have".
//!
//! The cache (`$NILFS_PEER_CACHE`, default `~/.cache/nilfs-ref-peers`):
//! - `debs/`: the downloaded packages, checked against their pinned SHA-256;
//! - `apt/`: a private apt state for the five suites, on the mirror the
//!   host's own apt sources name (so nothing here names a host);
//! - `KIND-VERSION/`: `root` holds the unpacked packages, `bin` a wrapper per
//!   program that runs it with its runtime's loader and libraries;
//!   `peer.env`: what the harness scripts read (`KERNEL_ROOT`, `KVER`,
//!   `GRUB_FSTEST`, `NILFS_UTILS_BIN`, `BLKID`);
//! - `KIND.env`: a copy of the default version's `peer.env`, which
//!   tests/guest's scripts read when the caller names no version.

mod fetch;

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde::Deserialize;

pub use fetch::fetch;

/// The pinned peers, as committed.
pub const MANIFEST: &str = include_str!("../../../tests/peers.toml");

/// One Debian package at one exact version.
#[derive(Debug, Clone, Deserialize)]
pub struct Package {
    pub name: String,
    pub version: String,
    pub sha256: String,
}

impl Package {
    /// The file name `apt-get download` gives it (an epoch's colon becomes
    /// "%3a").
    fn file_name(&self) -> String {
        format!(
            "{}_{}_amd64.deb",
            self.name,
            self.version.replace(':', "%3a")
        )
    }
}

/// One version of one peer.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Peer {
    pub version: String,
    /// A kernel's `uname -r` (its module directory's name).
    pub release: Option<String>,
    pub suite: String,
    #[serde(default)]
    pub default: bool,
    /// The `[[runtime]]` whose loader and libraries run its programs;
    /// none: the host's (a Debian 12 host runs Debian 12's programs).
    pub runtime: Option<String>,
    pub packages: Vec<Package>,
}

/// A set of shared libraries from one suite.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Runtime {
    pub name: String,
    pub suite: String,
    pub packages: Vec<Package>,
}

/// tests/peers.toml.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Manifest {
    pub kernel: Vec<Peer>,
    pub grub: Vec<Peer>,
    #[serde(rename = "nilfs-utils")]
    pub nilfs_utils: Vec<Peer>,
    pub blkid: Vec<Peer>,
    pub runtime: Vec<Runtime>,
}

/// The kinds of peer, as campaigns name them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    Kernel,
    Grub,
    NilfsUtils,
    Blkid,
}

impl Kind {
    pub const ALL: [Kind; 4] = [Kind::Kernel, Kind::Grub, Kind::NilfsUtils, Kind::Blkid];

    pub fn name(self) -> &'static str {
        match self {
            Kind::Kernel => "kernel",
            Kind::Grub => "grub",
            Kind::NilfsUtils => "nilfs-utils",
            Kind::Blkid => "blkid",
        }
    }

    pub fn parse(s: &str) -> Result<Kind, String> {
        Kind::ALL
            .into_iter()
            .find(|k| k.name() == s)
            .ok_or_else(|| format!("unknown peer kind `{s}` (kernel, grub, nilfs-utils, blkid)"))
    }
}

impl Manifest {
    /// The committed manifest. It is checked by a unit test, so this
    /// cannot fail in a built binary.
    pub fn pinned() -> Manifest {
        Manifest::parse(MANIFEST).expect("tests/peers.toml is checked by the unit tests")
    }

    pub fn parse(text: &str) -> Result<Manifest, String> {
        let m: Manifest = toml::from_str(text).map_err(|e| format!("peers.toml: {e}"))?;
        m.validate()?;
        Ok(m)
    }

    fn validate(&self) -> Result<(), String> {
        for kind in Kind::ALL {
            let peers = self.of(kind);
            let defaults = peers.iter().filter(|p| p.default).count();
            if !peers.is_empty() && defaults != 1 {
                return Err(format!(
                    "peers.toml: {} has {defaults} default versions; exactly one must be named",
                    kind.name()
                ));
            }
            for p in peers {
                if peers.iter().filter(|q| q.version == p.version).count() > 1 {
                    return Err(format!("peers.toml: {} {} twice", kind.name(), p.version));
                }
                if kind == Kind::Kernel && p.release.is_none() {
                    return Err(format!("peers.toml: kernel {} has no release", p.version));
                }
                if let Some(r) = &p.runtime {
                    if !self.runtime.iter().any(|x| &x.name == r) {
                        return Err(format!(
                            "peers.toml: {} {} names runtime `{r}`, which is not defined",
                            kind.name(),
                            p.version
                        ));
                    }
                }
                check_packages(&p.packages)?;
            }
        }
        for r in &self.runtime {
            check_packages(&r.packages)?;
        }
        Ok(())
    }

    pub fn of(&self, kind: Kind) -> &[Peer] {
        match kind {
            Kind::Kernel => &self.kernel,
            Kind::Grub => &self.grub,
            Kind::NilfsUtils => &self.nilfs_utils,
            Kind::Blkid => &self.blkid,
        }
    }

    /// The named version of a peer, or its default. A version matches
    /// exactly, or as a prefix at a dot (`7` finds `7.3`).
    pub fn find(&self, kind: Kind, version: Option<&str>) -> Result<&Peer, String> {
        let peers = self.of(kind);
        let found = match version {
            None => peers.iter().find(|p| p.default),
            Some(v) => peers.iter().find(|p| p.version == v).or_else(|| {
                let dotted = format!("{v}.");
                let mut m = peers.iter().filter(|p| p.version.starts_with(&dotted));
                match (m.next(), m.next()) {
                    (Some(p), None) => Some(p),
                    _ => None,
                }
            }),
        };
        found.ok_or_else(|| {
            let known: Vec<&str> = peers.iter().map(|p| p.version.as_str()).collect();
            format!(
                "no pinned {} {} (tests/peers.toml has: {})",
                kind.name(),
                version.unwrap_or("default"),
                known.join(", ")
            )
        })
    }

    fn runtime(&self, name: &str) -> &Runtime {
        self.runtime
            .iter()
            .find(|r| r.name == name)
            .expect("validated: every named runtime exists")
    }
}

fn check_packages(packages: &[Package]) -> Result<(), String> {
    for p in packages {
        if p.sha256.len() != 64 || !p.sha256.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(format!(
                "peers.toml: {} {}: sha256 is not 64 hex digits",
                p.name, p.version
            ));
        }
    }
    Ok(())
}

/// Where fetched peers live.
pub fn cache_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("NILFS_PEER_CACHE") {
        return PathBuf::from(d);
    }
    let base = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .unwrap_or_else(std::env::temp_dir);
    base.join("nilfs-ref-peers")
}

/// A fetched peer: where it is and the environment the harness reads.
#[derive(Debug, Clone)]
pub struct Installed {
    /// The pinned version (`6.12`, `2.14`).
    pub version: String,
    /// What tests/guest's scripts read (`KERNEL_ROOT`, `GRUB_FSTEST`, ...).
    pub env: BTreeMap<String, String>,
}

impl Installed {
    /// The fetched peer, or an error that says how to fetch it.
    pub fn get(kind: Kind, version: Option<&str>) -> Result<Installed, String> {
        let m = Manifest::pinned();
        let peer = m.find(kind, version)?;
        let dir = peer_dir(&cache_dir(), kind, peer);
        let env = read_env(&dir.join("peer.env")).ok_or_else(|| {
            format!(
                "{} {} is pinned but not fetched here: run `nilref peers fetch {}={}`",
                kind.name(),
                peer.version,
                kind.name(),
                peer.version
            )
        })?;
        Ok(Installed {
            version: peer.version.clone(),
            env,
        })
    }

    /// Sets this peer's environment on a command (for tests/guest's scripts).
    pub fn apply(&self, cmd: &mut Command) {
        for (k, v) in &self.env {
            cmd.env(k, v);
        }
    }
}

pub(crate) fn peer_dir(cache: &Path, kind: Kind, peer: &Peer) -> PathBuf {
    cache.join(format!("{}-{}", kind.name(), peer.version))
}

fn read_env(path: &Path) -> Option<BTreeMap<String, String>> {
    let text = std::fs::read_to_string(path).ok()?;
    Some(
        text.lines()
            .filter_map(|l| l.split_once('='))
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    )
}

/// `nilref peers` subcommands.
#[derive(clap::Subcommand)]
pub enum Cmd {
    /// Every pinned version, and whether it is fetched here.
    List,
    /// Download (checking each package's SHA-256) and unpack the pinned
    /// peers: all, every version of KIND, or KIND=VERSION.
    Fetch {
        /// kernel, grub, nilfs-utils, blkid; or KIND=VERSION (e.g. kernel=6.12).
        which: Vec<String>,
    },
    /// The environment tests/guest's scripts read for one fetched peer.
    Env {
        /// kernel, grub, nilfs-utils or blkid.
        kind: String,
        /// The pinned version (default: the default one).
        version: Option<String>,
    },
}

/// Runs `nilref peers [CMD]` (no subcommand: `list`).
pub fn run(cmd: Option<Cmd>) -> Result<String, String> {
    match cmd.unwrap_or(Cmd::List) {
        Cmd::List => Ok(list()),
        Cmd::Fetch { which } => fetch(&which),
        Cmd::Env { kind, version } => env(&kind, version.as_deref()),
    }
}

/// `nilref peers [list]`: every pinned version, and whether it is here.
pub fn list() -> String {
    let m = Manifest::pinned();
    let cache = cache_dir();
    let mut out = String::new();
    let _ = writeln!(out, "peer cache: {}", cache.display());
    let _ = writeln!(
        out,
        "{:<12} {:<8} {:<17} {:<8} status",
        "peer", "version", "suite", "default"
    );
    for kind in Kind::ALL {
        for p in m.of(kind) {
            let dir = peer_dir(&cache, kind, p);
            let status = if dir.join("peer.env").is_file() {
                format!("fetched: {}", dir.display())
            } else {
                format!("missing: nilref peers fetch {}={}", kind.name(), p.version)
            };
            let _ = writeln!(
                out,
                "{:<12} {:<8} {:<17} {:<8} {}",
                kind.name(),
                p.version,
                p.suite,
                if p.default { "yes" } else { "" },
                status
            );
        }
    }
    out
}

/// `nilref peers env KIND [VERSION]`: the `peer.env` lines of a fetched peer.
pub fn env(kind: &str, version: Option<&str>) -> Result<String, String> {
    let inst = Installed::get(Kind::parse(kind)?, version)?;
    Ok(inst.env.iter().map(|(k, v)| format!("{k}={v}\n")).collect())
}

/// What `nilref peers fetch` was asked for: `KIND` (every version) or
/// `KIND=VERSION`; nothing: everything pinned.
pub fn select(m: &Manifest, args: &[String]) -> Result<Vec<(Kind, Peer)>, String> {
    let mut out: Vec<(Kind, Peer)> = Vec::new();
    if args.is_empty() {
        for kind in Kind::ALL {
            out.extend(m.of(kind).iter().map(|p| (kind, p.clone())));
        }
        return Ok(out);
    }
    for a in args {
        let (k, v) = match a.split_once('=') {
            Some((k, v)) => (k, Some(v)),
            None => (a.as_str(), None),
        };
        let kind = Kind::parse(k)?;
        match v {
            Some(v) => out.push((kind, m.find(kind, Some(v))?.clone())),
            None => out.extend(m.of(kind).iter().map(|p| (kind, p.clone()))),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_committed_manifest_is_valid_and_names_each_default() {
        let m = Manifest::parse(MANIFEST).unwrap();
        for kind in Kind::ALL {
            assert!(m.find(kind, None).is_ok(), "{} has a default", kind.name());
        }
        assert_eq!(m.find(Kind::Kernel, None).unwrap().version, "6.1");
        assert_eq!(m.find(Kind::Kernel, Some("7")).unwrap().version, "7.3");
        assert_eq!(m.find(Kind::Grub, Some("2.14")).unwrap().suite, "sid");
    }

    #[test]
    fn a_manifest_with_two_defaults_or_a_bad_checksum_is_refused() {
        let two = MANIFEST.replace(
            "version = \"6.12\"\nrelease",
            "version = \"6.12\"\ndefault = true\nrelease",
        );
        assert!(Manifest::parse(&two).unwrap_err().contains("2 default"));
        let bad = MANIFEST.replacen(
            "7b5597492a0a65aee61985a492e6bcc3f2cde830072a0e3b3d8c7e1b90279bd3",
            "7b55",
            1,
        );
        assert!(Manifest::parse(&bad).unwrap_err().contains("64 hex"));
        let unknown_rt = MANIFEST.replacen("runtime = \"trixie\"", "runtime = \"forky\"", 1);
        assert!(Manifest::parse(&unknown_rt)
            .unwrap_err()
            .contains("not defined"));
    }

    #[test]
    fn an_ambiguous_or_unknown_version_is_an_error_not_a_guess() {
        let m = Manifest::parse(MANIFEST).unwrap();
        // "6" could be 6.1 or 6.12.
        assert!(m.find(Kind::Kernel, Some("6")).is_err());
        assert!(m.find(Kind::Kernel, Some("5.10")).is_err());
        assert!(m.find(Kind::Grub, Some("2.1")).is_err());
    }

    #[test]
    fn epochs_become_apt_file_names() {
        let p = Package {
            name: "libcap2".into(),
            version: "1:2.75-10".into(),
            sha256: String::new(),
        };
        assert_eq!(p.file_name(), "libcap2_1%3a2.75-10_amd64.deb");
    }
}
