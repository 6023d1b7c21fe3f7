#!/usr/bin/env bash
# scripts/bench-fuse-stats.sh — stats and lookups through `nilref mount`
# while a writer works (issue 36, item 5): 1,000 files are made and
# synced, then one process stats them by path in a loop (a lookup of the
# name and a getattr each, the mount's TTL being 0) for SECONDS, alone,
# then beside a writer (fio: 1 MiB sequential writes with an fsync every
# 16 MiB, so constructions hold the mount's lock; 40 MiB/s over and over
# a 64 MiB file, which the image holds without a cleaner). Prints the stats per
# second and the latency's median, 99th percentile and maximum for each.
# The image lies in a tmpfs. BIN is the nilref binary to measure
# (default: this tree's release build), so two builds can be compared in
# alternating runs.
#
# With WHAT=missing, the names stat'ed are 1,000 that do not exist
# (a lookup that finds nothing, ENOENT each time).
#
# Usage: scripts/bench-fuse-stats.sh [SECONDS=10] [BIN] [WHAT=files|missing]
# Needs fio, python3 and fusermount3 (Debian: fio, python3, fuse3) and
# the right to mount FUSE and tmpfs.
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-10}
what=${3:-files}
case $what in files) stem=f ;; missing) stem=m ;; *) echo "WHAT is files or missing" >&2; exit 2 ;; esac
. scripts/fuse-bench-mount.sh
bench_bin "${2:-}"
bench_mount 1536 1280
mkdir "$work/mnt/d"
for i in $(seq 1000); do printf 'x' >"$work/mnt/d/f$i"; done
sync -f "$work/mnt/d"
stats() { # LABEL
  python3 - "$work/mnt/d" "$secs" "$1" "$stem" <<'EOF'
import os, sys, time
d, secs, label, stem = sys.argv[1], float(sys.argv[2]), sys.argv[3], sys.argv[4]
paths = [os.path.join(d, f"{stem}{i}") for i in range(1, 1001)]
lat, end, k = [], time.monotonic() + secs, 0
while time.monotonic() < end:
    t = time.perf_counter_ns()
    try:
        os.stat(paths[k % 1000])
    except FileNotFoundError:
        pass
    lat.append(time.perf_counter_ns() - t)
    k += 1
lat.sort()
q = lambda p: lat[min(len(lat) - 1, int(len(lat) * p))] / 1000
print(f"| {label} | {len(lat) / secs:,.0f} | {q(0.5):,.0f} µs | {q(0.99):,.0f} µs | {lat[-1] / 1000:,.0f} µs |")
EOF
}
echo "| stats of $what | per second | median | 99th percentile | max |"
echo "|---|---|---|---|---|"
bench_beside_a_writer "$secs" stats
