//! Propagation (`nilfs_bmap_propagate`): before a log can hold a file's
//! dirty blocks, each must have the pointer it will be found by. The one
//! routine here serves the user files and the ifile, cpfile and sufile
//! (virtual pointers), the DAT (physical pointers), and the data-only path:
//!
//! - a virtually mapped block new to its mapping gets a fresh virtual number
//!   (`nilfs_bmap_prepare_alloc_ptr`); a rewritten one gets a new number and
//!   its old one ends at this checkpoint (`nilfs_dat_prepare_update`,
//!   `nilfs_btree_prepare_update_v`), dead at once for single-version files;
//! - a physically mapped block (the DAT's own) new to its mapping is
//!   inserted with a temporary pointer; its address comes at assignment;
//! - the path of every block becomes dirty, and then each dirty B-tree node
//!   not yet given its new virtual number in this log gets one
//!   (`nilfs_btree_propagate_v`); the DAT's nodes get addresses at
//!   assignment instead.
//!
//! Then the stages in their order: [`Fs::propagate_construction`] runs the
//! part before collection (deletions, GC, files, ifile, the checkpoint
//! entry); the cpfile, sufile and DAT are propagated inside the collection
//! loop ([`Fs::propagate_late_stages`]), because laying out the logs
//! changes them.

use std::collections::BTreeSet;

use super::{Construction, Stage};
use crate::bmap::write::{Bmap, KeySlot, Vacancy, TEMP_PTR_BIT};
use crate::bmap::{DiskNodes, NodeSource};
use crate::dat::{target_seq, Dat};
use crate::device::BlockDevice;
use crate::format::inode::Inode;
use crate::format::{Cno, VBlockNr};
use crate::fs::{sectors, Fs};
use crate::metafile::{MetaParts, MetaStore, PtrType};
use crate::Result;

/// What one propagation did.
#[derive(Debug, Default)]
pub(crate) struct Propagated {
    /// The pointer each key now holds, in key order (a virtual number, or
    /// the temporary pointer of a DAT block).
    pub(crate) ptrs: Vec<u64>,
    /// Blocks the mapping gained: newly mapped data blocks and the node
    /// blocks their inserts created (`i_blocks` grows by these).
    pub(crate) added: u64,
}

/// One mapping to propagate: the file's bmap, its raw inode, what its
/// pointers are, and where its new virtual numbers should come from.
pub(crate) struct Mapping<'m> {
    pub(crate) bmap: &'m mut Bmap,
    pub(crate) raw: &'m mut Inode,
    pub(crate) ptr_type: PtrType,
    /// The DAT allocation target (`nilfs_bmap_find_target`).
    pub(crate) target: VBlockNr,
}

impl<'m> Mapping<'m> {
    /// A metadata file's mapping. Its group target is its inode number's
    /// area, as for any file (`nilfs_bmap_find_target_in_group` reads
    /// `b_inode->i_ino`: 24,576 for the ifile at 4 KiB blocks, where a
    /// kernel-written image has its new ifile blocks).
    pub(crate) fn meta(m: MetaParts<'m, '_>, target: VBlockNr) -> Self {
        Mapping {
            bmap: m.bmap,
            raw: m.raw,
            ptr_type: m.ptr_type,
            target,
        }
    }
}

/// Where the new virtual number of a block rewritten in place is sought:
/// next to the one it replaces — the old number itself in a direct mapping
/// (`nilfs_direct_propagate`), the one after it in a B-tree
/// (`nilfs_btree_prepare_update_v`), whatever the file's own target.
fn update_target(map: &Mapping<'_>, old: u64) -> VBlockNr {
    if map.bmap.is_btree() {
        VBlockNr(old.wrapping_add(1))
    } else {
        VBlockNr(old)
    }
}

/// Where a data block new to its mapping seeks its virtual number
/// (`nilfs_direct_find_target_v`, `nilfs_btree_find_target_v`): after the
/// last one the mapping allocated, by the distance between their keys,
/// when that is under 7 (`nilfs_bmap_find_target_seq`); else, in a
/// B-tree, next to its neighbour on the insert's path
/// (`nilfs_btree_find_near`); else the file's area of its DAT group
/// (`nilfs_bmap_find_target_in_group`).
fn new_block_target(file_target: VBlockNr, vacancy: &Vacancy<'_>, key: u64) -> VBlockNr {
    if let Some(t) = vacancy
        .bmap()
        .last_allocated()
        .and_then(|(k, p)| target_seq(k, VBlockNr(p), key))
    {
        return t;
    }
    vacancy.near().map_or(file_target, VBlockNr)
}

/// Whether [`propagate`] gives the dirty nodes their new numbers too.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Nodes {
    /// Yes, and write the root into the raw inode (a full construction).
    Assign,
    /// No: the nodes stay dirty for the next full construction (dsync).
    Leave,
}

/// `nilfs_bmap_propagate` for data blocks `keys` of `map` (and, with
/// [`Nodes::Assign`], its dirty nodes), ending and allocating through
/// `dat` at checkpoint `cno`.
pub(crate) fn propagate(
    dat: &mut Dat<'_>,
    dev: &dyn BlockDevice,
    bs: u32,
    cno: Cno,
    map: Mapping<'_>,
    keys: &[u64],
    nodes: Nodes,
) -> Result<Propagated> {
    let mut out = Propagated::default();
    let vs = map.ptr_type.is_single_version();
    if map.ptr_type == PtrType::Physical {
        let src: &mut dyn NodeSource = &mut DiskNodes::physical(dev, bs);
        for &k in keys {
            let ptr = match map.bmap.lookup(k, src)? {
                Some(p) => p,
                None => {
                    let temp = TEMP_PTR_BIT | k;
                    let ins = map.bmap.insert(k, temp, src)?;
                    out.added += 1 + u64::from(ins.nodes_added);
                    temp
                }
            };
            map.bmap.mark_data_dirty(k, src)?;
            out.ptrs.push(ptr);
        }
        map.raw.blocks = map.raw.blocks.wrapping_add(out.added * sectors(bs));
        return Ok(out);
    }
    for &key in keys {
        // One descent for a block the mapping has (nilfs_btree_propagate:
        // the path of its lookup serves nilfs_btree_commit_update_v, which
        // also leaves the path dirty); only the DAT changes in between.
        // A new block's insert starts from that descent's path too
        // (nilfs_btree_insert's one lookup; the vacancy holds the mapping
        // until then), and leaves the path it edits dirty: no
        // nilfs_bmap_propagate descent is left to make for it.
        let found = map
            .bmap
            .find_slot(key, &mut DiskNodes::translated(dev, bs, dat))?;
        let ptr = match found {
            KeySlot::Vacant(vacancy) => {
                let target = new_block_target(map.target, &vacancy, key);
                let v = dat.alloc(target)?;
                let ins = vacancy.insert(v.0, &mut DiskNodes::translated(dev, bs, dat))?;
                map.bmap.set_last_allocated(key, v.0);
                out.added += 1 + u64::from(ins.nodes_added);
                v
            }
            KeySlot::Mapped(old, slot) => {
                let req = dat.prepare_update(VBlockNr(old), cno, update_target(&map, old))?;
                let new = dat.commit_update(req, vs);
                map.bmap.update_slot(slot, new.0)?;
                new
            }
        };
        out.ptrs.push(ptr.0);
    }
    // nilfs_inode_add_blocks: i_blocks wraps on a damaged count, as in
    // the kernel's inode_add_bytes.
    map.raw.blocks = map.raw.blocks.wrapping_add(out.added * sectors(bs));
    if nodes == Nodes::Assign {
        // A construction that grows may dirty more nodes after a first
        // pass: only those not yet assigned in this log get numbers.
        for dn in map.bmap.dirty_nodes().into_iter().filter(|d| !d.assigned) {
            let new = match dn.old_ptr {
                Some(old) => {
                    // A node lives in a B-tree: nilfs_btree_prepare_update_v.
                    let req =
                        dat.prepare_update(VBlockNr(old), cno, VBlockNr(old.wrapping_add(1)))?;
                    dat.commit_update(req, vs)
                }
                None => dat.alloc(map.target)?,
            };
            map.bmap.assign(dn.id, new.0)?;
        }
        // nilfs_bmap_write only for inodes with a mapping: a device
        // node's i_bmap[0] is its number (nilfs_write_inode_common).
        if !map.raw.is_special() {
            map.raw.bmap = map.bmap.root_bmap()?;
        }
    }
    Ok(out)
}

impl<'a> Fs<'a> {
    /// Propagate one metadata file's `keys` (and its nodes) through the DAT.
    fn propagate_meta(&mut self, which: MetaWhich, cno: Cno, keys: &[u64]) -> Result<()> {
        let (dev, bs) = (self.dev, self.bs);
        let dat = self.dat.file_mut();
        let parts = match which {
            MetaWhich::Ifile => self.ifile.parts(),
            MetaWhich::Cpfile => self.cpfile.parts(),
            MetaWhich::Sufile => self.sufile.parts(),
        };
        let target = dat.target_for_ino(parts.ino);
        propagate(
            dat,
            dev,
            bs,
            cno,
            Mapping::meta(parts, target),
            keys,
            Nodes::Assign,
        )?;
        Ok(())
    }

    /// Everything a full construction propagates before its blocks are
    /// collected, stage by stage: the metadata files' deletions, the GC
    /// blocks' DAT entries, the user files, their inodes into the ifile and
    /// the ifile itself, and the new checkpoint's entry.
    pub(super) fn propagate_construction(&mut self, c: &mut Construction) -> Result<()> {
        let cno = c.cno;
        // Blocks deleted from the metadata files since the last
        // construction (`nilfs_mdt_delete_block` -> `nilfs_bmap_delete`).
        self.apply_meta_deletions(cno)?;
        // NILFS_ST_GC: the moved blocks keep their virtual numbers; their
        // DAT entries will point at the new places
        // (`nilfs_btree_propagate_gc` -> `nilfs_dat_mark_dirty`).
        c.stage = Stage::Gc;
        if let Some(g) = &c.gc {
            for b in g.moved.blocks() {
                self.dat.file_mut().mark_dirty(b.vblocknr)?;
            }
        }
        // NILFS_ST_FILE: user files, in the order they were dirtied.
        c.stage = Stage::File;
        c.order = self.inodes.take_dirty();
        for &i in &c.order {
            self.propagate_user_file(i, cno, Nodes::Assign)?;
        }
        // NILFS_ST_IFILE: the inodes, then the ifile's blocks; then the
        // checkpoint entry (created when the constructor leaves the ifile
        // stage, `nilfs_segctor_create_checkpoint`).
        c.stage = Stage::Ifile;
        for &i in &c.order {
            let f = self.inodes.loaded(i);
            if f.needs_write() {
                let raw = f.raw.clone();
                self.ifile.file_mut().write_inode(i, &raw)?;
            }
        }
        let if_keys = self.ifile.file().mdt().dirty_blocks();
        self.propagate_meta(MetaWhich::Ifile, cno, &if_keys)?;
        self.cpfile.file_mut().create_checkpoint(cno)
    }

    /// Give every dirty data block of user file `i` (and, with
    /// [`Nodes::Assign`], every dirty node) a new virtual block number for
    /// checkpoint `cno`. Returns the keys propagated, in order, and what
    /// propagation did.
    pub(super) fn propagate_user_file(
        &mut self,
        i: crate::format::Ino,
        cno: Cno,
        nodes: Nodes,
    ) -> Result<(Vec<u64>, Propagated)> {
        let (dev, bs) = (self.dev, self.bs);
        let target = self.dat.file().target_for_ino(i);
        let f = self.inodes.loaded_mut(i);
        if let Some(d) = &f.dir {
            for b in d.dirty_blocks().collect::<Vec<_>>() {
                f.dirty.insert(b, d.blocks()[b as usize].to_vec());
            }
        }
        let keys: Vec<u64> = f.dirty.keys().copied().collect();
        let map = Mapping {
            bmap: &mut f.bmap,
            raw: &mut f.raw,
            ptr_type: PtrType::MultiVersion,
            target,
        };
        let out = propagate(self.dat.file_mut(), dev, bs, cno, map, &keys, nodes)?;
        // nilfs_inode_add_blocks (atomic64): wraps on a damaged count.
        self.blocks_count = self.blocks_count.wrapping_add(out.added);
        Ok((keys, out))
    }

    /// The stages the collection loop propagates on every pass, because
    /// laying out the logs changes them: the cpfile once
    /// (`NILFS_ST_CPFILE`), the sufile's blocks not yet propagated — an
    /// extension in an earlier pass may have dirtied the usage blocks of
    /// the segments it added, which join the stage now, as the kernel's
    /// retry collects the sufile's dirty blocks afresh (`NILFS_ST_SUFILE`)
    /// — and the DAT's dirty blocks in its own physical mapping
    /// (`NILFS_ST_DAT`). Returns the DAT's dirty blocks.
    pub(super) fn propagate_late_stages(
        &mut self,
        c: &mut Construction,
        cpfile_done: &mut bool,
        sufile_done: &mut BTreeSet<u64>,
    ) -> Result<Vec<u64>> {
        let cno = c.cno;
        c.stage = Stage::Cpfile;
        if !*cpfile_done {
            let keys = self.cpfile.file().mdt().dirty_blocks();
            self.propagate_meta(MetaWhich::Cpfile, cno, &keys)?;
            *cpfile_done = true;
        }
        c.stage = Stage::Sufile;
        let su_keys: Vec<u64> = self
            .sufile
            .file()
            .mdt()
            .dirty_blocks()
            .into_iter()
            .filter(|k| !sufile_done.contains(k))
            .collect();
        if !su_keys.is_empty() {
            self.propagate_meta(MetaWhich::Sufile, cno, &su_keys)?;
            sufile_done.extend(su_keys);
        }
        c.stage = Stage::Dat;
        let (dev, bs) = (self.dev, self.bs);
        let (dat, bmap, raw) = self.dat.split();
        let keys = dat.mdt().dirty_blocks();
        let map = Mapping {
            bmap,
            raw,
            ptr_type: PtrType::Physical,
            target: VBlockNr(0),
        };
        propagate(dat, dev, bs, cno, map, &keys, Nodes::Leave)?;
        Ok(keys)
    }

    /// Take the blocks the metadata files deleted (the cpfile's emptied
    /// checkpoint blocks, the DAT's emptied entry and bitmap blocks after
    /// the cleaner freed numbers) out of their mappings, as
    /// `nilfs_mdt_delete_block` -> `nilfs_bmap_delete` does; the virtual
    /// numbers of the cpfile's and sufile's blocks end dead at once
    /// (`NILFS_BMAP_PTR_VS`), the ifile's at checkpoint `cno`.
    pub(crate) fn apply_meta_deletions(&mut self, cno: Cno) -> Result<()> {
        let (dev, bs) = (self.dev, self.bs);
        let deleted = [
            self.ifile.file().mdt().deleted_blocks(),
            self.cpfile.file().mdt().deleted_blocks(),
            self.sufile.file().mdt().deleted_blocks(),
            self.dat.file().mdt().deleted_blocks(),
        ];
        let [ifile, cpfile, sufile, datk] = deleted;
        let dat = self.dat.file_mut();
        delete_virtual(self.ifile.parts(), dat, dev, bs, cno, &ifile)?;
        delete_virtual(self.cpfile.parts(), dat, dev, bs, cno, &cpfile)?;
        delete_virtual(self.sufile.parts(), dat, dev, bs, cno, &sufile)?;
        // The DAT's pointers are disk blocks: nothing to end.
        let (_, bmap, raw) = self.dat.split();
        let src = &mut DiskNodes::physical(dev, bs);
        for key in datk {
            if bmap.lookup(key, src)?.is_none() {
                continue;
            }
            let out = bmap.delete(key, src)?;
            raw.blocks = raw
                .blocks
                .saturating_sub((1 + u64::from(out.nodes_removed)) * sectors(bs));
        }
        Ok(())
    }
}

/// Which virtually mapped metadata file.
#[derive(Clone, Copy)]
enum MetaWhich {
    Ifile,
    Cpfile,
    Sufile,
}

/// Delete `keys` from a virtually mapped metadata file, ending their
/// virtual numbers and those of the nodes the deletes freed.
fn delete_virtual(
    m: MetaParts<'_, '_>,
    dat: &mut Dat<'_>,
    dev: &dyn BlockDevice,
    bs: u32,
    cno: Cno,
    keys: &[u64],
) -> Result<()> {
    let vs = m.ptr_type.is_single_version();
    for &key in keys {
        if m.bmap
            .lookup(key, &mut DiskNodes::translated(dev, bs, dat))?
            .is_none()
        {
            continue;
        }
        let out = m
            .bmap
            .delete(key, &mut DiskNodes::translated(dev, bs, dat))?;
        m.raw.blocks = m
            .raw
            .blocks
            .saturating_sub((1 + u64::from(out.nodes_removed)) * sectors(bs));
        dat.end(VBlockNr(out.ptr), cno, vs)?;
        for p in out.freed_nodes {
            dat.end(VBlockNr(p), cno, vs)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    //! Where new virtual numbers are sought, checked on the numbers a
    //! construction hands out. Each test leaves a free entry at the start
    //! of the file's DAT area, where the group target would land, so a
    //! sequential or near target that is not followed shows as a number
    //! taken from that hole.

    use crate::device::MemDevice;
    use crate::format::{ino, Ino, VBlockNr};
    use crate::fs::Fs;
    use crate::mkfs::{mkfs, MkfsOptions};
    use crate::the_nilfs::Nilfs;

    const T0: u64 = 1_800_000_000;

    /// `f` on a fresh 256 MiB file system of 4 KiB blocks, mounted.
    fn with_fs(f: impl FnOnce(&mut Fs<'_>)) {
        let dev = MemDevice::new(256 << 20);
        mkfs(&dev, &MkfsOptions::default()).unwrap();
        let nilfs = Nilfs::open(&dev).unwrap();
        f(&mut Fs::mount(&nilfs, T0).unwrap());
    }

    fn ptr(fs: &mut Fs<'_>, i: Ino, key: u64) -> u64 {
        fs.inodes
            .loaded_mut(i)
            .bmap
            .lookup_in_memory(key)
            .expect("in memory")
            .unwrap_or_else(|| panic!("block {key} of inode {i} is mapped"))
    }

    /// Write `keys` of `i` (one block each) and sync.
    fn write_blocks(fs: &mut Fs<'_>, i: Ino, keys: impl IntoIterator<Item = u64>) {
        for k in keys {
            fs.write(i, k * 4096, &[k as u8 + 1; 4096]).expect("write");
        }
        fs.sync().expect("sync");
    }

    /// A file `x` in the same DAT area as the file the test watches (its
    /// inode number is 8 below), written and synced, then deleted and its
    /// numbers freed, as the cleaner frees dead blocks' numbers
    /// (`nilfs_ioctl_free_vblocknrs`): the area's first entries are free.
    fn hole_below(fs: &mut Fs<'_>, xs: &[u64]) {
        fs.unlink(ino::ROOT, b"x").expect("unlink");
        fs.sync().expect("sync");
        let vs: Vec<VBlockNr> = xs.iter().map(|&v| VBlockNr(v)).collect();
        fs.dat.file_mut().free_vblocknrs(&vs).expect("free");
    }

    /// `x` (inode 12) with `n` blocks, seven fillers, then the watched
    /// file (inode 20, the same area: 20 % 8 == 12 % 8).
    fn setup(fs: &mut Fs<'_>, n: u64) -> (Vec<u64>, Ino) {
        let x = fs.create(ino::ROOT, b"x", 0o644).expect("create");
        assert_eq!(x, Ino(12));
        write_blocks(fs, x, 0..n);
        let xs: Vec<u64> = (0..n).map(|k| ptr(fs, x, k)).collect();
        for d in 1..=7u8 {
            fs.create(ino::ROOT, &[b'd', b'0' + d], 0o644)
                .expect("filler");
        }
        let a = fs.create(ino::ROOT, b"a", 0o644).expect("create");
        assert_eq!(a, Ino(20));
        (xs, a)
    }

    #[test]
    fn an_appended_block_continues_after_the_last_number_allocated() {
        with_fs(|fs| {
            let (xs, a) = setup(fs, 3);
            write_blocks(fs, a, 0..3);
            let first: Vec<u64> = (0..3).map(|k| ptr(fs, a, k)).collect();
            assert_eq!(first[1], first[0] + 1, "{first:?}");
            assert_eq!(first[2], first[1] + 1, "{first:?}");
            hole_below(fs, &xs);
            write_blocks(fs, a, [3]);
            // nilfs_bmap_find_target_seq: last + (3 - 2); the group target
            // would have taken the freed xs[0].
            assert_eq!(ptr(fs, a, 3), first[2] + 1, "freed: {xs:?}");
        });
    }

    #[test]
    fn a_block_far_from_the_last_is_numbered_near_its_left_neighbour() {
        with_fs(|fs| {
            let (xs, a) = setup(fs, 3);
            write_blocks(fs, a, 0..20);
            let p19 = ptr(fs, a, 19);
            hole_below(fs, &xs);
            // 100 - 19 is not under 7, so no sequential target; the insert's
            // path has key 19 left of 100 in the level-1 node
            // (nilfs_btree_find_near), so the search starts at its number.
            write_blocks(fs, a, [100]);
            let p100 = ptr(fs, a, 100);
            assert!(
                p100 > p19,
                "block 100 got {p100}, block 19 has {p19}; freed {xs:?}"
            );
        });
    }

    #[test]
    fn new_metadata_blocks_are_numbered_in_their_files_area() {
        with_fs(|fs| {
            // 320 inodes at 32 to a 4 KiB block: ifile blocks up to 11, so a
            // B-tree (more than 7 blocks).
            for n in 0..320u32 {
                fs.create(ino::ROOT, format!("f{n}").as_bytes(), 0o644)
                    .expect("create");
            }
            fs.sync().expect("sync");
            let area = fs.dat.file().target_for_ino(ino::IFILE).0;
            assert_eq!(area, 24_576);
            let bmap = fs.ifile.parts().bmap;
            assert!(bmap.is_btree());
            // mkfs wrote blocks 0-2; every block an insert added is numbered
            // from the ifile's area, as on a kernel-written image.
            for key in 3..=11 {
                let p = bmap.lookup_in_memory(key).unwrap().expect("mapped");
                assert!(
                    (area..area + 4096).contains(&p),
                    "ifile block {key} has virtual number {p}"
                );
            }
        });
    }
}
