#!/usr/bin/env python3
"""Offload with per-packet decisions (issue 40): iperf3 -P 4 over one emulated link at
100 ms RTT with 0.01 % random loss, and with a policer, with segmentation offload kept
(wanperf's design now: loss and the policer decide per segment and split a super-packet only
where needed) against offload off (`offload = false`: one packet per read and write, how
every lossy or policed link ran until session 37), interleaved in one run.

Per run: goodput, the emulator's own loss rate per segment (random losses / packets in,
against the set 0.01 %), the sender's retransmits against the emulator's drops (one segment
each), the emulator's lateness p99. Medians and the ratio new/old at the end. Every run is
bounded (iperf3 -t, a timeout); nothing leaves the emulated hosts.
"""
import argparse, json, os, statistics, subprocess, sys, tempfile

TOPO = """name = "lossy"
[[host]]
name = "a"
[[host]]
name = "b"
[[link]]
a = "a"
b = "b"
delay = "50ms"
queue = "100000p"
offload = {offload}
{extra}
"""
CASES = {
    "loss 0.01 %": 'loss = "0.01%"',
    "policer 5 Gbit/s": 'policer = "5G,10MB"',
}

def run(wp, topo, secs):
    with tempfile.NamedTemporaryFile("w", suffix=".toml", delete=False) as f:
        f.write(topo)
        path = f.name
    try:
        args = [wp, "net", "run", path, "--json", "--on", "b=exec iperf3 -s -1", "--",
                "iperf3", "-c", "198.18.0.2", "-P", "4", "-t", str(secs), "-J"]
        p = subprocess.run(args, capture_output=True, text=True, timeout=secs + 60)
    finally:
        os.unlink(path)
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(args)}: {p.stderr[-800:]}")
    end = json.loads(p.stdout)["end"]
    stats = None
    for line in p.stderr.splitlines():
        if line.startswith("{") and '"net_stats"' in line:
            stats = json.loads(line)
    ab = stats["links"][0]["ab"]
    be = ab["classes"]["best_effort"]
    return (end["sum_received"]["bits_per_second"], end["sum_sent"]["retransmits"], be["packets_in"],
            be["random_losses"], be["policer_drops"], ab["lateness"]["p99_us"], ab.get("unread_drops", 0))

def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--wanperf", default=os.path.join(os.path.dirname(__file__), "..", "target", "release", "wanperf"))
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--secs", type=int, default=10)
    a = ap.parse_args()
    wp = os.path.abspath(a.wanperf)
    res = {}
    for rep in range(a.reps):
        for case, extra in CASES.items():
            for design, offload in (("offload off", "false"), ("per-segment", "true")):
                r = run(wp, TOPO.format(offload=offload, extra=extra), a.secs)
                res.setdefault((case, design), []).append(r)
                bps, retr, pin, lost, pol, p99, unread = r
                print(f"round {rep + 1} {case:17s} {design:11s}: {bps / 1e9:5.2f} Gbit/s, "
                      f"loss {100 * lost / max(pin, 1):.4f} % of {pin} segments, emulator drops {lost + pol}, "
                      f"dropped unread {unread}, retransmits {retr}, lateness p99 {p99:.0f} µs", flush=True)
    print("\nmedians")
    for case in CASES:
        med = {}
        for design in ("offload off", "per-segment"):
            rows = res[(case, design)]
            bps = statistics.median(r[0] for r in rows)
            rate = statistics.median(100 * r[3] / max(r[2], 1) for r in rows)
            drops = statistics.median(r[3] + r[4] for r in rows)
            retr = statistics.median(r[1] for r in rows)
            p99 = statistics.median(r[5] for r in rows)
            unread = statistics.median(r[6] for r in rows)
            med[design] = bps
            print(f"  {case:17s} {design:11s}: {bps / 1e9:5.2f} Gbit/s, loss {rate:.4f} %, drops {drops:.0f}, "
                  f"dropped unread {unread:.0f}, retransmits {retr:.0f}, lateness p99 {p99:.0f} µs")
        print(f"  {case:17s} goodput per-segment / offload off: {med['per-segment'] / med['offload off']:.2f}x")

if __name__ == "__main__":
    sys.exit(main())
