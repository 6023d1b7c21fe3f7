//! Our recovery of a crash state (`Nilfs::open` and `Fs::mount`, with
//! roll-forward) and what a recovered image shows: its live tree and
//! `lscp -a`, ours or the kernel's, in one comparable shape; and the
//! `skipped-log` diagnosis of the log scan. It knows nothing of the model.

use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};

use nilfs::device::{BlockDevice, MemDevice};
use nilfs::format::cpfile::Checkpoint;
use nilfs::format::Cno;
use nilfs::fs::Fs;
use nilfs::posix::CheckpointView;
use nilfs::the_nilfs::Nilfs;

/// Which recovery to run on a crash state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Recovery {
    /// nilfs-ref's: `Nilfs::open` (super block choice, log scan) and
    /// `Fs::mount` (roll-forward of the data-only logs, a checkpoint of
    /// them).
    Ours,
    /// The known-bad variant for the checker's own test: the last valid log
    /// the scan finds is forgotten (its summary zeroed) before mounting.
    IgnoresLastLog,
}

/// A recovered image as our read path shows it.
pub struct Recovered {
    pub device: MemDevice,
    pub live: Vec<String>,
    pub checkpoints: BTreeMap<u64, Checkpoint>,
    /// The raw state had logs after its last super root to roll forward.
    pub rolled_forward: bool,
    manifests: RefCell<HashMap<u64, Result<Vec<String>, String>>>,
}

/// A listing's lines.
pub fn lines_of(s: &str) -> Vec<String> {
    s.lines().map(str::to_string).collect()
}

impl Recovered {
    /// The manifest of checkpoint `cno` (computed once).
    pub fn manifest(&self, cno: u64) -> Result<Vec<String>, String> {
        if let Some(m) = self.manifests.borrow().get(&cno) {
            return m.clone();
        }
        let m = Nilfs::open(&self.device)
            .and_then(|n| {
                let v = CheckpointView::open(&n, Some(Cno(cno)))?;
                nilfs::inspect::manifest::manifest(&v)
            })
            .map(|s| lines_of(&s))
            .map_err(|e| e.to_string());
        self.manifests.borrow_mut().insert(cno, m.clone());
        m
    }

    /// `lscp -a` as comparable rows: cno, mode, minor, blocks, inodes.
    pub fn lscp_rows(&self) -> Vec<LscpRow> {
        self.checkpoints
            .values()
            .map(|cp| LscpRow {
                cno: cp.cno.0,
                snapshot: cp.is_snapshot(),
                minor: cp.is_minor(),
                blocks: cp.blocks_count,
                inodes: cp.inodes_count,
            })
            .collect()
    }
}

/// Recovers a copy of `raw` and reads it back.
pub fn recover(raw: &MemDevice, how: Recovery, now_s: u64) -> Result<Recovered, String> {
    let dev = raw.duplicate();
    let rolled_forward = Nilfs::open(&dev)
        .map(|n| n.scan.lsegs_start.is_some())
        .unwrap_or(false);
    if how == Recovery::IgnoresLastLog {
        let nilfs = Nilfs::open(&dev).map_err(|e| format!("open: {e}"))?;
        let bs = u64::from(nilfs.block_size());
        if let Some(v) = nilfs.scan.visits.iter().rev().find(|v| v.verdict.is_ok()) {
            dev.write_at(v.pseg.0 * bs, &vec![0u8; bs as usize])
                .map_err(|e| e.to_string())?;
        }
    }
    {
        let nilfs = Nilfs::open(&dev).map_err(|e| format!("our recovery: open: {e}"))?;
        // The mount is the recovery; what it left on the device is what a
        // later mount sees (dropping it is another power cut, after it).
        let fs = Fs::mount(&nilfs, now_s).map_err(|e| format!("our recovery: mount: {e}"))?;
        drop(fs);
    }
    let nilfs = Nilfs::open(&dev).map_err(|e| format!("reading the recovered image: {e}"))?;
    let view = CheckpointView::open(&nilfs, None).map_err(|e| format!("latest: {e}"))?;
    let live = nilfs::inspect::manifest::manifest(&view)
        .map(|s| lines_of(&s))
        .map_err(|e| format!("manifest of the latest checkpoint: {e}"))?;
    let checkpoints = nilfs
        .checkpoints(Cno(1))
        .map_err(|e| format!("cpfile: {e}"))?
        .into_iter()
        .map(|c| (c.cno.0, c))
        .collect();
    Ok(Recovered {
        device: dev,
        live,
        checkpoints,
        rolled_forward,
        manifests: RefCell::new(HashMap::new()),
    })
}

/// The recovery's log scan, if it stepped over an invalid log to a later
/// segment's super root: `nilfs_search_super_root` tolerates one invalid
/// log after the super root it started from (`strayed` -> `feed_segment`,
/// "this can happen if a checkpoint was written without barriers") and
/// goes on at the next segment. When the writes of one construction that
/// spans segments reach the disk out of order, the later segment's log
/// (with the super root) can be there while the earlier one is not; the
/// super root then names blocks that were never written.
pub fn skipped_log(raw: &MemDevice) -> Option<String> {
    let n = Nilfs::open(raw).ok()?;
    let s = &n.scan;
    let sr = s
        .visits
        .iter()
        .position(|v| v.pseg == s.sr_pseg && v.super_root_cno.is_some())?;
    let bad = s.visits[..sr].iter().rev().find(|v| v.verdict.is_err())?;
    Some(format!(
        "the log scan found no valid log at block {} ({}), went on to the next segment and took \
         the super root of the log at block {} (checkpoint {}): nilfs_search_super_root's \
         strayed -> feed_segment",
        bad.pseg.0,
        bad.verdict.as_ref().err().map_or("", String::as_str),
        s.sr_pseg.0,
        s.cno.0
    ))
}

/// `lscp -a`'s comparable columns.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LscpRow {
    pub cno: u64,
    pub snapshot: bool,
    pub minor: bool,
    pub blocks: u64,
    pub inodes: u64,
}

impl std::fmt::Display for LscpRow {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} {} {} {} {}",
            self.cno,
            if self.snapshot { "ss" } else { "cp" },
            if self.minor { "i" } else { "-" },
            self.blocks,
            self.inodes
        )
    }
}

/// Rows of `lscp -a` output (CNO DATE TIME MODE FLG BLKCNT ICNT).
pub fn parse_lscp(text: &str) -> Result<Vec<LscpRow>, String> {
    text.lines()
        .skip(1)
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let bad = || format!("an lscp row of another shape: {l:?}");
            if f.len() != 7 {
                return Err(bad());
            }
            Ok(LscpRow {
                cno: f[0].parse().map_err(|_| bad())?,
                snapshot: match f[3] {
                    "ss" => true,
                    "cp" => false,
                    _ => return Err(bad()),
                },
                minor: f[4] == "i",
                blocks: f[5].parse().map_err(|_| bad())?,
                inodes: f[6].parse().map_err(|_| bad())?,
            })
        })
        .collect()
}

/// What the kernel's recovery of one state showed.
pub struct KernelRecovery {
    pub mounted: bool,
    pub manifest: Vec<String>,
    pub lscp: Result<Vec<LscpRow>, String>,
    pub errors: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lscp_rows_parse() {
        let text = "                 CNO        DATE     TIME  MODE  FLG      BLKCNT       ICNT\n\
                    \x20                  1  2024-12-01 13:07:00   cp    -            4          2\n\
                    \x20                  3  2024-12-01 13:07:05   ss    i           11          5\n";
        let rows = parse_lscp(text).unwrap();
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[1].to_string(), "3 ss i 11 5");
        assert!(parse_lscp("header\n1 2 3\n").is_err());
    }
}
