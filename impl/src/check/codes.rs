//! The invariants the checker enforces, each with a stable identifier (like
//! e2fsck's problem codes), the pass that checks it, its severity, the kernel
//! function (Linux 6.1 fs/nilfs2 unless noted) that the rule comes from, and
//! one line saying what it means. docs/check.md lists the same table; a test
//! keeps the two equal.

use std::fmt;

/// How bad a finding is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Severity {
    /// Reported for information: the image is consistent (for example, an
    /// unlinked inode still allocated, as an open file leaves it at a crash).
    Warning,
    /// The image breaks an invariant: `nilref check` exits with 4.
    Error,
}

macro_rules! codes {
    ($( $v:ident = $id:literal, $pass:literal, $sev:ident, $kfn:literal, $desc:literal; )*) => {
        /// One invariant of the on-disk format.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub enum Code { $( #[doc = $desc] $v, )* }

        impl Code {
            /// Every code, in pass order.
            pub const ALL: &'static [Code] = &[$( Code::$v, )*];

            /// The stable identifier (`sb-crc`, `dat-not-live`, ...).
            pub fn id(self) -> &'static str {
                match self { $( Code::$v => $id, )* }
            }

            /// The pass (1-7) that checks it.
            pub fn pass(self) -> u8 {
                match self { $( Code::$v => $pass, )* }
            }

            /// How bad a violation is.
            pub fn severity(self) -> Severity {
                match self { $( Code::$v => Severity::$sev, )* }
            }

            /// The kernel function the invariant comes from.
            pub fn kernel(self) -> &'static str {
                match self { $( Code::$v => $kfn, )* }
            }

            /// What the invariant says, in one line.
            pub fn summary(self) -> &'static str {
                match self { $( Code::$v => $desc, )* }
            }

            /// The code with identifier `id`.
            pub fn from_id(id: &str) -> Option<Code> {
                Code::ALL.iter().copied().find(|c| c.id() == id)
            }
        }
    };
}

codes! {
    // Pass 1: super blocks.
    SbMagic = "sb-magic", 1, Error, "nilfs_valid_sb",
        "a super block copy carries NILFS_SUPER_MAGIC";
    SbBytes = "sb-bytes", 1, Error, "nilfs_valid_sb",
        "s_bytes covers at least the fields up to s_sum and at most 1024 bytes";
    SbCrc = "sb-crc", 1, Error, "nilfs_valid_sb",
        "s_sum is the CRC of the first s_bytes bytes";
    SbBytesShort = "sb-bytes-short", 1, Error, "nilfs_setup_super",
        "a valid copy's s_bytes reaches past the log cursor (s_last_cno, s_last_pseg, s_last_seq), which the kernel copies from one copy to the other only as far as s_bytes";
    SbGeometry = "sb-geometry", 1, Error, "nilfs_store_disk_layout",
        "the chosen copy's geometry is one the kernel mounts (revision, sizes, segments within the device, features)";
    SbCopiesDiffer = "sb-copies-differ", 1, Error, "nilfs_commit_super",
        "the two copies agree on every field the kernel never changes after mkfs";
    SbCursor = "sb-cursor", 1, Error, "nilfs_search_super_root",
        "s_last_pseg/s_last_seq lead to a valid log with a super root";
    SbLastCno = "sb-last-cno", 1, Error, "nilfs_search_super_root",
        "s_last_cno is the checkpoint the log at s_last_pseg made (its ss_cno)";
    SbErrorState = "sb-error-state", 1, Error, "nilfs_setup_super",
        "s_state has no NILFS_ERROR_FS (the kernel recorded no error)";
    SbFeatures = "sb-features", 1, Error, "nilfs_check_feature_compatibility",
        "s_feature_compat_ro has only bits the kernel knows (others force a read-only mount; e2fsck refuses unknown ro_compat bits)";
    SbDevSize = "sb-dev-size", 1, Error, "nilfs_resize_fs",
        "s_dev_size is no larger than the device (e2fsck: the file system is larger than the device)";
    // Pass 2: logs.
    LogMagic = "log-magic", 2, Error, "nilfs_validate_log",
        "every log the segment usage counts starts with NILFS_SEGSUM_MAGIC";
    LogSeq = "log-seq", 2, Error, "nilfs_validate_log",
        "every log of a segment carries the segment's ss_seq";
    LogSize = "log-size", 2, Error, "nilfs_validate_log",
        "ss_nblocks is at least 1 and the log ends inside its segment";
    LogSummary = "log-summary", 2, Error, "nilfs_read_summary_info",
        "ss_bytes, ss_sumbytes, finfo and binfo records lie inside the summary and their blocks inside the log";
    LogSumsum = "log-sumsum", 2, Error, "nilfs_segbuf_fill_in_segsum_crc",
        "ss_sumsum is the CRC of the summary";
    LogDatasum = "log-datasum", 2, Error, "nilfs_validate_log",
        "ss_datasum is the CRC of the whole log";
    LogSuperRoot = "log-super-root", 2, Error, "nilfs_read_super_root_block",
        "a super root has 0 < sr_bytes <= block size and a matching sr_sum";
    LogSrBytes = "log-sr-bytes", 2, Warning, "nilfs_segctor_fill_in_super_root",
        "a super root's sr_bytes is NILFS_SR_BYTES of the inode size, as every writer writes it (the kernel reads any value up to the block size, for the checksum only)";
    LogFlags = "log-flags", 2, Error, "nilfs_segbuf_fill_in_segsum",
        "ss_flags has only the bits the format defines (LOGBGN, LOGEND, SR, SYNDT, GC)";
    LogNext = "log-next", 2, Error, "nilfs_segbuf_set_next_segnum",
        "ss_next is the start of another segment, the same for every log of a segment";
    LogSeqDuplicate = "log-seq-duplicate", 2, Error, "nilfs_shift_to_next_segment",
        "no two segments holding logs carry the same ss_seq";
    LogLogicalSegment = "log-logical-segment", 2, Error, "nilfs_search_super_root",
        "LOGBGN and LOGEND pair up within a segment and a super root only ends a logical segment";
    LogCno = "log-cno", 2, Error, "nilfs_segbuf_fill_in_segsum",
        "ss_cno never decreases from one log to the next of a segment";
    LogBinfo = "log-binfo", 2, Error, "nilfs_scan_dsync_log",
        "a finfo names a valid inode number and a non-DAT binfo a nonzero virtual block";
    LogDsync = "log-dsync", 2, Error, "nilfs_recover_dsync_blocks",
        "a data-sync log after the last super root holds data blocks of an inode the latest checkpoint has, inside its size";
    LogBinfoFile = "log-binfo-file", 2, Error, "nilfs_ioctl_move_blocks",
        "a live block's log names the inode and offset that reach it (fi_ino, and bi_blkoff for data): the cleaner moves blocks by what the log says";
    LogTail = "log-tail", 2, Warning, "nilfs_search_super_root",
        "the log the search reaches after the latest super root is whole or absent, not broken (a torn or damaged one: recovery stops there and nothing after it is replayed)";
    LogAfterClean = "log-after-clean", 2, Error, "nilfs_search_super_root",
        "a file system marked clean (VALID_FS) has no log past its latest super root that recovery would apply (a newer super root, or a whole logical segment of data-sync logs): a mount clears the mark (nilfs_setup_super), so a crash before the first construction would apply it (found by the image_mutate fuzz target)";
    LogRevivable = "log-revivable", 2, Error, "nilfs_search_super_root",
        "no valid log of the sequence the writer will give its segment lies past the log where the search after the latest super root stops: a later log that ends where it begins makes the next recovery replay it, old blocks into whatever inode has their number now (K20; Linux 6.1 does)";
    LogSrCno = "log-sr-cno", 2, Error, "nilfs_segctor_fill_in_super_root",
        "the latest super root's log carries the checkpoint number the scan gives it";
    // Pass 3: B-trees of every file and metadata file.
    BtreeRoot = "btree-root", 3, Error, "nilfs_btree_root_broken",
        "a root has level 1..13, at most 3 children, and is empty only at level 1";
    BtreeNode = "btree-node", 3, Error, "nilfs_btree_node_broken",
        "a node block has level 1..13, flags 0 (no ROOT flag, no undefined bit) and at most ncmax children";
    BtreeNodeEmpty = "btree-node-empty", 3, Error, "nilfs_btree_node_broken",
        "a node block has at least one child";
    BtreeLevel = "btree-level", 3, Error, "nilfs_btree_bad_node",
        "every child is one level below its parent (so all leaves are at one depth)";
    BtreeKeyOrder = "btree-key-order", 3, Error, "nilfs_btree_node_lookup",
        "keys of a node are strictly increasing";
    BtreeKeyRange = "btree-key-range", 3, Error, "nilfs_btree_do_lookup",
        "a child's keys lie in its parent's range [key[i], key[i+1])";
    BtreePtrZero = "btree-ptr-zero", 3, Error, "nilfs_btree_do_lookup",
        "no valid slot of a node holds the invalid pointer 0";
    BtreePtrRange = "btree-ptr-range", 3, Error, "nilfs_btnode_submit_block",
        "a physical pointer (the DAT's) names a block inside the segment area";
    BtreeShared = "btree-shared", 3, Error, "nilfs_btree_propagate",
        "no node or data block is reached twice within a checkpoint (shared between trees, or a loop)";
    BtreeDatBlock = "btree-dat-block", 3, Error, "nilfs_segctor_assign",
        "a DAT pointer names a block its log describes as that DAT block";
    // Pass 4: the DAT and the palloc files.
    DatHole = "dat-hole", 4, Error, "nilfs_dat_prepare_entry",
        "a referenced virtual block has a DAT entry block";
    DatUnallocated = "dat-unallocated", 4, Error, "nilfs_palloc_prepare_alloc_entry",
        "a referenced virtual block is allocated in the DAT's bitmap";
    DatBlocknrZero = "dat-blocknr-zero", 4, Error, "nilfs_dat_translate",
        "an allocated DAT entry has a disk block (de_blocknr != 0)";
    DatBlocknrRange = "dat-blocknr-range", 4, Error, "nilfs_dat_translate",
        "de_blocknr lies inside the segment area";
    DatNotLive = "dat-not-live", 4, Error, "nilfs_dat_get_vinfo",
        "every block a checkpoint reaches has de_start <= cno < de_end";
    DatBlockMismatch = "dat-block-mismatch", 4, Error, "nilfs_dat_commit_start",
        "de_blocknr names a block its log describes with the same virtual block number";
    DatBlockShared = "dat-block-shared", 4, Error, "nilfs_dat_move",
        "no disk block is mapped by two live DAT entries";
    DatEntryRange = "dat-entry-range", 4, Error, "nilfs_dat_commit_end",
        "an allocated entry has de_start <= de_end, both within the checkpoints made so far";
    DatLeak = "dat-leak", 4, Error, "nilfs_dat_commit_end",
        "every entry alive in the current tree (de_end = CNO_MAX) is reached by the latest checkpoint";
    PallocNfrees = "palloc-nfrees", 4, Error, "nilfs_palloc_group_desc_add_entries",
        "a group descriptor's pg_nfrees equals the clear bits of its bitmap (DAT and ifile)";
    PallocEntryHole = "palloc-entry-hole", 4, Error, "nilfs_palloc_get_entry_block",
        "an allocated entry has an entry block";
    // Pass 5: segment usage.
    SuHeaderMissing = "su-header-missing", 5, Error, "nilfs_sufile_read",
        "the sufile has its header block";
    SuHole = "su-hole", 5, Error, "nilfs_sufile_mark_dirty",
        "the active segments' usage entries are not in a hole block";
    SuCleanCount = "su-clean-count", 5, Error, "nilfs_sufile_mod_counter",
        "sh_ncleansegs equals the segments with no flag";
    SuDirtyCount = "su-dirty-count", 5, Error, "nilfs_sufile_mod_counter",
        "sh_ndirtysegs equals the segments with the DIRTY flag";
    SuLastAlloc = "su-last-alloc", 5, Error, "nilfs_sufile_alloc",
        "sh_last_alloc is a segment number";
    SuNblocksRange = "su-nblocks-range", 5, Error, "nilfs_sufile_set_segment_usage",
        "su_nblocks fits in the segment";
    SuNblocksLogs = "su-nblocks-logs", 5, Error, "nilfs_segctor_update_segusage",
        "su_nblocks ends exactly at the end of the segment's last log";
    SuCleanNonzero = "su-clean-nonzero", 5, Error, "nilfs_segment_usage_set_clean",
        "a clean segment's entry is all zero";
    SuActiveNotDirty = "su-active-not-dirty", 5, Error, "nilfs_sufile_alloc",
        "the writer's current and next segments are marked dirty";
    SuErrorActive = "su-error-active", 5, Error, "nilfs_sufile_mark_dirty",
        "no ERROR flag on the current or next segment";
    SuFlags = "su-flags", 5, Error, "nilfs_sufile_get_suinfo",
        "su_flags has only the ACTIVE, DIRTY and ERROR bits";
    SuErrorLive = "su-error-live", 5, Error, "nilfs_sufile_set_error",
        "no block a checkpoint reaches lies in a segment marked ERROR (one the kernel gave up on)";
    SuLiveInClean = "su-live-in-clean", 5, Error, "nilfs_sufile_do_free",
        "no block a checkpoint reaches lies in a clean segment";
    SuLivePastNblocks = "su-live-past-nblocks", 5, Error, "nilfs_sufile_set_segment_usage",
        "no block a checkpoint reaches lies beyond its segment's su_nblocks";
    // Pass 6: the checkpoint file.
    CpHeaderMissing = "cp-header-missing", 6, Error, "nilfs_cpfile_get_header_block",
        "the cpfile has its header block";
    CpCount = "cp-count", 6, Error, "nilfs_cpfile_create_checkpoint",
        "ch_ncheckpoints equals the valid checkpoint entries";
    CpBlockCount = "cp-block-count", 6, Error, "nilfs_cpfile_block_add_valid_checkpoints",
        "cp_checkpoints_count of a block's first slot equals its valid entries";
    CpCno = "cp-cno", 6, Error, "nilfs_segctor_fill_in_checkpoint",
        "a valid entry's cp_cno is its own number";
    CpFuture = "cp-future", 6, Error, "nilfs_cpfile_get_checkpoint",
        "no valid checkpoint lies beyond the latest";
    CpFlags = "cp-flags", 6, Error, "nilfs_cpfile_set_snapshot",
        "cp_flags has only known bits, and SNAPSHOT only on a valid entry";
    CpLatest = "cp-latest", 6, Error, "nilfs_attach_checkpoint",
        "the latest super root's checkpoint is valid, created at its log's ss_create";
    CpSnapshotCount = "cp-snapshot-count", 6, Error, "nilfs_cpfile_set_snapshot",
        "ch_nsnapshots equals the snapshot entries";
    CpSnapshotList = "cp-snapshot-list", 6, Error, "nilfs_cpfile_do_get_ssinfo",
        "the snapshot list is doubly linked, ascending, loop-free and holds every snapshot";
    CpInodesCount = "cp-inodes-count", 6, Error, "nilfs_segctor_fill_in_checkpoint",
        "cp_inodes_count equals the allocated user inodes plus the root";
    MdtInode = "mdt-inode", 6, Error, "nilfs_read_inode_common",
        "the DAT, cpfile, sufile and ifile inodes are regular files with links";
    MdtBlocks = "mdt-blocks", 6, Error, "nilfs_inode_add_blocks",
        "a metadata file's i_blocks counts mkfs.nilfs2's blocks once each (mkfs writes a block count) and every block added since as its 512-byte sectors (or every block in sectors)";
    // Pass 7: the namespace of each checked checkpoint.
    NsRoot = "ns-root", 7, Error, "nilfs_get_root_dentry",
        "the root inode is an allocated directory with i_blocks and i_size";
    NsMode = "ns-mode", 7, Error, "__nilfs_read_inode",
        "an allocated inode's mode has valid file type bits";
    NsOwner = "ns-owner", 7, Error, "nilfs_read_inode_common",
        "i_uid and i_gid are not 0xffffffff, which Linux reads as no id at all (INVALID_UID, INVALID_GID): no call can set it, and even root's capabilities do not reach such an inode";
    NsIfileHole = "ns-ifile-hole", 7, Error, "nilfs_ifile_get_inode_block",
        "an allocated inode's ifile block exists";
    NsDirent = "ns-dirent", 7, Error, "nilfs_check_folio",
        "directory records have rec_len >= 16, 4-aligned, room for the name, within the block, ending at its end";
    NsDirentPrivate = "ns-dirent-private", 7, Error, "nilfs_check_folio",
        "no directory entry names a metadata inode (NILFS_PRIVATE_INODE)";
    NsDirentIno = "ns-dirent-ino", 7, Error, "nilfs_ifile_get_inode_block",
        "a directory entry names a valid inode number (NILFS_VALID_INODE)";
    NsDirentFree = "ns-dirent-free", 7, Error, "nilfs_lookup",
        "a directory entry names an allocated inode with links (not a deleted one)";
    NsDirentType = "ns-dirent-type", 7, Error, "nilfs_set_de_type",
        "an entry's file_type matches its inode's mode";
    NsDirentDuplicate = "ns-dirent-duplicate", 7, Error, "nilfs_add_link",
        "no name appears twice in a directory";
    NsDirentName = "ns-dirent-name", 7, Error, "nilfs_add_link",
        "a live entry's name is not empty and holds no '/' or NUL (nilfs_check_folio lets them pass; no path can name them; e2fsck rejects them)";
    NsDot = "ns-dot", 7, Error, "nilfs_make_empty",
        "a directory's first entries are '.' (itself) and '..'";
    NsDotdot = "ns-dotdot", 7, Error, "nilfs_dotdot",
        "'..' names the directory's parent (the root's names the root)";
    NsDirLinked = "ns-dir-linked", 7, Error, "nilfs_link",
        "a directory is named by exactly one entry of another directory";
    NsNlink = "ns-nlink", 7, Error, "nilfs_link",
        "i_links_count equals the directory entries naming the inode";
    NsUnreachable = "ns-unreachable", 7, Error, "nilfs_lookup",
        "every allocated inode with links is reachable from the root";
    NsOrphan = "ns-orphan", 7, Warning, "nilfs_evict_inode",
        "an allocated inode with no links (unlinked, not yet evicted: open at a crash, or between rmdir and the last iput)";
    NsDirSize = "ns-dir-size", 7, Error, "nilfs_check_folio",
        "a directory's i_size is a multiple of the block size";
    NsDirHole = "ns-dir-hole", 7, Error, "nilfs_find_entry",
        "every directory block below i_size is mapped";
    NsBeyondEof = "ns-beyond-eof", 7, Error, "nilfs_truncate_bmap",
        "no block is mapped at or past ceil(i_size / block size)";
    NsSymlink = "ns-symlink", 7, Error, "nilfs_symlink",
        "a symlink has 0 < i_size < block size (nilfs_symlink counts the target's NUL) and its block mapped";
    NsBlocks = "ns-blocks", 7, Error, "nilfs_inode_add_blocks",
        "i_blocks counts the 512-byte sectors of the inode's mapped data and B-tree node blocks (e2fsck: i_blocks is X, should be Y)";
    NsSizeMax = "ns-size-max", 7, Error, "nilfs_max_size",
        "i_size is within the largest file the B-tree can address";
}

impl fmt::Display for Code {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.id())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identifiers_are_unique_and_passes_ordered() {
        let mut ids: Vec<&str> = Code::ALL.iter().map(|c| c.id()).collect();
        let n = ids.len();
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids.len(), n);
        assert!(Code::ALL.windows(2).all(|w| w[0].pass() <= w[1].pass()));
        for c in Code::ALL {
            assert_eq!(Code::from_id(c.id()), Some(*c));
        }
    }
}
