#!/usr/bin/env bash
# Flow collector benchmark (issue 14): NetFlow v9 and IPFIX export, captured once from
# softflowd, replayed with tcpreplay over loopback into `wanperf flows collect`, nfcapd (nfdump)
# and goflow2 (when `goflow2` is on PATH or in ~/go/bin), interleaved round by round. Every
# collector runs on CPU 1 (taskset), tcpreplay on CPU 0.
#
#   bench/flows.sh [--rounds 3] [--loops 60] [--steady 120] [--rate 100000] [--exporters 20000]
#
# Prints per run: records decoded, the collector's CPU seconds, records per CPU second (the
# ingest capacity of one core), records per wall second of the replay, socket drops; then
# medians and wanperf's ratios. Then wanperf alone at --rate records/s for --steady seconds
# (socket drops must be 0, every record decoded), and a flood from --exporters source
# addresses (peak memory of wanperf and nfcapd). Everything stays on loopback and stops by
# itself. Needs: tcpreplay tcpdump softflowd nfdump (Debian), python3; goflow2 optional
# (go install github.com/netsampler/goflow2/v2/cmd/goflow2@latest); root (unshare -n).
#
# The whole benchmark runs in a network namespace of its own: packets tcpreplay writes to lo
# carry 127.0.0.1 as their source, which the host's lo drops as martians unless
# route_localnet is set — set here, in this namespace only, where no fixed port can collide.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -z "${WANPERF_BENCH_NETNS:-}" ]; then
    cargo build --release -q
    exec env WANPERF_BENCH_NETNS=1 unshare -n -- bash "$0" "$@"
fi
ip link set lo up
for k in net.ipv4.conf.all.route_localnet net.ipv4.conf.lo.route_localnet net.ipv4.conf.all.accept_local \
    net.ipv4.conf.lo.accept_local; do
    sysctl -qw "$k=1"
done
sysctl -qw net.ipv4.conf.all.rp_filter=0 net.ipv4.conf.lo.rp_filter=0
sysctl -qw net.core.rmem_max=33554432 2> /dev/null || true

ROUNDS=3 LOOPS=60 STEADY=120 RATE=100000 EXPORTERS=20000
while [ $# -gt 0 ]; do
    case "$1" in
        --rounds) ROUNDS=$2; shift 2 ;;
        --loops) LOOPS=$2; shift 2 ;;
        --steady) STEADY=$2; shift 2 ;;
        --rate) RATE=$2; shift 2 ;;
        --exporters) EXPORTERS=$2; shift 2 ;;
        *) echo "bench/flows.sh: unknown argument $1" >&2; exit 2 ;;
    esac
done
for t in tcpreplay tcprewrite tcpdump softflowd softflowctl nfcapd nfdump taskset python3 ss; do
    command -v $t >/dev/null || { echo "bench/flows.sh needs $t (apt-get install tcpreplay tcpdump softflowd nfdump)" >&2; exit 1; }
done
GOFLOW=$(command -v goflow2 || ls ~/go/bin/goflow2 2>/dev/null || true)
W=$PWD/target/release/wanperf
FLOOD=$PWD/bench/flows_flood.py
WORK=$(mktemp -d /tmp/wanperf-bench-flows.XXXXXX)
PID=""
cleanup() {
    [ -n "$PID" ] && kill "$PID" 2>/dev/null || true
    [ -n "${KEEP:-}" ] && echo "kept $WORK" >&2 || rm -rf "$WORK"
}
trap cleanup EXIT
# The collectors take turns on this port of this namespace's loopback.
PORT=39995

# ---- the export to replay ----------------------------------------------------------------
# softflowd on lo records 30,000 UDP flows (to 127.x.y.1) and exports them to $PORT, where
# nobody listens and tcpdump captures them; checksums are fixed for replay.
capture() {
    local v=$1 t s
    tcpdump -i lo -U -n -w "$WORK/raw$v.pcap" "udp and dst port $PORT" 2> "$WORK/tcpdump.log" &
    t=$!
    until grep -q listening "$WORK/tcpdump.log"; do sleep 0.05; done
    softflowd -i lo -n 127.0.0.1:$PORT -v "$v" -m 100000 -d -t maxlife=60 -c "$WORK/sf.ctl" > "$WORK/sf.log" 2>&1 &
    s=$!
    until [ -S "$WORK/sf.ctl" ]; do sleep 0.05; done
    bash -c 'for i in $(seq 1 30000); do echo x > /dev/udp/127.$((i / 256 % 64 + 1)).$((i % 256)).1/$((20000 + i % 1000)); done' 2> /dev/null || true
    softflowctl -c "$WORK/sf.ctl" shutdown > /dev/null
    wait $s || true
    sleep 0.5
    kill $t
    wait $t || true
    tcprewrite --fixcsum -i "$WORK/raw$v.pcap" -o "$WORK/v$v.pcap"
}

# ---- collectors ----------------------------------------------------------------------------
udp_col() { # column N of this port's socket line in /proc/net/udp (rx_queue is "tx:rx" col 5)
    awk -v p="$(printf ':%04X' $PORT)" -v c="$1" '$2 ~ p"$" {print $c; exit}' /proc/net/udp
}
drops() { udp_col 13; }
drain() { # until the socket's receive queue is empty
    local i
    for i in $(seq 1 200); do
        [ "$(udp_col 5 | cut -d: -f2)" = "00000000" ] && break
        sleep 0.05
    done
    sleep 0.3
}
# CPU seconds of every thread of the collector, from the scheduler's nanosecond accounting
# (/proc/PID/stat's clock ticks are 10 ms: too coarse for a replay that takes tenths of a second).
cpu_s() { cat /proc/"$PID"/task/*/schedstat | awk '{ns += $1} END {printf "%.4f", ns / 1e9}'; }
ready() { until ss -Huln "sport = :$PORT" | grep -q .; do sleep 0.05; done; }

start() {
    case "$1" in
        wanperf)
            rm -f "$WORK"/w.sqlite*
            taskset -c 1 "$W" flows collect --listen 127.0.0.1:$PORT --db "$WORK/w.sqlite" --json > "$WORK/w.json" 2> "$WORK/w.err" &
            PID=$! ;;
        nfcapd)
            rm -rf "$WORK/nf"; mkdir "$WORK/nf"
            taskset -c 1 nfcapd -w "$WORK/nf" -p $PORT -b 127.0.0.1 -B 16777216 > "$WORK/nfcapd.log" 2>&1 &
            PID=$! ;;
        goflow2)
            taskset -c 1 "$GOFLOW" -listen "netflow://127.0.0.1:$PORT" -addr 127.0.0.1:0 -format json \
                -transport.file "$WORK/g.json" > "$WORK/g.log" 2>&1 &
            PID=$! ;;
    esac
    ready
}
stop() { # prints the records the collector decoded
    local tool=$1
    # Called in $(...): a subshell cannot wait for the collector, so watch it end (it writes
    # its summary on SIGTERM) — a zombie counts as ended.
    kill "$PID"
    local i
    for i in $(seq 1 600); do
        [ -e "/proc/$PID" ] && [ "$(awk '{print $3}' "/proc/$PID/stat" 2> /dev/null)" != Z ] || break
        sleep 0.05
    done
    case "$tool" in
        wanperf) python3 -c 'import json,sys; print(sum(e["records"] for e in json.load(open(sys.argv[1]))["exporters"]))' "$WORK/w.json" ;;
        nfcapd) nfdump -R "$WORK/nf" -I | awk '$1 == "Flows:" {print $2}' ;;
        goflow2) grep -c . "$WORK/g.json" || true ;;
    esac
}

capture 9
capture 10
declare -A DGRAMS RECS
for v in 9 10; do
    DGRAMS[$v]=$(python3 "$FLOOD" count "$WORK/v$v.pcap")
    # What one replay holds, decoded by wanperf at a gentle rate.
    start wanperf
    tcpreplay -q -i lo --pps 2000 "$WORK/v$v.pcap" > /dev/null 2>&1
    drain
    RECS[$v]=$(stop wanperf)
    echo "v$v export: ${DGRAMS[$v]} datagrams, ${RECS[$v]} records per replay ($(( RECS[$v] / DGRAMS[$v] )) per datagram)"
done

TOOLS="wanperf nfcapd"
[ -n "$GOFLOW" ] && TOOLS="$TOOLS goflow2" || echo "goflow2 not found: compared with nfcapd only"
RESULTS=$WORK/results
: > "$RESULTS"
printf '%-6s %-8s %5s %10s %8s %12s %12s %9s\n' round tool proto records cpu_s "rec/cpu-s" "rec/wall-s" drops
for r in $(seq 1 "$ROUNDS"); do
    for v in 9 10; do
        for tool in $TOOLS; do
            start "$tool"
            d0=$(drops); c0=$(cpu_s)
            out=$(taskset -c 0 tcpreplay -i lo --topspeed --preload-pcap --loop="$LOOPS" "$WORK/v$v.pcap" 2>&1)
            secs=$(echo "$out" | awk '/Actual:/ {for (i = 1; i <= NF; i++) if ($i == "in") print $(i + 1)}' | head -1)
            drain
            c1=$(cpu_s); d1=$(drops)
            recs=$(stop "$tool")
            cpu=$(echo "$c1 - $c0" | bc -l)
            [ -n "$secs" ] || secs=0
            per_cpu=$(echo "if ($cpu > 0) $recs / $cpu else 0" | bc -l)
            per_wall=$(echo "if ($secs > 0) $recs / $secs else 0" | bc -l)
            printf '%-6s %-8s %5s %10s %8.3f %12.0f %12.0f %9s\n' "$r" "$tool" "v$v" "$recs" "$cpu" \
                "$per_cpu" "$per_wall" "$((d1 - d0))"
            echo "$tool v$v $per_cpu $per_wall $((d1 - d0)) ${recs:-0}" >> "$RESULTS"
        done
    done
done
echo
echo "offered per replay: $LOOPS × each pcap at top speed; medians over $ROUNDS rounds:"
python3 - "$RESULTS" <<'EOF'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
med = {}
for tool, v, cpu_rate, wall_rate, drops, recs in rows:
    med.setdefault((tool, v), []).append((float(cpu_rate), float(wall_rate), int(drops)))
for (tool, v), xs in sorted(med.items()):
    c = statistics.median(x[0] for x in xs); w = statistics.median(x[1] for x in xs)
    print(f"  {tool:8} {v:4}  {c:12,.0f} records/CPU-s  {w:12,.0f} records/wall-s  drops {sum(x[2] for x in xs)}")
for v in ("v9", "v10"):
    ours = statistics.median(x[0] for x in med[("wanperf", v)])
    for other in ("nfcapd", "goflow2"):
        if (other, v) in med:
            theirs = statistics.median(x[0] for x in med[(other, v)])
            print(f"  {v}: wanperf / {other} = {ours / theirs:.2f}× per CPU second")
EOF

# ---- steady rate: no drops ---------------------------------------------------------------
per=$(( RECS[9] / DGRAMS[9] ))
pps=$(( RATE / per ))
loops=$(( (STEADY * pps + DGRAMS[9] - 1) / DGRAMS[9] ))
echo
echo "steady: wanperf at $RATE records/s ($pps datagrams/s of v9) for about $STEADY s ($loops replays)"
start wanperf
d0=$(drops)
taskset -c 0 tcpreplay -q -i lo --pps="$pps" --loop="$loops" "$WORK/v9.pcap" > /dev/null 2>&1
drain
d1=$(drops)
recs=$(stop wanperf)
echo "  records decoded $recs of $(( loops * RECS[9] )) sent, socket drops $((d1 - d0))"

# ---- flood from many exporters: memory stays bounded -------------------------------------
echo
echo "flood: 5 datagrams of v9 (template and data) from each of $EXPORTERS source addresses"
for tool in wanperf nfcapd; do
    start "$tool"
    d0=$(drops)
    sent=$(python3 "$FLOOD" flood "$WORK/v9.pcap" $PORT "$EXPORTERS" 5)
    drain
    d1=$(drops)
    hwm=$(awk '/VmHWM/ {print $2}' "/proc/$PID/status")
    recs=$(stop "$tool")
    echo "  $tool: $sent datagrams, $recs records, socket drops $((d1 - d0)), peak RSS $(( hwm / 1024 )) MiB"
done
