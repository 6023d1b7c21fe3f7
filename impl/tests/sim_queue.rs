//! The 2.6.35 request queue and the disk's segmented read cache on the
//! simulated device: plugging, merging, queue depth, read-ahead that stops
//! for the next command, and the old (queue-less, cache-less) model kept as
//! the default. Properties only: directions, bounds, determinism.

use nilfs::device::sim::{
    Bio, BlockLayer, DiskCache, Prefetch, QueueModel, RequestRecord, Service, SimConfig, SimDevice,
};
use nilfs::format::BlockNr;
use proptest::prelude::*;

const GIB: u64 = 1 << 30;
const BS: u32 = 4096;

fn queue_of(c: &SimConfig) -> QueueModel {
    match c.block_layer {
        BlockLayer::Queue(q) => q,
        BlockLayer::Direct => panic!("no queue"),
    }
}

/// A node read and its contiguous read-ahead siblings, submitted the way
/// `__nilfs_btree_get_block` does (CPU between submissions), then waited for.
fn node_and_siblings(dev: &SimDevice, first: u64, n: u64) -> u64 {
    let t0 = dev.now_ns();
    let h = dev.submit(Bio::read(BlockNr(first), BS, 1)).unwrap();
    for b in first + 1..first + n {
        dev.submit(Bio::read(BlockNr(b), BS, 1).rahead()).unwrap();
        dev.advance_by(500);
    }
    h.wait().unwrap();
    dev.run_until_idle();
    dev.now_ns() - t0
}

#[test]
fn default_config_has_no_queue_and_no_drive_cache() {
    for c in [
        SimConfig::instant(),
        SimConfig::hdd_2010(),
        SimConfig::ssd_2010(),
    ] {
        assert_eq!(c.block_layer, BlockLayer::Direct);
        assert_eq!(c.disk_cache, None);
        let dev = SimDevice::mem(GIB, c).unwrap();
        assert!(dev.queue_stats().is_none() && dev.cache_stats().is_none());
    }
}

#[test]
fn plugged_contiguous_bios_become_one_command() {
    let queued = SimDevice::mem(GIB, SimConfig::hdd_2010_linux()).unwrap();
    let direct = SimDevice::mem(
        GIB,
        SimConfig {
            block_layer: BlockLayer::Direct,
            ..SimConfig::hdd_2010_linux()
        },
    )
    .unwrap();
    let tq = node_and_siblings(&queued, 5000, 8);
    let td = node_and_siblings(&direct, 5000, 8);
    let rq = queued.requests();
    assert_eq!(rq.len(), 1, "one request: {rq:?}");
    assert_eq!((rq[0].bios, rq[0].len), (8, 8 * u64::from(BS)));
    assert_eq!(direct.requests().len(), 8, "no queue: a command per bio");
    let s = queued.queue_stats().unwrap();
    assert_eq!((s.back_merges, s.plugs, s.unplug_wait), (7, 1, 1));
    // The merged command pays one command overhead instead of eight.
    assert!(tq <= td, "merged {tq} ns vs separate {td} ns");
}

#[test]
fn a_plugged_queue_waits_for_a_sleeper_or_the_timer() {
    let c = SimConfig::hdd_2010_linux();
    let delay = queue_of(&c).unplug_delay_ns;
    let dev = SimDevice::mem(GIB, c).unwrap();
    dev.submit(Bio::read(BlockNr(100), BS, 1)).unwrap();
    dev.advance_by(delay / 2);
    assert!(dev.requests().is_empty(), "still plugged");
    dev.advance_by(delay);
    let rq = dev.requests();
    assert_eq!(rq.len(), 1);
    assert_eq!(rq[0].dispatch_ns, delay, "the unplug timer dispatched it");
    assert_eq!(dev.queue_stats().unwrap().unplug_timer, 1);
}

#[test]
fn four_queued_requests_unplug_without_a_sleeper() {
    let c = SimConfig::hdd_2010_linux();
    let thresh = queue_of(&c).unplug_thresh as u64;
    let dev = SimDevice::mem(GIB, c).unwrap();
    for i in 0..thresh {
        dev.submit(Bio::read(BlockNr(1000 * (i + 1)), BS, 1))
            .unwrap();
    }
    let rq = dev.requests();
    assert_eq!(rq.len() as u64, thresh);
    assert!(rq.iter().all(|r| r.dispatch_ns == 0));
    assert_eq!(dev.queue_stats().unwrap().unplug_threshold, 1);
}

#[test]
fn an_unplugged_queue_dispatches_at_once() {
    let c = SimConfig::ssd_2010_linux();
    let c = SimConfig {
        block_layer: BlockLayer::Queue(QueueModel {
            plugging: false,
            ..queue_of(&c)
        }),
        ..c
    };
    let dev = SimDevice::mem(GIB, c).unwrap();
    dev.submit(Bio::read(BlockNr(8), BS, 1)).unwrap();
    dev.submit(Bio::read(BlockNr(9), BS, 1)).unwrap();
    assert_eq!(
        dev.requests().len(),
        2,
        "nothing waits in the queue, so nothing merges"
    );
}

#[test]
fn queue_depth_bounds_what_the_device_holds() {
    for depth in [1usize, 4, 32] {
        let c = SimConfig::hdd_2010_linux();
        let c = SimConfig {
            block_layer: BlockLayer::Queue(QueueModel {
                depth,
                ..queue_of(&c)
            }),
            ..c
        };
        let dev = SimDevice::mem(GIB, c).unwrap();
        let hs: Vec<_> = (0..40u64)
            .map(|i| dev.submit(Bio::read(BlockNr(i * 997), BS, 2)).unwrap())
            .collect();
        for h in &hs {
            h.wait().unwrap();
        }
        let s = dev.queue_stats().unwrap();
        assert!(s.max_in_flight as usize <= depth);
        assert_eq!(dev.requests().len(), 40);
    }
}

/// `n` sequential windows of `pages`, each submitted when the previous
/// one's first page completes (a reader keeping one window in flight).
fn stream(c: SimConfig, n: u64, pages: usize) -> (u64, Vec<RequestRecord>) {
    let dev = SimDevice::mem(GIB, c).unwrap();
    let mut prev = dev.submit(Bio::read(BlockNr(0), BS, pages)).unwrap();
    for i in 1..n {
        let next = dev
            .submit(Bio::read(BlockNr(i * pages as u64), BS, pages))
            .unwrap();
        prev.wait().unwrap();
        prev = next;
    }
    prev.wait().unwrap();
    (dev.now_ns(), dev.requests())
}

#[test]
fn a_sequential_stream_runs_at_the_media_rate_with_read_ahead_and_loses_turns_without() {
    let c = SimConfig::hdd_2010_linux();
    let nilfs::device::DeviceModel::Hdd(m) = c.model else {
        unreachable!()
    };
    let (n, pages) = (64u64, 32usize);
    let bytes = n * pages as u64 * u64::from(BS);
    let (t, rq) = stream(c.clone(), n, pages);
    let media = m.transfer_ns(bytes);
    assert!(t >= media, "no faster than the media");
    // One seek and one rotational wait at most, then streaming.
    let bound = media + m.full_stroke_seek_ns + m.rotation_ns() + n * 100_000;
    assert!(t <= bound, "{t} > {bound}");
    assert!(rq[1..].iter().all(|r| r.service == Service::Sequential));
    let off = SimConfig {
        disk_cache: Some(DiskCache {
            prefetch: Prefetch::Off,
            ..DiskCache::scsi_2010()
        }),
        ..c
    };
    let (t_off, _) = stream(off, n, pages);
    assert!(
        t_off > t + (n - 1) * m.rotation_ns() / 2,
        "without read-ahead each window waits for the platter: {t_off} vs {t}"
    );
}

/// Data window, a far node read queued right behind it, the next data window.
fn data_node_data(prefetch: Prefetch) -> (Service, u64) {
    let c = SimConfig {
        disk_cache: Some(DiskCache {
            prefetch,
            ..DiskCache::scsi_2010()
        }),
        ..SimConfig::hdd_2010_linux()
    };
    let dev = SimDevice::mem(GIB, c).unwrap();
    let d1 = dev.submit(Bio::read(BlockNr(0), BS, 32)).unwrap();
    dev.unplug();
    let node = dev.submit(Bio::read(BlockNr(40_000), BS, 1)).unwrap();
    node.wait().unwrap();
    d1.wait().unwrap();
    let d2 = dev.submit(Bio::read(BlockNr(32), BS, 32)).unwrap();
    d2.wait().unwrap();
    let rq = dev.requests();
    (rq.last().unwrap().service, dev.now_ns())
}

#[test]
fn read_ahead_that_stops_for_the_next_command_leaves_nothing_to_hit() {
    let (abort, _) = data_node_data(Prefetch::AbortOnCommand);
    assert!(
        matches!(abort, Service::Miss | Service::PartialHit),
        "{abort:?}"
    );
    // A drive that finishes its read-ahead first has the next window.
    let (to_limit, _) = data_node_data(Prefetch::ToLimit);
    assert_eq!(to_limit, Service::Hit);
}

#[test]
fn merged_requests_complete_every_bio_and_keep_data() {
    let dev = SimDevice::mem(GIB, SimConfig::hdd_2010_linux()).unwrap();
    let pattern = |b: u64| vec![(b % 251) as u8; BS as usize];
    for b in 200..216u64 {
        let w = dev
            .submit(Bio::write(BlockNr(b), BS, vec![pattern(b)]))
            .unwrap();
        let _ = w;
    }
    dev.run_until_idle();
    let hs: Vec<_> = (200..216u64)
        .map(|b| (b, dev.submit(Bio::read(BlockNr(b), BS, 1)).unwrap()))
        .collect();
    for (b, h) in &hs {
        h.wait().unwrap();
        assert_eq!(h.take_data(0).unwrap(), pattern(*b));
    }
    assert_eq!(dev.in_flight(), 0);
}

fn workload(c: SimConfig, seed: u64) -> (Vec<RequestRecord>, u64) {
    let dev = SimDevice::mem(GIB, c).unwrap();
    let mut rng = nilfs_testkit::Xorshift::new(seed);
    let mut hs = Vec::new();
    for i in 0..200u64 {
        let x = rng.next();
        let b = if x.is_multiple_of(3) {
            i * 8
        } else {
            x % 200_000
        };
        let mut bio = Bio::read(BlockNr(b), BS, 1 + (x % 16) as usize);
        if x.is_multiple_of(5) {
            bio = bio.rahead();
        }
        hs.push(dev.submit(bio).unwrap());
        if x.is_multiple_of(4) {
            hs[hs.len() / 2].wait().unwrap();
        } else {
            dev.advance_by(x % 50_000);
        }
    }
    dev.run_until_idle();
    (dev.requests(), dev.now_ns())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    /// The same calls give the same requests at the same times; every bio
    /// is served exactly once; nothing completes before it was dispatched.
    #[test]
    fn queued_devices_are_deterministic_and_conserve_bios(seed in any::<u64>(), which in 0u8..2) {
        let c = if which == 0 { SimConfig::hdd_2010_linux() } else { SimConfig::ssd_2010_linux() };
        let a = workload(c.clone(), seed);
        let b = workload(c, seed);
        prop_assert_eq!(&a, &b);
        prop_assert_eq!(a.0.iter().map(|r| r.bios).sum::<usize>(), 200);
        for r in &a.0 {
            prop_assert!(r.done_ns >= r.dispatch_ns);
        }
    }
}
