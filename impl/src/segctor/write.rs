//! Writing a laid-out log: the summary blocks, the payload in order, the
//! super root, the checksums in the kernel's order (`sr_sum`, then
//! `ss_sumsum`, then `ss_datasum`, which covers both), then one write
//! (`nilfs_prepare_write_logs`, `nilfs_segbuf_fill_in_segsum`,
//! `nilfs_segbuf_fill_in_segsum_crc`, `_data_crc`, `nilfs_write_logs`).

use std::collections::BTreeMap;

use super::layout::LogPlan;
use crate::device::BlockDevice;
use crate::format::segsum::{seal_log, Summary};
use crate::format::super_root;
use crate::{Error, Result};

/// Assemble the bytes of `plan`: `payload` gives each tagged block's
/// content (exactly one block each), `super_root` the super root block
/// (its checksum is computed here). Returns the log, sealed.
pub fn assemble(
    plan: &LogPlan,
    payload: &BTreeMap<u64, Vec<u8>>,
    super_root: Option<&[u8]>,
    block_size: u32,
    seed: u32,
) -> Result<Vec<u8>> {
    let bs = block_size as usize;
    let summary = Summary {
        header: plan.header,
        files: plan.files.clone(),
    };
    let sum = summary.encode(block_size);
    let nblocks = plan.header.nblocks as usize;
    let mut log = Vec::with_capacity(nblocks * bs);
    log.extend_from_slice(&sum);
    for (tag, _) in &plan.payload {
        let data = payload
            .get(tag)
            .ok_or_else(|| Error::Invalid(format!("no content for payload block {tag}")))?;
        if data.len() != bs {
            return Err(Error::Invalid(format!(
                "payload block {tag} is {} bytes",
                data.len()
            )));
        }
        log.extend_from_slice(data);
    }
    match (plan.super_root, super_root) {
        (Some(_), Some(sr)) => {
            let mut b = sr.to_vec();
            b.resize(bs, 0);
            super_root::seal_block(&mut b, seed);
            log.extend_from_slice(&b);
        }
        (None, None) => {}
        _ => {
            return Err(Error::Invalid(
                "super root given for a log without one, or missing".into(),
            ))
        }
    }
    if log.len() != nblocks * bs {
        return Err(Error::Invalid(format!(
            "log assembles to {} blocks, the plan says {nblocks}",
            log.len() / bs
        )));
    }
    seal_log(&mut log, seed);
    Ok(log)
}

/// Write an assembled log at its start block.
pub fn write(dev: &dyn BlockDevice, plan: &LogPlan, log: &[u8], block_size: u32) -> Result<()> {
    dev.write_at(plan.start.0 * u64::from(block_size), log)
}
