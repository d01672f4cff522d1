#!/usr/bin/env bash
# Archive benchmark: a 50-cell run with 1,000,000 probes and 100,000 intervals stored into
# SQLite and (given a URL) PostgreSQL: rows/s, cell_aggregates (median of several) and run_data.
#
#   bench/archive.sh                                   # SQLite only (a file in $TMPDIR)
#   bench/archive.sh --postgres postgres://u@host/db   # and PostgreSQL (or WANPERF_BENCH_POSTGRES)
#   bench/archive.sh --throwaway-postgres              # and a temporary local cluster (as root)
#
# Other flags go to the helper: --cells N --probes N --intervals N --repeats N.
# Then `wanperf report` renders the run stored in SQLite (loaded from the archive, rendered,
# written), timed end to end, median of 5. (The helper removes its PostgreSQL rows afterwards.)
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
cargo build --release -q -p wanperf
echo "machine: $(nproc) cores, $(uname -r); $(psql --version 2>/dev/null || echo 'psql not installed')"
db=$(mktemp -d /tmp/wanperf-archive-bench.XXXXXX)
trap 'stop_postgres; rm -rf "$db"' EXIT
target/release/examples/archive_bench --sqlite "$db/bench.sqlite" "${args[@]}"

# The report of the 50-cell run: archive → RunData → HTML, end to end.
report_ms() {
    local times=() t0 t1
    for _ in 1 2 3 4 5; do
        t0=$(date +%s%N)
        target/release/wanperf report latest --db "$1" -o "$db/report.html" >/dev/null
        t1=$(date +%s%N)
        times+=($(( (t1 - t0) / 1000000 )))
    done
    printf '%s\n' "${times[@]}" | sort -n | sed -n 3p
}
echo "sqlite: wanperf report (median of 5): $(report_ms "$db/bench.sqlite") ms, $(du -k "$db/report.html" | cut -f1) KiB of HTML"
