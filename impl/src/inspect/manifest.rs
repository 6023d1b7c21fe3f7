//! The manifest of a checkpoint, in exactly the format of
//! tests/guest/manifest.sh (and grub-check.sh), so our view,
//! the kernel's and GRUB's can be diffed line for line:
//!
//! ```text
//! <sha256>  <size>  <path>      regular file
//! DIR  -  <path>/               directory
//! LNK  -  <path> -> <target>    symlink
//! ```
//!
//! Lines are sorted as `LC_ALL=C sort -k3` sorts them: bytewise by the text
//! from the third field to the end of the line.

use sha2::{Digest, Sha256};

use crate::format::inode::{S_IFDIR, S_IFLNK};
use crate::posix::{CheckpointView, Piece};
use crate::Result;

/// The manifest of every entry of the checkpoint.
pub fn manifest(view: &CheckpointView<'_, '_>) -> Result<String> {
    let mut lines: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
    view.walk_tree(&mut |path, _ino, inode| {
        let (key, line) = match inode.file_type() {
            S_IFDIR => {
                let mut key = path.to_vec();
                key.push(b'/');
                let mut line = b"DIR  -  ".to_vec();
                line.extend_from_slice(&key);
                (key, line)
            }
            S_IFLNK => {
                let mut key = path.to_vec();
                key.extend_from_slice(b" -> ");
                key.extend_from_slice(&view.readlink(inode)?);
                let mut line = b"LNK  -  ".to_vec();
                line.extend_from_slice(&key);
                (key, line)
            }
            _ => {
                // Streamed: memory stays one chunk whatever i_size says.
                let mut h = Sha256::new();
                let zeros = [0u8; 1 << 16];
                view.read_pieces(inode, &mut |p| {
                    match p {
                        Piece::Data(d) => h.update(d),
                        Piece::Hole(mut n) => {
                            while n > 0 {
                                let k = n.min(zeros.len() as u64) as usize;
                                h.update(&zeros[..k]);
                                n -= k as u64;
                            }
                        }
                    }
                    Ok(())
                })?;
                let hex: String = h.finalize().iter().map(|b| format!("{b:02x}")).collect();
                let mut line = format!("{hex}  {}  ", inode.size).into_bytes();
                line.extend_from_slice(path);
                (path.to_vec(), line)
            }
        };
        lines.push((key, line));
        Ok(())
    })?;
    lines.sort();
    let mut out = Vec::new();
    for (_, l) in lines {
        out.extend_from_slice(&l);
        out.push(b'\n');
    }
    Ok(String::from_utf8_lossy(&out).into_owned())
}
