#!/usr/bin/env python3
"""Monitoring mesh benchmark (issue 12), driven by bench/mesh.sh.

1. Ingest: simulated agents (crates/wanperf-monitor/examples/mesh_load.rs: signed batches of
   one-minute latency summaries, the agents' own protocol) against one `wanperf central` on
   PostgreSQL and, for comparison, on SQLite, interleaved round by round: summaries stored per
   second and the batch round trip (send → stored → acknowledged) p50/p99.
2. Dashboard: a 100 × 100 grid and one pair's year of one-minute data, loaded in headless
   Chromium, timed by the page's own performance marks (bench/cdp_timing.js, real time).
3. Agent cost: one `wanperf agent` probing 200 peers at 1 probe/s for 60 s: CPU (utime +
   stime over wall time) and peak RSS; fping -l on the same 200 addresses at the same rate
   as the reference, when installed.

Everything runs on loopback, bounded in time, and stops by itself.
"""
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
W = os.path.join(ROOT, "target/release/wanperf")
LOAD = os.path.join(ROOT, "target/release/examples/mesh_load")
ROUNDS = int(os.environ.get("ROUNDS", "3"))
SECONDS = int(os.environ.get("SECONDS_PER_RUN", "20"))
PG = os.environ.get("WANPERF_BENCH_POSTGRES")
PARTS = os.environ.get("PARTS", "ingest,dashboard,agent").split(",")
TMP = tempfile.mkdtemp(prefix="wanperf-mesh-bench-")


def central(mesh, db):
    p = subprocess.Popen([W, "central", "--mesh", mesh, "--listen", "127.0.0.1:0", "--db", db],
                         stderr=subprocess.PIPE, text=True)
    t = time.time()
    while time.time() - t < 30:
        line = p.stderr.readline()
        if "listening on" in line:
            url = line.split("listening on ")[1].split("/ ")[0].rstrip("/")
            return p, url
        if not line and p.poll() is not None:
            break
    p.kill()
    raise SystemExit("central did not start")


def stop(p):
    p.send_signal(signal.SIGTERM)
    try:
        p.wait(20)
    except subprocess.TimeoutExpired:
        p.kill()


def pg_db(tag):
    """A fresh database on the benchmark's PostgreSQL server."""
    name = f"wanperf_bench_{tag}_{os.getpid()}"
    base = PG.rsplit("/", 1)[0]
    subprocess.run(["psql", PG, "-qc", f"CREATE DATABASE {name}"], check=True, capture_output=True)
    return f"{base}/{name}", name


def pg_drop(name):
    subprocess.run(["psql", PG, "-qc", f"DROP DATABASE IF EXISTS {name} WITH (FORCE)"], capture_output=True)


def ingest(mesh, db, agents, threads, batch):
    c, url = central(mesh, db)
    try:
        out = subprocess.run([LOAD, "send", url, str(agents), str(threads), str(SECONDS), str(batch)],
                             capture_output=True, text=True, timeout=SECONDS + 120)
        return json.loads(out.stdout.strip().splitlines()[-1])
    finally:
        stop(c)


def cdp(url, wait_ms, expr):
    out = subprocess.run(["node", "--experimental-websocket", os.path.join(ROOT, "bench/cdp_timing.js"),
                          url, str(wait_ms), expr], capture_output=True, text=True, timeout=180)
    return out.stdout.strip().splitlines()[-1] if out.stdout.strip() else out.stderr


def proc_cpu(pid):
    with open(f"/proc/{pid}/stat") as f:
        w = f.read().rsplit(")", 1)[1].split()
    return (int(w[11]) + int(w[12])) / os.sysconf("SC_CLK_TCK")


def proc_hwm_kb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return 0


def main():
    agents = 100
    mesh = os.path.join(TMP, "mesh.toml")
    with open(mesh, "w") as f:
        f.write(subprocess.check_output([LOAD, "mesh", str(agents)], text=True))
    if "ingest" in PARTS:
        ingest_part(mesh, agents)
    if "dashboard" in PARTS:
        dashboard_part(mesh, agents)
    if "agent" in PARTS:
        agent_part()


def ingest_part(mesh, agents):
    print(f"== ingest: {agents} simulated agents, 4 threads, batches of 500 one-minute summaries, "
          f"{SECONDS} s per run, {ROUNDS} rounds (PostgreSQL and SQLite interleaved)")
    rows = {"postgres": [], "sqlite": []}
    for r in range(ROUNDS):
        for kind in (["postgres"] if PG else []) + ["sqlite"]:
            if kind == "postgres":
                db, name = pg_db(f"r{r}")
            else:
                db, name = os.path.join(TMP, f"r{r}.sqlite"), None
            res = ingest(mesh, db, agents, 4, 500)
            rows[kind].append(res)
            print(f"  round {r + 1} {kind:8}: {res['per_second']:9.0f} summaries/s, batch p50 "
                  f"{res['batch_ms_p50']:.0f} ms, p99 {res['batch_ms_p99']:.0f} ms, errors {res['errors']}")
            if name:
                pg_drop(name)
    for kind, rs in rows.items():
        if rs:
            print(f"  median {kind:8}: {statistics.median(x['per_second'] for x in rs):9.0f} summaries/s, "
                  f"batch p99 {statistics.median(x['batch_ms_p99'] for x in rs):.0f} ms "
                  f"(target ≥ 5,000/s on PostgreSQL)")



def dashboard_part(mesh, agents):
    print("== dashboard (headless Chromium, the page's performance marks, real time)")
    db = os.path.join(TMP, "dash.sqlite")
    if PG:
        db, dash_name = pg_db("dash")
    c, url = central(mesh, db)
    try:
        # Every cell of the 100 × 100 grid filled, then a year of one pair's summaries.
        subprocess.run([LOAD, "send", url, str(agents), "4", "15", "500"], capture_output=True, timeout=200)
        t = time.time()
        subprocess.run([LOAD, "year", url, str(agents)], capture_output=True, timeout=1800, check=True)
        print(f"  a year of one-minute summaries of a0 → a1 stored in {time.time() - t:.0f} s")
        grid = [json.loads(cdp(url + "/", 8000, "JSON.stringify(window.__wanperf)")) for _ in range(ROUNDS)]
        print(f"  100 × 100 grid: fetch → drawn {statistics.median(g['gridMs'] for g in grid):.0f} ms "
              f"(median of {ROUNDS}; target < 1000 ms)")
        now = time.time()
        pair_url = f"{url}/#/pair/a0/a1?from={now - 365 * 86400:.0f}&to={now:.0f}"
        pair = [json.loads(cdp(pair_url, 20000, "JSON.stringify(window.__wanperf)")) for _ in range(ROUNDS)]
        print(f"  a0 → a1, one year (525,600 summaries): fetch → drawn "
              f"{statistics.median(p['pairMs'] for p in pair):.0f} ms (median of {ROUNDS}; target < 500 ms)")
    finally:
        stop(c)
        if PG:
            pg_drop(dash_name)



def agent_part():
    print("== one agent probing 200 peers at 1 probe/s for 60 s")
    mesh2 = os.path.join(TMP, "mesh200.toml")
    with open(mesh2, "w") as f:
        f.write(subprocess.check_output([LOAD, "mesh", "201", "5399", "1"], text=True))
    key = os.path.join(TMP, "a0.key")
    with open(key, "w") as f:
        f.write(subprocess.check_output([LOAD, "key", "0"], text=True))
    os.chmod(key, 0o600)
    srv = subprocess.Popen([W, "serve", "--listen", "0.0.0.0:5399", "--allow", "127.0.0.0/8"],
                           stderr=subprocess.DEVNULL)
    time.sleep(1)
    ag = subprocess.Popen([W, "agent", "--name", "a0", "--mesh", mesh2, "--key", key, "--listen", "127.0.0.1:0",
                           "--spool", os.path.join(TMP, "a0.spool")], stderr=subprocess.DEVNULL)
    time.sleep(5)
    c0, t0 = proc_cpu(ag.pid), time.time()
    time.sleep(60)
    cpu, wall = proc_cpu(ag.pid) - c0, time.time() - t0
    hwm = proc_hwm_kb(ag.pid)
    stop(ag)
    print(f"  wanperf agent: {100 * cpu / wall:.2f} % of a core, peak RSS {hwm / 1024:.1f} MiB "
          f"(targets ≤ 1 % and ≤ 30 MB)")
    if subprocess.run(["which", "fping"], capture_output=True).returncode == 0:
        targets = [f"127.0.{(i + 1) >> 8}.{(i + 1) & 255}" for i in range(1, 201)]
        fp = subprocess.Popen(["fping", "-l", "-p", "1000", "-q"] + targets,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(5)
        c0, t0 = proc_cpu(fp.pid), time.time()
        time.sleep(60)
        cpu, wall = proc_cpu(fp.pid) - c0, time.time() - t0
        hwm = proc_hwm_kb(fp.pid)
        fp.kill()
        fp.wait()
        print(f"  fping -l (ICMP, no summaries, reference): {100 * cpu / wall:.2f} % of a core, "
              f"peak RSS {hwm / 1024:.1f} MiB")
    stop(srv)


if __name__ == "__main__":
    try:
        main()
    finally:
        subprocess.run(["rm", "-rf", TMP])
