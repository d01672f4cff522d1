#!/usr/bin/env bash
# Copy over an emulated wide-area path (issue 13's path rows), competitors interleaved in
# each round: a 100 ms RTT, 1 Gbit/s path (`wanperf path`, queue of one BDP) between two
# network namespaces, with wanperf serve --root, sshd and rsync's daemon on the right host.
#   1. lossless: wanperf tput -P N -n SIZE (memory to memory, the same bytes and streams),
#      wanperf copy -P N, scp, of a SIZE file
#   2. 0.01 % random loss both ways: wanperf copy -P N against scp
#   3. SMALL files of 4 KiB: wanperf copy against rsync -rW over ssh and rsync's daemon
# Medians of ROUNDS, ratios against wanperf; everything stays inside the two namespaces.
#
#   bench/copy_path.sh                         # 1 GiB, 3 rounds, 100,000 small files, -P 4
#   SIZE=256M ROUNDS=1 SMALL=10000 bench/copy_path.sh
#   PARTS="1" bench/copy_path.sh               # only the lossless rows
#
# Needs root, openssh-server and rsync.
set -euo pipefail
cd "$(dirname "$0")/.."
SIZE=${SIZE:-1G} ROUNDS=${ROUNDS:-3} SMALL=${SMALL:-100000} P=${P:-4} PARTS=${PARTS:-1 2 3}
RTT=${RTT:-100ms} RATE=${RATE:-1G} QUEUE=${QUEUE:-12500000}
cargo build --release -q -p wanperf
W=$PWD/target/release/wanperf
for t in scp rsync /usr/sbin/sshd; do
    command -v "$t" >/dev/null || { echo "missing $t (apt-get install openssh-server rsync)" >&2; exit 1; }
done
work=$(mktemp -d /tmp/wanperf-copy-path.XXXXXX)
chmod 755 "$work"
NAME=cpb$$
up=""
cleanup() {
    [ -n "$up" ] && "$W" path down "$up" >/dev/null 2>&1 || true
    [ -f "$work/authorized_keys.saved" ] && cp "$work/authorized_keys.saved" /root/.ssh/authorized_keys
    rm -rf "$work"
}
trap cleanup EXIT

ssh-keygen -q -t ed25519 -N '' -f "$work/hostkey"
ssh-keygen -q -t ed25519 -N '' -f "$work/id"
mkdir -p /root/.ssh /run/sshd && chmod 700 /root/.ssh
touch /root/.ssh/authorized_keys
cp /root/.ssh/authorized_keys "$work/authorized_keys.saved"
cat "$work/id.pub" >> /root/.ssh/authorized_keys
mkdir -p "$work/dst"
cat > "$work/rsyncd.conf" <<EOF
use chroot = no
[dst]
path = $work/dst
read only = no
uid = root
gid = root
EOF
PEER=198.18.0.2
SSH="ssh -p 2222 -i $work/id -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR -c aes128-gcm@openssh.com"

# Brings the path up with LOSS and starts the right host's servers; waits until they answer.
path_up() { # loss
    "$W" path up "$NAME" --rtt "$RTT" --rate "$RATE" --queue "$QUEUE" --loss "$1" >/dev/null
    up=$NAME
    "$W" path exec "$NAME" right -- "$W" serve --listen "$PEER:5301" --root "$work/dst" --allow 198.18.0.0/15 \
        2>"$work/serve.log" &
    "$W" path exec "$NAME" right -- /usr/sbin/sshd -D -p 2222 -o ListenAddress=$PEER -o HostKey="$work/hostkey" \
        -o PermitRootLogin=prohibit-password -o PasswordAuthentication=no -o UsePAM=no -o PidFile="$work/sshd.pid" &
    "$W" path exec "$NAME" right -- rsync --daemon --no-detach --address=$PEER --port=8873 --config="$work/rsyncd.conf" &
    for _ in $(seq 100); do
        if left $SSH root@$PEER true 2>/dev/null && grep -q "listening on" "$work/serve.log"; then return 0; fi
        sleep 0.1
    done
    echo "the right host's servers did not start" >&2
    exit 1
}
path_down() { "$W" path down "$NAME" >/dev/null; up=""; wait 2>/dev/null || true; }
left() { "$W" path exec "$NAME" left -- "$@"; }

echo "machine: $(nproc) cores, $(uname -r); $(ssh -V 2>&1); $(rsync --version | head -1)"
echo "path: RTT $RTT, $RATE, queue $QUEUE B; wanperf -P $P"
head -c "$SIZE" /dev/urandom > "$work/big.bin"
bytes=$(stat -c %s "$work/big.bin")

declare -A T
run() { # name cmd...
    local name=$1; shift
    rm -rf "${work:?}"/dst/*
    sync
    local t0 t1
    t0=$(date +%s%N)
    "$@" >"$work/out" 2>"$work/err" || { echo "$name failed: $(tail -2 "$work/err")" >&2; return 1; }
    t1=$(date +%s%N)
    T[$name]+="$(( (t1 - t0) / 1000000 )) "
}
median() { printf '%s\n' $1 | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
row() { # label name reference bytes
    local m w
    m=$(median "${T[$2]}"); w=$(median "${T[$3]}")
    awk -v n="$1" -v m="$m" -v b="$4" -v w="$w" \
        'BEGIN { printf "  %-34s %8d ms  %8.1f MB/s  %7.1f Mbit/s  wanperf %.2f×\n", n, m, b / m / 1000, b * 8 / m / 1000, m / w }'
}
scp_big() { left scp -q -P 2222 -i "$work/id" -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null \
    -o LogLevel=ERROR -c aes128-gcm@openssh.com "$work/big.bin" "root@$PEER:$work/dst/"; }

want() { case " $PARTS " in *" $1 "*) return 0 ;; esac; return 1; }

if want 1; then
path_up 0
for r in $(seq "$ROUNDS"); do
    left "$W" tput "$PEER" -P "$P" -n "$bytes" --json > "$work/tput-$r.json"
    run copy left "$W" copy -P "$P" --no-fsync --json "$work/big.bin" "$PEER:"
    tail -1 "$work/out" > "$work/copy-end-$r.json"
    run scp scp_big
done
path_down
echo
echo "1. $SIZE ($bytes B), lossless, median of $ROUNDS (whole commands, start to exit):"
row "wanperf copy -P $P" copy copy "$bytes"
row "scp (aes128-gcm)" scp copy "$bytes"
python3 - "$ROUNDS" "$work" <<'EOF'
import json, statistics, sys
n, work = int(sys.argv[1]), sys.argv[2]
last = lambda f: json.loads(open(f).read().strip().splitlines()[-1])["summary"]
tput = [last(f"{work}/tput-{r}.json")["throughput_bps"] for r in range(1, n + 1)]
ends = [last(f"{work}/copy-end-{r}.json") for r in range(1, n + 1)]
rates = [e["copy"]["rate_bytes_s"] * 8 for e in ends]
print(f"  wanperf tput -P same streams, -n the same bytes: {statistics.median(tput) / 1e6:.1f} Mbit/s "
      f"(rounds: {', '.join(f'{t / 1e6:.0f}' for t in tput)})")
print(f"  wanperf copy's own rate (first block to last write): {statistics.median(rates) / 1e6:.1f} Mbit/s "
      f"(rounds: {', '.join(f'{x / 1e6:.0f}' for x in rates)}) = "
      f"{100 * statistics.median(rates) / statistics.median(tput):.1f} % of tput; per round "
      f"{', '.join(f'{100 * c / t:.1f} %' for c, t in zip(rates, tput))}")
print(f"  verdict (last round): {ends[-1]['verdict']['text']}")
EOF
fi

if want 2; then
path_up 0.01%
unset T; declare -A T
for r in $(seq "$ROUNDS"); do
    run copy-loss left "$W" copy -P "$P" --no-fsync "$work/big.bin" "$PEER:"
    run scp-loss scp_big
done
path_down
echo
echo "2. $SIZE with 0.01 % loss each way, median of $ROUNDS:"
row "wanperf copy -P $P" copy-loss copy-loss "$bytes"
row "scp (aes128-gcm)" scp-loss copy-loss "$bytes"
fi

want 3 || exit 0
mkdir -p "$work/small"
python3 bench/small_files.py "$work/small" "$SMALL"
path_up 0
unset T; declare -A T
for r in $(seq "$ROUNDS"); do
    run small left "$W" copy -P "$P" --no-fsync "$work/small" "$PEER:"
    run small-fsync left "$W" copy -P "$P" "$work/small" "$PEER:"
    run rsync-ssh left rsync -rW -e "$SSH" "$work/small" "root@$PEER:$work/dst/"
    run rsyncd left rsync -rW "$work/small" "rsync://$PEER:8873/dst/"
done
path_down
echo
echo "3. $SMALL files of 4 KiB, median of $ROUNDS:"
w=$(median "${T[small]}")
for tool in small small-fsync rsync-ssh rsyncd; do
    m=$(median "${T[$tool]}")
    awk -v n="$tool" -v m="$m" -v k="$SMALL" -v w="$w" \
        'BEGIN { printf "  %-22s %8d ms  %8.0f files/s  wanperf %.2f×\n", n, m, k / m * 1000, m / w }'
done
