#!/usr/bin/env bash
# Command 2: installs what is needed, builds, and runs the whole test suite (ctest).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
"$root/scripts/install-deps.sh"
"$root/scripts/build.sh"
build="${TANDEM_BUILD_DIR:-$root/build}"
cd "$build"
ctest --output-on-failure --timeout 900 -j "${TANDEM_TEST_JOBS:-2}" "$@"
