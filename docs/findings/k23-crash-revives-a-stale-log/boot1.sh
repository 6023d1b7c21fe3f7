mkdir -p /mnt/n
mount -t nilfs2 /dev/vda /mnt/n
dd if=/dev/urandom of=/mnt/n/f2 bs=1024 count=6 conv=notrunc,fsync
echo WROTE
echo o > /proc/sysrq-trigger
