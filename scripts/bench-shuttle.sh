#!/usr/bin/env bash
# scripts/bench-shuttle.sh — schedules per second of the shuttle explorations
# in proofs/ (issue 15), as scripts/test.sh builds them (`--cfg shuttle`,
# release, target-shuttle/).
#
# Each passing exploration runs a fixed number of schedules: shuttle's
# Runner stops when its scheduler has given out `max_iterations` of them
# (no time limit is set), so the count is the sum of the budgets the test
# passes to `PctScheduler::new_from_seed(_, _, N)` and
# `RandomScheduler::new_from_seed(_, N)` (the table below, from
# proofs/tests/*_shuttle.rs). Each test runs alone (its own process, one
# test thread); schedules/s = schedules / wall time of that process. The
# canaries (a known-bad variant shuttle must catch) stop at the first
# failing schedule, so they have no known count: their time to catch is
# printed instead. Each time is given as wall time and as CPU time (user +
# system). The baseline, in the same run: the same binaries
# started with a filter that runs no test (process start-up and test
# harness, which every figure includes).
#
# Usage: scripts/bench-shuttle.sh [--no-canaries] [FILTER]
#   FILTER        run only the tests whose name contains it
#   --no-canaries skip the known-bad variants
set -euo pipefail
cd "$(dirname "$0")/.."

canaries=1 filter=
while [ $# -gt 0 ]; do
  case $1 in
    --no-canaries) canaries=0; shift ;;
    -h|--help) sed -n '2,22p' "$0"; exit 0 ;;
    *) filter=$1; shift ;;
  esac
done

# binary  test  schedules (0: a canary, stops at the first failure)  budget
tests=(
  "buffer_shuttle lock_trylock_wait_evict_kernel_rules 43000 PCT 3000 + random 8x5000"
  "buffer_shuttle read_vs_readahead_vs_evict_kernel_rules 43000 PCT 3000 + random 8x5000"
  "buffer_shuttle lookup_contig_vs_lookup_vs_evict_kernel_check 43000 PCT 3000 + random 8x5000"
  "buffer_shuttle lock_trylock_wait_evict_catches_lost_wakeup 0 canary"
  "buffer_shuttle lock_trylock_wait_evict_catches_evicting_referenced 0 canary"
  "buffer_shuttle read_vs_readahead_vs_evict_catches_lost_wakeup 0 canary"
  "buffer_shuttle read_vs_readahead_vs_evict_catches_evicting_referenced 0 canary"
  "buffer_shuttle lookup_contig_vs_lookup_catches_unchecked_readahead 0 canary"
  "fs_shuttle writes_during_a_construction_are_never_lost 1500 PCT 300 + random 4x300"
  "fs_shuttle an_open_window_in_the_construction_loses_a_write 0 canary"
  "gc_flag_shuttle two_requests_never_both_inside 901 image 1 + PCT 300 + random 3x200"
  "gc_flag_shuttle cleaner_vs_writer_read_before_lock 901 image 1 + PCT 300 + random 3x200"
  "gc_flag_shuttle resources_freed_on_every_path 1802 2 x (image 1 + PCT 300 + random 3x200)"
  "gc_flag_shuttle two_requests_first_version_both_inside 0 canary"
  "gc_flag_shuttle cleaner_vs_writer_read_under_lock_makes_the_writer_wait 0 canary"
  "gc_flag_shuttle resources_first_version_leaks_on_ebusy 0 canary"
  "gc_shuttle the_cleaner_and_a_writer_never_lose_data 800 PCT 200 + random 3x200"
  "gc_shuttle an_open_window_in_the_gc_construction_loses_a_write 0 canary"
)

echo "== building the shuttle tests (RUSTFLAGS=\"--cfg shuttle\", release, target-shuttle/)" >&2
json=$(RUSTFLAGS="--cfg shuttle" cargo test -p nilfs-proofs --release --target-dir target-shuttle \
  --tests --no-run --message-format=json)
declare -A exe
for b in buffer_shuttle fs_shuttle gc_flag_shuttle gc_shuttle; do
  exe[$b]=$(printf '%s\n' "$json" | grep "\"name\":\"$b\"" | grep -o '"executable":"[^"]*"' \
    | cut -d'"' -f4 | tail -n1)
  [ -x "${exe[$b]}" ] || { echo "no test binary for $b" >&2; exit 1; }
done

now() { date +%s.%N; }
# Runs test $2 of binary $1 alone; prints its wall time and CPU time
# (user + system) in seconds. shuttle runs every task of a schedule on one
# thread, so the CPU time is that of one core: on a loaded machine the
# per-CPU-second rate is the steadier figure.
timed() {
  local out times rc=0
  out=$(mktemp) times=$(mktemp)
  local TIMEFORMAT='%3R %3U %3S'
  { time "${exe[$1]}" --exact "$2" --test-threads=1 -q >"$out" 2>&1 || rc=$?; } 2>"$times"
  if [ "$rc" != 0 ] || ! grep -q ' 1 passed' "$out"; then
    cat "$out" >&2
    echo "FAILED or not run: $1 $2" >&2
    exit 1
  fi
  read -r real user sys <"$times"
  rm -f "$out" "$times"
  echo "$real $(echo "$user + $sys" | bc -l)"
}

echo "shuttle explorations, $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo "| binary | test | schedules | budget | wall time | CPU time | schedules/s (wall) | per CPU second |"
echo "| --- | --- | ---: | --- | ---: | ---: | ---: | ---: |"
t_all0=$(now)
total_sched=0 total_time=0 total_cpu=0
for row in "${tests[@]}"; do
  read -r bin name n budget <<<"$row"
  if [ -n "$filter" ] && [[ $name != *"$filter"* ]]; then continue; fi
  if [ "$n" = 0 ] && [ "$canaries" = 0 ]; then continue; fi
  read -r t c < <(timed "$bin" "$name")
  if [ "$n" = 0 ]; then
    printf '| %s | %s | (canary: caught) | %s | %.2f s | %.2f s | - | - |\n' "$bin" "$name" "$budget" "$t" "$c"
  else
    printf '| %s | %s | %d | %s | %.2f s | %.2f s | %.0f | %.0f |\n' "$bin" "$name" "$n" "$budget" "$t" "$c" \
      "$(echo "$n / $t" | bc -l)" "$(echo "$n / $c" | bc -l)"
    total_sched=$((total_sched + n))
    total_time=$(echo "$total_time + $t" | bc -l)
    total_cpu=$(echo "$total_cpu + $c" | bc -l)
  fi
done
if [ "$total_sched" -gt 0 ]; then
  printf '| all | the passing explorations above | %d | | %.2f s | %.2f s | %.0f | %.0f |\n' "$total_sched" \
    "$total_time" "$total_cpu" "$(echo "$total_sched / $total_time" | bc -l)" \
    "$(echo "$total_sched / $total_cpu" | bc -l)"
fi
# Baseline: each binary started with a filter that matches no test.
for b in buffer_shuttle fs_shuttle gc_flag_shuttle gc_shuttle; do
  t0=$(now)
  "${exe[$b]}" --exact no-such-test -q >/dev/null 2>&1
  t1=$(now)
  printf '| %s | baseline: start-up, no test run | 0 | | %.3f s | | - | - |\n' "$b" "$(echo "$t1 - $t0" | bc -l)"
done
echo
printf 'wall time %.1f s; load average at the end: %s\n' "$(echo "$(now) - $t_all0" | bc -l)" \
  "$(cut -d' ' -f1-3 /proc/loadavg)"
