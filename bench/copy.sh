#!/usr/bin/env bash
# Copy benchmark on loopback, competitors in the same invocation, interleaved:
#   wanperf copy (serve --root; --no-fsync, default, --direct, --hash xxh3) vs scp and rsync -W over ssh (aes128-gcm), rsync's daemon
#   (no ssh), and tar | nc for reference; a SIZE file from the page cache to a file on disk
#   and to a file on tmpfs; then N small files of 4 KiB; then --compress auto vs off on random
#   data. Medians of ROUNDS, and ratios against wanperf.
#
#   bench/copy.sh                      # 4 GiB, 3 rounds, 20000 small files
#   SIZE=1G ROUNDS=5 SMALL=5000 bench/copy.sh
#   PARTS="big" bench/copy.sh          # only the large file (parts: big small auto)
#   TOOLS="wanperf-fsync scp rsync-ssh" PARTS=big bench/copy.sh   # some of the tools
#
# Needs root (sshd and the rsync daemon run on loopback ports for the run), openssh-server,
# rsync and netcat-openbsd (apt-get install openssh-server rsync netcat-openbsd).
set -euo pipefail
cd "$(dirname "$0")/.."
SIZE=${SIZE:-4G} ROUNDS=${ROUNDS:-3} SMALL=${SMALL:-20000} PARTS=${PARTS:-big small auto}
cargo build --release -q -p wanperf
W=$PWD/target/release/wanperf
for t in scp rsync nc /usr/sbin/sshd; do
    command -v "$t" >/dev/null || { echo "missing $t (apt-get install openssh-server rsync netcat-openbsd)" >&2; exit 1; }
done
work=$(mktemp -d /tmp/wanperf-copy-bench.XXXXXX)
shm=$(mktemp -d /dev/shm/wanperf-copy-bench.XXXXXX)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$work" "$shm"; }
trap cleanup EXIT

# sshd on 127.0.0.1:2222 with throwaway keys, root login by key only.
ssh-keygen -q -t ed25519 -N '' -f "$work/hostkey"
ssh-keygen -q -t ed25519 -N '' -f "$work/id"
mkdir -p /root/.ssh && chmod 700 /root/.ssh
touch /root/.ssh/authorized_keys
cp /root/.ssh/authorized_keys "$work/authorized_keys.saved"
cat "$work/id.pub" >> /root/.ssh/authorized_keys
trap 'cp "$work/authorized_keys.saved" /root/.ssh/authorized_keys; cleanup' EXIT
mkdir -p /run/sshd
/usr/sbin/sshd -D -p 2222 -o ListenAddress=127.0.0.1 -o HostKey="$work/hostkey" -o PermitRootLogin=prohibit-password \
    -o PasswordAuthentication=no -o UsePAM=no -o PidFile="$work/sshd.pid" &
pids+=($!)
SSH="ssh -p 2222 -i $work/id -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR -c aes128-gcm@openssh.com"
# rsync daemon on 127.0.0.1:8873 with one module per destination.
cat > "$work/rsyncd.conf" <<EOF
use chroot = no
[disk]
path = $work/dst
read only = no
uid = root
gid = root
[shm]
path = $shm/dst
read only = no
uid = root
gid = root
EOF
mkdir -p "$work/dst" "$shm/dst"
rsync --daemon --no-detach --address=127.0.0.1 --port=8873 --config="$work/rsyncd.conf" &
pids+=($!)
# wanperf serve with a root on disk and one on tmpfs.
"$W" serve --listen 127.0.0.1:5391 --root "$work/dst" 2>"$work/serve-disk.log" &
pids+=($!)
"$W" serve --listen 127.0.0.1:5392 --root "$shm/dst" 2>"$work/serve-shm.log" &
pids+=($!)
for _ in $(seq 50); do $SSH root@127.0.0.1 true 2>/dev/null && break; sleep 0.1; done

echo "machine: $(nproc) cores, $(uname -r); $(ssh -V 2>&1); $(rsync --version | head -1)"
head -c "$SIZE" /dev/urandom > "$work/big.bin"
cat "$work/big.bin" > /dev/null
bytes=$(stat -c %s "$work/big.bin")

declare -A T
run() { # name dstdir cmd...
    local name=$1 d=$2; shift 2
    rm -rf "${d:?}"/* 2>/dev/null || true
    sync
    local t0 t1
    t0=$(date +%s%N)
    "$@" >/dev/null 2>"$work/err" || { echo "$name failed: $(tail -2 "$work/err")" >&2; return 1; }
    t1=$(date +%s%N)
    T[$name]+="$(( (t1 - t0) / 1000000 )) "
}
median() { printf '%s\n' $1 | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

# One timed command per tool; each round starts the list one tool further on, so that no
# tool is always the one that runs first (after the others' files were freed: on this VM a
# page freed a while ago goes back to the host and costs a fault when it is written again).
big() { # tool dst dir port
    local tool=$1 dst=$2 d=$3 port=$4
    case $tool in
        wanperf) run "wanperf-$dst" "$d" "$W" copy -p "$port" --no-fsync -P 2 "$work/big.bin" 127.0.0.1: ;;
        wanperf-fsync) run "wanperf-fsync-$dst" "$d" "$W" copy -p "$port" -P 2 "$work/big.bin" 127.0.0.1: ;;
        # O_DIRECT at the receiver (tmpfs is memory: there it is the buffered path again).
        wanperf-direct) run "wanperf-direct-$dst" "$d" "$W" copy -p "$port" -P 2 --direct "$work/big.bin" 127.0.0.1: ;;
        # XXH3-128 instead of BLAKE3 for the blocks (fsync as the default; and with O_DIRECT).
        wanperf-xxh3) run "wanperf-xxh3-$dst" "$d" "$W" copy -p "$port" -P 2 --hash xxh3 "$work/big.bin" 127.0.0.1: ;;
        wanperf-xxh3-direct) run "wanperf-xxh3-direct-$dst" "$d" "$W" copy -p "$port" -P 2 --hash xxh3 --direct "$work/big.bin" 127.0.0.1: ;;
        scp) run "scp-$dst" "$d" scp -q -P 2222 -i "$work/id" -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null \
            -o LogLevel=ERROR -c aes128-gcm@openssh.com "$work/big.bin" "root@127.0.0.1:$d/" ;;
        rsync-ssh) run "rsync-ssh-$dst" "$d" rsync -W -e "$SSH" "$work/big.bin" "root@127.0.0.1:$d/" ;;
        rsyncd) run "rsyncd-$dst" "$d" rsync -W "$work/big.bin" "rsync://127.0.0.1:8873/$dst/" ;;
        tar-nc) run "tar-nc-$dst" "$d" sh -c "nc -l 127.0.0.1 9999 | tar -x -C '$d' & sleep 0.2; tar -c -C '$work' big.bin | nc -N 127.0.0.1 9999; wait" ;;
    esac
}
want() { case " $PARTS " in *" $1 "*) return 0 ;; esac; return 1; }
# TOOLS="wanperf-xxh3-direct scp rsync-ssh" picks some (the first one is the ratios' base).
read -r -a TOOLS <<< "${TOOLS:-wanperf wanperf-fsync wanperf-direct wanperf-xxh3 wanperf-xxh3-direct scp rsync-ssh rsyncd tar-nc}"
want big && for r in $(seq "$ROUNDS"); do
    for dst in disk shm; do
        d=$work/dst; [ $dst = shm ] && d=$shm/dst
        port=5391; [ $dst = shm ] && port=5392
        for i in $(seq 0 $((${#TOOLS[@]} - 1))); do
            big "${TOOLS[$(( (i + r - 1) % ${#TOOLS[@]} ))]}" "$dst" "$d" "$port"
        done
    done
done

if want big; then
echo
echo "One $SIZE file ($bytes B) from the page cache, median of $ROUNDS (ms, MB/s, wanperf's speed over it):"
for dst in disk shm; do
    w=$(median "${T[${TOOLS[0]}-$dst]}")
    for tool in "${TOOLS[@]}"; do
        m=$(median "${T[$tool-$dst]}")
        awk -v n="$tool → $dst" -v m="$m" -v b="$bytes" -v w="$w" \
            'BEGIN { printf "  %-22s %8d ms  %8.1f MB/s  wanperf %.2f×\n", n, m, b / m / 1000, m / w }'
    done
done

# Hashing's share of the wall time (the hash and verify stages' CPU time over the wall time).
for hash in blake3 xxh3; do
rm -rf "$shm"/dst/*
"$W" copy -p 5392 --no-fsync -P 2 --hash $hash --json "$work/big.bin" 127.0.0.1: | tail -1 > "$work/end.json"
echo "  --hash $hash:"
python3 - "$work/end.json" <<'EOF'
import json, sys
e = json.load(open(sys.argv[1]))["summary"]
c = e["copy"]
h = [s for s in c["sender"]["stages"] if s["stage"] == "hash"][0]
v = [s for s in c["receiver"]["stages"] if s["stage"] == "verify"][0]
hc, vc, wall = h.get("cpu_s") or 0, v.get("cpu_s") or 0, c["wall_s"]
print(f"  hashing: sender {hc:.2f} CPU s, receiver's verification {vc:.2f} CPU s, over a {wall:.2f} s copy: "
      f"{100 * hc / wall:.1f} % and {100 * vc / wall:.1f} % of one core's time, "
      f"{100 * (hc + vc) / wall / 2:.1f} % of the 2 cores both ends share here")
print(f"  verdict: {e['verdict']['text']}")
EOF
done

fi

# Many small files.
if want small; then
mkdir -p "$work/small"
python3 bench/small_files.py "$work/small" "$SMALL"
unset T; declare -A T
for r in $(seq "$ROUNDS"); do
    run wanperf-small "$shm/dst" "$W" copy -p 5392 --no-fsync "$work/small" 127.0.0.1:
    run wanperf-fsync-small "$shm/dst" "$W" copy -p 5392 "$work/small" 127.0.0.1:
    run rsync-ssh-small "$shm/dst" rsync -rW -e "$SSH" "$work/small" "root@127.0.0.1:$shm/dst/"
    run rsyncd-small "$shm/dst" rsync -rW "$work/small" "rsync://127.0.0.1:8873/shm/"
    run scp-small "$shm/dst" scp -rq -P 2222 -i "$work/id" -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null \
        -o LogLevel=ERROR -c aes128-gcm@openssh.com "$work/small" "root@127.0.0.1:$shm/dst/"
done
echo
echo "$SMALL files of 4 KiB to tmpfs, median of $ROUNDS:"
w=$(median "${T[wanperf-small]}")
for tool in wanperf-small wanperf-fsync-small rsync-ssh-small rsyncd-small scp-small; do
    m=$(median "${T[$tool]}")
    awk -v n="$tool" -v m="$m" -v k="$SMALL" -v w="$w" \
        'BEGIN { printf "  %-22s %8d ms  %8.0f files/s  wanperf %.2f×\n", n, m, k / m * 1000, m / w }'
done

fi

# Compression auto on random data vs off.
want auto || exit 0
unset T; declare -A T
for r in $(seq "$ROUNDS"); do
    run off "$shm/dst" "$W" copy -p 5392 --no-fsync -P 2 -z off "$work/big.bin" 127.0.0.1:
    run auto "$shm/dst" "$W" copy -p 5392 --no-fsync -P 2 -z auto "$work/big.bin" 127.0.0.1:
done
echo
a=$(median "${T[auto]}") o=$(median "${T[off]}")
awk -v a="$a" -v o="$o" 'BEGIN { printf "--compress auto on random data: %d ms vs off %d ms (%+.1f %%)\n", a, o, 100 * (a - o) / o }'
