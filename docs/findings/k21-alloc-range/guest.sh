# In the guest: /dev/vda made by `nilref mkfs --size 2M -b 1024 -B 16` (127 segments of 16 KiB).
mount -t nilfs2 /dev/vda /mnt || exit 1
# Allocate in segments 60 to 70 only (nilfs_ioctl_set_alloc_range; libnilfs' nilfs_set_alloc_range).
nilref ioctl /mnt alloc-range 983040 1167360
i=0
while [ $i -lt 110 ]; do
  dd if=/dev/urandom of=/mnt/f$i bs=1024 count=12 2>/tmp/dd.err || { echo "file $i: $(head -1 /tmp/dd.err)"; break; }
  sync
  i=$((i+1))
done
nilref ioctl /mnt sustat
df /mnt | tail -1
umount /mnt && echo "umount: ok"
mount -t nilfs2 /dev/vda /mnt && echo "files after a remount: $(ls /mnt | grep -c '^f')" && umount /mnt
