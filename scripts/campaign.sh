#!/usr/bin/env bash
# scripts/campaign.sh — the long oracle campaigns (docs/findings.md), each
# on every version pinned in tests/peers.toml, the same seeds for each:
#   1. GRUB's reader on images our write path makes (`nilref campaign grub
#      --grub V`, every pinned GRUB);
#   2. Linux's nilfs2 in a qemu guest, its behaviour judged by the model,
#      its images read by our read path and by GRUB (`nilref campaign
#      kernel --kernel V`, every pinned Linux);
#   3. Linux's writes through dm-log-writes, every crash state recovered and
#      judged (`nilref campaign crash --kernel V`);
#   4. hostile images, every field of every on-disk structure corrupted
#      (checksums resealed), mounted, read, written and unmounted by Linux
#      (`nilref campaign hostile --kernel V`): one folder for every version
#      (target/campaign/hostile), so that all judge the same images.
# Installs the host tools when missing (Debian), builds the release binary,
# fetches the peers pinned in tests/peers.toml (`nilref peers fetch`), and
# runs each campaign over its seed range. Findings go to
# target/campaign/<name>-<version>/findings/, one folder each with the
# workload and the command that replays it; the script fails if any
# campaign found something. `nilref campaign matrix` compares the versions'
# answers line by line on a shorter range.
#
# Usage: scripts/campaign.sh [--shard I/N] [--only grub|kernel|crash|hostile]
#   --shard  run the I-th of N slices of every seed range (a CI matrix)
#   --only   run one campaign
# Seed ranges and lengths (environment, defaults in brackets):
#   GRUB_SEEDS [1..3000]  GRUB_LEN [60]
#   KERNEL_SEEDS [1..500] KERNEL_LEN [40]
#   CRASH_SEEDS [1..160]  CRASH_LEN [8]
#   HOSTILE_SEEDS [1..5000]
set -euo pipefail
cd "$(dirname "$0")/.."

shard= only=
while [ $# -gt 0 ]; do
  case $1 in
    --shard) shard=$2; shift 2 ;;
    --only) only=$2; shift 2 ;;
    *) sed -n '23,30p' "$0" >&2; exit 2 ;;
  esac
done
case $only in ""|grub|kernel|crash|hostile) ;; *) echo "unknown campaign: $only" >&2; exit 2 ;; esac
runs() { [ -z "$only" ] || [ "$only" = "$1" ]; }

need=()
for p in nilfs-tools qemu-system-x86 kmod busybox-static cpio xz-utils zstd dmsetup; do
  dpkg -s "$p" >/dev/null 2>&1 || need+=("$p")
done
if [ ${#need[@]} -gt 0 ]; then
  echo "== installing peers: ${need[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}"
fi

cargo build --release -p nilref
# A copy, so that rebuilding during a long run does not swap the binary
# under it (the guest boots the running binary).
mkdir -p target/campaign/bin
cp target/release/nilref target/campaign/bin/nilref
nilref=target/campaign/bin/nilref
"$nilref" peers fetch
shard_args=()
[ -n "$shard" ] && shard_args=(--shard "$shard")

failed=()
# campaign NAME KIND VERSION ARGS...: one campaign on one pinned version.
campaign() {
  local name=$1 kind=$2 version=$3; shift 3
  echo "== campaign $name on $kind $version $*${shard:+ (shard $shard)}"
  if ! "$nilref" campaign "$name" --out "target/campaign/$name-$version" \
       "--$kind" "$version" "${shard_args[@]}" "$@"; then
    failed+=("$name-$version")
  fi
}
versions() { "$nilref" peers | awk -v k="$1" '$1 == k {print $2}'; }

if runs grub; then
  for v in $(versions grub); do
    campaign grub grub "$v" --seeds "${GRUB_SEEDS:-1..3000}" --len "${GRUB_LEN:-60}"
  done
fi
if runs kernel; then
  for v in $(versions kernel); do
    campaign kernel kernel "$v" --seeds "${KERNEL_SEEDS:-1..500}" --len "${KERNEL_LEN:-40}"
  done
fi
if runs crash; then
  for v in $(versions kernel); do
    campaign crash kernel "$v" --seeds "${CRASH_SEEDS:-1..160}" --len "${CRASH_LEN:-8}"
  done
fi
if runs hostile; then
  for v in $(versions kernel); do
    echo "== campaign hostile on kernel $v${shard:+ (shard $shard)}"
    if ! "$nilref" campaign hostile --out target/campaign/hostile --kernel "$v" \
         "${shard_args[@]}" --seeds "${HOSTILE_SEEDS:-1..5000}"; then
      failed+=("hostile-$v")
    fi
  done
fi

if [ ${#failed[@]} -gt 0 ]; then
  echo "findings in: ${failed[*]} (target/campaign/<name>/findings)" >&2
  exit 1
fi
