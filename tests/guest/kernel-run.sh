#!/bin/bash
# kernel-run.sh IMAGE SCRIPT — boot Debian's Linux (the real fs/nilfs2) in qemu
# with IMAGE as /dev/vda, run SCRIPT there (busybox sh -e, cwd /tmp, the
# nilfs-tools on PATH), stream what it prints, and exit with its status
# (125: the guest reported none — timeout, panic, no boot).
#
# Env:
#   RO=1           attach IMAGE read-only (the guest sees a read-only disk)
#   DISKS="a b"    more raw images, as /dev/vdb, /dev/vdc, ...
#   BINS="p q"     host programs copied into the guest's /usr/local/bin, with
#                  the shared libraries ldd finds for them
#   SHARE=DIR      host folder mounted read-write at /host (virtio-9p)
#   CONTROL=SOCK   a virtio-serial port named "nilref" in the guest, served
#                  on the host as the unix socket SOCK (qemu listens; the
#                  guest's `nilref guest loop` speaks on it)
#   ACCEL=tcg|kvm  default tcg (a hypervisor that cannot boot stock kernels
#                  is common on cloud machines; kvm where it works)
#   MEM=512M SMP=1 TIMEOUT=600 (seconds)
#   CONSOLE=FILE   keep the kernel console there; VERBOSE=1 copies it to stderr
#   KERNEL_ROOT, KVER  the kernel (`nilref peers env kernel 7.3` prints
#                  them); unset: the default kernel of tests/peers.toml
#                  (build-initramfs.sh)
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
[ $# -eq 2 ] || { sed -n '2,24p' "$0" >&2; exit 2; }
IMG=$1 SCRIPT=$2
[ -f "$IMG" ] && [ -f "$SCRIPT" ] || { echo "kernel-run: no such file: $IMG or $SCRIPT" >&2; exit 2; }
read -r INITRD KERNEL < <("$HERE/build-initramfs.sh")
[ -n "${KERNEL:-}" ] || exit 2   # build-initramfs.sh said why

WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
# A second archive for this run (the kernel unpacks both): the script, and
# the programs of BINS with their libraries.
mkdir -p "$WORK/r/usr/local/bin"
cp "$SCRIPT" "$WORK/r/run.sh"
for b in ${BINS:-}; do
  cp "$b" "$WORK/r/usr/local/bin/"
  for lib in $(ldd "$b" 2>/dev/null | grep -o '/[^ ]*' || true); do
    mkdir -p "$WORK/r$(dirname "$lib")"; cp -L "$lib" "$WORK/r$lib"
  done
done
(cd "$WORK/r" && find . -mindepth 1 | LC_ALL=C sort | cpio -o -H newc --quiet) > "$WORK/run.cpio"
cat "$INITRD" "$WORK/run.cpio" > "$WORK/initrd"

ro=; [ -n "${RO:-}" ] && ro=,readonly=on
disks=(-drive "file=$IMG,format=raw,if=virtio,cache=unsafe$ro")
for d in ${DISKS:-}; do disks+=(-drive "file=$d,format=raw,if=virtio,cache=unsafe"); done
[ -n "${SHARE:-}" ] && disks+=(-virtfs "local,path=$SHARE,mount_tag=host,security_model=none,id=host")
[ -n "${CONTROL:-}" ] && disks+=(-device virtio-serial-pci
  -chardev "socket,id=ctl,path=$CONTROL,server=on,wait=off"
  -device virtserialport,chardev=ctl,name=nilref)
accel=(-accel tcg,thread=multi)
[ "${ACCEL:-tcg}" = kvm ] && accel=(-enable-kvm -cpu host,-arch-capabilities)
bios=(); [ -f /usr/share/qemu/qboot.rom ] && bios=(-bios /usr/share/qemu/qboot.rom)
CON=${CONSOLE:-$WORK/console.log}

# ttyS0: the kernel console and init's markers (a file); ttyS1: the script's
# output, streamed through a fifo (qemu's file chardev would not stream).
mkfifo "$WORK/out"; cat "$WORK/out" & catpid=$!
timeout "${TIMEOUT:-600}" qemu-system-x86_64 "${accel[@]}" -m "${MEM:-512M}" -smp "${SMP:-1}" \
  -nodefaults -no-user-config -display none -monitor none -no-reboot "${bios[@]}" \
  -kernel "$KERNEL" -initrd "$WORK/initrd" \
  -append "console=ttyS0 panic=-1 quiet loglevel=4 mitigations=off i8042.noaux i8042.nokbd tsc=reliable" \
  -serial "file:$CON" -serial "file:$WORK/out" "${disks[@]}" </dev/null || true
exec 3<>"$WORK/out"; exec 3>&-   # lets cat finish if qemu never opened the fifo
wait $catpid

[ -n "${VERBOSE:-}" ] && tr -d '\r' < "$CON" >&2
rc=$(tr -d '\r' < "$CON" | sed -n 's/^@@GUEST-EXIT \([0-9]*\).*/\1/p' | tail -1)
if [ -z "$rc" ]; then
  echo "kernel-run: the guest reported no exit status; console tail:" >&2
  tr -d '\r' < "$CON" | tail -20 >&2
  exit 125
fi
exit "$rc"
