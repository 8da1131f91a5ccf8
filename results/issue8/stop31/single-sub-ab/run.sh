#!/bin/sh
# A/B/A/B: one-try of a single sub-request starting optimistic (64m) vs blocking (single)
for round in 1 2 3 4 5 6; do
 for v in 64m single; do
  B=/tmp/atomio-$v
  $B bench tile --strategies bounding-extent,ching:datatype:one-try,ching:list:one-try --runs 11 --no-verify --no-progress --json tile-$v-$round.json --chart /dev/null > tile-$v-$round.txt 2>&1
  $B bench s3d --strategies none,bounding-extent,ching:datatype:one-try --runs 11 --no-verify --no-progress --json s3d-$v-$round.json --chart /dev/null > s3d-$v-$round.txt 2>&1
 done
done
