#!/usr/bin/env bash
# The GPU check in one command, on the GPU machine: gpu-pack/run.sh [RESULTS_DIR | --expand-only]
# (scripts/gpu/pack.sh copies this file into the pack). Expands the pack's gzipped files, prints
# the machine (nvidia-smi, driver, CUDA toolkit), checks that every packed binary finds its
# libraries, runs every GPU test binary (gtest, JSON per binary), then every benchmark, and
# collects logs and outputs in RESULTS_DIR (default $OUT, else gpu-pack/results).
#
# Exit status 0 only when every test binary passed with no test skipped (a GPU test skips when it
# finds no usable GPU, which on a GPU machine means the check did not run; TANDEM_GPU_ALLOW_SKIPS=1
# accepts skips) and every benchmark exited 0.
# Environment: TANDEM_CUDA_HOME (default /usr/local/cuda), TANDEM_GPU_TIMEOUT_S (per binary,
# default 300), TANDEM_GPU_ALLOW_SKIPS, TANDEM_GPU_SKIP_BENCH=1 (tests only).
set -uo pipefail

pack="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

# pack.sh gzips the files over 1 MiB (gzipped.txt): expand them in place (in a copy when the pack
# is read-only).
gzipped=()
while IFS= read -r f; do
  [ -f "$pack/$f.gz" ] && gzipped+=("$pack/$f.gz")
done < <(cat "$pack/gzipped.txt" 2>/dev/null)
if [ "${#gzipped[@]}" -gt 0 ]; then
  if [ ! -w "$pack" ]; then
    copy="$(mktemp -d)/gpu-pack"
    cp -r "$pack" "$copy" && chmod -R u+w "$copy"
    echo "run.sh: $pack is read-only, running from $copy"
    TANDEM_SOURCE_DIR="${TANDEM_SOURCE_DIR:-$(dirname "$pack")}" exec "$copy/run.sh" "$@"
  fi
  gzip -d "${gzipped[@]}" || { echo "run.sh: cannot expand the pack"; exit 1; }
fi
if [ "${1:-}" = "--expand-only" ]; then exit 0; fi

out="${1:-${OUT:-$pack/results}}"
mkdir -p "$out"
out="$(cd "$out" && pwd)"
export TANDEM_CUDA_HOME="${TANDEM_CUDA_HOME:-/usr/local/cuda}"
timeout_s="${TANDEM_GPU_TIMEOUT_S:-300}"
exec > >(tee -a "$out/run.log") 2>&1

section() { printf '\n==== %s ====\n' "$*"; }
failures=()

# ---- The machine. -------------------------------------------------------------------------------
section "machine"
date -u +%Y-%m-%dT%H:%M:%SZ
uname -a
echo "glibc: $(getconf GNU_LIBC_VERSION 2>/dev/null || echo unknown) (the pack brings its own)"
section "nvidia-smi"
nvidia-smi 2>&1 || echo "nvidia-smi failed"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,clocks.max.memory,power.limit \
  --format=csv 2>&1 | tee "$out/gpu.csv" || true
section "driver and toolkit"
cat /proc/driver/nvidia/version 2>/dev/null || echo "no /proc/driver/nvidia/version"
if [ -f "$TANDEM_CUDA_HOME/version.json" ]; then
  grep -A2 '"cuda"' "$TANDEM_CUDA_HOME/version.json" | head -4
fi
"$TANDEM_CUDA_HOME/bin/nvcc" --version 2>/dev/null | tail -2 || true
ls "$TANDEM_CUDA_HOME"/lib64/libcublasLt.so* "$TANDEM_CUDA_HOME"/lib*/libnccl.so* 2>/dev/null
section "pack"
cat "$pack/manifest.txt"

# The CUDA driver library: found through this machine's ld.so cache, or in the usual places.
driver_dir=""
libcuda="$(/sbin/ldconfig -p 2>/dev/null | awk '/libcuda\.so\.1 / { print $NF; exit }')"
[ -n "$libcuda" ] && driver_dir="$(dirname "$libcuda")"
if [ -z "$driver_dir" ]; then
  for d in /usr/lib/x86_64-linux-gnu /usr/lib64 /usr/local/nvidia/lib64 /usr/lib/wsl/lib; do
    if [ -e "$d/libcuda.so.1" ]; then driver_dir="$d"; break; fi
  done
fi
echo "libcuda.so.1: ${driver_dir:-NOT FOUND}"
export TANDEM_DRIVER_LIB_DIR="$driver_dir"

# ---- Libraries: every packed binary must resolve against the pack and this machine's CUDA. -------
section "libraries"
loader="$pack/lib/ld-linux-x86-64.so.2"
libpath="$pack/lib:$TANDEM_CUDA_HOME/lib64:$TANDEM_CUDA_HOME/lib:$TANDEM_CUDA_HOME/targets/x86_64-linux/lib"
unresolved=0
for f in "$pack"/libexec/*; do
  missing="$("$loader" --library-path "$libpath" --list "$f" 2>&1 | grep 'not found')"
  if [ -n "$missing" ]; then
    echo "$(basename "$f") is missing:"; echo "$missing"
    unresolved=$((unresolved + 1))
  fi
done
[ "$unresolved" -eq 0 ] && echo "every packed binary resolves its libraries"

# ---- Environment the tests and the binaries they start see. -------------------------------------
export UCX_MODULE_DIR="$pack/lib/ucx"
export TANDEM_BINARY_DIR="$pack"  # $TANDEM_BINARY_DIR/bin/NAME: the packed binaries
export TANDEM_SOURCE_DIR="${TANDEM_SOURCE_DIR:-$(dirname "$pack")}"
export TANDEM_PACK_DATA_DIR="$pack/data"
export TANDEM_RESULTS_DIR="$out"
run_limited() {
  if command -v timeout > /dev/null; then timeout -k 10 "$timeout_s" "$@"; else "$@"; fi
}

# ---- Tests. --------------------------------------------------------------------------------------
summary=()
while IFS= read -r name; do
  [ -n "$name" ] || continue
  section "test $name"
  log="$out/$name.log"
  start=$(date +%s)
  run_limited "$pack/bin/$name" --gtest_output="json:$out/$name.json" > "$log" 2>&1
  rc=$?
  seconds=$(($(date +%s) - start))
  passed="$(grep -Eo '^\[  PASSED  \] [0-9]+' "$log" | grep -Eo '[0-9]+$' || echo 0)"
  failed="$(grep -Eo '^\[  FAILED  \] [0-9]+ test' "$log" | grep -Eo '[0-9]+' || echo 0)"
  skipped="$(grep -Eo '^\[  SKIPPED \] [0-9]+ test' "$log" | grep -Eo '[0-9]+' || echo 0)"
  # The failed tests, from gtest's closing list (the lines without a time).
  grep -E '^\[  FAILED  \] [A-Za-z]' "$log" | grep -v 'ms)$' | head -40
  if [ "$skipped" != 0 ]; then
    echo "skip reasons:"; grep -A1 ': Skipped$' "$log" | grep -v -e ': Skipped$' -e '^--$' |
      sort | uniq -c | head -5
  fi
  line="$name: rc $rc, $passed passed, $failed failed, $skipped skipped, ${seconds}s"
  echo "$line"; summary+=("$line")
  if [ "$rc" -ne 0 ]; then
    [ "$rc" -eq 124 ] && echo "$name: timed out after ${timeout_s}s"
    failures+=("$name (rc $rc)"); tail -30 "$log"
  elif [ "$skipped" != 0 ] && [ "${TANDEM_GPU_ALLOW_SKIPS:-0}" != 1 ]; then
    failures+=("$name ($skipped skipped: no usable GPU?)")
  fi
done < "$pack/tests.txt"

# ---- Benchmarks. ---------------------------------------------------------------------------------
if [ "${TANDEM_GPU_SKIP_BENCH:-0}" != 1 ]; then
  while IFS= read -r entry; do
    [ -n "$entry" ] || continue
    name="${entry%% *}"
    args=""
    [ "$entry" != "$name" ] && args="${entry#* }"
    args="${args//\{out\}/$out}"
    section "benchmark $name $args"
    start=$(date +%s)
    # shellcheck disable=SC2086  # args are whitespace-separated on purpose
    run_limited "$pack/bin/$name" $args 2>&1 | tee "$out/$name.log"
    rc=${PIPESTATUS[0]}
    line="$name: rc $rc, $(($(date +%s) - start))s"
    echo "$line"; summary+=("$line")
    [ "$rc" -eq 0 ] || failures+=("$name (rc $rc)")
  done < "$pack/benches.txt"
fi

# ---- Summary. ------------------------------------------------------------------------------------
section "summary"
printf '%s\n' "${summary[@]}"
echo "results: $out"
if [ "${#failures[@]}" -gt 0 ]; then
  echo "GPU CHECK FAILED: ${failures[*]}"
  exit 1
fi
echo "GPU CHECK PASSED"
