#!/usr/bin/env python3
"""tandem-sim's scale: wall time and memory against simulated GPUs and simulated time, on a
Mooncake-like trace (make_trace.py) at the load the cluster sustains (about 2 requests/s per
Llama-3.1-70B TP 8 node on an H100; tools/sim/README.md, "Scale"). Prints a table and writes JSON.

  tools/sim/scale.py --build build --out bench/results/sim_scale.json
  tools/sim/scale.py --hour-only --block-size 64     # the goal's row with 64-token KV blocks
"""
import argparse
import json
import os
import re
import resource
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def run_one(build, work, nodes, seconds, mode, rate_per_node, block_size):
    trace = os.path.join(work, f"trace_{nodes}_{seconds}.jsonl")
    if not os.path.exists(trace):
        subprocess.run([sys.executable, os.path.join(HERE, "make_trace.py"), "--rate",
                        str(rate_per_node * nodes), "--duration-s", str(seconds), "--out", trace],
                       check=True, stderr=subprocess.DEVNULL)
    cluster = ["--decode", str(nodes)]
    if mode == "disaggregated":  # the same GPUs: a third prefill, two thirds decode
        p = max(1, nodes // 3)
        cluster = ["--mode", "disaggregated", "--prefill", str(p), "--decode", str(nodes - p)]
    cmd = ["/usr/bin/time", "-f", "rss_kb=%M", os.path.join(build, "bin", "tandem-sim"),
           "--no-requests-in-json", "--policy", "least_loaded",
           "--gpu", "h100", "--model", "llama-3.1-70b", "--tp", "8", "--block-size", str(block_size),
           *cluster, "--dataset",
           "trace", "--dataset-path", trace, "--slo-ttft-ms", "3000", "--slo-tpot-ms", "60"]
    start = time.monotonic()
    p = subprocess.run(cmd, capture_output=True, text=True)
    total = time.monotonic() - start
    if p.returncode != 0:
        sys.exit(f"scale.py: {' '.join(cmd)} failed:\n{p.stderr}")
    out = p.stdout + p.stderr
    m = re.search(r"sim: ([\d.]+) s simulated in ([\d.]+) s of wall time, (\d+) events, (\d+) steps "
                  r"\((\d+) in (\d+) jumps\)", out)
    requests = int(re.search(r"Successful requests:\s+(\d+)", out).group(1))
    attainment = float(re.search(r"SLO attainment \(%\):\s+([\d.]+)", out).group(1))
    return {
        "mode": mode, "block_size": block_size, "nodes": nodes, "gpus": nodes * 8, "trace_s": seconds,
        "requests": requests, "simulated_s": float(m.group(1)), "run_wall_s": float(m.group(2)),
        "process_wall_s": total, "events": int(m.group(3)), "steps": int(m.group(4)),
        "jumped_steps": int(m.group(5)), "rss_mb": int(re.search(r"rss_kb=(\d+)", out).group(1)) / 1024,
        "slo_attainment_pct": attainment,
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default="build")
    ap.add_argument("--out", default="")
    ap.add_argument("--rate-per-node", type=float, default=2.0)
    ap.add_argument("--quick", action="store_true", help="the two smallest rows only")
    ap.add_argument("--hour-of-1000", action="store_true",
                    help="also the goal's row: 125 nodes (1,000 GPUs), one hour (about 3 minutes)")
    ap.add_argument("--hour-only", action="store_true", help="only the goal's row")
    ap.add_argument("--block-size", type=int, default=16,
                    help="tokens per KV block (default 16, the engine's default)")
    a = ap.parse_args()
    grid = [("colocated", n, 600) for n in (2, 4, 8, 16)] + \
           [("colocated", 16, s) for s in (300, 1200)] + [("disaggregated", 16, 600)]
    if a.quick:
        grid = grid[:2]
    if a.hour_only:
        grid = []
    if a.hour_of_1000 or a.hour_only:
        grid.append(("colocated", 125, 3600))
    rows = []
    with tempfile.TemporaryDirectory() as work:
        for mode, nodes, seconds in grid:
            r = run_one(a.build, work, nodes, seconds, mode, a.rate_per_node, a.block_size)
            rows.append(r)
            gpu_hours = r["gpus"] * r["simulated_s"] / 3600
            r["wall_s_per_gpu_hour"] = r["process_wall_s"] / gpu_hours
            print(f"{mode:13s} {r['gpus']:5d} GPUs {seconds:5d} s trace: {r['requests']:6d} req, "
                  f"{r['events']:8d} events, {r['steps']:8d} steps ({r['jumped_steps']} jumped), "
                  f"run {r['run_wall_s']:6.2f} s, process {r['process_wall_s']:6.2f} s, "
                  f"{r['events'] / max(r['run_wall_s'], 1e-9):9.0f} events/s, "
                  f"{r['rss_mb']:7.0f} MB, {r['wall_s_per_gpu_hour']:.3f} s/GPU-hour, "
                  f"SLO {r['slo_attainment_pct']:.1f}%", flush=True)
    if a.out:
        with open(a.out, "w") as f:
            json.dump({"rows": rows, "rate_per_node": a.rate_per_node, "block_size": a.block_size},
                      f, indent=2)
            f.write("\n")


if __name__ == "__main__":
    main()
