#!/usr/bin/env python3
"""Host-ring drops (issue 40): what the sending host's TUN device drops because the emulator
did not read it in time, with the kernel's default TUN queue (500 packets, how wanperf ran
until session 37) against wanperf's own default (10 000), interleaved in one run.

Cases (each bounded in time; the hosts are wanperf's emulated ones, nothing leaves them):
  unlimited  one iperf3 stream, 10 ms RTT, no rate limit: the emulator is the bottleneck
  oscars10   20 Reno streams of 256 KiB for 7 s over slac-cern-2005-oscars10 without its
             policer (1 Gbit/s, 170 ms, 0.011 % random loss: per-packet decisions, no offload)

The kernel's default is restored inside the sending host (`ip link set wan0 txqueuelen 500`,
a TUN device's queue is its ring) before the test starts, so one binary runs both designs.
Prints each run, then per case the medians and the ratio of drops (new / old).
"""
import argparse, json, os, statistics, subprocess, sys

def run(wp, link, cmd, right):
    args = [wp, "path", "run", "--json"] + link + ["--right", right, "--", "sh", "-c", cmd]
    p = subprocess.run(args, capture_output=True, text=True, timeout=120)
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(args)} failed: {p.stderr[-800:]}")
    stats = None
    for line in p.stderr.splitlines():
        if line.startswith('{"event":"path"'):
            stats = json.loads(line)["stats"]
    return p.stdout, stats

def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--wanperf", default=os.path.join(os.path.dirname(__file__), "..", "target", "release", "wanperf"))
    ap.add_argument("--reps", type=int, default=3)
    a = ap.parse_args()
    wp = os.path.abspath(a.wanperf)
    drops = "ip -s -j link show wan0 | python3 -c 'import json,sys; print(\"DROPS\", json.load(sys.stdin)[0][\"stats64\"][\"tx\"][\"dropped\"])'"
    cases = {
        "unlimited": (["--rtt", "10ms", "--queue", "100000p"], "iperf3 -s -1",
                      "iperf3 -c $WANPERF_PEER -t 5 -P 1 -J"),
        "oscars10": (["--preset", "slac-cern-2005-oscars10", "--policer", "none"], f"{wp} serve --allow 198.18.0.0/15",
                     f"{wp} tput $WANPERF_PEER -t 7 -P 20 -w 256k --cc reno --json | tail -1"),
    }
    res = {}
    for rep in range(a.reps):
        for case, (link, right, test) in cases.items():
            for design, ring in (("kernel 500", "ip link set wan0 txqueuelen 500; "), ("wanperf", "")):
                out, st = run(wp, link, f"{ring}sleep 1; {test}; {drops}", right)
                lines = out.strip().splitlines()
                n = int([l for l in lines if l.startswith("DROPS")][-1].split()[1])
                body = "\n".join(l for l in lines if not l.startswith("DROPS"))
                if case == "unlimited":
                    e = json.loads(body)["end"]
                    bps, retr = e["sum_received"]["bits_per_second"], e["sum_sent"]["retransmits"]
                else:
                    s = json.loads(body)["summary"]
                    bps, retr = s["throughput_bps"], s["retransmits"]
                p99 = st["up"]["lateness"]["p99_us"]
                res.setdefault((case, design), []).append((n, retr, bps, p99))
                print(f"round {rep + 1} {case:9s} {design:10s}: host-ring drops {n:6d}, retransmits {retr:6d}, "
                      f"{bps / 1e6:8.1f} Mbit/s, lateness p99 {p99:7.0f} µs", flush=True)
    print("\nmedians")
    for case in cases:
        med = {d: [statistics.median(x[i] for x in res[(case, d)]) for i in range(4)] for d in ("kernel 500", "wanperf")}
        for d, m in med.items():
            print(f"  {case:9s} {d:10s}: drops {m[0]:8.0f}, retransmits {m[1]:7.0f}, {m[2] / 1e6:8.1f} Mbit/s, p99 {m[3]:6.0f} µs")
        old, new = med["kernel 500"][0], med["wanperf"][0]
        print(f"  {case:9s} drops new/old: {new / old:.4f}" if old else f"  {case:9s} drops new/old: - (none before)")

if __name__ == "__main__":
    sys.exit(main())
