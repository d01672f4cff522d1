#!/usr/bin/env python3
"""Probe precision: wanperf ping against iputils ping, interleaved (issue 4's benchmark).

On loopback and through a 10 ms emulated path: 1000 probes per tool at 10 ms intervals, in
two interleaved halves of 500 (wanperf, ping, wanperf, ping). Prints median and p99 RTT side
by side and wanperf's CPU time per 1000 probes.
"""
import argparse, json, os, resource, subprocess, sys

def pct(v, q):
    v = sorted(v)
    h = (len(v) - 1) * q
    lo = int(h)
    hi = min(lo + 1, len(v) - 1)
    return v[lo] + (h - lo) * (v[hi] - v[lo])

def rtts_of(lines):
    out = []
    for l in lines:
        r = json.loads(l)
        if r.get("event") == "probe" and "rtt_ms" in r:
            out.append(r["rtt_ms"])
    return out

def cpu_run(cmd):
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if p.returncode != 0:
        raise RuntimeError(f"{cmd} failed: {p.stderr[-300:]}")
    return p.stdout, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)

def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--wanperf", default=os.path.join(os.path.dirname(__file__), "..", "target", "release", "wanperf"))
    a = ap.parse_args()
    wp = os.path.abspath(a.wanperf)
    rows = []
    # Loopback: a local server, both tools from here.
    srv = subprocess.Popen([wp, "serve", "--listen", "127.0.0.1:15330"], stderr=subprocess.DEVNULL)
    try:
        import time; time.sleep(0.5)
        w, p, cpu = [], [], 0.0
        for _ in range(2):
            out, c = cpu_run([wp, "ping", "127.0.0.1", "-p", "15330", "-c", "500", "-i", "10ms", "--json"])
            cpu += c
            w += rtts_of(out.splitlines())
            out, _ = cpu_run(["ping", "-c", "500", "-i", "0.01", "127.0.0.1"])
            p += [float(l.split("time=")[1].split()[0]) for l in out.splitlines() if "time=" in l]
        rows.append(("loopback", w, p, cpu))
    finally:
        srv.terminate(); srv.wait()
    # 10 ms emulated path: the server on the right, both tools on the left, same interleaving.
    script = ("for i in 1 2; do {wp} ping 198.18.0.2 -c 500 -i 10ms --json | sed 's/^/W /'; "
              "ping -c 500 -i 0.01 198.18.0.2 | sed 's/^/P /'; done").format(wp=wp)
    p2 = subprocess.run([wp, "path", "run", "--rtt", "10ms", "--right", f"{wp} serve --listen 0.0.0.0:5301 --allow 198.18.0.0/15",
                         "--", "sh", "-c", script], capture_output=True, text=True, timeout=120)
    w = rtts_of([l[2:] for l in p2.stdout.splitlines() if l.startswith("W ")])
    p = [float(l.split("time=")[1].split()[0]) for l in p2.stdout.splitlines() if l.startswith("P ") and "time=" in l]
    rows.append(("10 ms path", w, p, None))
    print("\n| where | wanperf median | ping median | wanperf p99 | ping p99 | wanperf CPU per 1000 probes |\n|---|---|---|---|---|---|")
    for name, w, p, cpu in rows:
        cpu_s = f"{cpu / (len(w) / 1000):.3f} s ({100 * cpu / (len(w) * 0.01):.2f} % of a core)" if cpu is not None and w else "—"
        print(f"| {name} | {pct(w, .5) * 1000:.1f} µs | {pct(p, .5) * 1000:.1f} µs | {pct(w, .99) * 1000:.1f} µs | {pct(p, .99) * 1000:.1f} µs | {cpu_s} |")

if __name__ == "__main__":
    main()
