//! The checker at scale: traces that fill the device and keep going, and
//! checkpoint numbers nobody observed, judged without reaching a bound.

use nilfs_model::{check_trace_str, follow_trace};

fn kernel_trace(name: &str) -> String {
    let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("traces/kernel-6.1")
        .join(name);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

// postmortem: the fill-the-device workload (1,200 writes of the same 50
// blocks, each followed by an fsync, on a 62 MiB device, no cleaner),
// run by Linux 6.1.176 in the guest: ENOSPC from line 330 on, 1,037
// refusals. Each refused write shares a clock tick with the stamps it may
// have set, so it may or may not have set them, and the states doubled
// at every tick: the checker gave up at line 352 with 1,524 states and
// called that a rejection. States that differ only in stamps now merge
// (model `merge`), and the trace is accepted.
#[test]
fn the_kernel_filling_the_device_and_going_on_is_judged() {
    let t = kernel_trace("fill-the-device.jsonl");
    let (v, states) = follow_trace(&t).unwrap_or_else(|r| panic!("{r}"));
    assert_eq!(v.lines, 2404);
    assert!(states.len() <= 4, "{} states at the end", states.len());
    // Known-bad: a refused write that still changed the file (a read
    // after it would show its bytes): the model must still say no.
    let lines: Vec<&str> = t.lines().collect();
    let k = lines
        .iter()
        .rposition(|l| l.contains("\"err\":\"ENOSPC\""))
        .expect("refusals");
    let mut bad: Vec<String> = lines.iter().map(|l| l.to_string()).collect();
    bad.insert(
        k + 1,
        format!(
            "{{\"op\":\"read\",\"path\":\"/f\",\"offset\":0,\"len\":8,\"out\":{{\"data\":{{\"len\":8,\"sha256\":\"{}\"}}}}}}",
            "0".repeat(64)
        ),
    );
    let r = check_trace_str(&(bad.join("\n") + "\n")).expect_err("bytes nobody wrote");
    assert_eq!(r.line, k + 2, "{r}");
    assert!(!r.is_unknown(), "{r}");
}

/// A trace of `n` write-and-fsync pairs (each a checkpoint whose number
/// nobody observes), then `mkcp -p` printing `printed`.
fn many_checkpoints(n: usize, printed: u64) -> String {
    let mut s = String::from(
        "{\"op\":\"mkfs\",\"block_size\":4096,\"blocks_per_segment\":512,\"nsegments\":64,\"r_segments_percentage\":5,\"dot_nilfs\":false,\"clock\":0,\"out\":\"ok\",\"t\":[0,0]}\n{\"op\":\"mount\",\"ro\":false,\"out\":\"ok\"}\n{\"op\":\"create\",\"path\":\"/f\",\"out\":\"ok\"}\n",
    );
    for i in 0..n {
        s.push_str(&format!(
            "{{\"op\":\"write\",\"path\":\"/f\",\"offset\":{},\"data\":{{\"text\":\"x\"}},\"out\":{{\"written\":1}}}}\n{{\"op\":\"fsync\",\"path\":\"/f\",\"out\":\"ok\"}}\n",
            i % 4096
        ));
    }
    s.push_str(&format!(
        "{{\"op\":\"mkcp\",\"snapshot\":false,\"print\":true,\"out\":{{\"cno\":{printed}}}}}\n"
    ));
    s
}

#[test]
fn checkpoint_numbers_going_back_are_caught_among_a_thousand_unobserved() {
    // mkfs's checkpoint 1, then 1,000 fsyncs each make one: with nothing
    // dirty, mkcp prints the latest, at least 1,001 (the timer may have
    // made more).
    check_trace_str(&many_checkpoints(1000, 1001)).unwrap_or_else(|r| panic!("{r}"));
    check_trace_str(&many_checkpoints(1000, 1500)).unwrap_or_else(|r| panic!("{r}"));
    // Known-bad: a number the thousand unobserved ones already passed.
    let r = check_trace_str(&many_checkpoints(1000, 1000)).expect_err("a cno that went back");
    assert!(!r.is_unknown(), "{r}");
    assert_eq!(r.line, 2004, "{r}");
}

/// Finding M3: a cleaner run copies the live blocks of the segments it
/// cleans (with a snapshot, everything the file holds), and the space
/// estimate counts them: a small write refused with ENOSPC is a
/// divergence before the run and allowed after it.
#[test]
fn the_cleaners_copies_count_against_the_space() {
    let trace = |clean: bool| {
        let mut s = String::from(
            "{\"op\":\"mkfs\",\"block_size\":4096,\"blocks_per_segment\":512,\"nsegments\":32,\"r_segments_percentage\":5,\"dot_nilfs\":false,\"clock\":0,\"out\":\"ok\",\"t\":[0,0]}\n{\"op\":\"mount\",\"ro\":false,\"out\":\"ok\"}\n{\"op\":\"create\",\"path\":\"/f\",\"out\":\"ok\"}\n{\"op\":\"write\",\"path\":\"/f\",\"offset\":0,\"data\":{\"zeros\":22528000},\"out\":{\"written\":22528000}}\n{\"op\":\"sync\",\"out\":\"ok\"}\n{\"op\":\"mkcp\",\"snapshot\":true,\"out\":\"ok\"}\n",
        );
        if clean {
            s.push_str("{\"op\":\"clean\",\"protection_s\":0,\"out\":\"ok\"}\n");
        }
        s.push_str("{\"op\":\"create\",\"path\":\"/g\",\"out\":\"ok\"}\n{\"op\":\"write\",\"path\":\"/g\",\"offset\":0,\"data\":{\"text\":\"x\"},\"out\":{\"err\":\"ENOSPC\"}}\n");
        s
    };
    let r = check_trace_str(&trace(false)).expect_err("room left, no cleaner run");
    assert_eq!(r.line, 8, "{r}");
    check_trace_str(&trace(true)).unwrap_or_else(|r| panic!("{r}"));
}
