#!/usr/bin/env bash
# Archive benchmark: a 50-cell run with 1,000,000 probes and 100,000 intervals stored into
# SQLite and (given a URL) PostgreSQL: rows/s, cell_aggregates (median of several) and run_data.
#
#   bench/archive.sh                                   # SQLite only (a file in $TMPDIR)
#   bench/archive.sh --postgres postgres://u@host/db   # and PostgreSQL (or WANPERF_BENCH_POSTGRES)
#   bench/archive.sh --throwaway-postgres              # and a temporary local cluster (as root)
#
# Other flags go to the helper: --sqlite PATH --cells N --probes N --intervals N --repeats N.
# The report-generation time will be added by the report issue (marked in
# crates/wanperf-archive/examples/archive_bench.rs).
set -euo pipefail
cd "$(dirname "$0")/.."

args=() throwaway=false
for a in "$@"; do
    if [ "$a" = --throwaway-postgres ]; then throwaway=true; else args+=("$a"); fi
done

PG_BIN="" PG_DIR=""
stop_postgres() {
    if [ -n "$PG_BIN" ]; then
        su postgres -s /bin/sh -c "'$PG_BIN/pg_ctl' -D '$PG_DIR/data' -m fast -w stop" >/dev/null 2>&1 || true
    fi
    if [ -n "$PG_DIR" ]; then rm -rf "$PG_DIR"; fi
}
trap stop_postgres EXIT
if $throwaway; then
    bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)
    [ -n "$bin" ] || { echo "no PostgreSQL server in /usr/lib/postgresql (apt-get install postgresql)" >&2; exit 1; }
    PG_DIR=$(mktemp -d /tmp/wanperf-pg-bench.XXXXXX)
    chown postgres "$PG_DIR"
    port=55442
    su postgres -s /bin/sh -c "'$bin/initdb' -D '$PG_DIR/data' -A trust -U postgres >/dev/null && \
        '$bin/pg_ctl' -D '$PG_DIR/data' -l '$PG_DIR/log' -w start \
        -o '-k $PG_DIR -p $port -c listen_addresses=127.0.0.1'" >/dev/null
    PG_BIN=$bin
    args+=(--postgres "postgres://postgres@127.0.0.1:$port/postgres")
fi

cargo build --release -q -p wanperf-archive --example archive_bench
echo "machine: $(nproc) cores, $(uname -r); $(psql --version 2>/dev/null || echo 'psql not installed')"
target/release/examples/archive_bench "${args[@]}"
