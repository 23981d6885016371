#!/usr/bin/env bash
# Builds the libFuzzer harnesses of tests/fuzz (clang, ASan + UBSan, into build-fuzz/) and runs each
# for SECONDS (default 60) over a fresh copy of its seed corpus (tests/fuzz/corpus/NAME/). Fails
# when any harness crashes (a sanitizer report, a failed check, a timeout, out of memory); the
# input that did it is kept in build-fuzz/fuzz-runs/NAME/ and printed.
#
#   scripts/fuzz.sh [SECONDS] [HARNESS...]      e.g. scripts/fuzz.sh 30 tokenizer http_request
#   scripts/fuzz.sh --configure-only            configures build-fuzz/ and stops
#
# Prints a table (harness, executions, exec/s, corpus size, crashes) and writes it as JSON to
# build-fuzz/fuzz-results.json (TANDEM_FUZZ_JSON overrides). Environment: TANDEM_FUZZ_PARALLEL
# (harnesses run at once, default 2), TANDEM_FUZZ_BUILD_DIR,
# TANDEM_BUILD_JOBS (default 2), TANDEM_BUILD_LOCK (a file to flock around configure and build
# steps, for machines where several builds share the cores), TANDEM_FUZZ_ARGS (extra libFuzzer
# flags, e.g. "-jobs=2 -workers=2").
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${TANDEM_FUZZ_BUILD_DIR:-$root/build-fuzz}"
seconds=60
configure_only=0
if [ "${1:-}" = "--configure-only" ]; then
  configure_only=1
  shift
fi
if [ $# -gt 0 ] && [[ "$1" =~ ^[0-9]+$ ]]; then
  seconds="$1"
  shift
fi
all=(openai_request http_request tokenizer chat_template model_files handoff)
harnesses=("$@")
if [ ${#harnesses[@]} -eq 0 ]; then harnesses=("${all[@]}"); fi
for h in "${harnesses[@]}"; do
  if [ ! -f "$root/tests/fuzz/${h}_fuzzer.cc" ]; then
    echo "fuzz.sh: no harness '$h' (have: ${all[*]})" >&2
    exit 2
  fi
done

locked() {
  if [ -n "${TANDEM_BUILD_LOCK:-}" ]; then flock "$TANDEM_BUILD_LOCK" "$@"; else "$@"; fi
}

# Configure once: clang, a Debug build at -O1 (assertions on), no benchmarks or CUDA. The unit tests
# are configured too: `scripts/sanitize.sh core` (CI's sanitizer stage) builds the core ones here,
# on the same ASan + UBSan libraries the harnesses link.
if [ ! -f "$build/build.ninja" ]; then
  mkdir -p "$build"
  CC="${TANDEM_FUZZ_CC:-clang}" CXX="${TANDEM_FUZZ_CXX:-clang++}" locked cmake -S "$root" \
    -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG="-O1" \
    -DCMAKE_C_FLAGS_DEBUG="-O1" -DTANDEM_FUZZ=ON -DTANDEM_CUDA=OFF -DTANDEM_BUILD_BENCH=OFF \
    > "$build/configure.log" 2>&1 || { cat "$build/configure.log"; exit 1; }
fi
if [ "$configure_only" = 1 ]; then exit 0; fi
targets=()
for h in "${harnesses[@]}"; do targets+=("${h}_fuzzer"); done
locked ninja -C "$build" -j "${TANDEM_BUILD_JOBS:-2}" "${targets[@]}"

runs="$build/fuzz-runs"
json="${TANDEM_FUZZ_JSON:-$build/fuzz-results.json}"
# LeakSanitizer stays on; the harnesses' singletons are reachable, not leaked.
export ASAN_OPTIONS="${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}"
export TANDEM_SOURCE_DIR="$root"
# fuzz_one NAME: runs one harness; its row (name, executions, exec/s, corpus files and bytes,
# crashes, exit code) goes to $runs/NAME/row, its report to stdout.
fuzz_one() {
  local h="$1" dir="$runs/$1" rc
  rm -rf "$dir"
  mkdir -p "$dir/corpus"
  cp "$root/tests/fuzz/corpus/$h/"* "$dir/corpus/"
  echo "[fuzz] $h: ${seconds}s"
  set +e
  # -timeout: one input running this long is a hang; -rss_limit_mb: a run using this much is a
  # memory blow-up. Both count as crashes.
  # shellcheck disable=SC2086
  "$build/fuzz/${h}_fuzzer" -max_total_time="$seconds" -timeout=20 -rss_limit_mb=2560 \
    -print_final_stats=1 -artifact_prefix="$dir/" ${TANDEM_FUZZ_ARGS:-} "$dir/corpus" \
    > "$dir/log.txt" 2>&1
  rc=$?
  set -e
  stat() { sed -n "s/^stat::$1: *//p" "$dir/log.txt" | tail -1; }
  local execs rate corpus_files corpus_bytes crashes
  execs="$(stat number_of_executed_units)"
  rate="$(stat average_exec_per_sec)"
  corpus_files="$(find "$dir/corpus" -type f | wc -l)"
  corpus_bytes="$(du -sb "$dir/corpus" | cut -f1)"
  artifacts() {
    find "$dir" -maxdepth 1 -type f \( -name 'crash-*' -o -name 'leak-*' -o -name 'timeout-*' \
      -o -name 'oom-*' -o -name 'death-*' \)
  }
  crashes="$(artifacts | wc -l)"
  if [ "$rc" != 0 ] && [ "$crashes" = 0 ]; then crashes=1; fi
  if [ "$crashes" != 0 ]; then
    echo "[fuzz] $h FAILED (exit $rc); the report:"
    grep -m1 -B2 -A40 -E "ERROR: |runtime error|FUZZ_CHECK|==[0-9]+==" "$dir/log.txt" | head -60 || tail -40 "$dir/log.txt"
    artifacts | sed 's/^/[fuzz] input: /'
  fi
  echo "$h ${execs:-0} ${rate:-0} $corpus_files $corpus_bytes $crashes $rc" > "$dir/row"
}

# TANDEM_FUZZ_PARALLEL harnesses at a time (default 2: each fuzzer is one process on one core).
parallel="${TANDEM_FUZZ_PARALLEL:-2}"
running=0
for h in "${harnesses[@]}"; do
  if [ "$running" -ge "$parallel" ]; then
    wait -n || true
    running=$((running - 1))
  fi
  fuzz_one "$h" &
  running=$((running + 1))
done
wait || true
failed=0
rows=()
for h in "${harnesses[@]}"; do
  if [ ! -f "$runs/$h/row" ]; then
    echo "[fuzz] $h: no result" >&2
    rows+=("$h 0 0 0 0 1 1")
    failed=1
    continue
  fi
  row="$(cat "$runs/$h/row")"
  rows+=("$row")
  read -r _ _ _ _ _ crashes _ <<< "$row"
  if [ "$crashes" != 0 ]; then failed=1; fi
done

printf '\n%-16s %12s %8s %20s %8s\n' harness executions exec/s "corpus (files, B)" crashes
entries=()
for row in "${rows[@]}"; do
  read -r h execs rate files bytes crashes rc <<< "$row"
  printf '%-16s %12s %8s %20s %8s\n' "$h" "$execs" "$rate" "$files, $bytes" "$crashes"
  entries+=("{\"harness\": \"$h\", \"executions\": $execs, \"exec_per_sec\": $rate, \"corpus_files\": $files, \"corpus_bytes\": $bytes, \"crashes\": $crashes, \"exit_code\": $rc}")
done
{
  printf '{"seconds": %s, "harnesses": [\n' "$seconds"
  for i in "${!entries[@]}"; do
    sep=","
    if [ "$i" = $((${#entries[@]} - 1)) ]; then sep=""; fi
    printf '  %s%s\n' "${entries[$i]}" "$sep"
  done
  printf ']}\n'
} > "$json"
echo "[fuzz] results: $json"
exit "$failed"
