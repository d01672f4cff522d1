#!/usr/bin/env bash
# `wanperf serve` under a hostile crowd, larger and longer than the CI test: SCALE × 1000
# connections from ten loopback addresses (garbage, truncated frames, absurd lengths, a valid
# request then silence, half headers, unknown data cookies, connect-and-close) while 50 keyed
# legitimate tests run through the server. Prints the crowd, the legitimate tests' outcome and
# the server's descriptors, threads and memory before, at the peak and after.
# Bounded: each source stops after its share or 60 s; slow connections are cut after 2 s.
#   bench/hostile.sh [SCALE]      (default 10: 10 000 connections)
set -euo pipefail
cd "$(dirname "$0")/.."
scale=${1:-10}
rounds=${ROUNDS:-3}
for round in $(seq 1 "$rounds"); do
    echo "== round $round: scale $scale"
    WANPERF_HOSTILE_SCALE=$scale cargo test --release -q -p wanperf --test hostile -- --nocapture 2>&1 \
        | grep -E "^hostile crowd|test result|panicked|memory:|descriptors:|threads:"
done
