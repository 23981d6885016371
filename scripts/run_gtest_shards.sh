#!/usr/bin/env bash
# Runs GoogleTest binaries whole, each split into shards (GTEST_TOTAL_SHARDS), several at once:
# a suite's SetUpTestSuite runs once per shard, not once per test as under ctest, which starts a
# process per test. scripts/sanitize.sh core (CI's sanitizer stage) uses it: under ASan, loading
# the real tokenizers in each router test's suite set-up was most of that stage's test time.
#
#   scripts/run_gtest_shards.sh [--jobs N] [--shards K] [--retry-failed] [--logs DIR]
#                               [--timeout SECONDS] BINARY...
#
# --jobs: shards run at once (default 2); --shards: shards per binary (default 2); the shards are
# started in the order given, so put the longest binaries first. Each shard runs in its binary's
# directory (as ctest runs a discovered test), with --gtest_brief=1, its output in
# DIR/NAME.SHARD.log (default: a temporary directory), killed after --timeout (default 1800 s).
# --retry-failed: the tests a shard reports as failed run once more, alone (a test that waits on
# a timer can miss it on a loaded machine); a shard that did not finish — a crash, a sanitizer
# report (they abort), a timeout — fails at once. Exits 0 only when every shard passed (or its
# failed tests passed on their second run); prints the log of each shard that did not.
set -euo pipefail
jobs=2
shards=2
retry=0
logs=""
timeout_s=1800
while [ $# -gt 0 ]; do
  case "$1" in
    --jobs) jobs="$2"; shift 2 ;;
    --shards) shards="$2"; shift 2 ;;
    --retry-failed) retry=1; shift ;;
    --logs) logs="$2"; shift 2 ;;
    --timeout) timeout_s="$2"; shift 2 ;;
    --) shift; break ;;
    -*) echo "run_gtest_shards.sh: unknown flag $1" >&2; exit 2 ;;
    *) break ;;
  esac
done
if [ $# -eq 0 ]; then
  echo "usage: scripts/run_gtest_shards.sh [--jobs N] [--shards K] [--retry-failed]" \
    "[--logs DIR] [--timeout SECONDS] BINARY..." >&2
  exit 2
fi
binaries=()
for b in "$@"; do
  if [ ! -x "$b" ] || [ -d "$b" ]; then
    echo "run_gtest_shards.sh: '$b' is not an executable test binary" >&2
    exit 2
  fi
  binaries+=("$(cd "$(dirname "$b")" && pwd)/$(basename "$b")")
done
set -- "${binaries[@]}"
if [ -z "$logs" ]; then logs="$(mktemp -d)"; fi
rm -rf "$logs"
mkdir -p "$logs"

# run_shard BINARY SHARD: runs one shard; its exit status goes to LOG.rc. (xargs calls it.)
# shellcheck disable=SC2317
run_shard() {
  local bin="$1" shard="$2" log rc
  log="$RUN_SHARDS_LOGS/$(basename "$bin").$shard.log"
  set +e
  (cd "$(dirname "$bin")" && GTEST_TOTAL_SHARDS="$RUN_SHARDS_TOTAL" GTEST_SHARD_INDEX="$shard" \
    timeout "$RUN_SHARDS_TIMEOUT" "$bin" --gtest_brief=1) > "$log" 2>&1
  rc=$?
  set -e
  echo "$rc" > "$log.rc"
  echo "[shards] $(basename "$bin") shard $shard/$RUN_SHARDS_TOTAL: exit $rc"
}
export -f run_shard
export RUN_SHARDS_LOGS="$logs" RUN_SHARDS_TOTAL="$shards" RUN_SHARDS_TIMEOUT="$timeout_s"

start=$SECONDS
for b in "$@"; do
  for ((s = 0; s < shards; ++s)); do printf '%s\n%s\n' "$b" "$s"; done
done | xargs -d '\n' -n 2 -P "$jobs" bash -c "run_shard \"\$0\" \"\$1\""

# failed_tests LOG: the names of the tests a finished shard reports as failed, one per line.
failed_tests() {
  sed -n 's/^\[  FAILED  \] \([A-Za-z_][A-Za-z0-9_/.]*\)\(, where.*\| (.*\)\?$/\1/p' "$1" | sort -u
}

status=0
for b in "$@"; do
  for ((s = 0; s < shards; ++s)); do
    log="$logs/$(basename "$b").$s.log"
    rc="$(cat "$log.rc")"
    if [ "$rc" = 0 ]; then continue; fi
    names="$(failed_tests "$log")"
    # A shard that finished prints gtest's summary; rc 1 with failed tests and the summary is a
    # test failure, anything else (a crash, a sanitizer's abort, a timeout) is not retried.
    if [ "$retry" = 1 ] && [ "$rc" = 1 ] && [ -n "$names" ] &&
       grep -q "^\[==========\] .* ran\." "$log"; then
      filter="$(paste -sd: <<< "$names")"
      echo "[shards] $(basename "$b") shard $s: $(wc -l <<< "$names") failed; again: $filter"
      set +e
      (cd "$(dirname "$b")" && timeout "$timeout_s" "$b" --gtest_brief=1 \
        --gtest_filter="$filter") > "$log.retry" 2>&1
      rc=$?
      set -e
      if [ "$rc" = 0 ]; then
        echo "[shards] passed on a second run: $filter"
        continue
      fi
      log="$log.retry"
    fi
    echo "[shards] FAILED: $(basename "$b") shard $s (exit $rc); its log ($log):"
    tail -n 300 "$log"
    status=1
  done
done
echo "[shards] $# binaries x $shards shards, $jobs at once: $((SECONDS - start)) s," \
  "$([ "$status" = 0 ] && echo "all passed" || echo "FAILED")"
exit "$status"
