#!/usr/bin/env bash
# Probe precision: wanperf ping vs iputils ping on loopback and a 10 ms emulated path.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -q
exec python3 bench/latency.py --wanperf target/release/wanperf "$@"
