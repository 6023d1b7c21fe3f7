//! Crash at every cut point, judged by the model: a workload of 30
//! operations (syncs, fsync, fdatasync, a snapshot, renames, truncates,
//! links) runs on a device that stops after its k-th block write — for
//! every k, plain and torn. The model follows the operations that
//! completed, with their observed outcomes; the one the cut interrupted
//! may or may not have happened. After the crash and a mount, the durable
//! state read through the read path (the live tree and every checkpoint)
//! must be one the model's crash envelope allows — nothing fsync'd or
//! synced lost, nothing half-done visible. The workload and the envelope
//! are `nilfs_conformance::crash_envelope`'s (the benchmark times them).

use nilfs::device::CutDevice;
use nilfs::inspect::manifest::DigestMemo;
use nilfs_conformance::crash_envelope::{envelope, follow, formatted, spec, workload};
use nilfs_conformance::lockstep::{Durable, ImplUnderTest, ModelManifests, Sut};
use nilfs_model::{Errno, Op, Outcome, State};

/// What one cut left: how many operations completed, and the durable
/// state after the crash and a mount (`None` if the image no longer
/// mounted or read).
struct Cut {
    completed: usize,
    durable: Option<Durable>,
}

/// Runs the workload on `dev` until an operation fails with EIO (the cut);
/// advances `model` through the completed ones with their outcomes; then
/// power comes back: the crash, a mount, the durable state.
///
/// `digests` carries the adapter's page digests from cut point to cut
/// point (the images hold mostly the same files; the memo is exact).
fn run_cut(dev: &CutDevice, ops: &[Op], model: &mut Vec<State>, digests: &mut DigestMemo) -> Cut {
    let spec = spec();
    let mut sut = ImplUnderTest::from_device(dev, spec.ctime).with_digests(std::mem::take(digests));
    let mut completed = 0;
    for op in ops {
        let out = sut
            .try_apply(op)
            .expect("the workload's operations are supported");
        if out == Outcome::Err(Errno::EIO) {
            break;
        }
        *model = follow(model, op, &out);
        completed += 1;
    }
    dev.restore();
    assert_eq!(sut.apply(&Op::Crash), Outcome::Ok);
    let mounted = sut.apply(&Op::Mount {
        cp: None,
        ro: false,
    }) == Outcome::Ok;
    let durable = if mounted { sut.durable().ok() } else { None };
    *digests = sut.take_digests();
    Cut { completed, durable }
}

fn check_every_cut(tear: bool) -> usize {
    let ops = workload();
    let (base, initial) = formatted();
    let full = CutDevice::new(base.duplicate(), 1024, u64::MAX);
    let mut m = vec![initial.clone()];
    let mut digests = DigestMemo::default();
    let whole = run_cut(&full, &ops, &mut m, &mut digests);
    assert_eq!(whole.completed, ops.len());
    let total = full.written();
    assert!(total > 100, "only {total} block writes");
    let mut distinct = Vec::new();
    let mut manifests = ModelManifests::default();
    for k in u64::from(tear)..=total {
        let dev = CutDevice::new(base.duplicate(), 1024, k);
        let dev = if tear { dev.tearing() } else { dev };
        let mut model = vec![initial.clone()];
        let cut = run_cut(&dev, &ops, &mut model, &mut digests);
        let allowed = envelope(&model, ops.get(cut.completed), &mut |s| {
            manifests.durable(s)
        });
        let durable = cut.durable.unwrap_or_else(|| {
            panic!("cut after {k} block writes (torn: {tear}): the image did not mount or read")
        });
        assert!(
            allowed.iter().any(|a| a.admits(&durable)),
            "cut after {k} block writes (torn: {tear}), {} operations completed: the \
             recovered state is outside the model's envelope ({} states allowed)\n\
             replay: cargo test -p nilfs-conformance --test crash_envelope\n\
             recovered: {:#?}\nfirst allowed: {:#?}",
            cut.completed,
            allowed.len(),
            durable,
            allowed.first()
        );
        if !distinct.contains(&durable) {
            distinct.push(durable);
        }
    }
    eprintln!(
        "{total} block writes, {} distinct recovered states",
        distinct.len()
    );
    distinct.len()
}

#[test]
fn every_cut_point_lands_in_the_models_envelope() {
    let states = check_every_cut(false);
    // Not vacuous: the cuts recover many different states.
    assert!(states >= 8, "only {states} distinct recovered states");
}

#[test]
fn every_torn_write_lands_in_the_models_envelope() {
    check_every_cut(true);
}

/// The check can fail: an image that silently lost one write of a
/// completed sync recovers outside the envelope for some lost write.
#[test]
fn a_silently_lost_write_leaves_the_envelope() {
    let ops = workload();
    let (base, initial) = formatted();
    let full = CutDevice::new(base.duplicate(), 1024, u64::MAX);
    let mut digests = DigestMemo::default();
    run_cut(&full, &ops, &mut vec![initial.clone()], &mut digests);
    let total = full.written();
    let mut caught = 0;
    let mut manifests = ModelManifests::default();
    for lose in (1..total).step_by(5) {
        let dev = CutDevice::new(base.duplicate(), 1024, u64::MAX).losing(lose);
        let mut model = vec![initial.clone()];
        let cut = run_cut(&dev, &ops, &mut model, &mut digests);
        let inside = cut.durable.is_some_and(|d| {
            envelope(&model, ops.get(cut.completed), &mut |s| {
                manifests.durable(s)
            })
            .iter()
            .any(|a| a.admits(&d))
        });
        if !inside {
            caught += 1;
        }
    }
    assert!(
        caught > 0,
        "no lost write left the envelope: the check cannot fail"
    );
}
