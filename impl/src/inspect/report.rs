//! `nilref inspect`: what a mount would decide, in words. Both super block
//! copies and which one is chosen and why; the logs the super root search
//! visited; the log chain of the latest super root's segment up to it; the
//! super root and its three inodes.

use std::fmt::Write;

use crate::device::BlockDevice;
use crate::format::bmap::BmapRoot;
use crate::format::inode::Inode;
use crate::format::segsum::{
    SegmentSummary, Summary, SS_GC, SS_LOGBGN, SS_LOGEND, SS_SR, SS_SYNDT,
};
use crate::format::superblock::SuperBlock;
use crate::format::{BlockNr, SegNum, Seq, SEGSUM_MAGIC};
use crate::recovery::LogVisit;
use crate::the_nilfs::Nilfs;
use crate::Result;

/// Flag letters for a log, in a fixed order: B(egin) E(nd) S(uper root)
/// D(ata-only sync) G(C).
pub fn log_flags(flags: u16) -> String {
    let mut s = String::new();
    for (bit, c) in [
        (SS_LOGBGN, 'B'),
        (SS_LOGEND, 'E'),
        (SS_SR, 'S'),
        (SS_SYNDT, 'D'),
        (SS_GC, 'G'),
    ] {
        s.push(if flags & bit != 0 { c } else { '-' });
    }
    s
}

fn describe_sb(
    out: &mut String,
    name: &str,
    offset: u64,
    sb: Option<&SuperBlock>,
    valid: &std::result::Result<(), String>,
) {
    let _ = write!(out, "{name:<9} @ byte {offset}: ");
    match (sb, valid) {
        (Some(sb), Ok(())) => {
            let _ = writeln!(
                out,
                "valid; s_last_cno {}, s_last_pseg {}, s_last_seq {}, s_wtime {}, s_state {:#x}{}",
                sb.last_cno,
                sb.last_pseg,
                sb.last_seq,
                sb.wtime,
                sb.state,
                if sb.state & crate::format::superblock::STATE_VALID_FS != 0 {
                    " (clean)"
                } else {
                    " (not clean)"
                }
            );
        }
        (_, Err(why)) => {
            let _ = writeln!(out, "invalid: {why}");
        }
        (None, Ok(())) => {
            let _ = writeln!(out, "unreadable");
        }
    }
}

fn describe_visit(out: &mut String, v: &LogVisit) {
    let _ = write!(out, "  pseg {:>10}  seq {:>6}  ", v.pseg, v.seq);
    match (&v.header, &v.verdict) {
        (Some(h), Ok(())) => {
            let _ = write!(
                out,
                "{}  nblocks {:>5}  cno {:>6}  next {:>10}",
                log_flags(h.flags),
                h.nblocks,
                h.cno,
                h.next
            );
            if let Some(c) = v.super_root_cno {
                let _ = write!(out, "  super root: checkpoint {c}");
            }
            let _ = writeln!(out);
        }
        (_, Err(why)) => {
            let _ = writeln!(out, "invalid: {why}");
        }
        (None, Ok(())) => {
            let _ = writeln!(out, "unreadable");
        }
    }
}

/// One line describing a mapping root.
pub fn describe_bmap(inode: &Inode) -> String {
    match BmapRoot::decode(&inode.bmap) {
        Ok(BmapRoot::Direct(d)) => {
            let ptrs: Vec<String> = d.ptrs.iter().map(|p| p.to_string()).collect();
            format!("direct [{}]", ptrs.join(" "))
        }
        Ok(BmapRoot::Btree(n)) => {
            let n_valid = usize::from(n.nchildren).min(n.keys.len());
            let pairs: Vec<String> = (0..n_valid)
                .map(|i| format!("{}:{}", n.keys[i], n.ptrs[i]))
                .collect();
            format!(
                "btree root level {} nchildren {} [{}]",
                n.level,
                n.nchildren,
                pairs.join(" ")
            )
        }
        Err(e) => format!("broken: {e}"),
    }
}

fn describe_inode(out: &mut String, name: &str, i: &Inode) {
    let _ = writeln!(
        out,
        "  {name:<7} mode {:06o} links {} blocks {} size {} mtime {}  bmap: {}",
        i.mode,
        i.links_count,
        i.blocks,
        i.size,
        i.mtime,
        describe_bmap(i)
    );
}

/// The full inspection report of the filesystem on `dev`.
pub fn inspect(dev: &dyn BlockDevice) -> Result<String> {
    let mut out = String::new();
    let fs = Nilfs::open(dev)?;
    let c = &fs.sb_choice;
    let _ = writeln!(out, "== super blocks");
    for (i, name) in ["primary", "secondary"].iter().enumerate() {
        match &c.copies[i] {
            Some(copy) => describe_sb(&mut out, name, copy.offset, copy.sb.as_ref(), &copy.valid),
            None => {
                let _ = writeln!(out, "{name:<9}: none (device too small)");
            }
        }
    }
    let _ = writeln!(
        out,
        "chosen: {} ({})",
        ["primary", "secondary"][c.chosen],
        c.reason
    );
    if fs.rolled_back {
        let _ = writeln!(
            out,
            "the scan from the chosen copy failed; rolled back to the spare copy"
        );
    }
    let sb = &fs.sb;
    let _ = writeln!(
        out,
        "geometry: block size {}, {} blocks per segment, {} segments, first data block {}, device {} bytes",
        fs.geo.block_size, fs.geo.blocks_per_segment, fs.geo.nsegments, fs.geo.first_data_block, sb.dev_size
    );
    let _ = writeln!(
        out,
        "uuid {}, label \"{}\", crc seed {:#010x}, reserved {}%, features compat {:#x} compat_ro {:#x} incompat {:#x}",
        sb.uuid_string(),
        sb.volume_label(),
        sb.crc_seed,
        sb.r_segments_percentage,
        sb.feature_compat,
        sb.feature_compat_ro,
        sb.feature_incompat
    );

    let s = &fs.scan;
    let _ = writeln!(
        out,
        "\n== super root search (from pseg {}, seq {}, cno {}; {})",
        sb.last_pseg,
        sb.last_seq,
        sb.last_cno,
        if sb.state & crate::format::superblock::STATE_VALID_FS != 0 {
            "clean: stop at the first super root"
        } else {
            "not clean: scan for newer logs"
        }
    );
    for v in &s.visits {
        describe_visit(&mut out, v);
    }
    let _ = writeln!(
        out,
        "latest super root: block {} in the log at {} (seq {}, checkpoint {}); writer resumes in segment {} at offset {}, next segment {}",
        s.super_root, s.sr_pseg, s.seq, s.cno, s.segnum, s.pseg_offset, s.nextnum
    );
    if let Some((p, q)) = s.lsegs_start {
        let _ = writeln!(
            out,
            "unclosed logical segment after it starts at {p} (seq {q}): roll-forward candidate"
        );
    }

    let _ = writeln!(
        out,
        "\n== log chain back from the latest super root (its logical segment)"
    );
    for (p, h, files) in log_chain_back(&fs)? {
        let _ = writeln!(
            out,
            "  pseg {:>10}  seq {:>6}  {}  nblocks {:>5}  cno {:>6}  files(ino:blocks) {}",
            p,
            h.seq,
            log_flags(h.flags),
            h.nblocks,
            h.cno,
            files
        );
    }

    let sr = &fs.super_root;
    let _ = writeln!(
        out,
        "\n== super root at block {}: sr_bytes {}, sr_flags {}, sr_nongc_ctime {}, checksum ok",
        s.super_root, sr.bytes, sr.flags, sr.nongc_ctime
    );
    describe_inode(&mut out, "DAT", &sr.dat);
    describe_inode(&mut out, "cpfile", &sr.cpfile);
    describe_inode(&mut out, "sufile", &sr.sufile);

    let cph = fs.cpfile_header()?;
    let suh = fs.sufile_header()?;
    let _ = writeln!(
        out,
        "\n== metadata\ncpfile: {} checkpoints, {} snapshots; sufile: {} clean, {} dirty segments, last allocated {}",
        cph.ncheckpoints, cph.nsnapshots, suh.ncleansegs, suh.ndirtysegs, suh.last_alloc
    );
    if let Some(cp) = fs.checkpoint(s.cno)? {
        let _ = writeln!(
            out,
            "checkpoint {}: created {}, {} inodes, {} blocks, {} blocks written",
            cp.cno, cp.create, cp.inodes_count, cp.blocks_count, cp.nblk_inc
        );
        describe_inode(&mut out, "ifile", &cp.ifile_inode);
        if let Some(root) = fs.ifile_inode(&cp.ifile_inode, crate::format::ino::ROOT)? {
            describe_inode(&mut out, "root", &root);
        }
    }
    Ok(out)
}

/// The logs of the logical segment that wrote the latest super root, oldest
/// first: from the log with `LOGBGN` to the super root's log. NILFS2 logs
/// point forward only (`ss_next`), so the walk back finds, at each step, the
/// segment whose logs carry the previous sequence number and name the
/// current segment as next. Bounded by the number of segments.
fn log_chain_back(fs: &Nilfs<'_>) -> Result<Vec<(BlockNr, SegmentSummary, String)>> {
    let s = &fs.scan;
    let mut chain = Vec::new();
    let mut segnum = s.segnum;
    let mut seq = s.seq;
    let mut upto = s.sr_pseg;
    for _ in 0..=fs.geo.nsegments {
        let mut logs = segment_logs(fs, segnum, seq, upto)?;
        let begin = logs.iter().rposition(|(_, h, _)| h.flags & SS_LOGBGN != 0);
        if let Some(i) = begin {
            logs.drain(..i);
        }
        logs.append(&mut chain);
        chain = logs;
        if begin.is_some() || seq.0 == 0 {
            break;
        }
        // Find the predecessor segment in the chain.
        let (cur_start, _) = fs.geo.range(segnum);
        let prev = (0..fs.geo.nsegments).map(SegNum).find(|&cand| {
            let (start, _) = fs.geo.range(cand);
            fs.read_block(start)
                .ok()
                .and_then(|b| SegmentSummary::decode(&b).ok())
                .is_some_and(|h| {
                    h.magic == SEGSUM_MAGIC
                        && h.seq.0.checked_add(1) == Some(seq.0)
                        && h.next == cur_start
                })
        });
        let Some(prev) = prev else { break };
        segnum = prev;
        seq = Seq(seq.0 - 1);
        upto = fs.geo.range(prev).1;
    }
    Ok(chain)
}

/// Valid logs of segment `segnum` carrying `seq`, from its start up to and
/// including the log at `upto`.
fn segment_logs(
    fs: &Nilfs<'_>,
    segnum: SegNum,
    seq: Seq,
    upto: BlockNr,
) -> Result<Vec<(BlockNr, SegmentSummary, String)>> {
    let (mut p, end) = fs.geo.range(segnum);
    let bs = u64::from(fs.geo.block_size);
    let mut out = Vec::new();
    while p <= upto && p < end {
        let first = fs.read_block(p)?;
        let Ok(h) = SegmentSummary::decode(&first) else {
            break;
        };
        if h.magic != SEGSUM_MAGIC || h.seq != seq || h.nblocks == 0 {
            break;
        }
        let nsum = u64::from(h.sumbytes)
            .div_ceil(bs)
            .clamp(1, u64::from(h.nblocks));
        let mut buf = first;
        for b in 1..nsum {
            buf.extend_from_slice(&fs.read_block(BlockNr(p.0 + b))?);
        }
        let files = Summary::decode(&buf, fs.geo.block_size)
            .map(|sum| {
                sum.files
                    .iter()
                    .map(|f| format!("{}:{}", f.finfo.ino, f.finfo.nblocks))
                    .collect::<Vec<_>>()
                    .join(" ")
            })
            .unwrap_or_else(|e| format!("summary unreadable: {e}"));
        let n = u64::from(h.nblocks);
        out.push((p, h, files));
        p = BlockNr(p.0 + n);
    }
    Ok(out)
}
