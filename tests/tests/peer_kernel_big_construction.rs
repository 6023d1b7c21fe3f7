//! Linux 6.1 reads constructions that outgrew the constructor's first
//! estimate: 1,500 small files per sync on 1 KiB blocks and 16-block
//! segments, so retries extend into segments whose usage lies in sufile
//! blocks prepared only on the retry. Manifest, lscp and lssu equal ours,
//! dmesg quiet. Peer tier.

mod peer_common;

use nilfs_testkit::image::fresh;
use peer_common::prelude::*;

#[test]
fn the_kernel_reads_constructions_that_outgrew_their_estimate() {
    let Some(()) = peers::require(
        "the_kernel_reads_constructions_that_outgrew_their_estimate",
        GUEST,
    ) else {
        return;
    };
    let dev = fresh(1200 * 16 * 1024, 1024, 16);
    {
        let nilfs = Nilfs::open(&dev).unwrap();
        let mut fs = Fs::mount(&nilfs, 1_800_000_000).unwrap();
        for r in 0..3 {
            let d = fs
                .mkdir(ino::ROOT, format!("d{r}").as_bytes(), 0o755)
                .unwrap();
            for n in 0..1500 {
                let f = fs.create(d, format!("f{n}").as_bytes(), 0o644).unwrap();
                fs.write(f, 0, format!("{r}/{n}\n").as_bytes()).unwrap();
            }
            fs.sync().unwrap();
        }
        fs.unmount().unwrap();
    }
    nilfs_conformance::assert_checks_clean(&dev, "peer_kernel_big_construction.rs:55");
    let nilfs = Nilfs::open(&dev).unwrap();
    let ours = manifest(&CheckpointView::open(&nilfs, None).unwrap()).unwrap();
    let lscp = tools::lscp(&dev, &LscpOptions::default()).unwrap();
    let lssu = tools::lssu(&dev, &LssuOptions::default()).unwrap();
    let dir = Scratch::new("kernel-big-construction");
    let img = dir.file("big.img");
    export_image(&dev, &img).unwrap();
    let script = "set -e\nmount -t nilfs2 -o ro /dev/vda /mnt\necho @@M; manifest /mnt\n\
                  echo @@LSCP; lscp\necho @@LSSU; lssu\numount /mnt\n\
                  echo @@D; dmesg | grep -i nilfs || true\n";
    let secs = sections(&kernel_run(&[img], script, &dir, "run.sh"));
    assert_eq!(secs["M"], ours);
    assert_eq!(secs["LSCP"], lscp);
    assert_eq!(secs["LSSU"], lssu);
    assert_dmesg_clean(&secs["D"], &["nilfs version 2 loaded"]);
}
