#!/usr/bin/env bash
# The GPU check, on the GPU machine (scripts/gpu/pack.sh copies this file into the pack):
#
#   gpu-pack/run.sh [PART] [RESULTS_DIR]      PART: tests | bench | reference | cpu | all (default all)
#   gpu-pack/run.sh --expand-only
#
#   tests      the GPU test binaries of tests.txt (gtest), each line "binary [args]"
#   bench      the benchmarks of benches.txt ("{out}" in their arguments becomes RESULTS_DIR)
#   reference  the commands of references.txt (the comparison with transformers)
#   cpu        the commands of cpu_checks.txt: CPU measurements this machine's cores answer better
#              than the development machine's two (the router's overhead); not part of `all`
#
# Each part is sized to end inside the run tool's 10 minutes on an H100 (TANDEM_GPU_PART_BUDGET_S,
# default 540 s: a binary gets what is left of it, at most TANDEM_GPU_TIMEOUT_S, default 300 s;
# whatever the budget leaves unrun is reported, and fails the check). `all` runs the three parts
# one after another, each with its own budget.
#
# Results (RESULTS_DIR, default $OUT, else gpu-pack/results): run.log (everything printed, the test
# binaries' own output included), summary.json (the verdict and every count), and whatever the
# benchmarks and references write (bench_gpu.json, reference.json): at most 8 files, as the run tool
# brings back. Test binaries' gtest JSON and logs stay in a scratch folder; their content is in
# run.log and summary.json.
#
# The verdict, on the last lines and in summary.json:
#   GPU CHECK PASSED            every test passed (tests that need more GPUs than the machine has
#                               are listed as not run), every benchmark and reference exited 0
#   GPU CHECK FAILED: NO USABLE GPU  a test skipped because it found no usable CUDA device: on a
#                               GPU machine this means the check did not run
#   GPU CHECK FAILED: ...       a test failed, crashed, timed out, skipped for another reason, ran
#                               no test at all, a benchmark or reference failed, or a packed binary
#                               does not find its libraries
# Exit status: 0 passed, 1 failed, 3 no usable GPU.
#
# Environment: TANDEM_CUDA_HOME (default /usr/local/cuda), TANDEM_NCCL_LIB (libnccl.so.2 to use;
# else found below and exported), TANDEM_GPU_PART_BUDGET_S, TANDEM_GPU_TIMEOUT_S.
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
    exec "$copy/run.sh" "$@"
  fi
  gzip -d "${gzipped[@]}" || { echo "run.sh: cannot expand the pack"; exit 1; }
fi
if [ "${1:-}" = "--expand-only" ]; then exit 0; fi

part=all
case "${1:-}" in
  tests|bench|reference|cpu|all) part="$1"; shift ;;
  -h|--help) sed -n '2,35p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
esac
out="${1:-${OUT:-$pack/results}}"
mkdir -p "$out"
out="$(cd "$out" && pwd)"
scratch="$(mktemp -d)"
export TANDEM_CUDA_HOME="${TANDEM_CUDA_HOME:-/usr/local/cuda}"
budget_s="${TANDEM_GPU_PART_BUDGET_S:-540}"
binary_limit_s="${TANDEM_GPU_TIMEOUT_S:-300}"
exec > >(tee -a "$out/run.log") 2>&1
tee_pid=$!

section() { printf '\n==== %s ====\n' "$*"; }
# A JSON string of $1.
json_str() {
  printf '%s' "$1" | awk 'BEGIN { ORS = ""; print "\"" }
    { gsub(/\\/, "\\\\"); gsub(/"/, "\\\""); gsub(/\t/, "\\t"); gsub(/\r/, "");
      gsub(/[\001-\037]/, " "); if (NR > 1) print "\\n"; print }
    END { print "\"" }'
}
# A JSON array of strings, one per line of $1.
json_lines() {
  local first=1 line
  printf '['
  while IFS= read -r line; do
    [ -n "$line" ] || continue
    [ "$first" = 1 ] || printf ', '
    first=0
    json_str "$line"
  done <<< "$1"
  printf ']'
}

failures=()     # one line per reason the check failed
no_gpu=()       # tests that skipped for want of a usable GPU
test_json=()    # summary.json entries
bench_json=()

# ---- The machine. -------------------------------------------------------------------------------
section "machine"
date -u +%Y-%m-%dT%H:%M:%SZ
uname -a
echo "glibc: $(getconf GNU_LIBC_VERSION 2>/dev/null || echo unknown) (the pack brings its own)"
section "nvidia-smi"
gpu_csv=""
if command -v nvidia-smi > /dev/null; then
  nvidia-smi 2>&1 || echo "nvidia-smi failed (exit $?)"
  gpu_csv="$(nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,clocks.max.memory,power.limit \
    --format=csv,noheader 2>&1)" || gpu_csv="nvidia-smi failed: $gpu_csv"
  echo "$gpu_csv"
else
  gpu_csv="nvidia-smi not found"
  echo "$gpu_csv"
fi
section "driver and toolkit"
cat /proc/driver/nvidia/version 2>/dev/null || echo "no /proc/driver/nvidia/version"
"$TANDEM_CUDA_HOME/bin/nvcc" --version 2>/dev/null | tail -2 || echo "no nvcc in $TANDEM_CUDA_HOME"
section "pack"
cat "$pack/manifest.txt" 2>/dev/null || echo "no manifest.txt"
commit="$(sed -n 's/^commit: *//p' "$pack/manifest.txt" 2>/dev/null | head -1)"

# The CUDA driver library: through this machine's ld.so cache, or in the usual places.
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
unresolved=()
for f in "$pack"/libexec/*; do
  [ -f "$f" ] || continue
  [ "$(head -c 4 "$f" | od -An -c | tr -d ' ')" = '177ELF' ] || continue
  # ld.so's trace mode lists every dependency ("=> not found" for a missing one); --list stops at
  # the first missing library instead.
  missing="$(LD_TRACE_LOADED_OBJECTS=1 "$loader" --library-path "$libpath" "$f" 2>&1 |
    grep -e 'not found' -e 'error while loading shared libraries')"
  if [ -n "$missing" ]; then
    echo "$(basename "$f") is missing:"; echo "$missing"
    unresolved+=("$(basename "$f"): $(echo "$missing" | awk '{print $1}' | tr '\n' ' ')")
  fi
done
if [ "${#unresolved[@]}" -eq 0 ]; then
  echo "every packed binary resolves its libraries"
else
  failures+=("${#unresolved[@]} packed binaries do not find their libraries")
fi

# NCCL is not part of the CUDA toolkit; the nodes load it with dlopen only for --kv-transport nccl.
# Found here once and handed to them: TANDEM_NCCL_LIB, CUDA's folders, the active virtual
# environment's wheel (nvidia-nccl-cu13), the ld.so cache, then other environments' wheels. The
# first that loads under the pack's own glibc wins: the first GPU machine's system libnccl.so.2
# (the ld.so cache) needed a newer glibc than the pack's and failed to load in the transport's
# tests, while the torch environment's wheel loaded.
nccl_loads() {  # FILE: quiet when FILE's libraries and symbol versions resolve under the pack
  local problems
  problems="$(LD_TRACE_LOADED_OBJECTS=1 "$loader" --library-path "$libpath" "$1" 2>&1 |
    grep -e 'not found' -e 'error while loading shared libraries')"
  [ -z "$problems" ] && return 0
  echo "libnccl.so.2 candidate $1 does not load under the pack: $problems" | head -3
  return 1
}
nccl="${TANDEM_NCCL_LIB:-}"
nccl_from="TANDEM_NCCL_LIB"
if [ -z "$nccl" ]; then
  first_found=""
  for candidate in "$TANDEM_CUDA_HOME"/lib64/libnccl.so.2 "$TANDEM_CUDA_HOME"/lib/libnccl.so.2 \
    "${VIRTUAL_ENV:-/nonexistent}"/lib/python3*/site-packages/nvidia/nccl/lib/libnccl.so.2 \
    "$(/sbin/ldconfig -p 2>/dev/null | awk '/libnccl\.so\.2 / { print $NF; exit }')" \
    /opt/*/.venv/lib/python3*/site-packages/nvidia/nccl/lib/libnccl.so.2 \
    /usr/local/lib/python3*/dist-packages/nvidia/nccl/lib/libnccl.so.2 \
    /usr/lib/python3/dist-packages/nvidia/nccl/lib/libnccl.so.2; do
    [ -n "$candidate" ] && [ -f "$candidate" ] || continue
    [ -n "$first_found" ] || first_found="$candidate"
    if nccl_loads "$candidate"; then nccl="$candidate"; break; fi
  done
  nccl_from="search"
  if [ -z "$nccl" ] && [ -n "$first_found" ]; then
    nccl="$first_found"
    nccl_from="search; none loads under the pack, so the nccl transport's tests will say why"
  fi
fi
if [ -n "$nccl" ]; then
  export TANDEM_NCCL_LIB="$nccl"
  echo "libnccl.so.2: $nccl (from $nccl_from)"
else
  echo "libnccl.so.2: NOT FOUND (the nccl KV transport cannot start; set TANDEM_NCCL_LIB)"
fi

# ---- What the tests and the binaries they start see. --------------------------------------------
export UCX_MODULE_DIR="$pack/lib/ucx"
export TANDEM_BINARY_DIR="$pack"        # $TANDEM_BINARY_DIR/bin/NAME: the packed binaries
export TANDEM_SOURCE_DIR="$pack/data"   # the source tree's files the tests read, packed
export TANDEM_PACK_DATA_DIR="$pack/data"
export TANDEM_RESULTS_DIR="$out"

part_start=0
# Seconds a binary may run: what is left of the part's budget, at most the per-binary limit.
time_left() {
  local left=$((budget_s - ($(date +%s) - part_start)))
  [ "$left" -gt "$binary_limit_s" ] && left="$binary_limit_s"
  echo "$left"
}
run_limited() {  # SECONDS CMD...: 124 when it ran out of time
  local seconds="$1"
  shift
  if command -v timeout > /dev/null; then timeout -k 10 "$seconds" "$@"; else "$@"; fi
}

# The skipped tests of a gtest log: "Suite.Name<TAB>reason" per line.
skipped_tests() {
  awk '/^\[ RUN      \] / { name = $4; msg = ""; collecting = 0; next }
       /: Skipped$/ { collecting = 1; next }
       /^\[  SKIPPED \] .* \([0-9]+ ms\)$/ { gsub(/^[ \n]+|[ \n]+$/, "", msg); print name "\t" msg; collecting = 0; next }
       collecting && NF { msg = msg (msg == "" ? "" : " ") $0 }' "$1"
}

# ---- Tests. --------------------------------------------------------------------------------------
run_tests() {
  part_start=$(date +%s)
  local entry name args log seconds rc passed failed skipped limit
  while IFS= read -r entry; do
    [ -n "$entry" ] || continue
    name="${entry%% *}"
    args=""
    [ "$entry" != "$name" ] && args="${entry#* }"
    limit="$(time_left)"
    if [ "$limit" -le 0 ]; then
      echo "$name: not run, the part's ${budget_s}s budget is spent"
      failures+=("$name not run (the tests part ran out of its ${budget_s}s)")
      test_json+=("{\"binary\": $(json_str "$name"), \"args\": $(json_str "$args"), \"ran\": false}")
      continue
    fi
    section "test $name $args (at most ${limit}s)"
    log="$scratch/$name.log"
    local start
    start=$(date +%s)
    # shellcheck disable=SC2086  # args are whitespace-separated on purpose
    run_limited "$limit" "$pack/bin/$name" $args --gtest_output="json:$scratch/$name.json" \
      > "$log" 2>&1
    rc=$?
    seconds=$(($(date +%s) - start))
    cat "$log"
    passed="$(grep -Eo '^\[  PASSED  \] [0-9]+' "$log" | grep -Eo '[0-9]+$' | tail -1)"
    failed="$(grep -Eo '^\[  FAILED  \] [0-9]+ test' "$log" | grep -Eo '[0-9]+' | tail -1)"
    skipped="$(grep -Eo '^\[  SKIPPED \] [0-9]+ test' "$log" | grep -Eo '[0-9]+' | tail -1)"
    passed="${passed:-0}"; failed="${failed:-0}"; skipped="${skipped:-0}"
    local failed_tests skips not_run no_gpu_here unexpected
    failed_tests="$(grep -E '^\[  FAILED  \] [A-Za-z_]' "$log" | grep -v 'ms)$' |
      awk '{ sub(/,$/, "", $4); print $4 }' | sort -u)"
    skips="$(skipped_tests "$log")"
    no_gpu_here="$(echo "$skips" | awk -F'\t' '$2 ~ /no usable CUDA device/ { print $1 ": " $2 }')"
    not_run="$(echo "$skips" | awk -F'\t' '$2 !~ /no usable CUDA device/ && $2 ~ /needs [0-9]+ CUDA devices/ { print $1 ": " $2 }')"
    unexpected="$(echo "$skips" | awk -F'\t' 'NF && $2 !~ /no usable CUDA device/ && $2 !~ /needs [0-9]+ CUDA devices/ { print $1 ": " $2 }')"
    local line="$name: rc $rc, $passed passed, $failed failed, $skipped skipped, ${seconds}s"
    echo "$line"
    [ -n "$failed_tests" ] && { echo "failed:"; echo "$failed_tests" | sed 's/^/  /'; }
    [ -n "$not_run" ] && { echo "not run (needs more GPUs than this machine has):"; echo "$not_run" | sed 's/^/  /'; }
    [ -n "$no_gpu_here" ] && { echo "skipped, no usable GPU:"; echo "$no_gpu_here" | sed 's/^/  /'; }
    [ -n "$unexpected" ] && { echo "skipped for another reason:"; echo "$unexpected" | sed 's/^/  /'; }
    if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
      failures+=("$name timed out after ${limit}s")
    elif [ "$failed" != 0 ] || [ -n "$failed_tests" ]; then
      failures+=("$name: $(echo "$failed_tests" | grep -c .) failed: $(echo "$failed_tests" | head -5 | tr '\n' ' ')")
    elif [ "$rc" -ne 0 ]; then
      failures+=("$name exited $rc")
    elif [ "$passed" = 0 ] && [ "$skipped" = 0 ]; then
      failures+=("$name ran no test")
    fi
    if [ -n "$no_gpu_here" ]; then no_gpu+=("$name: $(echo "$no_gpu_here" | head -1)"); fi
    if [ -n "$unexpected" ]; then
      failures+=("$name: $(echo "$unexpected" | grep -c .) skipped for a reason other than the GPU count: $(echo "$unexpected" | head -2 | tr '\n' ' ')")
    fi
    test_json+=("{\"binary\": $(json_str "$name"), \"args\": $(json_str "$args"), \"ran\": true, \"rc\": $rc, \"seconds\": $seconds, \"limit_s\": $limit, \"passed\": $passed, \"failed\": $failed, \"skipped\": $skipped, \"failed_tests\": $(json_lines "$failed_tests"), \"not_run_needs_more_gpus\": $(json_lines "$not_run"), \"skipped_no_usable_gpu\": $(json_lines "$no_gpu_here"), \"skipped_other\": $(json_lines "$unexpected")}")
  done < "$pack/tests.txt"
}

# ---- Benchmarks and references: commands whose exit status is the verdict. ----------------------
run_commands() {  # LIST_FILE KIND
  part_start=$(date +%s)
  local entry name args limit start rc seconds
  [ -f "$1" ] || { echo "no $(basename "$1") in the pack"; return; }
  while IFS= read -r entry; do
    [ -n "$entry" ] || continue
    name="${entry%% *}"
    args=""
    [ "$entry" != "$name" ] && args="${entry#* }"
    args="${args//\{out\}/$out}"
    args="${args//\{pack\}/$pack}"
    limit="$(time_left)"
    if [ "$limit" -le 0 ]; then
      failures+=("$2 $name not run (out of the part's ${budget_s}s)")
      bench_json+=("{\"kind\": \"$2\", \"name\": $(json_str "$name"), \"ran\": false}")
      continue
    fi
    section "$2 $name $args (at most ${limit}s)"
    start=$(date +%s)
    local cmd="$pack/bin/$name"
    [ -x "$cmd" ] || cmd="$pack/$name"  # scripts sit at the pack's top level
    # shellcheck disable=SC2086  # args are whitespace-separated on purpose
    run_limited "$limit" "$cmd" $args
    rc=$?
    seconds=$(($(date +%s) - start))
    echo "$name: rc $rc, ${seconds}s"
    if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then failures+=("$2 $name timed out after ${limit}s")
    elif [ "$rc" -eq 2 ] && [ "$2" = reference ]; then
      failures+=("$2 $name could not compare: torch, transformers or a GPU is missing (its JSON says which)")
    elif [ "$rc" -ne 0 ]; then failures+=("$2 $name exited $rc"); fi
    bench_json+=("{\"kind\": \"$2\", \"name\": $(json_str "$name"), \"args\": $(json_str "$args"), \"ran\": true, \"rc\": $rc, \"seconds\": $seconds, \"limit_s\": $limit}")
  done < "$1"
}

case "$part" in
  tests) run_tests ;;
  bench) run_commands "$pack/benches.txt" bench ;;
  reference) run_commands "$pack/references.txt" reference ;;
  cpu) run_commands "$pack/cpu_checks.txt" cpu ;;
  all)
    run_tests
    run_commands "$pack/benches.txt" bench
    run_commands "$pack/references.txt" reference ;;
esac

# ---- Verdict. ------------------------------------------------------------------------------------
section "summary ($part)"
verdict=PASS
status=0
if [ "${#no_gpu[@]}" -gt 0 ]; then verdict=NO_USABLE_GPU; status=3; fi
if [ "${#failures[@]}" -gt 0 ] && [ "$status" -eq 0 ]; then verdict=FAIL; status=1; fi
reasons="$(printf '%s\n' "${failures[@]}" "${no_gpu[@]}")"
{
  printf '{\n  "part": %s,\n  "verdict": "%s",\n  "reasons": %s,\n' "$(json_str "$part")" "$verdict" \
    "$(json_lines "$reasons")"
  printf '  "machine": {"gpus": %s, "libcuda_dir": %s, "libnccl": %s, "cuda_home": %s},\n' \
    "$(json_lines "$gpu_csv")" "$(json_str "$driver_dir")" "$(json_str "$nccl")" \
    "$(json_str "$TANDEM_CUDA_HOME")"
  printf '  "pack_commit": %s,\n  "unresolved_libraries": %s,\n' "$(json_str "$commit")" \
    "$(json_lines "$(printf '%s\n' "${unresolved[@]}")")"
  printf '  "tests": [%s],\n' "$(IFS=,; echo "${test_json[*]}")"
  printf '  "commands": [%s]\n}\n' "$(IFS=,; echo "${bench_json[*]}")"
} > "$out/summary.json"
printf '%s\n' "${failures[@]}" | sed '/^$/d; s/^/  FAILED: /'
printf '%s\n' "${no_gpu[@]}" | sed '/^$/d; s/^/  NO GPU: /'
echo "results: $out ($(find "$out" -type f | wc -l) files)"
rm -rf "$scratch"
case "$verdict" in
  PASS) echo "GPU CHECK PASSED ($part)" ;;
  NO_USABLE_GPU) echo "GPU CHECK FAILED: NO USABLE GPU ($part): the tests found no CUDA device they could use" ;;
  *) echo "GPU CHECK FAILED ($part): ${#failures[@]} problem(s) above" ;;
esac
exec > /dev/null 2>&1
wait "$tee_pid" 2> /dev/null  # run.log complete before the exit
exit "$status"
