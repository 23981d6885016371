#!/usr/bin/env python3
"""One validation table from several runs of tools/sim/validate.py (issue 18; tools/sim/README.md,
"Validation against the real cluster"): the full table at 300 requests a run takes two hours
here, so it is run a few workloads and setups at a time, each with the machine otherwise quiet,
and put together with this.

Each input is a validate.py JSON, or a JSON object whose values include such results (the
bench/results/sim_validation_300_*.json files). A (workload, setup) pair given twice is an error
(pick one run), unless --later-wins: then the later input's runs of it replace the earlier's (a
part run again after a change to the code it measures). Prints the tables, counts the latency
errors above --bound, and writes JSON.

  tools/sim/merge_validation.py A.json B.json ... --out bench/results/X.json [--markdown X.md]
"""

import argparse
import json
import os
import sys

from validation_report import METRICS, fmt_err, goodput_table, table

SETUP_ORDER = ["colocated-rr", "colocated-ll", "disaggregated"]
WORKLOAD_ORDER = ["random-1024-128", "chat-lognormal", "shared-prefix"]


def validate_results(path):
    """The validate.py results in the file at `path`, with the path each came from."""
    with open(path) as f:
        data = json.load(f)
    if "runs" in data:
        return [data]
    return [v for v in data.values() if isinstance(v, dict) and "runs" in v]


def order(workload, setup):
    rank = lambda names, x: names.index(x) if x in names else len(names)
    return (rank(SETUP_ORDER, setup), rank(WORKLOAD_ORDER, workload), workload, setup)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("inputs", nargs="+")
    ap.add_argument("--out", required=True, help="the merged JSON")
    ap.add_argument("--markdown", help="also write the tables here")
    ap.add_argument("--bound", type=float, default=0.1)
    ap.add_argument("--later-wins", action="store_true",
                    help="a pair in a later input replaces the same pair's runs in earlier ones")
    args = ap.parse_args()

    by_pair, sources = {}, []  # (workload, setup) -> (source index, runs, sweeps)
    for path in args.inputs:
        results = validate_results(path)
        if not results:
            sys.exit(f"merge_validation: {path} holds no validate.py results")
        for res in results:
            pairs = {(r["workload"], r["setup"]) for r in res["runs"]}
            for pair in pairs:
                if pair in by_pair and not args.later_wins:
                    sys.exit(f"merge_validation: {pair[0]} {pair[1]} is in both "
                             f"{sources[by_pair[pair][0]]['file']} and {path}")
                by_pair[pair] = (len(sources),
                                 [r for r in res["runs"] if (r["workload"], r["setup"]) == pair],
                                 [g for g in res["goodput"]
                                  if (g["workload"], g["setup"]) == pair])
            sources.append({"file": os.path.relpath(path), "date": res["date"],
                            "commit": res["commit"], "command": res["command"],
                            "wall_s": res["wall_s"], "min_requests":
                            res["config"]["min_requests"], "pairs": sorted(map(list, pairs))})
    used = {i for i, _, _ in by_pair.values()}
    for i, source in enumerate(sources):  # what each source still gives
        source["pairs"] = sorted([list(p) for p, (j, _, _) in by_pair.items() if j == i])
    sources = [s for i, s in enumerate(sources) if i in used]
    runs = [r for _, rs, _ in by_pair.values() for r in rs]
    sweeps = [g for _, _, gs in by_pair.values() for g in gs]
    runs.sort(key=lambda r: (*order(r["workload"], r["setup"]), r["rate"]))
    sweeps.sort(key=lambda s: order(s["workload"], s["setup"]))

    errors = [(r, k, r["error"][k]) for r in runs for k, _, _ in METRICS]
    above = [(r, k, e) for r, k, e in errors if e is None or abs(e) > args.bound]
    by_setup = {}
    for r, k, e in errors:
        total, bad = by_setup.get(r["setup"], (0, 0))
        by_setup[r["setup"]] = (total + 1, bad + (e is None or abs(e) > args.bound))
    goodput_equal = sum(s["real"] == s["sim"] for s in sweeps)

    result = {"tool": "tools/sim/merge_validation.py", "bound": args.bound, "sources": sources,
              "latency_numbers": len(errors), "within_bound": len(errors) - len(above),
              "within_bound_by_setup": {s: {"numbers": t, "within": t - b}
                                        for s, (t, b) in by_setup.items()},
              "goodput_sweeps": len(sweeps), "goodput_equal": goodput_equal,
              "runs": runs, "goodput": sweeps}
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(result, f, indent=1)
        f.write("\n")

    text = [table(runs), "", goodput_table(sweeps), "",
            f"{len(errors) - len(above)} of {len(errors)} latency numbers within "
            f"{args.bound * 100:g} % (" + ", ".join(
                f"{s} {t - b} of {t}" for s, (t, b) in sorted(
                    by_setup.items(), key=lambda kv: order("", kv[0]))) +
            f"); goodput equal on {goodput_equal} of {len(sweeps)} sweeps."]
    for r, k, e in above:
        text.append(f"- above {args.bound * 100:g} %: {r['workload']} {r['setup']} "
                    f"{r['rate']:g} req/s {k} {fmt_err(e)}")
    print("\n".join(text))
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write("\n".join(text) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
