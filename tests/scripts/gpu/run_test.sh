#!/usr/bin/env bash
# Tests scripts/gpu/run.sh's decisions without a GPU: a fake pack whose "test binaries" are scripts
# printing gtest output (passes, failures, skips with each reason, a hang), a fake nvidia-smi on
# PATH, a fake benchmark and reference, and one real ELF whose library is missing.
#
#   tests/scripts/gpu/run_test.sh SOURCE_DIR
set -uo pipefail
src="$(cd "${1:?usage: run_test.sh SOURCE_DIR}" && pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

# ---- The fake machine: nvidia-smi answering like a one-GPU H100. --------------------------------
mkdir -p "$work/path"
cat > "$work/path/nvidia-smi" <<'EOF'
#!/bin/sh
if [ -n "${FAKE_NO_DRIVER:-}" ]; then
  echo "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver."; exit 9
fi
case "$*" in
  *--query-gpu*) echo "NVIDIA H100 80GB HBM3, 580.159.04, 81559 MiB, 1980 MHz, 2619 MHz, 700.00 W" ;;
  *) echo "| NVIDIA-SMI 580.159.04   Driver Version: 580.159.04   CUDA Version: 13.0 |" ;;
esac
EOF
chmod +x "$work/path/nvidia-smi"
export PATH="$work/path:$PATH"

# A fake gtest binary: FAKE_<NAME> picks what it prints (pass, no_gpu, needs2, fail, other_skip,
# hang, crash, none).
fake_gtest() {  # PACK NAME
  cat > "$1/bin/$2" <<'EOF'
#!/usr/bin/env bash
name="$(basename "$0")"
var="FAKE_$(echo "$name" | tr 'a-z-' 'A-Z_')"
mode="${!var:-pass}"
for a in "$@"; do case "$a" in --gtest_output=json:*) echo '{}' > "${a#--gtest_output=json:}" ;; esac; done
echo "Running main() from gtest_main.cc"
echo "args: $*"
pass() { echo "[ RUN      ] $1"; echo "[       OK ] $1 (3 ms)"; }
skip() {
  echo "[ RUN      ] $1"; echo "/src/tests/x_test.cc:22: Skipped"; echo "$2"; echo
  echo "[  SKIPPED ] $1 (0 ms)"
}
case "$mode" in
  pass) pass Gpu.A; pass Gpu.B; echo "[  PASSED  ] 2 tests." ;;
  needs2)
    pass Gpu.A
    skip Nccl.TwoRanks "GPU test skipped: needs 2 CUDA devices, this machine has 1"
    echo "[  PASSED  ] 1 test."; echo "[  SKIPPED ] 1 test, listed below:"
    echo "[  SKIPPED ] Nccl.TwoRanks" ;;
  no_gpu)
    skip Gpu.A "GPU test skipped, no usable CUDA device: UNAVAILABLE: cudaGetDeviceCount: cudaErrorNoDevice"
    skip Gpu.B "GPU test skipped, no usable CUDA device: UNAVAILABLE: cudaGetDeviceCount: cudaErrorNoDevice"
    echo "[  PASSED  ] 0 tests."; echo "[  SKIPPED ] 2 tests, listed below:"
    echo "[  SKIPPED ] Gpu.A"; echo "[  SKIPPED ] Gpu.B" ;;
  other_skip)
    pass Gpu.A; skip Gpu.B "a GPU is present"
    echo "[  PASSED  ] 1 test."; echo "[  SKIPPED ] 1 test, listed below:"; echo "[  SKIPPED ] Gpu.B" ;;
  fail)
    pass Gpu.A
    echo "[ RUN      ] Gpu.Broken"; echo "/src/x_test.cc:9: Failure"; echo "[  FAILED  ] Gpu.Broken (5 ms)"
    echo "[  PASSED  ] 1 test."; echo "[  FAILED  ] 1 test, listed below:"; echo "[  FAILED  ] Gpu.Broken"
    echo; echo " 1 FAILED TEST"; exit 1 ;;
  hang) echo "[ RUN      ] Gpu.Hangs"; sleep 60 ;;
  crash) echo "[ RUN      ] Gpu.Crashes"; kill -SEGV $$ ;;
  none) echo "[  PASSED  ] 0 tests." ;;
esac
EOF
  chmod +x "$1/bin/$2"
  cp "$1/bin/$2" "$1/libexec/$2"
}

# A fake pack: the real run.sh, the system's loader, two gtest binaries, a benchmark, a reference.
make_pack() {  # DIR
  mkdir -p "$1/bin" "$1/libexec" "$1/lib/ucx" "$1/data"
  cp "$src/scripts/gpu/run.sh" "$1/run.sh"
  cp -L /lib64/ld-linux-x86-64.so.2 "$1/lib/"
  fake_gtest "$1" tandem_kernels_gpu_tests
  fake_gtest "$1" tandem_transport_cuda_gpu_tests
  printf '%s\n' tandem_kernels_gpu_tests "tandem_transport_cuda_gpu_tests --gtest_filter=Nccl*" \
    > "$1/tests.txt"
  cat > "$1/bin/tandem-bench-gpu" <<'EOF'
#!/bin/sh
while [ $# -gt 0 ]; do [ "$1" = --out ] && echo '{"rows": []}' > "$2/bench_gpu.json"; shift; done
exit "${FAKE_BENCH_RC:-0}"
EOF
  chmod +x "$1/bin/tandem-bench-gpu"
  echo "tandem-bench-gpu --out {out}" > "$1/benches.txt"
  cat > "$1/compare_transformers.sh" <<'EOF'
#!/bin/sh
echo '{"pass": true}' > "$2"
exit "${FAKE_REFERENCE_RC:-0}"
EOF
  chmod +x "$1/compare_transformers.sh"
  echo "compare_transformers.sh --out {out}/reference.json" > "$1/references.txt"
  echo "commit:  fake0123" > "$1/manifest.txt"
}

# check NAME WANT_STATUS WANT_LINE [run.sh args...]: runs a fresh fake pack with the FAKE_* env.
last_out=""
check() {
  local name="$1" want_status="$2" want_line="$3"
  shift 3
  local pack="$work/$name/gpu-pack" out="$work/$name/out"
  make_pack "$pack"
  mkdir -p "$out"
  local started=$SECONDS
  OUT="$out" "$pack/run.sh" "$@" > "$work/$name/stdout" 2>&1
  local status=$?
  last_out="$out"
  if [ "$status" != "$want_status" ]; then
    fail "$name: exit $status, want $want_status"; tail -20 "$work/$name/stdout"
  fi
  if ! tail -3 "$work/$name/stdout" | grep -qF -- "$want_line"; then
    fail "$name: last lines do not say '$want_line':"; tail -5 "$work/$name/stdout"
  fi
  local files
  files="$(find "$out" -type f | wc -l)"
  [ "$files" -le 8 ] || fail "$name: $files result files (the run tool brings back 8)"
  [ -f "$out/summary.json" ] || fail "$name: no summary.json"
  [ -f "$out/run.log" ] || fail "$name: no run.log"
  if command -v python3 > /dev/null; then
    python3 -m json.tool "$out/summary.json" > /dev/null 2>&1 || {
      fail "$name: summary.json is not JSON"; cat "$out/summary.json"; }
  fi
  echo "ok-ish: $name (exit $status, $((SECONDS - started))s, $files files)"
}
has() {  # NAME FILE PATTERN: the file holds the pattern
  grep -qE -- "$3" "$last_out/$2" || { fail "$1: $2 lacks /$3/"; }
}
lacks() {
  ! grep -qE -- "$3" "$last_out/$2" || { fail "$1: $2 has /$3/"; }
}

# 1. Everything passes on a one-GPU machine; the 2-GPU test is listed as not run, not failed.
FAKE_TANDEM_TRANSPORT_CUDA_GPU_TESTS=needs2 check one_gpu_passes 0 "GPU CHECK PASSED (all)"
has one_gpu_passes summary.json '"verdict": "PASS"'
has one_gpu_passes summary.json 'Nccl.TwoRanks: GPU test skipped: needs 2 CUDA devices'
has one_gpu_passes summary.json '"not_run_needs_more_gpus": \["Nccl.TwoRanks'
has one_gpu_passes run.log 'not run \(needs more GPUs'
has one_gpu_passes run.log 'args: --gtest_filter=Nccl\*'  # a tests.txt line's arguments reach it
has one_gpu_passes summary.json 'NVIDIA H100 80GB HBM3'
[ -f "$last_out/bench_gpu.json" ] || fail "one_gpu_passes: the benchmark's JSON is not in OUT"
[ -f "$last_out/reference.json" ] || fail "one_gpu_passes: the reference's JSON is not in OUT"

# 2. No usable GPU: the tests skip for that reason, and the check says so.
FAKE_NO_DRIVER=1 FAKE_TANDEM_KERNELS_GPU_TESTS=no_gpu FAKE_TANDEM_TRANSPORT_CUDA_GPU_TESTS=no_gpu \
  check no_gpu 3 "GPU CHECK FAILED: NO USABLE GPU (tests)" tests
has no_gpu summary.json '"verdict": "NO_USABLE_GPU"'
has no_gpu summary.json 'nvidia-smi failed'
lacks no_gpu run.log 'benchmark tandem-bench-gpu'  # the tests part runs no benchmark

# 3. A failing test fails the check and is named.
FAKE_TANDEM_KERNELS_GPU_TESTS=fail check a_test_fails 1 "GPU CHECK FAILED (tests)" tests
has a_test_fails summary.json '"failed_tests": \["Gpu.Broken"\]'
has a_test_fails run.log 'FAILED: tandem_kernels_gpu_tests: 1 failed: Gpu.Broken'

# 4. A skip for any other reason (e.g. a test meaningless where a GPU exists) fails the check.
FAKE_TANDEM_KERNELS_GPU_TESTS=other_skip check other_skip 1 "GPU CHECK FAILED (tests)" tests
has other_skip summary.json '"skipped_other": \["Gpu.B: a GPU is present"\]'

# 5. A crash, and a binary that ran no test, fail it.
FAKE_TANDEM_KERNELS_GPU_TESTS=crash check crash 1 "GPU CHECK FAILED (tests)" tests
has crash run.log 'tandem_kernels_gpu_tests exited 139'
FAKE_TANDEM_KERNELS_GPU_TESTS=none check no_tests 1 "GPU CHECK FAILED (tests)" tests
has no_tests run.log 'tandem_kernels_gpu_tests ran no test'

# 6. The part's budget bounds a hang; what it leaves unrun is reported.
TANDEM_GPU_PART_BUDGET_S=3 FAKE_TANDEM_KERNELS_GPU_TESTS=hang check hang 1 "GPU CHECK FAILED (tests)" tests
# (the part's clock starts before the binary does: on a loaded machine it gets 2 or 1 of the 3 s)
has hang run.log 'tandem_kernels_gpu_tests timed out after [123]s'
has hang run.log 'tandem_transport_cuda_gpu_tests not run'

# 7. The bench part runs only the benchmarks; a failing benchmark fails it.
FAKE_BENCH_RC=2 check bench_fails 1 "GPU CHECK FAILED (bench)" bench
has bench_fails run.log 'bench tandem-bench-gpu exited 2'
lacks bench_fails run.log '==== test '
FAKE_REFERENCE_RC=2 check reference_no_torch 1 "GPU CHECK FAILED (reference)" reference
has reference_no_torch run.log 'torch, transformers or a GPU is missing'
lacks reference_no_torch run.log '==== (test|bench) ' 

# 8. A packed binary whose library is missing fails the check, even when every test passes.
if command -v cc > /dev/null; then
  lib="$work/libgone"
  mkdir -p "$lib"
  echo 'int gone(void) { return 1; }' > "$lib/gone.c"
  echo 'int gone(void); int main(void) { return gone(); }' > "$lib/main.c"
  cc -shared -fPIC -o "$lib/libtandemgone.so" "$lib/gone.c" &&
    cc -o "$lib/needs-gone" "$lib/main.c" -L"$lib" -ltandemgone || fail "cannot build the ELF"
  rm -f "$lib/libtandemgone.so"
  make_pack "$work/unresolved/gpu-pack"
  cp "$lib/needs-gone" "$work/unresolved/gpu-pack/libexec/"
  mkdir -p "$work/unresolved/out"
  OUT="$work/unresolved/out" "$work/unresolved/gpu-pack/run.sh" tests > "$work/unresolved/stdout" 2>&1
  status=$?
  [ "$status" = 1 ] || fail "unresolved: exit $status, want 1"
  grep -q 'needs-gone is missing' "$work/unresolved/stdout" || fail "unresolved: not named"
  grep -q 'libtandemgone.so' "$work/unresolved/out/summary.json" || fail "unresolved: not in summary"
else
  fail "no C compiler to build the unresolved-library case"
fi

# 9. NCCL from a Python wheel's folder is found and handed on.
# NCCL: the first candidate that loads under the pack's loader wins. CUDA's folder holds a file that
# is no library (as the first GPU machine's system libnccl.so.2 needed a newer glibc than the
# pack's), the active virtual environment's wheel a real shared library: the wheel is chosen, and
# the refused candidate is named with the loader's reason.
venv="$work/venv"
mkdir -p "$venv/lib/python3.12/site-packages/nvidia/nccl/lib" "$work/broken-cuda/lib64"
cp -L "$(/sbin/ldconfig -p | awk '/libz\.so\.1 / { print $NF; exit }')" \
  "$venv/lib/python3.12/site-packages/nvidia/nccl/lib/libnccl.so.2"
echo "not a library" > "$work/broken-cuda/lib64/libnccl.so.2"
VIRTUAL_ENV="$venv" TANDEM_CUDA_HOME="$work/broken-cuda" check nccl_wheel 0 \
  "GPU CHECK PASSED (tests)" tests
has nccl_wheel run.log "libnccl.so.2: $venv/lib/python3.12/site-packages/nvidia/nccl/lib/libnccl.so.2 \(from search\)"
has nccl_wheel run.log "candidate $work/broken-cuda/lib64/libnccl.so.2 does not load under the pack"

if [ "$failures" -gt 0 ]; then
  echo "run_test.sh: $failures failure(s)"
  exit 1
fi
echo "run_test.sh: all cases passed"
