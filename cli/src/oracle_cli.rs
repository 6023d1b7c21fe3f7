//! `nilref oracle …`: its subcommands and their dispatch. What they print
//! is `oracle`'s, which stays free of clap: model/tests compiles
//! oracle.rs on its own as the test of that text.

use std::path::PathBuf;

use clap::Subcommand;

use crate::oracle;

#[derive(Subcommand)]
pub enum Cmd {
    /// Check a JSON Lines trace from any NILFS2 implementation against the model.
    Check {
        /// The trace file.
        trace: PathBuf,
    },
}

/// `nilref oracle …`.
pub fn run(cmd: Cmd) -> Result<String, String> {
    match cmd {
        Cmd::Check { trace } => oracle::check(&trace),
    }
}
