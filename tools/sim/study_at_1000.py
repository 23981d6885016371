#!/usr/bin/env python3
"""The study at 1,000 GPUs (tools/sim/README.md, "The study"). A tandem-plan search there is out of
reach on this machine (one 1,000-GPU run costs a minute or more), so the best shapes tandem-plan
found at 64 GPUs are scaled up (every pool x 1000/64, TP kept) and each is swept with tandem-sim
around its 64-GPU goodput, with tandem-plan's judge: a rate passes when the p90 TTFT and the p90
TPOT are within the limits and no request failed. Goodput is the highest passing rate, within 5 %
of the lowest failing one: found by stepping out from the scaled 64-GPU goodput, then halving the
gap. Prints a table and writes JSON.

  tools/sim/study_at_1000.py --build build --out bench/results/sim_study_1000gpu.json   # ~1.5 h
  tools/sim/study_at_1000.py --cells chatbot:1000:20 --seconds 30    # one cell, shorter runs
  tools/sim/study_at_1000.py --gpus 64 --seconds 20 ...   # the 64-GPU shapes as they are, judged
                                                           # on the same arrivals as a 1,000-GPU run

Multi-turn scales its conversations with the GPUs too (200 x 1000/64), so that each node sees as
many conversations as at 64 GPUs.
"""
import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time

from study import WORKLOADS

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
RESOLUTION = 0.05  # the highest passing and the lowest failing rate found are this close
# The middle TTFT limit with the tight TPOT limit (where disaggregation pays most at 64 GPUs)
# and with the middle one (where colocated ties or wins there).
DEFAULT_CELLS = ("chatbot:1000:20,summarization:8000:20,code:500:25,multi-turn:1000:20,"
                 "chatbot:1000:50,summarization:8000:50,code:500:60,multi-turn:1000:50")


def scaled_shape(config, gpus_from, gpus_to):
    """The 64-GPU configuration's pools, each scaled by gpus_to / gpus_from (gpus_from: the GPUs
    it uses, which may be fewer than the budget), the decode pool taking what is left. The
    prefill pool is the scaled count rounded down or up, whichever leaves fewer of the budget's
    GPUs unused (then the nearer): rounding 218.75 TP4 prefill nodes to 219 left 15 TP8 decode
    nodes on 996 GPUs, 4 % short of the 64-GPU shape's decode share, and cost summarization's
    1,000-GPU goodput 5 % (its decode nodes preempted)."""
    factor = gpus_to / gpus_from
    if config["mode"] == "colocated":
        tp = config["decode_tp"]
        return {"mode": "colocated", "prefill": 0, "prefill_tp": 0, "decode": gpus_to // tp,
                "decode_tp": tp}
    ptp, dtp = config["prefill_tp"], config["decode_tp"]
    exact = config["prefill"] * factor

    def unused_then_distance(prefill):
        decode = (gpus_to - prefill * ptp) // dtp
        return (gpus_to - prefill * ptp - decode * dtp, abs(prefill - exact))

    prefill = min({max(1, math.floor(exact)), max(1, math.ceil(exact))}, key=unused_then_distance)
    decode = (gpus_to - prefill * ptp) // dtp
    return {"mode": "disaggregated", "prefill": prefill, "prefill_tp": ptp, "decode": decode,
            "decode_tp": dtp}


def workload_flags(workload, factor):
    flags = list(WORKLOADS[workload])
    if workload == "multi-turn":
        i = flags.index("--prefix-num")
        flags[i + 1] = str(round(int(flags[i + 1]) * factor))
    return flags


def run_rate(build, work, model, config, shape, workload_args, rate, seconds, ttft_ms, tpot_ms):
    out = os.path.join(work, f"run_{shape['mode']}_{rate:.0f}.json")
    cmd = [os.path.join(build, "bin", "tandem-sim"), "--gpu", "h100", "--model", model,
           "--mode", shape["mode"], "--decode", str(shape["decode"]),
           "--decode-tp", str(shape["decode_tp"]), "--tp", str(shape["decode_tp"]),
           "--policy", config["policy"],
           "--max-num-batched-tokens", str(config["max_num_batched_tokens"]), *workload_args,
           "--num-prompts", str(math.ceil(rate * seconds)), "--request-rate", f"{rate:.3f}",
           "--slo-ttft-ms", str(ttft_ms), "--slo-tpot-ms", str(tpot_ms),
           "--no-requests-in-json", "--out", out]
    if shape["mode"] == "disaggregated":
        cmd += ["--prefill", str(shape["prefill"]), "--prefill-tp", str(shape["prefill_tp"]),
                "--local-prefill-threshold", str(config["local_prefill_threshold"])]
    start = time.monotonic()
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"study_at_1000.py: {' '.join(cmd)} failed:\n{p.stderr}")
    with open(out) as f:
        s = json.load(f)["runs"][0]["summary"]
    ttft, tpot = s["ttft_s"]["p90"], s["tpot_s"]["p90"]
    return {"rate": rate, "passed": s["failed"] == 0 and ttft <= ttft_ms / 1000 and
            tpot <= tpot_ms / 1000, "ttft_p90_s": ttft, "tpot_p90_s": tpot,
            "attainment": s["slo_attainment"], "requests": s["num_requests"],
            "wall_s": time.monotonic() - start, "command": " ".join(cmd)}


def sweep(build, work, model, config, shape, workload_args, start_rate, seconds, ttft, tpot):
    """From the scaled 64-GPU goodput, steps of 5, 10, 20 ... % up while the rate passes (down
    while it fails), then halving the gap (geometrically) until the highest passing rate and the
    lowest failing one are within RESOLUTION: the goodput is the passing one."""
    points = []

    def probe(rate):
        points.append(run_rate(build, work, model, config, shape, workload_args, rate, seconds,
                               ttft, tpot))
        return points[-1]["passed"]

    lo = hi = None
    step = RESOLUTION
    if probe(start_rate):
        lo = start_rate
        while hi is None and lo < start_rate * 16:
            rate = lo * (1 + step)
            if probe(rate):
                lo = rate
            else:
                hi = rate
            step *= 2
    else:
        hi = start_rate
        while lo is None and hi > start_rate / 16:
            rate = hi / (1 + step)
            if probe(rate):
                lo = rate
            else:
                hi = rate
            step *= 2
    while lo is not None and hi is not None and hi / lo > 1 + RESOLUTION:
        mid = math.sqrt(lo * hi)
        if probe(mid):
            lo = mid
        else:
            hi = mid
    bound = "exact" if lo is not None and hi is not None else (
        "at least (x16 passed)" if lo is not None else "below 1/16 of the start")
    goodput = lo or 0.0
    return {"shape": shape, "goodput_rps": goodput, "goodput_per_gpu": goodput / shape_gpus(shape),
            "bound": bound, "points": sorted(points, key=lambda p: p["rate"]),
            "wall_s": sum(p["wall_s"] for p in points)}


def shape_gpus(shape):
    return shape["prefill"] * shape["prefill_tp"] + shape["decode"] * shape["decode_tp"]


def describe(shape):
    if shape["mode"] == "colocated":
        return f"{shape['decode']}xTP{shape['decode_tp']}"
    return (f"{shape['prefill']}xTP{shape['prefill_tp']}+"
            f"{shape['decode']}xTP{shape['decode_tp']}")


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default="build")
    ap.add_argument("--study", default=os.path.join(REPO, "bench/results/sim_study_64gpu.json"),
                    help="the 64-GPU study whose best shapes are scaled")
    ap.add_argument("--cells", default=DEFAULT_CELLS, help="WORKLOAD:TTFT_MS:TPOT_MS,...")
    ap.add_argument("--model", default="llama-3.1-70b")
    ap.add_argument("--gpus", type=int, default=1000,
                    help="the budget the shapes are scaled to (default 1000; the study's own "
                         "GPU count sweeps its shapes unscaled, e.g. with another --seconds)")
    ap.add_argument("--seconds", type=float, default=60,
                    help="arrivals of each run at the sweep's highest rate")
    ap.add_argument("--out", default="")
    a = ap.parse_args()
    with open(a.study) as f:
        rows = json.load(f)["rows"]
    results = []
    with tempfile.TemporaryDirectory(prefix="study1000-") as work:
        for cell in a.cells.split(","):
            workload, ttft, tpot = cell.split(":")
            ttft, tpot = int(ttft), int(tpot)
            row = next((r for r in rows if r["model"] == a.model and r["workload"] == workload
                        and r["ttft_ms"] == ttft and r["tpot_ms"] == tpot), None)
            if row is None:
                sys.exit(f"study_at_1000.py: no {a.model} {workload} {ttft}/{tpot} row in {a.study}")
            factor = a.gpus / row["colocated"]["gpus"]
            args = workload_flags(workload, factor)
            result = {"model": a.model, "workload": workload, "ttft_ms": ttft, "tpot_ms": tpot,
                      "gpus": a.gpus, "from_gpus": row["colocated"]["gpus"]}
            for mode in ("colocated", "disaggregated"):
                config = row[mode]
                shape = scaled_shape(config, config["gpus"], a.gpus)
                start = config["goodput_rps"] * shape_gpus(shape) / config["gpus"]
                r = sweep(a.build, work, a.model, config, shape, args, start, a.seconds, ttft,
                          tpot)
                r["from"] = {"shape": describe(config), "goodput_per_gpu": config["goodput_per_gpu"]}
                result[mode] = r
                print(f"{workload} {ttft}/{tpot} {mode}: {describe(config)} -> {describe(shape)}: "
                      f"{r['goodput_per_gpu']:.3f} req/s/GPU ({r['bound']}), 64 GPUs "
                      f"{config['goodput_per_gpu']:.3f}; {r['wall_s']:.0f} s", flush=True)
            co, dis = result["colocated"], result["disaggregated"]
            result["ratio"] = (dis["goodput_per_gpu"] / co["goodput_per_gpu"]
                               if co["goodput_per_gpu"] > 0 else None)
            result["ratio_at_64"] = (row["disaggregated"]["goodput_per_gpu"] /
                                     row["colocated"]["goodput_per_gpu"])
            results.append(result)
    to = f"{rows[0]['gpus']} → {a.gpus:,} GPUs" if rows else ""
    per = f"{rows[0]['gpus']} / {a.gpus:,}" if rows else ""
    print(f"\n| workload | TTFT, TPOT limits | colocated {to} | req/s/GPU {per} | "
          f"disaggregated {to} | req/s/GPU {per} | disaggregated / colocated at {per} |")
    print("|---|---|---|---|---|---|---|")
    for r in results:
        co, dis = r["colocated"], r["disaggregated"]
        ratio = f"{r['ratio']:.2f}" if r["ratio"] is not None else "-"
        print(f"| {r['workload']} | {r['ttft_ms']} ms, {r['tpot_ms']} ms | {co['from']['shape']} → "
              f"{describe(co['shape'])} | {co['from']['goodput_per_gpu']:.2f} / "
              f"{co['goodput_per_gpu']:.2f} | {dis['from']['shape']} → {describe(dis['shape'])} | "
              f"{dis['from']['goodput_per_gpu']:.2f} / {dis['goodput_per_gpu']:.2f} | "
              f"{r['ratio_at_64']:.2f} / {ratio} |")
    if a.out:
        with open(a.out, "w") as f:
            json.dump({"resolution": RESOLUTION, "seconds": a.seconds, "cells": results}, f, indent=1)
            f.write("\n")


if __name__ == "__main__":
    main()
