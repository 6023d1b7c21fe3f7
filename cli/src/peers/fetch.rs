//! Fetching the pinned peers: a private apt state for the five suites on
//! the mirror the host's own apt sources name, each package checked
//! against its pinned SHA-256, unpacked with `dpkg-deb -x` through a
//! temporary folder, wrappers that run a newer Debian's programs on that
//! Debian's loader and libraries (checked to resolve), and the `peer.env`
//! the guest scripts read.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use sha2::{Digest, Sha256};

use super::{cache_dir, peer_dir, select, Kind, Manifest, Package, Peer, Runtime};

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
            let lib_path = library_path(&root, runtime);
            let programs = wrap_programs(&root, &bin, runtime, &lib_path)?;
            let need: &[&str] = match kind {
                Kind::Grub => &["grub-fstest"],
                Kind::NilfsUtils => &["mkfs.nilfs2", "lscp", "lssu", "dumpseg", "nilfs-tune"],
                _ => &["blkid"],
            };
            for n in need {
                let Some((_, prog)) = programs.iter().find(|(p, _)| p == n) else {
                    return Err(format!(
                        "{} {}: the packages hold no `{n}`",
                        kind.name(),
                        peer.version
                    ));
                };
                check_resolves(prog, &lib_path, runtime)?;
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

/// The library folders a peer's programs load from, `:`-separated: its
/// own packages' first, then its runtime's.
fn library_path(root: &Path, runtime: Option<&Path>) -> String {
    std::iter::once(root)
        .chain(runtime)
        .flat_map(|r| ["usr/lib/x86_64-linux-gnu", "lib/x86_64-linux-gnu"].map(|d| r.join(d)))
        .filter(|d| d.is_dir())
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>()
        .join(":")
}

/// A wrapper in `bin` for every executable of the package's bin and sbin
/// folders, loading from `lib_path`; returns their names and programs.
fn wrap_programs(
    root: &Path,
    bin: &Path,
    runtime: Option<&Path>,
    lib_path: &str,
) -> Result<Vec<(String, PathBuf)>, String> {
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
            names.push((name, prog));
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
fn check_resolves(prog: &Path, lib_path: &str, runtime: Option<&Path>) -> Result<(), String> {
    // The same loader and libraries as the wrapper, asked to list.
    let out = match runtime {
        Some(rt) => Command::new(rt.join(LOADER))
            .args(["--library-path", lib_path, "--list"])
            .arg(prog)
            .output(),
        None => Command::new("ldd")
            .arg(prog)
            .env("LD_LIBRARY_PATH", lib_path)
            .output(),
    }
    .map_err(|e| format!("{}: cannot list its libraries: {e}", prog.display()))?;
    let listing = String::from_utf8_lossy(&out.stdout);
    let missing: Vec<&str> = listing
        .lines()
        .filter(|l| l.contains("not found"))
        .collect();
    if !out.status.success() || !missing.is_empty() {
        return Err(format!(
            "{}: its libraries do not resolve:\n{}{}",
            prog.display(),
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
        run_ok(Command::new("dpkg-deb").arg("-x").arg(d).arg(&tmp))?;
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
        run_ok(Command::new("apt-get").args(self.options()).arg("update"))?;
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

fn run_ok(cmd: &mut Command) -> Result<(), String> {
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
