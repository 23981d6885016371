#!/usr/bin/env python3
"""tandem-sim judged again against the real runs of an earlier validation (issue 18;
tools/sim/README.md, "Validation against the real cluster").

tools/sim/validate.py records, for every run, the real cluster's numbers and the tandem-sim command
that stood for it (its flags: the cluster, the measured path costs, the workload and seed, the
real router's poll times). When the model changes and the real side does not (the real cluster's
code is the same), this reruns each of those commands with the current tandem-sim, and the five
poll-period runs of its range, and writes the same report with the same real numbers, saying
which validation they come from. It starts no cluster and needs no quiet machine: tandem-sim's
results do not depend on the wall clock. The time-scale check's real numbers are kept as they
were (its second cluster's poll times are not recorded, so its tandem-sim side is not rerun).

  tools/sim/resim.py [--build build] [--from bench/results/sim_validation.json] [--out JSON]
  tools/sim/resim.py --check bench/results/sim_validation_resim.json   # CI: the table is current

--check FILE exits 1 when today's tandem-sim gives any run other numbers than FILE records: the
published table (tools/sim/README.md) then no longer describes the model, and FILE should be
written again with --out (and the table with it).
"""

import argparse
import datetime
import json
import os
import shlex
import subprocess
import sys
import tempfile

from validate import POLL_PERIODS_MS, summary_of
from validation_report import (METRICS, REPO, git_commit, goodput, goodput_table, machine, rel,
                               table)


def run_sim(binary, args, out):
    p = subprocess.run([binary] + args + ["--out", out], capture_output=True, text=True,
                       timeout=600)
    if p.returncode != 0:
        raise RuntimeError(f"tandem-sim {' '.join(args)} failed:\n{p.stderr[-2000:]}")
    return summary_of(out)


def without_polls(args, period_ms):
    """The command with periodic polls every `period_ms` instead of the listed poll times."""
    out, i = [], 0
    while i < len(args):
        if args[i] == "--load-poll-times":
            i += 2
            continue
        if args[i] == "--load-poll-ms":
            out += ["--load-poll-ms", str(period_ms)]
            i += 2
            continue
        out.append(args[i])
        i += 1
    return out


def real_runs_from(source):
    """Where `source`'s real runs come from: one validate.py run, or the parts of a merged table
    (tools/sim/merge_validation.py)."""
    if "date" in source:
        return {"date": source["date"], "commit": source["commit"]}
    return {"sources": [{k: part[k] for k in ("file", "date", "commit", "pairs")}
                        for part in source.get("sources", [])]}


def describe_source(source):
    if "date" in source:
        return f"{source['date']} (commit {source['commit']})"
    return ", ".join(f"{part['date']} (commit {part['commit']})"
                     for part in source.get("sources", []))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default=os.path.join(REPO, "build"))
    ap.add_argument("--from", dest="source",
                    default=os.path.join(REPO, "bench", "results", "sim_validation.json"))
    ap.add_argument("--out", default="", help="JSON to write (default: print only)")
    ap.add_argument("--check", default="",
                    help="exit 1 when a run's tandem-sim numbers differ from this JSON's")
    args = ap.parse_args()
    binary = os.path.join(args.build, "bin", "tandem-sim")
    if not os.access(binary, os.X_OK):
        print(f"resim: {binary} is not built (ninja -C {args.build} tandem-sim)", file=sys.stderr)
        return 2
    with open(args.source) as f:
        before = json.load(f)
    rows = []
    with tempfile.TemporaryDirectory() as work:
        for r in before["runs"]:
            cmd = shlex.split(r["sim_command"])[1:]  # without "tandem-sim"
            sim = run_sim(binary, cmd, os.path.join(work, "polls.json"))
            runs = [run_sim(binary, without_polls(cmd, p), os.path.join(work, f"p{p}.json"))
                    for p in POLL_PERIODS_MS]
            error = {k: rel(sim[k], r["real"][k]) for k, _, _ in METRICS}
            error["good_request_rate"] = rel(sim["good_request_rate"],
                                             r["real"]["good_request_rate"])
            rows.append(dict(r, sim=sim, error=error, sim_range={
                k: [min(x[k] for x in runs), max(x[k] for x in runs)] for k, _, _ in METRICS}))
            print(f"resim: {r['workload']} {r['setup']} {r['rate']:g}", file=sys.stderr)
    sweeps = []
    for s in before["goodput"]:
        mine = [r for r in rows if r["workload"] == s["workload"] and r["setup"] == s["setup"]]
        sweeps.append(dict(s, sim=goodput([(r["rate"], r["sim"]["slo_attainment"])
                                           for r in mine])))
    errors = [abs(e) for r in rows for k, e in r["error"].items()
              if k != "good_request_rate" and e is not None]
    result = dict(before, runs=rows, goodput=sweeps,
                  max_abs_latency_error=max(errors) if errors else None)
    result["time_scale_check"] = [dict(c, sim_side="not rerun: the earlier validation's")
                                  for c in before.get("time_scale_check", [])]
    result["resimulated"] = {
        "tool": "tools/sim/resim.py",
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "commit": git_commit(), "machine": machine(),
        "real_runs_from": real_runs_from(before),
    }
    within = sum(1 for e in errors if e <= 0.1)
    print(f"tandem-sim at {result['resimulated']['commit']} against the real runs of "
          f"{describe_source(before)}: {within} of {len(errors)} latency "
          f"numbers within 10%\n\n{table(rows)}\n\n{goodput_table(sweeps)}")
    if args.out:
        with open(args.out, "w") as f:
            json.dump(result, f, indent=1)
            f.write("\n")
    if args.check:
        with open(args.check) as f:
            recorded = json.load(f)["runs"]
        stale = [f"{r['workload']} {r['setup']} {r['rate']:g}" for r, old in zip(rows, recorded)
                 if (r["sim"], r["sim_range"]) != (old["sim"], old["sim_range"])]
        if len(recorded) != len(rows) or stale:
            print(f"resim: tandem-sim no longer gives the numbers {args.check} records "
                  f"({', '.join(stale) or 'a different set of runs'}): write it again with "
                  f"--out and update the table in tools/sim/README.md", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
