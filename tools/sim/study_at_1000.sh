#!/usr/bin/env bash
# The study at 1,000 GPUs (tools/sim/README.md, "The study"): a search there is out of reach
# (each 1,000-GPU run costs about a minute here), so the best shapes tandem-plan found at 64 GPUs
# are scaled up and compared directly with tandem-sim: Llama-3.1-70B chatbot at TTFT p90 <= 1 s,
# TPOT p90 <= 20 ms — colocated 125 x TP8 against disaggregated 109 x TP4 prefill + 141 x TP4
# decode (the 7:9 split of 64 GPUs' best) — over a sweep of rates around their 64-GPU goodputs.
#   tools/sim/study_at_1000.sh [BUILD_DIR] [OUT_DIR]
set -euo pipefail
BUILD=${1:-build}
OUT=${2:-bench/results}
CHAT=(--dataset random --input-len-dist lognormal --random-input-len 300 --input-len-max 1024
      --output-len-dist lognormal --random-output-len 250 --output-len-max 1024)
SLO=(--slo-ttft-ms 1000 --slo-tpot-ms 20)
# 60 s of arrivals at the highest rate.
"$BUILD/bin/tandem-sim" --gpu h100 --model llama-3.1-70b --tp 8 --decode 125 "${CHAT[@]}" \
  --num-prompts 330000 --request-rates 4250,4750,5250 "${SLO[@]}" --no-requests-in-json \
  --out "$OUT/sim_study_1000gpu_colocated.json" | grep -E "Request rate|SLO attainment|goodput|sim:"
"$BUILD/bin/tandem-sim" --gpu h100 --model llama-3.1-70b --mode disaggregated --tp 4 \
  --prefill 109 --decode 141 "${CHAT[@]}" \
  --num-prompts 390000 --request-rates 5250,5750,6250 "${SLO[@]}" --no-requests-in-json \
  --out "$OUT/sim_study_1000gpu_disaggregated.json" | grep -E "Request rate|SLO attainment|goodput|sim:"
