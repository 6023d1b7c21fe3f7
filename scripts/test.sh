#!/usr/bin/env bash
# scripts/test.sh — the whole test suite, as CI runs it:
#   1. installs the real NILFS2 peers when missing (Debian: nilfs-tools,
#      grub-common, and for the kernel tier qemu, a Linux image, busybox, cpio);
#   2. runs every workspace test with the peer tier on (NILFS_PEERS=1):
#      hermetic tests, the kernel fixture, mkfs.nilfs2 / dumpseg / nilfs-tune
#      on loop devices, GRUB's reader and the Linux kernel in a qemu guest;
#   3. runs the loom and shuttle explorations in their own target dirs.
# Plain `cargo test` is the fast, hermetic inner loop; this is the full run.
set -euo pipefail
cd "$(dirname "$0")/.."

need=()
for p in nilfs-tools grub-common qemu-system-x86 linux-image-amd64 busybox-static cpio xz-utils; do
  dpkg -s "$p" >/dev/null 2>&1 || need+=("$p")
done
if [ ${#need[@]} -gt 0 ]; then
  echo "== installing peers: ${need[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}"
fi

echo "== workspace tests (peer tier on)"
NILFS_PEERS=1 cargo test --workspace

if ls proofs/tests/*loom*.rs >/dev/null 2>&1; then
  echo "== loom"
  LOOM_MAX_PREEMPTIONS=${LOOM_MAX_PREEMPTIONS:-3} RUSTFLAGS="--cfg loom" \
    cargo test -p nilfs-proofs --release --target-dir target-loom --tests
fi
if ls proofs/tests/*shuttle*.rs >/dev/null 2>&1; then
  echo "== shuttle"
  RUSTFLAGS="--cfg shuttle" cargo test -p nilfs-proofs --release --target-dir target-shuttle --tests
fi
echo "== all tiers passed"
