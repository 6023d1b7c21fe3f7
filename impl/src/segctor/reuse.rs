//! A segment the sufile calls clean must hold no block still in use before
//! a construction writes into it (issue 13: a damaged sufile marking a
//! live segment clean made the next write overwrite live blocks, leaving an
//! image that no longer read).
//!
//! The kernel trusts the sufile: `nilfs_sufile_alloc` hands out any clean
//! segment. We check, once per segment, when a construction is about to
//! write its first log at the segment's head: each log whose summary is
//! sound (magic, size, `ss_sumsum` under this file system's seed) is
//! walked, and a block it describes is in use if the mapping still points
//! at it — an allocated DAT entry whose `de_blocknr` is the block, or, for
//! the DAT's own blocks, the DAT's mapping. On a consistent image no clean
//! segment ever holds such a block (the cleaner frees the virtual numbers
//! of what it leaves behind, and a never-written segment has no sound
//! summary), so the check only costs the summary reads: one block for a
//! fresh segment, the summaries of the old logs for a reused one. A
//! segment that fails it is corruption; the construction is rolled back
//! like any other that fails, and the image is left as it was.

use super::layout::LogPlan;
use crate::bmap::DiskNodes;
use crate::device::read_block;
use crate::format::segsum::{compute_sumsum, Binfo, SegmentSummary, Summary};
use crate::format::{BlockNr, SegNum, SEGSUM_MAGIC};
use crate::fs::Fs;
use crate::{Error, Result};

impl Fs<'_> {
    /// Check every segment `plans` write from its head
    /// ([module docs](self)).
    pub(super) fn check_reused_segments(&mut self, plans: &[LogPlan]) -> Result<()> {
        for p in plans {
            if self.geo.range(p.segnum).0 == p.start {
                self.check_segment_unused(p.segnum)?;
            }
        }
        Ok(())
    }

    fn check_segment_unused(&mut self, s: SegNum) -> Result<()> {
        let (start, end) = self.geo.range(s);
        let (bs, seed) = (self.bs, self.sb.crc_seed);
        let mut pseg = start.0;
        while pseg <= end.0 {
            let head = read_block(self.dev, bs, pseg)?;
            let Ok(h) = SegmentSummary::decode(&head) else {
                break;
            };
            let n = u64::from(h.nblocks);
            let nsum = u64::from(h.sumbytes).div_ceil(u64::from(bs));
            if h.magic != SEGSUM_MAGIC || n == 0 || pseg + n > end.0 + 1 || nsum == 0 || nsum > n {
                break;
            }
            let mut sum = head;
            for b in 1..nsum {
                sum.extend_from_slice(&read_block(self.dev, bs, pseg + b)?);
            }
            if compute_sumsum(&sum, seed, h.sumbytes) != h.sumsum {
                break;
            }
            let Ok(summary) = Summary::decode(&sum, bs) else {
                break;
            };
            for e in summary.block_entries(bs) {
                let pbn = pseg + e.index;
                if let Some(what) = self.block_in_use(e.binfo, pbn)? {
                    return Err(Error::corrupt(
                        "segment usage",
                        format!(
                            "segment {s} is marked clean, but its block {pbn} is still in use ({what} of inode {}); writing there would destroy it",
                            e.ino
                        ),
                    ));
                }
            }
            pseg += n;
        }
        Ok(())
    }

    /// What still points at block `pbn`, described by `binfo`, if anything.
    fn block_in_use(&mut self, binfo: &Binfo, pbn: u64) -> Result<Option<String>> {
        match *binfo {
            Binfo::DataV { vblocknr: v, .. } | Binfo::NodeV { vblocknr: v } => {
                let dat = self.dat.file_mut();
                // A number the DAT cannot hold (a damaged summary) or an
                // entry block that is a hole: nothing allocated points here.
                match dat.is_allocated(v) {
                    Ok(true) => {}
                    Err(e @ Error::Io { .. }) => return Err(e),
                    Ok(false) | Err(_) => return Ok(None),
                }
                let e = dat.entry(v)?;
                Ok((e.blocknr == BlockNr(pbn)).then(|| format!("virtual block {v}")))
            }
            Binfo::DataDat { blkoff } => self.dat_block_at(blkoff.0, 0, pbn),
            Binfo::NodeDat { blkoff, level } => self.dat_block_at(blkoff.0, level, pbn),
        }
    }

    fn dat_block_at(&mut self, key: u64, level: u8, pbn: u64) -> Result<Option<String>> {
        let mut src = DiskNodes::physical(self.dev, self.bs);
        let (_, bmap, _) = self.dat.split();
        let at = bmap.lookup_at_level(key, level, &mut src)?;
        Ok((at == Some(pbn)).then(|| format!("DAT block {key} at level {level}")))
    }
}
