#!/usr/bin/env bash
# Loopback throughput: wanperf vs iperf3 and iperf2, interleaved, 3 rounds of 5 s by default.
# Usage: bench/throughput.sh [--reps N] [--secs S] [--markdown] [--iperf3 PATH]
# (issue 41 compares with the newest iperf3 release built from source: pass its binary with --iperf3)
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -q
exec python3 bench/throughput.py --wanperf target/release/wanperf "$@"
