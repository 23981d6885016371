#!/usr/bin/env python3
"""Compares tandem-generate runs' greedy outputs, for the GPU checks (speculative_check.sh,
kv_dtype_check.sh).

Each run NAME is WORK/NAME.out: tandem-generate's JSON lines, run with --logprobs 2 or more.
Each --pair OTHER:REF:RULE[:TIE_NATS] compares run OTHER with run REF sequence by sequence:

  exact  every sequence identical
  ties   where a sequence differs, the first differing step is a near-tie: in either run's
         top logprobs, the other run's token within TIE_NATS (default 0.3) of the run's choice
  info   reported only

Prints one line per pair (LABEL: OTHER vs REF: k/n identical, the largest difference of the chosen
token's logprob over the steps where both agree so far, where each difference starts and whether
it is a near-tie) and writes OUT as JSON: {"pass", "comparisons": {OTHER_vs_REF: {"identical",
"of", "rule", "max_logprob_diff", "pass", "differences": [...]}}}. Exit 1 when a run is missing or a
rule is broken.
"""
import argparse
import json
import os
import sys


def load(work, name):
    path = os.path.join(work, name + ".out")
    if not os.path.exists(path):
        return None
    return [json.loads(line) for line in open(path) if line.strip().startswith("{")]


def gap(entry, token):
    """How far `token` is below the run's own choice at this step (None: not in its top)."""
    for t in entry.get("top_logprobs", []):
        if t["token_id"] == token:
            return entry["logprob"] - t["logprob"]
    return None


def compare(a, b, tie_nats):
    """(identical sequences, differences, the largest |logprob difference| of the chosen token
    over the steps before each sequence's first difference)."""
    same, diffs, max_lp = 0, [], 0.0
    for i, (x, y) in enumerate(zip(a, b)):
        tx, ty = x["token_ids"], y["token_ids"]
        for j in range(min(len(tx), len(ty))):
            if tx[j] != ty[j]:
                break
            max_lp = max(max_lp, abs(x["logprobs"][j]["logprob"] - y["logprobs"][j]["logprob"]))
        if tx == ty:
            same += 1
            continue
        n = min(len(tx), len(ty))
        k = next((j for j in range(n) if tx[j] != ty[j]), n)
        if k == n:
            diffs.append({"prompt": i, "step": k, "tie": False, "why": "lengths differ"})
            continue
        g_other, g_ref = gap(y["logprobs"][k], tx[k]), gap(x["logprobs"][k], ty[k])
        tie = any(g is not None and g <= tie_nats for g in (g_other, g_ref))
        diffs.append({"prompt": i, "step": k, "ref_token": tx[k], "token": ty[k], "tie": tie,
                      "ref_gap_nats": g_ref, "other_gap_nats": g_other})
    return same, diffs, max_lp


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--work", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--label", default="compare")
    p.add_argument("--pair", action="append", default=[])
    args = p.parse_args()
    report, bad = {}, False
    for spec in args.pair:
        parts = spec.split(":")
        other, ref, rule = parts[0], parts[1], parts[2]
        tie_nats = float(parts[3]) if len(parts) > 3 else 0.3
        key = f"{other}_vs_{ref}"
        a, b = load(args.work, ref), load(args.work, other)
        if not a or not b or len(a) != len(b):
            report[key] = {"pass": False, "why": "a run is missing"}
            bad = True
            print(f"{args.label}: {other} vs {ref}: a run is missing")
            continue
        same, diffs, max_lp = compare(a, b, tie_nats)
        failed = (rule == "exact" and bool(diffs)) or (
            rule == "ties" and any(not d["tie"] for d in diffs))
        bad = bad or failed
        report[key] = {"identical": same, "of": len(a), "rule": rule, "tie_nats": tie_nats,
                       "max_logprob_diff": max_lp, "pass": not failed, "differences": diffs}
        where = "".join(
            f"; prompt {d['prompt']} from step {d['step']} "
            f"({'near-tie' if d['tie'] else 'NOT a tie'})" for d in diffs)
        print(f"{args.label}: {other} vs {ref}: {same}/{len(a)} identical, chosen-token logprobs "
              f"within {max_lp:.3f} nats while identical{where}"
              + (" (for information)" if rule == "info" else "") + (" FAILED" if failed else ""))
    json.dump({"pass": not bad, "comparisons": report}, open(args.out, "w"), indent=1)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
