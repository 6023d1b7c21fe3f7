//! Which refusal comes first on a read-only mount, asked of Linux 6.1:
//! removals and links take write access (EROFS) before they look the last
//! name up or refuse a directory, truncate checks the file type first
//! (EISDIR), creating an existing name is EEXIST, and chmod, chown,
//! utimensat and mknod look their path up first. The model's rules
//! (`read_only_first` in model/src/step/namespace.rs) and lockstep regressions
//! 006-008 rest on this. Peer tier.

mod peer_common;

use nilfs_testkit::image::fresh;
use peer_common::prelude::*;

#[test]
fn the_kernels_order_of_refusals_on_a_read_only_mount() {
    let Some(()) = peers::require("the_kernels_order_of_refusals_on_a_read_only_mount", GUEST)
    else {
        return;
    };
    let dev = fresh(16 << 20, 1024, 64);
    {
        let nilfs = Nilfs::open(&dev).unwrap();
        let mut fs = Fs::mount(&nilfs, 1_800_000_000).unwrap();
        fs.mkdir(ino::ROOT, b"d", 0o755).unwrap();
        let a = fs.create(ino::ROOT, b"a", 0o644).unwrap();
        fs.write(a, 0, b"a file").unwrap();
        fs.unmount().unwrap();
    }
    let dir = Scratch::new("kernel-ro-order");
    let img = dir.file("ro.img");
    export_image(&dev, &img).unwrap();
    // busybox applets print strerror last; keep the text after ": ".
    let script = "mount -t nilfs2 -o ro /dev/vda /mnt\n\
        p() { echo \"@@$1\"; shift; \"$@\" 2>&1 | sed 's/.*: //'; }\n\
        p UNLINK_MISSING unlink /mnt/missing\n\
        p RMDIR_MISSING rmdir /mnt/d/missing\n\
        p RENAME_MISSING mv /mnt/missing /mnt/d/y\n\
        p LINK_DIR ln /mnt/d /mnt/x\n\
        p MKDIR_EXISTING mkdir /mnt/a\n\
        p TRUNCATE_DIR truncate -s 0 /mnt/d\n\
        p UNLINK_DIR_MISSING_PARENT unlink /mnt/nodir/x\n\
        p UNLINK_LONG unlink /mnt/NAME256\n\
        p RMDIR_LONG rmdir /mnt/NAME256\n\
        p MKDIR_LONG mkdir /mnt/NAME256\n\
        p CHMOD_MISSING chmod 600 /mnt/missing\n\
        p CHMOD_RO chmod 600 /mnt/a\n\
        p CHOWN_RO chown 1:1 /mnt/a\n\
        p TOUCH_RO touch -m -d 2001-01-01 /mnt/a\n\
        p MKNOD_EXISTING mknod /mnt/a p\n\
        p MKNOD_RO mknod /mnt/fifo p\n\
        umount /mnt\necho @@END\n";
    // A last name over NILFS_NAME_LEN (255): nilfs_lookup's ENAMETOOLONG
    // comes after write access for removals (finding: campaign kernel
    // seed 18), before it for creations (filename_create).
    let script = script.replace("NAME256", &"n".repeat(256));
    let secs = sections(&kernel_run(&[img], &script, &dir, "run.sh"));
    // Each section, and the error the kernel printed for it.
    let expected = [
        ("UNLINK_MISSING", "Read-only file system"),
        ("RMDIR_MISSING", "Read-only file system"),
        ("RENAME_MISSING", "Read-only file system"),
        ("LINK_DIR", "Read-only file system"),
        ("MKDIR_EXISTING", "File exists"),
        ("TRUNCATE_DIR", "Is a directory"),
        ("UNLINK_DIR_MISSING_PARENT", "No such file or directory"),
        ("UNLINK_LONG", "Read-only file system"),
        ("RMDIR_LONG", "Read-only file system"),
        ("MKDIR_LONG", "File name too long"),
        // chmod_common, chown_common and utimes_common look the path up, then
        // take write access; mknod is filename_create's (EEXIST first).
        ("CHMOD_MISSING", "No such file or directory"),
        ("CHMOD_RO", "Read-only file system"),
        ("CHOWN_RO", "Read-only file system"),
        ("TOUCH_RO", "Read-only file system"),
        ("MKNOD_EXISTING", "File exists"),
        ("MKNOD_RO", "Read-only file system"),
    ];
    for (section, want) in expected {
        assert_eq!(secs[section].trim(), want, "{section}");
    }
}
