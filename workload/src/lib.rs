//! nilfs-workload: the tooling around the model, not the model.
//!
//! A workload is what a runner is given: operations of the model's trace
//! format before anybody has run them, with checkpoints named by
//! reference. This crate owns
//!
//! - the workload format ([`parse`], [`to_value`], [`Resolver`]: the
//!   checkpoint references and how a runner resolves them; `format`);
//! - [`gen`]: the seeded workload generator every runner shares (it runs
//!   the model along to pick operations that mean something);
//! - [`front`]: the generator's front ends (proptest, quickcheck and
//!   arbitrary), each only a source of its choices;
//! - [`shrink`]: delta debugging of a failing workload;
//! - [`concurrent`]: workloads of several workers made to collide.
//!
//! It depends on nilfs-model (the operations, and the model's predictions
//! the generator follows); the model does not depend on it.

pub mod concurrent;
mod format;
pub mod front;
pub mod gen;
pub mod shrink;

pub use format::{parse, to_value, Resolver, Unresolved};
