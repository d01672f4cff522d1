#!/usr/bin/env python3
"""Loopback throughput benchmark: wanperf against iperf3 and iperf2, interleaved.

Each round runs every configuration once, in order; rounds repeat. Goodput comes from each
tool's own report of what its receiver got; CPU is user+system seconds of both processes
(the client from getrusage of the child, the server from /proc/PID/stat deltas).
Prints medians, ratios and CPU seconds per GB moved, and a Markdown table for
docs/performance.md.
"""
import argparse
import json
import os
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import time

TICK = os.sysconf("SC_CLK_TCK")


def proc_cpu(pid):
    with open(f"/proc/{pid}/stat") as f:
        parts = f.read().rsplit(")", 1)[1].split()
    # Fields 14 and 15 (utime, stime) are at 11 and 12 after the comm field.
    return (int(parts[11]) + int(parts[12])) / TICK


def run_client(cmd, timeout):
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed: {p.stderr.strip()[:300]}")
    return p.stdout, cpu


def parse_wanperf(out):
    end = json.loads(out.strip().splitlines()[-1])
    s = end["summary"]
    return s["throughput_bps"], s["received_bytes"]


def parse_iperf3(out):
    d = json.loads(out)
    r = d["end"]["sum_received"]
    return r["bits_per_second"], r["bytes"]


def parse_iperf2(out):
    # -y C: timestamp,src,sport,dst,dport,id,interval,bytes,bps ; the last line is the sum.
    # iperf 2.1.8 prints one line per stream and no sum line with -y C; older ones add id -1.
    rows = [l.split(",") for l in out.strip().splitlines() if l.count(",") >= 8]
    sums = [r for r in rows if r[5] == "-1"]
    if sums:
        return float(sums[-1][8]), int(sums[-1][7])
    return sum(float(r[8]) for r in rows), sum(int(r[7]) for r in rows)


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--wanperf", default=os.path.join(os.path.dirname(__file__), "..", "target", "release", "wanperf"))
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--secs", type=float, default=5)
    ap.add_argument("--markdown", action="store_true", help="also print a Markdown table")
    ap.add_argument("--only", help="run only configurations whose name contains this (no ratios)")
    ap.add_argument("--iperf3", default="iperf3",
                    help="the iperf3 to compare with (default: the one on PATH; issue 41 asks for the "
                         "newest release built from source)")
    a = ap.parse_args()
    wp = os.path.abspath(a.wanperf)
    iperf3 = shutil.which(a.iperf3)
    for tool, found in (("iperf3", iperf3), ("iperf", shutil.which("iperf"))):
        if not found:
            sys.exit(f"{tool} is not installed (apt-get install iperf3 iperf)")
    version = subprocess.run([iperf3, "--version"], capture_output=True, text=True).stdout.splitlines()[0]
    print(f"iperf3: {iperf3} ({version})", file=sys.stderr)
    if not os.access(wp, os.X_OK):
        sys.exit(f"{wp} not built: cargo build --release")

    ports = {"wanperf": 15301, "iperf3": 15201, "iperf2": 15001}
    servers = {
        "wanperf": subprocess.Popen([wp, "serve", "--listen", f"127.0.0.1:{ports['wanperf']}"], stderr=subprocess.DEVNULL),
        "iperf3": subprocess.Popen([iperf3, "-s", "-p", str(ports["iperf3"])], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL),
        "iperf2": subprocess.Popen(["iperf", "-s", "-p", str(ports["iperf2"])], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL),
    }
    time.sleep(0.5)
    t = str(a.secs)
    W = [wp, "tput", "127.0.0.1", "-p", str(ports["wanperf"]), "-t", t, "--json"]
    I3 = [iperf3, "-c", "127.0.0.1", "-p", str(ports["iperf3"]), "-t", t, "-J"]
    I2 = ["iperf", "-c", "127.0.0.1", "-p", str(ports["iperf2"]), "-t", t, "-y", "C"]
    configs = [
        ("wanperf -P 1", "wanperf", W + ["-P", "1"], parse_wanperf),
        ("wanperf -P 2", "wanperf", W + ["-P", "2"], parse_wanperf),
        ("wanperf -P 1 -Z", "wanperf", W + ["-P", "1", "-Z"], parse_wanperf),
        ("wanperf -P 2 -Z", "wanperf", W + ["-P", "2", "-Z"], parse_wanperf),
        ("wanperf -P 4", "wanperf", W + ["-P", "4"], parse_wanperf),
        ("wanperf --iperf3", "iperf3", [wp, "tput", "127.0.0.1", "--iperf3", "-p", str(ports["iperf3"]), "-t", str(round(a.secs)), "--json"], parse_wanperf),
        ("iperf3 -P 1", "iperf3", I3 + ["-P", "1"], parse_iperf3),
        ("iperf3 -P 1 -Z", "iperf3", I3 + ["-P", "1", "-Z"], parse_iperf3),
        ("iperf3 -P 4", "iperf3", I3 + ["-P", "4"], parse_iperf3),
        ("iperf2 -P 2", "iperf2", I2 + ["-P", "2"], parse_iperf2),
    ]
    if a.only:
        configs = [c for c in configs if a.only in c[0]]
    results = {name: [] for name, *_ in configs}
    try:
        for rep in range(a.reps):
            for name, srv, cmd, parse in configs:
                spid = servers[srv].pid
                s0 = proc_cpu(spid)
                out, ccpu = run_client(cmd, a.secs * 4 + 30)
                time.sleep(0.3)  # let the server finish its accounting
                scpu = proc_cpu(spid) - s0
                bps, nbytes = parse(out)
                results[name].append((bps, nbytes, ccpu + scpu, ccpu))
                print(f"round {rep + 1}/{a.reps}  {name:<16} {bps / 1e9:7.2f} Gbit/s  "
                      f"{(ccpu + scpu) / (nbytes / 1e9):.3f} CPU s/GB", file=sys.stderr, flush=True)
    finally:
        for p in servers.values():
            p.send_signal(signal.SIGINT)
        for p in servers.values():
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                p.kill()

    med = {}
    for name, rs in results.items():
        med[name] = (statistics.median(r[0] for r in rs), statistics.median(r[2] / (r[1] / 1e9) for r in rs),
                     statistics.median(r[3] / (r[1] / 1e9) for r in rs))
    print(f"\n{'configuration':<18}{'median goodput':>16}{'CPU s/GB':>10}{'client':>8}")
    for name, (bps, cpg, ccg) in med.items():
        print(f"{name:<18}{bps / 1e9:>11.2f} Gbit/s{cpg:>10.3f}{ccg:>8.3f}")
    if a.only:
        return
    ratios = [
        ("wanperf -P 2 / iperf2 -P 2 (goodput)", med["wanperf -P 2"][0] / med["iperf2 -P 2"][0], "≥ 1.10"),
        ("wanperf -P 2 -Z / iperf2 -P 2 (goodput)", med["wanperf -P 2 -Z"][0] / med["iperf2 -P 2"][0], "≥ 1.10"),
        ("wanperf -P 1 / iperf3 -P 1 (goodput)", med["wanperf -P 1"][0] / med["iperf3 -P 1"][0], "≥ 1.20"),
        ("wanperf -P 4 / iperf3 -P 4 (goodput)", med["wanperf -P 4"][0] / med["iperf3 -P 4"][0], "≥ 1.20"),
        ("wanperf -P 1 -Z / iperf3 -Z (goodput)", med["wanperf -P 1 -Z"][0] / med["iperf3 -P 1 -Z"][0], ""),
        ("wanperf -P 1 / iperf3 -P 1 (CPU s/GB)", med["wanperf -P 1"][1] / med["iperf3 -P 1"][1], "≤ 0.70"),
        ("wanperf -P 4 / iperf3 -P 4 (CPU s/GB)", med["wanperf -P 4"][1] / med["iperf3 -P 4"][1], "≤ 0.70"),
        ("wanperf -P 1 -Z / iperf3 -Z (CPU s/GB)", med["wanperf -P 1 -Z"][1] / med["iperf3 -P 1 -Z"][1], "≤ 0.70"),
        # Same iperf3 server, two clients: wanperf speaking iperf3's protocol, and iperf3's own.
        ("wanperf --iperf3 / iperf3 (goodput)", med["wanperf --iperf3"][0] / med["iperf3 -P 1"][0], "0.97 to 1.03 or more"),
        ("wanperf --iperf3 / iperf3 (client CPU s/GB)", med["wanperf --iperf3"][2] / med["iperf3 -P 1"][2], "≤ 1.00"),
    ]
    print()
    for label, r, target in ratios:
        print(f"{label:<44}{r:6.2f}   {('target ' + target) if target else ''}")
    if a.markdown:
        print("\n| configuration | median goodput | CPU s per GB (both ends) | client CPU s per GB |\n|---|---:|---:|---:|")
        for name, (bps, cpg, ccg) in med.items():
            print(f"| {name} | {bps / 1e9:.2f} Gbit/s | {cpg:.3f} | {ccg:.3f} |")
        print("\n| ratio | value | target |\n|---|---:|---|")
        for label, r, target in ratios:
            print(f"| {label} | {r:.2f} | {target} |")


if __name__ == "__main__":
    main()
