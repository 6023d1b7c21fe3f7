#!/bin/bash
# grub-check.sh IMAGE [DIR] — read a NILFS2 image with GRUB's own nilfs2 reader
# (grub-fstest, no kernel involved) and print its manifest, one line per entry,
# sorted by path, in manifest.sh's format:
#   <sha256>  <size>  <path>      regular file, its contents read through GRUB
#   DIR  -  <path>/               directory
#   READ-ERROR  <size>  <path>    GRUB lists the file but cannot read it (exit 3)
#   SPECIAL  -  <path>            an entry GRUB lists with no type ("????",
#                                 GRUB 2.12 and later: FIFOs, sockets, devices)
#   UNPARSED  -  <dir>: <line>    a listing line this script cannot read (exit 4)
# GRUB follows symbolic links and reads only the latest checkpoint.
# Exit 1 if GRUB does not recognise the image (its "ls" alone would exit 0).
# Env: GRUB_FSTEST, the grub-fstest to run (`nilref peers env grub 2.14`
# prints it); unset, the default GRUB of tests/peers.toml.
set -euo pipefail
[ $# -ge 1 ] || { sed -n '2,15p' "$0" >&2; exit 2; }
IMG=$1 TOP=${2:-/}
if [ -z "${GRUB_FSTEST:-}" ]; then
  PEERS=${NILFS_PEER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/nilfs-ref-peers}
  GRUB_FSTEST=$(sed -n 's/^GRUB_FSTEST=//p' "$PEERS/grub.env" 2>/dev/null || true)
  [ -n "$GRUB_FSTEST" ] || {
    echo "grub-check: no GRUB named (GRUB_FSTEST) and no default fetched: run \`nilref peers fetch grub\`" >&2
    exit 2; }
fi
grub-fstest() { "$GRUB_FSTEST" "$@"; }

# "ls -la" prints "DIR          20261129183519 name/", "4096  20261129183519
# name", or (2.12 and later, an entry of no known type) "????????????  ...".
walk() {
  local dir=$1 line kind name sum
  grub-fstest "$IMG" -- ls -la "$dir" | while IFS= read -r line; do
    [ -n "$line" ] || continue
    if ! [[ $line =~ ^(DIR|[0-9]+|\?+)\ +([0-9]{14}\ )?(.*)$ ]]; then
      echo "UNPARSED  -  ${dir%/}: $line"
      continue
    fi
    kind=${BASH_REMATCH[1]} name=${BASH_REMATCH[3]}
    case $name in ./|../) continue;; esac
    if [[ $kind == \?* ]]; then
      echo "SPECIAL  -  ${dir%/}/$name"
    elif [ "$kind" = DIR ]; then
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
! grep -q '^UNPARSED' <<<"$out" || exit 4
! grep -q '^READ-ERROR' <<<"$out" || exit 3
