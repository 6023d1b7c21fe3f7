#!/usr/bin/env bash
# scripts/bench-readahead.sh — seed 000 benchmark: dd of a 512 MB file on the
# simulated 2010 SCSI disk and Intel SSD, B-tree sibling read-ahead off vs on.
#
#   scripts/bench-readahead.sh            # build the image if missing, run the sim
#   scripts/bench-readahead.sh --svg docs/seeds/000-readahead.svg   # and plot
#   (any arguments go to `nilref sim readahead`: --svg FILE, --trace FILE, --main-only)
#   IMG=path scripts/bench-readahead.sh   # use another image (must hold /f)
#   SYNTHETIC=1 scripts/bench-readahead.sh  # no kernel: SYNTHETIC layout (see below)
#
# The image is written by the real Linux kernel (fs/nilfs2 under qemu, via
# tests/guest/kernel-run.sh), so the file's data blocks, B-tree
# nodes and DAT blocks sit where the kernel's segment constructor put them:
#   1. a 1 GiB sparse file, host mkfs.nilfs2 -b 4096 -B 2048 (the 2010 defaults:
#      4 KiB blocks, 2048-block = 8 MiB segments);
#   2. in the guest: mount, write 512 MiB of deterministic non-zero data
#      (`yes` output) to /f, sync, umount;
#   3. `nilref sim readahead IMAGE /f` (release build) reads it back through
#      the cached read path, the 2.6.35 request queue and the simulated
#      devices, and prints the tables (about a minute of host time).
# The kernel run takes about 15-40 s under TCG (guest writes ~37 MB/s).
set -euo pipefail
cd "$(dirname "$0")/.."
GUEST_DIR=tests/guest
OUT=target/bench
IMG=${IMG:-$OUT/readahead-512M.img}
mkdir -p "$OUT"

if [ -n "${SYNTHETIC:-}" ]; then
  echo "SYNTHETIC=1 is not a layout the kernel wrote: use it only when qemu is unavailable" >&2
  exit 2
fi

if [ ! -s "$IMG" ]; then
  echo "== building $IMG (mkfs.nilfs2 -b 4096 -B 2048, kernel writes /f: 512 MiB)" >&2
  rm -f "$IMG.tmp"
  truncate -s 1G "$IMG.tmp"
  mkfs.nilfs2 -q -f -b 4096 -B 2048 -L ra512 "$IMG.tmp" >/dev/null
  guest=$(mktemp)
  trap 'rm -f "$guest"' EXIT
  cat > "$guest" <<'GUEST'
mount -t nilfs2 /dev/vda /mnt
# 512 MiB = 536870912 bytes of non-zero, deterministic data; the page cache
# fills and writeback hands it to the segment constructor as dd would.
yes 'nilfs2 seed 000 read-ahead benchmark: 0123456789abcdefghijklmnopqrstuvwxyz' | head -c 536870912 > /mnt/f
sync
ls -l /mnt/f
umount /mnt
echo written
GUEST
  TIMEOUT=${TIMEOUT:-900} "$GUEST_DIR/kernel-run.sh" "$IMG.tmp" "$guest" >&2
  mv "$IMG.tmp" "$IMG"
fi

echo "== cargo run --release -p nilref -- sim readahead $IMG /f $*" >&2
cargo run --release -q -p nilref -- sim readahead "$IMG" /f "$@"
