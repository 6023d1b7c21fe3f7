#!/bin/sh
# init.sh — /init (PID 1) of the kernel guest (see build-initramfs.sh).
# Mounts the pseudo file systems, loads the modules, mounts the host folder
# (if kernel-run.sh shared one) at /host, runs /run.sh with its output on
# the second serial port, reports "@@GUEST-EXIT <status>" on the console and
# powers off.
/bin/busybox --install -s /bin
export PATH=/usr/local/bin:/bin:/sbin:/usr/bin:/usr/sbin HOME=/ TERM=dumb
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mount -t tmpfs tmpfs /tmp
mount -t tmpfs tmpfs /run
mkdir -p /dev/shm /dev/mqueue
mount -t tmpfs shm /dev/shm          # libnilfs takes its GC lock as a POSIX semaphore
mount -t mqueue mqueue /dev/mqueue   # nilfs-clean talks to nilfs_cleanerd over message queues
while read -r m; do insmod "/lib/modules/$m.ko" || echo "insmod $m failed"; done < /lib/modules/order
i=0; while [ ! -b /dev/vda ] && [ $i -lt 50 ]; do sleep 0.1; i=$((i+1)); done
for t in /sys/bus/virtio/drivers/9pnet_virtio/*/mount_tag; do
  [ "$(tr -d '\0' < "$t" 2>/dev/null)" = host ] &&
    mount -t 9p -o trans=virtio,version=9p2000.L,msize=262144 host /host
done
echo "@@GUEST-BOOTED uptime=$(cut -d' ' -f1 /proc/uptime)"
stty -F /dev/ttyS1 raw -echo 2>/dev/null   # the output port passes bytes as they are
cd /tmp
sh -e /run.sh </dev/null >/dev/ttyS1 2>&1
rc=$?
sync
grep -qs ' /host ' /proc/mounts && umount /host
echo "@@GUEST-EXIT $rc uptime=$(cut -d' ' -f1 /proc/uptime)"
poweroff -f
