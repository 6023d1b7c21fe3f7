#!/usr/bin/env bash
# scripts/bench-fuse-readers.sh — parallel reads through `nilref mount`
# (issue 36, item 5): one reader against four, each reading the same
# file of SIZE MiB at random 128 KiB offsets for SECONDS, through a
# `direct_io` mount so that every read reaches nilfs-ref (no page cache).
# The image lies in a tmpfs. Prints one table row per reader count, and
# the ratio of four readers to one. BIN is the nilref binary to measure
# (default: this tree's release build), so two builds can be compared in
# alternating runs.
#
# Usage: scripts/bench-fuse-readers.sh [SIZE_MIB=256] [SECONDS=10] [BIN]
# Needs fio and fusermount3 (Debian: fio, fuse3) and the right to mount
# FUSE and tmpfs.
set -euo pipefail
cd "$(dirname "$0")/.."
size=${1:-256} secs=${2:-10}
. scripts/fuse-bench-mount.sh
bench_bin "${3:-}"
bench_mount $((size * 2 + 512)) $((size * 2 + 256)) -o direct_io
# The file, written and made durable first: the readers read clean data.
fio --name=fill --filename="$work/mnt/f" --rw=write --bs=1M --size=${size}M \
  --end_fsync=1 --output-format=terse >/dev/null
sync -f "$work/mnt/f"
row() { # JOBS
  fio --name="read$1" --filename="$work/mnt/f" --rw=randread --bs=128k \
    --size=${size}M --numjobs="$1" --group_reporting --time_based \
    --runtime="$secs" --output-format=terse --terse-version=3 \
    | awk -F';' -v j="$1" '{ printf "%s %.1f\n", j, $7/1024 }'
}
one=$(row 1) four=$(row 4)
echo "| readers | read bandwidth |"
echo "|---|---|"
echo "$one" | awk '{ printf "| %s | %s MiB/s |\n", $1, $2 }'
echo "$four" | awk '{ printf "| %s | %s MiB/s |\n", $1, $2 }'
echo "$one $four" | awk '{ printf "four readers / one: %.2f\n", $4 / $2 }'
