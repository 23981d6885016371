#!/usr/bin/env python3
"""How well the real cluster repeats itself, against how well tandem-sim matches it (issue 18;
tools/sim/README.md, "Validation against the real cluster").

Takes two work directories of tools/sim/validate.py (its --work: the real runs' tandem-bench JSON,
real-<workload>-<setup>-<rate>.json, and tandem-sim's, sim-<...>-polls.json) from two runs of the
same commit and seeds, and reports for every run's TTFT and TPOT p50/p90 the difference between
the two real runs, and tandem-sim's error against each. Counts how many exceed --bound.

  tools/sim/compare_real_runs.py WORK1 WORK2 [--out JSON] [--bound 0.1]
"""

import argparse
import glob
import json
import os
import sys

METRICS = [("ttft_p50", "ttft_s", "median"), ("ttft_p90", "ttft_s", "p90"),
           ("tpot_p50", "tpot_s", "median"), ("tpot_p90", "tpot_s", "p90")]


def summary(path):
    with open(path) as f:
        s = json.load(f)["runs"][0]["summary"]
    return {k: s[field][stat] for k, field, stat in METRICS}


def rel(a, b):
    return (a - b) / b


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("work1")
    ap.add_argument("work2")
    ap.add_argument("--out")
    ap.add_argument("--bound", type=float, default=0.1)
    args = ap.parse_args()
    rows = []
    for path2 in sorted(glob.glob(os.path.join(args.work2, "real-*.json"))):
        tag = os.path.basename(path2)[len("real-"):-len(".json")]
        path1 = os.path.join(args.work1, f"real-{tag}.json")
        sim_path = os.path.join(args.work2, f"sim-{tag}-polls.json")
        if not os.path.exists(path1) or not os.path.exists(sim_path):
            continue
        real1, real2, sim = summary(path1), summary(path2), summary(sim_path)
        rows.append({"run": tag, "real1": real1, "real2": real2, "sim": sim,
                     "real1_vs_real2": {k: rel(real1[k], real2[k]) for k in real2},
                     "sim_vs_real2": {k: rel(sim[k], real2[k]) for k in real2},
                     "sim_vs_real1": {k: rel(sim[k], real1[k]) for k in real1}})
    if not rows:
        print("no run in both work directories", file=sys.stderr)
        return 1
    counts = {c: sum(abs(e) > args.bound for r in rows for e in r[c].values())
              for c in ("real1_vs_real2", "sim_vs_real2", "sim_vs_real1")}
    print("| run | real 1 vs real 2: TTFT p50, p90, TPOT p50, p90 | tandem-sim vs real 2 "
          "| tandem-sim vs real 1 |")
    print("|---|---|---|---|")
    for r in rows:
        cells = [" ".join(f"{r[c][k] * 100:+.1f}%" for k, _, _ in METRICS)
                 for c in ("real1_vs_real2", "sim_vs_real2", "sim_vs_real1")]
        print(f"| {r['run']} | " + " | ".join(cells) + " |")
    total = len(rows) * len(METRICS)
    print(f"\nabove {args.bound * 100:g}% of {total}: " +
          ", ".join(f"{c} {n}" for c, n in counts.items()))
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"tool": "tools/sim/compare_real_runs.py", "work1": args.work1,
                       "work2": args.work2, "bound": args.bound, "above_bound": counts,
                       "numbers": total, "runs": rows}, f, indent=1)
            f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
