#!/bin/sh
# A/B/A/B of the direct lock stripe: 4 MiB (main) vs 64 MiB
for round in 1 2 3 4 5 6; do
 for v in 4m 64m; do
  B=/tmp/atomio-$v
  $B bench s3d --strategies none,bounding-extent,ching:datatype:one-try --runs 11 --no-verify --no-progress --json s3d-$v-$round.json --chart /dev/null > s3d-$v-$round.txt 2>&1
  $B bench ior-hard --strategies none,bounding-extent,ching:datatype:one-try --runs 11 --no-verify --no-progress --json ior-$v-$round.json --chart /dev/null > ior-$v-$round.txt 2>&1
  $B bench tile --strategies bounding-extent,ching:datatype:one-try --runs 11 --no-verify --no-progress --json tile-$v-$round.json --chart /dev/null > tile-$v-$round.txt 2>&1
  echo "$v $round done $(date +%T)"
 done
done
