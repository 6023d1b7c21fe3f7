//! Recording a workload's block writes as a dm-log-writes log: in the
//! guest (the host's mkfs.nilfs2 for the base, dm-log-writes over the data
//! disk, `nilref exec --mark-log-writes`), or on nilfs-ref's own write
//! path through a `Recorder`. It knows nothing of judging.

use std::path::Path;

use nilfs::device::{import_image, MemDevice};
use serde_json::Value;

use crate::campaign::common::{Problem, Workload};
use crate::campaign::guest::{fresh_share, sparse_disk, Harness, BOOT_TIMEOUT_S, DEVS};
use crate::campaign::log_writes::{self, Log};

/// Workloads per recording boot: each takes two disks (data and log).
pub const RECORD_BATCH: usize = DEVS.len() / 2;

/// Runs `w` through nilfs-ref's `Fs` on a device that logs its writes as
/// dm-log-writes does, marking `op-K` before observed line K: the base
/// image, the log and the observed trace.
pub fn record_ours(w: &Workload) -> Result<(MemDevice, Log, String), String> {
    let rec = log_writes::Recorder::new(MemDevice::new(w.device_bytes()));
    let lines: Vec<(usize, Value)> = w
        .lines
        .iter()
        .cloned()
        .enumerate()
        .map(|(i, v)| (i + 1, v))
        .collect();
    let applied = crate::apply::apply_lines_on(rec.device(), &rec, &lines, "memory", &mut |k| {
        rec.mark(&format!("op-{k}"))
    })
    .map_err(|(n, m)| format!("line {n}: {m}"))?;
    let trace: String = applied.lines.iter().map(|l| l.to_json() + "\n").collect();
    let (base, log) = rec.finish();
    Ok((base, log, trace))
}

/// The guest script recording batch `i`: data disk `DEVS[2i]`, log disk
/// `DEVS[2i+1]`.
fn record_script(batch: &[Workload]) -> String {
    let mut s = String::from("set +e\nexport DM_DISABLE_UDEV=1\n");
    for (i, w) in batch.iter().enumerate() {
        let (d, l) = (DEVS[2 * i], DEVS[2 * i + 1]);
        s.push_str(&format!(
            r#"
# workload {i}: {label}
if dmsetup create lw{i} --table "0 {sectors} log-writes /dev/{d} /dev/{l}" 2>/host/e{i}.txt; then
  if mount -t nilfs2 /dev/mapper/lw{i} /mnt 2>>/host/e{i}.txt; then
    timeout 900 nilref exec /mnt /host/w{i}.jsonl -o /host/o{i}.jsonl --device /dev/mapper/lw{i} --mark-log-writes lw{i} 2>>/host/e{i}.txt
    echo $? > /host/rc{i}
    grep -q ' /mnt ' /proc/mounts && umount /mnt
  else
    echo "mount of the dm device failed" > /host/rc{i}
  fi
  dmsetup remove lw{i} 2>>/host/e{i}.txt || echo "dmsetup remove failed" >> /host/e{i}.txt
else
  echo "dmsetup create failed" > /host/rc{i}
fi
"#,
            label = w.label,
            sectors = w.device_bytes() / 512,
        ));
    }
    s.push_str("dmesg | grep -i -e nilfs -e log-writes > /host/dmesg.txt\ntrue\n");
    s
}

/// What one workload's recording brought back.
pub struct Recorded {
    pub trace: String,
    pub log: Log,
    pub base: MemDevice,
}

/// mkfs.nilfs2 (the host's) on a fresh sparse file of the workload's size.
fn host_mkfs(path: &Path, w: &Workload) -> Result<(), String> {
    sparse_disk(path, w.device_bytes())?;
    let g = &w.geometry;
    let out = std::process::Command::new("mkfs.nilfs2")
        .args(["-q", "-f", "-b"])
        .arg(g.block_size.to_string())
        .arg("-B")
        .arg(g.blocks_per_segment.to_string())
        .arg("-m")
        .arg(g.r_segments_percentage.to_string())
        .arg(path)
        .output()
        .map_err(|e| format!("mkfs.nilfs2: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "mkfs.nilfs2 {}: {}",
            path.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(())
}

/// Records a batch of at most [`RECORD_BATCH`] workloads in one boot.
pub fn record_batch(
    harness: &Harness,
    work: &Path,
    batch: &[Workload],
) -> Result<Vec<Result<Recorded, Problem>>, String> {
    assert!(batch.len() <= RECORD_BATCH);
    fresh_share(work, batch)?;
    let mut disks = Vec::new();
    for (i, w) in batch.iter().enumerate() {
        let base = work.join(format!("b{i}.img"));
        host_mkfs(&base, w)?;
        let data = work.join(format!("d{i}.img"));
        std::fs::copy(&base, &data).map_err(|e| format!("{}: {e}", data.display()))?;
        // The log holds every write and a sector per entry: a generous
        // multiple of the device, sparse.
        let log = work.join(format!("l{i}.img"));
        sparse_disk(&log, 4 * w.device_bytes() + (64 << 20))?;
        disks.push(data);
        disks.push(log);
    }
    let boot = harness.boot(&disks, work, &record_script(batch), BOOT_TIMEOUT_S)?;
    let _ = std::fs::write(
        work.join("guest.log"),
        format!("{}\n--- stderr\n{}", boot.stdout, boot.stderr),
    );
    let read = |name: String| std::fs::read_to_string(work.join(name)).ok();
    let mut out = Vec::new();
    for i in 0..batch.len() {
        let rc = read(format!("rc{i}")).map(|s| s.trim().to_string());
        if rc.as_deref() != Some("0") {
            out.push(Err(Problem::runner(format!(
                "the recording in the guest ended with {}: {}{}",
                rc.as_deref()
                    .unwrap_or("no status (the guest stopped first)"),
                read(format!("e{i}.txt")).unwrap_or_default().trim(),
                if boot.success {
                    String::new()
                } else {
                    format!("; guest: {}", boot.stderr.lines().last().unwrap_or(""))
                }
            ))));
            continue;
        }
        let trace = read(format!("o{i}.jsonl")).unwrap_or_default();
        let log_bytes = std::fs::read(work.join(format!("l{i}.img")))
            .map_err(|e| format!("log disk {i}: {e}"))?;
        let log = match Log::parse_complete(&log_bytes) {
            Ok(l) => l,
            Err(e) => {
                out.push(Err(Problem::crash_log(&e)));
                continue;
            }
        };
        let base = import_image(&work.join(format!("b{i}.img"))).map_err(|e| e.to_string())?;
        out.push(Ok(Recorded { trace, log, base }));
    }
    Ok(out)
}
