//! `nilref oracle check TRACE`: runs a JSON Lines trace from any NILFS2
//! implementation through the model (nilfs-model) and says whether the model
//! allows it. On the first divergence the message names the line, the
//! operation, the outcomes the model allows there and the observed one.

use std::path::Path;

/// The text `nilref oracle check TRACE` prints: `Ok` for an accepted trace,
/// `Err` with the divergence report for a rejected one.
pub fn check(path: &Path) -> Result<String, String> {
    match nilfs_model::check_trace(path) {
        Ok(v) => Ok(format!(
            "{}: accepted: {} lines, {} model state(s) consistent with it at the end\n",
            path.display(),
            v.lines,
            v.states
        )),
        Err(r) => Err(format!("{}: {r}", path.display())),
    }
}
