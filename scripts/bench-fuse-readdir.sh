#!/usr/bin/env bash
# scripts/bench-fuse-readdir.sh — listing a large directory through
# `nilref mount` (issue 36, item 5): NFILES empty files are made in one
# directory and synced, then `ls -f` lists it RUNS times; prints the time
# of the listings. The kernel asks for a directory in batches of entries
# (readdir with an offset), so a mount that reads the whole directory for
# every batch lists it in time quadratic in its size. The image lies in a
# tmpfs. BIN is the nilref binary to measure (default: this tree's
# release build), so two builds can be compared in alternating runs.
#
# Usage: scripts/bench-fuse-readdir.sh [NFILES=30000] [RUNS=5] [BIN]
# Needs fusermount3 (Debian: fuse3) and the right to mount FUSE and tmpfs.
set -euo pipefail
cd "$(dirname "$0")/.."
nfiles=${1:-30000} runs=${2:-5}
. scripts/fuse-bench-mount.sh
bench_bin "${3:-}"
bench_mount 512 256
mkdir "$work/mnt/d"
(cd "$work/mnt/d" && seq "$nfiles" | xargs touch)
sync -f "$work/mnt/d"
start=$(date +%s%N)
for _ in $(seq "$runs"); do
  n=$(ls -f "$work/mnt/d" | wc -l)
  [ "$n" -eq $((nfiles + 2)) ] || { echo "listed $n names, not $((nfiles + 2))" >&2; exit 1; }
done
end=$(date +%s%N)
echo "$nfiles entries, $runs listings: $(( (end - start) / 1000000 )) ms"
