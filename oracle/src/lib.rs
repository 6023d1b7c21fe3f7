//! nilfs-oracle: the NILFS2 conformance oracle in any implementation's
//! `cargo test`.
//!
//! An implementation of NILFS2 — a port in Rust, a wrapper around a C
//! library, a FUSE mount, a kernel driven from a test — implements
//! [`Sut`] (one run: apply an operation, show the durable state) and
//! [`Implementation`] (make a fresh run on a formatted image), and gets:
//!
//! - [`lockstep`]: a generated workload runs on the model and on the
//!   implementation at once; every outcome must be one the model allows,
//!   and after every sync, checkpoint and mount the durable state must be
//!   the model's. The result is the first divergence; [`check`] adds
//!   [`minimize`], delta debugging down to a minimal workload. A harness
//!   that could not observe the implementation (a runner that died, an
//!   image it could not open) says so through [`Sut::undecided`], and the
//!   run is [`Stop::Undecided`]: the oracle could not decide, which is
//!   never reported as a divergence ([`Stop::Diverged`]).
//! - [`proptest()`]: many generated workloads from a fixed seed, each
//!   failure shrunk and kept in a regression file in proptest's format,
//!   which the user commits ([`Config::regressions`]); [`replay`] runs a
//!   minimal workload as a regression test of its own.
//! - quickcheck: [`Drawn`] is `quickcheck::Arbitrary` (with shrinking), so
//!   a function of a `Drawn` that runs [`lockstep`] is a quickcheck
//!   property (discard an undecided run: `TestResult::discard()`); arbitrary: [`Drawn`] is
//!   `arbitrary::Arbitrary`, so a fuzz target turns libFuzzer's bytes into
//!   a workload. All three front ends draw the choices of the one
//!   generator (`nilfs_workload::gen`): the same choices, the same
//!   workload.
//! - [`check_crashes`]: the crash envelope over a device that records its
//!   writes ([`WriteLog`]): every power cut between two writes, judged by
//!   the model.
//!
//! # Why a crate of its own
//!
//! The harness that tests nilfs-ref (`nilfs-conformance`, tests/) depends
//! on nilfs-ref itself, on its peers (nilfs-tools, GRUB, a kernel guest)
//! and on its fixtures. This crate depends on the model and the workload
//! generator only, so an implementation outside this repository pulls in
//! nothing of ours but the specification and the harness; nilfs-ref plugs
//! in from outside like any other (`nilfs-adapter`'s `Ours`), through the
//! same two traits, with no special case.
//!
//! # Example
//!
//! An implementation that is the model itself (each operation takes the
//! outcome the model predicts) passes; with a planted bug — every second
//! write dropped, though reported as written — the oracle finds the
//! divergence and shrinks the workload to the lines that matter.
//!
//! ```
//! use nilfs_model::{step, Errno, FileType, Geometry, Op, Outcome, State};
//! use nilfs_oracle::{
//!     check, model_durable, proptest, Config, Drawn, Durable, ImageSpec, Implementation, Sut,
//!     WriteLog, NS,
//! };
//! use nilfs_workload::gen::{Choices, Profile};
//!
//! /// One run: the model's state, and the planted bug if asked for.
//! struct ModelFs {
//!     state: State,
//!     drop_every_second_write: bool,
//!     writes: u64,
//! }
//!
//! impl Sut for ModelFs {
//!     fn apply(&mut self, op: &Op) -> Outcome {
//!         if let (true, Op::Write { data, .. }) = (self.drop_every_second_write, op) {
//!             self.writes += 1;
//!             if self.writes % 2 == 0 {
//!                 return Outcome::Written(data.len());
//!             }
//!         }
//!         let branches = step(&self.state, op);
//!         let predicted: Vec<(Outcome, State)> =
//!             branches.iter().filter_map(|b| b.predicted()).collect();
//!         let Some((out, next)) = predicted
//!             .iter()
//!             .find(|(o, _)| *o != Outcome::Err(Errno::ENOSPC))
//!             .or(predicted.first())
//!             .cloned()
//!         else {
//!             return Outcome::Err(Errno::EINVAL);
//!         };
//!         self.state = next;
//!         // The model leaves a directory's size free (a non-zero multiple
//!         // of the block size); this file system says one block.
//!         match out {
//!             Outcome::Stat(mut st) if st.file_type == FileType::Dir => {
//!                 st.size = st.size.max(u64::from(self.state.geometry.block_size));
//!                 Outcome::Stat(st)
//!             }
//!             out => out,
//!         }
//!     }
//!     fn durable(&mut self) -> Result<Durable, String> {
//!         Ok(model_durable(&self.state))
//!     }
//! }
//!
//! /// Makes a fresh run on a "formatted" image of the spec's geometry.
//! struct Model {
//!     buggy: bool,
//! }
//!
//! impl Implementation for Model {
//!     fn format(
//!         &mut self,
//!         spec: &ImageSpec,
//!         log: Option<&WriteLog>,
//!     ) -> Result<(Geometry, Box<dyn Sut + '_>), String> {
//!         if log.is_some() {
//!             return Err("no device to record".into());
//!         }
//!         let g = Geometry {
//!             block_size: spec.block_size as u32,
//!             blocks_per_segment: spec.blocks_per_segment as u32,
//!             nsegments: spec.device_bytes / (spec.block_size * spec.blocks_per_segment),
//!             r_segments_percentage: 5,
//!         };
//!         let state = State::mkfs(g.clone(), true, spec.ctime as i64 * NS);
//!         let sut = ModelFs { state, drop_every_second_write: self.buggy, writes: 0 };
//!         Ok((g, Box::new(sut)))
//!     }
//! }
//!
//! let cfg = Config { cases: 4, max_len: 20, ..Config::default() };
//! // The correct one passes (a failure would panic with its minimal workload).
//! proptest(&mut Model { buggy: false }, &cfg);
//!
//! // The buggy one: some generated data workload finds the bug.
//! let failure = (0..16)
//!     .find_map(|seed| {
//!         let drawn = Drawn { profile: Profile::Data, len: 20, choices: Choices::Seed(seed) };
//!         check(&mut Model { buggy: true }, &cfg, &drawn).err()
//!     })
//!     .expect("dropped writes are found");
//! // Shrunk: a few lines (the mkfs, a create, two writes, what reveals it).
//! assert!(failure.minimal.len() <= 8, "{failure}");
//! println!("{failure}");
//! ```

mod check;
mod crash;
mod lockstep;
mod pipe;
mod sut;

pub use check::{
    check, divergence_kind, lockstep, minimize, proptest, replay, run_lines, workload, Config,
    Failure,
};
pub use crash::{check_crashes, envelope, CrashFailure, CrashReport, WriteLog};
pub use lockstep::{
    model_durable, run, run_workload, Divergence, ModelManifests, OnInvalid, Step, Stop, Undecided,
};
pub use nilfs_workload::front::Drawn;
pub use pipe::{Answer, Pipe};
pub use sut::{Durable, ImageSpec, Implementation, Sut, NS};
