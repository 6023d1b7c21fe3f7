# scenario-gc.sh — guest script for tests/guest/kernel-run.sh (runs under busybox sh -e in the guest).
# Populates a fresh NILFS2 image on /dev/vda, takes a snapshot, churns data, runs the
# cleaner with protection period 0 so GC really moves live blocks, prints lscp/lssu/
# manifests, then unmounts cleanly.  Data is deterministic and compressible (every
# 4 KiB block carries a unique header), so the resulting image xz-compresses well.
# Usage: tests/fixtures/make-kernel-fixture.sh (formats the image, boots the guest).
set -e
BIG_BLOCKS=${BIG_BLOCKS:-8192}                   # 8192 x 4 KiB = 32 MiB (3-level B-tree)
blk() {  # blk TAG FIRST COUNT -> COUNT 4 KiB blocks, block i starts "TAG:i\n", rest filler
  awk -v t="$1" -v a="$2" -v n="$3" 'BEGIN{f=sprintf("%4096s",""); gsub(/ /,"~",f)
    for(i=a;i<a+n;i++){h=sprintf("%s:%08d\n",t,i); printf "%s%s", h, substr(f,1,4096-length(h))}}'
}
t0=$(cut -d' ' -f1 /proc/uptime)
mount -t nilfs2 /dev/vda /mnt
echo "== mounted: $(grep ' /mnt ' /proc/mounts)"

# --- populate ------------------------------------------------------------------
cd /mnt
mkdir -p d1/d2/d3 many empty-dir
: > zero
printf x > one
for n in 4095 4096 4097 28672 28673 32768 65539 1048576; do blk s$n 0 $(( (n+4095)/4096 )) | head -c $n > size-$n; done
blk big 0 "$BIG_BLOCKS" > big                     # sequential, 3-level B-tree, kept
blk big2 0 3072 > big2                            # 12 MiB, deleted after the snapshot
echo "nested file" > d1/d2/d3/leaf
i=0; while [ $i -lt 300 ]; do echo "entry $i" > many/file-$i; i=$((i+1)); done   # multi-block dir
ln -s d1/d2/d3/leaf symlink                       # dangles after the mv below
ln -s size-4096 good-link
ln size-4097 hardlink
touch "$(printf 'L%.0s' $(seq 1 255))"            # 255-byte name
# Random 4 KiB writes into a sparse 16 MiB range (deterministic LCG offsets), plus
# unaligned small writes (read-modify-write of partial blocks).
s=12345; i=0
while [ $i -lt 200 ]; do
  s=$(( (s*1103515245 + 12345) % 2147483648 )); off=$(( s % 4096 ))
  blk rnd$i "$off" 1 | dd of=rand bs=4096 seek="$off" conv=notrunc 2>/dev/null
  i=$((i+1))
done
i=0; while [ $i -lt 20 ]; do printf 'unaligned-%d' $i | dd of=rand bs=1 seek=$((i*40961+7)) conv=notrunc 2>/dev/null; i=$((i+1)); done
sync
SNAP=$(mkcp -s -p)
echo "== snapshot cno=$SNAP"
manifest /mnt > /tmp/snap.manifest

# --- churn: delete / overwrite / truncate / rename --------------------------------
rm big2 size-1048576
rm -r many
blk new 0 2048 > new                              # 8 MiB
blk ovw 100 50 | dd of=rand bs=4096 seek=100 conv=notrunc 2>/dev/null
truncate -s 5000 size-65539 2>/dev/null || dd if=/dev/null of=size-65539 bs=1 seek=5000
mv d1/d2/d3/leaf d1/moved-leaf
sync; mkcp
rm new; sync; mkcp
# Interleave two files log by log, then drop one: segments end up ~half dead, so the
# cleaner must copy "keep"'s live blocks elsewhere (checked via dumpseg + checksums).
i=0; while [ $i -lt 16 ]; do
  blk keep $((i*64)) 64 >> keep; blk drop $((i*64)) 64 >> drop; sync; i=$((i+1))
done
rm drop; sync; mkcp
KEEP_INO=$(stat -c %i keep)
segs_of() {  # in-use segments (per lssu) holding blocks of inode $1 written after cno $SNAP
  dumpseg /dev/vda $(lssu | awk 'NR>1 && $5>0 {print $1}') | awk -v ino="$1" -v c="$SNAP" '
    /^segment: segnum/ {seg=$4} /^ +ino = / {split($3,a,","); split($6,b,","); cur=(a[1]==ino && b[1]+0>c)}
    /^ +(vblocknr|blkoff) = / && cur {n[seg]++} END {for (s in n) printf "%s:%d ", s, n[s]; print ""}' | tr ' ' '\n' | sort -n | tr '\n' ' '
}
echo "== keep (ino $KEEP_INO) blocks per segment before GC: $(segs_of "$KEEP_INO")"
echo "== before GC"; lscp; lssu -l; df -k /mnt | tail -1
manifest /mnt > /tmp/pre-gc.manifest

# --- garbage collection -----------------------------------------------------------
nilfs_cleanerd -p 0 /dev/vda /mnt                 # daemonizes; prints nothing needed
sleep 1
nilfs-clean -p 0 /dev/vda || echo "nilfs-clean rc=$?"
i=0; while [ $i -lt 60 ]; do                      # wait until cleanerd goes idle
  st=$(nilfs-clean -l /dev/vda 2>&1 || true); case $st in *idle*) break;; esac; sleep 1; i=$((i+1))
done
echo "== cleaner status after ${i}s: $st"
nilfs-clean -q /dev/vda || true                   # stop the daemon
sync
echo "== after GC"; lscp; lssu -l; df -k /mnt | tail -1
echo "== keep (ino $KEEP_INO) blocks per segment after GC: $(segs_of "$KEEP_INO")"
manifest /mnt > /tmp/post-gc.manifest
cmp /tmp/pre-gc.manifest /tmp/post-gc.manifest && echo "== GC left every file intact"
echo "== manifest (latest)"; cat /tmp/post-gc.manifest
mkdir -p /snap; mount -t nilfs2 -o ro,cp="$SNAP" /dev/vda /snap
manifest /snap > /tmp/snap2.manifest
if cmp -s /tmp/snap.manifest /tmp/snap2.manifest; then echo "== snapshot $SNAP intact after GC"
else echo "== SNAPSHOT CHANGED"; diff /tmp/snap.manifest /tmp/snap2.manifest || true; exit 1; fi
umount /snap
cd /; umount /mnt
echo "== dumpseg 0 (unmounted)"; dumpseg /dev/vda 0 | head -8
echo "== kernel messages"; dmesg | grep -i nilfs || true
echo "== elapsed in guest: $t0 -> $(cut -d' ' -f1 /proc/uptime) s uptime"
