cd /work/main
mkdir -p /tmp/s42/snice
scripts/hold-freed-memory > /tmp/s42/snice/hold.txt 2>&1
for i in 1 2; do
  target/release/atomio bench version-readers --strategies limit,versioning --runs 5 --no-verify --no-progress --json /tmp/s42/snice/normal-$i.json > /tmp/s42/snice/normal-$i.txt 2>&1
  /tmp/s42/snice.sh /tmp/s42/snice/snice-$i
done
echo done > /tmp/s42/snice/done
