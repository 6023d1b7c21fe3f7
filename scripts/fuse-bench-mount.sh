# scripts/fuse-bench-mount.sh — sourced by the bench-fuse-*.sh scripts
# that measure one `nilref mount`: the binary to measure, and a fresh
# image in a tmpfs of its own mounted at "$work/mnt", unmounted and
# removed on exit (with the background job "$writer", if set, killed).
#
#   bench_bin BIN               sets bin: BIN, or this tree's release
#                               build (built first) when BIN is empty
#   bench_mount TMPFS_MIB FS_MIB [MOUNT-ARG...]
#                               sets work and daemon
#   bench_beside_a_writer SECS MEASURE
#                               runs `MEASURE alone`, then `MEASURE "beside
#                               a writer"` while fio writes 1 MiB blocks at
#                               40 MiB/s over a 64 MiB file with an fsync
#                               every 16 MiB (constructions that hold the
#                               mount's lock)
bench_bin() {
  bin=$1
  if [ -z "$bin" ]; then
    cargo build -q --release -p nilref
    bin=$PWD/target/release/nilref
  fi
}

bench_cleanup() {
  [ -z "${writer:-}" ] || kill "$writer" 2>/dev/null || true
  fusermount3 -u "$work/mnt" 2>/dev/null || fusermount3 -uz "$work/mnt" 2>/dev/null \
    || kill "${daemon:-}" 2>/dev/null || true
  wait 2>/dev/null || true
  umount "$work/img" 2>/dev/null || { sleep 1; umount -l "$work/img"; } || true
  rm -rf "$work"
}

bench_mount() {
  local tmpfs_mib=$1 fs_mib=$2
  shift 2
  work=$(mktemp -d)
  trap bench_cleanup EXIT
  mkdir -p "$work/mnt" "$work/img"
  mount -t tmpfs -o size="${tmpfs_mib}m" tmpfs "$work/img"
  "$bin" mkfs --size "${fs_mib}M" "$work/img/image" >/dev/null
  "$bin" mount "$@" "$work/img/image" "$work/mnt" &
  daemon=$!
  for _ in $(seq 100); do mountpoint -q "$work/mnt" && break; sleep 0.1; done
}

bench_beside_a_writer() {
  local secs=$1 measure=$2
  "$measure" alone
  fio --name=writer --filename="$work/mnt/big" --rw=write --bs=1M --size=64M \
    --fsync=16 --rate=40m --time_based --runtime=$((secs + 3)) \
    --output-format=terse >/dev/null &
  writer=$!
  sleep 1
  "$measure" "beside a writer"
  wait "$writer" || echo "the writer failed" >&2
  writer=
}
