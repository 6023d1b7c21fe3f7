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
        /// Judge it as this Linux release's behaviour (linux-6.1,
        /// linux-6.12, linux-7, any) instead of the release its first line
        /// names.
        #[arg(long, value_parser = parse_variant)]
        variant: Option<nilfs_model::Variant>,
    },
}

/// `nilref oracle …`.
pub fn run(cmd: Cmd) -> Result<String, String> {
    match cmd {
        Cmd::Check {
            trace,
            variant: None,
        } => oracle::check(&trace),
        Cmd::Check { trace, variant } => oracle::check_as(&trace, variant),
    }
}

fn parse_variant(s: &str) -> Result<nilfs_model::Variant, String> {
    nilfs_model::Variant::parse(s)
        .ok_or_else(|| format!("unknown variant `{s}` (linux-6.1, linux-6.12, linux-7, any)"))
}
