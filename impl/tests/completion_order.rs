//! Seed 002 (btrfs: finish read pages in the order they are submitted) as a
//! property of the simulated bio layer: for any bio, every page completes
//! exactly once, in submission order, and a reader waiting on page k never
//! wakes before pages 0..=k are complete. The same checker run on the
//! pre-patch reverse walk must report a violation.

use std::sync::{Arc, Mutex};

use nilfs::device::sim::{
    Bio, BioHandle, CompletionOrder, DeviceModel, HddModel, SimConfig, SimDevice, SsdModel,
};
use nilfs::device::{BlockDevice, MemDevice};
use nilfs::format::BlockNr;
use proptest::prelude::*;
use proptest::test_runner::{Config, TestError, TestRunner};

const DEV_SIZE: u64 = 8 << 20;

/// One step of a submission pattern.
#[derive(Clone, Debug)]
enum Step {
    /// Submit a read of `pages` pages at page-aligned byte offset `start_frac`
    /// of the device (scaled into range).
    Submit { start_frac: u32, pages: usize },
    /// Wait on page `page % n` of bio `bio % submitted`.
    Wait { bio: usize, page: usize },
    /// Charge CPU time.
    Cpu { ns: u64 },
}

#[derive(Clone, Debug)]
struct Case {
    model: u8,
    block_size: u32,
    end_io_page_ns: u64,
    steps: Vec<Step>,
}

/// What the checker found wrong.
#[derive(Debug)]
struct Violation(String);

fn case() -> impl Strategy<Value = Case> {
    let step = prop_oneof![
        3 => (any::<u32>(), 1usize..=64).prop_map(|(start_frac, pages)| Step::Submit { start_frac, pages }),
        3 => (any::<usize>(), any::<usize>()).prop_map(|(bio, page)| Step::Wait { bio, page }),
        1 => (0u64..2_000_000).prop_map(|ns| Step::Cpu { ns }),
    ];
    (
        0u8..3,
        prop_oneof![Just(512u32), Just(1024), Just(2048), Just(4096)],
        0u64..3_000,
        proptest::collection::vec(step, 1..24),
    )
        .prop_map(|(model, block_size, end_io_page_ns, steps)| Case {
            model,
            block_size,
            end_io_page_ns,
            steps,
        })
}

/// Every 512-byte sector starts with its own sector number, so a page's
/// first bytes say which block it came from.
fn patterned_store() -> MemDevice {
    let store = MemDevice::new(DEV_SIZE);
    let mut sector = vec![0u8; 512];
    for s in 0..DEV_SIZE / 512 {
        sector[..8].copy_from_slice(&s.to_le_bytes());
        store.write_at(s * 512, &sector).expect("write pattern");
    }
    store
}

/// The property, for one case and one completion order.
fn check_completion_order(order: CompletionOrder, case: &Case) -> Result<(), Violation> {
    let model = match case.model {
        0 => DeviceModel::Instant,
        1 => DeviceModel::Hdd(HddModel::scsi_2010()),
        _ => DeviceModel::Ssd(SsdModel::intel_x25m_2010()),
    };
    let config = SimConfig {
        model,
        order,
        end_io_page_ns: case.end_io_page_ns,
        ..SimConfig::instant()
    };
    let dev = SimDevice::new(Box::new(patterned_store()), config)
        .map_err(|e| Violation(e.to_string()))?;
    let bs = u64::from(case.block_size);
    // (bio index, page index, data ok) in the order completion handlers ran.
    let log: Arc<Mutex<Vec<(usize, usize, bool)>>> = Arc::default();
    let mut bios: Vec<BioHandle> = Vec::new();
    for step in &case.steps {
        match *step {
            Step::Submit { start_frac, pages } => {
                let blocks = DEV_SIZE / bs;
                let start = u64::from(start_frac) % (blocks - pages as u64 + 1);
                let idx = bios.len();
                let log = log.clone();
                let bio =
                    Bio::read(BlockNr(start), case.block_size, pages).on_page_done(move |p| {
                        let want = p.blocknr.0 * bs / 512;
                        let ok =
                            p.result.is_ok() && p.data.get(..8) == Some(&want.to_le_bytes()[..]);
                        log.lock().unwrap().push((idx, p.index, ok));
                    });
                bios.push(
                    dev.submit(bio)
                        .map_err(|e| Violation(format!("submit: {e}")))?,
                );
            }
            Step::Wait { bio, page } if !bios.is_empty() => {
                let h = &bios[bio % bios.len()];
                let k = page % h.nr_pages();
                h.wait_page(k)
                    .map_err(|e| Violation(format!("wait: {e}")))?;
                if let Some(j) = (0..=k).find(|&j| !h.is_page_done(j)) {
                    return Err(Violation(format!(
                        "bio {} ({} pages): waiter on page {k} woke before page {j} completed",
                        h.id(),
                        h.nr_pages()
                    )));
                }
            }
            Step::Wait { .. } => {}
            Step::Cpu { ns } => dev.advance_by(ns),
        }
    }
    dev.run_until_idle();
    let log = log.lock().unwrap();
    for (idx, h) in bios.iter().enumerate() {
        let mine: Vec<usize> = log.iter().filter(|e| e.0 == idx).map(|e| e.1).collect();
        let expected: Vec<usize> = (0..h.nr_pages()).collect();
        if mine.len() != h.nr_pages() {
            return Err(Violation(format!(
                "bio {idx}: {} completions for {} pages",
                mine.len(),
                h.nr_pages()
            )));
        }
        if mine != expected {
            return Err(Violation(format!(
                "bio {idx}: pages completed in order {mine:?}"
            )));
        }
        let seqs: Vec<u64> = (0..h.nr_pages())
            .map(|k| h.completion(k).map_or(u64::MAX, |c| c.seq))
            .collect();
        if seqs.windows(2).any(|w| w[0] >= w[1]) {
            return Err(Violation(format!(
                "bio {idx}: completion sequence {seqs:?}"
            )));
        }
    }
    if let Some(bad) = log.iter().find(|e| !e.2) {
        return Err(Violation(format!(
            "bio {} page {} read the wrong data",
            bad.0, bad.1
        )));
    }
    Ok(())
}

fn run(order: CompletionOrder) -> Result<(), TestError<Case>> {
    let mut runner = TestRunner::new(Config {
        cases: 128,
        failure_persistence: None,
        ..Config::default()
    });
    runner.run(&case(), |c| {
        check_completion_order(order, &c).map_err(|v| TestCaseError::fail(v.0))
    })
}

#[test]
fn pages_complete_once_in_submission_order() {
    if let Err(e) = run(CompletionOrder::Submission) {
        panic!("{e}");
    }
}

/// The canary: the pre-seed-002 reverse walk must be caught, and the
/// minimal counterexample is a two-page bio.
#[test]
fn reverse_completion_is_caught() {
    match run(CompletionOrder::Reverse) {
        Err(TestError::Fail(why, case)) => {
            let pages: Vec<usize> = case
                .steps
                .iter()
                .filter_map(|s| match s {
                    Step::Submit { pages, .. } => Some(*pages),
                    _ => None,
                })
                .collect();
            assert!(pages.iter().any(|&p| p >= 2), "shrunk to {case:?}: {why}");
        }
        other => panic!("reverse completion order was not caught: {other:?}"),
    }
}

/// Real threads: one waiter per page of one bio, and the completions driven
/// by whichever waiter gets the device. However the OS schedules them, each
/// waiter wakes only after all earlier pages completed.
fn threaded_waiters(order: CompletionOrder) -> Result<(), Violation> {
    let config = SimConfig {
        order,
        ..SimConfig::ssd_2010()
    };
    let dev = SimDevice::mem(1 << 20, config).map_err(|e| Violation(e.to_string()))?;
    let n = 16;
    let h = dev
        .submit(Bio::read(BlockNr(0), 4096, n))
        .map_err(|e| Violation(e.to_string()))?;
    let results: Vec<Result<(), Violation>> = std::thread::scope(|s| {
        let waiters: Vec<_> = (0..n)
            .map(|k| {
                let h = h.clone();
                s.spawn(move || {
                    h.wait_page(k).map_err(|e| Violation(e.to_string()))?;
                    // Whatever else other waiters drove meanwhile, every
                    // earlier page must be done and must have completed
                    // before page k (sequence numbers are the device's
                    // total order of completions).
                    let seq = |j| h.completion(j).map(|c| c.seq);
                    match (0..k).find(|&j| !matches!((seq(j), seq(k)), (Some(a), Some(b)) if a < b))
                    {
                        Some(j) => Err(Violation(format!(
                            "waiter on page {k} woke before page {j}"
                        ))),
                        None => Ok(()),
                    }
                })
            })
            .collect();
        waiters
            .into_iter()
            .map(|w| w.join().expect("waiter panicked"))
            .collect()
    });
    results.into_iter().collect()
}

#[test]
fn threaded_waiters_wake_in_page_order() {
    threaded_waiters(CompletionOrder::Submission).unwrap();
    assert!(
        threaded_waiters(CompletionOrder::Reverse).is_err(),
        "reverse order not caught"
    );
}

/// The point of seed 002 in numbers: the first page of a sequential read is
/// available earlier when pages complete in submission order.
#[test]
fn first_page_latency_is_lower_in_submission_order() {
    let first_page_ns = |order| {
        let config = SimConfig {
            order,
            ..SimConfig::hdd_2010()
        };
        let dev = SimDevice::mem(1 << 20, config).unwrap();
        let h = dev.submit(Bio::read(BlockNr(0), 4096, 32)).unwrap();
        h.wait_page(0).unwrap();
        h.completion(0).unwrap().time_ns
    };
    let forward = first_page_ns(CompletionOrder::Submission);
    let reverse = first_page_ns(CompletionOrder::Reverse);
    assert_eq!(reverse - forward, 31 * SimConfig::hdd_2010().end_io_page_ns);
}
