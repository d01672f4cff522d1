#!/usr/bin/env bash
# Emulated networks: set-up/tear-down time, forwarding capacity per hop against the
# two-host path (interleaved), fairness on a shared bottleneck, lateness at 1 Gbit/s, and
# the packet-rate ceiling with full-size UDP packets.
# Needs root or user namespaces, and iperf3.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -q
exec python3 bench/net.py --wanperf target/release/wanperf "$@"
