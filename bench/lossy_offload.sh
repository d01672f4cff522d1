#!/usr/bin/env bash
# Per-segment loss and policing with offload against offload off (needs root or user namespaces, iperf3).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -q
exec python3 bench/lossy_offload.py --wanperf target/release/wanperf "$@"
