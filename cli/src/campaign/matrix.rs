//! `nilref campaign matrix`: the same seeds on every pinned version of
//! each peer (tests/peers.toml), judged as the kernel and GRUB campaigns
//! judge one, and one table: versions × workloads passed × findings by
//! problem. Where two versions of a peer answered the same workload
//! differently, the matrix says so even when the model allows both: a
//! difference between releases is a fact a maintainer wants to see.
//!
//! Outputs, in `--out`: one folder per version (the campaign's own, with
//! its findings), `traces/<peer>-<version>/` (every workload's observed
//! trace, for the comparison), `matrix.md` (the table and the
//! differences, also printed) and `matrix.html` (the same, coloured, for
//! a person to read at a glance).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::Path;

use serde_json::Value;

use crate::campaign::common::args::{self, CampaignArgs, Options, RunArgs};
use crate::campaign::common::findings::Summary;
use crate::campaign::{grub, kernel};
use crate::peers::{Installed, Kind, Manifest};

/// `nilref campaign matrix` arguments: a campaign's, where `--kernel` and
/// `--grub` take comma-separated lists (default: every pinned version).
#[derive(clap::Args, Clone, Debug)]
pub struct MatrixArgs {
    #[command(flatten)]
    pub campaign: CampaignArgs,
    /// Run nothing: draw the report again from an earlier run's `--out`
    /// (its rows and kept traces).
    #[arg(long)]
    pub report_only: bool,
}

impl std::ops::Deref for MatrixArgs {
    type Target = RunArgs;
    fn deref(&self) -> &RunArgs {
        &self.campaign.run
    }
}

/// One version's run, as the report needs it (kept in `row-KIND-V.json`
/// so that `--report-only` can draw the report again).
#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    pub kind: Kind,
    pub version: String,
    pub workloads: usize,
    pub passed: usize,
    pub seconds: f64,
    /// Each failing workload's label and the name of its first problem.
    pub findings: Vec<(String, String)>,
}

impl Row {
    fn of(kind: Kind, version: String, s: &Summary) -> Row {
        Row {
            kind,
            version,
            workloads: s.workloads,
            passed: s.passed,
            seconds: s.seconds,
            findings: s
                .findings
                .iter()
                .map(|f| (f.workload.label.clone(), finding_id(f)))
                .collect(),
        }
    }

    fn to_json(&self) -> String {
        serde_json::json!({
            "kind": self.kind.name(),
            "version": self.version,
            "workloads": self.workloads,
            "passed": self.passed,
            "seconds": self.seconds,
            "findings": self.findings,
        })
        .to_string()
    }

    fn from_json(text: &str) -> Result<Row, String> {
        let v: Value = serde_json::from_str(text).map_err(|e| e.to_string())?;
        let field = |k: &str| v.get(k).ok_or_else(|| format!("row: no {k}"));
        Ok(Row {
            kind: Kind::parse(field("kind")?.as_str().unwrap_or_default())?,
            version: field("version")?.as_str().unwrap_or_default().to_string(),
            workloads: field("workloads")?.as_u64().unwrap_or(0) as usize,
            passed: field("passed")?.as_u64().unwrap_or(0) as usize,
            seconds: field("seconds")?.as_f64().unwrap_or(0.0),
            findings: serde_json::from_value(field("findings")?.clone())
                .map_err(|e| e.to_string())?,
        })
    }
}

/// Two versions of one peer that answered one line of one workload
/// differently.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Difference {
    pub kind: Kind,
    pub workload: String,
    pub line: usize,
    pub op: String,
    /// Version → its answer (normalized: no times).
    pub answers: BTreeMap<String, String>,
}

pub fn run(a: &MatrixArgs) -> Result<String, String> {
    let manifest = Manifest::pinned();
    let pick = |kind: Kind, list: &Option<String>| -> Result<Vec<String>, String> {
        match list {
            None => Ok(manifest
                .of(kind)
                .iter()
                .map(|p| p.version.clone())
                .collect()),
            Some(l) => l
                .split(',')
                .map(|v| {
                    manifest
                        .find(kind, Some(v.trim()))
                        .map(|p| p.version.clone())
                })
                .collect(),
        }
    };
    let mut rows = Vec::new();
    if a.report_only {
        return report(a, earlier_rows(&a.out)?);
    }
    for (kind, versions) in [
        (Kind::Kernel, pick(Kind::Kernel, &a.campaign.kernel)?),
        (Kind::Grub, pick(Kind::Grub, &a.campaign.grub)?),
    ] {
        for v in versions {
            // Fail early, before any boot, when a version is not fetched.
            Installed::get(kind, Some(&v))?;
            let traces = a.out.join("traces").join(format!("{}-{v}", kind.name()));
            let _ = std::fs::remove_dir_all(&traces);
            std::fs::create_dir_all(&traces).map_err(|e| format!("{}: {e}", traces.display()))?;
            let ca = args::CampaignArgs {
                run: RunArgs {
                    out: a.out.join(format!("{}-{v}", kind.name())),
                    ..a.campaign.run.clone()
                },
                kernel: (kind == Kind::Kernel).then(|| v.clone()),
                grub: (kind == Kind::Grub).then(|| v.clone()),
            };
            eprintln!("== {} {v}", kind.name());
            let summary = match kind {
                Kind::Kernel => {
                    let w = args::workloads(&ca, nilfs_workload::gen::Features::DEVICE)?;
                    kernel::campaign(&Options {
                        traces: Some(traces),
                        ..Options::of(&ca, w, 12)
                    })?
                }
                _ => {
                    let w = args::workloads(&ca, grub::features())?;
                    grub::campaign(&Options {
                        traces: Some(traces),
                        ..Options::of(&ca, w, 1)
                    })?
                }
            };
            let row = Row::of(kind, v, &summary);
            let p = a
                .out
                .join(format!("row-{}-{}.json", kind.name(), row.version));
            std::fs::write(&p, row.to_json()).map_err(|e| format!("{}: {e}", p.display()))?;
            rows.push(row);
        }
    }
    report(a, rows)
}

/// The rows an earlier run left in `out`, kernels first, in version order.
fn earlier_rows(out: &Path) -> Result<Vec<Row>, String> {
    let mut rows = Vec::new();
    for e in std::fs::read_dir(out).map_err(|e| format!("{}: {e}", out.display()))? {
        let p = e.map_err(|e| e.to_string())?.path();
        let name = p
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .into_owned();
        if name.starts_with("row-") && name.ends_with(".json") {
            let text = std::fs::read_to_string(&p).map_err(|e| e.to_string())?;
            rows.push(Row::from_json(&text).map_err(|e| format!("{name}: {e}"))?);
        }
    }
    let m = Manifest::pinned();
    let order = |r: &Row| {
        let pos = m.of(r.kind).iter().position(|p| p.version == r.version);
        (r.kind, pos.unwrap_or(usize::MAX), r.version.clone())
    };
    rows.sort_by_key(order);
    if rows.is_empty() {
        return Err(format!("{}: no rows of an earlier run", out.display()));
    }
    Ok(rows)
}

/// Compares the kept traces, writes matrix.md and matrix.html, and
/// returns the Markdown (an error when any version had findings).
fn report(a: &MatrixArgs, rows: Vec<Row>) -> Result<String, String> {
    let diffs = differences(&a.out.join("traces"), &rows)?;
    let md = markdown(&rows, &diffs);
    let write = |name: &str, text: &str| {
        let p = a.out.join(name);
        std::fs::write(&p, text).map_err(|e| format!("{}: {e}", p.display()))
    };
    write("matrix.md", &md)?;
    write("matrix.html", &html(&rows, &diffs))?;
    let failing = rows.iter().any(|r| !r.findings.is_empty());
    let text = format!(
        "{md}\nreport: {} and matrix.html\n",
        a.out.join("matrix.md").display()
    );
    if failing {
        Err(text)
    } else {
        Ok(text)
    }
}

/// A finding's name in the matrix: its first problem's class and key.
fn finding_id(f: &crate::campaign::common::findings::Finding) -> String {
    f.problems
        .first()
        .map(|p| {
            if p.key.is_empty() {
                p.class.to_string()
            } else {
                format!("{}: {}", p.class, p.key)
            }
        })
        .unwrap_or_else(|| "unknown".into())
}

/// One trace line's answer with what legitimately varies between runs
/// removed: the times themselves (the runs happen at different moments),
/// kept as the one relation the kernel's clock cannot blur: whether a stat
/// shows mtime equal to ctime (both set by one `current_time()`, or not).
pub fn normalized(line: &Value) -> String {
    fn is_time(k: &str) -> bool {
        k.ends_with("time") || k.ends_with("time_ns") || matches!(k, "t0" | "t1" | "clock")
    }
    fn strip(v: &Value) -> Value {
        match v {
            Value::Object(m) => {
                let mut out: serde_json::Map<String, Value> = m
                    .iter()
                    .filter(|(k, _)| !is_time(k))
                    .map(|(k, v)| (k.clone(), strip(v)))
                    .collect();
                if let (Some(mt), Some(ct)) = (m.get("mtime"), m.get("ctime")) {
                    out.insert("mtime=ctime".into(), Value::Bool(mt == ct));
                }
                Value::Object(out)
            }
            Value::Array(a) => Value::Array(a.iter().map(strip).collect()),
            other => other.clone(),
        }
    }
    strip(line.get("out").unwrap_or(&Value::Null)).to_string()
}

/// Every line where the versions of one peer answered one workload
/// differently. Workloads a version did not finish (a runner failure) are
/// compared as far as they go.
pub fn differences(traces: &Path, rows: &[Row]) -> Result<Vec<Difference>, String> {
    let mut out = Vec::new();
    for kind in [Kind::Kernel, Kind::Grub] {
        let versions: Vec<&str> = rows
            .iter()
            .filter(|r| r.kind == kind)
            .map(|r| r.version.as_str())
            .collect();
        if versions.len() < 2 {
            continue;
        }
        let mut per: BTreeMap<String, BTreeMap<&str, Vec<Value>>> = BTreeMap::new();
        for v in &versions {
            let dir = traces.join(format!("{}-{v}", kind.name()));
            let Ok(rd) = std::fs::read_dir(&dir) else {
                continue;
            };
            for e in rd.flatten() {
                let name = e.file_name().to_string_lossy().into_owned();
                let Some(label) = name.strip_suffix(".jsonl") else {
                    continue;
                };
                let text = std::fs::read_to_string(e.path()).map_err(|e| e.to_string())?;
                // The runner's `clock` lines say when time moved, which
                // differs from run to run: operations are compared, k-th
                // with k-th.
                let lines = text
                    .lines()
                    .filter_map(|l| serde_json::from_str::<Value>(l).ok())
                    .filter(|v| v.get("op").and_then(Value::as_str) != Some("clock"))
                    .collect();
                per.entry(label.to_string()).or_default().insert(v, lines);
            }
        }
        for (label, by_version) in per {
            // GRUB's listings are compared entry by entry, by path (a
            // release that lists more entries shifts every line after).
            let listing = by_version
                .values()
                .flatten()
                .any(|l| l.get("op").and_then(Value::as_str) == Some("grub-ls"));
            let keyed: BTreeMap<&str, BTreeMap<String, (String, String)>> = by_version
                .iter()
                .map(|(v, lines)| {
                    let entries = lines
                        .iter()
                        .enumerate()
                        .map(|(i, l)| {
                            let op = l.get("op").and_then(Value::as_str).unwrap_or("?");
                            let key = match l.get("out").and_then(Value::as_str) {
                                Some(entry) if listing => {
                                    entry.rsplit("  ").next().unwrap_or(entry).to_string()
                                }
                                _ => format!("{:08}", i + 1),
                            };
                            (key, (op.to_string(), normalized(l)))
                        })
                        .collect();
                    (*v, entries)
                })
                .collect();
            // Operations are compared as far as every version got; listing
            // entries wherever any version has one ("-": not listed).
            let n = by_version.values().map(Vec::len).min().unwrap_or(0);
            let keys: BTreeSet<&String> = keyed
                .values()
                .flat_map(|m| m.keys())
                .filter(|k| listing || k.parse::<usize>().is_ok_and(|i| i <= n))
                .collect();
            for key in keys {
                let answers: BTreeMap<String, String> = keyed
                    .iter()
                    .map(|(v, m)| {
                        (
                            v.to_string(),
                            m.get(key).map_or("-".into(), |e| e.1.clone()),
                        )
                    })
                    .collect();
                let distinct: BTreeSet<&String> = answers.values().collect();
                if distinct.len() > 1 {
                    let op = keyed
                        .values()
                        .find_map(|m| m.get(key).map(|e| e.0.clone()))
                        .unwrap_or_default();
                    out.push(Difference {
                        kind,
                        workload: label.clone(),
                        line: if listing { 0 } else { key.parse().unwrap_or(0) },
                        op: if listing { format!("{op} {key}") } else { op },
                        answers,
                    });
                }
            }
        }
    }
    Ok(out)
}

fn finding_columns(rows: &[Row]) -> Vec<String> {
    let mut ids: BTreeSet<String> = BTreeSet::new();
    for r in rows {
        for (_, id) in &r.findings {
            ids.insert(id.clone());
        }
    }
    ids.into_iter().collect()
}

fn counts(r: &Row) -> BTreeMap<String, usize> {
    let mut c = BTreeMap::new();
    for (_, id) in &r.findings {
        *c.entry(id.clone()).or_default() += 1;
    }
    c
}

/// A table of the report, before it is drawn: a heading row, and rows of
/// cells with the class that colours them on the page.
struct Table {
    head: Vec<String>,
    rows: Vec<(&'static str, Vec<String>)>,
}

/// The report's tables: the versions, which versions show each finding,
/// and the lines where versions differ; and the sentence said when no
/// line differs.
fn tables(rows: &[Row], diffs: &[Difference]) -> (Vec<Table>, Option<&'static str>) {
    let cols = finding_columns(rows);
    let mut head: Vec<String> = [
        "peer",
        "version",
        "workloads",
        "passed",
        "failing",
        "time (s)",
    ]
    .map(String::from)
    .to_vec();
    head.extend(cols.iter().cloned());
    let versions = Table {
        head,
        rows: rows
            .iter()
            .map(|r| {
                let c = counts(r);
                let mut cells = vec![
                    r.kind.name().to_string(),
                    r.version.clone(),
                    r.workloads.to_string(),
                    r.passed.to_string(),
                    r.findings.len().to_string(),
                    format!("{:.0}", r.seconds),
                ];
                cells.extend(
                    cols.iter()
                        .map(|col| c.get(col).copied().unwrap_or(0).to_string()),
                );
                (if r.findings.is_empty() { "ok" } else { "bad" }, cells)
            })
            .collect(),
    };
    let shown_by = Table {
        head: vec!["finding".into(), "shown by".into()],
        rows: cols
            .iter()
            .map(|col| {
                let by: Vec<String> = rows
                    .iter()
                    .filter(|r| counts(r).contains_key(col))
                    .map(|r| {
                        let labels: Vec<&str> = r
                            .findings
                            .iter()
                            .filter(|(_, id)| id == col)
                            .map(|(l, _)| l.as_str())
                            .collect();
                        format!("{} {} ({})", r.kind.name(), r.version, labels.join(", "))
                    })
                    .collect();
                ("bad", vec![col.clone(), by.join(", ")])
            })
            .collect(),
    };
    let differing = Table {
        head: ["peer", "workload", "operation", "op", "answers"]
            .map(String::from)
            .to_vec(),
        rows: diffs
            .iter()
            .map(|d| {
                let answers: Vec<String> =
                    d.answers.iter().map(|(v, a)| format!("{v}: {a}")).collect();
                (
                    "diff",
                    vec![
                        d.kind.name().to_string(),
                        d.workload.clone(),
                        d.line.to_string(),
                        d.op.clone(),
                        answers.join("; "),
                    ],
                )
            })
            .collect(),
    };
    let none = diffs
        .is_empty()
        .then_some("No two versions of a peer answered any workload differently.");
    let mut all = vec![versions];
    if !cols.is_empty() {
        all.push(shown_by);
    }
    if !diffs.is_empty() {
        all.push(differing);
    }
    (all, none)
}

/// The report as Markdown.
pub fn markdown(rows: &[Row], diffs: &[Difference]) -> String {
    let (tables, none) = tables(rows, diffs);
    let mut t = String::new();
    for table in &tables {
        let _ = writeln!(t, "| {} |", table.head.join(" | "));
        let _ = writeln!(t, "|{}", "---|".repeat(table.head.len()));
        for (_, cells) in &table.rows {
            let _ = writeln!(t, "| {} |", cells.join(" | "));
        }
        t.push('\n');
    }
    if let Some(none) = none {
        let _ = writeln!(t, "{none}");
    }
    t
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// The same report as a page: green where every workload passed, red where
/// a version has findings, amber for lines where versions differ.
pub fn html(rows: &[Row], diffs: &[Difference]) -> String {
    let (tables, none) = tables(rows, diffs);
    let mut h = String::from(
        "<!doctype html><meta charset=\"utf-8\"><title>nilfs-ref version matrix</title>\n\
         <style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse;margin-bottom:1.5em}\
         td,th{border:1px solid #999;padding:.3em .6em;text-align:left;vertical-align:top}\
         .ok{background:#cfc}.bad{background:#fbb}.diff{background:#fe9}</style>\n\
         <h1>nilfs-ref: every pinned version, the same seeds</h1>\n",
    );
    for table in &tables {
        h.push_str("<table>\n<tr>");
        for c in &table.head {
            let _ = write!(h, "<th>{}</th>", esc(c));
        }
        h.push_str("</tr>\n");
        for (class, cells) in &table.rows {
            let _ = write!(h, "<tr class={class}>");
            for c in cells {
                let _ = write!(h, "<td>{}</td>", esc(c));
            }
            h.push_str("</tr>\n");
        }
        h.push_str("</table>\n");
    }
    if let Some(none) = none {
        let _ = writeln!(h, "<p class=ok>{none}</p>");
    }
    h
}

#[cfg(test)]
mod tests {
    //! The comparison proves it can fail: two versions whose traces differ
    //! in one answer are reported at that line, and times alone are not a
    //! difference.

    use super::*;

    #[test]
    fn differing_answers_are_reported_and_times_are_not() {
        let dir = std::env::temp_dir().join(format!("nilref-matrix-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let put = |v: &str, text: &str| {
            let d = dir.join(format!("kernel-{v}"));
            std::fs::create_dir_all(&d).unwrap();
            std::fs::write(d.join("seed-1.jsonl"), text).unwrap();
        };
        // A clock line in one run only does not shift the comparison.
        // Line 2: other times, the same relation: no difference. Line 3:
        // another answer. Line 4: mtime kept by one version, set by the
        // other (a directory renamed within its parent, 6.1 against 7.x).
        put(
            "6.1",
            "{\"op\":\"mkdir\",\"out\":\"ok\"}\n{\"op\":\"stat\",\"out\":{\"stat\":{\"size\":1024,\"mtime\":5,\"ctime\":5}}}\n{\"op\":\"rename\",\"out\":\"ok\"}\n{\"op\":\"stat\",\"out\":{\"stat\":{\"mtime\":7,\"ctime\":7}}}\n",
        );
        put(
            "7.3",
            "{\"op\":\"mkdir\",\"out\":\"ok\"}\n{\"op\":\"clock\",\"ns\":5}\n{\"op\":\"stat\",\"out\":{\"stat\":{\"size\":1024,\"mtime\":9,\"ctime\":9}}}\n{\"op\":\"rename\",\"out\":{\"err\":\"EXDEV\"}}\n{\"op\":\"stat\",\"out\":{\"stat\":{\"mtime\":9,\"ctime\":11}}}\n",
        );
        let rows = ["6.1", "7.3"].map(|v| Row {
            kind: Kind::Kernel,
            version: v.into(),
            workloads: 1,
            passed: 1,
            seconds: 1.0,
            findings: Vec::new(),
        });
        assert_eq!(Row::from_json(&rows[0].to_json()).unwrap(), rows[0]);
        let d = differences(&dir, &rows).unwrap();
        assert_eq!(d.len(), 2, "{d:?}");
        assert_eq!((d[0].line, d[0].op.as_str()), (3, "rename"));
        assert_eq!((d[1].line, d[1].op.as_str()), (4, "stat"));
        assert!(
            markdown(&rows, &d).contains("| kernel | seed-1 | 3 | rename |"),
            "{}",
            markdown(&rows, &d)
        );
        assert!(html(&rows, &d).contains("class=diff"));

        // GRUB listings are compared by path: one more entry in one
        // release is one difference, not a shift of every line after it.
        let put_grub = |v: &str, entries: &[&str]| {
            let d = dir.join(format!("grub-{v}"));
            std::fs::create_dir_all(&d).unwrap();
            let text: String = entries
                .iter()
                .map(|e| serde_json::json!({"op": "grub-ls", "out": e}).to_string() + "\n")
                .collect();
            std::fs::write(d.join("seed-2.jsonl"), text).unwrap();
        };
        put_grub("2.06", &["DIR  -  /d/", "e3b0  0  /f"]);
        put_grub("2.12", &["DIR  -  /d/", "SPECIAL  -  /d/s", "e3b0  0  /f"]);
        let rows = ["2.06", "2.12"].map(|v| Row {
            kind: Kind::Grub,
            version: v.into(),
            workloads: 1,
            passed: 1,
            seconds: 1.0,
            findings: Vec::new(),
        });
        let d = differences(&dir, &rows).unwrap();
        assert_eq!(d.len(), 1, "{d:?}");
        assert_eq!(d[0].op, "grub-ls /d/s");
        assert_eq!(d[0].answers["2.06"], "-");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
