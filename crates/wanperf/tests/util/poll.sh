# Runs on router r1 of an emulated a — r1 — b network (tests/util.rs): snmpd serves r1's IF-MIB
# on r1's own loopback, and three `wanperf util poll`s read r1's wan0 (the a–r1 link) — SNMP
# v2c, SNMP v3 with authentication and privacy, and rtnetlink — while iperf3 loads the link
# out of r1 and then into it. Environment: D (work directory), W (wanperf).
set -e
. "$(dirname "$0")/../common/iperf3.sh"
IPERF3_LOG=$D/iperf3-s.log
export MIBS=
mkdir -p $D/persist
cat > $D/snmpd.conf <<EOF
[snmp] persistentDir $D/persist
agentAddress udp:127.0.0.1:161
rocommunity public 127.0.0.1
createUser wanperf SHA "authpass123" AES "privpass123"
rouser wanperf priv
EOF
# r1's namespace is this test's own: port 161 there cannot collide.
snmpd -f -Lo -C -c $D/snmpd.conf -p $D/snmpd.pid > $D/snmpd.log 2>&1 &
A=$!
until snmpget -v2c -c public -t 0.2 -r 0 127.0.0.1 1.3.6.1.2.1.1.3.0 > /dev/null 2>&1; do sleep 0.05; done
P="--iface wan0 --every 0.5 --json"
$W util poll --snmp 127.0.0.1 $P --db $D/util.sqlite > $D/v2c.json 2> $D/v2c.err &
S2=$!
$W util poll --snmp 127.0.0.1 --user wanperf --auth sha:authpass123 --priv aes:privpass123 $P --no-store \
    > $D/v3.json 2> $D/v3.err &
S3=$!
$W util poll --local --device r1 $P --db $D/util.sqlite > $D/local.json 2> $D/local.err &
L=$!
readings() { grep -c util_reading $1 || true; }
until [ $(readings $D/v2c.json) -ge 1 ] && [ $(readings $D/v3.json) -ge 1 ] && [ $(readings $D/local.json) -ge 1 ]; do
    sleep 0.05
done
# iputils ping measures the path across the link meanwhile (imported into the archive later).
ping -D -i 0.05 -c 200 $WANPERF_ADDR_A > $D/ping.txt &
G=$!
sleep 1
iperf3c $WANPERF_ADDR_A -t 3 > /dev/null
iperf3c $WANPERF_ADDR_A -t 3 -R > /dev/null
sleep 1
kill -INT $G; wait $G || true
# The link is idle now. snmpd answers from a cache of the kernel's counters: wait until it has
# caught up, then until every poller has read once more, and stop them (each reads a last time).
IDX=$(snmpwalk -v2c -c public -Oqn 127.0.0.1 1.3.6.1.2.1.31.1.1.1.1 | grep '"wan0"' | sed 's/ .*//; s/.*\.//')
rx() { sed 's/:/ /' /proc/net/dev | awk '$1 == "wan0" {print $2}'; }
until [ "$(snmpget -v2c -c public -Oqv 127.0.0.1 1.3.6.1.2.1.31.1.1.1.6.$IDX)" = "$(rx)" ]; do sleep 0.1; done
N2=$(readings $D/v2c.json); N3=$(readings $D/v3.json); NL=$(readings $D/local.json)
until [ $(readings $D/v2c.json) -gt $N2 ] && [ $(readings $D/v3.json) -gt $N3 ] && [ $(readings $D/local.json) -gt $NL ]; do
    sleep 0.05
done
kill $S2 $S3 $L
wait $S2 $S3 $L
kill $A; wait $A || true
