#!/bin/bash
# issue 9 campaign after contention revocation; run from /work/main
cd /work/main
A=target/release/atomio
R=results/issue9/r2
run() { echo "### $1: $A ${@:2:2} --no-progress ${@:4}"; "$A" "${@:2:2}" --no-progress "${@:4}" 2>&1; echo; }
run ior-strided-1 bench ior-strided --clients 8 --data servers --stripe-count 1 --stripe-size 1048576 --strategies seqdlm,seqdlm:no-cr,dlm-basic,dlm-lustre --runs 3 --json $R/ior-strided-1s.json --chart $R/ior-strided-1s.svg -- --xfer-bytes 1048576 --segments 4
run ior-segmented-1 bench ior-segmented --clients 8 --data servers --stripe-count 1 --stripe-size 1048576 --strategies seqdlm,seqdlm:no-cr,dlm-basic,dlm-lustre --runs 3 --json $R/ior-segmented-1s.json --chart $R/ior-segmented-1s.svg -- --xfer-bytes 1048576 --segments 4
for i in 1 2 3 4 5; do
run ior-hard-4-$i bench ior-hard --clients 8 --data servers --stripe-count 4 --stripe-size 1048576 --strategies seqdlm,seqdlm:no-cr,dlm-lustre,dlm-basic --runs 3 --json $R/ior-hard-4s-$i.json --chart $R/ior-hard-4s.svg -- --segments 8
done
for rtt in 100 1000; do
run ior-hard-4-rtt$rtt bench ior-hard --clients 8 --data servers --stripe-count 4 --stripe-size 1048576 --strategies seqdlm,seqdlm:no-cr,dlm-lustre,dlm-basic --runs 3 --rtt-us $rtt --json $R/ior-hard-4s-rtt$rtt.json --chart $R/ior-hard-4s-rtt$rtt.svg -- --segments 8
done
echo CAMPAIGNDONE
