#!/usr/bin/env bash
# scripts/fuzz.sh — the fuzzing campaign (issue 13): each cargo-fuzz target
# runs from its committed corpus for --runs executions (default 10,000,000)
# or --time seconds, whichever ends first; crashes land in
# fuzz/artifacts/TARGET/; then, with --minimize, the corpus found is merged
# back into fuzz/corpus/TARGET keeping only inputs that add coverage
# (`cargo fuzz cmin`). One line of figures per target goes to stdout and is
# appended to fuzz/stats/TARGET.txt with the date and the commit fuzzed:
# that file is the target's history, and its executions add up.
#
# Usage: scripts/fuzz.sh [--runs N] [--time S] [--minimize] [--keep-going] [--jobs J] [TARGET...]
#   default targets: every fuzz/fuzz_targets/*.rs
#   --keep-going: libFuzzer's fork mode, which goes on past a crash and
#   collects every one found (artifacts/TARGET/) instead of stopping.
#   --jobs J: fork mode with J processes at once (one per core); implies
#   --keep-going.
# Needs cargo-fuzz (installed if missing). It builds with the stable
# toolchain and no sanitizer (`-s none`): the code under test is safe Rust,
# so what the fuzzer hunts is panics, hangs (-timeout) and allocations past
# -rss_limit_mb, not memory errors; with a nightly toolchain, set
# FUZZ_TOOLCHAIN=nightly FUZZ_SANITIZER=address to add ASan.
# Replay one input: cargo fuzz run TARGET FILE (or plain `cargo test`, which
# replays every committed corpus file through tests/tests/fuzz_corpus.rs).
#
# Two settings keep the two structure-aware targets fast enough for their
# ten million executions (measured in docs/TESTING.md, "Fuzzing"):
# - Entropic's per-input feature frequencies are kept up to 16 hits
#   (-entropic_feature_frequency_threshold, libFuzzer's default 255): an
#   execution of these targets reaches some 50,000 features, and keeping a
#   sorted list of each input's frequencies took more time than the target.
#   The power schedule stays on.
# - lockstep is built without comparison tracing (--no-trace-compares): its
#   input is read by `arbitrary` as the generator's choices, ranges and
#   indices where no magic value waits to be guessed, and the tracing of
#   every compare in the model and the write path was a quarter of its time.
#   Every other target keeps it (image_mutate's values meet the decoders'
#   checks).
set -euo pipefail
cd "$(dirname "$0")/../fuzz"

runs=10000000 time=0 minimize=0 fork=() jobs=1 targets=()
while [ $# -gt 0 ]; do
  case $1 in
    --runs) runs=$2; shift 2 ;;
    --time) time=$2; shift 2 ;;
    --minimize) minimize=1; shift ;;
    --keep-going) fork=(-ignore_crashes=1 -ignore_ooms=1 -ignore_timeouts=1); shift ;;
    --jobs) jobs=$2; fork=(-ignore_crashes=1 -ignore_ooms=1 -ignore_timeouts=1); shift 2 ;;
    -*) sed -n '2,22p' "$0" >&2; exit 2 ;;
    *) targets+=("$1"); shift ;;
  esac
done
[ ${#fork[@]} -eq 0 ] || fork=(-fork="$jobs" "${fork[@]}")
if [ ${#targets[@]} -eq 0 ]; then
  for f in fuzz_targets/*.rs; do targets+=("$(basename "$f" .rs)"); done
fi
command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz --locked
tc=${FUZZ_TOOLCHAIN:-stable} san=${FUZZ_SANITIZER:-none}
mkdir -p stats
for t in "${targets[@]}"; do
  # -a: debug assertions and overflow checks on, as in `cargo test`.
  build=(-O -a -s "$san")
  [ "$t" != lockstep ] || build+=(--no-trace-compares)
  cargo "+$tc" fuzz build "${build[@]}" "$t"
  # The commit fuzzed (with "+changes" when the code differs from it).
  rev=$(git rev-parse --short HEAD)
  git diff --quiet HEAD -- .. ':!corpus' ':!stats' ':!artifacts' || rev="$rev+changes"
  work=$(mktemp -d)
  cp corpus/"$t"/* "$work"/
  log=stats/$t.log
  start=$SECONDS
  set +e
  cargo "+$tc" fuzz run "${build[@]}" "$t" "$work" -- \
    -runs="$runs" -max_total_time="$time" -timeout=30 -rss_limit_mb=3072 \
    -entropic_feature_frequency_threshold=16 -print_final_stats=1 "${fork[@]}" >"$log" 2>&1
  rc=$?
  set -e
  secs=$((SECONDS - start))
  if [ ${#fork[@]} -gt 0 ]; then
    # Fork mode: the parent's own final stats count none of its jobs'
    # executions; the last "#N: cov ..." line has the total.
    execs=$(sed -n 's/^#\([0-9]*\): cov.*/\1/p' "$log" | tail -1)
  else
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  fi
  rate=
  [ ${#fork[@]} -gt 0 ] || rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
  [ -n "$rate" ] || rate=$(( ${execs:-0} / (secs > 0 ? secs : 1) ))
  crashes=$(find artifacts/"$t" -type f 2>/dev/null | wc -l)
  if [ "$minimize" = 1 ]; then
    # Named inputs (seed-*, regress-* with their postmortems in
    # tests/tests/fuzz_corpus.rs) stay; the rest is replaced by the
    # minimized set.
    cargo "+$tc" fuzz cmin "${build[@]}" "$t" "$work" >>"$log" 2>&1
    find corpus/"$t" -type f ! -name 'seed-*' ! -name 'regress-*' -delete
    for f in "$work"/*; do
      cp "$f" corpus/"$t"/
    done
  fi
  kept=$(find corpus/"$t" -type f | wc -l)
  line="$t: ${execs:-0} executions in ${secs} s (${rate:-0} exec/s), exit $rc, corpus $kept files, artifacts $crashes"
  echo "$(date -u +%F) $rev $line" | tee -a stats/"$t".txt
  rm -rf "$work"
done
