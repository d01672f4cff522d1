#!/usr/bin/env python3
"""Emulated networks: set-up and tear-down time, forwarding capacity per hop (against the
two-host `path` in the same run, interleaved), fairness of 8 iperf3 pairs on a shared
bottleneck, the emulator's lateness at 1 Gbit/s aggregate, and its packet-rate ceiling
(full-size UDP packets one at a time, no segmentation offload to lean on). Prints medians
and ratios.

Every measurement is bounded (iperf3 -t, timeouts) and every network is taken down."""

import argparse
import json
import os
import statistics
import subprocess
import tempfile
import time

ap = argparse.ArgumentParser()
ap.add_argument("--wanperf", default="target/release/wanperf")
ap.add_argument("--before", default=None,
                help="packets part: an earlier build, run interleaved with --wanperf (e.g. the design before a change)")
ap.add_argument("--rates", default="200,400,800,1000", help="packets part: offered Mbit/s, comma-separated")
ap.add_argument("--reps", type=int, default=3)
ap.add_argument("--secs", type=int, default=10)
ap.add_argument("--parts", default="setup,forwarding,lateness,fairness,packets",
                help="comma-separated: setup, forwarding, lateness, fairness, packets")
a = ap.parse_args()
parts = set(a.parts.split(","))
W = os.path.abspath(a.wanperf)
tmp = tempfile.mkdtemp(prefix="wanperf-bench-net-")


def sh(args, timeout=120, check=True):
    r = subprocess.run(args, capture_output=True, text=True, timeout=timeout)
    if check and r.returncode != 0:
        raise SystemExit(f"failed: {' '.join(args)}\n{r.stderr}")
    return r


def write(name, text):
    p = os.path.join(tmp, name + ".toml")
    with open(p, "w") as f:
        f.write(text)
    return p


def mesh(hosts, routers, links):
    """`hosts` hosts spread over a ring of `routers` routers with chords, `links` links in all."""
    t = [f'name = "mesh{hosts}x{routers}"']
    t += [f'[[host]]\nname = "h{i}"' for i in range(hosts)]
    t += [f'[[router]]\nname = "r{i}"' for i in range(routers)]
    ls = [(f"h{i}", f"r{i % routers}") for i in range(hosts)]
    ls += [(f"r{i}", f"r{(i + 1) % routers}") for i in range(routers)]
    k = 2
    while len(ls) < links:
        for i in range(routers):
            if len(ls) < links:
                ls.append((f"r{i}", f"r{(i + k) % routers}"))
        k += 1
    names = set()
    for x, y in ls:
        n = f"{x}-{y}"
        while n in names:
            n += "x"
        names.add(n)
        t.append(f'[[link]]\na = "{x}"\nb = "{y}"\nname = "{n}"\ndelay = "1ms"\nrate = "1G"')
    return "\n".join(t) + "\n", hosts + routers, len(ls)


def updown(path, name):
    t0 = time.monotonic()
    sh([W, "net", "up", path, name])
    up = time.monotonic() - t0
    t0 = time.monotonic()
    sh([W, "net", "down", name])
    return up, time.monotonic() - t0


if "setup" in parts:
    print("## set-up and tear-down")
    for hosts, routers, links in [(16, 8, 31), (16, 24, 47)]:
        text, nodes, nlinks = mesh(hosts, routers, links)
        p = write(f"mesh{nodes}", text)
        ups, downs = [], []
        for i in range(a.reps + 2):
            u, d = updown(p, f"bench-mesh-{os.getpid()}")
            ups.append(u)
            downs.append(d)
        print(f"{nodes} nodes ({hosts} hosts, {routers} routers), {nlinks} links: up median {statistics.median(ups):.2f} s "
              f"(all {', '.join(f'{x:.2f}' for x in ups)}), down median {statistics.median(downs):.3f} s")


def chain_path(hops, rtt_ms):
    """`hops` links in a line (hops-1 routers), rtt split evenly, no rate limit."""
    one_way = rtt_ms / 2 / hops
    t = ['name = "chain"', '[[host]]\nname = "a"', '[[host]]\nname = "b"']
    nodes = ["a"] + [f"r{i}" for i in range(1, hops)] + ["b"]
    t += [f'[[router]]\nname = "{n}"' for n in nodes[1:-1]]
    for x, y in zip(nodes, nodes[1:]):
        t.append(f'[[link]]\na = "{x}"\nb = "{y}"\ndelay = "{one_way}ms"')
    return "\n".join(t) + "\n"


def net_stats(r):
    """The per-link counters `net run --json` printed on stderr when it ended."""
    return [json.loads(l) for l in r.stderr.splitlines() if l.startswith("{") and "net_stats" in l][0]["links"]


def iperf_net(topo, streams, secs):
    r = sh([W, "net", "run", topo, "--host", "a", "--on", "b=iperf3 -s -1", "--json", "--",
            "sh", "-c", f"iperf3 -c $WANPERF_ADDR_B -P {streams} -t {secs} -O 2 -J"], timeout=secs + 60)
    return json.loads(r.stdout)["end"]["sum_received"]["bits_per_second"]


def iperf_path(rtt_ms, streams, secs):
    r = sh([W, "path", "run", "--rtt", f"{rtt_ms}ms", "--right", "iperf3 -s -1", "--",
            "iperf3", "-c", "198.18.0.2", "-P", str(streams), "-t", str(secs), "-O", "2", "-J"], timeout=secs + 60)
    return json.loads(r.stdout)["end"]["sum_received"]["bits_per_second"]


if "forwarding" in parts:
    print("\n## forwarding capacity, 100 ms RTT, iperf3 -P 4 (interleaved)")
    results = {}
    chains = {h: write(f"chain{h}", chain_path(h, 100)) for h in (1, 2, 4)}
    for rep in range(a.reps):
        results.setdefault("path", []).append(iperf_path(100, 4, a.secs))
        for h, p in chains.items():
            results.setdefault(f"net {h} link(s)", []).append(iperf_net(p, 4, a.secs))
    base = statistics.median(results["path"])
    for k, v in results.items():
        m = statistics.median(v)
        print(f"{k:<16} median {m / 1e9:.2f} Gbit/s ({', '.join(f'{x / 1e9:.2f}' for x in v)}), ratio to path {m / base:.2f}")


if "lateness" in parts:
    print("\n## lateness per hop: 4 links (3 routers), 100 ms RTT, 1 Gbit/s bottleneck, iperf3 -P 4")
    t = chain_path(4, 100).replace('[[link]]\na = "r1"\nb = "r2"', '[[link]]\na = "r1"\nb = "r2"\nrate = "1G"\nqueue = "12MB"')
    p = write("chain4-1g", t)
    lat = []
    for rep in range(a.reps):
        r = sh([W, "net", "run", p, "--host", "a", "--on", "b=iperf3 -s -1", "--json", "--",
                "sh", "-c", f"iperf3 -c $WANPERF_ADDR_B -P 4 -t {a.secs} -O 2 -J"], timeout=a.secs + 60)
        bps = json.loads(r.stdout)["end"]["sum_received"]["bits_per_second"]
        st = net_stats(r)
        p99 = [max(x["ab"]["lateness"]["p99_us"], x["ba"]["lateness"]["p99_us"]) for x in st]
        lat.append(max(p99))
        print(f"run {rep + 1}: iperf3 {bps / 1e6:.0f} Mbit/s; lateness p99 per link (worse direction) "
              f"{', '.join(f'{x:.0f}' for x in p99)} µs")
    print(f"worst link's p99, median of {a.reps}: {statistics.median(lat):.0f} µs")




def dumbbell(bottleneck, aqm):
    """8 pairs l_i → s_i through one bottleneck; returns per-pair rates and the bottleneck's stats."""
    t = ['name = "dumbbell"']
    t += [f'[[host]]\nname = "l{i}"' for i in range(8)] + [f'[[host]]\nname = "s{i}"' for i in range(8)]
    t += ['[[router]]\nname = "left"', '[[router]]\nname = "right"']
    t += [f'[[link]]\na = "l{i}"\nb = "left"\ndelay = "1ms"' for i in range(8)]
    t += [f'[[link]]\na = "right"\nb = "s{i}"\ndelay = "1ms"' for i in range(8)]
    t.append(f'[[link]]\na = "left"\nb = "right"\nname = "bottleneck"\ndelay = "8ms"\nrate = "{bottleneck}"\n'
             f'queue = "2MB"\naqm = "{aqm}"')
    p = write("dumbbell", "\n".join(t) + "\n")
    name = f"bench-db-{os.getpid()}"
    sh([W, "net", "up", p, name])
    try:
        servers = [subprocess.Popen([W, "net", "exec", name, f"s{i}", "--", "iperf3", "-s", "-1"],
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for i in range(8)]
        time.sleep(1)
        addrs = json.loads(sh([W, "net", "show", p, "--json"]).stdout)["plan"]["nodes"]
        addr = {n["name"]: n["interfaces"][0]["ipv4"] for n in addrs}
        clients = [subprocess.Popen([W, "net", "exec", name, f"l{i}", "--", "iperf3", "-c", addr[f"s{i}"], "-t",
                                     str(a.secs + 5), "-O", "5", "-J"], stdout=subprocess.PIPE,
                                    stderr=subprocess.DEVNULL, text=True) for i in range(8)]
        rates = []
        for c in clients:
            out, _ = c.communicate(timeout=a.secs + 60)
            rates.append(json.loads(out)["end"]["sum_received"]["bits_per_second"])
        for sv in servers:
            sv.wait(timeout=10)
        st = json.loads(sh([W, "net", "stats", name, "--json", "--link", "bottleneck"]).stdout)["links"][0]
    finally:
        sh([W, "net", "down", name], check=False)
    return rates, st


if "fairness" in parts:
    print("\n## 8 iperf3 pairs through one shared bottleneck (2 MB queue, 20 ms RTT; interleaved)")
    worst_of = {}
    for rep in range(a.reps):
        for bottleneck in ("400M", "1G"):
            for aqm in ("droptail", "fq"):
                rates, st = dumbbell(bottleneck, aqm)
                total = sum(rates)
                fair = total / 8
                worst = max(abs(r - fair) / fair for r in rates)
                jain = total ** 2 / (8 * sum(r * r for r in rates))
                late = st["ab"]["lateness"]
                worst_of.setdefault((bottleneck, aqm), []).append(worst)
                print(f"run {rep + 1}, {bottleneck} {aqm}: total {total / 1e6:.0f} Mbit/s; pairs "
                      f"{', '.join(f'{r / 1e6:.0f}' for r in rates)} Mbit/s; largest deviation from the fair share "
                      f"{worst * 100:.1f} %, Jain index {jain:.3f}; bottleneck lateness p50/p99/max "
                      f"{late['p50_us']:.0f}/{late['p99_us']:.0f}/{late['max_us']:.0f} µs")
    for (bottleneck, aqm), v in worst_of.items():
        print(f"{bottleneck} {aqm}: largest deviation from the fair share, median of {len(v)} runs "
              f"{statistics.median(v) * 100:.1f} % (worst {max(v) * 100:.1f} %)")


if "packets" in parts:
    # What the one I/O thread carries when every packet is its own: 1400-byte UDP datagrams
    # sent one at a time (no segmentation offload to lean on). Between routers the emulator
    # joins datagrams of one flow (docs/emulator.md, "Packet-rate ceiling"); the first read
    # and the last write are one per datagram. With --before, an earlier build runs
    # interleaved, so both designs meet the same machine state.
    builds = [("now", W)] + ([("before", os.path.abspath(a.before))] if a.before else [])
    rates = [int(x) for x in a.rates.split(",")]
    print("\n## packet-rate ceiling: iperf3 UDP, 1400-byte datagrams, 10 Gbit/s links, 1 and 5 links"
          + (" (now and before, interleaved)" if a.before else " (interleaved)"))
    chains = {}
    for h in (1, 5):
        t = chain_path(h, 10).replace('delay = ', 'rate = "10G"\ndelay = ')
        chains[h] = write(f"udp{h}", t)
    snmp = os.path.join(tmp, "snmp")
    got = {}
    for rep in range(a.reps):
        for offered in rates:
            for h, p in chains.items():
                for name, binary in builds:
                    r = sh([binary, "net", "run", p, "--host", "a", "--on", f"b=iperf3 -s -1; cat /proc/net/snmp > {snmp}",
                            "--json", "--", "sh", "-c",
                            f"iperf3 -c $WANPERF_ADDR_B -u -b {offered}M -l 1400 -w 4M -t {a.secs} -J; sleep 0.5"],
                           timeout=a.secs + 60)
                    end = json.loads(r.stdout)["end"]["sum"]
                    delivered = (end["packets"] - end["lost_packets"]) / end["seconds"]
                    stats = net_stats(r)
                    p99 = max(x["ab"]["lateness"]["p99_us"] for x in stats)
                    unread = sum(x["ab"].get("unread_drops", 0) for x in stats)
                    udp = [l.split() for l in open(snmp) if l.startswith("Udp:")]
                    full = int(udp[1][udp[0].index("RcvbufErrors")])
                    got.setdefault((name, h, offered), []).append((delivered, end["lost_percent"], p99, unread, full))
                    print(f"run {rep + 1}, {name}, {h} link(s), {offered} Mbit/s offered: delivered {delivered / 1e3:.1f} kpkt/s "
                          f"({delivered * 1400 * 8 / 1e6:.0f} Mbit/s of payload), lost {end['lost_percent']:.1f} % "
                          f"(dropped unread by the sender's device {unread}, by b's full receive buffer {full}), "
                          f"worst link's lateness p99 {p99:.0f} µs", flush=True)
    print()
    for (name, h, offered), v in sorted(got.items(), key=lambda kv: (kv[0][1], kv[0][2], kv[0][0])):
        pps = statistics.median(x[0] for x in v)
        line = (f"{name:<6} {h} link(s), {offered} Mbit/s offered: median {pps / 1e3:.1f} kpkt/s delivered, "
                f"{pps * h / 1e3:.0f} k link crossings/s, loss median {statistics.median(x[1] for x in v):.1f} %, "
                f"unread drops median {statistics.median(x[3] for x in v):.0f}, "
                f"lateness p99 median {statistics.median(x[2] for x in v):.0f} µs")
        if name == "now" and ("before", h, offered) in got:
            before = statistics.median(x[0] for x in got[("before", h, offered)])
            line += f"; ratio to before {pps / before:.2f}"
        print(line)
