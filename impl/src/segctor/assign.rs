//! Assignment and fill-in: once the layout fixed every block's address,
//! the DAT learns where the virtual blocks went and the DAT's own mapping
//! takes the addresses directly (`nilfs_segctor_assign`,
//! `nilfs_segctor_update_payload_blocknr`, `nilfs_bmap_assign`); then the
//! metadata that describes the logs is filled in — segment usage
//! (`nilfs_segctor_update_segusage`), the checkpoint
//! (`nilfs_segctor_fill_in_checkpoint`), the super root
//! (`nilfs_segctor_fill_in_super_root`) — and the logs are assembled.

use std::collections::BTreeSet;

use super::collect::propagated_ptr;
use super::{has_delta, Construction, Src};
use crate::bmap::write::LeafHint;
use crate::bmap::DiskNodes;
use crate::cpfile::CheckpointFinal;
use crate::format::super_root::{super_root_bytes, SuperRoot};
use crate::format::{ino, BlockNr, Cno, Ino, VBlockNr};
use crate::fs::Fs;
use crate::metafile::is_metadata;
use crate::{Error, Result};

/// What the fill-in leaves for the write: every laid-out block's final
/// content, indexed by the layout's tag, and the super root block
/// (unsealed).
pub(super) struct Filled {
    pub(super) payload: Vec<Content>,
    pub(super) super_root: Vec<u8>,
}

/// A laid-out block's final content: built for the log (a node, a
/// metadata block, a block the cleaner moves), or a user file's dirty
/// block, which the write reads where it lies rather than copying it.
pub(super) enum Content {
    Built(Vec<u8>),
    Dirty(Ino, u64),
}

impl<'a> Fs<'a> {
    /// Give every laid-out block its address: DAT entries of virtual
    /// blocks start at it (`nilfs_dat_commit_start`), moved GC blocks are
    /// repointed (`nilfs_btree_assign_gc` -> `nilfs_dat_move`), the DAT's
    /// own blocks and nodes are pointed at directly (`nilfs_btree_assign_p`).
    pub(super) fn assign_addresses(&mut self, c: &mut Construction) -> Result<()> {
        let (dev, bs, cno) = (self.dev, self.bs, c.cno);
        let mut pbn_of: Vec<BlockNr> = vec![BlockNr(0); c.srcs.len()];
        for p in &c.plans {
            for &(tag, b) in &p.payload {
                pbn_of[tag as usize] = b;
            }
        }
        let gc_blocks = c.gc.as_ref().map_or(&[][..], |g| g.moved.blocks());
        // Debug builds check that the number collection recorded is still
        // the one the mapping holds (the file whose blocks were looked up
        // last, and where).
        let mut hint: Option<(Ino, LeafHint)> = None;
        for (t, s) in c.srcs.iter().enumerate() {
            let pbn = pbn_of[t];
            match *s {
                Src::DatData(key) => {
                    let (_, bmap, _) = self.dat.split();
                    bmap.update_ptr(key, pbn.0, &mut DiskNodes::physical(dev, bs))?;
                }
                Src::Node(i, id) if i == ino::DAT => {
                    let (_, bmap, _) = self.dat.split();
                    bmap.assign(id, pbn.0)?;
                }
                Src::Data(i, key, v) => {
                    if cfg!(debug_assertions) {
                        let h = match &mut hint {
                            Some((at, h)) if *at == i => h,
                            _ => &mut hint.insert((i, LeafHint::default())).1,
                        };
                        let now = propagated_ptr(self.bmap_of_mut(i), key, h)?;
                        debug_assert_eq!(now, v.0, "block {key} of inode {i} was renumbered");
                    }
                    self.dat.file_mut().start(v, cno, pbn)?;
                }
                Src::Node(i, id) => {
                    let (_, _, v) = self
                        .bmap_of_mut(i)
                        .node_info(id)
                        .expect("segctor: dirty node exists");
                    self.dat.file_mut().start(VBlockNr(v), cno, pbn)?;
                }
                Src::Gc(n) => self.dat.file_mut().move_block(gc_blocks[n].vblocknr, pbn)?,
            }
        }
        self.dat.write_root()
    }

    /// Fill in segment usage, the checkpoint and the super root; returns
    /// every block's final content and the super root block, for the
    /// write to assemble the logs from.
    pub(super) fn fill_in(&mut self, c: &mut Construction) -> Result<Filled> {
        let (bs, cno, ctime) = (self.bs, c.cno, c.ctime);
        let gc_blocks = c.gc.as_ref().map_or(&[][..], |g| g.moved.blocks());
        let gc_tags: BTreeSet<(Ino, Cno)> = gc_blocks.iter().map(|b| (b.ino, b.cno)).collect();
        let nblk_inc: u64 = c.plans.iter().map(|p| u64::from(p.header.nblocks)).sum();
        for p in &c.plans {
            self.sufile
                .file_mut()
                .set_segment_usage(p.segnum, p.live_blocks as u32, ctime)?;
        }
        self.ifile.write_root()?;
        let fin = CheckpointFinal {
            inodes_count: self.inodes_count,
            blocks_count: self.blocks_count,
            nblk_inc,
            create: ctime,
            // nilfs_segctor_do_construct ->
            // nilfs_cpfile_finalize_checkpoint(.., !HAVE_DELTA).
            minor: !(self.sc.have_delta || c.plans.iter().any(|p| has_delta(p, &gc_tags))),
            ifile_inode: self.ifile.raw().clone(),
        };
        self.cpfile.file_mut().finalize_checkpoint(cno, &fin)?;
        // Contents, now final.
        let mut payload: Vec<Content> = Vec::with_capacity(c.srcs.len());
        for s in &c.srcs {
            let data = match *s {
                Src::Data(i, key, _) if !is_metadata(i) => {
                    if !self.inodes.loaded(i).dirty.contains_key(&key) {
                        return Err(Error::Invalid(format!(
                            "dirty block {key} of inode {i} vanished"
                        )));
                    }
                    Content::Dirty(i, key)
                }
                Src::Data(i, key, _) => Content::Built(self.meta_block(i, key)?),
                Src::DatData(key) => Content::Built(self.meta_block(ino::DAT, key)?),
                Src::Node(i, id) => Content::Built(self.bmap_of_mut(i).encode_node(id)?),
                Src::Gc(n) => Content::Built(gc_blocks[n].data.clone()),
            };
            payload.push(data);
        }
        let isz = self.sb.inode_size;
        let super_root = SuperRoot {
            sum: 0,
            bytes: super_root_bytes(isz),
            flags: 0,
            // nilfs_segctor_fill_in_super_root: a GC construction keeps the
            // last non-GC time.
            nongc_ctime: if c.gc.is_some() {
                self.nongc_ctime
            } else {
                ctime
            },
            dat: self.dat.raw().clone(),
            cpfile: self.cpfile.raw().clone(),
            sufile: self.sufile.raw().clone(),
        }
        .encode(bs, isz);
        Ok(Filled {
            payload,
            super_root,
        })
    }

    /// The mapping of file `i` (a user file in memory or a metadata file).
    fn bmap_of_mut(&mut self, i: Ino) -> &mut crate::bmap::write::Bmap {
        if is_metadata(i) {
            self.meta_file(i).expect("a metadata file").bmap
        } else {
            &mut self.inodes.loaded_mut(i).bmap
        }
    }

    /// The final content of a metadata file's block being written.
    fn meta_block(&mut self, i: Ino, key: u64) -> Result<Vec<u8>> {
        let m = self.meta_file(i).expect("a metadata file");
        m.mdt
            .read(key)?
            .ok_or_else(|| Error::Invalid(format!("dirty block {key} of inode {i} vanished")))
    }
}
