//! Writes the seed corpus of every fuzz target (fuzz/corpus/TARGET/seed-*)
//! from a fresh mkfs image and the kernel fixture, so the fuzzers start from
//! real structures. Run: `cargo run -p nilfs-conformance --example fuzz_seeds`.

use std::path::PathBuf;

use nilfs::device::{BlockDevice, MemDevice};
use nilfs::format::inode::Inode;
use nilfs::format::{ino, BlockNr, Cno, FileBlk, VBlockNr};
use nilfs::mkfs::{self, MkfsOptions};
use nilfs::the_nilfs::{MetaFile, Nilfs};

fn write(target: &str, name: &str, data: &[u8]) {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join("fuzz")
        .join("corpus")
        .join(target);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join(format!("seed-{name}")), data).unwrap();
}

fn with_sel(bs: u32, data: &[u8]) -> Vec<u8> {
    let mut v = vec![(bs / 1024).trailing_zeros() as u8];
    v.extend_from_slice(data);
    v
}

fn seeds_of(tag: &str, dev: &dyn BlockDevice) {
    let fs = Nilfs::open(dev).unwrap();
    let bs = fs.block_size();
    let mut sb = vec![0u8; 1024];
    dev.read_at(1024, &mut sb).unwrap();
    sb.extend_from_slice(&dev.size_bytes().to_le_bytes());
    write("superblock", &format!("{tag}-primary"), &sb);

    let sum = fs.read_block(fs.scan.sr_pseg).unwrap();
    write("segsum", &format!("{tag}-sr-log"), &with_sel(bs, &sum));

    let root_bmap: Vec<u8> = fs
        .super_root
        .dat
        .bmap
        .iter()
        .flat_map(|p| p.to_le_bytes())
        .collect();
    write(
        "btree",
        &format!("{tag}-dat-root"),
        &with_sel(bs, &root_bmap),
    );
    if let nilfs::format::bmap::BmapRoot::Btree(n) =
        nilfs::format::bmap::BmapRoot::decode(&fs.super_root.dat.bmap).unwrap()
    {
        let child = fs.read_block(BlockNr(n.ptrs[0])).unwrap();
        write("btree", &format!("{tag}-dat-node"), &with_sel(bs, &child));
    }

    let cp = fs.checkpoint(fs.scan.cno).unwrap().unwrap();
    let root: Inode = fs.ifile_inode(&cp.ifile_inode, ino::ROOT).unwrap().unwrap();
    let v = VBlockNr(
        nilfs::format::bmap::BmapRoot::decode(&root.bmap)
            .ok()
            .and_then(|r| match r {
                nilfs::format::bmap::BmapRoot::Direct(d) => Some(d.ptrs[0]),
                _ => None,
            })
            .unwrap(),
    );
    let dirblk = fs.read_block(fs.dat_translate(v).unwrap()).unwrap();
    write("dir", &format!("{tag}-root"), &with_sel(bs, &dirblk));

    let cpblk = fs.mdt_block(MetaFile::Cpfile, FileBlk(0)).unwrap().unwrap();
    write("mdt_entries", &format!("{tag}-cpfile-header"), &cpblk[..32]);
    write(
        "mdt_entries",
        &format!("{tag}-checkpoint1"),
        &cpblk[192..384],
    );
    let sublk = fs.mdt_block(MetaFile::Sufile, FileBlk(0)).unwrap().unwrap();
    write("mdt_entries", &format!("{tag}-sufile"), &sublk[..64]);
    let dat = fs.dat_entry(VBlockNr(1)).unwrap().unwrap();
    write("mdt_entries", &format!("{tag}-dat-entry"), &dat.to_bytes());
    write(
        "mdt_entries",
        &format!("{tag}-super-root"),
        &with_sel(bs, &fs.read_block(fs.scan.super_root).unwrap()),
    );
    let _ = Cno(0);
}

fn main() {
    let dev = MemDevice::new(64 << 20);
    mkfs::mkfs(
        &dev,
        &MkfsOptions {
            block_size: 1024,
            blocks_per_segment: 256,
            ..Default::default()
        },
    )
    .unwrap();
    seeds_of("mkfs-1k", &dev);
    seeds_of("kernel61", &nilfs_testkit::image::fixture());
    write("image", "plain-1k", &[0, 0, 0]);
    write("image", "plain-4k-resealed", &[2, 1, 1]);
    // A patch to the summary's ss_nblocks of a 1 KiB image, resealed.
    write("image", "nblocks-patch", &[0, 0, 1, 0x28, 0x10, 0x00, 0x7f]);
    // A patch in the DAT entry block, resealed.
    write(
        "image",
        "dat-patch",
        &[0, 0, 1, 0x00, 0x2c, 0x00, 0xff, 0x08, 0x2c, 0x00, 0x01],
    );
    // image_ops: a head byte (bit 0 the base, bits 1-2 the reseal mode),
    // then 12-byte damages (field index u16, operation, value kind, u64).
    write("image_ops", "tree-undamaged", &[6]);
    write("image_ops", "rollforward-undamaged", &[7]);
    let damages: [(u8, u16, u8, u8, u64); 4] = [
        (6, 5, 0, 2, 3),
        (6, 300, 5, 1, 0x40),
        (7, 40, 1, 3, 7),
        (4, 200, 0, 0, 1 << 40),
    ];
    for (k, (head, field, op, kind, value)) in damages.into_iter().enumerate() {
        let mut v = vec![head];
        v.extend_from_slice(&field.to_le_bytes());
        v.extend_from_slice(&[op, kind]);
        v.extend_from_slice(&value.to_le_bytes());
        write("image_ops", &format!("one-field-{k}"), &v);
    }
}
