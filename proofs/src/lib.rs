//! nilfs-proofs: bounded-exhaustive checks and loom/shuttle explorations.
//! Every check here runs against the known-bad variant it exists to catch.
