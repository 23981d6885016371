#!/usr/bin/env bash
# Command 2: installs what is needed, builds, and runs the whole test suite (ctest), then the
# sanitizer and fuzz stages (each skippable: TANDEM_SKIP_SANITIZE=1, TANDEM_SKIP_FUZZ=1).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
"$root/scripts/install-deps.sh"
"$root/scripts/build.sh"
build="${TANDEM_BUILD_DIR:-$root/build}"
cd "$build"
ctest --output-on-failure --timeout 900 -j "${TANDEM_TEST_JOBS:-2}" "$@"
# The sanitizer stage: the core libraries' unit tests (engine, kv, transport, router and its HTTP
# API, tokenizer) under ASan + UBSan, built with clang in build-fuzz/ (scripts/sanitize.sh core).
# TANDEM_SKIP_SANITIZE=1 skips it.
if [ "${TANDEM_SKIP_SANITIZE:-0}" != 1 ]; then
  "$root/scripts/sanitize.sh" core
fi
# The fuzz stage: each libFuzzer harness for TANDEM_FUZZ_SECONDS (default 20) over its seed corpus,
# on the same build. TANDEM_SKIP_FUZZ=1 skips it.
if [ "${TANDEM_SKIP_FUZZ:-0}" != 1 ]; then
  "$root/scripts/fuzz.sh" "${TANDEM_FUZZ_SECONDS:-20}"
fi
