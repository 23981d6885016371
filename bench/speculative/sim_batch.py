#!/usr/bin/env python3
"""Speculative decoding against batch size, in tandem-sim: the same seeded workload on one node,
without speculation and with K drafts right with probability P each (--speculative sim), over a
sweep of request rates (so of batch sizes). Prints a table (TPOT and TTFT percentiles, tokens per
verification, TPOT against the plain run at the same rate) and the goodput of each configuration
at the SLO, and writes it all as JSON.

  bench/speculative/sim_batch.py --build build --out bench/results/speculative_sim_batch.json

With --sim-draft-model NAME the drafts come from that draft model (llama-3.2-1b, llama-3.2-3b),
whose passes each step pays for and whose weights and KV take decode memory; without it drafts
are free (prompt lookup's nearly are).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

# (model, gpu, tp, rates): a node per model; rates from a light load to past its capacity.
SETUPS = [
    ("llama-3.1-8b", "h100", 1, [1, 8, 16, 32, 48, 64, 96, 128]),
    ("llama-3.1-70b", "h100", 4, [0.5, 4, 8, 16, 24, 32]),
]
# Chatbot-like lengths (tools/sim/study.py's chatbot workload).
WORKLOAD = ["--dataset", "random", "--input-len-dist", "lognormal", "--random-input-len", "300",
            "--input-len-max", "1024", "--output-len-dist", "lognormal",
            "--random-output-len", "250", "--output-len-max", "1024"]
SPECULATION = [(0, 0.0), (2, 0.6), (4, 0.6), (2, 0.8), (4, 0.8)]  # (drafts, acceptance rate)
SLO = {"ttft_ms": 1000, "tpot_ms": 25, "percentile": 90}


def run_sim(binary, model, gpu, tp, rate, drafts, accept, prompts, seed, draft_model=None):
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "run.json")
        cmd = [binary, "--gpu", gpu, "--model", model, "--tp", str(tp), "--mode", "colocated",
               "--decode", "1", "--num-prompts", str(prompts), "--seed", str(seed),
               "--request-rate", str(rate), "--no-requests-in-json", "--out", out] + WORKLOAD
        if drafts > 0:
            cmd += ["--speculative", "sim", "--num-speculative-tokens", str(drafts),
                    "--sim-acceptance-rate", str(accept)]
            if draft_model:
                cmd += ["--sim-draft-model", draft_model]
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, timeout=600)
        with open(out) as f:
            report = json.load(f)
    summary = report["runs"][0]["summary"]
    sim = report["sim"][0]
    verifications = sim.get("spec_verifications", 0)
    return {
        "rate": rate,
        "drafts": drafts,
        "acceptance_rate": accept,
        "completed": summary["completed"],
        "failed": summary["failed"],
        "ttft_p50_ms": summary["ttft_s"]["median"] * 1e3,
        "ttft_p90_ms": summary["ttft_s"]["p90"] * 1e3,
        "tpot_p50_ms": summary["tpot_s"]["median"] * 1e3,
        "tpot_p90_ms": summary["tpot_s"]["p90"] * 1e3,
        "output_throughput": summary["output_throughput"],
        "steps": sim["steps"],
        "draft_busy_s": sim.get("draft_busy_s", 0.0),
        "decode_kv_blocks": sim.get("decode_kv_blocks"),
        "tokens_per_verification":
            1 + sim.get("spec_accepted_tokens", 0) / verifications if verifications else 1.0,
    }


def meets_slo(row):
    return (row["failed"] == 0 and row["ttft_p90_ms"] <= SLO["ttft_ms"]
            and row["tpot_p90_ms"] <= SLO["tpot_ms"])


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--build", default="build")
    parser.add_argument("--out", default="bench/results/speculative_sim_batch.json")
    parser.add_argument("--num-prompts", type=int, default=600)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--sim-draft-model", default=None,
                        help="price a draft model's passes (a tandem-sim preset or directory)")
    parser.add_argument("--setups", default=None,
                        help="comma-separated models of SETUPS to run (default: all)")
    args = parser.parse_args()
    binary = os.path.join(args.build, "bin", "tandem-sim")
    if not os.path.exists(binary):
        sys.exit(f"{binary} not found: build first (scripts/build.sh)")
    start = time.time()
    results = []
    for model, gpu, tp, rates in SETUPS:
        if args.setups and model not in args.setups.split(","):
            continue
        drafts_from = f"draft model {args.sim_draft_model}" if args.sim_draft_model else "free drafts"
        print(f"\n{model} on {gpu} x TP{tp}, {drafts_from}, chatbot lengths, {args.num_prompts} requests; "
              f"SLO p{SLO['percentile']} TTFT <= {SLO['ttft_ms']} ms, TPOT <= {SLO['tpot_ms']} ms")
        print(f"{'rate':>6} {'K':>2} {'P':>4} {'TTFT p50':>9} {'TPOT p50':>9} {'TPOT p90':>9} "
              f"{'tok/step':>8} {'out tok/s':>9} {'TPOT vs K=0':>11}")
        plain = {}
        rows = []
        for rate in rates:
            for drafts, accept in SPECULATION:
                row = run_sim(binary, model, gpu, tp, rate, drafts, accept, args.num_prompts,
                              args.seed, args.sim_draft_model)
                row.update(model=model, gpu=gpu, tp=tp)
                if drafts == 0:
                    plain[rate] = row
                row["tpot_p50_vs_plain"] = row["tpot_p50_ms"] / plain[rate]["tpot_p50_ms"]
                rows.append(row)
                print(f"{rate:>6g} {drafts:>2} {accept:>4.1f} {row['ttft_p50_ms']:>9.1f} "
                      f"{row['tpot_p50_ms']:>9.2f} {row['tpot_p90_ms']:>9.2f} "
                      f"{row['tokens_per_verification']:>8.2f} {row['output_throughput']:>9.0f} "
                      f"{row['tpot_p50_vs_plain']:>10.2f}x")
        print("goodput (the highest rate of the sweep within the SLO):")
        for drafts, accept in SPECULATION:
            ok = [r["rate"] for r in rows
                  if r["drafts"] == drafts and r["acceptance_rate"] == accept and meets_slo(r)]
            label = "no speculation" if drafts == 0 else f"K={drafts}, P={accept}"
            print(f"  {label:<16} {max(ok) if ok else 0:g} req/s")
        results.extend(rows)
    report = {"tool": "bench/speculative/sim_batch.py", "slo": SLO, "workload": WORKLOAD,
              "num_prompts": args.num_prompts, "seed": args.seed,
              "draft_model": args.sim_draft_model,
              "wall_s": time.time() - start, "rows": results}
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(report, f, indent=2)
        f.write("\n")
    print(f"\nwrote {args.out} ({time.time() - start:.0f} s)")


if __name__ == "__main__":
    main()
