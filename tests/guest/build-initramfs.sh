#!/bin/bash
# build-initramfs.sh — make (once) the kernel guest's initramfs; print its path.
#
# The guest is Debian's own kernel (package linux-image-amd64, Linux 6.1 on
# Debian 12) booted by qemu with this archive as its root file system:
# static busybox, the kernel modules the tests need (virtio disk and 9p,
# nilfs2, loop, device mapper with dm-log-writes and dm-flakey), the
# nilfs-tools programs with their shared libraries, dmsetup, and /init
# (init.sh). The archive is uncompressed (faster to unpack under TCG) and
# cached under $NILFS_GUEST_CACHE (default ~/.cache/nilfs-ref-guest), keyed
# by the kernel version and a hash of the scripts it contains, so editing
# init.sh or manifest.sh rebuilds it. Beside it goes vmlinux-<kver>, the
# kernel's ELF payload unpacked from /boot/vmlinuz, which qemu boots through
# its PVH entry without the in-guest decompression (about 4 s under TCG).
#
# Env: KVER (default: the newest kernel in /lib/modules), FORCE=1 rebuilds.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
CACHE=${NILFS_GUEST_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/nilfs-ref-guest}
mkdir -p "$CACHE"

need=()
for p in qemu-system-x86 linux-image-amd64 busybox-static nilfs-tools cpio dmsetup; do
  dpkg -s "$p" >/dev/null 2>&1 || need+=("$p")
done
if [ ${#need[@]} -gt 0 ]; then
  apt-get update -qq >&2 || true
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >&2
fi

KVER=${KVER:-$(ls /lib/modules | sort -V | tail -1)}
key=$(cat "$0" "$HERE/init.sh" "$HERE/manifest.sh" | sha256sum | cut -c1-12)
OUT=$CACHE/initramfs-$KVER-$key.cpio
if [ -s "$OUT" ] && [ -z "${FORCE:-}" ]; then
  echo "$OUT"; exit 0
fi

if [ ! -s "$CACHE/vmlinux-$KVER" ]; then
  python3 - "/boot/vmlinuz-$KVER" "$CACHE/vmlinux-$KVER.tmp" <<'PY' && mv "$CACHE/vmlinux-$KVER.tmp" "$CACHE/vmlinux-$KVER" || echo "build-initramfs: no vmlinux payload found; booting the bzImage" >&2
import lzma, sys
data = open(sys.argv[1], 'rb').read()
at = data.find(b'\xfd7zXZ\x00')
if at < 0:
    sys.exit(1)
open(sys.argv[2], 'wb').write(lzma.LZMADecompressor(lzma.FORMAT_XZ).decompress(data[at:]))
PY
fi

ROOT=$(mktemp -d "$CACHE/root.XXXXXX")
trap 'rm -rf "$ROOT"' EXIT
# mktemp made it 0700, and it becomes the guest's "/": other users (the
# suites' unprivileged ones) must be able to walk through it.
chmod 755 "$ROOT"
mkdir -p "$ROOT"/{bin,sbin,etc,proc,sys,dev,tmp,run,mnt,host,lib/modules,usr/bin,usr/sbin,usr/local/bin}
cp /bin/busybox "$ROOT/bin/busybox"
ln -s busybox "$ROOT/bin/sh"

# Modules in dependency order (each after what it depends on), loaded by init.sh.
declare -A seen=()
add_module() {
  local m=$1 dep file
  [ -n "${seen[$m]:-}" ] && return
  seen[$m]=1
  for dep in $(modinfo -k "$KVER" -F depends "$m" | tr ',' ' '); do add_module "$dep"; done
  file=$(modinfo -k "$KVER" -F filename "$m")
  case $file in
    /*) cp "$file" "$ROOT/lib/modules/$m.ko"; echo "$m" >> "$ROOT/lib/modules/order" ;;
  esac   # "(builtin)": nothing to load
}
for m in virtio_pci virtio_blk nilfs2 9pnet_virtio 9p loop dm-mod dm-log-writes dm-flakey; do
  add_module "$m"
done

# Programs with their ELF interpreter and shared libraries (as ldd resolves them).
add_program() {
  local b=$1 lib
  mkdir -p "$ROOT$(dirname "$b")"
  cp "$b" "$ROOT$b"
  for lib in $(ldd "$b" | grep -o '/[^ ]*'); do
    mkdir -p "$ROOT$(dirname "$lib")"
    cp -L "$lib" "$ROOT$lib"
  done
}
for b in /sbin/mkfs.nilfs2 /sbin/mount.nilfs2 /sbin/umount.nilfs2 /sbin/nilfs_cleanerd \
         /usr/bin/lscp /usr/bin/lssu /usr/bin/mkcp /usr/bin/chcp /usr/bin/rmcp /usr/bin/dumpseg \
         /usr/sbin/nilfs-clean /usr/sbin/nilfs-resize /usr/sbin/nilfs-tune /usr/sbin/dmsetup; do
  add_program "$b"
done
cp /etc/nilfs_cleanerd.conf "$ROOT/etc/"
echo 'root:x:0:0:root:/:/bin/sh' > "$ROOT/etc/passwd"
echo 'root:x:0:' > "$ROOT/etc/group"
ln -s /proc/mounts "$ROOT/etc/mtab"     # nilfs-clean and mount.nilfs2 read the mounts there

install -m 755 "$HERE/init.sh" "$ROOT/init"
install -m 755 "$HERE/manifest.sh" "$ROOT/usr/bin/manifest"
(cd "$ROOT" && find . | LC_ALL=C sort | cpio -o -H newc --quiet) > "$OUT.tmp"
mv "$OUT.tmp" "$OUT"
echo "$OUT"
