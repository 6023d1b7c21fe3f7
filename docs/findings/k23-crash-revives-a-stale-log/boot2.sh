mkdir -p /mnt/n
mount -t nilfs2 /dev/vda /mnt/n || echo MOUNT-FAILED
dmesg | grep -i nilfs | tail -20
echo B-DONE
