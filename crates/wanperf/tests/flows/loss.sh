# Runs on router r1 of the network in tests/flows.rs (export_loss_...): softflowd records
# 20,000 UDP flows that cross r1's wan0 into nfcapd's files; then nfreplay (nfdump) exports
# the same records as NetFlow v9 from r1 and, at the same time, from host b, to
# `wanperf flows collect` on host c. The link r1 → c drops 1 % of packets: both exporters'
# datagrams cross it. A first replay to a collector on r1's loopback counts the datagrams sent.
# Environment: D (work directory), W (wanperf); the collector on c writes $D/collect.err.
set -e
nfcapd -w $D/nf -p 9995 -b 127.0.0.1 > $D/nfcapd.log 2>&1 &
N=$!
until ss -Huln 'sport = :9995' | grep -q .; do sleep 0.05; done
softflowd -i wan0 -n 127.0.0.1:9995 -v 9 -d -t maxlife=60 -c $D/sf.ctl > $D/sf.log 2>&1 &
S=$!
until [ -S $D/sf.ctl ]; do sleep 0.05; done
# One flow per destination port (bash's /dev/udp opens a new socket each time).
A=$WANPERF_ADDR_A bash -c 'for p in $(seq 10000 29999); do echo x > /dev/udp/$A/$p; done'
softflowctl -c $D/sf.ctl shutdown > /dev/null
wait $S || true
sleep 1
kill $N; wait $N || true
# One file, whatever nfcapd's rotation did.
nfdump -R $D/nf -w $D/all.nf > /dev/null
nfdump -r $D/all.nf -q -o csv | grep -c . > $D/records
$W flows collect --listen 127.0.0.1:0 --db $D/ref.sqlite --flush 1 --json > $D/ref.json 2> $D/ref.err &
R=$!
until grep -q listening $D/ref.err; do sleep 0.05; done
nfreplay -r $D/all.nf -H 127.0.0.1 -p $(grep -o '127.0.0.1:[0-9]*' $D/ref.err | head -1 | cut -d: -f2) -v 9 -d 300
sleep 0.3
kill $R; wait $R
until grep -q listening $D/collect.err 2>/dev/null; do sleep 0.05; done
grep -o '0.0.0.0:[0-9]*' $D/collect.err | head -1 | cut -d: -f2 > $D/port.tmp
mv $D/port.tmp $D/port
nfreplay -r $D/all.nf -H $WANPERF_ADDR_C -p $(cat $D/port) -v 9 -d 300
until [ -f $D/b.done ]; do sleep 0.05; done
# The last datagrams cross the link before the collector is stopped.
sleep 0.5
