#!/usr/bin/env bash
# UcxTransport::Write bandwidth (tandem-bench-kv-transfer) beside ucx_perftest's ucp_put_bw, same
# UCX_TLS, message size and bytes, two processes on this host.
#
#   bench/kv_transfer/vs_ucx_perftest.sh [BUILD_DIR]
#
# Environment: TLS_LIST (default "tcp posix,sysv,self"), SIZES (bytes; default
# "65536 1048576 4194304"), TOTAL_MIB per run (default 512), REPEAT runs, best kept (default 3),
# OUT (JSON; default BUILD_DIR/kv_transfer_vs_ucx_perftest.json).
#
# Columns: "tandem" = the target's pool allocated by UCX (UcxTransport::AllocatePool), like
# ucx_perftest's buffers; "tandem reg" = a malloc'd pool registered with RegisterPool (shared
# memory then goes through UCX's active-message emulation of RMA). Both sides reuse one
# message-sized buffer, as ucx_perftest does. GB/s = 1e9 bytes/s (ucx_perftest prints MiB/s).
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
build="${1:-$here/../../build}"
bench="$build/bin/tandem-bench-kv-transfer"
TLS_LIST="${TLS_LIST:-tcp posix,sysv,self}"
SIZES="${SIZES:-65536 1048576 4194304}"
TOTAL_MIB="${TOTAL_MIB:-512}"
REPEAT="${REPEAT:-3}"
OUT="${OUT:-$build/kv_transfer_vs_ucx_perftest.json}"

[ -x "$bench" ] || { echo "no $bench: build target tandem-bench-kv-transfer" >&2; exit 1; }
command -v ucx_perftest >/dev/null || { echo "ucx_perftest not found (Debian: ucx-utils)" >&2; exit 1; }

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# Best ucx_perftest bandwidth of REPEAT runs, in GB/s.
perftest_gbps() {
  local tls="$1" size="$2" iters="$3" best=0
  for _ in $(seq "$REPEAT"); do
    local port mibs="" spid
    port="$(free_port)"
    UCX_TLS="$tls" ucx_perftest -p "$port" >"$tmp/server.log" 2>&1 &
    spid=$!
    for _ in $(seq 50); do  # the server needs a moment to listen
      sleep 0.2
      if UCX_TLS="$tls" ucx_perftest 127.0.0.1 -p "$port" -t ucp_put_bw -s "$size" -n "$iters" \
          >"$tmp/client.log" 2>&1; then
        mibs="$(awk '/^Final:/ {print $7}' "$tmp/client.log")"
        break
      fi
    done
    kill "$spid" 2>/dev/null || true
    wait "$spid" 2>/dev/null || true
    [ -n "$mibs" ] || { echo "ucx_perftest failed:" >&2; cat "$tmp/client.log" >&2; return 1; }
    best="$(awk -v a="$best" -v b="$mibs" 'BEGIN { b = b * 1048576 / 1e9; print (b > a ? b : a) }')"
  done
  echo "$best"
}

tandem_gbps() {
  local tls="$1" size="$2" json="$3"
  shift 3
  "$bench" --tls "$tls" --message-bytes "$size" --pool-bytes "$size" --total-mib "$TOTAL_MIB" \
    --repeat "$REPEAT" --json "$json" "$@" >"$tmp/bench.log" 2>&1 ||
    { echo "tandem-bench-kv-transfer failed:" >&2; cat "$tmp/bench.log" >&2; return 1; }
  python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["best_gbps"])' "$json"
}

echo "# $(uname -n): $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg), $(ucx_info -v | head -1 | sed 's/# //')"
printf '%-18s %10s %12s %12s %14s %8s\n' transport message "tandem GB/s" "tandem reg" "perftest GB/s" ratio
rows=()
for tls in $TLS_LIST; do
  for size in $SIZES; do
    iters=$(( TOTAL_MIB * 1048576 / size ))
    t_alloc="$(tandem_gbps "$tls" "$size" "$tmp/alloc.json" --allocate)"
    t_reg="$(tandem_gbps "$tls" "$size" "$tmp/reg.json")"
    p="$(perftest_gbps "$tls" "$size" "$iters")"
    ratio="$(awk -v a="$t_alloc" -v b="$p" 'BEGIN { printf "%.2f", (b > 0 ? a / b : 0) }')"
    printf '%-18s %10s %12.3f %12.3f %14.3f %8s\n' "$tls" "$size" "$t_alloc" "$t_reg" "$p" "$ratio"
    rows+=("{\"tls\": \"$tls\", \"message_bytes\": $size, \"total_bytes\": $(( iters * size )), \"tandem_gbps\": $t_alloc, \"tandem_registered_gbps\": $t_reg, \"ucx_perftest_gbps\": $p, \"ratio\": $ratio}")
  done
done
{
  echo "{"
  echo "  \"host\": \"$(uname -n)\", \"cpus\": $(nproc), \"loadavg\": \"$(cut -d' ' -f1-3 /proc/loadavg)\","
  echo "  \"repeat\": $REPEAT, \"results\": ["
  for i in "${!rows[@]}"; do
    sep=","
    [ "$i" -eq $(( ${#rows[@]} - 1 )) ] && sep=""
    echo "    ${rows[$i]}$sep"
  done
  echo "  ]"
  echo "}"
} >"$OUT"
echo "wrote $OUT"
