#!/usr/bin/env bash
# Configures and builds tandem into build/ (Release). Extra arguments go to cmake's configure step.
# TANDEM_BUILD_TARGETS (space-separated ninja targets) builds only those and what they need:
# scripts/demo.sh builds just the binaries the demo runs.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${TANDEM_BUILD_DIR:-$root/build}"
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release "$@" > "$build.configure.log" 2>&1 ||
  { cat "$build.configure.log"; exit 1; }
grep -E "^-- tandem" "$build.configure.log" || true
jobs="${TANDEM_BUILD_JOBS:-$(nproc)}"
# shellcheck disable=SC2086  # the targets are space-separated on purpose
ninja -C "$build" -j "$jobs" ${TANDEM_BUILD_TARGETS:-}
