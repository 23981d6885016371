#!/usr/bin/env bash
# Builds and runs tandem's tests under sanitizers, each in its own build directory:
#
#   scripts/sanitize.sh [asan|tsan|core|all]   (default: all = asan then tsan)
#
#   asan  the whole suite (ctest) under AddressSanitizer + UndefinedBehaviorSanitizer: build-asan/
#   tsan  the engine, transport, router, node service and util tests under ThreadSanitizer:
#         build-tsan/
#   core  the core libraries' unit tests under ASan + UBSan (engine, kv, transport, router and its
#         HTTP API, tokenizer, Jinja, Unicode): the CI stage of scripts/test.sh. Built with clang in
#         build-fuzz/, on the libraries the fuzz harnesses use (scripts/fuzz.sh configures it), so
#         CI compiles them once for both stages.
#
# Any sanitizer report fails the test it came from. Extra ctest arguments go after `--`
# (scripts/sanitize.sh asan -- -R Tokenizer; `core` runs its binaries whole, without ctest, and
# takes none). Environment: TANDEM_BUILD_JOBS (default 2),
# TANDEM_TEST_JOBS (default 2), TANDEM_BUILD_LOCK (a file to flock around configure and build
# steps), TANDEM_ASAN_BUILD_DIR, TANDEM_TSAN_BUILD_DIR, TANDEM_FUZZ_BUILD_DIR.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
mode="${1:-all}"
shift || true
if [ "${1:-}" = "--" ]; then shift; fi
ctest_args=("$@")
jobs="${TANDEM_BUILD_JOBS:-2}"
test_jobs="${TANDEM_TEST_JOBS:-2}"
supp="$root/tests/sanitizers"

# The core libraries' test binaries (ctest labels, one per binary: cmake/TandemHelpers.cmake).
# The core ones, longest first (their shards start in this order).
core_tests=(tandem_router_tests tandem_tokenizer_tests tandem_transport_tests tandem_engine_tests
  tandem_router_http_tests tandem_jinja_tests tandem_handoff_tests tandem_kv_tests
  tandem_unicode_tests)
tsan_tests=(tandem_engine_tests tandem_transport_tests tandem_handoff_tests tandem_router_tests
  tandem_router_http_tests tandem_decode_node_tests tandem_prefill_node_tests tandem_serving_tests
  tandem_util_tests)

locked() {
  if [ -n "${TANDEM_BUILD_LOCK:-}" ]; then flock "$TANDEM_BUILD_LOCK" "$@"; else "$@"; fi
}

# configure DIR SANITIZERS: a Debug build at -O1 (sanitizers' usual level; assertions on), without
# CUDA (no GPU under a sanitizer) and without benchmarks.
configure() {
  local dir="$1" sanitizers="$2"
  if [ -f "$dir/build.ninja" ]; then return; fi
  mkdir -p "$dir"
  locked cmake -S "$root" -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Debug \
    -DCMAKE_CXX_FLAGS_DEBUG="-O1 -g1" -DCMAKE_C_FLAGS_DEBUG="-O1 -g1" \
    -DTANDEM_SANITIZE="$sanitizers" -DTANDEM_CUDA=OFF -DTANDEM_BUILD_BENCH=OFF \
    > "$dir/configure.log" 2>&1 || { cat "$dir/configure.log"; exit 1; }
}

# label_regex NAME...: a ctest -L regex matching exactly these binaries' tests.
label_regex() {
  local IFS='|'
  echo "^($*)\$"
}

run_ctest() {
  local dir="$1"
  shift
  (cd "$dir" && ctest --output-on-failure --no-tests=error --timeout 1800 -j "$test_jobs" "$@" \
    "${ctest_args[@]}")
}

export TANDEM_SOURCE_DIR="$root"
# Reports fail the test (UBSan's checks are recoverable by default: halt on the first). Leak
# checking is on; the suppressions name leaks of libraries tandem does not own.
asan_env() {
  export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:detect_stack_use_after_return=1:check_initialization_order=1}"
  export UBSAN_OPTIONS="${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1:suppressions=$supp/ubsan.supp}"
  export LSAN_OPTIONS="${LSAN_OPTIONS:-suppressions=$supp/lsan.supp:print_suppressions=0}"
}
tsan_env() {
  export TSAN_OPTIONS="${TSAN_OPTIONS:-halt_on_error=1:second_deadlock_stack=1:suppressions=$supp/tsan.supp}"
  # UCX's memory hooks (it patches malloc and mmap) crash under TSan's own interceptors.
  export UCX_MEM_MALLOC_HOOKS=no UCX_MEM_MMAP_HOOK_MODE=none UCX_MEM_EVENTS=no
}

run_asan() {
  local dir="${TANDEM_ASAN_BUILD_DIR:-$root/build-asan}"
  configure "$dir" address,undefined
  echo "[sanitize] ASan + UBSan: building the whole suite in $dir"
  locked ninja -C "$dir" -j "$jobs"
  asan_env
  echo "[sanitize] ASan + UBSan: ctest"
  run_ctest "$dir"
}

run_core() {
  local dir="${TANDEM_FUZZ_BUILD_DIR:-$root/build-fuzz}"
  "$root/scripts/fuzz.sh" --configure-only
  echo "[sanitize] ASan + UBSan: building the core unit tests in $dir: ${core_tests[*]}"
  locked ninja -C "$dir" -j "$jobs" "${core_tests[@]}"
  asan_env
  # Each binary runs whole, in shards (scripts/run_gtest_shards.sh), not one process per test as
  # ctest would: a suite's SetUpTestSuite (loading the Llama 3 and Qwen3 tokenizers, slow under
  # ASan) then runs once per shard instead of once per test — 327 s of ctest became about 150 s.
  # A failed test runs once more: a few router tests wait on timers that a loaded 2-core machine
  # under ASan can miss (a sanitizer report aborts its shard, which fails at once).
  local binaries=()
  for name in "${core_tests[@]}"; do
    binaries+=("$(find "$dir/tests" -type f -name "$name" -perm -u+x | head -1)")
  done
  "$root/scripts/run_gtest_shards.sh" --jobs "$test_jobs" --shards 2 --retry-failed \
    --logs "$dir/sanitize-runs" "${binaries[@]}"
}

run_tsan() {
  local dir="${TANDEM_TSAN_BUILD_DIR:-$root/build-tsan}"
  configure "$dir" thread
  echo "[sanitize] TSan: building ${tsan_tests[*]} in $dir"
  locked ninja -C "$dir" -j "$jobs" "${tsan_tests[@]}"
  tsan_env
  run_ctest "$dir" -L "$(label_regex "${tsan_tests[@]}")"
}

case "$mode" in
  asan) run_asan ;;
  tsan) run_tsan ;;
  core) run_core ;;
  all)
    run_asan
    run_tsan
    ;;
  *)
    echo "usage: scripts/sanitize.sh [asan|tsan|core|all] [-- CTEST_ARGS...]" >&2
    exit 2
    ;;
esac
