#!/usr/bin/env python3
"""Emulator benchmark (issue 3): how fast and how precise `wanperf path` is.

1. Through a path with 100 ms RTT and no rate limit, iperf3 goodput with -P 1 and -P 4
   (3 interleaved rounds; the hosts' TCP buffers may autotune to 64 MiB).
2. At 10 ms RTT under a bulk iperf3 load, the delay error: 1000 pings at 10 ms intervals
   (ping RTT minus 10 ms) and the emulator's own per-packet lateness (departure minus the
   theoretical departure time, the figures `path run --log` writes per packet).
mahimahi, the anchor, is not packaged for Debian 12, so its figure (about 0.3 Gbit/s at 80 ms
RTT, setuid root, 1 ms clock) is quoted from its users, not measured here.
"""
import argparse, json, os, statistics, subprocess, sys

def path_run(wp, link, cmd, right=None, timeout=120):
    args = [wp, "path", "run", "--json"] + link
    if right:
        args += ["--right", right]
    args += ["--"] + cmd
    p = subprocess.run(args, capture_output=True, text=True, timeout=timeout)
    stats = None
    for line in p.stderr.splitlines():
        if line.startswith('{"event":"path"'):
            stats = json.loads(line)["stats"]
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(args)} failed: {p.stderr[-500:]}")
    return p.stdout, stats

def pct(v, q):
    v = sorted(v)
    return v[min(len(v) - 1, int(q * len(v)))]

def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--wanperf", default=os.path.join(os.path.dirname(__file__), "..", "target", "release", "wanperf"))
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--secs", type=int, default=10)
    a = ap.parse_args()
    wp = os.path.abspath(a.wanperf)
    link100 = ["--rtt", "100ms", "--queue", "100000p"]
    res = {1: [], 4: []}
    for rep in range(a.reps):
        for P in (1, 4):
            out, st = path_run(wp, link100, ["iperf3", "-c", "198.18.0.2", "-t", str(a.secs), "-P", str(P), "-J"], right="iperf3 -s -1")
            bps = json.loads(out)["end"]["sum_received"]["bits_per_second"]
            res[P].append(bps)
            print(f"round {rep + 1}: 100 ms RTT, iperf3 -P {P}: {bps / 1e9:.2f} Gbit/s "
                  f"(emulator lateness p99 {st['up']['lateness']['p99_us']:.0f} µs)", file=sys.stderr, flush=True)
    script = ("iperf3 -c 198.18.0.2 -t 16 -P 1 > /dev/null & sleep 2; "
              "ping -c 1000 -i 0.01 -s 56 198.18.0.2; wait")
    out, st = path_run(wp, ["--rtt", "10ms", "--queue", "100000p"], ["sh", "-c", script], right="iperf3 -s -1")
    rtts = [float(l.split("time=")[1].split()[0]) for l in out.splitlines() if "time=" in l]
    err_us = [(r - 10.0) * 1000 for r in rtts]
    # The same at the target rate: a 2 Gbit/s bottleneck, pings marked EF in the priority class
    # so they do not wait behind the bulk queue.
    script2 = ("iperf3 -c 198.18.0.2 -t 16 -P 1 > /dev/null & sleep 2; "
               "ping -Q 184 -c 1000 -i 0.01 -s 56 198.18.0.2; wait")
    out2, st2 = path_run(wp, ["--rtt", "10ms", "--rate", "2G", "--queue", "2MB", "--priority", "dscp=46"],
                         ["sh", "-c", script2], right="iperf3 -s -1")
    rtts2 = [float(l.split("time=")[1].split()[0]) for l in out2.splitlines() if "time=" in l]
    err2 = [(r - 10.0) * 1000 for r in rtts2]
    print("\n| measurement | result |\n|---|---|")
    for P in (1, 4):
        print(f"| iperf3 -P {P} through 100 ms RTT, no rate limit (median of {a.reps}) | {statistics.median(res[P]) / 1e9:.2f} Gbit/s |")
    print(f"| ping RTT − 10 ms under load ({len(rtts)} of 1000 pings answered) | p50 {pct(err_us, .5):.0f} µs, p99 {pct(err_us, .99):.0f} µs, max {max(err_us):.0f} µs |")
    for d in ("up", "down"):
        l = st[d]["lateness"]
        print(f"| emulator lateness {d} (its own per-packet record) under that load | p50 {l['p50_us']:.1f} µs, p99 {l['p99_us']:.1f} µs, max {l['max_us']:.1f} µs |")


    print(f"| ping RTT − 10 ms, 2 Gbit/s bottleneck under load, pings in the priority class ({len(rtts2)} answered) | p50 {pct(err2, .5):.0f} µs, p99 {pct(err2, .99):.0f} µs, max {max(err2):.0f} µs |")
    for d in ("up", "down"):
        l = st2[d]["lateness"]
        print(f"| emulator lateness {d}, 2 Gbit/s bottleneck under load | p50 {l['p50_us']:.1f} µs, p99 {l['p99_us']:.1f} µs, max {l['max_us']:.1f} µs |")

if __name__ == "__main__":
    main()
