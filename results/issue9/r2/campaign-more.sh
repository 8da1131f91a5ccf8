#!/bin/bash
# Five more invocations of the two noisiest must-shows (run from /work/main).
cd /work/main
A=target/release/atomio
R=results/issue9/r2
for i in 6 7 8 9 10; do
echo "### ior-hard-4-$i"
$A bench ior-hard --no-progress --clients 8 --data servers --stripe-count 4 --stripe-size 1048576 --strategies seqdlm,seqdlm:no-cr,dlm-lustre,dlm-basic --runs 3 --json $R/ior-hard-4s-$i.json --chart $R/ior-hard-4s.svg -- --segments 8 2>&1
echo "### tile-4-$i"
$A bench tile --no-progress --clients 4 --data servers --strategies limit,romio,posix-fcntl,ching:datatype:one-try,seqdlm,seqdlm:no-cr,dlm-lustre --runs 3 --json $R/tile-4s-$i.json --chart $R/tile-4s.svg 2>&1
done
echo CAMPAIGNDONE
