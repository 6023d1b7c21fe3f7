//! Shrinking a failing workload: delta debugging (Zeller's ddmin) over its
//! lines, re-running the implementation under test on each candidate.
//!
//! A candidate keeps the first two lines (`mkfs`, `mount`) and a subset of
//! the rest, in order. Removing a `mkcp` line renumbers the `{"$mkcp": k}`
//! references after it, so they still name the same checkpoint; a
//! reference to a removed `mkcp` stays unresolvable and its line is not run.
//! Candidates are judged in batches (one guest boot judges a dozen), so the
//! predicate takes a slice of candidates and answers for each.

use serde_json::Value;

/// The workload with only the lines whose `keep` is true (the first two
/// are always kept), `$mkcp` references renumbered.
pub fn select(lines: &[Value], keep: &[bool]) -> Vec<Value> {
    let mut out = Vec::new();
    // New index of each kept mkcp, by old index.
    let mut mkcp_map: Vec<Option<u64>> = Vec::new();
    let mut kept_mkcps = 0u64;
    for (i, l) in lines.iter().enumerate() {
        let is_mkcp = l.get("op").and_then(Value::as_str) == Some("mkcp");
        let kept = i < 2 || keep.get(i).copied().unwrap_or(true);
        if is_mkcp {
            mkcp_map.push(kept.then_some(kept_mkcps));
            if kept {
                kept_mkcps += 1;
            }
        }
        if kept {
            let mut l = l.clone();
            renumber(&mut l, &mkcp_map);
            out.push(l);
        }
    }
    out
}

fn renumber(v: &mut Value, map: &[Option<u64>]) {
    match v {
        Value::Object(o) => {
            if o.len() == 1 {
                if let Some(k) = o.get("$mkcp").and_then(Value::as_u64) {
                    // A reference to a removed (or later) mkcp points past
                    // every one that exists: it stays unresolvable.
                    let new = map
                        .get(k as usize)
                        .copied()
                        .flatten()
                        .unwrap_or(u64::MAX / 2);
                    o.insert("$mkcp".into(), Value::from(new));
                    return;
                }
            }
            for (_, x) in o.iter_mut() {
                renumber(x, map);
            }
        }
        Value::Array(a) => a.iter_mut().for_each(|x| renumber(x, map)),
        _ => {}
    }
}

/// ddmin: a subset of the body lines for which `fails` still holds, and
/// 1-minimal (no single line can go) unless the budget ran out first.
/// `fails(candidates)` answers for each candidate; `budget` bounds the
/// number of candidates judged.
pub fn ddmin(
    lines: &[Value],
    mut fails: impl FnMut(&[Vec<Value>]) -> Vec<bool>,
    mut budget: usize,
) -> Vec<Value> {
    let body: Vec<usize> = (2..lines.len()).collect();
    let mut current = body;
    let mut n = 2usize;
    let build = |idx: &[usize]| {
        let mut keep = vec![false; lines.len()];
        for &i in idx {
            keep[i] = true;
        }
        select(lines, &keep)
    };
    while current.len() >= 2 && budget > 0 {
        let chunk = current.len().div_ceil(n);
        let parts: Vec<Vec<usize>> = current.chunks(chunk).map(|c| c.to_vec()).collect();
        let complements: Vec<Vec<usize>> = (0..parts.len())
            .map(|k| {
                parts
                    .iter()
                    .enumerate()
                    .filter(|(j, _)| *j != k)
                    .flat_map(|(_, p)| p.iter().copied())
                    .collect()
            })
            .collect();
        let mut tried: Vec<Vec<usize>> = parts.clone();
        if parts.len() > 2 {
            tried.extend(complements.iter().cloned());
        }
        tried.truncate(budget);
        budget -= tried.len();
        let candidates: Vec<Vec<Value>> = tried.iter().map(|t| build(t)).collect();
        let verdicts = fails(&candidates);
        if let Some(k) = verdicts.iter().position(|f| *f) {
            let chosen = tried[k].clone();
            let was_part = k < parts.len();
            current = chosen;
            n = if was_part { 2 } else { (n - 1).max(2) };
            continue;
        }
        if n >= current.len() {
            break;
        }
        n = (n * 2).min(current.len());
    }
    build(&current)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn workload(n: usize) -> Vec<Value> {
        let mut v = vec![json!({"op":"mkfs"}), json!({"op":"mount"})];
        for i in 0..n {
            v.push(json!({"op":"create","path":format!("/f{i}")}));
        }
        v
    }

    fn has(c: &[Value], path: &str) -> bool {
        c.iter().any(|l| l["path"] == path)
    }

    #[test]
    fn ddmin_finds_the_two_lines_that_matter() {
        let w = workload(40);
        let mut judged = 0;
        let min = ddmin(
            &w,
            |cands| {
                judged += cands.len();
                cands
                    .iter()
                    .map(|c| has(c, "/f7") && has(c, "/f31"))
                    .collect()
            },
            1000,
        );
        assert_eq!(min.len(), 4, "{min:?}");
        assert!(has(&min, "/f7") && has(&min, "/f31"));
        assert!(judged < 200, "{judged} candidates judged");
    }

    #[test]
    fn removing_a_mkcp_renumbers_later_references() {
        let w = vec![
            json!({"op":"mkfs"}),
            json!({"op":"mount"}),
            json!({"op":"mkcp"}),
            json!({"op":"mkcp","snapshot":true}),
            json!({"op":"chcp","cno":{"$mkcp":1},"snapshot":false}),
            json!({"op":"chcp","cno":{"$mkcp":0},"snapshot":true}),
        ];
        let s = select(&w, &[true, true, false, true, true, true]);
        assert_eq!(s[3]["cno"], json!({"$mkcp": 0}));
        assert_eq!(s[4]["cno"]["$mkcp"].as_u64().unwrap(), u64::MAX / 2);
    }
}
