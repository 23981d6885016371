#!/usr/bin/env python3
"""tandem-plan's search time, two builds side by side on the same search: runs each build's
tandem-plan in turn (A, B, A, B, ...), records wall, user and system time, page faults and peak
memory, checks that both found the same configurations (the JSON without its timings), prints a
table and writes JSON. The two builds' runs alternate because this machine's speed drifts by
±25 % from minute to minute.

  tools/plan/compare_builds.py --a /tmp/old-build --b build --reps 1 --out bench/results/x.json \\
      -- --gpus 16 --gpu h100 --model llama-3.1-8b --tp 1,2 --dataset random ...

Everything after `--` goes to tandem-plan (without --out, which this script sets).
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

TIMING_KEYS = {"wall_s", "sim_wall_s", "search_wall_s"}


def without_timings(d):
    if isinstance(d, dict):
        return {k: without_timings(v) for k, v in d.items() if k not in TIMING_KEYS}
    if isinstance(d, list):
        return [without_timings(x) for x in d]
    return d


def run(build, plan_args, out):
    cmd = ["/usr/bin/time", "-f", "time: wall=%e user=%U sys=%S faults=%R rss_kb=%M",
           os.path.join(build, "bin", "tandem-plan"), *plan_args, "--out", out]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"compare_builds.py: {' '.join(cmd)} failed:\n{p.stderr[-2000:]}")
    m = re.search(r"time: wall=([\d.]+) user=([\d.]+) sys=([\d.]+) faults=(\d+) rss_kb=(\d+)",
                  p.stderr)
    with open(out) as f:
        result = json.load(f)
    return {"wall_s": float(m.group(1)), "user_s": float(m.group(2)), "sys_s": float(m.group(3)),
            "minor_faults": int(m.group(4)), "rss_mb": int(m.group(5)) / 1024,
            "search_wall_s": result["search"]["wall_s"]}, without_timings(result["configs"])


def main():
    argv = sys.argv[1:]
    plan_args = []
    if "--" in argv:
        plan_args = argv[argv.index("--") + 1:]
        argv = argv[:argv.index("--")]
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--a", required=True, help="the first build directory (its bin/tandem-plan)")
    ap.add_argument("--b", required=True, help="the second build directory")
    ap.add_argument("--a-name", default="a")
    ap.add_argument("--b-name", default="b")
    ap.add_argument("--reps", type=int, default=1)
    ap.add_argument("--out", default="")
    a = ap.parse_args(argv)
    if not plan_args:
        sys.exit("compare_builds.py: give tandem-plan's arguments after --")
    runs = []
    configs = {}
    with tempfile.TemporaryDirectory() as work:
        for rep in range(a.reps):
            for name, build in ((a.a_name, a.a), (a.b_name, a.b)):
                r, c = run(build, plan_args, os.path.join(work, f"{name}_{rep}.json"))
                r.update(build=name, rep=rep)
                runs.append(r)
                configs.setdefault(name, c)
                print(f"{name:>12s} rep {rep}: wall {r['wall_s']:7.1f} s  user {r['user_s']:7.1f} s"
                      f"  sys {r['sys_s']:6.1f} s  {r['minor_faults']:9d} faults"
                      f"  {r['rss_mb']:7.0f} MB", flush=True)
    same = configs[a.a_name] == configs[a.b_name]
    print(f"the same configurations found: {'yes' if same else 'NO'}")
    if a.out:
        with open(a.out, "w") as f:
            json.dump({"plan_args": plan_args, "a": a.a_name, "b": a.b_name, "runs": runs,
                       "same_configs": same}, f, indent=1)
            f.write("\n")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
