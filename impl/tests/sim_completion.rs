//! Seed 002's benchmark, `nilref sim completion-order`: the cache model's
//! laws, the experiment's determinism, and the direction of its result.

use nilfs::device::CompletionOrder::{Reverse, Submission};
use nilfs::device::SimConfig;
use nilfs::sim::cache_model::{CacheConfig, Hierarchy, SetAssocCache};
use nilfs::sim::completion::{self, Device, Experiment, RunResult};

const LINE: u64 = 64;

fn cache(size: u64, ways: u32) -> SetAssocCache {
    SetAssocCache::new(CacheConfig::new("c", size, ways, LINE as u32)).unwrap()
}

// ---------------------------------------------------------------------------
// The cache model
// ---------------------------------------------------------------------------

/// Repeated passes over a contiguous working set that fits: only the first
/// touch of each line misses, whatever the associativity (direct-mapped to
/// fully associative).
#[test]
fn working_set_within_capacity_has_only_compulsory_misses() {
    for (size, ways) in [(4096, 1), (4096, 2), (32 << 10, 8), (4096, 64)] {
        let mut c = cache(size, ways);
        let lines = size / LINE;
        for _ in 0..5 {
            for l in 0..lines {
                c.access_line(l);
            }
        }
        let s = c.stats();
        assert_eq!(s.misses, lines, "{size} B {ways}-way");
        assert_eq!(s.hits, 4 * lines, "{size} B {ways}-way");
    }
    // The same through a hierarchy: a 256 KiB working set fits the Nehalem
    // L2 (and L3) but not the L1.
    let mut h = Hierarchy::nehalem_2010();
    for _ in 0..3 {
        h.access(0, 256 << 10);
    }
    let s = h.stats();
    let lines = (256 << 10) / LINE;
    assert_eq!(s[1].misses, lines, "L2: compulsory misses only");
    assert_eq!(s[2].misses, lines, "L3: compulsory misses only");
    assert_eq!(s[0].misses, 3 * lines, "L1 (32 KiB) thrashes");
    // A level is looked up only on the previous level's miss.
    assert_eq!(s[1].hits + s[1].misses, s[0].misses);
    assert_eq!(s[2].hits + s[2].misses, s[1].misses);
}

/// A streaming pass larger than the cache misses once per line, and so does
/// every further pass (cyclic access defeats LRU).
#[test]
fn streaming_pass_larger_than_the_cache_misses_once_per_line() {
    let mut c = cache(32 << 10, 8);
    let lines = 4 * (32 << 10) / LINE;
    for pass in 1..=2 {
        for l in 0..lines {
            c.access_line(l);
        }
        assert_eq!(c.stats().misses, pass * lines);
        assert_eq!(c.stats().hits, 0);
    }
    // Byte ranges are counted by the lines they cover.
    let mut h = Hierarchy::new(&[CacheConfig::new("L1", 4096, 4, 64)]).unwrap();
    assert_eq!(h.access(60, 8), vec![2], "8 bytes across a line boundary");
    assert_eq!(h.access(64, 64), vec![0], "already there");
    assert_eq!(h.access(1000, 0), vec![0], "an empty range touches nothing");
    assert_eq!(h.access(1 << 20, 1 << 20), vec![(1 << 20) / LINE]);
}

/// In a full set the least recently used line goes, and a hit refreshes.
#[test]
fn lru_eviction_order() {
    // 2 sets of 4 ways: even lines share set 0.
    let mut c = cache(512, 4);
    for l in [0, 2, 4, 6] {
        assert!(!c.access_line(l));
    }
    assert!(!c.access_line(1), "set 1");
    assert!(c.access_line(0), "refresh line 0: now 2 is the LRU");
    assert!(!c.access_line(8));
    assert!(!c.contains_line(2), "the LRU line was evicted");
    for l in [0, 4, 6, 8, 1] {
        assert!(c.contains_line(l), "line {l}");
    }
    assert!(!c.access_line(10));
    assert!(!c.contains_line(4), "then the next least recently used");
    assert!(c.contains_line(0) && c.contains_line(1));
    // contains_line does not refresh: 6 is still the LRU.
    assert!(c.contains_line(6));
    c.access_line(12);
    assert!(!c.contains_line(6));
}

/// Invalidation (DMA) drops a line everywhere, frees its slot, and the next
/// access misses.
#[test]
fn invalidation_drops_lines_and_frees_slots() {
    let mut c = cache(512, 4);
    for l in [0, 2, 4, 6] {
        c.access_line(l);
    }
    c.invalidate_line(4);
    assert!(!c.contains_line(4));
    c.access_line(8); // takes the freed slot, evicts nothing
    for l in [0, 2, 6, 8] {
        assert!(c.contains_line(l), "line {l}");
    }
    assert!(!c.access_line(4), "an invalidated line misses");

    let mut h = Hierarchy::nehalem_2010();
    h.access(0, 4096);
    h.invalidate(0, 4096);
    for level in 0..3 {
        assert!(!h.contains(level, 0) && !h.contains(level, 4095));
    }
    assert_eq!(h.access(0, 4096), vec![64, 64, 64]);
}

#[test]
fn impossible_geometries_are_errors() {
    assert!(SetAssocCache::new(CacheConfig::new("c", 4096, 0, 64)).is_err());
    assert!(SetAssocCache::new(CacheConfig::new("c", 0, 8, 64)).is_err());
    assert!(SetAssocCache::new(CacheConfig::new("c", 4000, 8, 64)).is_err());
    assert!(Hierarchy::new(&[]).is_err());
    assert!(Hierarchy::new(&[
        CacheConfig::new("L1", 4096, 4, 64),
        CacheConfig::new("L2", 8192, 4, 128),
    ])
    .is_err());
    let bad = Experiment {
        bio_pages: 0,
        ..small(8)
    };
    assert!(completion::run(&bad, Device::Ssd, Submission).is_err());
    let bad = Experiment {
        file_bytes: 4097,
        ..small(8)
    };
    assert!(completion::run(&bad, Device::Ssd, Submission).is_err());
}

// ---------------------------------------------------------------------------
// The experiment
// ---------------------------------------------------------------------------

/// A 4 MiB file in bios of `bio_pages` 4 KiB pages, Nehalem caches.
fn small(bio_pages: usize) -> Experiment {
    Experiment {
        file_bytes: 4 << 20,
        bio_pages,
        ..Experiment::default()
    }
}

#[test]
fn same_parameters_give_identical_reports() {
    let exp = small(32);
    let a = completion::run_all(&exp).unwrap();
    let b = completion::run_all(&exp).unwrap();
    assert_eq!(a, b);
    assert_eq!(a.len(), 4);
    // And not trivially: the runs differ from each other.
    assert_ne!(a[0], a[1]);
    assert_ne!(a[0].total_ns, a[2].total_ns);
}

/// The latency claim for one pair of runs, where `fwd` is meant to be
/// submission order and `rev` reverse order: page 0 completes exactly
/// `(n - 1)` completion-handler runs later in reverse order, and the reader
/// never gets it sooner. It compares only figures, never the order labels,
/// so swapping the arguments (or the device's two orders) makes it fail.
fn first_page_is_sooner(exp: &Experiment, fwd: &RunResult, rev: &RunResult) -> Result<(), String> {
    let end_io = SimConfig::ssd_2010().end_io_page_ns;
    let n = exp.bio_pages.min(exp.pages() as usize) as u64;
    if rev.first_page_ns < fwd.first_page_ns || rev.mean_first_page_ns < fwd.mean_first_page_ns {
        return Err(format!(
            "reverse first page {} ns (mean {}) before submission's {} ns (mean {})",
            rev.first_page_ns, rev.mean_first_page_ns, fwd.first_page_ns, fwd.mean_first_page_ns
        ));
    }
    if rev.first_page_ns - fwd.first_page_ns != (n - 1) * end_io {
        return Err(format!(
            "first page: reverse {} ns vs submission {} ns, expected {} ns apart",
            rev.first_page_ns,
            fwd.first_page_ns,
            (n - 1) * end_io
        ));
    }
    if rev.first_read_ns < fwd.first_read_ns || rev.mean_first_read_ns < fwd.mean_first_read_ns {
        return Err("the reader got page 0 earlier in reverse order".into());
    }
    Ok(())
}

/// The cache claim for one pair of runs (same convention): equal checksum
/// misses, and no level where the reader of `rev` misses less than that of
/// `fwd`, and some level where it misses more.
fn reader_misses_less(fwd: &RunResult, rev: &RunResult) -> Result<(), String> {
    if fwd.csum_misses != rev.csum_misses {
        return Err("checksum misses differ between the orders".into());
    }
    let pairs = fwd.reader_misses.iter().zip(&rev.reader_misses);
    if let Some((i, (f, r))) = pairs.clone().enumerate().find(|(_, (f, r))| r < f) {
        return Err(format!(
            "level {i}: reverse reader misses {r} < submission {f}"
        ));
    }
    if !pairs.into_iter().any(|(f, r)| r > f) {
        return Err("no level where reverse order costs the reader misses".into());
    }
    Ok(())
}

/// Reverse order never gives page 0 sooner, for any bio size, reader speed
/// and device; and the check is not vacuous: with the orders swapped it
/// fails for every bio of two pages or more.
#[test]
fn reverse_never_has_lower_first_page_latency() {
    for device in Device::ALL {
        for bio_pages in [1, 2, 8, 32, 256] {
            for reader_page_ns in [0, 500, 3000] {
                let exp = Experiment {
                    file_bytes: 2 << 20,
                    reader_page_ns,
                    ..small(bio_pages)
                };
                let fwd = completion::run(&exp, device, Submission).unwrap();
                let rev = completion::run(&exp, device, Reverse).unwrap();
                let what = format!("{device:?}, {bio_pages} pages, reader {reader_page_ns} ns");
                first_page_is_sooner(&exp, &fwd, &rev).unwrap_or_else(|e| panic!("{what}: {e}"));
                if bio_pages >= 2 {
                    assert!(
                        first_page_is_sooner(&exp, &rev, &fwd).is_err(),
                        "{what}: swapped orders not caught"
                    );
                    assert!(rev.first_page_ns > fwd.first_page_ns, "{what}");
                }
            }
        }
    }
}

/// A bio larger than a cache level, with a reader that keeps pace with the
/// completions (the default): in reverse order the reader misses at that
/// level on every page beyond what the level holds; in submission order it
/// trails the checksum pass and misses nothing. Asserted on both orders, so
/// swapping them fails.
#[test]
fn reverse_order_costs_reader_misses_for_a_bio_larger_than_the_cache() {
    // 128 pages = 512 KiB: larger than the L1 (8 pages) and L2 (64 pages),
    // smaller than the L3.
    let exp = small(128);
    let lines_per_page = 4096 / LINE;
    let bios = exp.pages() / 128;
    for device in Device::ALL {
        let fwd = completion::run(&exp, device, Submission).unwrap();
        let rev = completion::run(&exp, device, Reverse).unwrap();
        assert_eq!(fwd.reader_misses, vec![0, 0, 0], "{device:?} submission");
        let expected: Vec<u64> = [8u64, 64, 2048]
            .iter()
            .map(|&held| bios * 128u64.saturating_sub(held) * lines_per_page)
            .collect();
        assert_eq!(rev.reader_misses, expected, "{device:?} reverse");
        reader_misses_less(&fwd, &rev).unwrap();
        assert!(reader_misses_less(&rev, &fwd).is_err());
        // The checksum pass misses every line at every level in both orders
        // (DMA invalidated them).
        let all_lines = exp.file_bytes / LINE;
        assert_eq!(fwd.csum_misses, vec![all_lines; 3]);
        assert_eq!(rev.csum_misses, vec![all_lines; 3]);
    }
}

/// The effect has a threshold: a bio that fits a level costs that level
/// nothing extra in reverse order (here 8 pages = 32 KiB fit even the L1).
#[test]
fn a_bio_that_fits_the_cache_costs_no_extra_misses() {
    let exp = small(8);
    let fwd = completion::run(&exp, Device::Ssd, Submission).unwrap();
    let rev = completion::run(&exp, Device::Ssd, Reverse).unwrap();
    assert_eq!(fwd.total_misses(), rev.total_misses());
    assert!(
        rev.first_page_ns > fwd.first_page_ns,
        "latency still differs"
    );
}

/// The limits of the advantage, as the module documentation states them. A
/// reader three times slower than the checksum pass falls behind it within a
/// bio and then reads the longest-ago checksummed pages first: submission
/// order misses *more* in the L1 than reverse. With the completion loop
/// running to its end before the reader (one CPU), submission order leaves
/// the reader LRU's worst case: every page of a bio larger than the L1
/// misses, against all but the first 8 in reverse order.
#[test]
fn the_advantage_needs_a_concurrent_reader_that_keeps_pace() {
    let exp = Experiment {
        reader_page_ns: 3000,
        ..small(32)
    };
    let fwd = completion::run(&exp, Device::Ssd, Submission).unwrap();
    let rev = completion::run(&exp, Device::Ssd, Reverse).unwrap();
    assert!(
        fwd.reader_misses[0] > rev.reader_misses[0],
        "{fwd:?} {rev:?}"
    );

    let exp = Experiment {
        same_cpu: true,
        ..small(32)
    };
    let fwd = completion::run(&exp, Device::Ssd, Submission).unwrap();
    let rev = completion::run(&exp, Device::Ssd, Reverse).unwrap();
    let per_page = 4096 / LINE;
    let bios = exp.pages() / 32;
    assert_eq!(fwd.reader_misses[0], bios * 32 * per_page);
    assert_eq!(rev.reader_misses[0], bios * 24 * per_page);
    // The page is still unlocked sooner in submission order, but the reader
    // gets it only when the whole bio is done, in both orders.
    assert!(fwd.first_page_ns < rev.first_page_ns);
    assert_eq!(fwd.first_read_ns, rev.first_read_ns);
}
