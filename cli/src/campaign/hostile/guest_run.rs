//! Hostile images in the kernel guest, many per boot: the images lie one
//! after another on a single sparse scratch disk, each reached as its own
//! device-mapper linear target of exactly its size (the secondary super
//! block sits at the device's end). For each, in turn: mount read-write
//! (read-only if that fails), walk and read everything, a short write
//! workload, sync, unmount, and mount again read-only to see whether the
//! workload's writes are there; the kernel log since the previous image
//! kept (`dmesg -r -c`, with levels). A watchdog ends the boot when one image
//! takes too long (a hang: the blocked tasks are dumped first), and an
//! oops or BUG ends it too (the kernel may hold locks it never gives back);
//! the images left are run in the next boot.

use std::io::{Seek, SeekFrom, Write};
use std::path::Path;

use nilfs::device::BlockDevice;

use crate::campaign::guest::Harness;

/// Images start on MiB boundaries of the scratch disk.
const ALIGN: u64 = 1 << 20;

/// What the guest reported for one image.
#[derive(Clone, Debug, Default)]
pub struct Raw {
    /// `mount` (read-write) and, if it failed, `mount -o ro`: exit codes.
    pub rw: Option<i32>,
    pub ro: Option<i32>,
    /// The mount's options at the end (`rw`, `ro`), if it was mounted.
    pub mode: String,
    /// `umount`'s exit code, if it was mounted.
    pub umount: Option<i32>,
    /// After a read-write run and a clean unmount, what a read-only
    /// remount shows of the workload: `/hz/g`'s size in bytes, `none` when
    /// `/hz`, `/hz/g` is missing or `/hz/f` (removed) is back, `unmountable`
    /// when the remount fails; `None` when there was no such run.
    pub back: Option<String>,
    /// The watchdog fired.
    pub hang: bool,
    /// What the commands printed on stderr.
    pub errors: String,
    /// The kernel's log while the image was in use (raw, `<level>`).
    pub dmesg: String,
    /// The guest got this far (false: the boot ended before the image).
    pub ran: bool,
}

/// The guest script: image i at sector `start` of `sectors` on /dev/vda.
fn script(layout: &[(u64, u64)], watchdog_s: u64) -> String {
    let mut s = String::from(
        r#"set +e
export DM_DISABLE_UDEV=1
echo 8 > /proc/sys/kernel/hung_task_timeout_secs 2>/dev/null
echo 1 > /proc/sys/kernel/sysrq 2>/dev/null
mkdir -p /mnt
dmesg -c > /dev/null
one() {
  i=$1; e=/tmp/e$i
  : > $e
  dmsetup create h$i --table "0 $3 linear /dev/vda $2" 2>>$e || { echo "R $i setup"; return; }
  d=/dev/mapper/h$i
  ro=-; walk=-; wl=-; mode=-; um=-
  mount -t nilfs2 $d /mnt 2>>$e; rw=$?
  if [ $rw != 0 ]; then mount -t nilfs2 -o ro $d /mnt 2>>$e; ro=$?; fi
  if grep -q ' /mnt ' /proc/mounts; then
    # Bounded depth: a name the kernel lists with a NUL in it reaches
    # user space as a shorter one ("" is the directory itself), and an
    # unbounded walk would never end.
    ls -la /mnt > /dev/null 2>>$e
    find /mnt -maxdepth 16 -exec ls -ld {} + > /dev/null 2>>$e
    find /mnt -maxdepth 16 -type f -exec head -c 1048576 {} + > /dev/null 2>>$e
    find /mnt -maxdepth 16 -type l -exec readlink {} \; > /dev/null 2>>$e
    if [ $rw = 0 ]; then
      mkdir /mnt/hz 2>>$e
      echo hostile > /mnt/hz/f 2>>$e
      dd if=/dev/zero of=/mnt/hz/g bs=4096 count=16 2>>$e >/dev/null
      f=$(find /mnt -maxdepth 16 -type f ! -path '/mnt/hz/*' 2>/dev/null | head -1)
      [ -n "$f" ] && echo appended >> "$f" 2>>$e
      [ -n "$f" ] && mv "$f" "$f.mv" 2>>$e
      dd if=/dev/zero of=/mnt/hz/g bs=4096 count=4 seek=2 conv=notrunc 2>>$e >/dev/null
      rm -f /mnt/hz/f 2>>$e
      sync
    fi
    mode=$(awk '$2=="/mnt"{print substr($4,1,2)}' /proc/mounts)
    umount /mnt 2>>$e; um=$?
    # Did the writes the kernel acknowledged reach the disk?
    back=-
    if [ $rw = 0 ] && [ $um = 0 ] && [ "$mode" = rw ]; then
      if mount -t nilfs2 -o ro $d /mnt 2>/dev/null; then
        back=none
        if [ -f /mnt/hz/g ] && [ ! -e /mnt/hz/f ]; then back=$(wc -c < /mnt/hz/g | tr -d " "); fi
        umount /mnt 2>/dev/null
      else
        back=unmountable
      fi
    fi
  fi
  dmsetup remove h$i 2>>$e
  echo "R $i rw=$rw ro=$ro mode=$mode umount=$um back=${back:--}"
}
run() {
  i=$1
  # The shell's own messages (a redirection that failed) are the image's
  # errors too.
  : > /tmp/e$i
  one "$@" > /tmp/r$i 2>> /tmp/e$i &
  p=$!; t=0
"#,
    );
    s.push_str(&format!(
        "  while kill -0 $p 2>/dev/null && [ $t -lt {} ]; do sleep 0.1; t=$((t+1)); done\n",
        watchdog_s * 10
    ));
    s.push_str(
        r#"  if kill -0 $p 2>/dev/null; then
    # The blocked tasks, and what the CPU runs (a loop in the kernel).
    echo w > /proc/sysrq-trigger; echo l > /proc/sysrq-trigger; sleep 2
    dmesg -r -c > /host/k$i.dmesg; cp /tmp/e$i /host/e$i 2>/dev/null
    echo "R $i hang" >> /host/res.txt
    stop
  fi
  dmesg -r -c > /host/k$i.dmesg; cp /tmp/e$i /host/e$i
  cat /tmp/r$i >> /host/res.txt
  if grep -qE 'Oops|BUG:|kernel BUG|general protection fault' /host/k$i.dmesg; then stop; fi
}
# After a hang or an oops the kernel may never finish a sync: power off
# at once, without one (-n; the shared folder's files are already on the
# host).
stop() {
  echo "@@GUEST-EXIT 0 stopped" > /dev/ttyS0
  poweroff -f -n
  sleep 60
}
"#,
    );
    for (i, (start, sectors)) in layout.iter().enumerate() {
        s.push_str(&format!("run {i} {start} {sectors}\n"));
    }
    s.push_str("true\n");
    s
}

/// Runs `images` in the guest, as many boots as it takes (a hang or an
/// oops ends a boot; the next starts after that image): what the guest
/// reported for each, and the boots used.
pub fn run_images(
    harness: &Harness,
    work: &Path,
    images: &[&dyn BlockDevice],
    watchdog_s: u64,
) -> Result<(Vec<Raw>, usize), String> {
    let mut out = vec![Raw::default(); images.len()];
    let mut from = 0;
    let mut boots = 0;
    while from < images.len() {
        let rest = &images[from..];
        let raws = one_boot(harness, work, rest, watchdog_s)?;
        boots += 1;
        let done = raws.iter().take_while(|r| r.ran).count();
        for (k, r) in raws.into_iter().enumerate().take(done) {
            out[from + k] = r;
        }
        if done == 0 {
            // The boot ran nothing: the guest itself failed.
            let log = std::fs::read_to_string(work.join("guest.log")).unwrap_or_default();
            return Err(format!(
                "the guest ran none of {} images:\n{}",
                rest.len(),
                tail(&log, 30)
            ));
        }
        from += done;
    }
    Ok((out, boots))
}

fn tail(s: &str, n: usize) -> String {
    let lines: Vec<&str> = s.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

fn one_boot(
    harness: &Harness,
    work: &Path,
    images: &[&dyn BlockDevice],
    watchdog_s: u64,
) -> Result<Vec<Raw>, String> {
    let _ = std::fs::remove_dir_all(work);
    std::fs::create_dir_all(work).map_err(|e| format!("{}: {e}", work.display()))?;
    let disk = work.join("scratch.img");
    let mut layout = Vec::new();
    let mut f = std::fs::File::create(&disk).map_err(|e| format!("{}: {e}", disk.display()))?;
    let mut at = ALIGN;
    for dev in images {
        let size = dev.size_bytes() / 512 * 512;
        let mut buf = vec![0u8; 1 << 16];
        let mut off = 0;
        while off < size {
            let n = (size - off).min(buf.len() as u64) as usize;
            dev.read_at(off, &mut buf[..n]).map_err(|e| e.to_string())?;
            if buf[..n].iter().any(|&b| b != 0) {
                f.seek(SeekFrom::Start(at + off))
                    .and_then(|_| f.write_all(&buf[..n]))
                    .map_err(|e| format!("{}: {e}", disk.display()))?;
            }
            off += n as u64;
        }
        layout.push((at / 512, size / 512));
        at += size.div_ceil(ALIGN) * ALIGN;
    }
    f.set_len(at)
        .map_err(|e| format!("{}: {e}", disk.display()))?;
    drop(f);
    // A boot's time: the watchdog for every image, and the boot itself.
    let timeout = 120 + images.len() as u64 * (watchdog_s + 5);
    let boot = harness.boot(
        std::slice::from_ref(&disk),
        work,
        &script(&layout, watchdog_s),
        timeout,
    )?;
    let _ = std::fs::write(
        work.join("guest.log"),
        format!("{}\n--- stderr\n{}", boot.stdout, boot.stderr),
    );
    let _ = std::fs::remove_file(&disk);
    let res = std::fs::read_to_string(work.join("res.txt")).unwrap_or_default();
    let mut raws = vec![Raw::default(); images.len()];
    for line in res.lines() {
        let w: Vec<&str> = line.split_whitespace().collect();
        let Some(i) = w.get(1).and_then(|i| i.parse::<usize>().ok()) else {
            continue;
        };
        let Some(r) = raws.get_mut(i) else { continue };
        r.ran = true;
        for kv in &w[2..] {
            let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
            let num = v.parse::<i32>().ok();
            match k {
                "rw" => r.rw = num,
                "ro" => r.ro = num,
                "mode" => r.mode = v.to_string(),
                "umount" => r.umount = num,
                "back" if v != "-" => r.back = Some(v.trim().to_string()),
                "hang" => r.hang = true,
                _ => {}
            }
        }
        // dd's transfer counts are not errors.
        r.errors = std::fs::read_to_string(work.join(format!("e{i}")))
            .unwrap_or_default()
            .lines()
            .filter(|l| !l.contains("records in") && !l.contains("records out"))
            .map(|l| format!("{l}\n"))
            .collect();
        r.dmesg = std::fs::read_to_string(work.join(format!("k{i}.dmesg"))).unwrap_or_default();
    }
    Ok(raws)
}

/// The kernel's answer to one image, the figures' five classes.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Outcome {
    /// Neither mount succeeded.
    Refused,
    /// Mounted read-write; some call failed (EIO, EUCLEAN, ...) or the
    /// kernel logged a nilfs2 error, and the mount stayed read-write.
    Errored,
    /// Mounted read-only only, or turned read-only by an error.
    Degraded,
    /// An oops, BUG, WARN, general protection fault, sanitizer report,
    /// hang, or a mount that would not go away: what, and the kernel
    /// function the trace names.
    Bad { kind: String, function: String },
    /// Mounted read-write, everything worked, nothing logged.
    Accepted,
}

impl Outcome {
    /// The figures' column.
    pub fn column(&self) -> &'static str {
        match self {
            Outcome::Refused => "refused",
            Outcome::Errored => "errored",
            Outcome::Degraded => "degraded",
            Outcome::Bad { .. } => "failed badly",
            Outcome::Accepted => "silently accepted",
        }
    }
}

/// The kernel's log lines without their `<level>` prefixes, at `max`
/// level or more urgent.
fn log_lines(dmesg: &str, max: u8) -> Vec<&str> {
    dmesg
        .lines()
        .filter_map(|l| {
            let rest = l.strip_prefix('<')?;
            let (lvl, msg) = rest.split_once('>')?;
            // `<4>` or `<12>` (facility * 8 + level).
            let lvl: u32 = lvl.parse().ok()?;
            ((lvl % 8) as u8 <= max).then_some(msg)
        })
        .collect()
}

/// What went badly wrong in a kernel log, if anything: (kind, function).
pub fn bad_in(dmesg: &str) -> Option<(String, String)> {
    let text: Vec<&str> = dmesg
        .lines()
        .map(|l| match l.strip_prefix('<') {
            Some(r) => r.split_once('>').map_or(l, |(_, m)| m),
            None => l,
        })
        .collect();
    let kinds = [
        ("general protection fault", "GPF"),
        ("kernel BUG at", "BUG"),
        ("BUG: ", "BUG"),
        ("Oops", "Oops"),
        ("UBSAN:", "UBSAN"),
        ("KASAN:", "KASAN"),
        ("WARNING:", "WARN"),
        ("blocked for more than", "hung task"),
        ("refcount_t:", "refcount"),
    ];
    let (at, kind) = text.iter().enumerate().find_map(|(i, l)| {
        kinds
            .iter()
            .find(|(pat, _)| l.contains(pat))
            .map(|(_, k)| (i, *k))
    })?;
    Some((kind.to_string(), trace_function(&text[at..], text[at])))
}

/// The kernel function a trace names: the RIP's, else the first nilfs
/// frame of the call trace, else the warning's own `at` location.
fn trace_function(text: &[&str], first: &str) -> String {
    let func = |s: &str| {
        s.trim()
            .trim_start_matches("? ")
            .split(['+', ' '])
            .next()
            .unwrap_or("")
            .to_string()
    };
    if let Some(rip) = text.iter().find_map(|l| l.split_once("RIP: 0010:")) {
        return func(rip.1);
    }
    if let Some(l) = text
        .iter()
        .skip(1)
        .take(60)
        .find(|l| l.contains("nilfs") && l.contains("+0x"))
    {
        return func(l);
    }
    // `UBSAN: shift-out-of-bounds in fs/nilfs2/btree.c:123:4`
    first
        .split_once(" in ")
        .map_or_else(|| first.trim().to_string(), |(_, w)| w.trim().to_string())
}

/// The first nilfs2 function in a kernel log's stack dumps.
fn nilfs_frame(dmesg: &str) -> Option<String> {
    dmesg.lines().find_map(|l| {
        let w = l
            .split_whitespace()
            .find(|w| w.contains("nilfs") && w.contains("+0x"))?;
        Some(w.split('+').next()?.to_string())
    })
}

/// The five-way verdict on one image's report.
pub fn classify(r: &Raw) -> Outcome {
    if r.hang {
        // An oops first (a task killed holding a lock, the next mount
        // waiting on it for ever) is the oops.
        if let Some((kind, function)) = bad_in(&r.dmesg).filter(|b| b.0 != "hung task") {
            return Outcome::Bad {
                kind: format!("{kind}, then a hang"),
                function,
            };
        }
        // The dumps name the kernel function a task is stuck in; with no
        // nilfs2 frame in them the loop was in user space.
        let function = nilfs_frame(&r.dmesg).unwrap_or_else(|| "user space".into());
        return Outcome::Bad {
            kind: "hang".into(),
            function,
        };
    }
    if let Some((kind, function)) = bad_in(&r.dmesg) {
        return Outcome::Bad { kind, function };
    }
    let mounted = r.rw == Some(0) || r.ro == Some(0);
    if mounted && r.umount != Some(0) {
        return Outcome::Bad {
            kind: "leak".into(),
            function: format!("umount: {}", r.errors.lines().last().unwrap_or("")),
        };
    }
    if !mounted {
        return Outcome::Refused;
    }
    if r.rw != Some(0) || r.mode == "ro" {
        return Outcome::Degraded;
    }
    let nilfs_errors = log_lines(&r.dmesg, 3)
        .iter()
        .any(|l| l.contains("NILFS") || l.contains("nilfs"));
    if nilfs_errors || !r.errors.trim().is_empty() {
        return Outcome::Errored;
    }
    // Every call succeeded and nothing was logged: the writes must be
    // there after the unmount (V4: 6.1 threw them away at the unmount).
    if r.back.as_deref().is_some_and(|b| b != WRITTEN_G) {
        return Outcome::Bad {
            kind: "lost writes".into(),
            function: format!(
                "the remount after a clean unmount: /hz/g {}",
                r.back.as_deref().unwrap_or("")
            ),
        };
    }
    Outcome::Accepted
}

/// `/hz/g`'s size after the workload (16 blocks of 4 KiB written, 4 of
/// them written again).
const WRITTEN_G: &str = "65536";

/// The errno names the commands printed (EIO, EUCLEAN, EROFS, ...).
pub fn errnos(r: &Raw) -> Vec<&'static str> {
    let mut out = Vec::new();
    for (text, name) in [
        ("Input/output error", "EIO"),
        ("Structure needs cleaning", "EUCLEAN"),
        ("Read-only file system", "EROFS"),
        ("No space left", "ENOSPC"),
        ("Invalid argument", "EINVAL"),
        ("No such file", "ENOENT"),
        ("File exists", "EEXIST"),
        ("Not a directory", "ENOTDIR"),
        ("too many levels", "ELOOP"),
        ("Cannot allocate memory", "ENOMEM"),
    ] {
        if r.errors.to_lowercase().contains(&text.to_lowercase()) {
            out.push(name);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_oops_is_bad_and_names_the_rip_function() {
        let log = "<6>NILFS (dm-0): segctord starting\n<1>BUG: kernel NULL pointer dereference, address: 0000000000000010\n<4>Oops: 0000 [#1] PREEMPT SMP NOPTI\n<4>RIP: 0010:nilfs_bmap_lookup_at_level+0x1a/0x90 [nilfs2]\n";
        assert_eq!(
            bad_in(log),
            Some(("BUG".into(), "nilfs_bmap_lookup_at_level".into()))
        );
        let r = Raw {
            rw: Some(0),
            umount: Some(0),
            dmesg: log.into(),
            ran: true,
            ..Default::default()
        };
        assert!(matches!(classify(&r), Outcome::Bad { .. }));
    }

    #[test]
    fn the_five_classes() {
        let base = Raw {
            ran: true,
            ..Default::default()
        };
        let refused = Raw {
            rw: Some(255),
            ro: Some(255),
            ..base.clone()
        };
        assert_eq!(classify(&refused), Outcome::Refused);
        let ro_only = Raw {
            rw: Some(255),
            ro: Some(0),
            umount: Some(0),
            mode: "ro".into(),
            ..base.clone()
        };
        assert_eq!(classify(&ro_only), Outcome::Degraded);
        let ok = Raw {
            rw: Some(0),
            umount: Some(0),
            mode: "rw".into(),
            dmesg: "<6>NILFS (dm-0): segctord starting\n".into(),
            ..base.clone()
        };
        assert_eq!(classify(&ok), Outcome::Accepted);
        let err = Raw {
            dmesg: "<3>NILFS error (device dm-0): nilfs_check_page: bad entry\n".into(),
            ..ok.clone()
        };
        assert_eq!(classify(&err), Outcome::Errored);
        let eio = Raw {
            errors: "cat: read error: Input/output error\n".into(),
            ..ok.clone()
        };
        assert_eq!(classify(&eio), Outcome::Errored);
        assert_eq!(errnos(&eio), ["EIO"]);
        let kept = Raw {
            back: Some("65536".into()),
            ..ok.clone()
        };
        assert_eq!(classify(&kept), Outcome::Accepted);
        for gone in ["none", "0", "unmountable"] {
            let lost = Raw {
                back: Some(gone.into()),
                ..ok.clone()
            };
            assert!(
                matches!(classify(&lost), Outcome::Bad { ref kind, .. } if kind == "lost writes"),
                "{gone}"
            );
        }
        let busy = Raw {
            umount: Some(1),
            ..ok.clone()
        };
        assert!(matches!(classify(&busy), Outcome::Bad { .. }));
        let hang = Raw {
            hang: true,
            ..ok.clone()
        };
        assert_eq!(
            classify(&hang),
            Outcome::Bad {
                kind: "hang".into(),
                function: "user space".into()
            }
        );
        let stuck = Raw {
            hang: true,
            dmesg: "<6>task:sync state:D stack:0\n<6> nilfs_segctor_sync+0x1c0/0x2a0 [nilfs2]\n"
                .into(),
            ..ok
        };
        assert_eq!(
            classify(&stuck),
            Outcome::Bad {
                kind: "hang".into(),
                function: "nilfs_segctor_sync".into()
            }
        );
    }

    #[test]
    fn an_oops_then_a_hang_is_the_oops() {
        let r = Raw {
            ran: true,
            hang: true,
            rw: Some(137),
            dmesg: "<1>BUG: kernel NULL pointer dereference, address: 0000000000000008\n<4>Call Trace:\n<4> nilfs_get_block+0x78/0x230 [nilfs2]\n<6>task:mount state:D stack:0\n<4> nilfs_mount+0x195/0x610 [nilfs2]\n".into(),
            ..Default::default()
        };
        assert_eq!(
            classify(&r),
            Outcome::Bad {
                kind: "BUG, then a hang".into(),
                function: "nilfs_get_block".into()
            }
        );
    }

    #[test]
    fn a_warning_names_its_function() {
        let log = "<4>------------[ cut here ]------------\n<4>WARNING: CPU: 0 PID: 77 at fs/nilfs2/segment.c:1503 nilfs_segctor_truncate_segments+0x1f0/0x200 [nilfs2]\n<4>RIP: 0010:nilfs_segctor_truncate_segments+0x1f0/0x200 [nilfs2]\n";
        assert_eq!(
            bad_in(log),
            Some(("WARN".into(), "nilfs_segctor_truncate_segments".into()))
        );
    }
}
