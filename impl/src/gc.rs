//! The kernel's half of garbage collection, minus the construction:
//! the arguments of `NILFS_IOCTL_CLEAN_SEGMENTS` and the GC inodes that
//! `nilfs_ioctl_move_blocks` fills (gcinode.c).
//!
//! A live block of an old segment keeps its virtual block number when the
//! cleaner moves it: it is read into the page cache of a *GC inode* — one
//! per (inode number, checkpoint number) the block was written under — and
//! the next construction writes it anew, pointing the DAT entry at the new
//! place (`nilfs_dat_move`). No bmap changes. The DAT's own blocks have no
//! virtual numbers; the cleaner marks the live ones dirty and the DAT stage
//! rewrites them.
//!
//! Seed 001 ("shorten freeze period due to GC in write operation") moved
//! the reads of `nilfs_ioctl_move_blocks` out of the transaction lock:
//! [`move_blocks`] needs only the device, so it runs before the segment
//! constructor is locked (see `txn::Shared::clean_segments`).
//!
//! Must not know: where the arguments came from (the cleaner's policy is
//! `cleaner`), or how a construction lays the blocks out (`fs`).

use std::collections::BTreeMap;

use crate::device::{read_block, BlockDevice};
use crate::format::btree::BtreeNode;
use crate::format::{BlockNr, Cno, Ino, SegNum, VBlockNr};
use crate::{Errno, Error, Result};

/// `struct nilfs_period`: checkpoints `[start, end)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Period {
    pub start: Cno,
    pub end: Cno,
}

/// `struct nilfs_vdesc`: one block with a virtual block number found in a
/// segment to clean.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Vdesc {
    pub ino: Ino,
    /// `fi_cno` of the log it was found in (0 for the cpfile and sufile).
    pub cno: Cno,
    pub vblocknr: VBlockNr,
    /// The DAT entry's lifetime `[de_start, de_end)` (`NILFS_IOCTL_GET_VINFO`).
    pub period: Period,
    /// File block offset (data blocks).
    pub offset: u64,
    /// Where it lies in the segment.
    pub blocknr: BlockNr,
    /// `vd_flags`: a B-tree node rather than a data block.
    pub node: bool,
}

/// `struct nilfs_bdesc`: one block of the DAT found in a segment to clean.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Bdesc {
    pub ino: Ino,
    /// Where it lies in the segment.
    pub oblocknr: BlockNr,
    /// Where the DAT's mapping points now (`NILFS_IOCTL_GET_BDESCS`); the
    /// block is live iff the two agree.
    pub blocknr: BlockNr,
    /// File block offset (data) or first key (node).
    pub offset: u64,
    /// 0 for a data block, the node's level otherwise.
    pub level: u8,
}

/// The five vectors of `NILFS_IOCTL_CLEAN_SEGMENTS`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CleanArgs {
    /// Live virtual blocks to move (`nilfs_ioctl_move_blocks`).
    pub vdescs: Vec<Vdesc>,
    /// Checkpoints to delete (`nilfs_ioctl_delete_checkpoints`).
    pub periods: Vec<Period>,
    /// Dead virtual block numbers to free (`nilfs_ioctl_free_vblocknrs`).
    pub vblocknrs: Vec<VBlockNr>,
    /// Live DAT blocks to rewrite (`nilfs_ioctl_mark_blocks_dirty`).
    pub bdescs: Vec<Bdesc>,
    /// The segments to free once the moved blocks are written.
    pub segnums: Vec<SegNum>,
}

/// A B-tree node held by a GC inode.
#[derive(Clone, Debug)]
struct GcNode {
    level: u8,
    first_key: u64,
    data: Vec<u8>,
}

/// One GC inode: the blocks of inode `ino` as checkpoint `cno` wrote them
/// (`nilfs_iget_for_gc`), data by file offset, nodes by virtual number
/// (its btnode cache).
#[derive(Clone, Debug)]
pub struct GcInode {
    pub ino: Ino,
    pub cno: Cno,
    data: BTreeMap<u64, (VBlockNr, Vec<u8>)>,
    nodes: BTreeMap<VBlockNr, GcNode>,
}

/// One block a GC construction writes, in collection order.
#[derive(Clone, Debug)]
pub struct GcBlock<'m> {
    pub ino: Ino,
    pub cno: Cno,
    pub vblocknr: VBlockNr,
    /// `Some(offset)` for a data block, `None` for a node.
    pub offset: Option<u64>,
    pub data: &'m [u8],
}

/// The GC inodes `nilfs_ioctl_move_blocks` filled (`ns_gc_inodes`).
#[derive(Clone, Debug, Default)]
pub struct MovedBlocks {
    /// In list order: `list_add` puts each new GC inode at the head.
    inodes: Vec<GcInode>,
}

impl MovedBlocks {
    /// No block to move.
    pub fn is_empty(&self) -> bool {
        self.inodes.is_empty()
    }

    /// How many blocks.
    pub fn len(&self) -> usize {
        self.inodes
            .iter()
            .map(|i| i.data.len() + i.nodes.len())
            .sum()
    }

    /// Every block in the order the GC stage collects them: GC inodes from
    /// the head of the list; in each, data blocks by offset (page order),
    /// then nodes level by level, each level by first key
    /// (`nilfs_btree_lookup_dirty_buffers` over the btnode cache, which it
    /// walks in virtual-number order).
    pub fn blocks(&self) -> Vec<GcBlock<'_>> {
        let mut out = Vec::with_capacity(self.len());
        for gi in &self.inodes {
            for (&off, (v, d)) in &gi.data {
                out.push(GcBlock {
                    ino: gi.ino,
                    cno: gi.cno,
                    vblocknr: *v,
                    offset: Some(off),
                    data: d,
                });
            }
            let mut nodes: Vec<(&VBlockNr, &GcNode)> = gi.nodes.iter().collect();
            nodes.sort_by_key(|(v, n)| (n.level, n.first_key, **v));
            for (v, n) in nodes {
                out.push(GcBlock {
                    ino: gi.ino,
                    cno: gi.cno,
                    vblocknr: *v,
                    offset: None,
                    data: &n.data,
                });
            }
        }
        out
    }
}

/// `nilfs_ioctl_move_blocks`: read every live block named by `vdescs` from
/// where it lies into the GC inode of its (ino, cno). Reads the device and
/// nothing else. A block asked for twice is EEXIST (the kernel's
/// "conflicting buffer"); a node that fails the B-tree node checks is EIO
/// (`nilfs_gccache_wait_and_mark_dirty`).
pub fn move_blocks(
    dev: &dyn BlockDevice,
    block_size: u32,
    vdescs: &[Vdesc],
) -> Result<MovedBlocks> {
    let mut moved = MovedBlocks::default();
    let nblocks = dev.size_bytes() / u64::from(block_size);
    for vd in vdescs {
        if vd.blocknr.0 == 0 || vd.blocknr.0 >= nblocks {
            return Err(Error::errno(
                Errno::EINVAL,
                format!(
                    "GC: block {} of inode {} is outside the device",
                    vd.blocknr, vd.ino
                ),
            ));
        }
        let at = match moved
            .inodes
            .iter()
            .position(|g| g.ino == vd.ino && g.cno == vd.cno)
        {
            Some(i) => i,
            None => {
                moved.inodes.insert(
                    0,
                    GcInode {
                        ino: vd.ino,
                        cno: vd.cno,
                        data: BTreeMap::new(),
                        nodes: BTreeMap::new(),
                    },
                );
                0
            }
        };
        let gi = &mut moved.inodes[at];
        let conflict = if vd.node {
            gi.nodes.contains_key(&vd.vblocknr)
        } else {
            gi.data.contains_key(&vd.offset)
        };
        if conflict {
            return Err(Error::errno(
                Errno::EEXIST,
                format!(
                    "GC: conflicting {} buffer: ino={}, cno={}, offset={}, blocknr={}, vblocknr={}",
                    if vd.node { "node" } else { "data" },
                    vd.ino,
                    vd.cno,
                    vd.offset,
                    vd.blocknr,
                    vd.vblocknr
                ),
            ));
        }
        let data = read_block(dev, block_size, vd.blocknr.0)?;
        if vd.node {
            let bt = BtreeNode::decode_block(&data, block_size).map_err(|e| {
                Error::errno(
                    Errno::EIO,
                    format!("GC: broken B-tree node at {}: {e}", vd.blocknr),
                )
            })?;
            let first_key = bt.key(0).unwrap_or(0);
            gi.nodes.insert(
                vd.vblocknr,
                GcNode {
                    level: bt.level,
                    first_key,
                    data,
                },
            );
        } else {
            gi.data.insert(vd.offset, (vd.vblocknr, data));
        }
    }
    Ok(moved)
}
