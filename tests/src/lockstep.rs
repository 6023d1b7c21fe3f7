//! Lockstep: the implementation (`nilfs::fs::Fs`) against the model
//! (`nilfs_model`), operation by operation.
//!
//! The harness itself is the oracle's (`nilfs_oracle`: [`Sut`], [`run`],
//! [`run_workload`], [`Divergence`], the abstraction's model side
//! [`model_durable`]), the same any implementation is judged by; nilfs-ref
//! plugs into it through the adapter (`nilfs_adapter`: [`ImplUnderTest`],
//! [`Ours`]), re-exported here with the image helpers the tests share.
//!
//! The abstraction function ([`ImplUnderTest::durable`]) reads the device
//! through the *read path* (`Nilfs::open`, `CheckpointView`,
//! `inspect::manifest`), which shares nothing with the write path above the
//! on-disk format: the manifest of the latest checkpoint, and the manifest
//! of every checkpoint the cpfile lists. nilfs-ref makes a checkpoint only
//! when asked (it has no timer), so its checkpoint numbers must be exactly
//! the model's.

use nilfs_model::{Geometry, Op, State};
use nilfs_workload::gen::{generate, Features, GenConfig, Profile};

pub use nilfs_adapter::{
    format, map_errno, stat_info, Durable, ImplUnderTest, Ours, Sut, Unsupported, NS,
};
pub use nilfs_oracle::{
    model_durable, run, run_workload, Divergence, ImageSpec, ModelManifests, OnInvalid, Step, Stop,
};

/// A run of an implementation whose harness never fails to observe it
/// (nilfs-ref in this process: [`ImplUnderTest`] never answers
/// [`Sut::undecided`]): its steps, or its divergence. An undecided run
/// panics, saying why.
pub fn decided(r: Result<Vec<Step>, Stop>) -> Result<Vec<Step>, Divergence> {
    r.map_err(|stop| {
        stop.divergence()
            .unwrap_or_else(|u| panic!("an in-process run was undecided: {u}"))
    })
}

/// The model state right after [`format`] (not mounted).
pub fn model_after_format(g: Geometry, spec: &ImageSpec) -> State {
    State::mkfs(g, true, spec.ctime as i64 * NS)
}

/// One generated case of tests/tests/lockstep.rs (and of the throughput
/// benchmark): the image and the generator's parameters.
#[derive(Clone, Debug)]
pub struct Case {
    /// The image.
    pub spec: ImageSpec,
    /// The generator's seed.
    pub seed: u64,
    /// Its number of operations.
    pub len: usize,
    /// Its profile.
    pub profile: Profile,
}

impl Case {
    /// The workload for the image `format` made: the generator follows the
    /// model from the same geometry and clock; a remount ends it so that
    /// its last state is compared through the read path.
    pub fn workload(&self, g: &Geometry) -> Vec<serde_json::Value> {
        let mut cfg = GenConfig::new(self.seed, self.len, self.profile);
        cfg.geometry = g.clone();
        cfg.features = Features::ALL;
        cfg.clock = self.spec.ctime as i64 * NS;
        let mut lines = generate(&cfg).lines;
        lines.push(
            serde_json::to_value(Op::Mount {
                cp: None,
                ro: false,
            })
            .expect("serialises"),
        );
        lines
    }
}
