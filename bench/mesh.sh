#!/usr/bin/env bash
# Monitoring mesh benchmark (issue 12): central's ingest on PostgreSQL (and SQLite) from
# simulated agents, the dashboard's load times in headless Chromium, one agent's cost with 200
# peers. See bench/mesh.py. Needs: python3, node, chromium; PostgreSQL from
# $WANPERF_BENCH_POSTGRES, or (as root) a throwaway cluster started here; fping optional.
#
#   ROUNDS=3 SECONDS_PER_RUN=20 bench/mesh.sh
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -q -p wanperf -p wanperf-monitor --examples
PG_DIR=""
cleanup() {
    if [ -n "$PG_DIR" ]; then
        su postgres -s /bin/sh -c "'$PG_BIN/pg_ctl' -D '$PG_DIR/data' -m fast -w stop" >/dev/null 2>&1 || true
        rm -rf "$PG_DIR"
    fi
}
trap cleanup EXIT
if [ -z "${WANPERF_BENCH_POSTGRES:-}" ] && [ "$(id -u)" = 0 ]; then
    PG_BIN=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)
    if [ -n "$PG_BIN" ]; then
        PG_DIR=$(mktemp -d /tmp/wanperf-bench-pg.XXXXXX)
        chown postgres "$PG_DIR"
        su postgres -s /bin/sh -c "'$PG_BIN/initdb' -D '$PG_DIR/data' -A trust -U postgres" >/dev/null
        su postgres -s /bin/sh -c "'$PG_BIN/pg_ctl' -D '$PG_DIR/data' -l '$PG_DIR/log' -w start \
            -o '-k $PG_DIR -p 55490 -c listen_addresses=127.0.0.1 -c synchronous_commit=on'" >/dev/null
        export WANPERF_BENCH_POSTGRES="postgres://postgres@127.0.0.1:55490/postgres"
    fi
fi
python3 bench/mesh.py
