# Runs on router r1 of an emulated a — r1 — b network: softflowd exports what crosses r1's
# wan0 (to a) to nfcapd, which stores it and repeats every datagram to `wanperf flows collect`,
# so nfdump and wanperf read the same export. Traffic: ping, iperf3 TCP both ways, UDP.
# Environment: D (work directory), W (wanperf), V (export version), SAMP (sampling, optional).
set -e
. "$(dirname "$0")/../common/iperf3.sh"
IPERF3_LOG=$D/iperf3-s.log
$W flows collect --listen 127.0.0.1:0 --db $D/flows.sqlite --flush 1 --json > $D/collect.json 2> $D/collect.err &
C=$!
until grep -q listening $D/collect.err; do sleep 0.05; done
PORT=$(grep -o '127.0.0.1:[0-9]*' $D/collect.err | head -1 | cut -d: -f2)
# r1's namespace is this test's own: a fixed port there cannot collide.
nfcapd -w $D/nf -p 9995 -b 127.0.0.1 -R 127.0.0.1/$PORT > $D/nfcapd.log 2>&1 &
N=$!
until ss -Huln 'sport = :9995' | grep -q .; do sleep 0.05; done
softflowd -i wan0 -n 127.0.0.1:9995 -v $V ${SAMP:+-s $SAMP} -d -t maxlife=60 -c $D/sf.ctl > $D/sf.log 2>&1 &
S=$!
until [ -S $D/sf.ctl ]; do sleep 0.05; done
ping -c 20 -i 0.02 -q $WANPERF_ADDR_A > /dev/null
iperf3c $WANPERF_ADDR_A -t 2 > /dev/null
iperf3c $WANPERF_ADDR_A -t 2 -R -P 2 > /dev/null
iperf3c $WANPERF_ADDR_A -u -b 5M -t 2 > /dev/null
# Export every flow and exit; then give the loopback datagrams a moment to pass nfcapd's
# repeater before it and the collector are stopped (both store what they hold on SIGTERM).
softflowctl -c $D/sf.ctl shutdown > /dev/null
wait $S || true
sleep 1
kill $N; wait $N || true
sleep 0.5
kill $C; wait $C || true
