#!/bin/sh
# Continues the fuzzing campaign: each argument is TARGET:RUNS:SECONDS (the executions and
# the seconds still owed to reach 10^7 executions or two hours). Runs the targets one after
# another at nice 19 with the built binaries in $BIN (default: the AddressSanitizer build;
# fuzz/target-noasan after `cargo fuzz build -s none --target-dir fuzz/target-noasan`).
# Logs go to $LOGDIR/TARGET.log; every fuzzer stops by itself (-runs, -max_total_time).
set -eu
cd "$(dirname "$0")/../fuzz"
BIN=${BIN:-target/x86_64-unknown-linux-gnu/release}
LOGDIR=${LOGDIR:-/tmp/wanperf-fuzz}
mkdir -p "$LOGDIR"
for spec in "$@"; do
    t=${spec%%:*}; rest=${spec#*:}; runs=${rest%%:*}; secs=${rest#*:}
    mkdir -p "artifacts/$t"
    echo "$(date -Is) $t runs=$runs max_total_time=$secs" >> "$LOGDIR/campaign.log"
    ASAN_OPTIONS=detect_odr_violation=0 nice -n 19 "$BIN/$t" "corpus/$t" \
        -runs="$runs" -max_total_time="$secs" -rss_limit_mb=2048 -timeout="${TIMEOUT:-10}" \
        -print_final_stats=1 -artifact_prefix="artifacts/$t/" > "$LOGDIR/$t.log" 2>&1 \
        || echo "$(date -Is) $t exited $?" >> "$LOGDIR/campaign.log"
    echo "$(date -Is) $t done" >> "$LOGDIR/campaign.log"
done
