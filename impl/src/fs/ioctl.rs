//! The checkpoint ioctls (ioctl.c): `NILFS_IOCTL_SYNC` + `CHANGE_CPMODE`
//! (mkcp), `CHANGE_CPMODE` (chcp), `DELETE_CHECKPOINT` (rmcp) and
//! `GET_CPINFO` (lscp), on the mounted file system.

use super::Fs;
use crate::cpfile::CpMode;
use crate::format::cpfile::Checkpoint;
use crate::format::Cno;
use crate::Result;

impl<'a> Fs<'a> {
    /// `mkcp [-s]` (`NILFS_IOCTL_SYNC`, then `CHANGE_CPMODE`): make a
    /// checkpoint of everything (none if nothing changed) and return the
    /// latest checkpoint number; with `snapshot`, make it a snapshot, which
    /// the next construction records.
    pub fn mkcp(&mut self, snapshot: bool) -> Result<Cno> {
        self.begin(false)?;
        self.construct()?; // NILFS_IOCTL_SYNC: nilfs_construct_segment
        let cno = Cno(self.cpfile.file().next_cno().0 - 1);
        if snapshot {
            self.cpfile
                .file_mut()
                .change_mode(cno, CpMode::Snapshot, &[])?;
        }
        Ok(cno)
    }

    /// `chcp cp|ss CNO` (`nilfs_ioctl_change_cpmode`): ENOENT for a missing
    /// checkpoint; EBUSY to turn the latest checkpoint into a plain one
    /// (`nilfs_checkpoint_is_mounted`). Recorded by the next construction.
    pub fn chcp(&mut self, cno: Cno, snapshot: bool) -> Result<()> {
        self.begin(false)?;
        let mode = if snapshot {
            CpMode::Snapshot
        } else {
            CpMode::Checkpoint
        };
        self.cpfile.file_mut().change_mode(cno, mode, &[])
    }

    /// `rmcp CNO` (`nilfs_ioctl_delete_checkpoint`): EBUSY for a snapshot,
    /// ENOENT for a missing checkpoint. The kernel lets the latest
    /// checkpoint go too; nilfs-utils' rmcp only protects it in ranges.
    pub fn rmcp(&mut self, cno: Cno) -> Result<()> {
        self.begin(false)?;
        self.cpfile.file_mut().delete_checkpoint(cno)
    }

    /// `lscp` on the mounted file system (`NILFS_IOCTL_GET_CPINFO`): the
    /// valid checkpoints as the live cpfile has them, changes since the
    /// last construction included.
    pub fn lscp(&mut self) -> Result<Vec<Checkpoint>> {
        let mut out = Vec::new();
        let mut from = Cno(1);
        loop {
            let (batch, next) = self.cpfile.file_mut().cpinfos(from, 64)?;
            if batch.is_empty() {
                return Ok(out);
            }
            out.extend(batch);
            from = next;
        }
    }
}
