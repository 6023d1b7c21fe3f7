//! The ifile's write side (ifile.c, `nilfs_ifile_*`; digest §4.2): inode
//! numbers allocated through the persistent object allocator, raw inodes
//! read and written in their slots.

use crate::alloc::Palloc;
use crate::format::inode::Inode;
use crate::format::palloc::PallocGeometry;
use crate::format::{ino, Ino};
use crate::mdt::Mdt;
use crate::{Errno, Error, Result};

crate::metafile::meta_store!(Ifile, via palloc);

/// One checkpoint's ifile.
#[derive(Clone, Debug)]
pub struct Ifile<'a> {
    /// The allocator (and through it the file's blocks).
    palloc: Palloc<'a>,
    first_ino: u64,
}

impl<'a> Ifile<'a> {
    /// The ifile stored in `mdt`, with `inode_size`-byte slots
    /// (`s_inode_size`) and `first_ino` = `s_first_ino`.
    pub fn new(mdt: Mdt<'a>, inode_size: u32, first_ino: Ino) -> Result<Self> {
        if (inode_size as usize) < Inode::SIZE {
            return Err(Error::Invalid(format!("inode size {inode_size} below 128")));
        }
        let geo = PallocGeometry::new(mdt.block_size(), inode_size)?;
        Ok(Ifile {
            palloc: Palloc::new(mdt, geo),
            first_ino: first_ino.0,
        })
    }

    /// The allocator (read-only).
    pub fn palloc(&self) -> &Palloc<'a> {
        &self.palloc
    }

    /// `NILFS_VALID_INODE`: the root, the metadata files' numbers, or at
    /// least `s_first_ino`.
    pub fn valid_ino(&self, i: Ino) -> bool {
        const SYS: [Ino; 7] = [
            ino::ROOT,
            ino::DAT,
            ino::CPFILE,
            ino::SUFILE,
            ino::IFILE,
            ino::ATIME,
            ino::SKETCH,
        ];
        i.0 >= self.first_ino || SYS.contains(&i)
    }

    /// `nilfs_ifile_create_inode`: allocate the first free inode number at
    /// or above `s_first_ino` (no wrap-around, so lower numbers are never
    /// handed out; ENOSPC when none is left) and create its block. The
    /// slot is zero-filled here; the kernel does it when it first writes
    /// the new inode (`nilfs_update_inode` with `NILFS_I_NEW`), which
    /// comes to the same bytes on disk.
    pub fn create_inode(&mut self) -> Result<Ino> {
        let req = self.palloc.prepare_alloc(self.first_ino, false)?;
        let nr = req.entry_nr();
        match self.palloc.entry_create(nr) {
            Ok(slot) => slot.fill(0),
            Err(e) => {
                self.palloc.abort_alloc(req);
                return Err(e);
            }
        }
        self.palloc.commit_alloc(req);
        self.palloc.mark_entry_dirty(nr)?;
        Ok(Ino(nr))
    }

    /// `nilfs_ifile_delete_inode`: set the raw inode's `i_flags` to 0 and
    /// free the number (other fields stay as they were). EINVAL if it is
    /// not allocated; the entry block must exist.
    pub fn delete_inode(&mut self, i: Ino) -> Result<()> {
        let req = self.palloc.prepare_free(i.0)?;
        let Some(slot) = self.palloc.entry(i.0)? else {
            self.palloc.abort_free(req);
            return Err(Error::errno(
                Errno::ENOENT,
                format!("inode {i}: block is a hole"),
            ));
        };
        let mut raw = Inode::decode(slot)?;
        raw.flags = 0;
        raw.encode(slot);
        self.palloc.mark_entry_dirty(i.0)?;
        self.palloc.commit_free(req);
        Ok(())
    }

    fn slot_checked(&mut self, i: Ino) -> Result<&mut [u8]> {
        if !self.valid_ino(i) {
            return Err(Error::errno(
                Errno::EINVAL,
                format!("bad inode number: {i}"),
            ));
        }
        self.palloc
            .entry(i.0)?
            .ok_or_else(|| Error::errno(Errno::ENOENT, format!("inode {i}: block is a hole")))
    }

    /// The raw inode `i` (`nilfs_ifile_get_inode_block` + decode): EINVAL
    /// for an invalid number, ENOENT for a hole.
    pub fn read_inode(&mut self, i: Ino) -> Result<Inode> {
        Inode::decode(self.slot_checked(i)?)
    }

    /// Write the raw inode `i` into its slot and dirty the block (the
    /// first 128 bytes; the rest of a larger slot is left alone).
    pub fn write_inode(&mut self, i: Ino, raw: &Inode) -> Result<()> {
        raw.encode(self.slot_checked(i)?);
        self.palloc.mark_entry_dirty(i.0)
    }

    /// Whether inode number `i` is allocated.
    pub fn is_allocated(&mut self, i: Ino) -> Result<bool> {
        self.palloc.is_allocated(i.0)
    }
}
