#!/usr/bin/env python3
"""Issue 19's judgement in tandem-sim: the goodput per GPU of the cost placement policy against
round_robin, least_loaded and prefix_aware, and against pure colocated and pure disaggregated at
their best prefill:decode split, on the study's workloads (study.py's WORKLOADS) with Poisson and
bursty (gamma, --burstiness 0.25) arrivals. Each cell is tandem-plan's best configuration for one
(mode, policy): it searches the split and the chunk size, with no local-prefill threshold, so the
policies differ only in where they place; the cost policy also runs an auto cluster (every node
decodes and prefills for the others, the choice made per request). Colocated is the better of
least_loaded and round_robin (least_loaded alone understates it: it ranks nodes by free KV blocks
first, so prompts queue on nodes whose long decodes hold few blocks). Prints a table and writes
JSON.

  tools/sim/placement_study.py --build build --gpus 8 --out bench/results/placement_study_8gpu.json

The cost policy is also run on the baselines' best shapes (tandem-plan --shapes; the cells
*/cost_at_baseline_shape): its own search and theirs stop at shapes whose goodputs tie within
--rate-tolerance, and the row's cost goodput is the best of its cells.

--merge keeps the cells an existing --out file already has (same workload and arrivals) and runs
only the missing ones: a cell added to CELLS costs only its own searches.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from study import WORKLOADS as STUDY_WORKLOADS, best  # noqa: E402

# The study's workloads, and prompts of 2,048 tokens (256 out): long next to a chat turn, short
# enough that the prefill compute does not bound the goodput on its own (as 8k prompts at a 20 ms
# TPOT do: README, "Placement"). tandem-plan's example in the README is this workload.
LONG_PROMPT = ["--dataset", "random", "--random-input-len", "2048", "--random-output-len", "256"]
WORKLOADS = dict(STUDY_WORKLOADS, **{"long-prompt": LONG_PROMPT, "long-prompt-tight": LONG_PROMPT,
                                      "long-prompt-tighter": LONG_PROMPT})
# (TTFT ms, TPOT ms) per workload: the study's middle targets, and a tight TPOT for long prompts.
SLOS = {
    "chatbot": (1000, 50),
    "summarization": (8000, 20),
    "code": (500, 60),
    "multi-turn": (1000, 50),
    "long-prompt": (1000, 25),
    "long-prompt-tight": (1000, 15),  # the same prompts, a TPOT a prefill chunk cannot hide in
    "long-prompt-tighter": (1000, 12),  # and one a TP8 decode step meets only in small batches
}
ARRIVALS = {"poisson": "1", "bursty": "0.25"}
# The baselines' policies per mode.
COLOCATED = ("least_loaded", "round_robin")
DISAGGREGATED = ("round_robin", "least_loaded", "prefix_aware")
# (mode, policy): the baselines, then the cost policy in both modes.
CELLS = [("colocated", "least_loaded"), ("colocated", "round_robin"),
         ("disaggregated", "round_robin"),
         ("disaggregated", "least_loaded"), ("disaggregated", "prefix_aware"),
         ("colocated", "cost"), ("disaggregated", "cost"),
         # every node decodes and prefills for the others, the choice made per request
         ("auto", "cost")]


def plan(args, work, workload, arrival, mode, policy, shapes=None):
    """tandem-plan's best `mode` configuration under `policy`: its own shape search, or with
    `shapes` ("colocated:8xTP8,...") those shapes only."""
    ttft, tpot = SLOS[workload]
    tag = "_shapes" if shapes else ""
    out = os.path.join(work, f"{workload}_{arrival}_{mode}_{policy}{tag}.json")
    where = ["--shapes", shapes] if shapes else ["--modes", mode]
    cmd = [os.path.join(args.build, "bin", "tandem-plan"), "--gpus", str(args.gpus), "--gpu",
           "h100", "--model", args.model, "--tp", args.tp, *where, "--policies",
           policy, "--local-prefill-thresholds", "0", *WORKLOADS[workload],
           "--num-prompts", str(args.num_prompts), "--run-duration-s", str(args.run_duration_s),
           "--burstiness", ARRIVALS[arrival], "--slo-ttft-ms", str(ttft), "--slo-tpot-ms",
           str(tpot), "--slo-percentile", "90", "--top", "2", "--threads", str(args.threads),
           "--rate-tolerance", str(args.rate_tolerance), "--out", out]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"placement_study.py: {' '.join(cmd)}\n{p.stderr}")
    with open(out) as f:
        c = best(json.load(f)["configs"], mode)
    if c is None:
        return {"goodput_per_gpu": 0.0, "shape": "-"}
    shape = (f"{c['decode']}xTP{c['decode_tp']}" if mode != "disaggregated" else
             f"{c['prefill']}xTP{c['prefill_tp']}+{c['decode']}xTP{c['decode_tp']}")
    return {"goodput_per_gpu": c["goodput_per_gpu"], "shape": shape}


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default="build")
    ap.add_argument("--gpus", type=int, default=8)
    ap.add_argument("--model", default="llama-3.1-8b")
    # One size, or a list tandem-plan searches per pool (e.g. 2,4,8: prefill and decode nodes
    # each of their best size).
    ap.add_argument("--tp", default="1")
    ap.add_argument("--workloads", default=",".join(SLOS))
    ap.add_argument("--arrivals", default=",".join(ARRIVALS))
    ap.add_argument("--num-prompts", type=int, default=20000)
    ap.add_argument("--run-duration-s", type=float, default=60)
    ap.add_argument("--threads", type=int, default=2)
    # tandem-plan's goodput resolution: two policies whose goodputs differ by less are a tie.
    ap.add_argument("--rate-tolerance", type=float, default=0.05)
    ap.add_argument("--out", default="")
    ap.add_argument("--merge", action="store_true",
                    help="keep the cells the --out file has; run only the missing ones")
    args = ap.parse_args()

    earlier = {}
    if args.merge and args.out and os.path.exists(args.out):
        with open(args.out) as f:
            old = json.load(f)
        if (old.get("gpus"), old.get("model"), str(old.get("tp")),
                old.get("rate_tolerance", 0.05)) != (args.gpus, args.model, args.tp,
                                                     args.rate_tolerance):
            sys.exit(f"placement_study.py: {args.out} is another study's (gpus, model, tp)")
        earlier = {(r["workload"], r["arrivals"]): r["cells"] for r in old["rows"]}
    rows = []
    start = time.monotonic()
    with tempfile.TemporaryDirectory() as work:
        for workload in args.workloads.split(","):
            for arrival in args.arrivals.split(","):
                row = {"workload": workload, "arrivals": arrival, "slo_ttft_ms": SLOS[workload][0],
                       "slo_tpot_ms": SLOS[workload][1], "cells": {}}
                kept = earlier.get((workload, arrival), {})
                for mode, policy in CELLS:
                    name = f"{mode}/{policy}"
                    row["cells"][name] = kept[name] if name in kept else plan(
                        args, work, workload, arrival, mode, policy)
                cells = row["cells"]
                # The cost policy on the baselines' best shapes too: its own search and theirs
                # stop at shapes whose goodputs tie within the rate tolerance, so a cell can
                # trail a baseline only by where its search stopped, not by how it places.
                for mode, baselines in (("colocated", COLOCATED), ("disaggregated", DISAGGREGATED)):
                    name = f"{mode}/cost_at_baseline_shape"
                    top = max((cells[f"{mode}/{p}"] for p in baselines),
                              key=lambda c: c["goodput_per_gpu"])
                    if name in kept and kept[name].get("shape") == top["shape"]:
                        cells[name] = kept[name]
                    elif top["shape"] == "-":
                        cells[name] = {"goodput_per_gpu": 0.0, "shape": "-"}
                    else:
                        cells[name] = plan(args, work, workload, arrival, mode, "cost",
                                           shapes=f"{mode}:{top['shape']}")
                g = {k: v["goodput_per_gpu"] for k, v in cells.items()}
                row["colocated"] = max(g[f"colocated/{p}"] for p in COLOCATED)
                row["disaggregated"] = max(g[f"disaggregated/{p}"] for p in DISAGGREGATED)
                row["cost_searched"] = max(g["colocated/cost"], g["disaggregated/cost"],
                                           g["auto/cost"])
                row["cost"] = max(row["cost_searched"], g["colocated/cost_at_baseline_shape"],
                                  g["disaggregated/cost_at_baseline_shape"])
                better = max(row["colocated"], row["disaggregated"])
                row["cost_vs_better"] = row["cost"] / better if better > 0 else 0.0
                row["cost_vs_colocated"] = row["cost"] / row["colocated"] if row["colocated"] else 0.0
                rows.append(row)
                print(f"{workload:13s} {arrival:8s} " +
                      " ".join(f"{k}={v:.2f}" for k, v in g.items()) +
                      f"  cost/better {row['cost_vs_better']:.2f}x", flush=True)
    elapsed = time.monotonic() - start

    head = ["workload", "arrivals", "SLO (TTFT/TPOT ms)", "colocated ll", "colocated rr",
            "disagg rr", "disagg ll", "disagg pa", "cost colocated", "cost disagg", "cost auto",
            "cost on the baselines' shapes (colocated, disagg)", "cost / better",
            "cost / colocated"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        c = r["cells"]
        cell = lambda k: f"{c[k]['goodput_per_gpu']:.2f} ({c[k]['shape']})"  # noqa: E731
        lines.append("| " + " | ".join([
            r["workload"], r["arrivals"], f"{r['slo_ttft_ms']}/{r['slo_tpot_ms']}",
            cell("colocated/least_loaded"), cell("colocated/round_robin"),
            cell("disaggregated/round_robin"),
            cell("disaggregated/least_loaded"), cell("disaggregated/prefix_aware"),
            cell("colocated/cost"), cell("disaggregated/cost"), cell("auto/cost"),
            f"{c['colocated/cost_at_baseline_shape']['goodput_per_gpu']:.2f}, "
            f"{c['disaggregated/cost_at_baseline_shape']['goodput_per_gpu']:.2f}",
            f"{r['cost_vs_better']:.2f}x", f"{r['cost_vs_colocated']:.2f}x"]) + " |")
    print(f"\nGoodput per GPU (req/s), {args.gpus} x H100, {args.model} TP{args.tp}, p90 SLOs; "
          f"{elapsed:.0f} s")
    print("\n".join(lines))
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"gpus": args.gpus, "model": args.model, "tp": args.tp,
                       "num_prompts": args.num_prompts, "run_duration_s": args.run_duration_s,
                       "rate_tolerance": args.rate_tolerance, "wall_s": elapsed, "rows": rows},
                      f, indent=2)
            f.write("\n")


if __name__ == "__main__":
    main()
