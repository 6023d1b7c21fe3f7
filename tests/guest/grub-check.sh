#!/bin/bash
# grub-check.sh IMAGE [DIR] — read a NILFS2 image with GRUB's own nilfs2 reader
# (grub-fstest, no kernel involved) and print its manifest, one line per entry,
# sorted by path, in manifest.sh's format:
#   <sha256>  <size>  <path>      regular file, its contents read through GRUB
#   DIR  -  <path>/               directory
#   READ-ERROR  <size>  <path>    GRUB lists the file but cannot read it (exit 3)
# GRUB follows symbolic links and reads only the latest checkpoint.
# Exit 1 if GRUB does not recognise the image (its "ls" alone would exit 0).
set -euo pipefail
[ $# -ge 1 ] || { sed -n '2,9p' "$0" >&2; exit 2; }
IMG=$1 TOP=${2:-/}
command -v grub-fstest >/dev/null || {
  apt-get update -qq >&2; DEBIAN_FRONTEND=noninteractive apt-get install -y -qq grub-common >&2; }

# "ls -la" prints "DIR          20261129183519 name/" or "4096  20261129183519 name".
walk() {
  local dir=$1 line kind name sum
  grub-fstest "$IMG" -- ls -la "$dir" | while IFS= read -r line; do
    [[ $line =~ ^(DIR|[0-9]+)\ +([0-9]{14}\ )?(.*)$ ]] || continue
    kind=${BASH_REMATCH[1]} name=${BASH_REMATCH[3]}
    case $name in ./|../) continue;; esac
    if [ "$kind" = DIR ]; then
      echo "DIR  -  ${dir%/}/$name"
      walk "${dir%/}/${name%/}"
    elif sum=$(set -o pipefail; grub-fstest "$IMG" cat "${dir%/}/$name" | sha256sum); then
      echo "${sum:0:64}  $kind  ${dir%/}/$name"
    else
      echo "READ-ERROR  $kind  ${dir%/}/$name"
    fi
  done
}
# Every NILFS2 root lists "./"; an image GRUB does not recognise lists nothing.
grub-fstest "$IMG" -- ls -la / | grep -q '^DIR .* \./$' ||
  { echo "grub-check: GRUB cannot read $IMG" >&2; exit 1; }
out=$(walk "$TOP" | LC_ALL=C sort -k3)
[ -z "$out" ] || printf '%s\n' "$out"
! grep -q '^READ-ERROR' <<<"$out" || exit 3
