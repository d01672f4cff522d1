#!/usr/bin/env bash
# Path diagnosis benchmark (issue 11): `wanperf capacity` and `wanperf trace` on seeded random
# chains of emulated links with a known answer, against mtr and traceroute for the trace's
# completion time. See bench/diagnose.py. Needs root (or unprivileged user namespaces),
# python3, mtr-tiny and traceroute.
#
#   TOPOLOGIES=20 SEED=1 bench/diagnose.sh
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -q -p wanperf
python3 bench/diagnose.py
