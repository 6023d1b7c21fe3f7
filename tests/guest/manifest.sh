#!/bin/sh
# manifest [DIR] — in the guest (/usr/bin/manifest): one line per entry under
# DIR (default /mnt), paths relative to DIR, sorted by path (LC_ALL=C sort -k3):
#   <sha256>  <size>  <path>      regular file
#   DIR  -  <path>/               directory
#   LNK  -  <path> -> <target>    symbolic link
#   FIFO  -  <path>               FIFO
#   SOCK  -  <path>               socket
#   CHR  <major>:<minor>  <path>  character device
#   BLK  <major>:<minor>  <path>  block device
# nilref manifest prints the same format for an image, grub-check.sh for what
# GRUB reads, so any two can be diffed.
cd "${1:-/mnt}"
find . -mindepth 1 | while IFS= read -r p; do
  if [ -L "$p" ]; then echo "LNK  -  ${p#.} -> $(readlink "$p")"
  elif [ -d "$p" ]; then echo "DIR  -  ${p#.}/"
  elif [ -p "$p" ]; then echo "FIFO  -  ${p#.}"
  elif [ -S "$p" ]; then echo "SOCK  -  ${p#.}"
  elif [ -c "$p" ] || [ -b "$p" ]; then
    # %t and %T: major and minor in hex (busybox's stat has no %Hr/%Lr).
    set -- $(stat -c '%t %T' "$p")
    if [ -c "$p" ]; then t=CHR; else t=BLK; fi
    echo "$t  $((0x$1)):$((0x$2))  ${p#.}"
  else echo "$(sha256sum < "$p" | cut -c1-64)  $(stat -c %s "$p")  ${p#.}"; fi
done | LC_ALL=C sort -k3
