#!/usr/bin/env bash
# Configures and builds tandem into build/ (Release). Extra arguments go to cmake's configure step.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${TANDEM_BUILD_DIR:-$root/build}"
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release "$@" > "$build.configure.log" 2>&1 ||
  { cat "$build.configure.log"; exit 1; }
grep -E "^-- tandem" "$build.configure.log" || true
jobs="${TANDEM_BUILD_JOBS:-$(nproc)}"
ninja -C "$build" -j "$jobs"
