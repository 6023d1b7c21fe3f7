//! After our write path hit ENOSPC on a full device, Linux 6.1 mounts the
//! image read-write cleanly and sees the same tree as we do. Peer tier.

mod peer_common;

use nilfs_testkit::image::fresh;
use peer_common::prelude::*;

#[test]
fn the_kernel_mounts_an_image_we_filled() {
    let Some(()) = peers::require("the_kernel_mounts_an_image_we_filled", GUEST) else {
        return;
    };
    let dev = fresh(2 << 20, 1024, 16);
    let mut hit = false;
    {
        let nilfs = Nilfs::open(&dev).unwrap();
        let mut fs = Fs::mount(&nilfs, 1_800_000_000).unwrap();
        for n in 0..400u64 {
            let data: Vec<u8> = (0..9000u64).map(|i| (i * 31 + n) as u8).collect();
            match fs
                .create(ino::ROOT, format!("f{n}").as_bytes(), 0o644)
                .and_then(|f| fs.write(f, 0, &data))
            {
                Ok(_) => {}
                Err(nilfs::Error::Errno {
                    errno: nilfs::Errno::ENOSPC,
                    ..
                }) => {
                    hit = true;
                    break;
                }
                Err(e) => panic!("{e}"),
            }
            if n % 4 == 3 {
                fs.sync().unwrap();
            }
        }
        fs.unmount().unwrap();
    }
    assert!(hit);
    nilfs_conformance::assert_checks_clean(&dev, "peer_kernel_enospc.rs:62");
    let nilfs = Nilfs::open(&dev).unwrap();
    let ours = manifest(&CheckpointView::open(&nilfs, None).unwrap()).unwrap();
    let dir = Scratch::new("kernel-enospc");
    let img = dir.file("full.img");
    export_image(&dev, &img).unwrap();
    let script = "set -e\nmount -t nilfs2 /dev/vda /mnt\necho @@M; manifest /mnt\numount /mnt\necho @@D; dmesg | grep -i nilfs || true\n";
    let secs = sections(&kernel_run(&[img], script, &dir, "run.sh"));
    assert_eq!(secs["M"], ours);
    let dmesg = &secs["D"];
    assert!(!dmesg.to_lowercase().contains("error"), "{dmesg}");
}
