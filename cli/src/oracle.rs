//! `nilref oracle check TRACE`: runs a JSON Lines trace from any NILFS2
//! implementation through the model (nilfs-model) and says whether the model
//! allows it. On the first divergence the message names the line, the
//! operation, the outcomes the model allows there and the observed one.

use std::path::Path;

/// The text `nilref oracle check TRACE` prints: `Ok` for an accepted trace,
/// `Err` with the divergence report for a rejected one.
pub fn check(path: &Path) -> Result<String, String> {
    check_as(path, None)
}

/// [`check`] against `variant` (a Linux release's behaviour where releases
/// differ), or against the one the trace's first line names when `None`.
pub fn check_as(path: &Path, variant: Option<nilfs_model::Variant>) -> Result<String, String> {
    let verdict = match variant {
        None => nilfs_model::check_trace(path),
        Some(v) => std::fs::read_to_string(path)
            .map_err(|e| nilfs_model::Rejection {
                line: 0,
                op: String::new(),
                allowed: vec!["a readable trace".into()],
                observed: e.to_string(),
                states: vec![],
            })
            .and_then(|text| nilfs_model::check_trace_as(&text, v)),
    };
    match verdict {
        Ok(v) => Ok(format!(
            "{}: accepted: {} lines, {} model state(s) consistent with it at the end\n",
            path.display(),
            v.lines,
            v.states
        )),
        Err(r) => Err(format!("{}: {r}", path.display())),
    }
}
