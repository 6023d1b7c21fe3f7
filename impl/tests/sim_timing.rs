//! The simulated device's timing models, determinism and fault injection.

use nilfs::device::sim::{
    Bio, DeviceModel, Fault, FaultPlan, HddModel, Op, SimConfig, SimDevice, SimStats, SplitMix64,
    SsdModel,
};
use nilfs::device::BlockDevice;
use nilfs::format::BlockNr;
use nilfs::Error;

const GIB: u64 = 1 << 30;

/// Read `blocks` one 4 KiB block at a time, waiting for each (a synchronous
/// reader), and return the simulated time taken.
fn timed_reads(config: SimConfig, blocks: &[u64]) -> u64 {
    let dev = SimDevice::mem(GIB, config).unwrap();
    for &b in blocks {
        dev.submit(Bio::read(BlockNr(b), 4096, 1))
            .unwrap()
            .wait()
            .unwrap();
    }
    dev.now_ns()
}

fn random_blocks(seed: u64, n: usize, range: u64) -> Vec<u64> {
    let mut rng = SplitMix64::new(seed);
    (0..n).map(|_| rng.next_u64() % range).collect()
}

#[test]
fn hdd_sequential_is_much_faster_than_random() {
    let seq: Vec<u64> = (0..256).collect();
    let rnd = random_blocks(1, 256, GIB / 4096);
    let t_seq = timed_reads(SimConfig::hdd_2010(), &seq);
    let t_rnd = timed_reads(SimConfig::hdd_2010(), &rnd);
    assert!(
        t_seq * 10 < t_rnd,
        "sequential {t_seq} ns vs random {t_rnd} ns"
    );
    // A random 4 KiB read costs overhead + seek + rotational wait: between
    // the track-to-track seek and a full stroke plus a full turn.
    let m = HddModel::scsi_2010();
    let per = t_rnd / 256;
    assert!(
        per > m.command_overhead_ns + m.track_to_track_seek_ns,
        "{per}"
    );
    assert!(
        per < m.command_overhead_ns + m.full_stroke_seek_ns + m.rotation_ns() + m.transfer_ns(4096)
    );
}

#[test]
fn hdd_sequential_streams_at_media_rate() {
    let config = SimConfig {
        end_io_page_ns: 0,
        ..SimConfig::hdd_2010()
    };
    let dev = SimDevice::mem(GIB, config).unwrap();
    let handles: Vec<_> = (0..64)
        .map(|i| dev.submit(Bio::read(BlockNr(i * 32), 4096, 32)).unwrap())
        .collect();
    dev.run_until_idle();
    assert!(handles.iter().all(|h| h.wait().is_ok()));
    let m = HddModel::scsi_2010();
    let bytes = 64 * 32 * 4096;
    assert_eq!(
        dev.now_ns(),
        m.transfer_ns(bytes / 64) * 64 + 64 * m.command_overhead_ns
    );
    assert_eq!(dev.stats().busy_ns, dev.now_ns());
}

#[test]
fn hdd_seek_grows_with_distance() {
    let m = HddModel::scsi_2010();
    assert_eq!(m.seek_ns(0), 0);
    let near = m.seek_ns(1 << 20);
    let far = m.seek_ns(m.capacity_bytes / 2);
    assert!(m.track_to_track_seek_ns <= near && near < far && far < m.full_stroke_seek_ns);
    assert_eq!(m.seek_ns(u64::MAX), m.full_stroke_seek_ns);
    assert_eq!(m.rotation_ns(), 6_000_000);
}

#[test]
fn ssd_is_bandwidth_bound_when_queued() {
    let config = SimConfig {
        end_io_page_ns: 0,
        ..SimConfig::ssd_2010()
    };
    let dev = SimDevice::mem(GIB, config).unwrap();
    let n = 256u64;
    let handles: Vec<_> = (0..n)
        .map(|i| dev.submit(Bio::read(BlockNr(i * 32), 4096, 32)).unwrap())
        .collect();
    dev.run_until_idle();
    assert!(handles.iter().all(|h| h.wait().is_ok()));
    let m = SsdModel::intel_x25m_2010();
    let bytes = n * 32 * 4096;
    let mb_per_s = bytes as f64 * 1e3 / dev.now_ns() as f64;
    let limit = m.read_bytes_per_s as f64 / 1e6;
    assert!(
        mb_per_s <= limit && mb_per_s > 0.95 * limit,
        "{mb_per_s} MB/s vs {limit}"
    );
}

#[test]
fn ssd_single_4k_latencies_match_the_data_sheet() {
    let config = SimConfig {
        end_io_page_ns: 0,
        ..SimConfig::ssd_2010()
    };
    let dev = SimDevice::mem(GIB, config).unwrap();
    dev.submit(Bio::read(BlockNr(7), 4096, 1))
        .unwrap()
        .wait()
        .unwrap();
    let read = dev.now_ns();
    dev.submit(Bio::write(BlockNr(9), 4096, vec![vec![1; 4096]]))
        .unwrap()
        .wait()
        .unwrap();
    let write = dev.now_ns() - read;
    assert!(
        (64_000..67_000).contains(&read),
        "4 KiB read {read} ns (spec 65 µs)"
    );
    assert!(
        (84_000..87_000).contains(&write),
        "4 KiB write {write} ns (spec 85 µs)"
    );
    // 4 KiB random reads at queue depth 32: about 35,000 IOPS.
    let blocks = random_blocks(2, 3200, GIB / 4096);
    let t0 = dev.now_ns();
    let hs: Vec<_> = blocks
        .iter()
        .map(|&b| dev.submit(Bio::read(BlockNr(b), 4096, 1)).unwrap())
        .collect();
    dev.run_until_idle();
    assert!(hs.iter().all(|h| h.wait().is_ok()));
    let iops = 3200.0 * 1e9 / (dev.now_ns() - t0) as f64;
    assert!(
        (33_000.0..37_000.0).contains(&iops),
        "{iops} IOPS (spec 35,000)"
    );
}

/// Per page: bio id, page index, success, completion time.
type PageLog = Vec<(u64, usize, bool, u64)>;

/// A mixed workload with random faults; returns everything observable.
fn workload(config: SimConfig) -> (u64, SimStats, PageLog) {
    let dev = SimDevice::mem(GIB, config).unwrap();
    let mut rng = SplitMix64::new(99);
    let mut handles = Vec::new();
    for i in 0..200u64 {
        let start = BlockNr(rng.next_u64() % (GIB / 4096 - 8));
        let pages = 1 + (rng.next_u64() % 8) as usize;
        let bio = if i % 3 == 0 {
            Bio::write(start, 4096, vec![vec![i as u8; 4096]; pages])
        } else {
            Bio::read(start, 4096, pages)
        };
        handles.push(dev.submit(bio).unwrap());
        if i % 5 == 0 {
            let _ = handles[(i / 2) as usize].wait_page(0);
        }
        dev.advance_by(rng.next_u64() % 50_000);
    }
    dev.run_until_idle();
    let pages = handles
        .iter()
        .flat_map(|h| {
            (0..h.nr_pages()).map(move |k| {
                let c = h.completion(k).unwrap();
                (h.id(), k, c.result.is_ok(), c.time_ns)
            })
        })
        .collect();
    (dev.now_ns(), dev.stats(), pages)
}

#[test]
fn same_seed_same_workload_same_simulated_time() {
    for model in [SimConfig::hdd_2010(), SimConfig::ssd_2010()] {
        let config = SimConfig {
            faults: FaultPlan {
                seed: 7,
                faults: vec![Fault::Random {
                    per_million: 20_000,
                }],
            },
            ..model
        };
        let a = workload(config.clone());
        let b = workload(config.clone());
        assert_eq!(a, b);
        assert!(
            a.1.faults_injected > 0,
            "the fault rate should fire in 800 pages"
        );
        let other = SimConfig {
            faults: FaultPlan {
                seed: 8,
                ..config.faults.clone()
            },
            ..config
        };
        assert_ne!(workload(other).2, a.2, "the seed should matter");
    }
}

#[test]
fn block_fault_hits_exactly_that_block_and_op() {
    let faults = FaultPlan {
        seed: 0,
        faults: vec![Fault::Block {
            blocknr: BlockNr(7),
            op: Some(Op::Read),
        }],
    };
    let dev = SimDevice::mem(
        1 << 20,
        SimConfig {
            faults,
            ..SimConfig::hdd_2010()
        },
    )
    .unwrap();
    let h = dev.submit(Bio::read(BlockNr(4), 4096, 6)).unwrap();
    for k in 0..6 {
        match (k, h.wait_page(k)) {
            (3, Err(Error::Io { blocknr: 7, .. })) => {}
            (3, other) => panic!("block 7 should fail: {other:?}"),
            (_, r) => r.unwrap(),
        }
    }
    // Writes to it are not affected, and a 1 KiB bio over part of block 7 is.
    dev.submit(Bio::write(BlockNr(7), 4096, vec![vec![5; 4096]]))
        .unwrap()
        .wait()
        .unwrap();
    assert!(dev
        .submit(Bio::read(BlockNr(29), 1024, 1))
        .unwrap()
        .wait()
        .is_err());
    assert!(dev
        .submit(Bio::read(BlockNr(27), 1024, 1))
        .unwrap()
        .wait()
        .is_ok());
    // Through the synchronous adapter too.
    let mut buf = vec![0u8; 4096];
    assert!(dev.read_at(7 * 4096, &mut buf).is_err());
    assert!(dev.read_at(8 * 4096, &mut buf).is_ok());
    assert_eq!(dev.stats().faults_injected, 3);
}

#[test]
fn nth_bio_fault_hits_exactly_that_bio() {
    let faults = FaultPlan {
        seed: 0,
        faults: vec![Fault::NthBio(3)],
    };
    let dev = SimDevice::mem(
        1 << 20,
        SimConfig {
            faults,
            ..SimConfig::ssd_2010()
        },
    )
    .unwrap();
    let hs: Vec<_> = (0..6)
        .map(|i| dev.submit(Bio::read(BlockNr(i * 4), 4096, 4)).unwrap())
        .collect();
    for (i, h) in hs.iter().enumerate() {
        for k in 0..4 {
            assert_eq!(h.wait_page(k).is_err(), i == 3, "bio {i} page {k}");
        }
    }
    assert_eq!(dev.stats().faults_injected, 4);
}

#[test]
fn block_device_adapter_round_trips_and_is_timed() {
    let dev = SimDevice::mem(1 << 20, SimConfig::hdd_2010()).unwrap();
    let data: Vec<u8> = (0..3 * 4096 + 1024).map(|i| (i % 253) as u8).collect();
    dev.write_at(1024, &data).unwrap(); // unaligned to 4 KiB: sector bios
    let mut back = vec![0u8; data.len()];
    dev.read_at(1024, &mut back).unwrap();
    assert_eq!(back, data);
    let mut aligned = vec![0u8; 8192];
    dev.read_at(4096, &mut aligned).unwrap();
    assert_eq!(aligned[..], data[3072..3072 + 8192]);
    let s = dev.stats();
    assert_eq!(s.bios, 3);
    assert_eq!((s.pages_written, s.pages_read), (26, 26 + 2));
    assert!(dev.now_ns() > 0);
    dev.flush().unwrap();
    assert_eq!(dev.in_flight(), 0);
}

#[test]
fn malformed_bios_are_errors_not_panics() {
    let dev = SimDevice::mem(1 << 20, SimConfig::instant()).unwrap();
    assert!(dev.submit(Bio::read(BlockNr(0), 4096, 0)).is_err());
    assert!(dev.submit(Bio::read(BlockNr(0), 4096, 257)).is_err());
    assert!(dev.submit(Bio::read(BlockNr(0), 1000, 1)).is_err());
    assert!(dev.submit(Bio::read(BlockNr(256), 4096, 1)).is_err());
    assert!(dev.submit(Bio::read(BlockNr(u64::MAX), 4096, 1)).is_err());
    assert!(dev
        .submit(Bio::write(BlockNr(0), 4096, vec![vec![0; 10]]))
        .is_err());
    let h = dev.submit(Bio::read(BlockNr(0), 4096, 1)).unwrap();
    assert!(h.wait_page(1).is_err());
    assert!(SimDevice::mem(
        1 << 20,
        SimConfig {
            block_size: 0,
            ..SimConfig::instant()
        }
    )
    .is_err());
    let bad = DeviceModel::Ssd(SsdModel {
        queue_depth: 0,
        ..SsdModel::intel_x25m_2010()
    });
    assert!(SimDevice::mem(
        1 << 20,
        SimConfig {
            model: bad,
            ..SimConfig::instant()
        }
    )
    .is_err());
    assert_eq!(dev.stats().bios, 1);
}
