#!/usr/bin/env bash
# scripts/bench-readers.sh — nilfs-ref's readers against GRUB's nilfs2
# reader on the same large image, paired run by run (issue 15).
#
# The image: 4 KiB blocks, one file /big of SIZE_MIB MiB (seeded data,
# written in 1 MiB calls with a sync per 64 MiB) and NFILES files of
# 4 KiB in directories of 100, made by `nilref apply` from a generated
# trace. Then, RUNS times each, alternating the two commands of a pair:
#   cat:      `nilref cat IMG /big`       vs `grub-fstest IMG cat /big`
#   manifest: `nilref manifest IMG`       vs tests/guest/grub-check.sh IMG
#             (GRUB's manifest: ls of every directory, cat | sha256sum of
#             every file, one grub-fstest process per call)
#   crc:      `grub-fstest IMG crc /big`  (GRUB's in-process read and CRC),
#             beside `nilref cat IMG /big | cksum` for scale
# Output to /dev/null. Prints min/median/max seconds per command and the
# median of the per-run ratios GRUB/nilref (above 1: nilref is faster).
# Needs grub-fstest (Debian: grub-common).
#
# Usage: scripts/bench-readers.sh [SIZE_MIB=1024] [NFILES=1000] [RUNS=5]
set -euo pipefail
cd "$(dirname "$0")/.."
size=${1:-1024} nfiles=${2:-1000} runs=${3:-5}
command -v grub-fstest >/dev/null || {
  echo "bench-readers: needs grub-fstest (apt-get install grub-common)" >&2; exit 2; }
cargo build -q --release -p nilref
bin=$PWD/target/release/nilref
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
img=$work/img

# The trace: big file, then the small files, then a clean unmount.
nseg=$(( (size + nfiles * 4 / 1024 + 64) * 3 / 2 / 8 + 16 ))
{
  echo "{\"op\":\"mkfs\",\"block_size\":4096,\"blocks_per_segment\":2048,\"nsegments\":$nseg}"
  echo '{"op":"mount","ro":false}'
  echo '{"op":"create","path":"/big"}'
  for ((i = 0; i < size; i++)); do
    echo "{\"op\":\"write\",\"path\":\"/big\",\"offset\":$((i << 20)),\"data\":{\"seeded\":{\"seed\":$((i + 1)),\"len\":1048576}}}"
    (( (i + 1) % 64 )) || echo '{"op":"sync"}'
  done
  for ((i = 0; i < nfiles; i++)); do
    d=$(printf 'd%03d' $((i / 100)))
    (( i % 100 )) || echo "{\"op\":\"mkdir\",\"path\":\"/$d\"}"
    echo "{\"op\":\"create\",\"path\":\"/$d/f$i\"}"
    echo "{\"op\":\"write\",\"path\":\"/$d/f$i\",\"offset\":0,\"data\":{\"seeded\":{\"seed\":$((i + 100000)),\"len\":4096}}}"
  done
  echo '{"op":"sync"}'
  echo '{"op":"umount"}'
} >"$work/trace.jsonl"
truncate -s $(( nseg * 8 + 1 ))M "$img"
t0=$(date +%s%N)
"$bin" apply "$img" "$work/trace.jsonl" -o "$work/observed.jsonl"
echo "image: $size MiB file + $nfiles files of 4 KiB, $(du -h --apparent-size "$img" | cut -f1) ($(du -h "$img" | cut -f1) allocated), made in $(( ($(date +%s%N) - t0) / 1000000 )) ms"
! grep -q '"err"' "$work/observed.jsonl" || { echo "bench-readers: the trace failed" >&2; exit 1; }

# Both readers must agree before they are timed.
cmp <("$bin" cat "$img" /big | sha256sum) <(grub-fstest "$img" cat /big | sha256sum)
cmp <("$bin" manifest "$img" | grep -v '^DIR' | grep -v '/.nilfs$' | awk '{print $1, $3}' | LC_ALL=C sort) \
    <(tests/guest/grub-check.sh "$img" | grep -v '^DIR' | grep -v '/.nilfs$' | awk '{print $1, $3}' | LC_ALL=C sort)

# secs CMD...: wall seconds of one run, output discarded.
secs() {
  local t=$(date +%s%N)
  "$@" >/dev/null
  awk -v ns=$(( $(date +%s%N) - t )) 'BEGIN { printf "%.3f", ns / 1e9 }'
}
stats() { # values... -> "min median max"
  printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { printf "%.3f %.3f %.3f", v[1], v[int((NR + 1) / 2)], v[NR] }'
}
pair() { # NAME "OURS" "THEIRS"
  local name=$1 ours=$2 theirs=$3 a b r=() as=() bs=()
  for ((k = 0; k < runs; k++)); do
    a=$(secs bash -c "$ours") b=$(secs bash -c "$theirs")
    as+=("$a") bs+=("$b") r+=("$(awk -v a="$a" -v b="$b" 'BEGIN { printf "%.3f", b / a }')")
  done
  read -r amin amed amax <<<"$(stats "${as[@]}")"
  read -r bmin bmed bmax <<<"$(stats "${bs[@]}")"
  read -r _ rmed _ <<<"$(stats "${r[@]}")"
  echo "| $name | $amin / $amed / $amax | $bmin / $bmed / $bmax | $rmed |"
}
echo "$runs runs each, alternating; seconds min / median / max"
echo "| read | nilref | GRUB | GRUB / nilref (median of per-run ratios) |"
echo "|---|---|---|---|"
pair "cat /big" "$bin cat $img /big" "grub-fstest $img cat /big"
pair "manifest (every file hashed)" "$bin manifest $img" "tests/guest/grub-check.sh $img"
pair "/big checksummed (cksum vs GRUB's crc)" "$bin cat $img /big | cksum" "grub-fstest $img crc /big"
