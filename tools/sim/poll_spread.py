#!/usr/bin/env python3
"""How much a run's latencies hang on the phase and period of the router's load polls (issue 18;
tools/sim/README.md, "Validation against the real cluster").

A placement policy that reads the nodes' load reports can be chaotic: one report read a few
milliseconds earlier sends a request elsewhere, and from there the runs part. The real cluster's
poll times are never the same twice, so such a policy's real runs differ from each other, and
tandem-sim cannot match any one of them. This reruns tandem-sim on the runs a validation recorded
(tools/sim/validate.py's JSON: each run's tandem-sim command), once per load-poll period from
--periods (ms, from 0, instead of the real router's poll times), and prints each run's range of
TTFT and TPOT p50 / p90 over those periods: narrow for a policy that placement noise does not
steer, wide for one it does. Virtual time: no cluster, no quiet machine.

  tools/sim/poll_spread.py --from bench/results/sim_validation_300.json --setup colocated-ll \\
      [--binary build/bin/tandem-sim] [--periods 44-56] [--out JSON]
"""

import argparse
import datetime
import json
import os
import shlex
import subprocess
import sys
import tempfile

from validation_report import METRICS, REPO, git_commit, machine


def parse_periods(text):
    if "-" in text:
        lo, hi = (int(x) for x in text.split("-"))
        return list(range(lo, hi + 1))
    return [int(x) for x in text.split(",")]


def summary(path):
    with open(path) as f:
        run = json.load(f)["runs"][0]["summary"]
    return {k: run[field][stat] for k, field, stat in METRICS}


def command_without_polls(recorded, binary):
    """The recorded tandem-sim command, on `binary`, without the real router's poll times."""
    args = shlex.split(recorded)[1:]
    if "--load-poll-times" in args:
        i = args.index("--load-poll-times")
        del args[i:i + 2]
    return [binary] + args


def with_period(cmd, period_ms):
    cmd = list(cmd)
    if "--load-poll-ms" in cmd:
        cmd[cmd.index("--load-poll-ms") + 1] = str(period_ms)
    else:
        cmd += ["--load-poll-ms", str(period_ms)]
    return cmd


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--from", dest="source", required=True,
                    help="a validation JSON (tools/sim/validate.py or merge_validation.py)")
    ap.add_argument("--setup", help="only this setup's runs (e.g. colocated-ll)")
    ap.add_argument("--binary", default=os.path.join(REPO, "build", "bin", "tandem-sim"))
    ap.add_argument("--periods", default="44-56", help="load-poll periods in ms: A-B or A,B,C")
    ap.add_argument("--out", help="write the ranges here as JSON")
    args = ap.parse_args()
    if not os.access(args.binary, os.X_OK):
        print(f"poll_spread: {args.binary} is not built", file=sys.stderr)
        return 2
    with open(args.source) as f:
        source = json.load(f)
    runs = [r for r in source["runs"] if args.setup in (None, r["setup"])]
    if not runs:
        print(f"poll_spread: no runs of setup {args.setup} in {args.source}", file=sys.stderr)
        return 2
    periods = parse_periods(args.periods)
    rows = []
    with tempfile.TemporaryDirectory() as work:
        for r in runs:
            base = command_without_polls(r["sim_command"], args.binary)
            results = []
            for period in periods:
                out = os.path.join(work, "run.json")
                subprocess.run(with_period(base, period) + ["--out", out], check=True,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                results.append(summary(out))
            spread = {k: [min(x[k] for x in results), max(x[k] for x in results)]
                      for k, _, _ in METRICS}
            rows.append({"workload": r["workload"], "setup": r["setup"], "rate": r["rate"],
                         "seed": r["seed"], "range_s": spread})
    print(f"tandem-sim over load-poll periods {args.periods} ms ({len(periods)} runs each), "
          f"{args.binary}")
    print()
    print("| workload | setup | rate | " +
          " | ".join(k.replace("_", " ").upper().replace(" P", " p") + " ms" for k, _, _ in METRICS) +
          " |")
    print("|---|---|---|" + "---|" * len(METRICS))
    for row in rows:
        cells = [f"{1000 * row['range_s'][k][0]:.1f}–{1000 * row['range_s'][k][1]:.1f}"
                 for k, _, _ in METRICS]
        print(f"| {row['workload']} | {row['setup']} | {row['rate']:g} | " + " | ".join(cells) +
              " |")
    if args.out:
        result = {
            "tool": "tools/sim/poll_spread.py",
            "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "commit": git_commit(), "machine": machine(), "binary": args.binary,
            "command": " ".join(shlex.quote(a) for a in sys.argv),
            "from": args.source, "periods_ms": periods, "runs": rows,
        }
        with open(args.out, "w") as f:
            json.dump(result, f, indent=1)
            f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
