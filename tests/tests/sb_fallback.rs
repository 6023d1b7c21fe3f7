//! Writing after a super block fallback (issue 13, item 2).
//!
//! When the log scan from the chosen super block fails, the mount falls
//! back to the spare copy (`load_nilfs`: "trying rollback from an earlier
//! position"). The kernel then copies the spare over the copy in use, takes
//! its CRC seed and cursor, and runs recovery; every later super block
//! write starts from the spare. Ours used to write both copies from the
//! rejected one: after one mkcp the image had no good super block left and
//! every command failed with a checksum mismatch.
//!
//! The damage: the chosen copy's `s_crc_seed` changed and its `s_sum`
//! resealed, so it is a valid super block whose logs cannot be found.

use nilfs::device::{BlockDevice, MemDevice};
use nilfs::format::{ino, Cno};
use nilfs::fs::Fs;
use nilfs::inspect::manifest::manifest;
use nilfs::posix::CheckpointView;
use nilfs::the_nilfs::Nilfs;
use nilfs_conformance::corrupt::{self, Recipe};

const NOW: u64 = 1_900_000_000;

fn latest_manifest(dev: &dyn BlockDevice) -> String {
    let nilfs = Nilfs::open(dev).unwrap_or_else(|e| panic!("open: {e}"));
    let view = CheckpointView::open(&nilfs, None).unwrap();
    manifest(&view).unwrap()
}

/// The base image with its chosen super block's CRC seed changed, and
/// the base's manifest.
fn damaged() -> (MemDevice, String) {
    let dev = corrupt::base("ours").unwrap();
    let want = latest_manifest(&dev);
    let chosen = Nilfs::open(&dev).unwrap().sb_choice.chosen;
    let recipe = format!("sb{chosen}.s_crc_seed ^= 0x5a5a");
    corrupt::apply(&dev, &Recipe::parse(&recipe).unwrap()).unwrap();
    let nilfs = Nilfs::open(&dev).unwrap();
    assert!(
        nilfs.rolled_back,
        "the damage did not make the mount fall back to the spare"
    );
    (dev, want)
}

/// A write command, as `nilref` runs it on a mount.
type Command = fn(&mut Fs<'_>);

/// Each write command, by name.
fn write_commands() -> Vec<(&'static str, Command)> {
    vec![
        ("mount and unmount", |_| {}),
        ("mkcp", |fs| {
            fs.mkcp(false).unwrap();
        }),
        ("mkcp -s, chcp cp, rmcp", |fs| {
            let i = fs.create(ino::ROOT, b"one", 0o644).unwrap();
            let c = fs.mkcp(true).unwrap();
            fs.write(i, 0, b"1\n").unwrap();
            fs.sync().unwrap();
            fs.chcp(c, false).unwrap();
            fs.rmcp(c).unwrap();
        }),
        ("write and sync", |fs| {
            let i = fs.create(ino::ROOT, b"after-fallback", 0o644).unwrap();
            fs.write(i, 0, b"written after the fallback\n").unwrap();
            fs.sync().unwrap();
        }),
        ("clean", |fs| {
            nilfs::cleaner::clean(fs, 0, 4).unwrap();
        }),
    ]
}

#[test]
fn every_write_command_after_a_fallback_leaves_a_readable_image() {
    every_write_command_after_a_fallback(false);
}

/// The known-bad mount the test above exists to catch: writing on from
/// the copy the scan rejected leaves images that no longer read.
#[test]
fn keeping_the_rejected_super_block_is_caught() {
    let caught = std::panic::catch_unwind(|| every_write_command_after_a_fallback(true));
    assert!(
        caught.is_err(),
        "the known-bad mount passed: this test no longer tells the two apart"
    );
}

fn every_write_command_after_a_fallback(known_bad: bool) {
    for (what, command) in write_commands() {
        let (base, want) = damaged();
        let dev = base.duplicate();
        {
            let nilfs = Nilfs::open(&dev).unwrap();
            let mounted = if known_bad {
                Fs::mount_keeping_rejected_super_block(&nilfs, NOW)
            } else {
                Fs::mount(&nilfs, NOW)
            };
            let mut fs = mounted.unwrap_or_else(|e| panic!("{what}: mount: {e}"));
            command(&mut fs);
            fs.unmount()
                .unwrap_or_else(|e| panic!("{what}: unmount: {e}"));
        }
        let nilfs = Nilfs::open(&dev).unwrap_or_else(|e| panic!("{what}: reopen: {e}"));
        assert!(
            !nilfs.rolled_back,
            "{what}: the next mount still needs the spare"
        );
        let got = latest_manifest(&dev);
        for line in want.lines() {
            assert!(got.contains(line), "{what}: lost {line}\n{got}");
        }
        let r = nilfs::check::check_device(&dev, &Default::default());
        assert!(r.is_clean(), "{what}: nilref check:\n{r}");
        // Both copies now carry the spare's seed, the one the logs use.
        let sb = &nilfs.sb_choice;
        let seeds: Vec<u32> = sb
            .copies
            .iter()
            .flatten()
            .filter_map(|c| c.sb.as_ref().map(|s| s.crc_seed))
            .collect();
        assert!(
            seeds.iter().all(|&s| s == nilfs.sb.crc_seed),
            "{what}: seeds {seeds:x?}, logs use {:x}",
            nilfs.sb.crc_seed
        );
    }
}

/// The checkpoint made after the fallback follows the spare's history.
#[test]
fn the_fallback_mount_continues_from_the_spare_cursor() {
    let (dev, _) = damaged();
    let before = Nilfs::open(&dev).unwrap().scan.cno;
    {
        let nilfs = Nilfs::open(&dev).unwrap();
        let mut fs = Fs::mount(&nilfs, NOW).unwrap();
        fs.create(ino::ROOT, b"new", 0o644).unwrap();
        let c = fs.mkcp(false).unwrap();
        assert!(c > before, "mkcp made {c}, the spare's latest is {before}");
        fs.unmount().unwrap();
    }
    let nilfs = Nilfs::open(&dev).unwrap();
    assert!(nilfs.scan.cno > before);
    assert!(nilfs.checkpoint(Cno(nilfs.scan.cno.0)).unwrap().is_some());
}

/// After a fallback the disk layout is still the one the kernel read from
/// the copy it chose first (`nilfs_store_disk_layout` does not run again;
/// `load_nilfs` takes only the spare's CRC seed, write time and cursor,
/// and checks the cursor against that layout). Postmortem: the image
/// fuzzer (`image`, fork mode) found ours taking the spare's whole
/// geometry unchecked; a spare with a damaged `s_nsegments` made `check`
/// build a usage table for 2^24 and more segments (past 3 GiB).
#[test]
fn a_fallback_keeps_the_disk_layout_of_the_first_copy() {
    let (dev, want) = damaged();
    let before = Nilfs::open(&dev).unwrap();
    let spare = 1 - before.sb_choice.chosen;
    let (nsegments, bps) = (before.geo.nsegments, before.geo.blocks_per_segment);
    let recipe = format!("sb{spare}.s_nsegments = 0x10000000000");
    corrupt::apply(&dev, &Recipe::parse(&recipe).unwrap()).unwrap();
    let nilfs = Nilfs::open(&dev).unwrap();
    assert!(nilfs.rolled_back);
    assert_eq!(nilfs.geo.nsegments, nsegments, "the first copy's layout");
    assert_eq!(nilfs.sb.nsegments, nsegments);
    assert_eq!(latest_manifest(&dev), want);
    // What ran out of memory: the checker's walk of every segment.
    nilfs::check::check_device(&dev, &Default::default());
    // A spare whose cursor lies past the first copy's segments is refused,
    // as nilfs_store_log_cursor refuses it.
    let recipe = format!("sb{spare}.s_last_pseg = {}", nsegments * bps);
    corrupt::apply(&dev, &Recipe::parse(&recipe).unwrap()).unwrap();
    let e = Nilfs::open(&dev).map(|_| ()).unwrap_err().to_string();
    assert!(e.contains("last log at block"), "{e}");
}
