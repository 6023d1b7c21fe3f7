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
//! - `KIND-VERSION/root/`: the unpacked packages; `bin/`: a wrapper per
//!   program that runs it with its runtime's loader and libraries;
//!   `peer.env`: what the harness scripts read (`KERNEL_ROOT`, `KVER`,
//!   `GRUB_FSTEST`, `NILFS_UTILS_BIN`, `BLKID`);
//! - `KIND.env`: a copy of the default version's `peer.env`, which
//!   tests/guest's scripts read when the caller names no version.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde::Deserialize;
use sha2::{Digest, Sha256};

/// The pinned peers, as committed.
pub const MANIFEST: &str = include_str!("../../tests/peers.toml");

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
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    #[serde(default)]
    pub kernel: Vec<Peer>,
    #[serde(default)]
    pub grub: Vec<Peer>,
    #[serde(default, rename = "nilfs-utils")]
    pub nilfs_utils: Vec<Peer>,
    #[serde(default)]
    pub blkid: Vec<Peer>,
    #[serde(default)]
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
    pub kind: Kind,
    pub version: String,
    pub dir: PathBuf,
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
            kind,
            version: peer.version.clone(),
            dir,
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

fn peer_dir(cache: &Path, kind: Kind, peer: &Peer) -> PathBuf {
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

/// `nilref peers [list]`: every pinned version, and whether it is here.
pub fn list() -> String {
    let m = Manifest::pinned();
    let cache = cache_dir();
    let mut out = String::new();
    let _ = writeln!(out, "peer cache: {}", cache.display());
    let _ = writeln!(
        out,
        "{:<12} {:<8} {:<17} {:<8} {}",
        "peer", "version", "suite", "default", "status"
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

/// `nilref peers fetch [KIND[=VERSION]...]`: download, check and unpack.
/// Idempotent: what is already here and whole is left as it is.
pub fn fetch(args: &[String]) -> Result<String, String> {
    let m = Manifest::pinned();
    let chosen = select(&m, args)?;
    let cache = cache_dir();
    std::fs::create_dir_all(cache.join("debs")).map_err(|e| io_err(&cache, &e))?;
    let mut apt = Apt::new(&cache);
    let mut report = String::new();
    for (kind, peer) in &chosen {
        let dir = peer_dir(&cache, *kind, peer);
        let runtime = match &peer.runtime {
            Some(name) => Some(fetch_runtime(&mut apt, &cache, m.runtime(name))?),
            None => None,
        };
        if !dir.join("peer.env").is_file() {
            let debs = peer
                .packages
                .iter()
                .map(|p| apt.deb(p, &peer.suite))
                .collect::<Result<Vec<_>, _>>()?;
            install(&dir, *kind, peer, &debs, runtime.as_deref())?;
        }
        if peer.default {
            let env = std::fs::read(dir.join("peer.env")).map_err(|e| io_err(&dir, &e))?;
            let link = cache.join(format!("{}.env", kind.name()));
            std::fs::write(&link, env).map_err(|e| io_err(&link, &e))?;
        }
        let _ = writeln!(
            report,
            "{} {}: {}",
            kind.name(),
            peer.version,
            dir.display()
        );
    }
    Ok(report)
}

fn fetch_runtime(apt: &mut Apt, cache: &Path, rt: &Runtime) -> Result<PathBuf, String> {
    let dir = cache.join(format!("runtime-{}", rt.name));
    let root = dir.join("root");
    if dir.join(".complete").is_file() {
        return Ok(root);
    }
    let debs = rt
        .packages
        .iter()
        .map(|p| apt.deb(p, &rt.suite))
        .collect::<Result<Vec<_>, _>>()?;
    unpack(&root, &debs)?;
    let ld = root.join(LOADER);
    if !ld.is_file() {
        return Err(format!(
            "runtime {}: no loader at {} (is libc6 in its packages?)",
            rt.name,
            ld.display()
        ));
    }
    touch(&dir.join(".complete"))?;
    Ok(root)
}

/// The x86-64 ELF interpreter inside a runtime root.
const LOADER: &str = "usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2";

/// Unpacks `debs` into `dir/root`, writes the wrappers and `peer.env`.
fn install(
    dir: &Path,
    kind: Kind,
    peer: &Peer,
    debs: &[PathBuf],
    runtime: Option<&Path>,
) -> Result<(), String> {
    if dir.exists() {
        std::fs::remove_dir_all(dir).map_err(|e| io_err(dir, &e))?;
    }
    let root = dir.join("root");
    unpack(&root, debs)?;
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).map_err(|e| io_err(&bin, &e))?;
    let mut env: Vec<(String, String)> = vec![(
        format!("{}_PEER", kind.name().to_uppercase().replace('-', "_")),
        peer.version.clone(),
    )];
    match kind {
        Kind::Kernel => {
            let kver = peer.release.clone().expect("validated");
            kernel_layout(&root, &kver)?;
            env.push(("KERNEL_ROOT".into(), root.display().to_string()));
            env.push(("KVER".into(), kver));
        }
        Kind::Grub | Kind::NilfsUtils | Kind::Blkid => {
            let programs = wrap_programs(&root, &bin, runtime)?;
            let need: &[&str] = match kind {
                Kind::Grub => &["grub-fstest"],
                Kind::NilfsUtils => &["mkfs.nilfs2", "lscp", "lssu", "dumpseg", "nilfs-tune"],
                _ => &["blkid"],
            };
            for n in need {
                if !programs.iter().any(|p| p == n) {
                    return Err(format!(
                        "{} {}: the packages hold no `{n}`",
                        kind.name(),
                        peer.version
                    ));
                }
                check_resolves(&bin.join(n), &root, runtime)?;
            }
            match kind {
                Kind::Grub => env.push((
                    "GRUB_FSTEST".into(),
                    bin.join("grub-fstest").display().to_string(),
                )),
                Kind::NilfsUtils => env.push(("NILFS_UTILS_BIN".into(), bin.display().to_string())),
                _ => env.push(("BLKID".into(), bin.join("blkid").display().to_string())),
            }
        }
    }
    let text: String = env.iter().map(|(k, v)| format!("{k}={v}\n")).collect();
    let tmp = dir.join(".peer.env.tmp");
    std::fs::write(&tmp, text).map_err(|e| io_err(&tmp, &e))?;
    std::fs::rename(&tmp, dir.join("peer.env")).map_err(|e| io_err(dir, &e))
}

/// A kernel package's vmlinuz and module tree, wherever this Debian put
/// them: /boot and /lib/modules up to 6.1, /usr/lib/modules in 6.12, the
/// kernel itself in /usr/lib/modules/KVER/vmlinuz from 7.x.
fn kernel_layout(root: &Path, kver: &str) -> Result<(), String> {
    let vmlinuz = [
        root.join(format!("boot/vmlinuz-{kver}")),
        root.join(format!("usr/lib/modules/{kver}/vmlinuz")),
    ];
    let mods = [
        root.join(format!("lib/modules/{kver}")),
        root.join(format!("usr/lib/modules/{kver}")),
    ];
    if !vmlinuz.iter().any(|p| p.is_file()) {
        return Err(format!("kernel {kver}: no vmlinuz in the packages"));
    }
    let has_nilfs = mods.iter().any(|d| {
        let f = d.join("kernel/fs/nilfs2");
        ["nilfs2.ko", "nilfs2.ko.xz", "nilfs2.ko.zst"]
            .iter()
            .any(|n| f.join(n).is_file())
    });
    if !has_nilfs {
        return Err(format!("kernel {kver}: no nilfs2 module in the packages"));
    }
    Ok(())
}

/// A wrapper in `bin` for every executable of the package's bin and sbin
/// folders; returns their names.
fn wrap_programs(root: &Path, bin: &Path, runtime: Option<&Path>) -> Result<Vec<String>, String> {
    let mut libs: Vec<PathBuf> = ["usr/lib/x86_64-linux-gnu", "lib/x86_64-linux-gnu"]
        .iter()
        .map(|d| root.join(d))
        .filter(|d| d.is_dir())
        .collect();
    if let Some(rt) = runtime {
        libs.extend(
            ["usr/lib/x86_64-linux-gnu", "lib/x86_64-linux-gnu"]
                .iter()
                .map(|d| rt.join(d))
                .filter(|d| d.is_dir()),
        );
    }
    let lib_path = libs
        .iter()
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>()
        .join(":");
    let mut names = Vec::new();
    for sub in ["usr/bin", "usr/sbin", "bin", "sbin"] {
        let Ok(rd) = std::fs::read_dir(root.join(sub)) else {
            continue;
        };
        let mut entries: Vec<PathBuf> = rd.filter_map(|e| e.ok().map(|e| e.path())).collect();
        entries.sort();
        for prog in entries {
            if !is_elf_executable(&prog) {
                continue;
            }
            let name = prog.file_name().unwrap().to_string_lossy().into_owned();
            let script = match runtime {
                Some(rt) => format!(
                    "#!/bin/sh\n# {name}, run with its own Debian's loader and libraries\nexec '{}' --argv0 '{name}' --library-path '{lib_path}' '{}' \"$@\"\n",
                    rt.join(LOADER).display(),
                    prog.display()
                ),
                None if lib_path.is_empty() => {
                    format!("#!/bin/sh\nexec '{}' \"$@\"\n", prog.display())
                }
                None => format!(
                    "#!/bin/sh\n# {name}, with the libraries its package ships first\nLD_LIBRARY_PATH='{lib_path}'${{LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}} exec '{}' \"$@\"\n",
                    prog.display()
                ),
            };
            let w = bin.join(&name);
            std::fs::write(&w, script).map_err(|e| io_err(&w, &e))?;
            set_mode(&w, 0o755)?;
            names.push(name);
        }
    }
    Ok(names)
}

fn is_elf_executable(p: &Path) -> bool {
    use std::io::Read;
    use std::os::unix::fs::PermissionsExt;
    let Ok(meta) = std::fs::metadata(p) else {
        return false;
    };
    if !meta.is_file() || meta.permissions().mode() & 0o111 == 0 {
        return false;
    }
    let mut magic = [0u8; 4];
    std::fs::File::open(p)
        .and_then(|mut f| f.read_exact(&mut magic))
        .is_ok()
        && magic == *b"\x7fELF"
}

/// Every shared library of a wrapped program must resolve inside the
/// peer's and its runtime's roots (or, for a host-runtime peer, on the
/// host): a missing one would otherwise surface as a confusing failure in
/// the middle of a campaign.
fn check_resolves(wrapper: &Path, root: &Path, runtime: Option<&Path>) -> Result<(), String> {
    let script = std::fs::read_to_string(wrapper).map_err(|e| io_err(wrapper, &e))?;
    let out = match runtime {
        Some(rt) => {
            // Same loader and library path as the wrapper, asked to list.
            let lib_path = script
                .split("--library-path '")
                .nth(1)
                .and_then(|s| s.split('\'').next())
                .unwrap_or_default()
                .to_string();
            let prog = script.rsplit('\'').nth(1).unwrap_or_default().to_string();
            Command::new(rt.join(LOADER))
                .args(["--library-path", &lib_path, "--list", &prog])
                .output()
        }
        None => {
            let prog = script.rsplit('\'').nth(1).unwrap_or_default().to_string();
            let libs = ["usr/lib/x86_64-linux-gnu", "lib/x86_64-linux-gnu"]
                .iter()
                .map(|d| root.join(d).display().to_string())
                .collect::<Vec<_>>()
                .join(":");
            Command::new("ldd")
                .arg(&prog)
                .env("LD_LIBRARY_PATH", libs)
                .output()
        }
    }
    .map_err(|e| format!("{}: cannot list its libraries: {e}", wrapper.display()))?;
    let listing = String::from_utf8_lossy(&out.stdout);
    let missing: Vec<&str> = listing
        .lines()
        .filter(|l| l.contains("not found"))
        .collect();
    if !out.status.success() || !missing.is_empty() {
        return Err(format!(
            "{}: its libraries do not resolve:\n{}{}",
            wrapper.display(),
            missing.join("\n"),
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(())
}

/// `dpkg-deb -x` of every package into `root`, through a temporary folder
/// renamed into place, so a half-unpacked root is never taken for whole.
fn unpack(root: &Path, debs: &[PathBuf]) -> Result<(), String> {
    let parent = root.parent().expect("a root has a parent");
    std::fs::create_dir_all(parent).map_err(|e| io_err(parent, &e))?;
    let tmp = parent.join(format!(".unpack.{}", std::process::id()));
    if tmp.exists() {
        std::fs::remove_dir_all(&tmp).map_err(|e| io_err(&tmp, &e))?;
    }
    for d in debs {
        run(Command::new("dpkg-deb").arg("-x").arg(d).arg(&tmp))?;
    }
    if root.exists() {
        std::fs::remove_dir_all(root).map_err(|e| io_err(root, &e))?;
    }
    std::fs::rename(&tmp, root).map_err(|e| io_err(root, &e))
}

/// apt-get with a private state: the five suites the peers come from,
/// on the mirror the host's apt sources name.
struct Apt {
    dir: PathBuf,
    debs: PathBuf,
    updated: bool,
}

const SUITES: [&str; 5] = [
    "bookworm",
    "bookworm-backports",
    "trixie",
    "trixie-backports",
    "sid",
];

impl Apt {
    fn new(cache: &Path) -> Apt {
        Apt {
            dir: cache.join("apt"),
            debs: cache.join("debs"),
            updated: false,
        }
    }

    fn options(&self) -> Vec<String> {
        let d = &self.dir;
        vec![
            format!(
                "-oDir::Etc::SourceList={}",
                d.join("sources.list").display()
            ),
            format!("-oDir::Etc::SourceParts={}", d.join("parts").display()),
            format!("-oDir::State::Lists={}", d.join("lists").display()),
            format!("-oDir::Cache={}", d.join("cache").display()),
            "-oAPT::Sandbox::User=root".into(),
            "-qq".into(),
        ]
    }

    fn update(&mut self) -> Result<(), String> {
        if self.updated {
            return Ok(());
        }
        let mirror = host_mirror()?;
        for sub in ["parts", "lists/partial", "cache/archives/partial"] {
            let p = self.dir.join(sub);
            std::fs::create_dir_all(&p).map_err(|e| io_err(&p, &e))?;
        }
        let sources: String = SUITES
            .iter()
            .map(|s| format!("deb [arch=amd64] {mirror} {s} main\n"))
            .collect();
        let list = self.dir.join("sources.list");
        std::fs::write(&list, sources).map_err(|e| io_err(&list, &e))?;
        eprintln!("peers: reading the package lists of {}", SUITES.join(", "));
        run(Command::new("apt-get").args(self.options()).arg("update"))?;
        self.updated = true;
        Ok(())
    }

    /// The package file, downloaded if it is not here whole.
    fn deb(&mut self, p: &Package, suite: &str) -> Result<PathBuf, String> {
        let path = self.debs.join(p.file_name());
        if path.is_file() && sha256_file(&path)? == p.sha256 {
            return Ok(path);
        }
        self.update()?;
        eprintln!("peers: downloading {} {} ({suite})", p.name, p.version);
        let got = Command::new("apt-get")
            .args(self.options())
            .arg("download")
            .arg(format!("{}={}", p.name, p.version))
            .current_dir(&self.debs)
            .output()
            .map_err(|e| format!("apt-get: {e}"))?;
        if !got.status.success() || !path.is_file() {
            let served = Command::new("apt-cache")
                .args(self.options())
                .args(["madison", &p.name])
                .output()
                .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
                .unwrap_or_default();
            return Err(format!(
                "{} {} is pinned in tests/peers.toml but not served by {suite} any more \
                 (apt-get: {}).\nWhat the suites serve now:\n{served}Re-pin it \
                 (version and sha256, and a kernel's release).",
                p.name,
                p.version,
                String::from_utf8_lossy(&got.stderr).trim()
            ));
        }
        let sum = sha256_file(&path)?;
        if sum != p.sha256 {
            let _ = std::fs::remove_file(&path);
            return Err(format!(
                "{} {}: SHA-256 {sum} is not the pinned {}",
                p.name, p.version, p.sha256
            ));
        }
        Ok(path)
    }
}

/// The Debian archive the host's apt already uses (its first non-security
/// source), or `$NILFS_PEER_MIRROR`.
fn host_mirror() -> Result<String, String> {
    if let Ok(m) = std::env::var("NILFS_PEER_MIRROR") {
        return Ok(m);
    }
    let mut texts = Vec::new();
    if let Ok(rd) = std::fs::read_dir("/etc/apt/sources.list.d") {
        let mut files: Vec<PathBuf> = rd.filter_map(|e| e.ok().map(|e| e.path())).collect();
        files.sort();
        for f in files {
            if f.extension().is_some_and(|x| x == "sources" || x == "list") {
                texts.push(std::fs::read_to_string(&f).unwrap_or_default());
            }
        }
    }
    texts.push(std::fs::read_to_string("/etc/apt/sources.list").unwrap_or_default());
    for text in &texts {
        for line in text.lines() {
            let uri = if let Some(rest) = line.trim().strip_prefix("URIs:") {
                rest.split_whitespace().next()
            } else if let Some(rest) = line.trim().strip_prefix("deb ") {
                rest.split_whitespace().find(|w| w.contains("://"))
            } else {
                None
            };
            if let Some(u) = uri {
                if u.trim_end_matches('/').ends_with("/debian") {
                    return Ok(u.to_string());
                }
            }
        }
    }
    Err("peers: the host's apt sources name no Debian archive; set NILFS_PEER_MIRROR".into())
}

fn sha256_file(p: &Path) -> Result<String, String> {
    let bytes = std::fs::read(p).map_err(|e| io_err(p, &e))?;
    Ok(Sha256::digest(&bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect())
}

fn run(cmd: &mut Command) -> Result<(), String> {
    let out = cmd.output().map_err(|e| format!("{cmd:?}: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "{cmd:?} failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(())
}

fn touch(p: &Path) -> Result<(), String> {
    std::fs::write(p, b"").map_err(|e| io_err(p, &e))
}

fn set_mode(p: &Path, mode: u32) -> Result<(), String> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).map_err(|e| io_err(p, &e))
}

fn io_err(p: &Path, e: &std::io::Error) -> String {
    format!("{}: {e}", p.display())
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
