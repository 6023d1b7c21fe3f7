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
//! `cleaner`), or how a construction lays the blocks out (`segctor`).

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
struct GcNode {
    level: u8,
    first_key: u64,
    data: Vec<u8>,
}

/// One GC inode while `move_blocks` fills it: the blocks of inode `ino`
/// as checkpoint `cno` wrote them (`nilfs_iget_for_gc`), data by file
/// offset, nodes by virtual number (its btnode cache).
struct GcInode {
    ino: Ino,
    cno: Cno,
    data: BTreeMap<u64, (VBlockNr, Vec<u8>)>,
    nodes: BTreeMap<VBlockNr, GcNode>,
}

/// One block a GC construction writes.
#[derive(Clone, Debug)]
pub struct GcBlock {
    pub ino: Ino,
    pub cno: Cno,
    pub vblocknr: VBlockNr,
    /// `Some(offset)` for a data block, `None` for a node.
    pub offset: Option<u64>,
    pub data: Vec<u8>,
}

/// What `nilfs_ioctl_move_blocks` read (`ns_gc_inodes`), in the order the
/// GC stage collects it: GC inodes from the head of the list (`list_add`
/// puts each new one there); in each, data blocks by offset (page order),
/// then nodes level by level, each level by first key
/// (`nilfs_btree_lookup_dirty_buffers` over the btnode cache, which it
/// walks in virtual-number order).
#[derive(Clone, Debug, Default)]
pub struct MovedBlocks {
    blocks: Vec<GcBlock>,
}

impl MovedBlocks {
    /// No block to move.
    pub fn is_empty(&self) -> bool {
        self.blocks.is_empty()
    }

    /// How many blocks.
    pub fn len(&self) -> usize {
        self.blocks.len()
    }

    /// Every block, in collection order.
    pub fn blocks(&self) -> &[GcBlock] {
        &self.blocks
    }

    fn from_inodes(inodes: Vec<GcInode>) -> Self {
        let mut blocks = Vec::new();
        for gi in inodes {
            let (ino, cno) = (gi.ino, gi.cno);
            for (off, (vblocknr, data)) in gi.data {
                blocks.push(GcBlock {
                    ino,
                    cno,
                    vblocknr,
                    offset: Some(off),
                    data,
                });
            }
            let mut nodes: Vec<(VBlockNr, GcNode)> = gi.nodes.into_iter().collect();
            nodes.sort_by_key(|(v, n)| (n.level, n.first_key, *v));
            for (vblocknr, n) in nodes {
                blocks.push(GcBlock {
                    ino,
                    cno,
                    vblocknr,
                    offset: None,
                    data: n.data,
                });
            }
        }
        MovedBlocks { blocks }
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
    let mut inodes: Vec<GcInode> = Vec::new();
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
        let at = match inodes
            .iter()
            .position(|g| g.ino == vd.ino && g.cno == vd.cno)
        {
            Some(i) => i,
            None => {
                inodes.insert(
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
        let gi = &mut inodes[at];
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
    Ok(MovedBlocks::from_inodes(inodes))
}
