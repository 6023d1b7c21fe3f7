//! Simulations behind the seeds' benchmarks (`nilref sim ...`): models that
//! run on the simulated device's clock, never on the wall clock.

pub mod cache_model;
pub mod completion;
pub mod gc_freeze;
pub mod gc_latency;
pub mod readahead;
pub mod streams;
