#!/usr/bin/env bash
# Speculative decoding with a draft model, side by side with plain decoding in one run, against
# the draft's acceptance rate: tandem-generate on the cpu backend, greedy, the same prompts with
# and without `--draft-model` at K = 2 and 4, for draft/target pairs of known agreement made by
# tandem-make-model (the target's layers past the draft's write `gain` times the usual amount to
# the residual stream; gain 0: the draft's logits exactly). Checks every run's tokens are the
# plain run's, prints a table (decode tok/s, acceptance, tokens per verification, speedup) and
# the break-even acceptance rate per batch size and K, and writes JSON.
#
#   bench/speculative/draft_generate.sh [OUT.json]
# Environment: BIN_DIR (default build/bin), GAINS ("0 0.05 0.1 0.2 0.4"), BATCHES ("1 8"),
# DRAFTS ("2 4"), TOKENS (128), THREADS (2), LAYERS (target layers, 16), DRAFT_LAYERS (2).
#
# The models: a 303-token vocabulary (so that the LM head does not dominate a small model, as it
# would with a 128k vocabulary at hidden 512), hidden 512, 8 heads / 2 KV heads, FFN 1536, f32:
# the target has LAYERS layers (48M parameters at 16), the draft DRAFT_LAYERS (6M at 2) — the
# 1:8 ratio of a Llama-3.2-1B draft for Llama-3.1-8B.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
bin="${BIN_DIR:-$root/build/bin}"
out="${1:-$root/bench/results/speculative_draft.json}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
layers="${LAYERS:-16}"
draft_layers="${DRAFT_LAYERS:-2}"
tokens="${TOKENS:-128}"

python3 - "$work" <<'PY'
import json, random, sys
work = sys.argv[1]
# A word-level vocabulary of 300 tokens plus <s>, </s>, <|eot_id|>.
vocab = {f"tok{i}": i for i in range(300)}
added = [{"id": 300 + i, "content": c, "special": True}
         for i, c in enumerate(["<s>", "</s>", "<|eot_id|>"])]
tok = {"version": "1.0", "added_tokens": added,
       "model": {"type": "BPE", "vocab": vocab, "merges": []}}
json.dump(tok, open(f"{work}/tokenizer.json", "w"))
json.dump({"bos_token": "<s>", "eos_token": "</s>", "tokenizer_class": "PreTrainedTokenizerFast"},
          open(f"{work}/tokenizer_config.json", "w"))
rng = random.Random(5)
for n in (1, 8, 32):
    with open(f"{work}/prompts{n}.jsonl", "w") as f:
        for i in range(n):
            f.write(json.dumps([300] + [rng.randrange(300) for _ in range(24 + 8 * (i % 4))]) + "\n")
# The draft's catch-up cost on a long prompt (the disaggregated case): 4 prompts of 512 tokens.
with open(f"{work}/long.jsonl", "w") as f:
    for i in range(4):
        f.write(json.dumps([300] + [rng.randrange(300) for _ in range(511)]) + "\n")
PY

make_model() {  # OUT LAYERS [extra-layer args]
  local dir="$1" n="$2"
  shift 2
  "$bin/tandem-make-model" --out "$dir" --arch llama --hidden 512 --heads 8 --kv-heads 2 \
    --intermediate 1536 --layers "$n" --dtype f32 --seed 3 \
    --tokenizer "$work/tokenizer.json" --tokenizer-config "$work/tokenizer_config.json" "$@" \
    > /dev/null
}
make_model "$work/draft" "$draft_layers"

# One tandem-generate run; prints a JSON object of what its log says.
run() {  # NAME MODEL PROMPTS [args]
  local name="$1" model="$2" prompts="$3"
  shift 3
  "$bin/tandem-generate" --model "$model" --prompts-file "$prompts" --max-tokens "${RUN_TOKENS:-$tokens}" \
    --temperature 0 --ignore-eos --threads "${THREADS:-2}" --max-seqs 32 "$@" \
    > "$work/$name.jsonl" 2> "$work/$name.log"
  python3 - "$work/$name.log" <<'PY'
import json, re, sys
log = open(sys.argv[1]).read()
m = re.search(r"engine: (\d+) steps, (\d+) tokens computed, (\d+) generated, ([0-9.]+) s", log)
v = re.search(r"(\d+) verifications, (\d+) drafts, (\d+) accepted", log)
d = re.search(r"draft model: (\d+) passes, (\d+) context tokens caught up, (\d+) drafts, ([0-9.]+) s",
              log)
print(json.dumps({"steps": int(m.group(1)), "generated": int(m.group(3)),
                  "engine_s": float(m.group(4)),
                  "verifications": int(v.group(1)) if v else 0,
                  "drafts": int(v.group(2)) if v else 0, "accepted": int(v.group(3)) if v else 0,
                  "draft_passes": int(d.group(1)) if d else 0,
                  "draft_catch_up_tokens": int(d.group(2)) if d else 0,
                  "draft_s": float(d.group(4)) if d else 0.0}))
PY
}

rows="$work/rows.jsonl"
: > "$rows"
printf '%-6s %-5s %-3s %9s %9s %9s %10s %8s\n' gain batch K tok_s accepted tok/verify draft_share speedup
for gain in ${GAINS:-0 0.05 0.1 0.2 0.4}; do
  make_model "$work/target" "$layers" --extra-layers-from "$draft_layers" --extra-layer-gain "$gain"
  for batch in ${BATCHES:-1 8}; do
    base=$(run "plain_${gain}_$batch" "$work/target" "$work/prompts$batch.jsonl")
    echo "{\"gain\": $gain, \"batch\": $batch, \"num_speculative_tokens\": 0, \"run\": $base}" >> "$rows"
    python3 -c "
import json; r = json.loads('$base')
print('%-6s %-5s %-3s %9.1f %9s %9s %10s %8s' % ('$gain', '$batch', '-', r['generated'] / r['engine_s'], '-', '-', '-', '1.00x'))"
    for k in ${DRAFTS:-2 4}; do
      name="draft_${gain}_${batch}_$k"
      spec=$(run "$name" "$work/target" "$work/prompts$batch.jsonl" \
        --draft-model "$work/draft" --num-speculative-tokens "$k")
      if ! cmp -s "$work/plain_${gain}_$batch.jsonl" "$work/$name.jsonl"; then
        echo "draft_generate.sh: gain $gain batch $batch K=$k changed the output" >&2
        exit 1
      fi
      echo "{\"gain\": $gain, \"batch\": $batch, \"num_speculative_tokens\": $k, \"run\": $spec, \"plain\": $base}" >> "$rows"
      python3 -c "
import json; r = json.loads('$spec'); b = json.loads('$base')
rate = r['accepted'] / max(r['drafts'], 1)
print('%-6s %-5s %-3s %9.1f %8.0f%% %9.2f %9.0f%% %7.2fx' % ('$gain', '$batch', '$k',
      r['generated'] / r['engine_s'], 100 * rate, 1 + r['accepted'] / max(r['verifications'], 1),
      100 * r['draft_s'] / r['engine_s'], b['engine_s'] / r['engine_s']))"
    done
  done
done

# The disaggregated case: what the decode node pays to compute the draft's KV of an imported
# 512-token prompt itself, against the target's prefill of it (the step's whole budget at once).
make_model "$work/target" "$layers" --extra-layers-from "$draft_layers" --extra-layer-gain 0.1
long_plain=$(RUN_TOKENS=1 run long_plain "$work/target" "$work/long.jsonl" --max-batch-tokens 2048)
long_draft=$(RUN_TOKENS=1 run long_draft "$work/draft" "$work/long.jsonl" --max-batch-tokens 2048)

python3 - "$rows" "$out" "$long_plain" "$long_draft" "$layers" "$draft_layers" "$tokens" <<'PY'
import json, sys
rows = [json.loads(line) for line in open(sys.argv[1])]
long_plain, long_draft = json.loads(sys.argv[3]), json.loads(sys.argv[4])
layers, draft_layers, tokens = int(sys.argv[5]), int(sys.argv[6]), int(sys.argv[7])
# Break-even: the acceptance rate where the speedup crosses 1, interpolated between measured gains.
breakeven = {}
for batch in sorted({r["batch"] for r in rows}):
    for k in sorted({r["num_speculative_tokens"] for r in rows} - {0}):
        pts = []
        for r in rows:
            if r["batch"] == batch and r["num_speculative_tokens"] == k:
                rate = r["run"]["accepted"] / max(r["run"]["drafts"], 1)
                pts.append((rate, r["plain"]["engine_s"] / r["run"]["engine_s"]))
        pts.sort()
        be = None
        for (r0, s0), (r1, s1) in zip(pts, pts[1:]):
            if (s0 - 1) * (s1 - 1) <= 0 and s1 != s0:
                be = r0 + (1 - s0) * (r1 - r0) / (s1 - s0)
        if be is None and pts:
            be = "below %.2f" % pts[0][0] if pts[0][1] >= 1 else "above %.2f" % pts[-1][0]
        breakeven[f"batch {batch}, K={k}"] = be
        print(f"break-even acceptance, batch {batch}, K={k}: "
              + (f"{be:.2f}" if isinstance(be, float) else str(be)))
prefill_s, draft_s = long_plain["engine_s"], long_draft["engine_s"]
print(f"4 x 512-token prompts: target prefill {prefill_s:.3f} s, the draft's {draft_s:.3f} s "
      f"({100 * draft_s / prefill_s:.0f}% of it)")
json.dump({"bench": "speculative_draft", "device": "cpu backend, 2 threads",
           "target_layers": layers, "draft_layers": draft_layers, "max_tokens": tokens,
           "rows": rows, "breakeven_acceptance": breakeven,
           "long_prompt_prefill": {"prompts": 4, "tokens": 512, "target_s": prefill_s,
                                   "draft_s": draft_s}},
          open(sys.argv[2], "w"), indent=1)
print("wrote", sys.argv[2])
PY
