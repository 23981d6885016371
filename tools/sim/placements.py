#!/usr/bin/env python3
"""Where each request went, in the real cluster and in tandem-sim (issue 18; tools/sim/README.md,
"Validation against the real cluster"): under least-loaded placement an error in TTFT can be the
model's or a different placement, and this tells which.

Reads a tools/sim/validate.py work directory (its --work): the real router's --verbose log names
each request's nodes by address ("req-...: attempt 0: ... decode ADDR [prefill ADDR]"), the
nodes' logs map addresses to names, tandem-bench's JSON gives the run's start (Unix s) and each
request's send time; tandem-sim's JSON (sim-<workload>-<setup>-<rate>-polls.json, the run that
polled when the real router did) names each request's nodes. The real run's requests are the
first first attempts the router logged from the run's start, in order; tandem-sim's are in send
order. The real nodes' names are arbitrary (least-loaded breaks ties by address, and the real
cluster's ports are random), so each role's real nodes are paired with tandem-sim's by whichever
pairing agrees on the most requests. For each run prints how many requests went to the same
nodes, each node's share in both, and the first request placed differently.

  tools/sim/placements.py WORK [--out JSON]
"""

import argparse
import datetime
import glob
import itertools
import json
import os
import re
import sys

PLACED = re.compile(r"^\[([0-9-]+ [0-9:.]+)\] \[tandem-router\] \[debug\] req-[0-9a-f]+: attempt 0: "
                    r"\S+ \(\S+\) decode (\S+)(?: prefill (\S+))?")
APPLIED = re.compile(r"^\[([0-9-]+ [0-9:.]+)\] .*load reports of \d+ nodes applied at (\d+) us")
SERVING = re.compile(r"\[((?:prefill|decode)-\d+)\] \[info\] tandem-(?:prefill|decode): serving .* "
                     r"on (\S+) \(")
RUN_FILE = re.compile(r"^real-(.+)-(colocated-rr|colocated-ll|disaggregated)-([0-9.]+)\.json$")


def log_seconds(stamp):
    return datetime.datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S.%f").replace(
        tzinfo=datetime.timezone.utc).timestamp()


def router_placements(cluster_dir):
    """[(Unix s, decode address, prefill address or None)] in log order."""
    with open(os.path.join(cluster_dir, "logs", "router.log")) as f:
        lines = f.read().splitlines()
    # The log's clock is local time: the rounds of load reports give its offset from Unix time.
    offset = None
    for line in lines:
        m = APPLIED.match(line)
        if m:
            offset = int(m.group(2)) / 1e6 - log_seconds(m.group(1))
            break
    if offset is None:
        sys.exit(f"placements.py: no load-report rounds in {cluster_dir}/logs/router.log "
                 "(was the router --verbose?)")
    out = []
    for line in lines:
        m = PLACED.match(line)
        if m:
            out.append((log_seconds(m.group(1)) + offset, m.group(2), m.group(3)))
    return out


def node_names(cluster_dir):
    names = {}
    for path in glob.glob(os.path.join(cluster_dir, "logs", "*.log")):
        with open(path) as f:
            for m in SERVING.finditer(f.read()):
                names[m.group(2)] = m.group(1)
    return names


def best_pairing(real, sim):
    """{real node name: tandem-sim node name}, per role the permutation (up to 4 nodes a role;
    beyond, names as they are) under which the most requests went to the same node."""
    pairing = {}
    for role, key in ((0, "prefill_node"), (1, "decode_node")):
        real_names = sorted({r[role] for r in real if r[role]})
        sim_names = sorted({s.get(key) for s in sim if s.get(key)} | set(real_names))
        if not real_names or len(sim_names) > 4:
            continue
        best = max(itertools.permutations(sim_names, len(real_names)),
                   key=lambda perm: (sum(dict(zip(real_names, perm)).get(r[role]) == s.get(key)
                                         for r, s in zip(real, sim)),
                                     tuple(a == b for a, b in zip(real_names, perm))))
        pairing.update(zip(real_names, best))
    return pairing


def compare(work, workload, setup, rate):
    clusters = glob.glob(os.path.join(work, f"cluster-{setup}-x*"))
    if len(clusters) != 1:
        return None
    cluster = clusters[0]
    scale = float(cluster.rsplit("-x", 1)[1])
    with open(os.path.join(work, f"real-{workload}-{setup}-{rate}.json")) as f:
        real = json.load(f)["runs"][0]
    sim_path = os.path.join(work, f"sim-{workload}-{setup}-{rate}-polls.json")
    if not os.path.exists(sim_path):
        return None
    with open(sim_path) as f:
        sim = json.load(f)["runs"][0]["requests"]
    if not sim or "decode_node" not in sim[0]:
        sys.exit(f"placements.py: {sim_path} names no nodes (a tandem-sim from before 2026-11-28)")
    start = real["started_unix_s"]
    names = node_names(cluster)
    # Placements from the run's start (a request is placed a few ms of real time after it is sent).
    placed = [p for p in router_placements(cluster) if p[0] >= start][:len(sim)]
    if len(placed) < len(sim):
        sys.exit(f"placements.py: {len(placed)} placements logged after the start of "
                 f"real-{workload}-{setup}-{rate}.json, {len(sim)} requests")
    sim = sorted(sim, key=lambda r: r["start_s"])
    real = [(names.get(p) if p else None, names.get(d, d)) for _, d, p in placed]
    pairing = best_pairing(real, sim)
    same = same_decode = 0
    first_diff = None
    share_real, share_sim = {}, {}
    for i, (real_nodes, s) in enumerate(zip(real, sim)):
        real_nodes = tuple(pairing.get(n, n) for n in real_nodes)
        sim_nodes = (s.get("prefill_node"), s.get("decode_node"))
        same_decode += real_nodes[1] == sim_nodes[1]
        if real_nodes == sim_nodes:
            same += 1
        elif first_diff is None:
            first_diff = {"index": i, "sent_s": s["start_s"], "real": real_nodes, "sim": sim_nodes}
        for share, nodes in ((share_real, real_nodes), (share_sim, sim_nodes)):
            for n in nodes:
                if n:
                    share[n] = share.get(n, 0) + 1
    return {"workload": workload, "setup": setup, "rate": float(rate), "requests": len(sim),
            "time_scale": scale, "pairing": pairing, "same_nodes": same, "same_decode_node": same_decode,
            "requests_per_node_real": dict(sorted(share_real.items())),
            "requests_per_node_sim": dict(sorted(share_sim.items())),
            "first_difference": first_diff}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("work")
    ap.add_argument("--out")
    args = ap.parse_args()
    rows = []
    for path in sorted(glob.glob(os.path.join(args.work, "real-*.json"))):
        m = RUN_FILE.match(os.path.basename(path))
        if m:
            row = compare(args.work, *m.groups())
            if row:
                rows.append(row)
    if not rows:
        sys.exit(f"placements.py: no real and tandem-sim run pairs in {args.work}")
    rows.sort(key=lambda r: (r["workload"], r["setup"], r["rate"]))
    print("| workload | setup | rate | requests | same nodes | same decode node | per node, "
          "real / sim | first difference |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        nodes = sorted(set(r["requests_per_node_real"]) | set(r["requests_per_node_sim"]))
        per = ", ".join(f"{n} {r['requests_per_node_real'].get(n, 0)} / "
                        f"{r['requests_per_node_sim'].get(n, 0)}" for n in nodes)
        d = r["first_difference"]
        first = "none" if d is None else f"#{d['index']} at {d['sent_s']:.3f} s"
        print(f"| {r['workload']} | {r['setup']} | {r['rate']:g} | {r['requests']} | "
              f"{r['same_nodes'] / r['requests'] * 100:.0f}% | "
              f"{r['same_decode_node'] / r['requests'] * 100:.0f}% | {per} | {first} |")
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"work": args.work, "runs": rows}, f, indent=1)
            f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
