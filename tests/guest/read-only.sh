# read-only.sh — guest script (run with RO=1 kernel-run.sh): mount /dev/vda
# read-only and print lscp, lssu, and the manifests of the latest checkpoint
# and of every snapshot.
mount -t nilfs2 -o ro /dev/vda /mnt
echo "== lscp"; lscp
echo "== lssu"; lssu
echo "== manifest (latest checkpoint)"; manifest /mnt
mkdir -p /snap
for cno in $(lscp -s | awk 'NR>1 {print $1}'); do
  mount -t nilfs2 -o ro,cp="$cno" /dev/vda /snap
  echo "== manifest (snapshot cno=$cno)"; manifest /snap
  umount /snap
done
umount /mnt
