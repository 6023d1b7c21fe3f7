//! Pass 7: the namespace of a checkpoint. Every allocated inode of its ifile
//! is read once (`__nilfs_read_inode`'s mode rules), its mapping walked
//! (passes 3 and 4) and its size compared with what is mapped; then every
//! directory block is parsed as `nilfs_check_folio` parses it and every
//! entry judged against the inode it names. Links are counted (every entry
//! naming an inode, '.' and '..' included, as `nilfs_link`,
//! `nilfs_mkdir` and `nilfs_rmdir` keep `i_links_count`), directories must
//! have one parent, and everything allocated must be reachable from the
//! root. Memory is one small record per allocated inode and one pair per
//! directory entry.

use std::collections::HashSet;

use super::btree::{detail, Ptrs};
use super::codes::Code;
use super::ctx::{map_get, BlockMap, Ck, Name};
use super::logs::DsyncInodes;
use crate::format::cpfile::Checkpoint;
use crate::format::dir::{self, file_type_from_mode};
use crate::format::inode::{
    Inode, MAX_FILE_SIZE, S_IFBLK, S_IFCHR, S_IFDIR, S_IFIFO, S_IFLNK, S_IFMT, S_IFREG, S_IFSOCK,
};
use crate::format::palloc::PallocGeometry;
use crate::format::{ino, Cno};

const NONE: u32 = u32::MAX;

/// What pass 7 keeps of an allocated inode.
struct Info {
    ino: u64,
    mode: u16,
    links: u16,
    /// `i_size`.
    size: u64,
    /// Entries naming it.
    refs: u32,
    /// The directory whose entry (not '.' or '..') names it, for directories.
    parent: u32,
    /// What its '..' names (directories).
    dotdot: u64,
    reached: bool,
}

impl Info {
    fn is_dir(&self) -> bool {
        self.mode & S_IFMT == S_IFDIR
    }
}

impl Ck<'_, '_> {
    /// Check checkpoint `cp`. The latest checkpoint is checked first and
    /// shares the scope of the metadata files walked before it.
    pub fn checkpoint(&mut self, cp: &Checkpoint, latest: bool, dsync: &DsyncInodes) {
        let cno = cp.cno;
        if !latest {
            self.scope.clear();
        }
        self.report.stats.checkpoints += 1;
        let ifile = cp.ifile_inode.clone();
        let map = self.walk_mdt(
            &format!("ifile of checkpoint {cno}"),
            &format!("ifile inode of checkpoint {cno}"),
            &ifile,
            ino::IFILE,
            Ptrs::Virtual(cno),
        );
        let geo = PallocGeometry {
            block_size: self.bs,
            entry_size: u32::from(self.fs.sb.inode_size),
        };
        let first = u64::from(self.fs.sb.first_ino);
        let mut infos: Vec<Info> = Vec::new();
        let mut dirs: Vec<(u32, BlockMap)> = Vec::new();
        let total = cp.inodes_count;
        {
            let mut read =
                |ck: &mut Self, blkoff: u64| map_get(&map, blkoff).and_then(|p| ck.read(p, 1));
            let mut entry = |ck: &mut Self, nr: u64, data: Option<&[u8]>| {
                if nr < first && nr != ino::ROOT.0 {
                    return;
                }
                let here = || format!("inode {nr} of checkpoint {cno}");
                let Some(inode) = data.and_then(|d| Inode::decode(d).ok()) else {
                    ck.find(
                        Code::NsIfileHole,
                        here(),
                        None,
                        "allocated, but its ifile block is a hole",
                        "an inode block",
                    );
                    return;
                };
                ck.report.stats.inodes += 1;
                let idx = infos.len() as u32;
                if let Some(blocks) = ck.inode(&here, nr, &inode, cno) {
                    dirs.push((idx, blocks));
                }
                infos.push(Info {
                    ino: nr,
                    mode: inode.mode,
                    links: inode.links_count,
                    size: inode.size,
                    refs: 0,
                    parent: NONE,
                    dotdot: 0,
                    reached: false,
                });
                if ck.report.stats.inodes.is_multiple_of(4096) {
                    ck.progress("inodes", infos.len() as u64, total);
                }
            };
            self.palloc_scan(
                &format!("ifile of checkpoint {cno}"),
                geo,
                &map,
                &mut read,
                &mut entry,
            );
        }
        if self.stopped() {
            return;
        }
        let find = |infos: &[Info], n: u64| infos.binary_search_by_key(&n, |i| i.ino).ok();
        // The root (nilfs_get_root_dentry).
        let root = find(&infos, ino::ROOT.0);
        let user = infos.iter().filter(|i| i.ino >= first).count() as u64;
        if cp.inodes_count != user + 1 {
            self.find(
                Code::CpInodesCount,
                format!("checkpoint {cno}"),
                None,
                format!("cp_inodes_count {}", cp.inodes_count),
                format!("{}, the allocated user inodes and the root", user + 1),
            );
        }
        if latest {
            for &(i, pseg, last) in dsync {
                let k = find(&infos, i);
                let ok = k.is_some_and(|k| infos[k].links > 0 && infos[k].mode & S_IFMT == S_IFREG);
                if let (true, Some(k), Some(last)) = (ok, k, last) {
                    // fdatasync writes a data-only log only while the inode
                    // is clean, so its blocks lie inside the size the latest
                    // checkpoint records; our roll-forward drops one that
                    // does not (the kernel maps it past the end).
                    let size = infos[k].size;
                    if last >= size.div_ceil(u64::from(self.bs)) {
                        self.find(
                            Code::LogDsync,
                            format!("data-sync log at block {pseg}"),
                            Some(pseg),
                            format!("data block {last} of inode {i}, past its size {size}"),
                            "data blocks inside the file's size",
                        );
                    }
                }
                if !ok {
                    self.find(
                        Code::LogDsync,
                        format!("data-sync log at block {pseg}"),
                        Some(pseg),
                        format!("data blocks of inode {i}, which checkpoint {cno} has not as a regular file"),
                        "an inode of the latest checkpoint",
                    );
                }
            }
        }
        let Some(root) = root else {
            self.find(
                Code::NsRoot,
                format!("root inode of checkpoint {cno}"),
                None,
                "not allocated",
                "an allocated directory",
            );
            return;
        };
        let mut edges: Vec<(u32, u32)> = Vec::new();
        for (d, blocks) in &dirs {
            self.directory(cno, *d, blocks, &mut infos, &mut edges, first);
        }
        // '..' names the parent.
        for (k, i) in infos.iter().enumerate() {
            if !i.is_dir() || i.links == 0 {
                continue;
            }
            let want = if k == root {
                Some(ino::ROOT.0)
            } else {
                (i.parent != NONE).then(|| infos[i.parent as usize].ino)
            };
            if let Some(w) = want.filter(|&w| w != i.dotdot && i.dotdot != 0) {
                self.find(
                    Code::NsDotdot,
                    format!("directory {} of checkpoint {cno}", i.ino),
                    None,
                    format!("'..' names inode {}", i.dotdot),
                    format!("{w}, its parent"),
                );
            }
        }
        // Reachability from the root.
        edges.sort_unstable();
        let mut stack = vec![root as u32];
        infos[root].reached = true;
        while let Some(d) = stack.pop() {
            let from = edges.partition_point(|e| e.0 < d);
            for &(_, c) in edges[from..].iter().take_while(|e| e.0 == d) {
                let c = c as usize;
                if !infos[c].reached {
                    infos[c].reached = true;
                    if infos[c].is_dir() {
                        stack.push(c as u32);
                    }
                }
            }
        }
        for i in &infos {
            let here = || format!("inode {} of checkpoint {cno}", i.ino);
            if i.links == 0 {
                if !i.reached {
                    self.find(
                        Code::NsOrphan,
                        here(),
                        None,
                        "allocated with no links and no entry",
                        "an inode freed when its last user closed it",
                    );
                }
                continue;
            }
            if u32::from(i.links) != i.refs {
                self.find(
                    Code::NsNlink,
                    here(),
                    None,
                    format!("i_links_count {}", i.links),
                    format!("{}, the entries naming it", i.refs),
                );
            }
            if !i.reached {
                self.find(
                    Code::NsUnreachable,
                    here(),
                    None,
                    "not reachable from the root",
                    "a path from the root",
                );
            }
        }
    }

    /// One allocated inode: mode, size, mapping. For a directory, its
    /// blocks below `i_size`.
    fn inode(&mut self, here: Name<'_>, nr: u64, i: &Inode, cno: Cno) -> Option<BlockMap> {
        let ft = i.mode & S_IFMT;
        if ![
            S_IFREG, S_IFDIR, S_IFLNK, S_IFCHR, S_IFBLK, S_IFIFO, S_IFSOCK,
        ]
        .contains(&ft)
        {
            self.find(
                Code::NsMode,
                here(),
                None,
                format!("i_mode {:#o}", i.mode),
                "a regular file, directory, symlink, device, FIFO or socket",
            );
            return None;
        }
        // i_uid_write/i_gid_write of (u32)-1 give INVALID_UID/GID, an id
        // chown cannot set (-1 means "unchanged") and that
        // capable_wrt_inode_uidgid never maps, so root is denied too.
        if i.uid == u32::MAX || i.gid == u32::MAX {
            self.find(
                Code::NsOwner,
                here(),
                None,
                format!("i_uid {:#x}, i_gid {:#x}", i.uid, i.gid),
                "ids other than 0xffffffff",
            );
        }
        // nilfs_get_root_dentry; before it, nilfs_iget refuses an inode
        // with no links (nilfs_read_inode_common: ESTALE), and the mount
        // fails either way.
        if nr == ino::ROOT.0
            && (ft != S_IFDIR || i.blocks == 0 || i.size == 0 || i.links_count == 0)
        {
            self.find(
                Code::NsRoot,
                format!("root inode of checkpoint {cno}"),
                None,
                format!(
                    "i_mode {:#o}, i_links_count {}, i_blocks {}, i_size {}",
                    i.mode, i.links_count, i.blocks, i.size
                ),
                "a directory with links, i_blocks and i_size",
            );
        }
        if i.size > MAX_FILE_SIZE {
            self.find(
                Code::NsSizeMax,
                here(),
                None,
                format!("i_size {}", i.size),
                format!("at most {MAX_FILE_SIZE}"),
            );
        }
        if !i.has_bmap() {
            return None;
        }
        self.cur_ino = Some(nr);
        let nodes0 = self.report.stats.nodes;
        let lost0 = self.lost;
        let blocks = self.walk_bmap(here, &i.bmap, Ptrs::Virtual(cno));
        self.cur_ino = None;
        // i_blocks counts 512-byte sectors of the data and node blocks
        // (nilfs_inode_add_blocks). mkfs.nilfs2 writes the root's as a
        // block count, as its metadata files' (`mdt_blocks`), and the
        // kernel only adds and subtracts from it.
        let nodes = self.report.stats.nodes - nodes0;
        let mapped = blocks.len() as u64 + nodes;
        let want = mapped.saturating_mul(u64::from(self.bs) / 512);
        let root_ok = nr == ino::ROOT.0 && i.blocks == self.mkfs_blocks(ino::ROOT, mapped);
        // A mapping with its own damage is that damage's finding, not this.
        let walked_clean = self.lost == lost0;
        if i.blocks != want && !root_ok && walked_clean && !self.stopped() {
            self.find(
                Code::NsBlocks,
                here(),
                None,
                format!(
                    "i_blocks {} ({} data and {nodes} node blocks are mapped)",
                    i.blocks,
                    blocks.len()
                ),
                format!("{want}, their 512-byte sectors"),
            );
        }
        // An inode with no links is on its way out: nilfs_rmdir and
        // nilfs_unlink drop the links (rmdir also zeroes i_size) in one
        // transaction, and nilfs_evict_inode truncates and frees it in a
        // later one at the last iput. A construction in between (the kernel
        // fixture of peer_kernel_read.rs shows one after `rm -rf`) records it
        // like this; its blocks are still reached, its size is not judged.
        if i.links_count == 0 {
            return None;
        }
        let bs = u64::from(self.bs);
        let nblk = i.size.min(MAX_FILE_SIZE).div_ceil(bs);
        if let Some(&(k, _)) = blocks.iter().find(|e| e.0 >= nblk) {
            self.find(
                Code::NsBeyondEof,
                here(),
                None,
                format!(
                    "block {k} is mapped, i_size {} ends in block {}",
                    i.size,
                    nblk.saturating_sub(1)
                ),
                format!("no block at or past {nblk}"),
            );
        }
        match ft {
            S_IFDIR => {
                if !i.size.is_multiple_of(bs) {
                    self.find(
                        Code::NsDirSize,
                        here(),
                        None,
                        format!("i_size {}", i.size),
                        format!("a multiple of {bs}"),
                    );
                }
                let below: BlockMap = blocks.into_iter().filter(|e| e.0 < nblk).collect();
                if (below.len() as u64) < nblk {
                    let hole = below
                        .iter()
                        .enumerate()
                        .find(|(n, e)| e.0 != *n as u64)
                        .map_or(below.len() as u64, |(n, _)| n as u64);
                    self.find(
                        Code::NsDirHole,
                        here(),
                        None,
                        format!("block {hole} of {nblk} is not mapped"),
                        "every block below i_size mapped",
                    );
                }
                return Some(below);
            }
            S_IFLNK if i.size == 0 || i.size >= bs || map_get(&blocks, 0).is_none() => {
                self.find(
                    Code::NsSymlink,
                    here(),
                    None,
                    format!(
                        "i_size {}, block 0 {}",
                        i.size,
                        if map_get(&blocks, 0).is_some() {
                            "mapped"
                        } else {
                            "unmapped"
                        }
                    ),
                    format!("0 < i_size < {bs} with block 0 mapped"),
                );
            }
            _ => {}
        }
        None
    }

    #[allow(clippy::too_many_arguments)]
    fn directory(
        &mut self,
        cno: Cno,
        d: u32,
        blocks: &BlockMap,
        infos: &mut [Info],
        edges: &mut Vec<(u32, u32)>,
        first: u64,
    ) {
        let self_ino = infos[d as usize].ino;
        let here = || format!("directory {self_ino} of checkpoint {cno}");
        let mut names: HashSet<Vec<u8>> = HashSet::new();
        for &(k, pbn) in blocks {
            let Some(data) = self.read(pbn, 1) else {
                return;
            };
            let entries = match dir::parse_block(&data, self.bs) {
                Ok(e) => e,
                Err(e) => {
                    let why = detail(&e);
                    let code = if why.starts_with("disallowed inode number") {
                        Code::NsDirentPrivate
                    } else {
                        Code::NsDirent
                    };
                    self.find(
                        code,
                        format!("{}, block {k}", here()),
                        Some(pbn),
                        why,
                        "records as nilfs_check_folio accepts them",
                    );
                    continue;
                }
            };
            for (pos, e) in entries.iter().enumerate() {
                let head = k == 0 && pos < 2;
                if head {
                    let want: &[u8] = if pos == 0 { b"." } else { b".." };
                    if e.name != want || (pos == 0 && e.ino.0 != self_ino) || e.ino.0 == 0 {
                        self.find(
                            Code::NsDot,
                            format!("{}, entry {pos}", here()),
                            Some(pbn),
                            format!(
                                "'{}' naming inode {}",
                                String::from_utf8_lossy(&e.name),
                                e.ino
                            ),
                            if pos == 0 {
                                format!("'.' naming {self_ino}")
                            } else {
                                "'..' naming the parent".to_string()
                            },
                        );
                    }
                }
                if e.ino.0 == 0 {
                    continue;
                }
                self.report.stats.dirents += 1;
                let ent = || format!("{}, entry '{}'", here(), String::from_utf8_lossy(&e.name));
                if !head && (e.name == b"." || e.name == b"..") {
                    self.find(
                        Code::NsDot,
                        ent(),
                        Some(pbn),
                        "a '.' or '..' entry after the first two",
                        "'.' and '..' only as the first two entries",
                    );
                    continue;
                }
                if !head && (e.name.is_empty() || e.name.iter().any(|&c| c == b'/' || c == 0)) {
                    self.find(
                        Code::NsDirentName,
                        ent(),
                        Some(pbn),
                        format!("name {:?}", String::from_utf8_lossy(&e.name)),
                        "a non-empty name without '/' or NUL",
                    );
                }
                if !head && !names.insert(e.name.clone()) {
                    self.find(
                        Code::NsDirentDuplicate,
                        ent(),
                        Some(pbn),
                        "the name appears again",
                        "unique names",
                    );
                }
                let t = e.ino.0;
                if t < first && t != ino::ROOT.0 {
                    self.find(
                        Code::NsDirentIno,
                        ent(),
                        Some(pbn),
                        format!("names inode {t}, below s_first_ino {first}"),
                        "a user inode or the root",
                    );
                    continue;
                }
                let Some(ti) = infos.binary_search_by_key(&t, |i| i.ino).ok() else {
                    self.find(
                        Code::NsDirentFree,
                        ent(),
                        Some(pbn),
                        format!("names inode {t}, which is free"),
                        "an allocated inode",
                    );
                    continue;
                };
                if infos[ti].links == 0 {
                    self.find(
                        Code::NsDirentFree,
                        ent(),
                        Some(pbn),
                        format!("names inode {t}, which has no links (deleted)"),
                        "a live inode",
                    );
                }
                let want = file_type_from_mode(infos[ti].mode);
                if e.file_type != want {
                    self.find(
                        Code::NsDirentType,
                        ent(),
                        Some(pbn),
                        format!("file_type {}", e.file_type),
                        format!("{want}, from i_mode {:#o}", infos[ti].mode),
                    );
                }
                infos[ti].refs += 1;
                if head {
                    if pos == 1 {
                        infos[d as usize].dotdot = t;
                    }
                    continue;
                }
                if infos[ti].is_dir() {
                    if infos[ti].parent != NONE {
                        self.find(
                            Code::NsDirLinked,
                            ent(),
                            Some(pbn),
                            format!(
                                "directory {t} is also named by directory {}",
                                infos[infos[ti].parent as usize].ino
                            ),
                            "one parent per directory",
                        );
                        continue;
                    }
                    infos[ti].parent = d;
                }
                edges.push((d, ti as u32));
            }
        }
    }
}
