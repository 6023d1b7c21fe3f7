#!/usr/bin/env bash
# scripts/bench-fuse.sh — throughput of `nilref mount` (FUSE, release
# build) beside two baselines measured in the same run with the same fio
# jobs: tmpfs, and bindfs over a second tmpfs (a passthrough FUSE file
# system: what FUSE itself costs, with no file system of ours behind it).
# The jobs: sequential write and read of SIZE (1 MiB blocks, fsync at the
# end), random 4 KiB writes, and small-file creation (NFILES files of
# 4 KiB). Needs fio, fusermount3 and bindfs (Debian: fio, fuse3, bindfs)
# and the right to mount FUSE and tmpfs. Prints one table row per file
# system and job.
#
# Usage: scripts/bench-fuse.sh [SIZE_MIB=256] [NFILES=2000]
set -euo pipefail
cd "$(dirname "$0")/.."
size=${1:-256} nfiles=${2:-2000}
cargo build -q --release -p nilref
bin=$PWD/target/release/nilref
work=$(mktemp -d)
fs_mib=$((size * 4 + 512)) # each file system's size, for every job's files
# The daemon is stopped before its tmpfs is unmounted; if it never
# mounted, fusermount3 fails and it is killed instead, so `wait` returns.
trap 'fusermount3 -u "$work/nilfs" 2>/dev/null || kill "${daemon:-}" 2>/dev/null; wait; umount "$work/bindfs" "$work/backing" "$work/tmpfs" "$work/imgfs" 2>/dev/null || true; rm -rf "$work"' EXIT
mkdir -p "$work/nilfs" "$work/tmpfs" "$work/backing" "$work/bindfs" "$work/imgfs"
# The image lies in a tmpfs too, as bindfs's backing does: both FUSE file
# systems then write into memory, and neither pays for the host's disk.
mount -t tmpfs -o size=$((fs_mib + 512))m tmpfs "$work/imgfs"
"$bin" mkfs --size "${fs_mib}M" "$work/imgfs/img" >/dev/null
"$bin" mount "$work/imgfs/img" "$work/nilfs" &
daemon=$!
mount -t tmpfs -o size="${fs_mib}m" tmpfs "$work/tmpfs"
mount -t tmpfs -o size="${fs_mib}m" tmpfs "$work/backing"
# big_writes: libfuse 2's writes of up to 128 KiB, as FUSE 3 (and our
# mount) have by default; without it bindfs writes 4 KiB at a time.
bindfs -o big_writes "$work/backing" "$work/bindfs"
for _ in $(seq 100); do mountpoint -q "$work/nilfs" && break; sleep 0.1; done
job() { # NAME DIR fio-args...
  local name=$1 dir=$2; shift 2
  fio --name="$name" --directory="$dir" --output-format=terse --terse-version=3 "$@" \
    | awk -F';' -v n="$name" -v d="$(basename "$dir")" \
        '{ printf "| %s | %s | %.1f MiB/s | %.0f IOPS |\n", d, n, ($7+$48)/1024, $8+$49 }'
}
echo "| file system | job | bandwidth | operations/s |"
echo "|---|---|---|---|"
for d in "$work/tmpfs" "$work/bindfs" "$work/nilfs"; do
  job seq-write "$d" --rw=write --bs=1M --size=${size}M --end_fsync=1
  job seq-read "$d" --rw=read --bs=1M --size=${size}M
  job rand-write-4k "$d" --rw=randwrite --bs=4k --size=$((size / 4))M --end_fsync=1
  job small-files "$d" --rw=write --bs=4k --filesize=4k --nrfiles="$nfiles" --openfiles=1 --size=$((nfiles * 4))k --create_on_open=1
done
