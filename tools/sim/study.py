#!/usr/bin/env python3
"""When does disaggregation pay? tandem-plan (tandem-sim as its inner loop) finds the best colocated
and the best disaggregated configuration of a GPU budget for a model, a workload and an SLO, and
this study compares their goodput per GPU over a grid of TTFT and TPOT limits
(tools/sim/README.md, "The study"). Prints a table per (model, GPUs, workload), writes JSON and an
SVG of the disaggregated / colocated goodput ratio over the SLO grid.

  tools/sim/study.py --build build --out bench/results/sim_study.json --plot bench/results/sim_study.svg
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

# Workloads: tandem-bench dataset flags. Lengths: chatbot as ShareGPT after vLLM's filter (short
# prompts, longer replies), summarization 8k in / 200 out, code completion short in / short out
# (DistServe's HumanEval case), multi-turn conversations sharing 2k-token histories.
WORKLOADS = {
    "chatbot": ["--dataset", "random", "--input-len-dist", "lognormal", "--random-input-len", "300",
                "--input-len-max", "1024", "--output-len-dist", "lognormal",
                "--random-output-len", "250", "--output-len-max", "1024"],
    "summarization": ["--dataset", "random", "--random-input-len", "8192", "--random-output-len",
                      "200", "--random-range-ratio", "0.25"],
    "code": ["--dataset", "random", "--input-len-dist", "lognormal", "--random-input-len", "180",
             "--output-len-dist", "lognormal", "--random-output-len", "120"],
    "multi-turn": ["--dataset", "shared-prefix", "--prefix-num", "200", "--prefix-questions", "100",
                   "--prefix-len", "2048", "--question-len", "128", "--prefix-output-len", "256"],
}


def workload_flags(workload, conversations):
    """The workload's dataset flags; multi-turn with `conversations` system prompts (default 200,
    the published cells'). Its dataset is conversations x 100 turns: 20,000 requests are 6 s of
    arrivals at 8B's rates on 64 GPUs, and 2,000 conversations make the 60 s a probe needs, each
    reused as often as before."""
    flags = list(WORKLOADS[workload])
    if workload == "multi-turn":
        flags[flags.index("--prefix-num") + 1] = str(conversations)
    return flags


# (TTFT ms, TPOT ms) grids per workload: tight to loose on each axis. Code's middle point is
# DistServe's code-completion SLO (TTFT 125 ms, TPOT 200 ms, for OPT-13B), its tight TPOT ours.
SLO_GRID = {
    "chatbot": ([250, 1000, 4000], [20, 50, 100]),
    "summarization": ([2000, 8000, 15000], [20, 50, 150]),
    "code": ([125, 500, 2000], [25, 60, 200]),
    "multi-turn": ([250, 1000, 4000], [20, 50, 100]),
}


def best(configs, mode):
    exact = [c for c in configs if c["mode"] == mode and c.get("bound") == "exact"]
    pool = exact or [c for c in configs if c["mode"] == mode]
    return max(pool, key=lambda c: c["goodput_per_gpu"], default=None)


def describe(c):
    if c is None:
        return "-"
    if c["mode"] == "colocated":
        shape = f"{c['decode']}xTP{c['decode_tp']}"
    else:
        shape = f"{c['prefill']}xTP{c['prefill_tp']}+{c['decode']}xTP{c['decode_tp']}"
    return f"{shape} chunk {c['max_num_batched_tokens']} {c['policy']}"


def search(build, work, model, gpus, workload, ttft, tpot, num_prompts, run_s, threads, mode,
           conversations):
    """tandem-plan over one mode only: each mode's best is then searched to the tolerance (in a
    search over both, the losing mode's configurations are pruned and only bounded)."""
    out = os.path.join(work, f"{model}_{gpus}_{workload}_{ttft}_{tpot}_{mode}.json")
    tp = "1,2,4,8" if model.endswith("8b") else "4,8"
    cmd = [os.path.join(build, "bin", "tandem-plan"), "--gpus", str(gpus), "--gpu", "h100",
           "--model", model, "--tp", tp, "--modes", mode,
           *workload_flags(workload, conversations),
           "--num-prompts", str(num_prompts), "--run-duration-s", str(run_s),
           "--slo-ttft-ms", str(ttft), "--slo-tpot-ms", str(tpot), "--slo-percentile", "90",
           "--top", "3", "--refine-shapes", "2", "--threads", str(threads), "--out", out]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"study.py: {' '.join(cmd)}\n{p.stderr}")
    with open(out) as f:
        return best(json.load(f)["configs"], mode)


# A goodput judged on fewer seconds of arrivals than this is not a steady state: at 8B's rates
# on 64 GPUs the request cap left 6-13 s, and rerun on 4x the requests both sides' winners were
# overloaded at the rates that window passed (tools/sim/README.md, "The 8B rows at 64 GPUs").
MIN_WINDOW_S = 30


def window_s(config):
    """Seconds of arrivals behind a configuration's passing rate (its requests / its rate)."""
    passed = (config or {}).get("passed") or {}
    return passed["requests"] / passed["rate"] if passed.get("rate") else None


def plan(build, work, model, gpus, workload, ttft, tpot, num_prompts, run_s, threads,
         conversations):
    start = time.monotonic()
    co, dis = (search(build, work, model, gpus, workload, ttft, tpot, num_prompts, run_s, threads,
                      mode, conversations) for mode in ("colocated", "disaggregated"))
    windows = [w for w in (window_s(co), window_s(dis)) if w is not None]
    return {
        "model": model, "gpus": gpus, "workload": workload, "ttft_ms": ttft, "tpot_ms": tpot,
        "colocated": co, "disaggregated": dis,
        "colocated_per_gpu": co["goodput_per_gpu"] if co else 0.0,
        "disaggregated_per_gpu": dis["goodput_per_gpu"] if dis else 0.0,
        "window_s": min(windows) if windows else None,
        "short_window": bool(windows) and min(windows) < MIN_WINDOW_S,
        "search_wall_s": time.monotonic() - start,
    }


def ratio(row):
    c, d = row["colocated_per_gpu"], row["disaggregated_per_gpu"]
    return d / c if c > 0 else (float("inf") if d > 0 else float("nan"))


def svg(rows):
    groups = []
    for r in rows:
        key = (r["model"], r["gpus"], r["workload"])
        if key not in groups:
            groups.append(key)
    cell, pad, cols = 46, 70, 4
    gw, gh = 3 * cell + pad, 3 * cell + pad + 10
    width = cols * gw + 20
    height = ((len(groups) + cols - 1) // cols) * gh + 60
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
             f'font-family="sans-serif" font-size="10">',
             f'<text x="10" y="16" font-size="13">Disaggregated / colocated goodput per GPU '
             f'(tandem-sim, H100, SLO p90): green = disaggregation pays, red = colocated wins, '
             f'grey "?" = judged on under {MIN_WINDOW_S} s of arrivals</text>']
    for g, (model, gpus, workload) in enumerate(groups):
        ox, oy = 10 + (g % cols) * gw, 40 + (g // cols) * gh
        parts.append(f'<text x="{ox}" y="{oy + 10}">{model}, {gpus} GPUs, {workload}</text>')
        ttfts, tpots = SLO_GRID[workload]
        for r in rows:
            if (r["model"], r["gpus"], r["workload"]) != (model, gpus, workload):
                continue
            i, j = ttfts.index(r["ttft_ms"]), tpots.index(r["tpot_ms"])
            x, y = ox + 40 + j * cell, oy + 18 + (2 - i) * cell
            q = ratio(r)
            if q != q:  # nan: neither meets the SLO at any rate
                color, label = "#dddddd", "none"
            else:
                shade = max(-1.0, min(1.0, (q - 1.0) if q >= 1 else -(1 / max(q, 1e-9) - 1)))
                color = (f"rgb({int(255 - 120 * shade)},255,{int(255 - 120 * shade)})" if shade >= 0
                         else f"rgb(255,{int(255 + 120 * shade)},{int(255 + 120 * shade)})")
                label = "inf" if q == float("inf") else f"{q:.2f}"
                if r.get("short_window"):
                    color, label = "#eeeeee", label + "?"  # not a steady state
            parts.append(f'<rect x="{x}" y="{y}" width="{cell - 2}" height="{cell - 2}" '
                         f'fill="{color}" stroke="#888"/>')
            parts.append(f'<text x="{x + cell / 2 - 1}" y="{y + cell / 2 + 3}" '
                         f'text-anchor="middle">{label}</text>')
        for i, t in enumerate(ttfts):
            parts.append(f'<text x="{ox}" y="{oy + 18 + (2 - i) * cell + cell / 2 + 3}">'
                         f'{t} ms</text>')
        for j, t in enumerate(tpots):
            parts.append(f'<text x="{ox + 40 + j * cell + cell / 2 - 1}" '
                         f'y="{oy + 18 + 3 * cell + 10}" text-anchor="middle">{t} ms</text>')
        parts.append(f'<text x="{ox + 40}" y="{oy + 18 + 3 * cell + 22}">TPOT limit →, '
                     f'TTFT limit ↑</text>')
    parts.append("</svg>")
    return "\n".join(parts) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default="build")
    ap.add_argument("--models", default="llama-3.1-8b,llama-3.1-70b")
    ap.add_argument("--gpus", default="8,64")
    ap.add_argument("--workloads", default=",".join(WORKLOADS))
    ap.add_argument("--num-prompts", type=int, default=20000,
                    help="requests of the dataset: a run takes rate x --run-duration-s of them")
    ap.add_argument("--run-duration-s", type=float, default=60,
                    help="seconds of arrivals per run (default 60)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--multi-turn-conversations", type=int, default=200,
                    help="multi-turn's conversations of 100 turns each (default 200: 20,000 "
                         "requests; 2,000 give 8B on 64 GPUs its 60 s windows)")
    ap.add_argument("--middle-above", type=int, default=8,
                    help="at more GPUs than this only the grid's middle point (default 8)")
    ap.add_argument("--points", default="",
                    help="only these points of each workload's grid, as TTFT:TPOT indices from 0 "
                         "(tight) to 2 (loose), e.g. 1:0,1:2 (overrides --middle-above)")
    ap.add_argument("--out", default="")
    ap.add_argument("--plot", default="")
    a = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as work:
        for model in a.models.split(","):
            for gpus in (int(g) for g in a.gpus.split(",")):
                if model.endswith("70b") and gpus < 8:
                    continue
                for workload in a.workloads.split(","):
                    ttfts, tpots = SLO_GRID[workload]
                    grid = [(t, p) for t in ttfts for p in tpots]
                    if a.points:
                        grid = [(ttfts[int(i)], tpots[int(j)])
                                for i, j in (p.split(":") for p in a.points.split(","))]
                    elif gpus > a.middle_above:
                        grid = [(ttfts[1], tpots[1])]
                    for ttft, tpot in grid:
                        r = plan(a.build, work, model, gpus, workload, ttft, tpot,
                                 a.num_prompts, a.run_duration_s, a.threads,
                                 a.multi_turn_conversations)
                        rows.append(r)
                        print(f"{model:13s} {gpus:4d} GPUs {workload:13s} TTFT {ttft:5d} ms "
                              f"TPOT {tpot:3d} ms: colocated {r['colocated_per_gpu']:7.2f}/GPU "
                              f"({describe(r['colocated'])}), disaggregated "
                              f"{r['disaggregated_per_gpu']:7.2f}/GPU "
                              f"({describe(r['disaggregated'])}), ratio {ratio(r):5.2f} "
                              f"[{r['search_wall_s']:.0f} s]"
                              + (f" SHORT WINDOW: {r['window_s']:.0f} s of arrivals, not a steady "
                                 f"state (raise --num-prompts)" if r["short_window"] else ""),
                              flush=True)
                        if a.out:  # kept up to date: a long study can be read while it runs
                            with open(a.out, "w") as f:
                                json.dump({"rows": rows}, f, indent=1)
                                f.write("\n")
    if a.plot:
        with open(a.plot, "w") as f:
            f.write(svg(rows))


if __name__ == "__main__":
    main()
