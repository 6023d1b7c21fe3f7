#!/bin/bash
# build-initramfs.sh — make (once) the kernel guest's initramfs; print its
# path and the kernel's ("INITRD KERNEL", one line).
#
# The guest is a Debian kernel pinned in tests/peers.toml, unpacked by
# `nilref peers fetch` into the peer cache (never installed on the host),
# booted by qemu with this archive as its root file system: static
# busybox, the kernel modules the tests need (virtio disk, 9p and serial port, nilfs2,
# loop, device mapper with dm-log-writes and dm-flakey; .ko.xz and .ko.zst
# modules are decompressed here), the nilfs-tools programs with their
# shared libraries, dmsetup, and /init (init.sh). The archive is
# uncompressed (faster to unpack under TCG) and cached under
# $NILFS_GUEST_CACHE (default ~/.cache/nilfs-ref-guest), keyed by the
# kernel and a hash of the scripts it contains, so editing init.sh or
# manifest.sh rebuilds it. Beside it goes vmlinux-<kver>, the kernel's ELF
# payload unpacked from its vmlinuz (xz up to 6.1, zstd from 6.12), which
# qemu boots through its PVH entry without the in-guest decompression
# (about 4 s under TCG).
#
# Env: KERNEL_ROOT and KVER name the kernel (`nilref peers env kernel V`
# prints them); unset, the default kernel that `nilref peers fetch` wrote
# to $NILFS_PEER_CACHE/kernel.env. Never the host's own kernel. FORCE=1
# rebuilds.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
CACHE=${NILFS_GUEST_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/nilfs-ref-guest}
mkdir -p "$CACHE"

need=()
for p in qemu-system-x86 kmod busybox-static nilfs-tools cpio dmsetup xz-utils zstd; do
  dpkg -s "$p" >/dev/null 2>&1 || need+=("$p")
done
if [ ${#need[@]} -gt 0 ]; then
  apt-get update -qq >&2 || true
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >&2
fi

if [ -z "${KERNEL_ROOT:-}" ]; then
  PEERS=${NILFS_PEER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/nilfs-ref-peers}
  [ -s "$PEERS/kernel.env" ] || {
    echo "build-initramfs: no kernel named (KERNEL_ROOT, KVER) and no default fetched: run \`nilref peers fetch kernel\`" >&2
    exit 2; }
  KERNEL_ROOT=$(sed -n 's/^KERNEL_ROOT=//p' "$PEERS/kernel.env")
  KVER=$(sed -n 's/^KVER=//p' "$PEERS/kernel.env")
fi
: "${KVER:?KERNEL_ROOT needs KVER, the kernel release}"
VMLINUZ=$KERNEL_ROOT/boot/vmlinuz-$KVER
[ -f "$VMLINUZ" ] || VMLINUZ=$KERNEL_ROOT/usr/lib/modules/$KVER/vmlinuz
MODDIR=$KERNEL_ROOT/lib/modules/$KVER
[ -d "$MODDIR" ] || MODDIR=$KERNEL_ROOT/usr/lib/modules/$KVER
[ -f "$VMLINUZ" ] && [ -d "$MODDIR" ] || { echo "build-initramfs: no kernel $KVER under $KERNEL_ROOT" >&2; exit 2; }
key=$(printf '%s\n' "$KERNEL_ROOT" | cat - "$0" "$HERE/init.sh" "$HERE/manifest.sh" | sha256sum | cut -c1-12)
OUT=$CACHE/initramfs-$KVER-$key.cpio
KERNEL=$CACHE/vmlinux-$KVER
if [ ! -s "$KERNEL" ]; then
  python3 - "$VMLINUZ" "$KERNEL.tmp" <<'PY' && mv "$KERNEL.tmp" "$KERNEL" || echo "build-initramfs: no vmlinux payload found; booting the bzImage" >&2
import lzma, subprocess, sys
data = open(sys.argv[1], 'rb').read()
xz, zst = data.find(b'\xfd7zXZ\x00'), data.find(b'\x28\xb5\x2f\xfd')
if xz >= 0:
    elf = lzma.LZMADecompressor(lzma.FORMAT_XZ).decompress(data[xz:])
elif zst >= 0:
    # zstd stops with an error at the size word the kernel appends after
    # the frame; what it wrote before is the whole payload.
    elf = subprocess.run(['zstd', '-dc'], input=data[zst:], capture_output=True).stdout
else:
    sys.exit(1)
if elf[:4] != b'\x7fELF':
    sys.exit(1)
open(sys.argv[2], 'wb').write(elf)
PY
fi
[ -s "$KERNEL" ] || KERNEL=$VMLINUZ
if [ -s "$OUT" ] && [ -z "${FORCE:-}" ]; then
  echo "$OUT $KERNEL"; exit 0
fi

ROOT=$(mktemp -d "$CACHE/root.XXXXXX")
trap 'rm -rf "$ROOT"' EXIT
# mktemp made it 0700, and it becomes the guest's "/": other users (the
# suites' unprivileged ones) must be able to walk through it.
chmod 755 "$ROOT"
mkdir -p "$ROOT"/{bin,sbin,etc,proc,sys,dev,tmp,run,mnt,host,lib/modules,usr/bin,usr/sbin,usr/local/bin}
cp /bin/busybox "$ROOT/bin/busybox"
ln -s busybox "$ROOT/bin/sh"

# Modules in dependency order (each after what it depends on), loaded by
# init.sh. Found by file name in the unpacked tree (a module's name may
# spell "-" where its file has "_", or the reverse); one that is not there
# as a file must be built in, which modules.builtin says.
declare -A seen=()
add_module() {
  local m=$1 dep file
  [ -n "${seen[$m]:-}" ] && return
  seen[$m]=1
  file=$(find "$MODDIR/kernel" \( -name "$m.ko*" -o -name "${m//-/_}.ko*" -o -name "${m//_/-}.ko*" \) | head -1)
  if [ -z "$file" ]; then
    grep -qE "/(${m}|${m//-/_}|${m//_/-})\.ko\$" "$MODDIR/modules.builtin" 2>/dev/null ||
      { echo "build-initramfs: module $m is neither in $MODDIR nor built in" >&2; exit 1; }
    return
  fi
  for dep in $(modinfo -F depends "$file" | tr ',' ' '); do add_module "$dep"; done
  case $file in
    *.ko.xz) xz -dc "$file" > "$ROOT/lib/modules/$m.ko" ;;
    *.ko.zst) zstd -qdc "$file" > "$ROOT/lib/modules/$m.ko" ;;
    *) cp "$file" "$ROOT/lib/modules/$m.ko" ;;
  esac
  echo "$m" >> "$ROOT/lib/modules/order"
}
for m in virtio_pci virtio_blk virtio_console nilfs2 9pnet_virtio 9p loop dm-mod dm-log-writes dm-flakey; do
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
echo "$OUT $KERNEL"
