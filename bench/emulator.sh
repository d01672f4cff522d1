#!/usr/bin/env bash
# Emulator speed and precision (needs root or user namespaces, and iperf3 and ping).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -q
exec python3 bench/emulator.py --wanperf target/release/wanperf "$@"
