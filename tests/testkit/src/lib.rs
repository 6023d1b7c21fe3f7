//! nilfs-testkit: the helpers the tests of every crate share, kept once.
//!
//! - [`pattern`]: the seeded xorshift bytes and words the tests write and
//!   shuffle with, and the sha256 the manifests print;
//! - [`fixture`]: where the kernel-written fixture lives (tests/fixtures);
//! - [`image`] (feature `impl`): a fresh mkfs image, the fixture as a
//!   device, the `nilref check` every image of a test goes through;
//! - [`crash_workload`] (feature `impl`): impl/tests/crash.rs's workload,
//!   which the throughput benchmark times.
//!
//! A dev-dependency only: nothing here is part of the project's
//! behaviour, and it depends on no other test crate (nilfs-impl's own
//! tests use it, so it must not depend on the model or the harness).

#[cfg(feature = "impl")]
pub mod crash_workload;
pub mod fixture;
#[cfg(feature = "impl")]
pub mod image;
pub mod pattern;

pub use pattern::{pattern, sha256_hex, Xorshift};
