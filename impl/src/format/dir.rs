//! Directory blocks: ext2-style records with a 64-bit inode number
//! (`struct nilfs_dir_entry`, digest §10).
//!
//! A record is `inode` (le64) @0, `rec_len` (le16) @8, `name_len` @10,
//! `file_type` @11 and the name @12, padded to `rec_len`. Records tile each
//! block exactly (the kernel's chunk is one block); `inode` 0 marks a record
//! that only holds space.

use super::inode::{S_IFBLK, S_IFCHR, S_IFDIR, S_IFIFO, S_IFLNK, S_IFMT, S_IFREG, S_IFSOCK};
use super::le::{layout, need, put_bytes};
use super::{ino, Ino};
use crate::{Error, Result};

/// `NILFS_FT_UNKNOWN`.
pub const FT_UNKNOWN: u8 = 0;
/// `NILFS_FT_REG_FILE`.
pub const FT_REG_FILE: u8 = 1;
/// `NILFS_FT_DIR`.
pub const FT_DIR: u8 = 2;
/// `NILFS_FT_CHRDEV`.
pub const FT_CHRDEV: u8 = 3;
/// `NILFS_FT_BLKDEV`.
pub const FT_BLKDEV: u8 = 4;
/// `NILFS_FT_FIFO`.
pub const FT_FIFO: u8 = 5;
/// `NILFS_FT_SOCK`.
pub const FT_SOCK: u8 = 6;
/// `NILFS_FT_SYMLINK`.
pub const FT_SYMLINK: u8 = 7;

/// Bytes before the name in a record: the header `DirEntry::FIELDS` lays out.
pub const NAME_OFFSET: usize = 12;
/// `NILFS_MAX_REC_LEN`: the on-disk value that stands for 65536.
const MAX_REC_LEN_ON_DISK: u16 = u16::MAX;

/// `NILFS_DIR_REC_LEN(name_len)`: the smallest record holding such a name,
/// header plus name rounded up to 8 bytes.
pub fn rec_len_for(name_len: usize) -> usize {
    (name_len + NAME_OFFSET + 7) & !7
}

/// The directory file type for an `i_mode` (the kernel's `fs_umode_to_ftype`).
pub fn file_type_from_mode(mode: u16) -> u8 {
    match mode & S_IFMT {
        S_IFREG => FT_REG_FILE,
        S_IFDIR => FT_DIR,
        S_IFCHR => FT_CHRDEV,
        S_IFBLK => FT_BLKDEV,
        S_IFIFO => FT_FIFO,
        S_IFSOCK => FT_SOCK,
        S_IFLNK => FT_SYMLINK,
        _ => FT_UNKNOWN,
    }
}

/// `NILFS_PRIVATE_INODE`: reserved inode numbers no directory may name
/// (everything below `NILFS_USER_INO` except the root and the sketch inode).
pub fn is_private_ino(n: Ino) -> bool {
    n < ino::USER && n != ino::ROOT && n != ino::SKETCH
}

/// One directory record.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DirEntry {
    /// `inode`; 0 = unused record.
    pub ino: Ino,
    /// `rec_len`, decoded: the on-disk 65535 reads as 65536.
    pub rec_len: u32,
    /// `name_len`.
    pub name_len: u8,
    /// `file_type` (`FT_*`).
    pub file_type: u8,
    /// The first `name_len` bytes after the header (stale in an unused
    /// record). Bytes between the name and `rec_len` are not kept.
    pub name: Vec<u8>,
}

layout!(DirEntry {
    inode: 0, 8;
    rec_len: 8, 2;
    name_len: 10, 1;
    file_type: 11, 1;
});

/// Why the record at `offs` with these fields breaks `nilfs_check_folio`,
/// if it does. The tests come in the kernel's order.
fn record_fault(
    offs: usize,
    rec_len: usize,
    name_len: u8,
    ino: Ino,
    block_size: usize,
) -> Option<&'static str> {
    if rec_len < rec_len_for(1) {
        Some("rec_len is smaller than minimal")
    } else if rec_len & 3 != 0 {
        Some("unaligned directory entry")
    } else if rec_len < rec_len_for(usize::from(name_len)) {
        Some("rec_len is too small for name_len")
    } else if offs.saturating_add(rec_len) > block_size {
        Some("directory entry across blocks")
    } else if ino.0 != 0 && is_private_ino(ino) {
        Some("disallowed inode number")
    } else {
        None
    }
}

/// Parse one directory block, returning every record (unused ones too), after
/// the checks `nilfs_check_folio` makes on each chunk:
/// - `rec_len` at least `NILFS_DIR_REC_LEN(1)` (16), a multiple of 4, and
///   at least `NILFS_DIR_REC_LEN(name_len)`;
/// - no record crosses the block end, and the last one ends exactly there;
/// - `inode` is not a private reserved number ([`is_private_ino`]).
///
/// What a block alone cannot show is the caller's to check: that `i_size` is
/// a multiple of the block size (also `nilfs_check_folio`), and that an inode
/// number is below the ifile's end and allocated (the kernel finds out only
/// when it loads the inode).
pub fn parse_block(buf: &[u8], block_size: u32) -> Result<Vec<DirEntry>> {
    super::check_block_size(block_size)?;
    let bs = block_size as usize;
    need(buf, bs, "directory block")?;
    let mut entries = Vec::new();
    let mut offs = 0usize;
    while offs + rec_len_for(1) <= bs {
        let raw = DirEntry::rec_len.at(offs).u16(buf);
        let rec_len = if raw == MAX_REC_LEN_ON_DISK {
            1usize << 16
        } else {
            usize::from(raw)
        };
        let name_len = DirEntry::name_len.at(offs).u8(buf);
        let ino = Ino(DirEntry::inode.at(offs).u64(buf));
        if let Some(fault) = record_fault(offs, rec_len, name_len, ino, bs) {
            return Err(Error::corrupt(
                "directory entry",
                format!(
                    "{fault}: offset {offs}, inode {ino}, rec_len {rec_len}, name_len {name_len}"
                ),
            ));
        }
        let name_start = offs + NAME_OFFSET;
        entries.push(DirEntry {
            ino,
            rec_len: rec_len as u32,
            name_len,
            file_type: DirEntry::file_type.at(offs).u8(buf),
            name: buf[name_start..name_start + usize::from(name_len)].to_vec(),
        });
        offs += rec_len;
    }
    if offs != bs {
        return Err(Error::corrupt(
            "directory entry",
            format!("records end at {offs}, not at the block end {bs}"),
        ));
    }
    Ok(entries)
}

/// Encode records into one block, `rec_len`s verbatim (65536 is written as
/// 65535). The records must pass the same checks as [`parse_block`], have
/// `name.len() == name_len`, and tile the block exactly; otherwise this
/// returns `Error::Invalid` and writes nothing. Padding after each name is 0.
pub fn encode_block(entries: &[DirEntry], block_size: u32) -> Result<Vec<u8>> {
    super::check_block_size(block_size)?;
    let bs = block_size as usize;
    let mut out = vec![0u8; bs];
    let mut offs = 0usize;
    for (i, e) in entries.iter().enumerate() {
        let rec_len = e.rec_len as usize;
        let fault = if e.name.len() != usize::from(e.name_len) {
            Some("name length differs from name_len")
        } else if offs >= bs {
            Some("record after the block end")
        } else {
            record_fault(offs, rec_len, e.name_len, e.ino, bs)
        };
        if let Some(fault) = fault {
            return Err(Error::Invalid(format!(
                "directory record {i} at offset {offs}: {fault}"
            )));
        }
        DirEntry::inode.at(offs).put_u64(&mut out, e.ino.0);
        let raw = if rec_len == 1 << 16 {
            MAX_REC_LEN_ON_DISK
        } else {
            rec_len as u16
        };
        DirEntry::rec_len.at(offs).put_u16(&mut out, raw);
        DirEntry::name_len.at(offs).put_u8(&mut out, e.name_len);
        DirEntry::file_type.at(offs).put_u8(&mut out, e.file_type);
        put_bytes(&mut out, offs + NAME_OFFSET, &e.name);
        offs += rec_len;
    }
    if offs != bs {
        return Err(Error::Invalid(format!(
            "directory records cover {offs} bytes of a {bs}-byte block"
        )));
    }
    Ok(out)
}

/// The first block of a new directory, as `nilfs_make_empty` writes it:
/// "." (rec_len 16) and ".." taking the rest of the block, both typed as
/// directories.
///
/// # Panics
/// If `block_size` is below 32, which no NILFS block size is.
pub fn empty_dir_block(self_ino: Ino, parent_ino: Ino, block_size: u32) -> Vec<u8> {
    let bs = block_size as usize;
    let dot_len = rec_len_for(1);
    let mut out = vec![0u8; bs];
    DirEntry::inode.put_u64(&mut out, self_ino.0);
    DirEntry::rec_len.put_u16(&mut out, dot_len as u16);
    DirEntry::name_len.put_u8(&mut out, 1);
    DirEntry::file_type.put_u8(&mut out, FT_DIR);
    put_bytes(&mut out, NAME_OFFSET, b".");
    let rest = bs - dot_len;
    DirEntry::inode.at(dot_len).put_u64(&mut out, parent_ino.0);
    DirEntry::rec_len.at(dot_len).put_u16(
        &mut out,
        if rest == 1 << 16 {
            MAX_REC_LEN_ON_DISK
        } else {
            rest as u16
        },
    );
    DirEntry::name_len.at(dot_len).put_u8(&mut out, 2);
    DirEntry::file_type.at(dot_len).put_u8(&mut out, FT_DIR);
    put_bytes(&mut out, dot_len + NAME_OFFSET, b"..");
    out
}
