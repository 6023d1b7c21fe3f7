//! Helpers the single-shot benchmarks share: arguments, this process's
//! memory from /proc, and seeded file contents.
#![allow(dead_code)] // each benchmark uses some of them

pub fn arg(name: &str) -> Option<String> {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1).cloned())
}

pub fn flag(name: &str) -> bool {
    std::env::args().any(|a| a == name)
}

pub fn status(key: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with(key))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse::<u64>().ok())
        })
        .unwrap_or(0)
        * 1024
}

/// Seeded bytes, different for every file.
pub fn content(seed: u64, len: usize) -> Vec<u8> {
    nilfs_testkit::Xorshift::spread(seed).bytes(len)
}
