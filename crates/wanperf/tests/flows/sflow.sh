# Runs on router r1 of an emulated a — r1 — b network (tests/flows.rs): pmacctd's sfprobe
# plugin samples r1's wan0 (to a) 1 in $SAMP and sends sFlow v5 to `wanperf flows collect` while
# ping, iperf3 TCP both ways and UDP cross the link. Environment: D, W, SAMP.
set -e
. "$(dirname "$0")/../common/iperf3.sh"
IPERF3_LOG=$D/iperf3-s.log
$W flows collect --listen 127.0.0.1:0 --db $D/flows.sqlite --flush 1 --json > $D/collect.json 2> $D/collect.err &
C=$!
until grep -q listening $D/collect.err; do sleep 0.05; done
PORT=$(grep -o '127.0.0.1:[0-9]*' $D/collect.err | head -1 | cut -d: -f2)
cat > $D/pm.conf <<CONF
daemonize: false
pcap_interface: wan0
plugins: sfprobe
sfprobe_receiver: 127.0.0.1:$PORT
sfprobe_agentip: 127.0.0.1
sampling_rate: $SAMP
CONF
pmacctd -f $D/pm.conf > $D/pm.log 2>&1 &
P=$!
until grep -q "Sampling at" $D/pm.log; do sleep 0.05; done
ping -c 20 -i 0.02 -q $WANPERF_ADDR_A > /dev/null
iperf3c $WANPERF_ADDR_A -t 2 > /dev/null
iperf3c $WANPERF_ADDR_A -t 2 -R -P 2 > /dev/null
iperf3c $WANPERF_ADDR_A -u -b 5M -t 2 > /dev/null
# pmacctd sends what it holds when stopped; the datagrams cross loopback before the collector
# stops (it stores everything on SIGTERM).
kill $P; wait $P || true
sleep 0.5
kill $C; wait $C || true
