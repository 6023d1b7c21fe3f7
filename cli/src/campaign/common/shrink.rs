//! The shrink loop every campaign uses: ddmin over a failing workload's
//! lines (`nilfs_workload::shrink`), each candidate judged again, until a
//! minimal workload still fails the same way.

use crate::campaign::common::problem::Problem;
use crate::campaign::common::workload::Workload;

/// Whether `problems` show `target` again: the same class and key.
pub fn same_problem(problems: &[Problem], target: &Problem) -> bool {
    problems
        .iter()
        .any(|p| p.class == target.class && p.key == target.key)
}

/// ddmin with candidates judged one by one (`fails`: the candidate still
/// fails the same way), at most `budget` judgements.
pub fn shrink_each(
    w: &Workload,
    budget: usize,
    mut fails: impl FnMut(&Workload) -> bool,
) -> Workload {
    let lines = nilfs_workload::shrink::ddmin(
        &w.lines,
        |cands| {
            cands
                .iter()
                .map(|c| fails(&w.with_lines(c.clone())))
                .collect()
        },
        budget,
    );
    w.with_lines(lines)
}

/// ddmin with candidates judged `batch` at a time (one guest boot per
/// batch): `judge` says, per candidate, whether it still fails the same
/// way. A batch that cannot be judged counts as passing, and its error
/// is the result once the search ends.
pub fn shrink_batched(
    w: &Workload,
    batch: usize,
    budget: usize,
    mut judge: impl FnMut(&[Workload]) -> Result<Vec<bool>, String>,
) -> Result<Workload, String> {
    let mut error = None;
    let lines = nilfs_workload::shrink::ddmin(
        &w.lines,
        |cands| {
            let mut out = Vec::new();
            for chunk in cands.chunks(batch) {
                let batch: Vec<Workload> = chunk.iter().map(|c| w.with_lines(c.clone())).collect();
                match judge(&batch) {
                    Ok(v) => out.extend(v),
                    Err(e) => {
                        error = Some(e);
                        out.extend(chunk.iter().map(|_| false));
                    }
                }
            }
            out
        },
        budget,
    );
    match error {
        Some(e) => Err(e),
        None => Ok(w.with_lines(lines)),
    }
}
