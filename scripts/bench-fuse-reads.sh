#!/usr/bin/env bash
# scripts/bench-fuse-reads.sh — reads of clean data through `nilref mount`
# while a writer works (issue 36, item 5): a 64 MiB file is written and
# synced, read once whole, then one process reads 64 KiB at random
# offsets of it in a loop for SECONDS, alone, then beside a writer (fio:
# 1 MiB sequential writes to another file with an fsync every 16 MiB, so
# constructions hold the mount's lock; 40 MiB/s over and over a 64 MiB
# file). The mount is `-o direct_io`, so every read reaches nilfs-ref and
# none is answered from the page cache. Prints the reads per second and
# the latency's median, 99th and 99.9th percentiles and maximum for
# each. The image lies in a tmpfs. BIN is the nilref binary to measure
# (default: this tree's release build), so two builds can be compared in
# alternating runs.
#
# Usage: scripts/bench-fuse-reads.sh [SECONDS=10] [BIN]
# Needs fio, python3 and fusermount3 (Debian: fio, python3, fuse3) and
# the right to mount FUSE and tmpfs.
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-10}
. scripts/fuse-bench-mount.sh
bench_bin "${2:-}"
bench_mount 1536 1280 -o direct_io
head -c 64M /dev/urandom >"$work/mnt/data"
sync -f "$work/mnt/data"
cat "$work/mnt/data" >/dev/null
reads() { # LABEL
  python3 - "$work/mnt/data" "$secs" "$1" <<'EOF'
import os, random, sys, time
path, secs, label = sys.argv[1], float(sys.argv[2]), sys.argv[3]
fd = os.open(path, os.O_RDONLY)
rng = random.Random(1)
lat, end = [], time.monotonic() + secs
while time.monotonic() < end:
    off = rng.randrange(1024) << 16
    t = time.perf_counter_ns()
    assert len(os.pread(fd, 1 << 16, off)) == 1 << 16
    lat.append(time.perf_counter_ns() - t)
lat.sort()
q = lambda p: lat[min(len(lat) - 1, int(len(lat) * p))] / 1000
print(f"| {label} | {len(lat) / secs:,.0f} | {q(0.5):,.0f} µs | {q(0.99):,.0f} µs | {q(0.999):,.0f} µs | {lat[-1] / 1000:,.0f} µs |")
EOF
}
echo "| 64 KiB reads | per second | median | 99th percentile | 99.9th | max |"
echo "|---|---|---|---|---|---|"
bench_beside_a_writer "$secs" reads
