#!/bin/sh
# A stand-in for tandem-prefill, tandem-decode and tandem-router in tandem-cluster's tests (the
# tests link it under those names into a temp bin dir). It honours the servers' command-line
# contract — writes {"grpc", "pid"} atomically to --ready-file, exits 0 on SIGTERM/SIGINT — and
# logs its arguments and UCX_TLS. Test hooks, by node id (prefill-0, decode-1, router):
#   FAKE_FAIL=ID         exit 3 before writing the ready file
#   FAKE_DIE=ID          exit 4 about FAKE_DIE_AFTER_MS (default 500) after becoming ready
#   FAKE_IGNORE_TERM=ID  ignore SIGTERM (the launcher must escalate to SIGKILL)
#   FAKE_GRPC_ADDR=ADDR  the router reports this gRPC address (a test's in-process fake)
role=$(basename "$0")
role=${role#tandem-}
id=$role
echo "fake $role args: $*"
echo "fake $role UCX_TLS=${UCX_TLS:-<unset>}"
ready=""
while [ $# -gt 0 ]; do
  case "$1" in
    --ready-file) ready=$2; shift 2 ;;
    --node-id) id=$2; shift 2 ;;
    *) shift ;;
  esac
done
if [ -z "$ready" ]; then
  echo "fake $role: --ready-file is required" >&2
  exit 2
fi
if [ "$FAKE_FAIL" = "$id" ]; then
  echo "fake $id: failing on purpose" >&2
  exit 3
fi
if [ "$FAKE_IGNORE_TERM" = "$id" ]; then
  trap '' TERM
else
  trap 'echo "fake $id: SIGTERM"; exit 0' TERM
fi
trap 'echo "fake $id: SIGINT"; exit 0' INT
addr="127.0.0.1:$((20000 + $$ % 20000))"
if [ "$role" = router ] && [ -n "$FAKE_GRPC_ADDR" ]; then addr=$FAKE_GRPC_ADDR; fi
printf '{"grpc": "%s", "pid": %d, "metrics": "127.0.0.1:9"}\n' "$addr" $$ > "$ready.tmp"
mv "$ready.tmp" "$ready"
echo "fake $id: ready on $addr"
ticks=0
while :; do
  sleep 0.05
  ticks=$((ticks + 1))
  if [ "$FAKE_DIE" = "$id" ] && [ $((ticks * 50)) -ge "${FAKE_DIE_AFTER_MS:-500}" ]; then
    echo "fake $id: dying on purpose" >&2
    exit 4
  fi
done
