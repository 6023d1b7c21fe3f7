//! `nilref oracle …`: its subcommands and their dispatch. What they print
//! is `oracle`'s, which stays free of clap.

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
        /// linux-6.12, linux-6.14, linux-7, any) instead of the release its first line
        /// names.
        #[arg(long, value_parser = parse_variant)]
        variant: Option<nilfs_model::Variant>,
        /// The most model states tracked at once; a line that leaves more
        /// makes the verdict unknown (exit 3), never rejected. Default
        /// 1024, or NILFS_ORACLE_MAX_STATES.
        #[arg(long)]
        max_states: Option<usize>,
    },
    /// Shrink a rejected concurrent history: worker operations removed
    /// while it stays rejected at the same operation for the same reason
    /// (exit 0 with the smaller history, 1 if it is not rejected).
    ShrinkHistory {
        /// The history (from `nilref exec` of a concurrent workload).
        history: PathBuf,
        /// Where to write the shrunk history.
        #[arg(short = 'o')]
        out: PathBuf,
    },
}

/// `nilref oracle …`: the verdict's words and its exit status (0
/// accepted, 1 rejected, 3 unknown).
pub fn run(cmd: &Cmd) -> oracle::Judged {
    match cmd {
        Cmd::Check {
            trace,
            variant,
            max_states,
        } => {
            let mut opts = nilfs_model::Options {
                variant: *variant,
                ..nilfs_model::Options::default()
            };
            if let Some(m) = max_states {
                opts.max_states = *m;
            }
            oracle::judge(trace, opts)
        }
        Cmd::ShrinkHistory { history, out } => {
            let text = match std::fs::read_to_string(history) {
                Ok(t) => t,
                Err(e) => return oracle::Judged::Rejected(format!("{}: {e}", history.display())),
            };
            let opts = nilfs_model::Options::default();
            if nilfs_model::check_history(&text, opts).is_ok_and(|_| true) {
                return oracle::Judged::Rejected(format!(
                    "{}: linearizable: nothing to shrink",
                    history.display()
                ));
            }
            let small = crate::campaign::concurrent::shrink(&text, opts);
            if let Err(e) = std::fs::write(out, &small) {
                return oracle::Judged::Rejected(format!("{}: {e}", out.display()));
            }
            oracle::judge(out, opts).flip_rejection(&format!(
                "{}: {} lines, from {}",
                out.display(),
                small.lines().count(),
                text.lines().count()
            ))
        }
    }
}

fn parse_variant(s: &str) -> Result<nilfs_model::Variant, String> {
    nilfs_model::Variant::parse(s).ok_or_else(|| {
        format!("unknown variant `{s}` (linux-6.1, linux-6.12, linux-6.14, linux-7, any)")
    })
}
