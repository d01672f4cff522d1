#!/usr/bin/env bash
# Host-ring drops, kernel TUN default against wanperf's (needs root or user namespaces, iperf3).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -q
exec python3 bench/host_ring.py --wanperf target/release/wanperf "$@"
