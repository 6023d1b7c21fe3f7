//! Writing a laid-out log: the summary blocks, the payload in order, the
//! super root, the checksums in the kernel's order (`sr_sum`, then
//! `ss_sumsum`, then `ss_datasum`, which covers both), then one write
//! (`nilfs_prepare_write_logs`, `nilfs_segbuf_fill_in_segsum`,
//! `nilfs_segbuf_fill_in_segsum_crc`, `_data_crc`, `nilfs_write_logs`),
//! and the check a log passes before it is written ([`check_log`]).

use std::collections::BTreeMap;

use super::layout::LogPlan;
use crate::device::BlockDevice;
use crate::format::crc::crc32_le;
use crate::format::le::u32_at;
#[cfg(doc)]
use crate::format::segsum::seal_log;
use crate::format::segsum::{verify_log, SegmentSummary, Summary};
use crate::format::super_root;
use crate::{Error, Result};

/// Assemble the bytes of `plan`: `payload` gives each tagged block's
/// content (exactly one block each), `super_root` the super root block
/// (its checksum is computed here). Returns the log, sealed.
pub fn assemble<B: AsRef<[u8]>>(
    plan: &LogPlan,
    payload: &BTreeMap<u64, B>,
    super_root: Option<&[u8]>,
    block_size: u32,
    seed: u32,
) -> Result<Vec<u8>> {
    let pieces = LogPieces::build(
        plan,
        |tag| payload.get(&tag).map(AsRef::as_ref),
        super_root,
        block_size,
        seed,
    )?;
    Ok(pieces.concat())
}

/// A log ready to write, in the order it lies on disk: its summary blocks
/// and its super root block, built and sealed here, and every payload
/// block borrowed where it lies. Written with
/// [`BlockDevice::write_vectored_at`], the payload is copied once, into the
/// device, as the kernel's bios point at the pages themselves.
pub struct LogPieces<'p> {
    summary: Vec<u8>,
    payload: Vec<&'p [u8]>,
    super_root: Option<Vec<u8>>,
}

impl<'p> LogPieces<'p> {
    /// The pieces of `plan`'s log: `payload` gives each tagged block's
    /// content (exactly one block each), `super_root` the super root block
    /// (sealed here). The checksums are the ones [`seal_log`] puts on the
    /// log assembled whole: `ss_sumsum` over the summary, then
    /// `ss_datasum` over everything from byte 4, piece by piece.
    pub fn build(
        plan: &LogPlan,
        payload: impl Fn(u64) -> Option<&'p [u8]>,
        super_root: Option<&[u8]>,
        block_size: u32,
        seed: u32,
    ) -> Result<Self> {
        let bs = block_size as usize;
        let summary = Summary {
            header: plan.header,
            files: plan.files.clone(),
        };
        let mut summary = summary.encode(block_size);
        let mut blocks = Vec::with_capacity(plan.payload.len());
        for (tag, _) in &plan.payload {
            let data = payload(*tag)
                .ok_or_else(|| Error::Invalid(format!("no content for payload block {tag}")))?;
            if data.len() != bs {
                return Err(Error::Invalid(format!(
                    "payload block {tag} is {} bytes",
                    data.len()
                )));
            }
            blocks.push(data);
        }
        let super_root = match (plan.super_root, super_root) {
            (Some(_), Some(sr)) => {
                let mut b = sr.to_vec();
                b.resize(bs, 0);
                super_root::seal_block(&mut b, seed);
                Some(b)
            }
            (None, None) => None,
            _ => {
                return Err(Error::Invalid(
                    "super root given for a log without one, or missing".into(),
                ))
            }
        };
        let nblocks = plan.header.nblocks as usize;
        let len = summary.len() + blocks.len() * bs + super_root.as_ref().map_or(0, Vec::len);
        if len != nblocks * bs {
            return Err(Error::Invalid(format!(
                "log assembles to {} blocks, the plan says {nblocks}",
                len / bs
            )));
        }
        let sumbytes = u32_at(&summary, 48) as usize;
        if summary.len() < SegmentSummary::SIZE || sumbytes > summary.len() {
            return Err(Error::Invalid(format!(
                "summary of {} bytes, ss_sumbytes {sumbytes}",
                summary.len()
            )));
        }
        let sumsum = crc32_le(seed, summary.get(8..sumbytes).unwrap_or(&[]));
        summary[4..8].copy_from_slice(&sumsum.to_le_bytes());
        let mut datasum = crc32_le(seed, &summary[4..]);
        for b in &blocks {
            datasum = crc32_le(datasum, b);
        }
        if let Some(sr) = &super_root {
            datasum = crc32_le(datasum, sr);
        }
        summary[0..4].copy_from_slice(&datasum.to_le_bytes());
        Ok(LogPieces {
            summary,
            payload: blocks,
            super_root,
        })
    }

    /// The pieces in disk order.
    pub fn slices(&self) -> Vec<&[u8]> {
        let mut v = Vec::with_capacity(self.payload.len() + 2);
        v.push(&self.summary[..]);
        v.extend(self.payload.iter().copied());
        v.extend(self.super_root.as_deref());
        v
    }

    /// The whole log in one buffer (for [`check_log`] and tests).
    pub fn concat(&self) -> Vec<u8> {
        self.slices().concat()
    }

    /// Write the log at its start block, in one request.
    pub fn write(&self, dev: &dyn BlockDevice, plan: &LogPlan, block_size: u32) -> Result<()> {
        dev.write_vectored_at(plan.start.0 * u64::from(block_size), &self.slices())
    }
}

/// Write an assembled log at its start block.
pub fn write(dev: &dyn BlockDevice, plan: &LogPlan, log: &[u8], block_size: u32) -> Result<()> {
    dev.write_at(plan.start.0 * u64::from(block_size), log)
}

/// Decode an assembled log back and check it against its plan before it is
/// written, as TigerBeetle asserts what it is about to write: the summary
/// decodes with the reader's own checks ([`Summary::decode`]); its header
/// (checksums aside) and file records are exactly the plan's, and every
/// file record is well formed; its block entries fall where the plan put
/// the payload; the super root is where the plan puts it and valid; and
/// both checksums verify ([`verify_log`]). A difference is a constructor
/// bug, reported as [`Error::Invalid`] naming the log, before anything
/// reaches the device. The constructor runs it in test and debug builds.
pub fn check_log(plan: &LogPlan, log: &[u8], block_size: u32, seed: u32) -> Result<()> {
    let bad = |what: String| Error::Invalid(format!("log at block {}: {what}", plan.start));
    let bs = u64::from(block_size);
    if log.len() as u64 != u64::from(plan.header.nblocks) * bs {
        return Err(bad(format!(
            "{} bytes for {} blocks",
            log.len(),
            plan.header.nblocks
        )));
    }
    let sum = Summary::decode(log, block_size)
        .map_err(|e| bad(format!("its summary does not decode: {e}")))?;
    let mut header = sum.header;
    (header.datasum, header.sumsum) = (plan.header.datasum, plan.header.sumsum);
    if header != plan.header {
        return Err(bad(format!(
            "its summary header reads {header:?}, the plan says {:?}",
            plan.header
        )));
    }
    if sum.files != plan.files {
        return Err(bad("its file records differ from the plan's".into()));
    }
    for r in &sum.files {
        r.check()
            .map_err(|e| bad(format!("file record of inode {}: {e}", r.finfo.ino)))?;
    }
    let found: Vec<u64> = sum.block_entries(block_size).map(|e| e.index).collect();
    let planned: Vec<u64> = plan
        .payload
        .iter()
        .map(|&(_, b)| b.0.wrapping_sub(plan.start.0))
        .collect();
    if found != planned {
        return Err(bad(format!(
            "its block records describe blocks {found:?}, the plan writes {planned:?}"
        )));
    }
    match (sum.super_root_index(), plan.super_root) {
        (None, None) => {}
        (Some(i), Some(b)) if b.0 == plan.start.0 + i => {
            let at = (i * bs) as usize;
            super_root::check_valid(&log[at..at + bs as usize], block_size, seed)
                .map_err(|e| bad(format!("its super root: {e}")))?;
        }
        (found, planned) => {
            return Err(bad(format!(
                "super root at index {found:?}, the plan says block {planned:?}"
            )))
        }
    }
    verify_log(log, seed).map_err(|e| bad(e.to_string()))
}
