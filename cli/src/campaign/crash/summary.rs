//! The end of a crash campaign: its figures as a table and as JSON
//! (`summary.json`), with the findings table every campaign shares.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::campaign::common::findings::findings_table;
use crate::campaign::common::Finding;

/// The end of a crash campaign.
#[derive(Default)]
pub struct CrashSummary {
    pub target: String,
    pub workloads: usize,
    pub passed: usize,
    pub points: usize,
    pub states: usize,
    pub torn: usize,
    pub reordered: usize,
    pub failing_states: usize,
    pub failing_by_kind: [usize; 3],
    /// Per problem: failing states, and workloads showing it.
    pub by_problem: BTreeMap<String, (usize, usize)>,
    pub block_writes: usize,
    pub kernel_states: usize,
    pub findings: Vec<Finding>,
    pub boots: usize,
    pub seconds: f64,
    pub judge_seconds: f64,
    /// blkid releases that probed every state, and the states probed.
    pub blkid: Vec<String>,
    pub blkid_probes: usize,
}

impl CrashSummary {
    /// The figures, for scripts and the peer tier's test.
    pub fn to_json(&self) -> Value {
        let per_min = |n: usize, s: f64| if s > 0.0 { n as f64 * 60.0 / s } else { 0.0 };
        serde_json::json!({
            "target": self.target,
            "workloads": self.workloads,
            "passed": self.passed,
            "block_writes": self.block_writes,
            "states": self.states,
            "torn": self.torn,
            "reordered": self.reordered,
            "points": self.points,
            "failing_states": self.failing_states,
            "failing_prefix_torn_reordered": self.failing_by_kind,
            "kernel_states": self.kernel_states,
            "blkid": self.blkid,
            "blkid_probes": self.blkid_probes,
            "boots": self.boots,
            "seconds": self.seconds,
            "states_per_minute": per_min(self.states, self.seconds),
            "states_per_minute_judging": per_min(self.states, self.judge_seconds),
            "problems": self.by_problem.iter().map(|(k, (states, workloads))| {
                (k.clone(), serde_json::json!({"states": states, "workloads": workloads}))
            }).collect::<serde_json::Map<String, Value>>(),
            "findings": self.findings.iter().map(|f| f.folder.display().to_string()).collect::<Vec<_>>(),
        })
    }

    pub fn table(&self) -> String {
        let per_min = |n: usize, s: f64| if s > 0.0 { n as f64 * 60.0 / s } else { 0.0 };
        let mut t = format!(
            "| campaign | workloads | passed | block writes logged | crash states judged | of them torn / reordered | (state, mark) points | failing states (prefix / torn / reordered) | recovered by the kernel too | boots | time | states/min | states/min judging alone |\n\
             |---|---|---|---|---|---|---|---|---|---|---|---|---|\n\
             | crash, {} | {} | {} | {} | {} | {} / {} | {} | {} ({} / {} / {}) | {} | {} | {:.0} s | {:.0} | {:.0} |\n",
            self.target,
            self.workloads,
            self.passed,
            self.block_writes,
            self.states,
            self.torn,
            self.reordered,
            self.points,
            self.failing_states,
            self.failing_by_kind[0],
            self.failing_by_kind[1],
            self.failing_by_kind[2],
            self.kernel_states,
            self.boots,
            self.seconds,
            per_min(self.states, self.seconds),
            per_min(self.states, self.judge_seconds),
        );
        if !self.blkid.is_empty() {
            for v in &self.blkid {
                let differ = self
                    .by_problem
                    .get(&format!("blkid: {v}"))
                    .map_or(0, |p| p.0);
                t.push_str(&format!(
                    "\nblkid {v}: {} crash states probed, {differ} named otherwise than the super block copy Linux mounts\n",
                    self.blkid_probes
                ));
            }
        }
        if !self.by_problem.is_empty() {
            t.push_str("\n| problem | failing states | workloads |\n|---|---|---|\n");
            for (name, (states, workloads)) in &self.by_problem {
                t.push_str(&format!("| {name} | {states} | {workloads} |\n"));
            }
        }
        t.push_str(&findings_table(&self.findings, |f| {
            format!("nilref campaign crash --replay {}", f.folder.display())
        }));
        t
    }
}
