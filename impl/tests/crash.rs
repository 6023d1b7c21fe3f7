//! Crash at every cut point. A workload of more than 20 operations with
//! several syncs runs on a device that stops after its k-th block write —
//! for every k — and, in a second pass, tears that k-th write (only its
//! first sector reaches the disk). Mounting the cut image must give exactly
//! the tree of the last sync whose logs were all written, with every
//! checksum of the chosen state valid; nothing a completed sync wrote is
//! lost, nothing half-written is visible.

use nilfs_testkit::crash_workload::{data, fresh, latest_manifest, workload, BS};

use std::collections::BTreeSet;

use nilfs::device::{BlockDevice, CutDevice, MemDevice};
use nilfs::format::ino;
use nilfs::fs::Fs;
use nilfs::inspect::manifest::manifest;
use nilfs::posix::CheckpointView;
use nilfs::the_nilfs::Nilfs;
use nilfs::Result;

/// The block-write counts at which each sync completed: a sync completed
/// under budget k iff all its writes are among the first k.
fn sync_points(total: u64) -> Vec<u64> {
    let mut points = Vec::new();
    for k in 0..=total {
        let dev = cut_device(k, false);
        let done = match workload(&dev) {
            Ok(n) | Err(n) => n,
        };
        while points.len() < done {
            points.push(k);
        }
    }
    points
}

fn cut_device(budget: u64, tear: bool) -> CutDevice {
    on_device(fresh(), budget, tear)
}

fn on_device(inner: MemDevice, budget: u64, tear: bool) -> CutDevice {
    let dev = CutDevice::new(inner, BS, budget);
    if tear {
        dev.tearing()
    } else {
        dev
    }
}

#[test]
fn every_cut_point_recovers_the_last_completed_sync() {
    let full = cut_device(u64::MAX, false);
    assert_eq!(workload(&full), Ok(4));
    let total = full.written();
    assert!(
        total > 100,
        "only {total} block writes: the workload is too small to mean much"
    );
    let points = sync_points(total);
    assert_eq!(points.len(), 4);
    let completed = |k: u64| points.iter().filter(|&&p| p <= k).count();
    // The state each number of completed syncs leaves (0: the fresh image),
    // taken where the n-th sync has just returned.
    let states: Vec<Option<String>> = (0..=4)
        .map(|n| {
            let dev = cut_device(if n == 0 { 0 } else { points[n - 1] }, false);
            let _ = workload(&dev);
            Some(latest_manifest(&dev.inner))
        })
        .collect();
    // A cut never loses a completed sync. The sync in flight may already be
    // durable: its logs are on disk before it returns (nilfs_sync_fs
    // writes a super block copy after the construction), and recovery
    // finds them from the older cursor.
    for k in 0..=total {
        let dev = cut_device(k, false);
        let _ = workload(&dev);
        let n = completed(k);
        let got = latest_manifest(&dev.inner);
        let ok =
            states[n].as_ref() == Some(&got) || (n < 4 && states[n + 1].as_ref() == Some(&got));
        assert!(
            ok,
            "cut after {k} block writes: recovered a state other than that of {n} \
             completed syncs (or of the sync in flight)\ngot:\n{got}\nexpected:\n{}",
            states[n].as_deref().unwrap_or("")
        );
    }
    // A torn k-th write may or may not have landed whole (a super root
    // block is zero past its 400 bytes, so its first sector is all of
    // it): either the state before that write or the state after it.
    for k in 1..=total {
        let dev = cut_device(k, true);
        let _ = workload(&dev);
        let got = latest_manifest(&dev.inner);
        let (before, after) = (completed(k - 1), completed(k));
        let after = (after + 1).min(4); // or the sync in flight, as above
        assert!(
            (before..=after).any(|n| states[n].as_ref() == Some(&got)),
            "torn write {k}: recovered neither the state of {before} nor of {after} completed syncs\n{got}"
        );
    }
    // Every state was reached, and they differ (the test is not vacuous).
    let distinct: std::collections::BTreeSet<String> = states
        .into_iter()
        .map(|s| s.expect("state reached"))
        .collect();
    assert_eq!(distinct.len(), 5);
}

/// The check can fail: a device that silently loses one write of a
/// completed sync (acknowledged, never stored) leaves an image whose
/// recovered state is not the last completed sync's.
#[test]
fn a_silently_lost_write_is_caught() {
    let full = cut_device(u64::MAX, false);
    workload(&full).unwrap();
    let want = latest_manifest(&full.inner);
    let total = full.written();
    let (mut caught, mut checked, mut only_check) = (0, 0, 0);
    for lose in (1..total).step_by(7) {
        let dev = cut_device(u64::MAX, false).losing(lose);
        let _ = workload(&dev);
        let got = Nilfs::open(&dev.inner).ok().and_then(|n| {
            CheckpointView::open(&n, None)
                .ok()
                .and_then(|v| manifest(&v).ok())
        });
        let differs = got.as_ref() != Some(&want);
        caught += usize::from(differs);
        // nilref check sees the inconsistency the lost write leaves, even
        // where the latest tree happens to read as expected.
        let flagged = !nilfs::check::check_device(&dev.inner, &Default::default()).is_clean();
        checked += usize::from(flagged);
        only_check += usize::from(flagged && !differs);
    }
    assert!(
        caught > 0,
        "no lost write changed the recovered state: the check cannot fail"
    );
    assert!(
        checked >= caught && only_check > 0,
        "nilref check flagged {checked} lost writes ({only_check} the manifest missed), \
         the manifest comparison {caught}"
    );
    eprintln!(
        "lost writes: manifest caught {caught}, nilref check {checked} ({only_check} only it)"
    );
}

// ---------------------------------------------------------------------------
// The cleaner under a cut: GC constructions free segments that later logs
// reuse. Whatever the cut, recovery must find a consistent state, and the
// snapshots must read exactly as before — a freed segment is only reused
// once a super root that no longer needs it is on disk.

const GC_DEV: u64 = 3 << 20;

/// The image the cleaner starts from: files written over several syncs,
/// a snapshot, then most of them deleted or overwritten, on 48 segments
/// of 64 KiB. The clock ticks one second per sync. The files are large
/// enough that the base takes 18 segments: the workload's writes then
/// pass the device's end and wrap into the freed ones before the vacancy
/// check (8 segments reserved) stops them.
fn gc_base() -> MemDevice {
    let dev = nilfs_testkit::image::fresh(GC_DEV, BS, 64);
    let nilfs = Nilfs::open(&dev).unwrap();
    let mut fs = Fs::mount(&nilfs, 1_800_000_000).unwrap();
    for r in 0..10u64 {
        fs.set_time(1_800_000_000 + r);
        for k in 0..4u64 {
            let f = fs
                .create(ino::ROOT, format!("r{r}-{k}").as_bytes(), 0o644)
                .unwrap();
            fs.write(f, 0, data(r * 10 + k, 24000)).unwrap();
        }
        if r >= 1 {
            for k in 0..3 {
                fs.unlink(ino::ROOT, format!("r{}-{k}", r - 1).as_bytes())
                    .unwrap();
            }
        }
        fs.sync().unwrap();
        if r == 3 {
            fs.mkcp(true).unwrap();
        }
    }
    fs.unmount().unwrap();
    drop(nilfs);
    dev
}

/// Mount later, clean everything the cleaner may take (several GC
/// constructions), then write until the allocator has wrapped into freed
/// segments, and unmount. Returns the completed steps: 1 after the
/// cleaner, 2 after the writes' sync, 3 after unmount.
fn gc_workload(dev: &dyn BlockDevice) -> std::result::Result<usize, usize> {
    let done = std::cell::Cell::new(0usize);
    let r = (|| -> Result<()> {
        let nilfs = Nilfs::open(dev)?;
        let mut fs = Fs::mount(&nilfs, 1_800_000_100)?;
        nilfs::cleaner::clean(&mut fs, 0, 2)?;
        done.set(1);
        for n in 0..30u64 {
            fs.set_time(1_800_000_101 + n);
            let f = fs.create(ino::ROOT, format!("new{n}").as_bytes(), 0o644)?;
            fs.write(f, 0, data(500 + n, 30_000))?;
            fs.sync()?;
        }
        done.set(2);
        fs.unmount()?;
        done.set(3);
        Ok(())
    })();
    match r {
        Ok(()) => Ok(done.get()),
        Err(_) => Err(done.get()),
    }
}

fn snapshot_manifests(dev: &dyn BlockDevice) -> Vec<String> {
    let nilfs = Nilfs::open(dev).unwrap_or_else(|e| panic!("mount after the cut: {e}"));
    nilfs
        .checkpoints(nilfs::format::Cno(1))
        .unwrap()
        .iter()
        .filter(|c| c.is_snapshot())
        .map(|c| manifest(&CheckpointView::open(&nilfs, Some(c.cno)).unwrap()).unwrap())
        .collect()
}

#[test]
fn every_cut_point_of_cleaning_and_reuse_keeps_the_snapshot() {
    let base = gc_base();
    let base_latest = latest_manifest(&base);
    let base_snaps = snapshot_manifests(&base);
    assert_eq!(base_snaps.len(), 1);
    let on = |budget: u64, tear: bool| on_device(base.duplicate(), budget, tear);
    let full = on(u64::MAX, false);
    assert_eq!(gc_workload(&full), Ok(3));
    let total = full.written();
    let final_latest = latest_manifest(&full.inner);
    assert_ne!(final_latest, base_latest);
    let base_lines: BTreeSet<&str> = base_latest.lines().collect();
    let new_lines: Vec<&str> = (0..30)
        .map(|n| {
            let suffix = format!("  /new{n}");
            final_latest
                .lines()
                .find(|l| l.ends_with(&suffix))
                .expect("every new file is in the final state")
        })
        .collect();
    // The writes went into segments the cleaner freed: segments in use
    // in the base image (other than the writer's own two) were written
    // again after the cleaning.
    let usage = |dev: &MemDevice| {
        let nilfs = Nilfs::open(dev).unwrap();
        let mut fs = Fs::mount_read_only(&nilfs, 1_900_000_000).unwrap();
        let n = fs.sustat().unwrap().nsegs as usize;
        fs.suinfo(nilfs::format::SegNum(0), n).unwrap()
    };
    let (before, after) = (usage(&base), usage(&full.inner));
    let reused = (0..before.len())
        .filter(|&s| {
            before[s].is_dirty() && !before[s].is_active() && after[s].lastmod > 1_800_000_100
        })
        .count();
    assert!(reused >= 2, "only {reused} segments freed and reused");
    let mut torn_too = 0;
    for k in 0..=total {
        for tear in [false, true] {
            if tear && k == 0 {
                continue;
            }
            let dev = on(k, tear);
            let done = match gc_workload(&dev) {
                Ok(n) | Err(n) => n,
            };
            torn_too += usize::from(tear);
            let latest = latest_manifest(&dev.inner);
            // The namespace is the base's plus the first j new files for
            // some j (each is written and synced on its own; the cleaning
            // changes no name); after the writes completed, the final.
            if done < 2 {
                let got: BTreeSet<&str> = latest.lines().collect();
                let ok = (0..=40).any(|j| {
                    let mut want = base_lines.clone();
                    want.extend(new_lines.iter().take(j).copied());
                    got == want
                });
                assert!(
                    ok,
                    "cut at {k} (tear {tear}): not a prefix of the writes\n{latest}"
                );
            } else {
                assert_eq!(
                    latest, final_latest,
                    "cut at {k} (tear {tear}) after the writes"
                );
            }
            assert_eq!(
                snapshot_manifests(&dev.inner),
                base_snaps,
                "cut at {k} (tear {tear}): the snapshot changed"
            );
        }
    }
    assert!(torn_too > 0);
}
