#![no_main]
//! Fuzz target: see nilfs_conformance::fuzz::lockstep.
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| nilfs_conformance::fuzz::lockstep(data));
